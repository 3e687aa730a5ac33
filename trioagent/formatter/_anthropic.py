"""Anthropic Messages API formatters.

:class:`AnthropicChatFormatter` maps each ``Msg`` to Messages-API turns.  There is no ``name``
field; text blocks are sent only when they hold non-whitespace text (the API rejects the
others); media of an assistant message (which the API does not take in assistant turns) is
moved to a ``user`` turn after that message's turns; thinking is replayed only when it carries
an Anthropic ``signature`` (or is redacted thinking); tool calls become ``tool_use`` blocks
with a parsed ``input`` object; tool results live in a ``user`` turn (consecutive results
share one) and keep their images and PDFs inline; hints become separate ``user`` turns.  A
system message is formatted like any other message (``role: "system"``);
:class:`~trioagent.model.AnthropicChatModel` lifts a leading one into the top-level
``system`` field.

:class:`AnthropicMultiAgentFormatter` collapses runs of plain messages of several speakers
into one ``user`` turn of ``name: text`` lines.  :class:`MiniMaxChatFormatter` (MiniMax's
Anthropic-compatible API) also sends ``video/*`` media.
"""

from __future__ import annotations

import logging
from typing import ClassVar

import httpx2

from .._core.json_types import JSONObject
from .._json_repair import json_loads_with_repair
from ..exception import ToolJSONDecodeError
from ..message import (
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ._base import MultiAgentFormatterBase, PerMessageFormatter

__all__ = ["AnthropicChatFormatter", "AnthropicMultiAgentFormatter", "MiniMaxChatFormatter"]

logger = logging.getLogger("trioagent.formatter")

_EMPTY_TOOL_OUTPUT = "(empty tool output)"

#: The image types the Messages API accepts.
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def _has_text(text: str) -> bool:
    """Whether a text block may be sent: the API rejects empty and whitespace-only text."""
    return bool(text.strip())


class AnthropicChatFormatter(PerMessageFormatter):
    """Formats messages for the Anthropic Messages API (``POST /v1/messages``).

    Media: images (jpeg, png, gif, webp) as ``image`` blocks and PDFs as ``document`` blocks,
    always inline base64 (remote and ``file://`` URLs are downloaded / read); other media
    (including other image types) is skipped with a warning — inside a tool result it is described in text instead
    (``[video file returned, URL: …]``).

    Differences from AgentScope, on purpose: tool-call input that cannot be repaired into
    a JSON object is sent as ``{}`` (with a warning) instead of failing every later call of
    the conversation.
    """

    default_input_types: ClassVar[tuple[str, ...]] = ("text/plain", "image/*", "application/pdf")

    async def _format_msg(
        self, msg: Msg, out: list[JSONObject], http_client: httpx2.AsyncClient | None
    ) -> None:
        content: list[JSONObject] = []
        has_tool_result = False
        assistant_media: list[DataBlock] = []  # no media in assistant turns: sent after

        def flush(role: str) -> None:
            nonlocal has_tool_result
            if content:
                out.append({"role": role, "content": list(content)})
                content.clear()
            has_tool_result = False

        for block in msg.content:
            if has_tool_result and content and not isinstance(block, ToolResultBlock):
                flush("user")  # tool results always live in a user turn
            match block:
                case TextBlock():
                    if _has_text(block.text):
                        content.append({"type": "text", "text": block.text})
                case ThinkingBlock():
                    if (thinking := self._thinking(block)) is not None:
                        content.append(thinking)
                case DataBlock() if msg.role == "assistant":
                    assistant_media.append(block)
                case DataBlock():
                    if (part := await self.format_data_block(block, http_client)) is not None:
                        content.append(part)
                case HintBlock():
                    parts = await self._hint_parts(block, http_client)
                    if parts:
                        flush("user" if has_tool_result else msg.role)
                        out.append({"role": "user", "content": parts})
                case ToolCallBlock():
                    content.append(
                        {
                            "type": "tool_use",
                            "id": block.id,
                            "name": block.name,
                            "input": _tool_input(block),
                        }
                    )
                case ToolResultBlock():
                    if content and not has_tool_result:
                        flush(msg.role)  # the assistant turn that made the calls
                    content.append(
                        {
                            "type": "tool_result",
                            "tool_use_id": block.id,
                            "content": await self._tool_result_content(block, http_client),
                        }
                    )
                    has_tool_result = True
        flush("user" if has_tool_result else msg.role)
        if assistant_media and (
            moved := await self.assistant_media_message(msg, assistant_media, http_client)
        ):
            out.append(moved)

    @staticmethod
    def _thinking(block: ThinkingBlock) -> JSONObject | None:
        redacted = block.extra.get("redacted_thinking_data")
        if redacted:
            return {"type": "redacted_thinking", "data": redacted}
        signature = block.extra.get("signature")
        if signature:
            return {"type": "thinking", "thinking": block.thinking, "signature": signature}
        return None  # unsigned reasoning (another provider's) cannot be replayed

    async def _hint_parts(
        self, block: HintBlock, http_client: httpx2.AsyncClient | None
    ) -> list[JSONObject]:
        if isinstance(block.hint, str):
            return [{"type": "text", "text": block.hint}] if _has_text(block.hint) else []
        parts: list[JSONObject] = []
        for item in block.hint:
            if isinstance(item, TextBlock):
                if _has_text(item.text):
                    parts.append({"type": "text", "text": item.text})
            elif (part := await self.format_data_block(item, http_client)) is not None:
                parts.append(part)
        return parts

    async def _tool_result_content(
        self, block: ToolResultBlock, http_client: httpx2.AsyncClient | None
    ) -> list[JSONObject]:
        parts: list[JSONObject] = []
        if isinstance(block.output, str):
            if _has_text(block.output):
                parts.append({"type": "text", "text": block.output})
        else:
            for item in block.output:
                if isinstance(item, TextBlock):
                    if _has_text(item.text):
                        parts.append({"type": "text", "text": item.text})
                    continue
                part = None
                if self.is_supported(item.source.media_type):
                    part = await self.format_data_block(item, http_client)
                parts.append(part if part is not None else _media_fallback(item))
        return parts or [{"type": "text", "text": _EMPTY_TOOL_OUTPUT}]

    async def format_data_block(
        self, block: DataBlock, http_client: httpx2.AsyncClient | None = None
    ) -> JSONObject | None:
        """An ``image`` / ``document`` block with inline base64 data, or ``None`` (skipped)."""
        media_type = block.source.media_type
        if not self.is_supported(media_type):
            logger.warning("skipping a %s data block: not in %s", media_type, self.input_types)
            return None
        kind = self._media_kind(media_type)
        if kind is None:
            logger.warning("skipping a %s data block: not supported by Anthropic", media_type)
            return None
        data = await self.load_base64(block, http_client)
        return {
            "type": kind,
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }

    @staticmethod
    def _media_kind(media_type: str) -> str | None:
        """The Anthropic content-block type for a media type (``None``: not sendable).

        Only the image types the API takes are images; any other ``image/*`` (svg, bmp,
        tiff, …) is skipped, or described in text inside a tool result.
        """
        if media_type in _IMAGE_TYPES:
            return "image"
        if media_type == "application/pdf":
            return "document"
        return None


class MiniMaxChatFormatter(AnthropicChatFormatter):
    """:class:`AnthropicChatFormatter` for MiniMax's Anthropic-compatible API: ``video/*``
    media is also accepted, as ``{"type": "video", "source": {base64}}``."""

    default_input_types: ClassVar[tuple[str, ...]] = (
        *AnthropicChatFormatter.default_input_types,
        "video/*",
    )

    @staticmethod
    def _media_kind(media_type: str) -> str | None:
        if media_type.startswith("video/"):
            return "video"
        return AnthropicChatFormatter._media_kind(media_type)


def _tool_input(block: ToolCallBlock) -> JSONObject:
    try:
        return json_loads_with_repair(block.input or "{}")
    except ToolJSONDecodeError:
        logger.warning(
            "tool call %r of %r has input that is not a JSON object; sending {}",
            block.id,
            block.name,
        )
        return {}


def _media_fallback(block: DataBlock) -> JSONObject:
    media_type = block.source.media_type
    main = media_type.split("/", 1)[0]
    if isinstance(block.source, Base64Source):
        text = f"[{main} file returned, type: {media_type}]"
    else:
        text = f"[{main} file returned, URL: {block.source.url}]"
    return {"type": "text", "text": text}


class AnthropicMultiAgentFormatter(MultiAgentFormatterBase[AnthropicChatFormatter]):
    """Formats a conversation of several named agents for the Anthropic Messages API.

    A leading system message becomes ``{"role": "system", "content": [text]}`` (lifted into
    ``system`` by the model; nothing when it has no text); each run of tool messages is
    formatted by :class:`AnthropicChatFormatter`; each run of plain messages becomes one
    ``user`` turn with a line ``name: text1 text2`` per message (its text blocks joined by
    spaces; the name defaults to ``Agent``).  The first such turn is wrapped as
    ``conversation_history_prompt + "<history>\\n" … "\\n</history>"``; later ones hold the
    raw lines, as AgentScope does.

    Media in the history (images, PDFs) is inlined where it occurs.  Unlike AgentScope,
    which puts a message's own text line *after* that message's media, the line comes
    first: ``alice: look at this`` is followed by alice's image, not preceded by it.

    Args:
        input_types: accepted media types (as :class:`AnthropicChatFormatter`).
        conversation_history_prompt: text put before the first ``<history>`` block.
    """

    default_input_types: ClassVar[tuple[str, ...]] = AnthropicChatFormatter.default_input_types

    def _chat_formatter(self) -> AnthropicChatFormatter:
        return AnthropicChatFormatter(input_types=self.input_types)

    def _system_message(self, msg: Msg) -> JSONObject | None:
        if (text := msg.get_text_content()) and _has_text(text):
            return {"role": "system", "content": [{"type": "text", "text": text}]}
        return None

    async def _history_message(
        self,
        chat: AnthropicChatFormatter,
        group: list[Msg],
        is_first: bool,
        http_client: httpx2.AsyncClient | None,
    ) -> JSONObject | None:
        content: list[JSONObject] = []
        lines: list[str] = []

        def flush_lines() -> None:
            if lines:
                content.append({"type": "text", "text": "\n".join(lines)})
                lines.clear()

        for msg in group:
            texts = [b.text for b in msg.content if isinstance(b, TextBlock)]
            if texts:
                lines.append(f"{msg.name or 'Agent'}: {' '.join(texts)}")
            for block in msg.content:
                if isinstance(block, DataBlock):
                    part = await chat.format_data_block(block, http_client)
                    if part is not None:
                        flush_lines()
                        content.append(part)
        flush_lines()
        if not content:
            return None
        if is_first:
            head = self.conversation_history_prompt + "<history>\n"
            if content[0]["type"] == "text":
                content[0]["text"] = head + content[0]["text"]
            else:
                content.insert(0, {"type": "text", "text": head})
            if content[-1]["type"] == "text":
                content[-1]["text"] += "\n</history>"
            else:
                content.append({"type": "text", "text": "</history>"})
        return {"role": "user", "content": content}

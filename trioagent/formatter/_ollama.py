"""Ollama chat formatters.

:class:`OllamaChatFormatter` maps each ``Msg`` to Ollama ``/api/chat`` messages: the content is
a **string** (text blocks joined with ``"\\n"``), images go to an ``images`` list of raw base64
strings, every tool call becomes its own assistant message (``tool_calls`` with the arguments
as a JSON object, no call id), a tool result becomes ``{"role": "tool", "tool_name", ...}``,
hints become user messages and thinking is dropped.  :class:`OllamaMultiAgentFormatter`
collapses runs of plain messages of several speakers into one user message.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import ClassVar

import httpx2

from .._core.json_types import JSONObject
from .._json_repair import json_loads_with_repair
from ..exception import ToolJSONDecodeError
from ..message import (
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ._base import (
    DEFAULT_CONVERSATION_HISTORY_PROMPT,
    FormatterBase,
    MultiAgentFormatterBase,
    PerMessageFormatter,
)

__all__ = [
    "DEFAULT_CONVERSATION_HISTORY_PROMPT",
    "OllamaChatFormatter",
    "OllamaMultiAgentFormatter",
]

logger = logging.getLogger("trioagent.formatter")


class _OllamaFormatterBase(FormatterBase):
    """Images as the raw base64 strings Ollama expects (no ``data:`` prefix)."""

    default_input_types: ClassVar[tuple[str, ...]] = ("text/plain", "image/*")

    async def format_image(
        self, block: DataBlock, http_client: httpx2.AsyncClient | None = None
    ) -> str | None:
        """The base64 data of an image block, or ``None`` when it is skipped.

        Remote URLs are downloaded, ``file://`` URLs read; media outside ``input_types`` and
        anything that is not an image (Ollama accepts only images) is skipped with a warning.
        """
        media_type = block.source.media_type
        if not self.is_supported(media_type):
            logger.warning("skipping a %s data block: not in %s", media_type, self.input_types)
            return None
        if not media_type.startswith("image/"):
            logger.warning("skipping a %s data block: Ollama accepts only images", media_type)
            return None
        return await self.load_base64(block, http_client)


def _arguments(block: ToolCallBlock) -> JSONObject:
    """A tool call's arguments as the JSON object Ollama expects (truncated JSON repaired).

    Unlike AgentScope (which raises), arguments that cannot be repaired are sent as ``{}``
    with a warning, so one malformed call in the history does not make every later request
    of the conversation fail.
    """

    try:
        return json_loads_with_repair(block.input or "{}")
    except ToolJSONDecodeError:
        logger.warning(
            "tool call %r has arguments that are not a JSON object; sending {}", block.id
        )
        return {}


class OllamaChatFormatter(PerMessageFormatter, _OllamaFormatterBase):
    """Formats messages for Ollama's ``POST /api/chat``.

    Per message: text blocks are collected into one string content and images into
    ``images``; a tool call immediately emits ``{"role", "content": <pending text or "">,
    "tool_calls": [{"function": {"name", "arguments": {...}}}]}`` (one message per call,
    consuming the pending text and images); a tool result flushes the pending text and emits
    ``{"role": "tool", "tool_name", "content"}`` — media in a result is announced in its text
    and sent in a following user message once the run of tool results ends; a hint flushes
    and becomes a user message; thinking is dropped.
    """

    async def _format_msg(
        self, msg: Msg, out: list[JSONObject], http_client: httpx2.AsyncClient | None
    ) -> None:
        texts: list[str] = []
        images: list[str] = []
        pending_media: list[JSONObject] = []

        def take() -> tuple[str, list[str]]:
            content, pictures = "\n".join(texts), list(images)
            texts.clear()
            images.clear()
            return content, pictures

        def flush() -> None:
            if texts or images:
                content, pictures = take()
                out.append(_message(msg.role, content, pictures))

        for block in msg.content:
            if pending_media and not isinstance(block, ToolResultBlock):
                out.extend(pending_media)
                pending_media.clear()
            match block:
                case TextBlock():
                    texts.append(block.text)
                case DataBlock():
                    if (image := await self.format_image(block, http_client)) is not None:
                        images.append(image)
                case HintBlock():
                    flush()
                    if (hint := await self._hint_message(block, http_client)) is not None:
                        out.append(hint)
                case ToolCallBlock():
                    content, pictures = take()
                    message: JSONObject = {
                        "role": msg.role,
                        "content": content,
                        "tool_calls": [
                            {"function": {"name": block.name, "arguments": _arguments(block)}}
                        ],
                    }
                    if pictures:
                        message["images"] = pictures
                    out.append(message)
                case ToolResultBlock():
                    flush()
                    text, promoted = await self.convert_tool_result_to_string(block.output)
                    out.append({"role": "tool", "tool_name": block.name, "content": text})
                    if promoted:
                        pending_media.append(
                            await self._promoted_message(promoted, text, http_client)
                        )
                case ThinkingBlock():
                    pass  # reasoning is not replayed to Ollama
        out.extend(pending_media)
        flush()

    async def _hint_message(
        self, block: HintBlock, http_client: httpx2.AsyncClient | None
    ) -> JSONObject | None:
        if isinstance(block.hint, str):
            return {"role": "user", "content": block.hint}
        texts: list[str] = []
        images: list[str] = []
        for item in block.hint:
            if isinstance(item, TextBlock):
                texts.append(item.text)
            elif (image := await self.format_image(item, http_client)) is not None:
                images.append(image)
        if not texts and not images:
            return None
        return _message("user", "\n".join(texts), images)

    async def _promoted_message(
        self,
        promoted: Sequence[TextBlock | DataBlock],
        fallback: str,
        http_client: httpx2.AsyncClient | None,
    ) -> JSONObject:
        texts = [b.text for b in promoted if isinstance(b, TextBlock)]
        images: list[str] = []
        for item in promoted:
            if (
                isinstance(item, DataBlock)
                and (image := await self.format_image(item, http_client)) is not None
            ):
                images.append(image)
        return _message("user", "\n".join(texts) if texts else fallback, images)


def _message(role: str, content: str, images: list[str]) -> JSONObject:
    message: JSONObject = {"role": role, "content": content}
    if images:
        message["images"] = images
    return message


class OllamaMultiAgentFormatter(MultiAgentFormatterBase[OllamaChatFormatter], _OllamaFormatterBase):
    """Formats a conversation of several named agents for Ollama.

    A leading system message becomes ``{"role": "system", "content": str}``; each run of tool
    messages is formatted by :class:`OllamaChatFormatter`; each run of plain messages becomes
    one user message whose content lists, per message, ``name:`` and then each text block on
    its own line, with the run's images in ``images``.  Only the first such message is wrapped
    in ``<history>`` tags after ``conversation_history_prompt``; later ones carry the bare
    lines (as AgentScope does).

    Args:
        input_types: accepted media types (as :class:`OllamaChatFormatter`).
        conversation_history_prompt: text put before the first ``<history>`` block.
    """

    def _chat_formatter(self) -> OllamaChatFormatter:
        return OllamaChatFormatter(input_types=self.input_types)

    async def _history_message(
        self,
        chat: OllamaChatFormatter,
        group: list[Msg],
        is_first: bool,
        http_client: httpx2.AsyncClient | None,
    ) -> JSONObject | None:
        lines: list[str] = []
        images: list[str] = []
        for msg in group:
            parts = [f"{msg.name}:"] if msg.name else []
            for block in msg.content:
                if isinstance(block, TextBlock):
                    parts.append(block.text)
                elif (
                    isinstance(block, DataBlock)
                    and (image := await self.format_image(block, http_client)) is not None
                ):
                    images.append(image)
            if parts:
                lines.append("\n".join(parts))
        if not lines:
            return None  # as AgentScope does: images without any text are not sent
        text = "\n".join(lines)
        if is_first:
            text = self.conversation_history_prompt + "<history>\n" + text + "\n</history>"
        return _message("user", text, images)

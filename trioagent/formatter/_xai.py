"""xAI (Grok) formatters.

AgentScope formats for xAI's gRPC SDK (``xai_sdk.chat`` proto messages); trioagent talks to
xAI's OpenAI-compatible REST API (``POST /v1/chat/completions``), so the same decisions are
written out as chat-completions JSON.  The mapping, proto → JSON:

==========================================  ==================================================
AgentScope (proto)                           trioagent (REST JSON)
==========================================  ==================================================
``system(text)`` (text blocks joined ``\\n``)  ``{"role": "system", "content": text}``
``user(*texts, image(url))``                 ``{"role": "user", "content": [{"type": "text",
                                             "text"}, {"type": "image_url", "image_url":
                                             {"url"}}]}`` (URL as is, base64 / ``file://`` as
                                             a data URI)
``assistant(text)`` (texts joined ``\\n``)     ``{"role": "assistant", "content": text}``
assistant proto with ``tool_calls``          ``{"role": "assistant", "content": text or "",
(``CLIENT_SIDE_TOOL``, id, name, args)       "tool_calls": [{"id", "type": "function",
                                             "function": {"name", "arguments"}}]}``
``tool_result(text, tool_call_id=id)``       ``{"role": "tool", "tool_call_id": id,
                                             "content": text}``
==========================================  ==================================================

Choices where AgentScope gives no JSON answer: an assistant message with tool calls and no
text gets ``"content": ""`` (xAI rejects ``null`` there with "Each message must have at least
one content element"); images in a tool result are announced in its text and sent in a
following user message once the run of tool results ends (tool messages must directly follow
the assistant message that called them); thinking is dropped.
"""

from __future__ import annotations

import logging
from typing import ClassVar

import httpx2

from .._core.json_types import JSONObject
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
from ._base import (
    DEFAULT_CONVERSATION_HISTORY_PROMPT,
    FormatterBase,
    MultiAgentFormatterBase,
    PerMessageFormatter,
)

__all__ = ["DEFAULT_CONVERSATION_HISTORY_PROMPT", "XAIChatFormatter", "XAIMultiAgentFormatter"]

logger = logging.getLogger("trioagent.formatter")


class _XAIFormatterBase(FormatterBase):
    """Shared by the xAI formatters: images as ``image_url`` parts."""

    default_input_types: ClassVar[tuple[str, ...]] = ("text/plain", "image/jpeg", "image/png")

    async def format_data_block(
        self, block: DataBlock, http_client: httpx2.AsyncClient | None = None
    ) -> JSONObject | None:
        """An ``image_url`` part, or ``None`` when the block is skipped (with a warning).

        Remote URLs are passed as is; base64 data and ``file://`` files become data URIs.
        Only images within ``input_types`` are sent (xAI accepts JPEG and PNG).
        """
        media_type = block.source.media_type
        if not media_type.startswith("image/") or not self.is_supported(media_type):
            logger.warning(
                "skipping a %s data block: xAI accepts only images in %s",
                media_type,
                self.input_types,
            )
            return None
        source = block.source
        if isinstance(source, Base64Source):
            url = f"data:{media_type};base64,{source.data}"
        elif source.url.startswith("file://"):
            url = f"data:{media_type};base64,{await self.load_base64(block, http_client)}"
        else:
            url = source.url
        return {"type": "image_url", "image_url": {"url": url}}


class XAIChatFormatter(PerMessageFormatter, _XAIFormatterBase):
    """Formats messages for xAI's chat completions (see the module docstring for the mapping).

    System messages become one string; user messages a list of text and ``image_url`` parts
    (a hint splits them into separate user messages); an assistant message's texts are
    joined with ``"\\n"`` into one string, sent together with the tool calls that precede a
    tool result, a hint or the end of the message; each tool result becomes a ``tool``
    message.
    """

    async def _format_msg(
        self, msg: Msg, out: list[JSONObject], http_client: httpx2.AsyncClient | None
    ) -> None:
        if msg.role == "system":
            texts = [b.text for b in msg.content if isinstance(b, TextBlock)]
            out.append({"role": "system", "content": "\n".join(texts)})
        elif msg.role == "user":
            await self._format_user(msg, out, http_client)
        else:
            await self._format_assistant(msg, out, http_client)

    async def _format_user(
        self, msg: Msg, out: list[JSONObject], http_client: httpx2.AsyncClient | None
    ) -> None:
        parts: list[JSONObject] = []
        for block in msg.content:
            match block:
                case TextBlock():
                    parts.append({"type": "text", "text": block.text})
                case DataBlock():
                    if (part := await self.format_data_block(block, http_client)) is not None:
                        parts.append(part)
                case HintBlock():
                    if parts:
                        out.append({"role": "user", "content": parts})
                        parts = []
                    if (hint := await self.hint_message(block, http_client)) is not None:
                        out.append(hint)
                case _:
                    pass  # a user message holds only text, data and hints
        if parts:
            out.append({"role": "user", "content": parts})

    async def _format_assistant(
        self, msg: Msg, out: list[JSONObject], http_client: httpx2.AsyncClient | None
    ) -> None:
        texts: list[str] = []
        calls: list[JSONObject] = []
        pending_media: list[JSONObject] = []

        def flush() -> None:
            text = "\n".join(texts)
            if calls:
                out.append({"role": "assistant", "content": text, "tool_calls": list(calls)})
            elif texts and text:
                out.append({"role": "assistant", "content": text})
            texts.clear()
            calls.clear()

        for block in msg.content:
            if pending_media and not isinstance(block, ToolResultBlock):
                out.extend(pending_media)
                pending_media.clear()
            match block:
                case TextBlock():
                    texts.append(block.text)
                case ToolCallBlock():
                    calls.append(
                        {
                            "id": block.id,
                            "type": "function",
                            "function": {"name": block.name, "arguments": block.input},
                        }
                    )
                case ToolResultBlock():
                    flush()
                    text, promoted = await self.convert_tool_result_to_string(block.output)
                    out.append({"role": "tool", "tool_call_id": block.id, "content": text})
                    if promoted:
                        parts = await self.content_parts(promoted, http_client)
                        pending_media.append({"role": "user", "content": parts})
                case HintBlock():
                    flush()
                    if (hint := await self.hint_message(block, http_client)) is not None:
                        out.append(hint)
                case ThinkingBlock():
                    pass  # reasoning is not replayed to xAI
                case DataBlock():
                    logger.warning("skipping a data block in an assistant message for xAI")
        out.extend(pending_media)
        flush()


class XAIMultiAgentFormatter(MultiAgentFormatterBase[XAIChatFormatter], _XAIFormatterBase):
    """Formats a conversation of several named agents for xAI.

    A leading system message becomes ``{"role": "system", "content": str}``; each run of tool
    messages is formatted by :class:`XAIChatFormatter`; each run of plain messages becomes one
    user message: a text part with one ``name: text1 text2`` line per message inside
    ``<history>`` tags (the first one preceded by ``conversation_history_prompt``), followed
    by the run's images.  Unlike the other multi-agent formatters, a run without text (images
    only) does not use up the prompt: the next run with text still gets it.

    Args:
        input_types: accepted media types (as :class:`XAIChatFormatter`).
        conversation_history_prompt: text put before the first ``<history>`` block.
    """

    def _chat_formatter(self) -> XAIChatFormatter:
        return XAIChatFormatter(input_types=self.input_types)

    async def format(
        self, msgs: list[Msg], *, http_client: httpx2.AsyncClient | None = None
    ) -> list[JSONObject]:
        self.assert_list_of_msgs(msgs)
        chat = self._chat_formatter()
        out: list[JSONObject] = []
        if msgs and msgs[0].role == "system":
            out.append({"role": "system", "content": msgs[0].get_text_content() or ""})
            msgs = msgs[1:]
        is_first = True
        for kind, group in self.group_messages(msgs):
            if kind == "tool_sequence":
                out.extend(await chat.format(group, http_client=http_client))
                continue
            lines: list[str] = []
            for msg in group:
                words = [f"{msg.name}:"] if msg.name else []
                words.extend(b.text for b in msg.content if isinstance(b, TextBlock))
                if words:
                    lines.append(" ".join(words))
            images = [b for msg in group for b in msg.content if isinstance(b, DataBlock)]
            parts = await self.content_parts(images, http_client)
            if lines:
                prompt = self.conversation_history_prompt if is_first else ""
                text = prompt + "<history>\n" + "\n".join(lines) + "\n</history>"
                parts.insert(0, {"type": "text", "text": text})
            if parts:
                out.append({"role": "user", "content": parts})
                if lines:
                    is_first = False
        return out

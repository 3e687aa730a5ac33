"""DeepSeek formatters.

:class:`DeepSeekChatFormatter` is :class:`~trioagent.formatter.OpenAIChatFormatter` with: no
``name`` field; ``content`` a plain string when every part is text (the texts joined by
newlines), the part list otherwise, ``""`` when empty (``null`` next to tool calls); every
assistant message carrying ``reasoning_content`` (its thinking, or ``""``: DeepSeek's thinking
mode wants it back); text-only input by default, and media only in user messages.
"""

from __future__ import annotations

import logging
from typing import ClassVar

import attrs
import httpx2

from .._core.json_types import JSONObject
from ..message import DataBlock, HintBlock, Msg, TextBlock
from ._openai import OpenAIChatFormatter, OpenAIMultiAgentFormatter, text_or_parts

__all__ = ["DeepSeekChatFormatter", "DeepSeekMultiAgentFormatter"]

logger = logging.getLogger("trioagent.formatter")


class DeepSeekChatFormatter(OpenAIChatFormatter):
    """Formats messages for DeepSeek's Chat Completions (``POST /chat/completions``).

    ``input_types`` defaults to text only; with e.g. ``"image/*"`` added, images in *user*
    messages are sent as ``image_url`` parts (media in assistant messages is dropped with a
    warning).  Media a hint cannot carry is replaced by a ``[<type> attached, not supported by
    this provider]`` note.
    """

    default_input_types: ClassVar[tuple[str, ...]] = ("text/plain",)
    promoted_media_name: ClassVar[str | None] = None

    def _replays_thinking(self) -> bool:
        return True

    async def _format_msg(
        self, msg: Msg, out: list[JSONObject], http_client: httpx2.AsyncClient | None
    ) -> None:
        if msg.role == "assistant" and any(isinstance(b, DataBlock) for b in msg.content):
            logger.warning("dropping data blocks of an assistant message: DeepSeek takes none")
            msg = attrs.evolve(
                msg, content=[b for b in msg.content if not isinstance(b, DataBlock)]
            )
        await super()._format_msg(msg, out, http_client)

    def _message(
        self,
        msg: Msg,
        content: list[JSONObject],
        tool_calls: list[JSONObject],
        thinking: list[str],
    ) -> JSONObject:
        message: JSONObject = {
            "role": msg.role,
            "content": text_or_parts(content, empty=None if tool_calls else ""),
        }
        if msg.role == "assistant":
            message["reasoning_content"] = "\n".join(thinking)
        if tool_calls:
            message["tool_calls"] = tool_calls
        return message

    async def hint_message(
        self, block: HintBlock, http_client: httpx2.AsyncClient | None
    ) -> JSONObject | None:
        if isinstance(block.hint, str):
            return {"role": "user", "content": block.hint}
        parts: list[JSONObject] = []
        for item in block.hint:
            if isinstance(item, TextBlock):
                parts.append({"type": "text", "text": item.text})
                continue
            media_type = item.source.media_type
            part = None
            if self.is_supported(media_type):
                part = await self.format_data_block(item, http_client)
            parts.append(
                part
                or {
                    "type": "text",
                    "text": f"[{media_type} attached, not supported by this provider]",
                }
            )
        return {"role": "user", "content": text_or_parts(parts)} if parts else None

    async def _promoted_message(
        self, promoted: list[TextBlock | DataBlock], http_client: httpx2.AsyncClient | None
    ) -> JSONObject:
        return {
            "role": "user",
            "content": text_or_parts(await self.content_parts(promoted, http_client)),
        }


class DeepSeekMultiAgentFormatter(OpenAIMultiAgentFormatter):
    """Formats a conversation of several named agents for DeepSeek.

    A leading system message becomes a string system message; runs of tool messages are
    formatted by :class:`DeepSeekChatFormatter`; each run of plain messages becomes one user
    message whose text holds ``name: text`` lines inside ``<history>`` tags (the first one
    preceded by ``conversation_history_prompt``).  Supported images stay where they were said:
    ``name: `` then the image part, then the text goes on — the content is a string unless an
    image was added.
    """

    default_input_types: ClassVar[tuple[str, ...]] = DeepSeekChatFormatter.default_input_types

    def _chat_formatter(self) -> DeepSeekChatFormatter:
        return DeepSeekChatFormatter(input_types=self.input_types)

    async def _history_message(
        self,
        chat: OpenAIChatFormatter,
        group: list[Msg],
        is_first: bool,
        http_client: httpx2.AsyncClient | None,
    ) -> JSONObject | None:
        prompt = self.conversation_history_prompt if is_first else ""
        text = prompt + "<history>\n"
        parts: list[JSONObject] = []
        produced = False
        for msg in group:
            for block in msg.content:
                if isinstance(block, TextBlock):
                    text += f"{msg.name}: {block.text}\n"
                    produced = True
                elif isinstance(block, DataBlock):
                    part = await chat.format_data_block(block, http_client)
                    if part is None:
                        continue
                    parts.extend([{"type": "text", "text": f"{text}{msg.name}: "}, part])
                    text = "\n"
                    produced = True
        if not produced:
            return None
        text += "</history>"
        if not parts:
            return {"role": "user", "content": text}
        parts.append({"type": "text", "text": text})
        return {"role": "user", "content": parts}

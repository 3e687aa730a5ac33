"""Moonshot (Kimi) formatters.

:class:`MoonshotChatFormatter` is :class:`~trioagent.formatter.OpenAIChatFormatter` (``name``
fields kept, made to fit the API's pattern; promoted media in a user message named ``system-reminder``) with: images always
inlined as base64 data URIs (remote URLs downloaded), video as a ``video_url`` data URI, no
PDF, and every assistant message carrying ``reasoning_content`` (its thinking joined by
newlines, or ``""``), which Kimi's thinking models expect back.
"""

from __future__ import annotations

from typing import ClassVar

import httpx2

from .._core.json_types import JSONObject
from ..message import Base64Source, DataBlock, Msg
from ._openai import OpenAIChatFormatter, OpenAIMultiAgentFormatter, api_name

__all__ = ["MoonshotChatFormatter", "MoonshotMultiAgentFormatter"]


class MoonshotChatFormatter(OpenAIChatFormatter):
    """Formats messages for Moonshot's Chat Completions (``POST /v1/chat/completions``).

    Media: images as ``image_url`` with a data URI (remote images are downloaded), video as
    ``video_url`` with a data URI, audio as ``input_audio`` (wav/mp3, as OpenAI); other media
    is skipped with a warning.
    """

    default_input_types: ClassVar[tuple[str, ...]] = (
        "text/plain",
        "image/*",
        "audio/*",
        "video/*",
    )

    def _replays_thinking(self) -> bool:
        return True

    def _message(
        self,
        msg: Msg,
        content: list[JSONObject],
        tool_calls: list[JSONObject],
        thinking: list[str],
    ) -> JSONObject:
        message: JSONObject = {"role": msg.role}
        if (name := api_name(msg.name)) is not None:
            message["name"] = name
        message["content"] = content or None
        if msg.role == "assistant":
            message["reasoning_content"] = "\n".join(thinking)
        if tool_calls:
            message["tool_calls"] = tool_calls
        return message

    async def format_data_block(
        self, block: DataBlock, http_client: httpx2.AsyncClient | None = None
    ) -> JSONObject | None:
        """One content part for a data block, or ``None`` when it is skipped."""
        media_type = block.source.media_type
        main = media_type.split("/", 1)[0]
        if self.is_supported(media_type) and main in ("image", "video"):
            url = await self._data_uri(block, http_client)
            key = "image_url" if main == "image" else "video_url"
            return {"type": key, key: {"url": url}}
        return await super().format_data_block(block, http_client)

    async def _data_uri(self, block: DataBlock, http_client: httpx2.AsyncClient | None) -> str:
        source = block.source
        if not isinstance(source, Base64Source) and source.url.startswith("data:"):
            return source.url
        data = await self.load_base64(block, http_client)
        return f"data:{source.media_type};base64,{data}"


class MoonshotMultiAgentFormatter(OpenAIMultiAgentFormatter):
    """Formats a conversation of several named agents for Moonshot.

    The algorithm of :class:`~trioagent.formatter.OpenAIMultiAgentFormatter` (a string system
    message, ``<history>`` user messages with the media after the text); runs of tool messages
    are formatted by :class:`MoonshotChatFormatter`.
    """

    default_input_types: ClassVar[tuple[str, ...]] = MoonshotChatFormatter.default_input_types

    def _chat_formatter(self) -> MoonshotChatFormatter:
        return MoonshotChatFormatter(input_types=self.input_types)

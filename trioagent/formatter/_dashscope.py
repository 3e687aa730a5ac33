"""DashScope (Qwen) formatters, OpenAI-compatible mode.

:class:`DashScopeChatFormatter` is :class:`~trioagent.formatter.OpenAIChatFormatter` with:
no ``name`` field on any message (the promoted-media user message included); video as
``video_url``; audio as ``input_audio`` whose ``data`` is the remote URL or a
``data:;base64,`` URI and whose ``format`` is the media subtype (``mpeg`` → ``mp3``); no PDF;
and thinking replayed as ``reasoning_content`` only when ``"application/x-thinking"`` is in
``input_types`` (a model card sets it for models that accept their reasoning back).
"""

from __future__ import annotations

import logging
from typing import ClassVar

import httpx2

from .._core.json_types import JSONObject
from ..message import Base64Source, DataBlock, Msg
from ._openai import OpenAIChatFormatter, OpenAIMultiAgentFormatter

__all__ = ["DashScopeChatFormatter", "DashScopeMultiAgentFormatter"]

logger = logging.getLogger("trioagent.formatter")

THINKING_INPUT = "application/x-thinking"


class DashScopeChatFormatter(OpenAIChatFormatter):
    """Formats messages for DashScope's OpenAI-compatible Chat Completions.

    Media: images as ``image_url`` (remote URLs passed through, base64 and ``file://`` as a data
    URI), audio as ``input_audio`` (remote URL passed through, else ``data:;base64,…``), video
    as ``video_url`` (remote URL passed through, else a data URI); other media is skipped with a
    warning.  Add ``"application/x-thinking"`` to ``input_types`` to send thinking back as
    ``reasoning_content`` on assistant messages.
    """

    default_input_types: ClassVar[tuple[str, ...]] = (
        "text/plain",
        "image/*",
        "audio/*",
        "video/*",
    )
    promoted_media_name: ClassVar[str | None] = None

    def _replays_thinking(self) -> bool:
        return THINKING_INPUT in self.input_types

    def _message(
        self,
        msg: Msg,
        content: list[JSONObject],
        tool_calls: list[JSONObject],
        thinking: list[str],
    ) -> JSONObject:
        message: JSONObject = {"role": msg.role, "content": content or None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        if thinking:
            message["reasoning_content"] = "\n".join(thinking)
        return message

    def can_promote(self, media_type: str) -> bool:
        # DashScope takes any audio format (unlike OpenAI's wav/mp3).
        return self.is_supported(media_type)

    async def format_data_block(
        self, block: DataBlock, http_client: httpx2.AsyncClient | None = None
    ) -> JSONObject | None:
        """One content part for a data block, or ``None`` when it is skipped."""
        media_type = block.source.media_type
        if not self.is_supported(media_type):
            logger.warning("skipping a %s data block: not in %s", media_type, self.input_types)
            return None
        main, _, subtype = media_type.partition("/")
        if main == "image":
            return {"type": "image_url", "image_url": {"url": await self._image_url(block)}}
        if main == "audio":
            data = await self._media_url(block, "data:;base64,")
            fmt = "mp3" if subtype == "mpeg" else subtype
            return {"type": "input_audio", "input_audio": {"data": data, "format": fmt}}
        if main == "video":
            url = await self._media_url(block, f"data:{media_type};base64,")
            return {"type": "video_url", "video_url": {"url": url}}
        logger.warning("skipping a %s data block: not supported by DashScope", media_type)
        return None

    async def _media_url(self, block: DataBlock, data_prefix: str) -> str:
        """A remote URL as-is; base64 data and ``file://`` files inlined after ``data_prefix``."""
        source = block.source
        if isinstance(source, Base64Source):
            return data_prefix + source.data
        if source.url.startswith("file://"):
            return data_prefix + await self.load_base64(block)
        return source.url


class DashScopeMultiAgentFormatter(OpenAIMultiAgentFormatter):
    """Formats a conversation of several named agents for DashScope.

    The algorithm of :class:`~trioagent.formatter.OpenAIMultiAgentFormatter` (a string system
    message, ``<history>`` user messages with the media after the text); runs of tool messages
    are formatted by :class:`DashScopeChatFormatter`.
    """

    default_input_types: ClassVar[tuple[str, ...]] = DashScopeChatFormatter.default_input_types

    def _chat_formatter(self) -> DashScopeChatFormatter:
        return DashScopeChatFormatter(input_types=self.input_types)

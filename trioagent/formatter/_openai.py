"""OpenAI Chat Completions formatters.

:class:`OpenAIChatFormatter` maps each ``Msg`` to chat messages: text and media parts, tool
calls on the assistant message, one ``tool`` message per tool result (media in a result is
promoted to a following ``user`` message named ``system-reminder``), hints as separate user
messages, media of an assistant message (assistant turns take none) as a user message after
that message's turns; thinking is dropped.  ``name`` is the speaker's name made to fit the
API's pattern (see :func:`api_name`).  With ``text_as_string=True`` a message of text only
(a hint too) carries its text as one string, as servers whose chat template concatenates
``content`` need it.  :class:`OpenAIMultiAgentFormatter` collapses runs of
plain messages of several speakers into one ``<history>`` user message.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
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
    MultiAgentFormatterBase,
    PerMessageFormatter,
)

__all__ = [
    "DEFAULT_CONVERSATION_HISTORY_PROMPT",
    "OpenAIChatFormatter",
    "OpenAIMultiAgentFormatter",
]

logger = logging.getLogger("trioagent.formatter")

_AUDIO_FORMATS = {"audio/wav": "wav", "audio/mp3": "mp3", "audio/mpeg": "mp3"}

_NAME_OK = re.compile(r"[A-Za-z0-9_-]+")
_NAME_BAD_RUN = re.compile(r"[^A-Za-z0-9_-]+")


def api_name(name: str | None) -> str | None:
    """A speaker name as OpenAI-style APIs accept it in a message's ``name``
    (``[A-Za-z0-9_-]+``): a name that already matches is kept as is; otherwise every run of
    other characters becomes one ``_`` (leading / trailing ones dropped).  ``None`` when
    nothing is left (the message is then sent without ``name``)."""
    if not name:
        return None
    if _NAME_OK.fullmatch(name):
        return name
    return _NAME_BAD_RUN.sub("_", name).strip("_") or None


def text_or_parts(
    parts: list[JSONObject], *, empty: str | None = ""
) -> str | list[JSONObject] | None:
    """Content parts as a plain string when every part is text (the texts joined by
    newlines), else the parts themselves; ``empty`` when there are none."""
    if not parts:
        return empty
    if all(p.get("type") == "text" for p in parts):
        return "\n".join(str(p["text"]) for p in parts)
    return parts


class OpenAIChatFormatter(PerMessageFormatter):
    """Formats messages for OpenAI Chat Completions (``POST /chat/completions``).

    Media: images as ``image_url`` (remote URLs passed through, base64 and ``file://`` as a
    data URI), audio as ``input_audio`` (wav/mp3; remote audio downloaded), PDF as an inline
    ``file`` part; other media is skipped with a warning.

    Args:
        input_types: the accepted media types (default: text, images, audio and PDF).
        text_as_string: send the ``content`` of a message that holds only text (and of a
            text hint) as one string, its texts joined by newlines, and an empty ``content``
            as ``""``, instead of a list of parts.  OpenAI takes both; local servers whose
            chat template concatenates ``content`` as a string (llama.cpp with many GGUF
            templates) fail on a list.  Messages with media keep their list of parts.
    """

    default_input_types: ClassVar[tuple[str, ...]] = (
        "text/plain",
        "image/*",
        "audio/*",
        "application/pdf",
    )
    #: ``name`` of the user message that carries media promoted from tool results.
    promoted_media_name: ClassVar[str | None] = "system-reminder"

    def __init__(
        self, input_types: Sequence[str] | None = None, *, text_as_string: bool = False
    ) -> None:
        super().__init__(input_types)
        self.text_as_string = text_as_string

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(input_types={self.input_types!r}, "
            f"text_as_string={self.text_as_string!r})"
        )

    def _content(self, parts: list[JSONObject]) -> str | list[JSONObject] | None:
        """A message's ``content``: the parts (``None`` when empty), or with
        ``text_as_string`` the joined text when every part is text (``""`` when empty)."""
        if self.text_as_string:
            return text_or_parts(parts)
        return parts or None

    async def hint_message(
        self, block: HintBlock, http_client: httpx2.AsyncClient | None
    ) -> JSONObject | None:
        message = await super().hint_message(block, http_client)
        if message is not None and self.text_as_string:
            message["content"] = text_or_parts(message["content"])
        return message

    async def _format_msg(
        self, msg: Msg, out: list[JSONObject], http_client: httpx2.AsyncClient | None
    ) -> None:
        content: list[JSONObject] = []
        tool_calls: list[JSONObject] = []
        thinking: list[str] = []  # only filled when the subclass replays reasoning
        pending_media: list[JSONObject] = []
        assistant_media: list[DataBlock] = []  # no media in assistant turns: sent after
        replays_thinking = self._replays_thinking()

        def flush() -> None:
            if content or tool_calls or thinking:
                out.append(self._message(msg, list(content), list(tool_calls), list(thinking)))
                content.clear()
                tool_calls.clear()
                thinking.clear()

        for block in msg.content:
            if pending_media and not isinstance(block, ToolResultBlock):
                out.extend(pending_media)
                pending_media.clear()
            match block:
                case TextBlock():
                    content.append({"type": "text", "text": block.text})
                case DataBlock() if msg.role == "assistant":
                    assistant_media.append(block)
                case DataBlock():
                    if (part := await self.format_data_block(block, http_client)) is not None:
                        content.append(part)
                case HintBlock():
                    flush()
                    if (hint := await self.hint_message(block, http_client)) is not None:
                        out.append(hint)
                case ToolCallBlock():
                    tool_calls.append(
                        {
                            "id": block.id,
                            "type": "function",
                            "function": {"name": block.name, "arguments": block.input},
                        }
                    )
                case ToolResultBlock():
                    flush()
                    text, promoted = await self.convert_tool_result_to_string(block.output)
                    out.append(
                        {
                            "role": "tool",
                            "tool_call_id": block.id,
                            "content": text,
                            "name": block.name,
                        }
                    )
                    if promoted:
                        pending_media.append(await self._promoted_message(promoted, http_client))
                case ThinkingBlock():
                    # Not replayed to OpenAI chat models; providers that take reasoning back
                    # (``reasoning_content``) override ``_replays_thinking``.
                    if replays_thinking and block.thinking:
                        thinking.append(block.thinking)
        out.extend(pending_media)
        flush()
        if assistant_media and (
            moved := await self.assistant_media_message(msg, assistant_media, http_client)
        ):
            out.append(moved)

    def _replays_thinking(self) -> bool:
        """Whether thinking blocks are collected and passed to :meth:`_message`."""
        return False

    def _message(
        self,
        msg: Msg,
        content: list[JSONObject],
        tool_calls: list[JSONObject],
        thinking: list[str],
    ) -> JSONObject:
        """One message from a (part of a) ``Msg``: its parts, tool calls and the non-empty
        thinking texts (empty unless :meth:`_replays_thinking`)."""
        message: JSONObject = {"role": msg.role}
        if (name := api_name(msg.name)) is not None:
            message["name"] = name
        message["content"] = self._content(content)
        if tool_calls:
            message["tool_calls"] = tool_calls
        return message

    async def _promoted_message(
        self, promoted: list[TextBlock | DataBlock], http_client: httpx2.AsyncClient | None
    ) -> JSONObject:
        message: JSONObject = {"role": "user"}
        if self.promoted_media_name is not None:
            message["name"] = self.promoted_media_name
        message["content"] = self._content(await self.content_parts(promoted, http_client))
        return message

    def can_promote(self, media_type: str) -> bool:
        """As :meth:`FormatterBase.can_promote`, but audio other than wav/mp3 in a tool
        result is described in text (saved to a file) instead of failing the request."""
        if media_type.startswith("audio/") and media_type not in _AUDIO_FORMATS:
            return False
        return super().can_promote(media_type)

    async def format_data_block(
        self, block: DataBlock, http_client: httpx2.AsyncClient | None = None
    ) -> JSONObject | None:
        """One content part for a data block, or ``None`` when it is skipped.

        Raises:
            TypeError: audio in a format other than wav/mp3 (in a message; inside a tool
                result such audio is described in text, see :meth:`can_promote`).
        """
        media_type = block.source.media_type
        if not self.is_supported(media_type):
            logger.warning("skipping a %s data block: not in %s", media_type, self.input_types)
            return None
        main = media_type.split("/", 1)[0]
        if main == "image":
            return {"type": "image_url", "image_url": {"url": await self._image_url(block)}}
        if main == "audio":
            fmt = _AUDIO_FORMATS.get(media_type)
            if fmt is None:
                raise TypeError(
                    f"unsupported audio format {media_type!r} for OpenAI chat "
                    "(expected audio/wav, audio/mp3 or audio/mpeg)"
                )
            data = await self.load_base64(block, http_client)
            return {"type": "input_audio", "input_audio": {"data": data, "format": fmt}}
        if media_type == "application/pdf":
            data = await self.load_base64(block, http_client)
            return {
                "type": "file",
                "file": {
                    "filename": block.name or "document.pdf",
                    "file_data": f"data:application/pdf;base64,{data}",
                },
            }
        logger.warning("skipping a %s data block: not supported by OpenAI chat", media_type)
        return None

    async def _image_url(self, block: DataBlock) -> str:
        source = block.source
        if isinstance(source, Base64Source):
            return f"data:{source.media_type};base64,{source.data}"
        if source.url.startswith("file://"):
            data = await self.load_base64(block)
            return f"data:{source.media_type};base64,{data}"
        return source.url


class OpenAIMultiAgentFormatter(MultiAgentFormatterBase[OpenAIChatFormatter]):
    """Formats a conversation of several named agents for OpenAI chat.

    A leading system message becomes ``{"role": "system", "content": str}``; each run of tool
    messages is formatted by :class:`OpenAIChatFormatter`; each run of plain messages becomes
    one user message: ``name: text`` lines inside ``<history>`` tags (the first such message
    is preceded by ``conversation_history_prompt``), followed by the run's media parts.

    Args:
        input_types: accepted media types (as :class:`OpenAIChatFormatter`).
        conversation_history_prompt: text put before the first ``<history>`` block.
        text_as_string: as :class:`OpenAIChatFormatter`'s, for the tool messages and the
            ``<history>`` messages alike.
    """

    default_input_types: ClassVar[tuple[str, ...]] = OpenAIChatFormatter.default_input_types

    def __init__(
        self,
        input_types: Sequence[str] | None = None,
        conversation_history_prompt: str = DEFAULT_CONVERSATION_HISTORY_PROMPT,
        *,
        text_as_string: bool = False,
    ) -> None:
        super().__init__(input_types, conversation_history_prompt)
        self.text_as_string = text_as_string

    def _chat_formatter(self) -> OpenAIChatFormatter:
        return OpenAIChatFormatter(input_types=self.input_types, text_as_string=self.text_as_string)

    async def _history_message(
        self,
        chat: OpenAIChatFormatter,
        group: list[Msg],
        is_first: bool,
        http_client: httpx2.AsyncClient | None,
    ) -> JSONObject | None:
        message = await super()._history_message(chat, group, is_first, http_client)
        if message is not None and self.text_as_string:
            message["content"] = text_or_parts(message["content"])
        return message

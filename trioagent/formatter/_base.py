"""``FormatterBase``: turning ``Msg`` lists into a provider's message format.

Shared by every provider formatter: the accepted media types (``input_types``, fnmatch
globs), loading media without blocking the event loop (``file://`` through ``trio.Path``,
remote URLs through httpx2, temporary files through a worker thread), rendering a tool result
as text with its media promoted, formatting message by message, and grouping messages for
multi-agent formatters.  :class:`MultiAgentFormatterBase` is the loop every multi-agent
formatter shares (system message, runs of tool messages, ``<history>`` messages).
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import logging
import mimetypes
import tempfile
import urllib.parse
from collections.abc import Sequence
from typing import ClassVar, Generic, Literal, TypeVar
from urllib.request import url2pathname

import httpx2
import trio

from .._core.json_types import JSONObject
from ..message import (
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = [
    "DEFAULT_CONVERSATION_HISTORY_PROMPT",
    "FormatterBase",
    "MessageGroup",
    "MultiAgentFormatterBase",
]

logger = logging.getLogger("trioagent.formatter")

MessageGroup = tuple[Literal["tool_sequence", "agent_message"], list[Msg]]

_NOT_MEDIA = frozenset({"text/plain", "application/x-thinking"})

#: Text put before the first ``<history>`` block of a multi-agent conversation.
DEFAULT_CONVERSATION_HISTORY_PROMPT = (
    "# Conversation History\n"
    "The content between <history></history> tags contains your conversation history\n"
)


class FormatterBase:
    """Base class of formatters.

    Args:
        input_types: the media types the model accepts, as fnmatch globs
            (``"image/*"``); ``text/plain`` and ``application/x-thinking`` are not media.
            Defaults to the formatter's ``default_input_types``.
    """

    default_input_types: ClassVar[tuple[str, ...]] = ("text/plain",)
    #: The ``type`` of a text content part in this dialect (see :meth:`content_parts`).
    text_part_type: ClassVar[str] = "text"

    def __init__(self, input_types: Sequence[str] | None = None) -> None:
        self.input_types: list[str] = list(
            self.default_input_types if input_types is None else input_types
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(input_types={self.input_types!r})"

    @property
    def supported_input_media_types(self) -> list[str]:
        """``input_types`` without ``text/plain`` and ``application/x-thinking``."""
        return [t for t in self.input_types if t not in _NOT_MEDIA]

    def is_supported(self, media_type: str) -> bool:
        """Whether a media type matches one of the supported globs."""
        return any(fnmatch.fnmatchcase(media_type, p) for p in self.supported_input_media_types)

    async def format(
        self, msgs: list[Msg], *, http_client: httpx2.AsyncClient | None = None
    ) -> list[JSONObject]:
        """Format ``msgs`` for the provider.

        ``http_client`` downloads remote media the provider needs inline (a model passes its
        own client); without one a temporary client is used.
        """
        raise NotImplementedError

    @staticmethod
    def assert_list_of_msgs(msgs: object) -> None:
        """Raise ``TypeError`` unless ``msgs`` is a list of ``Msg``."""
        if not isinstance(msgs, list) or not all(isinstance(m, Msg) for m in msgs):
            raise TypeError(f"expected a list of Msg, got {type(msgs).__name__}")

    # -- content parts -----------------------------------------------------------------------

    async def format_data_block(
        self, block: DataBlock, http_client: httpx2.AsyncClient | None = None
    ) -> JSONObject | None:
        """One content part for a data block, or ``None`` when it is skipped."""
        raise NotImplementedError(f"{type(self).__name__} does not format data blocks as parts")

    async def content_parts(
        self, blocks: Sequence[TextBlock | DataBlock], http_client: httpx2.AsyncClient | None
    ) -> list[JSONObject]:
        """Text and data content parts, in order (skipped data blocks leave no part)."""
        parts: list[JSONObject] = []
        for block in blocks:
            if isinstance(block, TextBlock):
                parts.append({"type": self.text_part_type, "text": block.text})
            elif (part := await self.format_data_block(block, http_client)) is not None:
                parts.append(part)
        return parts

    async def assistant_media_message(
        self, msg: Msg, media: Sequence[DataBlock], http_client: httpx2.AsyncClient | None
    ) -> JSONObject | None:
        """The media of an assistant message as a user message to put after it (the providers
        take no media in assistant turns), introduced by a note; ``None`` when every block is
        skipped."""
        parts: list[JSONObject] = []
        for block in media:
            if (part := await self.format_data_block(block, http_client)) is not None:
                parts.append(part)
        if not parts:
            return None
        note = {"type": self.text_part_type, "text": _assistant_media_note(msg)}
        return {"role": "user", "content": [note, *parts]}

    async def hint_message(
        self, block: HintBlock, http_client: httpx2.AsyncClient | None
    ) -> JSONObject | None:
        """A hint as a user message of content parts (``None`` when nothing is left)."""
        if isinstance(block.hint, str):
            return {"role": "user", "content": [{"type": self.text_part_type, "text": block.hint}]}
        parts = await self.content_parts(block.hint, http_client)
        return {"role": "user", "content": parts} if parts else None

    # -- media -------------------------------------------------------------------------------

    @staticmethod
    async def load_url(url: str, http_client: httpx2.AsyncClient | None = None) -> bytes:
        """The bytes behind a URL: ``file://`` (read in a worker thread through
        ``trio.Path``), ``data:`` (decoded), or ``http(s)://`` (downloaded with httpx2)."""
        if url.startswith("file://"):
            return await trio.Path(url2pathname(url.removeprefix("file://"))).read_bytes()
        if url.startswith("data:"):
            header, _, payload = url.partition(",")
            if header.endswith(";base64"):
                return base64.b64decode(payload)
            return urllib.parse.unquote_to_bytes(payload)
        try:
            if http_client is None:
                async with httpx2.AsyncClient(timeout=30.0, follow_redirects=True) as client:
                    response = await client.get(url)
            else:
                response = await http_client.get(url, follow_redirects=True)
            response.raise_for_status()
        except httpx2.HTTPError as exc:
            raise ValueError(f"could not download {url}: {exc}") from exc
        return response.content

    async def load_base64(
        self, block: DataBlock, http_client: httpx2.AsyncClient | None = None
    ) -> str:
        """The block's data as base64 (downloading or reading a URL source)."""
        if isinstance(block.source, Base64Source):
            return block.source.data
        data = await self.load_url(block.source.url, http_client)
        return base64.b64encode(data).decode("ascii")

    # -- tool results --------------------------------------------------------------------------

    def can_promote(self, media_type: str) -> bool:
        """Whether media of this type in a tool result is presented to the model (see
        :meth:`convert_tool_result_to_string`) instead of being described in text.

        Default: :meth:`is_supported`; formatters that accept only some subtypes of a
        supported glob (OpenAI chat audio) narrow it.
        """
        return self.is_supported(media_type)

    async def convert_tool_result_to_string(
        self, output: str | list[TextBlock | DataBlock]
    ) -> tuple[str, list[TextBlock | DataBlock]]:
        """A tool result as text, plus the media to present to the model separately.

        Supported media is announced by identifier in the text and returned (framed by
        ``<system-reminder>`` text blocks) for the caller to send as a user message;
        unsupported media is described by its URL, or saved to a temporary file (written in a
        worker thread) and described by its path.
        """
        if isinstance(output, str):
            return output, []
        pieces: list[str] = []
        promoted: list[TextBlock | DataBlock] = []
        for block in output:
            if isinstance(block, TextBlock):
                pieces.append(block.text)
                continue
            media_type = block.source.media_type
            main = media_type.split("/", 1)[0]
            if self.can_promote(media_type):
                pieces.append(
                    f"<system-reminder>A(n) {main} file is returned and will be presented to "
                    f"you with the identifier [{block.id}].</system-reminder>"
                )
                promoted.extend([TextBlock(text=f"- {block.id} ({main} file): "), block])
            elif isinstance(block.source, Base64Source):
                path = await _save_temp(block.source.data, media_type)
                pieces.append(
                    f"<system-reminder>A(n) {main} file is returned and saved locally at: "
                    f"{path}.</system-reminder>"
                )
            else:
                pieces.append(
                    f"<system-reminder>A(n) {main} file is returned and can be accessed at "
                    f"the URL: {block.source.url}.</system-reminder>"
                )
        if promoted:
            promoted = [
                TextBlock(
                    text="<system-reminder>The multimodal data and their identifiers are "
                    "listed as follows:"
                ),
                *promoted,
                TextBlock(text="</system-reminder>"),
            ]
        return "\n".join(pieces), promoted

    # -- multi-agent ---------------------------------------------------------------------------

    @staticmethod
    def group_messages(msgs: list[Msg]) -> list[MessageGroup]:
        """Split ``msgs`` into runs of tool messages (holding a tool call or result) and runs
        of plain agent messages, in order."""
        groups: list[MessageGroup] = []
        for msg in msgs:
            is_tool = any(isinstance(b, ToolCallBlock | ToolResultBlock) for b in msg.content)
            kind: Literal["tool_sequence", "agent_message"] = (
                "tool_sequence" if is_tool else "agent_message"
            )
            if groups and groups[-1][0] == kind:
                groups[-1][1].append(msg)
            else:
                groups.append((kind, [msg]))
        return groups


class PerMessageFormatter(FormatterBase):
    """A formatter that maps each ``Msg`` on its own: :meth:`format` appends what
    :meth:`_format_msg` makes of each message, in order."""

    async def format(
        self, msgs: list[Msg], *, http_client: httpx2.AsyncClient | None = None
    ) -> list[JSONObject]:
        self.assert_list_of_msgs(msgs)
        out: list[JSONObject] = []
        for msg in msgs:
            await self._format_msg(msg, out, http_client)
        return out

    async def _format_msg(
        self, msg: Msg, out: list[JSONObject], http_client: httpx2.AsyncClient | None
    ) -> None:
        """Append the provider messages for ``msg`` to ``out``."""
        raise NotImplementedError


_ChatT = TypeVar("_ChatT", bound=FormatterBase)


class MultiAgentFormatterBase(FormatterBase, Generic[_ChatT]):
    """Base of the multi-agent formatters: a conversation of several named agents.

    :meth:`format` turns a leading system message into :meth:`_system_message`, each run of
    tool messages (see :meth:`~FormatterBase.group_messages`) into the messages of the
    provider's chat formatter (:meth:`_chat_formatter`), and each run of plain messages into
    one :meth:`_history_message` — the first one it makes gets ``is_first=True`` (it carries
    ``conversation_history_prompt``).

    Args:
        input_types: accepted media types (as the provider's chat formatter).
        conversation_history_prompt: text put before the first ``<history>`` block.
    """

    def __init__(
        self,
        input_types: Sequence[str] | None = None,
        conversation_history_prompt: str = DEFAULT_CONVERSATION_HISTORY_PROMPT,
    ) -> None:
        super().__init__(input_types)
        self.conversation_history_prompt = conversation_history_prompt

    def _chat_formatter(self) -> _ChatT:
        """The formatter for runs of tool messages (with this formatter's ``input_types``)."""
        raise NotImplementedError

    def _system_message(self, msg: Msg) -> JSONObject | None:
        """The message for a leading system message (``None``: nothing is sent).

        Default: ``{"role": "system", "content": <its text blocks joined by newlines>}``.
        """
        return {"role": "system", "content": msg.get_text_content() or ""}

    async def _history_message(
        self,
        chat: _ChatT,
        group: list[Msg],
        is_first: bool,
        http_client: httpx2.AsyncClient | None,
    ) -> JSONObject | None:
        """The message for a run of plain messages (``None``: nothing to send).

        Default (OpenAI chat and Responses): one user message, the ``name: text`` lines
        inside ``<history>`` tags (after ``conversation_history_prompt`` when ``is_first``)
        as one text part of the chat formatter's ``text_part_type``, followed by the run's
        media parts; ``None`` when there is neither.
        """
        lines: list[str] = []
        media: list[JSONObject] = []
        for msg in group:
            for block in msg.content:
                match block:
                    case TextBlock():
                        lines.append(f"{msg.name}: {block.text}")
                    case DataBlock():
                        part = await chat.format_data_block(block, http_client)
                        if part is not None:
                            media.append(part)
        content: list[JSONObject] = []
        if lines:
            prompt = self.conversation_history_prompt if is_first else ""
            text = prompt + "<history>\n" + "\n".join(lines) + "\n</history>"
            content.append({"type": chat.text_part_type, "text": text})
        content.extend(media)
        return {"role": "user", "content": content} if content else None

    async def format(
        self, msgs: list[Msg], *, http_client: httpx2.AsyncClient | None = None
    ) -> list[JSONObject]:
        self.assert_list_of_msgs(msgs)
        chat = self._chat_formatter()
        out: list[JSONObject] = []
        if msgs and msgs[0].role == "system":
            if (system := self._system_message(msgs[0])) is not None:
                out.append(system)
            msgs = msgs[1:]
        is_first = True
        for kind, group in self.group_messages(msgs):
            if kind == "tool_sequence":
                out.extend(await chat.format(group, http_client=http_client))
                continue
            message = await self._history_message(chat, group, is_first, http_client)
            if message is not None:
                out.append(message)
                is_first = False
        return out


def _assistant_media_note(msg: Msg) -> str:
    """The text that introduces media moved out of an assistant message."""
    speaker = f" of {msg.name}" if msg.name else ""
    return (
        f"<system-reminder>The media attached to the previous assistant message{speaker} "
        "follows.</system-reminder>"
    )


async def _save_temp(data: str, media_type: str) -> str:
    try:
        raw = base64.b64decode(data)
    except (binascii.Error, ValueError):
        raw = data.encode()
    suffix = mimetypes.guess_extension(media_type) or ""

    def write() -> str:
        with tempfile.NamedTemporaryFile(suffix=suffix, delete=False) as f:
            f.write(raw)
            return f.name

    return await trio.to_thread.run_sync(write)

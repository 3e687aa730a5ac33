"""``TTSModelBase``: text to speech, in standard and realtime mode.

Standard mode (``realtime = False``) turns one whole text into audio::

    response = await tts.synthesize("Hello world")          # the complete audio
    response.audio, response.media_type                     # b"RIFF...", "audio/wav"
    await tts.synthesize("Hello world", emit=on_chunk)      # chunks to on_chunk as they come

Realtime mode (``realtime = True``) takes text deltas while the text is still being written
and hands back audio as soon as it exists, through a session::

    async with tts.session() as session:
        await session.push("Hello ", emit=on_chunk)   # emits the audio that is ready, no wait
        await session.push("world", emit=on_chunk)
        await session.flush(emit=on_chunk)            # waits for and emits the rest

Audio travels through ``emit`` callbacks in the caller's task (no async generators).  Where a
provider produces audio in the background, :class:`StreamingTTSSession` runs a receiver task in
a nursery owned by the session (so by the task that entered it) and carries the chunks over a
memory channel.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import contextlib
import math
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, ClassVar, Self, TypeAlias

import attrs
import trio

from .._core.concurrency import reraise_unwrapped
from .._core.emit import Emit
from .._core.ids import generate_id, generate_timestamp
from .._core.json_types import JSONObject
from ..exception import ModelError
from ..message import Base64Source, DataBlock, URLSource
from ..types import ErrorType

__all__ = [
    "StreamingTTSSession",
    "TTSEmit",
    "TTSError",
    "TTSModelBase",
    "TTSResponse",
    "TTSSession",
    "TTSUsage",
]


class TTSError(ModelError):
    """A speech synthesis failed (the provider's or the program's message says why)."""

    error_type = ErrorType.UPSTREAM


@attrs.define(kw_only=True)
class TTSUsage:
    """What a synthesis cost: tokens when the provider reports them, and seconds."""

    type: ClassVar[str] = "tts"
    input_tokens: int = 0
    output_tokens: int = 0
    time: float = 0.0


@attrs.define(kw_only=True)
class TTSResponse:
    """Audio: a chunk (``is_last=False``) or a complete synthesis (``is_last=True``).

    ``content`` is a :class:`~trioagent.message.DataBlock` with base64 audio (or ``None``:
    nothing to play yet).
    """

    type: ClassVar[str] = "tts"
    content: DataBlock | None = None
    id: str = attrs.field(factory=generate_id)
    created_at: str = attrs.field(factory=generate_timestamp)
    usage: TTSUsage | None = None
    metadata: JSONObject = attrs.field(factory=dict)
    is_last: bool = True

    @classmethod
    def from_audio(
        cls, audio: bytes, media_type: str, *, is_last: bool = False, **kwargs: Any
    ) -> TTSResponse:
        """A response holding ``audio`` (raw bytes, base64-encoded here)."""
        source = Base64Source(data=base64.b64encode(audio).decode("ascii"), media_type=media_type)
        return cls(content=DataBlock(source=source), is_last=is_last, **kwargs)

    @property
    def media_type(self) -> str | None:
        """The audio's media type (``None`` without content)."""
        return self.content.source.media_type if self.content is not None else None

    @property
    def audio(self) -> bytes:
        """The audio bytes (``b""`` without base64 content)."""
        if self.content is None or not isinstance(self.content.source, Base64Source):
            return b""
        try:
            return base64.b64decode(self.content.source.data, validate=True)
        except (binascii.Error, ValueError):
            return b""

    @property
    def has_audio(self) -> bool:
        """Whether there is anything to play: base64 data or a URL."""
        if self.content is None:
            return False
        source = self.content.source
        return bool(source.url if isinstance(source, URLSource) else source.data)


#: The callback audio chunks are passed to.
TTSEmit: TypeAlias = Emit[TTSResponse]


class TTSSession:
    """One realtime synthesis: text deltas in with :meth:`push`, audio out through ``emit``.

    Use it as an async context manager (``async with tts.session() as session``); one session
    may synthesize several texts, each ended by :meth:`flush`.  Subclasses with background work
    use :class:`StreamingTTSSession`.
    """

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: builtins.type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    async def push(self, text: str, emit: TTSEmit) -> None:
        """Send a text delta; emit the audio that is ready now (maybe none) without waiting
        for the synthesis of ``text``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement push")

    async def flush(self, emit: TTSEmit) -> None:
        """The text pushed so far is complete: wait for the rest of its audio and emit it.
        (AgentScope's ``synthesize()`` with no text.)"""
        raise NotImplementedError(f"{type(self).__name__} does not implement flush")


@attrs.frozen
class _Flushed:
    """The provider finished the audio of everything pushed before a flush."""


@attrs.frozen
class _Failed:
    error: Exception


@attrs.frozen
class _Ended:
    """The receiver returned: the provider closed the session."""


_Item: TypeAlias = TTSResponse | _Flushed | _Failed | _Ended


class StreamingTTSSession(TTSSession):
    """A realtime session whose provider produces audio in the background.

    Entering the session opens a nursery (owned by the entering task) and starts the receiver
    task in it: :meth:`_connect`, then :meth:`_receive` until the session is left; the
    receiver's ``finally`` runs :meth:`_close` (shielded, at most :attr:`close_grace`
    seconds).  Audio chunks the receiver delivers cross into the caller's task over an
    unbounded memory channel: :meth:`push` emits those already there without waiting,
    :meth:`flush` waits until the receiver reports the flush done.  A receiver error is raised
    by the next ``push``/``flush``, in the caller's task (not as an exception group).

    Subclasses implement the provider side:

    * ``_connect()`` — open the connection (in the receiver task; ``session`` entry waits).
    * ``_send_text(text)`` / ``_send_flush()`` — called from the caller's task.
    * ``_receive(deliver, flushed)`` — read the provider: ``await deliver(chunk)`` per audio
      chunk, ``await flushed()`` once the audio of a flush is complete.
    * ``_close()`` — close the connection.
    """

    #: Seconds the shielded :meth:`_close` may take while the session is being left.
    close_grace: float = 5.0

    def __init__(self) -> None:
        self._stack: contextlib.AsyncExitStack | None = None
        self._nursery: trio.Nursery | None = None
        self._recv: trio.MemoryReceiveChannel[_Item] | None = None

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError(f"{type(self).__name__} is already open")
        send, recv = trio.open_memory_channel[_Item](math.inf)
        try:
            async with contextlib.AsyncExitStack() as stack:
                stack.callback(recv.close)
                nursery = await stack.enter_async_context(trio.open_nursery())
                await nursery.start(self._run_receiver, send)
                self._stack = stack.pop_all()
        except BaseExceptionGroup as group:  # a connect failure, raised from inside the nursery
            reraise_unwrapped(group)
        self._nursery = nursery
        self._recv = recv
        return self

    async def __aexit__(
        self,
        exc_type: builtins.type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is None:
            return
        assert self._nursery is not None
        # Leaving the session ends the receiver (it closes the connection on its way out).
        self._nursery.cancel_scope.cancel()
        try:
            await stack.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)

    async def _run_receiver(
        self,
        send: trio.MemorySendChannel[_Item],
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async def deliver(chunk: TTSResponse) -> None:
            send.send_nowait(chunk)  # unbounded: never blocks
            await trio.lowlevel.checkpoint()

        async def flushed() -> None:
            send.send_nowait(_Flushed())
            await trio.lowlevel.checkpoint()

        with send:
            try:
                await self._connect()
                task_status.started()
                try:
                    await self._receive(deliver, flushed)
                except Exception as exc:  # handed to the caller's task; Cancelled is not caught
                    send.send_nowait(_Failed(exc))
                else:
                    send.send_nowait(_Ended())
            finally:
                # Shielded so the connection is closed while the session is cancelled;
                # deadline: close_grace seconds.
                with trio.CancelScope(shield=True, deadline=trio.current_time() + self.close_grace):
                    await self._close()

    def _channel(self) -> trio.MemoryReceiveChannel[_Item]:
        if self._recv is None or self._stack is None:
            raise RuntimeError(f"use `async with` to open {type(self).__name__} first")
        return self._recv

    async def _handle(self, item: _Item, emit: TTSEmit) -> bool:
        """Emit an audio chunk; ``True`` for a flush marker; raise a receiver failure."""
        if isinstance(item, TTSResponse):
            await emit(item)
            return False
        if isinstance(item, _Failed):
            raise item.error
        if isinstance(item, _Ended):
            raise TTSError(f"{type(self).__name__}: the provider closed the session")
        return True

    async def push(self, text: str, emit: TTSEmit) -> None:
        recv = self._channel()
        await self._send_text(text)
        while True:
            try:
                item = recv.receive_nowait()
            except trio.WouldBlock:
                break
            except trio.EndOfChannel:
                raise TTSError(f"{type(self).__name__}: the receiver is gone") from None
            await self._handle(item, emit)
        await trio.lowlevel.checkpoint()

    async def flush(self, emit: TTSEmit) -> None:
        recv = self._channel()
        await self._send_flush()
        while True:
            try:
                item = await recv.receive()
            except trio.EndOfChannel:
                raise TTSError(f"{type(self).__name__}: the receiver is gone") from None
            if await self._handle(item, emit):
                return

    # -- provider hooks ------------------------------------------------------------------------

    async def _connect(self) -> None:
        """Open the provider connection (runs in the receiver task)."""

    async def _send_text(self, text: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement _send_text")

    async def _send_flush(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement _send_flush")

    async def _receive(self, deliver: TTSEmit, flushed: Callable[[], Awaitable[None]]) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement _receive")

    async def _close(self) -> None:
        """Close the provider connection (runs shielded in the receiver task)."""


class TTSModelBase:
    """Base class of text-to-speech models.

    Args:
        model: the provider's model (or voice engine) name.
        stream: deliver audio chunk by chunk as it is produced (standard mode) rather than in
            one piece at the end.

    Standard models implement :meth:`_synthesize`; realtime models set ``realtime = True``
    and implement :meth:`session` (their :meth:`synthesize` then runs one session).
    ``async with model:`` / :meth:`aclose` release what the model holds (an HTTP client).
    """

    type: ClassVar[str] = "tts"
    realtime: ClassVar[bool] = False

    def __init__(self, model: str, *, stream: bool = True) -> None:
        self.model = model
        self.stream = stream

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, stream={self.stream!r})"

    async def synthesize(self, text: str, emit: TTSEmit | None = None) -> TTSResponse:
        """Synthesize ``text``; return the complete audio (``is_last=True``).

        With ``emit``, every audio chunk is passed to it as it is produced (``is_last=False``;
        a single chunk when the model does not stream).  Chunks without audio are skipped.
        Cancellation stops the synthesis and propagates.
        """
        if not isinstance(text, str):
            raise TypeError(f"synthesize() takes a str, got {type(text).__name__}")
        pieces: list[bytes] = []
        media_type: str | None = None
        start = trio.current_time()

        async def collect(chunk: TTSResponse) -> None:
            nonlocal media_type
            if not chunk.has_audio:
                return
            pieces.append(chunk.audio)
            media_type = media_type or chunk.media_type
            if emit is not None:
                await emit(attrs.evolve(chunk, is_last=False))

        await self._synthesize(text, collect)
        audio = b"".join(pieces)
        usage = TTSUsage(time=trio.current_time() - start)
        if not audio or media_type is None:
            return TTSResponse(content=None, usage=usage, is_last=True)
        return TTSResponse.from_audio(audio, media_type, is_last=True, usage=usage)

    async def _synthesize(self, text: str, emit: TTSEmit) -> None:
        """Produce the audio of ``text``, passing each chunk to ``emit`` (one or many)."""
        if not self.realtime:
            raise NotImplementedError(f"{type(self).__name__} does not implement _synthesize")
        async with self.session() as session:
            await session.push(text, emit)
            await session.flush(emit)

    def session(self) -> TTSSession:
        """Open a realtime session (``async with``); realtime models only."""
        if self.realtime:
            raise NotImplementedError(f"{type(self).__name__} does not implement session()")
        raise TypeError(
            f"{type(self).__name__} is a standard (non-realtime) TTS model: "
            "call synthesize(text) instead of opening a session"
        )

    async def aclose(self) -> None:
        """Release what the model holds (nothing here)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: builtins.type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

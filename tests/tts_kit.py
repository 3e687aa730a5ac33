"""Fake speech models shared by the TTS tests (not a test module).

* :class:`FakeTTS` — standard mode; ``synthesize`` emits scripted chunks.
* :class:`DirectRealtimeTTS` — realtime; ``push`` answers at once, ``flush`` drains: exact
  event orders.
* :class:`ChannelRealtimeTTS` — realtime on :class:`~trioagent.tts.StreamingTTSSession`: a
  simulated provider answers in a receiver task after ``latency`` seconds (mock clock).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import ClassVar

import trio

from trioagent.tts import (
    StreamingTTSSession,
    TTSEmit,
    TTSModelBase,
    TTSResponse,
    TTSSession,
)

PCM = "audio/pcm;rate=24000"


def chunk(data: bytes | None, media_type: str = PCM) -> TTSResponse:
    """An audio chunk (``None``: a response without content)."""
    if data is None:
        return TTSResponse(content=None, is_last=False)
    return TTSResponse.from_audio(data, media_type)


class FakeTTS(TTSModelBase):
    """Standard mode: each ``synthesize`` emits ``chunks`` (default: one WAV-ish chunk), after
    ``delay`` seconds each; records the texts."""

    def __init__(
        self,
        chunks: Sequence[bytes | None] = (b"AUDIO",),
        *,
        media_type: str = "audio/wav",
        delay: float = 0.0,
        error: Exception | None = None,
    ) -> None:
        super().__init__("fake-tts")
        self.chunks = list(chunks)
        self.media_type = media_type
        self.delay = delay
        self.error = error
        self.texts: list[str] = []
        self.finished: list[str] = []

    async def _synthesize(self, text: str, emit: TTSEmit) -> None:
        self.texts.append(text)
        if self.error is not None:
            await trio.lowlevel.checkpoint()
            raise self.error
        for data in self.chunks:
            if self.delay:
                await trio.sleep(self.delay)
            else:
                await trio.lowlevel.checkpoint()
            await emit(chunk(data, self.media_type))
        self.finished.append(text)


class _DirectSession(TTSSession):
    def __init__(self, model: DirectRealtimeTTS) -> None:
        self.model = model

    async def __aenter__(self) -> _DirectSession:
        self.model.log.append("open")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.model.log.append("close")

    async def push(self, text: str, emit: TTSEmit) -> None:
        self.model.log.append(f"push:{text}")
        await trio.lowlevel.checkpoint()
        await emit(chunk(self.model.on_push(text)))

    async def flush(self, emit: TTSEmit) -> None:
        self.model.log.append("flush")
        await trio.lowlevel.checkpoint()
        await emit(chunk(self.model.on_flush))


class DirectRealtimeTTS(TTSModelBase):
    """Realtime: ``push`` emits ``on_push(text)`` at once, ``flush`` emits ``on_flush``."""

    realtime: ClassVar[bool] = True

    def __init__(
        self,
        on_push: Callable[[str], bytes | None] = lambda text: f"<{text}>".encode(),
        on_flush: bytes | None = b"DRAIN",
    ) -> None:
        super().__init__("direct-realtime")
        self.on_push = on_push
        self.on_flush = on_flush
        self.log: list[str] = []

    def session(self) -> TTSSession:
        return _DirectSession(self)


class _ChannelSession(StreamingTTSSession):
    def __init__(self, model: ChannelRealtimeTTS) -> None:
        super().__init__()
        self.model = model
        self._wire_send, self._wire_recv = trio.open_memory_channel[tuple[str, str]](math.inf)

    async def _connect(self) -> None:
        await trio.sleep(self.model.latency)
        if self.model.connect_error is not None:
            raise self.model.connect_error
        self.model.log.append("connect")

    async def _send_text(self, text: str) -> None:
        self._wire_send.send_nowait(("text", text))
        await trio.lowlevel.checkpoint()

    async def _send_flush(self) -> None:
        self._wire_send.send_nowait(("flush", ""))
        await trio.lowlevel.checkpoint()

    async def _receive(self, deliver: TTSEmit, flushed: Callable[[], Awaitable[None]]) -> None:
        async for kind, text in self._wire_recv:
            await trio.sleep(self.model.latency)
            if kind == "text":
                if text == self.model.fail_on:
                    raise RuntimeError(f"provider failed on {text!r}")
                await deliver(chunk(f"<{text}>".encode()))
            else:
                await deliver(chunk(b"<end>"))
                await flushed()
                if self.model.hang_up_after_flush:
                    return

    async def _close(self) -> None:
        await trio.lowlevel.checkpoint()
        self.model.log.append("close")


class ChannelRealtimeTTS(TTSModelBase):
    """Realtime over a simulated provider: each pushed text becomes ``<text>`` and a flush
    ``<end>``, each after ``latency`` (mock) seconds, delivered by the session's receiver."""

    realtime: ClassVar[bool] = True

    def __init__(
        self,
        *,
        latency: float = 0.5,
        fail_on: str | None = None,
        connect_error: Exception | None = None,
        hang_up_after_flush: bool = False,
    ) -> None:
        super().__init__("channel-realtime")
        self.latency = latency
        self.fail_on = fail_on
        self.connect_error = connect_error
        self.hang_up_after_flush = hang_up_after_flush
        self.log: list[str] = []

    def session(self) -> TTSSession:
        return _ChannelSession(self)

"""``TTSMiddleware``: speak the reply's text as it is written.

Every upstream item is passed on first; text blocks are then turned into audio, injected as a
data block per text block (``DataBlockStartEvent`` / ``DataBlockDeltaEvent`` with base64 audio
/ ``DataBlockEndEvent``).  The data events carry ``metadata={"text_block_id": ...}``, naming
the text block they speak.

Standard mode (``tts_model.realtime`` false) — the audio follows the text block::

    TEXT_BLOCK_START, TEXT_BLOCK_DELTA, TEXT_BLOCK_DELTA, TEXT_BLOCK_END,
    DATA_BLOCK_START, DATA_BLOCK_DELTA, DATA_BLOCK_DELTA, DATA_BLOCK_END

Realtime mode — each text delta is pushed while the model still writes, and the audio that is
ready is interleaved with the text; the end of the text block flushes the rest::

    TEXT_BLOCK_START, TEXT_BLOCK_DELTA, DATA_BLOCK_START, DATA_BLOCK_DELTA,
    TEXT_BLOCK_DELTA, DATA_BLOCK_DELTA, TEXT_BLOCK_END, DATA_BLOCK_DELTA, DATA_BLOCK_END

The middleware pulls the inner layers' items (``next_handler.stream()``), so synthesis runs in
this layer's task while the inner layers wait.  On cancellation synthesis stops, the open data
block is closed (its END reaches the consumer before the reply's INTERRUPTED end), and the
inner layers' cleanup items — the interrupted text block's end among them — go straight out,
never to the speech model.  A realtime session is opened at the reply's first text delta and
closed when the ``on_reply`` call ends (a parked reply resumes with a new one).

A failing speech model does not fail the reply (the text is the answer): the open data block
is closed, a ``CustomEvent(name="tts_error")`` tells the consumer, and the rest of the reply
is passed through without audio.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable

import trio

from .._core.chain import Kwargs, NextHandler
from .._core.concurrency import raise_as_is
from .._core.emit import Emit
from .._core.ids import generate_id
from ..agent import AgentLike, ReplyItem
from ..event import (
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    ReplyEndEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
)
from ..message import URLSource
from ..tts import TTSModelBase, TTSResponse, TTSSession
from ._base import MiddlewareBase

__all__ = ["TTSMiddleware"]

logger = logging.getLogger("trioagent.middleware")


class TTSMiddleware(MiddlewareBase):
    """Synthesize speech for the reply's text blocks (hook: ``on_reply``).

    Args:
        tts_model: the speech model; its ``realtime`` flag selects the mode.
        close_grace: seconds the shielded closing of an open data block may take when the
            reply is cancelled.

    Thinking blocks are not spoken; every text block, across all reasoning rounds, gets its own
    data block.  In standard mode a whitespace-only text is not synthesized, and a
    ``TextBlockEndEvent.text`` (a replaced text) is spoken instead of the streamed deltas.
    """

    def __init__(self, tts_model: TTSModelBase, *, close_grace: float = 5.0) -> None:
        if not isinstance(tts_model, TTSModelBase):
            raise TypeError(f"tts_model must be a TTSModelBase, got {type(tts_model).__name__}")
        self.tts_model = tts_model
        self.close_grace = close_grace

    async def on_reply(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        # The stack owns the realtime session, opened at the first text delta (so a reply
        # without text never connects, and nothing here waits before the inner layers start).
        async with next_handler.stream() as items, contextlib.AsyncExitStack() as stack:
            speaker = _Speaker(self.tts_model, stack, emit, agent)
            try:
                async for item in items:
                    await speaker.handle(item)
            except BaseException:
                # Shielded so the open data block is closed while the reply is cancelled
                # (before the inner layers emit the INTERRUPTED end); deadline: close_grace.
                with trio.CancelScope(shield=True, deadline=trio.current_time() + self.close_grace):
                    await speaker.close_block()
                raise


class _Speaker:
    """The per-reply state: the text of the open text block, the open audio block and the
    realtime session."""

    def __init__(
        self, model: TTSModelBase, stack: contextlib.AsyncExitStack, emit: Emit, agent: AgentLike
    ) -> None:
        self.model = model
        self.stack = stack
        self.session: TTSSession | None = None
        self.emit = emit
        self.agent = agent
        self.buffer: list[str] = []
        self.text_block_id: str | None = None
        self.reply_id = ""
        self.block_id: str | None = None
        self.block_media_type = ""
        self.failed = False
        self.emit_error: BaseException | None = None

    async def handle(self, item: object) -> None:
        if self.failed:
            await self.emit(item)
            return
        if isinstance(item, ReplyEndEvent):
            await self.close_block()
            await self.emit(item)
            return
        await self.emit(item)
        if isinstance(item, TextBlockDeltaEvent):
            self.reply_id = item.reply_id
            self.text_block_id = item.block_id
            self.buffer.append(item.delta)
            if self.model.realtime and item.delta:
                await self._speak(self._push(item.delta))
        elif isinstance(item, TextBlockEndEvent):
            self.reply_id = item.reply_id
            self.text_block_id = item.block_id
            text = "".join(self.buffer) if item.text is None else item.text
            self.buffer.clear()
            if self.model.realtime:
                if self.session is not None:
                    await self._speak(self.session.flush(self.audio))
            elif text.strip():
                await self._speak(self.model.synthesize(text, self.audio))
            await self.close_block()
            self.text_block_id = None

    async def _push(self, delta: str) -> None:
        if self.session is None:
            self.session = await self.stack.enter_async_context(self.model.session())
        await self.session.push(delta, self.audio)

    async def _speak(self, work: Awaitable[object]) -> None:
        """Await a synthesis step; a failure of the speech model disables speech."""
        try:
            await work
        except Exception as exc:  # a speech failure must not fail the reply; Cancelled passes
            if self.emit_error is not None and _involves(exc, self.emit_error):
                # An outer layer failed on our audio event: not the speech model's fault.
                # Raised as the outer layer raised it, even when the model wrapped it.
                raise_as_is(exc if isinstance(exc, BaseExceptionGroup) else self.emit_error)
            self.failed = True
            logger.warning(
                "TTSMiddleware: speech synthesis failed, continuing without audio: %s", exc
            )
            await self.close_block()
            await self.emit(
                CustomEvent(
                    reply_id=self.reply_id or self.agent.state.reply_id,
                    name="tts_error",
                    value={"error": type(exc).__name__, "message": str(exc)},
                )
            )

    async def audio(self, chunk: TTSResponse) -> None:
        """Emit one audio chunk, opening the data block on the first one."""
        try:
            await self._audio(chunk)
        except Exception as exc:
            self.emit_error = exc
            raise

    async def _audio(self, chunk: TTSResponse) -> None:
        content = chunk.content
        if content is None or not chunk.has_audio:
            return
        metadata = {"text_block_id": self.text_block_id} if self.text_block_id else {}
        reply_id = self.reply_id or self.agent.state.reply_id
        if self.block_id is None:
            block_id = generate_id()
            await self.emit(
                DataBlockStartEvent(
                    reply_id=reply_id,
                    block_id=block_id,
                    media_type=content.source.media_type,
                    metadata=dict(metadata),
                )
            )
            # Marked open once the START was passed on (an emission cancelled before delivery
            # leaves nothing to close).
            self.block_id = block_id
            self.block_media_type = content.source.media_type
        source = content.source
        await self.emit(
            DataBlockDeltaEvent(
                reply_id=reply_id,
                block_id=self.block_id,
                media_type=self.block_media_type,
                data=None if isinstance(source, URLSource) else source.data,
                url=source.url if isinstance(source, URLSource) else None,
                metadata=dict(metadata),
            )
        )

    async def close_block(self) -> None:
        """Emit the END of the open data block, if any."""
        block_id = self.block_id
        if block_id is None:
            return
        metadata = {"text_block_id": self.text_block_id} if self.text_block_id else {}
        await self.emit(
            DataBlockEndEvent(
                reply_id=self.reply_id or self.agent.state.reply_id,
                block_id=block_id,
                metadata=metadata,
            )
        )
        self.block_id = None


def _involves(exc: BaseException, target: BaseException, seen: set[int] | None = None) -> bool:
    """Whether ``exc`` is ``target``, a group holding it, or raised from it (a speech model
    wrapping the failure of an outer layer: ``raise TTSError(...) from exc``)."""
    seen = set() if seen is None else seen
    if exc is target:
        return True
    if id(exc) in seen:
        return False
    seen.add(id(exc))
    linked = [exc.__cause__, exc.__context__]
    if isinstance(exc, BaseExceptionGroup):
        linked.extend(exc.exceptions)
    return any(e is not None and _involves(e, target, seen) for e in linked)

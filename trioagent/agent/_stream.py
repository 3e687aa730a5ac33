"""``ReplyStream``: ``async with agent.stream(inputs) as reply: async for event in reply``."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Awaitable, Callable
from typing import TypeAlias

import trio

from .._core.concurrency import reraise_unwrapped
from ..event import AgentEvent
from ..message import Msg

__all__ = ["ReplyStream"]

#: Runs the reply with ``consumer`` as its outermost sink, calling ``on_registered`` once
#: ``interrupt()`` reaches it.
RunReply: TypeAlias = Callable[
    [Callable[[AgentEvent | Msg], Awaitable[None]], Callable[[], object]], Awaitable[object]
]

#: Events buffered between the reply task and the consumer before the reply waits.
BUFFER = 256
#: Iteration passes a checkpoint at least this often when events are already buffered.
CHECKPOINT_EVERY = 32


class ReplyStream:
    """A reply running in a child task, streamed over a memory channel.

    Iterate it for the events (the final ``Msg`` is not an event; read :attr:`result` once the
    stream ended, or :attr:`msg`, which is ``None`` until then).  The reply task lives in a nursery owned by the ``async with`` block: leaving
    the block early interrupts the reply (it still ends with exactly one INTERRUPTED end).  An
    error of the reply is raised when the block exits, after its ERROR end event was streamed.
    """

    def __init__(self, run_reply: RunReply) -> None:
        self._run_reply = run_reply
        self._stack = contextlib.AsyncExitStack()
        self._recv: trio.MemoryReceiveChannel[AgentEvent] | None = None
        self._done = False
        self._taken = 0
        self._nursery: trio.Nursery | None = None
        self.msg: Msg | None = None
        """The final Msg (``None`` until the reply produced it)."""

    async def __aenter__(self) -> ReplyStream:
        send, recv = trio.open_memory_channel[AgentEvent](BUFFER)
        self._recv = recv
        nursery = await self._stack.enter_async_context(trio.open_nursery())
        self._nursery = nursery
        try:
            # start(), not start_soon(): the reply is registered with the agent before the
            # block's body runs, so an agent.interrupt() right away is not lost.
            await nursery.start(self._produce, send)
        except BaseException:
            recv.close()
            await self._stack.aclose()
            raise
        return self

    async def _produce(
        self,
        send: trio.MemorySendChannel[AgentEvent],
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async def consume(item: AgentEvent | Msg) -> None:
            if isinstance(item, Msg):
                self.msg = item
                return
            try:
                send.send_nowait(item)
            except trio.WouldBlock:
                await send.send(item)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the consumer left; the reply still runs its cleanup

        with send:
            try:
                run = await self._run_reply(consume, task_status.started)
            finally:
                self._done = True
            final = getattr(run, "final_msg", None)
            if self.msg is None and isinstance(final, Msg):
                # The Msg never reached the consumer (a layer dropped it on the way, or the
                # cleanup budget ran out): the reply still recorded it.
                self.msg = final

    @property
    def result(self) -> Msg:
        """The final Msg of the reply.

        Raises:
            RuntimeError: the reply has not produced it yet (read it after the events ended).
        """
        if self.msg is None:
            raise RuntimeError(
                "the reply has not produced its final Msg yet: read `result` after iterating "
                "the stream to its end"
            )
        return self.msg

    def __aiter__(self) -> ReplyStream:
        return self

    def _opened(self) -> trio.MemoryReceiveChannel[AgentEvent]:
        if self._recv is None:
            raise RuntimeError(
                "the stream is not open: use `async with agent.stream(...) as reply`"
            )
        return self._recv

    async def __anext__(self) -> AgentEvent:
        recv = self._opened()
        # Take buffered events without a scheduling round each, but still pass a checkpoint
        # every CHECKPOINT_EVERY events so the consumer stays cancellable and fair.
        self._taken += 1
        if self._taken % CHECKPOINT_EVERY:
            try:
                return recv.receive_nowait()
            except trio.WouldBlock:
                pass
            except trio.EndOfChannel:
                await trio.lowlevel.checkpoint()
                raise StopAsyncIteration from None
        try:
            return await recv.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    async def receive(self) -> AgentEvent:
        """The next event; raises ``trio.EndOfChannel`` at the end."""
        return await self._opened().receive()

    @property
    def channel(self) -> trio.MemoryReceiveChannel[AgentEvent]:
        """The underlying receive channel."""
        return self._opened()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> bool:
        if not self._done and self._nursery is not None:
            # The consumer left early: cancel the reply task (also when its reply has not
            # started yet).  The reply still runs its shielded cleanup and ends INTERRUPTED.
            self._nursery.cancel_scope.cancel()
        assert self._recv is not None
        self._recv.close()
        try:
            return bool(await self._stack.__aexit__(exc_type, exc, tb))
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)

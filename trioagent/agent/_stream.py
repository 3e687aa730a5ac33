"""``ReplyStream``: ``async with agent.stream(inputs) as reply: async for event in reply``."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Awaitable, Callable
from typing import TypeAlias

import trio

from .._core.concurrency import reraise_unwrapped
from .._core.handoff import Handoff, HandoffReceiver
from ..event import AgentEvent
from ..message import Msg

__all__ = ["ReplyStream"]

#: Runs the reply with ``consumer`` as its outermost sink, calling ``on_registered`` once
#: ``interrupt()`` reaches it.
RunReply: TypeAlias = Callable[
    [Callable[[AgentEvent | Msg], Awaitable[None]], Callable[[], object]], Awaitable[object]
]

#: Events queued between the reply task and the consumer before the reply waits.
BUFFER = 256
#: Iteration passes a checkpoint at least this often when events are already buffered.
CHECKPOINT_EVERY = 32


class ReplyStream:
    """A reply running in a child task, its events streamed to the consumer.

    Iterate it for the events (the final ``Msg`` is not an event; read :attr:`result` once the
    stream ended, or :attr:`msg`, which is ``None`` until then).  The reply task lives in a
    nursery owned by the ``async with`` block: leaving the block early interrupts the reply (it
    still ends with exactly one INTERRUPTED end).  An error of the reply is raised when the
    block exits, after its ERROR end event was streamed.

    Events reach a waiting consumer in batches: while the reply task stays runnable its events
    are held, and handed over together once it waits for anything (a socket read, say), ends,
    or has held them for 64 events, 64 scheduling steps or 1 ms; so the consumer's task wakes
    once per batch, not once per model chunk.
    """

    def __init__(self, run_reply: RunReply) -> None:
        self._run_reply = run_reply
        self._stack = contextlib.AsyncExitStack()
        self._handoff: Handoff[AgentEvent] | None = None
        self._done = False
        self._taken = 0
        self._nursery: trio.Nursery | None = None
        self.msg: Msg | None = None
        """The final Msg (``None`` until the reply produced it)."""

    async def __aenter__(self) -> ReplyStream:
        handoff = self._handoff = Handoff[AgentEvent](BUFFER)
        nursery = await self._stack.enter_async_context(trio.open_nursery())
        self._nursery = nursery
        try:
            # start(), not start_soon(): the reply is registered with the agent before the
            # block's body runs, so an agent.interrupt() right away is not lost.
            await nursery.start(self._produce, handoff)
        except BaseException:
            handoff.close_receiver()
            await self._stack.aclose()
            raise
        return self

    async def _produce(
        self,
        handoff: Handoff[AgentEvent],
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async def consume(item: AgentEvent | Msg) -> None:
            if isinstance(item, Msg):
                self.msg = item
                return
            try:
                handoff.put_nowait(item)
            except trio.WouldBlock:
                await handoff.put(item)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the consumer left; the reply still runs its cleanup

        try:
            try:
                run = await self._run_reply(consume, task_status.started)
            finally:
                self._done = True
            final = getattr(run, "final_msg", None)
            if self.msg is None and isinstance(final, Msg):
                # The Msg never reached the consumer (a layer dropped it on the way, or the
                # cleanup budget ran out): the reply still recorded it.
                self.msg = final
        finally:
            handoff.close()

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

    def _opened(self) -> Handoff[AgentEvent]:
        if self._handoff is None:
            raise RuntimeError(
                "the stream is not open: use `async with agent.stream(...) as reply`"
            )
        return self._handoff

    async def __anext__(self) -> AgentEvent:
        handoff = self._handoff
        if handoff is None:
            handoff = self._opened()  # raises
        # Take buffered events without a scheduling round each, but still pass a checkpoint
        # every CHECKPOINT_EVERY events so the consumer stays cancellable and fair.
        self._taken += 1
        if self._taken % CHECKPOINT_EVERY:
            try:
                return handoff.get_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                pass
        try:
            return await handoff.get()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    async def receive(self) -> AgentEvent:
        """The next event; raises ``trio.EndOfChannel`` at the end."""
        return await self._opened().get()

    @property
    def channel(self) -> trio.abc.ReceiveChannel[AgentEvent]:
        """The events as a ``trio.abc.ReceiveChannel`` (``receive()``, ``receive_nowait()``,
        ``async for``); it shares the stream's position."""
        return HandoffReceiver(self._opened())

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
        assert self._handoff is not None
        self._handoff.close_receiver()
        try:
            return bool(await self._stack.__aexit__(exc_type, exc, tb))
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)

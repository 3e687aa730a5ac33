"""What a pipeline offers so that it can go where an agent goes, and the run machinery the
pipelines share: one reply at a time, ``interrupt()``, the exactly-once end and the final Msg.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

import trio

from .._core.concurrency import is_cancellation
from ..agent import Agent, AgentState, AgentTool, ReplyInputs, ReplyStream
from ..event import AgentEvent, tag_agent
from ..message import AssistantMsg, Msg
from ..types import ReplyFinishedReason

__all__ = ["Emit", "PipelineBase", "PipelineProtocol", "parked_on", "participant_sink"]

#: Where a pipeline sends the (tagged) events of its participants.
Emit = Callable[[AgentEvent], Awaitable[None]]


@runtime_checkable
class PipelineProtocol(Protocol):
    """The entry points an :class:`~trioagent.agent.Agent` and every pipeline share.

    ``inputs`` are those of an agent: a Msg, a list of Msgs, ``None``, or a resume event
    (``UserConfirmResultEvent``, ``ExternalExecutionResultEvent``, ``UserInterruptEvent``),
    which a pipeline routes to the participant parked on its ``reply_id``.
    """

    async def reply(
        self,
        inputs: ReplyInputs = None,
        *,
        on_event: Callable[[AgentEvent], Awaitable[None]] | None = None,
    ) -> Msg:
        """Run one reply (or resume a parked one) and return its final Msg."""
        ...

    def stream(self, inputs: ReplyInputs = None) -> ReplyStream:
        """Run one reply in a background task and stream its events."""
        ...

    async def __call__(self, inputs: ReplyInputs = None) -> Msg:
        """Same as ``reply``."""
        ...

    def interrupt(self) -> None:
        """Cancel the running reply, if any."""
        ...


def parked_on(agent: Agent, reply_id: str) -> bool:
    """Whether ``agent`` is parked on the reply ``reply_id``: its own, or that of an agent it
    called as a tool (at any depth), which its own reply routes the answer to."""
    state = agent.state
    awaiting = state.get_awaiting_tool_calls(agent.name)
    if not awaiting:
        return False
    if state.reply_id == reply_id:
        return True
    tools = (agent.toolkit.get_tool(call.name) for call in awaiting)
    return any(isinstance(tool, AgentTool) and tool.waits_on(reply_id) for tool in tools)


def participant_sink(emit: Emit, agent: Agent) -> Emit:
    """``emit`` for ``agent``'s events: each is tagged with the agent's name."""
    name = agent.name

    async def sink(event: AgentEvent) -> None:
        await emit(tag_agent(event, name))

    return sink


class _Serialized:
    """The consumer of one pipeline reply, called by one participant at a time.

    Members of a round run in tasks of their own; their events reach the consumer from those
    tasks directly (a channel into the pipeline's task could not deliver the end events of a
    cancelled round), one call at a time and in the order they happen.
    """

    def __init__(self, consumer: Callable[[AgentEvent | Msg], Awaitable[None]] | None) -> None:
        self._consumer = consumer
        self._lock = trio.StrictFIFOLock()

    async def __call__(self, item: AgentEvent | Msg) -> None:
        if self._consumer is None:
            return
        try:
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()
        try:
            await self._consumer(item)
        finally:
            self._lock.release()


class PipelineBase:
    """``reply`` / ``stream`` / ``__call__`` / ``interrupt`` over a subclass's ``_drive``.

    A subclass implements ``_drive(inputs, emit) -> Msg`` (run or resume the participants)
    and ``_abort(emit) -> Msg | None`` (end every parked participant with a
    ``UserInterruptEvent``; the Msg of the last one to end, the leader or the loop's current
    participant).  ``_abort`` runs after ``interrupt()`` and after an outer cancellation,
    inside a shielded scope bounded by the participants' ``react_config.interrupt_grace``;
    the participants that were replying ended themselves (each with one INTERRUPTED end) when
    the cancellation reached them.
    """

    def __init__(self) -> None:
        self._scope: trio.CancelScope | None = None

    @property
    def participants(self) -> Sequence[Agent]:
        """Every agent of the pipeline, in a fixed order."""
        raise NotImplementedError

    def states(self) -> dict[str, AgentState]:
        """Each participant's state by name (live objects: save them with
        ``trioagent.serialization.dumps(pipeline.states(), dict[str, AgentState])`` or one by
        one in a session store; restore by building the agents with ``state=...``)."""
        return {agent.name: agent.state for agent in self.participants}

    @property
    def is_replying(self) -> bool:
        """Whether a reply of this pipeline is running now."""
        return self._scope is not None

    async def __call__(self, inputs: ReplyInputs = None) -> Msg:
        """Same as :meth:`reply`."""
        return await self.reply(inputs)

    async def reply(
        self,
        inputs: ReplyInputs = None,
        *,
        on_event: Callable[[AgentEvent], Awaitable[None]] | None = None,
    ) -> Msg:
        """Run the pipeline (or resume it) and return its final Msg.

        ``on_event`` is awaited with every participant's events, tagged with the agent they
        came from (:func:`trioagent.event.agent_path`), one call at a time.
        """
        if on_event is not None and not callable(on_event):
            raise TypeError(f"on_event must be an async callable, got {on_event!r}")
        consumer = None
        if on_event is not None:
            callback = on_event

            async def consumer(item: AgentEvent | Msg) -> None:
                if not isinstance(item, Msg):
                    await callback(item)

        return await self._run(inputs, consumer, None)

    def stream(self, inputs: ReplyInputs = None) -> ReplyStream:
        """Run the pipeline in a background task and stream every participant's events;
        ``stream.msg`` is the final Msg once the events ended (see
        :class:`~trioagent.agent.ReplyStream`)."""

        def run(
            consume: Callable[[AgentEvent | Msg], Awaitable[None]],
            registered: Callable[[], object],
        ) -> Awaitable[Msg]:
            return self._run(inputs, consume, registered)

        return ReplyStream(run)

    def interrupt(self) -> None:
        """Cancel the running reply, if any (synchronous, idempotent, from any task).

        Every participant replying ends with one ``ReplyEndEvent(INTERRUPTED)``, every parked
        one is aborted the same way, and ``reply()`` returns the interrupted Msg.
        """
        if self._scope is not None:
            self._scope.cancel()

    async def _run(
        self,
        inputs: ReplyInputs,
        consumer: Callable[[AgentEvent | Msg], Awaitable[None]] | None,
        registered: Callable[[], object] | None,
    ) -> Msg:
        if self._scope is not None:
            raise RuntimeError(f"{type(self).__name__} is already replying; one reply at a time")
        emit = _Serialized(consumer)
        scope = self._scope = trio.CancelScope()
        if registered is not None:
            registered()
        msg: Msg | None = None
        try:
            try:
                with scope:
                    msg = await self._drive(inputs, emit)
            except BaseException as exc:
                if is_cancellation(exc):
                    await self._shielded_abort(emit)
                raise
            if msg is None:  # interrupt()
                msg = await self._shielded_abort(emit)
        finally:
            self._scope = None
        await emit(msg)
        return msg

    async def _shielded_abort(self, emit: Emit) -> Msg:
        grace = max(agent.react_config.interrupt_grace for agent in self.participants)
        with trio.CancelScope(shield=True, deadline=trio.current_time() + 2 * grace):
            # Shielded so parked participants end during a cancellation; bounded by twice the
            # participants' react_config.interrupt_grace (members first, then the leader).
            msg = await self._abort(emit)
        if msg is None:
            agent = self.participants[0]
            msg = AssistantMsg(
                agent.name,
                agent.react_config.interruption_message,
                id=agent.state.reply_id,
                finished_reason=ReplyFinishedReason.INTERRUPTED,
            )
        return msg

    async def _drive(self, inputs: ReplyInputs, emit: Emit) -> Msg:
        raise NotImplementedError

    async def _abort(self, emit: Emit) -> Msg | None:
        raise NotImplementedError

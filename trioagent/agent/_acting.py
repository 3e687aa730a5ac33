"""Acting: tool execution and permissions.

Calls of one round are grouped into batches: adjacent concurrency-safe (or unknown) calls run
together in an acting nursery, and their events cross into the reply's task over a memory
channel; other calls run one after another in the reply's task.  Results are written to the
context in call order.
"""

from __future__ import annotations

import copy
import enum
import functools
import json
import math
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio

from .._core.chain import Chain, Kwargs, Layer
from .._core.concurrency import is_cancellation, reraise_unwrapped
from .._core.copying import deep_copy
from .._core.emit import Emit
from ..event import (
    AgentEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
)
from ..exception import AgentOrientedException
from ..message import (
    TextBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
)
from ..permission import PermissionBehavior, PermissionDecision, PermissionRule
from ..tool import ToolBase, ToolChunk, ToolResponse
from ._as_tool import PARKED_KEY
from ._background import INTERRUPTED_TEXT, Supervisor, wants_background
from ._protocol import ActingItem, AgentLike
from ._reply import Reply, StopReply
from ._results import ResultWriter, chunk_events

__all__ = ["Actor"]


class _Outcome(enum.Enum):
    DONE = "done"
    HITL = "hitl"  # parked: waits for a confirmation or an external result
    INTERRUPTED = "interrupted"
    PENDING = "pending"  # covered by an earlier prompt of the same batch


@attrs.frozen
class _Turn:
    """Orders the permission phase of a concurrent batch's calls.

    The checks themselves run concurrently, but each call acts on its decision (prompt,
    de-duplication against the batch's kept rules) only after the previous call did, so the
    prompts come in call order and "the first of two calls to the same tool prompts" holds
    whatever order Trio schedules the workers in.  Execution stays concurrent.
    """

    previous: trio.Event | None
    mine: trio.Event


class Actor:
    """Runs a round's tool calls through the permission and ``on_acting`` chains.

    Args:
        agent: the agent the hooks see (read for its state, name, permission engine and
            interrupt grace at every call).
        acting_layers: the ``on_acting`` middleware layers, outermost first.
        permission_layers: the ``on_check_permission`` layers, outermost first.
        supervisor: the supervision scope that runs background calls.
        truncate: shortens an over-long result before it is stored.
    """

    def __init__(
        self,
        agent: AgentLike,
        acting_layers: Sequence[Layer[ActingItem]],
        permission_layers: Sequence[Layer[PermissionDecision]],
        supervisor: Supervisor,
        truncate: Callable[[ToolResultBlock], Awaitable[ToolResultBlock]],
    ) -> None:
        self._agent = agent
        self._acting_layers = tuple(acting_layers)
        self._copy_for_hooks = bool(permission_layers)
        self._permission = Chain(permission_layers, self._check_permission_core)
        self._supervisor = supervisor
        self._truncate = truncate

    # -- a round ---------------------------------------------------------------------------------

    async def act(self, reply: Reply, calls: list[ToolCallBlock], emit: Emit[AgentEvent]) -> None:
        """Run one round's executable calls, batch by batch.

        Stops after a batch that asked for confirmation or external execution (the reply
        parks); raises :class:`StopReply` when a call ended interrupted without a cancellation.
        """
        agent = self._agent
        for concurrent, batch in self._batches(reply, calls):
            # A batch of one runs inline: no acting nursery, worker task or channel.
            if concurrent and len(batch) > 1:
                outcomes = await self._run_concurrent(reply, batch, emit)
            else:
                outcomes = []
                writer = ResultWriter(agent.state, agent.name)
                for call in batch:
                    outcome = await self._execute(reply, call, emit, writer, None)
                    outcomes.append(outcome)
                    if outcome in (_Outcome.HITL, _Outcome.INTERRUPTED):
                        break
            if _Outcome.INTERRUPTED in outcomes:
                raise StopReply
            if _Outcome.HITL in outcomes:
                return

    def _batches(
        self, reply: Reply, calls: list[ToolCallBlock]
    ) -> list[tuple[bool, list[ToolCallBlock]]]:
        batches: list[tuple[bool, list[ToolCallBlock]]] = []
        for call in calls:
            tool = reply.tools.get_tool(call.name)
            concurrent = tool is None or bool(tool.is_concurrency_safe)
            if batches and batches[-1][0] == concurrent:
                batches[-1][1].append(call)
            else:
                batches.append((concurrent, [call]))
        return batches

    async def _run_concurrent(
        self, reply: Reply, calls: list[ToolCallBlock], emit: Emit[AgentEvent]
    ) -> list[_Outcome]:
        """Run the calls in an acting nursery; forward their events in arrival order.

        A failing call does not cancel the others; errors are raised together afterwards.  On
        cancellation the workers write their interrupted results, the queued events are
        flushed, and the cancellation propagates.
        """
        agent = self._agent
        writer = ResultWriter(agent.state, agent.name, [c.id for c in calls])
        kept_rules: list[PermissionRule] = []
        outcomes = [_Outcome.DONE] * len(calls)
        errors: list[Exception] = []
        send, recv = trio.open_memory_channel[AgentEvent](math.inf)
        decided = [trio.Event() for _ in calls]

        async def worker(
            index: int, call: ToolCallBlock, out: trio.MemorySendChannel[AgentEvent]
        ) -> None:
            async def worker_emit(event: AgentEvent) -> None:
                # The channel is unbounded, so this never blocks and needs no shield when the
                # worker is unwinding a cancellation.
                out.send_nowait(event)

            turn = _Turn(decided[index - 1] if index else None, decided[index])
            with out:
                try:
                    outcomes[index] = await self._execute(
                        reply, call, worker_emit, writer, kept_rules, turn
                    )
                except Exception as exc:
                    errors.append(exc)
                finally:
                    decided[index].set()

        try:
            async with trio.open_nursery() as nursery:
                for index, call in enumerate(calls):
                    nursery.start_soon(worker, index, call, send.clone())
                send.close()
                async for event in recv:
                    await emit(event)
        except BaseExceptionGroup as group:
            # Workers record their own errors, so the group holds only cancellations: re-raise
            # one plain Cancelled, as a caller's ``except trio.Cancelled`` expects.
            reraise_unwrapped(group)
        finally:
            # The workers are done: store their results (in call order), then hand over the
            # events they queued, within the reply's cleanup budget when cancelled.
            queued: list[AgentEvent] = []
            while True:
                try:
                    queued.append(recv.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
            recv.close()
            writer.flush()
            await reply.hand_over(emit, queued)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ExceptionGroup("One or more tool calls raised an exception", errors)
        return outcomes

    # -- one call --------------------------------------------------------------------------------

    async def _execute(
        self,
        reply: Reply,
        call: ToolCallBlock,
        emit: Emit[AgentEvent],
        writer: ResultWriter,
        kept_rules: list[PermissionRule] | None,
        turn: _Turn | None = None,
    ) -> _Outcome:
        """Validate, check permission, and run (or park) one call; returns its outcome."""
        state = self._agent.state
        try:
            tool, tool_input = reply.tools.validate_call(call, state.tool_context.activated_groups)
        except AgentOrientedException as exc:
            await writer.quick(call, emit, exc.message, ToolResultState.ERROR)
            return _Outcome.DONE

        decision = await self.check_permission(call, tool, tool_input)
        if turn is not None and turn.previous is not None:
            await turn.previous.wait()  # act on decisions in call order (see _Turn)
        behavior = decision.behavior
        if behavior in (PermissionBehavior.ASK, PermissionBehavior.PASSTHROUGH):
            if kept_rules is not None and not decision.bypass_immune:
                for rule in kept_rules:
                    if rule.tool_name == tool.name and await tool.match_rule(
                        rule.rule_content, tool_input
                    ):
                        return _Outcome.PENDING  # an earlier prompt of this batch covers it
                kept_rules.extend(decision.suggested_rules or [])
            call.state = ToolCallState.ASKING
            call.suggested_rules = list(decision.suggested_rules or [])
            await emit(
                RequireUserConfirmEvent(reply_id=state.reply_id, tool_calls=[copy.deepcopy(call)])
            )
            return _Outcome.HITL
        if behavior == PermissionBehavior.DENY:
            await writer.quick(call, emit, decision.message, ToolResultState.DENIED)
            return _Outcome.DONE
        if behavior != PermissionBehavior.ALLOW:
            raise ValueError(f"Invalid permission decision behavior: {behavior!r}")

        if turn is not None:
            turn.mine.set()  # the permission phase is over; the tool runs concurrently
        # The arguments validated above go to the tool as they are (one parse, one
        # validation); a permission decision's rewritten input is validated again by the call.
        validated: Kwargs | None = tool_input
        if decision.updated_input is not None:
            tool_input, validated = decision.updated_input, None
        call.state = ToolCallState.ALLOWED
        await emit(
            ToolResultStartEvent(
                reply_id=state.reply_id, tool_call_id=call.id, tool_call_name=call.name
            )
        )
        if tool.is_external_tool:
            call.state = ToolCallState.SUBMITTED
            await emit(
                RequireExternalExecutionEvent(
                    reply_id=state.reply_id, tool_calls=[copy.deepcopy(call)]
                )
            )
            return _Outcome.HITL
        return await self._run_tool(reply, call, tool, tool_input, emit, writer, validated)

    def acting_chain(
        self,
        reply: Reply,
        tool_call: ToolCallBlock | None = None,
        validated: Kwargs | None = None,
    ) -> Chain[ActingItem]:
        """The ``on_acting`` chain of ``reply`` (its core calls the reply's tools).

        ``validated`` are ``tool_call``'s arguments, already parsed and validated: the core
        passes them to the tool instead of parsing ``tool_call.input`` again, unless a
        middleware replaced the call (``next_handler(tool_call=...)``).
        """
        core = functools.partial(self._acting_core, reply, tool_call, validated)
        return Chain(self._acting_layers, core)

    async def _acting_core(
        self,
        reply: Reply,
        tool_call: ToolCallBlock | None,
        validated: Kwargs | None,
        kwargs: Kwargs,
        emit: Emit[ActingItem],
    ) -> None:
        call: ToolCallBlock = kwargs["tool_call"]
        tool_input = validated if call is tool_call else None
        response = await reply.tools.call_tool(call, self._agent.state, emit, tool_input)
        await emit(response)

    async def _run_tool(
        self,
        reply: Reply,
        call: ToolCallBlock,
        tool: ToolBase,
        tool_input: Kwargs,
        emit: Emit[AgentEvent],
        writer: ResultWriter,
        validated: Kwargs | None,
    ) -> _Outcome:
        """Run the ``on_acting`` chain for one allowed call and write its result
        (``validated``: ``tool_input`` as validated, not rewritten since)."""
        agent = self._agent
        reply_id = agent.state.reply_id
        acting_call = attrs.evolve(call, input=json.dumps(tool_input, ensure_ascii=False))
        response: ToolResponse | None = None

        async def sink(item: ActingItem) -> None:
            nonlocal response
            if isinstance(item, ToolResponse):
                response = item
                return
            if isinstance(item, ToolChunk):
                for event in chunk_events(reply_id, call, item):
                    await emit(event)

        chain = self.acting_chain(reply, acting_call, validated)
        try:
            if wants_background(tool):

                def acting(tool_call: ToolCallBlock, sink: Emit[ActingItem]) -> Awaitable[None]:
                    return chain.run({"tool_call": tool_call}, sink)

                await self._supervisor.run_in_background(acting_call, tool, acting, sink)
            else:
                await chain.run({"tool_call": acting_call}, sink)
        except BaseException as exc:
            if is_cancellation(exc):
                # The interrupted result is stored at once; its events follow within the
                # reply's cleanup budget.
                interrupted = ToolResultBlock(
                    id=call.id,
                    name=call.name,
                    output=[TextBlock(text=INTERRUPTED_TEXT)],
                    state=ToolResultState.INTERRUPTED,
                )
                closing: list[AgentEvent] = [
                    ToolResultTextDeltaEvent(
                        reply_id=reply_id, tool_call_id=call.id, delta=INTERRUPTED_TEXT
                    ),
                    writer.record(call, interrupted),
                ]
                await reply.hand_over(emit, closing)
            raise
        if response is None:
            raise RuntimeError(
                f"the on_acting chain ended without a ToolResponse for call {call.id!r} "
                f"({call.name})"
            )
        if response.metadata.get(PARKED_KEY):
            # An agent called as a tool parked: this call waits for it (see AgentTool).
            call.state = ToolCallState.SUBMITTED
            return _Outcome.HITL
        result = ToolResultBlock(
            id=call.id,
            name=call.name,
            output=list(response.content),
            state=response.state,
            metadata=dict(response.metadata),
        )
        await writer.finish(call, emit, await self._truncate(result))
        if response.state == ToolResultState.INTERRUPTED:
            return _Outcome.INTERRUPTED
        return _Outcome.DONE

    # -- permission ------------------------------------------------------------------------------

    async def check_permission(
        self, call: ToolCallBlock, tool: ToolBase, tool_input: Kwargs
    ) -> PermissionDecision:
        """The ``on_check_permission`` chain; middlewares get deep copies of call and input."""
        if self._copy_for_hooks:
            kwargs = {
                "tool_call": deep_copy(call),
                "tool": tool,
                "tool_input": deep_copy(tool_input),
            }
        else:
            kwargs = {"tool_call": call, "tool": tool, "tool_input": tool_input}
        decision: object = await self._permission.result(kwargs)
        if not isinstance(decision, PermissionDecision):
            raise TypeError(
                f"the on_check_permission chain returned {type(decision).__name__}, "
                "expected a PermissionDecision"
            )
        return decision

    async def _check_permission_core(self, kwargs: Kwargs, emit: Emit[PermissionDecision]) -> None:
        if kwargs["tool_call"].state == ToolCallState.ALLOWED:
            await emit(
                PermissionDecision(
                    behavior=PermissionBehavior.ALLOW,
                    message="Already allowed by user confirmation.",
                )
            )
            return
        tool_input = kwargs["tool_input"]
        decision = await self._agent.permission_engine.check_permission(kwargs["tool"], tool_input)
        if decision.updated_input is tool_input:
            # The engine echoing its input (an allow rule) is no rewrite: a middleware's
            # forwarded replacement reaches the engine, never the execution.
            decision = attrs.evolve(decision, updated_input=None)
        await emit(decision)

"""Acting: tool execution, permissions and human-in-the-loop (reference/agent.md §3.5, §4.2, §5).

Calls of one round are grouped into batches: adjacent concurrency-safe (or unknown) calls run
together in an acting nursery, and their events cross into the reply's task over a memory
channel; other calls run one after another in the reply's task.  Results are written to the
context in call order.
"""

from __future__ import annotations

import copy
import json
import logging
import math
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._core.concurrency import is_cancellation, reraise_unwrapped
from .._core.emit import Emit
from ..event import (
    AgentEvent,
    CustomEvent,
    ExternalExecutionResultEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from ..exception import AgentOrientedException
from ..message import (
    Base64Source,
    DataBlock,
    TextBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
)
from ..permission import PermissionBehavior, PermissionDecision, PermissionRule
from ..tool import ToolChunk, ToolResponse
from . import _background, _compress
from ._run import StopReply

if TYPE_CHECKING:
    from ..tool import ToolBase
    from ._agent import Agent

__all__ = [
    "Supervisor",
    "act",
    "check_incoming_event",
    "check_permission_core",
    "close_unfinished_tool_calls",
    "handle_incoming_event",
]

Supervisor = _background.Supervisor

logger = logging.getLogger("trioagent.agent")

INTERRUPTED_TEXT = (
    "<system-reminder>The tool call has been interrupted by the user.</system-reminder>"
)
ABORTED_TEXT = (
    "<system-reminder>The tool call was not executed because the reply ended with an error."
    "</system-reminder>"
)
DENIED_BY_USER = (
    '<system-reminder>The execution of tool "{name}" is denied by user!</system-reminder>'
)

_DONE, _HITL, _INTERRUPTED, _PENDING = "done", "hitl", "interrupted", "pending"


class ResultWriter:
    """Writes tool results to the context: at once (sequential) or in call order (batch)."""

    def __init__(self, agent: Agent, order: list[str] | None = None) -> None:
        self._agent = agent
        self._order = order
        self._held: dict[str, ToolResultBlock] = {}

    def write(self, call: ToolCallBlock, result: ToolResultBlock) -> None:
        call.state = ToolCallState.FINISHED
        if self._order is None:
            self._agent.state.append_context(self._agent.name, [result])
        else:
            self._held[call.id] = result

    def flush(self) -> None:
        """Append the held results in call order (a concurrent batch is over)."""
        if self._order is None:
            return
        blocks = [self._held.pop(i) for i in self._order if i in self._held]
        if blocks:
            self._agent.state.append_context(self._agent.name, blocks)


# -- a round --------------------------------------------------------------------------------------


async def act(agent: Agent, calls: list[ToolCallBlock], emit: Emit) -> None:
    """Run one round's executable calls, batch by batch.

    Stops after a batch that asked for confirmation or external execution (the reply parks);
    raises :class:`StopReply` when a call ended interrupted without a cancellation.
    """
    for concurrent, batch in _batches(agent, calls):
        if concurrent:
            outcomes = await _run_concurrent(agent, batch, emit)
        else:
            outcomes = []
            writer = ResultWriter(agent)
            for call in batch:
                outcome = await execute_tool_call(agent, call, emit, writer, None)
                outcomes.append(outcome)
                if outcome in (_HITL, _INTERRUPTED):
                    break
        if _INTERRUPTED in outcomes:
            raise StopReply
        if _HITL in outcomes:
            return


def _batches(agent: Agent, calls: list[ToolCallBlock]) -> list[tuple[bool, list[ToolCallBlock]]]:
    batches: list[tuple[bool, list[ToolCallBlock]]] = []
    for call in calls:
        tool = agent.toolkit.get_tool(call.name)
        concurrent = tool is None or bool(tool.is_concurrency_safe)
        if batches and batches[-1][0] == concurrent:
            batches[-1][1].append(call)
        else:
            batches.append((concurrent, [call]))
    return batches


async def _run_concurrent(agent: Agent, calls: list[ToolCallBlock], emit: Emit) -> list[str]:
    """Run the calls in an acting nursery; forward their events in arrival order.

    A failing call does not cancel the others; errors are raised together afterwards.  On
    cancellation the workers write their interrupted results, the queued events are flushed,
    and the cancellation propagates.
    """
    writer = ResultWriter(agent, [c.id for c in calls])
    kept_rules: list[PermissionRule] = []
    outcomes: list[str] = [_DONE] * len(calls)
    errors: list[BaseException] = []
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
                outcomes[index] = await execute_tool_call(
                    agent, call, worker_emit, writer, kept_rules, turn
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
        # Workers record their own errors, so the group holds only cancellations: re-raise one
        # plain Cancelled, as a caller's ``except trio.Cancelled`` expects.
        reraise_unwrapped(group)
    finally:
        with trio.CancelScope(shield=True) as cleanup:
            # Shielded to flush what the cancelled workers reported; bounded by
            # react_config.interrupt_grace.
            cleanup.deadline = trio.current_time() + agent.react_config.interrupt_grace
            while True:
                try:
                    event = recv.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
                await emit(event)
            recv.close()
            writer.flush()
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup("One or more tool calls raised an exception", errors)  # type: ignore[type-var]
    return outcomes


# -- one call ------------------------------------------------------------------------------------


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


async def execute_tool_call(
    agent: Agent,
    call: ToolCallBlock,
    emit: Emit,
    writer: ResultWriter,
    kept_rules: list[PermissionRule] | None,
    turn: _Turn | None = None,
) -> str:
    """Validate, check permission, and run (or park) one call; returns its outcome."""
    try:
        tool, tool_input = agent.toolkit.validate_call(
            call, agent.state.tool_context.activated_groups
        )
    except AgentOrientedException as exc:
        await quick_result(agent, call, emit, writer, exc.message, ToolResultState.ERROR)
        return _DONE

    decision = await check_permission(agent, call, tool, tool_input)
    if turn is not None and turn.previous is not None:
        await turn.previous.wait()  # act on decisions in call order (see _Turn)
    behavior = decision.behavior
    if behavior in (PermissionBehavior.ASK, PermissionBehavior.PASSTHROUGH):
        if kept_rules is not None and not decision.bypass_immune:
            for rule in kept_rules:
                if rule.tool_name == tool.name and await tool.match_rule(
                    rule.rule_content, tool_input
                ):
                    return _PENDING  # an earlier prompt of this batch covers it
            kept_rules.extend(decision.suggested_rules or [])
        call.state = ToolCallState.ASKING
        call.suggested_rules = list(decision.suggested_rules or [])
        await emit(
            RequireUserConfirmEvent(reply_id=agent.state.reply_id, tool_calls=[copy.deepcopy(call)])
        )
        return _HITL
    if behavior == PermissionBehavior.DENY:
        await quick_result(agent, call, emit, writer, decision.message, ToolResultState.DENIED)
        return _DONE
    if behavior != PermissionBehavior.ALLOW:
        raise ValueError(f"Invalid permission decision behavior: {behavior!r}")

    if turn is not None:
        turn.mine.set()  # the permission phase is over; the tool runs concurrently
    if decision.updated_input is not None:
        tool_input = decision.updated_input
    call.state = ToolCallState.ALLOWED
    await emit(
        ToolResultStartEvent(
            reply_id=agent.state.reply_id, tool_call_id=call.id, tool_call_name=call.name
        )
    )
    if tool.is_external_tool:
        call.state = ToolCallState.SUBMITTED
        await emit(
            RequireExternalExecutionEvent(
                reply_id=agent.state.reply_id, tool_calls=[copy.deepcopy(call)]
            )
        )
        return _HITL
    return await run_tool(agent, call, tool, tool_input, emit, writer)


async def run_tool(
    agent: Agent,
    call: ToolCallBlock,
    tool: ToolBase,
    tool_input: dict[str, Any],
    emit: Emit,
    writer: ResultWriter,
) -> str:
    """Run the ``on_acting`` chain for one allowed call and write its result."""
    acting_call = attrs.evolve(call, input=json.dumps(tool_input, ensure_ascii=False))
    response: ToolResponse | None = None

    async def sink(item: Any) -> None:
        nonlocal response
        if isinstance(item, ToolResponse):
            response = item
            return
        if isinstance(item, ToolChunk):
            for event in chunk_events(agent, call, item):
                await emit(event)

    try:
        if _background.wants_background(tool):
            await _background.run_in_background(agent, acting_call, tool, sink)
        else:
            await agent._acting_chain.run({"tool_call": acting_call}, sink)
    except BaseException as exc:
        if is_cancellation(exc):
            with trio.CancelScope(shield=True) as cleanup:
                # Shielded so the interrupted result is recorded while cancelled; bounded by
                # react_config.interrupt_grace.
                cleanup.deadline = trio.current_time() + agent.react_config.interrupt_grace
                await emit(
                    ToolResultTextDeltaEvent(
                        reply_id=agent.state.reply_id, tool_call_id=call.id, delta=INTERRUPTED_TEXT
                    )
                )
                await write_result(
                    agent,
                    call,
                    emit,
                    writer,
                    ToolResultBlock(
                        id=call.id,
                        name=call.name,
                        output=[TextBlock(text=INTERRUPTED_TEXT)],
                        state=ToolResultState.INTERRUPTED,
                    ),
                )
        raise
    if response is None:
        raise RuntimeError(
            f"the on_acting chain ended without a ToolResponse for call {call.id!r} ({call.name})"
        )
    result = ToolResultBlock(
        id=call.id,
        name=call.name,
        output=list(response.content),
        state=response.state,
        metadata=dict(response.metadata),
    )
    result = await _compress.truncate_tool_result(agent, result)
    await write_result(agent, call, emit, writer, result)
    return _INTERRUPTED if response.state == ToolResultState.INTERRUPTED else _DONE


def chunk_events(agent: Agent, call: ToolCallBlock, chunk: ToolChunk) -> list[AgentEvent]:
    """The delta events of one streamed tool chunk (plus ``mcp_progress`` as a custom event)."""
    reply_id = agent.state.reply_id
    events: list[AgentEvent] = []
    progress = chunk.metadata.get("mcp_progress")
    if progress is not None:
        events.append(
            CustomEvent(
                reply_id=reply_id,
                name="mcp_progress",
                value={
                    "progress": progress,
                    "reply_id": reply_id,
                    "tool_call_id": call.id,
                },
            )
        )
    events.extend(output_events(reply_id, call.id, chunk.content))
    return events


def output_events(
    reply_id: str, call_id: str, output: str | list[TextBlock | DataBlock]
) -> list[AgentEvent]:
    if isinstance(output, str):
        return [ToolResultTextDeltaEvent(reply_id=reply_id, tool_call_id=call_id, delta=output)]
    events: list[AgentEvent] = []
    for block in output:
        if isinstance(block, TextBlock):
            events.append(
                ToolResultTextDeltaEvent(reply_id=reply_id, tool_call_id=call_id, delta=block.text)
            )
        else:
            source = block.source
            data, url = (
                (source.data, None) if isinstance(source, Base64Source) else (None, source.url)
            )
            events.append(
                ToolResultDataDeltaEvent(
                    reply_id=reply_id,
                    tool_call_id=call_id,
                    block_id=block.id,
                    media_type=source.media_type,
                    data=data,
                    url=url,
                )
            )
    return events


async def write_result(
    agent: Agent, call: ToolCallBlock, emit: Emit, writer: ResultWriter, result: ToolResultBlock
) -> None:
    """Store a result (finishing the call) and emit its end event."""
    if result.finished_at is None:
        from .._core.ids import generate_timestamp

        result.finished_at = generate_timestamp()
    writer.write(call, result)
    await emit(
        ToolResultEndEvent(
            reply_id=agent.state.reply_id,
            tool_call_id=call.id,
            state=result.state,
            metadata=dict(result.metadata),
        )
    )


async def quick_result(
    agent: Agent,
    call: ToolCallBlock,
    emit: Emit,
    writer: ResultWriter,
    text: str,
    state: ToolResultState,
) -> None:
    """A result decided without running the tool: START, one text delta, END."""
    reply_id = agent.state.reply_id
    await emit(
        ToolResultStartEvent(reply_id=reply_id, tool_call_id=call.id, tool_call_name=call.name)
    )
    await emit(ToolResultTextDeltaEvent(reply_id=reply_id, tool_call_id=call.id, delta=text))
    await write_result(
        agent,
        call,
        emit,
        writer,
        ToolResultBlock(id=call.id, name=call.name, output=text, state=state),
    )


# -- permission -----------------------------------------------------------------------------------


async def check_permission(
    agent: Agent, call: ToolCallBlock, tool: ToolBase, tool_input: dict[str, Any]
) -> PermissionDecision:
    """The ``on_check_permission`` chain; middlewares get deep copies of call and input."""
    if agent._permission_hooks:
        kwargs = {
            "tool_call": copy.deepcopy(call),
            "tool": tool,
            "tool_input": copy.deepcopy(tool_input),
        }
    else:
        kwargs = {"tool_call": call, "tool": tool, "tool_input": tool_input}
    decision = await agent._permission_chain.result(kwargs)
    if not isinstance(decision, PermissionDecision):
        raise TypeError(
            f"the on_check_permission chain returned {type(decision).__name__}, "
            "expected a PermissionDecision"
        )
    return decision


async def check_permission_core(agent: Agent, kwargs: dict[str, Any]) -> PermissionDecision:
    if kwargs["tool_call"].state == ToolCallState.ALLOWED:
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW, message="Already allowed by user confirmation."
        )
    tool_input = kwargs["tool_input"]
    decision = await agent.permission_engine.check_permission(kwargs["tool"], tool_input)
    if decision.updated_input is tool_input:
        # The engine echoing its input (an allow rule) is no rewrite: a middleware's forwarded
        # replacement reaches the engine, never the execution (reference/agent.md §7.2).
        decision = attrs.evolve(decision, updated_input=None)
    return decision


# -- park / resume --------------------------------------------------------------------------------


async def check_incoming_event(
    agent: Agent,
    event: UserConfirmResultEvent | ExternalExecutionResultEvent | UserInterruptEvent | None,
) -> bool:
    """Check a resume event against the parked calls; returns whether this is a resume.

    Everything is validated before anything changes, so a bad event leaves the reply parked.

    Raises:
        ValueError: an event while nothing is parked, no event while calls are waiting, ids
            that are not waiting, or two external results for one call.
        jsonschema.ValidationError: an external result whose metadata fails the tool's
            ``metadata_schema``.
    """
    awaiting = agent.state.get_awaiting_tool_calls(agent.name)
    if event is None:
        if awaiting:
            raise ValueError(
                f"Agent is waiting for {len(awaiting)} tool call(s) "
                f"({', '.join(c.name for c in awaiting)}) to be confirmed or executed externally, "
                "but received no event. Resume with a UserConfirmResultEvent or an "
                "ExternalExecutionResultEvent, or abort with a UserInterruptEvent."
            )
        return False
    if isinstance(event, UserConfirmResultEvent):
        asking = {c.id for c in awaiting if c.state == ToolCallState.ASKING}
        if not asking:
            raise ValueError(
                "Received a UserConfirmResultEvent, but no tool call awaits confirmation."
            )
        unknown = [r.tool_call.id for r in event.confirm_results if r.tool_call.id not in asking]
        if unknown:
            raise ValueError(f"Tool call(s) {unknown} are not awaiting confirmation.")
        return True
    if isinstance(event, ExternalExecutionResultEvent):
        submitted = {c.id: c for c in awaiting if c.state == ToolCallState.SUBMITTED}
        if not submitted:
            raise ValueError(
                "Received an ExternalExecutionResultEvent, but no tool call awaits an external result."
            )
        unknown = [r.id for r in event.execution_results if r.id not in submitted]
        if unknown:
            raise ValueError(f"Tool call(s) {unknown} are not awaiting an external result.")
        ids = [r.id for r in event.execution_results]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            # Every call gets exactly one result (DESIGN.md §4 rule 6).
            raise ValueError(f"Tool call(s) {repeated} have more than one result in the event.")
        for result in event.execution_results:
            tool = agent.toolkit.get_tool(submitted[result.id].name)
            if tool is not None:
                await tool.check_external_result(result)
        return True
    raise TypeError(f"unsupported resume event {type(event).__name__}")


async def handle_incoming_event(
    agent: Agent, event: UserConfirmResultEvent | ExternalExecutionResultEvent, emit: Emit
) -> None:
    """Apply a validated resume event to the parked calls (reference/agent.md §5)."""
    last = agent.state._reply_message(agent.name)
    assert last is not None
    calls = {b.id: b for b in last.content if isinstance(b, ToolCallBlock)}
    writer = ResultWriter(agent)
    reply_id = agent.state.reply_id
    if isinstance(event, UserConfirmResultEvent):
        answers = {r.tool_call.id: r for r in event.confirm_results}
        for call_id, call in calls.items():
            answer = answers.get(call_id)
            if answer is None:
                continue
            if answer.confirmed:
                call.state = ToolCallState.ALLOWED
                call.name = answer.tool_call.name
                call.input = answer.tool_call.input
                for rule in answer.rules or []:
                    agent.permission_engine.add_rule(rule)
            else:
                await quick_result(
                    agent,
                    call,
                    emit,
                    writer,
                    DENIED_BY_USER.format(name=call.name),
                    ToolResultState.DENIED,
                )
        return
    for result in event.execution_results:
        call = calls[result.id]
        for item in output_events(reply_id, call.id, result.output):
            await emit(item)
        await write_result(agent, call, emit, writer, copy.deepcopy(result))


def close_calls_left_by_a_snapshot(agent: Agent) -> None:
    """Answer calls that a state saved mid-reply (a per-event checkpoint) left without a result.

    Their reply never ended in this state, so no interrupted result was written: a new reply
    on the restored state writes one for each (silently -- that reply has no consumer any
    more), so no request carries a call without its result (DESIGN.md §4 rule 6).
    """
    calls = agent.state.get_unfinished_tool_calls(agent.name)
    if not calls:
        return
    from .._core.ids import generate_timestamp

    logger.warning(
        "closing %d tool call(s) of reply %s that never ended (a state saved mid-reply)",
        len(calls),
        agent.state.reply_id,
    )
    writer = ResultWriter(agent)
    for call in calls:
        result = ToolResultBlock(
            id=call.id,
            name=call.name,
            output=INTERRUPTED_TEXT,
            state=ToolResultState.INTERRUPTED,
            finished_at=generate_timestamp(),
        )
        writer.write(call, result)


async def close_unfinished_tool_calls(
    agent: Agent, emit: Emit, error: BaseException | None
) -> None:
    """Give every call of the reply message without a result an interrupted one (§4.2)."""
    last = agent.state._reply_message(agent.name)
    if last is None:
        return
    answered = {b.id for b in last.content if isinstance(b, ToolResultBlock)}
    reply_id = agent.state.reply_id
    text = ABORTED_TEXT if error is not None else INTERRUPTED_TEXT
    writer = ResultWriter(agent)
    for call in [b for b in last.content if isinstance(b, ToolCallBlock) and b.id not in answered]:
        if call.state not in (ToolCallState.ALLOWED, ToolCallState.SUBMITTED):
            await emit(
                ToolResultStartEvent(
                    reply_id=reply_id, tool_call_id=call.id, tool_call_name=call.name
                )
            )
        await emit(ToolResultTextDeltaEvent(reply_id=reply_id, tool_call_id=call.id, delta=text))
        await write_result(
            agent,
            call,
            emit,
            writer,
            ToolResultBlock(
                id=call.id, name=call.name, output=text, state=ToolResultState.INTERRUPTED
            ),
        )

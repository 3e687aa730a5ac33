"""Background tools supervised by ``async with agent:``: a call moved to the agent's
supervision nursery, its "running in background" result and handle, and its real result
delivered on the next reasoning step.

Further down: adversarial edge cases of background tools.

Complements ``test_agent_background.py``: races between a background task and the reply
(interrupts, hand-offs, HITL parks), ``handle.cancel()`` racing completion, tools that resist
cancellation, state snapshots while tasks run, degenerate ``background_after`` values, a
thousand tasks with the reply interrupted mid-flight, and the lifecycle of ``async with agent:``.

The invariant checked throughout: every tool call has exactly one result in the context, and a
call answered with the "running in background" placeholder has its real result delivered to the
model exactly once (as a hint) — never for a call answered in the foreground.
"""

from __future__ import annotations

import collections
import functools
import math
from typing import Any

import pytest
import trio
import trio.testing
from agent_kit import (
    ALLOW,
    call,
    calls,
    confirm,
    ends,
    kinds,
    make_agent,
    model_of,
    of_call,
    output_text,
    result_of,
    results,
    run,
    run_and_interrupt,
    text,
    user,
)

from trioagent.agent import Agent, AgentState, BackgroundStatus, BackgroundToolError
from trioagent.event import (
    HintBlockEvent,
    ReplyEndEvent,
    RequireUserConfirmEvent,
    ToolResultTextDeltaEvent,
    UserInterruptEvent,
)
from trioagent.exception import DeveloperOrientedException
from trioagent.message import HintBlock, TextBlock, ToolCallBlock, ToolResultState
from trioagent.middleware import MiddlewareBase
from trioagent.serialization import dumps, loads
from trioagent.testing import SweepRun, cancel_sweep, check_reply_rules
from trioagent.tool import ToolBase, ToolChunk, Toolkit
from trioagent.types import ReplyFinishedReason


class Probe:
    """Counts what the tool bodies did."""

    def __init__(self) -> None:
        self.started = 0
        self.finished = 0
        self.exited = 0


def bg_toolkit(probe: Probe) -> Toolkit:
    """``crunch`` (is_background), ``maybe`` (background_after=5), ``fg`` (plain, sequential)."""
    toolkit = Toolkit()

    async def crunch(n: int, delay: float = 10.0) -> str:
        """Long computation."""
        probe.started += 1
        try:
            await trio.sleep(delay)
            probe.finished += 1
            return f"crunched {n}"
        finally:
            probe.exited += 1

    async def maybe(delay: float, emit: Any) -> str:
        """Sometimes long."""
        probe.started += 1
        try:
            await emit(ToolChunk(content=[TextBlock(text="warming up ")], is_last=False))
            await trio.sleep(delay)
            probe.finished += 1
            return f"maybe after {delay:g}"
        finally:
            probe.exited += 1

    async def fg(delay: float) -> str:
        """Foreground wait."""
        await trio.sleep(delay)
        return "fg done"

    toolkit.register_function(crunch, permission=ALLOW, is_background=True)
    toolkit.register_function(maybe, permission=ALLOW, background_after=5.0)
    toolkit.register_function(fg, permission=ALLOW, is_concurrency_safe=False)
    return toolkit


def hints_in(messages: list[Any]) -> list[str]:
    """The texts of every HintBlock in a request's messages."""
    found = []
    for msg in messages:
        for block in msg.content:
            if isinstance(block, HintBlock):
                hint = block.hint
                found.append(
                    hint
                    if isinstance(hint, str)
                    else "".join(b.text for b in hint if isinstance(b, TextBlock))
                )
    return found


# -- is_background ---------------------------------------------------------------------------------


async def test_background_tool_returns_a_placeholder_at_once(autojump_clock: Any) -> None:
    probe = Probe()
    agent = make_agent(
        [calls(call("b1", "crunch", n=7)), text("started it"), text("got the result")],
        bg_toolkit(probe),
    )
    async with agent:
        start = trio.current_time()
        msg, events = await run(agent, user())
        assert trio.current_time() == start  # the reply did not wait for the tool
        assert msg.get_text_content() == "started it"
        assert ends(events)[0].finished_reason == ReplyFinishedReason.COMPLETED

        placeholder = result_of(agent, "b1")
        assert placeholder.state == ToolResultState.SUCCESS
        assert "running in background (id=b1)" in output_text(placeholder)
        # The stream shows the same text the model reads.
        deltas = [
            e.delta
            for e in events
            if isinstance(e, ToolResultTextDeltaEvent) and e.tool_call_id == "b1"
        ]
        assert deltas == [output_text(placeholder)]
        seen = model_of(agent).requests[1].messages
        assert any("running in background" in str(b) for m in seen for b in m.content)

        handle = agent.background_tasks["b1"]
        assert handle.status == BackgroundStatus.RUNNING
        assert handle.result is None
        assert probe.started == 1

        result = await handle.wait()
        assert trio.current_time() - start == pytest.approx(10.0)
        assert result.state == ToolResultState.SUCCESS
        assert result.text() == "crunched 7"
        assert handle.status == BackgroundStatus.SUCCESS

        # The next reply's reasoning step gets the result as a hint.
        msg, events = await run(agent, user("and?"))
        assert msg.get_text_content() == "got the result"
        hint_events = [e for e in events if isinstance(e, HintBlockEvent)]
        assert len(hint_events) == 1
        assert kinds(events).index("HINT_BLOCK") < kinds(events).index("MODEL_CALL_START")
        delivered = hints_in(model_of(agent).requests[2].messages)
        assert len(delivered) == 1
        assert "Tool 'crunch' running in background (id=b1) has completed" in delivered[0]
        assert "crunched 7" in delivered[0]

        # Delivered once only.
        model_of(agent).add_steps(text("nothing new"))
        _, events = await run(agent, user("more?"))
        assert [e for e in events if isinstance(e, HintBlockEvent)] == []
    model_of(agent).assert_consumed()


async def test_result_is_delivered_on_the_next_reasoning_step_of_the_same_reply(
    autojump_clock: Any,
) -> None:
    probe = Probe()
    agent = make_agent(
        [
            calls(call("b1", "crunch", n=1, delay=3.0)),
            calls(call("f1", "fg", delay=5.0)),  # the background task finishes meanwhile
            text("done"),
        ],
        bg_toolkit(probe),
    )
    async with agent:
        msg, events = await run(agent, user())
    assert msg.get_text_content() == "done"
    requests = model_of(agent).requests
    assert hints_in(requests[1].messages) == []
    (delivered,) = hints_in(requests[2].messages)
    assert "crunched 1" in delivered
    hint_at = kinds(events).index("HINT_BLOCK")
    f1_end = max(i for i, e in enumerate(events) if getattr(e, "tool_call_id", "") == "f1")
    third_model_call = [i for i, k in enumerate(kinds(events)) if k == "MODEL_CALL_START"][2]
    assert f1_end < hint_at < third_model_call
    check_reply_rules(agent.state, agent.name, events)


async def test_handle_cancel_records_one_interrupted_result(autojump_clock: Any) -> None:
    probe = Probe()
    agent = make_agent(
        [calls(call("b1", "crunch", n=1)), text("started"), text("noted")], bg_toolkit(probe)
    )
    async with agent:
        await run(agent, user())
        handle = agent.background_tasks["b1"]
        start = trio.current_time()
        handle.cancel()
        result = await handle.wait()
        assert trio.current_time() == start
        assert result.state == ToolResultState.INTERRUPTED
        assert handle.status == BackgroundStatus.INTERRUPTED
        assert probe.exited == 1
        assert probe.finished == 0
        handle.cancel()  # idempotent
        _, events = await run(agent, user("status?"))
    hint_events = [e for e in events if isinstance(e, HintBlockEvent)]
    assert len(hint_events) == 1
    (delivered,) = hints_in(model_of(agent).requests[2].messages)
    assert "(id=b1) has interrupted" in delivered


async def test_supervisor_wait_result_wakes_when_a_result_arrives(autojump_clock: Any) -> None:
    probe = Probe()
    agent = make_agent(
        [calls(call("b1", "crunch", n=2, delay=4.0)), text("started")], bg_toolkit(probe)
    )
    async with agent:
        start = trio.current_time()
        await run(agent, user())
        await agent._supervisor.wait_result()
        assert trio.current_time() - start == pytest.approx(4.0)
        assert agent.background_tasks["b1"].status == BackgroundStatus.SUCCESS


async def test_a_failing_background_tool_reports_an_error(autojump_clock: Any) -> None:
    toolkit = Toolkit()

    async def flaky(delay: float) -> str:
        """Fails after a while."""
        await trio.sleep(delay)
        raise RuntimeError("disk full")

    toolkit.register_function(flaky, permission=ALLOW, is_background=True)
    agent = make_agent(
        [calls(call("b1", "flaky", delay=2.0)), text("started"), text("noted")], toolkit
    )
    async with agent:
        await run(agent, user())
        result = await agent.background_tasks["b1"].wait()
        assert result.state == ToolResultState.ERROR
        assert "disk full" in result.text()
        assert agent.background_tasks["b1"].status == BackgroundStatus.ERROR
        await run(agent, user("and?"))
    (delivered,) = hints_in(model_of(agent).requests[2].messages)
    assert "(id=b1) has error" in delivered
    assert "disk full" in delivered


# -- background_after ------------------------------------------------------------------------------


async def test_background_after_within_the_window_is_a_normal_result(autojump_clock: Any) -> None:
    probe = Probe()
    agent = make_agent([calls(call("m1", "maybe", delay=1.0)), text("done")], bg_toolkit(probe))
    async with agent:
        start = trio.current_time()
        _, events = await run(agent, user())
        assert trio.current_time() - start == pytest.approx(1.0)
    stored = result_of(agent, "m1")
    assert output_text(stored) == "warming up maybe after 1"
    assert "background" not in output_text(stored)
    assert dict(agent.background_tasks) == {}
    assert of_call(events, "m1") == [
        "TOOL_RESULT_START",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_END",
    ]


async def test_background_after_past_the_window_hands_off(autojump_clock: Any) -> None:
    probe = Probe()
    agent = make_agent(
        [calls(call("m1", "maybe", delay=20.0)), text("waiting"), text("thanks")],
        bg_toolkit(probe),
    )
    async with agent:
        start = trio.current_time()
        _, events = await run(agent, user())
        assert trio.current_time() - start == pytest.approx(5.0)
        placeholder = result_of(agent, "m1")
        assert "running in background (id=m1) for over 5s" in output_text(placeholder)
        # The foreground part streamed live, then the placeholder.
        deltas = [
            e.delta
            for e in events
            if isinstance(e, ToolResultTextDeltaEvent) and e.tool_call_id == "m1"
        ]
        assert deltas[0] == "warming up "
        assert "running in background" in deltas[1]
        handle = agent.background_tasks["m1"]
        assert handle.status == BackgroundStatus.RUNNING
        result = await handle.wait()
        assert trio.current_time() - start == pytest.approx(20.0)
        assert result.text() == "warming up maybe after 20"
        await run(agent, user("done yet?"))
    (delivered,) = hints_in(model_of(agent).requests[2].messages)
    assert "maybe after 20" in delivered
    assert probe.started == 1  # one task throughout, never restarted


async def test_interrupt_in_the_foreground_window_interrupts_the_call_once(
    autojump_clock: Any,
) -> None:
    probe = Probe()
    agent = make_agent([calls(call("m1", "maybe", delay=20.0)), text("next")], bg_toolkit(probe))
    async with agent:
        msg, events = await run_and_interrupt(agent, user(), after=2.0)
        assert msg is not None
        assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
        await trio.testing.wait_all_tasks_blocked()
        assert probe.exited == 1
        assert probe.finished == 0
        stored = result_of(agent, "m1")
        assert stored.state == ToolResultState.INTERRUPTED
        # The call's interrupted result is in the context; it is not delivered again.
        _, events = await run(agent, user("again"))
        assert [e for e in events if isinstance(e, HintBlockEvent)] == []
        assert hints_in(model_of(agent).requests[1].messages) == []


# -- supervision scope -----------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["crunch", "maybe"])
async def test_background_tool_outside_async_with_is_a_developer_error(
    tool: str, autojump_clock: Any
) -> None:
    probe = Probe()
    arguments = {"n": 1} if tool == "crunch" else {"delay": 1.0}
    agent = make_agent([calls(call("b1", tool, **arguments))], bg_toolkit(probe))
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    with pytest.raises(BackgroundToolError, match="async with agent") as info:
        await agent.reply(user(), on_event=record)
    assert isinstance(info.value, DeveloperOrientedException)
    assert probe.started == 0  # not silently run in the foreground
    assert ends(events)[0].finished_reason == ReplyFinishedReason.ERROR
    assert kinds(events)[-1] == "REPLY_END"
    check_reply_rules(agent.state, agent.name, events)


async def test_leaving_async_with_interrupts_running_tasks(autojump_clock: Any) -> None:
    probe = Probe()
    agent = make_agent(
        [
            calls(call("b1", "crunch", n=1), call("b2", "crunch", n=2), call("b3", "crunch", n=3)),
            text("all started"),
            text("noted"),
        ],
        bg_toolkit(probe),
    )
    start = trio.current_time()
    async with agent:
        await run(agent, user())
        handles = dict(agent.background_tasks)
        assert [h.status for h in handles.values()] == [BackgroundStatus.RUNNING] * 3
    assert trio.current_time() == start
    assert probe.started == probe.exited == 3
    assert probe.finished == 0
    for handle in handles.values():
        assert handle.status == BackgroundStatus.INTERRUPTED
        assert handle.result is not None
        assert handle.result.state == ToolResultState.INTERRUPTED
    # Each reports exactly one interrupted result to the model, on the next reply.
    _, events = await run(agent, user("status?"))
    hint_events = [e for e in events if isinstance(e, HintBlockEvent)]
    assert len(hint_events) == 3
    delivered = hints_in(model_of(agent).requests[2].messages)
    for call_id in ("b1", "b2", "b3"):
        assert sum(f"(id={call_id}) has interrupted" in h for h in delivered) == 1


async def test_a_thousand_background_tools_closed_mid_flight(autojump_clock: Any) -> None:
    count = 1000
    probe = Probe()
    toolkit = bg_toolkit(probe)
    agent = make_agent(
        [
            calls(*[call(f"b{i}", "crunch", n=i, delay=100.0 + i) for i in range(count)]),
            text("started them all"),
            text("noted"),
        ],
        toolkit,
    )
    model_of(agent).context_size = 10_000_000  # no context compression in this test
    async with agent:
        msg, _ = await run(agent, user())
        assert msg.get_text_content() == "started them all"
        # Let some of them finish before closing.
        await trio.sleep(100.5 + count / 2)
        handles = dict(agent.background_tasks)
        assert len(handles) == count
        done_before = sum(h.status == BackgroundStatus.SUCCESS for h in handles.values())
        assert 0 < done_before < count
    assert probe.started == probe.exited == count
    assert probe.finished == done_before
    statuses = [h.status for h in handles.values()]
    assert statuses.count(BackgroundStatus.SUCCESS) == done_before
    assert statuses.count(BackgroundStatus.INTERRUPTED) == count - done_before
    # No task survives the scope.
    assert all(not n.child_tasks for n in trio.lowlevel.current_task().child_nurseries)
    # Every call reports exactly one result to the model.
    _, events = await run(agent, user("report"))
    hint_events = [e for e in events if isinstance(e, HintBlockEvent)]
    assert len(hint_events) == count
    delivered = hints_in(model_of(agent).requests[2].messages)
    interrupted = [h for h in delivered if "has interrupted" in h]
    assert len(interrupted) == count - done_before
    ids = sorted(h.split("(id=")[1].split(")")[0] for h in delivered)
    assert ids == sorted(f"b{i}" for i in range(count))


# -- never backgrounded ----------------------------------------------------------------------------


class StateTool(ToolBase):
    """Receives the agent state; flagged as background, which must be ignored."""

    name = "state_tool"
    description = "Reads the agent state."
    input_schema = {"type": "object", "properties": {}}  # noqa: RUF012
    is_state_injected = True
    is_background = True
    is_concurrency_safe = True

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> Any:
        return ALLOW

    async def call(self, emit: Any, /, **kwargs: Any) -> str:
        await trio.sleep(2.0)
        return f"session {kwargs['_agent_state'].session_id}"


@pytest.mark.parametrize("supervised", [True, False])
async def test_state_injected_tools_are_never_backgrounded(
    supervised: bool, autojump_clock: Any
) -> None:
    toolkit = Toolkit()
    toolkit.add_tool(StateTool())
    agent = make_agent([calls(call("s1", "state_tool")), text("ok")], toolkit)
    start = trio.current_time()
    if supervised:
        async with agent:
            msg, _ = await run(agent, user())
    else:
        msg, _ = await run(agent, user())
    assert trio.current_time() - start == pytest.approx(2.0)
    assert msg.get_text_content() == "ok"
    assert output_text(result_of(agent, "s1")) == f"session {agent.state.session_id}"
    assert dict(agent.background_tasks) == {}


def test_function_tool_rejects_state_injection_with_background() -> None:
    async def both(_agent_state: Any) -> str:
        """Both flags."""
        return ""

    with pytest.raises(ValueError, match="cannot run in the background"):
        Toolkit().register_function(both, is_state_injected=True, is_background=True)


async def test_errors_leave_async_with_agent_unwrapped(autojump_clock: Any) -> None:
    probe = Probe()
    agent = make_agent([calls(call("b1", "crunch", n=1)), text("started")], bg_toolkit(probe))

    async def body_fails() -> None:
        async with agent:
            await run(agent, user())
            raise ValueError("from the body")

    with pytest.raises(ValueError, match="from the body"):
        await body_fails()
    assert agent.background_tasks["b1"].status == BackgroundStatus.INTERRUPTED

    agent = make_agent([calls(call("b1", "crunch", n=1)), text("started")], bg_toolkit(probe))
    caught: list[BaseException] = []
    with trio.move_on_after(1.0):
        try:
            async with agent:
                await run(agent, user())
                await trio.sleep(5.0)
        except trio.Cancelled as exc:  # a plain Cancelled, not a group
            caught.append(exc)
            raise
    assert len(caught) == 1
    assert agent.background_tasks["b1"].status == BackgroundStatus.INTERRUPTED


# == edge cases ====================================================================================
PLACEHOLDER = "running in background"


# -- helpers ---------------------------------------------------------------------------------------


def edge_toolkit(probe: Probe) -> Toolkit:
    """``crunch`` (is_background), ``maybe`` (background_after=5), ``fg`` (plain, sequential),
    ``ask`` (no permission rule: the reply parks for confirmation)."""
    toolkit = Toolkit()

    async def crunch(n: int, delay: float = 10.0) -> str:
        """Long computation."""
        probe.started += 1
        try:
            await trio.sleep(delay)
            probe.finished += 1
            return f"crunched {n}"
        finally:
            probe.exited += 1

    async def maybe(delay: float) -> str:
        """Sometimes long."""
        probe.started += 1
        try:
            await trio.sleep(delay)
            probe.finished += 1
            return f"maybe after {delay:g}"
        finally:
            probe.exited += 1

    async def fg(delay: float) -> str:
        """Foreground wait."""
        await trio.sleep(delay)
        return "fg done"

    async def ask(x: str) -> str:
        """Needs the user's confirmation."""
        return f"ask:{x}"

    toolkit.register_function(crunch, permission=ALLOW, is_background=True)
    toolkit.register_function(maybe, permission=ALLOW, background_after=5.0)
    toolkit.register_function(fg, permission=ALLOW, is_concurrency_safe=False)
    toolkit.register_function(ask, is_concurrency_safe=True)
    return toolkit


def hint_text(block: HintBlock) -> str:
    hint = block.hint
    if isinstance(hint, str):
        return hint
    return "".join(b.text for b in hint if isinstance(b, TextBlock))


def delivered(agent: Agent) -> list[str]:
    """The call ids of the background results delivered into the context, in order."""
    found = []
    for msg in agent.state.context:
        for block in msg.content:
            if isinstance(block, HintBlock) and "(id=" in hint_text(block):
                found.append(hint_text(block).split("(id=")[1].split(")")[0])
    return found


def hint_for(agent: Agent, call_id: str) -> str:
    (found,) = [
        hint_text(b)
        for m in agent.state.context
        for b in m.content
        if isinstance(b, HintBlock) and f"(id={call_id})" in hint_text(b)
    ]
    return found


def placeholders(agent: Agent) -> list[str]:
    """The call ids answered with the "running in background" placeholder."""
    return [r.id for r in results(agent) if PLACEHOLDER in output_text(r)]


def assert_exactly_once(agent: Agent) -> None:
    """Each placeholder call has a finished handle and is delivered at most once (exactly once
    when its handle says so); a call answered in the foreground is never delivered as a hint."""
    counts = collections.Counter(delivered(agent))
    background = set(placeholders(agent))
    handles = agent.background_tasks
    for call_id in background:
        handle = handles[call_id]
        assert handle.result is not None, call_id
        assert counts[call_id] == (1 if handle.delivered else 0), (call_id, handle)
    for result in results(agent):
        if result.id not in background:
            assert counts[result.id] == 0, result.id
            assert result.id not in handles, result.id


async def recorded(agent: Agent, inputs: Any = None, on_event: Any = None) -> tuple[Any, list[Any]]:
    """``agent.reply`` recording the events; ``on_event`` runs after each one is recorded."""
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)
        if on_event is not None:
            await on_event(event)

    msg = await agent.reply(inputs, on_event=record)
    return msg, events


# -- results racing the reasoning steps --------------------------------------------------------------


async def test_two_results_between_two_reasoning_steps_arrive_once_in_finishing_order(
    autojump_clock: Any,
) -> None:
    probe = Probe()
    agent = make_agent(
        [
            calls(call("b1", "crunch", n=1, delay=4.0), call("b2", "crunch", n=2, delay=2.0)),
            calls(call("f1", "fg", delay=5.0)),  # both finish while this runs
            text("done"),
            text("nothing new"),
        ],
        edge_toolkit(probe),
    )
    async with agent:
        _, events = await run(agent, user())
        # Oldest result first: b2 finished before b1, whatever the call order was.
        assert delivered(agent) == ["b2", "b1"]
        hints = [e for e in events if isinstance(e, HintBlockEvent)]
        assert len(hints) == 2
        third_request = model_of(agent).requests[2].messages
        assert sum("(id=b1)" in str(m.content) for m in third_request) == 1
        assert sum("(id=b2)" in str(m.content) for m in third_request) == 1
        check_reply_rules(agent.state, agent.name, events)
        _, events = await run(agent, user("more?"))
        assert [e for e in events if isinstance(e, HintBlockEvent)] == []
    assert delivered(agent) == ["b2", "b1"]
    assert_exactly_once(agent)
    model_of(agent).assert_consumed()


async def test_results_finishing_at_the_same_instant_are_each_delivered_once(
    autojump_clock: Any,
) -> None:
    probe = Probe()
    agent = make_agent(
        [
            calls(*[call(f"b{i}", "crunch", n=i, delay=3.0) for i in range(5)]),
            calls(call("f1", "fg", delay=5.0)),
            text("done"),
        ],
        edge_toolkit(probe),
    )
    async with agent:
        _, events = await run(agent, user())
    assert sorted(delivered(agent)) == [f"b{i}" for i in range(5)]
    assert probe.finished == 5
    assert_exactly_once(agent)
    check_reply_rules(agent.state, agent.name, events)


async def test_background_result_finishing_at_the_instant_of_an_interrupt(
    autojump_clock: Any,
) -> None:
    probe = Probe()
    agent = make_agent(
        [
            calls(call("b1", "crunch", n=1, delay=3.0)),
            calls(call("f1", "fg", delay=10.0)),
            text("noted"),
        ],
        edge_toolkit(probe),
    )
    async with agent:
        # b1 ends at t=3 exactly when the reply (waiting on f1) is interrupted.
        msg, events = await run_and_interrupt(agent, user(), after=3.0)
        assert msg is not None
        assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
        check_reply_rules(agent.state, agent.name, events)
        assert result_of(agent, "f1").state == ToolResultState.INTERRUPTED
        assert PLACEHOLDER in output_text(result_of(agent, "b1"))
        handle = agent.background_tasks["b1"]
        assert handle.status == BackgroundStatus.SUCCESS
        assert probe.finished == 1
        # Not lost with the interrupted reply: delivered once, on the next reply.
        _, events = await run(agent, user("and?"))
        assert len([e for e in events if isinstance(e, HintBlockEvent)]) == 1
    assert delivered(agent) == ["b1"]
    assert "crunched 1" in hint_for(agent, "b1")
    assert_exactly_once(agent)


@pytest.mark.parametrize("delay", [2.999, 3.0, 3.001])
async def test_windowed_call_finishing_around_an_interrupt_has_one_foreground_result(
    delay: float, autojump_clock: Any
) -> None:
    probe = Probe()
    agent = make_agent(
        [calls(call("m1", "maybe", delay=delay)), text("x"), text("y")], edge_toolkit(probe)
    )
    async with agent:
        msg, events = await run_and_interrupt(agent, user(), after=3.0)
        assert msg is not None
        check_reply_rules(agent.state, agent.name, events)
        await trio.testing.wait_all_tasks_blocked()
        assert probe.exited == 1  # the task ended either way
        result = result_of(agent, "m1")
        assert result.state in (ToolResultState.SUCCESS, ToolResultState.INTERRUPTED)
        if delay < 3.0:
            assert output_text(result) == f"maybe after {delay:g}"
        if delay > 3.0:
            assert result.state == ToolResultState.INTERRUPTED
        assert dict(agent.background_tasks) == {}
        await run(agent, user("again"))
    assert delivered(agent) == []  # answered in the foreground: never a hint too
    assert_exactly_once(agent)


async def test_cancel_sweep_with_results_waiting_keeps_exactly_once_delivery(
    autojump_clock: Any,
) -> None:
    """Cancel the reply at every schedule point while two results wait for delivery."""

    def build() -> Agent:
        return make_agent(
            [
                calls(
                    call("b1", "crunch", n=1, delay=1.0),
                    call("b2", "crunch", n=2, delay=1.0),
                    call("m1", "maybe", delay=1.0),
                ),
                calls(call("f1", "fg", delay=5.0)),
                text("done"),
            ],
            edge_toolkit(Probe()),
        )

    def check(run: SweepRun) -> None:
        assert_exactly_once(run.agent)

    for mode in ("interrupt", "outer"):
        report = await cancel_sweep(build, user(), mode=mode, supervised=True, check=check)
        assert report.outcomes["completed"] >= 1
        assert report.outcomes["interrupted"] >= 1


# -- human in the loop -------------------------------------------------------------------------------


async def test_result_finishing_while_parked_is_delivered_after_the_resume(
    autojump_clock: Any,
) -> None:
    probe = Probe()
    agent = make_agent(
        [calls(call("b1", "crunch", n=1, delay=3.0), call("a1", "ask", x="1")), text("done")],
        edge_toolkit(probe),
    )
    async with agent:
        _, events = await run(agent, user())
        check_reply_rules(agent.state, agent.name, events)
        assert [e for e in events if isinstance(e, ReplyEndEvent)] == []  # parked
        (prompt,) = [e for e in events if isinstance(e, RequireUserConfirmEvent)]
        await trio.sleep(5.0)
        assert agent.background_tasks["b1"].status == BackgroundStatus.SUCCESS
        assert delivered(agent) == []  # nothing touches a parked context
        msg, events = await run(agent, confirm(*prompt.tool_calls))
        assert msg.get_text_content() == "done"
        check_reply_rules(agent.state, agent.name, events)
    assert delivered(agent) == ["b1"]
    assert output_text(result_of(agent, "a1")) == "ask:1"
    assert_exactly_once(agent)


async def test_aborting_a_parked_reply_keeps_the_background_result_for_later(
    autojump_clock: Any,
) -> None:
    probe = Probe()
    agent = make_agent(
        [calls(call("b1", "crunch", n=1, delay=3.0), call("a1", "ask", x="1")), text("fresh")],
        edge_toolkit(probe),
    )
    async with agent:
        await run(agent, user())
        await trio.sleep(5.0)
        msg, events = await run(agent, UserInterruptEvent())
        assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
        check_reply_rules(agent.state, agent.name, events)
        assert result_of(agent, "a1").state == ToolResultState.INTERRUPTED
        assert delivered(agent) == []
        await run(agent, user("start over"))
    assert delivered(agent) == ["b1"]
    assert_exactly_once(agent)


# -- handles -----------------------------------------------------------------------------------------


def gated_toolkit(gate: trio.Event) -> Toolkit:
    toolkit = Toolkit()

    async def gated() -> str:
        """Waits for the gate."""
        await gate.wait()
        return "finished"

    toolkit.register_function(gated, permission=ALLOW, is_background=True)
    return toolkit


@pytest.mark.parametrize("first", ["finish", "cancel"])
async def test_handle_cancel_racing_completion_records_one_result(
    first: str, autojump_clock: Any
) -> None:
    gate = trio.Event()
    agent = make_agent([calls(call("g1", "gated")), text("s"), text("n")], gated_toolkit(gate))
    async with agent:
        await run(agent, user())
        handle = agent.background_tasks["g1"]
        # Both in the same scheduling step: the task is woken by one and hit by the other.
        if first == "finish":
            gate.set()
            handle.cancel()
        else:
            handle.cancel()
            gate.set()
        result = await handle.wait()
        expected = ToolResultState.SUCCESS if first == "finish" else ToolResultState.INTERRUPTED
        assert result.state == expected
        handle.cancel()  # after the end: no effect
        assert handle.result is result
        assert await handle.wait() is result
        await run(agent, user())
    assert delivered(agent) == ["g1"]
    assert ("has completed" in hint_for(agent, "g1")) == (first == "finish")
    assert_exactly_once(agent)


async def test_handle_wait_from_other_tasks_across_the_close(autojump_clock: Any) -> None:
    probe = Probe()
    agent = make_agent(
        [calls(call("b1", "crunch", n=1, delay=30.0)), text("s")], edge_toolkit(probe)
    )
    got: list[Any] = []

    async def waiter(handle: Any) -> None:
        got.append(await handle.wait())

    async with trio.open_nursery() as nursery:
        async with agent:
            await run(agent, user())
            handle = agent.background_tasks["b1"]
            nursery.start_soon(waiter, handle)
            await trio.testing.wait_all_tasks_blocked()
            assert got == []
        await trio.testing.wait_all_tasks_blocked()
        assert len(got) == 1  # woken by the close
        nursery.start_soon(waiter, handle)  # a late waiter returns at once
    assert len(got) == 2
    assert got[0] is got[1] is handle.result
    assert handle.status == BackgroundStatus.INTERRUPTED
    assert probe.exited == 1


async def test_handle_cancel_in_the_foreground_window_gives_one_interrupted_result(
    autojump_clock: Any,
) -> None:
    probe = Probe()
    agent = make_agent(
        [calls(call("m1", "maybe", delay=20.0)), text("after"), text("later")],
        edge_toolkit(probe),
    )
    async with agent:
        events: list[Any] = []

        async def reply() -> None:
            _, found = await recorded(agent, user())
            events.extend(found)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reply)
            await trio.sleep(1.0)
            # The call is still in its foreground window, yet its handle is already listed.
            handle = agent.background_tasks["m1"]
            assert handle.status == BackgroundStatus.RUNNING
            handle.cancel()
        check_reply_rules(agent.state, agent.name, events)
        assert result_of(agent, "m1").state == ToolResultState.INTERRUPTED
        assert handle.status == BackgroundStatus.INTERRUPTED
        assert probe.exited == 1
        assert "m1" not in agent.background_tasks
        await run(agent, user("again"))
    assert delivered(agent) == []  # recorded in the foreground, never delivered again
    assert_exactly_once(agent)


# -- failing and stubborn tools ----------------------------------------------------------------------


async def test_failing_background_tools_leave_the_agent_usable(autojump_clock: Any) -> None:
    toolkit = edge_toolkit(Probe())

    async def at_once() -> str:
        """Fails before its first checkpoint."""
        raise LookupError("no such index")

    def sync_fail() -> str:
        """A sync tool that fails."""
        raise ValueError("bad input")

    async def later(delay: float) -> str:
        """Fails after a while."""
        await trio.sleep(delay)
        raise RuntimeError("disk full")

    toolkit.register_function(at_once, permission=ALLOW, is_background=True)
    toolkit.register_function(sync_fail, permission=ALLOW, is_background=True)
    toolkit.register_function(later, permission=ALLOW, background_after=1.0)
    agent = make_agent(
        [
            calls(call("e1", "at_once"), call("e2", "sync_fail"), call("e3", "later", delay=2.0)),
            text("started"),
            calls(call("b1", "crunch", n=5, delay=1.0)),
            text("still working"),
            text("all reported"),
        ],
        toolkit,
    )
    async with agent:
        start = trio.current_time()
        msg, events = await run(agent, user())
        assert trio.current_time() - start == pytest.approx(1.0)  # e3's window
        assert msg.finished_reason == ReplyFinishedReason.COMPLETED
        check_reply_rules(agent.state, agent.name, events)
        # The model got placeholders; the failures are results, not a crashed reply.
        assert sorted(placeholders(agent)) == ["e1", "e2", "e3"]
        for call_id in ("e1", "e2", "e3"):
            result = await agent.background_tasks[call_id].wait()
            assert result.state == ToolResultState.ERROR
        _, events = await run(agent, user("next"))
        check_reply_rules(agent.state, agent.name, events)
        await agent.background_tasks["b1"].wait()
        await run(agent, user("report"))
    assert "no such index" in hint_for(agent, "e1")
    assert "bad input" in hint_for(agent, "e2")
    assert "disk full" in hint_for(agent, "e3")
    assert "has error" in hint_for(agent, "e3")
    assert "crunched 5" in hint_for(agent, "b1")
    assert_exactly_once(agent)
    model_of(agent).assert_consumed()


def stubborn_toolkit(log: list[str]) -> Toolkit:
    toolkit = Toolkit()

    async def stubborn() -> str:
        """Swallows one cancellation, then finishes 30 s of shielded work."""
        try:
            await trio.sleep(100.0)
        except trio.Cancelled:
            log.append("swallowed")
        with trio.CancelScope(shield=True):
            await trio.sleep(30.0)
        log.append("finished")
        return "finished anyway"

    toolkit.register_function(stubborn, permission=ALLOW, is_background=True)
    return toolkit


async def test_close_waits_for_a_tool_that_resists_cancellation(autojump_clock: Any) -> None:
    """No task outlives ``async with agent:``: the close has no deadline of its own (not even
    ``react_config.interrupt_grace``), so it lasts as long as the tool ignores cancellation."""
    log: list[str] = []
    agent = make_agent(
        [calls(call("s1", "stubborn")), text("started"), text("noted")], stubborn_toolkit(log)
    )
    async with agent:
        await run(agent, user())
        await trio.sleep(1.0)
        closing = trio.current_time()
    assert trio.current_time() - closing == pytest.approx(30.0)
    assert log == ["swallowed", "finished"]
    handle = agent.background_tasks["s1"]
    assert handle.result is not None  # exactly one result, whatever the tool made of it
    assert handle.status in (BackgroundStatus.SUCCESS, BackgroundStatus.INTERRUPTED)
    assert all(not n.child_tasks for n in trio.lowlevel.current_task().child_nurseries)
    await run(agent, user("status?"))
    assert delivered(agent) == ["s1"]
    assert_exactly_once(agent)


async def test_handle_cancel_of_a_tool_that_resists_cancellation(autojump_clock: Any) -> None:
    log: list[str] = []
    agent = make_agent(
        [calls(call("s1", "stubborn")), text("started"), text("noted")], stubborn_toolkit(log)
    )
    async with agent:
        await run(agent, user())
        handle = agent.background_tasks["s1"]
        start = trio.current_time()
        handle.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert handle.status == BackgroundStatus.RUNNING  # still in its shielded work
        result = await handle.wait()
        assert trio.current_time() - start == pytest.approx(30.0)
        assert result.state in (ToolResultState.SUCCESS, ToolResultState.INTERRUPTED)
        await run(agent, user("status?"))
    assert delivered(agent) == ["s1"]
    assert_exactly_once(agent)


# -- state snapshots ---------------------------------------------------------------------------------


async def test_state_saved_while_tasks_run_restores_consistently(autojump_clock: Any) -> None:
    probe = Probe()
    agent = make_agent(
        [
            calls(call("b1", "crunch", n=1, delay=4.0), call("b2", "crunch", n=2, delay=40.0)),
            text("started"),
            text("original continues"),
        ],
        edge_toolkit(probe),
    )
    async with agent:
        await run(agent, user())
        payload = dumps(agent.state)  # both tasks still running
        restored = loads(payload, AgentState)
        assert dumps(restored) == payload
        # The snapshot is consistent: every call has exactly one (placeholder) result.
        check_reply_rules(restored, agent.name, [])
        clone = make_agent(
            [text("restored reply"), text("restored again")], edge_toolkit(probe), state=restored
        )
        async with clone:
            # The tasks belong to the original agent: the clone has no handles.
            assert dict(clone.background_tasks) == {}
            await trio.sleep(5.0)  # b1 finishes (for the original agent)
            msg, events = await run(clone, user("anything new?"))
            assert msg.get_text_content() == "restored reply"
            check_reply_rules(clone.state, clone.name, events)
            assert delivered(clone) == []
        # Leaving the clone's scope touches nothing of the original's.
        assert agent.background_tasks["b2"].status == BackgroundStatus.RUNNING
        await run(agent, user("and the original?"))
        assert delivered(agent) == ["b1"]
    assert agent.background_tasks["b2"].status == BackgroundStatus.INTERRUPTED
    assert probe.started == probe.exited == 2
    assert_exactly_once(agent)
    await run(clone, user("again"))
    check_reply_rules(clone.state, clone.name, [])


# -- degenerate background_after ---------------------------------------------------------------------


@pytest.mark.parametrize("after", [0, 0.0, -1.0, -math.inf, math.nan])
def test_non_positive_background_after_is_rejected(after: float) -> None:
    async def tool() -> str:
        """A tool."""
        return ""

    with pytest.raises(ValueError, match="positive"):
        Toolkit().register_function(tool, background_after=after)


class ZeroWindowTool(ToolBase):
    """``background_after = 0`` as a class attribute (bypasses the constructor's check)."""

    name = "zero"
    description = "Answers at once."
    input_schema = {"type": "object", "properties": {}}  # noqa: RUF012
    is_concurrency_safe = True
    background_after = 0

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> Any:
        return ALLOW

    async def call(self, emit: Any, /, **kwargs: Any) -> str:
        return "instant"


async def test_a_zero_window_delivers_the_result_exactly_once(autojump_clock: Any) -> None:
    toolkit = Toolkit()
    toolkit.add_tool(ZeroWindowTool())
    agent = make_agent([calls(call("z1", "zero")), text("ok"), text("ok again")], toolkit)
    async with agent:
        start = trio.current_time()
        _, events = await run(agent, user())
        assert trio.current_time() == start
        check_reply_rules(agent.state, agent.name, events)
        await run(agent, user())
    direct = output_text(result_of(agent, "z1")) == "instant"
    assert direct or delivered(agent) == ["z1"]
    if not direct:
        assert "instant" in hint_for(agent, "z1")
    assert_exactly_once(agent)


# -- a thousand tasks --------------------------------------------------------------------------------


@pytest.mark.parametrize("interrupt_at", [2, 500, 1000])
async def test_a_thousand_background_calls_with_the_reply_interrupted_mid_flight(
    interrupt_at: int, autojump_clock: Any
) -> None:
    """The ``interrupt_at``-th tool to start interrupts the reply while the others start."""
    count = 1000
    probe = Probe()
    toolkit = Toolkit()
    agents: list[Agent] = []

    async def crunch(n: int) -> str:
        """Long computation."""
        probe.started += 1
        if probe.started == interrupt_at:
            agents[0].interrupt()
        try:
            await trio.sleep(100.0 + n)
            probe.finished += 1
            return f"crunched {n}"
        finally:
            probe.exited += 1

    toolkit.register_function(crunch, permission=ALLOW, is_background=True)
    agent = make_agent(
        [calls(*[call(f"b{i}", "crunch", n=i) for i in range(count)]), text("report")], toolkit
    )
    agents.append(agent)
    model_of(agent).context_size = 10_000_000  # no context compression in this test
    async with agent:
        msg, events = await run(agent, user())
        assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
        check_reply_rules(agent.state, agent.name, events)
        assert len(results(agent)) == count
        running = placeholders(agent)
        assert 0 < len(running) <= count
        # A call interrupted before its hand-off has no handle, and its task ended.
        assert sorted(agent.background_tasks) == sorted(running)
        interrupted = [r for r in results(agent) if r.state == ToolResultState.INTERRUPTED]
        assert len(interrupted) + len(running) == count
        await trio.testing.wait_all_tasks_blocked()
        assert probe.started - probe.exited == len(running)
        await trio.sleep(100.5 + count / 2)  # some finish, the rest are cancelled by the close
    assert probe.started == probe.exited
    assert all(not n.child_tasks for n in trio.lowlevel.current_task().child_nurseries)
    statuses = collections.Counter(h.status for h in agent.background_tasks.values())
    assert statuses[BackgroundStatus.SUCCESS] == probe.finished
    assert sum(statuses.values()) == len(running)
    await run(agent, user("report"))
    assert sorted(delivered(agent)) == sorted(running)
    assert_exactly_once(agent)


# -- the supervision scope ---------------------------------------------------------------------------


async def test_reentering_async_with_agent(autojump_clock: Any) -> None:
    probe = Probe()
    agent = make_agent(
        [
            calls(call("b1", "crunch", n=1, delay=3.0)),
            text("first session"),
            calls(call("b2", "crunch", n=2, delay=3.0)),
            text("second session"),
            text("reported"),
        ],
        edge_toolkit(probe),
    )
    async with agent:
        await run(agent, user())
    assert agent.background_tasks["b1"].status == BackgroundStatus.INTERRUPTED
    async with agent:
        await run(agent, user())  # delivers b1's interrupted result, starts b2
        assert delivered(agent) == ["b1"]
        assert "has interrupted" in hint_for(agent, "b1")
        assert (await agent.background_tasks["b2"].wait()).state == ToolResultState.SUCCESS
        await run(agent, user())
    assert delivered(agent) == ["b1", "b2"]
    # The handles of both sessions stay visible.
    assert sorted(agent.background_tasks) == ["b1", "b2"]
    assert probe.started == probe.exited == 2
    assert_exactly_once(agent)


async def test_nested_async_with_agent_is_refused_without_breaking_the_scope(
    autojump_clock: Any,
) -> None:
    probe = Probe()
    agent = make_agent(
        [calls(call("b1", "crunch", n=1, delay=3.0)), text("started")], edge_toolkit(probe)
    )
    async with agent:
        with pytest.raises(RuntimeError, match="already open"):
            async with agent:
                pass  # pragma: no cover
        await run(agent, user())  # the outer scope still supervises
        assert (await agent.background_tasks["b1"].wait()).state == ToolResultState.SUCCESS
    async with agent:
        pass  # and it can be opened again


async def test_background_call_after_leaving_the_scope_is_a_clear_error(
    autojump_clock: Any,
) -> None:
    probe = Probe()
    agent = make_agent(
        [
            calls(call("b1", "crunch", n=1, delay=3.0)),
            text("started"),
            calls(call("b2", "crunch", n=2)),
        ],
        edge_toolkit(probe),
    )
    async with agent:
        await run(agent, user())
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    with pytest.raises(BackgroundToolError, match="async with agent"):
        await agent.reply(user("again"), on_event=record)
    assert probe.started == 1  # b2 never ran, not even in the foreground
    assert [e.finished_reason for e in events if isinstance(e, ReplyEndEvent)] == [
        ReplyFinishedReason.ERROR
    ]
    check_reply_rules(agent.state, agent.name, events)
    assert delivered(agent) == ["b1"]  # the pending result still reached the model once
    assert_exactly_once(agent)


# -- moved by a middleware ---------------------------------------------------------------------------


class Offload(MiddlewareBase):
    """Moves every call of ``slow`` to the background.

    ``agent.run_in_background`` re-runs the whole ``on_acting`` chain (this middleware included) in
    the supervised task, so the middleware must recognise its own re-entry.
    """

    def __init__(self) -> None:
        self.moving: set[str] = set()

    async def on_acting(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: Any, emit: Any
    ) -> None:
        tool_call: ToolCallBlock = input_kwargs["tool_call"]
        if tool_call.name == "slow" and tool_call.id not in self.moving:
            self.moving.add(tool_call.id)
            await agent.run_in_background(tool_call, emit)
            return
        await next_handler()


def slow_toolkit() -> Toolkit:
    toolkit = Toolkit()

    async def slow(delay: float) -> str:
        """Slow, but not flagged as a background tool."""
        await trio.sleep(delay)
        return f"slow {delay:g}"

    toolkit.register_function(slow, permission=ALLOW)
    return toolkit


async def test_a_middleware_moves_a_call_to_the_background(autojump_clock: Any) -> None:
    agent = make_agent(
        [calls(call("s1", "slow", delay=4.0)), text("started"), text("noted")],
        slow_toolkit(),
        middlewares=[Offload()],
    )
    async with agent:
        start = trio.current_time()
        _, events = await run(agent, user())
        assert trio.current_time() == start
        check_reply_rules(agent.state, agent.name, events)
        assert placeholders(agent) == ["s1"]
        result = await agent.background_tasks["s1"].wait()
        assert result.text() == "slow 4"
        await run(agent, user("done?"))
    assert "slow 4" in hint_for(agent, "s1")
    assert_exactly_once(agent)


async def test_a_middleware_background_request_outside_the_scope_is_an_error(
    autojump_clock: Any,
) -> None:
    agent = make_agent(
        [calls(call("s1", "slow", delay=4.0))], slow_toolkit(), middlewares=[Offload()]
    )
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    with pytest.raises(BackgroundToolError, match="async with agent"):
        await agent.reply(user(), on_event=record)
    assert trio.current_time() == 0.0  # not silently run in the foreground
    check_reply_rules(agent.state, agent.name, events)


# -- found by this hunt, fixed ---------------------------------------------------------------------


async def test_interrupt_during_hint_delivery_loses_no_result(autojump_clock: Any) -> None:
    """Both results are in the context before a slow consumer sees the first hint event."""
    agent = make_agent(
        [
            calls(
                call("b1", "crunch", n=1, delay=1.0),
                call("b2", "crunch", n=2, delay=1.0),
            ),
            text("started both"),
            text("next"),
        ],
        edge_toolkit(Probe()),
    )
    async with agent:
        await run(agent, user())
        await trio.sleep(2.0)

        async def slow_consumer(event: Any) -> None:
            if isinstance(event, HintBlockEvent):
                await trio.sleep(1.0)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(agent.reply, user("and?"), on_event=slow_consumer))
            await trio.sleep(0.5)
            agent.interrupt()
        await run(agent, user("status?"))
    assert sorted(delivered(agent)) == ["b1", "b2"]


async def test_every_wait_result_waiter_wakes(autojump_clock: Any) -> None:
    agent = make_agent(
        [calls(call("b1", "crunch", n=1, delay=4.0)), text("started")], edge_toolkit(Probe())
    )
    woke: list[str] = []
    async with agent:
        await run(agent, user())

        async def waiter(name: str) -> None:
            await agent._supervisor.wait_result()
            woke.append(name)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter, "a")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(waiter, "b")
            await agent.background_tasks["b1"].wait()
            await trio.sleep(1.0)
            nursery.cancel_scope.cancel()
    assert sorted(woke) == ["a", "b"]


async def test_a_cancelled_tool_whose_cleanup_fails_is_an_error_result(autojump_clock: Any) -> None:
    """A group of Cancelled + OSError from the tool's own nursery: the OSError is the tool's
    result, the supervision scope and an unrelated reply are untouched."""
    toolkit = edge_toolkit(Probe())

    async def fanout() -> str:
        """Fans out to two workers; one's cleanup fails."""

        async def worker() -> None:
            await trio.sleep_forever()

        async def flaky_cleanup() -> None:
            try:
                await trio.sleep_forever()
            finally:
                raise OSError("cleanup failed")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(worker)
            nursery.start_soon(flaky_cleanup)
        return "never"

    toolkit.register_function(fanout, permission=ALLOW, is_background=True)
    agent = make_agent(
        [
            calls(call("x1", "fanout")),
            text("started"),
            calls(call("f1", "fg", delay=10.0)),
            text("fg finished"),
        ],
        toolkit,
    )
    async with agent:
        await run(agent, user())
        handle = agent.background_tasks["x1"]

        async def cancel_later() -> None:
            await trio.sleep(1.0)
            handle.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_later)
            msg, _ = await run(agent, user("run fg"))
        assert msg.finished_reason == ReplyFinishedReason.COMPLETED
        assert handle.status == BackgroundStatus.ERROR
        assert handle.result is not None
        assert "cleanup failed" in handle.result.text()

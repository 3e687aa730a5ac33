"""Background tools supervised by ``async with agent:`` (DESIGN.md §6, reference/agent.md §6)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from agent_kit import (
    ALLOW,
    call,
    calls,
    ends,
    kinds,
    make_agent,
    model_of,
    of_call,
    output_text,
    result_of,
    run,
    run_and_interrupt,
    text,
    user,
)

from trioagent.agent import BackgroundStatus, BackgroundToolError
from trioagent.event import HintBlockEvent, ToolResultTextDeltaEvent
from trioagent.exception import DeveloperOrientedException
from trioagent.message import HintBlock, TextBlock, ToolResultState
from trioagent.testing import check_reply_rules
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

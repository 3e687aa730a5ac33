"""``cancel_sweep`` over replies that act: parallel, sequential and streaming tools, a parked
reply being resumed, and background tools while the supervision scope closes.

Every cancellation point must leave exactly one end event, last; every tool call with exactly
one result and a state that round-trips; and no task left behind.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from agent_kit import (
    ALLOW,
    call,
    calls,
    confirm,
    make_agent,
    run,
    text,
    tool_calls,
    user,
)

from trioagent.agent import Agent, BackgroundStatus
from trioagent.event import (
    ExternalExecutionResultEvent,
    ReplyEndEvent,
    ToolResultEndEvent,
    UserInterruptEvent,
)
from trioagent.message import (
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
)
from trioagent.testing import SweepReport, SweepRun, cancel_sweep
from trioagent.tool import ToolBase, ToolChunk, Toolkit

MODES = ["interrupt", "outer"]


def toolkit() -> Toolkit:
    kit = Toolkit()

    async def conc(name: str, delay: float) -> str:
        """Concurrency-safe and slow."""
        await trio.sleep(delay)
        return f"{name} done"

    async def seq(name: str, delay: float) -> str:
        """Sequential and slow."""
        await trio.sleep(delay)
        return f"{name} done"

    async def stream(parts: int, emit: Any) -> str:
        """Streams chunks."""
        for i in range(parts):
            await emit(ToolChunk(content=[TextBlock(text=f"part{i} ")], is_last=False))
            await trio.sleep(0.5)
        return "end"

    async def ask(x: str) -> str:
        """Needs confirmation."""
        await trio.sleep(1.0)
        return f"ask {x}"

    async def crunch(n: int, delay: float) -> str:
        """Runs in the background."""
        await trio.sleep(delay)
        return f"crunched {n}"

    async def maybe(delay: float, emit: Any) -> str:
        """Moves to the background after 2 s."""
        await emit(ToolChunk(content=[TextBlock(text="warming up ")], is_last=False))
        await trio.sleep(delay)
        return "maybe done"

    kit.register_function(conc, permission=ALLOW)
    kit.register_function(seq, permission=ALLOW, is_concurrency_safe=False)
    kit.register_function(stream, permission=ALLOW)
    kit.register_function(ask)
    kit.register_function(crunch, permission=ALLOW, is_background=True)
    kit.register_function(maybe, permission=ALLOW, background_after=2.0)

    class External(ToolBase):
        name = "ext"
        description = "Executed by the caller."
        input_schema = {"type": "object", "properties": {"q": {"type": "string"}}}  # noqa: RUF012
        is_external_tool = True
        is_concurrency_safe = True

        async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> Any:
            return ALLOW

    kit.add_tool(External())
    return kit


def assert_swept(report: SweepReport, mode: str) -> None:
    """The sweep really cancelled something, and the baseline completed."""
    assert report.points > 0
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert report.outcomes["interrupted"] > 0
    if mode == "outer":
        assert any(r.propagated_cancel for r in report.runs)


def interrupted_results_are_well_formed(run: SweepRun) -> None:
    """Every interrupted result carries the interrupt text, list (tool) or str (cleanup)."""
    for msg in run.agent.state.context:
        for block in msg.content:
            if isinstance(block, ToolResultBlock) and block.state == ToolResultState.INTERRUPTED:
                if isinstance(block.output, str):
                    assert "interrupted" in block.output
                else:
                    assert "interrupted" in block.output[-1].text  # type: ignore[union-attr]
    ends = [e for e in run.events if isinstance(e, ReplyEndEvent)]
    if ends:
        # Each call's END event precedes the reply's end.
        last = run.events.index(ends[0])
        assert all(i < last for i, e in enumerate(run.events) if isinstance(e, ToolResultEndEvent))


# -- acting ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_parallel_tools(mode: str, autojump_clock: Any) -> None:
    def make() -> Agent:
        return make_agent(
            [
                calls(
                    call("c1", "conc", name="one", delay=2.0),
                    call("c2", "conc", name="two", delay=1.0),
                ),
                text("done"),
            ],
            toolkit(),
        )

    report = await cancel_sweep(make, user, mode=mode, check=interrupted_results_are_well_formed)
    assert_swept(report, mode)


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_sequential_tools(mode: str, autojump_clock: Any) -> None:
    def make() -> Agent:
        return make_agent(
            [
                calls(
                    call("s1", "seq", name="one", delay=1.0),
                    call("s2", "seq", name="two", delay=2.0),
                    call("c1", "conc", name="three", delay=1.0),
                ),
                text("done"),
            ],
            toolkit(),
        )

    report = await cancel_sweep(make, user, mode=mode, check=interrupted_results_are_well_formed)
    assert_swept(report, mode)


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_streaming_tool(mode: str, autojump_clock: Any) -> None:
    def make() -> Agent:
        return make_agent([calls(call("t1", "stream", parts=4)), text("done")], toolkit())

    report = await cancel_sweep(make, user, mode=mode, check=interrupted_results_are_well_formed)
    assert_swept(report, mode)


# -- resuming a parked reply -------------------------------------------------------------------------


async def parked_agent() -> Agent:
    """An agent parked on ``a1`` (asking) while ``c1`` already ran."""
    agent = make_agent(
        [
            calls(call("a1", "ask", x="1"), call("c1", "conc", name="one", delay=1.0)),
            text("done"),
        ],
        toolkit(),
    )
    await run(agent, user())
    assert agent.state.has_awaiting_tool_calls("agent")
    return agent


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_reply_that_parks_next_to_a_running_call(
    mode: str, autojump_clock: Any
) -> None:
    def make() -> Agent:
        return make_agent(
            [calls(call("a1", "ask", x="1"), call("c1", "conc", name="one", delay=1.0))],
            toolkit(),
        )

    def parked_or_interrupted(run: SweepRun) -> None:
        kinds_ = [str(e.type) for e in run.events]
        if run.end is None:
            # Parked: a1 asks, c1 already has its result, no end event.
            assert "REQUIRE_USER_CONFIRM" in kinds_
            assert [c.id for c in run.agent.state.get_awaiting_tool_calls("agent")] == ["a1"]
        else:
            assert run.end.finished_reason == "interrupted"
        interrupted_results_are_well_formed(run)

    report = await cancel_sweep(make, user, mode=mode, check=parked_or_interrupted)
    assert report.runs[0].end is None  # the baseline parks
    assert report.outcomes["parked"] >= 1
    assert report.outcomes["interrupted"] > 0


def still_parked_or_finished(run: SweepRun) -> None:
    calls_ = tool_calls(run.agent)
    if not run.events:
        assert run.agent.state.has_awaiting_tool_calls("agent")
    else:
        assert all(c.state == "finished" for c in calls_.values())
    assert "REPLY_START" not in [str(e.type) for e in run.events]


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_resumed_confirmation(mode: str, autojump_clock: Any) -> None:
    def answer() -> Any:
        return confirm(ToolCallBlock(id="a1", name="ask", input='{"x": "1"}'))

    report = await cancel_sweep(
        parked_agent,
        answer,
        mode=mode,
        check=lambda r: (still_parked_or_finished(r), interrupted_results_are_well_formed(r)),
    )
    assert_swept(report, mode)


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_resumed_external_result(mode: str, autojump_clock: Any) -> None:
    async def make() -> Agent:
        agent = make_agent(
            [calls(call("x1", "ext", q="q"), call("s1", "seq", name="later", delay=1.0))],
            toolkit(),
        )
        await run(agent, user())
        agent.model.add_steps(text("done"))  # type: ignore[attr-defined]
        return agent

    def result() -> Any:
        return ExternalExecutionResultEvent(
            execution_results=[ToolResultBlock(id="x1", name="ext", output="out")]
        )

    report = await cancel_sweep(make, result, mode=mode, check=still_parked_or_finished)
    assert_swept(report, mode)


async def test_sweep_user_interrupt_of_a_parked_reply(autojump_clock: Any) -> None:
    report = await cancel_sweep(
        parked_agent, lambda: UserInterruptEvent(), mode="outer", check=still_parked_or_finished
    )
    assert all(r.end is not None and r.end.finished_reason == "interrupted" for r in report.runs)


# -- background tools while the agent closes ----------------------------------------------------------


def background_agent() -> Agent:
    return make_agent(
        [
            calls(
                call("b1", "crunch", n=1, delay=30.0),
                call("b2", "crunch", n=2, delay=0.5),
                call("m1", "maybe", delay=20.0),
            ),
            text("started"),
        ],
        toolkit(),
    )


def background_handles_settled(run: SweepRun) -> None:
    """Every background task ended with one result, and each call reaches the model once: a
    handed-off call has the placeholder in the context (its real result comes as a hint); a
    call interrupted before its hand-off has only its interrupted result."""
    stored = {
        b.id: b
        for m in run.agent.state.context
        for b in m.content
        if isinstance(b, ToolResultBlock)
    }
    for call_id, handle in run.agent.background_tasks.items():
        assert handle.status in (BackgroundStatus.SUCCESS, BackgroundStatus.INTERRUPTED), handle
        assert handle.result is not None
        if call_id in stored:
            assert stored[call_id].state == ToolResultState.SUCCESS
            assert "running in background" in str(stored[call_id].output)
    interrupted_results_are_well_formed(run)


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_background_tools_while_the_agent_closes(
    mode: str, autojump_clock: Any
) -> None:
    report = await cancel_sweep(
        background_agent,
        user,
        mode=mode,
        supervised=True,
        check=background_handles_settled,
    )
    assert_swept(report, mode)
    # The baseline left b1 and m1 running when the scope closed: both were interrupted.
    baseline = report.runs[0].agent.background_tasks
    assert baseline["b1"].status == BackgroundStatus.INTERRUPTED
    assert baseline["m1"].status == BackgroundStatus.INTERRUPTED
    assert baseline["b2"].status == BackgroundStatus.SUCCESS

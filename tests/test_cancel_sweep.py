"""The acceptance sweeps (trioagent/testing/_sweep.py): cancel a reply after every schedule
point, by ``agent.interrupt()`` and by an outer cancel scope, and check each time that the
reply has exactly one end event, last; that an outer cancellation still propagates; that every
tool call has exactly one result and the state round-trips; and that no task is left behind.
Also shows that the sweep fails on a broken middleware.

Then the harness's own edges, from a user's point of view: ``make_agent`` factories that fail,
``max_points`` and modes, a minimal fake agent (no guards of the real ``Agent`` in the way),
deliberately broken middlewares of a real agent, and ``check_reply_rules`` on hand-built states.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from agent_helpers import ALLOW, make_agent, user

from trioagent.agent import Agent, AgentState, InjectionConfig, ModelConfig
from trioagent.event import ReplyEndEvent, ReplyStartEvent, TextBlockDeltaEvent
from trioagent.exception import ModelUpstreamError
from trioagent.message import AssistantMsg, ToolCallBlock, ToolResultBlock, UserMsg
from trioagent.middleware import MiddlewareBase
from trioagent.testing import (
    ScriptedModel,
    SweepRun,
    SweepViolation,
    cancel_sweep,
    check_reply_rules,
    text_chunks,
    tool_call_chunks,
)
from trioagent.tool import Toolkit

MODES = ["interrupt", "outer"]


def consistent(run: SweepRun) -> None:
    """Extra per-run checks: the final Msg agrees with the end event, no reply left running."""
    assert not run.agent.is_replying
    if run.msg is not None and run.end is not None:
        assert run.msg.finished_reason == run.end.finished_reason
    if run.end is not None and run.end.finished_reason == "interrupted":
        assert run.end.reply_id == run.agent.state.reply_id


def assert_swept(report, mode: str, min_points: int = 5) -> None:
    assert report.points >= min_points
    assert len(report.runs) == report.points + 1
    outcomes = report.outcomes
    assert outcomes["completed"] >= 1  # the baseline
    assert outcomes["interrupted"] >= 1  # the cancellations did land inside the reply
    assert set(outcomes) <= {"completed", "interrupted", "parked"}
    if mode == "outer":
        fired = [r for r in report.runs if r.fired and r.end is not None]
        assert any(r.propagated_cancel for r in fired)


def agent_on(model: ScriptedModel, *middlewares: MiddlewareBase) -> Agent:
    """An agent on ``model`` with ``middlewares``, runtime-state injection off."""
    agent, _ = make_agent(model=model, middlewares=list(middlewares))
    return agent


def text_agent(*middlewares: MiddlewareBase) -> Agent:
    return agent_on(ScriptedModel([text_chunks("a", "b")], chunk_delay=0.1), *middlewares)


# -- 1. a streamed text reply ---------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("mode", MODES)
async def test_sweep_streamed_text_reply(mode, stream, autojump_clock):
    def build() -> Agent:
        agent, _ = make_agent(
            model=ScriptedModel(
                [text_chunks("one ", "two ", "three")], chunk_delay=0.1, stream=stream
            )
        )
        return agent

    report = await cancel_sweep(build, lambda: user("hi"), mode=mode, check=consistent)
    # A plain (non-streamed) call has very few schedule points: one wait for the answer.
    assert_swept(report, mode, min_points=5 if stream else 1)


# -- 2. one tool round ----------------------------------------------------------------------------


async def slow_lookup(key: str) -> str:
    """Look a key up slowly.

    Args:
        key: the key.
    """
    await trio.sleep(1)
    return f"value of {key}"


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_one_tool_round(mode, autojump_clock):
    def build() -> Agent:
        toolkit = Toolkit()
        toolkit.register_function(slow_lookup, is_concurrency_safe=False, permission=ALLOW)
        agent, _ = make_agent(
            [
                [
                    *text_chunks("Let me look."),
                    *tool_call_chunks("c1", "slow_lookup", '{"key": ', '"a"}'),
                ],
                text_chunks("It is ", "a."),
            ],
            toolkit=toolkit,
        )
        return agent

    report = await cancel_sweep(build, lambda: user("what is a?"), mode=mode, check=consistent)
    assert_swept(report, mode)
    # Some run was cancelled while the tool was running and closed it with a result.
    assert any(
        r.end is not None
        and r.end.finished_reason == "interrupted"
        and any(e.type == "TOOL_RESULT_END" and e.state == "interrupted" for e in r.events)
        for r in report.runs
    )


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_concurrent_tools(mode, autojump_clock):
    def build() -> Agent:
        toolkit = Toolkit()
        toolkit.register_function(slow_lookup, is_concurrency_safe=True, permission=ALLOW)
        agent, _ = make_agent(
            [
                [
                    *tool_call_chunks("c1", "slow_lookup", '{"key": "a"}'),
                    *tool_call_chunks("c2", "slow_lookup", '{"key": "b"}'),
                ],
                text_chunks("done"),
            ],
            toolkit=toolkit,
        )
        return agent

    report = await cancel_sweep(build, lambda: user(), mode=mode, check=consistent)
    assert_swept(report, mode)


# -- 3. a middleware that pulls with next_handler.stream() ---------------------------------------


class IdleTimer(MiddlewareBase):
    """Races the inner stream against an idle timer (pull style)."""

    def __init__(self, idle: float) -> None:
        self.idle = idle

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        async with next_handler.stream() as items:
            while True:
                with trio.move_on_after(self.idle):
                    try:
                        item = await items.receive()
                    except trio.EndOfChannel:
                        return
                    await emit(item)
                    continue
                return


class PullReasoning(MiddlewareBase):
    async def on_reasoning(self, agent, input_kwargs, next_handler, emit):
        async with next_handler.stream() as items:
            async for item in items:
                await emit(item)


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_pull_stream_middleware(mode, autojump_clock):
    def build() -> Agent:
        toolkit = Toolkit()
        toolkit.register_function(slow_lookup, is_concurrency_safe=False, permission=ALLOW)
        agent, _ = make_agent(
            model=ScriptedModel(
                [tool_call_chunks("c1", "slow_lookup", '{"key": "k"}'), text_chunks("x", "y")],
                chunk_delay=0.5,
            ),
            toolkit=toolkit,
            middlewares=[IdleTimer(idle=3.0), PullReasoning()],
        )
        return agent

    report = await cancel_sweep(build, lambda: user(), mode=mode, check=consistent)
    assert_swept(report, mode)


# -- 4. retries and the fallback model ------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_retries_and_fallback(mode, autojump_clock):
    def build() -> Agent:
        primary = ScriptedModel(
            [ModelUpstreamError("p1", status_code=503), ModelUpstreamError("p2", status_code=503)],
            chunk_delay=0.1,
        )
        fallback = ScriptedModel(
            [text_chunks("from ", "the fallback")], model="fallback", chunk_delay=0.1
        )
        agent, _ = make_agent(
            model=primary, model_config=ModelConfig(max_retries=1, fallback_model=fallback)
        )
        return agent

    def check(run: SweepRun) -> None:
        consistent(run)
        if run.end is not None and run.end.finished_reason == "completed":
            assert run.msg is not None
            assert run.msg.get_text_content() == "from the fallback"

    report = await cancel_sweep(build, lambda: user(), mode=mode, check=check)
    assert_swept(report, mode)


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_with_runtime_injection(mode, autojump_clock):
    def build() -> Agent:
        agent, _ = make_agent(
            [text_chunks("a", "b")],
            inject=True,
            injection_config=InjectionConfig(),
        )
        return agent

    report = await cancel_sweep(build, lambda: user(), mode=mode, check=consistent)
    assert_swept(report, mode)


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_with_context_compression(mode, autojump_clock):
    from agent_helpers import summary_step, tokens

    from trioagent.agent import ContextConfig
    from trioagent.message import AssistantMsg, UserMsg

    def build() -> Agent:
        model = ScriptedModel(
            [summary_step(), text_chunks("x", "y")], context_size=100, chunk_delay=0.1
        )
        agent = Agent(
            "assistant",
            tokens(20, "S"),
            model,
            context_config=ContextConfig(trigger_ratio=0.7, reserve_ratio=0.4),
            injection_config=InjectionConfig(inject_runtime_state=False),
        )
        agent.state.context = [
            UserMsg("user", tokens(30, "1")),
            AssistantMsg("assistant", tokens(10, "2")),
        ]
        return agent

    def check(run: SweepRun) -> None:
        consistent(run)
        # Compression is applied whole or not at all.
        state = run.agent.state
        texts = [m.get_text_content() for m in state.context]
        if state.summary:
            assert tokens(30, "1") not in texts
        else:
            assert texts[0] == tokens(30, "1")

    report = await cancel_sweep(
        build, lambda: UserMsg("user", tokens(10, "3")), mode=mode, check=check
    )
    assert_swept(report, mode)


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_with_the_compression_tool(mode, autojump_clock):
    """The model calls ``CompressContext``: a cancellation anywhere (the call, the summary
    request, the next step) leaves the compression whole or undone and the call answered."""
    from agent_helpers import assert_paired, summary_step, tokens

    from trioagent.agent import ContextConfig
    from trioagent.message import AssistantMsg, UserMsg

    def build() -> Agent:
        model = ScriptedModel(
            [
                tool_call_chunks("c1", "CompressContext", "{}"),
                summary_step(),
                text_chunks("x", "y"),
            ],
            context_size=1000,
            chunk_delay=0.1,
        )
        agent = Agent(
            "assistant",
            tokens(20, "S"),
            model,
            context_config=ContextConfig(
                trigger_ratio=0.7,
                reserve_ratio=0.4,
                context_buffer_ratio=0.1,
                compression_tool_enabled=True,
            ),
            injection_config=InjectionConfig(inject_runtime_state=False),
        )
        agent.state.context = [
            UserMsg("user", tokens(300, "1")),
            AssistantMsg("assistant", tokens(100, "2")),
        ]
        return agent

    def check(run: SweepRun) -> None:
        consistent(run)
        state = run.agent.state
        assert_paired(state.context)
        texts = [m.get_text_content() for m in state.context]
        assert (tokens(300, "1") in texts) != bool(state.summary)
        if run.end is not None and run.end.finished_reason == "completed":
            assert state.summary

    report = await cancel_sweep(
        build, lambda: UserMsg("user", tokens(120, "3")), mode=mode, check=check
    )
    assert_swept(report, mode)
    interrupted = [
        r for r in report.runs if r.end is not None and r.end.finished_reason != "completed"
    ]
    # Cancellations landed both before the compression was applied and after it.
    assert {bool(r.agent.state.summary) for r in interrupted} == {True, False}


# -- the sweep can fail ---------------------------------------------------------------------------


class DanglingCall(MiddlewareBase):
    """Broken: leaves a tool call without a result in the reply message (rule 6)."""

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        await next_handler()
        agent.state.append_context(
            agent.name, [ToolCallBlock(id="dangling", name="ghost", input="{}")]
        )


class SwallowCancel(MiddlewareBase):
    """Broken: swallows trio.Cancelled (rule 3), which only shows under cancellation."""

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        try:  # noqa: SIM105 - spelled out: this is the bug on display
            await next_handler()
        except trio.Cancelled:
            pass


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_fails_on_a_dangling_tool_call(mode, autojump_clock):
    with pytest.raises(SweepViolation, match="rule 6"):
        await cancel_sweep(lambda: text_agent(DanglingCall()), lambda: user(), mode=mode)


async def test_sweep_fails_on_a_swallowed_outer_cancellation(autojump_clock):
    # The uncancelled baseline passes: only the sweep's cancellations expose the bug.
    await cancel_sweep(lambda: text_agent(SwallowCancel()), lambda: user(), max_points=0)
    with pytest.raises(SweepViolation, match="swallowed"):
        await cancel_sweep(lambda: text_agent(SwallowCancel()), lambda: user(), mode="outer")


async def test_sweep_fails_on_a_task_that_outlives_the_reply(autojump_clock):
    async with trio.open_nursery() as nursery:

        class Leaky(MiddlewareBase):
            """Broken: starts a task in a nursery that outlives the reply (rule 7)."""

            async def on_reply(self, agent, input_kwargs, next_handler, emit):
                nursery.start_soon(trio.sleep_forever)
                await next_handler()

        with pytest.raises(SweepViolation, match="rule 7"):
            await cancel_sweep(lambda: text_agent(Leaky()), lambda: user())
        nursery.cancel_scope.cancel()


async def test_sweep_fails_when_an_error_escapes(autojump_clock):
    def build() -> Agent:
        agent, _ = make_agent([RuntimeError("model down")])
        return agent

    with pytest.raises(SweepViolation, match="model down"):
        await cancel_sweep(build, lambda: user())


def test_check_reply_rules_flags_a_missing_or_misplaced_end():
    from trioagent.agent import AgentState
    from trioagent.testing import check_reply_rules

    state = AgentState()
    start: Any = make_agent()[0]
    end = ReplyEndEvent(session_id="s", reply_id="r")
    other = ReplyEndEvent(session_id="s", reply_id="r")
    from trioagent.event import ReplyStartEvent

    begin = ReplyStartEvent(session_id="s", reply_id="r", name=start.name)
    check_reply_rules(state, "assistant", [begin, end])
    with pytest.raises(SweepViolation, match=r"rule 1.*expected exactly one"):
        check_reply_rules(state, "assistant", [begin])
    with pytest.raises(SweepViolation, match=r"rule 1.*expected exactly one"):
        check_reply_rules(state, "assistant", [begin, end, other])
    with pytest.raises(SweepViolation, match="not the last event"):
        check_reply_rules(state, "assistant", [end, begin])


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_structured_reply(autojump_clock, mode):
    """A structured-output reply: text first (not enough), then the tool call."""
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}},
        "required": ["city", "temperature"],
    }

    def make() -> Agent:
        agent, _ = make_agent(
            [
                text_chunks("Let me ", "check."),
                tool_call_chunks(
                    "s1", "GenerateStructuredOutput", '{"city": "Paris", ', '"temperature": 21}'
                ),
            ]
        )
        return agent

    def check(run) -> None:
        if run.end is not None and run.end.finished_reason == "completed":
            assert run.msg.structured_output == {"city": "Paris", "temperature": 21}

    report = await cancel_sweep(
        make, lambda: user("weather?"), mode=mode, check=check, structured_schema=schema
    )
    assert report.runs[0].msg.structured_output == {"city": "Paris", "temperature": 21}
    assert report.outcomes["interrupted"] > 3


# -- cancel_sweep: the harness itself -------------------------------------------------------------


async def test_a_make_agent_that_raises_propagates_unchanged(autojump_clock):
    def broken() -> Agent:
        raise LookupError("no such agent")

    async def broken_async() -> Agent:
        await trio.lowlevel.checkpoint()
        raise LookupError("no such async agent")

    with pytest.raises(LookupError, match="no such agent"):
        await cancel_sweep(broken, user)
    with pytest.raises(LookupError, match="no such async agent"):
        await cancel_sweep(broken_async, user)


async def test_a_make_agent_that_fails_on_a_later_run(autojump_clock):
    made = 0

    def flaky() -> Agent:
        nonlocal made
        made += 1
        if made == 3:
            raise LookupError("third agent")
        return text_agent()

    with pytest.raises(LookupError, match="third agent"):
        await cancel_sweep(flaky, user)


async def test_an_async_make_agent_and_fresh_inputs_per_run(autojump_clock):
    inputs: list[UserMsg] = []

    async def make() -> Agent:
        await trio.sleep(1)
        return text_agent()

    def fresh() -> UserMsg:
        inputs.append(user())
        return inputs[-1]

    report = await cancel_sweep(make, fresh, max_points=3)
    assert len(inputs) == len(report.runs) == 4
    assert len({id(m) for m in inputs}) == 4


async def test_max_points_caps_the_runs_but_reports_every_point(autojump_clock):
    full = await cancel_sweep(text_agent, user)
    assert len(full.runs) == full.points + 1
    capped = await cancel_sweep(text_agent, user, max_points=2)
    assert capped.points == capped.runs[0].steps > 2  # the baseline's count, not the cap
    assert [r.cancel_at for r in capped.runs] == [None, 1, 2]
    only_baseline = await cancel_sweep(text_agent, user, max_points=0)
    assert [r.cancel_at for r in only_baseline.runs] == [None]
    assert not only_baseline.runs[0].fired


async def test_a_long_reply_terminates_with_one_run_per_point(autojump_clock):
    parts = [f"w{i} " for i in range(60)]

    def make() -> Agent:
        return agent_on(ScriptedModel([text_chunks(*parts)], chunk_delay=0.01))

    report = await cancel_sweep(make, user, mode="outer")
    assert report.points > 60
    assert len(report.runs) == report.points + 1
    assert [r.cancel_at for r in report.runs[1:]] == list(range(1, report.points + 1))
    assert report.outcomes["interrupted"] > 60


async def test_an_unknown_mode_is_rejected_before_any_run(autojump_clock):
    made = 0

    def make() -> Agent:
        nonlocal made
        made += 1
        return text_agent()

    with pytest.raises(ValueError, match="'sideways' is not a valid CancelMode"):
        await cancel_sweep(make, user, mode="sideways")
    assert made == 0


async def test_a_failing_check_propagates_with_the_run(autojump_clock):
    seen: list[SweepRun] = []

    def check(run: SweepRun) -> None:
        seen.append(run)
        assert run.cancel_at != 2, "my own assertion"

    with pytest.raises(AssertionError, match="my own assertion"):
        await cancel_sweep(text_agent, user, check=check)
    assert [r.cancel_at for r in seen] == [None, 1, 2]


async def test_an_error_in_the_baseline_names_the_baseline(autojump_clock):
    def make() -> Agent:
        return agent_on(ScriptedModel([RuntimeError("model down")]))

    for mode in ("interrupt", "outer"):
        with pytest.raises(SweepViolation, match=r"^\(baseline\) the reply raised RuntimeError"):
            await cancel_sweep(make, user, mode=mode)


# -- cancel_sweep on a minimal fake agent (no guards of the real Agent in the way) ----------------


class FakeAgent:
    """The surface ``cancel_sweep(mode="outer")`` uses, emitting a fixed list of events."""

    name = "fake"
    model = None

    def __init__(self, events: list[Any], *, checkpoints: bool = True) -> None:
        self.state = AgentState()
        self.events = events
        self.checkpoints = checkpoints

    def interrupt(self) -> None:  # pragma: no cover - outer mode only
        raise AssertionError("not used")

    async def reply(self, inputs: Any, *, structured_schema: Any = None, on_event: Any) -> None:
        for event in self.events:
            if self.checkpoints:
                await trio.lowlevel.checkpoint()
            await on_event(event)


START = ReplyStartEvent(session_id="s", reply_id="r", name="fake")
END = ReplyEndEvent(session_id="s", reply_id="r")
LATE = TextBlockDeltaEvent(reply_id="r", block_id="b", delta="late")


async def test_sweep_reports_two_end_events(autojump_clock):
    with pytest.raises(SweepViolation, match=r"^rule 1 \(baseline\): 2 ReplyEndEvents"):
        await cancel_sweep(lambda: FakeAgent([START, END, END]), user, mode="outer")


async def test_sweep_reports_an_event_after_the_end(autojump_clock):
    with pytest.raises(SweepViolation, match=r"^rule 1 \(baseline\).*not the last event"):
        await cancel_sweep(lambda: FakeAgent([START, END, LATE]), user, mode="outer")


async def test_sweep_reports_a_reply_without_end_cut_by_a_cancellation(autojump_clock):
    # The baseline is fine; a cancellation between START and END shows the missing cleanup.
    with pytest.raises(SweepViolation, match=r"^rule 1 \(point \d+\): 0 ReplyEndEvents"):
        await cancel_sweep(lambda: FakeAgent([START, END]), user, mode="outer")


async def test_a_reply_that_never_checkpoints_is_swept_and_terminates(autojump_clock):
    report = await cancel_sweep(
        lambda: FakeAgent([START, END], checkpoints=False), user, mode="outer"
    )
    # No schedule point inside the reply: nothing to cancel, the baseline alone is checked.
    assert report.points == 0
    (baseline,) = report.runs
    assert baseline.events == [START, END]
    assert not baseline.fired


# -- cancel_sweep on broken middlewares of a real agent -------------------------------------------


class SwallowCancelInModelCall(MiddlewareBase):
    """Broken: swallows trio.Cancelled around the model call (rule 3)."""

    async def on_model_call(self, agent, input_kwargs, next_handler, emit):
        try:  # noqa: SIM105 - the bug on display
            await next_handler()
        except trio.Cancelled:
            pass


async def test_sweep_catches_a_cancellation_swallowed_in_on_model_call(autojump_clock):
    await cancel_sweep(lambda: text_agent(SwallowCancelInModelCall()), user, max_points=0)
    with pytest.raises(SweepViolation, match=r"\(point \d+\) an outer cancellation was swallowed"):
        await cancel_sweep(lambda: text_agent(SwallowCancelInModelCall()), user, mode="outer")


class ExtraEnd(MiddlewareBase):
    """Broken: emits a second ReplyEndEvent after the reply."""

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        await next_handler()
        await emit(ReplyEndEvent(session_id="s", reply_id=agent.state.reply_id))


class LateDelta(MiddlewareBase):
    """Broken: emits an event after the reply's end."""

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        await next_handler()
        await emit(TextBlockDeltaEvent(reply_id=agent.state.reply_id, block_id="x", delta="!"))


@pytest.mark.parametrize("middleware", [ExtraEnd, LateDelta])
@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_the_agent_drops_events_after_the_end_so_rule_1_holds(
    middleware, mode, autojump_clock, caplog
):
    def check(run: SweepRun) -> None:
        ends = [i for i, e in enumerate(run.events) if isinstance(e, ReplyEndEvent)]
        assert ends == [len(run.events) - 1]

    report = await cancel_sweep(lambda: text_agent(middleware()), user, mode=mode, check=check)
    assert report.outcomes["interrupted"] >= 1
    assert "emitted after the reply's end event" in caplog.text


async def test_sweep_catches_a_task_leaked_into_the_nursery_fixture(
    nursery: trio.Nursery, autojump_clock
):
    class LeakIntoFixture(MiddlewareBase):
        async def on_reply(self, agent, input_kwargs, next_handler, emit):
            nursery.start_soon(trio.sleep_forever)
            await next_handler()

    with pytest.raises(SweepViolation, match=r"^rule 7 \(point None\): a task outlived"):
        await cancel_sweep(lambda: text_agent(LeakIntoFixture()), user, max_points=0)


class NeverReplies(MiddlewareBase):
    async def on_reply(self, agent: Any, input_kwargs: Any, next_handler: Any, emit: Any) -> None:
        return


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_reports_a_reply_that_never_runs(mode: str, autojump_clock: Any) -> None:
    # interrupt mode: no event at all; outer mode: reply() says it produced no final message.
    with pytest.raises(SweepViolation, match=r"rule 1|did not produce a final message"):
        await cancel_sweep(
            lambda: text_agent(NeverReplies()), lambda: UserMsg("user", "hi"), mode=mode
        )


# -- check_reply_rules on hand-built states -------------------------------------------------------


def _state(*blocks: Any) -> AgentState:
    state = AgentState()
    state.context = [user(), AssistantMsg("assistant", list(blocks))]
    return state


FINISHED_CALL = ToolCallBlock(id="c1", name="t", state="finished")
RESULT = ToolResultBlock(id="c1", name="t", output="ok", state="success")


def test_check_reply_rules_accepts_a_paired_call():
    check_reply_rules(_state(FINISHED_CALL, RESULT), "assistant", [START, END])


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        ([FINISHED_CALL], r"rule 6 \(here\): tool call c1 has 0 results"),
        ([FINISHED_CALL, RESULT, RESULT], r"tool call c1 has 2 results"),
        ([FINISHED_CALL, RESULT, ToolResultBlock(id="zz", name="t")], r"results without a call"),
        ([ToolCallBlock(id="c1", name="t"), RESULT], r"tool call c1 left in state pending"),
    ],
)
def test_check_reply_rules_flags_rule_6(blocks, message):
    with pytest.raises(SweepViolation, match=message):
        check_reply_rules(_state(*blocks), "assistant", [START, END], where="here")


def test_check_reply_rules_flags_an_event_after_the_end():
    with pytest.raises(SweepViolation, match=r"rule 1 \(x\): the ReplyEndEvent is not the last"):
        check_reply_rules(AgentState(), "assistant", [START, END, LATE], where="x")


def test_check_reply_rules_accepts_no_events_at_all():
    check_reply_rules(AgentState(), "assistant", [])

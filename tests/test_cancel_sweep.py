"""The acceptance sweeps (trioagent/testing/_sweep.py): cancel a reply after every schedule
point, by ``agent.interrupt()`` and by an outer cancel scope, and check each time that the
reply has exactly one end event, last; that an outer cancellation still propagates; that every
tool call has exactly one result and the state round-trips; and that no task is left behind.
Also shows that the sweep fails on a broken middleware."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from agent_helpers import ALLOW, make_agent, user

from trioagent.agent import Agent, InjectionConfig, ModelConfig
from trioagent.event import ReplyEndEvent
from trioagent.exception import ModelUpstreamError
from trioagent.message import ToolCallBlock
from trioagent.middleware import MiddlewareBase
from trioagent.testing import (
    ScriptedModel,
    SweepRun,
    SweepViolation,
    cancel_sweep,
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


def text_agent(*middlewares: MiddlewareBase) -> Agent:
    agent, _ = make_agent(
        model=ScriptedModel([text_chunks("a", "b")], chunk_delay=0.1),
        middlewares=list(middlewares),
    )
    return agent


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

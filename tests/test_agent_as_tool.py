"""Agents as tools: ``agent.as_tool()`` / ``AgentTool``.

The inner agent's answer is the call's result; its events reach the caller's consumer tagged
with the path of agents they came through; its confirmations surface to the outermost caller,
and the answer sent there resumes every level; cancelling the outer reply ends every running
inner reply with one INTERRUPTED end each, then the outer one.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from pipeline_kit import (
    Recorder,
    agent,
    asker,
    call,
    calling_chain,
    calls,
    confirm,
    result_text,
    results,
    text,
    texts,
    work_toolkit,
    worker,
)
from tracing_kit import new_otel

from trioagent.agent import Agent, AgentState, AgentTool
from trioagent.event import (
    ConfirmResult,
    ReplyEndEvent,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
    agent_path,
)
from trioagent.message import ToolCallBlock, ToolResultState, UserMsg
from trioagent.middleware import TracingMiddleware
from trioagent.serialization import dumps, loads
from trioagent.testing import check_nested_rules
from trioagent.tool import Toolkit
from trioagent.types import ReplyFinishedReason


def chain_of_three(work_seconds: float = 1.0) -> tuple[Agent, Agent, Agent]:
    """``boss`` asks ``clerk`` (a tool), who asks ``typist`` (a tool), who works a while."""
    typist = worker("typist", work_seconds)
    return (*calling_chain(typist), typist)


def test_as_tool_describes_the_agent() -> None:
    helper = agent("helper", [])
    tool = helper.as_tool()
    assert isinstance(tool, AgentTool)
    assert tool.name == "helper"
    assert tool.agent is helper
    assert "'helper'" in tool.description
    assert tool.input_schema["required"] == ["prompt"]
    named = helper.as_tool(name="ask", description="Ask it.")
    assert (named.name, named.description) == ("ask", "Ask it.")


async def test_events_of_every_level_reach_the_outer_consumer_tagged(
    autojump_clock: trio.testing.MockClock,
) -> None:
    boss, clerk, typist = chain_of_three()
    rec = Recorder()
    msg = await boss.reply(UserMsg("user", "memo please"), on_event=rec)
    assert texts(msg) == "boss done"
    assert [(r.id, result_text(r)) for r in results(boss)] == [("b", "clerk done")]
    assert [(r.id, result_text(r)) for r in results(clerk)] == [("c", "typist done")]
    assert {agent_path(e) for e in rec.events} == {(), ("clerk",), ("clerk", "typist")}
    ends = [(agent_path(e), e.finished_reason) for e in rec.events if isinstance(e, ReplyEndEvent)]
    assert ends == [
        (("clerk", "typist"), ReplyFinishedReason.COMPLETED),
        (("clerk",), ReplyFinishedReason.COMPLETED),
        ((), ReplyFinishedReason.COMPLETED),
    ]
    assert rec.events[-1] is [e for e in rec.events if isinstance(e, ReplyEndEvent)][-1]
    check_nested_rules([boss, clerk, typist], rec.events)
    # The inner agent got the prompt, not the outer conversation.
    assert [texts(m) for m in clerk.state.context if m.role == "user"] == ["ask clerk"]


async def test_the_stream_form_carries_the_inner_events_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    boss, clerk, typist = chain_of_three()
    async with boss.stream(UserMsg("user", "memo please")) as reply:
        events = [e async for e in reply]
    assert reply.msg is not None
    assert texts(reply.msg) == "boss done"
    assert ("clerk", "typist") in {agent_path(e) for e in events}
    check_nested_rules([boss, clerk, typist], events)


async def test_without_a_consumer_the_inner_events_go_nowhere(
    autojump_clock: trio.testing.MockClock,
) -> None:
    boss, _, _ = chain_of_three()
    assert texts(await boss.reply(UserMsg("user", "memo please"))) == "boss done"


async def test_calls_to_one_agent_in_one_round_run_one_after_another(
    autojump_clock: trio.testing.MockClock,
) -> None:
    helper = agent(
        "helper",
        [
            calls(call("w1", "work", task="a")),
            text("first"),
            calls(call("w2", "work", task="b")),
            text("second"),
        ],
        work_toolkit(),
    )
    tools = Toolkit()
    tools.add_tool(helper.as_tool())
    outer = agent(
        "outer",
        [calls(call("x", "helper", prompt="one"), call("y", "helper", prompt="two")), text("ok")],
        tools,
    )
    start = trio.current_time()
    await outer.reply(UserMsg("user", "go"))
    assert trio.current_time() - start == pytest.approx(2.0)
    assert sorted(result_text(r) for r in results(outer)) == ["first", "second"]


def asking_chain() -> tuple[Agent, Agent, Agent]:
    """``boss`` asks ``clerk`` (a tool), whose ``asker`` (a tool) must confirm ``approve``."""
    inner = asker()
    return (*calling_chain(inner), inner)


async def test_an_inner_confirmation_surfaces_to_the_outermost_caller_and_resumes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    boss, clerk, asker = asking_chain()
    rec = Recorder()
    parked = await boss.reply(UserMsg("user", "go"), on_event=rec)
    assert parked.finished_reason is None
    (ask,) = [e for e in rec.events if isinstance(e, RequireUserConfirmEvent)]
    assert agent_path(ask) == ("clerk", "asker")
    assert ask.reply_id == asker.state.reply_id
    # Every level waits: no end yet, each caller's call unanswered.
    assert not [e for e in rec.events if isinstance(e, ReplyEndEvent)]
    assert [c.id for c in boss.state.get_awaiting_tool_calls("boss")] == ["b"]
    assert [c.id for c in clerk.state.get_awaiting_tool_calls("clerk")] == ["c"]
    check_nested_rules([boss, clerk, asker], rec.events)

    rec2 = Recorder()
    msg = await boss.reply(confirm(ask), on_event=rec2)  # sent to the outermost agent
    assert texts(msg) == "boss done"
    assert [(r.id, result_text(r)) for r in results(clerk)] == [("c", "asker approved")]
    assert [(r.id, result_text(r)) for r in results(boss)] == [("b", "clerk done")]
    ends = [agent_path(e) for e in rec2.events if isinstance(e, ReplyEndEvent)]
    assert ends == [("clerk", "asker"), ("clerk",), ()]
    check_nested_rules([boss, clerk, asker], rec2.events)


async def test_a_user_interrupt_aborts_the_parked_inner_replies_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    boss, clerk, asker = asking_chain()
    await boss.reply(UserMsg("user", "go"))
    rec = Recorder()
    msg = await boss.reply(UserInterruptEvent(), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    ends = [(agent_path(e), e.finished_reason) for e in rec.events if isinstance(e, ReplyEndEvent)]
    assert ends == [
        (("clerk", "asker"), ReplyFinishedReason.INTERRUPTED),
        (("clerk",), ReplyFinishedReason.INTERRUPTED),
        ((), ReplyFinishedReason.INTERRUPTED),
    ]
    assert not any(a.state.has_awaiting_tool_calls(a.name) for a in (boss, clerk, asker))
    check_nested_rules([boss, clerk, asker], rec.events)


async def test_a_parked_chain_resumes_after_a_save_and_restore(
    autojump_clock: trio.testing.MockClock,
) -> None:
    boss, clerk, asker = asking_chain()
    rec = Recorder()
    await boss.reply(UserMsg("user", "go"), on_event=rec)
    (ask,) = [e for e in rec.events if isinstance(e, RequireUserConfirmEvent)]
    saved = {a.name: dumps(a.state) for a in (boss, clerk, asker)}
    asker2 = agent(
        "asker", [text("deleted")], work_toolkit(), state=loads(saved["asker"], AgentState)
    )
    clerk_tools = Toolkit()
    clerk_tools.add_tool(asker2.as_tool())
    clerk2 = agent(
        "clerk", [text("clerk done")], clerk_tools, state=loads(saved["clerk"], AgentState)
    )
    boss_tools = Toolkit()
    boss_tools.add_tool(clerk2.as_tool())
    boss2 = agent("boss", [text("boss done")], boss_tools, state=loads(saved["boss"], AgentState))
    msg = await boss2.reply(confirm(ask))
    assert texts(msg) == "boss done"


async def test_a_confirmation_for_nobody_is_refused(autojump_clock: trio.testing.MockClock) -> None:
    boss, _, _ = asking_chain()
    await boss.reply(UserMsg("user", "go"))
    with pytest.raises(ValueError, match="no tool call awaits confirmation"):
        await boss.reply(UserConfirmResultEvent(reply_id="elsewhere", confirm_results=[]))


async def test_an_inner_failure_is_an_error_result(autojump_clock: trio.testing.MockClock) -> None:
    broken = agent("broken", [RuntimeError("inner model down")])
    tools = Toolkit()
    tools.add_tool(broken.as_tool())
    outer = agent("outer", [calls(call("x", "broken", prompt="try")), text("coped")], tools)
    rec = Recorder()
    msg = await outer.reply(UserMsg("user", "go"), on_event=rec)
    assert texts(msg) == "coped"
    (result,) = results(outer)
    assert result.state == ToolResultState.ERROR
    assert "inner model down" in result_text(result)
    assert [e.finished_reason for e in rec.ends("broken")] == [ReplyFinishedReason.ERROR]


@pytest.mark.parametrize("how", ["interrupt", "outer"])
async def test_cancelling_the_outer_reply_ends_every_inner_reply_once_then_the_outer(
    how: str, autojump_clock: trio.testing.MockClock
) -> None:
    boss, clerk, typist = chain_of_three(work_seconds=10.0)
    rec = Recorder()
    returned: list[Any] = []
    with trio.move_on_after(5.0 if how == "outer" else 60.0) as scope:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                returned.append(await boss.reply(UserMsg("user", "memo please"), on_event=rec))

            nursery.start_soon(run)
            if how == "interrupt":
                await trio.sleep(5.0)
                boss.interrupt()
    if how == "outer":
        assert scope.cancelled_caught
        assert not returned
    else:
        assert returned[0].finished_reason == ReplyFinishedReason.INTERRUPTED
    ends = [(agent_path(e), e.finished_reason) for e in rec.events if isinstance(e, ReplyEndEvent)]
    assert ends == [
        (("clerk", "typist"), ReplyFinishedReason.INTERRUPTED),
        (("clerk",), ReplyFinishedReason.INTERRUPTED),
        ((), ReplyFinishedReason.INTERRUPTED),
    ]
    check_nested_rules([boss, clerk, typist], rec.events)
    for who in (boss, clerk):
        assert [r.state for r in results(who)] == [ToolResultState.INTERRUPTED]
    assert not any(a.is_replying for a in (boss, clerk, typist))


async def test_the_inner_reply_span_nests_under_the_callers_tool_span(
    autojump_clock: trio.testing.MockClock,
) -> None:
    otel = new_otel()
    tracing = TracingMiddleware(tracer_provider=otel.provider)
    typist = worker("typist", middlewares=[tracing])
    boss, _ = calling_chain(typist, middlewares=[tracing])
    await boss.reply(UserMsg("user", "memo please"))
    by_id = {s.context.span_id: s for s in otel.spans()}
    for name in ("clerk", "typist"):
        (span,) = [
            s for s in otel.spans("invoke_agent") if s.attributes.get("gen_ai.agent.name") == name
        ]
        assert span.parent is not None
        assert by_id[span.parent.span_id].name == f"execute_tool {name}"
    assert not otel.tracker.open


async def test_a_bad_answer_for_an_inner_agent_leaves_every_level_parked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    boss, clerk, inner = asking_chain()
    rec = Recorder()
    await boss.reply(UserMsg("user", "go"), on_event=rec)
    (ask,) = [e for e in rec.events if isinstance(e, RequireUserConfirmEvent)]
    before = [dumps(a.state) for a in (boss, clerk, inner)]
    stranger = ToolCallBlock(id="nope", name="approve", input="{}")
    bad = UserConfirmResultEvent(
        reply_id=ask.reply_id, confirm_results=[ConfirmResult(confirmed=True, tool_call=stranger)]
    )
    with pytest.raises(ValueError, match=r"\['nope'\] are not awaiting confirmation"):
        await boss.reply(bad)
    assert [dumps(a.state) for a in (boss, clerk, inner)] == before
    assert texts(await boss.reply(confirm(ask))) == "boss done"

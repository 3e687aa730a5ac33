"""``TeamPipeline``: AgentScope 2.0.11's team behaviour, with Trio's structure.

AgentScope's repository has no tests for its ``TeamPipeline`` (the class ships in the 2.0.11
wheel only), so these port the behaviours its code implies, with fresh inputs: the leader's
``TeamAssign`` tool, concurrent members within a round and call order within one member,
final replies as results, HITL per participant routed by ``reply_id``, the interrupt that
aborts every parked participant, and ``reset_members``.  Then the parts that are trioagent's
own: one INTERRUPTED end per running participant on a cancel, save/restore (JSON, a session
store, another process) of a team parked on a member's confirmation, and tracing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from pipeline_kit import (
    Recorder,
    agent,
    assign,
    call,
    calls,
    confirm,
    model_of,
    result_text,
    results,
    text,
    texts,
    work_toolkit,
)
from tracing_kit import new_otel

from trioagent.agent import Agent, AgentState
from trioagent.event import (
    ExternalExecutionResultEvent,
    ReplyEndEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
    agent_path,
)
from trioagent.message import ToolResultBlock, ToolResultState, UserMsg
from trioagent.middleware import TracingMiddleware
from trioagent.pipeline import PipelineProtocol, TeamMember, TeamPipeline
from trioagent.serialization import dumps, loads
from trioagent.session import SessionMiddleware, SQLiteSessionStore
from trioagent.testing import check_nested_rules
from trioagent.tool import Toolkit
from trioagent.types import ReplyFinishedReason

WORKER = Path(__file__).with_name("pipeline_worker.py")


def fan_out(seconds: tuple[float, float, float] = (1.0, 2.0, 3.0)) -> TeamPipeline:
    """A leader assigning one task each to three members who each run a slow tool."""
    leader = agent(
        "lead",
        [
            calls(
                assign("a", "ann", "count"), assign("b", "ben", "sort"), assign("c", "cy", "sum")
            ),
            text("summary"),
        ],
    )
    members = [
        TeamMember(
            agent(
                name,
                [calls(call(f"w-{name}", "work", task=task)), text(f"{name} done")],
                work_toolkit(seconds=s),
            ),
            f"{name} does {task}",
        )
        for name, task, s in zip(
            ("ann", "ben", "cy"), ("count", "sort", "sum"), seconds, strict=True
        )
    ]
    return TeamPipeline(leader, members)


# -- construction ----------------------------------------------------------------------------------


def test_team_assign_lists_members_and_offers_their_names() -> None:
    team = fan_out()
    tool = team.leader.toolkit.get_tool("TeamAssign")
    assert tool is not None
    assert tool.is_external_tool
    assert tool.is_concurrency_safe
    assert "- ann: ann does count" in tool.description
    assert tool.input_schema["properties"]["member"]["enum"] == ["ann", "ben", "cy"]
    assert tool.input_schema["required"] == ["member", "prompt"]
    assert [a.name for a in team.participants] == ["lead", "ann", "ben", "cy"]
    assert isinstance(team, PipelineProtocol)
    assert isinstance(team.leader, PipelineProtocol)  # a pipeline goes where an agent goes


@pytest.mark.parametrize(
    ("leader", "members"),
    [("lead", ["x", "x"]), ("x", ["x", "y"]), ("lead", [])],
    ids=["duplicate-member", "member-named-as-leader", "no-members"],
)
def test_bad_team_is_refused(leader: str, members: list[str]) -> None:
    with pytest.raises(ValueError, match="unique names"):
        TeamPipeline(agent(leader, []), [TeamMember(agent(m, []), "d") for m in members])


def test_a_second_team_over_the_same_leader_reuses_its_tool() -> None:
    team = fan_out()
    again = TeamPipeline(team.leader, list(team.members.values()))
    assert again.leader.toolkit.get_tool("TeamAssign") is team.leader.toolkit.get_tool("TeamAssign")


# -- a round -----------------------------------------------------------------------------------------


async def test_members_run_concurrently_and_their_answers_become_the_results(
    autojump_clock: trio.testing.MockClock,
) -> None:
    team = fan_out()
    rec = Recorder()
    start = trio.current_time()
    msg = await team.reply(UserMsg("user", "split the work"), on_event=rec)
    # 1 + 2 + 3 seconds of work in one round: concurrent, so the round takes 3.
    assert trio.current_time() - start == pytest.approx(3.0)
    assert texts(msg) == "summary"
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    leader_results = results(team.leader)
    assert [(r.id, result_text(r), r.state) for r in leader_results] == [
        ("a", "ann done", ToolResultState.SUCCESS),
        ("b", "ben done", ToolResultState.SUCCESS),
        ("c", "cy done", ToolResultState.SUCCESS),
    ]
    # The leader sees only the summaries, never a member's own tool calls.
    leader_calls = [
        b.name for m in team.leader.state.context for b in m.content if hasattr(b, "input")
    ]
    assert leader_calls == ["TeamAssign"] * 3
    # Each member got its prompt as a user message.
    assert [texts(model_of(m.agent).requests[0].messages[0]) for m in team.members.values()] == [
        "count",
        "sort",
        "sum",
    ]
    # Events are tagged with the agent they came from; each reply ends once.
    assert {agent_path(e) for e in rec.events} == {("lead",), ("ann",), ("ben",), ("cy",)}
    assert [len(rec.ends(n)) for n in ("lead", "ann", "ben", "cy")] == [1, 1, 1, 1]
    assert isinstance(rec.events[-1], ReplyEndEvent)
    assert agent_path(rec.events[-1]) == ("lead",)
    # The pipeline's own external-execution requests are not the caller's business.
    assert not [e for e in rec.events if isinstance(e, RequireExternalExecutionEvent)]
    check_nested_rules(team.participants, rec.events)


async def test_assignments_to_one_member_run_one_after_another_in_call_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leader = agent(
        "lead",
        [
            calls(
                assign("1", "solo", "first"),
                assign("2", "duo", "other"),
                assign("3", "solo", "second"),
                assign("4", "solo", "third"),
            ),
            text("ok"),
        ],
    )
    log: list[str] = []
    solo = agent(
        "solo",
        [
            calls(call("s1", "work", task="first")),
            text("one"),
            calls(call("s2", "work", task="second")),
            text("two"),
            text("three"),
        ],
        work_toolkit(log),
    )
    duo = agent("duo", [calls(call("d1", "work", task="other")), text("other")], work_toolkit(log))
    team = TeamPipeline(leader, [TeamMember(solo, "s"), TeamMember(duo, "d")], reset_members=False)
    start = trio.current_time()
    await team.reply(UserMsg("user", "go"))
    assert trio.current_time() - start == pytest.approx(2.0)  # solo's two works in a row
    prompts = [texts(m) for m in solo.state.context if m.role == "user"]
    assert prompts == ["first", "second", "third"]
    assert [result_text(r) for r in results(leader)] == ["one", "other", "two", "three"]


async def test_reset_members_clears_their_context_when_the_leader_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    for reset in (True, False):
        team = fan_out()
        team.reset_members = reset
        for member in team.members.values():
            member.agent.state.summary = "earlier"
        await team.reply(UserMsg("user", "go"))
        emptied = [
            not m.agent.state.context and not m.agent.state.summary for m in team.members.values()
        ]
        assert emptied == [reset] * 3


async def test_a_failing_member_gives_the_leader_an_error_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leader = agent(
        "lead", [calls(assign("x", "bad", "t"), assign("y", "good", "t")), text("coped")]
    )
    bad = agent("bad", [RuntimeError("model broke")])
    good = agent("good", [text("fine")])
    team = TeamPipeline(leader, [TeamMember(bad, "b"), TeamMember(good, "g")])
    rec = Recorder()
    msg = await team.reply(UserMsg("user", "go"), on_event=rec)
    assert texts(msg) == "coped"
    failed, ok = results(leader)
    assert failed.state == ToolResultState.ERROR
    assert "model broke" in result_text(failed)
    assert ok.state == ToolResultState.SUCCESS
    assert rec.ends("bad")[0].finished_reason == ReplyFinishedReason.ERROR


async def test_stream_and_call_are_the_same_reply(autojump_clock: trio.testing.MockClock) -> None:
    team = fan_out()
    async with team.stream(UserMsg("user", "go")) as reply:
        events = [e async for e in reply]
    assert reply.msg is not None
    assert texts(reply.msg) == "summary"
    check_nested_rules(team.participants, events)
    again = fan_out()
    assert texts(await again(UserMsg("user", "go"))) == "summary"


async def test_one_reply_at_a_time(autojump_clock: trio.testing.MockClock) -> None:
    team = fan_out()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(team.reply, UserMsg("user", "go"))
        await trio.testing.wait_all_tasks_blocked()
        assert team.is_replying
        with pytest.raises(RuntimeError, match="one reply at a time"):
            await team.reply(UserMsg("user", "again"))
    assert not team.is_replying


# -- human in the loop --------------------------------------------------------------------------------


def hitl_team(log: list[str]) -> TeamPipeline:
    """``ann`` works; ``cy`` must confirm ``approve`` twice (two assignments, the second
    queued behind the first)."""
    leader = agent(
        "lead",
        [
            calls(
                assign("a", "ann", "count"),
                assign("c1", "cy", "first"),
                assign("c2", "cy", "second"),
            ),
            text("all settled"),
        ],
    )
    ann = agent("ann", [calls(call("w", "work", task="count")), text("counted")], work_toolkit(log))
    cy = agent(
        "cy",
        [calls(call("p1", "approve", what="first")), text("approved first"), text("second done")],
        work_toolkit(log),
    )
    return TeamPipeline(leader, [TeamMember(ann, "counts"), TeamMember(cy, "approves")])


async def test_a_member_parks_and_the_confirmation_is_routed_to_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    team = hitl_team(log)
    rec = Recorder()
    parked = await team.reply(UserMsg("user", "go"), on_event=rec)
    assert parked.finished_reason is None
    (ask,) = [e for e in rec.events if isinstance(e, RequireUserConfirmEvent)]
    assert agent_path(ask) == ("cy",)
    assert ask.reply_id == team.members["cy"].agent.state.reply_id
    # ann finished and the leader has her answer; it stays parked on cy's two assignments.
    leader = team.leader
    assert [(r.id, result_text(r)) for r in results(leader)] == [("a", "counted")]
    assert [c.id for c in leader.state.get_awaiting_tool_calls("lead")] == ["c1", "c2"]
    assert not rec.ends("lead")
    assert not rec.ends("cy")
    assert log == ["work:count"]

    rec2 = Recorder()
    msg = await team.reply(confirm(ask), on_event=rec2)
    assert texts(msg) == "all settled"
    assert log == ["work:count", "approve:first"]
    assert [(r.id, result_text(r)) for r in results(leader)] == [
        ("a", "counted"),
        ("c1", "approved first"),
        ("c2", "second done"),
    ]
    assert [len(rec2.ends(n)) for n in ("cy", "lead")] == [
        2,
        1,
    ]  # cy's two replies, then the leader
    assert agent_path(rec2.events[-1]) == ("lead",)


async def test_a_result_for_nobody_is_refused_and_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    team = hitl_team([])
    await team.reply(UserMsg("user", "go"))
    before = dumps(team.states(), dict[str, AgentState])
    stray = UserConfirmResultEvent(reply_id="nobody", confirm_results=[])
    with pytest.raises(ValueError, match="no participant of the team is parked on reply 'nobody'"):
        await team.reply(stray)
    assert dumps(team.states(), dict[str, AgentState]) == before
    with pytest.raises(ValueError, match="parked"):
        await team.reply(UserMsg("user", "new task while parked"))


async def test_a_user_interrupt_aborts_every_parked_participant(
    autojump_clock: trio.testing.MockClock,
) -> None:
    team = hitl_team([])
    await team.reply(UserMsg("user", "go"))
    rec = Recorder()
    msg = await team.reply(UserInterruptEvent(), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [e.finished_reason for e in rec.ends("cy")] == [ReplyFinishedReason.INTERRUPTED]
    assert [e.finished_reason for e in rec.ends("lead")] == [ReplyFinishedReason.INTERRUPTED]
    assert agent_path(rec.events[-1]) == ("lead",)
    states = {r.id: r.state for r in results(team.leader)}
    assert states == {
        "a": ToolResultState.SUCCESS,
        "c1": ToolResultState.INTERRUPTED,
        "c2": ToolResultState.INTERRUPTED,
    }
    assert not any(a.state.has_awaiting_tool_calls(a.name) for a in team.participants)
    check_nested_rules(team.participants, rec.events)


async def test_the_leaders_own_external_tool_reaches_the_caller(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Only TeamAssign requests are the pipeline's; another external call parks the team and
    is resumed by the leader's reply id."""
    from test_agent_hitl import External

    leader = agent(
        "lead",
        [calls(assign("a", "ann", "count"), call("e", "ext", q="x")), text("both back")],
    )
    leader.toolkit.add_tool(External())
    ann = agent("ann", [text("counted")])
    team = TeamPipeline(leader, [TeamMember(ann, "counts")])
    rec = Recorder()
    parked = await team.reply(UserMsg("user", "go"), on_event=rec)
    assert parked.finished_reason is None
    (request,) = [e for e in rec.events if isinstance(e, RequireExternalExecutionEvent)]
    assert [c.name for c in request.tool_calls] == ["ext"]
    assert [(r.id, result_text(r)) for r in results(leader)] == [("a", "counted")]
    done = ToolResultBlock(id="e", name="ext", output="42", state=ToolResultState.SUCCESS)
    msg = await team.reply(
        ExternalExecutionResultEvent(reply_id=request.reply_id, execution_results=[done])
    )
    assert texts(msg) == "both back"


async def test_a_members_inner_agent_confirmation_is_routed_through_the_member(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A member calls an agent as a tool, and that agent must confirm: the request reaches
    the team's caller tagged (member, inner agent); the answer sent to the team resumes it."""
    inner = agent(
        "vault", [calls(call("p", "approve", what="open")), text("opened")], work_toolkit()
    )
    tools = Toolkit()
    tools.add_tool(inner.as_tool())
    keeper = agent("keeper", [calls(call("k", "vault", prompt="open")), text("vault open")], tools)
    leader = agent("lead", [calls(assign("a", "keeper", "open the vault")), text("done")])
    team = TeamPipeline(leader, [TeamMember(keeper, "keeps the vault")])
    rec = Recorder()
    parked = await team.reply(UserMsg("user", "go"), on_event=rec)
    assert parked.finished_reason is None
    (ask,) = [e for e in rec.events if isinstance(e, RequireUserConfirmEvent)]
    assert agent_path(ask) == ("keeper", "vault")
    msg = await team.reply(confirm(ask))
    assert texts(msg) == "done"
    assert [result_text(r) for r in results(leader)] == ["vault open"]


# -- cancellation ----------------------------------------------------------------------------------


async def test_interrupt_mid_fan_out_ends_every_member_once_then_the_leader(
    autojump_clock: trio.testing.MockClock,
) -> None:
    team = fan_out()
    rec = Recorder()
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            result.append(await team.reply(UserMsg("user", "go"), on_event=rec))

        result: list[Any] = []
        nursery.start_soon(run)
        await trio.sleep(1.5)  # ann finished, ben and cy are working
        team.interrupt()
    (msg,) = result
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    reasons = {n: [e.finished_reason for e in rec.ends(n)] for n in ("ann", "ben", "cy", "lead")}
    assert reasons == {
        "ann": [ReplyFinishedReason.COMPLETED],
        "ben": [ReplyFinishedReason.INTERRUPTED],
        "cy": [ReplyFinishedReason.INTERRUPTED],
        "lead": [ReplyFinishedReason.INTERRUPTED],
    }
    assert agent_path(rec.events[-1]) == ("lead",)
    check_nested_rules(team.participants, rec.events)
    assert {r.id: r.state for r in results(team.leader)} == dict.fromkeys(
        "abc", ToolResultState.INTERRUPTED
    )
    # The next reply works from the consistent context.
    msg = await team.reply(UserMsg("user", "again"))  # the leader's script answers "summary"
    assert texts(msg) == "summary"
    request = model_of(team.leader).requests[-1]
    call_ids = [
        b.id for m in request.messages for b in m.content if getattr(b, "type", "") == "tool_call"
    ]
    result_ids = [
        b.id for m in request.messages for b in m.content if getattr(b, "type", "") == "tool_result"
    ]
    assert sorted(call_ids) == sorted(result_ids) == ["a", "b", "c"]


async def test_an_outer_cancel_ends_every_member_once_and_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    team = fan_out()
    rec = Recorder()
    with trio.move_on_after(2.5) as scope:
        await team.reply(UserMsg("user", "go"), on_event=rec)
    assert scope.cancelled_caught  # the Cancelled reached the scope: never swallowed
    reasons = [rec.ends(n)[0].finished_reason for n in ("ann", "ben", "cy", "lead")]
    assert reasons == [
        ReplyFinishedReason.COMPLETED,
        ReplyFinishedReason.COMPLETED,
        ReplyFinishedReason.INTERRUPTED,
        ReplyFinishedReason.INTERRUPTED,
    ]
    check_nested_rules(team.participants, rec.events)
    assert not team.is_replying


# -- saving and resuming -----------------------------------------------------------------------------


async def test_a_team_parked_on_a_confirmation_resumes_from_json(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    team = hitl_team(log)
    rec = Recorder()
    await team.reply(UserMsg("user", "go"), on_event=rec)
    (ask,) = [e for e in rec.events if isinstance(e, RequireUserConfirmEvent)]
    saved = dumps(team.states(), dict[str, AgentState])

    states = loads(saved, dict[str, AgentState])
    cy = agent(
        "cy", [text("approved first"), text("second done")], work_toolkit(log), state=states["cy"]
    )
    restored = TeamPipeline(
        agent("lead", [text("all settled")], state=states["lead"]),
        [
            TeamMember(agent("ann", [], state=states["ann"]), "counts"),
            TeamMember(cy, "approves"),
        ],
    )
    msg = await restored.reply(confirm(ask))
    assert texts(msg) == "all settled"
    assert log == ["work:count", "approve:first"]
    assert [result_text(r) for r in results(restored.leader)] == [
        "counted",
        "approved first",
        "second done",
    ]


async def test_team_states_live_in_a_session_store(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    store = SQLiteSessionStore(str(tmp_path / "team.db"))

    def with_session(a: Agent) -> Agent:
        return Agent(
            a.name,
            model=a.model,
            toolkit=a.toolkit,
            middlewares=[SessionMiddleware(store, f"team/{a.name}")],
            injection_config=a.injection_config,
        )

    log: list[str] = []
    base = hitl_team(log)
    team = TeamPipeline(
        with_session(base.leader),
        [TeamMember(with_session(m.agent), m.description) for m in base.members.values()],
    )
    rec = Recorder()
    await team.reply(UserMsg("user", "go"), on_event=rec)
    assert sorted(await store.list()) == ["team/ann", "team/cy", "team/lead"]
    stored = await store.load("team/cy")
    assert stored is not None
    assert stored.state.has_awaiting_tool_calls("cy")
    stored_lead = await store.load("team/lead")
    assert stored_lead is not None
    assert [c.id for c in stored_lead.state.get_awaiting_tool_calls("lead")] == ["c1", "c2"]


async def test_a_team_parked_in_one_process_resumes_in_another(tmp_path: Path) -> None:
    db = tmp_path / "team.db"
    ledger = tmp_path / "ledger.txt"
    first = await trio.run_process(
        [sys.executable, str(WORKER), str(db), "park", str(ledger)], capture_stdout=True
    )
    parked = json.loads(first.stdout)
    assert parked["finished_reason"] is None
    assert parked["asked"] == ["approve"]
    second = await trio.run_process(
        [sys.executable, str(WORKER), str(db), "resume", str(ledger)], capture_stdout=True
    )
    resumed = json.loads(second.stdout)
    assert resumed == {
        "text": "all settled",
        "results": ["counted", "approved first", "second done"],
        "finished_reason": "completed",
    }
    assert ledger.read_text().splitlines() == ["work:count", "approve:first"]


# -- tracing -----------------------------------------------------------------------------------------


async def test_member_spans_nest_under_the_leaders_team_assign_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    otel = new_otel()
    tracing = TracingMiddleware(tracer_provider=otel.provider)
    team = fan_out()
    traced = TeamPipeline(
        Agent(
            "lead",
            model=team.leader.model,
            middlewares=[tracing],
            injection_config=team.leader.injection_config,
        ),
        [
            TeamMember(
                Agent(
                    m.agent.name,
                    model=m.agent.model,
                    toolkit=m.agent.toolkit,
                    middlewares=[tracing],
                    injection_config=m.agent.injection_config,
                ),
                m.description,
            )
            for m in team.members.values()
        ],
    )
    await traced.reply(UserMsg("user", "go"))
    by_id = {s.context.span_id: s for s in otel.spans()}
    for call_id, name in zip("abc", ("ann", "ben", "cy"), strict=True):
        (member_span,) = [
            s for s in otel.spans("invoke_agent") if s.attributes.get("gen_ai.agent.name") == name
        ]
        assert member_span.parent is not None
        assign_span = by_id[member_span.parent.span_id]
        assert assign_span.name == "execute_tool TeamAssign"
        assert assign_span.attributes["gen_ai.tool.call.id"] == call_id
        assert assign_span.attributes["trioagent.tool.result_state"] == "success"
    assert not otel.tracker.open

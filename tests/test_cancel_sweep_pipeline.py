"""``cancel_sweep`` over agents working together, in both modes.

* a team round with three concurrent members, one of them parked on a confirmation;
* a goal loop (executor, then verifier);
* an agent calling an agent calling an agent, as tools (two levels deep).

At every point: each reply id has at most one end, the last of its events; a reply without
one is its agent's parked reply; the outermost end comes last; every participant's context
has exactly one result per tool call; no member task outlives the round.  Plus the checks
that the nested rules catch what they promise to catch.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from pipeline_kit import (
    agent,
    asker,
    assign,
    call,
    calling_chain,
    calls,
    structured,
    text,
    work_toolkit,
    worker,
)

from trioagent.agent import Agent
from trioagent.event import (
    AgentEvent,
    ConfirmResult,
    ReplyEndEvent,
    ReplyStartEvent,
    UserConfirmResultEvent,
    tag_agent,
)
from trioagent.message import UserMsg
from trioagent.pipeline import GoalPipeline, TeamMember, TeamPipeline
from trioagent.testing import SweepRun, SweepViolation, cancel_sweep, check_nested_rules
from trioagent.types import ReplyFinishedReason

MODES = ["interrupt", "outer"]


def team() -> TeamPipeline:
    leader = agent(
        "lead",
        [
            calls(
                assign("a", "ann", "count"), assign("b", "ben", "sort"), assign("c", "cy", "ok?")
            ),
            text("summary"),
        ],
    )
    ann = agent("ann", [calls(call("wa", "work", task="count")), text("counted")], work_toolkit())
    ben = agent(
        "ben", [calls(call("wb", "work", task="sort")), text("sorted")], work_toolkit(seconds=2)
    )
    cy = agent("cy", [calls(call("p", "approve", what="ship"))], work_toolkit())
    return TeamPipeline(
        leader, [TeamMember(ann, "counts"), TeamMember(ben, "sorts"), TeamMember(cy, "ships")]
    )


def goal() -> GoalPipeline:
    return GoalPipeline(
        agent(
            "maker",
            [calls(call("w", "work", task="build")), structured("r", report="built at /out")],
            work_toolkit(),
        ),
        agent(
            "judge",
            [calls(call("w2", "work", task="check")), structured("v", result="pass", message="")],
            work_toolkit(),
        ),
    )


def nested() -> Agent:
    return calling_chain(worker("typist"))[0]


def no_member_left_running(run: SweepRun) -> None:
    assert not run.agent.is_replying
    assert not any(a.is_replying for a in run.agent.participants)


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_a_team_round_with_a_parked_member(
    mode: str, autojump_clock: trio.testing.MockClock
) -> None:
    report = await cancel_sweep(
        team, lambda: UserMsg("user", "go"), mode=mode, check=no_member_left_running
    )
    baseline = report.runs[0]
    assert baseline.msg is not None
    assert baseline.msg.finished_reason is None
    assert report.points > 20
    interrupted = [r for r in report.runs if r.end and r.end.finished_reason == "interrupted"]
    assert interrupted  # the sweep did cut the round


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_a_goal_loop(mode: str, autojump_clock: trio.testing.MockClock) -> None:
    report = await cancel_sweep(
        goal, lambda: UserMsg("user", "build it"), mode=mode, check=no_member_left_running
    )
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == ReplyFinishedReason.COMPLETED
    assert report.outcomes["interrupted"] > 0


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_an_agent_calling_agents_two_levels_deep(
    mode: str, autojump_clock: trio.testing.MockClock
) -> None:
    def inner_ends_first(run: SweepRun) -> None:
        ends = [e for e in run.events if isinstance(e, ReplyEndEvent)]
        if ends:
            assert ends[-1].reply_id == run.agent.state.reply_id  # the boss ends last

    report = await cancel_sweep(
        nested, lambda: UserMsg("user", "memo"), mode=mode, check=inner_ends_first
    )
    assert report.runs[0].end is not None
    assert report.outcomes["interrupted"] > 0


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_resuming_a_confirmation_two_levels_down(
    mode: str, autojump_clock: trio.testing.MockClock
) -> None:
    """The answer sent to the outermost agent is routed to the innermost; cancelled at every
    point of that resume, each level still ends once (or stays parked, consistent)."""
    pending: list[UserConfirmResultEvent] = []

    async def parked_chain() -> Agent:
        inner = asker()
        boss = calling_chain(inner)[0]
        await boss.reply(UserMsg("user", "go"))
        (waiting,) = inner.state.get_awaiting_tool_calls("asker")
        pending.append(
            UserConfirmResultEvent(
                reply_id=inner.state.reply_id,
                confirm_results=[ConfirmResult(confirmed=True, tool_call=waiting)],
            )
        )
        return boss

    report = await cancel_sweep(parked_chain, lambda: pending[-1], mode=mode)
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == ReplyFinishedReason.COMPLETED
    assert report.outcomes["interrupted"] > 0


# -- the nested rules catch what they promise -----------------------------------------------------


def start(reply_id: str, name: str) -> AgentEvent:
    return ReplyStartEvent(session_id="s", reply_id=reply_id, name=name)


def end(reply_id: str) -> AgentEvent:
    return ReplyEndEvent(session_id="s", reply_id=reply_id)


def pair() -> list[Agent]:
    return [agent("outer", []), agent("inner", [])]


def test_two_ends_for_one_reply_are_caught() -> None:
    events = [start("i", "inner"), end("i"), end("i")]
    with pytest.raises(SweepViolation, match="reply i has 2 ReplyEndEvents"):
        check_nested_rules(pair(), events)


def test_an_inner_end_after_the_outer_end_is_caught() -> None:
    outer, inner = pair()
    events = [
        start(outer.state.reply_id, "outer"),
        tag_agent(start("i", "inner"), "inner"),
        end(outer.state.reply_id),
        tag_agent(end("i"), "inner"),
    ]
    with pytest.raises(SweepViolation, match="inner reply ended after the outer one"):
        check_nested_rules([outer, inner], events)


def test_a_reply_without_an_end_that_is_not_parked_is_caught() -> None:
    events = [start("i", "inner"), start("o", "outer"), end("o")]
    with pytest.raises(SweepViolation, match="reply i has no ReplyEndEvent and is not parked"):
        check_nested_rules(pair(), events)

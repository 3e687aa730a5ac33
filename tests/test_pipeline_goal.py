"""``GoalPipeline``: AgentScope 2.0.11's executor/verifier loop, with Trio's structure.

AgentScope has no tests for its ``GoalPipeline`` (the class ships in the 2.0.11 wheel only), so
these port the behaviours its code implies, with fresh inputs: structured execution reports
and verdicts, feedback on a failed verdict, ``impossible`` and ``max_iters`` ending the loop,
the verifier's context reset, structured-output retry budgets (kept across HITL resumes),
HITL routed by ``reply_id`` to the executor or the verifier, and a user interrupt of the
parked one.  Then trioagent's own: the loop's progress saved with the executor's state, and
a deadline between the executor and the verifier.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from pipeline_kit import (
    Recorder,
    agent,
    call,
    calls,
    confirm,
    model_of,
    structured,
    text,
    texts,
    work_toolkit,
)

from trioagent.agent import AgentState, ReActConfig
from trioagent.event import (
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
    agent_path,
)
from trioagent.exception import StructuredOutputError
from trioagent.message import Msg, UserMsg
from trioagent.pipeline import GoalPipeline, GoalProgress, PipelineProtocol
from trioagent.serialization import dumps, loads
from trioagent.testing import check_nested_rules
from trioagent.types import ReplyFinishedReason


def report(call_id: str, value: str) -> Any:
    return structured(call_id, report=value)


def verdict(call_id: str, result: str, message: str = "") -> Any:
    return structured(call_id, result=result, message=message)


#: An agent that gives up on a structured output after two answers without it (one iteration,
#: one grace iteration): its reply ends EXCEED_MAX_ITERS, a missing report for the loop.
IMPATIENT = ReActConfig(max_iters=1, structured_output_grace_iters=1)


def loop(
    executor_steps: list[Any], verifier_steps: list[Any], *, impatient: bool = False, **kwargs: Any
) -> GoalPipeline:
    config = {"react_config": IMPATIENT} if impatient else {}
    return GoalPipeline(
        agent("maker", executor_steps, work_toolkit(), **config),
        agent("judge", verifier_steps, work_toolkit(), **config),
        **kwargs,
    )


def goal_msg() -> Msg:
    return UserMsg("user", "write poem.txt with four lines")


def user_texts(msgs: list[Msg]) -> list[str]:
    return [texts(m) for m in msgs if m.role == "user"]


async def test_a_passing_verdict_ends_the_loop(autojump_clock: trio.testing.MockClock) -> None:
    goal = loop([report("r", "poem.txt, 4 lines")], [verdict("v", "pass")])
    assert isinstance(goal, PipelineProtocol)
    rec = Recorder()
    msg = await goal.reply(goal_msg(), on_event=rec)
    assert msg.structured_output == {"result": "pass", "message": ""}
    assert msg.name == "judge"
    assert goal.progress.report == "poem.txt, 4 lines"
    assert goal.progress.iters == 0
    # The executor got the goal plus a reminder to report; the verifier the goal and report.
    (first,) = model_of(goal.executor).requests
    assert user_texts(first.messages)[0] == "write poem.txt with four lines"
    assert "so a reviewer can check it" in user_texts(first.messages)[1]
    judged = user_texts(model_of(goal.verifier).requests[0].messages)[0]
    assert "<goal>write poem.txt with four lines</goal>" in judged
    assert "<report>poem.txt, 4 lines</report>" in judged
    assert [agent_path(e)[0] for e in rec.events if e.type == "REPLY_END"] == ["maker", "judge"]
    check_nested_rules(goal.participants, rec.events)


async def test_a_failed_verdict_goes_back_to_the_executor_as_feedback(
    autojump_clock: trio.testing.MockClock,
) -> None:
    goal = loop(
        [report("r1", "three lines"), report("r2", "four lines")],
        [verdict("v1", "fail", "line 4 missing in poem.txt"), verdict("v2", "pass")],
    )
    msg = await goal.reply(goal_msg())
    assert msg.structured_output is not None
    assert msg.structured_output["result"] == "pass"
    assert goal.progress.iters == 1
    assert goal.progress.report == "four lines"
    second = model_of(goal.executor).requests[1]
    assert "line 4 missing in poem.txt" in user_texts(second.messages)[-1]
    # The verifier's context was reset after the failed verdict: it judges afresh.
    assert len(user_texts(model_of(goal.verifier).requests[1].messages)) == 1


async def test_the_verifier_keeps_its_context_when_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    goal = loop(
        [report("r1", "a"), report("r2", "b")],
        [verdict("v1", "fail", "no"), verdict("v2", "pass")],
        verifier_reset_context=False,
    )
    await goal.reply(goal_msg())
    assert len(user_texts(model_of(goal.verifier).requests[1].messages)) == 2


async def test_impossible_ends_the_loop(autojump_clock: trio.testing.MockClock) -> None:
    goal = loop([report("r", "cannot")], [verdict("v", "impossible", "needs a printer")])
    msg = await goal.reply(goal_msg())
    assert msg.structured_output == {"result": "impossible", "message": "needs a printer"}
    model_of(goal.executor).assert_consumed()


async def test_max_iters_bounds_the_judged_attempts(autojump_clock: trio.testing.MockClock) -> None:
    goal = loop(
        [report(f"r{i}", f"try {i}") for i in range(3)],
        [verdict(f"v{i}", "fail", f"still wrong {i}") for i in range(3)],
        max_iters=3,
    )
    msg = await goal.reply(goal_msg())
    assert msg.structured_output == {"result": "fail", "message": "still wrong 2"}
    assert goal.progress.iters == 3
    model_of(goal.executor).assert_consumed()
    model_of(goal.verifier).assert_consumed()


async def test_the_executor_is_reminded_until_it_reports(
    autojump_clock: trio.testing.MockClock,
) -> None:
    goal = loop(
        [text("done, I think"), text("really done"), report("r", "poem.txt")],
        [verdict("v", "pass")],
        impatient=True,
    )
    msg = await goal.reply(goal_msg())
    assert msg.structured_output == {"result": "pass", "message": ""}
    assert goal.progress.executor_retries == 1
    retry = model_of(goal.executor).requests[2]
    assert "No valid execution report" in user_texts(retry.messages)[-1]


async def test_the_verifier_is_reminded_until_it_judges(
    autojump_clock: trio.testing.MockClock,
) -> None:
    goal = loop(
        [report("r", "poem.txt")],
        [text("looks fine"), text("fine"), verdict("v", "pass")],
        impatient=True,
    )
    msg = await goal.reply(goal_msg())
    assert msg.structured_output == {"result": "pass", "message": ""}
    assert goal.progress.verifier_retries == 1
    retry = user_texts(model_of(goal.verifier).requests[2].messages)[-1]
    assert "No valid verdict" in retry
    assert "<goal>write poem.txt with four lines</goal>" in retry


@pytest.mark.parametrize(
    ("who", "executor", "verifier"),
    [
        ("executor", [text(str(i)) for i in range(4)], []),
        ("verifier", [report("r", "x")], [text(str(i)) for i in range(4)]),
    ],
)
async def test_exhausted_retries_raise_a_structured_output_error(
    who: str, executor: list[Any], verifier: list[Any], autojump_clock: trio.testing.MockClock
) -> None:
    goal = loop(executor, verifier, impatient=True, max_retries=1)
    with pytest.raises(StructuredOutputError, match=f"the {who} did not produce"):
        await goal.reply(goal_msg())
    assert getattr(goal.progress, f"{who}_retries") == 2


def approving_executor_loop(max_retries: int = 3) -> GoalPipeline:
    """The executor needs the user's confirmation for ``approve`` before it reports."""
    return loop(
        [calls(call("p", "approve", what="publish")), report("r", "published")],
        [verdict("v", "pass")],
        max_retries=max_retries,
    )


async def test_an_executor_confirmation_parks_the_loop_and_resumes_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    goal = approving_executor_loop()
    rec = Recorder()
    parked = await goal.reply(goal_msg(), on_event=rec)
    assert parked.finished_reason is None
    assert parked.name == "maker"
    (ask,) = [e for e in rec.events if isinstance(e, RequireUserConfirmEvent)]
    assert agent_path(ask) == ("maker",)
    assert not model_of(goal.verifier).requests
    msg = await goal.reply(confirm(ask))
    assert msg.structured_output == {"result": "pass", "message": ""}
    assert goal.progress.report == "published"


async def test_a_verifier_confirmation_is_routed_to_the_verifier(
    autojump_clock: trio.testing.MockClock,
) -> None:
    goal = loop(
        [report("r", "made it")],
        [calls(call("p", "approve", what="inspect")), verdict("v", "pass")],
    )
    rec = Recorder()
    parked = await goal.reply(goal_msg(), on_event=rec)
    assert parked.name == "judge"
    assert parked.finished_reason is None
    (ask,) = [e for e in rec.events if isinstance(e, RequireUserConfirmEvent)]
    msg = await goal.reply(confirm(ask))
    assert msg.structured_output == {"result": "pass", "message": ""}
    assert len(model_of(goal.executor).requests) == 1  # the executor did not run again


async def test_retry_budget_is_kept_across_a_hitl_resume(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """One retry before the park, one after: with max_retries=1 the second exhausts it."""
    goal = loop(
        [text("no report"), text("none"), calls(call("p", "approve", what="x")), text("nope")],
        [],
        impatient=True,
        max_retries=1,
    )
    rec = Recorder()
    parked = await goal.reply(goal_msg(), on_event=rec)
    assert parked.finished_reason is None
    (ask,) = [e for e in rec.events if isinstance(e, RequireUserConfirmEvent)]
    assert goal.progress.executor_retries == 1
    with pytest.raises(StructuredOutputError, match="the executor did not produce"):
        await goal.reply(confirm(ask))
    assert goal.progress.executor_retries == 2


async def test_a_user_interrupt_aborts_the_parked_participant(
    autojump_clock: trio.testing.MockClock,
) -> None:
    goal = approving_executor_loop()
    await goal.reply(goal_msg())
    rec = Recorder()
    msg = await goal.reply(UserInterruptEvent(reply_id=goal.executor.state.reply_id), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [e.finished_reason for e in rec.events if e.type == "REPLY_END"] == [
        ReplyFinishedReason.INTERRUPTED
    ]
    assert not goal.executor.state.has_awaiting_tool_calls("maker")


async def test_a_result_for_nobody_is_refused(autojump_clock: trio.testing.MockClock) -> None:
    goal = approving_executor_loop()
    await goal.reply(goal_msg())
    with pytest.raises(ValueError, match="no participant of the goal loop is parked"):
        await goal.reply(UserConfirmResultEvent(reply_id="elsewhere", confirm_results=[]))


async def test_a_goal_is_required(autojump_clock: trio.testing.MockClock) -> None:
    goal = loop([], [])
    with pytest.raises(TypeError, match="starts from a goal"):
        await goal.reply(None)
    with pytest.raises(ValueError, match="two agents"):
        GoalPipeline(goal.executor, goal.executor)


async def test_progress_survives_a_save_and_restore_of_the_executor(
    autojump_clock: trio.testing.MockClock,
) -> None:
    goal = approving_executor_loop()
    rec = Recorder()
    await goal.reply(goal_msg(), on_event=rec)
    (ask,) = [e for e in rec.events if isinstance(e, RequireUserConfirmEvent)]
    saved = dumps(goal.states(), dict[str, AgentState])
    states = loads(saved, dict[str, AgentState])
    restored = GoalPipeline(
        agent("maker", [report("r", "published")], work_toolkit(), state=states["maker"]),
        agent("judge", [verdict("v", "pass")], work_toolkit(), state=states["judge"]),
    )
    assert restored.progress == goal.progress
    assert restored.progress.goal
    assert isinstance(restored.progress, GoalProgress)
    msg = await restored.reply(confirm(ask))
    assert msg.structured_output == {"result": "pass", "message": ""}
    judged = user_texts(model_of(restored.verifier).requests[0].messages)[0]
    assert "<goal>write poem.txt with four lines</goal>" in judged


async def test_a_deadline_between_executor_and_verifier(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The executor reports at t=1; the verifier's work takes until t=3; a deadline at t=2 ends
    the verifier INTERRUPTED, after the executor's COMPLETED end, and propagates."""
    goal = loop(
        [calls(call("w", "work", task="build")), report("r", "built")],
        [calls(call("w2", "work", task="check")), verdict("v", "pass")],
    )
    goal.verifier.toolkit = work_toolkit(seconds=2.0)
    rec = Recorder()
    with trio.move_on_after(2.0) as scope:
        await goal.reply(goal_msg(), on_event=rec)
    assert scope.cancelled_caught
    ends = [(agent_path(e)[0], e.finished_reason) for e in rec.events if e.type == "REPLY_END"]
    assert ends == [
        ("maker", ReplyFinishedReason.COMPLETED),
        ("judge", ReplyFinishedReason.INTERRUPTED),
    ]
    check_nested_rules(goal.participants, rec.events)
    assert not goal.is_replying

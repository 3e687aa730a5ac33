"""cancel_sweep over a reply served through the ASGI app: the client closing the connection
(interrupt mode) and the request's scope cancelled (outer mode), at every schedule point.

Each run also checks what only the server can get wrong: the stored thread is the agent's
whole state (the partial answer saved), and the SSE stream the client got carries at most one
terminal event, last.
"""

from __future__ import annotations

from typing import Any

import pytest
from pipeline_kit import assign, call, calls, text, work_toolkit
from web_kit import NO_INJECTION, TERMINAL, ServedAgent, ServedPipeline, parse_sse, words

from trioagent.agent import Agent
from trioagent.message import UserMsg
from trioagent.pipeline import TeamMember
from trioagent.serialization import dumps
from trioagent.testing import ScriptedModel, SweepRun, cancel_sweep, tool_call_chunks


def _check(run: SweepRun) -> None:
    served = run.agent
    assert isinstance(served, ServedAgent)
    frames = _frames(served)
    if served.agent is not None and "sweep" in served.store.data:
        stored = served.store.data["sweep"][1].decode()
        # The store holds the agent's state as it ended (its version counter aside).
        assert _context(stored) == _context(dumps(served.agent.state))
    if run.end is not None and run.end.finished_reason == "completed":
        assert frames[-1]["type"] == "RUN_FINISHED"


def _frames(served: ServedAgent) -> list[dict[str, Any]]:
    """The SSE frames the client got: at most one terminal event, last."""
    frames = parse_sse(bytes(served.sse))
    terminal = [i for i, e in enumerate(frames) if e["type"] in TERMINAL]
    assert terminal in ([], [len(frames) - 1]), [e["type"] for e in frames]
    return frames


def _context(payload: str) -> str:
    import orjson

    return orjson.dumps(orjson.loads(payload)["context"]).decode()


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_a_streamed_answer_served_over_agui(mode: str, autojump_clock) -> None:
    report = await cancel_sweep(
        lambda: ServedAgent(lambda: [words(6)]),
        lambda: UserMsg("user", "hello"),
        mode=mode,
        check=_check,
    )
    assert report.outcomes["interrupted"] >= 1
    assert report.outcomes["completed"] >= 1


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_a_tool_round_served_over_agui(mode: str, autojump_clock) -> None:
    # The tool asks for confirmation: a run that is not cut off parks (RUN_FINISHED interrupt).
    report = await cancel_sweep(
        lambda: ServedAgent(lambda: [tool_call_chunks("c1", "ask_time", "{}")]),
        lambda: UserMsg("user", "time?"),
        mode=mode,
        check=_check,
    )
    assert report.outcomes["interrupted"] >= 1
    assert report.outcomes["parked"] >= 1


def _team(first: Any) -> tuple[Agent, list[TeamMember]]:
    """``lead`` assigns to ``ann`` (streams an answer) and ``ben`` (runs a tool) at once."""

    def participant(name: str, steps: list[Any]) -> Agent:
        model = ScriptedModel(steps)
        return Agent(
            name,
            "Work.",
            model,
            work_toolkit(),
            middlewares=first(name),
            injection_config=NO_INJECTION,
        )

    lead = participant(
        "lead", [calls(assign("1", "ann", "a"), assign("2", "ben", "b")), text("ok")]
    )
    ann = participant("ann", [words(3)])
    ben = participant("ben", [calls(call("wb", "work", task="b")), text("did b")])
    return lead, [TeamMember(ann, "streams"), TeamMember(ben, "works")]


def _check_team(run: SweepRun) -> None:
    served = run.agent
    assert isinstance(served, ServedPipeline)
    frames = _frames(served)
    for agent in served.participants:
        # Each participant's record is its state as it ended (its version counter aside);
        # a member cleared by reset_members after it was saved starts fresh next run.
        record = served.store.data.get(f"sweep/{agent.name}")
        if record is not None and (agent.name == "lead" or agent.state.context):
            assert _context(record[1].decode()) == _context(dumps(agent.state))
    # The run closes with the pipeline's Msg, after the last participant's end: a client
    # that left (or a request cancelled) in between gets no terminal event.
    if run.end is not None and not (run.fired or run.propagated_cancel):
        assert frames[-1]["type"] == "RUN_FINISHED"
        assert frames[-1]["outcome"] == {"type": "success"}


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_a_team_round_served_over_agui(mode: str, autojump_clock) -> None:
    report = await cancel_sweep(
        lambda: ServedPipeline(_team),
        lambda: UserMsg("user", "split it"),
        mode=mode,
        check=_check_team,
    )
    assert report.outcomes["interrupted"] >= 1
    assert report.outcomes["completed"] >= 1

"""cancel_sweep over a reply served through the ASGI app: the client closing the connection
(interrupt mode) and the request's scope cancelled (outer mode), at every schedule point.

Each run also checks what only the server can get wrong: the stored thread is the agent's
whole state (the partial answer saved), and the SSE stream the client got carries at most one
terminal event, last.
"""

from __future__ import annotations

import pytest
from web_kit import TERMINAL, ServedAgent, parse_sse, words

from trioagent.message import UserMsg
from trioagent.serialization import dumps
from trioagent.testing import SweepRun, cancel_sweep, tool_call_chunks


def _check(run: SweepRun) -> None:
    served = run.agent
    assert isinstance(served, ServedAgent)
    frames = parse_sse(bytes(served.sse))
    terminal = [i for i, e in enumerate(frames) if e["type"] in TERMINAL]
    assert terminal in ([], [len(frames) - 1]), [e["type"] for e in frames]
    if served.agent is not None and "sweep" in served.store.data:
        stored = served.store.data["sweep"][1].decode()
        # The store holds the agent's state as it ended (its version counter aside).
        assert _context(stored) == _context(dumps(served.agent.state))
    if run.end is not None and run.end.finished_reason == "completed":
        assert frames[-1]["type"] == "RUN_FINISHED"


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

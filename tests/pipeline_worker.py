"""A worker process of the cross-process team test.

    python pipeline_worker.py DB MODE LEDGER

Every participant keeps its state in the SQLite session store DB (one session per agent,
``team/<name>``).  MODE:

* ``park``   -- the leader assigns to ``ann`` (works) and twice to ``cy`` (must confirm
  ``approve``): the team parks on cy's confirmation, the process prints what it asked and exits;
* ``resume`` -- a new process builds the same team, restores every state from the store,
  confirms cy's parked call (routed by its ``reply_id``) and prints the leader's answer.

The tools append to LEDGER, so the test sees each ran exactly once across the two processes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio
from pipeline_kit import assign, call, calls, result_text, results, text, texts, work_toolkit

from trioagent.agent import Agent, InjectionConfig
from trioagent.event import ConfirmResult, UserConfirmResultEvent
from trioagent.message import UserMsg
from trioagent.model import ChatResponse
from trioagent.pipeline import TeamMember, TeamPipeline
from trioagent.session import SessionMiddleware, SQLiteSessionStore
from trioagent.testing import ScriptedModel
from trioagent.tool import Toolkit


def member(
    name: str, steps: list[ChatResponse], toolkit: Toolkit, store: SQLiteSessionStore
) -> Agent:
    return Agent(
        name,
        model=ScriptedModel(steps),
        toolkit=toolkit,
        middlewares=[SessionMiddleware(store, f"team/{name}")],
        injection_config=InjectionConfig(inject_runtime_state=False),
    )


def team(store: SQLiteSessionStore, ledger: list[str], resuming: bool) -> TeamPipeline:
    tools = work_toolkit(ledger, seconds=0.0)
    lead_steps = (
        [text("all settled")]
        if resuming
        else [
            calls(
                assign("a", "ann", "count"),
                assign("c1", "cy", "first"),
                assign("c2", "cy", "second"),
            )
        ]
    )
    ann_steps = [] if resuming else [calls(call("w", "work", task="count")), text("counted")]
    cy_steps = (
        [text("approved first"), text("second done")]
        if resuming
        else [calls(call("p1", "approve", what="first"))]
    )
    return TeamPipeline(
        member("lead", lead_steps, Toolkit(), store),
        [
            TeamMember(member("ann", ann_steps, tools, store), "counts"),
            TeamMember(member("cy", cy_steps, tools, store), "approves"),
        ],
    )


async def main(db: str, mode: str, ledger_path: Path) -> None:
    store = SQLiteSessionStore(db)
    ledger: list[str] = []
    if mode == "park":
        pipeline = team(store, ledger, resuming=False)
        msg = await pipeline.reply(UserMsg("user", "go"))
        cy = pipeline.members["cy"].agent
        asked = [c.name for c in cy.state.get_awaiting_tool_calls("cy")]
        print(json.dumps({"finished_reason": msg.finished_reason, "asked": asked}))
    elif mode == "resume":
        pipeline = team(store, ledger, resuming=True)
        for agent in pipeline.participants:
            session = agent.middlewares[0]
            assert isinstance(session, SessionMiddleware)
            assert await session.restore(agent)
        cy = pipeline.members["cy"].agent
        answers = [
            ConfirmResult(confirmed=True, tool_call=c)
            for c in cy.state.get_awaiting_tool_calls("cy")
        ]
        event = UserConfirmResultEvent(reply_id=cy.state.reply_id, confirm_results=answers)
        msg = await pipeline.reply(event)
        print(
            json.dumps(
                {
                    "text": texts(msg),
                    "results": [result_text(r) for r in results(pipeline.leader)],
                    "finished_reason": msg.finished_reason,
                }
            )
        )
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    with ledger_path.open("a") as f:
        f.writelines(f"{line}\n" for line in ledger)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], Path(sys.argv[3]))

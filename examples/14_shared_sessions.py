"""14 — Two worker processes share a session store: one parks a reply, the other resumes it.

A support agent wants to issue a refund, a tool that needs a human's confirmation.  Worker A
(a separate Python process) gets the request; its reply *parks* on ``RequireUserConfirmEvent``,
``SessionMiddleware`` saves the state with the parked call, and the process exits.  Hours
later, the human clicks "approve" and the request lands on worker B, another process: it
loads the session from the store, answers the parked call with ``UserConfirmResultEvent``,
the refund runs exactly once (in B), and the reply completes.

The store is an SQLite file in a temporary directory, so the example runs on a fresh machine
with nothing but Python.  Set ``TRIOAGENT_REDIS_URL`` (e.g. ``redis://localhost:6379/0``) to
share the session through Redis instead, as workers on several hosts would.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import trio
from _common import check, open_model, real_provider

from trioagent import Toolkit, UserMsg
from trioagent.agent import Agent
from trioagent.event import ConfirmResult, UserConfirmResultEvent
from trioagent.session import (
    RedisSessionStore,
    SessionMiddleware,
    SQLiteSessionStore,
)
from trioagent.testing import ScriptedReply, ScriptedToolCall

REFUND = ScriptedToolCall("issue_refund", '{"order": "1042", "amount": 25}', id="call_refund")


def support_toolkit(ledger: Path) -> Toolkit:
    async def issue_refund(order: str, amount: int) -> str:
        """Refund a customer's order (needs a human's approval).

        Args:
            order: the order number.
            amount: the amount in euros.
        """
        with ledger.open("a") as f:
            f.write(f"refund {order} {amount} by pid {os.getpid()}\n")
        return f"refunded {amount} EUR for order {order}"

    toolkit = Toolkit()
    toolkit.register_function(issue_refund)  # function tools ask for confirmation by default
    return toolkit


@contextlib.asynccontextmanager
async def open_store(spec: str):  # type: ignore[no-untyped-def]
    kind, _, where = spec.partition(":")
    if kind == "redis":
        async with RedisSessionStore(where) as store:
            yield store
    else:
        yield SQLiteSessionStore(where)


async def worker(role: str, spec: str, session: str, ledger: Path) -> None:
    """One worker process: ``park`` takes the request, ``resume`` takes the approval."""
    script = (
        [ScriptedReply(text="I'll issue the refund.", tool_calls=[REFUND])]
        if role == "park"
        else [ScriptedReply(text="Done: order 1042 was refunded 25 EUR.")]
    )
    async with trio.open_nursery() as nursery, open_store(spec) as store:
        model, _ = await open_model(nursery, script)
        sessions = SessionMiddleware(store, session)
        async with model:
            agent = Agent(
                "support", "You help customers.", model, support_toolkit(ledger), [sessions]
            )
            if role == "park":
                await agent.reply(UserMsg("user", "Please refund order 1042, 25 EUR."))
                waiting = agent.state.get_awaiting_tool_calls(agent.name)
                print(f"worker A (pid {os.getpid()}): parked on {[c.name for c in waiting]}")
            else:
                await sessions.restore(agent)  # the parked calls, before replying
                answers = [
                    ConfirmResult(confirmed=True, tool_call=call)
                    for call in agent.state.get_awaiting_tool_calls(agent.name)
                ]
                msg = await agent.reply(UserConfirmResultEvent(confirm_results=answers))
                print(f"worker B (pid {os.getpid()}): {msg.get_text_content()}")
        nursery.cancel_scope.cancel()


def run_worker(role: str, spec: str, session: str, ledger: Path) -> None:
    done = subprocess.run(
        [sys.executable, __file__, role, spec, session, str(ledger)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    print(done.stdout, end="")
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
    check(done.returncode == 0, f"worker {role} exited cleanly")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        redis_url = os.environ.get("TRIOAGENT_REDIS_URL")
        spec = f"redis:{redis_url}" if redis_url else f"sqlite:{Path(tmp) / 'sessions.sqlite3'}"
        print("store:", "Redis" if redis_url else "SQLite file")
        session = f"ticket-{uuid.uuid4().hex[:8]}"
        ledger = Path(tmp) / "refunds.txt"
        scripted = real_provider() is None

        await trio.to_thread.run_sync(run_worker, "park", spec, session, ledger)
        async with open_store(spec) as store:
            stored = await store.load(session)
            check(stored is not None, "worker A saved the session")
            assert stored is not None
            parked = stored.state.get_awaiting_tool_calls("support")
            if scripted:
                check([c.name for c in parked] == ["issue_refund"], "... with the parked call")
            check(not ledger.exists(), "nothing was refunded while waiting")

            await trio.to_thread.run_sync(run_worker, "resume", spec, session, ledger)
            stored = await store.load(session)
            assert stored is not None
            check(not stored.state.get_awaiting_tool_calls("support"), "worker B resumed the reply")
            if scripted:
                lines = ledger.read_text().splitlines()
                check(len(lines) == 1, "the refund ran exactly once")
            await store.delete(session)


if __name__ == "__main__":
    if len(sys.argv) == 5:
        trio.run(worker, sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]))
    else:
        trio.run(main)

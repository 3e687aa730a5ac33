"""A worker process of the cross-process session tests.

    python session_worker.py STORE SESSION MODE LEDGER

STORE is ``sqlite:PATH`` or ``redis:URL``.  MODE:

* ``park``   -- reply to "pay" with a ScriptedModel that calls ``transfer`` (which needs a
  confirmation): the reply parks, the session is saved, the process exits;
* ``resume`` -- load the session, confirm the parked call; ``transfer`` runs (appending a line
  to LEDGER) and the model answers "paid";
* ``hang``   -- reply to "work" with a model that calls ``slow`` (allowed), which prints
  ``tool started`` and sleeps for a minute: the test kills the process with SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import trio

from trioagent.agent import Agent, InjectionConfig
from trioagent.event import ConfirmResult, UserConfirmResultEvent
from trioagent.message import TextBlock, ToolCallBlock, UserMsg
from trioagent.model import ChatResponse
from trioagent.permission import PermissionDecision
from trioagent.session import (
    RedisSessionStore,
    SessionMiddleware,
    SessionStore,
    SQLiteSessionStore,
)
from trioagent.testing import ScriptedModel
from trioagent.tool import Toolkit


@contextlib.asynccontextmanager
async def open_store(spec: str) -> AsyncIterator[SessionStore]:
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        yield SQLiteSessionStore(where)
    else:
        async with RedisSessionStore(where) as store:
            yield store


def toolkit(ledger: Path) -> Toolkit:
    kit = Toolkit()

    async def transfer(amount: int) -> str:
        """Move money (needs the user's confirmation)."""
        with ledger.open("a") as f:
            f.write(f"transfer {amount}\n")
        return f"transferred {amount}"

    async def slow() -> str:
        """Takes a minute."""
        print("tool started", flush=True)
        await trio.sleep(60)
        return "never"

    kit.register_function(transfer)
    kit.register_function(slow, permission=PermissionDecision(behavior="allow", message="ok"))
    return kit


def agent(steps: list[ChatResponse], ledger: Path, store: SessionStore, session: str) -> Agent:
    return Agent(
        "agent",
        model=ScriptedModel(steps),
        toolkit=toolkit(ledger),
        middlewares=[SessionMiddleware(store, session)],
        injection_config=InjectionConfig(inject_runtime_state=False),
    )


def calls(name: str, **arguments: object) -> ChatResponse:
    block = ToolCallBlock(id=f"call-{name}", name=name, input=json.dumps(arguments))
    return ChatResponse(content=[block])


async def main(spec: str, session: str, mode: str, ledger: Path) -> None:
    async with open_store(spec) as store:
        if mode == "park":
            a = agent([calls("transfer", amount=5)], ledger, store, session)
            msg = await a.reply(UserMsg("user", "pay"))
            waiting = a.state.get_awaiting_tool_calls("agent")
            print("parked", [c.id for c in waiting], msg.finished_reason, flush=True)
        elif mode == "resume":
            text = ChatResponse(content=[TextBlock(text="paid")])
            b = agent([text], ledger, store, session)
            middleware = b.middlewares[0]
            assert isinstance(middleware, SessionMiddleware)
            assert await middleware.restore(b)
            (parked,) = b.state.get_awaiting_tool_calls("agent")
            answer = ConfirmResult(confirmed=True, tool_call=parked)
            msg = await b.reply(UserConfirmResultEvent(confirm_results=[answer]))
            print("resumed", msg.get_text_content(), msg.finished_reason, flush=True)
        elif mode == "hang":
            c = agent([calls("slow")], ledger, store, session)
            await c.reply(UserMsg("user", "work"))
        else:
            raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]))

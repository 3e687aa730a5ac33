"""A trioagent agent served over MCP stdio, for the serving tests (not a test module).

Run as a script (``python mcp_serve_kit.py``) it serves :func:`build_agent` with
``trioagent.mcp.serve`` over stdio.  When ``MCP_SERVE_JOURNAL`` names a file, each reply
appends one line when it ends: ``reply <ends> <reasons> <context>``, where ``ends`` counts
its ``ReplyEndEvent``s, ``reasons`` lists their finished reasons and ``context`` is
``consistent`` when the reply kept the cancellation rules on its events and the agent's
context (``check_reply_rules``: one end, last; every tool call one result; the state
round-trips through JSON), or the broken rule.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from trioagent.agent import Agent, InjectionConfig
from trioagent.event import ReplyEndEvent
from trioagent.message import Msg
from trioagent.testing import (
    ScriptedModel,
    SweepViolation,
    check_reply_rules,
    text_chunks,
)
from trioagent.tool import Toolkit

#: The words of every answer: streamed one per chunk, ``CHUNK_DELAY`` apart.
WORDS = [f"word{i} " for i in range(40)]
CHUNK_DELAY = 0.05


def build_agent(name: str = "helper", *, replies: int = 20, delay: float = CHUNK_DELAY) -> Agent:
    model = ScriptedModel([text_chunks(*WORDS) for _ in range(replies)], chunk_delay=delay)
    return Agent(
        name,
        model=model,
        toolkit=Toolkit(),
        injection_config=InjectionConfig(inject_runtime_state=False),
    )


class Journaled:
    """``agent`` as a servable agent that journals how each reply ended."""

    def __init__(self, agent: Agent, write: Callable[[str], None]) -> None:
        self.agent = agent
        self.name = agent.name
        self._write = write

    async def reply(
        self, inputs: Any = None, *, on_event: Callable[[Any], Awaitable[None]] | None = None
    ) -> Msg:
        events: list[Any] = []

        async def record(event: Any) -> None:
            events.append(event)
            if on_event is not None:
                await on_event(event)

        try:
            return await self.agent.reply(inputs, on_event=record)
        finally:
            ends = [str(e.finished_reason) for e in events if isinstance(e, ReplyEndEvent)]
            try:
                check_reply_rules(self.agent.state, self.agent.name, events)
                context = "consistent"
            except SweepViolation as exc:
                context = str(exc).replace(" ", "_")
            self._write(f"reply {len(ends)} {','.join(ends)} {context}")


def _journal(line: str) -> None:
    path = os.environ.get("MCP_SERVE_JOURNAL")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


async def _main() -> None:
    from trioagent.mcp import serve

    await serve(Journaled(build_agent(), _journal), transport="stdio")


if __name__ == "__main__":
    sys.exit(trio.run(_main))

"""The served side of example 17: a trioagent agent served over MCP stdio.

Started by ``18_agent_over_mcp.py`` as ``python _served_helper.py <journal>``.  Its model is
the embedded OpenAI-compatible server (or ``TRIOAGENT_MODEL``); the first answer streams slowly,
so the caller can interrupt it mid-call.  After each reply it appends one line to
``<journal>``: ``<ends> <reasons> <rules>`` — how many ``REPLY_END`` events the reply had,
their finished reasons, and ``ok`` when the cancellation rules held (one end, last; every
tool call with exactly one result; the state round-trips through JSON), else the broken rule.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
from _common import open_model

from trioagent import Toolkit
from trioagent.agent import Agent
from trioagent.event import ReplyEndEvent
from trioagent.mcp import serve
from trioagent.message import Msg
from trioagent.testing import ScriptedReply, SweepViolation, check_reply_rules

LONG_ANSWER = " ".join(f"finding-{i}" for i in range(200))


class JournaledAgent:
    """The agent, served as is, writing how each reply ended to the journal."""

    def __init__(self, agent: Agent, journal: Path) -> None:
        self.agent = agent
        self.name = agent.name
        self.journal = journal

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
                rules = "ok"
            except SweepViolation as exc:
                rules = str(exc).replace(" ", "_")
            with self.journal.open("a", encoding="utf-8") as f:
                f.write(f"{len(ends)} {','.join(ends)} {rules}\n")


async def main() -> None:
    journal = Path(sys.argv[1])
    async with trio.open_nursery() as nursery:
        model, _ = await open_model(
            nursery,
            [
                ScriptedReply(text=LONG_ANSWER, chunk_size=12, chunk_delay=0.05),
                ScriptedReply(text="Three findings: alpha, beta, gamma."),
            ],
        )
        async with model:
            agent = Agent("researcher", "You research briefly.", model, Toolkit())
            await serve(
                JournaledAgent(agent, journal),
                description="Ask the researcher agent a question.",
            )
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

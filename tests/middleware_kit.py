"""Helpers shared by the tests of the built-in middlewares (router, budget, TTS): model answers
with usage, a one-tool toolkit, an interruption after a delay, and a check that a reply left no
task behind."""

from __future__ import annotations

from typing import Any

import trio
from agent_helpers import Recorder
from agent_kit import ALLOW

from trioagent.agent import Agent
from trioagent.message import Msg, TextBlock
from trioagent.model import ChatResponse, ChatUsage
from trioagent.tool import Toolkit


def text(value: str, inp: int | None = None, out: int | None = None) -> ChatResponse:
    """A text answer, with usage when ``inp`` is given."""
    usage = None if inp is None else ChatUsage(input_tokens=inp, output_tokens=out or 0)
    return ChatResponse(content=[TextBlock(text=value)], usage=usage)


def lookup_toolkit(*, ask: bool = False) -> Toolkit:
    """A toolkit with one ``lookup`` tool, allowed (or asking for confirmation with ``ask``)."""
    toolkit = Toolkit()

    async def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    toolkit.register_function(lookup, permission=None if ask else ALLOW)
    return toolkit


async def interrupt_after(agent: Agent, inputs: Any, delay: float) -> tuple[Msg, Recorder]:
    """Reply to ``inputs``, interrupting after ``delay`` seconds; the message and the events."""
    rec = Recorder()
    result: list[Msg] = []

    async def run() -> None:
        result.append(await agent.reply(inputs, on_event=rec))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.sleep(delay)
        agent.interrupt()
    return result[0], rec


def no_tasks_left() -> None:
    """Nothing the reply started still runs in the test's task tree."""
    nurseries = trio.lowlevel.current_task().child_nurseries
    assert [t for n in nurseries for t in n.child_tasks] == []

"""The checkpoint sweep over full agent replies streamed from the loopback server.

Real sockets, real SSE parsing, real connection closing: every cancellation point of a reply
talking to ``serve_openai_compatible`` must end in exactly one REPLY_END, a consistent context,
no task left and no HTTP connection still busy; and once the model is closed the server sees
every connection closed.

The clock is a ``MockClock`` only to make the agent's own timers free: the model gets no read
timeout and the server no delays, so an autojump can never fire a network deadline while data
is in flight on loopback.  Socket timing is real, so the number of schedule points varies a
little between runs; the sweep tolerates runs that end before their cancellation point.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from provider_kit import open_connections

from trioagent import UserMsg
from trioagent.agent import Agent, InjectionConfig, ReActConfig
from trioagent.model import OpenAIChatModel
from trioagent.permission import PermissionDecision
from trioagent.testing import (
    ScriptedReply,
    ScriptedToolCall,
    SweepRun,
    cancel_sweep,
    serve_openai_compatible,
)
from trioagent.tool import Toolkit


class _Fleet:
    """One server and one model per sweep run, all owned by the test's nursery."""

    def __init__(self, nursery: trio.Nursery, script: list[Any]) -> None:
        self.nursery = nursery
        self.script = script
        self.servers: list[Any] = []
        self.models: list[OpenAIChatModel] = []

    async def model(self) -> OpenAIChatModel:
        server = await self.nursery.start(serve_openai_compatible, list(self.script))
        model = server.chat_model(read_timeout=None, connect_timeout=None, max_retries=0)
        self.servers.append(server)
        self.models.append(model)
        return model

    async def close_and_check(self) -> None:
        for model in self.models:
            await model.aclose()
        for server in self.servers:
            with trio.fail_after(5):
                await server.wait_all_closed()


def _no_busy_connection(run: SweepRun) -> None:
    pool = open_connections(run.agent.model.http_client)
    assert all(c.is_idle() or c.is_closed() for c in pool), run.cancel_at


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_streamed_text_reply_over_http(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    fleet = _Fleet(nursery, [ScriptedReply(text="Trio keeps every task owned.", chunk_size=4)])

    async def make_agent() -> Agent:
        return Agent(
            "assistant",
            "Be brief.",
            await fleet.model(),
            injection_config=InjectionConfig(inject_runtime_state=False),
        )

    report = await cancel_sweep(
        make_agent, lambda: UserMsg("user", "hi"), mode=mode, check=_no_busy_connection
    )
    assert report.points > 5
    assert report.outcomes["interrupted"] >= 1
    assert report.runs[0].msg is not None
    assert report.runs[0].msg.get_text_content() == "Trio keeps every task owned."
    await fleet.close_and_check()


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_tool_round_over_http(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    fleet = _Fleet(
        nursery,
        [
            ScriptedReply(
                tool_calls=[ScriptedToolCall("lookup", '{"city": "Paris"}', id="call_1")],
                chunk_size=5,
            ),
            ScriptedReply(text="It is sunny in Paris.", chunk_size=5),
        ],
    )

    async def lookup(city: str) -> str:
        """Look up the weather.

        Args:
            city: the city.
        """
        await trio.sleep(1)
        return f"sunny in {city}"

    async def make_agent() -> Agent:
        toolkit = Toolkit()
        toolkit.register_function(
            lookup, permission=PermissionDecision(behavior="allow", message="ok")
        )
        return Agent(
            "assistant",
            "Be brief.",
            await fleet.model(),
            toolkit=toolkit,
            injection_config=InjectionConfig(inject_runtime_state=False),
        )

    report = await cancel_sweep(
        make_agent, lambda: UserMsg("user", "weather?"), mode=mode, check=_no_busy_connection
    )
    baseline = report.runs[0]
    assert baseline.msg is not None
    assert baseline.msg.get_text_content() == "It is sunny in Paris."
    assert report.outcomes["interrupted"] >= 3
    await fleet.close_and_check()


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_streamed_reply_over_http_with_a_consumer_slower_than_the_grace(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    """The callback consumer takes 2 s per event, the grace is 1 s: every cancellation point
    still ends with one end event, a consistent context and no busy connection."""
    fleet = _Fleet(nursery, [ScriptedReply(text="Trio keeps every task owned.", chunk_size=6)])

    async def make_agent() -> Agent:
        return Agent(
            "assistant",
            "Be brief.",
            await fleet.model(),
            react_config=ReActConfig(interrupt_grace=1.0),
            injection_config=InjectionConfig(inject_runtime_state=False),
        )

    report = await cancel_sweep(
        make_agent,
        lambda: UserMsg("user", "hi"),
        mode=mode,
        check=_no_busy_connection,
        consumer_delay=2.0,
    )
    assert report.outcomes["interrupted"] >= 1
    assert report.runs[0].msg is not None
    assert report.runs[0].msg.get_text_content() == "Trio keeps every task owned."
    await fleet.close_and_check()

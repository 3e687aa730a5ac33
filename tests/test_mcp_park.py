"""``MCPClient(elicitation="park")``: a server's question parks the reply like ``AskUser``.

The server is the official SDK's ``MCPServer`` in this process, reached over the SDK's
in-process transport at protocol 2026-07-28 (input-required results: the call ends with the
question and a ``requestState``; the client sends it again with the answer).  A handshake-era
session (``mode="legacy"``) cannot park, and declines.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import trio
from agent_kit import call, calls, make_agent, run, text, user
from mcp import Client
from mcp_kit import InProcessClient
from mcp_painter import SCRIPT, painter

from trioagent.agent import Agent, AgentState
from trioagent.event import (
    ExternalExecutionResultEvent,
    RequireExternalExecutionEvent,
    UserInterruptEvent,
)
from trioagent.mcp import MCPClient, StdioMCPConfig
from trioagent.message import ToolResultBlock
from trioagent.permission import PermissionContext
from trioagent.testing import SweepRun, cancel_sweep
from trioagent.tool import MCPTool, Toolkit

MODES = ["interrupt", "outer"]
PAINT = "mcp__painter__paint"


class ModernClient(InProcessClient):
    """An in-process client at the newest protocol (2026-07-28)."""

    def _new_session(self, on_end: Callable[[str], None]) -> Client:
        return Client(self._server, message_handler=self._on_message, **self._session_callbacks())


@pytest.fixture
async def painted() -> list[str]:
    return []


@pytest.fixture
async def client(painted: list[str]) -> AsyncIterator[MCPClient]:
    async with ModernClient("painter", painter(painted), elicitation="park") as client:
        yield client


def agent_for(client: MCPClient, tool: str = "paint", *steps: Any) -> Agent:
    state = AgentState(permission_context=PermissionContext(mode="bypass"))
    return make_agent(
        [calls(call("p1", f"mcp__painter__{tool}", wall="north")), *steps],
        Toolkit(mcps=[client]),
        state=state,
    )


def answer(action: str, content: dict[str, Any] | None = None, tool: str = PAINT) -> Any:
    return ExternalExecutionResultEvent(
        execution_results=[MCPTool.answer("p1", tool, action, content)]
    )


def result_of(agent: Agent) -> ToolResultBlock:
    [result] = [b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock)]
    return result


async def test_the_question_parks_the_reply_and_the_answer_resumes_it(
    client: MCPClient, painted: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    agent = agent_for(client, "paint", text("done"))
    with caplog.at_level(logging.WARNING, logger="trioagent.agent"):
        msg, events = await run(agent, user())
    # Parked like AskUser: no end event, the waiting message, a WARNING saying how to go on.
    assert msg.finished_reason is None
    assert not [e for e in events if str(e.type) == "REPLY_END"]
    [parked] = [e for e in events if isinstance(e, RequireExternalExecutionEvent)]
    assert [c.id for c in parked.tool_calls] == ["p1"]
    assert "ExternalExecutionResultEvent" in caplog.text
    tool = agent.toolkit.get_tool(PAINT)
    assert isinstance(tool, MCPTool)
    question = tool.question("p1")
    assert question is not None
    assert question["server"] == "painter"
    assert question["message"] == "Which color?"
    assert question["requestedSchema"]["required"] == ["color"]
    assert painted == []  # the server has not run the tool yet

    msg, events = await run(agent, answer("accept", {"color": "red"}))
    assert msg.finished_reason == "completed"
    assert painted == ["north: red"]
    result = result_of(agent)
    assert result.state == "success"
    assert "north painted red" in str(result.output)
    assert tool.question("p1") is None


async def test_a_declined_question_reaches_the_server(
    client: MCPClient, painted: list[str]
) -> None:
    agent = agent_for(client, "paint", text("done"))
    await run(agent, user())
    msg, _ = await run(agent, answer("decline"))
    assert msg.finished_reason == "completed"
    assert painted == ["north: decline"]
    assert "north left as it is (decline)" in str(result_of(agent).output)


async def test_two_questions_park_twice_and_the_call_is_sent_once_answered(
    client: MCPClient, painted: list[str]
) -> None:
    varnish = "mcp__painter__varnish"
    agent = agent_for(client, "varnish", text("done"))
    await run(agent, user())
    tool = agent.toolkit.get_tool(varnish)
    assert isinstance(tool, MCPTool)
    reply = {"Which color?": {"color": "blue"}, "Matte or gloss?": {"finish": "gloss"}}
    first = tool.question("p1")
    assert first is not None
    msg, events = await run(agent, answer("accept", reply[str(first["message"])], varnish))
    assert msg.finished_reason is None  # parked again, on the other question
    assert [isinstance(e, RequireExternalExecutionEvent) for e in events] == [True]
    second = tool.question("p1")
    assert second is not None
    assert {first["message"], second["message"]} == set(reply)
    assert painted == []
    msg, _ = await run(agent, answer("accept", reply[str(second["message"])], varnish))
    assert msg.finished_reason == "completed"
    assert "north varnished blue, gloss" in str(result_of(agent).output)
    assert painted == ["north: blue gloss"]  # run once, with both answers


async def test_abort_gives_the_call_one_interrupted_result(
    client: MCPClient, painted: list[str]
) -> None:
    agent = agent_for(client, "paint")
    await run(agent, user())
    msg, events = await run(agent, UserInterruptEvent())
    assert msg.finished_reason == "interrupted"
    assert [str(e.type) for e in events].count("REPLY_END") == 1
    assert result_of(agent).state == "interrupted"
    tool = agent.toolkit.get_tool(PAINT)
    assert isinstance(tool, MCPTool)
    assert tool.question("p1") is None
    assert painted == []


async def test_a_malformed_answer_leaves_the_reply_parked(client: MCPClient) -> None:
    agent = agent_for(client, "paint", text("done"))
    await run(agent, user())
    with pytest.raises(Exception, match="'maybe' is not one of"):
        await run(agent, answer("maybe"))
    assert agent.state.has_awaiting_tool_calls("agent")
    msg, _ = await run(agent, answer("accept", {"color": "green"}))
    assert msg.finished_reason == "completed"


async def test_a_handshake_era_session_declines(
    painted: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    async with InProcessClient("painter", painter(painted), elicitation="park") as client:
        agent = agent_for(client, "paint", text("done"))
        with caplog.at_level(logging.WARNING, logger="trioagent.mcp"):
            msg, _ = await run(agent, user())
    assert msg.finished_reason == "completed"
    assert painted == ["north: decline"]
    assert "cannot park it" in caplog.text


async def test_over_stdio_the_answer_reaches_a_server_process() -> None:
    config = StdioMCPConfig(command=sys.executable, args=[str(SCRIPT)])
    async with MCPClient("painter", config, elicitation="park") as client:
        agent = agent_for(client, "paint", text("done"))
        msg, _ = await run(agent, user())
        assert msg.finished_reason is None
        tool = agent.toolkit.get_tool(PAINT)
        assert isinstance(tool, MCPTool)
        assert tool.question("p1") is not None
        msg, _ = await run(agent, answer("accept", {"color": "ochre"}))
        assert msg.finished_reason == "completed"
        assert "north painted ochre" in str(result_of(agent).output)


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_a_reply_resumed_with_the_answer(
    mode: str, client: MCPClient, painted: list[str]
) -> None:
    async def make() -> Agent:
        agent = agent_for(client, "paint")
        await run(agent, user())
        assert agent.state.has_awaiting_tool_calls("agent")
        agent.model.add_steps(text("done"))  # type: ignore[attr-defined]
        return agent

    def check(run: SweepRun) -> None:
        assert client.is_connected
        result = result_of(run.agent) if run.events else None
        if result is not None:
            assert result.state in ("success", "interrupted")

    before = len(painted)
    report = await cancel_sweep(
        make, lambda: answer("accept", {"color": "red"}), mode=mode, check=check
    )
    assert report.points > 0
    assert report.outcomes["interrupted"] > 0
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert len(painted) > before
    await trio.lowlevel.checkpoint()

"""``cancel_sweep`` in both modes over MCP replies that cross back over the connection:

* a reply whose MCP call makes the server ask our client for a sampling (the client's
  sampling model answers inside the call);
* a reply whose MCP call runs a *served trioagent agent* (``trioagent.mcp.serve``'s server):
  every cancellation of the calling reply cancels the served reply through the client's
  ``notifications/cancelled``, which must end exactly once, INTERRUPTED (or completed, when
  the cancel came after it), with a consistent context.

The servers run in-process over the SDK's in-memory JSON-RPC transport (the real protocol
framing and cancellation notices, no sockets), so the sweeps stay fast.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from agent_kit import call, calls, make_agent, output_text, result_of, run, text, user
from mcp.server.mcpserver import Context, MCPServer
from mcp_kit import InProcessClient
from mcp_serve_kit import Journaled, build_agent

from trioagent.agent import AgentState
from trioagent.mcp import MCPClient, MCPSampling, StdioMCPConfig
from trioagent.mcp._serve import build_server
from trioagent.permission import (
    AdditionalWorkingDirectory,
    PermissionContext,
    PermissionEngine,
)
from trioagent.testing import (
    ScriptedModel,
    ScriptedRequest,
    SweepRun,
    cancel_sweep,
    text_chunks,
)
from trioagent.tool import Toolkit

MODES = ["interrupt", "outer"]
# The test server samples the way servers of protocol versions up to 2025-11-25 do.
pytestmark = [
    pytest.mark.filterwarnings("ignore:The sampling capability is deprecated"),
    pytest.mark.filterwarnings("ignore:The roots capability is deprecated"),
]
BYPASS = PermissionEngine(PermissionContext(mode="bypass"))


def thinking_server() -> MCPServer:
    server = MCPServer("thinker")

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
    async def where(ctx: Context) -> str:
        """The client's roots."""
        listed = await ctx.session.list_roots()
        return " ".join(str(root.uri) for root in listed.roots)

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
    async def think(question: str, ctx: Context) -> str:
        """Ask the client's model."""
        message = types.SamplingMessage(role="user", content=types.TextContent(text=question))
        answer = await ctx.session.create_message([message], max_tokens=50)
        assert isinstance(answer.content, types.TextContent)
        return f"the model says: {answer.content.text}"

    return server


def echo(request: ScriptedRequest) -> Any:
    """A sampling answer: the question back."""
    return text_chunks(request.messages[-1].get_text_content() or "")


@pytest.fixture
async def thinker() -> AsyncIterator[InProcessClient]:
    sampling = MCPSampling(ScriptedModel([]), BYPASS)
    async with InProcessClient("thinker", thinking_server(), sampling=sampling) as client:
        yield client


async def test_a_tool_call_triggers_sampling_in_process(thinker: InProcessClient) -> None:
    assert thinker.sampling is not None
    thinker.sampling.model = ScriptedModel([text_chunks("forty-two")])
    result = await thinker.call_tool("think", {"question": "meaning?"})
    assert result.content[0].text == "the model says: forty-two"  # type: ignore[union-attr]
    request = thinker.sampling.model.requests[0]  # type: ignore[attr-defined]
    assert request.messages[0].get_text_content() == "meaning?"


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_a_reply_whose_mcp_call_samples(mode: str, thinker: InProcessClient) -> None:
    toolkit = Toolkit(mcps=[thinker])
    sampling = thinker.sampling
    assert sampling is not None

    async def make() -> Any:
        # Whatever the previous run's cancellation point, the session still answers (a
        # sampling request of a cancelled call may still arrive: the model answers any).
        sampling.model = ScriptedModel([echo] * 10)
        answer = await thinker.call_tool("think", {"question": "ping?"})
        assert answer.content[0].text == "the model says: ping?"  # type: ignore[union-attr]
        return make_agent(
            [calls(call("t1", "mcp__thinker__think", question="how?")), text("done")], toolkit
        )

    def check(run: SweepRun) -> None:
        assert thinker.is_connected

    report = await cancel_sweep(make, user, mode=mode, check=check)
    assert report.points > 0
    assert report.outcomes["interrupted"] > 0
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"


class Served:
    """A served agent swapped for a fresh one per run, its replies journaled."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.started = 0
        self.fresh()

    @property
    def name(self) -> str:
        return "helper"

    def fresh(self) -> None:
        self.current = Journaled(build_agent(delay=0), self.lines.append)

    async def reply(self, inputs: Any = None, *, on_event: Any = None) -> Any:
        self.started += 1
        return await self.current.reply(inputs, on_event=on_event)

    async def settled(self) -> None:
        """Wait until every served reply so far has ended (a cancel reaches the served reply
        through the connection, after the calling reply has already ended)."""
        with trio.fail_after(10):
            while len(self.lines) < self.started:
                await trio.sleep(0.01)


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_a_reply_calling_a_served_agent(mode: str) -> None:
    served = Served()
    async with InProcessClient("remote", build_server(served)) as client:
        assert [tool.name for tool in client.listed_tools()] == ["mcp__remote__helper"]
        toolkit = Toolkit(mcps=[client])

        async def make() -> Any:
            await served.settled()
            served.fresh()
            state = AgentState(permission_context=PermissionContext(mode="bypass"))
            return make_agent(
                [calls(call("h1", "mcp__remote__helper", message="hi")), text("done")],
                toolkit,
                state=state,
            )

        report = await cancel_sweep(make, user, mode=mode)
        await served.settled()
    assert report.points > 0
    assert report.outcomes["interrupted"] > 0
    assert served.lines, "the served agent never replied"
    for line in served.lines:
        ends, reasons, context = line.split(" ")[1:]
        assert ends == "1", line  # exactly one end per served reply
        assert reasons in ("interrupted", "completed"), line
        assert context == "consistent", line
    # Some cancels reached the served reply while it ran, and some came after it completed.
    assert "reply 1 interrupted consistent" in served.lines
    assert "reply 1 completed consistent" in served.lines
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"


async def test_sampling_without_a_model_answers_with_the_agents() -> None:
    """``MCPSampling()`` takes the model and the permission engine of the first agent built
    with a toolkit holding the client: its bypass mode allows the request, and the agent's
    own model answers it (the step between the tool call and the final answer)."""
    sampling = MCPSampling()
    async with InProcessClient("thinker", thinking_server(), sampling=sampling) as client:
        state = AgentState(permission_context=PermissionContext(mode="bypass"))
        agent = make_agent(
            [
                calls(call("t1", "mcp__thinker__think", question="why?")),
                text_chunks("because"),
                text("done"),
            ],
            Toolkit(mcps=[client]),
            state=state,
        )
        assert sampling.model is agent.model
        assert sampling.permissions is agent.permission_engine
        other = make_agent([], Toolkit(mcps=[client]))
        assert sampling.model is agent.model  # the first agent keeps it
        assert other.model is not agent.model
        msg, _ = await run(agent, user())
        assert msg.get_text_content() == "done"
        assert output_text(result_of(agent, "t1")) == "the model says: because"
        # A default-mode agent asks; nobody confirms, so the request is declined.
        sampling.model = None
        sampling.permissions = None
        asking = make_agent(
            [calls(call("t2", "mcp__thinker__think", question="why?")), text("done")],
            Toolkit(mcps=[client]),
            state=AgentState(permission_context=PermissionContext(mode="bypass")),
        )
        assert sampling.model is asking.model
        sampling.permissions = PermissionEngine(PermissionContext())
        await run(asking, user())
        assert "declined the sampling request" in output_text(result_of(asking, "t2"))


async def test_roots_can_be_the_agents_working_directories(tmp_path: Path) -> None:
    extra = tmp_path / "project"
    extra.mkdir()
    async with InProcessClient("thinker", thinking_server(), roots="agent") as client:
        state = AgentState()
        state.permission_context.working_directories[str(extra)] = AdditionalWorkingDirectory(
            path=str(extra)
        )
        make_agent([], Toolkit(mcps=[client]), state=state)
        result = await client.call_tool("where", {})
    uris = result.content[0].text.split()  # type: ignore[union-attr]
    assert uris == [Path.cwd().resolve().as_uri(), extra.resolve().as_uri()]
    with pytest.raises(ValueError, match="roots"):
        MCPClient("x", StdioMCPConfig(command="unused"), roots="/tmp")  # type: ignore[arg-type]

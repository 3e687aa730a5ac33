"""``MCPTool`` (``trioagent/tool/_mcp.py``): naming, schema defaults, permissions from the
read-only hint, progress chunks and ``mcp_progress`` events, the execution timeout, the toolkit's
``mcps=`` in the basic group and in tool groups, and replies that call an MCP tool — interrupted
and swept by ``cancel_sweep`` in both modes over a real stdio server.

Server tests run on the real clock (a subprocess) with generous bounds.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from agent_kit import call, calls, make_agent, output_text, result_of, run, text, user
from mcp_kit import process_alive, read_journal, server_pid, stdio_config, wait_for_journal

from trioagent.event import CustomEvent, RequireUserConfirmEvent
from trioagent.mcp import MCPClient
from trioagent.message import ToolResultState
from trioagent.permission import PermissionBehavior, PermissionContext, PermissionEngine
from trioagent.testing import SweepRun, cancel_sweep
from trioagent.tool import (
    MCPCallResult,
    MCPTool,
    MCPToolSpec,
    ProgressCallback,
    ToolChunk,
    ToolGroup,
    Toolkit,
)

MODES = ["interrupt", "outer"]


class Unreachable:
    """A connection that is never called (for the pure naming and schema checks)."""

    name = "srv"

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], on_progress: ProgressCallback | None
    ) -> MCPCallResult:
        raise AssertionError("not called")


@pytest.fixture
async def kit(tmp_path: Path) -> AsyncIterator[MCPClient]:
    """A stdio server with progress streaming, alive for the whole test."""
    async with MCPClient("kit", stdio_config(tmp_path), stream_progress=True) as client:
        yield client


# -- naming and schema -----------------------------------------------------------------------------


def test_names_are_prefixed_and_sanitised() -> None:
    tool = MCPTool(Unreachable(), MCPToolSpec(name="files.read:v2"))
    assert tool.name == "mcp__srv__filesxreadxv2_7af46647"
    assert tool.spec.name == "files.read:v2"  # the server still receives the original name
    assert tool.mcp_name == "srv"
    assert tool.is_mcp
    assert not tool.is_state_injected
    assert not tool.is_concurrency_safe
    assert tool.description == ""


def test_the_schema_gets_defaults_and_keeps_the_rest() -> None:
    bare = MCPTool(Unreachable(), MCPToolSpec(name="t"))
    assert bare.input_schema == {"type": "object", "properties": {}, "required": []}
    schema = {
        "type": "object",
        "properties": {"item": {"$ref": "#/$defs/Item"}},
        "$defs": {"Item": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    }
    rich = MCPTool(Unreachable(), MCPToolSpec(name="t", input_schema=schema))
    assert rich.input_schema == {**schema, "required": []}
    assert "required" not in schema  # the server's schema is not mutated


def test_the_title_heads_the_description() -> None:
    titled = MCPTool(Unreachable(), MCPToolSpec(name="t", title="Big T", description="Does t."))
    assert titled.description == "Big T\n\nDoes t."
    assert MCPTool(Unreachable(), MCPToolSpec(name="t", title="Big T")).description == "Big T"


async def test_a_destructive_tool_asks_even_with_an_allow_rule() -> None:
    from trioagent.permission import PermissionRule

    engine = PermissionEngine(PermissionContext())
    destructive = MCPTool(Unreachable(), MCPToolSpec(name="wipe", destructive=True))
    harmless = MCPTool(Unreachable(), MCPToolSpec(name="tidy", destructive=False))
    for tool in (destructive, harmless):
        engine.add_rule(PermissionRule(tool_name=tool.name, behavior=PermissionBehavior.ALLOW))
    asked = await engine.check_permission(destructive, {})
    assert asked.behavior == PermissionBehavior.ASK
    assert "destructive" in asked.message
    assert (await engine.check_permission(harmless, {})).behavior == PermissionBehavior.ALLOW


def test_a_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="execution_timeout"):
        MCPTool(Unreachable(), MCPToolSpec(name="t"), execution_timeout=-1)


# -- permissions -----------------------------------------------------------------------------------


async def test_read_only_hint_allows_and_everything_else_asks(kit: MCPClient) -> None:
    tools = {t.name: t for t in kit.listed_tools()}
    echo, add = tools["mcp__kit__echo"], tools["mcp__kit__add"]
    context = PermissionContext()
    allowed = await echo.check_permissions({"text": "x"}, context)
    assert allowed.behavior == PermissionBehavior.ALLOW
    assert allowed.message == "This is a read-only MCP tool. Allowing execution."
    asked = await add.check_permissions({"a": 1}, context)
    assert asked.behavior == PermissionBehavior.ASK
    assert asked.message == "MCP tools must be explicitly allowed by the user."
    engine = PermissionEngine(context)
    assert (await engine.check_permission(echo, {"text": "x"})).behavior == "allow"
    assert (await engine.check_permission(add, {"a": 1})).behavior == "ask"


async def test_an_agent_asks_before_a_tool_without_the_read_only_hint(kit: MCPClient) -> None:
    agent = make_agent([calls(call("a1", "mcp__kit__add", a=1)), text("done")], Toolkit(mcps=[kit]))
    _, events = await run(agent, user())
    assert any(isinstance(e, RequireUserConfirmEvent) for e in events)
    assert [c.id for c in agent.state.get_awaiting_tool_calls("agent")] == ["a1"]


# -- calling ---------------------------------------------------------------------------------------


async def run_tool(client: MCPClient, name: str, **arguments: Any) -> tuple[Any, list[ToolChunk]]:
    """Run one of the client's tools through a toolkit lookup; the response and every chunk."""
    tool = Toolkit(mcps=[client]).get_tool(name)
    assert tool is not None
    chunks: list[ToolChunk] = []

    async def emit(chunk: ToolChunk) -> None:
        chunks.append(chunk)

    return await tool.run(arguments, emit), chunks


async def test_progress_becomes_chunks_and_the_result_comes_last(kit: MCPClient) -> None:
    response, chunks = await run_tool(kit, "mcp__kit__wait", seconds=0.3)
    progress = [c.metadata["mcp_progress"] for c in chunks if "mcp_progress" in c.metadata]
    assert progress == [
        {"progress": float(i), "total": 3.0, "message": f"step {i}"} for i in (1, 2, 3)
    ]
    assert all(c.content == [] and not c.is_last for c in chunks[:-1])
    assert chunks[-1].is_last
    assert response.text() == "waited 0.3"
    assert "mcp_progress" not in response.metadata


async def test_without_stream_progress_only_the_result_is_emitted(tmp_path: Path) -> None:
    async with MCPClient("kit", stdio_config(tmp_path)) as client:
        response, chunks = await run_tool(client, "mcp__kit__wait", seconds=0.3)
    assert len(chunks) == 1
    assert response.text() == "waited 0.3"


async def test_a_server_error_is_an_error_result(kit: MCPClient) -> None:
    response, _ = await run_tool(kit, "mcp__kit__fail", reason="x")
    assert response.state == ToolResultState.ERROR
    assert "fail" in response.text()


async def test_the_execution_timeout_cancels_the_request(tmp_path: Path) -> None:
    client = MCPClient("kit", stdio_config(tmp_path), execution_timeout=1.0)
    async with client:
        tool = Toolkit(mcps=[client]).get_tool("mcp__kit__wait")
        assert tool is not None
        with trio.fail_after(20):
            response = await tool.run({"seconds": 30})
        assert response.state == ToolResultState.ERROR
        assert "timed out after 1 s" in response.text()
        await wait_for_journal(tmp_path, "cancelled wait")
        assert (await client.call_tool("echo", {"text": "ok"})).content[0].text == "ok"  # type: ignore[union-attr]


async def test_a_lost_connection_is_an_error_result(kit: MCPClient) -> None:
    toolkit = Toolkit(mcps=[kit])
    exit_now, echo = toolkit.get_tool("mcp__kit__exit_now"), toolkit.get_tool("mcp__kit__echo")
    assert exit_now is not None
    assert echo is not None
    response = await exit_now.run({})
    assert response.state == ToolResultState.ERROR
    assert response.text().startswith("Error occurred when calling MCP tool: MCP server 'kit' ")
    again = await echo.run({"text": "x"})  # before the client reconnects (0.5 s at the least)
    assert again.state == ToolResultState.ERROR
    assert "MCP server 'kit' is down" in again.text()


async def test_content_of_every_kind_reaches_the_result(kit: MCPClient) -> None:
    response, _ = await run_tool(kit, "mcp__kit__mixed")
    kinds = [type(b).__name__ for b in response.content]
    # Consecutive text blocks merge in a response; the data blocks stay apart.
    assert kinds == ["TextBlock", "DataBlock", "DataBlock", "TextBlock"]
    assert response.content[1].source.media_type == "image/png"  # type: ignore[union-attr]
    resource_and_link = response.content[3].text  # type: ignore[union-attr]
    assert '"mimeType": "text/plain"' in resource_and_link  # the wire's names
    assert '"uri": "https://example.com/report.pdf"' in resource_and_link
    assert '"name": "report"' in resource_and_link
    assert "Read it with the tool mcp__kit__read_resource." in resource_and_link


# -- the toolkit -----------------------------------------------------------------------------------


async def test_toolkit_lists_mcp_tools_after_its_own_and_validates_calls(kit: MCPClient) -> None:
    toolkit = Toolkit(mcps=[kit])

    def own(x: int) -> str:
        """Own tool."""
        return str(x)

    toolkit.register_function(own)
    names = [s["function"]["name"] for s in toolkit.get_tool_schemas()]
    assert names[0] == "own"
    assert names[1:4] == ["mcp__kit__echo", "mcp__kit__add", "mcp__kit__pid"]
    add = next(s for s in toolkit.get_tool_schemas() if s["function"]["name"] == "mcp__kit__add")
    assert add["function"]["parameters"]["properties"]["b"] == {"default": 2, "type": "integer"}
    with pytest.raises(Exception, match="Input validation failed"):
        toolkit.validate_call(call("c", "mcp__kit__add", a="not a number"))


async def test_tool_groups_take_mcps_too(kit: MCPClient) -> None:
    group = ToolGroup("remote", description="The kit server.", mcps=[kit])
    toolkit = Toolkit(tool_groups=[group])
    basic = [s["function"]["name"] for s in toolkit.get_tool_schemas()]
    assert basic == ["reset_tools"]
    active = [s["function"]["name"] for s in toolkit.get_tool_schemas(["remote"])]
    assert "mcp__kit__echo" in active
    with pytest.raises(Exception, match="currently inactive"):
        toolkit.check_tool_available("mcp__kit__echo")


def test_a_stateful_client_must_be_connected_first(tmp_path: Path) -> None:
    client = MCPClient("kit", stdio_config(tmp_path))
    with pytest.raises(ValueError, match="not connected"):
        Toolkit(mcps=[client])
    with pytest.raises(ValueError, match="not connected"):
        Toolkit(tool_groups=[ToolGroup("g", description="d", mcps=[client])])
    with pytest.raises(TypeError, match="MCP client"):
        Toolkit(mcps=["not a client"])  # type: ignore[list-item]


async def test_a_failing_source_is_logged_and_skipped(
    kit: MCPClient, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        name = "broken"
        is_stateful = False
        is_connected = True

        def listed_tools(self) -> list[Any]:
            raise RuntimeError("listing exploded")

    caplog.set_level(logging.WARNING)
    toolkit = Toolkit(mcps=[Broken(), kit])
    names = [s["function"]["name"] for s in toolkit.get_tool_schemas()]
    assert "mcp__kit__echo" in names
    assert "Skipping MCP server 'broken' in tool group 'basic'" in caplog.text
    assert "listing exploded" in caplog.text


# -- replies ---------------------------------------------------------------------------------------


async def test_a_reply_streams_progress_as_custom_events(kit: MCPClient) -> None:
    agent = make_agent(
        [calls(call("w1", "mcp__kit__wait", seconds=0.3)), text("done")], Toolkit(mcps=[kit])
    )
    msg, events = await run(agent, user())
    progress = [e for e in events if isinstance(e, CustomEvent) and e.name == "mcp_progress"]
    assert [e.value["progress"] for e in progress] == [1.0, 2.0, 3.0]
    assert progress[0].value == {
        "progress": 1.0,
        "total": 3.0,
        "message": "step 1",
        "reply_id": agent.state.reply_id,
        "tool_call_id": "w1",
    }
    assert output_text(result_of(agent, "w1")) == "waited 0.3"
    assert msg.get_text_content() == "done"


async def test_interrupting_a_reply_cancels_the_mcp_request(kit: MCPClient, tmp_path: Path) -> None:
    toolkit = Toolkit(mcps=[kit])
    agent = make_agent([calls(call("w1", "mcp__kit__wait", seconds=30)), text("done")], toolkit)

    async def interrupt_when_started() -> None:
        await wait_for_journal(tmp_path, "started wait")
        agent.interrupt()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt_when_started)
        with trio.fail_after(20):
            msg, _ = await run(agent, user())
    assert result_of(agent, "w1").state == ToolResultState.INTERRUPTED
    await wait_for_journal(tmp_path, "cancelled wait")
    # The session is still usable: the next reply calls the server again.
    nxt = make_agent([calls(call("e1", "mcp__kit__echo", text="next")), text("ok")], toolkit)
    await run(nxt, user())
    assert output_text(result_of(nxt, "e1")) == "next"
    assert "finished wait" not in read_journal(tmp_path)
    assert msg.metadata.get("finished_reason", "interrupted") == "interrupted"


@pytest.mark.parametrize("mode", MODES)
async def test_sweep_a_reply_calling_an_mcp_tool_over_stdio(mode: str, tmp_path: Path) -> None:
    usable: list[bool] = []
    async with MCPClient("kit", stdio_config(tmp_path), stream_progress=True) as kit:
        pid = await server_pid(kit)
        toolkit = Toolkit(mcps=[kit])

        async def make() -> Any:
            # Whatever the previous run's cancellation point, the same server answers now.
            answer = await kit.call_tool("echo", {"text": "ping"})
            usable.append(answer.content[0].text == "ping")  # type: ignore[union-attr]
            return make_agent(
                [calls(call("w1", "mcp__kit__wait", seconds=0.05)), text("done")], toolkit
            )

        def check(run: SweepRun) -> None:
            assert process_alive(pid)
            assert kit.is_connected

        report = await cancel_sweep(make, user, mode=mode, check=check)
        assert (await kit.call_tool("echo", {"text": "after"})).content[0].text == "after"  # type: ignore[union-attr]
    assert not process_alive(pid)  # terminated with its owner
    assert report.points > 0
    assert report.outcomes["interrupted"] > 0
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert all(usable)
    assert len(usable) == len(report.runs)

"""The life of a stdio MCP server (``trioagent/mcp/_stdio.py`` and the client's reconnection),
against real servers written with the SDK's ``MCPServer`` (``tests/mcp_kit.py``):

* leaving ``async with MCPClient(...)`` ends the server's whole process group, children
  included, even one that ignores ``SIGTERM``;
* a server that dies during a call, or between calls, gives each call an error result naming
  the server; its tools stay offered, the client reconnects with backoff and they work again;
* a server that cannot be restarted is reported plainly as down.

Real clock (subprocesses), generous bounds.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import trio
from agent_kit import call, calls, make_agent, output_text, result_of, run, text, user
from mcp_kit import process_alive, server_pid, stdio_config

from trioagent.agent import Agent, AgentState
from trioagent.mcp import MCPCallError, MCPClient
from trioagent.message import TextBlock, ToolResultState
from trioagent.permission import PermissionMode
from trioagent.testing import SweepRun, cancel_sweep
from trioagent.tool import Toolkit


def texts(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextBlock))


def crashing_agent(toolkit: Toolkit) -> Agent:
    """An agent whose model calls ``exit_now`` (not read-only: bypass mode lets it run)."""
    state = AgentState()
    state.permission_context.mode = PermissionMode.BYPASS
    return make_agent([calls(call("x1", "mcp__kit__exit_now")), text("done")], toolkit, state=state)


async def wait_until(predicate: Any, timeout: float = 30.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.02)


# -- the process group -----------------------------------------------------------------------------


async def test_leaving_the_client_ends_the_servers_children(tmp_path: Path) -> None:
    """The server exits by itself when its stdin closes; the child it started is ended too."""
    async with MCPClient("kit", stdio_config(tmp_path, "--spawning")) as client:
        pid = await server_pid(client)
        child = int(texts(await client.call_tool("spawn", {})))
        assert process_alive(child)
    assert not process_alive(pid)
    assert not process_alive(child)


async def test_a_child_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    async with MCPClient("kit", stdio_config(tmp_path, "--spawning")) as client:
        child = int(texts(await client.call_tool("spawn", {"ignore_term": True})))
    assert not process_alive(child)


async def test_a_cancelled_owner_still_ends_the_group(tmp_path: Path) -> None:
    children: list[int] = []
    with trio.move_on_after(60) as scope:
        async with MCPClient("kit", stdio_config(tmp_path, "--spawning")) as client:
            children.append(int(texts(await client.call_tool("spawn", {}))))
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert not process_alive(children[0])


# -- a server that dies ----------------------------------------------------------------------------


async def test_a_server_dying_mid_call_is_an_error_result_and_comes_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with MCPClient("kit", stdio_config(tmp_path)) as client:
        first = await server_pid(client)
        toolkit = Toolkit(mcps=[client])
        agent = crashing_agent(toolkit)
        await run(agent, user())
        died = result_of(agent, "x1")
        assert died.state == ToolResultState.ERROR
        assert "MCP server 'kit'" in output_text(died)
        assert "exited with code 3" in output_text(died)
        # The tools stay offered while the client reconnects; they come back.
        names = [s["function"]["name"] for s in toolkit.get_tool_schemas()]
        assert "mcp__kit__echo" in names
        await wait_until(lambda: client.is_connected)
        again = make_agent([calls(call("e1", "mcp__kit__echo", text="back")), text("ok")], toolkit)
        await run(again, user())
        assert output_text(result_of(again, "e1")) == "back"
        assert await server_pid(client) != first
    assert "Reconnected to MCP server 'kit'" in caplog.text


async def test_a_server_killed_between_calls_is_an_error_result_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    config = stdio_config(tmp_path)
    async with MCPClient("kit", config, reconnect_delay=3.0) as client:
        toolkit = Toolkit(mcps=[client])
        os.kill(await server_pid(client), signal.SIGKILL)
        await wait_until(lambda: not client.is_connected)  # noticed without a call
        for _ in range(3):  # every lookup while it is down: no new warning
            assert "mcp__kit__echo" in [s["function"]["name"] for s in toolkit.get_tool_schemas()]
        agent = make_agent([calls(call("e1", "mcp__kit__echo", text="x")), text("ok")], toolkit)
        await run(agent, user())
        down = result_of(agent, "e1")
        assert down.state == ToolResultState.ERROR
        assert "MCP server 'kit' is down" in output_text(down)
        assert "(the server process was killed by signal SIGKILL)" in output_text(down)
        assert "reconnecting" in output_text(down)
        await wait_until(lambda: client.is_connected)
        assert texts(await client.call_tool("echo", {"text": "back"})) == "back"
    kit_warnings = [
        r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("trioagent")
    ]
    assert len(kit_warnings) == 2, [r.getMessage() for r in kit_warnings]  # down, then back


async def test_a_server_that_cannot_restart_is_reported_down(tmp_path: Path) -> None:
    config = stdio_config(tmp_path, once=True)
    async with MCPClient("kit", config, reconnect_delay=0.1) as client:
        os.kill(await server_pid(client), signal.SIGKILL)

        async def failed_attempts() -> str:
            with pytest.raises(MCPCallError) as caught:
                await client.call_tool("echo", {"text": "x"})
            return str(caught.value)

        with trio.fail_after(30):
            while "reconnecting (failed" not in (message := await failed_attempts()):
                await trio.sleep(0.05)
        assert message.startswith("MCP server 'kit' is down")
    assert not client.is_connected


async def test_without_reconnection_the_server_stays_down(tmp_path: Path) -> None:
    async with MCPClient("kit", stdio_config(tmp_path), reconnect_delay=None) as client:
        os.kill(await server_pid(client), signal.SIGKILL)
        await wait_until(lambda: not client.is_connected)
        with pytest.raises(MCPCallError, match=r"is down .*not reconnecting"):
            await client.call_tool("echo", {"text": "x"})
        # A toolkit built while it is down still offers its tools (each call says it is down).
        toolkit = Toolkit(mcps=[client])
        assert "mcp__kit__echo" in [s["function"]["name"] for s in toolkit.get_tool_schemas()]


@pytest.mark.integration  # restarts the server after each run that killed it (~40 s a mode)
@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_a_reply_whose_mcp_server_dies(mode: str, tmp_path: Path) -> None:
    """Cancelled at every point of a reply whose call kills the server: one interrupted end,
    and the client reconnects for the next run."""
    async with MCPClient("kit", stdio_config(tmp_path), reconnect_delay=0.05) as kit:
        toolkit = Toolkit(mcps=[kit])

        async def make() -> Any:
            await wait_until(lambda: kit.is_connected)
            return crashing_agent(toolkit)

        def check(run: SweepRun) -> None:
            assert run.end is not None

        report = await cancel_sweep(make, user, mode=mode, check=check)
        await wait_until(lambda: kit.is_connected)
        assert texts(await kit.call_tool("echo", {"text": "after"})) == "after"
    assert report.points > 0
    assert report.outcomes["interrupted"] > 0

"""``trioagent.mcp.serve`` (``trioagent/mcp/_serve.py``) under the official MCP SDK's client:
a served agent (real stdio process) and a served toolkit (real streamable HTTP socket) are
listed, called, streamed as progress and cancelled; a cancelled reply ends once, INTERRUPTED,
with its context consistent, and the server stays usable.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_serve_kit import WORDS, Journaled, build_agent

from trioagent.mcp import serve
from trioagent.mcp._serve import build_server
from trioagent.message import Base64Source, DataBlock, TextBlock
from trioagent.permission import PermissionContext, PermissionEngine
from trioagent.tool import ToolChunk, Toolkit

SCRIPT = Path(__file__).resolve().parent / "mcp_serve_kit.py"
BYPASS = PermissionEngine(PermissionContext(mode="bypass"))

# The SDK's streamable HTTP client leaves httpx2's iterators of an answer's event stream (one
# that carried progress notifications) unexhausted when its task group closes; their garbage
# collection warns.  The HTTP tests collect them (gc) under these filters.
SDK_HTTP_LEFTOVERS = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2:ResourceWarning"),
]


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _journal(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


async def _wait_for_lines(path: Path, count: int, timeout: float = 20.0) -> list[str]:
    with trio.fail_after(timeout):
        while len(_journal(path)) < count:
            await trio.sleep(0.05)
    return _journal(path)


async def _call_and_cancel(client: Client, tool: str, arguments: dict[str, Any]) -> list[str]:
    """Call ``tool``, cancel it after its second progress notification; the messages seen."""
    messages: list[str] = []
    second = trio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")
        if len(messages) >= 2:
            second.set()

    async def call() -> None:
        await client.call_tool(tool, arguments, progress_callback=on_progress)
        raise AssertionError("the call was not cancelled")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        with trio.fail_after(20):
            await second.wait()
        nursery.cancel_scope.cancel()
    return messages


async def test_a_served_agent_over_stdio_lists_calls_streams_and_cancels(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    params = StdioServerParameters(
        command=sys.executable, args=[str(SCRIPT)], env={"MCP_SERVE_JOURNAL": str(journal)}
    )
    async with Client(params) as client:
        listed = await client.list_tools()
        (tool,) = listed.tools
        assert tool.name == "helper"
        assert tool.input_schema["required"] == ["message"]
        # Progress streams the reply's text; cancelling interrupts the reply.
        streamed = await _call_and_cancel(client, "helper", {"message": "hi"})
        assert streamed[:2] == WORDS[:2]
        (line,) = await _wait_for_lines(journal, 1)
        assert line == "reply 1 interrupted consistent"
        # The server is usable: the next call runs a whole reply.
        progress: list[str] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(message or "")

        result = await client.call_tool(
            "helper", {"message": "again"}, progress_callback=on_progress
        )
        assert not result.is_error
        assert _text(result) == "".join(WORDS)
        assert progress == WORDS
        lines = await _wait_for_lines(journal, 2)
        assert lines[1] == "reply 1 completed consistent"
        bad = await client.call_tool("helper", {"message": 3})
        assert bad.is_error


@SDK_HTTP_LEFTOVERS[0]
@SDK_HTTP_LEFTOVERS[1]
async def test_a_served_toolkit_over_streamable_http(nursery: trio.Nursery) -> None:
    started = trio.Event()  # set by the long call
    finished: list[str] = []

    async def slow(steps: int) -> str:
        """Count slowly.

        Args:
            steps: how many steps.
        """
        if steps > 100:
            started.set()
        try:
            for _ in range(steps):
                await trio.sleep(0.05)
        except trio.Cancelled:
            finished.append("cancelled")
            raise
        finished.append("done")
        return f"{steps} steps"

    async def picture() -> list[TextBlock | DataBlock]:
        """A caption and a picture."""
        await trio.lowlevel.checkpoint()
        image = DataBlock(source=Base64Source(data="aGk=", media_type="image/png"))
        blob = DataBlock(source=Base64Source(data="AAAA", media_type="application/x-thing"))
        return [TextBlock(text="caption"), image, blob]

    toolkit = Toolkit()
    toolkit.register_function(slow)
    toolkit.register_function(picture)
    url = await nursery.start(
        lambda task_status: serve(
            toolkit, transport="http", port=0, permissions=BYPASS, task_status=task_status
        )
    )
    assert url.startswith("http://127.0.0.1:")
    async with Client(url) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"slow", "picture"}
        done = await client.call_tool("slow", {"steps": 2})
        assert _text(done) == "2 steps"
        content = (await client.call_tool("picture", {})).content
        assert isinstance(content[0], types.TextContent)
        assert isinstance(content[1], types.ImageContent)
        assert isinstance(content[2], types.EmbeddedResource)
        invalid = await client.call_tool("slow", {"steps": "many"})
        assert invalid.is_error
        assert "Input validation failed" in _text(invalid)
        # A cancelled call cancels the tool; the server stays usable.
        async with trio.open_nursery() as calls:
            calls.start_soon(client.call_tool, "slow", {"steps": 400})
            with trio.fail_after(20):
                await started.wait()
            calls.cancel_scope.cancel()
        with trio.fail_after(20):
            while "cancelled" not in finished:
                await trio.sleep(0.02)
        assert _text(await client.call_tool("slow", {"steps": 1})) == "1 steps"
    nursery.cancel_scope.cancel()
    gc.collect()


async def test_serve_refuses_what_it_cannot_serve() -> None:
    with pytest.raises(TypeError, match="an agent or a Toolkit"):
        build_server(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="transport"):
        await serve(Toolkit(), transport="carrier-pigeon")  # type: ignore[arg-type]


@SDK_HTTP_LEFTOVERS[0]
@SDK_HTTP_LEFTOVERS[1]
async def test_toolkit_progress_chunks_stream(nursery: trio.Nursery) -> None:
    from trioagent.tool import ToolBase

    class Counting(ToolBase):
        name = "counting"
        description = "Counts to three, streaming."
        input_schema = {"type": "object", "properties": {}}  # noqa: RUF012

        async def call(self, emit: Any, /, **kwargs: Any) -> str:
            for word in ["one ", "two ", "three"]:
                await emit(ToolChunk(content=[TextBlock(text=word)], is_last=False))
            return "counted"

    toolkit = Toolkit()
    toolkit.add_tool(Counting())
    url = await nursery.start(
        lambda task_status: serve(
            toolkit, transport="http", port=0, permissions=BYPASS, task_status=task_status
        )
    )
    seen: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async with Client(url) as client:
        result = await client.call_tool("counting", {}, progress_callback=on_progress)
    assert seen == ["one ", "two ", "three"]
    assert _text(result) == "one two threecounted"
    nursery.cancel_scope.cancel()
    gc.collect()


def test_an_agent_and_a_wrapper_of_its_shape_are_servable() -> None:
    from trioagent.mcp import ServableAgent

    agent = build_agent()
    assert isinstance(agent, ServableAgent)
    assert isinstance(Journaled(agent, print), ServableAgent)
    server = build_server(agent, tool_name="ask_helper")
    assert server.name == "helper"


def _confirming_agent() -> Any:
    """A served agent whose one tool call needs the user's confirmation (default mode)."""
    from agent_kit import call, calls, make_agent, text

    async def add(a: int, b: int) -> str:
        """Add.

        Args:
            a: one.
            b: two.
        """
        await trio.lowlevel.checkpoint()
        return str(a + b)

    toolkit = Toolkit()
    toolkit.register_function(add)
    steps = [calls(call("c1", "add", a=1, b=2)), text("answered")] * 3
    return make_agent(steps, toolkit)


def _result_state(agent: Any) -> list[str]:
    from trioagent.message import ToolResultBlock

    return [
        str(block.state)
        for msg in agent.state.context
        for block in msg.content
        if isinstance(block, ToolResultBlock)
    ]


@pytest.mark.parametrize(("answer", "state"), [(True, "success"), (False, "denied")])
async def test_a_parked_confirmation_is_asked_by_elicitation(answer: bool, state: str) -> None:
    agent = _confirming_agent()
    questions: list[str] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        questions.append(params.message)
        await trio.lowlevel.checkpoint()
        return types.ElicitResult(action="accept", content={"allow": answer})

    async with Client(build_server(agent), mode="legacy", elicitation_callback=elicit) as client:
        result = await client.call_tool(agent.name, {"message": "add 1 and 2"})
    assert _text(result) == "answered"
    assert questions == ['The agent wants to run add with {"a": 1, "b": 2}. Allow it?']
    assert _result_state(agent) == [state]
    assert not agent.state.has_awaiting_tool_calls(agent.name)


async def test_a_client_that_cannot_be_asked_denies() -> None:
    agent = _confirming_agent()
    async with Client(build_server(agent), mode="legacy") as client:
        result = await client.call_tool(agent.name, {"message": "add 1 and 2"})
    assert _text(result) == "answered"
    assert _result_state(agent) == ["denied"]


async def test_a_call_cancelled_while_asking_leaves_the_agent_unparked() -> None:
    agent = _confirming_agent()
    asking = trio.Event()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asking.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with Client(build_server(agent), mode="legacy", elicitation_callback=elicit) as client:
        with trio.move_on_after(10) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, agent.name, {"message": "add"})
                await asking.wait()
                nursery.cancel_scope.cancel()
        assert not scope.cancelled_caught
        with trio.fail_after(10):
            while agent.state.has_awaiting_tool_calls(agent.name):
                await trio.sleep(0.01)
        assert _result_state(agent)[-1] == "interrupted"


async def test_a_served_toolkit_asks_the_client_or_denies() -> None:
    """By default a served toolkit's calls are checked in the default mode: a read-only tool
    runs, another asks the client's user by elicitation, and without one it is denied."""
    from mcp.client.session import ClientRequestContext

    ran: list[str] = []

    async def look() -> str:
        """Look."""
        await trio.lowlevel.checkpoint()
        ran.append("look")
        return "seen"

    async def touch() -> str:
        """Touch."""
        await trio.lowlevel.checkpoint()
        ran.append("touch")
        return "touched"

    toolkit = Toolkit()
    toolkit.register_function(look, is_read_only=True)
    toolkit.register_function(touch)
    server = build_server(toolkit)
    async with Client(server, mode="legacy") as cannot_ask:
        assert _text(await cannot_ask.call_tool("look", {})) == "seen"
        denied = await cannot_ask.call_tool("touch", {})
        assert denied.is_error
        assert "Permission denied for touch" in _text(denied)

    async def allow(
        ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        await trio.lowlevel.checkpoint()
        return types.ElicitResult(action="accept", content={"allow": True})

    async with Client(server, mode="legacy", elicitation_callback=allow) as asked:
        assert _text(await asked.call_tool("touch", {})) == "touched"
    assert ran == ["look", "touch"]

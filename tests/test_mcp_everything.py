"""Against the MCP reference server ``@modelcontextprotocol/server-everything`` (npm), over
stdio and streamable HTTP: every tool it lists is offered and callable and returns what the
server sent (its task-only tool called as a task); sampling, elicitation and roots round trips; resources and prompts read; its log
messages in our log; a cancelled call leaves the server usable.

Marked ``mcp_everything`` (deselected by default; ``.ci/run`` installs the server and runs
``pytest -m mcp_everything``).  The server is found at ``$TRIOAGENT_MCP_EVERYTHING`` (its
``dist/index.js``) or under ``.mcp-everything/`` in the repository; with
``TRIOAGENT_NO_MCP_EVERYTHING=1`` (set by ``.ci/run`` when the install failed) the tests
are skipped.
"""

from __future__ import annotations

import functools
import gc
import json
import logging
import os
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trioagent.mcp import HttpMCPConfig, MCPClient, MCPElicitation, MCPSampling, StdioMCPConfig
from trioagent.message import Base64Source, DataBlock, TextBlock, ToolResultState
from trioagent.permission import (
    PermissionBehavior,
    PermissionContext,
    PermissionEngine,
    PermissionRule,
)
from trioagent.testing import ScriptedModel, text_chunks
from trioagent.tool import ToolBase, ToolChunk

# The SDK's streamable HTTP client leaves httpx2's byte iterators of the server's event
# streams (the answers that carried a sampling or elicitation request) unexhausted when its
# task group closes; their garbage collection warns.  Collected at each fixture's end (gc)
# under these filters, so no other test sees it.
pytestmark = [
    pytest.mark.mcp_everything,
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2:ResourceWarning"),
]

ROOT = Path(__file__).resolve().parent.parent
_PACKAGE = "node_modules/@modelcontextprotocol/server-everything/dist/index.js"

#: What the server offers a client that declares sampling, elicitation and roots (its two
#: "-async" tools need a client that runs requests as tasks: they are not listed).
PLAIN_TOOLS = {
    "echo": ({"message": "hi"}, "Echo: hi"),
    "get-annotated-message": ({"messageType": "success"}, "Operation completed successfully"),
    "get-env": ({}, '"PATH"'),
    "get-resource-links": ({"count": 2}, '"type": "resource_link"'),
    "get-resource-reference": ({"resourceId": 2}, '"uri": "demo://resource/dynamic/text/2"'),
    "get-structured-content": ({"location": "Chicago"}, '"temperature"'),
    "get-sum": ({"a": 1, "b": 2}, "The sum of 1 and 2 is 3."),
    "get-tiny-image": ({}, "The image above is the MCP logo."),
    "gzip-file-as-resource": (
        {"name": "hello.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resource"},
        None,  # binary: checked as a data block below
    ),
    "toggle-simulated-logging": ({}, "Started simulated"),
    "toggle-subscriber-updates": ({}, "Started simulated resource updated"),
    "trigger-long-running-operation": ({"duration": 0.2, "steps": 2}, "completed"),
    "get-roots-list": ({}, "URI: file://"),
    "trigger-elicitation-request": ({}, "Name: Ada"),
    "trigger-url-elicitation": ({"url": "https://example.com/consent"}, "URL elicitation"),
    "trigger-sampling-request": ({"prompt": "Say hi"}, "sampled: hello from the model"),
}
#: Accepted only as a task (``taskSupport: required``): called the task-augmented way.
TASK_ONLY = {"simulate-research-query": ({"topic": "tides"}, "# Research Report: tides")}


def _server_script() -> Path:
    if os.environ.get("TRIOAGENT_NO_MCP_EVERYTHING"):
        pytest.skip("server-everything could not be installed (TRIOAGENT_NO_MCP_EVERYTHING)")
    configured = os.environ.get("TRIOAGENT_MCP_EVERYTHING")
    script = Path(configured) if configured else ROOT / ".mcp-everything" / _PACKAGE
    if not script.exists() or shutil.which("node") is None:
        pytest.fail(
            f"server-everything is not installed at {script} (or node is missing): run "
            "`npm install --prefix .mcp-everything @modelcontextprotocol/server-everything`"
        )
    return script


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_for_port(port: int, timeout: float = 30.0) -> None:
    with trio.fail_after(timeout):
        while True:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.1)
                continue
            await stream.aclose()
            return


class Answers:
    """What the user side answers, and what it was asked."""

    def __init__(self) -> None:
        self.questions: list[MCPElicitation] = []
        self.interpretation = "technical"

    async def elicit(self, question: MCPElicitation) -> tuple[str, Any]:
        self.questions.append(question)
        await trio.lowlevel.checkpoint()
        if "interpretation" in str(question.schema):
            return "accept", {"interpretation": self.interpretation}
        return "accept", {"name": "Ada", "check": True}

    def sampling(self) -> MCPSampling:
        model = ScriptedModel([text_chunks("sampled: hello from the model")] * 20)
        rules = PermissionContext()
        engine = PermissionEngine(rules)
        engine.add_rule(
            PermissionRule(tool_name="mcp__ev__sampling", behavior=PermissionBehavior.ALLOW)
        )
        return MCPSampling(model, engine)


@pytest.fixture(params=["stdio", "http"])
async def everything(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[MCPClient, Answers]]:
    script = _server_script()
    answers = Answers()
    kwargs: dict[str, Any] = {
        "sampling": answers.sampling(),
        "elicitation": answers.elicit,
        "roots": [tmp_path],
        "stream_progress": True,
        "log_level": "debug",
    }
    if request.param == "stdio":
        config = StdioMCPConfig(command="node", args=[str(script), "stdio"])
        async with MCPClient("ev", config, **kwargs) as client:
            yield client, answers
        return
    port = _free_port()
    env = {**os.environ, "PORT": str(port)}
    async with trio.open_nursery() as nursery:
        command = ["node", str(script), "streamableHttp"]
        run = functools.partial(
            trio.run_process, command, env=env, check=False, stdout=subprocess.DEVNULL
        )
        process = await nursery.start(run)
        try:
            await _wait_for_port(port)
            http = HttpMCPConfig(url=f"http://127.0.0.1:{port}/mcp")
            async with MCPClient("ev", http, **kwargs) as client:
                yield client, answers
        finally:
            process.terminate()
    gc.collect()


def _text(content: list[TextBlock | DataBlock]) -> str:
    return "\n".join(b.text for b in content if isinstance(b, TextBlock))


def _tools(client: MCPClient) -> dict[str, ToolBase]:
    return {tool.name: tool for tool in client.listed_tools()}


async def _run(tool: ToolBase, arguments: dict[str, Any]) -> Any:
    chunks: list[ToolChunk] = []

    async def emit(chunk: ToolChunk) -> None:
        chunks.append(chunk)

    return await tool.run(arguments, emit)


async def test_every_listed_tool_is_offered_and_returns_what_the_server_sent(
    everything: tuple[MCPClient, Answers], tmp_path: Path
) -> None:
    client, answers = everything
    tools = _tools(client)
    offered = {tool.spec.name for tool in tools.values() if hasattr(tool, "spec")}  # type: ignore[attr-defined]
    assert offered == set(PLAIN_TOOLS) | set(TASK_ONLY)
    assert "mcp__ev__read_resource" in tools
    for server_name, (arguments, expected) in {**PLAIN_TOOLS, **TASK_ONLY}.items():
        response = await _run(tools[f"mcp__ev__{server_name}"], arguments)
        assert response.state != ToolResultState.ERROR, (server_name, response.text())
        if expected is not None:
            assert expected in response.text(), (server_name, response.text())
    # Binary resources arrive as data blocks (the gzip of "hello").
    gzip = await client.call_tool("gzip-file-as-resource", PLAIN_TOOLS["gzip-file-as-resource"][0])
    (blob,) = [b for b in gzip.content if isinstance(b, DataBlock)]
    assert isinstance(blob.source, Base64Source)
    assert blob.source.media_type == "application/gzip"
    # The round trips: the sampling model answered, the user answered, the roots are ours.
    assert [q.url for q in answers.questions] == [None, "https://example.com/consent"]
    assert answers.questions[0].schema is not None
    assert "name" in answers.questions[0].schema["properties"]  # type: ignore[operator]
    roots = await client.call_tool("get-roots-list", {})
    assert tmp_path.resolve().as_uri() in _text(roots.content)
    # Structured content is checked against the output schema (the SDK does) and kept.
    weather = await client.call_tool("get-structured-content", {"location": "Chicago"})
    assert json.loads(_text(weather.content))["temperature"] is not None


async def test_sampling_is_checked_like_a_tool(everything: tuple[MCPClient, Answers]) -> None:
    client, _ = everything
    assert client.sampling is not None
    client.sampling.permissions = PermissionEngine(PermissionContext())  # default mode: asks
    declined = await client.call_tool("trigger-sampling-request", {"prompt": "Say hi"})
    assert "declined the sampling request" in _text(declined.content)
    asked: list[str] = []

    async def confirm(request: Any) -> bool:
        asked.append(request.server)
        await trio.lowlevel.checkpoint()
        return True

    client.sampling.confirm = confirm
    allowed = await client.call_tool("trigger-sampling-request", {"prompt": "Say hi"})
    assert "sampled: hello from the model" in _text(allowed.content)
    assert asked == ["ev"]


async def test_resources_and_prompts_are_read(everything: tuple[MCPClient, Answers]) -> None:
    client, _ = everything
    resources = await client.list_resources()
    assert resources
    for item in resources:
        blocks = await client.read_resource(item.uri)
        assert blocks, item.uri
    templates = {t.uri_template for t in await client.list_resource_templates()}
    assert "demo://resource/dynamic/text/{resourceId}" in templates
    (text,) = await client.read_resource("demo://resource/dynamic/text/3")
    assert isinstance(text, TextBlock)
    assert "Resource 3" in text.text
    (blob,) = await client.read_resource("demo://resource/dynamic/blob/3")
    assert isinstance(blob, DataBlock)
    prompts = {p.name: p for p in await client.list_prompts()}
    assert {"simple-prompt", "args-prompt", "resource-prompt"} <= set(prompts)
    assert [a.name for a in prompts["args-prompt"].arguments if a.required] == ["city"]
    (simple,) = await client.get_prompt("simple-prompt")
    assert simple.role == "user"
    assert simple.get_text_content()
    filled = await client.get_prompt("args-prompt", {"city": "Lisbon"})
    assert "Lisbon" in (filled[0].get_text_content() or "")
    embedded = await client.get_prompt(
        "resource-prompt", {"resourceType": "Text", "resourceId": "2"}
    )
    assert any(
        '"uri": "demo://resource/dynamic/text/2"' in (m.get_text_content() or "") for m in embedded
    )


async def test_the_model_reads_linked_resources_through_the_permission_engine(
    everything: tuple[MCPClient, Answers],
) -> None:
    client, _ = everything
    tools = _tools(client)
    links = await client.call_tool("get-resource-links", {"count": 2})
    uris = [
        json.loads(block.text.split("\nRead it with")[0])["uri"]
        for block in links.content
        if isinstance(block, TextBlock) and '"resource_link"' in block.text
    ]
    assert len(uris) == 2
    reader = tools["mcp__ev__read_resource"]
    read = await _run(reader, {"uri": uris[0]})
    assert read.state != ToolResultState.ERROR
    engine = PermissionEngine(PermissionContext())
    assert (await engine.check_permission(reader, {"uri": uris[0]})).behavior == "allow"
    engine.add_rule(
        PermissionRule(
            tool_name=reader.name, rule_content="demo://resource/dynamic/", behavior="deny"
        )
    )
    assert (await engine.check_permission(reader, {"uri": uris[0]})).behavior == "deny"
    assert (await engine.check_permission(reader, {"uri": "other://x"})).behavior == "allow"
    missing = await _run(reader, {"uri": "demo://nothing/here"})
    assert missing.state == ToolResultState.ERROR
    assert "demo://nothing/here" in missing.text()


async def test_server_log_messages_reach_our_log(
    everything: tuple[MCPClient, Answers], caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = everything
    caplog.set_level(logging.DEBUG, "trioagent.mcp")
    await client.call_tool("toggle-simulated-logging", {})
    with trio.fail_after(20):
        while not any("level message" in r.getMessage() for r in caplog.records):
            await trio.sleep(0.1)
    record = next(r for r in caplog.records if "level message" in r.getMessage())
    assert record.name == "trioagent.mcp"
    assert record.getMessage().startswith("MCP server ev")
    level = record.getMessage().split(": ", 1)[1].split("-")[0].split(" ")[0].lower()
    expected = {"debug": 10, "info": 20, "notice": 20, "warning": 30, "error": 40}
    assert record.levelno == expected.get(level, 50)
    await client.call_tool("toggle-simulated-logging", {})  # off again


async def test_each_cancel_leaves_the_server_usable(everything: tuple[MCPClient, Answers]) -> None:
    client, _ = everything
    tool = _tools(client)["mcp__ev__trigger-long-running-operation"]

    async def call(progressed: trio.Event) -> None:
        async def emit(chunk: ToolChunk) -> None:
            if "mcp_progress" in chunk.metadata:
                progressed.set()

        await tool.run({"duration": 30, "steps": 30}, emit)
        raise AssertionError("the call was not cancelled")

    for _ in range(3):
        progressed = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, progressed)
            with trio.fail_after(20):
                await progressed.wait()
            nursery.cancel_scope.cancel()
        echo = await client.call_tool("echo", {"message": "still here"})
        assert _text(echo.content) == "Echo: still here"


async def test_a_task_only_tool_runs_as_a_task_with_its_questions_and_cancels(
    everything: tuple[MCPClient, Answers],
) -> None:
    """``simulate-research-query`` is called with a ``task``: its status messages stream as
    progress, its question (an elicitation on the ``tasks/result`` stream) reaches our
    callback, and a cancelled call sends ``tasks/cancel`` and leaves the server usable."""
    client, answers = everything
    answers.interpretation = "historical"
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    arguments = {"topic": "ships", "ambiguous": True}
    result = await client.call_tool("simulate-research-query", arguments, on_progress)
    assert not result.is_error
    assert "# Research Report: ships (historical)" in _text(result.content)
    # Status messages as the task moves on (polled at the server's interval, so which stages
    # are seen depends on timing; at least one is).
    stages = ("Gathering sources", "Analyzing content", "Synthesizing findings", "Generating")
    assert progress
    assert all(any(stage in m for stage in stages) or "interpretation" in m for m in progress)
    assert any("could have multiple interpretations" in q.message for q in answers.questions)
    with trio.move_on_after(1.5) as scope:
        await client.call_tool("simulate-research-query", {"topic": "long"}, on_progress)
    assert scope.cancelled_caught
    echo = await client.call_tool("echo", {"message": "after the task"})
    assert _text(echo.content) == "Echo: after the task"

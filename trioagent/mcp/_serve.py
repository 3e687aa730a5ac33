"""Serve an agent or a toolkit over MCP: :func:`serve`, under ``trio.run``.

* **An agent** is served as one tool (named after the agent, input ``{"message": str}``) that
  runs one reply and returns its final text.  While the reply runs, each text delta goes to
  the client as a progress notification (when the client asked for progress).  A client's
  ``notifications/cancelled`` cancels the request's task: the reply takes the outer-cancel
  path, so it ends with exactly one INTERRUPTED end and a consistent context, as for any
  cancelled reply.  Calls are served one at a time (an agent runs one reply at a time).
  A reply that parks on a confirmation asks the client's user by elicitation (a form with one
  ``allow`` boolean per tool call) and resumes with the answers; a client that cannot be
  asked denies the calls.  Cancelled while asking, the parked reply is aborted, so the agent
  is never left parked.
* **A toolkit** is served tool by tool: the schemas the model would see, each call checked
  by a permission engine (an ASK asks the client's user by elicitation, or denies) and run
  through the toolkit (its validation and middlewares), progress chunks passed on.

The SDK's server runs on anyio, which runs under Trio: stdio through the SDK's
``stdio_server``, streamable HTTP through hypercorn's Trio worker.

The agent is taken by what it does (:class:`ServableAgent`: a ``name`` and an async
``reply(message, on_event=...)``), not by its class: :mod:`trioagent.mcp` sits below
:mod:`trioagent.agent` in the import layers, and the client side, which agents use, lives
here too.  Any object with that shape can be served.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, runtime_checkable

import attrs
import mcp_types
import trio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .._core.ids import generate_id
from .._core.json_types import JSONObject
from ..event import (
    ConfirmResult,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from ..message import (
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultState,
    UserMsg,
)
from ..permission import PermissionBehavior, PermissionEngine
from ..tool import MAX_TOOL_NAME, ToolChunk, Toolkit
from ..types import ReplyFinishedReason

__all__ = ["ServableAgent", "serve"]

logger = logging.getLogger("trioagent.mcp")

_ILLEGAL = re.compile(r"[^a-zA-Z0-9_-]")


@runtime_checkable
class ServableAgent(Protocol):
    """What :func:`serve` needs of an agent (``trioagent.agent.Agent`` is one)."""

    @property
    def name(self) -> str:
        """The agent's name (the served tool's name, cleaned)."""
        ...

    async def reply(
        self, inputs: Any = None, *, on_event: Callable[[Any], Awaitable[None]] | None = None
    ) -> Msg:
        """Run one reply to ``inputs`` (a user :class:`Msg`) and return its final message."""
        ...


@attrs.frozen
class _Peer:
    """What a served call can ask of the client that made it."""

    #: Send a progress notification (a no-op when the client asked for none).
    progress: Callable[[str], Awaitable[None]]
    #: Ask the client's user to allow one tool call (``False`` when it cannot ask).
    confirm: Callable[[ToolCallBlock], Awaitable[bool]]


Call = Callable[[JSONObject, _Peer], Awaitable[mcp_types.CallToolResult]]
#: Seconds a served agent's parked reply may take to be aborted when its call is cancelled.
_ABORT_GRACE = 5.0
_CONFIRM_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "allow": {"type": "boolean", "title": "Allow", "description": "Run this tool call."}
    },
    "required": ["allow"],
}


def _content(blocks: list[TextBlock | DataBlock]) -> list[mcp_types.ContentBlock]:
    """Our blocks as MCP content (the inverse of what the client converts)."""
    content: list[mcp_types.ContentBlock] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            content.append(mcp_types.TextContent(text=block.text))
            continue
        source = block.source
        if not isinstance(source, Base64Source):
            name = block.name or source.url
            content.append(
                mcp_types.ResourceLink(uri=source.url, name=name, mime_type=source.media_type)
            )
        elif source.media_type.startswith("image/"):
            content.append(mcp_types.ImageContent(data=source.data, mime_type=source.media_type))
        elif source.media_type.startswith("audio/"):
            content.append(mcp_types.AudioContent(data=source.data, mime_type=source.media_type))
        else:
            uri = block.name or f"data:{source.media_type}"
            blob = mcp_types.BlobResourceContents(
                uri=uri, blob=source.data, mime_type=source.media_type
            )
            content.append(mcp_types.EmbeddedResource(resource=blob))
    return content


def _agent_tool(
    agent: ServableAgent, name: str | None, description: str | None
) -> tuple[mcp_types.Tool, Call]:
    lock = trio.Lock()
    tool = mcp_types.Tool(
        name=name or _ILLEGAL.sub("_", agent.name)[:MAX_TOOL_NAME] or "agent",
        description=description or f"Ask the agent {agent.name!r}; it answers in text.",
        input_schema={
            "type": "object",
            "properties": {"message": {"type": "string", "description": "What to ask."}},
            "required": ["message"],
        },
    )

    async def call(arguments: JSONObject, peer: _Peer) -> mcp_types.CallToolResult:
        message = arguments.get("message")
        if not isinstance(message, str):
            return _error("'message' must be a string.")
        asked: list[RequireUserConfirmEvent] = []

        async def on_event(event: object) -> None:
            if isinstance(event, TextBlockDeltaEvent) and event.delta:
                await peer.progress(event.delta)
            elif isinstance(event, RequireUserConfirmEvent):
                asked.append(event)

        async with lock:
            try:
                final = await agent.reply(UserMsg("user", message), on_event=on_event)
                while asked:
                    final = await _confirmed(agent, asked.pop(), peer, on_event)
            except Exception as exc:
                logger.exception("The served agent %r failed", agent.name)
                return _error(f"The agent failed: {type(exc).__name__}")
        failed = final.finished_reason in (
            ReplyFinishedReason.INTERRUPTED,
            ReplyFinishedReason.ERROR,
        )
        text = final.get_text_content() or ""
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(text=text)], is_error=failed)

    return tool, call


async def _confirmed(
    agent: ServableAgent,
    asked: RequireUserConfirmEvent,
    peer: _Peer,
    on_event: Callable[[Any], Awaitable[None]],
) -> Msg:
    """Resume a reply parked on a confirmation with the client's answers (asked by
    elicitation; a client that cannot be asked denies).  Cancelled while asking, the parked
    reply is aborted (bounded, shielded), so the agent is not left parked."""
    try:
        results = [
            ConfirmResult(confirmed=await peer.confirm(call), tool_call=call)
            for call in asked.tool_calls
        ]
    except trio.Cancelled:
        with trio.move_on_after(_ABORT_GRACE) as scope:
            scope.shield = True  # the abort must run although the call was cancelled
            await agent.reply(UserInterruptEvent(), on_event=on_event)
        raise
    return await agent.reply(UserConfirmResultEvent(confirm_results=results), on_event=on_event)


def _toolkit_tools(
    toolkit: Toolkit, permissions: PermissionEngine
) -> dict[str, tuple[mcp_types.Tool, Call]]:
    served: dict[str, tuple[mcp_types.Tool, Call]] = {}
    for schema in toolkit.get_tool_schemas():
        function = schema.get("function")
        if not isinstance(function, dict):
            continue
        name = str(function["name"])
        parameters = function.get("parameters")
        tool = mcp_types.Tool(
            name=name,
            description=str(function.get("description") or ""),
            input_schema=parameters if isinstance(parameters, dict) else {"type": "object"},
        )
        served[name] = (tool, functools.partial(_run_tool, toolkit, permissions, name))
    return served


async def _run_tool(
    toolkit: Toolkit,
    permissions: PermissionEngine,
    name: str,
    arguments: JSONObject,
    peer: _Peer,
) -> mcp_types.CallToolResult:
    """Check the call (an ASK goes to the client's user), then run it through the toolkit."""
    call = ToolCallBlock(id=generate_id(), name=name, input=json.dumps(arguments))
    tool = toolkit.get_tool(name)
    if tool is None:
        return _error(f"Unknown tool {name!r}.")
    decision = await permissions.check_permission(tool, arguments)
    allowed = decision.behavior == PermissionBehavior.ALLOW
    if decision.behavior == PermissionBehavior.ASK:
        allowed = await peer.confirm(call)
    if not allowed:
        return _error(f"Permission denied for {name}: {decision.message}")

    async def emit(chunk: ToolChunk) -> None:
        for block in chunk.content:
            if isinstance(block, TextBlock) and block.text and not chunk.is_last:
                await peer.progress(block.text)

    response = await toolkit.call_tool(call, emit=emit)
    return mcp_types.CallToolResult(
        content=_content(response.content), is_error=response.state != ToolResultState.SUCCESS
    )


def _error(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(text=text)], is_error=True)


def build_server(
    target: ServableAgent | Toolkit,
    *,
    name: str | None = None,
    tool_name: str | None = None,
    description: str | None = None,
    permissions: PermissionEngine | None = None,
) -> Server[Any]:
    """The SDK server for ``target`` (see :func:`serve`)."""
    if isinstance(target, Toolkit):
        engine = permissions if permissions is not None else PermissionEngine()
        tools = _toolkit_tools(target, engine)
        server_name = name or "trioagent-tools"
    elif isinstance(target, ServableAgent):
        tool, call = _agent_tool(target, tool_name, description)
        tools = {tool.name: (tool, call)}
        server_name = name or target.name
    else:
        raise TypeError(f"serve() takes an agent or a Toolkit, got {type(target).__name__}")

    async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        await trio.lowlevel.checkpoint()
        return mcp_types.ListToolsResult(tools=[tool for tool, _ in tools.values()])

    async def call_tool(
        ctx: Any, params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        entry = tools.get(params.name)
        if entry is None:
            return _error(f"Unknown tool {params.name!r}.")
        steps = 0

        async def progress(text: str) -> None:
            nonlocal steps
            steps += 1
            await ctx.session.report_progress(steps, None, text)

        async def confirm(call: ToolCallBlock) -> bool:
            question = f"The agent wants to run {call.name} with {call.input or '{}'}. Allow it?"
            try:
                answer = await ctx.session.elicit_form(
                    question, _CONFIRM_SCHEMA, related_request_id=ctx.request_id
                )
            except Exception as exc:  # no elicitation on this connection: deny
                logger.info("Could not ask the MCP client to confirm %s: %s", call.name, exc)
                return False
            return answer.action == "accept" and (answer.content or {}).get("allow") is True

        peer = _Peer(progress=progress, confirm=confirm)
        return await entry[1](dict(params.arguments or {}), peer)

    return Server(server_name, on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(
    target: ServableAgent | Toolkit,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    name: str | None = None,
    tool_name: str | None = None,
    description: str | None = None,
    permissions: PermissionEngine | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``target`` (an agent or a :class:`~trioagent.tool.Toolkit`) over MCP.

    Args:
        target: an agent (served as one tool that runs a reply) or a toolkit (each tool).
        transport: ``"stdio"`` (until stdin closes) or ``"http"`` (streamable HTTP, until
            cancelled).
        name: the server's name (default: the agent's name, or ``"trioagent-tools"``).
        tool_name: the agent's tool name (default: the agent's name, cleaned).
        description: the agent's tool description.
        permissions: checks a toolkit's calls (default: a fresh engine in the default mode:
            read-only tools run, the others ask); an ASK goes to the client's user by
            elicitation, and a client that cannot be asked denies.  Bypass mode runs every
            served tool.
        host, port, path: where HTTP listens (``port=0``: any free port).
        task_status: ``nursery.start(serve, ...)`` returns the URL (HTTP) or ``"stdio"``.
    """
    server = build_server(
        target, name=name, tool_name=tool_name, description=description, permissions=permissions
    )
    if transport == "stdio":
        async with stdio_server() as (read_stream, write_stream):
            task_status.started("stdio")
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return
    if transport != "http":
        raise ValueError(f"transport must be 'stdio' or 'http', not {transport!r}")
    import hypercorn.config
    import hypercorn.trio

    app = server.streamable_http_app(streamable_http_path=path, host=host)
    config = hypercorn.config.Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logger

    async def run(task_status: trio.TaskStatus[list[str]]) -> None:
        await hypercorn.trio.serve(app, config, task_status=task_status)  # type: ignore[arg-type]

    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(run)
        task_status.started(binds[0] + path)

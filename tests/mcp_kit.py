"""A real MCP server for the MCP tests, written with the SDK's ``MCPServer`` (formerly FastMCP).

Run as a script it serves over stdio (``python mcp_kit.py``); :func:`build_server` gives the
same server for streamable HTTP on loopback (:func:`serve_http`, hypercorn under Trio).
Not a test module; the tests import it as ``mcp_kit``.

When ``MCP_KIT_JOURNAL`` names a file, the server appends one line per event the tests check
from outside: ``started <tool>``, ``cancelled <tool>``, ``finished <tool>``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer

from trioagent.mcp import MCPClient, StdioMCPConfig

SCRIPT = Path(__file__).resolve()
READ_ONLY = types.ToolAnnotations(read_only_hint=True)


def journal(line: str) -> None:
    path = os.environ.get("MCP_KIT_JOURNAL")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def build_server(
    name: str = "kit",
    events: list[str] | None = None,
    *,
    growing: bool = False,
    listen: bool = True,
    spawning: bool = False,
) -> MCPServer:
    """The test server; ``events`` (in-process use) receives the journal lines too.  A
    ``growing`` server also has ``grow``, which adds the tool ``extra`` and tells the client
    its tools changed (on ``subscriptions/listen`` streams, and as
    ``notifications/tools/list_changed``).  Without ``listen`` it serves no
    ``subscriptions/listen`` (as servers before protocol 2026-07-28).  A ``spawning`` server
    also has ``spawn``, which starts a child process that outlives the server unless its
    process group is ended."""
    server = MCPServer(name, subscriptions=None if listen else False)

    def note(line: str) -> None:
        journal(line)
        if events is not None:
            events.append(line)

    @server.tool(annotations=READ_ONLY)
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool()
    def add(a: int, b: int = 2) -> str:
        """Add two integers (not read-only: it asks for permission)."""
        return str(a + b)

    @server.tool(annotations=READ_ONLY)
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    @server.tool(annotations=READ_ONLY)
    async def wait(seconds: float, ctx: Context) -> str:
        """Wait, reporting progress every 0.1 s."""
        note("started wait")
        steps = max(1, round(seconds * 10))
        try:
            for i in range(steps):
                await ctx.report_progress(i + 1, steps, f"step {i + 1}")
                await anyio.sleep(seconds / steps)
        except anyio.get_cancelled_exc_class():
            note("cancelled wait")
            raise
        note("finished wait")
        return f"waited {seconds}"

    @server.tool()
    def fail(reason: str = "boom") -> str:
        """Always fails."""
        raise ValueError(reason)

    @server.tool()
    def mixed() -> list[types.ContentBlock]:
        """Every kind of content."""
        return [
            types.TextContent(text="some text"),
            types.ImageContent(data="aGk=", mime_type="image/png"),
            types.AudioContent(data="AAAA", mime_type="audio/wav"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(
                    uri="file:///notes.txt", text="a note", mime_type="text/plain"
                )
            ),
            types.ResourceLink(uri="https://example.com/report.pdf", name="report"),
        ]

    @server.tool(name="odd.name:v1", annotations=READ_ONLY)
    def odd_name() -> str:
        """A tool whose name model providers would reject."""
        return "odd"

    @server.tool()
    def exit_now() -> str:
        """Kill the server process (a crashing server)."""
        os._exit(3)

    if growing:

        def extra() -> str:
            """A tool added while the server runs."""
            return "extra"

        @server.tool()
        async def grow(ctx: Context) -> str:
            """Add the tool ``extra`` and announce the change."""
            server.add_tool(extra)
            await ctx.notify_tools_changed()  # subscriptions/listen (2026-07-28)
            await ctx.session.send_tool_list_changed()  # earlier protocol versions
            return "grown"

    if spawning:

        @server.tool()
        def spawn(ignore_term: bool = False) -> str:
            """Start ``sleep 600`` (one that ignores SIGTERM with ``ignore_term``); its pid."""
            if not ignore_term:
                return str(subprocess.Popen(["sleep", "600"]).pid)
            code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            code += "print('ready', flush=True); time.sleep(600)"
            child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
            assert child.stdout is not None
            child.stdout.readline()  # SIGTERM is ignored from here on
            return str(child.pid)

    return server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def serve_http(
    *,
    stateless: bool = False,
    events: list[str] | None = None,
    growing: bool = False,
    sse: bool = False,
    listen: bool = True,
) -> AsyncIterator[str]:
    """Serve :func:`build_server` over streamable HTTP (or, with ``sse``, the older HTTP+SSE
    transport) on loopback; yields the URL."""
    import hypercorn.config
    import hypercorn.trio
    import trio

    server = build_server("web", events, growing=growing, listen=listen)
    app = server.sse_app() if sse else server.streamable_http_app(stateless_http=stateless)
    port = free_port()
    config = hypercorn.config.Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.errorlog = None
    stop = trio.Event()
    async with trio.open_nursery() as nursery:

        async def serve(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            await hypercorn.trio.serve(
                app,  # type: ignore[arg-type]
                config,
                shutdown_trigger=stop.wait,  # type: ignore[arg-type]
                task_status=task_status,
            )

        await nursery.start(serve)
        try:
            yield f"http://127.0.0.1:{port}/{'sse' if sse else 'mcp'}"
        finally:
            stop.set()


class InProcessClient(MCPClient):
    """An :class:`MCPClient` whose session reaches ``server`` in this process (legacy JSON-RPC
    over memory streams) instead of a subprocess or a socket."""

    def __init__(self, name: str, server: Any, **kwargs: Any) -> None:
        super().__init__(name, StdioMCPConfig(command="unused"), **kwargs)
        self._server = server

    def _new_session(self, on_end: Callable[[str], None]) -> Client:
        return Client(
            self._server,
            mode="legacy",
            message_handler=self._on_message,
            **self._session_callbacks(),
        )


def stdio_config(tmp_path: Path, *extra: str, once: bool = False) -> StdioMCPConfig:
    """Start this script over stdio, journaling to ``tmp_path / "journal"``; a server started
    ``once`` fails to start again."""
    env = {"MCP_KIT_JOURNAL": str(tmp_path / "journal")}
    if once:
        env["MCP_KIT_ONCE"] = str(tmp_path / "started")
    return StdioMCPConfig(command=sys.executable, args=[str(SCRIPT), *extra], env=env)


def read_journal(tmp_path: Path) -> list[str]:
    path = tmp_path / "journal"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


async def wait_for_journal(tmp_path: Path, line: str, timeout: float = 10.0) -> None:
    """Wait (real clock) until the server journaled ``line``."""
    import trio

    with trio.fail_after(timeout):
        while line not in read_journal(tmp_path):
            await trio.sleep(0.02)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, which an init that does not reap orphans may leave
    around, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return True  # no /proc to read: the process exists
    return stat[stat.rfind(")") + 2] not in "ZX"


async def server_pid(client: MCPClient) -> int:
    result = await client.call_tool("pid", {})
    return int(result.content[0].text)  # type: ignore[union-attr]


if __name__ == "__main__":
    names = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    once = os.environ.get("MCP_KIT_ONCE")
    if once:  # a server that starts only once: a restart fails
        if os.path.exists(once):
            sys.exit("mcp_kit: started once already")
        Path(once).touch()
    server = build_server(
        names[0] if names else "kit",
        growing="--growing" in sys.argv,
        spawning="--spawning" in sys.argv,
    )
    server.run("stdio")

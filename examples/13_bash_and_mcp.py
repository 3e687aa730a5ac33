"""13 — ``Bash`` and an MCP server (stdio), interrupted while a subprocess runs.

The agent has two kinds of real tools: the built-in ``Bash`` (each command in its own process
group) and the tools of a small MCP server, which ``MCPClient`` starts as a subprocess.  The
model notes something through the MCP server, then starts a long job with ``Bash``; the job
starts a helper process of its own (a grandchild).  While both run, we call
``agent.interrupt()``:

* the reply ends with exactly one ``REPLY_END(interrupted)``; the ``Bash`` call gets an
  *interrupted* result, so every tool call has exactly one result;
* the job and its grandchild are gone (the whole process group was terminated);
* the MCP server is still alive and the next reply uses it;
* leaving ``async with client:`` terminates the server: no orphaned process.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import textwrap
from pathlib import Path

import trio
from _common import check, open_model, require_extra, round_trips, unpaired_tool_calls

from trioagent import Toolkit, UserMsg
from trioagent.agent import Agent
from trioagent.event import ReplyEndEvent
from trioagent.message import ToolResultBlock
from trioagent.permission import PermissionRule
from trioagent.testing import ScriptedReply, ScriptedToolCall
from trioagent.tool import Bash

require_extra("trioagent.mcp", "mcp")  # the MCP SDK

from trioagent.mcp import MCPClient, StdioMCPConfig  # noqa: E402

NOTES_SERVER = textwrap.dedent(
    '''
    import os, sys
    from pathlib import Path
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    Path(sys.argv[1]).write_text(str(os.getpid()))
    server = MCPServer("notes")
    notes = []

    @server.tool()
    def add_note(text: str) -> str:
        """Keep a note."""
        notes.append(text)
        return f"noted ({len(notes)})"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def list_notes() -> str:
        """The notes kept so far."""
        return "; ".join(notes) or "(none)"

    server.run("stdio")
    '''
)

# The long job: starts a grandchild, writes both process ids, then works "for ten minutes".
JOB = textwrap.dedent(
    """
    import os, subprocess, sys, time
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(sys.argv[1], "w") as f:
        f.write(f"{os.getpid()} {helper.pid}")
    time.sleep(600)
    """
)


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie left for its parent to reap counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


async def gone(pid: int, seconds: float) -> bool:
    """Wait (bounded) until process ``pid`` no longer runs."""
    with trio.move_on_after(seconds):
        while alive(pid):  # noqa: ASYNC110 - another process: there is no event to wait on
            await trio.sleep(0.05)
    return not alive(pid)


async def wait_for_file(path: Path, seconds: float) -> bool:
    """Wait (bounded) until another process has written ``path``."""
    file = trio.Path(path)
    with trio.move_on_after(seconds):
        while not (await file.exists() and (await file.read_text()).strip()):  # noqa: ASYNC110
            await trio.sleep(0.05)
        return True
    return False


async def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="trioagent-example-13-"))
    (work / "notes_server.py").write_text(NOTES_SERVER)
    (work / "job.py").write_text(JOB)
    server_pid_file, job_pid_file = work / "server.pid", work / "job.pid"
    command = f"{sys.executable} {work / 'job.py'} {job_pid_file}"

    config = StdioMCPConfig(
        command=sys.executable, args=[str(work / "notes_server.py"), str(server_pid_file)]
    )
    async with trio.open_nursery() as nursery:
        model, server = await open_model(
            nursery,
            [
                ScriptedReply(
                    tool_calls=[
                        ScriptedToolCall(
                            "mcp__notes__add_note", '{"text": "started the nightly job"}'
                        )
                    ]
                ),
                ScriptedReply(
                    tool_calls=[ScriptedToolCall("Bash", json.dumps({"command": command}))]
                ),
                ScriptedReply(tool_calls=[ScriptedToolCall("mcp__notes__list_notes", "{}")]),
                ScriptedReply(text="The job was stopped; your note is still there."),
            ],
        )
        async with model, MCPClient("notes", config) as notes:
            await wait_for_file(server_pid_file, 10)
            server_pid = int(server_pid_file.read_text())
            toolkit = Toolkit([Bash(cwd=work)], mcps=[notes])
            agent = Agent("assistant", "You run jobs and keep notes.", model, toolkit)
            # The user allows these two tools up front (both would otherwise ask first).
            agent.state.permission_context.allow_rules.update(
                {
                    name: [PermissionRule(tool_name=name, behavior="allow", source="user")]
                    for name in ("Bash", "mcp__notes__add_note")
                }
            )

            events: list[object] = []

            async def record(event: object) -> None:
                events.append(event)

            async with trio.open_nursery() as inner:

                async def interrupt_when_the_job_runs() -> None:
                    await wait_for_file(job_pid_file, 20)
                    agent.interrupt()

                inner.start_soon(interrupt_when_the_job_runs)
                first = await agent.reply(
                    UserMsg("user", "Note that the nightly job started, then run it."),
                    on_event=record,
                )
            ends = [e for e in events if isinstance(e, ReplyEndEvent)]
            check(len(ends) == 1 and events[-1] is ends[0], "exactly one REPLY_END, and it is last")
            check(first.finished_reason == "interrupted", "the reply ended INTERRUPTED")
            check(unpaired_tool_calls(agent) == [], "every tool call has exactly one result")
            if server is not None:
                (bash_result,) = [
                    block
                    for msg in agent.state.context
                    for block in msg.content
                    if isinstance(block, ToolResultBlock) and block.name == "Bash"
                ]
                check(bash_result.state == "interrupted", "the Bash call's result is interrupted")
            if job_pid_file.exists():
                job_pid, helper_pid = map(int, job_pid_file.read_text().split())
                check(not alive(job_pid), f"the job (pid {job_pid}) is gone")
                check(not alive(helper_pid), f"the job's own child (pid {helper_pid}) is gone")
            check(alive(server_pid), "the MCP server still runs")

            second = await agent.reply(UserMsg("user", "What did I note?"))
            print("agent:", second.get_text_content())
            check(second.finished_reason == "completed", "the next reply completes")
            if server is not None:
                sent = json.dumps(server.requests[-1].body.get("messages"))
                check("started the nightly job" in sent, "the next reply read the note over MCP")
            check(unpaired_tool_calls(agent) == [], "still every call has exactly one result")
            check(round_trips(agent), "the state round-trips through JSON")
        check(await gone(server_pid, 5), "leaving `async with` terminated the MCP server")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

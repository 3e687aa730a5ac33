"""17 — one agent served over MCP (stdio), used as a tool by another, interrupted mid-call.

``trioagent.mcp.serve`` serves the *researcher* agent (``_served_helper.py``, a process of its
own) as one MCP tool that runs a reply; its text streams back as progress notifications.  The
*assistant* agent calls that tool through an ``MCPClient``.  While the researcher is still
answering, we call ``assistant.interrupt()``:

* the assistant's reply ends with exactly one ``REPLY_END(interrupted)``, its call of the
  researcher gets an *interrupted* result, every tool call has exactly one result;
* the client's cancellation notice reaches the served side: the researcher's reply ends once,
  INTERRUPTED, and its rules hold (checked there, written to a journal);
* the served researcher is still usable: the next reply asks it again and completes.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import trio
from _common import check, open_model, require_extra, round_trips, unpaired_tool_calls

from trioagent import Toolkit, UserMsg
from trioagent.agent import Agent
from trioagent.event import CustomEvent, ReplyEndEvent
from trioagent.message import ToolResultBlock
from trioagent.permission import PermissionRule
from trioagent.testing import ScriptedReply, ScriptedToolCall

require_extra("trioagent.mcp", "mcp")  # the MCP SDK

from trioagent.mcp import MCPClient, StdioMCPConfig  # noqa: E402

HELPER = Path(__file__).resolve().parent / "_served_helper.py"
TOOL = "mcp__research__researcher"


async def journal_lines(path: Path, count: int, seconds: float) -> list[str]:
    """The served side's journal, once it has ``count`` lines (bounded wait)."""
    file = trio.Path(path)
    with trio.move_on_after(seconds):
        while not (await file.exists() and len((await file.read_text()).splitlines()) >= count):  # noqa: ASYNC110 - another process writes it
            await trio.sleep(0.05)
    return (await file.read_text()).splitlines() if await file.exists() else []


async def main() -> None:
    journal = Path(tempfile.mkdtemp(prefix="trioagent-example-17-")) / "served.journal"
    config = StdioMCPConfig(command=sys.executable, args=[str(HELPER), str(journal)])
    question = json.dumps({"message": "What do we know about the topic?"})
    async with trio.open_nursery() as nursery:
        model, server = await open_model(
            nursery,
            [
                ScriptedReply(tool_calls=[ScriptedToolCall(TOOL, question)]),
                ScriptedReply(tool_calls=[ScriptedToolCall(TOOL, question)]),
                ScriptedReply(text="The researcher found alpha, beta and gamma."),
            ],
        )
        async with model, MCPClient("research", config, stream_progress=True) as research:
            agent = Agent("assistant", "You ask the researcher.", model, Toolkit(mcps=[research]))
            # The user allows the researcher up front (an MCP tool would otherwise ask first).
            agent.state.permission_context.allow_rules[TOOL] = [
                PermissionRule(tool_name=TOOL, behavior="allow", source="user")
            ]
            events: list[object] = []
            streamed: list[str] = []

            async def record(event: object) -> None:
                events.append(event)
                if isinstance(event, CustomEvent) and event.name == "mcp_progress":
                    streamed.append(str(event.value.get("message")))
                    if len(streamed) == 3:
                        agent.interrupt()  # mid-call: the researcher is still answering

            first = await agent.reply(UserMsg("user", "Ask the researcher."), on_event=record)
            ends = [e for e in events if isinstance(e, ReplyEndEvent)]
            check(len(ends) == 1 and events[-1] is ends[0], "exactly one REPLY_END, and it is last")
            check(first.finished_reason == "interrupted", "the assistant's reply ended INTERRUPTED")
            check(len(streamed) >= 3, "the researcher's text streamed as progress")
            (call_result,) = [
                block
                for msg in agent.state.context
                for block in msg.content
                if isinstance(block, ToolResultBlock) and block.name == TOOL
            ]
            check(call_result.state == "interrupted", "the call of the researcher is interrupted")
            check(unpaired_tool_calls(agent) == [], "every tool call has exactly one result")
            (served,) = await journal_lines(journal, 1, 20)
            check(
                served == "1 interrupted ok", f"the served reply ended once, INTERRUPTED ({served})"
            )

            second = await agent.reply(UserMsg("user", "Please ask again."))
            print("assistant:", second.get_text_content())
            check(second.finished_reason == "completed", "the next reply completes")
            lines = await journal_lines(journal, 2, 20)
            check(lines[1:] == ["1 completed ok"], "the served researcher answered the next call")
            if server is not None:
                sent = json.dumps(server.requests[-1].body.get("messages"))
                check("alpha, beta, gamma" in sent, "the researcher's answer reached the assistant")
            check(round_trips(agent), "the state round-trips through JSON")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

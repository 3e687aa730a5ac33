"""12 — Interrupt, save the state to JSON, reload it into a new Agent, and continue.

The point of "a consistent, resumable context": after an interruption
the agent's state is an ordinary value you can persist — a database row, a file, a message to
another process — and a brand-new agent built from it continues the conversation.

Here the reply is interrupted while a tool runs.  The state (context, the interrupted tool
result, permission settings, middleware storage, ...) is written to a JSON file with
``trioagent.serialization.dumps``; a new ``Agent`` on a new model object loads it with
``loads(..., AgentState)`` and replies.  The provider request of the new agent carries the
whole conversation, including the call and its interrupted result, and no orphaned id.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import trio
from _common import check, open_model, orphaned_ids, unpaired_tool_calls

from trioagent import Toolkit, UserMsg
from trioagent.agent import Agent, AgentState
from trioagent.event import ToolResultStartEvent
from trioagent.message import ToolResultBlock
from trioagent.permission import PermissionDecision
from trioagent.serialization import dumps, loads
from trioagent.testing import ScriptedReply, ScriptedToolCall


async def search_flights(origin: str, destination: str) -> str:
    """Search flights between two airports (slow).

    Args:
        origin: IATA code of the departure airport.
        destination: IATA code of the arrival airport.
    """
    await trio.sleep(30)
    return f"{origin}->{destination}: 3 flights"


def make_toolkit() -> Toolkit:
    toolkit = Toolkit()
    toolkit.register_function(
        search_flights, permission=PermissionDecision(behavior="allow", message="read-only")
    )
    return toolkit


async def main() -> None:
    call = ScriptedToolCall(
        "search_flights", '{"origin": "CDG", "destination": "NRT"}', id="call_fl"
    )
    async with trio.open_nursery() as nursery:
        model, server = await open_model(
            nursery,
            [
                ScriptedReply(text="Let me search for flights.", tool_calls=[call]),
                ScriptedReply(text="The search was interrupted; shall I try again for CDG to NRT?"),
            ],
        )
        tmp = tempfile.TemporaryDirectory()
        path = Path(tmp.name) / "agent-state.json"

        # -- the first process: interrupted while the tool runs, state saved -----------------
        async with model:
            agent = Agent("travel", "You book trips.", model, make_toolkit())
            async with agent.stream(
                UserMsg("user", "Find me a flight from Paris to Tokyo.")
            ) as reply:
                async for event in reply:
                    if isinstance(event, ToolResultStartEvent):
                        agent.interrupt()  # the user closed the tab while the search ran
            check(
                reply.msg is not None and reply.msg.finished_reason == "interrupted", "interrupted"
            )
            check(unpaired_tool_calls(agent) == [], "every tool call has exactly one result")
            path.write_text(dumps(agent.state))
            reply_id = agent.state.reply_id
        del agent, model  # nothing of the first agent survives but the file

        saved = json.loads(path.read_text())
        print(f"saved {path.stat().st_size} bytes, {len(saved['context'])} messages")

        # -- the second process: a new model and a new agent from the file --------------------
        model2, _ = await open_model(nursery, [])
        if server is not None:
            model2 = server.chat_model("trioagent-test")  # same script, new client
        async with model2:
            state = loads(path.read_text(), AgentState)
            restored = Agent("travel", "You book trips.", model2, make_toolkit(), state=state)
            check(dumps(restored.state) == path.read_text(), "the reloaded state is identical")
            result = next(
                b
                for m in restored.state.context
                for b in m.content
                if isinstance(b, ToolResultBlock)
            )
            check(result.state == "interrupted", "the interrupted tool result was saved")
            answer = await restored.reply(UserMsg("user", "Did you find anything?"))
            print("agent:", answer.get_text_content())
            check(answer.finished_reason == "completed", "the restored agent continues")
            check(answer.id != reply_id, "... with a new reply")
            if server is not None:
                body = server.requests[-1].body
                check(orphaned_ids(body) == [], "no orphaned tool-call id sent")
                check(
                    "Let me search for flights." in json.dumps(body["messages"]),
                    "the new request carries the earlier conversation",
                )
        tmp.cleanup()
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

"""03 — Cancel while three tool calls run in parallel: every call still gets exactly one result.

The model asks for three concurrency-safe tool calls in one round.  They run as sibling tasks
in the reply's acting nursery.  One is fast and finishes; the other two would take half a
minute.  As soon as the fast result streams out, the consumer calls ``agent.interrupt()``.

Trio cancels the two sleeping tools at their next checkpoint (their ``finally`` blocks run
before ``reply`` returns: no orphaned task), and the agent writes an *interrupted* result for
each of them.  The context therefore has one result per call id, and the next provider
request is valid — no "tool_calls must be followed by tool messages" HTTP 400, which is the
most common way an agent's conversation gets stuck after a cancel in other frameworks.
"""

from __future__ import annotations

import json

import trio
from _common import check, open_model, orphaned_ids, round_trips, unpaired_tool_calls

from trioagent import Toolkit, UserMsg
from trioagent.agent import Agent
from trioagent.event import ReplyEndEvent, ToolResultEndEvent
from trioagent.message import ToolResultBlock
from trioagent.permission import PermissionDecision
from trioagent.testing import ScriptedReply, ScriptedToolCall

CITIES = {"Paris": 0.0, "Tokyo": 30.0, "Lima": 30.0}  # seconds each lookup takes
finished: list[str] = []
cancelled: list[str] = []


async def get_weather(city: str) -> str:
    """Look up the current weather of a city.

    Args:
        city: the city name.
    """
    try:
        await trio.sleep(CITIES.get(city, 0.0))
        finished.append(city)
        return f"{city}: 21°C, clear"
    except trio.Cancelled:
        cancelled.append(city)  # we observe the cancellation, and never swallow it
        raise


async def main() -> None:
    toolkit = Toolkit()
    # Allowed without asking (function tools ask the user by default; see example 04).
    toolkit.register_function(
        get_weather, permission=PermissionDecision(behavior="allow", message="read-only lookup")
    )
    calls = [
        ScriptedToolCall("get_weather", json.dumps({"city": c}), id=f"call_{c.lower()}")
        for c in CITIES
    ]
    async with trio.open_nursery() as nursery:
        model, server = await open_model(
            nursery,
            [
                ScriptedReply(tool_calls=calls),
                ScriptedReply(text="Paris is sunny; I did not get Tokyo and Lima."),
            ],
        )
        async with model:
            agent = Agent(
                "assistant", "Call get_weather once per city, in parallel.", model, toolkit
            )
            events = []
            with trio.fail_after(10):  # a safety net for the example, not part of the scenario
                async with agent.stream(UserMsg("user", "Weather in Paris, Tokyo, Lima?")) as reply:
                    async for event in reply:
                        events.append(event)
                        if isinstance(event, ToolResultEndEvent) and event.state == "success":
                            print(f"first result in ({event.tool_call_id}): interrupting")
                            agent.interrupt()

            ends = [e for e in events if isinstance(e, ReplyEndEvent)]
            check(len(ends) == 1 and events[-1] is ends[0], "exactly one REPLY_END, and it is last")
            check(ends[0].finished_reason == "interrupted", "the reply ended INTERRUPTED")
            results = {
                b.id: b
                for m in agent.state.context
                for b in m.content
                if isinstance(b, ToolResultBlock)
            }
            for call_id, result in results.items():
                print(f"  {call_id}: {result.state}")
            check(unpaired_tool_calls(agent) == [], "every tool call has exactly one result")
            if server is not None:
                check(finished == ["Paris"], "the fast call finished")
                check(sorted(cancelled) == ["Lima", "Tokyo"], "both slow calls saw the cancel")
                check(results["call_paris"].state == "success", "its result is kept as a success")
                check(
                    results["call_tokyo"].state == results["call_lima"].state == "interrupted",
                    "the slow calls got INTERRUPTED results",
                )
            check(round_trips(agent), "the state round-trips through JSON")

            answer = await agent.reply(UserMsg("user", "What did you get?"))
            check(answer.finished_reason == "completed", "the next reply completes")
            if server is not None:
                check(orphaned_ids(server.requests[-1].body) == [], "no orphaned tool-call id sent")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

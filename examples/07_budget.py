"""07 — A token budget ends a tool loop: ``ReplyBudgetControlMiddleware``.

The model here is a compulsive researcher: every answer is one more ``search`` call.  Left
alone it would run until ``max_iters``.  ``ReplyBudgetControlMiddleware(token_budget=1200)``
adds up the weighted token usage of the reply's model calls (from each
``MODEL_CALL_END`` event); once the budget is spent, the next reasoning step gets a "wrap up
now" hint and ``tool_choice="none"``, so the model has to answer in text and the loop ends
with a normal ``REPLY_END(completed)``.

The spent budget lives in ``agent.state.middle_context`` (middlewares are stateless), so it is
saved with the state and survives an interruption.  Part 2 interrupts a second research
reply while its tool runs: one ``REPLY_END(interrupted)``, the cost of the calls made so far
is recorded, and every call has its result.
"""

from __future__ import annotations

import json

import trio
from _common import check, open_model, round_trips, unpaired_tool_calls

from trioagent import Toolkit, UserMsg
from trioagent.agent import Agent
from trioagent.event import AgentEvent, ReplyEndEvent, ToolResultStartEvent
from trioagent.middleware import ReplyBudgetControlMiddleware
from trioagent.permission import PermissionDecision
from trioagent.testing import RecordedRequest, ScriptedReply, ScriptedToolCall

USAGE = {"prompt_tokens": 400, "completion_tokens": 100, "total_tokens": 500}
searches: list[str] = []


async def search(query: str, page: int) -> str:
    """Search the web.

    Args:
        query: what to look for.
        page: the result page.
    """
    searches.append(f"{query}#{page}")
    if query == "slow":
        await trio.sleep(30)
    return f"page {page} of results for {query!r}"


def researcher(request: RecordedRequest) -> ScriptedReply:
    """Calls ``search`` forever — unless tools are switched off (``tool_choice: none``)."""
    body = request.body
    if body.get("tool_choice") == "none":
        return ScriptedReply(text="Budget reached; here is what I found so far.", usage=USAGE)
    page = sum(m.get("role") == "tool" for m in body["messages"]) + 1
    query = "slow" if "slowly" in json.dumps(body["messages"]) else "trio"
    arguments = json.dumps({"query": query, "page": page})
    return ScriptedReply(tool_calls=[ScriptedToolCall("search", arguments)], usage=USAGE)


async def main() -> None:
    toolkit = Toolkit()
    toolkit.register_function(search, permission=PermissionDecision(behavior="allow", message="ok"))
    budget = ReplyBudgetControlMiddleware(token_budget=1200)
    async with trio.open_nursery() as nursery:
        model, server = await open_model(nursery, [researcher] * 10)
        async with model:
            agent = Agent(
                "researcher", "Research thoroughly.", model, toolkit, middlewares=[budget]
            )

            # -- part 1: the budget ends the loop ------------------------------------------
            answer = await agent.reply(UserMsg("user", "Find everything about Trio."))
            print("agent:", answer.get_text_content())
            print("searches:", searches)
            check(answer.finished_reason == "completed", "the reply completed normally")
            spent = await budget.used(agent)
            print(f"spent {spent} of {budget.token_budget}")
            check(spent >= budget.token_budget, "the recorded cost reached the budget")
            if server is not None:
                check(len(searches) == 3, "3 calls x 500 tokens: the loop stopped at the budget")
                last = server.requests[-1].body
                check(
                    last.get("tool_choice") == "none", "the last model call had tools switched off"
                )
                check("token budget" in json.dumps(last["messages"]), "... and the wrap-up hint")
            check(unpaired_tool_calls(agent) == [], "every tool call has exactly one result")

            # -- part 2: interrupted mid-loop, the budget's bookkeeping is intact ----------
            events: list[AgentEvent] = []
            async with agent.stream(UserMsg("user", "Now research slowly.")) as reply:
                async for event in reply:
                    events.append(event)
                    if isinstance(event, ToolResultStartEvent):
                        agent.interrupt()
            ends = [e for e in events if isinstance(e, ReplyEndEvent)]
            check(len(ends) == 1 and events[-1] is ends[0], "exactly one REPLY_END, and it is last")
            check(ends[0].finished_reason == "interrupted", "the reply ended INTERRUPTED")
            bucket = agent.state.middle_context["ReplyBudgetControlMiddleware"]
            print("budget bookkeeping:", bucket)
            check(bucket == {ends[0].reply_id: 500}, "the interrupted reply's cost is recorded")
            check(unpaired_tool_calls(agent) == [], "every tool call has exactly one result")
            check(round_trips(agent), "the state round-trips through JSON")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

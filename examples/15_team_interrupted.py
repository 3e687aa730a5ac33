"""15 — A team leader fans out to three members and is interrupted mid-fan-out.

``TeamPipeline`` gives the leader a ``TeamAssign`` tool.  The leader assigns one task to each
of three members; the pipeline runs them concurrently in a nursery owned by the round, and
their events reach our ``on_event`` tagged with the member's name.  As soon as all three are
streaming, we call ``team.interrupt()``.

The round's nursery is cancelled: each member does its own cleanup and ends with exactly one
``REPLY_END(interrupted)``; then the leader, parked on the three assignments, is aborted: each
assignment gets an interrupted result and the leader ends last, once.  No member task outlives
the round, the leader's context pairs every call with one result, and the next reply works.
"""

from __future__ import annotations

import json

import trio
from _common import (
    check,
    human_text,
    open_model,
    orphaned_ids,
    round_trips,
    unpaired_tool_calls,
    wait_closed,
)

from trioagent import UserMsg
from trioagent.agent import Agent
from trioagent.event import AgentEvent, ReplyEndEvent, TextBlockDeltaEvent, agent_path
from trioagent.pipeline import TeamMember, TeamPipeline
from trioagent.testing import RecordedRequest, ScriptedReply, ScriptedToolCall

MEMBERS = {"ann": "counts things", "ben": "sorts things", "cy": "sums things"}


def respond(request: RecordedRequest) -> ScriptedReply:
    """The server's answer, by who is asking (the system prompt names the agent)."""
    messages = request.body.get("messages", [])
    system = json.dumps(messages[0]) if messages else ""  # content may be a list of parts
    if "You lead the team" in system:
        if human_text(request) == "One line: where are we?":
            return ScriptedReply(text="Nothing finished; the team was stopped.")
        return ScriptedReply(
            tool_calls=[
                ScriptedToolCall(
                    "TeamAssign", json.dumps({"member": name, "prompt": f"please {name}"})
                )
                for name in MEMBERS
            ]
        )
    # A member: a long answer, streamed slowly.
    return ScriptedReply(text="Working through the items one by one. " * 40, chunk_delay=0.02)


async def main() -> None:
    async with trio.open_nursery() as server_nursery:
        model, server = await open_model(server_nursery, [respond] * 5)
        async with model:
            leader = Agent("lead", "You lead the team: assign the work with TeamAssign.", model)
            members = [
                TeamMember(Agent(name, f"You are {name}; you {what}.", model), what)
                for name, what in MEMBERS.items()
            ]
            team = TeamPipeline(leader, members)
            seen: list[AgentEvent] = []
            streaming: set[str] = set()

            async def on_event(event: AgentEvent) -> None:
                seen.append(event)
                path = agent_path(event)
                if isinstance(event, TextBlockDeltaEvent) and path[0] in MEMBERS:
                    streaming.add(path[0])
                    if streaming == set(MEMBERS):
                        team.interrupt()  # all three are mid-answer: stop the team

            with trio.fail_after(20):  # a safety net for the example, not part of the scenario
                msg = await team.reply(
                    UserMsg("user", "Split the inventory work."), on_event=on_event
                )

            ends = {
                n: [e for e in seen if isinstance(e, ReplyEndEvent) and agent_path(e) == (n,)]
                for n in ["lead", *MEMBERS]
            }
            for name, mine in ends.items():
                print(f"  {name:<5} ended {[str(e.finished_reason) for e in mine]}")
            check(msg.finished_reason == "interrupted", "reply() returned the interrupted Msg")
            check(streaming == set(MEMBERS), "the three members were streaming at the same time")
            check(
                all(
                    len(ends[n]) == 1 and ends[n][0].finished_reason == "interrupted"
                    for n in MEMBERS
                ),
                "every member ended exactly once, INTERRUPTED",
            )
            check(
                len(ends["lead"]) == 1 and seen[-1] is ends["lead"][0],
                "the leader ended once, INTERRUPTED, after every member",
            )
            check(
                not any(m.agent.is_replying for m in members), "no member task outlived the round"
            )
            check(unpaired_tool_calls(leader) == [], "every TeamAssign call has exactly one result")
            check(
                all(round_trips(a) for a in team.participants),
                "every state round-trips through JSON",
            )

            answer = await team.reply(UserMsg("user", "One line: where are we?"))
            check(answer.finished_reason == "completed", "the next reply completes")
            if server is not None:
                body = server.requests[-1].body
                check(orphaned_ids(body) == [], "the next request leaves no tool call unanswered")
            print("answer:", answer.get_text_content())
        check(await wait_closed(server), "no connection left open after the model closed")
        server_nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

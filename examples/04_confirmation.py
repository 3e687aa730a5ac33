"""04 — Waiting for a human's confirmation, giving up, and carrying on.

The model wants to run ``delete_branch``, a tool that needs the user's permission (function
tools ask by default).  The reply *parks*: it emits ``RequireUserConfirmEvent`` and returns a
"waiting" Msg, without an end event (a parked reply ends when it resumes).  The call is saved
in state ``asking``; nothing runs and no task is left behind while we wait.

The application then waits for the human — with a deadline, because humans walk away.  When
the deadline passes, the app aborts the parked reply with ``UserInterruptEvent``: the reply
ends with exactly one ``REPLY_END(interrupted)``, the asked call gets an *interrupted* result
(the tool never ran), and the conversation goes on with a new message whose provider request
is valid.  While parked, the agent refuses a plain new message (answer or abort first), so the
context can never hold a question nobody answered.
"""

from __future__ import annotations

import json

import trio
from _common import check, open_model, orphaned_ids, round_trips, unpaired_tool_calls

from trioagent import Toolkit, UserMsg
from trioagent.agent import Agent
from trioagent.event import (
    AgentEvent,
    ConfirmResult,
    ReplyEndEvent,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from trioagent.message import ToolResultBlock
from trioagent.testing import ScriptedReply, ScriptedToolCall

deleted: list[str] = []


async def delete_branch(name: str) -> str:
    """Delete a git branch.

    Args:
        name: the branch to delete.
    """
    deleted.append(name)
    return f"deleted {name}"


async def slow_human(
    question: RequireUserConfirmEvent, answers: trio.MemorySendChannel[UserConfirmResultEvent]
) -> None:
    """A human who takes a coffee break before answering."""
    await trio.sleep(60)
    call = question.tool_calls[0]
    await answers.send(UserConfirmResultEvent(confirm_results=[ConfirmResult(True, call)]))


async def main() -> None:
    toolkit = Toolkit()
    toolkit.register_function(delete_branch)  # no permission given: the user is asked
    call = ScriptedToolCall("delete_branch", json.dumps({"name": "old-ui"}), id="call_delete")
    async with trio.open_nursery() as nursery:
        model, server = await open_model(
            nursery,
            [
                ScriptedReply(tool_calls=[call]),
                ScriptedReply(text="Fine, I kept old-ui. Your open branches are: main, old-ui."),
            ],
        )
        async with model:
            agent = Agent("assistant", "You manage git branches.", model, toolkit)
            events: list[AgentEvent] = []

            async def record(event: AgentEvent) -> None:
                events.append(event)

            waiting = await agent.reply(
                UserMsg("user", "Delete the old-ui branch."), on_event=record
            )
            questions = [e for e in events if isinstance(e, RequireUserConfirmEvent)]
            print("agent:", waiting.get_text_content())
            check(len(questions) == 1, "the reply parked on RequireUserConfirmEvent")
            check(
                not any(isinstance(e, ReplyEndEvent) for e in events), "no end event while parked"
            )
            check(not agent.is_replying, "nothing runs while the reply is parked")
            check(round_trips(agent), "the parked state round-trips through JSON")
            try:
                await agent.reply(UserMsg("user", "Never mind, what branches do I have?"))
                refused = False
            except ValueError as exc:
                refused = True
                print("a new message while parked:", exc)
            check(refused, "a parked reply refuses a new message until answered or aborted")

            # Ask the human, but only wait 0.3 s: the wait is an ordinary cancellable await.
            send, receive = trio.open_memory_channel[UserConfirmResultEvent](1)
            async with trio.open_nursery() as human:
                human.start_soon(slow_human, questions[0], send)
                answer = None
                with trio.move_on_after(0.3):
                    answer = await receive.receive()
                human.cancel_scope.cancel()  # stop waiting for them
            check(answer is None, "the human did not answer in time")

            events.clear()
            aborted = await agent.reply(
                UserInterruptEvent(reply_id=questions[0].reply_id), on_event=record
            )
            ends = [e for e in events if isinstance(e, ReplyEndEvent)]
            check(len(ends) == 1 and events[-1] is ends[0], "exactly one REPLY_END, and it is last")
            check(ends[0].finished_reason == "interrupted", "the aborted reply ended INTERRUPTED")
            check(aborted.finished_reason == "interrupted", "reply() returned the interrupted Msg")
            check(deleted == [], "the tool never ran")
            result = next(
                b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock)
            )
            check(result.state == "interrupted", "the asked call got an INTERRUPTED result")
            check(unpaired_tool_calls(agent) == [], "every tool call has exactly one result")

            reply = await agent.reply(UserMsg("user", "Never mind, what branches do I have?"))
            print("agent:", reply.get_text_content())
            check(reply.finished_reason == "completed", "the conversation continues")
            if server is not None:
                check(orphaned_ids(server.requests[-1].body) == [], "no orphaned tool-call id sent")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

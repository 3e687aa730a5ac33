"""16 — A goal loop cut by a deadline between the executor and the verifier.

``GoalPipeline`` runs an executor until it files a structured execution report, then a
verifier that judges the report against the goal.  Here the executor reports quickly, the
verifier takes its time, and the caller's ``trio.move_on_after`` fires while the verifier is
still writing.

This is an outer cancellation: the verifier does its cleanup and ends with exactly one
``REPLY_END(interrupted)``, after the executor's one ``REPLY_END(completed)``, and then
``trio.Cancelled`` propagates to the deadline's scope (never swallowed).  The report the
executor filed is kept in the loop's progress (in the executor's state, so it survives a
save), both contexts stay consistent, and the next goal runs on the same pipeline.
"""

from __future__ import annotations

import json

import trio
from _common import check, open_model, round_trips, unpaired_tool_calls, wait_closed

from trioagent import UserMsg
from trioagent.agent import Agent
from trioagent.event import AgentEvent, ReplyEndEvent, agent_path
from trioagent.pipeline import GoalPipeline
from trioagent.testing import RecordedRequest, ScriptedReply, ScriptedToolCall

REPORT = "poem.txt holds four lines; read it with `cat poem.txt`."


def respond(request: RecordedRequest) -> ScriptedReply:
    """The server's answer, by who is asking (the system prompt names the agent)."""
    system = json.dumps(request.body.get("messages", [{}])[0])
    if "You do the work" in system:
        return ScriptedReply(
            tool_calls=[
                ScriptedToolCall("GenerateStructuredOutput", json.dumps({"report": REPORT}))
            ]
        )
    if "short" in json.dumps(request.body.get("messages", [])):
        return ScriptedReply(
            tool_calls=[
                ScriptedToolCall(
                    "GenerateStructuredOutput", json.dumps({"result": "pass", "message": ""})
                )
            ]
        )
    # The verifier, the first time: a long, slow review.
    return ScriptedReply(
        text="Checking every line against the goal carefully. " * 60, chunk_delay=0.02
    )


async def main() -> None:
    async with trio.open_nursery() as server_nursery:
        model, server = await open_model(server_nursery, [respond] * 4)
        async with model:
            executor = Agent("maker", "You do the work and report it.", model)
            verifier = Agent("judge", "You check the work against the goal.", model)
            goal = GoalPipeline(executor, verifier)
            seen: list[AgentEvent] = []

            async def on_event(event: AgentEvent) -> None:
                seen.append(event)

            returned = False
            with trio.move_on_after(1.0) as deadline:
                await goal.reply(UserMsg("user", "Write poem.txt, four lines."), on_event=on_event)
                returned = True  # never reached: the cancellation propagates

            ends = [
                (agent_path(e)[0], str(e.finished_reason))
                for e in seen
                if isinstance(e, ReplyEndEvent)
            ]
            print("  ends:", ends)
            check(
                deadline.cancelled_caught and not returned, "the deadline's cancellation propagated"
            )
            check(
                ends == [("maker", "completed"), ("judge", "interrupted")],
                "the executor ended completed, then the verifier once, INTERRUPTED",
            )
            check(isinstance(seen[-1], ReplyEndEvent), "the verifier's end is the last event")
            if server is not None:  # a real model writes its own report
                check(goal.progress.report == REPORT, "the report is kept in the progress")
            check(
                all(unpaired_tool_calls(a) == [] and round_trips(a) for a in goal.participants),
                "both contexts are consistent and round-trip through JSON",
            )
            check(not goal.is_replying, "the pipeline is idle again")

            verdict = await goal.reply(UserMsg("user", "Write poem.txt, four short lines."))
            check(
                verdict.structured_output == {"result": "pass", "message": ""},
                "the next goal passes",
            )
        check(await wait_closed(server), "no connection left open after the model closed")
        server_nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

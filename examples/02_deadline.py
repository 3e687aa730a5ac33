"""02 — A deadline around a reply: ``trio.move_on_after`` cancels it from the outside.

The reply is not interrupted by the agent here: the *caller* gives it one second with
``trio.move_on_after``.  This is an outer cancellation: the agent does
the same cleanup as for ``agent.interrupt()`` — closes the streamed text block, keeps the
partial answer, emits exactly one ``REPLY_END(interrupted)`` — inside a short shielded grace
period, and then lets ``trio.Cancelled`` propagate, so ``move_on_after`` sees it
(``cancelled_caught``).  Cancellation is never swallowed.

Because a consumer reading a channel is cancelled too, the witness is an ``on_event``
callback: it runs in the reply's own task and still receives the INTERRUPTED end.
"""

from __future__ import annotations

import trio
from _common import check, open_model, round_trips, wait_closed

from trioagent import UserMsg
from trioagent.agent import Agent
from trioagent.event import AgentEvent, ReplyEndEvent, TextBlockDeltaEvent
from trioagent.testing import ScriptedReply

ESSAY = "Deadlines in Trio are cancel scopes: they nest, and the innermost wins. " * 60


async def main() -> None:
    async with trio.open_nursery() as nursery:
        model, server = await open_model(
            nursery,
            [
                # ~0.01 s per SSE event: the whole essay would take several seconds.
                ScriptedReply(text=ESSAY, chunk_size=8, chunk_delay=0.01),
                ScriptedReply(text="In short: a deadline is a cancel scope."),
            ],
        )
        async with model:
            agent = Agent("assistant", "You write long essays.", model)
            seen: list[AgentEvent] = []

            async def on_event(event: AgentEvent) -> None:
                seen.append(event)

            reply_returned = False
            with trio.move_on_after(1.0) as deadline:
                await agent.reply(
                    UserMsg("user", "Write a 2000-word essay on deadlines in Trio."),
                    on_event=on_event,
                )
                reply_returned = True  # never reached: the cancellation propagates

            check(
                deadline.cancelled_caught, "the deadline's cancellation propagated out of reply()"
            )
            check(not reply_returned, "reply() did not swallow the cancellation")
            ends = [e for e in seen if isinstance(e, ReplyEndEvent)]
            check(
                len(ends) == 1 and seen[-1] is ends[0], "on_event saw exactly one REPLY_END, last"
            )
            check(ends[0].finished_reason == "interrupted", "the reply ended INTERRUPTED")
            streamed = "".join(e.delta for e in seen if isinstance(e, TextBlockDeltaEvent))
            print(f"streamed before the deadline: {len(streamed)} characters")
            kept = agent.state.context[-1].get_text_content() or ""
            check(len(kept) > 0 and streamed.startswith(kept[:20]), "the partial answer is kept")
            check(round_trips(agent), "the state round-trips through JSON")
            check(not agent.is_replying, "the agent is idle again")
            if server is not None:
                with trio.move_on_after(2):
                    await server.connections[0].closed.wait()
                check(server.connections[0].closed.is_set(), "the cut stream's connection closed")

            # The next reply (no deadline this time) works on the same agent.
            answer = await agent.reply(UserMsg("user", "Now in one sentence."))
            check(answer.finished_reason == "completed", "the next reply completes")
            print("answer:", answer.get_text_content())
        check(await wait_closed(server), "no connection left open after the model closed")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

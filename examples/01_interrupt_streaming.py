"""01 — Interrupt a streaming reply with ``agent.interrupt()``.

The model streams a long answer over real SSE from the embedded server.  After a few tokens we
call ``agent.interrupt()`` from the consuming task.  The reply still ends with exactly one
``REPLY_END(interrupted)``, the partial answer is kept in the context, the HTTP connection is
closed, and the next reply works.
"""

from __future__ import annotations

import trio
from _common import check, open_model

from trioagent import UserMsg
from trioagent.agent import Agent
from trioagent.event import ReplyEndEvent, TextBlockDeltaEvent
from trioagent.testing import ScriptedReply

LONG = "Structured concurrency means every task has an owner. " * 40


async def main() -> None:
    async with trio.open_nursery() as nursery:
        model, server = await open_model(
            nursery,
            [
                ScriptedReply(text=LONG, chunk_size=6, chunk_delay=0.01),
                ScriptedReply(text="Sure, here is a short answer."),
            ],
        )
        async with model:
            agent = Agent("assistant", "You are concise.", model)
            events = []
            async with agent.stream(UserMsg("user", "Explain structured concurrency.")) as reply:
                async for event in reply:
                    events.append(event)
                    deltas = sum(isinstance(e, TextBlockDeltaEvent) for e in events)
                    if deltas == 5:
                        agent.interrupt()  # synchronous; the reply unwinds on its own
            ends = [e for e in events if isinstance(e, ReplyEndEvent)]
            print("".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent)), "...")
            check(len(ends) == 1 and events[-1] is ends[0], "exactly one REPLY_END, and it is last")
            check(ends[0].finished_reason == "interrupted", "the reply ended INTERRUPTED")
            check(
                reply.msg is not None and reply.msg.finished_reason == "interrupted",
                "final Msg is interrupted",
            )
            partial = agent.state.context[-1].get_text_content() or ""
            check(0 < len(partial) < len(LONG), "the partial answer is kept in the context")

            answer = await agent.reply(UserMsg("user", "Shorter, please."))
            check(answer.finished_reason == "completed", "the next reply completes")
            if server is not None:
                first = server.connections[0]
                with trio.move_on_after(5):
                    await first.closed.wait()
                check(first.closed.is_set(), "the interrupted stream's connection was closed")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

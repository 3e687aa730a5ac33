"""11 — Five agents in one nursery; one is cancelled, the other four complete.

Each agent replies in its own task of one nursery, all sharing one model (one HTTP client,
one connection pool).  Every task wraps its reply in its own ``trio.CancelScope``.  When
Carol's answer starts streaming, the controller cancels *her* scope only.

Cancellation in Trio is scoped: Carol's reply does its cleanup, emits exactly one
``REPLY_END(interrupted)`` to her ``on_event`` callback, and ``trio.Cancelled`` unwinds to her
scope — not further.  Her siblings never notice: they complete, and the nursery exits
normally once every task is done (no orphan, nothing to clean up by hand).

The embedded server's script is a callable: it answers according to who is asking, because
the five requests arrive in no particular order.
"""

from __future__ import annotations

import trio
from _common import check, human_text, open_model, round_trips, wait_closed

from trioagent import UserMsg
from trioagent.agent import Agent
from trioagent.event import AgentEvent, ReplyEndEvent, TextBlockDeltaEvent
from trioagent.testing import RecordedRequest, ScriptedReply

NAMES = ["alice", "bob", "carol", "dave", "erin"]
VICTIM = "carol"


def respond(request: RecordedRequest) -> ScriptedReply:
    """The server's answer: Carol gets a long, slow one; everyone else a short one."""
    asker = human_text(request).split()[-1]
    if asker == VICTIM:
        return ScriptedReply(text="Let me tell you a long story. " * 50, chunk_delay=0.02)
    return ScriptedReply(text=f"Hello {asker}, here is your answer. " * 3, chunk_delay=0.01)


async def main() -> None:
    async with trio.open_nursery() as server_nursery:
        model, server = await open_model(server_nursery, [respond] * len(NAMES))
        async with model:
            agents = {n: Agent(f"agent-{n}", "Answer briefly.", model) for n in NAMES}
            events: dict[str, list[AgentEvent]] = {n: [] for n in NAMES}
            scopes: dict[str, trio.CancelScope] = {}
            outcome: dict[str, str] = {}
            ended_at: dict[str, float] = {}

            async def converse(name: str) -> None:
                async def on_event(event: AgentEvent) -> None:
                    events[name].append(event)
                    if isinstance(event, ReplyEndEvent):
                        ended_at[name] = trio.current_time()
                    if name == VICTIM and isinstance(event, TextBlockDeltaEvent):
                        scopes[name].cancel()  # the controller's decision: stop Carol only

                with trio.CancelScope() as scope:
                    scopes[name] = scope
                    msg = await agents[name].reply(
                        UserMsg("user", f"Please answer a question from {name}"), on_event=on_event
                    )
                    outcome[name] = str(msg.finished_reason)
                if scope.cancelled_caught:
                    outcome[name] = "cancelled (trio.Cancelled reached its scope)"

            with trio.fail_after(10):  # a safety net for the example, not part of the scenario
                async with trio.open_nursery() as nursery:
                    for name in NAMES:
                        nursery.start_soon(converse, name)
            # The nursery exited: every task finished, the cancelled one included.

            for name in NAMES:
                print(f"  {name:<6} {outcome[name]}")
            for name in NAMES:
                ends = [e for e in events[name] if isinstance(e, ReplyEndEvent)]
                check(
                    len(ends) == 1 and events[name][-1] is ends[0],
                    f"{name}: exactly one REPLY_END, and it is last",
                )
                expected = "interrupted" if name == VICTIM else "completed"
                check(ends[0].finished_reason == expected, f"{name}: the reply ended {expected}")
                check(round_trips(agents[name]), f"{name}: the state round-trips through JSON")
            check(
                outcome[VICTIM].startswith("cancelled"), "the cancellation propagated to its scope"
            )
            others = [n for n in NAMES if n != VICTIM]
            check(all(outcome[n] == "completed" for n in others), "the four others completed")
            story = "".join(e.delta for e in events[VICTIM] if isinstance(e, TextBlockDeltaEvent))
            check(
                story.startswith("Let me t") and len(story) < 100,
                "Carol's long story was cut short",
            )
            check(
                all(ended_at[n] > ended_at[VICTIM] for n in others),
                "... and they were still streaming when Carol was cancelled",
            )
        check(await wait_closed(server), "no connection left open after the model closed")
        server_nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

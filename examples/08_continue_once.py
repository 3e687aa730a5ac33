"""08 — ContinueOnce: a middleware swallows the first COMPLETED end to force a second round.

An ``on_reply`` middleware sees every event of the reply.  If it *drops* a ``COMPLETED`` (or
``EXCEED_MAX_ITERS``) ``ReplyEndEvent`` instead of passing it on, the agent does not end the
reply: it runs another reasoning round (the ContinueOnce protocol; see
``docs/middleware.md``).  Here the middleware adds a "double-check" hint to the context the first time the
agent tries to finish, so the model gets a chance to correct itself.

The middleware keeps its per-reply flag in ``agent.state.middle_context`` (middlewares are
stateless: one instance can serve many agents, and the flag is saved with the state).

Part 2 shows the other half of rule 5: an ``INTERRUPTED`` end can never be swallowed.  A
middleware that drops *every* end event cannot stop the consumer from receiving exactly one
``REPLY_END(interrupted)`` when the reply is interrupted.
"""

from __future__ import annotations

import json
from typing import Any

import trio
from _common import check, open_model

from trioagent import MiddlewareBase, UserMsg
from trioagent.agent import Agent
from trioagent.event import ReplyEndEvent, TextBlockDeltaEvent
from trioagent.message import HintBlock
from trioagent.middleware import Emit, NextHandler
from trioagent.testing import ScriptedReply

REVIEW_HINT = "<system-reminder>Before finishing, double-check your answer.</system-reminder>"


class ContinueOnce(MiddlewareBase):
    """Swallow the first COMPLETED end of each reply and ask the model to double-check."""

    async def on_reply(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: NextHandler, emit: Emit
    ) -> None:
        key = await self.get_middleware_key()

        async def sink(item: Any) -> None:
            if isinstance(item, ReplyEndEvent) and item.finished_reason == "completed":
                continued = agent.state.middle_context.setdefault(key, {})
                if not continued.get(item.reply_id):
                    continued[item.reply_id] = True
                    agent.state.append_context(agent.name, [HintBlock(hint=REVIEW_HINT)])
                    return  # swallowed: the agent runs another round
            await emit(item)

        await next_handler(sink)


class SwallowEveryEnd(MiddlewareBase):
    """A misbehaving middleware: it drops every end event it sees."""

    async def on_reply(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: NextHandler, emit: Emit
    ) -> None:
        async def sink(item: Any) -> None:
            if not isinstance(item, ReplyEndEvent):
                await emit(item)

        await next_handler(sink)


async def main() -> None:
    async with trio.open_nursery() as nursery:
        model, server = await open_model(
            nursery,
            [
                ScriptedReply(text="The capital of Australia is Sydney."),
                ScriptedReply(text="Correction: the capital of Australia is Canberra."),
                ScriptedReply(
                    text="Counting slowly: " + "one, two, three, " * 80, chunk_delay=0.01
                ),
            ],
        )
        async with model:
            # -- part 1: the first COMPLETED end is swallowed -> a second round -------------
            agent = Agent(
                "assistant", "Answer geography questions.", model, middlewares=[ContinueOnce()]
            )
            events = []
            async with agent.stream(UserMsg("user", "What is the capital of Australia?")) as reply:
                async for event in reply:
                    events.append(event)
            assert reply.msg is not None
            print("final answer:", reply.msg.get_text_content())
            ends = [e for e in events if isinstance(e, ReplyEndEvent)]
            check(len(ends) == 1 and events[-1] is ends[0], "exactly one REPLY_END, and it is last")
            check(ends[0].finished_reason == "completed", "the reply completed after two rounds")
            model_calls = [e for e in events if e.type == "MODEL_CALL_START"]
            check(len(model_calls) == 2, "the swallowed end made the agent run a second round")
            check(
                agent.state.middle_context["ContinueOnce"] == {ends[0].reply_id: True},
                "the middleware's flag lives in the agent state",
            )
            if server is not None:
                sent = json.dumps(server.requests[-1].body["messages"])
                check("double-check" in sent, "the second request carried the review hint")
                check(
                    "Canberra" in (reply.msg.get_text_content() or ""), "the model corrected itself"
                )

            # -- part 2: an INTERRUPTED end cannot be swallowed -------------------------------
            stubborn = Agent("counter", "Count slowly.", model, middlewares=[SwallowEveryEnd()])
            events = []
            async with stubborn.stream(UserMsg("user", "Count to a hundred.")) as reply:
                async for event in reply:
                    events.append(event)
                    if sum(isinstance(e, TextBlockDeltaEvent) for e in events) == 3:
                        stubborn.interrupt()
            ends = [e for e in events if isinstance(e, ReplyEndEvent)]
            check(len(ends) == 1 and events[-1] is ends[0], "the consumer still got one REPLY_END")
            check(ends[0].finished_reason == "interrupted", "... and it says INTERRUPTED")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

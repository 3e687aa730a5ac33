"""09 — A middleware that races the reply against an idle timer (pull style).

Total deadlines are easy (example 02).  What users usually want for a streaming model is an
*idle* timeout: give up when nothing arrived for N seconds, however long the whole answer
takes.  That needs a middleware that waits for "the next item *or* the timer", which is what
``async with next_handler.stream() as items:`` is for: the inner layers run in a child task
owned by the ``async with`` block and hand their items over a ``trio`` memory channel.

``IdleTimeout`` forwards every item and restarts its timer after each one.  When the timer
fires, it emits a ``CustomEvent`` saying why, and leaves the block.  Leaving the block cancels
the inner layers (the reply, its model call, the HTTP stream), and what they emit while
unwinding — the closed text block and the ``REPLY_END(interrupted)`` — still reaches the
consumer.  The embedded server stalls forever after a few chunks
(``ScriptedReply(stall_after=...)``); the stalled connection is closed by the client.

Part 3 moves the same race one level down, to ``on_model_call``: ``StalledCallTimeout``
abandons a model call that sent nothing yet and *raises*, and the agent's
``ModelConfig(max_retries=1)`` retries the call — the reply completes on the second attempt.
"""

from __future__ import annotations

from typing import Any

import trio
from _common import check, open_model, round_trips

from trioagent import MiddlewareBase, UserMsg
from trioagent.agent import Agent, ModelConfig
from trioagent.event import CustomEvent, ReplyEndEvent, TextBlockDeltaEvent
from trioagent.middleware import Emit, NextHandler
from trioagent.testing import ScriptedReply


class IdleTimeout(MiddlewareBase):
    """End the reply when it produced nothing for ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def on_reply(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: NextHandler, emit: Emit
    ) -> None:
        async with next_handler.stream() as items:
            while True:
                with trio.move_on_after(self.seconds) as timer:
                    try:
                        item = await items.receive()
                    except trio.EndOfChannel:
                        return  # the reply ended on its own
                if timer.cancelled_caught:
                    await emit(
                        CustomEvent(
                            reply_id=agent.state.reply_id,
                            name="idle_timeout",
                            value={"seconds": self.seconds},
                        )
                    )
                    return  # leaving the block cancels the inner layers
                await emit(item)


class StalledCallTimeout(MiddlewareBase):
    """Fail a model call whose stream went silent for ``seconds`` (the agent may retry it)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def on_model_call(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: NextHandler, emit: Emit
    ) -> None:
        async with next_handler.stream() as chunks:
            while True:
                with trio.move_on_after(self.seconds) as timer:
                    try:
                        chunk = await chunks.receive()
                    except trio.EndOfChannel:
                        return
                if timer.cancelled_caught:
                    raise TimeoutError(f"no chunk for {self.seconds}s")  # cancels the call
                await emit(chunk)


async def main() -> None:
    async with trio.open_nursery() as nursery:
        model, server = await open_model(
            nursery,
            [
                # Four SSE events (role + three text fragments), then silence forever.
                ScriptedReply(
                    text="Let me think about that very carefully...", chunk_size=5, stall_after=4
                ),
                # Slow but steady: 0.03 s between fragments never trips a 1 s idle timer.
                ScriptedReply(
                    text="Here is a steady answer, fragment by fragment.",
                    chunk_size=6,
                    chunk_delay=0.03,
                ),
                # Part 3: silent from the start, then a normal answer for the retry.
                ScriptedReply(text="never sent", stall_after=0),
                ScriptedReply(text="Answered on the second attempt."),
            ],
        )
        async with model:
            agent = Agent("assistant", "You are thoughtful.", model, middlewares=[IdleTimeout(1.0)])

            events = []
            start = trio.current_time()
            async with agent.stream(UserMsg("user", "A hard question.")) as reply:
                async for event in reply:
                    events.append(event)
            elapsed = trio.current_time() - start
            print(f"gave up after {elapsed:.2f}s; events: {[str(e.type) for e in events]}")
            ends = [e for e in events if isinstance(e, ReplyEndEvent)]
            check(len(ends) == 1 and events[-1] is ends[0], "exactly one REPLY_END, and it is last")
            check(ends[0].finished_reason == "interrupted", "the stalled reply ended INTERRUPTED")
            timeouts = [
                e for e in events if isinstance(e, CustomEvent) and e.name == "idle_timeout"
            ]
            check(len(timeouts) == 1, "the middleware said why (a CustomEvent before the end)")
            check(
                reply.msg is not None and reply.msg.finished_reason == "interrupted",
                "final Msg is interrupted",
            )
            streamed = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
            kept = agent.state.context[-1].get_text_content() or ""
            check(bool(streamed) and kept == streamed, "the partial answer is kept in the context")
            check(elapsed < 5, "the idle timer, not the server, decided when to stop")
            if server is not None:
                with trio.move_on_after(2):
                    await server.connections[0].closed.wait()
                check(
                    server.connections[0].closed_by_client, "the client closed the stalled stream"
                )
            check(round_trips(agent), "the state round-trips through JSON")

            answer = await agent.reply(UserMsg("user", "Try again, steadily."))
            print("agent:", answer.get_text_content())
            check(answer.finished_reason == "completed", "a slow but steady reply is not cut")

            # -- part 3: per-call watchdog + the agent's retry ------------------------------
            retrying = Agent(
                "assistant",
                "You are thoughtful.",
                model,
                middlewares=[StalledCallTimeout(1.0)],
                model_config=ModelConfig(max_retries=1),
            )
            answer = await retrying.reply(UserMsg("user", "One more question."))
            print("agent:", answer.get_text_content())
            check(
                answer.finished_reason == "completed", "the stalled call was retried and completed"
            )
            if server is not None:
                check(len(server.requests) == 4, "... by a second request")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

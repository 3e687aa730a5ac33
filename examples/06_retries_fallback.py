"""06 — Retries and a fallback model when the first model fails; then cancel during a backoff.

Two layers retry, with different jobs:

* the *model* retries its provider's retryable errors (429, 5xx, connection errors) with capped
  exponential backoff and jitter, honouring ``Retry-After`` — only before the first chunk
  arrived, so a stream is never replayed (``OpenAIChatModel(max_retries=..., retry_delay=...)``);
* the *agent* retries any error on top and then switches to ``fallback_model``
  (``ModelConfig(max_retries=..., fallback_model=...)``), through the ``on_model_call`` chain.

Part 1: the primary server answers HTTP 500 to everything; after 2 × 2 attempts the agent
falls back to the second model, and the reply completes.

Part 2: the primary answers ``503`` with ``Retry-After: 30``.  The model goes to sleep for 30 s
before retrying — and that sleep is an ordinary Trio checkpoint, so ``agent.interrupt()``
ends the reply at once, with one INTERRUPTED end and no call to the fallback.

The primary is always the embedded failing server; with ``TRIOAGENT_MODEL`` set, the fallback
is the real provider.
"""

from __future__ import annotations

import logging
import sys

import trio
from _common import check, open_model, round_trips

from trioagent import UserMsg
from trioagent.agent import Agent, ModelConfig
from trioagent.event import AgentEvent, ReplyEndEvent
from trioagent.testing import ScriptedError, serve_openai_compatible


async def main() -> None:
    logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="  log: %(message)s")
    async with trio.open_nursery() as nursery:
        failing = [ScriptedError(status=500, message="upstream exploded")] * 4
        primary_server = await nursery.start(serve_openai_compatible, failing)
        primary = primary_server.chat_model("primary-model", max_retries=1, retry_delay=0.01)
        fallback, fallback_server = await open_model(nursery, ["The fallback model answers: 4."])
        async with primary, fallback:
            agent = Agent(
                "assistant",
                "You are concise.",
                primary,
                model_config=ModelConfig(max_retries=1, fallback_model=fallback),
            )

            # -- part 1: 500s, retries, then the fallback ------------------------------------
            answer = await agent.reply(UserMsg("user", "What is 2 + 2?"))
            print("agent:", answer.get_text_content())
            check(answer.finished_reason == "completed", "the reply completed on the fallback")
            check(len(primary_server.requests) == 4, "primary: 2 agent attempts x 2 model attempts")
            if fallback_server is not None:
                check(len(fallback_server.requests) == 1, "the fallback answered once")

            # -- part 2: cancel while the model sleeps before a retry -------------------------
            primary_server.push(ScriptedError(status=503, message="overloaded", retry_after=30))
            fallback_calls = len(fallback_server.requests) if fallback_server else 0
            seen: list[AgentEvent] = []

            async def record(event: AgentEvent) -> None:
                seen.append(event)

            async def interrupt_during_backoff() -> None:
                await primary_server.wait_until(lambda: len(primary_server.requests) == 5)
                await trio.sleep(0.1)  # the 503 arrived; the model now sleeps 30 s
                print("interrupting during the 30 s backoff")
                agent.interrupt()

            start = trio.current_time()
            async with trio.open_nursery() as scope:
                scope.start_soon(interrupt_during_backoff)
                msg = await agent.reply(UserMsg("user", "And 3 + 3?"), on_event=record)
            elapsed = trio.current_time() - start
            print(f"reply returned after {elapsed:.2f}s")
            ends = [e for e in seen if isinstance(e, ReplyEndEvent)]
            check(len(ends) == 1 and seen[-1] is ends[0], "exactly one REPLY_END, and it is last")
            check(msg.finished_reason == "interrupted", "the reply ended INTERRUPTED")
            check(elapsed < 5, "the backoff sleep was cancelled, not waited out")
            check(len(primary_server.requests) == 5, "no retry was sent after the interrupt")
            if fallback_server is not None:
                check(len(fallback_server.requests) == fallback_calls, "no fallback after a cancel")
            check(round_trips(agent), "the state round-trips through JSON")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

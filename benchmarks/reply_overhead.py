"""Per-event cost of a reply through the middleware chain.

A zero-latency streaming model (``ScriptedModel``, no delay between chunks) streams N text
deltas; the agent turns each into a TEXT_BLOCK_DELTA event.  Measured for 0 middlewares (the
baseline, same run) and 7 middlewares implementing every hook, both as pure pass-throughs
(``await next_handler()``) and as observers that wrap ``emit`` in a sink of their own; and for
both consumer forms (``reply(on_event=...)`` callback, ``stream()`` channel).

Run: ``python benchmarks/reply_overhead.py [N]``.  Target (issue #3): <= 5 us/event with 7
middlewares.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import trio
from _passthrough import PassThrough

from trioagent import UserMsg
from trioagent.agent import Agent, InjectionConfig
from trioagent.middleware import MiddlewareBase
from trioagent.testing import ScriptedModel, text_chunks

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
RUNS = 7


class Observer(PassThrough):
    """Wraps ``emit`` on every streaming hook (counts items)."""

    def __init__(self) -> None:
        self.seen = 0

    async def _observe(self, next_handler: Any, emit: Any) -> None:
        async def sink(item: Any) -> None:
            self.seen += 1
            await emit(item)

        await next_handler(sink)

    async def on_reply(self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any) -> None:
        await self._observe(next_handler, emit)

    async def on_reasoning(
        self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any
    ) -> None:
        await self._observe(next_handler, emit)

    async def on_model_call(
        self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any
    ) -> None:
        await self._observe(next_handler, emit)


class ZeroLatencyModel(ScriptedModel):
    """Streams its script without a schedule point between chunks, the way a provider hands
    over a burst of SSE events parsed from one network read."""

    async def _stream_api(self, messages: Any, tools: Any, tool_choice: Any, send: Any) -> None:
        step = await self._next_step(messages, tools, tool_choice)
        for chunk in step:
            await send(chunk)


def make_agent(middlewares: list[MiddlewareBase]) -> Agent:
    model = ZeroLatencyModel([text_chunks(*(["tok "] * N))])
    return Agent(
        "bench",
        "",
        model,
        middlewares=middlewares,
        injection_config=InjectionConfig(inject_runtime_state=False),
    )


async def one_run(middlewares: list[MiddlewareBase], form: str) -> tuple[float, int]:
    agent = make_agent(middlewares)
    count = 0
    start = time.perf_counter()
    if form == "callback":

        async def on_event(event: Any) -> None:
            nonlocal count
            count += 1

        await agent.reply(UserMsg("user", "go"), on_event=on_event)
    else:
        async with agent.stream(UserMsg("user", "go")) as reply:
            async for _ in reply:
                count += 1
    return time.perf_counter() - start, count


def measure(kind: str, form: str) -> float:
    def middlewares() -> list[MiddlewareBase]:
        if kind == "none":
            return []
        cls = PassThrough if kind == "pass-through" else Observer
        return [cls() for _ in range(7)]

    per_event: list[float] = []
    for _ in range(RUNS):
        elapsed, count = trio.run(one_run, middlewares(), form)
        per_event.append(elapsed / count * 1e6)
    # The best run: the least disturbed by the rest of the machine (usual for micro-benchmarks).
    return min(per_event)


def main() -> None:
    print(f"{N} streamed deltas per reply, best of {RUNS} runs")
    print(f"{'consumer':<10} {'middlewares':<22} {'us/event':>9} {'events/s':>11} {'vs 0 mw':>8}")
    for form in ("callback", "stream"):
        base = measure("none", form)
        for kind, label in (
            ("none", "0"),
            ("pass-through", "7 pass-through"),
            ("observer", "7 observing (sinks)"),
        ):
            cost = base if kind == "none" else measure(kind, form)
            print(f"{form:<10} {label:<22} {cost:>9.2f} {1e6 / cost:>11,.0f} {cost / base:>7.2f}x")


if __name__ == "__main__":
    main()

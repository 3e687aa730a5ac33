"""Cost of ``TracingMiddleware`` per streamed event and per reply.

A zero-latency streaming model (``ScriptedModel``) streams N text deltas in one reply; the agent
turns each into a TEXT_BLOCK_DELTA event (callback consumer).  Measured in the same run:

* ``none``          — no middleware (the baseline);
* ``no provider``   — ``TracingMiddleware()`` while the global tracer provider is OpenTelemetry's
  proxy (nothing configured): every hook is a bare ``await next_handler()``;
* ``sdk provider``  — ``TracingMiddleware(tracer_provider=...)`` with an SDK ``TracerProvider``,
  ``SimpleSpanProcessor`` and ``InMemorySpanExporter`` (spans really recorded and exported).

A second table runs many short replies (one chunk each) to show the fixed per-reply cost (span
creation, attribute JSON).

Run: ``python benchmarks/tracing_overhead.py [N] [REPLIES]``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import trio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trioagent import UserMsg
from trioagent.agent import Agent, InjectionConfig
from trioagent.middleware import MiddlewareBase, TracingMiddleware
from trioagent.testing import ScriptedModel, text_chunks

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
REPLIES = int(sys.argv[2]) if len(sys.argv) > 2 else 500
RUNS = 5


def sdk_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def make_agent(steps: list[Any], middlewares: list[MiddlewareBase]) -> Agent:
    return Agent(
        "bench",
        "",
        ScriptedModel(steps),
        middlewares=middlewares,
        injection_config=InjectionConfig(inject_runtime_state=False),
    )


async def long_reply(middlewares: list[MiddlewareBase]) -> tuple[float, int]:
    agent = make_agent([text_chunks(*(["tok "] * N))], middlewares)
    count = 0

    async def on_event(event: Any) -> None:
        nonlocal count
        count += 1

    start = time.perf_counter()
    await agent.reply(UserMsg("user", "go"), on_event=on_event)
    return time.perf_counter() - start, count


async def short_replies(middlewares: list[MiddlewareBase]) -> tuple[float, int]:
    agent = make_agent([text_chunks("hi")] * REPLIES, middlewares)
    elapsed = 0.0
    for _ in range(REPLIES):
        agent.state.context.clear()  # keep every reply the same size
        start = time.perf_counter()
        await agent.reply(UserMsg("user", "go"))
        elapsed += time.perf_counter() - start
    return elapsed, REPLIES


Setup = Callable[[], list[MiddlewareBase]]


def setups() -> dict[str, Setup]:
    def sdk() -> list[MiddlewareBase]:
        provider, _ = sdk_provider()
        return [TracingMiddleware(tracer_provider=provider)]

    return {
        "none": lambda: [],
        "no provider": lambda: [TracingMiddleware()],
        "sdk provider": sdk,
    }


def measure(run: Any, table: dict[str, Setup]) -> dict[str, float]:
    """Per-item cost of each setup: runs interleaved, best of RUNS (the least disturbed)."""
    samples: dict[str, list[float]] = {label: [] for label in table}
    for _ in range(RUNS):
        for label, setup in table.items():
            elapsed, count = trio.run(run, setup())
            samples[label].append(elapsed / count * 1e6)
    return {label: min(values) for label, values in samples.items()}


def main() -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider), (
        "run without a configured global tracer provider"
    )
    assert not TracingMiddleware().enabled
    table = setups()
    for title, run, unit in (
        (f"one reply of {N} streamed deltas, best of {RUNS} runs", long_reply, "us/event"),
        (f"{REPLIES} one-chunk replies, best of {RUNS} runs", short_replies, "us/reply"),
    ):
        print(title)
        print(f"  {'tracing':<14} {unit:>9} {'vs none':>8} {'added':>9}")
        costs = measure(run, table)
        base = costs["none"]
        for label, cost in costs.items():
            print(f"  {label:<14} {cost:>9.2f} {cost / base:>7.2f}x {cost - base:>+9.2f}")


if __name__ == "__main__":
    main()

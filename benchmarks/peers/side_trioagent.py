"""trioagent's side of the peer benchmark, under trio.

Run by ``driver.py`` with the project's interpreter: ``python side_trioagent.py ROW[,ROW...]
[--port N] [--pull]`` prints one JSON object, row key -> value, for one round.  Same workloads
as ``side_agentscope.py``; each framework in its own idiom: events reach the caller through
``reply(on_event=...)`` here (with ``--pull``: by iterating ``async with agent.stream(...)``,
the reply then running in a child task), iterating ``reply_stream()`` there, and a
pass-through middleware is ``await next_handler()`` here, ``async for ... yield`` there.
"""

from __future__ import annotations

import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import _rows as R
import httpx2
import trio

# The benchmarks' shared pass-through middleware lives one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _passthrough import PassThrough

from trioagent import AssistantMsg, UserMsg
from trioagent.agent import Agent, InjectionConfig
from trioagent.credential import OpenAICredential
from trioagent.event import AgentEvent, EventType
from trioagent.model import ChatModelBase, ChatResponse, OpenAIChatModel
from trioagent.permission import PermissionDecision
from trioagent.testing import ScriptedModel, text_chunks, tool_call_chunks
from trioagent.tool import Toolkit


class ScriptModel(ScriptedModel):
    """Plays prebuilt chunk lists, one per call: ``yield_each`` passes a schedule point before
    each chunk, else the chunks go out as a burst; ``stall`` waits forever after the chunks
    (until cancelled).  Exactly what ``side_agentscope.py``'s model does: no schedule point for
    the request itself (``ScriptedModel`` has one)."""

    yield_each = True
    stall = False

    def __init__(self) -> None:
        # No copy of every request: the benchmark measures the agent, not the test double.
        super().__init__(record_requests=False)

    async def _stream_api(self, messages: Any, tools: Any, tool_choice: Any, send: Any) -> None:
        yield_each = self.yield_each
        for chunk in await self._next_step(messages, tools, tool_choice):  # type: ignore[union-attr]
            if yield_each:
                await trio.lowlevel.checkpoint()
            await send(chunk)  # the accumulator never mutates the chunks it is given
        if self.stall:
            await trio.sleep_forever()


def text_step(n: int) -> list[ChatResponse]:
    return text_chunks(*(["tok "] * n), block_id="t1")


def tool_step(count: int) -> list[ChatResponse]:
    chunks: list[ChatResponse] = []
    for i in range(count):
        chunks += tool_call_chunks(f"call_{i}", "lookup", json.dumps({"city": f"c{i}"}))
    return chunks


async def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: the city.
    """
    return f"{city}: 21C"


def toolkit() -> Toolkit:
    kit = Toolkit()
    kit.register_function(
        lookup, permission=PermissionDecision(behavior="allow", message="benchmark")
    )
    return kit


def make_agent(model: ChatModelBase, middlewares: int = 0, tools: bool = False) -> Agent:
    return Agent(
        "bench",
        "You are a benchmark.",
        model,
        toolkit=toolkit() if tools else None,
        middlewares=[PassThrough() for _ in range(middlewares)],
        injection_config=InjectionConfig(inject_runtime_state=False),
    )


def history(n: int) -> list[Any]:
    msgs: list[Any] = []
    for i in range(n // 2):
        msgs.append(UserMsg("user", f"question {i}"))
        msgs.append(AssistantMsg("bench", f"answer {i}"))
    return msgs


#: The consumer idiom of this process: pull ``agent.stream()`` instead of ``on_event``.
PULL = "--pull" in sys.argv


async def drive(agent: Agent, text: str, on_event: Callable[[AgentEvent], Awaitable[None]]) -> None:
    """One reply, each event to ``on_event``, in this process's consumer idiom."""
    if PULL:
        async with agent.stream(UserMsg("user", text)) as reply:
            async for event in reply:
                await on_event(event)
    else:
        await agent.reply(UserMsg("user", text), on_event=on_event)


async def consume(agent: Agent, text: str = "go") -> int:
    count = 0

    async def on_event(event: AgentEvent) -> None:
        nonlocal count
        count += 1

    await drive(agent, text, on_event)
    return count


async def streamed(middlewares: int, yield_each: bool) -> float:
    model = ScriptModel()
    model.yield_each = yield_each
    agent = make_agent(model, middlewares)
    events, total = 0, 0.0
    for i in range(R.STREAM_REPLIES + 1):
        model.add_steps(text_step(R.STREAM_CHUNKS))
        agent.state.context = []
        start = R.clock()
        n = await consume(agent)
        if i:  # the first reply warms up
            total += R.elapsed(start)
            events += n
    return events / total


async def tool_rounds(middlewares: int, calls: int, replies: int) -> float:
    model = ScriptModel()
    agent = make_agent(model, middlewares, tools=True)
    total = 0.0
    for i in range(replies + 1):
        model.add_steps(tool_step(calls), text_step(1))
        agent.state.context = []
        start = R.clock()
        await consume(agent)
        if i:
            total += R.elapsed(start)
    return replies / total


async def idle_memory() -> float:
    model = ScriptModel()
    make_agent(model)  # warm lazy imports and caches
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    agent = make_agent(model)
    await agent.observe(history(R.SHORT_HISTORY))
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(agent.state.context) == R.SHORT_HISTORY
    return (after - before) / 1000


async def interrupts() -> dict[str, float]:
    model = ScriptModel()
    model.stall = True
    agent = make_agent(model)
    latencies: list[float] = []
    for i in range(R.INTERRUPTS + 5):
        model.add_steps(text_step(R.INTERRUPT_AFTER))
        agent.state.context = []
        ready = trio.Event()
        ended: list[float] = []

        async def consumer(ready: Any = ready, ended: list[float] = ended) -> None:
            deltas = 0

            async def on_event(event: AgentEvent) -> None:
                nonlocal deltas
                if event.type == EventType.TEXT_BLOCK_DELTA:
                    deltas += 1
                    if deltas == R.INTERRUPT_AFTER:
                        ready.set()
                elif event.type == EventType.REPLY_END:
                    ended.append(time.perf_counter())

            await drive(agent, "go", on_event)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer)
            await ready.wait()
            await trio.lowlevel.checkpoint()  # the model is parked in its stall
            start = time.perf_counter()
            agent.interrupt()
        assert ended, "no REPLY_END after the interrupt"
        if i >= 5:
            latencies.append((ended[0] - start) * 1e6)
    return {
        "interrupt_p50": R.percentile(latencies, 0.5),
        "interrupt_p99": R.percentile(latencies, 0.99),
    }


async def cancel_floor() -> float:
    """trio alone: from ``cancel()`` of a scope around a parked task to its handler's start."""
    latencies: list[float] = []
    for i in range(R.FLOOR_CANCELS + 5):
        reached: list[float] = []
        ready = trio.Event()
        scope = trio.CancelScope()

        async def parked(
            scope: trio.CancelScope = scope,
            ready: trio.Event = ready,
            reached: list[float] = reached,
        ) -> None:
            with scope:
                ready.set()
                try:
                    await trio.sleep_forever()
                finally:
                    reached.append(time.perf_counter())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(parked)
            await ready.wait()
            await trio.lowlevel.checkpoint()
            start = time.perf_counter()
            scope.cancel()
        if i >= 5:
            latencies.append((reached[0] - start) * 1e6)
    return R.percentile(latencies, 0.5)


async def checkpoint_floor() -> float:
    """trio alone: CPU time of one schedule point (``trio.lowlevel.checkpoint()``)."""
    start = R.clock()
    for _ in range(R.FLOOR_CHECKPOINTS):
        await trio.lowlevel.checkpoint()
    return R.elapsed(start) / R.FLOOR_CHECKPOINTS * 1e6


async def scope_floor() -> float:
    """trio alone: CPU time of entering and leaving a shielded scope with a deadline (what
    each layer of a cancelled reply's cleanup opens)."""
    start = R.clock()
    for _ in range(R.FLOOR_SCOPES):
        with trio.CancelScope(shield=True, deadline=trio.current_time() + 5):
            pass
    return R.elapsed(start) / R.FLOOR_SCOPES * 1e6


async def short_replies(history_size: int, replies: int) -> float:
    model = ScriptModel()
    agent = make_agent(model)
    past = history(history_size)
    total = 0.0
    for i in range(replies + 1):
        model.add_steps(text_step(R.SHORT_CHUNKS))
        agent.state.context = list(past)
        start = R.clock()
        await consume(agent)
        if i:
            total += R.elapsed(start)
    return total / replies * 1e6


async def http_concurrent(port: int, replies: int) -> dict[str, float]:
    """``replies`` concurrent streamed replies from the loopback server: the client's CPU per
    token, the p99 time to first token (ms, wall) and the resident memory per reply (kB)."""
    credential = OpenAICredential(api_key="sk-bench", base_url=f"http://127.0.0.1:{port}/v1")
    # The pool of AgentScope's client (the OpenAI SDK's default), not the model's default of 64.
    limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
    client = httpx2.AsyncClient(limits=limits, timeout=None)
    async with (
        client,
        OpenAIChatModel("bench", credential=credential, max_retries=0, http_client=client) as model,
    ):
        await consume(make_agent(model))  # warm-up: imports, the client
        agents = [make_agent(model) for _ in range(replies)]
        counts: list[int] = []
        ttft: list[float] = []
        done = trio.Event()
        gc.collect()
        rss_before = peak = R.rss_kb()

        async def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, R.rss_kb())
                await trio.sleep(R.RSS_SAMPLE)

        async def one(agent: Agent) -> None:
            deltas = 0
            start = time.perf_counter()

            async def on_event(event: AgentEvent) -> None:
                nonlocal deltas
                if event.type == EventType.TEXT_BLOCK_DELTA:
                    if not deltas:
                        ttft.append((time.perf_counter() - start) * 1e3)
                    deltas += 1

            await drive(agent, "go", on_event)
            counts.append(deltas)

        start = time.process_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sample)
            async with trio.open_nursery() as replying:
                for agent in agents:
                    replying.start_soon(one, agent)
            done.set()
        cpu = time.process_time() - start
    tokens = sum(counts)
    assert tokens == replies * R.HTTP_TOKENS, tokens
    return {
        "cpu": cpu / tokens * 1e6,
        "ttft_p99": R.percentile(ttft, 0.99),
        "rss": (peak - rss_before) / replies,
    }


async def http_cpu(port: int) -> float:
    return (await http_concurrent(port, R.HTTP_REPLIES))["cpu"]


async def http_many(port: int) -> dict[str, float]:
    result = await http_concurrent(port, R.HTTP_MANY)
    return {f"http_many_{k}": v for k, v in result.items()}


async def slow_consumer() -> float:
    """A consumer taking 1 ms per event: wall time per event (us) of a streamed reply."""
    model = ScriptModel()
    agent = make_agent(model)
    events, total = 0, 0.0

    async def on_event(event: AgentEvent) -> None:
        nonlocal events
        events += 1
        await trio.sleep(R.SLOW_CONSUMER_DELAY)

    for i in range(R.SLOW_REPLIES + 1):
        model.add_steps(text_step(R.SLOW_CHUNKS))
        agent.state.context = []
        if i == 1:
            events, start = 0, time.perf_counter()
        await drive(agent, "go", on_event)
    total = time.perf_counter() - start
    return total / events * 1e6


def main() -> None:
    wanted = sys.argv[1].split(",")
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0

    def one(fn: Any, key: str) -> Any:
        return lambda: {key: trio.run(fn)}

    R.run_rows(
        {
            "stream_yield_0": one(lambda: streamed(0, True), "stream_yield_0"),
            "stream_yield_7": one(lambda: streamed(7, True), "stream_yield_7"),
            "stream_burst_7": one(lambda: streamed(7, False), "stream_burst_7"),
            "tool_round_0": one(lambda: tool_rounds(0, 1, R.TOOL_REPLIES), "tool_round_0"),
            "tool_round_7": one(lambda: tool_rounds(7, 1, R.TOOL_REPLIES), "tool_round_7"),
            "parallel_20": one(
                lambda: tool_rounds(0, R.PARALLEL_TOOLS, R.PARALLEL_REPLIES), "parallel_20"
            ),
            "idle_memory": one(idle_memory, "idle_memory"),
            "interrupt_p50,interrupt_p99": lambda: trio.run(interrupts),
            "short_reply": one(
                lambda: short_replies(R.SHORT_HISTORY, R.SHORT_REPLIES), "short_reply"
            ),
            "long_history": one(
                lambda: short_replies(R.LONG_HISTORY, R.LONG_REPLIES), "long_history"
            ),
            "cancel_floor": one(cancel_floor, "cancel_floor"),
            "checkpoint_floor": one(checkpoint_floor, "checkpoint_floor"),
            "scope_floor": one(scope_floor, "scope_floor"),
            "http_cpu": one(lambda: http_cpu(port), "http_cpu"),
            "http_many_cpu,http_many_ttft_p99,http_many_rss": lambda: trio.run(http_many, port),
            "slow_consumer": one(slow_consumer, "slow_consumer"),
        },
        wanted,
    )


if __name__ == "__main__":
    main()

"""AgentScope 2.0.11's side of the peer benchmark, under asyncio.

Run by ``driver.py`` with the interpreter of ``benchmarks/.venv-agentscope`` (see
``install_agentscope.sh``): ``python side_agentscope.py ROW[,ROW...] [--port N]`` prints one JSON
object, row key -> value, for one round.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import AsyncGenerator
from typing import Any

import _rows as R
from agentscope.agent import Agent, InjectionConfig
from agentscope.credential import CredentialBase, OpenAICredential
from agentscope.event import EventType
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import AssistantMsg, TextBlock, ToolCallBlock, UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.model import ChatModelBase, ChatResponse, OpenAIChatModel
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit
from pydantic import BaseModel


class _Params(BaseModel):
    pass


class _NoCredential(CredentialBase):
    pass


class ScriptModel(ChatModelBase):
    """Plays prebuilt chunk lists, one per call; ``yield_each`` yields to the loop per chunk;
    ``stall`` waits forever after the chunks (until cancelled)."""

    def __init__(self) -> None:
        super().__init__(_NoCredential(), "script", _Params(), stream=True, max_retries=0)
        self.formatter = OpenAIChatFormatter()  # the agent reads its media types
        self.steps: list[list[ChatResponse]] = []
        self.yield_each = True
        self.stall = False

    async def _call_api(
        self, model_name: str, messages: Any, tools: Any = None, tool_choice: Any = None, **kw: Any
    ) -> Any:
        chunks = self.steps.pop(0)
        yield_each, stall = self.yield_each, self.stall

        async def stream() -> AsyncGenerator[ChatResponse, None]:
            for chunk in chunks:
                if yield_each:
                    await asyncio.sleep(0)
                yield chunk
            if stall:
                await asyncio.Event().wait()

        return stream()


def text_step(n: int) -> list[ChatResponse]:
    return [
        ChatResponse(content=[TextBlock(id="t1", text="tok ")], is_last=False) for _ in range(n)
    ]


def tool_step(count: int) -> list[ChatResponse]:
    return [
        ChatResponse(
            content=[
                ToolCallBlock(id=f"call_{i}", name="lookup", input=json.dumps({"city": f"c{i}"}))
            ],
            is_last=False,
        )
        for i in range(count)
    ]


class PassThrough(MiddlewareBase):
    """Implements every hook, passing everything through (the framework's own idiom)."""

    async def on_reply(self, agent: Any, input_kwargs: dict, next_handler: Any) -> AsyncGenerator:
        async for item in next_handler(**input_kwargs):
            yield item

    async def on_reasoning(
        self, agent: Any, input_kwargs: dict, next_handler: Any
    ) -> AsyncGenerator:
        async for item in next_handler(**input_kwargs):
            yield item

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> AsyncGenerator:
        async for item in next_handler(**input_kwargs):
            yield item

    async def on_check_permission(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        return await next_handler(**input_kwargs)

    async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        return await next_handler(**input_kwargs)

    async def on_compress_context(self, agent: Any, input_kwargs: dict, next_handler: Any) -> None:
        await next_handler(**input_kwargs)

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        return current_prompt


async def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: the city.
    """
    return f"{city}: 21C"


def toolkit() -> Toolkit:
    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="benchmark")
    return Toolkit(tools=[FunctionTool(lookup, permission=allow)])


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


async def consume(agent: Agent, text: str = "go") -> int:
    count = 0
    async for _ in agent.reply_stream(UserMsg("user", text)):
        count += 1
    return count


async def streamed(middlewares: int, yield_each: bool) -> float:
    model = ScriptModel()
    model.yield_each = yield_each
    agent = make_agent(model, middlewares)
    events, total = 0, 0.0
    for i in range(R.STREAM_REPLIES + 1):
        model.steps = [text_step(R.STREAM_CHUNKS)]
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
        model.steps = [tool_step(calls), text_step(1)]
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
        model.steps = [text_step(R.INTERRUPT_AFTER)]
        agent.state.context = []
        ready = asyncio.Event()
        ended: list[float] = []

        async def consumer(ready: Any = ready, ended: list[float] = ended) -> None:
            deltas = 0
            async for event in agent.reply_stream(UserMsg("user", "go")):
                if event.type == EventType.TEXT_BLOCK_DELTA:
                    deltas += 1
                    if deltas == R.INTERRUPT_AFTER:
                        ready.set()
                elif event.type == EventType.REPLY_END:
                    ended.append(time.perf_counter())

        task = asyncio.create_task(consumer())
        await ready.wait()
        await asyncio.sleep(0)  # the model is parked in its stall
        start = time.perf_counter()
        task.cancel()  # AgentScope's interrupt: cancel the task running the reply
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert ended, "no REPLY_END after the interrupt"
        if i >= 5:
            latencies.append((ended[0] - start) * 1e6)
    return {
        "interrupt_p50": R.percentile(latencies, 0.5),
        "interrupt_p99": R.percentile(latencies, 0.99),
    }


async def cancel_floor() -> float:
    """asyncio alone: from ``cancel()`` of a parked task to its handler's start."""
    latencies: list[float] = []
    for i in range(R.FLOOR_CANCELS + 5):
        reached: list[float] = []
        ready = asyncio.Event()

        async def parked(ready: asyncio.Event = ready, reached: list[float] = reached) -> None:
            ready.set()
            try:
                await asyncio.sleep(3600)
            finally:
                reached.append(time.perf_counter())

        task = asyncio.create_task(parked())
        await ready.wait()
        await asyncio.sleep(0)
        start = time.perf_counter()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if i >= 5:
            latencies.append((reached[0] - start) * 1e6)
    return R.percentile(latencies, 0.5)


async def checkpoint_floor() -> float:
    """asyncio alone: CPU time of one schedule point (``asyncio.sleep(0)``)."""
    start = R.clock()
    for _ in range(R.FLOOR_CHECKPOINTS):
        await asyncio.sleep(0)
    return R.elapsed(start) / R.FLOOR_CHECKPOINTS * 1e6


async def scope_floor() -> float:
    """asyncio alone: CPU time of entering and leaving a deadline scope (``asyncio.timeout``)."""
    loop = asyncio.get_running_loop()
    start = R.clock()
    for _ in range(R.FLOOR_SCOPES):
        async with asyncio.timeout_at(loop.time() + 5):
            pass
    return R.elapsed(start) / R.FLOOR_SCOPES * 1e6


async def short_replies(history_size: int, replies: int) -> float:
    model = ScriptModel()
    agent = make_agent(model)
    past = history(history_size)
    total = 0.0
    for i in range(replies + 1):
        model.steps = [text_step(R.SHORT_CHUNKS)]
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
    model = OpenAIChatModel(credential=credential, model="bench", stream=True, max_retries=0)
    await consume(make_agent(model))  # warm-up: imports, the client
    agents = [make_agent(model) for _ in range(replies)]
    counts: list[int] = []
    ttft: list[float] = []
    done = asyncio.Event()
    gc.collect()
    rss_before = peak = R.rss_kb()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, R.rss_kb())
            await asyncio.sleep(R.RSS_SAMPLE)

    async def one(agent: Agent) -> None:
        deltas = 0
        start = time.perf_counter()
        async for event in agent.reply_stream(UserMsg("user", "go")):
            if event.type == EventType.TEXT_BLOCK_DELTA:
                if not deltas:
                    ttft.append((time.perf_counter() - start) * 1e3)
                deltas += 1
        counts.append(deltas)

    start = time.process_time()
    sampler = asyncio.create_task(sample())
    await asyncio.gather(*(one(a) for a in agents))
    done.set()
    await sampler
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
    events = 0
    for i in range(R.SLOW_REPLIES + 1):
        model.steps = [text_step(R.SLOW_CHUNKS)]
        agent.state.context = []
        if i == 1:
            events, start = 0, time.perf_counter()
        async for _ in agent.reply_stream(UserMsg("user", "go")):
            events += 1
            await asyncio.sleep(R.SLOW_CONSUMER_DELAY)
    return (time.perf_counter() - start) / events * 1e6


def main() -> None:
    wanted = sys.argv[1].split(",")
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0

    def one(coro: Any, key: str) -> Any:
        return lambda: {key: asyncio.run(coro())}

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
            "interrupt_p50,interrupt_p99": lambda: asyncio.run(interrupts()),
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
            "http_many_cpu,http_many_ttft_p99,http_many_rss": lambda: asyncio.run(http_many(port)),
            "slow_consumer": one(slow_consumer, "slow_consumer"),
        },
        wanted,
    )


if __name__ == "__main__":
    main()

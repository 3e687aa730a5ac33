"""Tool middlewares: per-tool (``ToolMiddlewareBase``) and toolkit-wide (``register_middleware``).

Covers AgentScope's ToolMiddlewareBase scenarios (adapted to emit callbacks) and its toolkit
middleware examples (logging, transform, authorization, onion order, cache, timing).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from trioagent.exception import DeveloperOrientedException
from trioagent.message import TextBlock, ToolCallBlock, ToolResultState
from trioagent.tool import (
    FunctionTool,
    ToolBase,
    ToolChunk,
    Toolkit,
    ToolMiddlewareBase,
    ToolResponse,
)


class Recorder:
    def __init__(self) -> None:
        self.chunks: list[ToolChunk] = []

    async def __call__(self, chunk: ToolChunk) -> None:
        self.chunks.append(chunk)

    def texts(self) -> list[str]:
        return [b.text for c in self.chunks for b in c.content if isinstance(b, TextBlock)]


def text_chunk(text: str) -> ToolChunk:
    return ToolChunk(content=[TextBlock(text=text)])


class SingleChunkTool(ToolBase):
    name = "single"
    input_schema = {"type": "object", "properties": {}}  # noqa: RUF012

    def __init__(self, middlewares: list[ToolMiddlewareBase] | None = None) -> None:
        super().__init__(middlewares)
        self.calls: list[dict[str, Any]] = []

    async def call(self, emit, /, **kwargs):  # type: ignore[no-untyped-def]
        self.calls.append(kwargs)
        return text_chunk("single")


class StreamingTool(ToolBase):
    name = "streaming"
    input_schema = {"type": "object", "properties": {"n": {"type": "integer"}}}  # noqa: RUF012

    async def call(self, emit, /, n: int = 2):  # type: ignore[no-untyped-def]
        for i in range(n):
            await emit(ToolChunk(content=[TextBlock(text=f"chunk-{i}")], is_last=i == n - 1))


class Recording(ToolMiddlewareBase):
    def __init__(self, label: str, log: list[str]) -> None:
        self.label = label
        self.log = log

    async def on_tool_call(self, tool, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        self.log.append(f"{self.label}-pre")
        response = await next_handler()
        self.log.append(f"{self.label}-post")
        return response


# -- ToolMiddlewareBase: order, rewrites, short-circuits, errors ---------------------------------


async def test_no_middleware_single_chunk():
    tool = SingleChunkTool()
    emit = Recorder()
    response = await tool.run({}, emit)
    assert emit.texts() == ["single"]
    assert emit.chunks[0].state == ToolResultState.RUNNING
    assert emit.chunks[0].is_last is True
    assert response.text() == "single"


async def test_no_middleware_streaming():
    emit = Recorder()
    response = await StreamingTool()(n=3)
    assert response.text() == "chunk-0chunk-1chunk-2"
    await StreamingTool().run({"n": 3}, emit)
    assert emit.texts() == ["chunk-0", "chunk-1", "chunk-2"]


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (["outer", "inner"], ["outer-pre", "inner-pre", "inner-post", "outer-post"]),
        (["only"], ["only-pre", "only-post"]),
    ],
)
async def test_onion_order(labels, expected):
    log: list[str] = []
    tool = SingleChunkTool(middlewares=[Recording(label, log) for label in labels])
    response = await tool.run()
    assert log == expected
    assert response.text() == "single"


async def test_streaming_is_forwarded_and_pre_post_fire_once():
    log: list[str] = []
    tool = StreamingTool(middlewares=[Recording("mw", log)])
    emit = Recorder()
    response = await tool.run({"n": 3}, emit)
    assert emit.texts() == ["chunk-0", "chunk-1", "chunk-2"]
    assert log == ["mw-pre", "mw-post"]
    assert response.text() == "chunk-0chunk-1chunk-2"


class Injecting(ToolMiddlewareBase):
    async def on_tool_call(self, tool, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        return await next_handler(injected="value")


class Mutating(ToolMiddlewareBase):
    async def on_tool_call(self, tool, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        input_kwargs["mutated"] = True
        return await next_handler()


async def test_input_injection_by_override_and_by_mutation():
    tool = SingleChunkTool(middlewares=[Injecting(), Mutating()])
    await tool.run({"original": "x"})
    assert tool.calls == [{"original": "x", "injected": "value", "mutated": True}]


class Uppercase(ToolMiddlewareBase):
    async def on_tool_call(self, tool, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        async def sink(chunk: ToolChunk) -> None:
            for block in chunk.content:
                if isinstance(block, TextBlock):
                    block.text = block.text.upper()
            await emit(chunk)

        await next_handler(sink)  # returns None: the result is what this layer emitted


async def test_uppercase_transform_reaches_stream_and_result():
    tool = StreamingTool(middlewares=[Uppercase()])
    emit = Recorder()
    response = await tool.run({"n": 2}, emit)
    assert emit.texts() == ["CHUNK-0", "CHUNK-1"]
    assert response.text() == "CHUNK-0CHUNK-1"


class ShortCircuit(ToolMiddlewareBase):
    async def on_tool_call(self, tool, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        await emit(text_chunk("short-circuited"))


async def test_short_circuit_skips_the_tool():
    tool = SingleChunkTool(middlewares=[ShortCircuit()])
    emit = Recorder()
    response = await tool.run({}, emit)
    assert tool.calls == []
    assert emit.texts() == ["short-circuited"]
    assert response.text() == "short-circuited"


class Raising(ToolMiddlewareBase):
    async def on_tool_call(self, tool, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        raise ValueError("middleware failure")


async def test_raising_middleware_propagates_and_becomes_an_error_result_in_a_toolkit():
    tool = SingleChunkTool(middlewares=[Raising()])
    with pytest.raises(ValueError, match="middleware failure"):
        await tool.run()
    assert tool.calls == []
    toolkit = Toolkit(tools=[tool])
    response = await toolkit.call_tool(ToolCallBlock(id="c", name="single"))
    assert response.state == ToolResultState.ERROR
    assert response.text() == "ValueError: middleware failure"


async def test_positional_call_is_rejected_even_with_middlewares():
    tool = SingleChunkTool(middlewares=[Recording("mw", [])])
    with pytest.raises(TypeError, match="keyword arguments only"):
        await tool("positional")


async def test_contract_violations_are_developer_errors():
    class WrongReturn(ToolMiddlewareBase):
        async def on_tool_call(self, tool, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
            return "not a response"

    class WrongEmit(ToolMiddlewareBase):
        async def on_tool_call(self, tool, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
            await emit("not a chunk")

    class PositionalOverride(ToolMiddlewareBase):
        async def on_tool_call(self, tool, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
            return await next_handler({"n": 1})

    with pytest.raises(DeveloperOrientedException, match="WrongReturn returned str"):
        await SingleChunkTool(middlewares=[WrongReturn()]).run()
    with pytest.raises(DeveloperOrientedException, match="only ToolChunk"):
        await SingleChunkTool(middlewares=[WrongEmit()]).run()
    with pytest.raises(TypeError, match="keyword arguments"):
        await SingleChunkTool(middlewares=[PositionalOverride()]).run()


async def test_retry_middleware_may_call_next_handler_twice():
    attempts: list[int] = []

    class Flaky(ToolBase):
        name = "flaky"

        async def call(self, emit, /, **kwargs):  # type: ignore[no-untyped-def]
            attempts.append(len(attempts))
            if len(attempts) == 1:
                raise ConnectionError("first try fails")
            return "ok"

    class Retry(ToolMiddlewareBase):
        async def on_tool_call(self, tool, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
            try:
                return await next_handler()
            except ConnectionError:
                return await next_handler()

    assert (await Flaky(middlewares=[Retry()]).run()).text() == "ok"
    assert attempts == [0, 1]


async def test_toolkit_middlewares_wrap_tool_middlewares():
    log: list[str] = []
    tool = SingleChunkTool(middlewares=[Recording("tool-mw", log)])
    toolkit = Toolkit(tools=[tool])

    async def toolkit_mw(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        log.append("toolkit-pre")
        assert set(kwargs) == {"tool_call", "tool", "tool_input"}
        assert kwargs["tool"] is tool
        response = await next_handler()
        log.append("toolkit-post")
        return response

    assert toolkit.register_middleware(toolkit_mw) is toolkit_mw
    response = await toolkit.call_tool(ToolCallBlock(id="c", name="single"))
    assert log == ["toolkit-pre", "tool-mw-pre", "tool-mw-post", "toolkit-post"]
    assert response.text() == "single"


async def test_toolkit_middleware_can_redirect_and_rewrite_input():
    first, second = SingleChunkTool(), SingleChunkTool()
    second.name = "other"
    toolkit = Toolkit(tools=[first, second])

    async def redirect(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        return await next_handler(tool=second, tool_input={"rewritten": True})

    toolkit.register_middleware(redirect)
    await toolkit.call_tool(ToolCallBlock(id="c", name="single", input="{}"))
    assert (first.calls, second.calls) == ([], [{"rewritten": True}])


# -- AgentScope's toolkit middleware tutorial ---------------------------------------------------


async def search_tool(query: str) -> ToolResponse:
    """A simple search tool.

    Args:
        query: The search query.
    """
    return ToolResponse(content=[TextBlock(text=f"'{query}' 的搜索结果")])


async def unauthorized_tool(data: str) -> ToolResponse:
    """A tool that is not authorized.

    Args:
        data: Some data.
    """
    return ToolResponse(content=[TextBlock(text=f"处理 {data}")])


def search_call(id: str, query: str, name: str = "search_tool") -> ToolCallBlock:
    key = "query" if name == "search_tool" else "data"
    return ToolCallBlock(id=id, name=name, input=json.dumps({key: query}, ensure_ascii=False))


async def test_seed_logging_middleware():
    log: list[str] = []

    async def logging_middleware(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        tool_call = kwargs["tool_call"]
        log.append(f"[中间件] 调用工具：{tool_call.name}")
        log.append(f"[中间件] 输入：{kwargs['tool_input']}")

        async def sink(chunk: ToolChunk) -> None:
            log.append(f"[中间件] 响应：{chunk.content[0].text}")  # type: ignore[union-attr]
            await emit(chunk)

        response = await next_handler(sink)
        log.append(f"[中间件] 工具 {tool_call.name} 完成")
        return response

    toolkit = Toolkit()
    toolkit.register_tool_function(search_tool)
    toolkit.register_middleware(logging_middleware)
    response = await toolkit.call_tool(search_call("1", "AgentScope"))
    log.append(f"[最终] {response.text()}")
    assert log == [
        "[中间件] 调用工具：search_tool",
        "[中间件] 输入：{'query': 'AgentScope'}",
        "[中间件] 响应：'AgentScope' 的搜索结果",
        "[中间件] 工具 search_tool 完成",
        "[最终] 'AgentScope' 的搜索结果",
    ]
    assert response.id == "1"


async def test_seed_transform_middleware():
    async def transform_middleware(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        tool_input = kwargs["tool_input"]
        tool_input["query"] = f"[已转换] {tool_input['query']}"

        async def sink(chunk: ToolChunk) -> None:
            chunk.content[0].text = f"{chunk.content[0].text} [已修改]"  # type: ignore[union-attr]
            await emit(chunk)

        await next_handler(sink)

    toolkit = Toolkit()
    toolkit.register_tool_function(search_tool)
    toolkit.register_middleware(transform_middleware)
    emit = Recorder()
    original = search_call("2", "中间件")
    response = await toolkit.call_tool(original, emit=emit)
    assert response.text() == "'[已转换] 中间件' 的搜索结果 [已修改]"
    assert emit.texts() == ["'[已转换] 中间件' 的搜索结果 [已修改]"]
    assert json.loads(original.input) == {"query": "中间件"}  # the caller's call is untouched


async def test_seed_authorization_middleware():
    log: list[str] = []

    async def authorization_middleware(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        name = kwargs["tool_call"].name
        if name not in {"search_tool"}:
            log.append(f"[授权] 工具 {name} 未授权")
            return ToolResponse(content=[TextBlock(text=f"错误：工具 '{name}' 未授权")])
        log.append(f"[授权] 工具 {name} 已授权")
        return await next_handler()

    ran: list[str] = []

    async def guarded_tool(data: str) -> str:
        """Must not run."""
        ran.append(data)
        return data

    toolkit = Toolkit()
    toolkit.register_tool_function(search_tool)
    toolkit.register_tool_function(guarded_tool, name="unauthorized_tool")
    toolkit.register_middleware(authorization_middleware)
    allowed = await toolkit.call_tool(search_call("3", "测试"))
    emit = Recorder()
    refused = await toolkit.call_tool(search_call("4", "测试", "unauthorized_tool"), emit=emit)
    assert allowed.text() == "'测试' 的搜索结果"
    assert refused.text() == "错误：工具 'unauthorized_tool' 未授权"
    assert emit.texts() == ["错误：工具 'unauthorized_tool' 未授权"]  # streamed once
    assert refused.id == "4"
    assert ran == []
    assert log == ["[授权] 工具 search_tool 已授权", "[授权] 工具 unauthorized_tool 未授权"]


def _chunk_rewriting(label: str, log: list[str]) -> Any:
    """The tutorial's M1/M2, rewriting chunks on their way out."""

    async def middleware(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        log.append(f"[{label}] 预处理")
        kwargs["tool_input"]["query"] += f" [{label}]"

        async def sink(chunk: ToolChunk) -> None:
            chunk.content[0].text += f" [{label}]"  # type: ignore[union-attr]
            log.append(f"[{label}] 后处理")
            await emit(chunk)

        await next_handler(sink)

    return middleware


def _response_rewriting(label: str, log: list[str]) -> Any:
    """The tutorial's M1/M2, rewriting the inner response and returning it."""

    async def middleware(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        log.append(f"[{label}] 预处理")
        kwargs["tool_input"]["query"] += f" [{label}]"
        held: list[ToolChunk] = []

        async def hold(chunk: ToolChunk) -> None:
            held.append(chunk)

        response = await next_handler(hold)
        response.content[0].text += f" [{label}]"  # type: ignore[union-attr]
        log.append(f"[{label}] 后处理")
        return response  # nothing emitted: the framework streams it as one chunk

    return middleware


@pytest.mark.parametrize("style", [_chunk_rewriting, _response_rewriting])
async def test_seed_two_middlewares_in_onion_order(style):
    log: list[str] = []
    toolkit = Toolkit()
    toolkit.register_tool_function(search_tool)
    toolkit.register_middleware(style("M1", log))
    toolkit.register_middleware(style("M2", log))
    emit = Recorder()
    response = await toolkit.call_tool(search_call("5", "测试"), emit=emit)
    assert log == ["[M1] 预处理", "[M2] 预处理", "[M2] 后处理", "[M1] 后处理"]
    assert response.text() == "'测试 [M1] [M2]' 的搜索结果 [M2] [M1]"
    assert emit.texts() == ["'测试 [M1] [M2]' 的搜索结果 [M2] [M1]"]


# -- cache and timing middlewares ---------------------------------------------------------------


async def test_seed_cache_middleware():
    cache: dict[str, tuple[list[ToolChunk], ToolResponse]] = {}
    executions: list[str] = []

    async def cache_middleware(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        tool_call = kwargs["tool_call"]
        key = f"{tool_call.name}:{json.dumps(kwargs['tool_input'], sort_keys=True)}"
        if key in cache:
            chunks, stored = cache[key]
            for chunk in chunks:
                await emit(chunk)
            return stored
        seen: list[ToolChunk] = []

        async def record(chunk: ToolChunk) -> None:
            seen.append(chunk)
            await emit(chunk)

        response = await next_handler(record)
        cache[key] = (seen, response)
        return response

    async def add(a: int, b: int, emit) -> int:
        """Add."""
        executions.append(f"{a}+{b}")
        await emit(ToolChunk(content=[TextBlock(text="adding… ")], is_last=False))
        return a + b

    toolkit = Toolkit()
    toolkit.register_function(add)
    toolkit.register_middleware(cache_middleware)
    first_emit, second_emit = Recorder(), Recorder()
    first = await toolkit.call_tool(
        ToolCallBlock(id="c1", name="add", input='{"a": 1, "b": 2}'), emit=first_emit
    )
    second = await toolkit.call_tool(
        ToolCallBlock(id="c2", name="add", input='{"b": 2, "a": 1}'), emit=second_emit
    )
    other = await toolkit.call_tool(ToolCallBlock(id="c3", name="add", input='{"a": 2, "b": 2}'))
    assert executions == ["1+2", "2+2"]
    assert first.text() == second.text() == "adding… 3"
    assert other.text() == "adding… 4"
    assert first_emit.texts() == second_emit.texts() == ["adding… ", "3"]
    assert (first.id, second.id) == ("c1", "c2")
    assert cache["add:" + json.dumps({"a": 1, "b": 2})][1].id != "c2"  # the stored one is intact


async def test_seed_timing_middleware(autojump_clock):
    log: list[str] = []

    async def timing_middleware(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        start = trio.current_time()
        log.append(f"[计时] 开始执行 {kwargs['tool_call'].name}")
        response = await next_handler()
        log.append(f"[计时] 耗时 {trio.current_time() - start:.3f}s")
        return response

    async def slow_tool(seconds: float) -> str:
        """Sleep."""
        await trio.sleep(seconds)
        return "slept"

    toolkit = Toolkit()
    toolkit.register_function(slow_tool)
    toolkit.register_middleware(timing_middleware)
    response = await toolkit.call_tool(
        ToolCallBlock(id="t", name="slow_tool", input='{"seconds": 2.5}')
    )
    assert response.text() == "slept"
    assert log == ["[计时] 开始执行 slow_tool", "[计时] 耗时 2.500s"]


async def test_seed_three_middlewares_pre_in_order_post_reversed():
    log: list[str] = []

    def make(label: str) -> Any:
        async def middleware(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
            log.append(f"{label} in")
            response = await next_handler()
            log.append(f"{label} out")
            return response

        return middleware

    async def core() -> str:
        """Core."""
        log.append("tool")
        return "done"

    toolkit = Toolkit(middlewares=[make("A"), make("B")])
    toolkit.register_function(core)
    toolkit.register_middleware(make("C"))
    await toolkit.call_tool(ToolCallBlock(id="x", name="core"))
    assert log == ["A in", "B in", "C in", "tool", "C out", "B out", "A out"]


# -- the pull form: next_handler.stream() -------------------------------------------------------


def _timeout_middleware(seconds: float) -> Any:
    async def timeout(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        async with next_handler.stream() as items:
            with trio.move_on_after(seconds):
                async for item in items:
                    if isinstance(item, ToolResponse):
                        return item
                    await emit(item)
        await emit(ToolChunk(content=[TextBlock(text="[timed out]")], state="error"))

    return timeout


async def _ticking(n: int, emit) -> str:  # type: ignore[no-untyped-def]
    """Emit n ticks, one per second."""
    for i in range(n):
        await emit(ToolChunk(content=[TextBlock(text=f"tick{i} ")], is_last=False))
        await trio.sleep(1)
    return "done"


async def test_pull_stream_delivers_chunks_then_the_response(autojump_clock):
    toolkit = Toolkit(middlewares=[_timeout_middleware(10)])
    toolkit.register_function(_ticking, name="ticking")
    emit = Recorder()
    response = await toolkit.call_tool(
        ToolCallBlock(id="p", name="ticking", input='{"n": 2}'), emit=emit
    )
    assert emit.texts() == ["tick0 ", "tick1 ", "done"]
    assert response.text() == "tick0 tick1 done"
    assert response.state == ToolResultState.SUCCESS


async def test_pull_stream_can_race_a_timer_and_cancel_the_tool(autojump_clock):
    toolkit = Toolkit(middlewares=[_timeout_middleware(2.5)])
    toolkit.register_function(_ticking, name="ticking")
    emit = Recorder()
    response = await toolkit.call_tool(
        ToolCallBlock(id="p", name="ticking", input='{"n": 100}'), emit=emit
    )
    assert emit.texts() == ["tick0 ", "tick1 ", "tick2 ", "[timed out]"]
    assert response.state == ToolResultState.ERROR
    assert response.text() == "tick0 tick1 tick2 [timed out]"
    assert trio.current_time() == pytest.approx(2.5)


async def test_pull_stream_unwraps_a_single_inner_exception():
    async def boom() -> None:
        """Fail."""
        raise LookupError("inner failure")

    async def puller(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        try:
            async with next_handler.stream() as items:
                async for _ in items:
                    pass
        except LookupError as exc:
            await emit(ToolChunk(content=[TextBlock(text=f"caught {exc}")]))

    toolkit = Toolkit(middlewares=[puller])
    toolkit.register_function(boom)
    response = await toolkit.call_tool(ToolCallBlock(id="b", name="boom"))
    assert response.text() == "caught inner failure"


# -- a sync middleware is refused when it is registered --------------------------------------------


def test_a_sync_toolkit_middleware_is_refused_when_registered() -> None:
    def sync_mw(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        return None

    async def two_args(kwargs, next_handler):  # type: ignore[no-untyped-def]
        return await next_handler()

    with pytest.raises(TypeError, match=r"toolkit middleware sync_mw is not an async function"):
        Toolkit().register_middleware(sync_mw)
    with pytest.raises(TypeError, match=r"toolkit middleware sync_mw is not an async function"):
        Toolkit(middlewares=[sync_mw])
    with pytest.raises(TypeError, match=r"two_args cannot be called with 3 arguments"):
        Toolkit().register_middleware(two_args)


def test_a_sync_tool_middleware_is_refused_when_the_tool_is_built() -> None:
    class SyncToolMw(ToolMiddlewareBase):
        def on_tool_call(self, tool, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def,override]
            return None

    def echo(x: str) -> str:
        return x

    with pytest.raises(TypeError, match=r"SyncToolMw\.on_tool_call is not an async function"):
        FunctionTool(echo, middlewares=[SyncToolMw()])
    tool = FunctionTool(echo)
    tool.middlewares.append(SyncToolMw())
    with pytest.raises(TypeError, match=r"SyncToolMw\.on_tool_call is not an async function"):
        Toolkit().add_tool(tool)

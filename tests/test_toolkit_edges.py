"""Adversarial edges of the toolkit, the tool-middleware chain, tool groups and accumulation.

Complements ``test_toolkit.py``, ``test_tool_middleware.py`` and ``test_tool_response.py``:
misbehaving middlewares, tools failing mid-stream, blocking tools being cancelled, group
bookkeeping, huge inputs, chunk accumulation corner cases, and a cancel sweep through two
toolkit-wide middlewares.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import trio
from agent_kit import ALLOW, call, calls, make_agent, text, user

from trioagent.agent import Agent
from trioagent.exception import DeveloperOrientedException
from trioagent.message import (
    Base64Source,
    DataBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
)
from trioagent.testing import SweepRun, cancel_sweep
from trioagent.tool import ToolBase, ToolChunk, ToolGroup, Toolkit, ToolResponse

INTERRUPTED_TEXT = "interrupted"


class Recorder:
    def __init__(self) -> None:
        self.chunks: list[ToolChunk] = []

    async def __call__(self, chunk: ToolChunk) -> None:
        self.chunks.append(chunk)

    def texts(self) -> list[str]:
        return [b.text for c in self.chunks for b in c.content if isinstance(b, TextBlock)]


def tc(name: str, call_id: str = "c1", /, **arguments: Any) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, input=json.dumps(arguments))


def chunk(text_: str, *, block_id: str | None = None, is_last: bool = True) -> ToolChunk:
    block = TextBlock(text=text_) if block_id is None else TextBlock(text=text_, id=block_id)
    return ToolChunk(content=[block], is_last=is_last)


def counting_toolkit() -> tuple[Toolkit, list[int]]:
    """A toolkit with one streaming tool ``count`` that records each run."""
    kit = Toolkit()
    runs: list[int] = []

    async def count(n: int, emit: Any) -> str:
        """Streams ``n`` parts, then returns "end"."""
        runs.append(n)
        for i in range(n):
            await emit(ToolChunk(content=[TextBlock(text=f"p{i} ")], is_last=False))
        return "end"

    kit.register_function(count)
    return kit, runs


# -- misbehaving middlewares -------------------------------------------------------------------


async def test_middleware_calling_next_twice_runs_the_tool_twice_and_streams_both():
    kit, runs = counting_toolkit()

    @kit.register_middleware
    async def twice(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        await next_handler()
        await next_handler(tool_input={"n": 1})

    emit = Recorder()
    response = await kit.call_tool(tc("count", n=2), emit=emit)
    assert runs == [2, 1]
    assert emit.texts() == ["p0 ", "p1 ", "end", "p0 ", "end"]
    assert response.text() == "p0 p1 endp0 end"
    assert response.state == ToolResultState.SUCCESS
    assert response.id == "c1"


async def test_middleware_that_neither_calls_next_nor_returns_gives_an_empty_success():
    """Matches the reference: a short-circuit that yields nothing is an empty result."""
    kit, runs = counting_toolkit()

    @kit.register_middleware
    async def swallow(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        return None

    emit = Recorder()
    response = await kit.call_tool(tc("count", n=2), emit=emit)
    assert runs == []
    assert emit.chunks == []
    assert response.content == []
    assert response.state == ToolResultState.SUCCESS
    assert response.id == "c1"


async def test_middleware_returning_a_non_response_is_a_developer_error():
    kit, _ = counting_toolkit()

    @kit.register_middleware
    async def bad(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        await next_handler()
        return "not a response"

    with pytest.raises(DeveloperOrientedException, match="returned str"):
        await kit.call_tool(tc("count", n=1))


async def test_middleware_raising_after_the_tool_streamed_keeps_the_chunks():
    kit, runs = counting_toolkit()

    @kit.register_middleware
    async def explode_after(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        await next_handler()
        raise RuntimeError("post-processing failed")

    emit = Recorder()
    response = await kit.call_tool(tc("count", n=2), emit=emit)
    assert runs == [2]
    assert emit.texts() == ["p0 ", "p1 ", "end", "RuntimeError: post-processing failed"]
    assert emit.chunks[-1].state == ToolResultState.ERROR
    assert response.state == ToolResultState.ERROR
    assert response.text() == "p0 p1 endRuntimeError: post-processing failed"
    assert response.id == "c1"


async def test_inner_middleware_raising_propagates_through_the_outer_one():
    kit, _ = counting_toolkit()
    log: list[str] = []

    @kit.register_middleware
    async def outer(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        log.append("outer-pre")
        try:
            return await next_handler()
        finally:
            log.append("outer-finally")

    @kit.register_middleware
    async def inner(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        raise KeyError("inner")

    response = await kit.call_tool(tc("count", n=1))
    assert log == ["outer-pre", "outer-finally"]
    assert response.state == ToolResultState.ERROR
    assert response.text() == "KeyError: 'inner'"


async def test_rewritten_input_is_not_validated_again_but_the_function_tool_checks_types():
    """The toolkit validates the model's arguments only; a middleware's rewrite reaches the tool
    as is (reference §5.5: the toolkit does no schema validation), and FunctionTool's own
    conversion turns a wrongly typed rewrite into a model-readable error."""
    kit, runs = counting_toolkit()

    @kit.register_middleware
    async def corrupt(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        return await next_handler(tool_input={"n": "many"})

    response = await kit.call_tool(tc("count", n=1))
    assert runs == []
    assert response.state == ToolResultState.ERROR
    assert "Input validation failed for tool 'count'" in response.text()
    assert "'n'" in response.text()


async def test_rewritten_input_with_an_unknown_argument_becomes_an_error_result():
    kit, runs = counting_toolkit()

    @kit.register_middleware
    async def extra(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        return await next_handler(tool_input={**kwargs["tool_input"], "bogus": 1})

    response = await kit.call_tool(tc("count", n=1))
    assert runs == []
    assert response.state == ToolResultState.ERROR
    assert "TypeError" in response.text()
    assert "bogus" in response.text()


async def test_middleware_emitting_a_non_chunk_is_a_developer_error():
    kit, _ = counting_toolkit()

    @kit.register_middleware
    async def bad_emit(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        await emit("text")

    with pytest.raises(DeveloperOrientedException, match="only ToolChunk"):
        await kit.call_tool(tc("count", n=1))


async def test_a_sink_that_drops_chunks_hides_them_from_the_stream_not_from_the_result():
    """A sink controls the stream; returning the inner response keeps the full result."""
    kit, _ = counting_toolkit()

    @kit.register_middleware
    async def quiet(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        async def drop(chunk: ToolChunk) -> None:
            pass

        return await next_handler(drop)

    emit = Recorder()
    response = await kit.call_tool(tc("count", n=2), emit=emit)
    # Nothing reached the stream, so the returned response is emitted as one chunk.
    assert emit.texts() == ["p0 p1 end"]
    assert response.text() == "p0 p1 end"


async def test_pull_stream_with_a_tool_failing_mid_stream():
    kit = Toolkit()

    async def flaky(emit: Any) -> str:
        """Fails after one part."""
        await emit(chunk("one "))
        raise ValueError("mid-stream")

    kit.register_function(flaky)
    seen: list[Any] = []

    @kit.register_middleware
    async def pull(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        async with next_handler.stream() as items:
            async for item in items:
                seen.append(item)
                if isinstance(item, ToolChunk):
                    await emit(item)

    emit = Recorder()
    response = await kit.call_tool(tc("flaky"), emit=emit)
    assert [type(s).__name__ for s in seen] == ["ToolChunk"]
    assert emit.texts() == ["one ", "ValueError: mid-stream"]
    assert response.state == ToolResultState.ERROR
    assert response.text() == "one ValueError: mid-stream"


# -- failing and streaming tools -----------------------------------------------------------------


async def test_sync_generator_raising_mid_stream_keeps_the_parts():
    kit = Toolkit()

    def gen(n: int):  # type: ignore[no-untyped-def]
        """Yields, then fails."""
        for i in range(n):
            yield f"g{i} "
        raise OSError("disk gone")

    kit.register_function(gen)
    emit = Recorder()
    response = await kit.call_tool(tc("gen", n=2), emit=emit)
    assert emit.texts() == ["g0 ", "g1 ", "OSError: disk gone"]
    assert response.state == ToolResultState.ERROR
    assert response.text() == "g0 g1 OSError: disk gone"


async def test_blocking_generator_raising_mid_stream_keeps_the_parts():
    kit = Toolkit()

    def gen(n: int):  # type: ignore[no-untyped-def]
        """Yields from a worker thread, then fails."""
        for i in range(n):
            yield f"g{i} "
        raise OSError("disk gone")

    kit.register_function(gen, blocking=True)
    emit = Recorder()
    response = await kit.call_tool(tc("gen", n=2), emit=emit)
    assert emit.texts() == ["g0 ", "g1 ", "OSError: disk gone"]
    assert response.state == ToolResultState.ERROR


async def test_sync_tool_with_emit_raising_still_streams_what_it_emitted():
    kit = Toolkit()

    def partial(emit: Any) -> str:
        """Emits, then fails."""
        emit(chunk("half "))
        raise ValueError("nope")

    kit.register_function(partial)
    emit = Recorder()
    response = await kit.call_tool(tc("partial"), emit=emit)
    assert emit.texts() == ["half ", "ValueError: nope"]
    assert response.text() == "half ValueError: nope"


async def test_cancelled_blocking_tool_waits_for_its_thread_then_propagates():
    """``blocking=True`` runs in a worker thread that cancellation does not abandon: the call
    waits for the thread, returns its (real) result since no checkpoint follows, and the
    cancellation is still pending — the caller's next checkpoint raises it."""
    kit = Toolkit()
    started = threading.Event()
    release = threading.Event()
    finished: list[str] = []

    def slow() -> str:
        """Blocks until released."""
        started.set()
        release.wait(10)
        finished.append("thread done")
        return "late"

    kit.register_function(slow, blocking=True)
    results: list[ToolResponse] = []
    emit = Recorder()
    outcome: list[str] = []

    async def caller(scope: trio.CancelScope) -> None:
        with scope:
            results.append(await kit.call_tool(tc("slow"), emit=emit))
            outcome.append("returned")
            await trio.lowlevel.checkpoint()
            outcome.append("not cancelled")  # pragma: no cover
        outcome.append("cancelled" if scope.cancelled_caught else "completed")

    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller, scope)
        await trio.to_thread.run_sync(started.wait, 10)
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert outcome == []  # still waiting for the thread
        release.set()
    assert finished == ["thread done"]
    assert outcome == ["returned", "cancelled"]
    assert [r.text() for r in results] == ["late"]
    assert emit.texts() == ["late"]


async def test_returning_a_tool_response_with_a_different_state_is_kept():
    kit = Toolkit()

    class Denier(ToolBase):
        name = "denier"
        input_schema = {"type": "object", "properties": {}}  # noqa: RUF012

        async def call(self, emit, /, **kwargs):  # type: ignore[no-untyped-def]
            return ToolResponse(
                content=[TextBlock(text="no")], state=ToolResultState.DENIED, id="inner"
            )

    kit.add_tool(Denier())
    emit = Recorder()
    response = await kit.call_tool(tc("denier", "call-9"), emit=emit)
    assert response.state == ToolResultState.DENIED
    assert response.id == "call-9"
    assert [c.state for c in emit.chunks] == [ToolResultState.DENIED]


# -- groups and registration ------------------------------------------------------------------------


class _State:
    """A duck-typed agent state carrying only the activated groups."""

    def __init__(self, groups: list[str] | None = None) -> None:
        self.tool_context = type("Ctx", (), {})()
        self.tool_context.activated_groups = list(groups or [])


def named_tool(name: str, answer: str) -> ToolBase:
    class Fixed(ToolBase):
        input_schema = {"type": "object", "properties": {}}  # noqa: RUF012

        async def call(self, emit, /, **kwargs):  # type: ignore[no-untyped-def]
            return answer

    tool = Fixed()
    tool.name = name
    return tool


async def test_reset_tools_with_an_unknown_group_is_an_error_and_changes_nothing():
    kit = Toolkit(tool_groups=[ToolGroup("web", "Web tools.", tools=[named_tool("get", "x")])])
    state = _State(["web"])
    response = await kit.call_tool(tc("reset_tools", web=True, nope=True), state=state)
    assert response.state == ToolResultState.ERROR
    assert "Invalid group name(s): nope" in response.text()
    assert state.tool_context.activated_groups == ["web"]


async def test_reset_tools_with_a_non_bool_is_rejected_by_validation():
    kit = Toolkit(tool_groups=[ToolGroup("web", "Web tools.")])
    state = _State()
    response = await kit.call_tool(tc("reset_tools", web="maybe"), state=state)
    assert response.state == ToolResultState.ERROR
    assert "Input validation failed for tool 'reset_tools'" in response.text()
    assert state.tool_context.activated_groups == []


async def test_reset_tools_without_state_is_a_developer_error():
    kit = Toolkit(tool_groups=[ToolGroup("web", "Web tools.")])
    with pytest.raises(DeveloperOrientedException, match="agent state"):
        await kit.call_tool(tc("reset_tools", web=True))


async def test_a_tool_name_in_two_groups_resolves_by_activation():
    kit = Toolkit(
        tools=[named_tool("dup", "basic")],
        tool_groups=[
            ToolGroup("g1", "One.", tools=[named_tool("dup", "g1")]),
            ToolGroup("g2", "Two.", tools=[named_tool("dup", "g2")]),
        ],
    )
    assert (await kit.call_tool(tc("dup"), state=_State())).text() == "basic"
    assert (await kit.call_tool(tc("dup"), state=_State(["g1"]))).text() == "g1"
    # The later group wins, whatever the activation order.
    assert (await kit.call_tool(tc("dup"), state=_State(["g2", "g1"]))).text() == "g2"
    schemas = kit.get_tool_schemas(["g1", "g2"])
    assert [s["function"]["name"] for s in schemas] == ["reset_tools", "dup"]


async def test_inactive_group_tool_is_an_error_result_naming_the_group():
    kit = Toolkit(tool_groups=[ToolGroup("g1", "One.", tools=[named_tool("only", "x")])])
    response = await kit.call_tool(tc("only"), state=_State())
    assert response.state == ToolResultState.ERROR
    assert "in group 'g1' is currently inactive" in response.text()


async def test_removing_a_tool_while_its_group_is_active():
    kit = Toolkit(tool_groups=[ToolGroup("g1", "One.", tools=[named_tool("t", "x")])])
    state = _State(["g1"])
    assert (await kit.call_tool(tc("t"), state=state)).text() == "x"
    kit.remove_tool("t")
    response = await kit.call_tool(tc("t"), state=state)
    assert response.state == ToolResultState.ERROR
    assert "doesn't exist" in response.text()
    # The group itself stays, and can be refilled.
    kit.add_tool(named_tool("t", "y"), "g1")
    assert (await kit.call_tool(tc("t"), state=state)).text() == "y"


async def test_a_validated_call_to_a_removed_tool_is_an_error_result():
    kit = Toolkit(tools=[named_tool("t", "x")])
    kit.remove_tool("t")
    response = await kit.call_tool(tc("t"), tool_input={})
    assert response.state == ToolResultState.ERROR
    assert "ToolNotFoundError" in response.text()


def test_registering_the_same_name_twice_replaces_and_moves_to_the_end():
    kit = Toolkit()

    def a() -> str:
        """First."""
        return "a"

    def b() -> str:
        """Other."""
        return "b"

    def a2() -> str:
        """Second."""
        return "a2"

    kit.register_function(a)
    kit.register_function(b)
    kit.register_function(a2, name="a")
    names = [s["function"]["name"] for s in kit.get_tool_schemas()]
    assert names == ["b", "a"]
    assert kit.get_tool_schemas()[1]["function"]["description"] == "Second."


def test_adding_to_an_unknown_group_or_a_non_tool_fails():
    kit = Toolkit()
    with pytest.raises(ValueError, match="Cannot find group 'nope'"):
        kit.add_tool(named_tool("t", "x"), "nope")
    with pytest.raises(TypeError, match="expected a ToolBase"):
        kit.add_tool("not a tool")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="has no name"):
        kit.add_tool(named_tool("", "x"))


def test_clear_drops_groups_and_keeps_a_working_basic_group():
    kit = Toolkit(tools=[named_tool("t", "x")], tool_groups=[ToolGroup("g", "G.")])
    kit.clear()
    assert kit.get_tool_schemas(["g"]) == []
    kit.add_tool(named_tool("u", "y"))
    assert [s["function"]["name"] for s in kit.get_tool_schemas()] == ["u"]


# -- huge inputs ------------------------------------------------------------------------------------


async def test_huge_valid_input_reaches_the_tool_intact():
    kit = Toolkit()

    def size(blob: str) -> int:
        """Length of the blob."""
        return len(blob)

    kit.register_function(size)
    blob = "x" * 2_000_000
    response = await kit.call_tool(tc("size", blob=blob))
    assert response.state == ToolResultState.SUCCESS
    assert response.text() == "2000000"


async def test_huge_invalid_input_error_is_truncated():
    kit = Toolkit()

    def size(blob: str) -> int:
        """Length of the blob."""
        return len(blob)

    kit.register_function(size)
    bad = ToolCallBlock(id="c1", name="size", input="[" + "1," * 500_000 + "1]")
    response = await kit.call_tool(bad)
    assert response.state == ToolResultState.ERROR
    assert "[TRUNCATE]" in response.text()
    assert len(response.text()) < 2_000


# -- accumulation -----------------------------------------------------------------------------------


def b64(data: str, block_id: str) -> DataBlock:
    import base64

    return DataBlock(
        id=block_id,
        source=Base64Source(data=base64.b64encode(data.encode()).decode(), media_type="text/plain"),
    )


def test_is_last_does_not_affect_accumulation():
    response = ToolResponse()
    response.append_chunk(chunk("a", block_id="t1", is_last=True))
    response.append_chunk(chunk("b", block_id="t1", is_last=True))
    response.append_chunk(chunk("c", block_id="t2", is_last=False))
    assert response.text() == "abc"
    assert len(response.content) == 1
    assert response.state == ToolResultState.SUCCESS


def test_text_data_text_keeps_the_data_block_between_texts():
    import base64

    response = ToolResponse()
    response.append_chunk(chunk("before ", block_id="t1"))
    response.append_chunk(ToolChunk(content=[b64("he", "d1")]))
    response.append_chunk(chunk("after", block_id="t2"))
    response.append_chunk(ToolChunk(content=[b64("llo", "d1")]))
    response.append_chunk(chunk(" more", block_id="t1"))
    kinds = [type(b).__name__ for b in response.content]
    assert kinds == ["TextBlock", "DataBlock", "TextBlock"]
    assert response.content[0].text == "before  more"  # type: ignore[union-attr]
    assert response.content[2].text == "after"  # type: ignore[union-attr]
    data = response.content[1]
    assert isinstance(data, DataBlock)
    assert isinstance(data.source, Base64Source)
    assert base64.b64decode(data.source.data) == b"hello"


def test_a_text_chunk_reusing_a_data_block_id_gets_a_fresh_id():
    response = ToolResponse()
    response.append_chunk(ToolChunk(content=[b64("x", "same")]))
    response.append_chunk(chunk("t", block_id="same"))
    assert [type(b).__name__ for b in response.content] == ["DataBlock", "TextBlock"]
    assert response.content[1].id != "same"


def test_error_then_interrupted_stays_error_and_metadata_merges():
    response = ToolResponse()
    response.append_chunk(
        ToolChunk(content=[], state=ToolResultState.ERROR, metadata={"a": 1, "mcp_progress": 5})
    )
    response.append_chunk(
        ToolChunk(content=[], state=ToolResultState.INTERRUPTED, metadata={"b": 2})
    )
    assert response.state == ToolResultState.ERROR
    assert response.metadata == {"a": 1, "b": 2}


def test_chunk_accumulation_does_not_alias_the_chunk_blocks():
    source = chunk("abc", block_id="t1")
    response = ToolResponse().append_chunk(source)
    response.append_chunk(chunk("def", block_id="t1"))
    assert source.content[0].text == "abc"  # type: ignore[union-attr]


# -- cancellation through two middlewares --------------------------------------------------------------


def two_middleware_toolkit(log: list[str]) -> Toolkit:
    kit = Toolkit()

    async def slow_stream(parts: int, emit: Any) -> str:
        """Streams slowly."""
        for i in range(parts):
            await emit(ToolChunk(content=[TextBlock(text=f"part{i} ")], is_last=False))
            await trio.sleep(0.5)
        return "end"

    kit.register_function(slow_stream, permission=ALLOW)

    @kit.register_middleware
    async def outer(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        await trio.sleep(0.1)
        try:
            response = await next_handler()
        except BaseException as exc:
            log.append(f"outer saw {type(exc).__name__}")
            raise
        await trio.sleep(0.1)
        return response

    @kit.register_middleware
    async def inner(kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
        async def upper(chunk_: ToolChunk) -> None:
            await trio.sleep(0.05)
            await emit(
                ToolChunk(
                    content=[TextBlock(text=b.text.upper()) for b in chunk_.content],  # type: ignore[union-attr]
                    is_last=chunk_.is_last,
                )
            )

        await next_handler(upper)
        await trio.sleep(0.1)

    return kit


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_through_two_toolkit_middlewares(mode: str, autojump_clock: Any) -> None:
    log: list[str] = []

    def make() -> Agent:
        return make_agent(
            [
                calls(
                    call("s1", "slow_stream", parts=3),
                    call("s2", "slow_stream", parts=1),
                ),
                text("done"),
            ],
            two_middleware_toolkit(log),
        )

    def one_result_per_call(run: SweepRun) -> None:
        stored = [
            b for m in run.agent.state.context for b in m.content if isinstance(b, ToolResultBlock)
        ]
        ids = [b.id for b in stored]
        assert len(ids) == len(set(ids))
        for block in stored:
            if block.state == ToolResultState.INTERRUPTED:
                output = block.output
                last = output if isinstance(output, str) else output[-1].text  # type: ignore[union-attr]
                assert INTERRUPTED_TEXT in last
            elif block.state == ToolResultState.SUCCESS:
                texts = "".join(b.text for b in block.output if isinstance(b, TextBlock))  # type: ignore[union-attr]
                assert texts.startswith("PART0 ")
            else:
                raise AssertionError(f"unexpected state {block.state}")

    report = await cancel_sweep(make, user, mode=mode, check=one_result_per_call)
    assert report.points > 0
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert report.outcomes["interrupted"] > 0
    if mode == "outer":
        assert any(r.propagated_cancel for r in report.runs)
    # Cancellation travelled through the outer middleware, never turned into a result.
    assert "outer saw Cancelled" in log
    assert all(entry == "outer saw Cancelled" for entry in log)


async def test_cancelled_call_tool_through_two_middlewares_emits_nothing_more(autojump_clock):
    for delay in (0.0, 0.05, 0.1, 0.15, 0.6, 1.2, 1.6, 1.7):
        log: list[str] = []
        kit = two_middleware_toolkit(log)
        emit = Recorder()
        results: list[ToolResponse] = []
        with trio.move_on_after(delay) as scope:
            results.append(await kit.call_tool(tc("slow_stream", parts=3), emit=emit))
        assert scope.cancelled_caught, delay
        assert results == []
        assert all(c.state == ToolResultState.RUNNING for c in emit.chunks)
    log = []
    kit = two_middleware_toolkit(log)
    emit = Recorder()
    response = await kit.call_tool(tc("slow_stream", parts=3), emit=emit)
    assert emit.texts() == ["PART0 ", "PART1 ", "PART2 ", "END"]
    assert response.text() == "PART0 PART1 PART2 END"


# -- found by this hunt, fixed ---------------------------------------------------------------------


async def test_emitting_after_the_call_returned_is_refused() -> None:
    kit = Toolkit()

    async def t() -> str:
        """Answer."""
        return "ok"

    kit.register_function(t)
    saved: list[Any] = []

    @kit.register_middleware
    async def leak(kwargs: Any, next_handler: Any, emit: Any) -> Any:
        saved.append(emit)
        return await next_handler()

    got: list[ToolChunk] = []

    async def listener(chunk: ToolChunk) -> None:
        got.append(chunk)

    await kit.call_tool(ToolCallBlock(id="c", name="t", input="{}"), emit=listener)
    with pytest.raises(DeveloperOrientedException, match="after that call returned"):
        await saved[0](ToolChunk(content=[TextBlock(text="late")]))
    assert len(got) == 1

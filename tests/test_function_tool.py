"""FunctionTool and ToolBase: calling conventions, streaming through ``emit``, conversions."""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import jsonschema
import pytest
import trio

from trioagent.exception import ToolInputValidationError
from trioagent.message import TextBlock, ToolResultBlock, ToolResultState
from trioagent.permission import (
    PermissionBehavior,
    PermissionContext,
    PermissionDecision,
    PermissionRule,
)
from trioagent.tool import FunctionTool, ToolBase, ToolChunk, ToolResponse


class Recorder:
    """An emit that records what it receives."""

    def __init__(self) -> None:
        self.chunks: list[ToolChunk] = []

    async def __call__(self, chunk: ToolChunk) -> None:
        self.chunks.append(chunk)

    def texts(self) -> list[str]:
        return [b.text for c in self.chunks for b in c.content if isinstance(b, TextBlock)]


async def test_sync_function_runs_inline_in_the_calling_thread():
    seen: list[int] = []

    def add(a: int, b: int) -> str:
        seen.append(threading.get_ident())
        return f"Result: {a + b}"

    emit = Recorder()
    response = await FunctionTool(add).run({"a": 3, "b": 5}, emit)
    assert emit.texts() == ["Result: 8"]
    assert emit.chunks[0].state == ToolResultState.RUNNING
    assert response.text() == "Result: 8"
    assert response.state == ToolResultState.SUCCESS
    assert seen == [threading.get_ident()]


async def test_blocking_sync_function_runs_in_a_worker_thread():
    seen: dict[str, Any] = {}
    main_thread = threading.get_ident()

    def slow(n: int, emit) -> int:
        seen["thread"] = threading.get_ident()
        emit(ToolChunk(content=[TextBlock(text="working")], is_last=False))
        seen["emitted_before_return"] = True
        return n * 2

    emit = Recorder()
    response = await FunctionTool(slow, blocking=True).run({"n": 21}, emit)
    assert seen["thread"] != main_thread
    assert emit.texts() == ["working", "42"]
    assert response.text() == "working42"


async def test_async_function_streams_through_emit_and_returns_final_value():
    async def count(n: int, emit) -> str:
        for i in range(n):
            await emit(ToolChunk(content=[TextBlock(text=f"Number: {i} ")], is_last=False))
            await trio.lowlevel.checkpoint()
        return "done"

    tool = FunctionTool(count)
    assert "emit" not in tool.input_schema["properties"]
    emit = Recorder()
    response = await tool.run({"n": 3}, emit)
    assert emit.texts() == ["Number: 0 ", "Number: 1 ", "Number: 2 ", "done"]
    assert [c.is_last for c in emit.chunks] == [False, False, False, True]
    assert response.text() == "Number: 0 Number: 1 Number: 2 done"


async def test_sync_inline_emit_is_buffered_until_return():
    def report(emit) -> None:
        emit(ToolChunk(content=[TextBlock(text="a")]))
        emit(ToolChunk(content=[TextBlock(text="b")]))

    emit = Recorder()
    response = await FunctionTool(report).run({}, emit)
    assert emit.texts() == ["a", "b"]
    assert response.text() == "ab"


async def test_sync_inline_emitted_chunks_survive_an_exception():
    def half(emit) -> None:
        emit(ToolChunk(content=[TextBlock(text="partial")]))
        raise RuntimeError("broke")

    emit = Recorder()
    with pytest.raises(RuntimeError, match="broke"):
        await FunctionTool(half).run({}, emit)
    assert emit.texts() == ["partial"]


async def test_sync_generator_streams_each_item():
    def count_to(n: int) -> Iterator[Any]:
        for i in range(1, n + 1):
            yield ToolChunk(content=[TextBlock(text=str(i))])
        yield "!"

    emit = Recorder()
    response = await FunctionTool(count_to).run({"n": 3}, emit)
    assert emit.texts() == ["1", "2", "3", "!"]
    assert response.text() == "123!"


async def test_blocking_sync_generator_steps_in_a_thread():
    threads: set[int] = set()

    def gen() -> Iterator[str]:
        threads.add(threading.get_ident())
        yield "x"
        threads.add(threading.get_ident())
        yield "y"

    response = await FunctionTool(gen, blocking=True).run({})
    assert response.text() == "xy"
    assert threading.get_ident() not in threads


def test_async_generator_functions_are_rejected():
    async def agen() -> Any:
        yield "x"

    with pytest.raises(TypeError, match="emit"):
        FunctionTool(agen)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("text", "text"),
        (5, "5"),
        ({"city": "東京", "n": 1}, '{"city": "東京", "n": 1}'),
        ([TextBlock(text="a"), TextBlock(text="b")], "ab"),
        (TextBlock(text="blk"), "blk"),
    ],
)
async def test_return_values_become_the_final_chunk(value, expected):
    async def tool() -> Any:
        return value

    emit = Recorder()
    response = await FunctionTool(tool).run({}, emit)
    assert len(emit.chunks) == 1
    assert response.text() == expected


async def test_returning_none_emits_nothing():
    async def quiet() -> None:
        return None

    emit = Recorder()
    response = await FunctionTool(quiet).run({}, emit)
    assert emit.chunks == []
    assert response == ToolResponse(id=response.id)


async def test_returned_tool_response_is_final_and_streamed_once_when_nothing_was_emitted():
    async def answer(query: str) -> ToolResponse:
        return ToolResponse(content=[TextBlock(text=f"'{query}' results")], metadata={"hits": 2})

    emit = Recorder()
    response = await FunctionTool(answer).run({"query": "q"}, emit)
    assert emit.texts() == ["'q' results"]
    assert response.metadata == {"hits": 2}
    assert response.text() == "'q' results"


async def test_returned_tool_response_after_streaming_is_authoritative():
    async def progress(emit) -> ToolResponse:
        await emit(ToolChunk(content=[TextBlock(text="50%")], is_last=False))
        return ToolResponse(content=[TextBlock(text="complete")])

    emit = Recorder()
    response = await FunctionTool(progress).run({}, emit)
    assert emit.texts() == ["50%"]
    assert response.text() == "complete"


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


@attrs.define
class Place:
    city: str
    country: str = "JP"


async def test_attrs_and_enum_arguments_are_structured():
    got: dict[str, Any] = {}

    async def weather(place: Place, unit: Unit = Unit.C) -> str:
        got.update(place=place, unit=unit)
        return "ok"

    weather.__annotations__ = {"place": Place, "unit": Unit, "return": str}
    tool = FunctionTool(weather)
    assert tool.input_schema["properties"]["place"] == {"$ref": "#/$defs/Place"}
    await tool.run({"place": {"city": "Tokyo"}, "unit": "fahrenheit"})
    assert got == {"place": Place(city="Tokyo"), "unit": Unit.F}
    with pytest.raises(ToolInputValidationError, match="argument 'place'"):
        await tool.run({"place": {"town": "Tokyo"}})


async def test_tool_base_keyword_only_call_and_default_behaviour():
    class Echo(ToolBase):
        name = "echo"
        description = "Echo."
        input_schema = {"type": "object", "properties": {"x": {"type": "string"}}}  # noqa: RUF012

        async def call(self, emit, /, **kwargs):  # type: ignore[no-untyped-def]
            return kwargs

    echo = Echo()
    response = await echo(x="hi")
    assert response.text() == '{"x": "hi"}'
    with pytest.raises(TypeError, match="keyword arguments only"):
        await echo("positional")

    class NoCall(ToolBase):
        name = "nocall"

    with pytest.raises(NotImplementedError):
        await NoCall()()

    class External(ToolBase):
        name = "ext"
        is_external_tool = True

    with pytest.raises(RuntimeError, match="external tool"):
        await External()()


async def test_tool_skipping_super_init_still_runs():
    class Bare(ToolBase):
        name = "bare"

        def __init__(self) -> None:  # no super().__init__()
            self.greeting = "hello"

        async def call(self, emit, /, **kwargs):  # type: ignore[no-untyped-def]
            return self.greeting

    tool = Bare()
    assert tool.middlewares == []
    assert (await tool()).text() == "hello"


async def test_permission_helpers():
    tool = FunctionTool(lambda: None, name="noop")
    decision = await tool.check_permissions({}, PermissionContext())
    assert decision.behavior == PermissionBehavior.ASK
    assert decision.message == "Custom function tools must be explicitly allowed by the user."
    allowed = PermissionDecision(PermissionBehavior.ALLOW, "fine")
    tool = FunctionTool(lambda: None, name="noop", permission=allowed)
    got = await tool.check_permissions({}, PermissionContext())
    assert got == allowed
    assert got is not allowed
    assert await tool.check_read_only({}) is False
    assert await tool.match_rule(None, {}) is True
    assert await tool.match_rule("anything", {}) is False
    assert await tool.generate_suggestions({}) == [
        PermissionRule(tool_name="noop", rule_content=None, behavior="allow", source="suggested")
    ]
    base = await ToolBase.check_permissions(tool, {}, PermissionContext())
    assert base.behavior == PermissionBehavior.PASSTHROUGH


async def test_check_external_result_validates_successful_metadata_only():
    tool = FunctionTool(
        lambda: None,
        name="ext",
        metadata_schema={"type": "object", "required": ["code"]},
    )
    ok = ToolResultBlock(id="c", name="ext", state="success", metadata={"code": 0})
    await tool.check_external_result(ok)
    bad = ToolResultBlock(id="c", name="ext", state="success", metadata={})
    with pytest.raises(jsonschema.ValidationError):
        await tool.check_external_result(bad)
    failed = ToolResultBlock(id="c", name="ext", state="error", metadata={})
    await tool.check_external_result(failed)


def test_background_attributes():
    tool = FunctionTool(lambda: None, name="bg", is_background=True, background_after=2.5)
    assert (tool.is_background, tool.background_after) == (True, 2.5)
    plain = FunctionTool(lambda: None, name="fg")
    assert (plain.is_background, plain.background_after) == (False, None)
    with pytest.raises(ValueError, match="background"):
        FunctionTool(lambda: None, name="s", is_state_injected=True, is_background=True)
    with pytest.raises(ValueError, match="positive"):
        FunctionTool(lambda: None, name="s", background_after=0)


def test_dangerous_path_helpers(tmp_path, monkeypatch):
    tool = FunctionTool(lambda: None, name="t")
    assert tool._is_dangerous_path(str(tmp_path / ".bashrc"))
    assert tool._is_dangerous_path(str(tmp_path / ".git" / "config"))
    assert not tool._is_dangerous_path(str(tmp_path / "main.py"))
    monkeypatch.chdir(tmp_path)
    context = PermissionContext()
    assert tool._path_in_allowed_working_path(str(tmp_path / "a.txt"), context)
    assert not tool._path_in_allowed_working_path("/somewhere/else.txt", context)

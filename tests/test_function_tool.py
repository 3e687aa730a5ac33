"""FunctionTool and ToolBase: calling conventions, streaming through ``emit``, conversions."""

from __future__ import annotations

import enum
import json
import threading
from collections.abc import Iterator
from typing import Any, Literal

import attrs
import jsonschema
import pydantic
import pytest
import trio

from trioagent.exception import ToolInputValidationError
from trioagent.message import TextBlock, ToolCallBlock, ToolResultBlock, ToolResultState
from trioagent.permission import (
    PermissionBehavior,
    PermissionContext,
    PermissionDecision,
    PermissionRule,
)
from trioagent.tool import FunctionTool, ToolBase, ToolChunk, Toolkit, ToolResponse


class Recorder:
    """An emit that records what it receives."""

    def __init__(self) -> None:
        self.chunks: list[ToolChunk] = []

    async def __call__(self, chunk: ToolChunk) -> None:
        self.chunks.append(chunk)

    def texts(self) -> list[str]:
        return [b.text for c in self.chunks for b in c.content if isinstance(b, TextBlock)]


async def test_sync_function_runs_in_a_worker_thread_and_emits_from_it():
    seen: dict[str, Any] = {}
    main_thread = threading.get_ident()

    def slow(n: int, emit) -> int:
        seen["thread"] = threading.get_ident()
        emit(ToolChunk(content=[TextBlock(text="working")], is_last=False))
        seen["emitted_before_return"] = True
        return n * 2

    emit = Recorder()
    response = await FunctionTool(slow).run({"n": 21}, emit)
    assert seen["thread"] != main_thread
    assert emit.texts() == ["working", "42"]
    assert emit.chunks[-1].state == ToolResultState.RUNNING
    assert response.text() == "working42"
    assert response.state == ToolResultState.SUCCESS


def test_blocking_is_deprecated_and_ignored():
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.warns(DeprecationWarning, match="blocking= is deprecated"):
        tool = FunctionTool(add, blocking=True)
    assert tool.isolate == "thread"


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


async def test_sync_emit_delivers_each_chunk_in_order():
    def report(emit) -> None:
        emit(ToolChunk(content=[TextBlock(text="a")]))
        emit(ToolChunk(content=[TextBlock(text="b")]))

    emit = Recorder()
    response = await FunctionTool(report).run({}, emit)
    assert emit.texts() == ["a", "b"]
    assert response.text() == "ab"


async def test_sync_emitted_chunks_survive_an_exception():
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


async def test_sync_generator_steps_in_a_worker_thread():
    threads: set[int] = set()

    def gen() -> Iterator[str]:
        threads.add(threading.get_ident())
        yield "x"
        threads.add(threading.get_ident())
        yield "y"

    response = await FunctionTool(gen).run({})
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


@attrs.define
class Account:
    _token: str
    owner: str = "me"


class Item(pydantic.BaseModel):
    q: int


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Level(enum.Enum):
    LOW = 1


@attrs.define
class Spot:
    street: str


@attrs.define
class Size:
    n: int


def _call(name: str, arguments: dict[str, Any]) -> ToolCallBlock:
    return ToolCallBlock(id="call_1", name=name, input=json.dumps(arguments))


async def test_attrs_fields_are_read_by_the_alias_the_schema_shows() -> None:
    got: list[Account] = []

    def login(account: Account) -> str:
        got.append(account)
        return "ok"

    toolkit = Toolkit()
    toolkit.register_function(login)
    schema = toolkit.get_tool("login").input_schema
    assert set(schema["$defs"]["Account"]["properties"]) == {"token", "owner"}
    response = await toolkit.call_tool(_call("login", {"account": {"token": "t"}}))
    assert response.state == ToolResultState.SUCCESS, response.text()
    assert got == [Account("t")]


async def test_pydantic_models_are_validated_inside_containers() -> None:
    got: dict[str, Any] = {}

    def order(
        items: list[Item], extra: Item | None = None, by_id: dict[str, Item] | None = None
    ) -> None:
        got.update(items=items, extra=extra, by_id=by_id)

    tool = FunctionTool(order)
    await tool.run({"items": [{"q": 1}], "extra": {"q": 2}, "by_id": {"a": {"q": 3}}})
    assert got == {"items": [Item(q=1)], "extra": Item(q=2), "by_id": {"a": Item(q=3)}}
    await tool.run({"items": [], "extra": None})
    assert got["extra"] is None
    with pytest.raises(
        ToolInputValidationError, match=r"argument 'items': .*\(at \$\.items\[1\]\.q\)"
    ):
        await tool.run({"items": [{"q": 1}, {"q": "many"}]})


async def test_literal_of_enum_members_gives_the_member() -> None:
    got: list[Any] = []

    def paint(color: Literal[Color.RED, Color.GREEN]) -> None:
        got.append(color)

    tool = FunctionTool(paint)
    assert tool.input_schema["properties"]["color"] == {"enum": ["red", "green"], "type": "string"}
    await tool.run({"color": "red"})
    assert got == [Color.RED]
    assert got[0] is Color.RED
    with pytest.raises(
        ToolInputValidationError, match="expected one of 'red', 'green', got 'blue'"
    ):
        await tool.run({"color": "blue"})


async def test_tuples_sets_and_non_string_keys_get_their_declared_types() -> None:
    got: dict[str, Any] = {}

    def collect(
        pair: tuple[int, str], tags: set[str], ids: frozenset[int], names: dict[int, str]
    ) -> None:
        got.update(pair=pair, tags=tags, ids=ids, names=names)

    tool = FunctionTool(collect)
    arguments = {"pair": [1, "a"], "tags": ["x"], "ids": [1], "names": {"7": "n"}}
    await tool.run(arguments)
    assert got == {"pair": (1, "a"), "tags": {"x"}, "ids": frozenset({1}), "names": {7: "n"}}
    assert isinstance(got["tags"], set)
    with pytest.raises(ToolInputValidationError) as bad:
        await tool.run({**arguments, "pair": [1], "names": {"seven": "n"}})
    assert "argument 'pair': expected an array of 2 items, got 1 (at $.pair)" in bad.value.message
    assert "argument 'names': key 'seven' is not a valid int (at $.names['seven'])" in (
        bad.value.message
    )


async def test_integral_float_is_accepted_for_an_int() -> None:
    got: list[Any] = []

    def grow(n: int, size: Size) -> str:
        got.extend([n, size])
        return "ok"

    toolkit = Toolkit()
    toolkit.register_function(grow)
    response = await toolkit.call_tool(_call("grow", {"n": 2.0, "size": {"n": 3.0}}))
    assert response.state == ToolResultState.SUCCESS, response.text()
    assert got == [2, Size(3)]
    assert type(got[0]) is int
    assert type(got[1].n) is int
    with pytest.raises(
        ToolInputValidationError, match=r"expected an integer, got 2\.5 \(at \$\.n\)"
    ):
        await FunctionTool(grow).run({"n": 2.5, "size": {"n": 1}})


async def test_union_members_are_tried_in_declaration_order() -> None:
    got: dict[str, Any] = {}

    def pick(
        a: Spot | dict[str, int],
        b: Spot | list[Spot],
        c: list[Color] | Color,
        d: Color | Level,
        e: Any | Spot,
        f: float | int,
    ) -> str:
        got.update(a=a, b=b, c=c, d=d, e=e, f=f)
        return "ok"

    toolkit = Toolkit()
    toolkit.register_function(pick)
    arguments = {
        "a": {"street": "s"},
        "b": [{"street": "t"}],
        "c": "red",
        "d": 1,
        "e": {"street": "u"},
        "f": 2,
    }
    response = await toolkit.call_tool(_call("pick", arguments))
    assert response.state == ToolResultState.SUCCESS, response.text()
    assert got == {
        "a": Spot("s"),
        "b": [Spot("t")],
        "c": Color.RED,
        "d": Level.LOW,
        "e": Spot("u"),  # a catch-all member is tried last
        "f": 2,
    }
    assert type(got["f"]) is int  # the value's exact JSON type wins over declaration order
    other = {"a": {"k": 1}, "b": {"street": "v"}, "c": ["green"], "d": "blue", "e": 3, "f": 1.5}
    response = await toolkit.call_tool(_call("pick", other))
    assert response.state == ToolResultState.SUCCESS, response.text()
    assert got == {
        "a": {"k": 1},
        "b": Spot("v"),
        "c": [Color.GREEN],
        "d": Color.BLUE,
        "e": 3,
        "f": 1.5,
    }


async def test_union_without_a_fitting_member_is_an_error_result() -> None:
    calls: list[Any] = []

    def place(where: Spot | list[Spot]) -> None:
        calls.append(where)

    toolkit = Toolkit()
    toolkit.register_function(place)
    response = await toolkit.call_tool(_call("place", {}), tool_input={"where": "here"})
    assert response.state == ToolResultState.ERROR
    assert response.text() == (
        "Input validation failed for tool 'place': "
        "argument 'where': expected Spot | list[Spot], got 'here' (at $.where)"
    )
    assert calls == []


async def test_union_whose_members_all_refuse_names_each_reason() -> None:
    calls: list[Any] = []

    def locate(where: Spot | dict[str, int]) -> None:
        calls.append(where)

    toolkit = Toolkit()
    toolkit.register_function(locate)
    # The schema accepts it (extra keys are allowed by Spot's schema); the conversion does not.
    response = await toolkit.call_tool(_call("locate", {"where": {"street": "s", "floor": 2}}))
    assert response.state == ToolResultState.ERROR
    assert response.text() == (
        "Input validation failed for tool 'locate': argument 'where': an object matches no "
        "member of Spot | dict[str, int] (at $.where) "
        "[as Spot: extra fields found: floor (at $.where); "
        "as dict[str, int]: expected an integer, got 's' (at $.where['street'])]"
    )
    assert "cattrs" not in response.text()
    assert calls == []


async def test_conversion_errors_name_every_bad_argument() -> None:
    calls: list[Any] = []

    def mark(level: Level, flag: Color | Level, spots: list[Spot]) -> None:
        calls.append(level)

    tool = FunctionTool(mark)
    with pytest.raises(ToolInputValidationError) as bad:
        await tool.run({"level": True, "flag": False, "spots": [{"street": 1}, {}]})
    assert bad.value.message == (
        "Input validation failed for tool 'mark': "
        "argument 'level': True is not a valid Level (one of: 1) (at $.level); "
        "argument 'flag': expected Color | Level, got False (at $.flag); "
        "argument 'spots': expected a string, got 1 (at $.spots[0].street); "
        "argument 'spots': required field missing (at $.spots[1].street)"
    )
    assert calls == []


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

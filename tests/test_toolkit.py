"""Toolkit: registration, schemas, groups and reset_tools, validate_call, call_tool.

The second half holds the adversarial edges: misbehaving middlewares, tools failing
mid-stream, blocking tools being cancelled, group bookkeeping, huge inputs, chunk accumulation
corner cases, and a cancel sweep through two toolkit-wide middlewares.
"""

from __future__ import annotations

import collections.abc
import json
import numbers
import socket
from typing import Any, TypedDict

import agent_kit
import attrs
import pytest
import trio

from trioagent.agent import Agent
from trioagent.exception import (
    DeveloperOrientedException,
    ToolGroupInactiveError,
    ToolInputValidationError,
    ToolJSONDecodeError,
    ToolNotFoundError,
)
from trioagent.message import (
    Base64Source,
    DataBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
)
from trioagent.permission import PermissionContext, PermissionDecision
from trioagent.testing import SweepRun, cancel_sweep
from trioagent.tool import FunctionTool, ToolBase, ToolChunk, ToolGroup, Toolkit, ToolResponse

INTERRUPTED_TEXT = "interrupted"


@attrs.define
class ToolContext:
    activated_groups: list[str] = attrs.field(factory=list)


@attrs.define
class FakeState:
    """The part of AgentState the toolkit reads (duck-typed)."""

    tool_context: ToolContext = attrs.field(factory=ToolContext)


class Recorder:
    def __init__(self) -> None:
        self.chunks: list[ToolChunk] = []

    async def __call__(self, chunk: ToolChunk) -> None:
        self.chunks.append(chunk)

    def texts(self) -> list[str]:
        return [b.text for c in self.chunks for b in c.content if isinstance(b, TextBlock)]


class Tool1(ToolBase):
    name = "tool_1"
    description = "A simple tool for testing."
    input_schema = {"type": "object", "properties": {}}  # noqa: RUF012
    is_concurrency_safe = True
    is_read_only = True

    async def call(self, emit, /, **kwargs):  # type: ignore[no-untyped-def]
        return ToolChunk(content=[TextBlock(text="Hello, world!")])


class Tool2(ToolBase):
    """Streams text ids a, b, b then data ids 1, 2, 1 (AgentScope's merge scenario)."""

    name = "tool_2"
    description = "Test tool 2."
    input_schema = {"type": "object", "properties": {}}  # noqa: RUF012

    async def call(self, emit, /, **kwargs):  # type: ignore[no-untyped-def]
        for text, id in (("123", "a"), ("456", "b"), ("789", "b")):
            await emit(ToolChunk(content=[TextBlock(text=text, id=id)]))
        for data, id in (("abc", "1"), ("***", "2"), ("def", "1")):
            source = Base64Source(data=data, media_type="image/jpeg")
            await emit(ToolChunk(content=[DataBlock(id=id, source=source)]))


def call(name: str, arguments: Any = None, id: str = "call_1") -> ToolCallBlock:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCallBlock(id=id, name=name, input=text)


def test_schemas_in_registration_order():
    assert Toolkit().get_tool_schemas() == []
    toolkit = Toolkit(tools=[Tool1(), Tool2()])
    assert toolkit.get_tool_schemas() == [
        {
            "type": "function",
            "function": {
                "name": "tool_1",
                "description": "A simple tool for testing.",
                "parameters": {"type": "object", "properties": {}},
            },
        },
        {
            "type": "function",
            "function": {
                "name": "tool_2",
                "description": "Test tool 2.",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]


def test_schema_parameters_are_title_free_copies():
    schema = {"title": "T", "type": "object", "properties": {"q": {"title": "Q", "type": "string"}}}
    toolkit = Toolkit()
    toolkit.register_function(lambda q: q, name="t", input_schema=schema)
    parameters = toolkit.get_tool_schemas()[0]["function"]["parameters"]
    assert parameters == {"type": "object", "properties": {"q": {"type": "string"}}}
    assert schema["title"] == "T"  # the tool's own schema is untouched


async def test_single_chunk_tool():
    toolkit = Toolkit(tools=[Tool1()])
    emit = Recorder()
    response = await toolkit.call_tool(call("tool_1", id="test_1"), emit=emit)
    assert len(emit.chunks) == 1
    assert emit.chunks[0].state == ToolResultState.RUNNING
    assert emit.chunks[0].is_last is True
    assert response.id == "test_1"
    assert response.state == ToolResultState.SUCCESS
    assert response.text() == "Hello, world!"


async def test_streaming_tool_merges_like_agentscope():
    toolkit = Toolkit(tools=[Tool2()])
    emit = Recorder()
    response = await toolkit.call_tool(call("tool_2", id="test_2"), emit=emit)
    assert len(emit.chunks) == 6
    assert [b.id for c in emit.chunks for b in c.content] == ["a", "b", "b", "1", "2", "1"]
    assert response.id == "test_2"
    text, data1, data2 = response.content
    assert (text.id, text.text) == ("a", "123456789")  # type: ignore[union-attr]
    assert (data1.id, data1.source.data) == ("1", "abcdef")  # type: ignore[union-attr]
    assert (data2.id, data2.source.data) == ("2", "***")  # type: ignore[union-attr]


async def test_register_function_variants():
    toolkit = Toolkit()

    @toolkit.register_function
    def count_to_n(n: int) -> Any:
        """Count from 1 to n.

        Args:
            n: The number to count to
        """
        for i in range(1, n + 1):
            yield ToolChunk(content=[TextBlock(text=str(i))])

    async def generate_sequence(start: int, end: int, emit) -> None:
        """Generate a sequence of numbers."""
        for i in range(start, end + 1):
            await emit(ToolChunk(content=[TextBlock(text=f"Number: {i}")]))

    def get_city() -> dict[str, str]:
        """Get a city."""
        return {"city": "成都"}

    assert callable(count_to_n)  # the decorator hands the function back
    assert toolkit.register_tool_function(generate_sequence) is generate_sequence
    toolkit.register_function(get_city, name="city")
    assert [s["function"]["name"] for s in toolkit.get_tool_schemas()] == [
        "count_to_n",
        "generate_sequence",
        "city",
    ]
    assert toolkit.get_tool_schemas()[0]["function"] == {
        "name": "count_to_n",
        "description": "Count from 1 to n.",
        "parameters": {
            "type": "object",
            "properties": {"n": {"type": "integer", "description": "The number to count to"}},
            "required": ["n"],
        },
    }
    emit = Recorder()
    response = await toolkit.call_tool(call("count_to_n", {"n": 3}), emit=emit)
    assert (emit.texts(), response.text()) == (["1", "2", "3"], "123")
    response = await toolkit.call_tool(call("generate_sequence", {"start": 5, "end": 7}))
    assert response.text() == "Number: 5Number: 6Number: 7"
    response = await toolkit.call_tool(call("city"))
    assert response.text() == '{"city": "成都"}'
    assert isinstance(toolkit.get_tool("city"), FunctionTool)


def test_add_replace_remove_get():
    toolkit = Toolkit(tools=[Tool1(), Tool2()])
    replacement = Tool1()
    toolkit.add_tool(replacement)
    assert [s["function"]["name"] for s in toolkit.get_tool_schemas()] == ["tool_2", "tool_1"]
    assert toolkit.get_tool("tool_1") is replacement
    toolkit.remove_tool("tool_1")
    assert toolkit.get_tool("tool_1") is None
    toolkit.remove_tool(["tool_2", "missing"])
    assert toolkit.get_tool_schemas() == []
    with pytest.raises(ValueError, match="Cannot find group 'nope'"):
        toolkit.add_tool(Tool1(), "nope")
    with pytest.raises(TypeError, match="ToolBase"):
        toolkit.add_tool(object())  # type: ignore[arg-type]

    class BadSchema(Tool1):
        name = "bad"
        input_schema = {"type": "array"}  # noqa: RUF012

    with pytest.raises(ValueError, match="Invalid input_schema"):
        toolkit.add_tool(BadSchema())
    with pytest.raises(ValueError, match="Invalid input_schema"):
        Toolkit(tools=[BadSchema()])


# -- groups and reset_tools ---------------------------------------------------------------------


def _grouped_toolkit() -> Toolkit:
    return Toolkit(
        tool_groups=[
            ToolGroup("group_1", description="Group 1"),
            ToolGroup(
                "group_2",
                description="Group 2",
                tools=[Tool1(), Tool2()],
                instructions="This is group 2.",
            ),
        ]
    )


def test_group_validation():
    assert [s["function"]["name"] for s in Toolkit(tools=[Tool1()]).get_tool_schemas()] == [
        "tool_1"
    ]
    with pytest.raises(ValueError, match="duplicate"):
        Toolkit(
            tool_groups=[
                ToolGroup("group_2", description="Group 2"),
                ToolGroup("group_2", description="Group 2"),
            ]
        )
    with pytest.raises(ValueError, match="reserved"):
        Toolkit(tool_groups=[ToolGroup("basic")])
    with pytest.raises(ValueError, match="description is required"):
        ToolGroup("g")
    tools = [Tool1()]
    group = ToolGroup("g", description="d", tools=tools)
    group.tools.append(Tool2())
    assert len(tools) == 1  # the caller's list is copied


def test_meta_tool_schema_and_group_filtering():
    toolkit = Toolkit(tool_groups=[ToolGroup("group_1", description="Group 1")])
    schemas = toolkit.get_tool_schemas()
    assert schemas == [
        {
            "type": "function",
            "function": {
                "name": "reset_tools",
                "description": toolkit.meta_tool.description,
                "parameters": {
                    "properties": {
                        "group_1": {"default": False, "description": "Group 1", "type": "boolean"}
                    },
                    "type": "object",
                },
            },
        }
    ]
    assert "activate/deactivate" in toolkit.meta_tool.description
    toolkit = _grouped_toolkit()
    assert [s["function"]["name"] for s in toolkit.get_tool_schemas()] == ["reset_tools"]
    assert [s["function"]["name"] for s in toolkit.get_tool_schemas(["group_2"])] == [
        "reset_tools",
        "tool_1",
        "tool_2",
    ]
    assert set(toolkit.get_tool_schemas()[0]["function"]["parameters"]["properties"]) == {
        "group_1",
        "group_2",
    }


async def test_reset_tools_activates_groups_in_the_state():
    toolkit = _grouped_toolkit()
    state = FakeState()
    emit = Recorder()
    response = await toolkit.call_tool(
        call("reset_tools", {"group_2": True}), state=state, emit=emit
    )
    assert len(emit.chunks) == 1
    assert state.tool_context.activated_groups == ["group_2"]
    assert response.state == ToolResultState.SUCCESS
    assert response.text() == (
        "The currently activated tool group(s): group_2.\n"
        "<tool-instructions>\n"
        "The tool instructions are a collection of suggestions, rules and notifications about "
        "how to use the tools in the activated groups.\n"
        '<group name="group_2">This is group 2.</group>\n'
        "</tool-instructions>"
    )
    response = await toolkit.call_tool(
        call("reset_tools", {"group_2": True, "group_1": True}), state=state
    )
    assert response.text().startswith("The currently activated tool group(s): group_1, group_2.\n")
    response = await toolkit.call_tool(call("reset_tools", {}), state=state)
    assert response.text() == "All tool groups are currently deactivated."
    assert state.tool_context.activated_groups == []


async def test_reset_tools_rejects_bad_arguments():
    toolkit = _grouped_toolkit()
    state = FakeState()
    response = await toolkit.call_tool(
        call("reset_tools", {"group_9": True}), state=state, tool_input={"group_9": True}
    )
    assert response.state == ToolResultState.ERROR
    assert response.text() == (
        "Invalid group name(s): group_9. The current available groups are: group_1, group_2"
    )
    response = await toolkit.call_tool(
        call("reset_tools"), state=state, tool_input={"group_1": "yes"}
    )
    assert response.state == ToolResultState.ERROR
    assert "should be a bool value" in response.text()
    with pytest.raises(DeveloperOrientedException, match="agent state"):
        await toolkit.call_tool(call("reset_tools", {"group_1": True}))


async def test_check_tool_available_and_inactive_group_results():
    toolkit = _grouped_toolkit()
    with pytest.raises(ToolGroupInactiveError) as info:
        toolkit.check_tool_available("tool_1", [])
    assert info.value.message == (
        "ToolGroupInactiveError: The tool 'tool_1' in group 'group_2' is currently inactive. "
        "You should first activate the group by calling the 'reset_tools' tool."
    )
    assert isinstance(toolkit.check_tool_available("tool_1", ["group_2"]), Tool1)
    with pytest.raises(ToolNotFoundError):
        toolkit.check_tool_available("nope", ["group_2"])
    state = FakeState()
    response = await toolkit.call_tool(call("tool_1"), state=state)
    assert response.state == ToolResultState.ERROR
    assert "group 'group_2' is currently inactive" in response.text()
    state.tool_context.activated_groups.append("group_2")
    response = await toolkit.call_tool(call("tool_1"), state=state)
    assert response.text() == "Hello, world!"


# -- validate_call ------------------------------------------------------------------------------


def _add_toolkit() -> Toolkit:
    toolkit = Toolkit()

    def add(a: int, b: int = 0) -> int:
        """Add."""
        return a + b

    toolkit.register_function(add)
    return toolkit


def test_validate_call_parses_and_repairs():
    toolkit = _add_toolkit()
    tool, arguments = toolkit.validate_call(call("add", {"a": 1, "b": 2}))
    assert tool.name == "add"
    assert arguments == {"a": 1, "b": 2}
    # The schema-guided repair completes a truncated object and fills schema defaults.
    assert toolkit.validate_call(call("add", '{"a": 1'))[1] == {"a": 1, "b": 0}
    assert toolkit.validate_call(call("add", '{"a": "42"}'))[1] == {"a": 42, "b": 0}
    assert toolkit.validate_call(call("add", '{"a": 42}'))[1] == {"a": 42}  # valid: verbatim
    with pytest.raises(ToolInputValidationError):
        toolkit.validate_call(call("add", "  "))  # blank → {} → "a" missing


def test_validate_call_errors_are_model_readable():
    toolkit = _add_toolkit()
    with pytest.raises(ToolNotFoundError) as not_found:
        toolkit.validate_call(call("sub"))
    assert not_found.value.message == "ToolNotFoundError: The tool named 'sub' doesn't exist."
    with pytest.raises(ToolInputValidationError) as invalid:
        toolkit.validate_call(call("add", {"a": [1]}))
    assert invalid.value.message == (
        "Input validation failed for tool 'add': [1] is not of type 'integer' (at $.a)"
    )
    with pytest.raises(ToolInputValidationError, match=r"'a' is a required property \(at \$\)"):
        toolkit.validate_call(call("add", {"b": 1}))
    with pytest.raises(ToolJSONDecodeError) as bad_json:
        toolkit.validate_call(call("add", "not json"))
    message = bad_json.value.message
    assert message.startswith("<system-reminder>Error: When decoding your tool arguments")
    assert "your_tool_arguments = 'not json'" in message
    assert message.endswith(
        "**You should recorrect the arguments in JSON format.**</system-reminder>"
    )
    with pytest.raises(ToolJSONDecodeError, match="dict object is expected"):
        toolkit.validate_call(call("add", "[1, 2]"))
    with pytest.raises(ToolJSONDecodeError, match="NaN and Infinity"):
        toolkit.validate_call(call("add", '{"a": NaN}'))


def test_long_bad_arguments_are_truncated_in_the_message():
    toolkit = _add_toolkit()
    raw = "x" * 150 + "y" * 150
    with pytest.raises(ToolJSONDecodeError) as info:
        toolkit.validate_call(call("add", raw))
    message = info.value.message
    assert repr("x" * 100 + "[TRUNCATE]" + "y" * 100) in message
    assert '"[TRUNCATE]" is used here' in message


# -- call_tool error handling -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool_call", "expected"),
    [
        (call("missing"), "ToolNotFoundError: The tool named 'missing' doesn't exist."),
        (call("add", "{{{{not json"), "<system-reminder>"),
        (call("add", {"a": "x"}), "Input validation failed for tool 'add'"),
        (call("add", {"a": 1, "b": 2, "c": 3}), "TypeError: "),
    ],
    ids=["unknown", "unparseable", "schema-invalid", "unexpected-argument"],
)
async def test_bad_calls_become_error_results(tool_call, expected):
    toolkit = _add_toolkit()
    emit = Recorder()
    response = await toolkit.call_tool(tool_call, emit=emit)
    assert response.state == ToolResultState.ERROR
    assert response.id == tool_call.id
    assert len(emit.chunks) == 1
    assert emit.chunks[0].state == ToolResultState.ERROR
    assert emit.texts()[0].startswith(expected)
    assert response.text() == emit.texts()[0]


async def test_raising_tool_keeps_what_it_streamed_and_appends_the_error():
    toolkit = Toolkit()

    async def flaky(emit) -> None:
        await emit(ToolChunk(content=[TextBlock(text="partial ")]))
        raise ValueError("disk full")

    toolkit.register_function(flaky)
    emit = Recorder()
    response = await toolkit.call_tool(call("flaky"), emit=emit)
    assert emit.texts() == ["partial ", "ValueError: disk full"]
    assert response.state == ToolResultState.ERROR
    assert response.text() == "partial ValueError: disk full"


async def test_exception_groups_from_a_tool_nursery():
    toolkit = Toolkit()

    async def fan_out() -> None:
        async def fail(message: str) -> None:
            raise KeyError(message)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail, "a")

    async def developer_bug() -> None:
        async def fail() -> None:
            raise DeveloperOrientedException("misconfigured")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail)

    toolkit.register_function(fan_out)
    toolkit.register_function(developer_bug)
    response = await toolkit.call_tool(call("fan_out"))
    assert response.state == ToolResultState.ERROR
    assert response.text() == "KeyError: 'a'"
    with pytest.raises(ExceptionGroup) as info:
        await toolkit.call_tool(call("developer_bug"))
    assert info.group_contains(DeveloperOrientedException)


async def test_developer_exception_propagates():
    toolkit = Toolkit()

    def broken() -> None:
        raise DeveloperOrientedException("fix me")

    toolkit.register_function(broken)
    with pytest.raises(DeveloperOrientedException, match="fix me"):
        await toolkit.call_tool(call("broken"))


async def test_a_failing_listener_propagates_instead_of_becoming_a_result():
    toolkit = Toolkit(tools=[Tool1()])

    async def closed(chunk: ToolChunk) -> None:
        raise trio.BrokenResourceError("consumer went away")

    with pytest.raises(trio.BrokenResourceError):
        await toolkit.call_tool(call("tool_1"), emit=closed)


async def test_cancelled_call_tool_propagates_cancellation(autojump_clock):
    toolkit = Toolkit()
    reached: list[str] = []

    async def slow(emit) -> str:
        await emit(ToolChunk(content=[TextBlock(text="started")]))
        reached.append("sleeping")
        await trio.sleep(100)
        reached.append("woke")
        return "never"

    async def swallow_everything(kwargs, next_handler, emit):  # a middleware catching Exception
        try:
            return await next_handler()
        except Exception:
            return ToolResponse(content=[TextBlock(text="swallowed")])

    toolkit.register_function(slow)
    toolkit.register_middleware(swallow_everything)
    emit = Recorder()
    with trio.move_on_after(1) as scope:
        await toolkit.call_tool(call("slow"), emit=emit)
        reached.append("returned")
    assert scope.cancelled_caught
    assert reached == ["sleeping"]
    assert emit.texts() == ["started"]
    assert trio.current_time() == pytest.approx(1)


async def test_state_injection_and_validated_input_override():
    toolkit = Toolkit()
    seen: dict[str, Any] = {}

    def stateful(x: int, _agent_state: Any = None) -> str:
        seen["state"] = _agent_state
        return str(x)

    def plain(**kwargs: Any) -> str:
        seen["plain"] = kwargs
        return "ok"

    toolkit.register_function(stateful, is_state_injected=True)
    toolkit.register_function(plain, input_schema={"type": "object", "properties": {}})
    assert (
        "_agent_state" not in toolkit.get_tool_schemas()[0]["function"]["parameters"]["properties"]
    )
    state = FakeState()
    response = await toolkit.call_tool(
        call("stateful", "garbage"), state=state, tool_input={"x": 7}
    )
    assert response.text() == "7"
    assert seen["state"] is state
    await toolkit.call_tool(call("plain"), state=state)
    assert seen["plain"] == {}


async def test_external_tool_is_not_run():
    class Ask(ToolBase):
        name = "ask_user"
        is_external_tool = True
        is_state_injected = True

    toolkit = Toolkit(tools=[Ask()])
    response = await toolkit.call_tool(call("ask_user"), state=FakeState())
    assert response.state == ToolResultState.ERROR
    assert "external tool" in response.text()


# -- adversarial edges ---------------------------------------------------------------------


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
    """As in AgentScope, a short-circuit that yields nothing is an empty result."""
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
    as is (as in AgentScope, the toolkit does no schema validation of its own), and
    FunctionTool's own conversion turns a wrongly typed rewrite into a model-readable error."""
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

    kit.register_function(slow_stream, permission=agent_kit.ALLOW)

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
        return agent_kit.make_agent(
            [
                agent_kit.calls(
                    agent_kit.call("s1", "slow_stream", parts=3),
                    agent_kit.call("s2", "slow_stream", parts=1),
                ),
                agent_kit.text("done"),
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

    report = await cancel_sweep(make, agent_kit.user, mode=mode, check=one_result_per_call)
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


# -- tools the toolkit cannot use are refused at registration -------------------------------------


def test_a_lambda_is_refused_unless_it_is_given_a_name() -> None:
    toolkit = Toolkit()
    with pytest.raises(ValueError, match=r"'<lambda>'.*\^\[a-zA-Z0-9_-\]\{1,64\}\$.*name="):
        toolkit.register_function(lambda x: x)
    toolkit.register_function(lambda x: x, name="echo")
    assert toolkit.get_tool("echo") is not None


@pytest.mark.parametrize("name", ["my tool", "a.b", "x" * 65, "émoji", "<lambda>"])
def test_a_tool_name_no_provider_accepts_is_refused(name: str) -> None:
    def fine(x: str) -> str:
        return x

    with pytest.raises(ValueError, match="tool name"):
        Toolkit().register_function(fine, name=name)
    tool = FunctionTool(fine)
    tool.name = name  # a ToolBase whose name was set by hand is checked too
    with pytest.raises(ValueError, match="tool name"):
        Toolkit().add_tool(tool)
    with pytest.raises(ValueError, match="tool name"):
        Toolkit(tools=[tool])


@attrs.define
class Endpoint:
    sock: socket.socket


def test_a_parameter_type_without_a_json_form_is_refused() -> None:
    def connect(host: str, sock: socket.socket) -> str:
        return host

    with pytest.raises(TypeError, match=r"parameter 'sock' of connect.*socket.*input_schema="):
        Toolkit().register_function(connect)

    def many(socks: list[socket.socket | None]) -> None: ...

    with pytest.raises(TypeError, match=r"parameter 'socks' of many.*socket"):
        Toolkit().register_function(many)

    def via(endpoint: Endpoint) -> None: ...

    with pytest.raises(TypeError, match=r"parameter 'endpoint' of via.*Endpoint\.sock.*socket"):
        Toolkit().register_function(via)

    schema = {"type": "object", "properties": {"host": {"type": "string"}, "sock": {}}}
    toolkit = Toolkit()
    toolkit.register_function(connect, input_schema=schema)  # an explicit schema is the fix
    assert toolkit.get_tool("connect") is not None


class Point(TypedDict):
    x: int


def test_annotations_a_json_value_satisfies_are_still_accepted() -> None:
    def f(a: numbers.Number, b: collections.abc.Hashable, c: Point, d: Any, e: object) -> None: ...

    Toolkit().register_function(f)


async def test_a_toolkit_wide_default_permission_applies_to_functions_registered_without_one():
    allow = PermissionDecision("allow", "trusted")
    toolkit = Toolkit(default_permission=allow)

    async def free(x: int) -> int:
        """A tool."""
        return x

    async def asked(x: int) -> int:
        """Another tool."""
        return x

    toolkit.register_function(free)
    toolkit.register_function(asked, permission=PermissionDecision("ask", "always ask"))
    context = PermissionContext()
    free_tool, asked_tool = toolkit.get_tool("free"), toolkit.get_tool("asked")
    assert free_tool is not None
    assert asked_tool is not None
    assert (await free_tool.check_permissions({"x": 1}, context)).behavior == "allow"
    assert (await asked_tool.check_permissions({"x": 1}, context)).behavior == "ask"

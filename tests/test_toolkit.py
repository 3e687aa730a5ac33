"""Toolkit: registration, schemas, groups and reset_tools, validate_call, call_tool."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio

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
    ToolResultState,
)
from trioagent.tool import FunctionTool, ToolBase, ToolChunk, Toolkit, ToolResponse
from trioagent.tool._group import ToolGroup


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
    """Streams text ids a, b, b then data ids 1, 2, 1 (the reference's merge scenario)."""

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


async def test_streaming_tool_merges_like_the_reference():
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

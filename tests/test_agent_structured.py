"""Structured output (trioagent/agent/_structured.py and the loop's structured-output
decision): AgentScope's structured replies, validation errors, forced calls and tool lifecycle.

Further down: edge cases of structured output: ``agent.reply(..., structured_schema=...)`` (the
``GenerateStructuredOutput`` tool and the loop's grace iterations) and
``ChatModelBase.generate_structured_output`` (the strategy ladder), against ``ScriptedModel``.
"""

from __future__ import annotations

import copy
import enum
import json
import logging
from typing import Any, Literal

import pydantic
import pytest
import trio
from agent_helpers import ALLOW, Recorder, make_agent, user

from trioagent.agent import Agent, AgentState, InjectionConfig, ReActConfig
from trioagent.event import (
    ConfirmResult,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from trioagent.exception import StructuredOutputError
from trioagent.message import (
    AssistantMsg,
    HintBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
    UserMsg,
)
from trioagent.model import StructuredResponse
from trioagent.serialization import dumps, loads, unstructure
from trioagent.testing import (
    ScriptedModel,
    SweepRun,
    cancel_sweep,
    check_reply_rules,
    text_chunks,
    tool_call_chunks,
)
from trioagent.tool import Toolkit
from trioagent.types import ToolChoice

TOOL = "GenerateStructuredOutput"
DONE = "The required structured output is generated."


class Weather(pydantic.BaseModel):
    city: str
    temperature: float
    unit: str = "celsius"


def structured_call(call_id: str, payload: dict) -> list:
    return tool_call_chunks(call_id, TOOL, json.dumps(payload))


def tool_names(request) -> list[str]:
    return [t["function"]["name"] for t in request.tools or []]


# -- 12. a structured reply -----------------------------------------------------------------------


async def test_structured_reply_completes_with_the_output():
    agent, model = make_agent(
        [structured_call("s1", {"city": "Paris", "temperature": 21.5, "unit": "celsius"})]
    )
    rec = Recorder()
    msg = await agent.reply(user("weather?"), structured_schema=Weather, on_event=rec)
    assert msg.get_text_content() == DONE
    assert msg.finished_reason == "completed"
    assert msg.structured_output == {"city": "Paris", "temperature": 21.5, "unit": "celsius"}
    assert rec.types[-1] == "REPLY_END"
    assert rec.ends[0].finished_reason == "completed"

    dumped = unstructure(agent.state.reply_context)
    schema = Weather.model_json_schema()
    assert dumped == {
        "reply_id": agent.state.reply_id,
        "cur_iter": 1,
        "structured_schema": schema,
        "structured_output": msg.structured_output,
    }
    # The tool was offered, and the requirement hint preceded the first reasoning.
    request = model.requests[0]
    assert TOOL in tool_names(request)
    hint = request.messages[-1].content[-1]
    assert isinstance(hint, HintBlock)
    assert "required to generate structured output" in str(hint.hint)
    assert request.tool_choice is None
    # The tool's own schema has no title fields.
    tool_schema = next(t for t in request.tools if t["function"]["name"] == TOOL)
    assert "title" not in json.dumps(tool_schema["function"]["parameters"])


async def test_structured_output_is_a_copy():
    agent, _ = make_agent([structured_call("s1", {"city": "Oslo", "temperature": 1})])
    msg = await agent.reply(user(), structured_schema=Weather)
    assert msg.structured_output is not None
    msg.structured_output["city"] = "changed"
    assert agent.state.reply_context.structured_output["city"] == "Oslo"  # type: ignore[index]


async def test_text_answer_never_ends_a_structured_reply():
    agent, model = make_agent(
        [text_chunks("It is sunny."), structured_call("s1", {"city": "Rome", "temperature": 30})]
    )
    msg = await agent.reply(user(), structured_schema=Weather)
    assert msg.structured_output == {"city": "Rome", "temperature": 30.0, "unit": "celsius"}
    assert len(model.requests) == 2
    # The hint is appended before every reasoning of the structured reply.
    hints = [
        b
        for b in agent.state.context[-1].content
        if isinstance(b, HintBlock) and "structured output" in str(b.hint)
    ]
    assert len(hints) == 2


# -- 13. defaults and extra fields, in process and after a JSON round trip ---------------------


async def test_defaults_filled_and_extra_dropped_in_process():
    agent, _ = make_agent(
        [structured_call("s1", {"city": "Lima", "temperature": 18, "humidity": 80})]
    )
    msg = await agent.reply(user(), structured_schema=Weather)
    assert msg.structured_output == {"city": "Lima", "temperature": 18.0, "unit": "celsius"}


def _ask_tool() -> str:
    """A tool that needs the user's confirmation."""
    return "confirmed result"


async def test_after_state_round_trip_defaults_filled_and_extra_kept():
    toolkit = Toolkit()
    toolkit.register_function(_ask_tool)  # asks for permission: the reply parks
    agent, _ = make_agent([tool_call_chunks("c1", "_ask_tool", "{}")], toolkit=toolkit)
    parked = Recorder()
    msg = await agent.reply(user(), structured_schema=Weather, on_event=parked)
    assert msg.finished_reason is None
    assert isinstance(parked.events[-1], RequireUserConfirmEvent)

    state = loads(dumps(agent.state), AgentState)
    assert isinstance(state.reply_context.structured_schema, dict)
    toolkit2 = Toolkit()
    toolkit2.register_function(_ask_tool)
    model2 = ScriptedModel(
        [structured_call("s1", {"city": "Kyiv", "temperature": 5, "humidity": 80})]
    )
    agent2 = Agent(
        "assistant",
        "sys",
        model2,
        toolkit=toolkit2,
        state=state,
        injection_config=InjectionConfig(inject_runtime_state=False),
    )
    call = parked.events[-1].tool_calls[0]
    rec = Recorder()
    final = await agent2.reply(
        UserConfirmResultEvent(confirm_results=[ConfirmResult(confirmed=True, tool_call=call)]),
        on_event=rec,
    )
    assert "REPLY_START" not in rec.types
    assert final.get_text_content() == DONE
    # The dict schema (after reload) fills the default and keeps the extra field.
    assert final.structured_output == {
        "city": "Kyiv",
        "temperature": 5,
        "unit": "celsius",
        "humidity": 80,
    }
    assert TOOL in tool_names(model2.requests[0])


# -- 14. an invalid field type ------------------------------------------------------------------


async def test_invalid_field_type_gives_an_error_result_then_succeeds():
    agent, model = make_agent(
        [
            structured_call("s1", {"city": "Nice", "temperature": "hot"}),
            structured_call("s2", {"city": "Nice", "temperature": 25}),
        ]
    )
    msg = await agent.reply(user(), structured_schema=Weather)
    assert msg.structured_output == {"city": "Nice", "temperature": 25.0, "unit": "celsius"}
    results = [b for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock)]
    assert [r.id for r in results] == ["s1", "s2"]
    assert results[0].state == ToolResultState.ERROR
    assert isinstance(results[0].output, str)
    assert results[0].output.startswith(
        "Input validation failed for tool 'GenerateStructuredOutput': 'hot' is not of type"
    )
    assert results[1].state == ToolResultState.SUCCESS
    assert isinstance(results[1].output, list)
    assert isinstance(results[1].output[0], TextBlock)
    assert results[1].output[0].text == "Structured output generated successfully."
    assert agent.state.cur_iter == 2
    assert len(model.requests) == 2


# -- 15. iteration limits -----------------------------------------------------------------------


async def test_max_iters_forces_the_structured_tool():
    agent, model = make_agent(
        [text_chunks("thinking aloud"), structured_call("s1", {"city": "Bern", "temperature": 9})],
        react_config=ReActConfig(max_iters=1),
    )
    msg = await agent.reply(user(), structured_schema=Weather)
    assert msg.finished_reason == "completed"
    assert len(model.requests) == 2
    assert model.requests[0].tool_choice is None
    assert model.requests[1].tool_choice is not None
    assert model.requests[1].tool_choice.mode == TOOL
    hint = model.requests[1].messages[-1].content[-1]
    assert "call this tool at once" in str(hint.hint)  # type: ignore[union-attr]


async def test_grace_iterations_run_out():
    agent, model = make_agent(
        [text_chunks("one"), text_chunks("two")],
        react_config=ReActConfig(max_iters=1, structured_output_grace_iters=1),
    )
    rec = Recorder()
    msg = await agent.reply(user(), structured_schema=Weather, on_event=rec)
    assert msg.get_text_content() == "The maximum reasoning-acting iterations are exceeded."
    assert msg.finished_reason == "exceed_max_iters"
    assert msg.structured_output is None
    assert len(model.requests) == 2
    assert rec.types[-2:] == ["EXCEED_MAX_ITERS", "REPLY_END"]


# -- 16. tool lifecycle -------------------------------------------------------------------------


async def test_structured_tool_mounted_then_removed(caplog):
    agent, model = make_agent(
        [
            structured_call("s1", {"city": "A", "temperature": 1}),
            structured_call("s2", {"city": "B", "temperature": 2}),
            text_chunks("plain"),
        ]
    )
    with caplog.at_level(logging.WARNING):
        await agent.reply(user(), structured_schema=Weather)
        await agent.reply(user(), structured_schema=Weather)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert agent.toolkit.get_tool(TOOL) is None  # reply-scoped: the caller's toolkit is untouched
    assert tool_names(model.requests[0]).count(TOOL) == 1
    assert tool_names(model.requests[1]).count(TOOL) == 1  # offered again, not duplicated
    msg = await agent.reply(user())
    assert msg.get_text_content() == "plain"
    assert agent.toolkit.get_tool(TOOL) is None
    assert TOOL not in tool_names(model.requests[2])
    assert agent.state.reply_context.structured_schema is None


async def test_schema_with_a_resume_event_is_ignored_with_a_warning(caplog):
    class Other(pydantic.BaseModel):
        name: str

    toolkit = Toolkit()
    toolkit.register_function(_ask_tool)
    agent, _ = make_agent(
        [
            tool_call_chunks("c1", "_ask_tool", "{}"),
            structured_call("s1", {"city": "C", "temperature": 3}),
        ],
        toolkit=toolkit,
    )
    parked = Recorder()
    await agent.reply(user(), structured_schema=Weather, on_event=parked)
    call = parked.events[-1].tool_calls[0]
    with caplog.at_level(logging.WARNING, logger="trioagent.agent"):
        msg = await agent.reply(
            UserConfirmResultEvent(confirm_results=[ConfirmResult(confirmed=True, tool_call=call)]),
            structured_schema=Other,
        )
    assert any("structured_schema is ignored" in r.getMessage() for r in caplog.records)
    assert msg.structured_output == {"city": "C", "temperature": 3.0, "unit": "celsius"}
    assert agent.state.reply_context.structured_schema is Weather


async def test_structured_output_tool_without_a_schema_says_so():
    from trioagent.agent._structured import StructuredOutputTool

    tool = StructuredOutputTool(Weather)
    chunk = await tool.call(None, _agent_state=AgentState(), city="x", temperature=1)
    assert chunk.content[0].text == "No structured output is required for now."


async def test_text_in_the_same_response_as_the_tool_call_is_ignored():
    agent, _ = make_agent(
        [
            [
                *text_chunks("Here you go"),
                *structured_call("s1", {"city": "D", "temperature": 4}),
            ]
        ]
    )
    msg = await agent.reply(user(), structured_schema=Weather)
    assert msg.get_text_content() == DONE
    assert not any(
        isinstance(b, ToolCallBlock) for b in msg.content
    )  # the final Msg is the canned text


# -- reply-scoped tools and a shared toolkit ------------------------------------------------------


async def test_one_toolkit_shared_by_two_agents_replying_concurrently_with_structured_output(
    autojump_clock,
):
    """Each reply offers the structured-output tool to its own requests only: agent B's reply
    starting or ending never takes agent A's tool away (nor the other way round)."""
    shared = Toolkit()
    shared.register_function(_ask_tool)
    slow_a = ScriptedModel(
        [structured_call("a1", {"city": "A", "temperature": 1})], chunk_delay=1.0
    )
    slow_b = ScriptedModel(
        [text_chunks("thinking"), structured_call("b1", {"city": "B", "temperature": 2})],
        chunk_delay=0.3,
    )
    agent_a = Agent("a", model=slow_a, toolkit=shared)
    agent_b = Agent("b", model=slow_b, toolkit=shared)
    results: dict[str, object] = {}

    async def run(agent: Agent, key: str) -> None:
        msg = await agent.reply(user(), structured_schema=Weather)
        results[key] = msg.structured_output

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, agent_a, "a")
        nursery.start_soon(run, agent_b, "b")
    assert results == {
        "a": {"city": "A", "temperature": 1.0, "unit": "celsius"},
        "b": {"city": "B", "temperature": 2.0, "unit": "celsius"},
    }
    assert shared.get_tool(TOOL) is None  # the caller's toolkit was never written to
    assert [t.name for t in shared.tool_groups[0].tools] == ["_ask_tool"]
    for request in [*slow_a.requests, *slow_b.requests]:
        assert tool_names(request).count(TOOL) == 1


# == edge cases ====================================================================================
class Color(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


class Address(pydantic.BaseModel):
    street: str
    zip: str | None = None


class Person(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    name: str
    color: Color
    kind: Literal["a", "b"] = "a"
    address: Address
    tags: list[str] = []


GOOD = {"name": "Ada", "color": "red", "address": {"street": "Main St"}}
GOOD_OUTPUT = {
    "name": "Ada",
    "color": "red",
    "kind": "a",
    "address": {"street": "Main St", "zip": None},
    "tags": [],
}


def edge_structured_call(call_id: str, payload: Any) -> list:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return tool_call_chunks(call_id, TOOL, text)


def results(agent: Agent) -> list[ToolResultBlock]:
    return [
        block
        for msg in agent.state.context
        for block in msg.content
        if isinstance(block, ToolResultBlock)
    ]


def calls(agent: Agent) -> list[ToolCallBlock]:
    return [
        block
        for msg in agent.state.context
        for block in msg.content
        if isinstance(block, ToolCallBlock)
    ]


def text_of(result: ToolResultBlock) -> str:
    if isinstance(result.output, str):
        return result.output
    return "".join(getattr(block, "text", "") for block in result.output)


def assert_one_result_per_call(agent: Agent) -> None:
    assert sorted(c.id for c in calls(agent)) == sorted(r.id for r in results(agent))


async def structured_reply(
    steps: list, schema: Any, **kwargs: Any
) -> tuple[Msg, Agent, ScriptedModel, Recorder]:
    agent, model = make_agent(steps, **kwargs)
    rec = Recorder()
    msg = await agent.reply(user("who?"), structured_schema=schema, on_event=rec)
    return msg, agent, model, rec


# -- schemas: classes and dicts ------------------------------------------------------------------


async def test_nested_class_with_enum_literal_optional_and_defaults() -> None:
    msg, _agent, model, rec = await structured_reply([edge_structured_call("s1", GOOD)], Person)
    assert msg.get_text_content() == DONE
    assert msg.finished_reason == "completed"
    assert msg.structured_output == GOOD_OUTPUT
    assert type(msg.structured_output) is dict
    assert type(msg.structured_output["color"]) is str  # the enum's JSON value, not Color.RED
    json.dumps(msg.structured_output)  # plain JSON data
    assert [e.finished_reason for e in rec.ends] == ["completed"]
    assert len(model.requests) == 1
    # The offered tool: no titles, nested $defs kept, extra="forbid" visible to the model.
    (tool,) = [t for t in model.requests[0].tools or [] if t["function"]["name"] == TOOL]
    parameters = tool["function"]["parameters"]
    assert "title" not in json.dumps(parameters)
    assert parameters["additionalProperties"] is False
    assert "Address" in parameters["$defs"]
    assert parameters["$defs"]["Color"]["enum"] == ["red", "blue"]


async def test_a_field_named_title_survives_title_stripping() -> None:
    class Book(pydantic.BaseModel):
        title: str
        properties: list[str] = []

    payload = {"title": "Dune", "properties": ["sf"]}
    msg, *_ = await structured_reply([edge_structured_call("s1", payload)], Book)
    assert msg.structured_output == payload
    msg, *_ = await structured_reply(
        [edge_structured_call("s1", payload)], copy.deepcopy(Book.model_json_schema())
    )
    assert msg.structured_output == payload


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({**GOOD, "color": "green"}, "'green' is not one of ['red', 'blue'] (at $.color)"),
        ({**GOOD, "kind": "c"}, "(at $.kind)"),
        ({**GOOD, "extra": 1}, "Additional properties are not allowed ('extra' was unexpected)"),
        ({**GOOD, "address": {}}, "'street' is a required property (at $.address)"),
        ({}, "'name' is a required property"),
    ],
)
async def test_a_schema_violation_is_an_error_result_then_a_retry(
    bad: dict[str, Any], says: str
) -> None:
    msg, agent, model, _ = await structured_reply(
        [edge_structured_call("s1", bad), edge_structured_call("s2", GOOD)], Person
    )
    assert msg.structured_output == GOOD_OUTPUT
    assert msg.finished_reason == "completed"
    first, second = results(agent)
    assert (first.id, str(first.state)) == ("s1", "error")
    assert text_of(first).startswith(f"Input validation failed for tool '{TOOL}': ")
    assert says in text_of(first)
    assert (second.id, str(second.state)) == ("s2", "success")
    assert len(model.requests) == 2
    # The model read its error before retrying.
    seen = [b for m in model.requests[1].messages for b in m.content]
    assert any(isinstance(b, ToolResultBlock) and b.id == "s1" for b in seen)


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ('{"name": "Ada", ', "JSONDecodeError"),
        ("[1, 2]", "decoded into a <class 'list'> object"),
        ('"just text"', "decoded into a <class 'str'> object"),
    ],
)
async def test_arguments_that_are_not_a_json_object_get_a_readable_error(
    arguments: str, says: str
) -> None:
    msg, agent, _model, _ = await structured_reply(
        [edge_structured_call("s1", arguments), edge_structured_call("s2", GOOD)], Person
    )
    assert msg.structured_output == GOOD_OUTPUT
    first, second = results(agent)
    assert str(first.state) == "error"
    assert says in text_of(first)
    assert "recorrect the arguments" in text_of(first)
    assert str(second.state) == "success"
    assert_one_result_per_call(agent)


async def test_a_model_validator_failure_is_a_validation_error_result() -> None:
    class City(pydantic.BaseModel):
        name: str

        @pydantic.field_validator("name")
        @classmethod
        def capitalized(cls, value: str) -> str:
            if not value[:1].isupper():
                raise ValueError("must be capitalized")
            return value

    msg, agent, _, _ = await structured_reply(
        [
            edge_structured_call("s1", {"name": "paris"}),
            edge_structured_call("s2", {"name": "Paris"}),
        ],
        City,
    )
    assert msg.structured_output == {"name": "Paris"}
    first, second = results(agent)
    assert str(first.state) == "error"
    assert text_of(first).startswith(
        "ValidationError: Structured output validation failed with error:"
    )
    assert "must be capitalized" in text_of(first)
    assert str(second.state) == "success"


async def test_a_dict_schema_with_defs_defaults_and_no_additional_properties() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "size": {"enum": ["S", "M", "L"], "default": "M"},
            "address": {"$ref": "#/$defs/Address"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["name", "address"],
        "additionalProperties": False,
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "country": {"type": "string", "default": "FR"},
                },
                "required": ["street"],
                "additionalProperties": False,
            }
        },
    }
    msg, agent, model, _ = await structured_reply(
        [
            edge_structured_call("s1", {"name": "x", "address": {"street": "a", "floor": 2}}),
            edge_structured_call("s2", {"name": "x", "size": "XL", "address": {"street": "a"}}),
            edge_structured_call("s3", {"name": "x", "address": {"street": "a"}}),
        ],
        schema,
    )
    assert msg.structured_output == {
        "name": "x",
        "size": "M",
        "address": {"street": "a", "country": "FR"},
        "note": None,
    }
    first, second, third = results(agent)
    assert "'floor' was unexpected" in text_of(first)
    assert "(at $.address)" in text_of(first)
    assert "'XL' is not one of" in text_of(second)
    assert [str(r.state) for r in (first, second, third)] == ["error", "error", "success"]
    assert len(model.requests) == 3


async def test_an_empty_dict_schema_accepts_any_object() -> None:
    msg, *_ = await structured_reply([edge_structured_call("s1", {"free": [1, {"x": None}]})], {})
    assert msg.structured_output == {"free": [1, {"x": None}]}


async def test_an_unusable_schema_is_refused_before_the_reply_starts() -> None:
    """A bad argument is refused at entry: no events, nothing added to the context."""
    agent, model = make_agent([edge_structured_call("s1", GOOD)])
    rec = Recorder()
    with pytest.raises(TypeError, match="structured_schema must be a JSON-schema dict"):
        await agent.reply(user(), structured_schema=str, on_event=rec)
    for not_an_object_schema in ({"type": "string"}, {"type": "object", "properties": 5}):
        with pytest.raises(ValueError, match="structured_schema is not a usable JSON object"):
            await agent.reply(user(), structured_schema=not_an_object_schema, on_event=rec)
    assert rec.events == []
    assert agent.state.context == []
    assert model.requests == []
    assert not agent.is_replying


# -- the model answering the wrong way ---------------------------------------------------------


async def test_text_answers_use_the_grace_iterations_then_the_tool_is_forced() -> None:
    msg, _agent, model, rec = await structured_reply(
        [text_chunks("hmm"), text_chunks("let me think"), edge_structured_call("s1", GOOD)],
        Person,
        react_config=ReActConfig(max_iters=1, structured_output_grace_iters=2),
    )
    assert msg.finished_reason == "completed"
    assert msg.structured_output == GOOD_OUTPUT
    assert msg.get_text_content() == DONE  # the model's text is not the answer
    modes = [r.tool_choice.mode if r.tool_choice else None for r in model.requests]
    assert modes == [None, TOOL, TOOL]
    assert "EXCEED_MAX_ITERS" not in rec.types
    assert [e.finished_reason for e in rec.ends] == ["completed"]


async def test_only_invalid_calls_exhaust_the_grace_iterations() -> None:
    bad = {**GOOD, "color": "green"}
    msg, agent, model, rec = await structured_reply(
        [edge_structured_call("s1", bad), edge_structured_call("s2", bad)],
        Person,
        react_config=ReActConfig(max_iters=1, structured_output_grace_iters=1),
    )
    assert msg.finished_reason == "exceed_max_iters"
    assert msg.structured_output is None
    assert agent.state.reply_context.structured_output is None
    assert rec.types[-2:] == ["EXCEED_MAX_ITERS", "REPLY_END"]
    assert len(model.requests) == 2
    assert_one_result_per_call(agent)


# -- several calls in one response ----------------------------------------------------------------


async def test_the_structured_call_with_another_tool_in_one_response() -> None:
    async def lookup(query: str) -> str:
        """Look something up.

        Args:
            query: what to look up
        """
        await trio.sleep(0)
        return f"found {query}"

    toolkit = Toolkit()
    toolkit.register_function(lookup, permission=ALLOW)
    msg, agent, model, rec = await structured_reply(
        [[*tool_call_chunks("c1", "lookup", '{"query": "x"}'), *edge_structured_call("s1", GOOD)]],
        Person,
        toolkit=toolkit,
    )
    assert msg.structured_output == GOOD_OUTPUT
    assert len(model.requests) == 1  # satisfied: no further reasoning round
    assert {r.id: str(r.state) for r in results(agent)} == {"c1": "success", "s1": "success"}
    assert rec.types.count("TOOL_RESULT_END") == 2
    assert [e.finished_reason for e in rec.ends] == ["completed"]


@pytest.mark.parametrize("order", ["valid_first", "invalid_first"])
async def test_an_invalid_call_never_clears_a_valid_one_in_the_same_response(
    order: str,
) -> None:
    valid = edge_structured_call("ok", {**GOOD, "name": "Valid"})
    invalid = edge_structured_call("bad", {**GOOD, "color": "green"})
    steps = [[*valid, *invalid]] if order == "valid_first" else [[*invalid, *valid]]
    msg, agent, model, _ = await structured_reply(steps, Person)
    assert msg.finished_reason == "completed"
    assert msg.structured_output == {**GOOD_OUTPUT, "name": "Valid"}
    assert {r.id: str(r.state) for r in results(agent)} == {"ok": "success", "bad": "error"}
    assert len(model.requests) == 1


# -- parking, saving, restoring, aborting -----------------------------------------------------------


def _asking_toolkit() -> Toolkit:
    toolkit = Toolkit()
    toolkit.register_function(_ask_tool)
    return toolkit


async def _parked_with_output() -> tuple[Agent, RequireUserConfirmEvent]:
    agent, _ = make_agent(
        [[*edge_structured_call("s1", GOOD), *tool_call_chunks("c1", "_ask_tool", "{}")]],
        toolkit=_asking_toolkit(),
    )
    rec = Recorder()
    msg = await agent.reply(user(), structured_schema=Person, on_event=rec)
    assert msg.finished_reason is None
    assert msg.structured_output is None  # the parked Msg carries no output yet
    assert rec.ends == []
    park = rec.events[-1]
    assert isinstance(park, RequireUserConfirmEvent)
    assert agent.state.reply_context.structured_output == GOOD_OUTPUT
    return agent, park


async def test_output_made_before_a_park_survives_save_and_restore() -> None:
    agent, park = await _parked_with_output()
    state = loads(dumps(agent.state), AgentState)
    assert state.reply_context.structured_output == GOOD_OUTPUT
    assert isinstance(state.reply_context.structured_schema, dict)
    model = ScriptedModel([])  # satisfied already: no model call is needed
    restored = Agent(
        "assistant",
        "sys",
        model,
        toolkit=_asking_toolkit(),
        state=state,
        injection_config=InjectionConfig(inject_runtime_state=False),
    )
    rec = Recorder()
    final = await restored.reply(
        UserConfirmResultEvent(
            confirm_results=[ConfirmResult(confirmed=True, tool_call=park.tool_calls[0])]
        ),
        on_event=rec,
    )
    assert final.finished_reason == "completed"
    assert final.get_text_content() == DONE
    assert final.structured_output == GOOD_OUTPUT
    assert "REPLY_START" not in rec.types
    assert [e.finished_reason for e in rec.ends] == ["completed"]
    assert model.requests == []
    assert_one_result_per_call(restored)


async def test_aborting_a_parked_structured_reply_ends_once_without_output() -> None:
    agent, _ = await _parked_with_output()
    rec = Recorder()
    msg = await agent.reply(UserInterruptEvent(), on_event=rec)
    assert msg.finished_reason == "interrupted"
    assert msg.structured_output is None
    assert [e.finished_reason for e in rec.ends] == ["interrupted"]
    assert rec.types[-1] == "REPLY_END"
    assert {r.id: str(r.state) for r in results(agent)} == {
        "s1": "success",
        "c1": "interrupted",
    }
    # The next plain reply unmounts the tool and forgets the schema.
    agent.model.add_steps(text_chunks("plain"))  # type: ignore[attr-defined]
    plain = await agent.reply(user("and now?"))
    assert plain.get_text_content() == "plain"
    assert plain.structured_output is None
    assert agent.toolkit.get_tool(TOOL) is None
    assert agent.state.reply_context.structured_schema is None


async def test_a_completed_structured_reply_round_trips() -> None:
    msg, agent, _, rec = await structured_reply([edge_structured_call("s1", GOOD)], Person)
    state = loads(dumps(agent.state), AgentState)
    assert state.reply_context.structured_output == msg.structured_output
    assert state.reply_context.structured_schema == Person.model_json_schema()
    assert state.reply_context.cur_iter == 1
    check_reply_rules(state, "assistant", rec.events)


# -- interrupting the structured steps ----------------------------------------------------------


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_a_structured_reply_with_a_retry_and_a_second_tool(
    mode: str, autojump_clock: Any
) -> None:
    async def lookup(query: str) -> str:
        """Look something up.

        Args:
            query: what to look up
        """
        await trio.sleep(1)
        return f"found {query}"

    def make() -> Agent:
        toolkit = Toolkit()
        toolkit.register_function(lookup, permission=ALLOW)
        agent, _ = make_agent(
            [
                edge_structured_call("s1", '{"name": "Ada", '),  # broken JSON: an error result
                [
                    *tool_call_chunks("c1", "lookup", '{"query": "x"}'),
                    *tool_call_chunks("s2", TOOL, '{"name": "Ada", ', '"color": "red", '),
                    *tool_call_chunks("s2", TOOL, '"address": {"street": "Main St"}}'),
                ],
            ],
            toolkit=toolkit,
        )
        return agent

    def check(run: SweepRun) -> None:
        assert not run.agent.is_replying
        assert_one_result_per_call(run.agent)
        if run.end is None:
            return
        if run.end.finished_reason == "completed":
            assert run.msg is not None
            assert run.msg.structured_output == GOOD_OUTPUT
        elif run.msg is not None:
            assert run.msg.structured_output is None

    report = await cancel_sweep(
        make, lambda: user("who?"), mode=mode, check=check, structured_schema=Person
    )
    assert report.runs[0].msg is not None
    assert report.runs[0].msg.structured_output == GOOD_OUTPUT
    assert report.outcomes["interrupted"] >= 3
    assert set(report.outcomes) <= {"completed", "interrupted"}


# -- ChatModelBase.generate_structured_output ------------------------------------------------------

MODEL_TOOL = "generate_structured_output"


class EdgeWeather(pydantic.BaseModel):
    city: str
    temperature: float


def model_call(arguments: str) -> list:
    return tool_call_chunks("g1", MODEL_TOOL, arguments)


def modes(model: ScriptedModel) -> list[str | None]:
    return [r.tool_choice.mode if r.tool_choice else None for r in model.requests]


async def test_generate_structured_output_forced_first_then_auto() -> None:
    model = ScriptedModel([text_chunks("no"), model_call('{"city": "X", "temperature": 2}')])
    result = await model.generate_structured_output([UserMsg("user", "hi")], EdgeWeather)
    assert isinstance(result, StructuredResponse)
    assert result.content == {"city": "X", "temperature": 2}
    assert modes(model) == [MODEL_TOOL, "auto"]
    (tool,) = model.requests[0].tools or []
    assert tool["function"]["name"] == MODEL_TOOL
    assert tool["function"]["parameters"] == EdgeWeather.model_json_schema()


async def test_generate_structured_output_with_a_dict_schema_and_an_assistant_tail() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    model = ScriptedModel([model_call('{"n": 1, "x": 2}'), model_call('{"n": 3}')])
    messages = [UserMsg("user", "count"), AssistantMsg("assistant", "ok")]
    result = await model.generate_structured_output(messages, schema)
    assert result.content == {"n": 3}
    assert modes(model) == [MODEL_TOOL, "auto"]
    # The reminder is a new user message; the caller's messages are untouched.
    sent = model.requests[0].messages
    assert len(sent) == 3
    assert sent[-1].role == "user"
    assert "MUST" in sent[-1].get_text_content()
    assert len(messages) == 2
    assert messages[-1].get_text_content() == "ok"


async def test_generate_structured_output_reminder_joins_a_user_tail() -> None:
    model = ScriptedModel([model_call('{"city": "X", "temperature": 2}')])
    messages = [UserMsg("user", "hi")]
    await model.generate_structured_output(messages, EdgeWeather)
    sent = model.requests[0].messages
    assert len(sent) == 1
    assert len(sent[0].content) == 2
    assert len(messages[0].content) == 1  # a copy was extended, not the caller's message


async def test_generate_structured_output_exhausts_the_ladder() -> None:
    model = ScriptedModel([text_chunks("a"), model_call('{"city": 1}'), text_chunks("c")])
    with pytest.raises(StructuredOutputError, match="did not call") as info:
        await model.generate_structured_output([UserMsg("user", "hi")], EdgeWeather)
    assert isinstance(info.value.__cause__, StructuredOutputError)  # chained from the first
    assert modes(model) == [MODEL_TOOL, "auto", None]
    assert model.remaining == 0


async def test_generate_structured_output_explicit_choice_is_used_alone() -> None:
    model = ScriptedModel([text_chunks("a"), model_call("{}")])
    with pytest.raises(StructuredOutputError):
        await model.generate_structured_output(
            [UserMsg("user", "hi")], EdgeWeather, tool_choice=ToolChoice(mode="required")
        )
    assert modes(model) == ["required"]
    assert model.remaining == 1


async def test_generate_structured_output_other_errors_propagate_at_once() -> None:
    model = ScriptedModel([RuntimeError("boom"), model_call('{"city": "X", "temperature": 2}')])
    with pytest.raises(RuntimeError, match="boom"):
        await model.generate_structured_output([UserMsg("user", "hi")], EdgeWeather)
    assert model.remaining == 1


async def test_generate_structured_output_rejects_bad_arguments() -> None:
    model = ScriptedModel([])
    with pytest.raises(ValueError, match="at least one message"):
        await model.generate_structured_output([], EdgeWeather)
    with pytest.raises(TypeError, match="JSON-schema dict or a class"):
        await model.generate_structured_output([UserMsg("user", "hi")], int)  # type: ignore[arg-type]
    assert model.requests == []


async def test_generate_structured_output_is_cancellable(autojump_clock: Any) -> None:
    model = ScriptedModel([model_call('{"city": "X", "temperature": 2}')], chunk_delay=10)
    with trio.move_on_after(1) as scope:
        await model.generate_structured_output([UserMsg("user", "hi")], EdgeWeather)
    assert scope.cancelled_caught


# -- found by this hunt, fixed ---------------------------------------------------------------------


async def test_a_dict_schema_is_not_mutated_by_a_structured_reply() -> None:
    schema = EdgeWeather.model_json_schema()
    before = copy.deepcopy(schema)
    agent, _ = make_agent([tool_call_chunks("s1", TOOL, '{"city": "Oslo", "temperature": 1}')])
    msg = await agent.reply(user(), structured_schema=schema)
    assert msg.structured_output == {"city": "Oslo", "temperature": 1}
    assert schema == before


async def test_an_object_schema_without_properties_is_usable() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "number"}}
    agent, _ = make_agent([tool_call_chunks("s1", TOOL, '{"a": 1}')])
    msg = await agent.reply(user(), structured_schema=schema)
    assert msg.structured_output == {"a": 1}

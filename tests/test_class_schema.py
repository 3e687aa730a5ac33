"""Typed structured output (trioagent/tool/_class_schema.py and ``Msg.get_structured_output``):
an attrs class, a dataclass or a ``TypedDict`` as a reply's ``structured_schema``, its schema as
the model sees it, retries on objects that do not fit, and the typed object given back."""

from __future__ import annotations

import dataclasses
import json
import socket
from typing import Any, Literal, NotRequired, TypedDict

import attrs
import pydantic
import pytest
from agent_helpers import make_agent, user

from trioagent.agent import Agent
from trioagent.exception import StructuredOutputError
from trioagent.message import AssistantMsg, ToolResultBlock, ToolResultState
from trioagent.serialization import dumps, loads
from trioagent.testing import SweepRun, cancel_sweep, tool_call_chunks
from trioagent.tool import ClassSchema, is_schema_class

TOOL = "GenerateStructuredOutput"


def structured_call(call_id: str, payload: dict[str, object]) -> list[object]:
    return tool_call_chunks(call_id, TOOL, json.dumps(payload))


def _above_absolute_zero(instance: object, attribute: object, value: float) -> None:
    if value < -273.15:
        raise ValueError(f"temperature {value} is below absolute zero")


@attrs.define
class Reading:
    """A weather reading.

    Args:
        city: where it was taken.
        temperature: degrees Celsius.
    """

    city: str
    temperature: float = attrs.field(validator=_above_absolute_zero)
    unit: Literal["celsius", "fahrenheit"] = "celsius"


@attrs.define
class Forecast:
    readings: list[Reading]
    summary: str | None = None


class ReadingDict(TypedDict):
    city: str
    temperature: float
    note: NotRequired[str]


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class PydanticReading(pydantic.BaseModel):
    city: str
    temperature: float


def test_the_schema_of_an_attrs_class_is_its_fields_inlined() -> None:
    schema = ClassSchema(Forecast).schema
    assert schema["type"] == "object"
    assert schema["required"] == ["readings"]
    assert schema["properties"]["readings"] == {
        "items": {"$ref": "#/$defs/Reading"},
        "type": "array",
    }
    reading = schema["$defs"]["Reading"]
    assert reading["required"] == ["city", "temperature"]
    assert reading["properties"]["unit"] == {
        "default": "celsius",
        "enum": ["celsius", "fahrenheit"],
        "type": "string",
    }
    assert reading["properties"]["city"]["description"] == "where it was taken."
    assert "Forecast" not in schema["$defs"]


def test_the_schema_of_a_typeddict_names_its_keys() -> None:
    assert ClassSchema(ReadingDict).schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "temperature": {"type": "number"},
            "note": {"type": "string"},
        },
        "required": ["city", "temperature"],
    }
    assert is_schema_class(ReadingDict)
    assert is_schema_class(Point)
    assert not is_schema_class(PydanticReading)
    assert not is_schema_class(dict)


def test_a_class_with_a_field_no_json_can_be_is_refused() -> None:
    @attrs.define
    class Connected:
        peer: socket.socket

    with pytest.raises(TypeError, match="structured_schema Connected: "):
        ClassSchema(Connected)


async def test_an_attrs_schema_retries_on_a_wrong_type_and_a_validator_then_gives_it_back() -> None:
    """Invalid objects are error results the model reads (a schema violation, an attrs
    validator), as for any schema; the valid one comes back as a ``Reading``."""
    agent, model = make_agent(
        [
            structured_call("s1", {"city": "Oslo", "temperature": "cold"}),
            structured_call("s2", {"city": "Oslo", "temperature": -300}),
            structured_call("s3", {"city": "Oslo", "temperature": -3.5}),
        ]
    )
    msg = await agent.reply(user("weather?"), structured_schema=Reading)
    assert msg.structured_output == {"city": "Oslo", "temperature": -3.5, "unit": "celsius"}
    reading = msg.get_structured_output(Reading)
    assert reading == Reading("Oslo", -3.5)
    results = [b for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock)]
    assert [r.state for r in results] == [
        ToolResultState.ERROR,
        ToolResultState.ERROR,
        ToolResultState.SUCCESS,
    ]
    assert "'cold' is not of type 'number'" in str(results[0].output)
    assert "temperature -300.0 is below absolute zero (at $)" in str(results[1].output)
    offered = next(t for t in model.requests[0].tools or [] if t["function"]["name"] == TOOL)
    assert offered["function"]["parameters"]["required"] == ["city", "temperature"]


async def test_typeddict_dataclass_and_pydantic_schemas_give_their_types_back() -> None:
    agent, _ = make_agent(
        [
            structured_call("s1", {"city": "Rome", "temperature": 30}),
            structured_call("s2", {"x": 1.0}),
            structured_call("s3", {"city": "Lima", "temperature": 18}),
        ]
    )
    as_dict = (await agent.reply(user(), structured_schema=ReadingDict)).get_structured_output(
        ReadingDict
    )
    assert as_dict == {"city": "Rome", "temperature": 30}
    point = (await agent.reply(user(), structured_schema=Point)).get_structured_output(Point)
    assert point == Point(1, 0)
    model_msg = await agent.reply(user(), structured_schema=PydanticReading)
    assert model_msg.get_structured_output(PydanticReading) == PydanticReading(
        city="Lima", temperature=18
    )


async def test_the_typed_output_survives_saving_the_message() -> None:
    agent, _ = make_agent([structured_call("s1", {"readings": [{"city": "A", "temperature": 1}]})])
    msg = await agent.reply(user(), structured_schema=Forecast)
    loaded = loads(dumps(msg), type(msg))
    assert loaded.get_structured_output(Forecast) == Forecast([Reading("A", 1.0)])


def test_no_structured_output_or_one_that_does_not_fit_is_a_structured_output_error() -> None:
    plain = AssistantMsg("a", "hi", finished_reason="interrupted")
    with pytest.raises(StructuredOutputError, match=r"no structured output \(finished_reason: "):
        plain.get_structured_output(Reading)
    wrong = AssistantMsg("a", "hi", structured_output={"town": "x"})
    with pytest.raises(StructuredOutputError, match="does not fit 'Reading'"):
        wrong.get_structured_output(Reading)


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_an_attrs_structured_reply_with_a_refused_object(
    mode: Literal["interrupt", "outer"], autojump_clock: Any
) -> None:
    """Cancelled after any schedule point, a reply whose first object an attrs validator
    refuses ends once, with one result per call and an output only when it completed."""

    def make() -> Agent:
        agent, _ = make_agent(
            [
                structured_call("s1", {"city": "Oslo", "temperature": -300}),
                structured_call("s2", {"city": "Oslo", "temperature": -3.5}),
            ]
        )
        return agent

    def check(run: SweepRun) -> None:
        assert not run.agent.is_replying
        if run.end is None or run.msg is None:
            return
        if run.end.finished_reason == "completed":
            assert run.msg.get_structured_output(Reading) == Reading("Oslo", -3.5)
        else:
            with pytest.raises(StructuredOutputError):
                run.msg.get_structured_output(Reading)

    report = await cancel_sweep(
        make, lambda: user("weather?"), mode=mode, check=check, structured_schema=Reading
    )
    assert report.outcomes["interrupted"] >= 3
    assert set(report.outcomes) <= {"completed", "interrupted"}

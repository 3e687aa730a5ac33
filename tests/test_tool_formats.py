"""Tool schemas that don't lie: TypedDict, NamedTuple, Enum, Literal, dates and times, UUID,
Path and Decimal get real schemas and arrive converted to the annotated type; ``*args`` /
``**kwargs`` are refused; no annotation gets a silent ``{}``.

PEP 563 string annotations on purpose: ``Required`` / ``NotRequired`` must be read from the
resolved annotations, not from ``__required_keys__``.
"""

from __future__ import annotations

import collections.abc
import datetime
import decimal
import enum
import json
import numbers
import pathlib
import uuid
from typing import Any, Literal, NamedTuple, NotRequired, Required, TypedDict

import jsonschema
import pytest

from trioagent.exception import ToolInputValidationError
from trioagent.message import ToolCallBlock
from trioagent.tool import FunctionTool, Toolkit, ToolResponse
from trioagent.tool._signature import function_input_schema


class Window(TypedDict):
    """A time window."""

    start: datetime.datetime
    end: datetime.datetime
    note: NotRequired[str]


class Filters(TypedDict, total=False):
    tag: str
    owner: Required[uuid.UUID]


class Point(NamedTuple):
    x: float
    y: float = 0.0


class Unit(enum.Enum):
    CM = "cm"
    INCH = "in"


def plan(
    window: Window,
    filters: Filters,
    at: Point,
    unit: Unit,
    mode: Literal["fast", "exact"],
    day: datetime.date,
    alarm: datetime.time,
    ref: uuid.UUID,
    where: pathlib.Path,
    price: decimal.Decimal,
    since: datetime.date = datetime.date(2024, 1, 1),
) -> dict[str, Any]:
    """Plan something.

    Args:
        window: when.
        filters: which.
        at: where on the map.
        unit: the unit.
        mode: how.
        day: the day.
        alarm: the time.
        ref: a reference number.
        where: the folder.
        price: the budget.
        since: the first day.
    """
    return {}


GOOD = {
    "window": {"start": "2024-05-01T09:00:00Z", "end": "2024-05-01T10:30:00+02:00"},
    "filters": {"owner": "12345678-1234-5678-1234-567812345678"},
    "at": {"x": 1.5},
    "unit": "in",
    "mode": "exact",
    "day": "2024-05-02",
    "alarm": "07:30:00",
    "ref": "9f0e6c1e-3b8a-4f39-9d3c-2f1c7e8a0b11",
    "where": "/tmp/reports",
    "price": "19.99",
}


def test_every_annotation_gets_a_real_schema() -> None:
    schema = function_input_schema(plan)
    properties = schema["properties"]
    defs = schema["$defs"]
    assert defs["Window"] == {
        "description": "A time window.",
        "properties": {
            "start": {"format": "date-time", "type": "string"},
            "end": {"format": "date-time", "type": "string"},
            "note": {"type": "string"},
        },
        "type": "object",
        "required": ["start", "end"],
    }
    assert defs["Filters"]["required"] == ["owner"]
    assert defs["Filters"]["properties"]["owner"] == {"format": "uuid", "type": "string"}
    assert defs["Point"] == {
        "properties": {"x": {"type": "number"}, "y": {"default": 0.0, "type": "number"}},
        "type": "object",
        "required": ["x"],
    }
    assert defs["Unit"] == {"enum": ["cm", "in"], "type": "string"}
    assert properties["mode"]["enum"] == ["fast", "exact"]
    assert properties["day"] == {"description": "the day.", "format": "date", "type": "string"}
    assert properties["alarm"]["format"] == "time"
    assert properties["ref"]["format"] == "uuid"
    assert properties["where"]["format"] == "path"
    assert properties["price"]["anyOf"][0] == {"type": "number"}
    assert properties["since"]["default"] == "2024-01-01"  # shown as the model writes it
    assert "since" not in schema["required"]
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(GOOD, schema)


async def test_arguments_arrive_as_the_annotated_types() -> None:
    seen: dict[str, Any] = {}

    def record(**kwargs: Any) -> str:
        seen.update(kwargs)
        return "ok"

    tool = FunctionTool(plan)
    tool._func = record  # the same parameters, recording what the call receives
    response = await tool.run(dict(GOOD))
    assert response.state == "success", response.text()
    assert seen["window"] == {
        "start": datetime.datetime(2024, 5, 1, 9, tzinfo=datetime.UTC),
        "end": datetime.datetime(
            2024, 5, 1, 10, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
        ),
    }
    assert type(seen["window"]) is dict
    assert seen["filters"] == {"owner": uuid.UUID("12345678-1234-5678-1234-567812345678")}
    assert seen["at"] == Point(1.5, 0.0)
    assert isinstance(seen["at"], Point)
    assert seen["unit"] is Unit.INCH
    assert seen["mode"] == "exact"
    assert seen["day"] == datetime.date(2024, 5, 2)
    assert seen["alarm"] == datetime.time(7, 30)
    assert seen["ref"] == uuid.UUID("9f0e6c1e-3b8a-4f39-9d3c-2f1c7e8a0b11")
    assert seen["where"] == pathlib.Path("/tmp/reports")
    assert seen["price"] == decimal.Decimal("19.99")


@pytest.mark.parametrize(
    ("argument", "value", "error"),
    [
        ("window", {"start": "2024-05-01T09:00:00"}, "required property"),
        ("window", {"start": "soon", "end": "later"}, "expected an ISO 8601 date-time"),
        ("window", {"start": "2024-05-01", "end": "2024-05-01", "x": 1}, "extra fields"),
        ("filters", {"tag": "a"}, "'owner' is a required property"),
        ("filters", {"owner": "not-a-uuid"}, "expected a UUID string"),
        ("at", {"y": 2}, "'x' is a required property"),
        ("day", "May 2nd", "expected an ISO 8601 date string"),
        ("price", "12,50", "does not match"),
        ("price", "--5", "does not match"),
        ("unit", "mm", "is not one of"),
    ],
)
async def test_a_value_that_does_not_fit_is_an_error_result_naming_it(
    argument: str, value: object, error: str
) -> None:
    toolkit = Toolkit()
    toolkit.register_function(plan)
    arguments = {**GOOD, argument: value}
    call = ToolCallBlock(id="c1", name="plan", input=json.dumps(arguments))
    response: ToolResponse = await toolkit.call_tool(call)
    assert response.state == "error"
    assert "Input validation failed for tool 'plan'" in response.text()
    assert error in response.text()


async def test_decimal_numbers_are_read_exactly() -> None:
    def total(amount: decimal.Decimal) -> str:
        return repr(amount)

    tool = FunctionTool(total)
    assert (await tool.run({"amount": 0.1})).text() == "Decimal('0.1')"
    assert (await tool.run({"amount": 3})).text() == "Decimal('3')"
    refused = FunctionTool(total)._structure
    for bad in (True, "NaN", "Infinity", "12,50"):
        with pytest.raises(ToolInputValidationError, match="expected a decimal number"):
            refused({"amount": bad})


def test_classes_some_json_values_are_get_those_types_not_an_empty_schema() -> None:
    def f(a: numbers.Number, b: collections.abc.Hashable) -> None:
        """F."""

    properties = function_input_schema(f)["properties"]
    assert properties["a"] == {
        "anyOf": [{"type": "boolean"}, {"type": "integer"}, {"type": "number"}]
    }
    assert {"type": "string"} in properties["b"]["anyOf"]
    assert {"type": "array"} not in properties["b"]["anyOf"]


def _no_empty_schema(schema: object) -> None:
    if isinstance(schema, dict):
        assert schema != {}, "a silent {} schema"
        for value in schema.values():
            _no_empty_schema(value)
    elif isinstance(schema, list):
        for item in schema:
            _no_empty_schema(item)


def test_nothing_typed_gets_a_silent_empty_schema() -> None:
    schema = function_input_schema(plan)
    _no_empty_schema(schema["properties"])
    _no_empty_schema(schema["$defs"])


def test_variadic_parameters_are_refused_naming_the_function() -> None:
    def search(query: str, *terms: str) -> None: ...

    def lookup(query: str, **options: Any) -> None: ...

    with pytest.raises(TypeError, match=r"search takes \*terms"):
        Toolkit().register_function(search)
    with pytest.raises(TypeError, match=r"lookup takes \*\*options"):
        Toolkit().register_function(lookup)
    # with an explicit schema, **kwargs receives what the schema declares
    explicit = {"type": "object", "properties": {"query": {"type": "string"}}}
    Toolkit().register_function(lookup, input_schema=explicit)

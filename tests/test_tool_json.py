"""The toolkit's repairing argument parser (reference/model.md §1.6, tools_middleware.md §5.5)."""

from __future__ import annotations

import pytest

from trioagent.exception import ToolJSONDecodeError
from trioagent.tool._json import loads_tool_arguments

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "city": {"type": "string"}},
    "additionalProperties": False,
}


@pytest.mark.parametrize("blank", ["", "   ", "\n"])
def test_blank_is_an_empty_object(blank):
    assert loads_tool_arguments(blank) == {}
    assert loads_tool_arguments(blank, SCHEMA) == {}


def test_valid_objects_are_returned_verbatim():
    assert loads_tool_arguments('{"n": 1, "x": [1]}') == {"n": 1, "x": [1]}
    assert loads_tool_arguments('{"n": 1}', SCHEMA) == {"n": 1}


def test_truncated_and_mistyped_arguments_are_repaired():
    assert loads_tool_arguments('{"city": "Tok') == {"city": "Tok"}
    assert loads_tool_arguments('{"n": "42"}', SCHEMA) == {"n": 42}


def test_a_repair_that_drops_keys_keeps_the_original():
    # The schema forbids "extra"; dropping it would be a rewrite, so validation must see it.
    assert loads_tool_arguments('{"n": 1, "extra": 2}', SCHEMA) == {"n": 1, "extra": 2}


@pytest.mark.parametrize("payload", ['{"n": NaN}', '{"n": Infinity}', '{"n": -Infinity}'])
def test_non_finite_numbers_are_rejected(payload):
    for schema in (None, SCHEMA):
        with pytest.raises(ToolJSONDecodeError, match="NaN and Infinity"):
            loads_tool_arguments(payload, schema)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("[1, 2]", "but a dict object is expected!"),
        ('"text"', "but a dict object is expected!"),
        ("no json here", "a JSONDecodeError was raised with message"),
    ],
)
def test_unrepairable_input_explains_itself(payload, reason):
    with pytest.raises(ToolJSONDecodeError) as info:
        loads_tool_arguments(payload)
    message = info.value.message
    assert reason in message
    assert f"your_tool_arguments = {payload!r}" in message
    assert str(info.value).startswith("ToolJSONDecodeError: <system-reminder>")

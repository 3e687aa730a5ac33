"""Lenient JSON for model output (trioagent/_json_repair.py).

``json_loads_with_repair`` follows AgentScope's ``_json_loads_with_repair`` (used for
structured output and for a tool call's arguments): blank → ``{}``, a valid object is
kept, anything else goes through ``json_repair``; failures raise ``ToolJSONDecodeError`` with
a ``<system-reminder>`` the model can act on.  ``flatten_json_schema`` inlines local refs.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from trioagent._json_repair import MAX_REPAIR_CHARS
from trioagent.exception import ToolJSONDecodeError
from trioagent.model import flatten_json_schema, json_loads_with_repair

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "city": {"type": "string"},
        "flag": {"type": "boolean"},
        "xs": {"type": "array", "items": {"type": "integer"}},
        "o": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}

NOT_A_DICT = (
    "Error: Your argument string is decoded into a {} object, but a dict object is expected!"
)
DECODE_ERROR = (
    "Error: When decoding your tool arguments from JSON format to a Python dictionary, "
    "a JSONDecodeError was raised with message: {}."
)


def reminder(message: str, shown: str, hint: str = "") -> str:
    """The full error text the module promises (AgentScope's wording)."""
    return (
        f"<system-reminder>{message}\n\n"
        f"Your argument string is decoded by the following code snippet{hint}:\n"
        "```python\nimport json\n\n"
        f"your_tool_arguments = {shown!r}\njson.loads(your_tool_arguments)\n```\n\n"
        "**You should recorrect the arguments in JSON format.**</system-reminder>"
    )


def failure(text: str, schema: dict[str, Any] | None = None) -> ToolJSONDecodeError:
    with pytest.raises(ToolJSONDecodeError) as info:
        json_loads_with_repair(text, schema)
    return info.value


# -- what is left alone ------------------------------------------------------------------------


@pytest.mark.parametrize("blank", ["", " ", "\n\t  \r\n"])
@pytest.mark.parametrize("schema", [None, SCHEMA])
def test_blank_is_an_empty_object(blank: str, schema: dict[str, Any] | None) -> None:
    assert json_loads_with_repair(blank, schema) == {}


VALID_OBJECTS = [
    "{}",
    '{"a": 1}',
    '  {"a": 1}\n',
    '{"n": "42", "flag": "true", "none": "None"}',  # strings that look like other types
    '{"s": "it\'s \\"quoted\\", {not: json}, [1,", "t": "\\u00e9\\n\\t\\\\"}',
    '{"nested": {"deep": [1, {"x": [true, false, null]}]}, "empty": {"a": [], "b": {}}}',
    '{"big": 123456789012345678901234567890, "neg": -0.0, "exp": 1.5e-300, "f": 0.1}',
    '{"code": "```json\\n{\\"a\\": 1,}\\n```", "py": "True or None"}',
    '{"": "empty key", " ": "space key"}',
    '{"dup": 1, "dup": 2}',  # JSON semantics: the last one wins
    '{"emoji": "\U0001f600", "cjk": "东京"}',
]


@pytest.mark.parametrize("text", VALID_OBJECTS)
def test_valid_objects_are_returned_as_json_loads_gives_them(text: str) -> None:
    result = json_loads_with_repair(text)

    assert result == json.loads(text)
    assert json.dumps(result, sort_keys=True) == json.dumps(json.loads(text), sort_keys=True)


@pytest.mark.parametrize(
    "text",
    [
        '{"n": 1, "city": "Tokyo", "flag": false, "xs": [1, 2], "o": {"x": 3}}',
        '{"n": 1}',
        "{}",
    ],
)
def test_valid_objects_matching_the_schema_are_unchanged(text: str) -> None:
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["city"]["default"] = "Paris"

    assert json_loads_with_repair(text, schema) == json.loads(text)


def test_without_a_schema_no_type_is_coerced() -> None:
    assert json_loads_with_repair('{"n": "42", "flag": "true"}') == {"n": "42", "flag": "true"}


def test_the_schema_is_not_modified() -> None:
    schema = copy.deepcopy(SCHEMA)

    json_loads_with_repair('{"n": "4', schema)
    json_loads_with_repair('{"n": "4", "o": {"x": 1, "zz": 2}}', schema)

    assert schema == SCHEMA


# -- what is repaired ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # truncated (the usual streaming cut)
        ('{"city": "Tok', {"city": "Tok"}),
        ('{"a": 1', {"a": 1}),
        ('{"a": 1,', {"a": 1}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ('{"a": [', {"a": []}),
        ('{"a": {"b": 1', {"a": {"b": 1}}),
        ('{"a": 1, "b": {"c": [1, 2, {"d": "e', {"a": 1, "b": {"c": [1, 2, {"d": "e"}]}}),
        ("{", {}),
        ('{"a": "line\\n', {"a": "line\n"}),  # stream-stable: the escape already seen is kept
        ('{"a": "b\\', {"a": "b"}),  # a dangling backslash is dropped
        # single quotes
        ("{'a': 'b'}", {"a": "b"}),
        ("{'a': \"x\", \"b\": 'it'}", {"a": "x", "b": "it"}),
        # trailing commas
        ('{"a": 1,}', {"a": 1}),
        ('{"a": [1, 2,]}', {"a": [1, 2]}),
        ('{"a": [1, 2,],}', {"a": [1, 2]}),
        ('{"a": "b",\n}', {"a": "b"}),
        # Python literals
        ('{"a": True, "b": None, "c": False}', {"a": True, "b": None, "c": False}),
        ("{'a': True, 'b': [None, False]}", {"a": True, "b": [None, False]}),
        # code fences and chatter around the object
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ('```json\n{"a": 1', {"a": 1}),
        ('Sure! {"a": 1}', {"a": 1}),
        ('{"a": 1} trailing words', {"a": 1}),
        # other slips
        ("{a: 1}", {"a": 1}),
        ('{"a": "b" "c": "d"}', {"a": "b", "c": "d"}),
        ('{"a": 1 /* note */}', {"a": 1}),
        ('\ufeff{"a": 1}', {"a": 1}),
    ],
)
def test_malformed_objects_are_repaired(text: str, expected: dict[str, Any]) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)

    assert json_loads_with_repair(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"n": "42"}', {"n": 42}),
        ('{"n": "42", "flag": "true", "xs": [1, "2"]}', {"n": 42, "flag": True, "xs": [1, 2]}),
        ('{"city": 5}', {"city": "5"}),
        ('{"o": {"x": "5"}', {"o": {"x": 5}}),  # truncated and mistyped
        ('{"n": 7', {"n": 7}),
    ],
)
def test_the_schema_guides_the_repair(text: str, expected: dict[str, Any]) -> None:
    assert json_loads_with_repair(text, SCHEMA) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"n": 1, "zz": 3}',  # a top-level key the schema forbids
        '{"n": "1", "zz": 3}',  # ... even when another value would be coerced
        '{"n": "1", "o": {"x": 1, "zz": 2}}',  # a nested key
        '{"n": "1", "objs": [{"x": "1", "zz": 2}]}',  # a key inside a list item
    ],
)
def test_a_repair_that_drops_keys_of_a_valid_object_keeps_the_original(text: str) -> None:
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["objs"] = {"type": "array", "items": SCHEMA["properties"]["o"]}

    assert json_loads_with_repair(text, schema) == json.loads(text)


def test_a_valid_object_the_schema_cannot_repair_is_returned_for_validation() -> None:
    # json_repair gives up on "x" for an integer; the caller's validation reports it.
    assert json_loads_with_repair('{"n": "x"}', SCHEMA) == {"n": "x"}


def test_a_large_valid_object_is_returned() -> None:
    value = {f"k{i}": ["x" * 50, i, {"i": i}] for i in range(20_000)}
    text = json.dumps(value)

    assert json_loads_with_repair(text) == value


def test_a_large_truncated_object_is_repaired() -> None:
    text = '{"content": "' + "line of text\\n" * 2_000 + "cut her"

    assert json_loads_with_repair(text) == {"content": "line of text\n" * 2_000 + "cut her"}


def test_many_truncated_keys_are_repaired() -> None:
    text = "{" + ", ".join(f'"k{i}": {i}' for i in range(5_000)) + ', "last": "x'

    assert json_loads_with_repair(text) == {**{f"k{i}": i for i in range(5_000)}, "last": "x"}


# -- what is refused ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("[1, 2]", "<class 'list'>"),
        ('[{"a": 1}]', "<class 'list'>"),
        ('"text"', "<class 'str'>"),
        ("42", "<class 'int'>"),
        ("4.5", "<class 'float'>"),
        ("null", "<class 'NoneType'>"),
        ("true", "<class 'bool'>"),
    ],
)
def test_non_object_json_is_refused_with_the_exact_reminder(text: str, kind: str) -> None:
    error = failure(text)

    assert error.message == reminder(NOT_A_DICT.format(kind), text)
    assert str(error) == "ToolJSONDecodeError: " + error.message


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("hello", "Expecting value: line 1 column 1 (char 0)"),
        ("}", "Expecting value: line 1 column 1 (char 0)"),
        ("[", "Expecting value: line 1 column 2 (char 1)"),
        ("[1, 2", "Expecting ',' delimiter: line 1 column 6 (char 5)"),
        ('"abc', "Unterminated string starting at: line 1 column 1 (char 0)"),
        ('{"a"', "Expecting ':' delimiter: line 1 column 5 (char 4)"),
        ('{"a": 1}{"b": 2}', "Extra data: line 1 column 9 (char 8)"),
    ],
)
def test_unrepairable_text_quotes_the_decode_error(text: str, detail: str) -> None:
    assert failure(text).message == reminder(DECODE_ERROR.format(detail), text)


def test_the_original_decode_error_is_kept_when_a_schema_repair_fails() -> None:
    text = '{"n": "x'

    assert failure(text, SCHEMA).message == reminder(
        DECODE_ERROR.format("Unterminated string starting at: line 1 column 7 (char 6)"), text
    )


@pytest.mark.parametrize(
    "text",
    ['{"n": NaN}', '{"n": Infinity}', '{"n": -Infinity}', '{"xs": [1, NaN]}', "NaN"],
)
@pytest.mark.parametrize("schema", [None, SCHEMA])
def test_nan_and_infinity_are_refused(text: str, schema: dict[str, Any] | None) -> None:
    assert "NaN and Infinity are not valid JSON numbers" in failure(text, schema).message


def test_a_bare_nan_names_the_constant() -> None:
    message = failure("NaN").message

    assert message == reminder(
        "Error: NaN and Infinity are not valid JSON numbers (got NaN).", "NaN"
    )


def padded_list(length: int) -> str:
    """A valid JSON list of exactly ``length`` characters."""
    return "[" + " " * (length - 3) + "1]"


@pytest.mark.parametrize("length", [3, 199, 200])
def test_short_arguments_are_quoted_whole(length: int) -> None:
    text = padded_list(length)

    message = failure(text).message

    assert len(text) == length
    assert message == reminder(NOT_A_DICT.format("<class 'list'>"), text)


@pytest.mark.parametrize("length", [201, 5_000, 1_000_000])
def test_long_arguments_are_quoted_head_and_tail(length: int) -> None:
    text = padded_list(length)
    assert len(text) == length

    message = failure(text).message

    shown = text[:100] + "[TRUNCATE]" + text[-100:]
    hint = (
        ' (Because the JSON string is too long, a truncated label "[TRUNCATE]" is used here to '
        "indicate the truncation)"
    )
    assert message == reminder(NOT_A_DICT.format("<class 'list'>"), shown, hint)


# -- flatten_json_schema ------------------------------------------------------------------------


def test_flatten_without_defs_returns_the_schema_itself() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}

    assert flatten_json_schema(schema) is schema


def test_flatten_inlines_definitions_and_nested_refs() -> None:
    schema = {
        "type": "object",
        "properties": {
            "pet": {"anyOf": [{"$ref": "#/definitions/Cat"}, {"$ref": "#/$defs/Dog"}]},
            "pets": {"type": "array", "items": {"$ref": "#/$defs/Dog"}},
        },
        "definitions": {"Cat": {"type": "object", "properties": {"lives": {"type": "integer"}}}},
        "$defs": {
            "Dog": {"type": "object", "properties": {"owner": {"$ref": "#/$defs/Person"}}},
            "Person": {"type": "string"},
        },
    }
    original = copy.deepcopy(schema)

    flat = flatten_json_schema(schema)

    dog = {"type": "object", "properties": {"owner": {"type": "string"}}}
    assert flat == {
        "type": "object",
        "properties": {
            "pet": {
                "anyOf": [{"type": "object", "properties": {"lives": {"type": "integer"}}}, dog]
            },
            "pets": {"type": "array", "items": dog},
        },
    }
    assert schema == original


def test_flatten_keeps_instance_values_and_property_names_verbatim() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "$ref": {"type": "string"},  # a property called "$ref" is not a reference
            "default": {"$ref": "#/$defs/A"},
        },
        "default": {"$ref": "#/$defs/A"},  # instance data, not a schema
        "examples": [{"$ref": "#/$defs/A"}],
        "$defs": {"A": {"type": "integer", "enum": [{"$ref": "x"}], "const": {"$defs": 1}}},
    }

    flat = flatten_json_schema(schema)

    a = {"type": "integer", "enum": [{"$ref": "x"}], "const": {"$defs": 1}}
    assert flat == {
        "type": "object",
        "properties": {"$ref": {"type": "string"}, "default": a},
        "default": {"$ref": "#/$defs/A"},
        "examples": [{"$ref": "#/$defs/A"}],
    }
    flat["default"]["$ref"] = "changed"
    flat["properties"]["default"]["enum"][0]["$ref"] = "changed"
    assert schema["default"] == {"$ref": "#/$defs/A"}
    assert schema["$defs"]["A"]["enum"] == [{"$ref": "x"}]


def test_flatten_breaks_mutual_recursion() -> None:
    schema = {
        "$ref": "#/$defs/A",
        "$defs": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
        },
    }

    flat = flatten_json_schema(schema)

    assert flat == {
        "type": "object",
        "properties": {
            "b": {
                "type": "object",
                "properties": {"a": {"type": "object", "description": "(circular: A)"}},
            }
        },
    }


@pytest.mark.parametrize(
    "ref",
    [5, "https://example.com/schema", "#/$defs/Missing", "#/other/A"],
)
def test_flatten_keeps_refs_it_cannot_resolve(ref: Any) -> None:
    schema = {"properties": {"p": {"$ref": ref, "title": "P"}}, "$defs": {"A": {"type": "integer"}}}

    flat = flatten_json_schema(schema)

    assert flat == {"properties": {"p": {"$ref": ref, "title": "P"}}}
    flat["properties"]["p"]["title"] = "changed"
    assert schema["properties"]["p"]["title"] == "P"


def test_flatten_drops_nested_definitions_too() -> None:
    schema = {
        "properties": {
            "p": {"type": "string", "definitions": {"X": {}}, "$defs": {"Y": {}}},
            "q": {"$ref": "#/$defs/A"},
        },
        "$defs": {"A": {"type": "integer"}},
    }

    assert flatten_json_schema(schema) == {
        "properties": {"p": {"type": "string"}, "q": {"type": "integer"}}
    }


def test_flatten_a_boolean_true_definition_leaves_the_siblings() -> None:
    schema = {"properties": {"p": {"$ref": "#/$defs/Any", "title": "P"}}, "$defs": {"Any": True}}

    assert flatten_json_schema(schema) == {"properties": {"p": {"title": "P"}}}


# -- refused rather than rewritten ---------------------------------------------------------------


@pytest.mark.parametrize("text", ['{"n": 1e999}', '{"n": -1e999}', '{"xs": [1e400]}'])
@pytest.mark.parametrize("schema", [None, {"type": "object"}])
def test_overflowing_numbers_are_refused_like_infinity(
    text: str, schema: dict[str, Any] | None
) -> None:
    with pytest.raises(ToolJSONDecodeError, match="NaN and Infinity"):
        json_loads_with_repair(text, schema)


@pytest.mark.parametrize("depth", [1_000, 5_000])
def test_deeply_nested_json_is_a_tool_json_decode_error(depth: int) -> None:
    text = '{"a": ' + "[" * depth + "]" * depth + "}"
    with pytest.raises(ToolJSONDecodeError, match="nested too deeply"):
        json_loads_with_repair(text)


def test_an_integer_over_the_digit_limit_is_refused_not_turned_into_a_string() -> None:
    text = '{"n": ' + "7" * 5_000 + "}"
    with pytest.raises(ToolJSONDecodeError, match="integer string conversion"):
        json_loads_with_repair(text)


def test_long_invalid_text_is_refused_without_a_repair() -> None:
    text = '{"content": "' + "x" * (MAX_REPAIR_CHARS + 1)  # cut at the token limit
    with pytest.raises(ToolJSONDecodeError, match="too long to be repaired"):
        json_loads_with_repair(text)
    shorter = '{"content": "' + "x" * 1000
    assert json_loads_with_repair(shorter) == {"content": "x" * 1000}


def test_flatten_leaves_a_deeper_pointer_alone() -> None:
    schema: dict[str, Any] = {
        "properties": {"a": {"$ref": "#/$defs/Outer/properties/Inner"}},
        "$defs": {
            "Outer": {"type": "object", "properties": {"Inner": {"type": "integer"}}},
            "Inner": {"type": "string"},
        },
    }
    assert flatten_json_schema(schema)["properties"]["a"] == {
        "$ref": "#/$defs/Outer/properties/Inner"
    }


def test_flatten_unescapes_json_pointer_names() -> None:
    schema: dict[str, Any] = {
        "properties": {"a": {"$ref": "#/$defs/a~1b"}},
        "$defs": {"a/b": {"type": "integer"}},
    }
    assert flatten_json_schema(schema)["properties"]["a"] == {"type": "integer"}

"""Signature → JSON schema and docstring parsing, as AgentScope's FunctionTool does it
(including the lazy-annotation cases of its toolkit tests).

This module uses PEP 563 string annotations on purpose: every schema here is extracted from
annotations that must be resolved first.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import logging
import typing
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Optional, Union

import attrs
import jsonschema
import pydantic
import pytest

from trioagent.tool import FunctionTool
from trioagent.tool._docstring import parse_docstring
from trioagent.tool._hints import resolve_type_hints
from trioagent.tool._schema import remove_title_field
from trioagent.tool._signature import function_input_schema


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    """How loud."""

    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Address:
    """A postal address."""

    street: str
    zip_code: str = "00000"
    tags: list[str] = dataclasses.field(default_factory=list)


class Sub(pydantic.BaseModel):
    """A pydantic sub-model."""

    a: int
    b: list[str] = []


# -- functions whose schemas must equal pydantic's (AgentScope's extractor) ----------------------


def scalars(a: int, b: float, c: str, d: bool, e: bytes) -> None:
    """Scalars."""


def defaults(n: int = 5, name: str = "x", flag: bool = False, ratio: float = 0.5) -> None:
    """Defaults."""


def literals(mode: Literal["fast", "slow"], one: Literal["x"], mixed: Literal[1, "a"]) -> None:
    """Literals."""


def enums(color: Color, level: Level = Level.LOW) -> None:
    """Enums."""


def containers(
    a: list[int],
    b: list,  # type: ignore[type-arg]
    c: tuple[int, str],
    d: tuple[int, ...],
    e: set[str],
    f: dict,  # type: ignore[type-arg]
    g: dict[str, int],
    h: dict[str, Any],
    i: Sequence[float],
) -> None:
    """Containers."""


def optionals(
    a: Optional[int] = None,  # noqa: UP045
    b: int | None = None,
    c: Union[int, str] = 1,  # noqa: UP007
    d: str | None = None,
) -> None:
    """Optionals."""


def annotated(
    a: Annotated[str, pydantic.Field(description="from Field")],
    b: Annotated[int, pydantic.Field(ge=1, le=5)] = 3,
    c: Any = None,
) -> None:
    """Annotated."""


def nested(
    sub: Sub, subs: list[Sub], maybe: Sub | None = None, address: Address | None = None
) -> None:
    """Nested models.

    Args:
        sub: The sub model.
    """


REFERENCE_CASES = [scalars, defaults, literals, enums, containers, optionals, annotated, nested]


def _reference_schema(func: Any) -> dict[str, Any]:
    """AgentScope's extractor: a pydantic model built from the signature, titles removed."""
    doc = parse_docstring(inspect.getdoc(func))
    hints = typing.get_type_hints(func, include_extras=True)
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(func).parameters.items():
        default = ... if param.default is param.empty else param.default
        description = doc.params.get(name)
        field = (
            pydantic.Field(default=default)
            if description is None
            else pydantic.Field(default=default, description=description)
        )
        fields[name] = (hints.get(name, Any), field)
    model = pydantic.create_model(
        "_M", __config__=pydantic.ConfigDict(arbitrary_types_allowed=True), **fields
    )
    return remove_title_field(model.model_json_schema())


@pytest.mark.parametrize("func", REFERENCE_CASES, ids=lambda f: f.__name__)
def test_schema_matches_pydantic_shapes(func):
    assert function_input_schema(func) == _reference_schema(func)


def test_basic_shapes_spelled_out():
    schema = function_input_schema(defaults)
    assert schema == {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "default": 5},
            "name": {"type": "string", "default": "x"},
            "flag": {"type": "boolean", "default": False},
            "ratio": {"type": "number", "default": 0.5},
        },
    }
    assert "required" not in schema
    lit = function_input_schema(literals)["properties"]
    assert lit["mode"] == {"enum": ["fast", "slow"], "type": "string"}
    assert lit["one"] == {"const": "x", "type": "string"}
    assert lit["mixed"] == {"enum": [1, "a"]}


def test_enum_and_nested_model_use_defs_with_description_next_to_ref():
    schema = function_input_schema(enums)
    assert schema["properties"]["color"] == {"$ref": "#/$defs/Color"}
    assert schema["properties"]["level"] == {"$ref": "#/$defs/Level", "default": 1}
    assert schema["$defs"]["Color"] == {"enum": ["red", "green"], "type": "string"}
    assert schema["$defs"]["Level"] == {
        "description": "How loud.",
        "enum": [1, 2],
        "type": "integer",
    }
    nested_schema = function_input_schema(nested)
    assert nested_schema["properties"]["sub"] == {
        "$ref": "#/$defs/Sub",
        "description": "The sub model.",
    }
    assert nested_schema["required"] == ["sub", "subs"]
    assert "title" not in nested_schema["$defs"]["Sub"]


@attrs.define
class Point:
    """A point on the plane.

    Attributes:
        x: Horizontal position.
        y: Vertical position.
    """

    x: int
    y: int = 0
    label: str | None = None
    tags: list[str] = attrs.field(factory=list)


@attrs.define
class Tree:
    value: int
    children: list[Tree] = attrs.field(factory=list)


def draw(point: Point, points: list[Point] | None = None) -> None:
    """Draw.

    Args:
        point: Where to draw.
    """


def walk(tree: Tree) -> None:
    """Walk a (recursive) tree."""


def test_attrs_class_becomes_an_object_definition():
    schema = function_input_schema(draw)
    assert schema["properties"] == {
        "point": {"$ref": "#/$defs/Point", "description": "Where to draw."},
        "points": {
            "anyOf": [{"items": {"$ref": "#/$defs/Point"}, "type": "array"}, {"type": "null"}],
            "default": None,
        },
    }
    assert schema["$defs"]["Point"] == {
        "description": "A point on the plane.",
        "type": "object",
        "properties": {
            "x": {"type": "integer", "description": "Horizontal position."},
            "y": {"type": "integer", "description": "Vertical position.", "default": 0},
            "label": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "tags": {"items": {"type": "string"}, "type": "array"},
        },
        "required": ["x"],
    }


def test_recursive_attrs_class():
    schema = function_input_schema(walk)
    assert schema["$defs"]["Tree"]["properties"]["children"] == {
        "items": {"$ref": "#/$defs/Tree"},
        "type": "array",
    }


def test_dataclass_matches_pydantic():
    def takes(address: Address) -> None:
        pass

    takes.__annotations__ = {"address": Address}
    schema = function_input_schema(takes)
    assert schema["$defs"]["Address"] == {
        "description": "A postal address.",
        "type": "object",
        "properties": {
            "street": {"type": "string"},
            "zip_code": {"type": "string", "default": "00000"},
            "tags": {"items": {"type": "string"}, "type": "array"},
        },
        "required": ["street"],
    }


def injected(query: str, emit: Any, _agent_state: Any) -> None:
    """Only query is visible."""


def variadic(query: str, *args: Any, **kwargs: Any) -> None:
    """Variadics no schema can describe."""


def test_injected_parameters_are_excluded_and_variadic_ones_refused():
    schema = function_input_schema(injected)
    assert schema == {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    }
    with pytest.raises(TypeError, match=r"variadic takes \*args"):
        function_input_schema(variadic)


def positional_only(a: int, /, b: int) -> None:
    """Bad."""


def test_positional_only_parameters_are_rejected():
    with pytest.raises(ValueError, match="positional-only"):
        function_input_schema(positional_only)


def described(
    a: Annotated[str, "plain string metadata"],
    b: Annotated[int, "ignored because the docstring wins"],
    c: Annotated[list[int], pydantic.Field(min_length=1, max_length=3)],
    d: Annotated[str, pydantic.Field(min_length=2)] = "ab",
) -> None:
    """Described.

    Args:
        b: From the docstring.
    """


def test_annotated_descriptions_and_constraints():
    props = function_input_schema(described)["properties"]
    assert props["a"] == {"type": "string", "description": "plain string metadata"}
    assert props["b"] == {"type": "integer", "description": "From the docstring."}
    assert props["c"] == {
        "items": {"type": "integer"},
        "type": "array",
        "minItems": 1,
        "maxItems": 3,
    }
    assert props["d"] == {"type": "string", "minLength": 2, "default": "ab"}


def unannotated(a, b=3):  # type: ignore[no-untyped-def]
    """No hints."""


def test_unannotated_parameters_accept_anything():
    schema = function_input_schema(unannotated)
    assert schema["properties"] == {"a": {}, "b": {"default": 3}}
    assert schema["required"] == ["a"]


# -- definitions: recursion, name clashes, descriptions, titles ----------------------------------


def _valid_schema(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


class Node(pydantic.BaseModel):
    value: int
    children: list[Node] = []


def test_recursive_pydantic_model_definition_is_its_object_schema() -> None:
    def visit(node: Node) -> None:
        """Visit."""

    schema = function_input_schema(visit)
    assert schema["properties"]["node"] == {"$ref": "#/$defs/Node"}
    assert schema["$defs"] == {
        "Node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"items": {"$ref": "#/$defs/Node"}, "type": "array", "default": []},
            },
            "required": ["value"],
        }
    }
    validator = _valid_schema(schema)
    assert validator.is_valid({"node": {"value": 1, "children": [{"value": 2}]}})
    assert not validator.is_valid({"node": {"value": "x"}})
    assert not validator.is_valid({"node": {"value": 1, "children": [{"value": "y"}]}})


def _pydantic_point_holder() -> type[pydantic.BaseModel]:
    class Point(pydantic.BaseModel):  # named like the attrs Point above, a different class
        label: str

    class Holder(pydantic.BaseModel):
        point: Point

    return Holder


PointHolder = _pydantic_point_holder()


def test_pydantic_submodel_named_like_another_class_gets_its_own_definition() -> None:
    def place(a: Point, h: PointHolder) -> None:
        """Place."""

    def place_reversed(h: PointHolder, a: Point) -> None:
        """Place, the pydantic model first."""

    for func in (place, place_reversed):
        schema = function_input_schema(func)
        attrs_ref = schema["properties"]["a"]["$ref"]
        pydantic_ref = schema["$defs"]["Holder"]["properties"]["point"]["$ref"]
        assert attrs_ref != pydantic_ref
        assert len(schema["$defs"]) == 3
        validator = _valid_schema(schema)
        assert validator.is_valid({"a": {"x": 1}, "h": {"point": {"label": "p"}}})
        assert not validator.is_valid({"a": {"x": 1}, "h": {"point": {"x": 1}}})
        assert not validator.is_valid({"a": {"label": "p"}, "h": {"point": {"label": "p"}}})


class Holding(pydantic.BaseModel):
    color: Color
    address: Address | None = None


def test_class_used_by_a_parameter_and_inside_a_pydantic_model_has_one_definition() -> None:
    def store(color: Color, holding: Holding, address: Address) -> None:
        """Store."""

    schema = function_input_schema(store)
    assert set(schema["$defs"]) == {"Color", "Holding", "Address"}
    assert schema["$defs"]["Holding"]["properties"]["color"] == {"$ref": "#/$defs/Color"}
    assert schema == _reference_schema(store)


@dataclasses.dataclass
class Window:
    width: int


def test_undocumented_dataclass_has_no_description() -> None:
    def resize(window: Window) -> None:
        """Resize."""

    assert Window.__doc__  # the generated signature, not a docstring
    assert function_input_schema(resize)["$defs"]["Window"] == {
        "type": "object",
        "properties": {"width": {"type": "integer"}},
        "required": ["width"],
    }


class Inner(pydantic.BaseModel):
    """Inner."""

    y: str
    z: tuple[int, str] | None = None


class Outer(pydantic.BaseModel):
    inner: Inner
    inners: list[Inner] = []


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value).union(*(_keys(sub) for sub in value.values()))
    if isinstance(value, list):
        return set().union(*(_keys(item) for item in value))
    return set()


def test_nested_pydantic_definitions_are_title_free() -> None:
    def take(outer: Outer) -> None:
        """Take."""

    for schema in (function_input_schema(take), FunctionTool(take).input_schema):
        assert "title" not in _keys(schema)
        assert schema["$defs"]["Inner"]["description"] == "Inner."


# -- unresolvable annotations -------------------------------------------------------------------


def lookup(key: str, limit: int = 3, cache: NoSuchCache | None = None) -> None:  # noqa: F821
    """Lookup."""


def test_unresolvable_annotation_leaves_the_other_parameters_typed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="trioagent.tool"):
        schema = function_input_schema(lookup)
    assert schema["properties"] == {
        "key": {"type": "string"},
        "limit": {"type": "integer", "default": 3},
        "cache": {"default": None},
    }
    assert schema["required"] == ["key"]
    _valid_schema(schema)
    [record] = caplog.records
    assert "'cache'" in record.getMessage()
    assert "lookup" in record.getMessage()
    assert resolve_type_hints(lookup)["limit"] is int


@dataclasses.dataclass
class Lookup:
    key: str
    cache: NoSuchCache | None = None  # noqa: F821


def test_unresolvable_field_annotation_leaves_the_other_fields_typed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def run(query: Lookup) -> None:
        """Run."""

    with caplog.at_level(logging.WARNING, logger="trioagent.tool"):
        definition = function_input_schema(run)["$defs"]["Lookup"]
    assert definition["properties"] == {"key": {"type": "string"}, "cache": {"default": None}}
    [record] = caplog.records
    assert "'cache'" in record.getMessage()
    assert "Lookup" in record.getMessage()


# -- docstrings --------------------------------------------------------------------------------

GOOGLE = """Search the web.

Use it for current events.

Args:
    query (`str`):
        The search query.
    limit (int): How many results
        to return.
    *args: Ignored.

Returns:
    `str`: The results.
"""

NUMPY = """Search the web.

Parameters
----------
query : str
    The search query.
limit : int, optional
    How many results
    to return.

Returns
-------
str
    The results.
"""

REST = """Search the web.

:param query: The search query.
:param int limit: How many results
    to return.
:returns: The results.
"""


@pytest.mark.parametrize("doc", [GOOGLE, NUMPY, REST], ids=["google", "numpy", "rest"])
def test_docstring_styles(doc):
    parsed = parse_docstring(doc)
    assert parsed.params["query"] == "The search query."
    assert parsed.params["limit"] == "How many results\nto return."
    assert parsed.description.startswith("Search the web.")
    assert "Returns" not in parsed.description
    assert "results" not in parsed.description.removeprefix("Search the web.")


def test_description_is_the_text_before_the_sections():
    assert parse_docstring(GOOGLE).description == "Search the web.\nUse it for current events."
    assert parse_docstring("One line.").description == "One line."
    assert parse_docstring(None).description == ""
    assert parse_docstring("   ").params == {}


def test_function_tool_description_and_schema_from_docstring():
    def search(query: str, limit: int = 10) -> str:
        """Search the web.

        Args:
            query: The search query.
            limit: How many results.
        """
        return query

    search.__annotations__ = {"query": str, "limit": int, "return": str}
    tool = FunctionTool(search)
    assert tool.name == "search"
    assert tool.description == "Search the web."
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "The search query."},
            "limit": {"type": "integer", "description": "How many results.", "default": 10},
        },
        "required": ["query"],
    }


def greet(name: str, greeting: str = "Hello") -> str:
    """Greet someone.

    Args:
        name: Who.
        greeting: How.
    """
    return f"{greeting}, {name}"


def test_partial_unwraps_name_doc_and_bound_arguments():
    bound = functools.partial(greet, greeting="Hi")
    tool = FunctionTool(bound)
    assert tool.name == "greet"
    assert tool.description == "Greet someone."
    assert tool.input_schema["properties"]["greeting"]["default"] == "Hi"
    renamed = functools.partial(greet)
    renamed.__name__ = "salute"  # type: ignore[attr-defined]
    renamed.__doc__ = "Salute."
    tool = FunctionTool(renamed)
    assert (tool.name, tool.description) == ("salute", "Salute.")


def test_pydantic_model_as_explicit_input_schema():
    class Params(pydantic.BaseModel):
        """Choose a mode."""

        mode: str
        level: int = pydantic.Field(default=3, ge=1, le=5)

    tool = FunctionTool(lambda mode, level=3: mode, name="pick", input_schema=Params)
    assert tool.input_schema == {
        "description": "Choose a mode.",
        "type": "object",
        "properties": {
            "mode": {"type": "string"},
            "level": {"type": "integer", "default": 3, "minimum": 1, "maximum": 5},
        },
        "required": ["mode"],
    }


def test_explicit_dict_schema_is_used_and_checked():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert FunctionTool(lambda q: q, name="t", input_schema=schema).input_schema is schema
    with pytest.raises(ValueError, match="Invalid input_schema"):
        FunctionTool(lambda q: q, name="t", input_schema={"type": "array"})
    with pytest.raises(ValueError, match="Invalid input_schema"):
        FunctionTool(
            lambda q: q, name="t", input_schema={"type": "object", "properties": {"q": {"type": 5}}}
        )


# -- title removal (AgentScope's unit cases) ----------------------------------------------


def test_remove_title_field_cases():
    top = {"title": "Root", "type": "object", "properties": {}}
    assert "title" not in remove_title_field(top)
    props = {"type": "object", "properties": {"name": {"title": "Name", "type": "string"}}}
    assert remove_title_field(props)["properties"]["name"] == {"type": "string"}
    defs = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/M"}},
        "$defs": {"M": {"title": "M", "type": "object", "properties": {"v": {"title": "V"}}}},
    }
    assert remove_title_field(defs)["$defs"] == {"M": {"type": "object", "properties": {"v": {}}}}
    nested = {
        "type": "object",
        "properties": {},
        "items": {"title": "I"},
        "additionalProperties": {"title": "A", "type": "string"},
        "$defs": {"AlwaysTrue": True},
    }
    remove_title_field(nested)
    assert nested["items"] == {}
    assert nested["additionalProperties"] == {"type": "string"}
    assert nested["$defs"] == {"AlwaysTrue": True}

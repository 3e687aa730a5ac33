"""One walk over an annotation gives a tool both its JSON schema and its argument converter.

:meth:`Walker.shape` turns an annotation into a :class:`Shape`: ``shape.schema(defs)`` is what
the model is shown, ``shape.convert(value, path)`` turns the JSON value the model sent (already
checked against that schema) into the annotated Python type.  Being one object, the two cannot
disagree.  Schemas follow the shapes pydantic produces, titles left out.

==========================  =====================================  ==============================
annotation                  schema                                 conversion
==========================  =====================================  ==============================
``str bool``                ``{"type": "string" | "boolean"}``     exactly that JSON type
``int``                     ``{"type": "integer"}``                an integer, or an integral
                                                                   float (``2.0`` → ``2``)
``float``                   ``{"type": "number"}``                 any number (``2`` → ``2.0``)
``bytes``                   ``{"type": "string", "format":         a string, UTF-8 encoded
                            "binary"}``
``None``                    ``{"type": "null"}``                   ``None``
``Any`` / ``object`` / none ``{}``                                 the value as it is
``Literal[a, b]``           ``{"enum": [a, b], "type": ...}``      the declared value (an enum
                            (``const`` for one value; no ``type``  member for ``Literal[E.A]``)
                            when the values' types differ)
``Enum`` subclass           ``{"$ref": "#/$defs/Name"}``,          the member whose value equals
                            ``{"enum": [...], "type": ...}``       the JSON value
``list[X]`` / ``Sequence``  ``{"items": X, "type": "array"}``      a list, items converted
``set`` / ``frozenset``     the same with ``uniqueItems``          the declared container
``tuple[X, Y]``             ``prefixItems``, ``minItems`` and      a tuple of the declared length
                            ``maxItems``
``dict[K, V]`` / dict       ``{"additionalProperties": V | true,   keys converted too: one that
                            "type": "object"}``                    is not a ``K`` is read as
                                                                   JSON (``"7"`` → ``7``)
``X | Y`` / ``Optional``    ``{"anyOf": [X, Y]}``                  see below
``Annotated[X, ...]``       X with ``description`` (a string, or   as X
                            metadata with a ``description``) and
                            ``ge/gt/le/lt/multiple_of/
                            min_length/max_length`` constraints
attrs class / dataclass     ``{"$ref": ...}``, an object schema    built from an object keyed by
                            of its ``__init__`` fields (an attrs   those names; extra keys are an
                            field by its alias; class docstring    error; an instance passes as
                            → descriptions)                        it is
``TypedDict``               the same, its keys required as the     a dict of the converted
                            class says (``total``, ``Required`` /  values (extra keys are an
                            ``NotRequired``)                       error)
``NamedTuple``              the same (a field with a default is    an instance, from an object
                            optional)                              keyed by the field names
``datetime`` / ``date`` /   ``{"format": "date-time" | "date" |    parsed from ISO 8601
``time``                    "time", "type": "string"}``            (``fromisoformat``)
``UUID`` / ``Path``         ``{"format": "uuid" | "path",          ``UUID(s)`` / ``Path(s)`` (any
                            "type": "string"}``                    ``PurePath`` subclass)
``Decimal``                 ``{"anyOf": [number, numeric           exactly: ``0.1`` → ``Decimal(
                            string]}``                             "0.1")``; no NaN or infinity
pydantic model              its ``model_json_schema()`` under      ``model_validate`` (pydantic
                            ``$defs`` (with its nested             is never imported here)
                            definitions)
``NewType`` of X            as X                                   as X
a class some JSON values    the ``anyOf`` of those JSON types      the value, if it is an
are (``numbers.Number``,    (``Number``: integer, number,          instance
``Hashable``)               boolean)
other classes               refused when a tool is registered      (``socket``, ``timedelta``:
                            (a :class:`UnsupportedAnnotation`)     nothing the model sends is
                                                                   one)
==========================  =====================================  ==============================

Conversion is no looser than the schema: no ``"5"`` for an ``int``, no ``1`` for a ``bool``.

**Unions.** ``None`` goes to ``None``; a JSON scalar whose exact type is a member (``2`` for
``float | int``) is kept as it is.  Otherwise the members whose JSON shape can hold the value
(an object: classes, models, dicts; an array: lists, tuples, sets; ...) are tried in
declaration order, catch-alls (``Any``, ``object``) last, and the first that converts wins.
When none does, the error names every member and why it refused the value.

Errors are :class:`ConversionError`, whose ``errors`` are model-readable lines, each ending with
the JSON path of the bad value (``"required field missing (at $.place.city)"``).
"""

from __future__ import annotations

import enum
import inspect
import types
from collections.abc import Iterable, Mapping
from typing import Annotated, Literal, NoReturn, Union, get_args, get_origin

from .._core.json_types import JSONObject, JSONValue
from ..exception import TrioagentError
from ._schema import Definitions

__all__ = [
    "AnnotatedShape",
    "Anything",
    "ConversionError",
    "EnumShape",
    "LiteralShape",
    "NoneShape",
    "Scalar",
    "Shape",
    "UnsupportedAnnotation",
    "fail",
    "json_kind",
    "show",
    "type_name",
]

_SCALAR_SCHEMAS: dict[type, JSONObject] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    bytes: {"type": "string", "format": "binary"},
}
_CONSTRAINTS = {
    "ge": "minimum",
    "gt": "exclusiveMinimum",
    "le": "maximum",
    "lt": "exclusiveMaximum",
    "multiple_of": "multipleOf",
}
_LENGTH_CONSTRAINTS = {
    "min_length": ("minLength", "minItems"),
    "max_length": ("maxLength", "maxItems"),
}
_SHOWN_CHARS = 60


class ConversionError(TrioagentError, ValueError):
    """A value that cannot be converted; ``errors`` has one readable line per problem."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


class UnsupportedAnnotation(TrioagentError, TypeError):
    """An annotation no JSON value can satisfy (``socket.socket``).

    ``where`` names the fields leading to it (``["Endpoint.sock"]``) when it is nested in a
    record class.
    """

    def __init__(self, annotation: str, where: tuple[str, ...] = ()) -> None:
        self.annotation = annotation
        self.where = where
        inside = f"{' -> '.join(where)} is " if where else "it is "
        super().__init__(f"{inside}annotated {annotation}, which has no JSON-schema form")

    def within(self, field: str) -> UnsupportedAnnotation:
        """The same error, one record field further out."""
        return UnsupportedAnnotation(self.annotation, (field, *self.where))


def fail(message: str, path: str) -> NoReturn:
    raise ConversionError([f"{message} (at {path})"])


class Shape:
    """What one annotation means to a tool: its schema, and how a JSON value becomes it."""

    #: the JSON types a value may arrive as (``None``: any)
    kinds: frozenset[str] | None = None
    #: whether a JSON value may differ from what the annotation declares
    needs_conversion = False
    #: the JSON scalar type (``str``, ``int``, ``float``, ``bool``) the annotation is exactly
    exact: type | None = None
    #: ``Any`` or ``object``: a union tries it last
    catch_all = False

    def __init__(self, annotation: object) -> None:
        self.name = type_name(annotation)

    def schema(self, defs: Definitions) -> JSONObject:
        """A fresh schema dict; class definitions go to ``defs``."""
        return {}

    def convert(self, value: JSONValue, path: str) -> object:
        """``value`` as the annotated type; ``path`` names it in errors.

        Raises:
            ConversionError: it does not fit.
        """
        return value


class Anything(Shape):
    """``Any``, ``object``, an unresolved annotation, a ``TypeVar``, or (with an explicit
    schema) a class no JSON value can be."""

    def __init__(self, annotation: object, *, catch_all: bool):
        super().__init__(annotation)
        self.catch_all = catch_all


class NoneShape(Shape):
    kinds = frozenset({"null"})

    def schema(self, defs: Definitions) -> JSONObject:
        return {"type": "null"}

    def convert(self, value: JSONValue, path: str) -> object:
        if value is not None:
            fail(f"expected null, got {show(value)}", path)
        return None


class Scalar(Shape):
    """``str``, ``int``, ``float``, ``bool``, ``bytes`` (or a subclass: schema ``{}``)."""

    def __init__(self, cls: type) -> None:
        super().__init__(cls)
        self.cls = cls
        self.exact = cls if cls in (str, int, float, bool) else None
        self.needs_conversion = cls in (int, bytes)
        if issubclass(cls, bool):
            self.kinds = frozenset({"boolean"})
        elif issubclass(cls, int | float):
            self.kinds = frozenset({"integer", "number"})
        else:
            self.kinds = frozenset({"string"})

    def schema(self, defs: Definitions) -> JSONObject:
        return dict(_SCALAR_SCHEMAS.get(self.cls, {}))

    def convert(self, value: JSONValue, path: str) -> object:
        cls = self.cls
        if issubclass(cls, bool):
            if isinstance(value, bool):
                return value
            fail(f"expected a boolean, got {show(value)}", path)
        if issubclass(cls, int):
            if isinstance(value, int) and not isinstance(value, bool):
                return value if cls is int else cls(value)
            if isinstance(value, float) and value.is_integer():
                return cls(int(value))
            fail(f"expected an integer, got {show(value)}", path)
        if issubclass(cls, float):
            if isinstance(value, int | float) and not isinstance(value, bool):
                return cls(value)
            fail(f"expected a number, got {show(value)}", path)
        if issubclass(cls, str):
            if isinstance(value, str):
                return value if cls is str else cls(value)
            fail(f"expected a string, got {show(value)}", path)
        if isinstance(value, str):
            return value.encode()
        if isinstance(value, bytes | bytearray):
            return bytes(value)
        fail(f"expected a string, got {show(value)}", path)


class EnumShape(Shape):
    needs_conversion = True

    def __init__(self, cls: type[enum.Enum]) -> None:
        super().__init__(cls)
        self.cls = cls
        self.kinds = _kinds_of_values(member.value for member in cls)

    def schema(self, defs: Definitions) -> JSONObject:
        return defs.ref(self.cls, self._define)

    def _define(self, name: str) -> JSONObject:
        schema = _literal_schema(tuple(member.value for member in self.cls))
        if "const" in schema:
            schema["enum"] = [schema.pop("const")]
        doc = self.cls.__dict__.get("__doc__")
        if doc:
            schema = {"description": inspect.cleandoc(doc), **schema}
        return schema

    def convert(self, value: JSONValue, path: str) -> object:
        if isinstance(value, self.cls):
            return value
        for member in self.cls:
            if _json_equal(value, member.value):
                return member
        choices = ", ".join(repr(member.value) for member in self.cls)
        fail(f"{show(value)} is not a valid {self.cls.__name__} (one of: {choices})", path)


class LiteralShape(Shape):
    needs_conversion = True

    def __init__(self, annotation: object) -> None:
        super().__init__(annotation)
        self.values = get_args(annotation)
        self.kinds = _kinds_of_values(_plain(value) for value in self.values)

    def schema(self, defs: Definitions) -> JSONObject:
        return _literal_schema(self.values)

    def convert(self, value: JSONValue, path: str) -> object:
        for allowed in self.values:
            if value is allowed or _json_equal(value, _plain(allowed)):
                return allowed  # the declared value: an enum member, 1 rather than 1.0
        choices = ", ".join(repr(_plain(allowed)) for allowed in self.values)
        fail(f"expected one of {choices}, got {show(value)}", path)


class AnnotatedShape(Shape):
    def __init__(self, annotation: object, base: Shape) -> None:
        super().__init__(annotation)
        self.base = base
        self.metadata: tuple[object, ...] = getattr(annotation, "__metadata__", ())
        self.kinds = base.kinds
        self.needs_conversion = base.needs_conversion
        self.exact = base.exact
        self.catch_all = base.catch_all

    def schema(self, defs: Definitions) -> JSONObject:
        schema = self.base.schema(defs)
        for item in self.metadata:
            if isinstance(item, str):
                schema["description"] = item
                continue
            description = getattr(item, "description", None)
            if isinstance(description, str) and description:
                schema["description"] = description
            for constraint in [item, *(getattr(item, "metadata", None) or [])]:
                _apply_constraint(schema, constraint)
        return schema

    def convert(self, value: JSONValue, path: str) -> object:
        return self.base.convert(value, path)


# -- small helpers ------------------------------------------------------------------------


def _literal_schema(values: tuple[object, ...]) -> JSONObject:
    plain = [_plain(v) for v in values]
    kinds = {json_kind(v) for v in plain}
    schema: JSONObject = {"const": plain[0]} if len(plain) == 1 else {"enum": plain}
    if len(kinds) == 1 and None not in kinds:
        schema["type"] = kinds.pop()
    return schema


def _apply_constraint(schema: JSONObject, item: object) -> None:
    for attr, keyword in _CONSTRAINTS.items():
        value = getattr(item, attr, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            schema[keyword] = value
    is_array = schema.get("type") == "array"
    for attr, (string_keyword, array_keyword) in _LENGTH_CONSTRAINTS.items():
        value = getattr(item, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            schema[array_keyword if is_array else string_keyword] = value


def _json_equal(value: object, expected: object) -> bool:
    """``==`` as JSON sees it: ``True`` is not ``1``, ``"1"`` is not ``1``; ``1.0`` is ``1``."""
    if isinstance(value, bool) or isinstance(expected, bool):
        return isinstance(value, bool) and isinstance(expected, bool) and value == expected
    if isinstance(value, int | float) and isinstance(expected, int | float):
        return value == expected
    return type(value) is type(expected) and bool(value == expected)


def json_kind(value: object) -> str | None:
    """The JSON type of ``value``; ``None`` for a Python object no JSON type describes."""
    if value is None:
        return "null"
    for kind, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if isinstance(value, kind):
            return name
    if isinstance(value, list | tuple | set | frozenset):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return None


def _kinds_of_values(values: Iterable[object]) -> frozenset[str] | None:
    kinds: set[str] = set()
    for value in values:
        kind = json_kind(value)
        if kind is None:
            return None
        kinds.add(kind)
        if kind == "integer":
            kinds.add("number")  # 1.0 for a 1
    return frozenset(kinds)


def _plain(value: object) -> object:
    return value.value if isinstance(value, enum.Enum) else value


def show(value: object) -> str:
    kind = json_kind(value)
    if kind == "object":
        return "an object"
    if kind == "array":
        return "an array"
    if kind is None:
        return f"a {type(value).__name__}"
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def type_name(tp: object) -> str:
    """A short name for a type: ``Spot | list[Spot]``, ``dict[str, int]``, ``Literal['a']``."""
    if tp is None or tp is type(None):
        return "None"
    if tp is Ellipsis:
        return "..."
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Annotated:
        return type_name(args[0])
    if origin is Union or origin is types.UnionType:
        return " | ".join(type_name(arg) for arg in args)
    if origin is Literal:
        shown = (
            f"{type(a).__name__}.{a.name}" if isinstance(a, enum.Enum) else repr(a) for a in args
        )
        return f"Literal[{', '.join(shown)}]"
    if origin is not None and args:
        return f"{type_name(origin)}[{', '.join(type_name(arg) for arg in args)}]"
    if isinstance(tp, type):
        return tp.__name__
    return repr(tp).replace("typing.", "")

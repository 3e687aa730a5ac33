"""Shapes of standard classes a JSON value stands for: dates and times, UUIDs and paths as
formatted strings, ``Decimal`` as a number or a numeric string, and the abstract classes some
JSON values belong to (``numbers.Number``, ``Hashable``) as the union of those JSON types.

Each converts the JSON value to the annotated class before the call (``"2024-05-01"`` →
``datetime.date(2024, 5, 1)``), with a model-readable error naming the expected form.
"""

from __future__ import annotations

import datetime
import decimal
import pathlib
import uuid
from collections.abc import Callable

from .._core.json_types import JSONObject, JSONValue
from ._schema import Definitions
from ._shape import Shape, fail, show

__all__ = ["FORMATTED_CLASSES", "JSONClassShape", "format_shape", "jsonable_default"]

#: A string-formatted class: its schema ``format``, what the model is told, and its parser.
_STRING_FORMATS: tuple[tuple[type, str, str], ...] = (
    (datetime.datetime, "date-time", "an ISO 8601 date-time string (2024-05-01T13:30:00Z)"),
    (datetime.date, "date", "an ISO 8601 date string (2024-05-01)"),
    (datetime.time, "time", "an ISO 8601 time string (13:30:00)"),
    (uuid.UUID, "uuid", "a UUID string"),
    (pathlib.PurePath, "path", "a path string"),
)

_DECIMAL_PATTERN = r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$"


class _FormattedString(Shape):
    kinds = frozenset({"string"})
    needs_conversion = True

    def __init__(self, cls: type, fmt: str, expected: str) -> None:
        super().__init__(cls)
        self.cls = cls
        self.format = fmt
        self.expected = expected
        parse: Callable[[str], object] = getattr(cls, "fromisoformat", cls)
        self._parse = parse

    def schema(self, defs: Definitions) -> JSONObject:
        return {"format": self.format, "type": "string"}

    def convert(self, value: JSONValue, path: str) -> object:
        if isinstance(value, self.cls):
            return value
        if isinstance(value, str) and value:
            try:
                return self._parse(value)
            except (TypeError, ValueError):
                pass
        fail(f"expected {self.expected}, got {show(value)}", path)


class _Decimal(Shape):
    """``Decimal``: a JSON number or a numeric string, converted exactly (``0.1`` is read as
    the decimal ``0.1``, not the nearest float)."""

    kinds = frozenset({"integer", "number", "string"})
    needs_conversion = True

    def __init__(self, cls: type[decimal.Decimal]) -> None:
        super().__init__(cls)
        self.cls = cls

    def schema(self, defs: Definitions) -> JSONObject:
        return {"anyOf": [{"type": "number"}, {"pattern": _DECIMAL_PATTERN, "type": "string"}]}

    def convert(self, value: JSONValue, path: str) -> object:
        if isinstance(value, self.cls):
            return value
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            try:
                number = self.cls(str(value).strip())
            except decimal.InvalidOperation:
                pass
            else:
                if number.is_finite():
                    return number
        fail(f"expected a decimal number (a number or a numeric string), got {show(value)}", path)


#: The classes :func:`format_shape` describes (and their subclasses).
FORMATTED_CLASSES: tuple[type, ...] = (decimal.Decimal, *(cls for cls, _, _ in _STRING_FORMATS))


def format_shape(tp: type) -> Shape:
    """The shape of a date/time, UUID, path or ``Decimal`` class (one of
    :data:`FORMATTED_CLASSES`)."""
    if issubclass(tp, decimal.Decimal):
        return _Decimal(tp)
    for cls, fmt, expected in _STRING_FORMATS:
        if issubclass(tp, cls):
            return _FormattedString(tp, fmt, expected)
    raise TypeError(f"{tp.__name__} is not one of the formatted classes")


_JSON_CLASSES: tuple[tuple[type, str], ...] = (
    (str, "string"),
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (list, "array"),
    (dict, "object"),
    (type(None), "null"),
)


class JSONClassShape(Shape):
    """A class some JSON values are instances of (``numbers.Number``, ``Hashable``,
    ``Sized``): the schema names exactly those JSON types; a value of another type is
    refused."""

    def __init__(self, tp: type) -> None:
        super().__init__(tp)
        self.cls = tp
        self.types = [name for json_cls, name in _JSON_CLASSES if issubclass(json_cls, tp)]
        self.kinds = frozenset(self.types) | (
            {"number"} if "integer" in self.types else frozenset()
        )
        self.needs_conversion = True

    def schema(self, defs: Definitions) -> JSONObject:
        if len(self.types) == 1:
            return {"type": self.types[0]}
        return {"anyOf": [{"type": name} for name in self.types]}

    def convert(self, value: JSONValue, path: str) -> object:
        if isinstance(value, self.cls):
            return value
        fail(f"expected {self.name} ({', '.join(self.types)}), got {show(value)}", path)


def jsonable_default(value: object) -> object:
    """A default of one of these classes as the model is shown it (``date`` → its ISO
    string); other values as they are."""
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | pathlib.PurePath | decimal.Decimal):
        return str(value)
    return value

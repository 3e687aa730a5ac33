"""An attrs class, a dataclass or a ``TypedDict`` as the schema of a JSON object.

Structured output takes such a class as its schema: the model is shown the object schema of
its fields (built by the same walk as a tool's parameters, see :mod:`._shape`), and an object
the model sends is checked by converting it field by field, so a field's type and an attrs
validator are enforced as they are for a tool argument.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping

from .._core.json_types import JSONObject, JSONValue
from ._hints import NO_SHOWN_DEFAULT, is_record_class, resolve_hints
from ._schema import DEFS_REF, Definitions, remove_title_field
from ._shape import ConversionError, Shape
from ._walker import Walker, property_schema

__all__ = ["ClassSchema", "is_schema_class"]


def is_schema_class(tp: object) -> bool:
    """Whether ``tp`` is an attrs class, a dataclass or a ``TypedDict``."""
    return isinstance(tp, type) and (is_record_class(tp) or typing.is_typeddict(tp))


def _unwrap_requirement(annotation: object, required: bool) -> tuple[object, bool]:
    """``NotRequired[X]`` / ``Required[X]`` → ``X`` and whether the key is required (read from
    the annotation: ``__required_keys__`` misses them in a module with postponed
    annotations)."""
    origin = typing.get_origin(annotation)
    if origin is typing.NotRequired or origin is typing.Required:
        return typing.get_args(annotation)[0], origin is typing.Required
    return annotation, required


class ClassSchema:
    """The JSON schema of an attrs class, dataclass or ``TypedDict`` and the check of an
    object against it.

    Raises:
        TypeError: a field annotated with a type no JSON value can be (``socket.socket``).
    """

    def __init__(self, cls: type) -> None:
        self.cls = cls
        walker = Walker(strict=True)
        defs = Definitions()
        self._fields: list[tuple[str, Shape]] = []
        self._record: Shape | None = None
        try:
            if typing.is_typeddict(cls):
                hints, _ = resolve_hints(cls)
                required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
                properties: JSONObject = {}
                required: list[str] = []
                for key, annotation in hints.items():
                    annotation, is_required = _unwrap_requirement(annotation, key in required_keys)
                    shape = walker.shape(annotation)
                    self._fields.append((key, shape))
                    properties[key] = property_schema(
                        shape, defs, None, NO_SHOWN_DEFAULT, is_required
                    )
                    if is_required:
                        required.append(key)
                schema: JSONObject = {"type": "object", "properties": properties}
                if required:
                    schema["required"] = required
            else:
                self._record = walker.shape(cls)
                ref = self._record.schema(defs)
                name = str(ref["$ref"]).removeprefix(DEFS_REF)
                schema = dict(defs.defs[name])  # the class's own definition, inlined
                if f'"{DEFS_REF}{name}"' not in json.dumps(schema):
                    del defs.defs[name]  # kept only for a class that refers to itself
        except TypeError as exc:
            raise TypeError(f"structured_schema {cls.__name__}: {exc}") from None
        if defs.defs:
            schema["$defs"] = defs.defs
        self.schema: JSONObject = remove_title_field(schema)

    def check(self, value: Mapping[str, JSONValue]) -> None:
        """Convert ``value`` to the class, field by field, and drop the result.

        Raises:
            ConversionError: every field that does not fit, one line each.
        """
        if self._record is not None:
            self._record.convert(dict(value), "$")
            return
        errors: list[str] = []
        for key, shape in self._fields:
            if key in value:
                try:
                    shape.convert(value[key], f"$.{key}")
                except ConversionError as exc:
                    errors.extend(exc.errors)
        if errors:
            raise ConversionError(errors)

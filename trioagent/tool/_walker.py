"""The walk over an annotation: containers, unions, records and pydantic models, and the
:class:`Walker` that builds a :class:`~._shape.Shape` for any annotation (see :mod:`._shape`
for what each annotation becomes)."""

from __future__ import annotations

import collections.abc
import enum
import inspect
import json
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Annotated, Literal, NoReturn, Union, get_args, get_origin

from .._core.json_types import JSONObject, JSONValue
from ..serialization import unstructure
from ._docstring import parse_docstring
from ._formats import FORMATTED_CLASSES, JSONClassShape, format_shape, jsonable_default
from ._hints import RecordField, class_docstring, is_field_class, is_record_class, record_fields
from ._schema import Definitions
from ._shape import (
    AnnotatedShape,
    Anything,
    ConversionError,
    EnumShape,
    LiteralShape,
    NoneShape,
    Scalar,
    Shape,
    UnsupportedAnnotation,
    fail,
    json_kind,
    show,
    type_name,
)

__all__ = ["Walker", "property_schema"]

_LISTS = {
    list,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Iterable,
    collections.abc.Collection,
}
_SETS = {set, collections.abc.MutableSet}
_FROZENSETS = {frozenset, collections.abc.Set}
_MAPPINGS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}


class _Array(Shape):
    """Lists, sets and frozensets; ``tuple[X, ...]`` and bare ``tuple`` too."""

    kinds = frozenset({"array"})

    def __init__(self, annotation: object, container: type, item: Shape) -> None:
        super().__init__(annotation)
        self.container = container
        self.item = item
        self.needs_conversion = container is not list or item.needs_conversion

    def schema(self, defs: Definitions) -> JSONObject:
        schema: JSONObject = {"items": self.item.schema(defs), "type": "array"}
        if self.container in (set, frozenset):
            schema["uniqueItems"] = True
        return schema

    def convert(self, value: JSONValue, path: str) -> object:
        items = _convert_items(value, [self.item] * _array_length(value, path), path)
        return items if self.container is list else self.container(items)


class _FixedTuple(Shape):
    kinds = frozenset({"array"})
    needs_conversion = True

    def __init__(self, annotation: object, items: list[Shape]) -> None:
        super().__init__(annotation)
        self.items = items

    def schema(self, defs: Definitions) -> JSONObject:
        return {
            "maxItems": len(self.items),
            "minItems": len(self.items),
            "prefixItems": [item.schema(defs) for item in self.items],
            "type": "array",
        }

    def convert(self, value: JSONValue, path: str) -> object:
        length = _array_length(value, path)
        if length != len(self.items):
            fail(f"expected an array of {len(self.items)} items, got {length}", path)
        return tuple(_convert_items(value, self.items, path))


def _array_length(value: JSONValue, path: str) -> int:
    if not isinstance(value, list | tuple | set | frozenset):
        fail(f"expected an array, got {show(value)}", path)
    return len(value)


def _convert_items(value: Iterable[JSONValue], shapes: list[Shape], path: str) -> list[object]:
    items: list[object] = []
    errors: list[str] = []
    for index, (item, shape) in enumerate(zip(value, shapes, strict=True)):
        try:
            items.append(shape.convert(item, f"{path}[{index}]"))
        except ConversionError as exc:
            errors.extend(exc.errors)
    if errors:
        raise ConversionError(errors)
    return items


class _Mapping(Shape):
    kinds = frozenset({"object"})

    def __init__(self, annotation: object, key: Shape, value: Shape, *, any_value: bool) -> None:
        super().__init__(annotation)
        self.key = key
        self.value = value
        self.any_value = any_value
        # a key that is not a str arrives as one: "7" for an int key
        self.needs_conversion = (key.exact is not str and not key.catch_all) or (
            value.needs_conversion
        )

    def schema(self, defs: Definitions) -> JSONObject:
        extra: JSONValue = True if self.any_value else self.value.schema(defs)
        return {"additionalProperties": extra, "type": "object"}

    def convert(self, value: JSONValue, path: str) -> object:
        if not isinstance(value, Mapping):
            fail(f"expected an object, got {show(value)}", path)
        result: dict[object, object] = {}
        errors: list[str] = []
        for key, item in value.items():
            where = f"{path}[{key!r}]"
            try:
                result[self._convert_key(key, where)] = self.value.convert(item, where)
            except ConversionError as exc:
                errors.extend(exc.errors)
        if errors:
            raise ConversionError(errors)
        return result

    def _convert_key(self, key: JSONValue, path: str) -> object:
        try:
            return self.key.convert(key, path)
        except ConversionError:
            if isinstance(key, str):  # a JSON key is always a string: "7" for an int key
                try:
                    parsed = json.loads(key, parse_constant=_reject_constant)
                except ValueError:
                    parsed = key
                if not isinstance(parsed, str):
                    try:
                        return self.key.convert(parsed, path)
                    except ConversionError:  # reported below
                        pass
        fail(f"key {show(key)} is not a valid {self.key.name}", path)


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON value")


class _Union(Shape):
    def __init__(self, annotation: object, members: list[Shape]) -> None:
        super().__init__(annotation)
        self.members = members
        self.needs_conversion = any(member.needs_conversion for member in members)
        member_kinds = [member.kinds for member in members]
        if all(kinds is not None for kinds in member_kinds):
            self.kinds = frozenset().union(*(k for k in member_kinds if k is not None))
        self._exact = {member.exact for member in members}
        self._accepts_none = any(isinstance(member, NoneShape) for member in members)

    def schema(self, defs: Definitions) -> JSONObject:
        return {"anyOf": [member.schema(defs) for member in self.members]}

    def convert(self, value: JSONValue, path: str) -> object:
        if value is None and self._accepts_none:
            return None
        if type(value) in (str, int, float, bool) and type(value) in self._exact:
            return value  # the exact JSON type is a member: 2 stays an int in float | int
        kind = json_kind(value)
        fitting = [m for m in self.members if kind is None or m.kinds is None or kind in m.kinds]
        ordered = [m for m in fitting if not m.catch_all] + [m for m in fitting if m.catch_all]
        failures: list[tuple[Shape, ConversionError]] = []
        for member in ordered:
            try:
                return member.convert(value, path)
            except ConversionError as exc:
                failures.append((member, exc))
        if not failures:
            fail(f"expected {self.name}, got {show(value)}", path)
        reasons = "; ".join(f"as {m.name}: {', '.join(exc.errors)}" for m, exc in failures)
        raise ConversionError(
            [f"{show(value)} matches no member of {self.name} (at {path}) [{reasons}]"]
        )


class _Record(Shape):
    """An attrs class, a dataclass, a ``TypedDict`` (converted to a dict) or a ``NamedTuple``;
    its fields are filled in by the walker."""

    kinds = frozenset({"object"})
    needs_conversion = True

    def __init__(self, annotation: object, cls: type) -> None:
        super().__init__(annotation)
        self.cls = cls
        self.fields: list[tuple[RecordField, Shape]] = []
        # a TypedDict supports no isinstance() check: its instances are plain dicts
        self._instance_of = None if typing.is_typeddict(cls) else cls

    def schema(self, defs: Definitions) -> JSONObject:
        return defs.ref(self.cls, lambda name: self._define(defs))

    def _define(self, defs: Definitions) -> JSONObject:
        doc = parse_docstring(class_docstring(self.cls))
        properties = {
            field.key: property_schema(
                shape, defs, doc.params.get(field.key), field.default, field.required
            )
            for field, shape in self.fields
        }
        required = [field.key for field, _ in self.fields if field.required]
        schema: JSONObject = {"description": doc.description} if doc.description else {}
        schema.update({"properties": properties, "type": "object"})
        if required:
            schema["required"] = required
        return schema

    def convert(self, value: JSONValue, path: str) -> object:
        if self._instance_of is not None and isinstance(value, self._instance_of):
            return value
        if not isinstance(value, Mapping):
            fail(f"expected an object, got {show(value)}", path)
        arguments: dict[str, object] = {}
        errors: list[str] = []
        for field, shape in self.fields:
            if field.key in value:
                try:
                    arguments[field.key] = shape.convert(value[field.key], f"{path}.{field.key}")
                except ConversionError as exc:
                    errors.extend(exc.errors)
            elif field.required:
                errors.append(f"required field missing (at {path}.{field.key})")
        extra = set(value) - {field.key for field, _ in self.fields}
        if extra:
            errors.append(f"extra fields found: {', '.join(sorted(extra))} (at {path})")
        if errors:
            raise ConversionError(errors)
        try:
            return self.cls(**arguments)
        except Exception as exc:  # a validator or __init__ refused the values
            fail(str(exc) or type(exc).__name__, path)


class _PydanticModel(Shape):
    needs_conversion = True

    def __init__(self, cls: type) -> None:
        super().__init__(cls)
        self.cls = cls
        # a RootModel may hold anything
        is_root = getattr(cls, "__pydantic_root_model__", False)
        self.kinds = None if is_root else frozenset({"object"})

    def schema(self, defs: Definitions) -> JSONObject:
        return defs.pydantic_ref(self.cls)

    def convert(self, value: JSONValue, path: str) -> object:
        try:
            return self.cls.model_validate(value)  # type: ignore[attr-defined]
        except Exception as exc:  # pydantic's ValidationError, read by duck typing
            errors = _pydantic_errors(exc)
            if errors is None:
                fail(str(exc) or type(exc).__name__, path)
            raise ConversionError(
                [
                    f"{e.get('msg', 'invalid value')} (at {path}{_loc(e.get('loc', ()))})"
                    for e in errors
                ]
            ) from exc


def _is_pydantic_model(tp: object) -> bool:
    return isinstance(tp, type) and callable(getattr(tp, "model_validate", None))


class Walker:
    """Turns annotations into shapes; one walker per schema, so that a class met twice (or
    recursively) is one shape.

    ``strict``: a class no JSON value can be an instance of (``socket.socket``) raises
    :class:`~._shape.UnsupportedAnnotation` instead of accepting any value as it is.
    """

    def __init__(self, *, strict: bool = False) -> None:
        self._classes: dict[object, Shape] = {}
        self._strict = strict

    def shape(self, tp: object) -> Shape:
        """The shape of annotation ``tp``."""
        if tp is inspect.Parameter.empty or tp is typing.Any or tp is object:
            return Anything(tp, catch_all=True)
        if isinstance(tp, str | typing.ForwardRef):
            return Anything(tp, catch_all=False)
        origin = get_origin(tp)
        args = get_args(tp)
        if origin is Annotated:
            return AnnotatedShape(tp, self.shape(args[0]))
        if isinstance(tp, typing.NewType):
            return self.shape(tp.__supertype__)
        if tp is None or tp is type(None):
            return NoneShape(tp)
        if origin is Literal:
            return LiteralShape(tp)
        if origin is Union or origin is types.UnionType:
            return _Union(tp, [self.shape(arg) for arg in args])
        if tp in _LISTS or origin in _LISTS:
            return _Array(tp, list, self._first(args))
        if tp in _SETS or origin in _SETS:
            return _Array(tp, set, self._first(args))
        if tp in _FROZENSETS or origin in _FROZENSETS:
            return _Array(tp, frozenset, self._first(args))
        if tp is tuple or origin is tuple:
            if not args or (len(args) == 2 and args[1] is Ellipsis):
                return _Array(tp, tuple, self._first(args))
            return _FixedTuple(tp, [self.shape(arg) for arg in args])
        if tp in _MAPPINGS or origin in _MAPPINGS:
            key, value = args if len(args) == 2 else (object, object)
            any_value = len(args) != 2 or value is typing.Any  # additionalProperties: true
            return _Mapping(tp, self.shape(key), self.shape(value), any_value=any_value)
        return self._class_shape(tp)

    def _first(self, args: tuple[object, ...]) -> Shape:
        """The shape of a container's item type (anything for a bare ``list``)."""
        return self.shape(args[0] if args else object)

    def _class_shape(self, tp: object) -> Shape:
        known = self._classes.get(tp)
        if known is not None:
            return known
        shape: Shape
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            shape = EnumShape(tp)
        elif isinstance(tp, type) and issubclass(tp, str | int | float | bytes):
            shape = Scalar(tp)
        elif is_field_class(tp):
            cls = get_origin(tp) or tp
            assert isinstance(cls, type)
            record = _Record(tp, cls)
            self._classes[tp] = record  # before its fields: a recursive class meets itself
            for field in record_fields(cls):
                try:
                    record.fields.append((field, self.shape(field.annotation)))
                except UnsupportedAnnotation as exc:
                    del self._classes[tp]
                    raise exc.within(f"{cls.__name__}.{field.key}") from None
            return record
        elif isinstance(tp, type) and issubclass(tp, FORMATTED_CLASSES):
            shape = format_shape(tp)
        elif _is_pydantic_model(tp):
            assert isinstance(tp, type)
            shape = _PydanticModel(tp)
        elif not _json_can_be(tp):
            if self._strict:
                raise UnsupportedAnnotation(type_name(tp))
            shape = Anything(tp, catch_all=False)
        elif isinstance(tp, type):
            shape = JSONClassShape(tp)
        else:
            shape = Anything(tp, catch_all=False)  # a TypeVar, say: given the benefit
        self._classes[tp] = shape
        return shape


_JSON_TYPES = (dict, list, str, int, float, bool, type(None))


def _json_can_be(tp: object) -> bool:
    """Whether some JSON value is an instance of ``tp`` (``Number``, ``Hashable``; not
    ``socket``); annotations that are not classes (a ``TypeVar``) are given the benefit."""
    cls = tp if isinstance(tp, type) else get_origin(tp)
    if not isinstance(cls, type):
        return True
    try:
        return any(issubclass(json_type, cls) for json_type in _JSON_TYPES)
    except TypeError:  # a Protocol that is not runtime-checkable
        return False


def property_schema(
    shape: Shape, defs: Definitions, description: str | None, default: object, required: bool
) -> JSONObject:
    """The schema of one parameter or field: its shape's, with its description and default."""
    schema = shape.schema(defs)
    if description:
        schema["description"] = description
    if not required:
        shown = _jsonable(default)
        if shown is not _NOT_JSON:
            schema["default"] = shown
    return schema


_NOT_JSON = object()


def _jsonable(value: object) -> JSONValue:
    """``value`` as JSON, or ``_NOT_JSON`` when it cannot be shown to the model."""
    value = jsonable_default(value)
    if isinstance(value, enum.Enum):
        value = value.value
    elif isinstance(value, tuple) and hasattr(value, "_asdict"):  # a NamedTuple
        value = value._asdict()
    elif is_record_class(type(value)):
        try:
            value = unstructure(value)
        except Exception:  # not representable: leave the default out of the schema
            return _NOT_JSON
    elif isinstance(value, tuple | frozenset | set):
        value = list(value)
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return _NOT_JSON


def _pydantic_errors(exc: BaseException) -> list[dict[str, JSONValue]] | None:
    errors = getattr(exc, "errors", None)
    if not callable(errors) or not hasattr(exc, "error_count"):
        return None
    try:
        found = errors(include_url=False)
    except Exception:
        return None
    return [e for e in found if isinstance(e, dict)] if isinstance(found, list) else None


def _loc(loc: Iterable[object]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)

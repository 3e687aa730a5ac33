"""Tool arguments (JSON values, already checked against the schema) → the annotated Python types.

:func:`convert` builds the value of one parameter; :func:`needs_conversion` says whether a
parameter's value must go through it at all.  A tool-specific cattrs converter does the work;
the library's converter (:mod:`trioagent.serialization`) is left alone: it reads and writes the
library's own data, where nothing is lenient.

What the conversion accepts is what :mod:`._schema` advertises (``integer`` admits ``2.0``,
attrs fields are named by their ``alias``), and nothing looser: no ``"5"`` for an ``int``, no
``1`` for a ``bool``.

==============================  ============================================================
annotation                      conversion
==============================  ============================================================
``int``                         an integer, or an integral float (``2.0`` → ``2``)
``float``                       any number (``2`` → ``2.0``)
``str`` / ``bool``              exactly that JSON type
``bytes``                       a string, UTF-8 encoded
``Enum`` subclass               the member whose value equals the JSON value
``Literal[...]``                the declared value (an enum member for ``Literal[E.A]``)
``list`` / ``tuple`` / ``set``  the declared container, items converted (fixed tuples: the
                                declared length)
``dict[K, V]``                  keys converted too: a JSON key is a string, so one that is
                                not a ``K`` is read as JSON (``"7"`` → ``7``)
attrs class / dataclass         built from an object keyed by the (alias) field names; extra
                                keys are an error; an instance passes as it is
pydantic model (duck-typed)     ``model_validate`` (pydantic is never imported here)
``X | Y``                       see below
``Any``, unknown classes        the value as it is
==============================  ============================================================

**Unions.** ``None`` goes to ``None``; a JSON scalar whose exact type is a member
(``2`` for ``float | int``) is kept as it is.  Otherwise the members whose JSON shape can hold
the value (an object: classes, models, dicts; an array: lists, tuples, sets; ...) are tried in
declaration order, catch-alls (``Any``, ``object``) last, and the first that converts wins.
When none does, the error names every member and why it refused the value.

Errors are :class:`ConversionError`, whose ``errors`` are model-readable lines
(``"required field missing (at $.place.city)"``) — no cattrs exception type leaks out.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, override

__all__ = ["ConversionError", "convert", "needs_conversion"]

StructureHook = Callable[[Any, Any], Any]

_LISTS = {
    list,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Iterable,
    collections.abc.Collection,
}
_SETS = {set, collections.abc.MutableSet}
_FROZENSETS = {frozenset, collections.abc.Set}
_ARRAYS = _LISTS | _SETS | _FROZENSETS | {tuple}
_MAPPINGS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}
_CATCH_ALLS = (Any, object)
_SHOWN_CHARS = 60


class ConversionError(ValueError):
    """A value that cannot be converted; ``errors`` has one readable line per problem."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


class _NoMatch(ValueError):
    """No member of a union accepted the value; ``failures`` holds each member's refusal."""

    def __init__(self, union: Any, value: Any, failures: list[tuple[Any, BaseException]]) -> None:
        self.union = union
        self.failures = failures
        members = _type_name(union)
        if failures:
            super().__init__(f"{_show(value)} matches no member of {members}")
        else:
            super().__init__(f"expected {members}, got {_show(value)}")


def convert(value: Any, annotation: Any, path: str = "$") -> Any:
    """``value`` (JSON data) as ``annotation``; ``path`` names it in error messages.

    Raises:
        ConversionError: the value does not fit the annotation.
    """
    try:
        return _CONVERTER.structure(value, annotation)
    except Exception as exc:  # anything a hook, a validator or __init__ raised
        raise ConversionError(_messages(exc, path)) from exc


def needs_conversion(annotation: Any) -> bool:
    """Whether a JSON value may differ from what ``annotation`` declares (so :func:`convert`
    has something to do): classes, enums, literals, ``int``, ``bytes``, tuples, sets and dicts
    with non-string keys, anywhere inside the annotation."""
    if isinstance(annotation, str | typing.ForwardRef) or annotation in _CATCH_ALLS:
        return False
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return needs_conversion(args[0])
    if origin is Literal:
        return True
    if annotation in (int, bytes) or _is_class_like(annotation):
        return True
    if annotation in _ARRAYS - _LISTS or origin in _ARRAYS - _LISTS:
        return True
    if origin in _MAPPINGS and args and args[0] is not str and args[0] not in _CATCH_ALLS:
        return True
    return any(needs_conversion(arg) for arg in args if arg is not Ellipsis)


# -- the converter -------------------------------------------------------------------------


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(
        forbid_extra_keys=True,
        structure_fallback_factory=lambda _: _as_is,  # unknown types: the value as it is
    )
    for scalar in (str, bytes, int, float, bool, enum.Enum):
        conv.register_structure_hook(scalar, _structure_scalar)
    # Later registrations take precedence over cattrs' own handlers (and earlier ones).
    conv.register_structure_hook_factory(_is_record_class, _record_hook_factory(conv))
    conv.register_structure_hook_func(_is_array, _array_hook(conv))
    conv.register_structure_hook_func(_is_mapping, _mapping_hook(conv))
    conv.register_structure_hook_func(_is_literal, _structure_literal)
    conv.register_structure_hook_func(_is_union, _union_hook(conv))
    conv.register_structure_hook_func(_is_pydantic_model, _structure_pydantic)
    return conv


def _as_is(value: Any, _: Any) -> Any:
    return value


def _structure_scalar(value: Any, cls: type) -> Any:
    """Scalars and enums (an ``IntEnum`` or ``StrEnum`` dispatches here as an ``int``/``str``)."""
    if issubclass(cls, enum.Enum):
        return _structure_enum(value, cls)
    if issubclass(cls, bool):
        if isinstance(value, bool):
            return value
        raise TypeError(f"expected a boolean, got {_show(value)}")
    if issubclass(cls, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value if cls is int else cls(value)
        if isinstance(value, float) and value.is_integer():
            return cls(int(value))
        raise TypeError(f"expected an integer, got {_show(value)}")
    if issubclass(cls, float):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return cls(value)
        raise TypeError(f"expected a number, got {_show(value)}")
    if issubclass(cls, str):
        if isinstance(value, str):
            return value if cls is str else cls(value)
        raise TypeError(f"expected a string, got {_show(value)}")
    if issubclass(cls, bytes):
        if isinstance(value, str):
            return value.encode()
        if isinstance(value, bytes | bytearray):
            return bytes(value)
        raise TypeError(f"expected a string, got {_show(value)}")
    raise TypeError(f"cannot convert to {cls.__name__}")  # pragma: no cover - not registered


def _structure_enum(value: Any, cls: type[enum.Enum]) -> enum.Enum:
    if isinstance(value, cls):
        return value
    for member in cls:
        if _json_equal(value, member.value):
            return member
    choices = ", ".join(repr(member.value) for member in cls)
    raise ValueError(f"{_show(value)} is not a valid {cls.__name__} (one of: {choices})")


def _structure_literal(value: Any, tp: Any) -> Any:
    for allowed in get_args(tp):
        if value is allowed:
            return allowed
        plain = allowed.value if isinstance(allowed, enum.Enum) else allowed
        if _json_equal(value, plain):
            return allowed  # the declared value: an enum member, 1 rather than 1.0
    choices = ", ".join(repr(_plain(allowed)) for allowed in get_args(tp))
    raise ValueError(f"expected one of {choices}, got {_show(value)}")


def _json_equal(value: Any, expected: Any) -> bool:
    """``==`` as JSON sees it: ``True`` is not ``1``, ``"1"`` is not ``1``; ``1.0`` is ``1``."""
    if isinstance(value, bool) or isinstance(expected, bool):
        return isinstance(value, bool) and isinstance(expected, bool) and value == expected
    if isinstance(value, int | float) and isinstance(expected, int | float):
        return value == expected
    return type(value) is type(expected) and bool(value == expected)


def _is_record_class(tp: Any) -> bool:
    cls = get_origin(tp) or tp
    return isinstance(cls, type) and (attrs.has(cls) or dataclasses.is_dataclass(cls))


def _record_hook_factory(conv: cattrs.Converter) -> Callable[[Any], StructureHook]:
    """attrs classes and dataclasses, read from the keys the schema advertises: an attrs
    field's ``alias`` (``token`` for ``_token``), not its name."""

    def factory(tp: Any) -> StructureHook:
        cls = get_origin(tp) or tp
        renames: dict[str, Any] = {}
        if attrs.has(cls):
            for field in attrs.fields(cls):
                if field.init and field.alias and field.alias != field.name:
                    renames[field.name] = override(rename=field.alias)
        build = make_dict_structure_fn(tp, conv, **renames)

        def structure_record(value: Any, _: Any) -> Any:
            if isinstance(value, cls):
                return value
            if not isinstance(value, Mapping):
                raise TypeError(f"expected an object, got {_show(value)}")
            return build(value, tp)

        return structure_record

    return factory


def _is_pydantic_model(tp: Any) -> bool:
    return isinstance(tp, type) and callable(getattr(tp, "model_validate", None))


def _structure_pydantic(value: Any, tp: Any) -> Any:
    return tp.model_validate(value)


def _is_array(tp: Any) -> bool:
    return tp in _ARRAYS or get_origin(tp) in _ARRAYS


def _array_hook(conv: cattrs.Converter) -> StructureHook:
    def structure_array(value: Any, tp: Any) -> Any:
        if not isinstance(value, list | tuple | set | frozenset):
            raise TypeError(f"expected an array, got {_show(value)}")
        origin = get_origin(tp) or tp
        args = get_args(tp)
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise ValueError(f"expected an array of {len(args)} items, got {len(value)}")
            item_types: list[Any] = list(args)
        else:
            item_types = [args[0] if args else Any] * len(value)
        items: list[Any] = []
        errors: list[Exception] = []
        for index, (item, item_type) in enumerate(zip(value, item_types, strict=True)):
            try:
                items.append(conv.structure(item, item_type))
            except Exception as exc:
                _add_note(exc, IterableValidationNote(f"item {index}", index, item_type))
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
        if origin is tuple:
            return tuple(items)
        if origin in _SETS:
            return set(items)
        if origin in _FROZENSETS:
            return frozenset(items)
        return items

    return structure_array


def _is_mapping(tp: Any) -> bool:
    return tp in _MAPPINGS or get_origin(tp) in _MAPPINGS


def _mapping_hook(conv: cattrs.Converter) -> StructureHook:
    def structure_key(key: Any, key_type: Any) -> Any:
        try:
            return conv.structure(key, key_type)
        except Exception:
            if isinstance(key, str):  # a JSON key is always a string: "7" for an int key
                try:
                    parsed = json.loads(key, parse_constant=_reject_constant)
                except ValueError:
                    parsed = key
                if not isinstance(parsed, str):
                    try:
                        return conv.structure(parsed, key_type)
                    except Exception:  # reported below
                        pass
        raise ValueError(f"key {_show(key)} is not a valid {_type_name(key_type)}") from None

    def structure_mapping(value: Any, tp: Any) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError(f"expected an object, got {_show(value)}")
        args = get_args(tp)
        key_type, value_type = args if len(args) == 2 else (Any, Any)
        result: dict[Any, Any] = {}
        errors: list[Exception] = []
        for key, item in value.items():
            try:
                result[structure_key(key, key_type)] = conv.structure(item, value_type)
            except Exception as exc:
                _add_note(exc, IterableValidationNote(f"key {key!r}", key, value_type))
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
        return result

    return structure_mapping


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _is_literal(tp: Any) -> bool:
    origin: Any = get_origin(tp)
    return origin is Literal


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _union_hook(conv: cattrs.Converter) -> StructureHook:
    def structure_union(value: Any, tp: Any) -> Any:
        members = get_args(tp)
        plain_members = [_strip(member) for member in members]
        if value is None and type(None) in plain_members:
            return None
        if type(value) in (str, int, float, bool) and type(value) in plain_members:
            return value  # the exact JSON type is a member: 2 stays an int in float | int
        kind = _json_kind(value)
        fitting = [m for m in members if kind is None or _fits(kind, _json_kinds(m))]
        ordered = [m for m in fitting if _strip(m) not in _CATCH_ALLS] + [
            m for m in fitting if _strip(m) in _CATCH_ALLS
        ]
        failures: list[tuple[Any, BaseException]] = []
        for member in ordered:
            try:
                return conv.structure(value, member)
            except Exception as exc:
                failures.append((member, exc))
        raise _NoMatch(tp, value, failures)

    return structure_union


def _fits(kind: str, kinds: frozenset[str] | None) -> bool:
    return kinds is None or kind in kinds


def _json_kind(value: Any) -> str | None:
    """The JSON type of ``value``; ``None`` for a Python object no JSON type describes."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple | set | frozenset):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return None


def _json_kinds(tp: Any) -> frozenset[str] | None:
    """The JSON types a value of ``tp`` may arrive as; ``None`` for any."""
    tp = _strip(tp)
    if tp is None or tp is type(None):
        return frozenset({"null"})
    origin = get_origin(tp)
    if _is_union(tp):
        member_kinds = [_json_kinds(arg) for arg in get_args(tp)]
        if any(kinds is None for kinds in member_kinds):
            return None
        return frozenset().union(*(kinds for kinds in member_kinds if kinds is not None))
    if origin is Literal:
        return _kinds_of_values(_plain(arg) for arg in get_args(tp))
    if _is_array(tp):
        return frozenset({"array"})
    if _is_mapping(tp) or typing.is_typeddict(tp):
        return frozenset({"object"})
    if not isinstance(tp, type):
        return None
    if issubclass(tp, enum.Enum):
        return _kinds_of_values(member.value for member in tp)
    if issubclass(tp, bool):
        return frozenset({"boolean"})
    if issubclass(tp, int | float):
        return frozenset({"integer", "number"})
    if issubclass(tp, str | bytes):
        return frozenset({"string"})
    if _is_pydantic_model(tp):  # a RootModel may hold anything
        return None if getattr(tp, "__pydantic_root_model__", False) else frozenset({"object"})
    if _is_record_class(tp):
        return frozenset({"object"})
    return None


def _kinds_of_values(values: collections.abc.Iterable[Any]) -> frozenset[str] | None:
    kinds: set[str] = set()
    for value in values:
        kind = _json_kind(value)
        if kind is None:
            return None
        kinds.add(kind)
        if kind == "integer":
            kinds.add("number")  # 1.0 for a 1
    return frozenset(kinds)


def _strip(tp: Any) -> Any:
    """``X`` for ``Annotated[X, ...]`` and for a ``NewType`` of ``X``."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
        elif isinstance(tp, typing.NewType):
            tp = tp.__supertype__
        else:
            return tp


def _is_class_like(tp: Any) -> bool:
    return isinstance(tp, type) and (
        issubclass(tp, enum.Enum) or _is_record_class(tp) or _is_pydantic_model(tp)
    )


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


# -- errors ---------------------------------------------------------------------------------


def _add_note(exc: Exception, note: str) -> None:
    exc.__notes__ = [*getattr(exc, "__notes__", []), note]


def _messages(exc: BaseException, path: str) -> list[str]:
    """One readable line per problem, each ending with the JSON path of the bad value."""
    if isinstance(exc, ClassValidationError | IterableValidationError):
        lines: list[str] = []
        for inner in exc.exceptions:
            lines.extend(_messages(inner, _inner_path(exc, inner, path)))
        return lines
    if isinstance(exc, _NoMatch) and exc.failures:
        reasons = "; ".join(
            f"as {_type_name(member)}: {', '.join(_messages(failure, path))}"
            for member, failure in exc.failures
        )
        return [f"{exc} (at {path}) [{reasons}]"]
    if isinstance(exc, KeyError):
        return [f"required field missing (at {path})"]
    if isinstance(exc, ForbiddenExtraKeysError):
        return [f"extra fields found: {', '.join(sorted(exc.extra_fields))} (at {path})"]
    pydantic_errors = _pydantic_errors(exc)
    if pydantic_errors is not None:
        return [
            f"{error.get('msg', 'invalid value')} (at {path}{_loc_path(error.get('loc', ()))})"
            for error in pydantic_errors
        ]
    text = str(exc) or type(exc).__name__
    return [f"{text} (at {path})"]


def _inner_path(group: BaseException, inner: BaseException, path: str) -> str:
    for note in getattr(inner, "__notes__", []):
        if isinstance(note, AttributeValidationNote):
            return f"{path}.{_field_key(getattr(group, 'cl', None), note.name)}"
        if isinstance(note, IterableValidationNote):
            return f"{path}[{note.index!r}]"
    return path


def _field_key(cls: Any, name: str) -> str:
    """The key the schema advertises for a field: an attrs field's alias."""
    cls = get_origin(cls) or cls
    if isinstance(cls, type) and attrs.has(cls):
        field = attrs.fields_dict(cls).get(name)
        if field is not None and field.alias:
            return field.alias
    return name


def _pydantic_errors(exc: BaseException) -> list[dict[str, Any]] | None:
    errors = getattr(exc, "errors", None)
    if not callable(errors) or not hasattr(exc, "error_count"):
        return None
    try:
        found = errors(include_url=False)
    except Exception:
        return None
    return [e for e in found if isinstance(e, dict)] if isinstance(found, list) else None


def _loc_path(loc: Any) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


def _show(value: Any) -> str:
    kind = _json_kind(value)
    if kind == "object":
        return "an object"
    if kind == "array":
        return "an array"
    if kind is None:
        return f"a {type(value).__name__}"
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _type_name(tp: Any) -> str:
    """A short name for a type: ``Spot | list[Spot]``, ``dict[str, int]``, ``Literal['a']``."""
    if tp is None or tp is type(None):
        return "None"
    if tp is Ellipsis:
        return "..."
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Annotated:
        return _type_name(args[0])
    if _is_union(tp):
        return " | ".join(_type_name(arg) for arg in args)
    if origin is Literal:
        shown = (
            f"{type(a).__name__}.{a.name}" if isinstance(a, enum.Enum) else repr(a) for a in args
        )
        return f"Literal[{', '.join(shown)}]"
    if origin is not None and args:
        return f"{_type_name(origin)}[{', '.join(_type_name(arg) for arg in args)}]"
    if isinstance(tp, type):
        return tp.__name__
    return repr(tp).replace("typing.", "")


_CONVERTER = _make_converter()

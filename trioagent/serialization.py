"""JSON serialization of messages, blocks, events and agent state.

One cattrs converter round-trips every data class of the library.  Members of a union (content
blocks, data sources, events) carry a ``"type"`` tag with the reference's values (``"text"``,
``"tool_call"``, ``"REPLY_END"``, ...).  Malformed input raises :class:`SerializationError`, whose
message names the path of every bad field (``$.content[0].text``); nothing half-built escapes.

Example::

    from trioagent.serialization import dumps, loads
    payload = dumps(msg)
    again = loads(payload, Msg)
"""

from __future__ import annotations

import enum
import json
import types
from collections.abc import Callable
from typing import Any, TypeVar, get_args, overload

import cattrs
import orjson
from cattrs.preconf.json import make_converter

from ._codec import compile_structure, compile_unstructure, fast_list
from .event._events import AgentEvent
from .message._blocks import Base64Source, ContentBlock, DataBlock, TextBlock, URLSource
from .message._msg import Msg

__all__ = ["SerializationError", "converter", "dumps", "loads", "structure", "unstructure"]

T = TypeVar("T")


class SerializationError(ValueError):
    """Input could not be turned into the requested type.

    ``errors`` lists one message per bad field, each naming its path from the root (``$``).
    """

    def __init__(self, target: object, errors: list[str]) -> None:
        self.errors = errors
        super().__init__(f"cannot load {_type_name(target)}: " + "; ".join(errors))


def _type_name(target: Any) -> str:
    """A short name for a target type: ``AgentEvent``, ``list[AgentEvent]``, ``Msg``.

    Without it, a union's repr spells out every member with its module path (2 kB for events).
    """
    for union, name in _UNION_NAMES:
        if target == union:
            return name
    args = get_args(target)
    if args and isinstance(target, types.GenericAlias):
        return f"{target.__origin__.__name__}[{', '.join(_type_name(a) for a in args)}]"
    if args and isinstance(target, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    return getattr(target, "__name__", None) or repr(target)


_UNION_NAMES: list[tuple[Any, str]] = [(AgentEvent, "AgentEvent"), (ContentBlock, "ContentBlock")]


class UnknownTagError(ValueError):
    """A ``"type"`` tag that names no member of the expected union."""


def _register_tagged_union(conv: cattrs.Converter, union: Any, fast: bool, done: set[type]) -> None:
    """Tag union members with their class variable ``type`` under the key ``"type"``.

    Written out rather than using ``cattrs.strategies.configure_tagged_union``, which pops the
    tag from the caller's dict and reports an unknown tag as a bare ``KeyError``.  The tag is
    written whenever a member is unstructured, alone or inside a union.  ``fast``: members get
    the compiled structure hooks of :mod:`._codec` in front of cattrs' detailed ones; ``done``
    holds the members already set up through another union.
    """
    members: dict[str, type] = {str(cls.type): cls for cls in get_args(union)}
    expected = ", ".join(sorted(members))
    for tag, cls in members.items():
        if cls in done:
            continue
        done.add(cls)
        conv.register_unstructure_hook(cls, compile_unstructure(conv, cls, tag))
        detailed = _untagging(tag, conv.get_structure_hook(cls))
        hook = compile_structure(conv, cls, detailed, tag) if fast else detailed
        conv.register_structure_hook(cls, hook)
    hooks = {tag: conv.get_structure_hook(cls) for tag, cls in members.items()}

    def structure_union(data: Any, _: Any) -> Any:
        if not isinstance(data, dict):
            raise TypeError(f"expected an object with a 'type' tag, got {type(data).__name__}")
        tag = data.get("type")
        if not isinstance(tag, str) or tag not in hooks:
            raise UnknownTagError(f"unknown type tag {tag!r} (expected one of: {expected})")
        return hooks[tag](data, members[tag])

    conv.register_structure_hook(union, structure_union)


def _untagging(tag: str, base: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def structure_member(data: Any, cls: Any) -> Any:
        if isinstance(data, dict) and "type" in data:
            if data["type"] != tag:
                raise UnknownTagError(f"type tag {data['type']!r} where {tag!r} was expected")
            data = {k: v for k, v in data.items() if k != "type"}
        return base(data, cls)

    return structure_member


def _strict(kind: type, accepted: type | tuple[type, ...]) -> Callable[[Any, Any], Any]:
    """A structure hook that accepts only JSON values of the right kind (no ``str(5)``)."""

    def structure_scalar(value: Any, _: Any) -> Any:
        if isinstance(value, bool) and kind is not bool:
            raise TypeError(f"expected {kind.__name__}, got bool")
        if not isinstance(value, accepted):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return kind(value)

    return structure_scalar


def _structure_enum(value: Any, cls: type[enum.Enum]) -> enum.Enum:
    """Build an enum member from its value, so a bad value is reported at its own field.

    Registered for ``enum.StrEnum`` as well as ``enum.Enum``: a ``StrEnum`` is also a ``str``,
    and the ``str`` hook would otherwise pass any string through and leave the check to the
    attrs converter, whose error names only the enclosing object.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise TypeError(f"expected a {cls.__name__} value, got {type(value).__name__}")
    return cls(value)


def _register_fast_list(conv: cattrs.Converter, item: Any) -> None:
    target: Any = list[item]
    hook = fast_list(conv.get_structure_hook(item), item, conv.get_structure_hook(target))
    conv.register_structure_hook_func(lambda t: bool(t == target), hook)


def _make(fast: bool = True) -> cattrs.Converter:
    """The library's converter; ``fast=False`` leaves out the compiled structure paths (the
    tests compare both)."""
    conv = make_converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _strict(str, str))
    conv.register_structure_hook(int, _strict(int, int))
    conv.register_structure_hook(float, _strict(float, (int, float)))
    conv.register_structure_hook(bool, _strict(bool, bool))
    # Before the unions: member hooks are generated (and capture field hooks) right there.
    conv.register_structure_hook(enum.StrEnum, _structure_enum)
    conv.register_structure_hook(enum.Enum, _structure_enum)
    done: set[type] = set()
    for union in (Base64Source | URLSource, TextBlock | DataBlock, ContentBlock, AgentEvent):
        _register_tagged_union(conv, union, fast, done)
    conv.register_unstructure_hook(Msg, compile_unstructure(conv, Msg))
    if fast:
        detailed_msg = conv.get_structure_hook(Msg)
        conv.register_structure_hook(Msg, compile_structure(conv, Msg, detailed_msg))
        for item in (AgentEvent, ContentBlock, Msg):
            _register_fast_list(conv, item)
    return conv


#: The library's converter.  Other modules register hooks for their own classes on it.
converter: cattrs.Converter = _make()

# The hooks of the hottest targets, found by identity: hashing a 25-member union to look its
# hook up costs more than structuring a small event.
_OWN_HOOKS: dict[int, tuple[Any, Callable[[Any, Any], Any]]] = {
    id(t): (t, converter.get_structure_hook(t)) for t in (AgentEvent, ContentBlock, Msg)
}


def unstructure(obj: Any, as_type: Any = None) -> Any:
    """``obj`` as plain JSON-compatible data (tags included for union members)."""
    return converter.unstructure(obj, as_type)


# A class gives a typed result; a union or generic alias (``list[AgentEvent]``) gives ``Any``.
@overload
def structure(data: Any, as_type: type[T]) -> T: ...
@overload
def structure(data: Any, as_type: Any) -> Any: ...


def structure(data: Any, as_type: Any) -> Any:
    """Build ``as_type`` from plain data; raises :class:`SerializationError`."""
    try:
        entry = _OWN_HOOKS.get(id(as_type))
        if entry is not None and entry[0] is as_type:
            return entry[1](data, as_type)
        return converter.structure(data, as_type)
    except (cattrs.BaseValidationError, cattrs.ForbiddenExtraKeysError) as exc:
        raise SerializationError(
            as_type, cattrs.transform_error(exc, format_exception=_describe)
        ) from exc
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SerializationError(as_type, [f"{type(exc).__name__}: {exc} @ $"]) from exc


def _describe(exc: BaseException, expected: Any) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return f"extra fields found ({', '.join(sorted(exc.extra_fields))})"
    return f"{type(exc).__name__}: {exc}"


def dumps(obj: Any, as_type: Any = None) -> str:
    """Serialize to a compact JSON string (UTF-8 text, non-ASCII characters kept as they are).

    Written by orjson; what orjson refuses (integers beyond 64 bits, non-string keys, lone
    surrogates) is written by the standard library instead, so nothing is lost.  JSON has no
    NaN or infinity: non-finite floats are written as ``null``.
    """
    data = unstructure(obj, as_type)
    try:
        return orjson.dumps(data).decode()
    except orjson.JSONEncodeError:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


@overload
def loads(payload: str | bytes, as_type: type[T]) -> T: ...
@overload
def loads(payload: str | bytes, as_type: Any) -> Any: ...


def loads(payload: str | bytes, as_type: Any) -> Any:
    """Parse a JSON string into ``as_type`` (for example ``Msg``, ``list[AgentEvent]``)."""
    return structure(_parse_json(payload, as_type), as_type)


_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _parse_json(payload: str | bytes, as_type: Any) -> Any:
    """The standard library's parser (exact integers of any size, the same errors), minus the
    per-call overhead of ``json.loads`` for the common case: a ``str`` that starts with the
    value and ends with it or with JSON whitespace."""
    if isinstance(payload, str):
        try:
            data, end = _scan_json(payload, 0)
        except (StopIteration, ValueError):
            pass  # invalid here or leading whitespace: json.loads reports or accepts it
        else:
            if end == len(payload) or not payload[end:].strip(" \t\n\r"):
                return data
    try:
        return json.loads(payload)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # bytes that are not UTF-8 too
        raise SerializationError(as_type, [f"invalid JSON: {exc} @ $"]) from exc

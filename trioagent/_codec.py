"""Compiled fast paths for the converter's hottest classes (events, blocks, messages).

cattrs' generated hooks validate field by field, collect every error with its path and call a
hook per scalar: right for bad input, slow for the common, valid case.  This module compiles,
per attrs class, one structure function that checks every field inline (exact JSON types, enum
values, literals, no extra keys) and builds the object in one call, and one unstructure
function that writes the ``"type"`` tag and the fields in a single dict display.

The fast structure path only ever *accepts* what the detailed path accepts: on any doubt
(a wrong type, a missing key, a validator raising) it hands the same input to the detailed
cattrs hook, which then builds the object or raises with the path of every bad field.  So the
error messages stay those of :mod:`trioagent.serialization`, and valid input skips their cost.
"""

from __future__ import annotations

import enum
import linecache
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, get_args, get_origin

import attrs
import cattrs
from cattrs.fns import identity

__all__ = ["compile_structure", "compile_unstructure", "fast_list"]

StructureHook = Callable[[Any, Any], Any]
UnstructureHook = Callable[[Any], Any]

_SCALARS: dict[Any, str] = {str: "str", int: "int", bool: "bool"}


def _optional_inner(tp: Any) -> Any | None:
    """``X`` for ``X | None`` (``Optional[X]``), else ``None``."""
    if get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return args[0]
    return None


class _Emitter:
    """Collects generated lines and the globals they refer to."""

    def __init__(self, conv: cattrs.Converter) -> None:
        self.conv = conv
        self.lines: list[str] = []
        self.globs: dict[str, Any] = {"type": type, "dict": dict, "float": float, "str": str}

    def name(self, prefix: str, value: Any) -> str:
        key = f"_{prefix}{len(self.globs)}"
        self.globs[key] = value
        return key

    def check(self, var: str, tp: Any, indent: str) -> None:
        """Lines that validate (and, for floats, enums and containers, convert) ``var``
        in place, raising ``_Miss`` where the detailed path must decide."""
        if tp in _SCALARS:
            self.lines.append(f"{indent}if type({var}) is not {_SCALARS[tp]}: raise _Miss")
        elif tp is float:
            self.lines.append(f"{indent}if type({var}) is int: {var} = float({var})")
            self.lines.append(f"{indent}elif type({var}) is not float: raise _Miss")
        elif tp is Any:
            self.lines.append(f"{indent}raise _Miss")  # unreachable for our classes; be safe
        elif (inner := _optional_inner(tp)) is not None:
            self.lines.append(f"{indent}if {var} is not None:")
            self.check(var, inner, indent + "  ")
        elif isinstance(tp, type) and issubclass(tp, enum.Enum):
            cls = self.name("enum", tp)
            self.lines.append(f"{indent}if type({var}) is not str: raise _Miss")
            self.lines.append(f"{indent}{var} = {cls}({var})")
        elif get_origin(tp) is Literal and all(type(v) is str for v in get_args(tp)):
            allowed = self.name("literal", frozenset(get_args(tp)))
            self.lines.append(f"{indent}if type({var}) is not str or {var} not in {allowed}:")
            self.lines.append(f"{indent}  raise _Miss")
        elif get_origin(tp) is dict and get_args(tp) == (str, Any):
            self.lines.append(f"{indent}if type({var}) is not dict: raise _Miss")
            self.lines.append(f"{indent}for _k in {var}:")
            self.lines.append(f"{indent}  if type(_k) is not str: raise _Miss")
            self.lines.append(f"{indent}{var} = dict({var})")
        elif get_origin(tp) is list and len(get_args(tp)) == 1:
            (item,) = get_args(tp)
            hook = self.name("hook", self.conv.get_structure_hook(item))
            item_type = self.name("type", item)
            self.lines.append(f"{indent}if type({var}) is not list: raise _Miss")
            self.lines.append(f"{indent}{var} = [{hook}(_x, {item_type}) for _x in {var}]")
        else:
            hook = self.name("hook", self.conv.get_structure_hook(tp))
            self.lines.append(f"{indent}{var} = {hook}({var}, {self.name('type', tp)})")


class _Miss(Exception):
    """The fast path declines; the detailed path decides."""


def _fields(cls: type) -> tuple[attrs.Attribute[Any], ...] | None:
    """The class's fields when the fast path can handle it (keys equal init names)."""
    fields: tuple[attrs.Attribute[Any], ...] = attrs.fields(cls)
    if any(not f.init or f.alias != f.name for f in fields):
        return None
    return fields


def _compile(name: str, lines: list[str], globs: dict[str, Any]) -> Any:
    source = "\n".join(lines) + "\n"
    filename = f"<trioagent codec {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), globs)  # generated from attrs metadata only
    return globs[name]


def compile_structure(
    conv: cattrs.Converter, cls: type, detailed: StructureHook, tag: str | None = None
) -> StructureHook:
    """A structure hook for ``cls`` that tries the fast path, then ``detailed``.

    ``tag``: the ``"type"`` value a tagged union member may carry (and nothing else).
    """
    fields = _fields(cls)
    if fields is None:
        return detailed
    hints = typing.get_type_hints(cls)
    emit = _Emitter(conv)
    emit.globs.update(_cls=cls, _detailed=detailed, _Miss=_Miss)
    allowed = {f.name for f in fields} | ({"type"} if tag is not None else set())
    emit.globs["_allowed"] = frozenset(allowed)
    fn = f"structure_{cls.__name__}"
    emit.lines += [
        f"def {fn}(data, _cl=None):",
        "  try:",
        "    if type(data) is not dict or not data.keys() <= _allowed: raise _Miss",
    ]
    if tag is not None:
        emit.globs["_tag"] = tag
        emit.lines.append("    if data.get('type', _tag) != _tag: raise _Miss")
    emit.lines.append("    kw = {}")
    for field in fields:
        key = repr(field.name)
        if field.default is attrs.NOTHING:
            emit.lines.append(f"    v = data[{key}]")
            emit.check("v", hints[field.name], "    ")
            emit.lines.append(f"    kw[{key}] = v")
        else:
            emit.lines.append(f"    if {key} in data:")
            emit.lines.append(f"      v = data[{key}]")
            emit.check("v", hints[field.name], "      ")
            emit.lines.append(f"      kw[{key}] = v")
    emit.lines += [
        "    return _cls(**kw)",
        "  except Exception:",  # a validator, a missing key, a nested hook: let cattrs report
        "    pass",
        "  return _detailed(data, _cls)",
    ]
    return typing.cast(StructureHook, _compile(fn, emit.lines, emit.globs))


def compile_unstructure(
    conv: cattrs.Converter, cls: type, tag: str | None = None
) -> UnstructureHook:
    """An unstructure hook for ``cls`` writing ``{"type": tag, field: value, ...}`` at once,
    with the same field hooks cattrs would use (scalars and enums are written as they are)."""
    fields = attrs.fields(cls)
    hints = typing.get_type_hints(cls)
    emit = _Emitter(conv)
    fn = f"unstructure_{cls.__name__}"
    items = [f"'type': {tag!r}"] if tag is not None else []
    for field in fields:
        tp = hints[field.name]
        inner = _optional_inner(tp)
        if conv.get_unstructure_hook(tp) is identity or (
            inner is not None and conv.get_unstructure_hook(inner) is identity
        ):
            items.append(f"{field.name!r}: o.{field.name}")
        else:
            hook = emit.name("hook", conv.get_unstructure_hook(tp))
            items.append(f"{field.name!r}: {hook}(o.{field.name})")
    emit.lines += [f"def {fn}(o):", f"  return {{{', '.join(items)}}}"]
    return typing.cast(UnstructureHook, _compile(fn, emit.lines, emit.globs))


def fast_list(item_hook: StructureHook, item: Any, detailed: StructureHook) -> StructureHook:
    """A structure hook for ``list[item]``: one comprehension over ``item_hook``; anything
    that is not a list, or an item that fails, goes to ``detailed`` (which names the index)."""

    def structure_list(data: Any, cl: Any) -> Any:
        if type(data) is list:
            try:
                return [item_hook(x, item) for x in data]
            except Exception:  # the detailed hook reports it with the item's index
                pass
        return detailed(data, cl)

    return structure_list

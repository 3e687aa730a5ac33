"""``deep_copy``: a deep copy of messages, blocks, events and JSON-like values.

The library copies messages where they cross an ownership line (incoming messages, the blocks
a model call writes to the context, the copy a scripted model keeps of each request).
``copy.deepcopy`` is generic and slow on attrs instances (``__reduce_ex__``, a memo dict per
call); these values are trees of ``@attrs.define`` slots classes, lists, dicts and immutable
scalars, so they are rebuilt field by field instead, several times faster.  Anything else is
handed to ``copy.deepcopy``.  Unlike ``copy.deepcopy`` there is no memo: a value reachable
twice is copied twice (these values hold no cycles and no intended sharing).  A structure
nested too deeply raises ``RecursionError``, as ``copy.deepcopy`` does.
"""

from __future__ import annotations

import copy
import enum
from typing import Any, TypeVar, cast

import attrs

__all__ = ["deep_copy"]

_T = TypeVar("_T")
_ATOMIC = (str, int, float, type(None), enum.Enum)
_set = object.__setattr__
#: attrs slots class -> its field names; None: not a class copied field by field.
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _fields_of(cls: type) -> tuple[str, ...] | None:
    try:
        return _FIELDS[cls]
    except KeyError:
        names = None
        if attrs.has(cls) and cls.__dictoffset__ == 0:  # slots only: the fields are all
            names = tuple(f.name for f in attrs.fields(cls))
        _FIELDS[cls] = names
        return names


def deep_copy(value: _T) -> _T:
    """A deep copy of ``value`` (see the module docstring for what is copied how)."""
    return cast(_T, _copy(value))


def _copy(value: Any) -> Any:
    if isinstance(value, _ATOMIC):
        return value
    cls = type(value)
    if cls is list:
        return [v if isinstance(v, _ATOMIC) else _copy(v) for v in value]
    if cls is dict:
        return {k: v if isinstance(v, _ATOMIC) else _copy(v) for k, v in value.items()}
    names = _fields_of(cls)
    if names is None:
        return copy.deepcopy(value)
    new = object.__new__(cls)
    for name in names:
        field = getattr(value, name)
        _set(new, name, field if isinstance(field, _ATOMIC) else _copy(field))
    return new

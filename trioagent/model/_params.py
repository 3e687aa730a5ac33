"""Building blocks of the providers' generation parameters and request bodies.

The attrs validators the ``*ChatParameters`` classes share (:func:`in_range`,
:func:`positive_or_none`, :func:`one_of`), :func:`present` for the optional body keys, and
:func:`select_tools` for ``tool_choice.tools``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from .._core.json_types import JSONObject, JSONValue
from ..types import ToolChoice

__all__ = ["in_range", "one_of", "positive_or_none", "present", "select_tools"]

#: An attrs validator of an optional field (``Any``: it serves fields of several types, and
#: attrs infers a field's type from its validator's).
_Validator = Callable[[object, "attrs.Attribute[Any]", Any], None]


def in_range(
    low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> _Validator:
    """An attrs validator: ``None`` or a number within the interval."""

    def check(instance: object, attribute: attrs.Attribute[object], value: object) -> None:
        if value is None:
            return
        if not isinstance(value, int | float):
            raise TypeError(f"{attribute.name} must be a number, got {value!r}")
        ok_low = value > low if low_open else value >= low
        ok_high = value < high if high_open else value <= high
        if not (ok_low and ok_high):
            interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
            raise ValueError(f"{attribute.name} must be in {interval}, got {value}")

    return check


def positive_or_none(
    instance: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    """An attrs validator: ``None`` or an integer > 0."""
    if value is not None and value <= 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value}")


def one_of(*choices: str) -> _Validator:
    """An attrs validator: ``None`` or one of ``choices``."""

    def check(instance: object, attribute: attrs.Attribute[object], value: object) -> None:
        if value is not None and value not in choices:
            raise ValueError(f"{attribute.name} must be one of {', '.join(choices)}, got {value!r}")

    return check


def present(**fields: JSONValue) -> JSONObject:
    """The ``fields`` that are set (not ``None``), in order: the optional keys of a body."""
    return {key: value for key, value in fields.items() if value is not None}


def select_tools(
    tools: list[JSONObject] | None, tool_choice: ToolChoice | None
) -> list[JSONObject] | None:
    """``tools`` (OpenAI-style schemas) restricted to ``tool_choice.tools`` when that is set."""
    if tools and tool_choice is not None and tool_choice.tools:
        allowed = set(tool_choice.tools)
        return [t for t in tools if t.get("function", {}).get("name") in allowed]
    return tools

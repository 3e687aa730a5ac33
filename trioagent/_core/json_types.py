"""Names for decoded JSON.

``JSONObject`` is a JSON object as ``json.loads`` returns it: provider payloads, tool inputs,
JSON schemas.  Its values are untyped on purpose: the shape belongs to the other side of the
wire, and each reader checks what it reads (a malformed shape is a typed error, never a crash).
"""

from __future__ import annotations

from typing import Any, TypeAlias

__all__ = ["JSONObject", "JSONValue"]

JSONValue: TypeAlias = Any
JSONObject: TypeAlias = dict[str, JSONValue]

"""Lenient JSON for model output: repair truncated tool arguments, flatten tool schemas.

Models stream tool arguments as JSON text that may be cut short (``{"city": "Tok``) or carry
values of the wrong type (``{"n": "42"}`` for an integer).  :func:`json_loads_with_repair`
turns such text into a dict with the ``json_repair`` package; the toolkit uses it for tool
arguments and the model layer for structured output.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

from json_repair import repair_json

from ..exception import ToolJSONDecodeError

__all__ = ["flatten_json_schema", "json_loads_with_repair"]

logger = logging.getLogger("trioagent.model")

# Keywords whose value maps property names to schemas (the names are not schemas).
_SCHEMA_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "dependentSchemas"})
# Keywords that hold instance data, kept verbatim.
_INSTANCE_VALUE_KEYWORDS = frozenset({"default", "const", "enum", "examples"})


def _has_dropped_keys(original: Any, repaired: Any) -> bool:
    """Whether a dict inside ``repaired`` lost a key its counterpart in ``original`` has."""
    if isinstance(original, dict) and isinstance(repaired, dict):
        return bool(original.keys() - repaired.keys()) or any(
            _has_dropped_keys(original[key], value)
            for key, value in repaired.items()
            if key in original
        )
    if isinstance(original, list) and isinstance(repaired, list):
        return any(_has_dropped_keys(a, b) for a, b in zip(original, repaired, strict=False))
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"NaN and Infinity are not valid JSON numbers (got {name}).")


def _decode_error(json_str: str, message: str) -> ToolJSONDecodeError:
    if len(json_str) > 200:
        shown = json_str[:100] + "[TRUNCATE]" + json_str[-100:]
        hint = (
            " (Because the JSON string is too long, a truncated label "
            '"[TRUNCATE]" is used here to indicate the truncation)'
        )
    else:
        shown, hint = json_str, ""
    return ToolJSONDecodeError(
        f"<system-reminder>{message}\n\n"
        f"Your argument string is decoded by the following code snippet{hint}:\n"
        "```python\nimport json\n\n"
        f"your_tool_arguments = {shown!r}\njson.loads(your_tool_arguments)\n```\n\n"
        "**You should recorrect the arguments in JSON format.**</system-reminder>"
    )


def json_loads_with_repair(json_str: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Parse ``json_str`` into a dict, repairing truncated or mistyped JSON.

    * blank text gives ``{}`` (a tool called without arguments);
    * a valid JSON object is returned as is when no ``schema`` is given;
    * otherwise ``json_repair`` repairs it, guided by ``schema`` (``"42"`` → ``42`` for an
      integer property).  A repair that drops keys of a valid object is refused (that would
      be a rewrite, not a repair), and NaN/Infinity are rejected.

    Raises:
        ToolJSONDecodeError: the text cannot be turned into a dict.  Its message is written
            for the model to read and correct its arguments.
    """
    if not json_str.strip():
        return {}

    parsed: Any = None
    message = "Error: Failed to parse your tool arguments."
    try:
        parsed = json.loads(json_str, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        message = (
            "Error: When decoding your tool arguments from JSON format to a Python "
            f"dictionary, a JSONDecodeError was raised with message: {exc}."
        )
    except ValueError as exc:  # NaN / Infinity
        message = f"Error: {exc}"
    else:
        if not isinstance(parsed, dict):
            message = (
                f"Error: Your argument string is decoded into a {type(parsed)} object, "
                "but a dict object is expected!"
            )
        elif schema is None:
            return parsed

    try:
        repaired: Any = repair_json(
            json_str, return_objects=True, stream_stable=True, schema=schema
        )
    except Exception:  # json_repair is best effort; the original message is more useful
        logger.debug("json_repair failed on %d characters", len(json_str), exc_info=True)
        repaired = parsed
    if isinstance(repaired, dict):
        if isinstance(parsed, dict) and _has_dropped_keys(parsed, repaired):
            repaired = parsed
        try:
            json.dumps(repaired, allow_nan=False)
        except ValueError:
            message = "Error: NaN and Infinity are not valid JSON numbers."
        else:
            result: dict[str, Any] = repaired
            return result
    raise _decode_error(json_str, message)


def flatten_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline every local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) and drop the defs.

    Some providers reject ``$defs``/``$ref`` in tool parameter schemas.  A circular reference
    is replaced by ``{"type": "object", "description": "(circular: X)"}``; external refs are
    kept.  The input is not modified.
    """
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            defs.update(schema[key])
    if not defs:
        return schema
    root = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}

    def resolve(obj: Any, visited: frozenset[str]) -> Any:
        if isinstance(obj, list):
            return [resolve(item, visited) for item in obj]
        if not isinstance(obj, dict):
            return obj
        out: dict[str, Any] = {}
        ref = obj.get("$ref")
        if ref is not None:
            if not isinstance(ref, str) or not ref.startswith(("#/$defs/", "#/definitions/")):
                return copy.deepcopy(obj)
            name = ref.rsplit("/", 1)[-1]
            if name in visited:
                logger.warning("circular reference to %r in a tool schema", name)
                return {"type": "object", "description": f"(circular: {name})"}
            if name not in defs:
                return copy.deepcopy(obj)
            visited = visited | {name}
            resolved = resolve(defs[name], visited)
            if isinstance(resolved, dict):
                out.update(resolved)
        for key, value in obj.items():
            if key in ("$ref", "$defs", "definitions"):
                continue
            if key in _INSTANCE_VALUE_KEYWORDS:
                out[key] = copy.deepcopy(value)
            elif key in _SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
                out[key] = {name: resolve(sub, visited) for name, sub in value.items()}
            else:
                out[key] = resolve(value, visited)
        return out

    result: dict[str, Any] = resolve(root, frozenset())
    return result

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
import math

from ._core.json_types import JSONObject, JSONValue
from .exception import ToolJSONDecodeError

__all__ = ["flatten_json_schema", "json_loads_with_repair"]

logger = logging.getLogger("trioagent.model")

# Keywords whose value maps property names to schemas (the names are not schemas).
_SCHEMA_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "dependentSchemas"})
# Keywords that hold instance data, kept verbatim.
_INSTANCE_VALUE_KEYWORDS = frozenset({"default", "const", "enum", "examples"})


def _has_dropped_keys(original: JSONValue, repaired: JSONValue) -> bool:
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


#: Invalid argument text longer than this is refused, not repaired: ``json_repair`` slows down
#: quadratically on a long unterminated string (seconds at a few hundred kB, on the event
#: loop), and a repaired long text cut at the token limit is rarely what the model meant.
MAX_REPAIR_CHARS = 100_000


def _reject_constant(name: str) -> JSONValue:
    raise ValueError(f"NaN and Infinity are not valid JSON numbers (got {name}).")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"NaN and Infinity are not valid JSON numbers (got {text}).")
    return value


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


def _satisfies(value: JSONObject, schema: JSONObject) -> bool:
    import jsonschema  # imported on first use, not with trioagent

    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        return bool(validator.is_valid(value))
    except jsonschema.SchemaError:
        return False


def _is_finite(value: JSONValue) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


def json_loads_with_repair(json_str: str, schema: JSONObject | None = None) -> JSONObject:
    """Parse ``json_str`` into a dict, repairing truncated or mistyped JSON (tool-call arguments
    and structured output as models write them).

    * blank text gives ``{}`` (a tool called without arguments);
    * a valid JSON object is returned verbatim when there is no ``schema`` or it satisfies the
      schema (AgentScope repairs it anyway, which silently fills in schema defaults);
    * otherwise ``json_repair`` repairs it, guided by ``schema`` (``"42"`` → ``42`` for an
      integer property).  A repair that drops keys of a valid object is refused (that would
      be a rewrite, not a repair: validation must see them);
    * NaN, Infinity and numbers too large for a float, integers beyond Python's digit limit,
      nesting too deep to parse and invalid text over :data:`MAX_REPAIR_CHARS` are refused.

    Raises:
        ToolJSONDecodeError: the text cannot be turned into a dict.  Its message is written
            for the model to read and correct its arguments.
    """
    if not json_str.strip():
        return {}

    parsed: JSONValue = None
    decoded = False
    try:
        parsed = json.loads(json_str, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        message = (
            "Error: When decoding your tool arguments from JSON format to a Python "
            f"dictionary, a JSONDecodeError was raised with message: {exc}."
        )
    except ValueError as exc:  # NaN / Infinity / an integer over the digit limit: no repair
        raise _decode_error(json_str, f"Error: {exc}") from None
    except RecursionError:
        raise _decode_error(json_str, "Error: Your tool arguments are nested too deeply.") from None
    else:
        decoded = True
        if not isinstance(parsed, dict):
            message = (
                f"Error: Your argument string is decoded into a {type(parsed)} object, "
                "but a dict object is expected!"
            )
        elif schema is None or _satisfies(parsed, schema):
            return parsed
        else:
            message = "Error: Failed to parse your tool arguments."

    if not decoded and len(json_str) > MAX_REPAIR_CHARS:
        raise _decode_error(
            json_str, f"{message} (The text is too long to be repaired automatically.)"
        )
    from json_repair import repair_json  # imported on first use, not with trioagent

    try:
        repaired: JSONValue = repair_json(
            json_str, return_objects=True, stream_stable=True, schema=schema
        )
    except Exception:  # json_repair is best effort; the original message is more useful
        logger.debug("json_repair failed on %d characters", len(json_str), exc_info=True)
        repaired = parsed
    if isinstance(repaired, dict):
        if isinstance(parsed, dict) and _has_dropped_keys(parsed, repaired):
            repaired = parsed
        if _is_finite(repaired):
            result: JSONObject = repaired
            return result
        message = "Error: NaN and Infinity are not valid JSON numbers."
    raise _decode_error(json_str, message)


def _local_def_name(ref: JSONValue) -> str | None:
    """``X`` for ``#/$defs/X`` or ``#/definitions/X``; ``None`` for any other pointer (a
    deeper path such as ``#/$defs/A/properties/B`` is kept as it is, not guessed at)."""
    if not isinstance(ref, str):
        return None
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix) and "/" not in ref[len(prefix) :]:
            return ref[len(prefix) :].replace("~1", "/").replace("~0", "~")
    return None


def flatten_json_schema(schema: JSONObject) -> JSONObject:
    """Inline every local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) and drop the defs.

    Some providers reject ``$defs``/``$ref`` in tool parameter schemas.  A circular reference
    is replaced by ``{"type": "object", "description": "(circular: X)"}``; external refs are
    kept.  The input is not modified.
    """
    defs: JSONObject = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            defs.update(schema[key])
    if not defs:
        return schema
    root = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}

    def resolve(obj: JSONValue, visited: frozenset[str]) -> JSONValue:
        if isinstance(obj, list):
            return [resolve(item, visited) for item in obj]
        if not isinstance(obj, dict):
            return obj
        out: JSONObject = {}
        ref = obj.get("$ref")
        if ref is not None:
            name = _local_def_name(ref)
            if name is None:
                return copy.deepcopy(obj)
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

    result: JSONObject = resolve(root, frozenset())
    return result

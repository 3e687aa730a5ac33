"""Parse a tool call's argument string, repairing what a model commonly gets wrong.

Models stream tool arguments as JSON text that is sometimes truncated (``{"city": "Tok``),
sometimes carries the wrong scalar types (``{"n": "42"}`` for an integer), and occasionally is
not JSON at all.  :func:`loads_tool_arguments` follows the reference's
``_json_loads_with_repair`` (reference/model.md §1.6, tools_middleware.md §5.5 step 3):

* blank input is ``{}`` (providers send nothing for a no-argument call);
* a valid JSON object is returned as is when there is no schema or it satisfies the schema
  (the reference repairs it anyway, which silently fills in schema defaults);
* otherwise ``json_repair`` repairs it, guided by the schema when one is given; a repair that
  dropped keys of an already valid object is discarded (that is a rewrite, not a repair), so
  schema validation reports the problem instead;
* NaN / Infinity are rejected (jsonschema accepts them as numbers and they slip past
  ``minimum`` / ``maximum``);
* anything else raises :class:`~trioagent.exception.ToolJSONDecodeError` whose message is a
  ``<system-reminder>`` the model can act on, quoting the argument string (first 100 +
  ``[TRUNCATE]`` + last 100 characters when it is longer than 200).

Private on purpose: the model layer has its own copy, so neither layer waits for the other.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from json_repair import repair_json

from ..exception import ToolJSONDecodeError

__all__ = ["loads_tool_arguments"]

_MAX_QUOTED = 200


def loads_tool_arguments(json_str: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Decode ``json_str`` into a dict, repairing it when needed.

    Raises:
        ToolJSONDecodeError: the string cannot be turned into a JSON object.
    """
    if not json_str.strip():
        return {}

    parsed: Any = None
    error_message = "Error: Failed to parse your tool arguments."
    try:
        parsed = json.loads(json_str)
    except json.JSONDecodeError as exc:
        error_message = (
            "Error: When decoding your tool arguments from JSON format to a Python dictionary, "
            f"a JSONDecodeError was raised with message: {exc}."
        )
    else:
        if not isinstance(parsed, dict):
            error_message = (
                f"Error: Your argument string is decoded into a {type(parsed)} object, "
                "but a dict object is expected!"
            )
        elif schema is None or _satisfies(parsed, schema):
            # Valid arguments are used verbatim (the repair would also fill in defaults).
            return _reject_non_finite(parsed, json_str)

    try:
        repaired: Any = repair_json(
            json_str, stream_stable=True, schema=schema, return_objects=True
        )
    except (ValueError, TypeError, RecursionError):
        # The repair is best effort; leave what it cannot fix to schema validation.
        repaired = parsed

    if isinstance(repaired, dict):
        if isinstance(parsed, dict) and parsed.keys() - repaired.keys():
            # Dropping arguments (e.g. under additionalProperties: false) is a rewrite.
            repaired = parsed
        if _is_finite(repaired):
            result: dict[str, Any] = repaired
            return result
        error_message = "Error: NaN and Infinity are not valid JSON numbers."

    raise ToolJSONDecodeError(_reminder(error_message, json_str))


def _reject_non_finite(value: dict[str, Any], json_str: str) -> dict[str, Any]:
    if _is_finite(value):
        return value
    raise ToolJSONDecodeError(
        _reminder("Error: NaN and Infinity are not valid JSON numbers.", json_str)
    )


def _satisfies(value: dict[str, Any], schema: dict[str, Any]) -> bool:
    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        return bool(validator.is_valid(value))
    except jsonschema.SchemaError:
        return False


def _is_finite(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


def _reminder(error_message: str, json_str: str) -> str:
    if len(json_str) > _MAX_QUOTED:
        shown = json_str[:100] + "[TRUNCATE]" + json_str[-100:]
        hint = (
            "(Because the JSON string is too long, a truncated label "
            '"[TRUNCATE]" is used here to indicate the truncation)'
        )
    else:
        shown = json_str
        hint = ""
    return (
        f"<system-reminder>{error_message}\n\n"
        f"Your argument string is decoded by the following code snippet{hint}:\n"
        "```python\n"
        "import json\n\n"
        f"your_tool_arguments = {shown!r}\n"
        "json.loads(your_tool_arguments)\n"
        "```\n\n"
        "**You should recorrect the arguments in JSON format.**</system-reminder>"
    )

"""Tool schemas and request JSON in the forms Gemini's REST API takes.

:func:`sanitize_gemini_schema` reduces a JSON schema to what Gemini's function declarations
accept, :func:`function_declaration` turns an OpenAI-style tool into one, and
:func:`to_gemini_rest` turns SDK-shaped (snake_case) dicts into REST JSON.
"""

from __future__ import annotations

import base64

from .._core.json_types import JSONObject, JSONValue
from .._json_repair import flatten_json_schema

__all__ = ["function_declaration", "sanitize_gemini_schema", "to_gemini_rest"]


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs")
_SCHEMA_SINGLE = ("items", "not", "if", "then", "else")
_SCHEMA_LISTS = ("allOf", "oneOf", "anyOf")


def _is_null_schema(schema: JSONValue) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def sanitize_gemini_schema(schema: JSONValue) -> JSONValue:
    """A JSON schema reduced to what Gemini's function declarations accept.

    Drops ``$schema`` and ``additionalProperties``; ``const: v`` becomes ``enum: [v]``; a
    ``null`` type becomes ``object``; a type list loses ``"null"`` (one type left: that type;
    several: an ``anyOf`` of them); an ``anyOf`` with a null member loses it (one member left:
    inlined, the outer keys such as ``default`` and ``description`` kept).  Applied
    recursively to sub-schemas.  The input is not modified.

    Raises:
        ValueError: a schema with both a multi-type ``type`` list and an ``anyOf``.
    """
    if isinstance(schema, list):
        return [sanitize_gemini_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if isinstance(any_of := schema.get("anyOf"), list) and any(map(_is_null_schema, any_of)):
        members = [m for m in any_of if not _is_null_schema(m)]
        outer = {k: v for k, v in schema.items() if k != "anyOf"}
        if len(members) == 1 and isinstance(members[0], dict):
            return sanitize_gemini_schema({**members[0], **outer})
        schema = {**schema, "anyOf": members} if members else outer
    out: JSONObject = {}
    for key, value in schema.items():
        if key in ("$schema", "additionalProperties"):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: sanitize_gemini_schema(sub) for name, sub in value.items()}
        elif key in _SCHEMA_SINGLE or key in _SCHEMA_LISTS:
            out[key] = sanitize_gemini_schema(value)
        else:
            out[key] = value
    if "const" in out:
        out.setdefault("enum", [out.pop("const")])
    kind = out.get("type")
    if kind == "null":
        out["type"] = "object"
    elif isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) <= 1:
            out["type"] = kinds[0] if kinds else "object"
        else:
            if "anyOf" in out:
                raise ValueError(
                    f"cannot convert the type list {kind!r} to anyOf: the schema already has one"
                )
            del out["type"]
            out["anyOf"] = [{"type": k} for k in kinds]
    return out


def function_declaration(tool: JSONObject) -> JSONObject:
    function = tool.get("function", tool)
    declaration: JSONObject = {"name": function.get("name", "")}
    if function.get("description"):
        declaration["description"] = function["description"]
    parameters = function.get("parameters")
    if isinstance(parameters, dict):
        parameters = sanitize_gemini_schema(flatten_json_schema(parameters))
        # Gemini rejects an OBJECT schema without properties; a tool without arguments is
        # declared without parameters instead.
        if parameters.get("type") != "object" or parameters.get("properties"):
            declaration["parameters"] = parameters
    return declaration


# -- REST conversion -------------------------------------------------------------------------

#: Values under these keys are user data (function arguments and results): kept verbatim.
_VERBATIM_KEYS = frozenset({"args", "response"})


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def to_gemini_rest(value: JSONValue) -> JSONValue:
    """SDK-shaped (snake_case) Gemini dicts as REST JSON: camelCase keys, bytes as base64.

    Function-call arguments and function responses are left as they are; keys that are
    already camelCase pass through.
    """
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list):
        return [to_gemini_rest(item) for item in value]
    if isinstance(value, dict):
        return {
            _camel(key): (_bytes_to_base64(item) if key in _VERBATIM_KEYS else to_gemini_rest(item))
            for key, item in value.items()
        }
    return value


def _bytes_to_base64(value: JSONValue) -> JSONValue:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list):
        return [_bytes_to_base64(item) for item in value]
    if isinstance(value, dict):
        return {key: _bytes_to_base64(item) for key, item in value.items()}
    return value

"""Structured output through the ``GenerateStructuredOutput`` tool.

For a reply with a ``structured_schema`` the agent offers this tool (to that reply only) and
keeps reminding the model to call it; the reply completes once a valid object was generated.
An invalid object is an error result the model reads, and it tries again.  The schema is a
JSON-schema dict, a pydantic model (checked by ``model_validate``), or an attrs class,
dataclass or ``TypedDict`` (checked against the schema, then converted field by field so
field types and attrs validators apply).  The final Msg keeps the object as JSON in
``structured_output``; ``msg.get_structured_output(Schema)`` gives it back typed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from ..message import TextBlock
from ..permission import PermissionBehavior, PermissionContext, PermissionDecision
from ..tool import ClassSchema, ToolBase, ToolChunk, is_schema_class
from ._state import schema_of

__all__ = ["STRUCTURED_OUTPUT_TOOL_NAME", "StructuredOutputTool"]

#: The name of the tool through which the model delivers a reply's structured output.
STRUCTURED_OUTPUT_TOOL_NAME = "GenerateStructuredOutput"


@functools.cache
def _filling_validator() -> Any:
    """A jsonschema validator class that also fills ``default`` values into objects (built
    on first use: jsonschema is not imported with trioagent)."""
    import jsonschema
    from jsonschema import validators

    base = jsonschema.Draft202012Validator
    validate_properties = base.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(name, subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(base, {"properties": set_defaults})  # type: ignore[no-untyped-call]


class StructuredOutputTool(ToolBase):
    """Validates the model's structured output and stores it in the reply context."""

    name = STRUCTURED_OUTPUT_TOOL_NAME
    description = (
        "Generate the final structured output required by the user. Call it once, with "
        "arguments that follow the schema exactly."
    )
    is_state_injected = True
    is_concurrency_safe = True
    is_read_only = True

    def __init__(self, schema: Any) -> None:
        super().__init__()
        json_schema = schema_of(schema) or {"type": "object", "properties": {}}
        if json_schema.get("type") == "object" and "properties" not in json_schema:
            # Tool schemas name their properties; an object schema without any (a map such as
            # ``additionalProperties: {"type": "number"}``) means the same with none named.
            json_schema = {**json_schema, "properties": {}}
        self.input_schema = json_schema  # titles are dropped from the schema the model sees

    async def check_permissions(
        self, tool_input: dict[str, Any], context: PermissionContext
    ) -> PermissionDecision:
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message="Generating the structured output is always allowed.",
        )

    async def call(self, emit: Any, /, _agent_state: Any = None, **kwargs: Any) -> ToolChunk:
        reply_context = _agent_state.reply_context if _agent_state is not None else None
        schema = reply_context.structured_schema if reply_context is not None else None
        if reply_context is None or schema is None:
            return ToolChunk(content=[TextBlock(text="No structured output is required for now.")])
        validate = getattr(schema, "model_validate", None)
        try:
            if callable(validate):
                output = validate(kwargs).model_dump(mode="json")
            else:
                checked = ClassSchema(schema) if is_schema_class(schema) else None
                instance = dict(kwargs)
                json_schema = checked.schema if checked is not None else schema
                errors = sorted(
                    _filling_validator()(json_schema).iter_errors(instance),
                    key=lambda e: list(e.path),
                )
                if errors:
                    raise ValueError("; ".join(f"{e.json_path}: {e.message}" for e in errors))
                if checked is not None:
                    checked.check(instance)
                output = instance
        except Exception as exc:
            return ToolChunk(
                content=[
                    TextBlock(
                        text="ValidationError: Structured output validation failed with error: "
                        f"{exc}"
                    )
                ],
                state="error",
            )
        reply_context.structured_output = output
        return ToolChunk(content=[TextBlock(text="Structured output generated successfully.")])

"""Structured output: making a chat model produce a JSON object that matches a schema.

The model is asked to call a ``generate_structured_output`` tool whose parameters are the
schema; its arguments are repaired and validated.  Several request shapes are tried, best
first (:func:`generate_structured_output`); the disable-thinking step passes the provider's
body keys to its one call as an argument (the model makes that call on a copy carrying them).
"""

from __future__ import annotations

import builtins
import copy
import logging
from collections.abc import Awaitable, Callable
from typing import ClassVar, Protocol

import attrs

from .._core.ids import generate_id, generate_timestamp
from .._core.json_types import JSONObject, JSONValue
from .._json_repair import json_loads_with_repair
from ..exception import ModelError, StructuredOutputError, ToolJSONDecodeError
from ..message import Msg, TextBlock, ToolCallBlock, UserMsg
from ..types import FinishedReason, ToolChoice
from ._response import ChatResponse, ChatUsage

__all__ = [
    "StructuredModel",
    "StructuredResponse",
    "generate_structured_output",
]

logger = logging.getLogger("trioagent.model")

_STRUCTURED_TOOL = "generate_structured_output"
_STRUCTURED_REMINDER = (
    "<system-reminder>Now you **MUST** call the tool named 'generate_structured_output' to "
    "generate the structured output required by the user. DON'T do anything else."
    "</system-reminder>"
)


class StructuredModel(Protocol):
    """A pydantic-like class: ``model_json_schema()`` and ``model_validate(obj)``."""

    @classmethod
    def model_json_schema(cls) -> JSONObject: ...

    @classmethod
    def model_validate(cls, obj: JSONValue) -> object: ...


@attrs.define(kw_only=True)
class StructuredResponse:
    """The result of :meth:`~trioagent.model.ChatModelBase.generate_structured_output`."""

    type: ClassVar[str] = "structured_response"
    content: JSONObject
    id: str = attrs.field(factory=generate_id)
    created_at: str = attrs.field(factory=generate_timestamp)
    usage: ChatUsage | None = None
    metadata: JSONObject = attrs.field(factory=dict)
    finished_reason: FinishedReason = attrs.field(
        default=FinishedReason.COMPLETED, converter=FinishedReason
    )


#: One model call of a strategy: (messages, tools, tool choice, extra request-body keys) ->
#: the complete response.
ModelCall = Callable[
    [list[Msg], list[JSONObject], ToolChoice | None, JSONObject], Awaitable[ChatResponse]
]


async def generate_structured_output(
    messages: list[Msg],
    structured_model: JSONObject | builtins.type[StructuredModel],
    *,
    tool_choice: ToolChoice | None,
    model: str,
    call: ModelCall,
    disable_thinking: JSONObject,
    is_fallback_error: Callable[[ModelError], bool],
) -> StructuredResponse:
    """Make the model produce a JSON object matching a schema.

    ``structured_model`` is a JSON-schema dict or a pydantic-like class.  Strategies, best
    first: a forced tool choice, ``auto``, forced with thinking disabled (only when
    ``disable_thinking`` has the provider's body keys for it), no tool choice.  A strategy
    failing with :class:`~trioagent.exception.StructuredOutputError` or an error for which
    ``is_fallback_error`` holds moves to the next; other errors propagate at once.  An
    explicit ``tool_choice`` is used alone.  ``call`` makes one model call (nothing is
    emitted) with the strategy's extra request-body keys; cancellation propagates.
    """
    if not messages:
        raise ValueError("generate_structured_output needs at least one message")
    if isinstance(structured_model, dict):
        schema = structured_model
    elif hasattr(structured_model, "model_json_schema"):
        schema = structured_model.model_json_schema()
    else:
        raise TypeError(
            "structured_model must be a JSON-schema dict or a class with "
            f"model_json_schema(), got {structured_model!r}"
        )
    forced = ToolChoice(mode=_STRUCTURED_TOOL)
    strategies: list[tuple[str, JSONObject, ToolChoice | None]]
    if tool_choice is not None:
        strategies = [("explicit", {}, tool_choice)]
    else:
        strategies = [("forced", {}, forced), ("auto", {}, ToolChoice(mode="auto"))]
        if disable_thinking:
            strategies.append(("no_think", disable_thinking, forced))
        strategies.append(("none", {}, None))

    prompt = copy.deepcopy(list(messages))
    if prompt[-1].role == "user":
        prompt[-1].content = [*prompt[-1].content, TextBlock(text=_STRUCTURED_REMINDER)]
    else:
        prompt.append(UserMsg("user", _STRUCTURED_REMINDER))
    tools: list[JSONObject] = [
        {
            "type": "function",
            "function": {
                "name": _STRUCTURED_TOOL,
                "description": (
                    "Call this function to generate structured output required by the user."
                ),
                "parameters": schema,
            },
        }
    ]

    first_error: Exception | None = None
    last_error: Exception | None = None
    for name, extra, choice in strategies:
        try:
            response = await call(prompt, tools, choice, extra)
            result = _parse_structured(response, schema, structured_model, model)
        except Exception as exc:
            first_error = first_error or exc
            last_error = exc
            if isinstance(exc, StructuredOutputError) or (
                isinstance(exc, ModelError) and is_fallback_error(exc)
            ):
                logger.debug("structured output strategy %r failed: %s", name, exc)
                continue
            raise
        if name not in ("forced", "explicit"):
            logger.info("structured output for %r used strategy %r", model, name)
        return result
    assert last_error is not None
    if first_error is not None and first_error is not last_error:
        raise last_error from first_error
    raise last_error


def _parse_structured(
    response: ChatResponse,
    schema: JSONObject,
    structured_model: JSONObject | builtins.type[StructuredModel],
    model: str,
) -> StructuredResponse:
    call = next(
        (
            b
            for b in response.content
            if isinstance(b, ToolCallBlock) and b.name == _STRUCTURED_TOOL
        ),
        None,
    )
    if call is None:
        raise StructuredOutputError(f"model {model!r} did not call the {_STRUCTURED_TOOL!r} tool")
    import jsonschema  # imported on first use, not with trioagent

    try:
        output = json_loads_with_repair(call.input, schema)
        if isinstance(structured_model, dict):
            jsonschema.validate(output, structured_model)
        else:
            structured_model.model_validate(output)
    except (ToolJSONDecodeError, jsonschema.ValidationError, ValueError) as exc:
        raise StructuredOutputError(
            f"invalid structured output from model {model!r}: {exc}"
        ) from exc
    return StructuredResponse(
        content=output,
        id=response.id,
        created_at=response.created_at,
        usage=response.usage,
        finished_reason=response.finished_reason,
    )

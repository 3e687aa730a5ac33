"""Enumerations and small value types shared by messages, events, models and tools."""

from __future__ import annotations

import enum

import attrs

from ._core.ids import generate_id, generate_timestamp, set_id_factory, set_timestamp_factory

__all__ = [
    "ErrorInfo",
    "ErrorType",
    "FinishedReason",
    "ReplyEndReason",
    "ReplyFinishedReason",
    "ToolChoice",
    "generate_id",
    "generate_timestamp",
    "set_id_factory",
    "set_timestamp_factory",
]


class ReplyFinishedReason(enum.StrEnum):
    """Why a reply ended; carried by ``ReplyEndEvent`` and the final ``Msg``."""

    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    EXCEED_MAX_ITERS = "exceed_max_iters"
    ERROR = "error"


#: Deprecated alias kept for AgentScope users.
ReplyEndReason = ReplyFinishedReason


class FinishedReason(enum.StrEnum):
    """Why one model call ended.

    ``MAX_TOKENS``: the response was cut off at the model's output limit (OpenAI's
    ``finish_reason: "length"``, Anthropic's ``stop_reason: "max_tokens"``, Gemini's
    ``MAX_TOKENS``, Ollama's ``done_reason: "length"``); none of its tool calls runs.

    ``CONTENT_FILTER``: the provider stopped the response with a safety or content filter
    (OpenAI's and Azure's ``finish_reason: "content_filter"``, Anthropic's ``stop_reason:
    "refusal"``, Gemini's ``SAFETY``, ``RECITATION``, ``BLOCKLIST``, ...); as with
    ``MAX_TOKENS``, its tool calls may be cut off and none of them runs.
    """

    INTERRUPTED = "interrupted"
    COMPLETED = "completed"
    MAX_TOKENS = "max_tokens"
    CONTENT_FILTER = "content_filter"


class ErrorType(enum.StrEnum):
    """Classification of an error that ended a reply."""

    AUTHENTICATION = "authentication"
    PERMISSION = "permission"
    RATE_LIMIT = "rate_limit"
    INVALID_REQUEST = "invalid_request"
    UPSTREAM = "upstream"
    CONNECTION = "connection"
    INTERNAL = "internal"
    SETUP = "setup"
    UNKNOWN = "unknown"


@attrs.frozen(kw_only=True)
class ErrorInfo:
    """A classified error attached to ``ReplyEndEvent(ERROR)`` and to the final ``Msg``.

    For a model error, ``provider``, ``model`` and ``endpoint`` name the model that failed
    (the endpoint without credentials or query string); they are ``None`` otherwise.
    """

    type: ErrorType = attrs.field(default=ErrorType.UNKNOWN, converter=ErrorType)
    message: str
    provider: str | None = None
    model: str | None = None
    endpoint: str | None = None


def _check_tool_choice_mode(
    instance: ToolChoice, attribute: attrs.Attribute[str], value: str
) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError("ToolChoice.mode must be 'auto', 'none', 'required' or a tool name")


@attrs.frozen
class ToolChoice:
    """How the model may use tools.

    ``mode`` is ``"auto"``, ``"none"``, ``"required"`` or the name of one tool the model must
    call.  ``tools``, when given, filters the schemas sent to the model and is the whitelist a
    forced name must belong to.
    """

    mode: str = attrs.field(default="auto", validator=_check_tool_choice_mode)
    tools: list[str] | None = None

    def __attrs_post_init__(self) -> None:
        if (
            self.tools is not None
            and self.mode not in ("auto", "none", "required")
            and self.mode not in self.tools
        ):
            raise ValueError(f"forced tool {self.mode!r} is not in ToolChoice.tools {self.tools!r}")

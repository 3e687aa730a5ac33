"""Agent configuration objects.

Each agent gets fresh default instances; the objects are mutable so a middleware or the
application can adjust them between replies.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import attrs

from ..model import as_chat_model

__all__ = ["ContextConfig", "InjectionConfig", "ModelConfig", "ReActConfig"]

DEFAULT_COMPRESSION_PROMPT = (
    "<system-hint>The conversation so far is about to be compressed to free up context space. "
    "Write a self-contained summary that lets you continue the work without the original "
    "messages. Convert relative times into absolute ones (the current time is {current_time}); "
    "keep identifiers, file paths, URLs, numbers and names verbatim; record the work in flight "
    "and any tools still running in the background, and what remains to be done.</system-hint>"
)

DEFAULT_SUMMARY_TEMPLATE = (
    "<system-info>Here is a summary of your previous work\n"
    "# Task Overview\n{task_overview}\n\n"
    "# Current State\n{current_state}\n\n"
    "# Important Discoveries\n{important_discoveries}\n\n"
    "# Next Steps\n{next_steps}\n\n"
    "# Context to Preserve\n{context_to_preserve}</system-info>"
)

_SUMMARY_FIELDS = {
    "task_overview": "What the user asked for and the overall goal.",
    "current_state": "What has been done so far and where the work stands.",
    "important_discoveries": "Facts, decisions and results learned along the way.",
    "next_steps": "What remains to be done, in order.",
    "context_to_preserve": "Identifiers, paths, names and other details to keep verbatim.",
}

DEFAULT_SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        name: {"type": "string", "description": description}
        for name, description in _SUMMARY_FIELDS.items()
    },
    "required": list(_SUMMARY_FIELDS),
}


def _ratio(low: float, high: float, *, low_open: bool, high_open: bool) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[float], value: float) -> None:
        _number(instance, attribute, value)
        too_low = value <= low if low_open else value < low
        too_high = value >= high if high_open else value > high
        if too_low or too_high or math.isnan(value):
            lo, hi = "(" if low_open else "[", ")" if high_open else "]"
            raise ValueError(f"{attribute.name} must be in {lo}{low}, {high}{hi}, got {value}")

    return check


def _number(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{attribute.name} must be a number, got {type(value).__name__}")


def _finite_positive(instance: Any, attribute: attrs.Attribute[float], value: float) -> None:
    _number(instance, attribute, value)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{attribute.name} must be finite and > 0, got {value}")


def _time_interval(instance: Any, attribute: attrs.Attribute[float], value: float) -> None:
    _number(instance, attribute, value)
    if not (0 <= value < _MAX_HOURS):  # also NaN; timedelta(hours=...) overflows past this
        raise ValueError(f"{attribute.name} must be in [0, {_MAX_HOURS}) hours, got {value}")


_MAX_HOURS = 1_000_000


@attrs.define(kw_only=True)
class ContextConfig:
    """When and how the context is compressed, and tool-result / image limits."""

    trigger_ratio: float = attrs.field(
        default=0.8, validator=_ratio(0, 0.9, low_open=True, high_open=False)
    )
    reserve_ratio: float = attrs.field(
        default=0.1, validator=_ratio(0, 0.9, low_open=True, high_open=True)
    )
    context_buffer_ratio: float = attrs.field(
        default=0.2, validator=_ratio(0, 1, low_open=False, high_open=False)
    )
    compression_prompt: str = DEFAULT_COMPRESSION_PROMPT
    summary_template: str = DEFAULT_SUMMARY_TEMPLATE
    summary_schema: dict[str, Any] = attrs.field(factory=lambda: dict(DEFAULT_SUMMARY_SCHEMA))
    tool_result_limit: int = attrs.field(default=50000, validator=attrs.validators.gt(0))
    compression_fallback_to_truncation: bool = True
    compression_tool_enabled: bool = False
    max_image_num: int = attrs.field(default=5, validator=attrs.validators.ge(0))

    def __attrs_post_init__(self) -> None:
        if self.reserve_ratio >= self.trigger_ratio:
            raise ValueError(
                f"reserve_ratio ({self.reserve_ratio}) must be smaller than "
                f"trigger_ratio ({self.trigger_ratio})"
            )


@attrs.define(kw_only=True)
class ReActConfig:
    """The reasoning-acting loop.

    ``interrupt_grace`` bounds the whole cleanup after a cancellation: the state is written
    first (the partial response, interrupted results, the final Msg), then the closing events
    and the INTERRUPTED end are handed to the consumer, shielded, within this one budget.
    ``interruption_raise_cancelled_error``: when true, ``agent.reply()`` raises
    :class:`~trioagent.exception.ReplyInterruptedError` (carrying the interrupted Msg) after
    ``agent.interrupt()`` instead of returning the Msg.  An outer cancellation always
    propagates ``trio.Cancelled``.
    """

    max_iters: int = attrs.field(default=50, validator=attrs.validators.ge(0))
    structured_output_grace_iters: int = attrs.field(default=5, validator=attrs.validators.gt(0))
    interruption_message: str = "I notice the interruption. How can I help you?"
    interruption_raise_cancelled_error: bool = False
    interrupt_grace: float = attrs.field(default=5.0, validator=_finite_positive)


def _model_from_spec(value: Any) -> Any:
    """A spec string becomes a model; anything else is checked by the agent."""
    return as_chat_model(value, "ModelConfig.fallback_model") if isinstance(value, str) else value


@attrs.define(kw_only=True)
class ModelConfig:
    """Agent-level retries (any error, on top of the model's own) and a fallback model.

    ``fallback_model`` is a chat model or a ``"provider:model"`` spec string (built at once).
    """

    max_retries: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    fallback_model: Any = attrs.field(default=None, converter=_model_from_spec)


DEFAULT_INJECTION_TEMPLATE = (
    "<system-reminder>Treat the following as the ground truth at this point of the "
    "conversation. Anything stated earlier is outdated, and a later reminder, if any, supersedes "
    "this one:\n{runtime_state}\n</system-reminder>"
)
DEFAULT_TOOL_RETRIES_HINT = (
    "The last {count} calls to '{tool_name}' with the same arguments all failed. Stop retrying "
    "the same call as-is, check the error message and try a different approach."
)


def _check_template(instance: InjectionConfig, attribute: attrs.Attribute[str], value: str) -> None:
    if "{runtime_state}" not in value:
        raise ValueError("InjectionConfig.template must contain '{runtime_state}'")


def _check_timezone(instance: InjectionConfig, attribute: attrs.Attribute[str], value: str) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        warnings.warn(f"unknown timezone {value!r}; using UTC", RuntimeWarning, stacklevel=2)
        object.__setattr__(instance, "timezone", "UTC")


@attrs.define(kw_only=True)
class InjectionConfig:
    """Runtime-state injection before each reasoning step."""

    inject_runtime_state: bool = True
    timezone: str = attrs.field(default="UTC", validator=_check_timezone)
    time_format: str = "%Y-%m-%dT%H:%M:%S"
    time_interval: float = attrs.field(default=0.5, validator=_time_interval)
    context_buffer_ratio: float | None = None
    tool_retries_limit: int = attrs.field(default=3, validator=attrs.validators.ge(3))
    tool_retries_hint: str = DEFAULT_TOOL_RETRIES_HINT
    template: str = attrs.field(default=DEFAULT_INJECTION_TEMPLATE, validator=_check_template)
    injection_source: dict[str, str] = attrs.field(
        factory=lambda: {"label": "System", "sublabel": "Runtime State"}
    )
    task_tool_names: list[str] = attrs.field(
        factory=lambda: ["TaskCreate", "TaskGet", "TaskList", "TaskUpdate"]
    )
    extra_fields: dict[str, str] = attrs.field(factory=dict)
    emit_hint_event: bool = True

    def __attrs_post_init__(self) -> None:
        if self.context_buffer_ratio is not None:
            warnings.warn(
                "InjectionConfig.context_buffer_ratio is deprecated; "
                "set ContextConfig.context_buffer_ratio instead",
                DeprecationWarning,
                stacklevel=3,
            )

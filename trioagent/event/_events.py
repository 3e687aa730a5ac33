"""The events a reply streams: its start and end, model calls, blocks, tool calls and results,
and the input events that resume or abort a parked reply.

Events are ``@attrs.frozen`` (a middleware "replaces" one with ``attrs.evolve``).  Each class
names its wire tag in the class variable ``type`` (an :class:`EventType`), which the serializer
writes as ``"type"``.  Every event carries ``reply_id``; input events (the ones a caller sends to
resume or abort a parked reply) default it to ``""`` because the agent does not check it.
"""

from __future__ import annotations

import enum
from typing import ClassVar, TypeAlias

import attrs

from .._blocks import DataBlock, TextBlock, ToolCallBlock, ToolResultBlock, ToolResultState
from .._core.ids import generate_id, generate_timestamp
from .._core.json_types import JSONObject
from .._rules import PermissionRule
from ..types import ErrorInfo, FinishedReason, ReplyFinishedReason

__all__ = ["EVENT_CLASSES", "AgentEvent", "EventBase", "EventType"]


class EventType(enum.StrEnum):
    """The ``type`` tag of every event."""

    REPLY_START = "REPLY_START"
    REPLY_END = "REPLY_END"
    MODEL_CALL_START = "MODEL_CALL_START"
    MODEL_CALL_END = "MODEL_CALL_END"
    TEXT_BLOCK_START = "TEXT_BLOCK_START"
    TEXT_BLOCK_DELTA = "TEXT_BLOCK_DELTA"
    TEXT_BLOCK_END = "TEXT_BLOCK_END"
    THINKING_BLOCK_START = "THINKING_BLOCK_START"
    THINKING_BLOCK_DELTA = "THINKING_BLOCK_DELTA"
    THINKING_BLOCK_END = "THINKING_BLOCK_END"
    DATA_BLOCK_START = "DATA_BLOCK_START"
    DATA_BLOCK_DELTA = "DATA_BLOCK_DELTA"
    DATA_BLOCK_END = "DATA_BLOCK_END"
    HINT_BLOCK = "HINT_BLOCK"
    TOOL_CALL_START = "TOOL_CALL_START"
    TOOL_CALL_DELTA = "TOOL_CALL_DELTA"
    TOOL_CALL_END = "TOOL_CALL_END"
    TOOL_RESULT_START = "TOOL_RESULT_START"
    TOOL_RESULT_TEXT_DELTA = "TOOL_RESULT_TEXT_DELTA"
    TOOL_RESULT_DATA_DELTA = "TOOL_RESULT_DATA_DELTA"
    TOOL_RESULT_END = "TOOL_RESULT_END"
    EXCEED_MAX_ITERS = "EXCEED_MAX_ITERS"
    REQUIRE_USER_CONFIRM = "REQUIRE_USER_CONFIRM"
    REQUIRE_EXTERNAL_EXECUTION = "REQUIRE_EXTERNAL_EXECUTION"
    USER_CONFIRM_RESULT = "USER_CONFIRM_RESULT"
    EXTERNAL_EXECUTION_RESULT = "EXTERNAL_EXECUTION_RESULT"
    USER_INTERRUPT = "USER_INTERRUPT"
    CUSTOM = "CUSTOM"


@attrs.frozen(kw_only=True)
class EventBase:
    """Fields every event has: a generated ``id`` and ``created_at``, and free ``metadata``."""

    type: ClassVar[EventType]
    id: str = attrs.field(factory=generate_id)
    created_at: str = attrs.field(factory=generate_timestamp)
    metadata: JSONObject = attrs.field(factory=dict)


def _one_of_data_or_url(instance: DataBlockDeltaEvent | ToolResultDataDeltaEvent) -> None:
    if (instance.data is None) == (instance.url is None):
        raise ValueError(f"{type(instance).__name__} needs exactly one of data and url")


@attrs.frozen(kw_only=True)
class ReplyStartEvent(EventBase):
    """A reply began (not emitted again when a parked reply resumes)."""

    type: ClassVar[EventType] = EventType.REPLY_START
    session_id: str
    reply_id: str
    name: str
    role: str = "assistant"


@attrs.frozen(kw_only=True)
class ReplyEndEvent(EventBase):
    """A reply ended; exactly one per reply id, always its last event."""

    type: ClassVar[EventType] = EventType.REPLY_END
    session_id: str
    reply_id: str
    finished_reason: ReplyFinishedReason = attrs.field(
        default=ReplyFinishedReason.COMPLETED, converter=ReplyFinishedReason
    )
    error: ErrorInfo | None = None


@attrs.frozen(kw_only=True)
class ModelCallStartEvent(EventBase):
    type: ClassVar[EventType] = EventType.MODEL_CALL_START
    reply_id: str
    model_name: str


@attrs.frozen(kw_only=True)
class ModelCallEndEvent(EventBase):
    type: ClassVar[EventType] = EventType.MODEL_CALL_END
    reply_id: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    finished_reason: FinishedReason = attrs.field(
        default=FinishedReason.COMPLETED, converter=FinishedReason
    )


@attrs.frozen(kw_only=True)
class TextBlockStartEvent(EventBase):
    type: ClassVar[EventType] = EventType.TEXT_BLOCK_START
    reply_id: str
    block_id: str


@attrs.frozen(kw_only=True)
class TextBlockDeltaEvent(EventBase):
    type: ClassVar[EventType] = EventType.TEXT_BLOCK_DELTA
    reply_id: str
    block_id: str
    delta: str


@attrs.frozen(kw_only=True)
class TextBlockEndEvent(EventBase):
    """End of a text block; ``text``, when set, replaces the streamed text (a cut voice reply)."""

    type: ClassVar[EventType] = EventType.TEXT_BLOCK_END
    reply_id: str
    block_id: str
    text: str | None = None


@attrs.frozen(kw_only=True)
class ThinkingBlockStartEvent(EventBase):
    type: ClassVar[EventType] = EventType.THINKING_BLOCK_START
    reply_id: str
    block_id: str


@attrs.frozen(kw_only=True)
class ThinkingBlockDeltaEvent(EventBase):
    type: ClassVar[EventType] = EventType.THINKING_BLOCK_DELTA
    reply_id: str
    block_id: str
    delta: str


@attrs.frozen(kw_only=True)
class ThinkingBlockEndEvent(EventBase):
    type: ClassVar[EventType] = EventType.THINKING_BLOCK_END
    reply_id: str
    block_id: str


@attrs.frozen(kw_only=True)
class DataBlockStartEvent(EventBase):
    type: ClassVar[EventType] = EventType.DATA_BLOCK_START
    reply_id: str
    block_id: str
    media_type: str
    name: str | None = None


@attrs.frozen(kw_only=True)
class DataBlockDeltaEvent(EventBase):
    """A piece of a data block: base64 ``data`` to append, or a ``url`` replacing the source."""

    type: ClassVar[EventType] = EventType.DATA_BLOCK_DELTA
    reply_id: str
    block_id: str
    media_type: str
    data: str | None = None
    url: str | None = None

    def __attrs_post_init__(self) -> None:
        _one_of_data_or_url(self)


@attrs.frozen(kw_only=True)
class DataBlockEndEvent(EventBase):
    type: ClassVar[EventType] = EventType.DATA_BLOCK_END
    reply_id: str
    block_id: str


@attrs.frozen(kw_only=True)
class HintBlockEvent(EventBase):
    """A whole hint block (hints are not streamed)."""

    type: ClassVar[EventType] = EventType.HINT_BLOCK
    reply_id: str
    block_id: str
    source: str | None = None
    hint: str | list[TextBlock | DataBlock]


@attrs.frozen(kw_only=True)
class ToolCallStartEvent(EventBase):
    type: ClassVar[EventType] = EventType.TOOL_CALL_START
    reply_id: str
    tool_call_id: str
    tool_call_name: str


@attrs.frozen(kw_only=True)
class ToolCallDeltaEvent(EventBase):
    """A fragment of a tool call's JSON arguments."""

    type: ClassVar[EventType] = EventType.TOOL_CALL_DELTA
    reply_id: str
    tool_call_id: str
    delta: str


@attrs.frozen(kw_only=True)
class ToolCallEndEvent(EventBase):
    type: ClassVar[EventType] = EventType.TOOL_CALL_END
    reply_id: str
    tool_call_id: str


@attrs.frozen(kw_only=True)
class ToolResultStartEvent(EventBase):
    type: ClassVar[EventType] = EventType.TOOL_RESULT_START
    reply_id: str
    tool_call_id: str
    tool_call_name: str


@attrs.frozen(kw_only=True)
class ToolResultTextDeltaEvent(EventBase):
    type: ClassVar[EventType] = EventType.TOOL_RESULT_TEXT_DELTA
    reply_id: str
    tool_call_id: str
    delta: str


@attrs.frozen(kw_only=True)
class ToolResultDataDeltaEvent(EventBase):
    type: ClassVar[EventType] = EventType.TOOL_RESULT_DATA_DELTA
    reply_id: str
    tool_call_id: str
    block_id: str = attrs.field(factory=generate_id)
    media_type: str
    data: str | None = None
    url: str | None = None

    def __attrs_post_init__(self) -> None:
        _one_of_data_or_url(self)


@attrs.frozen(kw_only=True)
class ToolResultEndEvent(EventBase):
    """A tool result is complete; ``metadata`` is the result's metadata."""

    type: ClassVar[EventType] = EventType.TOOL_RESULT_END
    reply_id: str
    tool_call_id: str
    state: ToolResultState = attrs.field(converter=ToolResultState)


@attrs.frozen(kw_only=True)
class ExceedMaxItersEvent(EventBase):
    """The reply ran out of iterations (kept for AgentScope parity; the end event says it too)."""

    type: ClassVar[EventType] = EventType.EXCEED_MAX_ITERS
    reply_id: str
    name: str


@attrs.frozen(kw_only=True)
class RequireUserConfirmEvent(EventBase):
    """The reply parked: these calls (state ``asking``) need the user's confirmation."""

    type: ClassVar[EventType] = EventType.REQUIRE_USER_CONFIRM
    reply_id: str
    tool_calls: list[ToolCallBlock]


@attrs.frozen(kw_only=True)
class RequireExternalExecutionEvent(EventBase):
    """The reply parked: these calls (state ``submitted``) must be executed by the caller."""

    type: ClassVar[EventType] = EventType.REQUIRE_EXTERNAL_EXECUTION
    reply_id: str
    tool_calls: list[ToolCallBlock]


@attrs.frozen(kw_only=True)
class ConfirmResult:
    """The user's answer for one call; ``rules`` are permission rules to remember."""

    confirmed: bool
    tool_call: ToolCallBlock
    rules: list[PermissionRule] | None = None


@attrs.frozen(kw_only=True)
class UserConfirmResultEvent(EventBase):
    """Input: resume a parked reply with the user's confirmations."""

    type: ClassVar[EventType] = EventType.USER_CONFIRM_RESULT
    reply_id: str = ""
    confirm_results: list[ConfirmResult]


@attrs.frozen(kw_only=True)
class ExternalExecutionResultEvent(EventBase):
    """Input: resume a parked reply with the results of externally executed calls."""

    type: ClassVar[EventType] = EventType.EXTERNAL_EXECUTION_RESULT
    reply_id: str = ""
    execution_results: list[ToolResultBlock]


@attrs.frozen(kw_only=True)
class UserInterruptEvent(EventBase):
    """Input: abort a parked reply."""

    type: ClassVar[EventType] = EventType.USER_INTERRUPT
    reply_id: str = ""


@attrs.frozen(kw_only=True)
class CustomEvent(EventBase):
    """An application-defined event (``mcp_progress``, ``state_updated``, ...)."""

    type: ClassVar[EventType] = EventType.CUSTOM
    reply_id: str
    name: str
    value: JSONObject = attrs.field(factory=dict)


AgentEvent: TypeAlias = (
    ReplyStartEvent
    | ReplyEndEvent
    | ModelCallStartEvent
    | ModelCallEndEvent
    | TextBlockStartEvent
    | TextBlockDeltaEvent
    | TextBlockEndEvent
    | ThinkingBlockStartEvent
    | ThinkingBlockDeltaEvent
    | ThinkingBlockEndEvent
    | DataBlockStartEvent
    | DataBlockDeltaEvent
    | DataBlockEndEvent
    | HintBlockEvent
    | ToolCallStartEvent
    | ToolCallDeltaEvent
    | ToolCallEndEvent
    | ToolResultStartEvent
    | ToolResultTextDeltaEvent
    | ToolResultDataDeltaEvent
    | ToolResultEndEvent
    | ExceedMaxItersEvent
    | RequireUserConfirmEvent
    | RequireExternalExecutionEvent
    | UserConfirmResultEvent
    | ExternalExecutionResultEvent
    | UserInterruptEvent
    | CustomEvent
)

#: Every concrete event class, in ``EventType`` order.
EVENT_CLASSES: tuple[type[EventBase], ...] = AgentEvent.__args__

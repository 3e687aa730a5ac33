"""Event classes: defaults, frozenness, tags, converters, validators."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import attrs
import pytest

from trioagent._rules import PermissionBehavior, PermissionRule
from trioagent.event import (
    EVENT_CLASSES,
    AgentEvent,
    ConfirmResult,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    EventBase,
    EventType,
    ExceedMaxItersEvent,
    ExternalExecutionResultEvent,
    HintBlockEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ReplyEndEvent,
    ReplyStartEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from trioagent.message import ToolCallBlock, ToolResultBlock, ToolResultState
from trioagent.types import ErrorInfo, ErrorType, FinishedReason, ReplyFinishedReason

HEX32 = re.compile(r"^[0-9a-f]{32}$")

#: The required arguments of every event class (everything else has a default).
REQUIRED: dict[type, dict[str, Any]] = {
    ReplyStartEvent: {"session_id": "s", "reply_id": "r", "name": "agent"},
    ReplyEndEvent: {"session_id": "s", "reply_id": "r"},
    ModelCallStartEvent: {"reply_id": "r", "model_name": "m"},
    ModelCallEndEvent: {"reply_id": "r"},
    TextBlockStartEvent: {"reply_id": "r", "block_id": "b"},
    TextBlockDeltaEvent: {"reply_id": "r", "block_id": "b", "delta": "d"},
    TextBlockEndEvent: {"reply_id": "r", "block_id": "b"},
    ThinkingBlockStartEvent: {"reply_id": "r", "block_id": "b"},
    ThinkingBlockDeltaEvent: {"reply_id": "r", "block_id": "b", "delta": "d"},
    ThinkingBlockEndEvent: {"reply_id": "r", "block_id": "b"},
    DataBlockStartEvent: {"reply_id": "r", "block_id": "b", "media_type": "image/png"},
    DataBlockDeltaEvent: {"reply_id": "r", "block_id": "b", "media_type": "x", "data": "AA=="},
    DataBlockEndEvent: {"reply_id": "r", "block_id": "b"},
    HintBlockEvent: {"reply_id": "r", "block_id": "b", "hint": "h"},
    ToolCallStartEvent: {"reply_id": "r", "tool_call_id": "c", "tool_call_name": "f"},
    ToolCallDeltaEvent: {"reply_id": "r", "tool_call_id": "c", "delta": "{"},
    ToolCallEndEvent: {"reply_id": "r", "tool_call_id": "c"},
    ToolResultStartEvent: {"reply_id": "r", "tool_call_id": "c", "tool_call_name": "f"},
    ToolResultTextDeltaEvent: {"reply_id": "r", "tool_call_id": "c", "delta": "x"},
    ToolResultDataDeltaEvent: {"reply_id": "r", "tool_call_id": "c", "media_type": "x", "url": "u"},
    ToolResultEndEvent: {"reply_id": "r", "tool_call_id": "c", "state": "success"},
    ExceedMaxItersEvent: {"reply_id": "r", "name": "agent"},
    RequireUserConfirmEvent: {"reply_id": "r", "tool_calls": []},
    RequireExternalExecutionEvent: {"reply_id": "r", "tool_calls": []},
    UserConfirmResultEvent: {"confirm_results": []},
    ExternalExecutionResultEvent: {"execution_results": []},
    UserInterruptEvent: {},
    CustomEvent: {"reply_id": "r", "name": "state_updated"},
}
INPUT_EVENTS = (UserConfirmResultEvent, ExternalExecutionResultEvent, UserInterruptEvent)
#: Fields of the data-delta events that have to be present exactly once.
ONE_OF = ("data", "url")


def make(cls: type[Any]) -> Any:
    return cls(**REQUIRED[cls])


def test_required_table_covers_every_event_class() -> None:
    assert set(REQUIRED) == set(EVENT_CLASSES)


def test_event_classes_match_event_types_one_to_one() -> None:
    assert [cls.type for cls in EVENT_CLASSES] == list(EventType)
    assert set(AgentEvent.__args__) == set(EVENT_CLASSES)


def test_event_type_values_are_their_names() -> None:
    for member in EventType:
        assert member.value == member.name
        assert member == member.name  # a StrEnum compares equal to its string
    assert len(EventType) == 28
    assert EventType("REPLY_START") is EventType.REPLY_START
    with pytest.raises(ValueError, match="reply_start"):
        EventType("reply_start")


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__name__)
def test_event_constructs_with_defaults(cls: type[Any]) -> None:
    event: Any = make(cls)
    assert isinstance(event.reply_id, str)
    assert isinstance(event, EventBase)
    assert HEX32.match(event.id)
    assert datetime.fromisoformat(event.created_at).tzinfo is None
    assert event.metadata == {}
    assert make(cls).id != event.id
    assert make(cls).metadata is not event.metadata
    assert event.type is cls.type


@pytest.mark.parametrize(
    "cls", [c for c in EVENT_CLASSES if c not in INPUT_EVENTS], ids=lambda c: c.__name__
)
def test_reply_id_is_required_on_output_events(cls: type) -> None:
    kwargs = dict(REQUIRED[cls])
    del kwargs["reply_id"]
    with pytest.raises(TypeError, match="reply_id"):
        cls(**kwargs)


@pytest.mark.parametrize("cls", INPUT_EVENTS, ids=lambda c: c.__name__)
def test_input_events_default_reply_id_to_empty(cls: type) -> None:
    assert make(cls).reply_id == ""
    assert cls(**REQUIRED[cls], reply_id="r9").reply_id == "r9"


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__name__)
def test_events_are_frozen(cls: type) -> None:
    event = make(cls)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.reply_id = "other"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.id = "other"
    evolved = attrs.evolve(event, metadata={"k": 1})
    assert evolved.metadata == {"k": 1}
    assert event.metadata == {}


def test_events_compare_by_value() -> None:
    a = TextBlockDeltaEvent(id="e", created_at="t", reply_id="r", block_id="b", delta="x")
    b = TextBlockDeltaEvent(id="e", created_at="t", reply_id="r", block_id="b", delta="x")
    assert a == b
    other: object = TextBlockEndEvent(id="e", created_at="t", reply_id="r", block_id="b")
    assert a != other
    assert a != attrs.evolve(b, delta="y")


def test_specific_defaults() -> None:
    assert make(ReplyStartEvent).role == "assistant"
    end = make(ReplyEndEvent)
    assert end.finished_reason is ReplyFinishedReason.COMPLETED
    assert end.error is None
    usage = make(ModelCallEndEvent)
    assert (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_input_tokens,
        usage.cache_creation_input_tokens,
    ) == (0, 0, 0, 0)
    assert usage.finished_reason is FinishedReason.COMPLETED
    assert make(TextBlockEndEvent).text is None
    assert make(DataBlockStartEvent).name is None
    assert make(HintBlockEvent).source is None
    assert make(CustomEvent).value == {}
    first, second = make(ToolResultDataDeltaEvent), make(ToolResultDataDeltaEvent)
    assert HEX32.match(first.block_id)
    assert first.block_id != second.block_id


def test_reply_end_converts_finished_reason() -> None:
    event = ReplyEndEvent(session_id="s", reply_id="r", finished_reason="interrupted")
    assert event.finished_reason is ReplyFinishedReason.INTERRUPTED
    event = ReplyEndEvent(
        session_id="s", reply_id="r", finished_reason="error", error=ErrorInfo(message="x")
    )
    assert event.finished_reason is ReplyFinishedReason.ERROR
    assert event.error == ErrorInfo(type=ErrorType.UNKNOWN, message="x")
    with pytest.raises(ValueError, match="bored"):
        ReplyEndEvent(session_id="s", reply_id="r", finished_reason="bored")


def test_model_call_end_converts_finished_reason() -> None:
    event = ModelCallEndEvent(reply_id="r", finished_reason="interrupted")
    assert event.finished_reason is FinishedReason.INTERRUPTED
    with pytest.raises(ValueError, match="exceed_max_iters"):
        ModelCallEndEvent(reply_id="r", finished_reason="exceed_max_iters")


def test_tool_result_end_converts_state_and_carries_metadata() -> None:
    event = ToolResultEndEvent(reply_id="r", tool_call_id="c", state="denied", metadata={"a": 1})
    assert event.state is ToolResultState.DENIED
    assert event.metadata == {"a": 1}
    with pytest.raises(ValueError, match="fine"):
        ToolResultEndEvent(reply_id="r", tool_call_id="c", state="fine")
    with pytest.raises(TypeError):
        ToolResultEndEvent(reply_id="r", tool_call_id="c")  # type: ignore[call-arg]


@pytest.mark.parametrize("cls", [DataBlockDeltaEvent, ToolResultDataDeltaEvent])
@pytest.mark.parametrize(
    ("given", "ok"),
    [
        ({"data": "AA=="}, True),
        ({"url": "https://x"}, True),
        ({}, False),
        (dict.fromkeys(ONE_OF, "x"), False),
    ],
)
def test_data_deltas_need_exactly_one_of_data_and_url(
    cls: type, given: dict[str, str], ok: bool
) -> None:
    base = {k: v for k, v in REQUIRED[cls].items() if k not in ONE_OF}
    if ok:
        event = cls(**base, **given)
        assert [getattr(event, k) is not None for k in ONE_OF] == [k in given for k in ONE_OF]
    else:
        with pytest.raises(ValueError, match="exactly one of data and url"):
            cls(**base, **given)


def test_data_delta_empty_string_counts_as_given() -> None:
    event = DataBlockDeltaEvent(reply_id="r", block_id="b", media_type="x", data="")
    assert event.data == ""
    with pytest.raises(ValueError, match="exactly one"):
        DataBlockDeltaEvent(reply_id="r", block_id="b", media_type="x", data="", url="")


def test_hitl_events_carry_blocks() -> None:
    rule = PermissionRule(tool_name="f", behavior="allow")
    assert rule.behavior is PermissionBehavior.ALLOW
    call = ToolCallBlock(id="c", name="f", state="asking", suggested_rules=[rule])
    ask = RequireUserConfirmEvent(reply_id="r", tool_calls=[call])
    assert ask.tool_calls[0].suggested_rules == [rule]
    confirm = ConfirmResult(confirmed=True, tool_call=call)
    assert confirm.rules is None
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        confirm.confirmed = False  # type: ignore[misc]
    result = ExternalExecutionResultEvent(
        execution_results=[ToolResultBlock(id="c", name="f", output="ok")]
    )
    assert result.execution_results[0].output == "ok"


def test_permission_rule_defaults_and_validation() -> None:
    rule = PermissionRule(tool_name="f", behavior="deny")
    assert (rule.rule_content, rule.source) == (None, "session")
    with pytest.raises(ValueError, match="maybe"):
        PermissionRule(tool_name="f", behavior="maybe")
    assert [b.value for b in PermissionBehavior] == ["allow", "deny", "ask", "passthrough"]


def test_event_type_is_a_class_variable_not_a_field() -> None:
    names = {f.name for f in attrs.fields(ReplyEndEvent)}
    assert "type" not in names
    with pytest.raises(TypeError):
        ReplyEndEvent(session_id="s", reply_id="r", type="REPLY_START")  # type: ignore[call-arg]

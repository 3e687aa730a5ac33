"""The public import paths of the data model exist (tests outside the repo use them)."""

from __future__ import annotations

import enum
import importlib
import types as pytypes
import typing

import attrs
import pytest

# Imported by name on purpose: an ImportError here is the failure this module guards against.
from trioagent.event import (
    AgentEvent,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
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
from trioagent.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    SystemMsg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
    URLSource,
    Usage,
    UserMsg,
)
from trioagent.types import ErrorInfo, ErrorType, FinishedReason, ReplyFinishedReason

#: The public names, module by module, in the documented order.
CONTRACT: dict[str, list[str]] = {
    "trioagent.message": [
        "Msg",
        "UserMsg",
        "AssistantMsg",
        "SystemMsg",
        "TextBlock",
        "ThinkingBlock",
        "HintBlock",
        "DataBlock",
        "Base64Source",
        "URLSource",
        "ToolCallBlock",
        "ToolResultBlock",
        "ToolCallState",
        "ToolResultState",
        "Usage",
    ],
    "trioagent.event": [
        "EventType",
        "AgentEvent",
        "ReplyStartEvent",
        "ReplyEndEvent",
        "ModelCallStartEvent",
        "ModelCallEndEvent",
        "TextBlockStartEvent",
        "TextBlockDeltaEvent",
        "TextBlockEndEvent",
        "ThinkingBlockStartEvent",
        "ThinkingBlockDeltaEvent",
        "ThinkingBlockEndEvent",
        "DataBlockStartEvent",
        "DataBlockDeltaEvent",
        "DataBlockEndEvent",
        "HintBlockEvent",
        "ToolCallStartEvent",
        "ToolCallDeltaEvent",
        "ToolCallEndEvent",
        "ToolResultStartEvent",
        "ToolResultTextDeltaEvent",
        "ToolResultDataDeltaEvent",
        "ToolResultEndEvent",
        "ExceedMaxItersEvent",
        "RequireUserConfirmEvent",
        "RequireExternalExecutionEvent",
        "UserConfirmResultEvent",
        "ExternalExecutionResultEvent",
        "UserInterruptEvent",
        "CustomEvent",
    ],
    "trioagent.types": ["ReplyFinishedReason", "ErrorInfo", "ErrorType", "FinishedReason"],
}
ENUMS = {EventType, ToolCallState, ToolResultState, ReplyFinishedReason, ErrorType, FinishedReason}
FACTORIES = {UserMsg, AssistantMsg, SystemMsg}
UNIONS = {AgentEvent}


@pytest.mark.parametrize(
    ("module", "name"),
    [(module, name) for module, names in CONTRACT.items() for name in names],
)
def test_contract_name_exists_and_is_exported(module: str, name: str) -> None:
    mod = importlib.import_module(module)
    obj = getattr(mod, name)
    assert name in mod.__all__
    if obj in ENUMS:
        assert issubclass(obj, enum.Enum)
    elif obj in FACTORIES:
        assert callable(obj)
    elif obj in UNIONS:
        assert isinstance(obj, pytypes.UnionType) or typing.get_origin(obj) is typing.Union
    else:
        assert attrs.has(obj), f"{module}.{name} is not an attrs class"


def test_imported_names_are_the_contract_objects() -> None:
    message = importlib.import_module("trioagent.message")
    event = importlib.import_module("trioagent.event")
    assert message.Msg is Msg
    assert message.Usage is Usage
    assert event.AgentEvent is AgentEvent
    imported = {
        Msg, UserMsg, AssistantMsg, SystemMsg, TextBlock, ThinkingBlock, HintBlock, DataBlock,
        Base64Source, URLSource, ToolCallBlock, ToolResultBlock, ToolCallState, ToolResultState,
        Usage, ErrorInfo, ErrorType, FinishedReason, ReplyFinishedReason, EventType,
        ReplyStartEvent, ReplyEndEvent, ModelCallStartEvent, ModelCallEndEvent,
        TextBlockStartEvent, TextBlockDeltaEvent, TextBlockEndEvent, ThinkingBlockStartEvent,
        ThinkingBlockDeltaEvent, ThinkingBlockEndEvent, DataBlockStartEvent, DataBlockDeltaEvent,
        DataBlockEndEvent, HintBlockEvent, ToolCallStartEvent, ToolCallDeltaEvent,
        ToolCallEndEvent, ToolResultStartEvent, ToolResultTextDeltaEvent,
        ToolResultDataDeltaEvent, ToolResultEndEvent, ExceedMaxItersEvent,
        RequireUserConfirmEvent, RequireExternalExecutionEvent, UserConfirmResultEvent,
        ExternalExecutionResultEvent, UserInterruptEvent, CustomEvent,
    }  # fmt: skip
    assert len(imported) == sum(len(names) for names in CONTRACT.values()) - 1  # AgentEvent


def test_agent_event_union_lists_every_contract_event() -> None:
    events = {n for n in CONTRACT["trioagent.event"] if n.endswith("Event")} - {"AgentEvent"}
    assert {cls.__name__ for cls in typing.get_args(AgentEvent)} == events


def test_top_level_message_names() -> None:
    import trioagent

    assert trioagent.Msg is Msg
    assert trioagent.UserMsg is UserMsg
    assert trioagent.AssistantMsg is AssistantMsg
    assert trioagent.SystemMsg is SystemMsg
    assert isinstance(trioagent.__version__, str)

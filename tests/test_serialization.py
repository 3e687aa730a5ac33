"""JSON round trips and malformed-input handling of ``trioagent.serialization``."""

from __future__ import annotations

import copy
import enum
import json
from typing import Any

import attrs
import pytest
import strategies as S
from cattrs.preconf.json import make_converter
from hypothesis import HealthCheck, given, settings, strategies as st

from trioagent.event import (
    EVENT_CLASSES,
    AgentEvent,
    CustomEvent,
    DataBlockDeltaEvent,
    EventType,
    ModelCallEndEvent,
    ReplyEndEvent,
    TextBlockDeltaEvent,
    ToolResultEndEvent,
)
from trioagent.message import (
    Base64Source,
    ContentBlock,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    URLSource,
    Usage,
)
from trioagent.serialization import SerializationError, dumps, loads, structure, unstructure
from trioagent.types import ErrorInfo, ErrorType, ReplyFinishedReason

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: The wire tags AgentScope uses for the blocks.
BLOCK_TAGS: dict[type, str] = {
    TextBlock: "text",
    ThinkingBlock: "thinking",
    HintBlock: "hint",
    DataBlock: "data",
    ToolCallBlock: "tool_call",
    ToolResultBlock: "tool_result",
}
SOURCE_TAGS: dict[type, str] = {Base64Source: "base64", URLSource: "url"}


def check_nested_tags(block: Any, data: dict[str, Any]) -> None:
    """Every union member inside a block's JSON carries its AgentScope tag."""
    assert data["type"] == BLOCK_TAGS[type(block)]
    if isinstance(block, DataBlock):
        assert data["source"]["type"] == SOURCE_TAGS[type(block.source)]
    inner = None
    if isinstance(block, HintBlock):
        inner = (block.hint, data["hint"])
    elif isinstance(block, ToolResultBlock):
        inner = (block.output, data["output"])
    if inner is not None and isinstance(inner[0], list):
        for sub, sub_data in zip(*inner, strict=True):
            check_nested_tags(sub, sub_data)


# -- round trips -----------------------------------------------------------------------------


def test_block_strategies_cover_every_block_type() -> None:
    assert set(S.BLOCK_STRATEGIES) == set(BLOCK_TAGS)


def test_event_strategies_cover_every_event_class() -> None:
    assert set(S.EVENT_STRATEGIES) == set(EVENT_CLASSES)


@pytest.mark.parametrize("cls", list(BLOCK_TAGS), ids=lambda c: c.__name__)
def test_block_class_tag_matches_agentscope(cls: type) -> None:
    assert cls.type == BLOCK_TAGS[cls]  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", list(BLOCK_TAGS), ids=lambda c: c.__name__)
@PROPERTY
@given(data=st.data())
def test_block_round_trips_alone_and_as_content_block(cls: type, data: st.DataObject) -> None:
    block = data.draw(S.BLOCK_STRATEGIES[cls])
    payload = dumps(block)
    check_nested_tags(block, json.loads(payload))
    assert loads(payload, cls) == block
    again = loads(payload, ContentBlock)
    assert type(again) is cls
    assert again == block
    assert dumps(block, ContentBlock) == payload


@PROPERTY
@given(source=S.sources)
def test_source_round_trips_with_tag(source: Base64Source | URLSource) -> None:
    payload = dumps(source)
    assert json.loads(payload)["type"] == SOURCE_TAGS[type(source)]
    assert loads(payload, Base64Source | URLSource) == source


@PROPERTY
@given(msg=S.msgs())
def test_msg_round_trips(msg: Msg) -> None:
    payload = dumps(msg)
    data = json.loads(payload)
    for block, block_data in zip(msg.content, data["content"], strict=True):
        check_nested_tags(block, block_data)
    assert "type" not in data  # Msg is not a union member
    again = loads(payload, Msg)
    assert again == msg
    assert again.finished_reason is None or isinstance(again.finished_reason, ReplyFinishedReason)


@PROPERTY
@given(msgs=st.lists(S.msgs(), max_size=3))
def test_list_of_msgs_round_trips(msgs: list[Msg]) -> None:
    assert loads(dumps(msgs, list[Msg]), list[Msg]) == msgs


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__name__)
@PROPERTY
@given(data=st.data())
def test_event_round_trips_alone_and_as_agent_event(cls: type, data: st.DataObject) -> None:
    event = data.draw(S.EVENT_STRATEGIES[cls])
    payload = dumps(event)
    assert json.loads(payload)["type"] == cls.type.value  # type: ignore[attr-defined]
    assert loads(payload, cls) == event
    again = loads(payload, AgentEvent)
    assert type(again) is cls
    assert again == event
    assert dumps(event, AgentEvent) == payload


@PROPERTY
@given(events=st.lists(S.agent_events, max_size=6))
def test_event_list_round_trips(events: list[Any]) -> None:
    payload = dumps(events, list[AgentEvent])
    tags = [item["type"] for item in json.loads(payload)]
    assert tags == [e.type.value for e in events]
    assert loads(payload, list[AgentEvent]) == events


def test_event_tags_are_event_type_values() -> None:
    seen = set()
    for cls in EVENT_CLASSES:
        assert isinstance(cls.type, EventType)
        seen.add(cls.type.value)
    assert seen == {member.value for member in EventType}
    event = ReplyEndEvent(session_id="s", reply_id="r", finished_reason="interrupted")
    data = json.loads(dumps(event))
    assert data["type"] == "REPLY_END"
    assert data["finished_reason"] == "interrupted"


@PROPERTY
@given(usage=S.usages, error=S.error_infos)
def test_usage_and_error_info_round_trip(usage: Usage, error: ErrorInfo) -> None:
    assert loads(dumps(usage), Usage) == usage
    again = loads(dumps(error), ErrorInfo)
    assert again == error
    assert isinstance(again.type, ErrorType)


@PROPERTY
@given(msg=S.msgs())
def test_structure_does_not_mutate_input(msg: Msg) -> None:
    data = unstructure(msg)
    before = copy.deepcopy(data)
    assert structure(data, Msg) == msg
    assert data == before


@PROPERTY
@given(events=st.lists(S.agent_events, min_size=1, max_size=4))
def test_structure_of_events_does_not_mutate_input(events: list[Any]) -> None:
    data = unstructure(events, list[AgentEvent])
    before = copy.deepcopy(data)
    assert structure(data, list[AgentEvent]) == events
    assert data == before


def test_thinking_extra_fields_survive() -> None:
    block = ThinkingBlock(thinking="", extra={"signature": "sig", "redacted": {"data": "x"}})
    again = loads(dumps(block), ContentBlock)
    assert isinstance(again, ThinkingBlock)
    assert again.extra == {"signature": "sig", "redacted": {"data": "x"}}


# -- malformed input -------------------------------------------------------------------------


def _msg_dict() -> dict[str, Any]:
    msg = Msg(
        "bot",
        [
            TextBlock(text="hi"),
            DataBlock(source=URLSource(url="https://x/a.png", media_type="image/png")),
            ToolCallBlock(id="c1", name="search", input='{"q": 1}'),
            ToolResultBlock(id="c1", name="search", output=[TextBlock(text="ok")]),
        ],
        "assistant",
    )
    data: dict[str, Any] = unstructure(msg)
    return data


def _load_error(data: Any, as_type: Any = Msg) -> SerializationError:
    before = copy.deepcopy(data)
    with pytest.raises(SerializationError) as info:
        structure(data, as_type)
    assert data == before, "structure() mutated its input"
    return info.value


def test_serialization_error_is_a_value_error_with_errors_list() -> None:
    data = _msg_dict()
    del data["role"]
    error = _load_error(data)
    assert isinstance(error, ValueError)
    assert error.errors
    assert all("@ $" in line for line in error.errors)


def test_missing_field_names_its_path() -> None:
    data = _msg_dict()
    del data["content"][0]["text"]
    assert "$.content[0].text" in str(_load_error(data))


def test_missing_top_level_field() -> None:
    data = _msg_dict()
    del data["name"]
    assert "$.name" in str(_load_error(data))


def test_wrong_scalar_type_names_its_path() -> None:
    data = _msg_dict()
    data["content"][0]["text"] = 5
    message = str(_load_error(data))
    assert "$.content[0].text" in message
    assert "str" in message


@pytest.mark.parametrize(
    ("field", "value"),
    [("input_tokens", "3"), ("input_tokens", True), ("input_tokens", 1.5)],
)
def test_ints_are_not_coerced(field: str, value: Any) -> None:
    data = unstructure(Usage())
    data[field] = value
    assert f"$.{field}" in str(_load_error(data, Usage))


def test_bool_is_not_coerced_from_int() -> None:
    data = {"confirmed": 1, "tool_call": unstructure(ToolCallBlock(id="c", name="n"))}
    from trioagent.event import ConfirmResult

    assert "$.confirmed" in str(_load_error(data, ConfirmResult))


def test_unknown_block_tag_names_its_path() -> None:
    data = _msg_dict()
    data["content"][1]["type"] = "video"
    message = str(_load_error(data))
    assert "$.content[1]" in message
    assert "'video'" in message


def test_missing_block_tag_is_an_error() -> None:
    data = _msg_dict()
    del data["content"][0]["type"]
    assert "$.content[0]" in str(_load_error(data))


def test_unknown_source_tag_names_its_path() -> None:
    data = _msg_dict()
    data["content"][1]["source"]["type"] = "s3"
    assert "$.content[1].source" in str(_load_error(data))


def test_unknown_event_tag() -> None:
    data = unstructure(TextBlockDeltaEvent(reply_id="r", block_id="b", delta="x"))
    data["type"] = "TEXT_BLOCK_SHOUT"
    assert "TEXT_BLOCK_SHOUT" in str(_load_error(data, AgentEvent))


def test_tag_of_another_member_rejected_when_loading_a_class() -> None:
    data = unstructure(TextBlock(text="x"))
    data["type"] = "thinking"
    with pytest.raises(SerializationError):
        structure(data, TextBlock)


def test_extra_key_names_its_path() -> None:
    data = _msg_dict()
    data["content"][2]["arguments"] = {}
    message = str(_load_error(data))
    assert "$.content[2]" in message
    assert "arguments" in message


def test_extra_top_level_key() -> None:
    data = _msg_dict()
    data["sender"] = "x"
    assert "sender" in str(_load_error(data))


@pytest.mark.parametrize("payload", ["{", "", "not json", '{"name": "a",}', b"\xff\xfe", "[1, 2"])
def test_invalid_json(payload: str | bytes) -> None:
    with pytest.raises(SerializationError, match="invalid JSON"):
        loads(payload, Msg)


@pytest.mark.parametrize("payload", ['{"a": 1} x', "1 2", '{"a": 1}\x0b', '{"a": NaN'])
def test_trailing_data_is_invalid_json(payload: str) -> None:
    with pytest.raises(SerializationError, match="invalid JSON"):
        loads(payload, dict[str, Any])


@pytest.mark.parametrize("payload", ['{"a": 1}', ' {"a": 1}', '{"a": 1}\n', '\t{"a": 1} \r\n'])
def test_json_whitespace_around_the_value_is_accepted(payload: str) -> None:
    assert loads(payload, dict[str, Any]) == {"a": 1}
    assert loads(payload.encode(), dict[str, Any]) == {"a": 1}


def test_dumps_is_compact_utf8_text() -> None:
    block = TextBlock(text="héllo 你好", id="b", created_at="t")
    assert (
        dumps(block)
        == '{"type":"text","text":"héllo 你好","id":"b","created_at":"t","finished_at":null}'
    )


def test_integers_of_any_size_survive_a_round_trip() -> None:
    event = CustomEvent(reply_id="r", name="n", value={"big": 2**70, "neg": -(2**64) - 1})
    again = loads(dumps(event), AgentEvent)
    assert again == event
    assert again.value["big"] == 2**70  # exact, not a float


def test_non_string_keys_are_written_as_the_standard_library_does() -> None:
    event = CustomEvent(reply_id="r", name="n", value={"x": {1: "a", None: "b"}})
    assert json.loads(dumps(event))["value"] == {"x": {"1": "a", "null": "b"}}


def test_non_finite_floats_become_null() -> None:
    event = CustomEvent(reply_id="r", name="n", value={"nan": float("nan"), "inf": float("inf")})
    assert json.loads(dumps(event))["value"] == {"nan": None, "inf": None}


def test_invalid_enum_value_names_its_path() -> None:
    data = _msg_dict()
    data["finished_reason"] = "gave_up"
    message = str(_load_error(data))
    assert "$.finished_reason" in message
    assert "gave_up" in message


def test_invalid_nested_enum_value_names_its_path() -> None:
    data = _msg_dict()
    data["content"][2]["state"] = "exploded"
    assert "$.content[2].state" in str(_load_error(data))


def test_invalid_event_enum_value_names_its_path() -> None:
    data = unstructure(ToolResultEndEvent(reply_id="r", tool_call_id="c", state="success"))
    data["state"] = "meh"
    assert "$.state" in str(_load_error(data, AgentEvent))


def test_invalid_role() -> None:
    data = _msg_dict()
    data["role"] = "tool"
    assert "$.role" in str(_load_error(data))


def test_role_rule_applies_when_loading() -> None:
    data = _msg_dict()
    data["role"] = "user"  # holds a tool call
    with pytest.raises(SerializationError, match="user message"):
        structure(data, Msg)


def test_nested_bad_field_in_tool_output() -> None:
    data = _msg_dict()
    data["content"][3]["output"][0]["text"] = None
    assert "$.content[3].output[0].text" in str(_load_error(data))


def test_nested_bad_field_in_event_list() -> None:
    events = [
        TextBlockDeltaEvent(reply_id="r", block_id="b", delta="x"),
        ReplyEndEvent(session_id="s", reply_id="r", error=ErrorInfo(message="boom")),
    ]
    data = unstructure(events, list[AgentEvent])
    data[1]["error"]["message"] = 7
    assert "$[1].error.message" in str(_load_error(data, list[AgentEvent]))


def test_every_bad_field_is_reported() -> None:
    data = _msg_dict()
    data["content"][0]["text"] = 1
    data["content"][2]["name"] = 2
    message = str(_load_error(data))
    assert "$.content[0].text" in message
    assert "$.content[2].name" in message


def test_data_delta_validator_applies_when_loading() -> None:
    data = unstructure(DataBlockDeltaEvent(reply_id="r", block_id="b", media_type="x", url="u"))
    data["data"] = "AAAA"
    with pytest.raises(SerializationError, match="exactly one"):
        structure(data, AgentEvent)


@pytest.mark.parametrize("value", [None, "text", 3, [1]])
def test_non_object_where_object_expected(value: Any) -> None:
    _load_error(value, Msg)
    _load_error(value, AgentEvent)


def test_non_object_inside_content() -> None:
    data = _msg_dict()
    data["content"][0] = "hello"
    assert "$.content[0]" in str(_load_error(data))


@PROPERTY
@given(msg=S.msgs(role="assistant"), position=st.integers(min_value=0, max_value=10))
def test_bad_text_anywhere_is_reported_at_its_index(msg: Msg, position: int) -> None:
    msg.content.insert(position, TextBlock(text="x"))
    index = min(position, len(msg.content) - 1)
    data = unstructure(msg)
    data["content"][index]["text"] = ["not", "a", "str"]
    assert f"$.content[{index}].text" in str(_load_error(data))


def test_loaded_tool_call_state_is_the_enum() -> None:
    block = loads(dumps(ToolCallBlock(id="c", name="n", state="asking")), ContentBlock)
    assert isinstance(block, ToolCallBlock)
    assert block.state is ToolCallState.ASKING


@pytest.mark.parametrize(
    ("as_type", "name"),
    [
        (Msg, "Msg"),
        (AgentEvent, "AgentEvent"),
        (list[AgentEvent], "list[AgentEvent]"),
        (ContentBlock, "ContentBlock"),
        (Base64Source | URLSource, "Base64Source | URLSource"),
    ],
)
def test_error_names_the_target_type_briefly(as_type: Any, name: str) -> None:
    message = str(_load_error(3, as_type))
    assert message.startswith(f"cannot load {name}: ")
    assert "trioagent." not in message


# -- any input: built whole or refused with paths, never modified ------------------------------

TARGETS: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (AgentEvent, S.agent_events),
    (ContentBlock, S.content_blocks),
    (Msg, S.msgs()),
    (list[AgentEvent], st.lists(S.agent_events, max_size=3)),
    (list[Msg], st.lists(S.msgs(), max_size=2)),
]
#: JSON values of every kind, to put where they do not belong.
ODD_VALUES = [None, True, 0, 7, 1.5, -(2**70), "", "x", "assistant", "completed", [], [1], {}]


def objects_in(data: Any) -> list[dict[str, Any]]:
    """Every JSON object inside ``data``, outermost first."""
    if isinstance(data, dict):
        return [data, *(o for v in data.values() for o in objects_in(v))]
    if isinstance(data, list):
        return [o for v in data for o in objects_in(v)]
    return []


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_data_broken_in_one_place_is_built_whole_or_refused_with_paths(
    data: st.DataObject,
) -> None:
    target, strategy = data.draw(st.sampled_from(TARGETS))
    payload = unstructure(data.draw(strategy), target)
    objects = objects_in(payload)
    if not objects:
        return
    obj = data.draw(st.sampled_from(objects))
    keys = sorted(obj)
    change = data.draw(st.sampled_from(["drop", "replace", "extra", "retag"]))
    if change == "drop" and keys:
        del obj[data.draw(st.sampled_from(keys))]
    elif change == "replace" and keys:
        obj[data.draw(st.sampled_from(keys))] = data.draw(st.sampled_from(ODD_VALUES))
    elif change == "extra":
        obj["unexpected"] = 1
    else:
        obj["type"] = data.draw(st.sampled_from(["text", "TEXT_BLOCK_DELTA", "url", "nope", 3]))
    before = copy.deepcopy(payload)
    errors: list[str] = []
    try:
        built = structure(payload, target)
    except SerializationError as exc:
        errors = exc.errors
        assert errors
    else:
        assert structure(unstructure(built, target), target) == built
    assert all("@ $" in line for line in errors)
    assert payload == before  # input never modified


def test_an_extra_key_and_a_bad_field_of_one_object_are_both_reported() -> None:
    data = _msg_dict()
    data["content"][0]["colour"] = "red"
    data["content"][0]["text"] = 5
    message = str(_load_error(data))
    assert "colour" in message
    assert "$.content[0].text" in message


def test_a_str_subclass_becomes_a_str() -> None:
    class Colour(enum.StrEnum):
        RED = "red"

    data = {"type": "TEXT_BLOCK_DELTA", "reply_id": "r", "block_id": "b", "delta": Colour.RED}
    event = structure(data, AgentEvent)
    assert isinstance(event, TextBlockDeltaEvent)
    assert type(event.delta) is str


def test_ints_stay_ints_and_neither_bools_nor_floats_become_ints() -> None:
    base = {"type": "MODEL_CALL_END", "reply_id": "r"}
    event = structure({**base, "input_tokens": 5}, AgentEvent)
    assert isinstance(event, ModelCallEndEvent)
    assert event.input_tokens == 5
    assert "$.input_tokens" in str(_load_error({**base, "input_tokens": True}, AgentEvent))
    assert "$.input_tokens" in str(_load_error({**base, "input_tokens": 5.0}, AgentEvent))


def test_containers_are_copied_not_shared() -> None:
    metadata = {"k": [1, 2]}
    payload = {"type": "CUSTOM", "reply_id": "r", "name": "n", "metadata": metadata}
    event = structure(payload, AgentEvent)
    assert isinstance(event, CustomEvent)
    assert event.metadata == metadata
    assert event.metadata is not metadata


def test_a_list_item_that_fails_is_named_by_its_index() -> None:
    good = unstructure(TextBlockDeltaEvent(reply_id="r", block_id="b", delta="x"))
    assert "$[1]" in str(_load_error([good, {"type": "nope"}], list[AgentEvent]))
    _load_error(3, list[AgentEvent])


def test_unstructure_writes_the_tag_first_and_the_fields_as_cattrs_does() -> None:
    plain = make_converter()
    for value in [
        TextBlockDeltaEvent(reply_id="r", block_id="b", delta="d", metadata={"n": [1]}),
        ToolCallBlock(id="c", name="f", input="{}"),
        TextBlock(text="t"),
        Msg("user", [TextBlock(text="hi")], "user"),
    ]:
        ours = unstructure(value)
        if isinstance(value, Msg):
            assert list(ours) == [f.name for f in attrs.fields(Msg)]
            continue
        assert next(iter(ours)) == "type"
        assert ours["type"] == str(type(value).type)
        assert {k: v for k, v in ours.items() if k != "type"} == plain.unstructure(value)


# -- hostile payloads: every failure is a SerializationError -------------------------------------


def _msg_with_metadata(depth: int) -> dict[str, Any]:
    nested: Any = 1
    for _ in range(depth):
        nested = {"a": nested}
    data = unstructure(Msg("user", [TextBlock(text="hi")], "user"))
    assert isinstance(data, dict)
    data["metadata"] = {"deep": nested}
    return data


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param("[" * 100_000, id="open-brackets"),
        pytest.param('{"a":' * 5000 + "1" + "}" * 5000, id="deep-object"),
        pytest.param(json.dumps(_msg_with_metadata(600)), id="deep-metadata"),
        pytest.param(("[" * 100_000).encode(), id="bytes"),
    ],
)
def test_deep_nesting_is_refused_before_parsing(payload: str | bytes) -> None:
    for target in (Msg, list[AgentEvent], object):
        with pytest.raises(SerializationError, match="nested deeper than 200 levels"):
            loads(payload, target)


def test_structure_refuses_deep_plain_data_too() -> None:
    with pytest.raises(SerializationError, match=r"nested deeper than 200 levels"):
        structure(_msg_with_metadata(600), Msg)
    with pytest.raises(SerializationError, match=r"nested deeper than 200 levels"):
        structure(_msg_with_metadata(250), Msg)


def test_nesting_up_to_the_limit_loads_and_the_limit_can_be_raised() -> None:
    inside = _msg_with_metadata(190)  # 190 levels in the metadata, a few more around it
    msg = loads(json.dumps(inside), Msg)
    assert loads(dumps(msg), Msg) == msg
    deeper = json.dumps(_msg_with_metadata(300))
    with pytest.raises(SerializationError, match="max_depth"):
        loads(deeper, Msg)
    assert loads(deeper, Msg, max_depth=400).metadata == _msg_with_metadata(300)["metadata"]
    assert structure(_msg_with_metadata(300), Msg, max_depth=400).metadata["deep"]["a"]["a"]


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    msg = Msg("user", [TextBlock(text="[" * 10_000 + '\\"{' * 1000)], "user")
    assert loads(dumps(msg), Msg) == msg


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param('{"n": 1' + "0" * 10_000 + "}", id="huge-int"),
        pytest.param(b'{"n": 1' + b"0" * 10_000 + b"}", id="huge-int-bytes"),
        pytest.param(" [1" + "0" * 10_000 + "]", id="huge-int-leading-space"),
    ],
)
def test_an_integer_beyond_the_digit_limit_is_a_serialization_error(payload: str | bytes) -> None:
    with pytest.raises(SerializationError, match="digits"):
        loads(payload, object)


def test_a_float_field_given_a_huge_integer_is_a_serialization_error() -> None:
    with pytest.raises(SerializationError, match="too large"):
        structure({"x": 10**400}, dict[str, float])

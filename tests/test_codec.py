"""The compiled fast paths of ``trioagent._codec`` agree with cattrs' detailed hooks.

The library's converter puts a compiled structure hook in front of cattrs' detailed one for
every event, block and message.  These tests hold the two converters side by side: on valid
data and on data broken in one place, both must build equal objects or fail with the same
errors, so the fast path never accepts more, never loses a field and never changes a message.
"""

from __future__ import annotations

import copy
import enum
from typing import Any

import attrs
import cattrs
import strategies as S
from cattrs.preconf.json import make_converter
from hypothesis import HealthCheck, given, settings, strategies as st

from trioagent import serialization
from trioagent._codec import compile_structure, compile_unstructure, fast_list
from trioagent.event import AgentEvent, CustomEvent, ModelCallEndEvent, TextBlockDeltaEvent
from trioagent.message import ContentBlock, Msg, TextBlock, ToolCallBlock
from trioagent.serialization import converter, unstructure
from trioagent.types import set_id_factory, set_timestamp_factory

DETAILED = serialization._make(fast=False)
TARGETS: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (AgentEvent, S.agent_events),
    (ContentBlock, S.content_blocks),
    (Msg, S.msgs()),
    (list[AgentEvent], st.lists(S.agent_events, max_size=3)),
    (list[Msg], st.lists(S.msgs(), max_size=2)),
]
#: JSON values of every kind, to put where they do not belong.
ODD_VALUES = [
    None,
    True,
    0,
    7,
    1.5,
    -(2**70),
    "",
    "x",
    "assistant",
    "completed",
    [],
    [1],
    {},
    {"a": 1},
]


def outcome(conv: cattrs.Converter, data: Any, target: Any) -> tuple[Any, ...]:
    """What ``conv`` makes of ``data``: the object, or the error messages users would see.
    Missing ids and timestamps are filled in with fixed values, so results compare."""
    set_id_factory(lambda: "fixed-id")
    set_timestamp_factory(lambda: "fixed-time")
    try:
        return ("ok", conv.structure(data, target))
    except (cattrs.BaseValidationError, cattrs.ForbiddenExtraKeysError) as exc:
        return ("error", cattrs.transform_error(exc, format_exception=serialization._describe))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return ("error", type(exc).__name__, str(exc))
    finally:
        set_id_factory(None)
        set_timestamp_factory(None)


def assert_agree(data: Any, target: Any) -> tuple[Any, ...]:
    before = copy.deepcopy(data)
    fast, detailed = outcome(converter, data, target), outcome(DETAILED, data, target)
    assert fast == detailed
    if fast[0] == "ok":
        assert type(fast[1]) is type(detailed[1])
    assert data == before  # neither path mutates its input
    return fast


def objects_in(data: Any) -> list[dict[str, Any]]:
    """Every JSON object inside ``data``, outermost first."""
    if isinstance(data, dict):
        return [data, *(o for v in data.values() for o in objects_in(v))]
    if isinstance(data, list):
        return [o for v in data for o in objects_in(v)]
    return []


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_valid_data_builds_the_same_objects(data: st.DataObject) -> None:
    target, strategy = data.draw(st.sampled_from(TARGETS))
    value = data.draw(strategy)
    result = assert_agree(unstructure(value, target), target)
    assert result == ("ok", value)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_data_broken_in_one_place_fails_the_same_way(data: st.DataObject) -> None:
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
    assert_agree(payload, target)


def test_a_str_subclass_is_left_to_the_detailed_path() -> None:
    class Colour(enum.StrEnum):
        RED = "red"

    data = {"type": "TEXT_BLOCK_DELTA", "reply_id": "r", "block_id": "b", "delta": Colour.RED}
    kind, event = assert_agree(data, AgentEvent)
    assert kind == "ok"
    assert type(event.delta) is str  # the detailed path converts it, as before


def test_ints_become_floats_and_bools_stay_out_of_ints() -> None:
    base = {"type": "MODEL_CALL_END", "reply_id": "r"}
    kind, event = assert_agree({**base, "input_tokens": 5}, AgentEvent)
    assert kind == "ok"
    assert isinstance(event, ModelCallEndEvent)
    assert assert_agree({**base, "input_tokens": True}, AgentEvent)[0] == "error"
    assert assert_agree({**base, "input_tokens": 5.0}, AgentEvent)[0] == "error"


def test_containers_are_copied_not_shared() -> None:
    metadata = {"k": [1, 2]}
    payload = {"type": "CUSTOM", "reply_id": "r", "name": "n", "metadata": metadata}
    event = converter.structure(payload, AgentEvent)
    assert isinstance(event, CustomEvent)
    assert event.metadata == metadata
    assert event.metadata is not metadata


def test_a_validator_failure_is_reported_by_the_detailed_path() -> None:
    data = {"type": "DATA_BLOCK_DELTA", "reply_id": "r", "block_id": "b", "media_type": "x/y"}
    kind, *errors = assert_agree(data, AgentEvent)  # neither data nor url: the validator
    assert kind == "error"
    assert errors


def test_fast_list_hands_non_lists_and_bad_items_to_the_detailed_hook() -> None:
    calls: list[Any] = []

    def detailed(data: Any, cl: Any) -> str:
        calls.append(data)
        return "detailed"

    def item_hook(x: Any, _: Any) -> int:
        if not isinstance(x, int):
            raise TypeError("not an int")
        return x * 2

    hook = fast_list(item_hook, int, detailed)
    assert hook([1, 2], list[int]) == [2, 4]
    assert hook((1, 2), list[int]) == "detailed"
    assert hook([1, "2"], list[int]) == "detailed"
    assert calls == [(1, 2), [1, "2"]]


def test_a_class_whose_keys_are_not_its_init_names_keeps_the_detailed_hook() -> None:
    @attrs.define
    class Private:
        _secret: str

    def detailed(data: Any, cl: Any) -> Any:
        return cl(data["_secret"])

    assert compile_structure(converter, Private, detailed) is detailed


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


def test_generated_code_shows_in_tracebacks() -> None:
    hook = compile_unstructure(converter, TextBlock, "text")
    try:
        hook(object())
    except AttributeError as exc:
        frames = []
        tb = exc.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame.f_code.co_filename)
            tb = tb.tb_next
        assert "<trioagent codec unstructure_TextBlock>" in frames
    else:
        raise AssertionError("an object without fields unstructured")

"""``deep_copy`` (trioagent/_core/copying.py): the field-by-field deep copy of messages,
blocks and JSON-like values the reply path uses instead of ``copy.deepcopy``."""

from __future__ import annotations

import sys

import attrs
import pytest

from trioagent._core.copying import deep_copy
from trioagent.event import TextBlockDeltaEvent
from trioagent.message import (
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMsg,
)


def conversation() -> list[Msg]:
    return [
        UserMsg("user", "q"),
        Msg(
            "bot",
            [
                ToolCallBlock(id="c1", name="t", input="{}"),
                ToolResultBlock(id="c1", name="t", output=[TextBlock(text="out")]),
                DataBlock(source=Base64Source(data="aGk=", media_type="image/png")),
            ],
            "assistant",
            metadata={"tags": ["a"], "nested": {"k": [1, 2.5, None, True]}},
        ),
    ]


def test_equal_and_independent_at_every_level() -> None:
    original = conversation()
    copied = deep_copy(original)
    assert copied == original
    assert copied is not original
    for before, after in zip(original, copied, strict=True):
        assert after is not before
        assert after.content is not before.content
        for a, b in zip(before.content, after.content, strict=True):
            assert a is not b
    original[1].content[0].input = '{"x": 1}'  # type: ignore[union-attr]
    original[1].content[1].output.append(TextBlock(text="more"))  # type: ignore[union-attr]
    original[1].metadata["nested"]["k"].append(3)  # type: ignore[index,union-attr]
    original[1].content[2].source.data = "changed"  # type: ignore[union-attr]
    assert copied[1].content[0].input == "{}"  # type: ignore[union-attr]
    assert len(copied[1].content[1].output) == 1  # type: ignore[union-attr,arg-type]
    assert copied[1].metadata["nested"]["k"] == [1, 2.5, None, True]  # type: ignore[index]
    assert copied[1].content[2].source.data == "aGk="  # type: ignore[union-attr]


def test_frozen_events_copy_too() -> None:
    event = TextBlockDeltaEvent(reply_id="r", block_id="b", delta="d", metadata={"m": [1]})
    copied = deep_copy(event)
    assert copied == event
    assert copied.metadata is not event.metadata


@attrs.define(slots=False)
class WithDict:  # not slots: handed to copy.deepcopy
    items: list[int]

    def __attrs_post_init__(self) -> None:
        self.extra = [1]


def test_other_objects_fall_back_to_copy_deepcopy() -> None:
    value = {"obj": WithDict([1]), "tuple": (1, [2])}
    copied = deep_copy(value)
    assert copied["obj"].items == [1]
    assert copied["obj"].extra == [1]
    assert copied["obj"] is not value["obj"]
    assert copied["tuple"] == (1, [2])
    assert copied["tuple"][1] is not value["tuple"][1]


def test_too_deep_a_structure_raises_recursion_error() -> None:
    nested: list[object] = []
    for _ in range(sys.getrecursionlimit() + 10):
        nested = [nested]
    with pytest.raises(RecursionError):
        deep_copy(nested)

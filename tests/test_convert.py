"""Chunk → event conversion (trioagent/agent/_convert.py), following AgentScope's rules."""

from __future__ import annotations

from trioagent.agent._convert import ChunkConverter
from trioagent.event import (
    DataBlockDeltaEvent,
    DataBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ToolCallDeltaEvent,
)
from trioagent.message import (
    Base64Source,
    DataBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    URLSource,
)
from trioagent.model import ChatResponse


def chunk(*blocks) -> ChatResponse:
    return ChatResponse(content=list(blocks), is_last=False)


def text(t: str) -> TextBlock:
    return TextBlock(text=t)


def think(t: str) -> ThinkingBlock:
    return ThinkingBlock(thinking=t)


def call(call_id: str, fragment: str, name: str = "tool") -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, input=fragment)


def data(block_id: str, payload: str = "AAAA", media_type: str = "image/png") -> DataBlock:
    return DataBlock(id=block_id, source=Base64Source(data=payload, media_type=media_type))


def types(events) -> list[str]:
    labels = []
    for e in events:
        ident = getattr(e, "tool_call_id", None)
        labels.append(f"{e.type}:{ident}" if ident else str(e.type))
    return labels


def test_text_stream_start_deltas_end():
    conv = ChunkConverter("r1")
    events = [*conv.convert(chunk(text("a"))), *conv.convert(chunk(text("b"))), *conv.finish()]
    assert types(events) == [
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_END",
    ]
    assert {e.reply_id for e in events} == {"r1"}
    assert len({e.block_id for e in events}) == 1
    assert [e.delta for e in events[1:3]] == ["a", "b"]


def test_all_thinking_of_a_chunk_is_one_delta_and_comes_before_text():
    conv = ChunkConverter("r")
    events = conv.convert(chunk(text("T"), think("x"), think("y")))
    assert types(events) == [
        "THINKING_BLOCK_START",
        "THINKING_BLOCK_DELTA",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
    ]
    assert isinstance(events[1], ThinkingBlockDeltaEvent)
    assert events[1].delta == "xy"


def test_a_chunk_without_thinking_closes_the_thinking_block():
    conv = ChunkConverter("r")
    conv.convert(chunk(think("hmm")))
    events = conv.convert(chunk(text("answer")))
    assert types(events) == ["THINKING_BLOCK_END", "TEXT_BLOCK_START", "TEXT_BLOCK_DELTA"]
    assert conv.finish()[0].type == "TEXT_BLOCK_END"


def test_a_data_chunk_keeps_text_and_thinking_open():
    conv = ChunkConverter("r")
    conv.convert(chunk(think("t")))
    events = conv.convert(chunk(data("d1")))
    assert types(events) == ["DATA_BLOCK_START", "DATA_BLOCK_DELTA"]
    events = conv.convert(chunk(think("more")))
    assert types(events) == ["THINKING_BLOCK_DELTA"]  # the same block continues

    conv = ChunkConverter("r")
    conv.convert(chunk(text("t")))
    assert types(conv.convert(chunk(data("d1")))) == ["DATA_BLOCK_START", "DATA_BLOCK_DELTA"]
    assert types(conv.convert(chunk(text("u")))) == ["TEXT_BLOCK_DELTA"]


def test_text_reopens_with_a_new_block_id_after_a_gap():
    conv = ChunkConverter("r")
    first = conv.convert(chunk(text("a")))
    gap = conv.convert(chunk(call("c1", "{}")))
    second = conv.convert(chunk(text("b")))
    assert types(gap)[0] == "TEXT_BLOCK_END"
    assert second[0].type == "TEXT_BLOCK_START"
    assert second[0].block_id != first[0].block_id


def test_tool_calls_start_delta_and_end_when_absent():
    conv = ChunkConverter("r")
    events = [
        *conv.convert(chunk(call("c1", '{"a": '))),
        *conv.convert(chunk(call("c1", "1}"))),
        *conv.convert(chunk(call("c2", "{}", name="other"))),
        *conv.finish(),
    ]
    assert types(events) == [
        "TOOL_CALL_START:c1",
        "TOOL_CALL_DELTA:c1",
        "TOOL_CALL_DELTA:c1",
        "TOOL_CALL_START:c2",
        "TOOL_CALL_DELTA:c2",
        "TOOL_CALL_END:c1",
        "TOOL_CALL_END:c2",
    ]
    assert events[0].tool_call_name == "tool"
    assert events[3].tool_call_name == "other"
    deltas = [e.delta for e in events if isinstance(e, ToolCallDeltaEvent)]
    assert deltas == ['{"a": ', "1}", "{}"]


def test_an_empty_fragment_starts_the_call_without_an_empty_delta():
    # AgentScope emits the (empty) fragment as a delta; an empty delta carries nothing, so
    # trioagent skips it.
    conv = ChunkConverter("r")
    assert types(conv.convert(chunk(call("c1", "")))) == ["TOOL_CALL_START:c1"]


def test_parallel_calls_in_one_chunk():
    conv = ChunkConverter("r")
    events = conv.convert(chunk(call("c1", "{"), call("c2", "{")))
    assert types(events) == [
        "TOOL_CALL_START:c1",
        "TOOL_CALL_DELTA:c1",
        "TOOL_CALL_START:c2",
        "TOOL_CALL_DELTA:c2",
    ]
    events = conv.convert(chunk(call("c2", "}")))
    assert types(events) == ["TOOL_CALL_DELTA:c2", "TOOL_CALL_END:c1"]


def test_only_base64_data_is_streamed():
    conv = ChunkConverter("r")
    url = DataBlock(id="u", source=URLSource(url="https://x.test/a.png", media_type="image/png"))
    events = conv.convert(chunk(data("d1", "AAAA"), url))
    assert types(events) == ["DATA_BLOCK_START", "DATA_BLOCK_DELTA"]
    start, delta = events
    assert isinstance(start, DataBlockStartEvent)
    assert (start.block_id, start.media_type) == ("d1", "image/png")
    assert isinstance(delta, DataBlockDeltaEvent)
    assert (delta.data, delta.url) == ("AAAA", None)
    assert types(conv.convert(chunk(data("d1", "BBBB")))) == ["DATA_BLOCK_DELTA"]


def test_finish_closes_in_fixed_order():
    conv = ChunkConverter("r")
    conv.convert(chunk(think("t"), text("x"), call("c1", "{"), call("c2", "{"), data("d1")))
    assert types(conv.finish()) == [
        "TEXT_BLOCK_END",
        "THINKING_BLOCK_END",
        "TOOL_CALL_END:c1",
        "TOOL_CALL_END:c2",
        "DATA_BLOCK_END",
    ]
    assert conv.finish() == []  # nothing left open


def test_order_within_one_chunk_is_thinking_text_tools_data():
    conv = ChunkConverter("r")
    events = conv.convert(chunk(data("d1"), call("c1", "{}"), text("x"), think("t")))
    assert types(events) == [
        "THINKING_BLOCK_START",
        "THINKING_BLOCK_DELTA",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "TOOL_CALL_START:c1",
        "TOOL_CALL_DELTA:c1",
        "DATA_BLOCK_START",
        "DATA_BLOCK_DELTA",
    ]


def test_an_empty_chunk_only_closes():
    conv = ChunkConverter("r")
    assert conv.convert(chunk()) == []
    conv.convert(chunk(text("a"), call("c1", "{}")))
    assert types(conv.convert(chunk())) == ["TEXT_BLOCK_END", "TOOL_CALL_END:c1"]

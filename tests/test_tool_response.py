"""ToolChunk / ToolResponse: AgentScope's merge algorithm and the conversions."""

from __future__ import annotations

import base64
import itertools

import attrs
import pytest
from hypothesis import given, strategies as st

from trioagent.message import Base64Source, DataBlock, TextBlock, ToolResultState, URLSource
from trioagent.serialization import dumps, loads
from trioagent.tool import ToolChunk, ToolResponse
from trioagent.tool._response import chunk_from_value, error_chunk


def _text(text: str, id: str) -> ToolChunk:
    return ToolChunk(content=[TextBlock(text=text, id=id)])


def _data(data: str, id: str, media_type: str = "image/jpeg") -> ToolChunk:
    return ToolChunk(
        content=[DataBlock(id=id, source=Base64Source(data=data, media_type=media_type))]
    )


def test_defaults():
    chunk = ToolChunk(content=[])
    assert chunk.state == ToolResultState.RUNNING
    assert chunk.is_last is True
    assert chunk.metadata == {}
    assert chunk.id
    assert chunk.id != ToolChunk(content=[]).id
    response = ToolResponse()
    assert response.content == []
    assert response.state == ToolResultState.SUCCESS
    assert response.metadata == {}


def test_response_state_is_never_running():
    with pytest.raises(ValueError, match="must be"):
        ToolResponse(state="running")
    response = ToolResponse()
    with pytest.raises(ValueError, match="must be"):
        response.state = ToolResultState.RUNNING
    response.state = "denied"
    assert response.state is ToolResultState.DENIED


def test_content_must_be_blocks():
    with pytest.raises(TypeError, match="TextBlock/DataBlock"):
        ToolChunk(content=["text"])


def test_agentscope_merge_scenario():
    """Text ids a, b, b then data 1, 2, 1 → text a "123456789", data 1 "abc"+"def", data 2."""
    response = ToolResponse(id="call")
    chunks = [
        _text("123", "a"),
        _text("456", "b"),
        _text("789", "b"),
        _data("abc", "1"),
        _data("***", "2"),
        _data("def", "1"),
    ]
    for chunk in chunks:
        assert response.append_chunk(chunk) is response

    assert [type(b).__name__ for b in response.content] == ["TextBlock", "DataBlock", "DataBlock"]
    text, data1, data2 = response.content
    assert isinstance(text, TextBlock)
    assert (text.id, text.text) == ("a", "123456789")
    assert isinstance(data1, DataBlock)
    assert isinstance(data1.source, Base64Source)
    assert (data1.id, data1.source.data) == ("1", "abcdef")
    assert isinstance(data2, DataBlock)
    assert isinstance(data2.source, Base64Source)
    assert (data2.id, data2.source.data) == ("2", "***")
    assert response.state == ToolResultState.SUCCESS
    # The chunks themselves are untouched (the response holds copies).
    assert chunks[0].content[0].text == "123"  # type: ignore[union-attr]


def test_base64_chunks_merge_by_bytes():
    response = ToolResponse()
    hello = base64.b64encode(b"hello").decode()
    world = base64.b64encode(b"world").decode()
    assert hello.endswith("=")  # padding in the middle would corrupt a string concat
    response.append_chunk(_data(hello, "img", media_type=""))
    response.append_chunk(_data(world, "img", media_type="image/png"))
    block = response.content[0]
    assert isinstance(block, DataBlock)
    assert isinstance(block.source, Base64Source)
    assert base64.b64decode(block.source.data) == b"helloworld"
    assert block.source.media_type == "image/png"


def test_data_merge_takes_newer_non_empty_name():
    response = ToolResponse()
    first = _data("YQ==", "d")
    first.content[0].name = "a.png"  # type: ignore[union-attr]
    response.append_chunk(first)
    response.append_chunk(_data("Yg==", "d"))
    block = response.content[0]
    assert isinstance(block, DataBlock)
    assert block.name == "a.png"


def test_url_data_with_same_id_cannot_merge():
    response = ToolResponse()
    url = ToolChunk(
        content=[
            DataBlock(id="x", source=URLSource(url="https://e.x/a.png", media_type="image/png"))
        ]
    )
    response.append_chunk(url)
    with pytest.raises(ValueError, match="URL source"):
        response.append_chunk(_data("YQ==", "x"))


def test_different_kinds_sharing_an_id_get_a_fresh_id():
    response = ToolResponse()
    response.append_chunk(_data("YQ==", "same"))
    response.append_chunk(_text("hi", "same"))
    assert len(response.content) == 2
    assert response.content[1].id != "same"
    assert isinstance(response.content[1], TextBlock)


def test_consecutive_text_collapses_but_data_does_not():
    response = ToolResponse()
    response.append_chunk(
        ToolChunk(content=[TextBlock(text="a", id="t1"), TextBlock(text="b", id="t2")])
    )
    response.append_chunk(_data("YQ==", "d1"))
    response.append_chunk(_data("Yg==", "d2"))
    response.append_chunk(_text("c", "t3"))
    kinds = [(type(b).__name__, b.id) for b in response.content]
    assert kinds == [
        ("TextBlock", "t1"),
        ("DataBlock", "d1"),
        ("DataBlock", "d2"),
        ("TextBlock", "t3"),
    ]
    assert response.text() == "abc"


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        (["running", "success"], "success"),
        (["running", "interrupted"], "interrupted"),
        (["denied", "interrupted"], "interrupted"),
        (["interrupted", "denied"], "denied"),
        (["error", "interrupted", "denied", "success"], "error"),
        (["interrupted", "error", "running"], "error"),
    ],
)
def test_state_priority(states, expected):
    response = ToolResponse()
    for state in states:
        response.append_chunk(ToolChunk(content=[], state=state))
    assert response.state == expected


def test_metadata_accumulates_without_mcp_progress():
    response = ToolResponse()
    response.append_chunk(ToolChunk(content=[], metadata={"a": 1, "mcp_progress": {"p": 1}}))
    response.append_chunk(ToolChunk(content=[], metadata={"b": 2, "a": 3}))
    assert response.metadata == {"a": 3, "b": 2}


def test_response_round_trips_through_serialization():
    response = ToolResponse(id="call_1", metadata={"k": [1, 2]})
    response.append_chunk(_text("hello", "t"))
    response.append_chunk(_data("YQ==", "d"))
    response.append_chunk(ToolChunk(content=[], state="error"))
    again = loads(dumps(response), ToolResponse)
    assert again == response
    chunk = _data("YQ==", "d")
    assert loads(dumps(chunk), ToolChunk) == chunk


@attrs.define
class _Point:
    x: int
    y: int


class _Opaque:
    def __str__(self) -> str:
        return "<opaque>"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        (5, "5"),
        ({"city": "東京"}, '{"city": "東京"}'),
        ([1, "a"], '[1, "a"]'),
        (_Point(1, 2), '{"x": 1, "y": 2}'),
        (_Opaque(), "<opaque>"),
    ],
)
def test_chunk_from_value_text(value, text):
    chunk = chunk_from_value(value)
    assert chunk is not None
    assert chunk.state == ToolResultState.RUNNING
    assert [b.text for b in chunk.content] == [text]  # type: ignore[union-attr]


def test_chunk_from_value_blocks_and_passthrough():
    assert chunk_from_value(None) is None
    chunk = _text("x", "1")
    assert chunk_from_value(chunk) is chunk
    block = TextBlock(text="b")
    assert chunk_from_value(block).content == [block]  # type: ignore[union-attr]
    blocks = [TextBlock(text="a"), DataBlock(source=Base64Source(data="YQ==", media_type="a/b"))]
    assert chunk_from_value(blocks).content == blocks  # type: ignore[union-attr]
    response = ToolResponse(content=[TextBlock(text="r")], state="denied", metadata={"m": 1})
    converted = chunk_from_value(response)
    assert converted is not None
    assert (converted.state, converted.metadata) == (ToolResultState.DENIED, {"m": 1})
    assert converted.content == response.content
    assert converted.content[0] is not response.content[0]


def test_error_chunk():
    chunk = error_chunk("boom")
    assert chunk.state == ToolResultState.ERROR
    assert chunk.content[0].text == "boom"  # type: ignore[union-attr]


_pieces = st.lists(
    st.tuples(
        st.sampled_from(["text", "data"]),
        st.sampled_from(["a", "b", "c"]),
        st.binary(max_size=8),
    ),
    max_size=12,
)


@given(_pieces)
def test_append_chunk_loses_nothing_and_never_leaves_adjacent_text(pieces):
    response = ToolResponse()
    sent_text, sent_bytes = "", b""
    for kind, id, payload in pieces:
        if kind == "text":
            text = payload.hex()
            sent_text += text
            response.append_chunk(_text(text, id))
        else:
            sent_bytes += payload
            response.append_chunk(_data(base64.b64encode(payload).decode(), id))
    assert len(response.text()) == len(sent_text)
    assert sorted(response.text()) == sorted(sent_text)
    received = b"".join(
        base64.b64decode(b.source.data)
        for b in response.content
        if isinstance(b, DataBlock) and isinstance(b.source, Base64Source)
    )
    assert sorted(received) == sorted(sent_bytes)
    kinds = [type(b) for b in response.content]
    assert all(not (x is TextBlock and y is TextBlock) for x, y in itertools.pairwise(kinds))
    assert response.state == ToolResultState.SUCCESS

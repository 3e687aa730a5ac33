"""The sans-IO event-stream decoder (trioagent/model/_sse.py) against the WHATWG rules."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given, strategies as st

from trioagent._http import ServerSentEvent, SSEDecoder


def decode_all(*pieces: str) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    return events


def test_data_event_dispatched_on_blank_line() -> None:
    assert decode_all("data: hello\n\n") == [ServerSentEvent(data="hello")]


def test_no_dispatch_without_blank_line() -> None:
    decoder = SSEDecoder()

    assert decoder.feed("data: hello\n") == []
    assert decoder.pending


def test_incomplete_trailing_line_is_not_dispatched() -> None:
    decoder = SSEDecoder()

    assert decoder.feed("data: a\n\ndata: b") == [ServerSentEvent(data="a")]
    assert decoder.pending


def test_multiline_data_joined_with_newline() -> None:
    assert decode_all("data: a\ndata: b\ndata:\n\n") == [ServerSentEvent(data="a\nb\n")]


def test_all_three_line_endings() -> None:
    assert decode_all("data: a\r\n\r\ndata: b\r\rdata: c\n\n") == [
        ServerSentEvent(data="a"),
        ServerSentEvent(data="b"),
        ServerSentEvent(data="c"),
    ]


def test_cr_at_end_of_piece_then_lf_is_one_line_break() -> None:
    assert decode_all("data: a\r", "\n", "\r", "\ndata: b\n\n") == [
        ServerSentEvent(data="a"),
        ServerSentEvent(data="b"),
    ]


def test_cr_then_cr_lf_is_two_line_breaks() -> None:
    assert decode_all("data: a\r", "\r\n") == [ServerSentEvent(data="a")]


def test_only_cr_lf_are_line_breaks() -> None:
    """U+2028 and friends are not line breaks (unlike ``str.splitlines``)."""
    assert decode_all("data: a\u2028b\x0bc\x85d\n\n") == [
        ServerSentEvent(data="a\u2028b\x0bc\x85d")
    ]


def test_comments_and_unknown_fields_are_ignored() -> None:
    assert decode_all(": keep-alive\nfoo: bar\ndata: x\n\n") == [ServerSentEvent(data="x")]


def test_field_without_colon_has_empty_value() -> None:
    assert decode_all("data\ndata\n\n") == [ServerSentEvent(data="\n")]


def test_only_one_leading_space_is_removed() -> None:
    assert decode_all("data:  two\ndata:none\n\n") == [ServerSentEvent(data=" two\nnone")]


def test_event_type_and_reset_after_dispatch() -> None:
    assert decode_all("event: delta\ndata: 1\n\ndata: 2\n\n") == [
        ServerSentEvent(data="1", event="delta"),
        ServerSentEvent(data="2"),
    ]


def test_event_without_data_is_not_dispatched_and_resets_type() -> None:
    assert decode_all("event: ping\n\ndata: x\n\n") == [ServerSentEvent(data="x")]


def test_id_persists_and_nul_id_is_ignored() -> None:
    events = decode_all("id: 7\ndata: a\n\ndata: b\n\nid: x\0y\ndata: c\n\nid\ndata: d\n\n")

    assert [e.id for e in events] == ["7", "7", "7", ""]


def test_retry_only_with_ascii_digits() -> None:
    decoder = SSEDecoder()
    events = decoder.feed("retry: 1500\ndata: a\n\nretry: 1x\ndata: b\n\nretry: ١٢\ndata: c\n\n")

    assert [e.retry for e in events] == [1500, None, None]
    assert decoder.retry == 1500


def test_bom_is_stripped_only_at_start() -> None:
    # a BOM after the start is part of the field name ("\ufeffdata", an unknown field)
    assert decode_all("\ufeffdata: a\n\n", "\ufeffdata: b\n\n") == [ServerSentEvent(data="a")]
    assert decode_all("\ufeff", "\ufeffdata: a\n\n") == []


def test_empty_pieces_change_nothing() -> None:
    assert decode_all("", "data: a", "", "\n", "", "\n") == [ServerSentEvent(data="a")]


# -- any split of the byte stream yields the same events --------------------------------------

_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=12)
_line_end = st.sampled_from(["\n", "\r", "\r\n"])
_field = st.one_of(
    st.tuples(st.sampled_from(["data", "event", "id", "retry", "other", ":comment"]), _text),
    st.tuples(st.just("retry"), st.integers(0, 10**6).map(str)),
)


@st.composite
def event_streams(draw: st.DrawFn) -> str:
    parts = ["\ufeff"] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 6))):
        for name, value in draw(st.lists(_field, max_size=5)):
            sep = draw(st.sampled_from([": ", ":", ""])) if value or name else ": "
            parts.append(f"{name}{sep}{value}" if sep else name)
            parts.append(draw(_line_end))
        parts.append(draw(_line_end))  # blank line: dispatch
    if draw(st.booleans()):
        parts.append(draw(_text))  # an incomplete tail
    return "".join(parts)


@given(stream=event_streams(), cuts=st.lists(st.integers(0, 400), max_size=12))
def test_any_text_split_yields_the_same_events(stream: str, cuts: list[int]) -> None:
    whole = SSEDecoder()
    expected = whole.feed(stream)
    points = sorted({min(c, len(stream)) for c in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]

    assert decode_all(*pieces) == expected


@given(stream=event_streams(), cuts=st.lists(st.integers(0, 800), max_size=16))
def test_any_byte_split_yields_the_same_events(stream: str, cuts: list[int]) -> None:
    """As fed by httpx2: bytes split anywhere, decoded incrementally (as ``aiter_text``)."""
    raw = stream.encode("utf-8")
    points = sorted({min(c, len(raw)) for c in cuts})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    utf8 = codecs.getincrementaldecoder("utf-8")()
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(utf8.decode(chunk)))
    events.extend(decoder.feed(utf8.decode(b"", final=True)))

    assert events == SSEDecoder().feed(stream)


@given(st.lists(st.text(max_size=30).filter(lambda s: "\r" not in s and "\n" not in s)))
def test_data_lines_round_trip(lines: list[str]) -> None:
    if not lines:
        lines = [""]
    stream = "".join(f"data: {line}\n" for line in lines) + "\n"

    assert decode_all(stream) == [ServerSentEvent(data="\n".join(lines))]


def test_one_line_or_event_over_max_size_raises_a_typed_error() -> None:
    """A line that never ends, a line longer than the limit in one piece, and an event whose
    data lines add up past it: each a ModelStreamError (not retried), never buffered on."""
    from trioagent.exception import ModelStreamError

    growing = SSEDecoder(max_size=100)
    growing.feed("data: " + "x" * 90)
    with pytest.raises(ModelStreamError, match="larger than 100 characters") as info:
        growing.feed("x" * 20)
    assert not info.value.retryable
    with pytest.raises(ModelStreamError):
        SSEDecoder(max_size=100).feed("data: " + "x" * 200 + "\n\n")
    many = SSEDecoder(max_size=100)
    with pytest.raises(ModelStreamError):
        many.feed("data: 0123456789\n" * 20)
    fits = SSEDecoder(max_size=100)
    assert [e.data for e in fits.feed(("data: " + "y" * 40 + "\n\n") * 5)] == ["y" * 40] * 5

"""The streaming accumulator (trioagent/model/_accumulator.py) and the call that drives it.

The first half feeds :class:`StreamAccumulator` directly; the second
runs it through :class:`ChatModelBase` with an in-test provider (``GatedModel``) to check the
stream contract of every model call: carriers absorbed, exactly one ``is_last`` response, and the
INTERRUPTED partial on cancellation at every checkpoint.  No real sleeps: cancellation points
are reached with ``wait_all_tasks_blocked`` or the ``autojump_clock``.
"""

from __future__ import annotations

import base64
import copy
import logging
from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing

from trioagent.message import (
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolCallState,
    URLSource,
    UserMsg,
)
from trioagent.model import ChatModelBase, ChatResponse, ChatUsage, ChunkSink, StreamAccumulator
from trioagent.model._accumulator import patch_wav_header, wav_header
from trioagent.model._openai import OpenAIStreamParser
from trioagent.permission import PermissionRule
from trioagent.types import FinishedReason, ToolChoice


def delta(
    *blocks: Any,
    usage: ChatUsage | None = None,
    id: str = "resp-1",
    metadata: dict[str, Any] | None = None,
) -> ChatResponse:
    return ChatResponse(
        content=list(blocks), is_last=False, usage=usage, id=id, metadata=metadata or {}
    )


def text(t: str, id: str = "T") -> TextBlock:
    return TextBlock(text=t, id=id)


def think(t: str, id: str = "K", **extra: Any) -> ThinkingBlock:
    return ThinkingBlock(thinking=t, id=id, extra=extra)


def call(id: str, input: str, name: str = "") -> ToolCallBlock:
    return ToolCallBlock(id=id, name=name, input=input)


def audio(data: bytes, media_type: str = "audio/wav", id: str = "A", **kw: Any) -> DataBlock:
    source = Base64Source(data=base64.b64encode(data).decode(), media_type=media_type)
    return DataBlock(id=id, source=source, **kw)


def accumulate(*chunks: ChatResponse) -> StreamAccumulator:
    acc = StreamAccumulator()
    for chunk in chunks:
        acc.add(chunk)
    return acc


def summary(response: ChatResponse) -> list[tuple[str, str, str]]:
    """(kind, id, joined payload) per block — compact enough for exact assertions."""
    rows: list[tuple[str, str, str]] = []
    for block in response.content:
        match block:
            case TextBlock():
                rows.append(("text", block.id, block.text))
            case ThinkingBlock():
                rows.append(("thinking", block.id, block.thinking))
            case ToolCallBlock():
                rows.append((f"call:{block.name}", block.id, block.input))
            case DataBlock():
                source = block.source
                payload = source.data if isinstance(source, Base64Source) else source.url
                rows.append((f"data:{source.media_type}", block.id, payload))
    return rows


# -- StreamAccumulator: blocks ---------------------------------------------------------------


def test_nothing_added_builds_an_empty_complete_response() -> None:
    acc = StreamAccumulator()

    built = acc.build()

    assert (built.content, built.is_last, built.usage, built.metadata) == ([], True, None, {})
    assert built.finished_reason == FinishedReason.COMPLETED
    assert isinstance(built.id, str)
    assert built.id
    assert not acc.has_content


def test_carriers_only_give_id_usage_and_metadata_without_content() -> None:
    usage = ChatUsage(input_tokens=4, output_tokens=0)
    acc = accumulate(
        delta(id="r1", metadata={"a": 1}),
        delta(usage=usage, id="r2", metadata={"b": 2}),
    )

    built = acc.build()

    assert built.content == []
    assert (built.id, built.usage, built.metadata) == ("r2", usage, {"a": 1, "b": 2})
    assert not acc.has_content


def test_interleaved_tool_calls_are_joined_per_id_in_first_seen_order() -> None:
    acc = accumulate(
        delta(call("B", "", name="g")),
        delta(call("A", '{"x"', name="f")),
        delta(call("B", '{"y": '), call("A", ": [1, ")),
        delta(call("A", "2]}")),
        delta(call("B", '"z"}')),
    )

    built = acc.build()

    assert summary(built) == [
        ("call:g", "B", '{"y": "z"}'),
        ("call:f", "A", '{"x": [1, 2]}'),
    ]
    b, a = built.content
    assert isinstance(a, ToolCallBlock)
    assert isinstance(b, ToolCallBlock)
    assert (a.parsed_input(), b.parsed_input()) == ({"x": [1, 2]}, {"y": "z"})


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["f", "", ""], "f"),  # name only in the first fragment
        (["", "", "late"], "late"),  # name arrives late: filled in
        (["", "late", "later"], "late"),  # the first non-empty name wins
        (["first", "second", ""], "first"),  # a renaming continuation is ignored
        (["", "", ""], ""),  # never named
    ],
)
def test_tool_call_name_rules(names: list[str], expected: str) -> None:
    parts = ["{", '"k": 1', "}"]
    acc = accumulate(*(delta(call("c", p, name=n)) for n, p in zip(names, parts, strict=True)))

    (block,) = acc.build().content

    assert isinstance(block, ToolCallBlock)
    assert (block.name, block.input) == (expected, '{"k": 1}')


def test_tool_call_keeps_first_delta_fields() -> None:
    rule = PermissionRule(tool_name="f", behavior="allow")
    first = ToolCallBlock(
        id="c", name="f", input="{", state=ToolCallState.ASKING, suggested_rules=[rule]
    )
    later = ToolCallBlock(id="c", name="f", input="}", state=ToolCallState.FINISHED)
    acc = accumulate(delta(first), delta(later))

    (block,) = acc.build().content

    assert isinstance(block, ToolCallBlock)
    assert (block.input, block.state, block.created_at) == ("{}", "asking", first.created_at)
    assert block.suggested_rules == [rule]
    assert block.suggested_rules is not first.suggested_rules


def test_empty_fragments_change_nothing_but_count_as_content() -> None:
    acc = accumulate(
        delta(text("")),
        delta(),
        delta(text("a"), call("c", "", name="f")),
        delta(text(""), call("c", "")),
        delta(think("")),
    )

    assert summary(acc.build()) == [
        ("text", "T", "a"),
        ("call:f", "c", ""),
        ("thinking", "K", ""),
    ]
    assert acc.has_content


def test_a_chunk_with_only_an_empty_text_block_is_content() -> None:
    # Such a chunk reaches ``emit`` (its content list is not empty), so a retry would replay it.
    acc = accumulate(delta(text("")))

    assert acc.has_content
    assert summary(acc.build()) == [("text", "T", "")]


def test_text_after_tool_calls() -> None:
    acc = accumulate(
        delta(text("Let me ")),
        delta(call("c1", "{}", name="f")),
        delta(text("check.")),  # same text id: joins the first block, keeps its position
        delta(text("Done", id="T2")),  # a new text id after the call goes last
    )

    assert summary(acc.build()) == [
        ("text", "T", "Let me check."),
        ("call:f", "c1", "{}"),
        ("text", "T2", "Done"),
    ]


def test_several_thinking_blocks_stay_separate_with_their_own_extras() -> None:
    acc = accumulate(
        delta(think("plan ", id="K1")),
        delta(think("step", id="K1"), think("redacted", id="K2", data="xyz")),
        delta(text("answer")),
        delta(think("", id="K1", signature="sig-1")),  # the signature closes the first block
        delta(think(" more", id="K2", signature=None)),
    )

    built = acc.build()

    assert summary(built) == [
        ("thinking", "K1", "plan step"),
        ("thinking", "K2", "redacted more"),
        ("text", "T", "answer"),
    ]
    k1, k2, _ = built.content
    assert isinstance(k1, ThinkingBlock)
    assert isinstance(k2, ThinkingBlock)
    assert (k1.extra, k2.extra) == ({"signature": "sig-1"}, {"data": "xyz"})


def test_the_first_thinking_delta_seeds_every_extra_even_none() -> None:
    acc = accumulate(delta(think("a", signature=None)), delta(think("b", other=None)))

    (block,) = acc.build().content

    assert isinstance(block, ThinkingBlock)
    assert block.extra == {"signature": None}


def test_changing_a_built_block_does_not_change_the_next_build() -> None:
    acc = accumulate(delta(think("a", sig="s")), delta(call("c", "{}", name="f")))
    first = acc.build()
    thinking, tool_call = first.content
    assert isinstance(thinking, ThinkingBlock)
    assert isinstance(tool_call, ToolCallBlock)
    thinking.extra["sig"] = "changed"
    tool_call.suggested_rules.append(PermissionRule(tool_name="f", behavior="deny"))

    again = acc.build()

    assert again.content == acc.build().content
    assert summary(again) == [("thinking", "K", "a"), ("call:f", "c", "{}")]
    thinking2, tool_call2 = again.content
    assert isinstance(thinking2, ThinkingBlock)
    assert isinstance(tool_call2, ToolCallBlock)
    assert (thinking2.extra, tool_call2.suggested_rules) == ({"sig": "s"}, [])


def test_thinking_extra_overwritten_by_each_later_non_none_value() -> None:
    acc = accumulate(
        delta(think("a", sig="1", keep="k")),
        delta(think("b", sig="2")),
        delta(think("c", sig=None, new=0)),
        delta(think("d", sig="3")),
    )

    (block,) = acc.build().content

    assert isinstance(block, ThinkingBlock)
    assert (block.thinking, block.extra) == ("abcd", {"sig": "3", "keep": "k", "new": 0})


def test_type_change_restarts_the_block_in_its_original_position() -> None:
    acc = accumulate(
        delta(text("a", id="X")),
        delta(text("b", id="Y")),
        delta(think("c", id="X")),
        delta(think("d", id="X")),
    )

    assert summary(acc.build()) == [("thinking", "X", "cd"), ("text", "Y", "b")]


def test_type_change_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="trioagent.model"):
        accumulate(delta(text("a", id="X")), delta(call("X", "{}", name="f")))

    assert "changed type from TextBlock to ToolCallBlock" in caplog.text


def test_many_fragments_are_joined_in_order() -> None:
    fragments = [f"{i}," for i in range(20_000)]
    acc = accumulate(*(delta(text(f)) for f in fragments))

    (block,) = acc.build().content

    assert isinstance(block, TextBlock)
    assert block.text == "".join(fragments)


# -- StreamAccumulator: usage, id, metadata, build ----------------------------------------------


@pytest.mark.parametrize(
    ("positions", "winner"),
    [
        ([0], 0),  # first chunk only
        ([1], 1),  # a middle chunk only: kept although later chunks have none
        ([3], 3),  # the last chunk
        ([0, 1, 3], 3),  # several: the last one that has usage
        ([0, 2], 2),  # the last carrier with usage, not the last chunk
        ([], None),
    ],
)
def test_usage_from_the_last_chunk_that_has_it(positions: list[int], winner: int | None) -> None:
    usages = [ChatUsage(input_tokens=10 + i, output_tokens=i) for i in range(4)]
    chunks = [
        delta(text("a"), usage=usages[0] if 0 in positions else None),
        delta(text("b"), usage=usages[1] if 1 in positions else None),
        delta(usage=usages[2] if 2 in positions else None),  # a carrier
        delta(text("c"), usage=usages[3] if 3 in positions else None),
    ]

    built = accumulate(*chunks).build()

    assert built.usage is (None if winner is None else usages[winner])


def test_usage_is_kept_exactly_as_reported() -> None:
    usage = ChatUsage(
        input_tokens=0,
        output_tokens=0,
        cache_creation_input_tokens=None,
        cache_input_tokens=None,
        metadata={"raw": 1},
    )

    built = accumulate(delta(text("a"), usage=usage)).build()

    assert built.usage is usage
    assert (usage.cache_creation_input_tokens, usage.cache_input_tokens) == (None, None)


def test_response_id_is_the_id_of_the_last_chunk_even_a_carrier() -> None:
    acc = accumulate(delta(text("a"), id="r1"), delta(text("b"), id="r2"), delta(id="r3"))

    assert acc.build().id == "r3"


def test_metadata_later_keys_overwrite_and_build_copies_it() -> None:
    acc = accumulate(
        delta(metadata={"finish_reason": None, "model": "m"}),
        delta(text("a"), metadata={"finish_reason": "stop"}),
        delta(),
    )

    built = acc.build()
    built.metadata["mutated"] = True

    assert built.metadata == {"finish_reason": "stop", "model": "m", "mutated": True}
    assert acc.build().metadata == {"finish_reason": "stop", "model": "m"}


def test_build_is_repeatable_and_adding_continues_after_it() -> None:
    acc = accumulate(delta(text("a")), delta(call("c", "{", name="f")))

    first = acc.build(FinishedReason.INTERRUPTED)
    second = acc.build(FinishedReason.INTERRUPTED)
    acc.add(delta(text("b"), call("c", "}")))
    third = acc.build()

    assert (first.content, first.id) == (second.content, second.id)
    assert all(a is not b for a, b in zip(first.content, second.content, strict=True))
    assert summary(first) == [("text", "T", "a"), ("call:f", "c", "{")]
    assert first.finished_reason == FinishedReason.INTERRUPTED
    assert summary(third) == [("text", "T", "ab"), ("call:f", "c", "{}")]
    assert third.finished_reason == FinishedReason.COMPLETED


def test_input_chunks_are_never_mutated() -> None:
    rule = PermissionRule(tool_name="f", behavior="ask")
    chunks = [
        delta(think("hm", sig=None, nested={"k": [1]}), metadata={"m": {"x": 1}}),
        delta(think("m", sig="s"), text("Hel")),
        delta(ToolCallBlock(id="c", name="f", input='{"a"', suggested_rules=[rule])),
        delta(text("lo"), call("c", ": 1}", name="g")),
        delta(audio(wav_header(None) + b"\x01\x02", name="voice")),
        delta(audio(b"\x03\x04")),
        delta(DataBlock(id="D", source=URLSource(url="http://x/1", media_type="image/png"))),
        delta(DataBlock(id="D", source=Base64Source(data="QQ==", media_type="image/png"))),
        delta(text("x", id="Z")),
        delta(think("y", id="Z")),  # type change
        delta(usage=ChatUsage(input_tokens=1, output_tokens=2), metadata={"m": {"y": 2}}),
    ]
    snapshot = copy.deepcopy(chunks)
    acc = StreamAccumulator()
    for chunk in chunks:
        acc.add(chunk)
    built = acc.build()

    assert chunks == snapshot

    # Nor does changing the built response reach back into the inputs.
    for block in built.content:
        match block:
            case ThinkingBlock():
                block.extra["sig"] = "changed"
                block.thinking = "changed"
            case ToolCallBlock():
                block.suggested_rules.clear()
                block.name = "changed"
            case TextBlock():
                block.text = "changed"
            case DataBlock():
                block.name = "changed"
        block.id = "changed"
    built.metadata.clear()

    assert chunks == snapshot


# -- StreamAccumulator: data blocks -------------------------------------------------------------


def test_audio_fragments_split_off_base64_boundaries_are_byte_joined() -> None:
    pcm = bytes(range(256)) * 3
    pieces = [pcm[:1], pcm[1:5], pcm[5:6], pcm[6:500], pcm[500:]]  # padded base64 each
    acc = accumulate(*(delta(audio(p, media_type="audio/pcm")) for p in pieces))

    (block,) = acc.build().content

    assert isinstance(block, DataBlock)
    assert block.source == Base64Source(data=base64.b64encode(pcm).decode(), media_type="audio/pcm")


def test_streamed_wav_gets_its_header_sizes_patched() -> None:
    pcm = b"\x10\x20" * 50
    acc = accumulate(
        delta(audio(wav_header(None) + pcm[:7], name="reply")),
        delta(audio(pcm[7:60])),
        delta(audio(pcm[60:])),
    )

    (block,) = acc.build().content

    assert isinstance(block, DataBlock)
    assert isinstance(block.source, Base64Source)
    assert base64.b64decode(block.source.data) == wav_header(len(pcm)) + pcm
    assert block.name == "reply"


def test_a_single_wav_delta_is_header_patched_too() -> None:
    pcm = b"\x01\x02" * 4
    acc = accumulate(delta(audio(wav_header(None) + pcm)))

    (block,) = acc.build().content

    assert isinstance(block, DataBlock)
    assert isinstance(block.source, Base64Source)
    assert base64.b64decode(block.source.data) == wav_header(len(pcm)) + pcm


def test_non_wav_audio_is_not_header_patched() -> None:
    fake = wav_header(None) + b"\x00\x01"  # a WAV-looking payload declared as MP3
    acc = accumulate(delta(audio(fake[:20], "audio/mpeg")), delta(audio(fake[20:], "audio/mpeg")))

    (block,) = acc.build().content

    assert isinstance(block, DataBlock)
    assert isinstance(block.source, Base64Source)
    assert base64.b64decode(block.source.data) == fake


def test_invalid_base64_audio_falls_back_to_text_concatenation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    parts = ["AAA=", "QU*JD"]  # a lenient decoder would skip the "*" and accept it
    acc = accumulate(
        *(
            delta(DataBlock(id="A", source=Base64Source(data=p, media_type="audio/wav")))
            for p in parts
        )
    )

    with caplog.at_level(logging.WARNING, logger="trioagent.model"):
        (block,) = acc.build().content

    assert isinstance(block, DataBlock)
    assert block.source == Base64Source(data="AAA=QU*JD", media_type="audio/wav")
    assert "invalid base64 in streamed audio/wav data" in caplog.text


def test_audio_media_type_change_restarts_the_audio() -> None:
    acc = accumulate(
        delta(audio(b"wav-bytes", "audio/wav", name="n")),
        delta(audio(b"mp3-", "audio/mpeg")),
        delta(audio(b"more", "audio/mpeg")),
    )

    (block,) = acc.build().content

    assert isinstance(block, DataBlock)
    assert block.name == "n"
    assert block.source == Base64Source(
        data=base64.b64encode(b"mp3-more").decode(), media_type="audio/mpeg"
    )


def test_non_audio_data_is_replaced_by_the_latest_delta() -> None:
    acc = accumulate(
        delta(audio(b"abc", "audio/wav", id="D", name="first")),
        delta(DataBlock(id="D", source=Base64Source(data="QQ==", media_type="image/png"))),
        delta(DataBlock(id="D", source=URLSource(url="https://x/y.png", media_type="image/png"))),
    )

    (block,) = acc.build().content

    assert isinstance(block, DataBlock)
    assert block.name == "first"
    assert block.source == URLSource(url="https://x/y.png", media_type="image/png")


def test_audio_after_a_url_delta_starts_over() -> None:
    restart = audio(b"pcm1", "audio/pcm", id="D")
    acc = accumulate(
        delta(DataBlock(id="D", source=URLSource(url="https://x/a", media_type="audio/pcm"))),
        delta(restart),
        delta(audio(b"pcm2", "audio/pcm", id="D")),
    )

    (block,) = acc.build().content

    assert isinstance(block, DataBlock)
    assert block.created_at == restart.created_at  # the base64 delta replaced the URL one
    assert block.source == Base64Source(
        data=base64.b64encode(b"pcm1pcm2").decode(), media_type="audio/pcm"
    )


def test_built_data_source_is_a_new_object() -> None:
    url = URLSource(url="https://x/a.png", media_type="image/png")
    b64 = Base64Source(data="QQ==", media_type="image/png")
    acc = accumulate(delta(DataBlock(id="U", source=url)), delta(DataBlock(id="B", source=b64)))

    u, b = acc.build().content

    assert isinstance(u, DataBlock)
    assert isinstance(b, DataBlock)
    assert (u.source, b.source) == (url, b64)
    assert u.source is not url
    assert b.source is not b64


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"RIFF" + b"\x00" * 39,  # 43 bytes: too short for a header
        b"RIFX" + b"\x00" * 60,
        wav_header(None)[:43],  # all three markers but one byte short of a header
        wav_header(None)[:8] + b"WAVX" + wav_header(None)[12:] + b"pcm",
        wav_header(None)[:36] + b"LIST" + wav_header(None)[40:] + b"pcm",
    ],
)
def test_patch_wav_header_leaves_other_data_alone(data: bytes) -> None:
    assert patch_wav_header(data) == data


def test_wav_header_layout() -> None:
    header = wav_header(10, sample_rate=16000, channels=2, bits_per_sample=16)

    assert len(header) == 44
    assert header[:4] == b"RIFF"
    assert int.from_bytes(header[4:8], "little") == 46
    assert int.from_bytes(header[24:28], "little") == 16000
    assert int.from_bytes(header[28:32], "little") == 64000  # byte rate
    assert int.from_bytes(header[40:44], "little") == 10
    assert patch_wav_header(wav_header(None) + b"\x00" * 10) == wav_header(10) + b"\x00" * 10


# -- the OpenAI-compatible parser feeding the accumulator (index-keyed fragments) -------------


def openai_chunk(*tool_calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "choices": [{"index": 0, "delta": {"content": content, "tool_calls": list(tool_calls)}}],
    }


async def test_openai_tool_call_whose_id_arrives_late_stays_one_call() -> None:
    parser = OpenAIStreamParser(trio.current_time())
    acc = StreamAccumulator()
    for tool_call in [
        {"index": 0, "function": {"name": "f", "arguments": '{"a"'}},
        {"index": 0, "id": "call_real", "function": {"arguments": ": 1}"}},
    ]:
        delta = {"tool_calls": [tool_call]}
        chunk = parser.parse({"id": "c", "choices": [{"index": 0, "delta": delta}]})
        assert chunk is not None
        acc.add(chunk)
    (block,) = acc.build().content
    assert isinstance(block, ToolCallBlock)
    assert (block.name, block.input) == ("f", '{"a": 1}')


async def test_openai_tool_call_fragments_are_routed_by_index() -> None:
    parser = OpenAIStreamParser(trio.current_time())
    wire = [
        openai_chunk({"index": 0, "id": "call_A", "function": {"name": "f", "arguments": ""}}),
        openai_chunk({"index": 1, "id": "call_B", "function": {"name": "g", "arguments": '{"b'}}),
        openai_chunk(
            {"index": 0, "function": {"arguments": '{"a": '}},
            {"index": 1, "id": "", "function": {"name": "", "arguments": '": 2'}},
        ),
        openai_chunk({"index": 0, "function": {"arguments": "1}"}}, content="text after"),
        openai_chunk({"index": 1, "function": {"arguments": "}"}}),
        {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 6}},
    ]
    acc = StreamAccumulator()
    for item in wire:
        chunk = parser.parse(item)
        assert chunk is not None
        acc.add(chunk)

    built = acc.build()

    assert summary(built) == [
        ("call:f", "call_A", '{"a": 1}'),
        ("call:g", "call_B", '{"b": 2}'),
        ("text", parser.text_id, "text after"),
    ]
    assert built.usage is not None
    assert (built.usage.input_tokens, built.usage.output_tokens) == (5, 6)
    assert built.id == "chatcmpl-1"


# -- through ChatModelBase -------------------------------------------------------------------

MSGS: list[Msg] = [UserMsg("user", "hi")]


class GatedModel(ChatModelBase):
    """Sends its scripted chunks, then blocks forever (or returns when ``finish`` is set).

    A float in the script sleeps that many seconds first.
    """

    def __init__(self, script: Sequence[ChatResponse | float], *, finish: bool = False) -> None:
        super().__init__("gated", max_retries=0)
        self.script = script
        self.finish = finish
        self.sent = 0

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        send: ChunkSink,
    ) -> None:
        for step in self.script:
            if isinstance(step, ChatResponse):
                await send(step)
                self.sent += 1
            else:
                await trio.sleep(step)
        if not self.finish:
            await trio.sleep_forever()


class Sink:
    """An ``emit`` that records every chunk; optionally blocks on the n-th delta."""

    def __init__(self, block_on: int | None = None) -> None:
        self.items: list[ChatResponse] = []
        self.block_on = block_on

    async def __call__(self, chunk: ChatResponse) -> None:
        self.items.append(chunk)
        if not chunk.is_last and len(self.items) == self.block_on:
            await trio.sleep_forever()

    @property
    def deltas(self) -> list[ChatResponse]:
        return [c for c in self.items if not c.is_last]

    @property
    def finals(self) -> list[ChatResponse]:
        return [c for c in self.items if c.is_last]


STREAM = [
    delta(think("hm")),
    delta(usage=ChatUsage(input_tokens=3, output_tokens=1), id="resp-2"),  # carrier
    delta(text("Hel"), call("c1", '{"ci', name="f")),
    delta(),  # empty carrier
    delta(text("lo"), call("c1", 'ty": "Paris"}')),
    delta(call("c2", "{}", name="g"), id="resp-3"),
]
CONTENT_INDEXES = [0, 2, 4, 5]  # the STREAM chunks that carry content


def joined(deltas: list[ChatResponse]) -> list[tuple[str, str, str]]:
    """What the emitted deltas add up to, by accumulating them again."""
    return summary(accumulate(*deltas).build())


async def test_stream_absorbs_carriers_and_returns_one_complete_response() -> None:
    model = GatedModel(STREAM, finish=True)
    sink = Sink()

    final = await model(MSGS, emit=sink)

    assert sink.deltas == sink.items
    assert [id(c) for c in sink.items] == [id(STREAM[i]) for i in CONTENT_INDEXES]
    assert final.is_last
    assert final.finished_reason == FinishedReason.COMPLETED
    assert summary(final) == [
        ("thinking", "K", "hm"),
        ("text", "T", "Hello"),
        ("call:f", "c1", '{"city": "Paris"}'),
        ("call:g", "c2", "{}"),
    ]
    assert final.usage == ChatUsage(input_tokens=3, output_tokens=1)
    assert final.id == "resp-3"


async def test_stream_without_content_returns_an_empty_complete_response() -> None:
    usage = ChatUsage(input_tokens=7, output_tokens=0)
    model = GatedModel([delta(), delta(usage=usage, id="r-last")], finish=True)
    sink = Sink()

    final = await model(MSGS, emit=sink)

    assert sink.items == []
    assert (final.content, final.is_last, final.usage, final.id) == ([], True, usage, "r-last")
    assert final.finished_reason == FinishedReason.COMPLETED


async def test_duplicate_provider_finals_yield_one_response_none_emitted() -> None:
    first = ChatResponse(content=[text("one")], is_last=True)
    second = ChatResponse(content=[text("two")], is_last=True)
    model = GatedModel([delta(text("x")), first, second], finish=True)
    sink = Sink()

    final = await model(MSGS, emit=sink)

    assert final is second
    assert [c.is_last for c in sink.items] == [False]


@pytest.mark.parametrize("delivered", range(len(STREAM) + 1))
async def test_cancel_after_each_chunk_emits_the_partial_and_propagates(delivered: int) -> None:
    model = GatedModel(STREAM[:delivered])
    sink = Sink()

    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                await model(MSGS, emit=sink)
                pytest.fail("the call returned although it was cancelled")

        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        assert model.sent == delivered
        scope.cancel()

    assert scope.cancelled_caught
    *deltas, last = sink.items
    assert [id(c) for c in deltas] == [id(STREAM[i]) for i in CONTENT_INDEXES if i < delivered]
    assert last.is_last
    assert last.finished_reason == FinishedReason.INTERRUPTED
    assert summary(last) == joined(deltas)
    usage_seen = delivered > 1
    assert last.usage == (ChatUsage(input_tokens=3, output_tokens=1) if usage_seen else None)
    if delivered:
        assert last.id == STREAM[delivered - 1].id


async def test_cancel_while_the_consumer_handles_a_delta() -> None:
    model = GatedModel(STREAM, finish=True)
    sink = Sink(block_on=2)  # blocks inside emit of the second content delta

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(model, MSGS, None, None, sink)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()

    assert scope.cancelled_caught
    assert [id(c) for c in sink.deltas] == [id(STREAM[0]), id(STREAM[2])]
    (last,) = sink.finals
    assert last is sink.items[-1]
    # The delta being handled was accumulated before emit; chunks buffered behind it were not.
    assert summary(last) == [
        ("thinking", "K", "hm"),
        ("text", "T", "Hel"),
        ("call:f", "c1", '{"ci'),
    ]
    assert last.finished_reason == FinishedReason.INTERRUPTED


async def test_cancel_while_the_provider_waits_on_the_consumer() -> None:
    chunks = [delta(text(str(i % 10))) for i in range(200)]
    model = GatedModel(chunks, finish=True)
    sink = Sink(block_on=1)

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(model, MSGS, None, None, sink)
            await trio.testing.wait_all_tasks_blocked()
            # No read-ahead: the provider's send returns once the delta was emitted, so the
            # provider waits on the blocked consumer with the first delta in flight.
            assert model.sent == 0
            scope.cancel()

    assert scope.cancelled_caught
    assert [summary(c) for c in sink.items] == [
        [("text", "T", "0")],
        [("text", "T", "0")],
    ]
    assert [c.is_last for c in sink.items] == [False, True]


async def test_cancel_without_emit_just_propagates() -> None:
    model = GatedModel(STREAM)

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(model, MSGS)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()

    assert scope.cancelled_caught


@pytest.mark.parametrize("block_on", [None, 1, 3])
async def test_partial_always_equals_what_was_emitted(
    autojump_clock: trio.testing.MockClock, block_on: int | None
) -> None:
    # Chunks arrive one per second; cancel at every half second in turn.
    script: list[ChatResponse | float] = []
    for chunk in STREAM:
        script += [1.0, chunk]
    for tenths in range(0, 10 * (len(STREAM) + 2), 5):
        model = GatedModel(script)
        sink = Sink(block_on=block_on)

        with trio.move_on_after(tenths / 10) as scope:
            await model(MSGS, emit=sink)

        assert scope.cancelled_caught
        (last,) = sink.finals
        assert last is sink.items[-1]
        assert last.finished_reason == FinishedReason.INTERRUPTED
        assert summary(last) == joined(sink.deltas)


async def test_interrupted_partial_has_truncated_arguments_in_new_blocks() -> None:
    model = GatedModel(STREAM[:3])
    sink = Sink()

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(model, MSGS, None, None, sink)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()

    partial = sink.items[-1]
    original = STREAM[2].content[1]
    call_block = partial.content[-1]
    assert isinstance(call_block, ToolCallBlock)
    assert (call_block.id, call_block.name, call_block.input) == ("c1", "f", '{"ci')
    assert call_block is not original
    assert all(
        built is not sent for built in partial.content for c in sink.deltas for sent in c.content
    )

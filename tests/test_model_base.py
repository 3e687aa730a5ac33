"""ChatModelBase (trioagent/model/_base.py) and its accumulator, with an in-test provider.

``FakeModel`` streams scripted attempts: each attempt is a list of steps — a ChatResponse
to send, a number of seconds to sleep, or an exception to raise.  Tests run on
``autojump_clock`` so sleeps take no real time.

The second half drives the same retry loop (retries, backoff, ``Retry-After``, the total
timeout, cancellation, redaction, structured output) through ``OpenAIChatModel`` over real
loopback HTTP to ``serve_openai_compatible``, and the agent's own retries and fallback model
(``ModelConfig``) the same way.  Tests measuring backoff sleeps use ``autojump_clock`` and give
the model no read or connect timeout (``NO_NET_DEADLINE``), so an autojump can never fire a
network deadline while data is in flight on loopback (see tests/test_cancel_sweep_http.py).
"""

from __future__ import annotations

import base64
import collections
import email.utils
import json
import logging
import os
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import attrs
import httpx2
import pydantic
import pytest
import trio
import trio.lowlevel
import trio.testing
from provider_kit import (
    MSGS as HTTP_MSGS,
    NO_NET_DEADLINE,
    ROLE,
    USAGE,
    Sink,
    busy,
    chunk,
    open_connections,
    response_texts,
    start_server,
    text_of,
)

from trioagent.agent import Agent, InjectionConfig, ModelConfig
from trioagent.credential import OpenAICredential
from trioagent.event import ReplyEndEvent, TextBlockDeltaEvent
from trioagent.exception import (
    ModelAuthenticationError,
    ModelError,
    ModelInvalidRequestError,
    ModelRateLimitError,
    ModelStreamError,
    ModelTimeoutError,
    ModelUpstreamError,
    StructuredOutputError,
    ToolJSONDecodeError,
)
from trioagent.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    UserMsg,
)
from trioagent.model import (
    ChatModelBase,
    ChatResponse,
    ChatUsage,
    ChunkSink,
    OpenAIChatModel,
    StreamAccumulator,
    flatten_json_schema,
    json_loads_with_repair,
)
from trioagent.model._accumulator import wav_header
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedError,
    ScriptedReply,
    ScriptedResponse,
    ScriptedSSE,
    ScriptedToolCall,
    serve_openai_compatible,
)
from trioagent.types import FinishedReason, ToolChoice

Step = ChatResponse | float | Exception


def delta(*blocks: Any, usage: ChatUsage | None = None, id: str = "resp-1") -> ChatResponse:
    return ChatResponse(content=list(blocks), is_last=False, usage=usage, id=id)


class FakeModel(ChatModelBase):
    """Streams (or returns) scripted attempts and records every call."""

    def __init__(self, attempts: list[list[Step]], **kwargs: Any) -> None:
        kwargs.setdefault("retry_delay", 1.0)
        super().__init__("fake", **kwargs)
        self.attempts = list(attempts)
        self.calls: list[tuple[list[Msg], Any, Any]] = []

    async def _run_steps(self, send: ChunkSink | None) -> list[Any]:
        sent: list[Any] = []
        for step in self.attempts.pop(0):
            if isinstance(step, Exception):
                raise step
            if isinstance(step, int | float):
                await trio.sleep(step)
            elif send is not None:
                await send(step)
            else:
                sent.append(step)
        return sent

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        send: ChunkSink,
    ) -> None:
        self.calls.append((messages, tools, tool_choice))
        await self._run_steps(send)

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        self.calls.append((messages, tools, tool_choice))
        (response,) = await self._run_steps(None)
        assert isinstance(response, ChatResponse)
        return response


MSGS = [UserMsg("user", "hi")]


def texts(response: ChatResponse) -> list[str]:
    return [b.text for b in response.content if isinstance(b, TextBlock)]


# -- accumulator ---------------------------------------------------------------------------


class TestAccumulator:
    def test_fragments_joined_in_first_seen_order(self) -> None:
        acc = StreamAccumulator()
        acc.add(delta(ThinkingBlock(thinking="hm", id="K")))
        acc.add(delta(ToolCallBlock(id="c1", name="f", input="")))
        acc.add(delta(TextBlock(text="Hel", id="T"), ToolCallBlock(id="c1", name="", input='{"a"')))
        acc.add(delta(TextBlock(text="lo", id="T"), ToolCallBlock(id="c1", name="", input=": 1}")))
        acc.add(delta(ThinkingBlock(thinking="m", id="K"), id="resp-2"))

        final = acc.build()

        assert [type(b).__name__ for b in final.content] == [
            "ThinkingBlock",
            "ToolCallBlock",
            "TextBlock",
        ]
        thinking, call, text = final.content
        assert isinstance(thinking, ThinkingBlock)
        assert thinking.thinking == "hmm"
        assert isinstance(call, ToolCallBlock)
        assert (call.name, call.input) == ("f", '{"a": 1}')
        assert isinstance(text, TextBlock)
        assert text.text == "Hello"
        assert final.is_last
        assert final.id == "resp-2"
        assert final.finished_reason == FinishedReason.COMPLETED

    def test_built_blocks_are_new_objects(self) -> None:
        first = TextBlock(text="a", id="T")
        acc = StreamAccumulator()
        acc.add(delta(first))
        acc.add(delta(TextBlock(text="b", id="T")))

        (built,) = acc.build().content

        assert built is not first
        assert first.text == "a"
        assert isinstance(built, TextBlock)
        assert (built.id, built.created_at) == (first.id, first.created_at)

    def test_thinking_extras_overwrite_when_not_none(self) -> None:
        acc = StreamAccumulator()
        acc.add(delta(ThinkingBlock(thinking="x", id="K", extra={"signature": None, "a": 1})))
        acc.add(delta(ThinkingBlock(thinking="", id="K", extra={"signature": "sig", "a": None})))

        (block,) = acc.build().content

        assert isinstance(block, ThinkingBlock)
        assert block.extra == {"signature": "sig", "a": 1}

    def test_tool_name_kept_from_first_delta_or_filled_if_empty(self) -> None:
        acc = StreamAccumulator()
        acc.add(delta(ToolCallBlock(id="a", name="first", input="")))
        acc.add(delta(ToolCallBlock(id="a", name="second", input="{}")))
        acc.add(delta(ToolCallBlock(id="b", name="", input="")))
        acc.add(delta(ToolCallBlock(id="b", name="late", input="{}")))

        a, b = acc.build().content

        assert isinstance(a, ToolCallBlock)
        assert isinstance(b, ToolCallBlock)
        assert (a.name, b.name) == ("first", "late")

    def test_audio_is_byte_concatenated_and_wav_header_patched(self) -> None:
        pcm1, pcm2 = b"\x01\x02" * 3, b"\x03\x04" * 5
        first = base64.b64encode(wav_header(None) + pcm1).decode()
        acc = StreamAccumulator()
        for data in (first, base64.b64encode(pcm2).decode()):
            source = Base64Source(data=data, media_type="audio/wav")
            acc.add(delta(DataBlock(id="A", source=source)))

        (block,) = acc.build().content

        assert isinstance(block, DataBlock)
        assert isinstance(block.source, Base64Source)
        assert base64.b64decode(block.source.data) == wav_header(len(pcm1 + pcm2)) + pcm1 + pcm2

    def test_other_data_latest_replaces_and_name_overwritten(self) -> None:
        acc = StreamAccumulator()
        acc.add(
            delta(DataBlock(id="D", source=URLSource(url="http://a/1", media_type="image/png")))
        )
        acc.add(
            delta(
                DataBlock(
                    id="D",
                    name="pic",
                    source=Base64Source(data="QQ==", media_type="image/png"),
                )
            )
        )

        (block,) = acc.build().content

        assert isinstance(block, DataBlock)
        assert block.name == "pic"
        assert block.source == Base64Source(data="QQ==", media_type="image/png")

    def test_usage_last_truthy_wins_and_none_cache_kept(self) -> None:
        first = ChatUsage(input_tokens=1, output_tokens=1)
        last = ChatUsage(input_tokens=5, output_tokens=7, cache_input_tokens=None)
        acc = StreamAccumulator()
        acc.add(delta(TextBlock(text="a", id="T"), usage=first))
        acc.add(delta(usage=last))
        acc.add(delta(TextBlock(text="b", id="T")))

        assert acc.build().usage is last
        assert last.cache_input_tokens is None

    def test_type_change_restarts_the_block(self) -> None:
        acc = StreamAccumulator()
        acc.add(delta(TextBlock(text="a", id="X")))
        acc.add(delta(ThinkingBlock(thinking="b", id="X")))

        (block,) = acc.build().content

        assert isinstance(block, ThinkingBlock)
        assert block.thinking == "b"

    def test_metadata_merged_and_interrupted_reason(self) -> None:
        acc = StreamAccumulator()
        chunk = delta()
        chunk.metadata = {"finish_reason": "stop"}
        acc.add(chunk)

        built = acc.build(FinishedReason.INTERRUPTED)

        assert built.metadata == {"finish_reason": "stop"}
        assert built.finished_reason == FinishedReason.INTERRUPTED
        assert not acc.has_content


# -- the call --------------------------------------------------------------------------------


async def test_stream_emits_non_empty_deltas_and_returns_final() -> None:
    usage = ChatUsage(input_tokens=3, output_tokens=2)
    model = FakeModel(
        [
            [
                delta(TextBlock(text="Hel", id="T")),
                delta(),  # an empty carrier: absorbed
                delta(TextBlock(text="lo", id="T")),
                delta(usage=usage, id="resp-9"),  # usage-only carrier: absorbed
            ]
        ]
    )
    sink = Sink()

    final = await model(MSGS, emit=sink)

    assert [texts(c) for c in sink.items] == [["Hel"], ["lo"]]
    assert all(not c.is_last for c in sink.items)
    assert final.is_last
    assert texts(final) == ["Hello"]
    assert final.usage is usage
    assert final.id == "resp-9"


async def test_stream_without_emit() -> None:
    model = FakeModel([[delta(TextBlock(text="x", id="T"))]])

    assert texts(await model(MSGS)) == ["x"]


async def test_provider_final_replaces_synthesized_one() -> None:
    own = ChatResponse(content=[TextBlock(text="own")], is_last=True)
    model = FakeModel([[delta(TextBlock(text="x", id="T")), own]])

    assert await model(MSGS) is own


async def test_non_stream_returns_the_response() -> None:
    response = ChatResponse(content=[TextBlock(text="x")], is_last=False)
    model = FakeModel([[response]], stream=False)
    sink = Sink()

    result = await model(MSGS, emit=sink)

    assert result is response
    assert result.is_last
    assert sink.items == []


async def test_cancel_mid_stream_emits_interrupted_partial_and_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = FakeModel(
        [[delta(TextBlock(text="a", id="T")), delta(TextBlock(text="b", id="T")), 10]]
    )
    sink = Sink()

    with trio.move_on_after(5) as scope:
        await model(MSGS, emit=sink)

    assert scope.cancelled_caught
    *deltas, last = sink.items
    assert [texts(c) for c in deltas] == [["a"], ["b"]]
    assert last.is_last
    assert last.finished_reason == FinishedReason.INTERRUPTED
    assert texts(last) == ["ab"]


async def test_cancelled_propagates_as_plain_cancelled() -> None:
    model = FakeModel([[delta(TextBlock(text="a", id="T")), 10]])
    caught: list[BaseException] = []

    async def emit(chunk: ChatResponse) -> None:
        if not chunk.is_last:
            scope.cancel()

    with trio.CancelScope() as scope:
        try:
            await model(MSGS, emit=emit)
        except BaseException as exc:
            caught.append(exc)
            raise

    assert len(caught) == 1
    assert type(caught[0]) is trio.Cancelled


async def test_interrupted_emission_is_bounded_by_interrupt_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = FakeModel([[10]], interrupt_grace=2.0)
    seen: list[ChatResponse] = []

    async def stuck_consumer(chunk: ChatResponse) -> None:
        seen.append(chunk)
        await trio.sleep_forever()

    start = trio.current_time()
    with trio.move_on_after(1):
        await model(MSGS, emit=stuck_consumer)

    assert [c.finished_reason for c in seen] == [FinishedReason.INTERRUPTED]
    assert trio.current_time() - start == pytest.approx(3.0)


async def test_non_stream_cancel_emits_empty_interrupted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = FakeModel([[10, ChatResponse()]], stream=False)
    sink = Sink()

    with trio.move_on_after(1):
        await model(MSGS, emit=sink)

    (last,) = sink.items
    assert (last.content, last.is_last, last.finished_reason) == (
        [],
        True,
        FinishedReason.INTERRUPTED,
    )


async def test_emit_error_propagates_unwrapped() -> None:
    model = FakeModel([[delta(TextBlock(text="a", id="T")), 10]])

    async def broken(chunk: ChatResponse) -> None:
        raise KeyError("consumer bug")

    with pytest.raises(KeyError, match="consumer bug"):
        await model(MSGS, emit=broken)


class _Spawns(trio.abc.Instrument):
    def __init__(self) -> None:
        self.spawned: list[str] = []

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned.append(task.name)


async def test_the_stream_runs_in_the_calls_task_each_delta_emitted_before_the_next() -> None:
    order: list[str] = []

    class Recording(FakeModel):
        async def _stream_api(self, messages: Any, tools: Any, tool_choice: Any, send: Any) -> None:
            for text in ("a", "b"):
                order.append(f"send {text}")
                await send(delta(TextBlock(text=text, id="T")))
                order.append(f"sent {text}")

    async def sink(chunk: ChatResponse) -> None:
        order.append(f"emit {texts(chunk)[0]}")

    spawns = _Spawns()
    trio.lowlevel.add_instrument(spawns)
    try:
        final = await Recording([])(MSGS, emit=sink)
    finally:
        trio.lowlevel.remove_instrument(spawns)
    assert texts(final) == ["ab"]
    assert spawns.spawned == []  # no reader task
    assert order == ["send a", "emit a", "sent a", "send b", "emit b", "sent b"]


async def test_a_consumer_error_reaches_the_provider_at_its_send_and_unwinds_it() -> None:
    seen: list[BaseException] = []

    class Closing(FakeModel):
        async def _stream_api(self, messages: Any, tools: Any, tool_choice: Any, send: Any) -> None:
            try:
                await send(delta(TextBlock(text="a", id="T")))
            except BaseException as exc:  # the provider's response would be closed here
                seen.append(exc)
                raise

    async def broken(chunk: ChatResponse) -> None:
        raise KeyError("consumer bug")

    with pytest.raises(KeyError, match="consumer bug"):
        await Closing([])(MSGS, emit=broken)
    assert [type(e) for e in seen] == [KeyError]


async def test_provider_bug_propagates_unwrapped() -> None:
    model = FakeModel([[ZeroDivisionError("parser bug")]])

    with pytest.raises(ZeroDivisionError):
        await model(MSGS)


# -- retries ---------------------------------------------------------------------------------


async def test_retryable_error_before_content_is_retried_with_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = FakeModel(
        [
            [ModelUpstreamError("boom", status_code=500)],
            [ModelUpstreamError("boom", status_code=502)],
            [delta(TextBlock(text="ok", id="T"))],
        ],
        retry_delay=1.0,
    )
    start = trio.current_time()

    final = await model(MSGS)

    elapsed = trio.current_time() - start
    assert texts(final) == ["ok"]
    assert len(model.calls) == 3
    # backoff 1 s then 2 s, each with up to 25 % jitter
    assert 3.0 <= elapsed <= 3.75


async def test_retry_after_is_honoured_and_capped(autojump_clock: trio.testing.MockClock) -> None:
    model = FakeModel(
        [
            [ModelRateLimitError("slow down", status_code=429, retry_after=7)],
            [ModelRateLimitError("slow down", status_code=429, retry_after=500)],
            [delta(TextBlock(text="ok", id="T"))],
        ],
        retry_delay=0.1,
        max_retry_delay=20,
    )
    start = trio.current_time()

    await model(MSGS)

    assert trio.current_time() - start == pytest.approx(27)


async def test_retries_exhausted_raises_last_error(autojump_clock: trio.testing.MockClock) -> None:
    model = FakeModel(
        [[ModelUpstreamError(f"boom {i}", status_code=500)] for i in range(3)], max_retries=2
    )

    with pytest.raises(ModelUpstreamError, match="boom 2"):
        await model(MSGS)
    assert len(model.calls) == 3


async def test_non_retryable_error_is_not_retried() -> None:
    model = FakeModel([[ModelAuthenticationError("bad key", status_code=401)], []])

    with pytest.raises(ModelAuthenticationError):
        await model(MSGS)
    assert len(model.calls) == 1


async def test_error_after_content_is_not_retried() -> None:
    model = FakeModel(
        [[delta(TextBlock(text="a", id="T")), ModelUpstreamError("cut", status_code=500)], []]
    )
    sink = Sink()

    with pytest.raises(ModelUpstreamError):
        await model(MSGS, emit=sink)
    assert len(model.calls) == 1
    assert [texts(c) for c in sink.items] == [["a"]]


async def test_carriers_alone_do_not_prevent_a_retry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = FakeModel(
        [
            [delta(usage=ChatUsage()), ModelUpstreamError("x", status_code=503)],
            [delta(TextBlock(text="ok", id="T"))],
        ]
    )

    assert texts(await model(MSGS)) == ["ok"]


async def test_cancel_during_backoff_emits_interrupted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = FakeModel([[ModelUpstreamError("x", status_code=500)], []], retry_delay=10)
    sink = Sink()

    with trio.move_on_after(5) as scope:
        await model(MSGS, emit=sink)

    assert scope.cancelled_caught
    assert [c.finished_reason for c in sink.items] == [FinishedReason.INTERRUPTED]
    assert len(model.calls) == 1


async def test_total_timeout_raises_model_timeout_without_interrupted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = FakeModel([[delta(TextBlock(text="a", id="T")), 100]], timeout=3)
    sink = Sink()

    with pytest.raises(ModelTimeoutError, match="total timeout of 3"):
        await model(MSGS, emit=sink)
    assert [c.is_last for c in sink.items] == [False]


async def test_total_timeout_covers_retries(autojump_clock: trio.testing.MockClock) -> None:
    model = FakeModel([[ModelUpstreamError("x", status_code=500)]] * 4, retry_delay=2, timeout=3)

    with pytest.raises(ModelTimeoutError):
        await model(MSGS)


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        FakeModel([], max_retries=-1)
    with pytest.raises(ValueError, match="timeout"):
        FakeModel([], timeout=0)


async def test_base_hooks_are_not_implemented() -> None:
    model = ChatModelBase("none")

    with pytest.raises(NotImplementedError):
        await model(MSGS)
    model.streaming = False
    with pytest.raises(NotImplementedError):
        await model(MSGS)
    assert repr(model) == "ChatModelBase(model='none', stream=False)"


async def test_own_client_closed_injected_client_left_open() -> None:
    async with FakeModel([]) as model:
        client = model.http_client
        assert model.http_client is client
    assert client.is_closed

    async with httpx2.AsyncClient() as injected:
        model = FakeModel([], http_client=injected)
        await model.aclose()
        assert model.http_client is injected
        assert not injected.is_closed


# -- tool choice -----------------------------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("b_tool", "a_tool")
]


async def test_tool_choice_unknown_name_in_tools() -> None:
    model = FakeModel([])

    with pytest.raises(ValueError, match=r"Invalid tool name 'x' in tool_choice.tools\. "):
        await model(MSGS, TOOLS, ToolChoice(mode="auto", tools=["x"]))
    assert model.calls == []


async def test_tool_choice_unknown_forced_name() -> None:
    model = FakeModel([])

    with pytest.raises(ValueError, match=r"Available tools: a_tool, b_tool$"):
        await model(MSGS, TOOLS, ToolChoice(mode="nope"))


async def test_tool_choice_forced_name_outside_whitelist() -> None:
    with pytest.raises(ValueError, match="forced tool"):
        ToolChoice(mode="a_tool", tools=["b_tool"])


async def test_valid_tool_choices_pass() -> None:
    model = FakeModel([[], [], []])

    await model(MSGS, TOOLS, ToolChoice(mode="a_tool"))
    await model(MSGS, TOOLS, ToolChoice(mode="required", tools=["b_tool"]))
    await model(MSGS, None, ToolChoice(mode="whatever"))  # no tools: not validated

    assert len(model.calls) == 3


# -- count_tokens ----------------------------------------------------------------------------


async def test_count_tokens_text_and_data_blocks() -> None:
    model = FakeModel([])
    image = DataBlock(source=URLSource(url="https://x/y.png", media_type="image/png"))

    assert await model.count_tokens([UserMsg("user", [TextBlock(text="hi"), image])]) == 2001


async def test_count_tokens_every_block_kind_and_tools() -> None:
    model = FakeModel([])
    image = DataBlock(source=Base64Source(data="AAAA", media_type="image/png"))
    msg = AssistantMsg(
        "a",
        [
            TextBlock(text="abcd"),
            ThinkingBlock(thinking="efgh"),
            HintBlock(hint="ijkl"),
            HintBlock(hint=[TextBlock(text="mnop"), image]),
            ToolCallBlock(id="c", name="f", input="qrst"),
            ToolResultBlock(id="c", name="f", output="uvwx"),
            ToolResultBlock(id="d", name="f", output=[TextBlock(text="yz01"), image]),
        ],
    )
    tools = [{"name": "é"}]

    text_bytes = 7 * 4 + len('[{"name": "é"}]'.encode())
    expected = int(text_bytes / 4 + 0.5) + 2 * 2000
    assert await model.count_tokens([msg], tools) == expected


# -- structured output -----------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["city"],
}


def structured_call(arguments: str, name: str = "generate_structured_output") -> list[Step]:
    return [delta(ToolCallBlock(id="call_1", name=name, input=arguments))]


async def test_structured_output_forced_and_repaired() -> None:
    model = FakeModel([structured_call('{"city": "Tok')])

    result = await model.generate_structured_output(MSGS, SCHEMA)

    assert result.content == {"city": "Tok"}
    (messages, tools, choice) = model.calls[0]
    assert choice == ToolChoice(mode="generate_structured_output")
    assert tools[0]["function"]["name"] == "generate_structured_output"
    assert tools[0]["function"]["parameters"] == SCHEMA
    reminder = messages[-1].content[-1]
    assert isinstance(reminder, TextBlock)
    assert "MUST" in reminder.text
    assert len(MSGS[0].content) == 1  # the caller's messages are not modified


async def test_structured_output_appends_user_msg_after_assistant() -> None:
    model = FakeModel([structured_call('{"city": "X"}')])

    await model.generate_structured_output([AssistantMsg("a", "hello")], SCHEMA)

    messages = model.calls[0][0]
    assert [m.role for m in messages] == ["assistant", "user"]


async def test_structured_output_pydantic_class_and_type_repair() -> None:
    class City(pydantic.BaseModel):
        city: str
        n: int

    model = FakeModel([structured_call('{"city": "Oslo", "n": "42"}')])

    result = await model.generate_structured_output(MSGS, City)

    assert result.content == {"city": "Oslo", "n": 42}


async def test_structured_output_ladder_falls_back() -> None:
    model = FakeModel(
        [
            [delta(TextBlock(text="no tool", id="T"))],  # forced: no call
            [],  # auto: nothing
            [ModelInvalidRequestError("bad", status_code=400)],  # none: rejected
        ]
    )

    with pytest.raises(ModelInvalidRequestError) as info:
        await model.generate_structured_output(MSGS, SCHEMA)

    assert isinstance(info.value.__cause__, StructuredOutputError)
    assert [c[2] for c in model.calls] == [
        ToolChoice(mode="generate_structured_output"),
        ToolChoice(mode="auto"),
        None,
    ]


async def test_structured_output_invalid_then_valid() -> None:
    model = FakeModel([structured_call('{"n": 1}'), structured_call('{"city": "Rome"}')])

    result = await model.generate_structured_output(MSGS, SCHEMA)

    assert result.content == {"city": "Rome"}
    assert len(model.calls) == 2


async def test_structured_output_other_errors_raise_at_once() -> None:
    model = FakeModel([[ModelAuthenticationError("no", status_code=401)], []])

    with pytest.raises(ModelAuthenticationError):
        await model.generate_structured_output(MSGS, SCHEMA)
    assert len(model.calls) == 1


async def test_structured_output_explicit_tool_choice_and_no_think() -> None:
    class Thinker(FakeModel):
        kwargs_seen: list[dict[str, Any]]

        def _get_disable_thinking_kwargs(self) -> dict[str, Any]:
            return {"thinking": {"type": "disabled"}}

        async def _stream_api(
            self,
            messages: list[Msg],
            tools: list[dict[str, Any]] | None,
            tool_choice: ToolChoice | None,
            send: ChunkSink,
        ) -> None:
            self.kwargs_seen.append(self._call_kwargs())
            await super()._stream_api(messages, tools, tool_choice, send)

    model = Thinker([[], [], structured_call('{"city": "A"}')])
    model.kwargs_seen = []

    await model.generate_structured_output(MSGS, SCHEMA)

    assert model.kwargs_seen == [{}, {}, {"thinking": {"type": "disabled"}}]

    explicit = FakeModel([[]])
    with pytest.raises(StructuredOutputError):
        await explicit.generate_structured_output(MSGS, SCHEMA, tool_choice=ToolChoice("required"))
    assert len(explicit.calls) == 1


async def test_structured_output_argument_checks() -> None:
    model = FakeModel([])
    with pytest.raises(ValueError, match="at least one message"):
        await model.generate_structured_output([], SCHEMA)
    with pytest.raises(TypeError, match="JSON-schema dict"):
        await model.generate_structured_output(MSGS, int)  # type: ignore[arg-type]


async def test_structured_response_fields() -> None:
    usage = ChatUsage(input_tokens=1)
    model = FakeModel([[*structured_call('{"city": "A"}'), delta(usage=usage, id="r7")]])

    result = await model.generate_structured_output(MSGS, SCHEMA)

    assert (result.id, result.usage, result.type) == ("r7", usage, "structured_response")
    assert attrs.asdict(result)["finished_reason"] == FinishedReason.COMPLETED


# -- JSON repair -----------------------------------------------------------------------------


class TestJsonRepair:
    def test_blank_is_empty_dict(self) -> None:
        assert json_loads_with_repair("  ") == {}

    def test_valid_object_returned(self) -> None:
        assert json_loads_with_repair('{"a": [1, 2]}') == {"a": [1, 2]}

    def test_truncated_is_repaired(self) -> None:
        assert json_loads_with_repair('{"city": "Tok') == {"city": "Tok"}

    def test_schema_guided_type_repair(self) -> None:
        assert json_loads_with_repair('{"city": "A", "n": "42"}', SCHEMA) == {"city": "A", "n": 42}

    def test_repair_may_not_drop_keys(self) -> None:
        schema = {**SCHEMA, "additionalProperties": False}

        assert json_loads_with_repair('{"city": "A", "x": 1}', schema) == {"city": "A", "x": 1}

    @pytest.mark.parametrize("text", ["[1, 2]", '"text"', "NaN", '{"a": NaN}', "x" * 300])
    def test_failures_raise_tool_json_decode_error(self, text: str) -> None:
        with pytest.raises(ToolJSONDecodeError) as info:
            json_loads_with_repair(text)

        assert info.value.message.startswith("<system-reminder>Error")
        assert "json.loads(your_tool_arguments)" in info.value.message


def test_flatten_json_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/A", "description": "an A"},
            "n": {"$ref": "#/$defs/Node"},
            "ext": {"$ref": "https://example.com/x"},
            "missing": {"$ref": "#/$defs/Missing"},
        },
        "$defs": {
            "A": {"type": "string", "enum": ["$ref"]},
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}},
        },
    }

    flat = flatten_json_schema(schema)

    assert "$defs" not in flat
    props = flat["properties"]
    assert props["a"] == {"type": "string", "enum": ["$ref"], "description": "an A"}
    assert props["n"]["properties"]["next"] == {
        "type": "object",
        "description": "(circular: Node)",
    }
    assert props["ext"] == {"$ref": "https://example.com/x"}
    assert props["missing"] == {"$ref": "#/$defs/Missing"}
    assert "$defs" in schema  # the input is not modified
    assert flatten_json_schema(SCHEMA) is SCHEMA


def test_model_error_is_reexported_type() -> None:
    assert issubclass(ModelTimeoutError, ModelError)


# -- the retry loop over real loopback HTTP --------------------------------------------------

KEY = "sk-edge-FAKEKEY-7f3a9c1e5d"


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    return await start_server(nursery, KEY)


class Clocked:
    """A script entry that records the (trio) time each request arrived, then answers."""

    def __init__(self, *entries: Any) -> None:
        self.entries = collections.deque(entries)
        self.times: list[float] = []

    def __call__(self, request: RecordedRequest) -> Any:
        self.times.append(trio.current_time())
        return self.entries.popleft()

    @property
    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.times, self.times[1:], strict=False)]


def push_clocked(server: OpenAICompatibleServer, *entries: Any) -> Clocked:
    clocked = Clocked(*entries)
    server.push(*[clocked] * len(entries))
    return clocked


# -- Retry-After and backoff -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "low", "high"),
    [
        pytest.param({"Retry-After": "86400"}, 4.0, 4.0, id="huge-capped"),
        pytest.param({"Retry-After": "1e999"}, 4.0, 4.0, id="infinite-capped"),
        pytest.param({"Retry-After": "2.5"}, 2.5, 2.5, id="fractional"),
        pytest.param({"Retry-After": "-30"}, 0.0, 1.25, id="negative-not-waited"),
        pytest.param({"Retry-After": "soon"}, 1.0, 1.25, id="garbage-falls-back-to-backoff"),
        pytest.param({"retry-after-ms": "1500", "Retry-After": "3"}, 1.5, 1.5, id="ms-wins"),
        pytest.param({"retry-after-ms": "nope", "Retry-After": "3"}, 3.0, 3.0, id="bad-ms"),
        pytest.param({"retry-after-ms": "250000"}, 4.0, 4.0, id="ms-capped"),
    ],
)
async def test_429_retry_after_variants(
    server: OpenAICompatibleServer,
    autojump_clock: trio.testing.MockClock,
    headers: dict[str, str],
    low: float,
    high: float,
) -> None:
    clocked = push_clocked(
        server, ScriptedError(status=429, message="slow down", headers=headers), "ok"
    )

    async with server.chat_model(retry_delay=1.0, max_retry_delay=4.0, **NO_NET_DEADLINE) as m:
        final = await m(HTTP_MSGS)

    assert text_of(final) == "ok"
    (gap,) = clocked.gaps
    assert low - 1e-6 <= gap <= high + 1e-6


async def test_http_date_retry_after_is_honoured(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    future = email.utils.formatdate(time.time() + 10, usegmt=True)
    past = email.utils.formatdate(time.time() - 3600, usegmt=True)
    clocked = push_clocked(
        server,
        ScriptedError(status=503, headers={"Retry-After": future}),
        ScriptedError(status=429, headers={"Retry-After": past}),
        "ok",
    )

    async with server.chat_model(retry_delay=5.0, max_retry_delay=60, **NO_NET_DEADLINE) as m:
        final = await m(HTTP_MSGS)

    assert text_of(final) == "ok"
    first, second = clocked.gaps
    assert 8.0 <= first <= 10.5  # whole-second dates; wall time moves on while we run
    assert second == pytest.approx(0.0, abs=1e-6)  # a date in the past: retry at once


async def test_backoff_doubles_with_upward_jitter_and_is_capped(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    clocked = push_clocked(server, *[ScriptedError(status=503)] * 5, "ok")

    async with server.chat_model(
        max_retries=5, retry_delay=1.0, max_retry_delay=3.0, **NO_NET_DEADLINE
    ) as m:
        final = await m(HTTP_MSGS)

    assert text_of(final) == "ok"
    g1, g2, g3, g4, g5 = clocked.gaps
    eps = 1e-6
    assert 1.0 - eps <= g1 <= 1.25 + eps
    assert 2.0 - eps <= g2 <= 2.5 + eps
    assert [g3, g4, g5] == pytest.approx([3.0, 3.0, 3.0])


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503, 504, 529])
async def test_retryable_statuses_are_retried(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock, status: int
) -> None:
    server.push(ScriptedError(status=status, message="transient"), "recovered")

    async with server.chat_model(retry_delay=0.5, **NO_NET_DEADLINE) as m:
        final = await m(HTTP_MSGS)

    assert text_of(final) == "recovered"
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
async def test_client_errors_are_never_retried(server: OpenAICompatibleServer, status: int) -> None:
    server.push(ScriptedError(status=status, message="no", retry_after=1), "unused")

    async with server.chat_model(max_retries=5) as m:
        with pytest.raises(ModelError) as info:
            await m(HTTP_MSGS)

    assert info.value.status_code == status
    assert not info.value.retryable
    assert len(server.requests) == 1


async def test_max_retries_zero_makes_exactly_one_request(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(ScriptedError(status=503, message="busy", retry_after=1), "unused")
    start = trio.current_time()

    async with server.chat_model(max_retries=0, **NO_NET_DEADLINE) as m:
        with pytest.raises(ModelUpstreamError, match="busy"):
            await m(HTTP_MSGS)

    assert len(server.requests) == 1
    assert trio.current_time() == start  # no sleep at all


async def test_exhausted_retries_raise_the_last_error_with_its_details(
    server: OpenAICompatibleServer,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.push(
        ScriptedError(status=503, message="first", code="c1", retry_after=1),
        ScriptedError(status=500, message="second", code="c2"),
        ScriptedError(status=429, message=f"third for key {KEY}", code="rate", retry_after=2),
        "unused",
    )

    async with server.chat_model(max_retries=2, retry_delay=0.1, **NO_NET_DEADLINE) as m:
        with (
            caplog.at_level(logging.INFO, "trioagent.model"),
            pytest.raises(ModelRateLimitError) as info,
        ):
            await m(HTTP_MSGS)

    error = info.value
    assert (error.status_code, error.code, error.retry_after) == (429, "rate", 2)
    assert error.message == "third for key ***"
    assert str(error) == (
        f"openai model {m.model} at {server.base_url}/chat/completions: "
        "HTTP 429 third for key *** (code: rate)"
    )
    assert (error.provider, error.model) == ("openai", m.model)
    assert error.endpoint == f"{server.base_url}/chat/completions"
    assert error.retryable
    assert len(server.requests) == 3
    assert server.script[0] == "unused"
    # A retried error is handled: INFO, so an app that configured no logging prints nothing.
    assert [r.levelname for r in caplog.records] == ["INFO", "INFO"]
    assert "HTTP 503 first (code: c1)" in caplog.records[0].getMessage()
    assert KEY not in caplog.text


async def test_retry_after_past_the_total_timeout_gives_up_at_once(
    server: OpenAICompatibleServer,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Sleeping into the deadline could only end in a timeout: the provider's own error is
    raised instead, at once."""
    caplog.set_level(logging.INFO, logger="trioagent.model")
    server.push(ScriptedError(status=429, message="slow down", retry_after=20), "unused")
    sink = Sink()
    start = trio.current_time()

    async with server.chat_model(timeout=5, max_retry_delay=60, **NO_NET_DEADLINE) as m:
        with pytest.raises(ModelRateLimitError, match="slow down") as info:
            await m(HTTP_MSGS, emit=sink)
        assert busy(m) == []

    assert trio.current_time() == start
    assert info.value.retry_after == 20
    assert len(server.requests) == 1
    assert sink.items == []  # an error, not an interruption
    assert "not retried: Retry-After 20.00s is past the total timeout" in caplog.text


async def test_retry_after_within_the_total_timeout_is_honoured(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    clocked = push_clocked(server, ScriptedError(status=429, retry_after=3), "ok")

    async with server.chat_model(timeout=5, **NO_NET_DEADLINE) as m:
        final = await m(HTTP_MSGS)

    assert text_of(final) == "ok"
    assert clocked.gaps == [pytest.approx(3)]


async def test_total_timeout_while_backing_off_names_the_provider_error(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(ScriptedError(status=503, message=f"busy, key {KEY}", code="overloaded"), "unused")
    sink = Sink()
    start = trio.current_time()

    async with server.chat_model(
        timeout=5, retry_delay=10, max_retry_delay=10, **NO_NET_DEADLINE
    ) as m:
        with pytest.raises(ModelTimeoutError) as info:
            await m(HTTP_MSGS, emit=sink)
        assert busy(m) == []

    assert trio.current_time() - start == pytest.approx(5)
    error = info.value
    assert str(error) == (
        f"openai model {m.model} at {server.base_url}/chat/completions: the call did not "
        "finish within its total timeout of 5s while retrying after the provider error: "
        "HTTP 503 busy, key *** (code: overloaded)"
    )
    assert not error.retryable
    cause = error.__cause__
    assert isinstance(cause, ModelUpstreamError)
    assert (cause.status_code, cause.code) == (503, "overloaded")
    assert len(server.requests) == 1
    assert sink.items == []


async def test_total_timeout_during_the_retried_attempt_names_the_earlier_error(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(
        ScriptedError(status=429, message="later", retry_after=1),
        ScriptedSSE(events=[ROLE], done=False, chunk_delay=60),
    )

    async with server.chat_model(timeout=5, **NO_NET_DEADLINE) as m:
        with pytest.raises(ModelTimeoutError, match="after the provider error: HTTP 429 later"):
            await m(HTTP_MSGS)
        assert busy(m) == []

    assert len(server.requests) == 2


# -- where in the stream an error lands ------------------------------------------------------


async def test_stream_ending_without_done_before_content_is_retried(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(
        ScriptedSSE(events=[ROLE, ": keep-alive\n\n", USAGE], done=False),
        ScriptedReply(text="second", chunk_size=3),
    )
    sink = Sink()

    async with server.chat_model(**NO_NET_DEADLINE) as m:
        final = await m(HTTP_MSGS, emit=sink)

    assert text_of(final) == "second"
    assert response_texts(sink.items) == ["sec", "ond"]  # nothing of the first attempt leaked out
    assert len(server.requests) == 2


async def test_cut_after_the_first_content_chunk_is_never_replayed(
    server: OpenAICompatibleServer,
) -> None:
    server.push(
        ScriptedReply(text="abcdefgh", chunk_size=2, cut_after=3, cut_abruptly=True), "unused"
    )
    sink = Sink()

    async with server.chat_model(max_retries=5, retry_delay=0.001) as m:
        with pytest.raises(ModelStreamError, match="stream was cut") as info:
            await m(HTTP_MSGS, emit=sink)
        assert busy(m) == []

    assert info.value.retryable  # retryable in principle, but content was already emitted
    assert len(server.requests) == 1
    assert list(server.script) == ["unused"]
    assert response_texts(sink.items) == ["ab", "cd"]  # the partial deltas reached the consumer
    assert all(not c.is_last for c in sink.items)  # no INTERRUPTED final for an error


async def test_thinking_only_counts_as_content_and_blocks_a_retry(
    server: OpenAICompatibleServer,
) -> None:
    server.push(ScriptedSSE(events=[chunk({"reasoning_content": "hmm"})], done=False), "unused")
    sink = Sink()

    async with server.chat_model(max_retries=3, retry_delay=0.001) as m:
        with pytest.raises(ModelStreamError, match=r"ended before 'data: \[DONE\]'"):
            await m(HTTP_MSGS, emit=sink)

    assert len(server.requests) == 1
    assert [type(b) for c in sink.items for b in c.content] == [ThinkingBlock]


async def test_error_object_before_content_is_not_retried_and_keeps_its_details(
    server: OpenAICompatibleServer,
) -> None:
    error = {"message": f"context too long for {KEY}", "type": "invalid_request", "code": "ctx"}
    server.push(ScriptedSSE(events=[ROLE, {"error": error}]), "unused")
    sink = Sink()

    async with server.chat_model(max_retries=3, retry_delay=0.001) as m:
        with pytest.raises(ModelUpstreamError) as info:
            await m(HTTP_MSGS, emit=sink)

    assert info.value.message == "context too long for ***"
    assert info.value.code == "ctx"
    assert not info.value.retryable
    assert len(server.requests) == 1
    assert sink.items == []


# -- cancellation ----------------------------------------------------------------------------


async def test_cancel_during_the_backoff_sleep(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(ScriptedError(status=429, message="later", retry_after=10), "never sent")
    sink = Sink()

    async with server.chat_model(**NO_NET_DEADLINE) as m:
        with trio.move_on_after(4) as scope:
            await m(HTTP_MSGS, emit=sink)
        assert scope.cancelled_caught  # trio.Cancelled propagated out of the call
        (interrupted,) = sink.items
        assert interrupted.is_last
        assert interrupted.finished_reason == FinishedReason.INTERRUPTED
        assert interrupted.content == []
        await trio.sleep(60)  # long past the Retry-After: no request is made any more
        assert len(server.requests) == 1
        assert busy(m) == []
    with trio.fail_after(5):
        await server.wait_all_closed()


async def test_cancel_while_a_stream_stalls_before_its_first_chunk(
    server: OpenAICompatibleServer,
) -> None:
    server.push(ScriptedReply(text="never", stall_after=1))  # the role chunk, then silence
    sink = Sink()

    async with server.chat_model() as m:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(m, HTTP_MSGS, emit=sink))
            with trio.fail_after(5):
                await server.wait_until(lambda: len(server.requests) == 1)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert [(c.is_last, c.finished_reason, c.content) for c in sink.items] == [
            (True, FinishedReason.INTERRUPTED, [])
        ]
        assert open_connections(m.http_client) == []  # a half-read stream is closed, never pooled
    with trio.fail_after(5):
        await server.wait_all_closed()
    assert server.connections[0].closed_by_client


class _StepCounter(trio.abc.Instrument):
    """Counts the schedule points of one task and its descendants; cancels at the k-th."""

    def __init__(self, root: trio.lowlevel.Task, cancel_at: int | None, scope: trio.CancelScope):
        self.root, self.cancel_at, self.scope = root, cancel_at, scope
        self.steps = 0

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        current: trio.lowlevel.Task | None = task
        while current is not None and current is not self.root:
            nursery = current.parent_nursery
            current = nursery.parent_task if nursery is not None else None
        if current is None:
            return
        self.steps += 1
        if self.steps == self.cancel_at:
            self.scope.cancel()


async def _swept_call(cancel_at: int | None) -> dict[str, Any]:
    """One call of a fresh model against a fresh server scripted with a 503 (``Retry-After:
    1``) and then a streamed reply, cancelled after its ``cancel_at``-th schedule point."""
    run: dict[str, Any] = {"sink": Sink(), "cancelled": False, "final": None}
    async with trio.open_nursery() as servers:
        server = await servers.start(
            partial(
                serve_openai_compatible,
                [
                    ScriptedError(status=503, retry_after=1),
                    ScriptedReply(text="abcdefgh", chunk_size=3),
                ],
            )
        )
        model = server.chat_model(**NO_NET_DEADLINE)
        scope = trio.CancelScope()

        async def call() -> None:
            counter = _StepCounter(trio.lowlevel.current_task(), cancel_at, scope)
            trio.lowlevel.add_instrument(counter)
            try:
                with scope:
                    try:
                        run["final"] = await model(HTTP_MSGS, emit=run["sink"])
                    except trio.Cancelled:
                        run["cancelled"] = True
                        raise
            finally:
                trio.lowlevel.remove_instrument(counter)
                run["steps"] = counter.steps

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
        run["requests"] = len(server.requests)
        run["busy"] = busy(model)
        await model.aclose()
        with trio.fail_after(5):
            await server.wait_all_closed()
        servers.cancel_scope.cancel()
    return run


async def test_cancel_a_retried_http_call_at_every_schedule_point(
    autojump_clock: trio.testing.MockClock,
) -> None:
    baseline = await _swept_call(None)
    assert text_of(baseline["final"]) == "abcdefgh"
    assert baseline["requests"] == 2
    seen: collections.Counter[tuple[int, bool]] = collections.Counter()
    for k in range(1, baseline["steps"] + 1):
        run = await _swept_call(k)
        assert run["busy"] == [], k
        if run["final"] is not None:  # socket timing moved the end before point k
            assert text_of(run["final"]) == "abcdefgh", k
            continue
        assert run["cancelled"], k  # never swallowed, never turned into another error
        *deltas, last = run["sink"].items
        assert last.is_last, k
        assert last.finished_reason == FinishedReason.INTERRUPTED, k
        assert all(not d.is_last for d in deltas), k
        assert text_of(last) == "".join(response_texts(deltas)), k
        seen[(run["requests"], bool(deltas))] += 1
    assert seen[(0, False)] >= 1  # cancelled while connecting / sending the first request
    assert seen[(1, False)] >= 1  # cancelled on the 503 or during the backoff sleep
    assert seen[(2, False)] >= 1  # cancelled after the retry was sent, before content
    assert seen[(2, True)] >= 1  # cancelled mid-body: the partial is the emitted text


# -- the agent's retries and fallback model --------------------------------------------------


def _agent(model: ChatModelBase, **kwargs: Any) -> Agent:
    return Agent(
        "assistant",
        "Be brief.",
        model,
        injection_config=InjectionConfig(inject_runtime_state=False),
        **kwargs,
    )


async def _two_servers(nursery: trio.Nursery) -> tuple[OpenAICompatibleServer, ...]:
    return (await start_server(nursery, KEY), await start_server(nursery, KEY))


async def test_agent_falls_back_after_the_primarys_retries_are_exhausted(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    primary_server, fallback_server = await _two_servers(nursery)
    primary_server.push(*[ScriptedError(status=503, message="down")] * 4)
    fallback_server.push(ScriptedReply(text="from the fallback", chunk_size=5))
    events: list[Any] = []

    async def on_event(event: Any) -> None:
        events.append(event)

    async with (
        primary_server.chat_model("primary", max_retries=1, **NO_NET_DEADLINE) as primary,
        fallback_server.chat_model("backup", **NO_NET_DEADLINE) as fallback,
    ):
        agent = _agent(primary, model_config=ModelConfig(max_retries=1, fallback_model=fallback))
        msg = await agent.reply(UserMsg("user", "hi"), on_event=on_event)
        assert busy(primary) == busy(fallback) == []

    assert msg.get_text_content() == "from the fallback"
    # (1 + model retries) x (1 + agent retries) requests to the primary, then one fallback call.
    assert len(primary_server.requests) == 4
    assert [r.body["model"] for r in fallback_server.requests] == ["backup"]
    deltas = [e.delta for e in events if isinstance(e, TextBlockDeltaEvent)]
    assert "".join(deltas) == "from the fallback"
    (end,) = [e for e in events if isinstance(e, ReplyEndEvent)]
    assert end.finished_reason == "completed"


async def test_agent_does_not_fall_back_once_chunks_were_streamed(
    nursery: trio.Nursery,
) -> None:
    primary_server, fallback_server = await _two_servers(nursery)
    primary_server.push(
        ScriptedReply(text="partial answer", chunk_size=4, cut_after=3, cut_abruptly=True)
    )
    events: list[Any] = []

    async def on_event(event: Any) -> None:
        events.append(event)

    async with (
        primary_server.chat_model(max_retries=3, retry_delay=0.001) as primary,
        fallback_server.chat_model() as fallback,
    ):
        agent = _agent(primary, model_config=ModelConfig(max_retries=2, fallback_model=fallback))
        with pytest.raises(ModelStreamError, match="stream was cut"):
            await agent.reply(UserMsg("user", "hi"), on_event=on_event)
        assert busy(primary) == []

    assert len(primary_server.requests) == 1  # neither the model nor the agent replayed it
    assert fallback_server.requests == []
    assert [e.delta for e in events if isinstance(e, TextBlockDeltaEvent)] == ["part", "ial "]
    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    assert end.finished_reason == "error"
    assert end.error is not None
    assert "stream was cut" in end.error.message


async def test_agent_error_end_keeps_the_status_and_hides_the_key(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trioagent")  # retries are logged at INFO
    primary_server, fallback_server = await _two_servers(nursery)
    primary_server.push(ScriptedError(status=401, message=f"Incorrect API key provided: {KEY}"))
    fallback_server.push(ScriptedError(status=400, message=f"bad request for {KEY}", code="x"))
    events: list[Any] = []

    async def on_event(event: Any) -> None:
        events.append(event)

    async with (
        primary_server.chat_model() as primary,
        fallback_server.chat_model() as fallback,
    ):
        agent = _agent(primary, model_config=ModelConfig(fallback_model=fallback))
        with pytest.raises(ModelInvalidRequestError) as info:
            await agent.reply(UserMsg("user", "hi"), on_event=on_event)

    origin = f"openai model {fallback.model} at {fallback_server.base_url}/chat/completions"
    assert str(info.value) == f"{origin}: HTTP 400 bad request for *** (code: x)"
    # Even a 401 is retried by the agent (any error), then the fallback is tried once.
    assert (len(primary_server.requests), len(fallback_server.requests)) == (1, 1)
    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    assert end.error is not None
    assert end.error.message == f"{origin}: HTTP 400 bad request for *** (code: x)"
    assert (end.error.provider, end.error.model) == ("openai", fallback.model)
    assert end.error.endpoint == f"{fallback_server.base_url}/chat/completions"
    assert KEY not in caplog.text
    assert "Incorrect API key provided: ***" in caplog.text


# -- credentials never leak ------------------------------------------------------------------


async def test_key_is_redacted_from_error_bodies_reprs_and_logs(
    server: OpenAICompatibleServer,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="trioagent")  # retries are logged at INFO

    def echo_raw(request: RecordedRequest) -> ScriptedResponse:
        auth = request.headers["authorization"]
        return ScriptedResponse(status=502, body=f"<h1>Bad gateway</h1>{auth}".encode())

    server.add_route("POST", "/v1/raw/chat/completions", echo_raw)
    server.push(*[ScriptedError(status=500, message=f"oops, key={KEY}")] * 2)
    credential = OpenAICredential(api_key=KEY, base_url=f"{server.base_url}/raw")

    async with server.chat_model(max_retries=1, **NO_NET_DEADLINE) as m:
        m.credential = credential
        with pytest.raises(ModelUpstreamError) as raw_info:
            await m(HTTP_MSGS)
        m.credential = server.credential()
        with pytest.raises(ModelUpstreamError) as json_info:
            await m(HTTP_MSGS)
        shown = [repr(m), str(m), repr(m.credential), str(m.credential)]

    origin = f"openai model {m.model} at {server.base_url}"
    assert str(raw_info.value) == (
        f"{origin}/raw/chat/completions: HTTP 502 <h1>Bad gateway</h1>Bearer ***"
    )
    assert str(json_info.value) == (
        f"{origin}/chat/completions: HTTP 500 oops, key=*** (code: server_error)"
    )
    for text in [*shown, repr(raw_info.value), repr(json_info.value), caplog.text]:
        assert KEY not in text
    assert caplog.records  # the retries were logged, redacted


async def test_key_in_the_base_url_is_not_in_transport_errors() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there
    credential = OpenAICredential(
        api_key=KEY, base_url=f"http://user:{KEY}@127.0.0.1:{port}/v1?api-key={KEY}"
    )

    async with OpenAIChatModel("m", credential=credential, max_retries=0) as m:
        with pytest.raises(ModelError, match="could not reach") as info:
            await m(HTTP_MSGS)

    assert KEY not in str(info.value)
    assert KEY not in repr(info.value)


# -- structured output and token counting over HTTP ------------------------------------------

PNG = Base64Source(data="iVBORw0KGgo=", media_type="image/png")
N_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def test_structured_output_strategies_over_http(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    call = ScriptedToolCall("generate_structured_output", '{"n": "7"}')
    server.push(
        ScriptedError(status=503),  # retried by the model: the same strategy again
        ScriptedError(status=400, message="tool_choice not supported"),  # next strategy
        ScriptedReply(text="I'd rather chat."),  # no tool call: next strategy
        ScriptedReply(tool_calls=[call]),
    )
    async with server.chat_model(retry_delay=0.1, **NO_NET_DEADLINE) as m:
        result = await m.generate_structured_output(HTTP_MSGS, N_SCHEMA)

    assert result.content == {"n": 7}
    choices = [r.body.get("tool_choice", "<absent>") for r in server.requests]
    forced = {"type": "function", "function": {"name": "generate_structured_output"}}
    assert choices == [forced, forced, "auto", "<absent>"]
    assert all(r.body["tools"][0]["function"]["parameters"] == N_SCHEMA for r in server.requests)


async def test_structured_output_does_not_swallow_a_non_retryable_error(
    server: OpenAICompatibleServer,
) -> None:
    server.push(ScriptedError(status=401, message="nope"), "unused")

    async with server.chat_model() as m:
        with pytest.raises(ModelAuthenticationError):
            await m.generate_structured_output(HTTP_MSGS, N_SCHEMA)

    assert len(server.requests) == 1


async def test_count_tokens_counts_utf8_bytes_and_makes_no_request(
    server: OpenAICompatibleServer,
) -> None:
    msgs = [
        UserMsg("user", "é" * 8),  # 16 bytes
        UserMsg("user", [TextBlock(text="abcd"), DataBlock(source=PNG)]),  # 4 bytes + 2000
    ]
    tools = [{"type": "function", "function": {"name": "ü"}}]

    async with server.chat_model() as m:
        count = await m.count_tokens(msgs, tools)

    tool_bytes = len(json.dumps(tools, ensure_ascii=False).encode())
    assert count == int((16 + 4 + tool_bytes) / 4 + 0.5) + 2000
    assert server.requests == []


# -- connecting ------------------------------------------------------------------------------


async def _unanswered_port(sockets: list[trio.socket.SocketType]) -> int:
    """A loopback port whose accept queue is full: a new connect hangs in the SYN phase."""
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    sockets.append(listener)
    port: int = listener.getsockname()[1]
    for _ in range(8):
        filler = trio.socket.socket()
        sockets.append(filler)
        with trio.move_on_after(0.05) as probe:
            await filler.connect(("127.0.0.1", port))
        if probe.cancelled_caught:  # this connect hung: the queue is full
            return port
    raise AssertionError("could not fill the accept queue")


async def test_cancel_and_timeout_while_connecting(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="trioagent")  # retries are logged at INFO
    sockets: list[trio.socket.SocketType] = []
    try:
        port = await _unanswered_port(sockets)
        credential = OpenAICredential(api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1")
        sink = Sink()
        async with OpenAIChatModel("m", credential=credential, connect_timeout=None) as m:
            with trio.move_on_after(0.1) as scope:
                await m(HTTP_MSGS, emit=sink)
            assert scope.cancelled_caught
            assert [(c.finished_reason, c.content) for c in sink.items] == [
                (FinishedReason.INTERRUPTED, [])
            ]
            assert open_connections(m.http_client) == []

        async with OpenAIChatModel(
            "m", credential=credential, connect_timeout=0.05, max_retries=1, retry_delay=0.01
        ) as m:
            with trio.fail_after(5), pytest.raises(ModelTimeoutError) as info:
                await m(HTTP_MSGS)
            assert open_connections(m.http_client) == []
        assert str(info.value).startswith(
            f"openai model m at http://127.0.0.1:{port}/v1/chat/completions: timed out connecting"
        )
        assert info.value.retryable
        assert [r.getMessage().count("retry 1 of 1") for r in caplog.records] == [1]
        assert KEY not in caplog.text
    finally:
        for sock in sockets:
            sock.close()


# -- provider text in errors is redacted -----------------------------------------------------


async def test_bad_chunk_error_in_the_end_event_and_logs_hides_the_key(
    server: OpenAICompatibleServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.push(ScriptedSSE(events=[chunk({"content": "Hi"}), f"data: {{oops {KEY}\n\n"]))
    events: list[Any] = []

    async def on_event(event: Any) -> None:
        events.append(event)

    async with server.chat_model(max_retries=0) as m:
        with pytest.raises(ModelStreamError):
            await _agent(m).reply(UserMsg("user", "hi"), on_event=on_event)

    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    assert end.error is not None
    assert end.error.message.startswith(
        f"openai model {m.model} at {server.base_url}/chat/completions: "
        f"unparseable chunk in the stream of {m.model!r}: "
    )
    assert "{oops ***" in end.error.message
    assert KEY not in caplog.text


class _UnredactedModel(ChatModelBase):
    """A provider that quotes the key in its errors without redacting it."""

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        send: ChunkSink,
    ) -> None:
        raise ModelUpstreamError(f"echo of {KEY}", status_code=500, code=f"c_{KEY}")


async def test_every_provider_error_is_redacted_before_it_is_logged_or_raised(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The safety net of the retry loop, for a provider that forgets to redact."""
    caplog.set_level(logging.INFO, logger="trioagent")  # retries are logged at INFO
    model = _UnredactedModel("m", credential=OpenAICredential(api_key=KEY), max_retries=1)

    with pytest.raises(ModelUpstreamError) as info:
        await model(HTTP_MSGS)

    error = info.value
    assert (error.message, error.code) == ("echo of ***", "c_***")
    assert KEY not in repr(error)
    assert KEY not in str(error)
    assert caplog.records  # the retry was logged, redacted
    assert KEY not in caplog.text


# -- Retry-After dates and long backoffs -----------------------------------------------------


@pytest.fixture
def local_time_not_utc() -> Iterator[None]:
    """Local time 5 hours ahead of UTC (a POSIX TZ string: no zone database needed)."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "XXX-05"
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()


@pytest.mark.parametrize(
    "style",
    [
        pytest.param("asctime", id="asctime"),
        pytest.param("rfc850", id="rfc850"),
        pytest.param("imf", id="imf-fixdate"),
    ],
)
async def test_retry_after_dates_are_gmt_whatever_the_local_time(
    server: OpenAICompatibleServer,
    autojump_clock: trio.testing.MockClock,
    local_time_not_utc: None,
    style: str,
) -> None:
    when = time.gmtime(time.time() + 20)
    formats = {
        "asctime": "%a %b %d %H:%M:%S %Y",
        "rfc850": "%A, %d-%b-%y %H:%M:%S GMT",
        "imf": "%a, %d %b %Y %H:%M:%S GMT",
    }
    value = time.strftime(formats[style], when)
    clocked = push_clocked(server, ScriptedError(status=503, headers={"Retry-After": value}), "ok")

    async with server.chat_model(max_retry_delay=60, **NO_NET_DEADLINE) as m:
        final = await m(HTTP_MSGS)

    assert text_of(final) == "ok"
    (gap,) = clocked.gaps
    assert 18.0 <= gap <= 20.5  # whole-second dates; wall time moves on while we run


@pytest.mark.parametrize("attempt", [1023, 1024, 10**6])
def test_backoff_of_a_very_late_attempt_is_the_cap(attempt: int) -> None:
    model = OpenAIChatModel("m", credential=OpenAICredential(api_key=KEY), max_retry_delay=7.5)

    assert model._retry_delay_for(attempt, ModelUpstreamError("x")) == 7.5


def test_backoff_with_no_base_delay_stays_zero_for_a_very_late_attempt() -> None:
    model = OpenAIChatModel("m", credential=OpenAICredential(api_key=KEY), retry_delay=0.0)

    assert model._retry_delay_for(10**6, ModelUpstreamError("x")) == 0.0


# -- faults: which model failed, answers that are no stream, oversized events ----------------


def _faults_model(base_url: str, **kwargs: Any) -> OpenAIChatModel:
    credential = OpenAICredential(api_key=KEY, base_url=base_url)
    kwargs.setdefault("max_retries", 2)
    kwargs.setdefault("retry_delay", 0.001)
    return OpenAIChatModel("gpt-4o-mini", credential=credential, **kwargs)


@pytest.mark.parametrize(
    ("answer", "error_type", "detail"),
    [
        (ScriptedError(status=503, message="down", type="x"), ModelUpstreamError, "HTTP 503 down"),
        (
            ScriptedReply(text="Hello there", cut_after=2, cut_abruptly=True),
            ModelStreamError,
            "the stream was cut",
        ),
        (ScriptedSSE(events=[ROLE, "data: {oops\n\n"]), ModelStreamError, "unparseable chunk"),
        (ScriptedReply(text="Hi", stall_after=1), ModelTimeoutError, "timed out waiting"),
    ],
)
async def test_every_model_error_names_the_provider_model_and_endpoint(
    nursery: trio.Nursery, answer: Any, error_type: type[ModelError], detail: str
) -> None:
    """``str(exc)`` and the reply's ``ErrorInfo`` say which model failed, at which URL
    (never with the URL's credentials)."""
    plain = await start_server(nursery)
    plain.push(*[answer] * 3)
    host = plain.base_url.removeprefix("http://")
    events: list[Any] = []

    async def on_event(event: Any) -> None:
        events.append(event)

    async with _faults_model(f"http://user:pw-secret@{host}", max_retries=0, read_timeout=0.5) as m:
        with pytest.raises(error_type) as info:
            await _agent(m).reply(UserMsg("user", "hi"), on_event=on_event)

    endpoint = f"{plain.base_url}/chat/completions"
    exc = info.value
    assert (exc.provider, exc.model, exc.endpoint) == ("openai", "gpt-4o-mini", endpoint)
    assert str(exc).startswith(f"openai model gpt-4o-mini at {endpoint}: {detail}")
    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    assert end.error is not None
    assert end.error.message == str(exc)
    assert (end.error.provider, end.error.model, end.error.endpoint) == (
        "openai",
        "gpt-4o-mini",
        endpoint,
    )
    assert "pw-secret" not in str(exc)
    assert "pw-secret" not in repr(end.error)


@pytest.mark.parametrize(
    ("media_type", "body"),
    [
        (
            "text/html",
            b"<html><body><h1>Sign in</h1><p>token " + KEY.encode() + b"</p></body></html>",
        ),
        ("text/html", b"<!doctype html><html>" + b"<p>proxy login</p>" * 200 + b"</html>"),
        ("text/plain", b"Service temporarily unavailable, key " + KEY.encode()),
    ],
)
async def test_a_200_that_is_no_stream_is_a_typed_error_not_retried(
    server: OpenAICompatibleServer, media_type: str, body: bytes
) -> None:
    """A proxy's login page or a plain text answering a streaming request: one request, a
    ``ModelStreamError`` naming the content type with a short redacted excerpt — not a
    stream "closed early" that is retried."""
    server.add_route(
        "POST",
        "/v1/page/chat/completions",
        lambda r: ScriptedResponse(body=[body[:40], body[40:]], media_type=media_type),
    )
    async with _faults_model(f"{server.base_url}/page", max_retries=3) as m:
        with pytest.raises(ModelStreamError) as info:
            await m(HTTP_MSGS)
        assert busy(m) == []

    exc = info.value
    assert not exc.retryable
    assert exc.status_code == 200
    assert f"is {media_type}, not an event stream: " in exc.message
    assert body[:12].decode() in exc.message
    assert len(exc.message) < 400
    assert KEY not in str(exc)
    assert [r.path for r in server.requests] == ["/v1/page/chat/completions"]


@pytest.mark.parametrize("limit", [1000, None])
async def test_one_oversized_event_is_a_typed_error_not_buffered(
    server: OpenAICompatibleServer, limit: int | None
) -> None:
    """A line that never ends (10 MB without a newline) fails once it passes the model's
    ``max_event_size`` (default 4 MiB); not retried."""
    size = 5000 if limit else 10 * 1024 * 1024
    piece = 1024 * 1024 if not limit else 500
    pieces = [b"data: "] + [b"x" * piece] * (size // piece)
    server.add_route(
        "POST",
        "/v1/big/chat/completions",
        lambda r: ScriptedResponse(body=pieces, media_type="text/event-stream"),
    )
    kwargs: dict[str, Any] = {"max_retries": 3}
    if limit:
        kwargs["max_event_size"] = limit
    async with _faults_model(f"{server.base_url}/big", **kwargs) as m:
        with pytest.raises(ModelStreamError) as info:
            await m(HTTP_MSGS)
        assert busy(m) == []

    expected = limit or 4 * 1024 * 1024
    assert f"larger than {expected} characters" in info.value.message
    assert not info.value.retryable
    assert len(server.requests) == 1


def test_max_event_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_event_size"):
        _faults_model("http://h/v1", max_event_size=0)


def _provider_metadata(provider: str, reason: str) -> dict[str, Any]:
    """The metadata a provider's parser gives for a last chunk that stopped with ``reason``."""
    from trioagent.model._anthropic_stream import AnthropicStreamParser
    from trioagent.model._gemini import GeminiStreamParser
    from trioagent.model._ollama import OllamaStreamParser
    from trioagent.model._openai import OpenAIStreamParser

    acc = StreamAccumulator()
    match provider:
        case "openai":
            parsed = OpenAIStreamParser(0.0).parse(chunk({}, reason))
            assert parsed is not None
            acc.add(parsed)
        case "anthropic":
            for delta in AnthropicStreamParser(0.0).feed(
                {"type": "message_delta", "delta": {"stop_reason": reason}}
            ):
                acc.add(delta)
        case "gemini":
            parsed = GeminiStreamParser(0.0).parse({"candidates": [{"finishReason": reason}]})
            assert parsed is not None
            acc.add(parsed)
        case _:
            acc.add(OllamaStreamParser(0.0).parse({"done": True, "done_reason": reason}))
    return acc.build().metadata


@pytest.mark.parametrize(
    ("provider", "cut", "normal"),
    [
        ("openai", "length", "stop"),
        ("anthropic", "max_tokens", "end_turn"),
        ("gemini", "MAX_TOKENS", "STOP"),
        ("ollama", "length", "stop"),
    ],
)
async def test_each_providers_output_limit_reason_marks_the_response_max_tokens(
    provider: str, cut: str, normal: str
) -> None:
    from trioagent.model._response import finished_reason_of

    assert finished_reason_of(_provider_metadata(provider, cut)) == FinishedReason.MAX_TOKENS
    assert finished_reason_of(_provider_metadata(provider, normal)) == FinishedReason.COMPLETED


@pytest.mark.parametrize(
    ("provider", "filtered"),
    [
        ("openai", "content_filter"),
        ("anthropic", "refusal"),
        ("gemini", "SAFETY"),
        ("gemini", "RECITATION"),
        ("gemini", "PROHIBITED_CONTENT"),
    ],
)
async def test_each_providers_content_filter_reason_marks_the_response_content_filter(
    provider: str, filtered: str
) -> None:
    from trioagent.model._response import finished_reason_of

    reason = finished_reason_of(_provider_metadata(provider, filtered))
    assert reason == FinishedReason.CONTENT_FILTER


async def test_a_prompt_gemini_blocked_marks_the_response_content_filter() -> None:
    from trioagent.model._gemini import GeminiStreamParser
    from trioagent.model._response import finished_reason_of

    acc = StreamAccumulator()
    parsed = GeminiStreamParser(0.0).parse({"promptFeedback": {"blockReason": "SAFETY"}})
    assert parsed is not None
    acc.add(parsed)
    assert finished_reason_of(acc.build().metadata) == FinishedReason.CONTENT_FILTER


async def test_a_cut_off_openai_response_is_max_tokens_streamed_or_not(
    server: OpenAICompatibleServer,
) -> None:
    from trioagent.testing import ScriptedToolCall

    cut = ScriptedReply(
        tool_calls=[ScriptedToolCall("lookup", '{"city": "Par')], finish_reason="length"
    )
    server.push(cut, cut, "fine")
    async with server.chat_model() as m:
        streamed = await m(HTTP_MSGS)
        m.streaming = False
        whole = await m(HTTP_MSGS)
        fine = await m(HTTP_MSGS)
    assert streamed.finished_reason == whole.finished_reason == FinishedReason.MAX_TOKENS
    assert fine.finished_reason == FinishedReason.COMPLETED

"""ChatModelBase (trioagent/model/_base.py) and its accumulator, with an in-test provider.

``FakeModel`` streams scripted attempts: each attempt is a list of steps — a ChatResponse
to send, a number of seconds to sleep, or an exception to raise.  Tests run on
``autojump_clock`` so sleeps take no real time.
"""

from __future__ import annotations

import base64
from typing import Any

import attrs
import pydantic
import pytest
import trio
import trio.testing

from trioagent.exception import (
    ModelAuthenticationError,
    ModelError,
    ModelInvalidRequestError,
    ModelRateLimitError,
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
    StreamAccumulator,
    flatten_json_schema,
    json_loads_with_repair,
)
from trioagent.model._accumulator import wav_header
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

    async def _run_steps(self, send: trio.MemorySendChannel[ChatResponse] | None) -> list[Any]:
        sent: list[Any] = []
        for step in self.attempts.pop(0):
            if isinstance(step, Exception):
                raise step
            if isinstance(step, int | float):
                await trio.sleep(step)
            elif send is not None:
                await send.send(step)
            else:
                sent.append(step)
        return sent

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        send: trio.MemorySendChannel[ChatResponse],
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


class Sink:
    def __init__(self) -> None:
        self.items: list[ChatResponse] = []

    async def __call__(self, chunk: ChatResponse) -> None:
        self.items.append(chunk)


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
    model.stream = False
    with pytest.raises(NotImplementedError):
        await model(MSGS)
    assert repr(model) == "ChatModelBase(model='none', stream=False)"


async def test_own_client_closed_injected_client_left_open() -> None:
    async with FakeModel([]) as model:
        client = model.http_client
        assert model.http_client is client
    assert client.is_closed

    import httpx

    async with httpx.AsyncClient() as injected:
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
            send: trio.MemorySendChannel[ChatResponse],
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

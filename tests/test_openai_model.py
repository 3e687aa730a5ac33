"""OpenAIChatModel (trioagent/model/_openai.py) over the real loopback server.

Every call goes through real sockets, real HTTP/1.1 and real SSE parsing to
``serve_openai_compatible``; httpx2 is never patched.  Tests that involve backoff sleeps use
``autojump_clock`` (loopback I/O completes without waiting, so only the sleeps jump).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import httpx2
import pytest
import trio
import trio.lowlevel
import trio.testing
from provider_kit import (
    MSGS,
    ROLE,
    Sink,
    busy,
    call_cancelled_after,
    open_connections,
    start_server,
    text_of,
)

from trioagent.credential import OpenAICredential
from trioagent.exception import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelCredentialError,
    ModelInvalidRequestError,
    ModelPermissionError,
    ModelRateLimitError,
    ModelStreamError,
    ModelTimeoutError,
    ModelUpstreamError,
)
from trioagent.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    UserMsg,
)
from trioagent.model import OpenAIChatModel, OpenAIChatParameters
from trioagent.model._accumulator import wav_header
from trioagent.testing import (
    OpenAICompatibleServer,
    ScriptedError,
    ScriptedReply,
    ScriptedResponse,
    ScriptedSSE,
    ScriptedToolCall,
)
from trioagent.types import FinishedReason, ToolChoice

KEY = "sk-test-0123456789"


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    return await start_server(nursery, KEY)


@pytest.fixture
async def model(server: OpenAICompatibleServer) -> AsyncIterator[OpenAIChatModel]:
    async with server.chat_model("gpt-4o", retry_delay=0.5) as model:
        yield model


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


# A recorded stream: text + trailing usage-only chunk
O1 = [
    chunk({"role": "assistant", "content": ""}, usage=None),
    chunk({"content": "Hello"}, usage=None),
    chunk({"content": " world"}, usage=None),
    chunk({}, "stop", usage=None),
    {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 2,
            "total_tokens": 14,
            "prompt_tokens_details": {"cached_tokens": 4},
        },
    },
]

# A recorded stream: two parallel tool calls, argument fragments keyed by index
O2 = [
    chunk(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_A",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ],
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty":"Paris"}'}}]}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_B",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"city":"Rome"}'}}]}),
    chunk({}, "tool_calls"),
    {
        "id": "chatcmpl-2",
        "choices": [],
        "usage": {"prompt_tokens": 50, "completion_tokens": 30, "total_tokens": 80},
    },
]


# -- streaming -----------------------------------------------------------------------------


async def test_streamed_text_with_usage_only_carrier(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    server.push(ScriptedSSE(events=O1))
    sink = Sink()

    final = await model(MSGS, emit=sink)

    assert [[b.text for b in c.content] for c in sink.items] == [["Hello"], [" world"]]  # type: ignore[union-attr]
    assert len({c.content[0].id for c in sink.items}) == 1
    assert final.is_last
    assert final.id == "chatcmpl-1"
    (text,) = final.content
    assert isinstance(text, TextBlock)
    assert text.text == "Hello world"
    assert text.id == sink.items[0].content[0].id
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (12, 2)
    assert final.usage.cache_input_tokens == 4
    assert final.metadata == {"finish_reason": "stop"}


async def test_parallel_tool_calls_joined_by_index(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    server.push(ScriptedSSE(events=O2))
    sink = Sink()

    final = await model(MSGS, emit=sink)

    calls = [(b.id, b.name, b.input) for c in sink.items for b in c.content]  # type: ignore[union-attr]
    assert calls == [
        ("call_A", "get_weather", ""),
        ("call_A", "get_weather", '{"ci'),
        ("call_A", "get_weather", 'ty":"Paris"}'),
        ("call_B", "get_weather", ""),
        ("call_B", "get_weather", '{"city":"Rome"}'),
    ]
    assert [(b.id, b.input) for b in final.content] == [  # type: ignore[union-attr]
        ("call_A", '{"city":"Paris"}'),
        ("call_B", '{"city":"Rome"}'),
    ]
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (50, 30)


async def test_reasoning_text_and_split_tool_call(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    server.push(
        ScriptedReply(
            reasoning="Let me look that up.",
            text="Checking.",
            tool_calls=[ScriptedToolCall("get_weather", '{"city": "Paris"}', id="call_9")],
            chunk_size=3,
            usage={"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
        )
    )
    sink = Sink()

    final = await model(MSGS, emit=sink)

    assert len(sink.items) > 10  # many small fragments
    thinking, text, call = final.content
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.thinking == "Let me look that up."
    assert isinstance(text, TextBlock)
    assert text.text == "Checking."
    assert isinstance(call, ToolCallBlock)
    assert (call.id, call.name, call.input) == ("call_9", "get_weather", '{"city": "Paris"}')
    assert call.parsed_input() == {"city": "Paris"}
    assert final.usage is not None
    assert final.usage.input_tokens == 9
    assert final.usage.cache_input_tokens == 0


async def test_streamed_audio_becomes_one_wav_block(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    pcm = [b"\x01\x00" * 4, b"\x02\x00" * 6]
    server.push(
        ScriptedSSE(
            events=[
                chunk({"audio": {"id": "a1", "transcript": "Hi"}}),
                chunk({"audio": {"data": base64.b64encode(pcm[0]).decode()}}),
                chunk({"audio": {"data": base64.b64encode(pcm[1]).decode(), "transcript": "!"}}),
            ]
        )
    )

    final = await model(MSGS)

    text, audio = final.content
    assert isinstance(text, TextBlock)
    assert text.text == "Hi!"
    assert isinstance(audio, DataBlock)
    assert isinstance(audio.source, Base64Source)
    assert audio.source.media_type == "audio/wav"
    data = base64.b64decode(audio.source.data)
    assert data == wav_header(len(pcm[0] + pcm[1])) + pcm[0] + pcm[1]


async def test_request_body_and_headers(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    model.credential = OpenAICredential(api_key=KEY, base_url=server.base_url, organization="org-1")
    model.parameters = OpenAIChatParameters(
        max_tokens=100,
        temperature=0.2,
        thinking_enable=True,
        reasoning_effort="low",
        parallel_tool_calls=False,
    )
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Get weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"$ref": "#/$defs/City"}},
                    "required": ["city"],
                    "$defs": {"City": {"type": "string"}},
                },
            },
        },
        {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}},
    ]
    server.push("ok")

    await model(MSGS, tools, ToolChoice(mode="get_weather", tools=["get_weather"]))

    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["openai-organization"] == "org-1"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {
        "model": "gpt-4o",
        "messages": [
            {
                "role": "system",
                "name": "system",
                "content": [{"type": "text", "text": "Be brief."}],
            },
            {
                "role": "user",
                "name": "user",
                "content": [{"type": "text", "text": "Weather in Paris?"}],
            },
        ],
        "stream": True,
        "max_completion_tokens": 100,
        "temperature": 0.2,
        "reasoning_effort": "low",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Get weather",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        ],
        "parallel_tool_calls": False,
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "stream_options": {"include_usage": True},
    }


async def test_reasoning_effort_needs_thinking_and_extra_body(
    server: OpenAICompatibleServer,
) -> None:
    server.push("a", "b")
    params = OpenAIChatParameters(reasoning_effort="high", voice="alloy", top_p=0.5)
    async with server.chat_model(parameters=params, extra_body={"seed": 7}) as model:
        await model(MSGS, [{"type": "function", "function": {"name": "t"}}], ToolChoice("auto"))
        model.streaming = False
        await model(MSGS, tool_choice=ToolChoice("none"))

    streamed, plain = (r.body for r in server.requests)
    assert "reasoning_effort" not in streamed
    assert streamed["audio"] == {"voice": "alloy", "format": "pcm16"}
    assert streamed["modalities"] == ["text", "audio"]
    assert streamed["seed"] == 7
    assert streamed["top_p"] == 0.5
    assert streamed["tool_choice"] == "auto"
    assert "parallel_tool_calls" not in streamed
    assert plain["stream"] is False
    assert "stream_options" not in plain
    assert plain["tool_choice"] == "none"
    assert "tools" not in plain


def test_parameter_validation() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        OpenAIChatParameters(max_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        OpenAIChatParameters(temperature=2.5)
    with pytest.raises(ValueError, match="top_p"):
        OpenAIChatParameters(top_p=0)


# -- non-streaming ---------------------------------------------------------------------------


async def test_non_stream_completion(server: OpenAICompatibleServer) -> None:
    server.push(
        ScriptedReply(
            reasoning="think",
            text="Done.",
            tool_calls=[ScriptedToolCall("f", '{"x": 1}', id="call_1")],
            id="chatcmpl-77",
            usage={"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11},
        )
    )
    sink = Sink()
    async with server.chat_model(stream=False) as model:
        final = await model(MSGS, emit=sink)

    assert sink.items == []
    assert final.is_last
    assert final.id == "chatcmpl-77"
    assert [type(b).__name__ for b in final.content] == [
        "ThinkingBlock",
        "TextBlock",
        "ToolCallBlock",
    ]
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (5, 6)
    assert final.metadata == {"finish_reason": "tool_calls"}


# -- errors and retries ----------------------------------------------------------------------


async def test_429_then_success_honours_retry_after(
    server: OpenAICompatibleServer,
    model: OpenAIChatModel,
    autojump_clock: trio.testing.MockClock,
) -> None:
    server.push(
        ScriptedError(status=429, message="Rate limit reached", retry_after=7),
        "finally",
    )
    start = trio.current_time()

    final = await model(MSGS)

    assert [b.text for b in final.content] == ["finally"]  # type: ignore[union-attr]
    assert len(server.requests) == 2
    assert trio.current_time() - start >= 7


async def test_400_is_not_retried_and_surfaces_the_provider_message(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    server.push(
        ScriptedError(
            status=400,
            message="Invalid value for 'temperature'.",
            type="invalid_request_error",
            code="invalid_value",
        ),
        "unused",
    )

    with pytest.raises(ModelInvalidRequestError) as info:
        await model(MSGS)

    assert info.value.status_code == 400
    assert info.value.code == "invalid_value"
    assert info.value.message == "Invalid value for 'temperature'."
    assert "HTTP 400 Invalid value for 'temperature'." in str(info.value)
    assert len(server.requests) == 1


async def test_401_is_not_retried_and_the_key_is_redacted(server: OpenAICompatibleServer) -> None:
    server.push(ScriptedError(status=401, message=f"Incorrect API key provided: {KEY}."))

    async with server.chat_model() as model:
        with pytest.raises(ModelAuthenticationError) as info:
            await model(MSGS)

    assert KEY not in str(info.value)
    assert "Incorrect API key provided: ***." in str(info.value)
    assert len(server.requests) == 1


async def test_wrong_key_gets_401(server: OpenAICompatibleServer) -> None:
    credential = OpenAICredential(api_key="sk-wrong", base_url=server.base_url)
    async with OpenAIChatModel("gpt-4o", credential=credential) as model:
        with pytest.raises(ModelAuthenticationError, match="invalid_api_key"):
            await model(MSGS)


async def test_403_and_404(server: OpenAICompatibleServer, model: OpenAIChatModel) -> None:
    server.push(ScriptedError(status=403, message="no access"), ScriptedError(status=404))

    with pytest.raises(ModelPermissionError):
        await model(MSGS)
    with pytest.raises(ModelInvalidRequestError):
        await model(MSGS)


async def test_500_retried_then_exhausted(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(*(ScriptedError(status=500, message=f"oops {i}") for i in range(3)))

    async with server.chat_model(max_retries=2) as model:
        with pytest.raises(ModelUpstreamError, match="oops 2") as info:
            await model(MSGS)

    assert info.value.status_code == 500
    assert len(server.requests) == 3


async def test_429_exhausted_keeps_retry_after(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(ScriptedError(status=429, retry_after=1), ScriptedError(status=429, retry_after=2))

    async with server.chat_model(max_retries=1) as model:
        with pytest.raises(ModelRateLimitError) as info:
            await model(MSGS)

    assert info.value.retry_after == 2


async def test_stream_cut_midway_is_a_stream_error(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    server.push(ScriptedReply(text="Hello there world", chunk_size=4, cut_after=3), "unused")
    sink = Sink()

    with pytest.raises(ModelStreamError, match=r"ended before 'data: \[DONE\]'"):
        await model(MSGS, emit=sink)

    assert len(server.requests) == 1  # content was emitted: never replayed
    assert [b.text for c in sink.items for b in c.content] == ["Hell", "o th"]  # type: ignore[union-attr]


async def test_stream_cut_abruptly_is_a_stream_error(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    server.push(ScriptedReply(text="Hello there", chunk_size=4, cut_after=2, cut_abruptly=True))

    with pytest.raises(ModelStreamError, match="stream was cut"):
        await model(MSGS)


async def test_stream_cut_before_content_is_retried(
    server: OpenAICompatibleServer, model: OpenAIChatModel, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(ScriptedReply(text="x", cut_after=1, cut_abruptly=True), "second try")

    final = await model(MSGS)

    assert [b.text for b in final.content] == ["second try"]  # type: ignore[union-attr]


async def test_error_payload_inside_the_stream(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    server.push(
        ScriptedSSE(
            events=[
                chunk({"content": "Hi"}),
                {"error": {"message": "The model crashed", "type": "server_error", "code": "e1"}},
            ]
        )
    )

    with pytest.raises(ModelUpstreamError, match="The model crashed") as info:
        await model(MSGS)
    assert info.value.code == "e1"
    assert not info.value.retryable


async def test_unparseable_stream_chunk(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    server.push(ScriptedSSE(events=["data: {not json\n\n"]))

    with pytest.raises(ModelStreamError, match="unparseable chunk"):
        await model(MSGS)


async def test_crlf_comments_and_odd_splits_are_parsed(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    first = json.dumps(chunk({"content": "Hé"}))
    second = json.dumps(chunk({"content": "llo"}))
    server.push(
        ScriptedSSE(
            events=[
                ": keep-alive\r\n\r\n",
                f"data: {first[:10]}",
                f"{first[10:]}\r",
                "\n\r\n",
                f"data: {second}\r\n\r\n",
            ],
        )
    )

    final = await model(MSGS)

    assert [b.text for b in final.content] == ["Héllo"]  # type: ignore[union-attr]


async def test_stall_past_read_timeout(server: OpenAICompatibleServer) -> None:
    server.push(ScriptedReply(text="Hello", chunk_size=2, stall_after=2))

    async with server.chat_model(read_timeout=0.05, max_retries=0) as model:
        with pytest.raises(ModelTimeoutError, match="waiting for data"):
            await model(MSGS)
        assert open_connections(model.http_client) == []

    with trio.fail_after(5):
        await server.wait_all_closed()


async def test_stall_past_the_total_deadline(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(ScriptedReply(text="Hello", stall_after=0))
    sink = Sink()

    async with server.chat_model(timeout=30) as model:
        start = trio.current_time()
        with pytest.raises(ModelTimeoutError, match="total timeout of 30"):
            await model(MSGS, emit=sink)
        assert trio.current_time() - start == pytest.approx(30)
        assert open_connections(model.http_client) == []

    assert sink.items == []


async def test_non_stream_stall_past_read_timeout_is_retried(
    server: OpenAICompatibleServer,
) -> None:
    server.push(ScriptedReply(text="x", stall_after=0), *["recovered"] * 3)

    async with server.chat_model(stream=False, read_timeout=0.05, retry_delay=0.001) as model:
        final = await model(MSGS)

    assert [b.text for b in final.content] == ["recovered"]  # type: ignore[union-attr]


async def test_connection_refused_is_retried_then_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens on this port now
    credential = OpenAICredential(api_key="k", base_url=f"http://127.0.0.1:{port}/v1")

    async with OpenAIChatModel("m", credential=credential, max_retries=1) as model:
        with pytest.raises(ModelConnectionError, match="could not reach") as info:
            await model(MSGS)

    assert info.value.retryable


# -- cancellation ----------------------------------------------------------------------------


async def test_cancel_mid_stream_closes_the_connection(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    server.push(ScriptedReply(text="Hello world, how are you", chunk_size=5, stall_after=3))

    sink, caught = await call_cancelled_after(model, 2)

    assert [type(e) for e in caught] == [trio.Cancelled]
    *deltas, last = sink.items
    assert [b.text for c in deltas for b in c.content] == ["Hello", " worl"]  # type: ignore[union-attr]
    assert last.is_last
    assert last.finished_reason == FinishedReason.INTERRUPTED
    assert [b.text for b in last.content] == ["Hello worl"]  # type: ignore[union-attr]
    with trio.fail_after(5):
        await server.wait_all_closed()
    assert server.connections[0].closed_by_client
    assert open_connections(model.http_client) == []


async def test_cancel_while_waiting_for_headers(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    server.push(ScriptedReply(text="x", stall_after=0))
    model.streaming = False
    sink = Sink()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(model, MSGS, emit=sink))
        with trio.fail_after(5):
            await server.wait_until(lambda: len(server.requests) == 1)
        nursery.cancel_scope.cancel()  # the server holds the request: no headers yet

    assert [c.finished_reason for c in sink.items] == [FinishedReason.INTERRUPTED]
    with trio.fail_after(5):
        await server.wait_all_closed()
    assert server.connections[0].closed_by_client
    assert open_connections(model.http_client) == []


async def test_connection_reused_after_a_complete_stream(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    server.push("one", "two")

    await model(MSGS)
    await model(MSGS)

    assert [r.connection_id for r in server.requests] == [0, 0]
    assert len(open_connections(model.http_client)) == 1


# -- credentials, structured output, media ---------------------------------------------------


async def test_missing_key_names_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    async with OpenAIChatModel("gpt-4o") as model:
        with pytest.raises(ModelCredentialError, match="OPENAI_API_KEY"):
            await model(MSGS)


async def test_key_and_base_url_from_environment(
    server: OpenAICompatibleServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.push("from env")

    async with OpenAIChatModel("gpt-4o") as model:
        final = await model(MSGS)

    assert [b.text for b in final.content] == ["from env"]  # type: ignore[union-attr]
    assert "sk-" not in repr(model)


async def test_structured_output_over_http(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    server.push(
        ScriptedReply(
            tool_calls=[ScriptedToolCall("generate_structured_output", '{"city": "Paris", "n": 3')]
        )
    )
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["city", "n"],
    }

    result = await model.generate_structured_output(MSGS, schema)

    assert result.content == {"city": "Paris", "n": 3}
    body = server.requests[0].body
    assert body["tool_choice"] == {
        "type": "function",
        "function": {"name": "generate_structured_output"},
    }


async def test_remote_pdf_downloaded_with_the_models_client(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    from trioagent.message import URLSource

    url = server.add_file("report.pdf", b"%PDF-1.4 fake", "application/pdf")
    msg = UserMsg(
        "user",
        [
            TextBlock(text="Summarize"),
            DataBlock(name="r.pdf", source=URLSource(url=url, media_type="application/pdf")),
        ],
    )
    server.push("ok")

    await model([msg])

    part = server.requests[-1].body["messages"][0]["content"][1]
    assert part == {
        "type": "file",
        "file": {
            "filename": "r.pdf",
            "file_data": "data:application/pdf;base64,"
            + base64.b64encode(b"%PDF-1.4 fake").decode(),
        },
    }
    assert server.requests[0].method == "GET"
    assert server.requests[0].connection_id == server.requests[1].connection_id  # same client


async def test_history_with_tool_calls_round_trips(
    server: OpenAICompatibleServer, model: OpenAIChatModel
) -> None:
    from trioagent.message import ToolResultBlock

    history = [
        *MSGS,
        AssistantMsg(
            "assistant",
            [
                ToolCallBlock(id="call_1", name="get_weather", input='{"city": "Paris"}'),
                ToolResultBlock(id="call_1", name="get_weather", output="Sunny"),
            ],
        ),
    ]
    server.push("It is sunny.")

    await model(history)

    messages = server.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Sunny",
        "name": "get_weather",
    }


async def test_injected_client_is_used_and_left_open(server: OpenAICompatibleServer) -> None:
    server.push("hi")
    async with httpx2.AsyncClient() as client:
        model = OpenAIChatModel("m", credential=server.credential(), http_client=client)
        await model(MSGS)
        await model.aclose()
        assert not client.is_closed


async def test_injected_client_is_the_httpx2_client_openai_and_mcp_use(
    server: OpenAICompatibleServer,
) -> None:
    """``http_client=`` takes an ``httpx2.AsyncClient`` (the class ``openai`` and ``mcp`` take),
    so one pool can serve them all: the call goes through the client's own hooks and pool, and
    the client's transport errors are the model layer's typed errors."""
    server.push("hi")
    sent: list[httpx2.Request] = []

    async def record(request: httpx2.Request) -> None:
        sent.append(request)

    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    closed_port = listener.getsockname()[1]
    listener.close()  # nothing listens on this port now
    unreachable = OpenAICredential(api_key="k", base_url=f"http://127.0.0.1:{closed_port}/v1")
    async with httpx2.AsyncClient(event_hooks={"request": [record]}) as client:
        model = OpenAIChatModel("m", credential=server.credential(), http_client=client)
        final = await model(MSGS)
        assert text_of(final) == "hi"
        assert [r.url.path for r in sent] == ["/v1/chat/completions"]
        assert len(open_connections(client)) == 1  # pooled idle in the shared client

        down = OpenAIChatModel("m", credential=unreachable, http_client=client, max_retries=0)
        with pytest.raises(ModelConnectionError, match="could not reach") as info:
            await down(MSGS)
        assert isinstance(info.value.__cause__, httpx2.ConnectError)


# -- odd but valid chunks --------------------------------------------------------------------


async def test_null_error_field_is_not_an_error(server: OpenAICompatibleServer) -> None:
    server.push(ScriptedSSE(events=[chunk({"content": "fine"}, error=None)]))

    async with server.chat_model() as m:
        final = await m(MSGS)

    assert text_of(final) == "fine"


# -- provider text in error messages is redacted ---------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("data: {" + "x" * 190 + KEY + "\n\n", id="unparseable"),
        pytest.param(f"data: {json.dumps(['x' * 188 + KEY])}\n\n", id="not-an-object"),
    ],
)
async def test_bad_chunk_error_quotes_the_chunk_redacted_before_the_cut(
    server: OpenAICompatibleServer, line: str
) -> None:
    """The key spans the 200-character cut: only redacting before cutting hides its first
    half (a later redaction of the message cannot recognise half a key)."""
    server.push(ScriptedSSE(events=[chunk({"content": "Hi"}), line]))

    async with server.chat_model(max_retries=0) as m:
        with pytest.raises(ModelStreamError) as info:
            await m(MSGS)

    assert "x" * 20 in info.value.message
    assert KEY[:8] not in str(info.value)


@pytest.mark.parametrize("stream", [True, False])
async def test_provider_error_code_is_redacted(
    server: OpenAICompatibleServer, stream: bool
) -> None:
    server.push(ScriptedError(status=400, message="bad", code=f"key_{KEY}"))

    async with server.chat_model(stream=stream) as m:
        with pytest.raises(ModelInvalidRequestError) as info:
            await m(MSGS)

    assert info.value.code == "key_***"
    assert KEY not in str(info.value)


async def test_error_event_code_is_redacted(server: OpenAICompatibleServer) -> None:
    server.push(ScriptedSSE(events=[ROLE, {"error": {"message": "no", "code": f"c_{KEY}"}}]))

    async with server.chat_model() as m:
        with pytest.raises(ModelUpstreamError) as info:
            await m(MSGS)

    assert info.value.code == "c_***"


# -- malformed chunks ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        pytest.param({"choices": [None]}, "'choices[0]' is not an object", id="choice-null"),
        pytest.param(
            {"choices": [{"delta": f"text {KEY}"}]}, "'delta' is not an object", id="delta-text"
        ),
        pytest.param({"choices": {"0": {}}}, "'choices' is not a list", id="choices-object"),
        pytest.param(
            {"choices": [{"delta": {"tool_calls": [{"index": "x"}]}}]},
            "a tool call's 'index' is not a number",
            id="index-x",
        ),
        pytest.param({"choices": [], "usage": "n/a"}, "'usage' is not an object", id="usage-text"),
        pytest.param(
            {"choices": [], "usage": {"prompt_tokens": "n/a"}},
            "invalid literal for int()",
            id="usage-count-text",
        ),
        pytest.param(
            {"choices": [{"delta": {"tool_calls": "call"}}]},
            "'tool_calls' is not a list",
            id="tool-calls-text",
        ),
        pytest.param(
            {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": "f"}]}}]},
            "a tool call's 'function' is not an object",
            id="function-text",
        ),
        pytest.param(
            {"choices": [{"delta": {"tool_calls": [{"function": {"name": 7}}]}}]},
            "a tool call's name is not a string",
            id="name-number",
        ),
    ],
)
async def test_malformed_chunk_is_a_stream_error_naming_the_model(
    server: OpenAICompatibleServer, bad: dict[str, Any], reason: str
) -> None:
    server.push(ScriptedSSE(events=[ROLE, {"id": "c", **bad}]), "unused")

    async with server.chat_model("gpt-edge", max_retries=3, retry_delay=0.001) as m:
        with pytest.raises(ModelStreamError) as info:
            await m(MSGS)
        assert busy(m) == []

    message = info.value.message
    assert message.startswith(f"malformed chunk in the answer of 'gpt-edge' ({reason}")
    assert '"choices"' in message  # a short excerpt of the chunk
    assert KEY not in message
    assert info.value.__cause__ is None  # the parser's exception may quote the chunk
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"choices": [{"message": "text"}]}, id="message-text"),
        pytest.param({"choices": [{"message": {"tool_calls": [None]}}]}, id="tool-call-null"),
        pytest.param({"choices": "none"}, id="choices-text"),
    ],
)
async def test_malformed_completion_is_an_upstream_error_naming_the_model(
    server: OpenAICompatibleServer, body: dict[str, Any]
) -> None:
    server.add_route("POST", "/v1/bad/chat/completions", lambda r: ScriptedResponse.json(body))
    credential = OpenAICredential(api_key=KEY, base_url=f"{server.base_url}/bad")

    async with OpenAIChatModel("gpt-edge", credential=credential, stream=False) as m:
        with pytest.raises(
            ModelUpstreamError, match="malformed completion in the answer of 'gpt-edge'"
        ) as info:
            await m(MSGS)

    assert not info.value.retryable
    assert len(server.requests) == 1

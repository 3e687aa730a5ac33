"""XAIChatModel (trioagent/model/_xai.py) over the real loopback server.

xAI's REST API is OpenAI-compatible, so the loopback server's built-in chat-completions
protocol stands in for ``api.x.ai``: real sockets, real SSE, httpx2 never patched.  Tests with
backoff sleeps use ``autojump_clock``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing
from provider_kit import MSGS, Sink, lookup_agent, open_connections, start_server

from trioagent.credential import XAICredential
from trioagent.exception import (
    ModelAuthenticationError,
    ModelCredentialError,
    ModelInvalidRequestError,
    ModelUpstreamError,
)
from trioagent.message import TextBlock, ThinkingBlock, ToolCallBlock, UserMsg
from trioagent.model import ChatResponse, XAIChatModel, XAIChatParameters
from trioagent.testing import (
    OpenAICompatibleServer,
    ScriptedError,
    ScriptedReply,
    ScriptedSSE,
    ScriptedToolCall,
)
from trioagent.types import FinishedReason, ToolChoice

KEY = "xai-test-0123456789"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "$ref": "#/$defs/City"}},
                "$defs": {"City": {"type": "string"}},
            },
        },
    },
    {"type": "function", "function": {"name": "get_time"}},
]
USAGE = {
    "prompt_tokens": 10,
    "completion_tokens": 5,
    "total_tokens": 22,
    "prompt_tokens_details": {"cached_tokens": 3},
    "completion_tokens_details": {"reasoning_tokens": 7},
}


@pytest.fixture(autouse=True)
def _no_xai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XAI_API_KEY", raising=False)
    monkeypatch.delenv("XAI_BASE_URL", raising=False)


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    return await start_server(nursery, KEY)


def xai(server: OpenAICompatibleServer, **kwargs: Any) -> XAIChatModel:
    credential = XAICredential(api_key=KEY, base_url=server.base_url)
    return XAIChatModel("grok-3-mini", credential=credential, **kwargs)


@pytest.fixture
async def model(server: OpenAICompatibleServer) -> AsyncIterator[XAIChatModel]:
    async with xai(server, retry_delay=0.5) as model:
        yield model


# -- streaming ---------------------------------------------------------------------------------


async def test_streamed_reasoning_text_tool_call_and_usage(
    server: OpenAICompatibleServer, model: XAIChatModel
) -> None:
    server.push(
        ScriptedReply(
            reasoning="Check it.",
            text="Calling.",
            tool_calls=[ScriptedToolCall("get_weather", '{"city": "Paris"}', id="call_9")],
            usage=USAGE,
            chunk_size=5,
            id="resp-xai-1",
        )
    )
    sink = Sink()

    final = await model(MSGS, emit=sink)

    kinds = [type(b).__name__ for c in sink.items for b in c.content]
    assert kinds[:2] == ["ThinkingBlock", "ThinkingBlock"]
    assert "TextBlock" in kinds
    assert kinds[-1] == "ToolCallBlock"
    thinking, text, call = final.content
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.thinking == "Check it."
    assert isinstance(text, TextBlock)
    assert text.text == "Calling."
    assert isinstance(call, ToolCallBlock)
    assert (call.id, call.name, call.input) == ("call_9", "get_weather", '{"city": "Paris"}')
    assert final.id == "resp-xai-1"
    assert final.usage is not None
    assert final.usage.input_tokens == 10
    assert final.usage.output_tokens == 5 + 7  # reasoning tokens count as output
    assert final.usage.cache_input_tokens == 3


async def test_request_body_and_headers(server: OpenAICompatibleServer) -> None:
    parameters = XAIChatParameters(
        max_tokens=64, temperature=0.3, top_p=0.9, thinking_enable=True, reasoning_effort="low"
    )
    async with xai(server, parameters=parameters, extra_body={"seed": 7}) as model:
        await model(MSGS, TOOLS, ToolChoice(mode="get_weather"))
        await model(MSGS, TOOLS, ToolChoice(mode="required", tools=["get_time"]))

    first, second = server.requests
    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert first.headers["accept"] == "text/event-stream"
    assert first.body == {
        "model": "grok-3-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        ],
        "stream": True,
        "max_tokens": 64,
        "temperature": 0.3,
        "top_p": 0.9,
        "reasoning_effort": "low",
        "seed": 7,
        "tools": [
            TOOLS[0],  # not flattened: the schema goes as given
            {
                "type": "function",
                "function": {"name": "get_time", "description": "", "parameters": {}},
            },
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "stream_options": {"include_usage": True},
    }
    assert [t["function"]["name"] for t in second.body["tools"]] == ["get_time"]
    assert second.body["tool_choice"] == "required"


async def test_reasoning_effort_needs_thinking(server: OpenAICompatibleServer) -> None:
    async with xai(server, parameters=XAIChatParameters(reasoning_effort="high")) as model:
        await model(MSGS)

    assert "reasoning_effort" not in server.requests[0].body


async def test_non_stream_completion(server: OpenAICompatibleServer) -> None:
    server.push(ScriptedReply(reasoning="r", text="Sunny.", usage=USAGE, id="resp-2"))

    async with xai(server, stream=False) as model:
        final = await model(MSGS)

    body = server.requests[0].body
    assert body["stream"] is False
    assert "stream_options" not in body
    assert [type(b).__name__ for b in final.content] == ["ThinkingBlock", "TextBlock"]
    assert final.id == "resp-2"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (10, 12)


# -- retries: every xAI error is retryable (as AgentScope) -------------------------------------


async def test_400_is_retried_then_succeeds(
    server: OpenAICompatibleServer, model: XAIChatModel, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(ScriptedError(status=400, message="Invalid argument."), "recovered")

    final = await model(MSGS)

    assert [b.text for b in final.content] == ["recovered"]  # type: ignore[union-attr]
    assert len(server.requests) == 2


async def test_401_is_retried_until_exhausted_and_redacted(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(*(ScriptedError(status=401, message=f"bad key {KEY}") for _ in range(3)))

    async with xai(server, max_retries=2) as model:
        with pytest.raises(ModelAuthenticationError) as info:
            await model(MSGS)

    assert info.value.retryable
    assert len(server.requests) == 3
    assert KEY not in str(info.value)
    assert "bad key ***" in str(info.value)


async def test_error_chunk_before_content_is_retried_after_content_is_not(
    server: OpenAICompatibleServer, model: XAIChatModel, autojump_clock: trio.testing.MockClock
) -> None:
    def chunk(content: str) -> dict[str, Any]:
        return {"id": "r", "choices": [{"index": 0, "delta": {"content": content}}]}

    crash = {"error": {"message": "The model crashed", "code": "internal"}}
    server.push(
        ScriptedSSE(events=[crash]),
        "second try",
        ScriptedSSE(events=[chunk("Hi"), crash]),
    )

    final = await model(MSGS)
    assert [b.text for b in final.content] == ["second try"]  # type: ignore[union-attr]

    with pytest.raises(ModelUpstreamError, match="The model crashed") as info:
        await model(MSGS)
    assert info.value.retryable  # retryable, but content was emitted: never replayed
    assert len(server.requests) == 3


async def test_missing_key_is_a_setup_error_not_retried() -> None:
    async with XAIChatModel("grok-4") as model:
        with pytest.raises(ModelCredentialError, match="XAI_API_KEY") as info:
            await model(MSGS)

    assert not info.value.retryable


def test_parameters_and_defaults() -> None:
    with pytest.raises(ValueError, match="top_p"):
        XAIChatParameters(top_p=0)
    with pytest.raises(ValueError, match="temperature"):
        XAIChatParameters(temperature=-1)
    with pytest.raises(ValueError, match="max_tokens"):
        XAIChatParameters(max_tokens=0)
    model = XAIChatModel("grok-4", credential=XAICredential(api_key=KEY))
    assert model.type == "xai_chat"
    assert model.context_size == 131072
    assert model.credential.get_base_url() == "https://api.x.ai/v1"
    assert KEY not in repr(model)
    assert KEY not in repr(model.credential)


# -- cancellation --------------------------------------------------------------------------------


async def test_cancel_mid_stream_closes_the_connection(
    server: OpenAICompatibleServer, model: XAIChatModel
) -> None:
    server.push(ScriptedReply(text="Hello world, how are you", chunk_size=5, stall_after=3))
    sink = Sink()

    async def emit(chunk: ChatResponse) -> None:
        await sink(chunk)
        if len(sink.items) == 2:
            scope.cancel()

    with trio.CancelScope() as scope:
        await model(MSGS, emit=emit)

    assert scope.cancelled_caught
    last = sink.items[-1]
    assert last.finished_reason == FinishedReason.INTERRUPTED
    assert [b.text for b in last.content] == ["Hello worl"]  # type: ignore[union-attr]
    with trio.fail_after(5):
        await server.wait_all_closed()
    assert server.connections[0].closed_by_client
    assert open_connections(model.http_client) == []


# -- structured output and an agent reply ----------------------------------------------------


async def test_structured_output(server: OpenAICompatibleServer, model: XAIChatModel) -> None:
    server.push(
        ScriptedReply(tool_calls=[ScriptedToolCall("generate_structured_output", '{"n": 3')])
    )

    result = await model.generate_structured_output(
        MSGS, {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    )

    assert result.content == {"n": 3}
    assert server.requests[0].body["tool_choice"] == {
        "type": "function",
        "function": {"name": "generate_structured_output"},
    }


async def test_bad_request_in_structured_output_is_retried_not_a_fallback(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(*(ScriptedError(status=400, message="tool_choice unsupported") for _ in range(2)))

    async with xai(server, max_retries=1) as model:
        with pytest.raises(ModelInvalidRequestError, match="tool_choice unsupported"):
            await model.generate_structured_output(MSGS, {"type": "object"})

    assert len(server.requests) == 2  # the forced strategy, retried; no other strategy tried


async def test_agent_reply_with_a_tool_round(
    server: OpenAICompatibleServer, model: XAIChatModel
) -> None:
    server.push(
        ScriptedReply(tool_calls=[ScriptedToolCall("lookup", '{"city": "Paris"}', id="call_1")]),
        ScriptedReply(text="It is sunny in Paris.", chunk_size=4),
    )
    agent = lookup_agent(model)

    msg = await agent.reply(UserMsg("user", "weather?"))

    assert msg.get_text_content() == "It is sunny in Paris."
    second = server.requests[1].body
    assert second["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny in Paris"},
    ]

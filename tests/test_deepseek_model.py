"""DeepSeekChatModel (trioagent/model/_deepseek.py) over the loopback server.

A recorded DeepSeek transcript is replayed byte for byte through a raw route (real
sockets, real SSE parsing); request bodies are read back from the server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import trio
from provider_kit import MSGS, Sink, replay, start_server

from trioagent.credential import DeepSeekCredential
from trioagent.exception import ModelCredentialError
from trioagent.formatter import DeepSeekChatFormatter
from trioagent.message import TextBlock, ThinkingBlock
from trioagent.model import DeepSeekChatModel, DeepSeekChatParameters
from trioagent.testing import (
    OpenAICompatibleServer,
    ScriptedError,
    ScriptedReply,
    ScriptedToolCall,
)
from trioagent.types import ToolChoice

KEY = "sk-deepseek-0123456789"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"$ref": "#/$defs/City"}},
                "$defs": {"City": {"type": "string"}},
            },
        },
    }
]

# A recorded stream: reasoning_content, usage on the last choice chunk
DS1 = [
    'data: {"id":"ds-1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"Hmm"},"finish_reason":null}]}\n\n',
    'data: {"id":"ds-1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[{"index":0,"delta":{"content":"Hi","reasoning_content":null},"finish_reason":null}]}\n\n',
    'data: {"id":"ds-1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_cache_hit_tokens":8,"prompt_cache_miss_tokens":1}}\n\n',
    "data: [DONE]\n\n",
]


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    return await start_server(nursery, KEY)


def credential(server: OpenAICompatibleServer) -> DeepSeekCredential:
    return DeepSeekCredential(api_key=KEY, base_url=f"http://{server.host}:{server.port}")


@pytest.fixture
async def model(server: OpenAICompatibleServer) -> AsyncIterator[DeepSeekChatModel]:
    async with DeepSeekChatModel("deepseek-chat", credential=credential(server)) as model:
        yield model


def test_transcript_is_valid_sse_json() -> None:
    for line in DS1[:-1]:
        assert isinstance(json.loads(line.removeprefix("data: ")), dict)


async def test_transcript_reasoning_then_text_usage_on_last_choice_chunk(
    server: OpenAICompatibleServer, model: DeepSeekChatModel
) -> None:
    replay(server, "/chat/completions", DS1)
    sink = Sink()

    final = await model(MSGS, emit=sink)

    (think_delta,), (text_delta,) = (c.content for c in sink.items)
    assert isinstance(think_delta, ThinkingBlock)
    assert think_delta.thinking == "Hmm"
    assert isinstance(text_delta, TextBlock)
    assert text_delta.text == "Hi"
    thinking, text = final.content
    assert isinstance(thinking, ThinkingBlock)
    assert (thinking.id, thinking.thinking) == (think_delta.id, "Hmm")
    assert isinstance(text, TextBlock)
    assert (text.id, text.text) == (text_delta.id, "Hi")
    assert final.id == "ds-1"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (9, 3)
    assert final.usage.cache_input_tokens == 8  # prompt_cache_hit_tokens
    assert final.metadata == {"finish_reason": "stop"}
    assert server.requests[0].path == "/chat/completions"


async def test_captured_request_body(
    server: OpenAICompatibleServer, model: DeepSeekChatModel
) -> None:
    model.parameters = DeepSeekChatParameters(thinking_enable=True, reasoning_effort="high")
    server.push("ok")

    await model(MSGS)

    assert server.requests[0].body == {
        "model": "deepseek-chat",
        "stream": True,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        "reasoning_effort": "high",
        "stream_options": {"include_usage": True},
        "thinking": {"type": "enabled"},
    }


async def test_thinking_always_sent_and_tools_as_given(
    server: OpenAICompatibleServer, model: DeepSeekChatModel
) -> None:
    model.parameters = DeepSeekChatParameters(
        max_tokens=100, temperature=1.5, top_p=0.5, reasoning_effort="max"
    )
    server.push("ok", "ok")

    await model(MSGS, TOOLS, ToolChoice("required"))
    await model(MSGS, TOOLS, ToolChoice("get_weather"))

    first, second = (r.body for r in server.requests)
    assert first["thinking"] == {"type": "disabled"}
    assert first["reasoning_effort"] == "max"  # sent whenever set
    assert (first["max_tokens"], first["temperature"], first["top_p"]) == (100, 1.5, 0.5)
    assert "max_completion_tokens" not in first
    assert first["tools"] == TOOLS  # not flattened
    assert first["tool_choice"] == "required"
    assert second["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


async def test_extra_body_thinking_is_merged(server: OpenAICompatibleServer) -> None:
    server.push("ok")

    async with DeepSeekChatModel(
        "deepseek-chat",
        credential=credential(server),
        parameters=DeepSeekChatParameters(thinking_enable=True),
        extra_body={"thinking": {"type": "disabled", "budget": 5}, "seed": 3},
    ) as model:
        await model(MSGS)

    body = server.requests[0].body
    assert body["thinking"] == {"type": "disabled", "budget": 5}
    assert body["seed"] == 3


async def test_structured_output_falls_back_to_thinking_disabled(
    server: OpenAICompatibleServer,
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    server.push(
        ScriptedError(status=400, message="deepseek-reasoner does not support tool_choice"),
        "no tool call here",
        ScriptedReply(tool_calls=[ScriptedToolCall("generate_structured_output", '{"n": 4}')]),
    )

    async with DeepSeekChatModel(
        "deepseek-reasoner",
        credential=credential(server),
        parameters=DeepSeekChatParameters(thinking_enable=True),
    ) as model:
        result = await model.generate_structured_output(MSGS, schema)

    assert result.content == {"n": 4}
    forced, auto, no_think = (r.body for r in server.requests)
    assert forced["thinking"] == auto["thinking"] == {"type": "enabled"}
    assert no_think["thinking"] == {"type": "disabled"}


def test_parameter_validation_and_defaults() -> None:
    with pytest.raises(ValueError, match="reasoning_effort"):
        DeepSeekChatParameters(reasoning_effort="low")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="temperature"):
        DeepSeekChatParameters(temperature=2.5)
    with pytest.raises(ValueError, match="max_tokens"):
        DeepSeekChatParameters(max_tokens=0)

    model = DeepSeekChatModel("deepseek-chat", credential=DeepSeekCredential(api_key="k"))
    assert model.type == "deepseek_chat"
    assert model.context_size == 65536
    assert isinstance(model.formatter, DeepSeekChatFormatter)
    assert model.credential.get_base_url() == "https://api.deepseek.com"
    assert model._get_disable_thinking_kwargs() == {
        "extra_body": {"thinking": {"type": "disabled"}}
    }


async def test_missing_key_names_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)

    async with DeepSeekChatModel("deepseek-chat") as model:
        with pytest.raises(ModelCredentialError, match="DEEPSEEK_API_KEY"):
            await model(MSGS)

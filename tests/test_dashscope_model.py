"""DashScopeChatModel (trioagent/model/_dashscope.py) over the loopback server.

Recorded DashScope transcripts are replayed byte for byte through a raw route
(real sockets, real SSE parsing); request bodies are read back from the server.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator

import pytest
import trio
from provider_kit import MSGS, Sink, replay, start_server

from trioagent.credential import DashScopeCredential
from trioagent.exception import ModelCredentialError
from trioagent.formatter import DashScopeChatFormatter
from trioagent.message import TextBlock, ThinkingBlock, ToolCallBlock
from trioagent.model import DashScopeChatModel, DashScopeChatParameters
from trioagent.testing import (
    OpenAICompatibleServer,
    ScriptedError,
    ScriptedReply,
    ScriptedToolCall,
)
from trioagent.types import ToolChoice

KEY = "sk-dashscope-0123456789"
TOOLS = [
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
    }
]

# D1: text + usage-only chunk
D1 = [
    'data: {"choices":[{"delta":{"content":"","role":"assistant"},"index":0,"logprobs":null,"finish_reason":null}],"object":"chat.completion.chunk","usage":null,"created":1735000000,"system_fingerprint":null,"model":"qwen-plus","id":"chatcmpl-9f2"}\n\n',
    'data: {"choices":[{"finish_reason":null,"delta":{"content":"Paris is"},"index":0,"logprobs":null}],"object":"chat.completion.chunk","usage":null,"created":1735000000,"system_fingerprint":null,"model":"qwen-plus","id":"chatcmpl-9f2"}\n\n',
    'data: {"choices":[{"finish_reason":null,"delta":{"content":" sunny."},"index":0,"logprobs":null}],"object":"chat.completion.chunk","usage":null,"created":1735000000,"system_fingerprint":null,"model":"qwen-plus","id":"chatcmpl-9f2"}\n\n',
    'data: {"choices":[{"finish_reason":"stop","delta":{"content":""},"index":0,"logprobs":null}],"object":"chat.completion.chunk","usage":null,"created":1735000000,"system_fingerprint":null,"model":"qwen-plus","id":"chatcmpl-9f2"}\n\n',
    'data: {"choices":[],"object":"chat.completion.chunk","usage":{"prompt_tokens":22,"completion_tokens":4,"total_tokens":26,"prompt_tokens_details":{"cached_tokens":16}},"created":1735000000,"system_fingerprint":null,"model":"qwen-plus","id":"chatcmpl-9f2"}\n\n',
    "data: [DONE]\n\n",
]

_D2 = '"id":"chatcmpl-ds","object":"chat.completion.chunk","created":1,"model":"qwen-plus"'
# D2: thinking + text + tool call (continuation with "id":"")
D2 = [
    f'data: {{{_D2},"choices":[{{"index":0,"delta":{{"role":"assistant","content":null,"reasoning_content":"Let me"}},"finish_reason":null}}],"usage":null}}\n\n',
    f'data: {{{_D2},"choices":[{{"index":0,"delta":{{"content":null,"reasoning_content":" check."}},"finish_reason":null}}],"usage":null}}\n\n',
    f'data: {{{_D2},"choices":[{{"index":0,"delta":{{"content":"Calling tool."}},"finish_reason":null}}],"usage":null}}\n\n',
    f'data: {{{_D2},"choices":[{{"index":0,"delta":{{"content":null,"tool_calls":[{{"index":0,"id":"call_x","type":"function","function":{{"name":"get_weather","arguments":"{{\\"city\\":"}}}}]}},"finish_reason":null}}],"usage":null}}\n\n',
    f'data: {{{_D2},"choices":[{{"index":0,"delta":{{"content":null,"tool_calls":[{{"index":0,"id":"","type":"function","function":{{"arguments":" \\"Paris\\"}}"}}}}]}},"finish_reason":null}}],"usage":null}}\n\n',
    f'data: {{{_D2},"choices":[{{"index":0,"delta":{{"content":""}},"finish_reason":"tool_calls"}}],"usage":null}}\n\n',
    f'data: {{{_D2},"choices":[],"usage":{{"prompt_tokens":20,"completion_tokens":15,"total_tokens":35,"prompt_tokens_details":{{"cached_tokens":0}}}}}}\n\n',
    "data: [DONE]\n\n",
]


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    return await start_server(nursery, KEY)


def credential(server: OpenAICompatibleServer) -> DashScopeCredential:
    return DashScopeCredential(api_key=KEY, base_url=server.base_url)


@pytest.fixture
async def model(server: OpenAICompatibleServer) -> AsyncIterator[DashScopeChatModel]:
    async with DashScopeChatModel("qwen-plus", credential=credential(server)) as model:
        yield model


def test_transcripts_are_valid_sse_json() -> None:
    for line in D1[:-1] + D2[:-1]:
        assert isinstance(json.loads(line.removeprefix("data: ")), dict)


# -- transcripts -----------------------------------------------------------------------------


async def test_d1_text_and_usage_only_chunk(
    server: OpenAICompatibleServer, model: DashScopeChatModel
) -> None:
    replay(server, "/v1/chat/completions", D1)
    sink = Sink()

    final = await model(MSGS, emit=sink)

    assert [[(type(b).__name__, b.text) for b in c.content] for c in sink.items] == [  # type: ignore[union-attr]
        [("TextBlock", "Paris is")],
        [("TextBlock", " sunny.")],
    ]
    assert all(not c.is_last and c.id == "chatcmpl-9f2" for c in sink.items)
    (text,) = final.content
    assert isinstance(text, TextBlock)
    assert text.text == "Paris is sunny."
    assert text.id == sink.items[0].content[0].id == sink.items[1].content[0].id
    assert final.is_last
    assert final.id == "chatcmpl-9f2"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (22, 4)
    assert final.usage.cache_input_tokens == 16


async def test_d2_thinking_text_and_tool_call_continuation(
    server: OpenAICompatibleServer, model: DashScopeChatModel
) -> None:
    replay(server, "/v1/chat/completions", D2)
    sink = Sink()

    final = await model(MSGS, emit=sink)

    deltas = [
        (type(b).__name__, b.id, getattr(b, "name", None)) for c in sink.items for b in c.content
    ]
    fragments = [
        getattr(b, "thinking", None) or getattr(b, "text", None) or b.input  # type: ignore[union-attr]
        for c in sink.items
        for b in c.content
    ]
    thinking_id, text_id = deltas[0][1], deltas[2][1]
    assert deltas == [
        ("ThinkingBlock", thinking_id, None),
        ("ThinkingBlock", thinking_id, None),
        ("TextBlock", text_id, None),
        ("ToolCallBlock", "call_x", "get_weather"),
        ("ToolCallBlock", "call_x", "get_weather"),  # "id": "" falls back to the first id
    ]
    assert fragments == ["Let me", " check.", "Calling tool.", '{"city":', ' "Paris"}']
    assert thinking_id != text_id
    thinking, text, call = final.content
    assert isinstance(thinking, ThinkingBlock)
    assert (thinking.id, thinking.thinking) == (thinking_id, "Let me check.")
    assert isinstance(text, TextBlock)
    assert (text.id, text.text) == (text_id, "Calling tool.")
    assert isinstance(call, ToolCallBlock)
    assert (call.id, call.name, call.input) == ("call_x", "get_weather", '{"city": "Paris"}')
    assert call.parsed_input() == {"city": "Paris"}
    assert final.id == "chatcmpl-ds"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (20, 15)
    assert final.usage.cache_input_tokens == 0


# -- request bodies --------------------------------------------------------------------------


async def test_captured_request_body(
    server: OpenAICompatibleServer, model: DashScopeChatModel
) -> None:
    model.parameters = DashScopeChatParameters(
        thinking_enable=True, thinking_budget=512, top_k=20, max_tokens=256
    )
    server.push("ok")

    with pytest.warns(UserWarning, match='does not support tool_choice "required"'):
        await model(MSGS, TOOLS, ToolChoice("required"))

    assert server.requests[0].body == {
        "model": "qwen-plus",
        "stream": True,
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        ],
        "max_tokens": 256,
        "stream_options": {"include_usage": True},
        "tool_choice": "auto",
        "tools": TOOLS,  # sent as given: not flattened
        "enable_thinking": True,
        "thinking_budget": 512,
        "top_k": 20,
    }


async def test_defaults_always_send_enable_thinking_false(
    server: OpenAICompatibleServer, model: DashScopeChatModel
) -> None:
    server.push("ok")

    await model(MSGS)

    body = server.requests[0].body
    assert body["enable_thinking"] is False
    assert not {"thinking_budget", "top_k", "max_tokens", "tools", "tool_choice"} & set(body)


async def test_extra_body_wins_over_parameters(server: OpenAICompatibleServer) -> None:
    server.push("ok")
    params = DashScopeChatParameters(top_k=5, temperature=0.3, top_p=0.9)

    async with DashScopeChatModel(
        "qwen-plus",
        credential=credential(server),
        parameters=params,
        extra_body={"enable_thinking": True, "top_k": 50, "seed": 7},
    ) as model:
        await model(MSGS)

    body = server.requests[0].body
    assert (body["enable_thinking"], body["top_k"], body["seed"]) == (True, 50, 7)
    assert (body["temperature"], body["top_p"]) == (0.3, 0.9)


async def test_voice_parallel_calls_and_named_tool_choice(
    server: OpenAICompatibleServer, model: DashScopeChatModel
) -> None:
    model.parameters = DashScopeChatParameters(voice="Cherry", parallel_tool_calls=False)
    other = {"type": "function", "function": {"name": "other", "parameters": {}}}
    server.push("ok")

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning for a named tool choice
        await model(MSGS, [*TOOLS, other], ToolChoice("get_weather", tools=["get_weather"]))

    body = server.requests[0].body
    assert body["audio"] == {"voice": "Cherry", "format": "wav"}
    assert body["modalities"] == ["text", "audio"]
    assert body["parallel_tool_calls"] is False
    assert body["tools"] == TOOLS  # filtered by tool_choice.tools
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


async def test_malformed_tool_is_rejected_before_sending(
    server: OpenAICompatibleServer, model: DashScopeChatModel
) -> None:
    bad = [{"name": "get_weather", "parameters": {}}]

    with pytest.raises(ValueError, match='"type": "function"'):
        await model(MSGS, bad)

    assert server.requests == []


def test_parameter_validation() -> None:
    with pytest.raises(ValueError, match="temperature"):
        DashScopeChatParameters(temperature=2)  # [0, 2)
    with pytest.raises(ValueError, match="top_k"):
        DashScopeChatParameters(top_k=0)
    with pytest.raises(ValueError, match="top_k"):
        DashScopeChatParameters(top_k=101)
    with pytest.raises(ValueError, match="thinking_budget"):
        DashScopeChatParameters(thinking_budget=0)
    assert DashScopeChatParameters(temperature=1.99, top_k=100).top_k == 100


def test_defaults() -> None:
    model = DashScopeChatModel("qwen-plus", credential=DashScopeCredential(api_key="k"))

    assert model.type == "dashscope_chat"
    assert model.context_size == 131072
    assert isinstance(model.formatter, DashScopeChatFormatter)
    assert model.credential.get_base_url() == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    assert model._get_disable_thinking_kwargs() == {"extra_body": {"enable_thinking": False}}


# -- structured output -----------------------------------------------------------------------


async def test_structured_output_falls_back_to_thinking_disabled(
    server: OpenAICompatibleServer,
) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    server.push(
        ScriptedError(status=400, message="tool_choice not supported with thinking"),
        ScriptedError(status=400, message="still no"),
        ScriptedReply(
            tool_calls=[ScriptedToolCall("generate_structured_output", '{"city": "Paris"}')]
        ),
    )

    async with DashScopeChatModel(
        "qwen-plus",
        credential=credential(server),
        parameters=DashScopeChatParameters(thinking_enable=True),
        extra_body={"seed": 1},
    ) as model:
        result = await model.generate_structured_output(MSGS, schema)

    assert result.content == {"city": "Paris"}
    forced, auto, no_think = (r.body for r in server.requests)
    assert forced["enable_thinking"] is True
    assert forced["tool_choice"] == {
        "type": "function",
        "function": {"name": "generate_structured_output"},
    }
    assert auto["tool_choice"] == "auto"
    assert no_think["enable_thinking"] is False
    assert no_think["seed"] == 1  # the constructor's extra body is kept
    assert no_think["tool_choice"] == forced["tool_choice"]


# -- credentials -----------------------------------------------------------------------------


async def test_missing_key_names_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)

    async with DashScopeChatModel("qwen-plus") as model:
        with pytest.raises(ModelCredentialError, match="DASHSCOPE_API_KEY"):
            await model(MSGS)


async def test_key_and_base_url_from_environment(
    server: OpenAICompatibleServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", KEY)
    monkeypatch.setenv("DASHSCOPE_BASE_URL", server.base_url)
    server.push("from env")

    async with DashScopeChatModel("qwen-plus") as model:
        final = await model(MSGS)

    assert [b.text for b in final.content] == ["from env"]  # type: ignore[union-attr]
    assert KEY not in repr(model)

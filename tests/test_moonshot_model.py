"""MoonshotChatModel (trioagent/model/_moonshot.py) over the loopback server: request bodies
(the ``kimi-k3`` special case included) and where usage is read from."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
from provider_kit import MSGS, start_server

from trioagent.credential import MoonshotCredential
from trioagent.exception import ModelCredentialError
from trioagent.formatter import MoonshotChatFormatter
from trioagent.model import MoonshotChatModel, MoonshotChatParameters
from trioagent.testing import (
    OpenAICompatibleServer,
    ScriptedError,
    ScriptedReply,
    ScriptedSSE,
    ScriptedToolCall,
)
from trioagent.types import ToolChoice

KEY = "sk-moonshot-0123456789"
FORMATTED = [
    {"role": "system", "name": "system", "content": [{"type": "text", "text": "Be brief."}]},
    {"role": "user", "name": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
]


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    return await start_server(nursery, KEY)


def make(server: OpenAICompatibleServer, name: str, **params: object) -> MoonshotChatModel:
    return MoonshotChatModel(
        name,
        credential=MoonshotCredential(api_key=KEY, base_url=server.base_url),
        parameters=MoonshotChatParameters(**params),  # type: ignore[arg-type]
    )


@pytest.fixture
async def model(server: OpenAICompatibleServer) -> AsyncIterator[MoonshotChatModel]:
    async with make(server, "kimi-k2.6") as model:
        yield model


async def test_captured_body_kimi_k2(server: OpenAICompatibleServer) -> None:
    server.push("ok")

    async with make(server, "kimi-k2.6", max_tokens=64) as model:
        await model(MSGS)

    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].body == {
        "model": "kimi-k2.6",
        "stream": True,
        "messages": FORMATTED,
        "max_tokens": 64,
        "stream_options": {"include_usage": True},
        "thinking": {"type": "disabled"},
    }


async def test_captured_body_kimi_k3(server: OpenAICompatibleServer) -> None:
    server.push("ok")

    async with make(
        server, "kimi-k3", max_tokens=64, reasoning_effort="low", thinking_enable=True
    ) as model:
        await model(MSGS)

    assert server.requests[0].body == {
        "model": "kimi-k3",
        "stream": True,
        "messages": FORMATTED,
        "max_completion_tokens": 64,
        "reasoning_effort": "low",
        "stream_options": {"include_usage": True},
    }


async def test_non_k3_ignores_reasoning_effort(server: OpenAICompatibleServer) -> None:
    server.push("ok")
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]

    async with make(
        server, "kimi-k2.6", reasoning_effort="high", thinking_enable=True, temperature=0.6
    ) as model:
        await model(MSGS, tools, ToolChoice("required"))

    body = server.requests[0].body
    assert "reasoning_effort" not in body
    assert body["thinking"] == {"type": "enabled"}
    assert body["temperature"] == 0.6
    assert body["tools"] == tools
    assert body["tool_choice"] == "required"


async def test_only_top_level_usage_is_read(
    server: OpenAICompatibleServer, model: MoonshotChatModel
) -> None:
    base = {"id": "cmpl-k", "object": "chat.completion.chunk", "created": 1, "model": "kimi"}
    legacy_usage = {"prompt_tokens": 99, "completion_tokens": 99, "total_tokens": 198}
    server.push(
        ScriptedSSE(
            events=[
                {**base, "choices": [{"index": 0, "delta": {"reasoning_content": "r"}}]},
                {**base, "choices": [{"index": 0, "delta": {"content": "Hi"}}]},
                {
                    **base,
                    "choices": [
                        {"index": 0, "delta": {}, "finish_reason": "stop", "usage": legacy_usage}
                    ],
                },
            ]
        ),
        ScriptedSSE(
            events=[
                {**base, "choices": [{"index": 0, "delta": {"content": "Hi"}}]},
                {
                    **base,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 7,
                        "completion_tokens": 1,
                        "prompt_tokens_details": {"cached_tokens": 5},
                    },
                },
            ]
        ),
    )

    legacy = await model(MSGS)
    current = await model(MSGS)

    assert [type(b).__name__ for b in legacy.content] == ["ThinkingBlock", "TextBlock"]
    assert legacy.usage is None
    assert current.usage is not None
    assert (current.usage.input_tokens, current.usage.output_tokens) == (7, 1)
    assert current.usage.cache_input_tokens == 5


async def test_structured_output_falls_back_to_thinking_disabled(
    server: OpenAICompatibleServer,
) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    server.push(
        ScriptedError(status=400, message="tool_choice 'specified' is incompatible with thinking"),
        ScriptedError(status=400, message="again"),
        ScriptedReply(tool_calls=[ScriptedToolCall("generate_structured_output", '{"ok": true}')]),
    )

    async with make(server, "kimi-k2.6", thinking_enable=True) as model:
        result = await model.generate_structured_output(MSGS, schema)

    assert result.content == {"ok": True}
    assert [r.body["thinking"] for r in server.requests] == [
        {"type": "enabled"},
        {"type": "enabled"},
        {"type": "disabled"},
    ]


def test_parameter_validation_and_defaults() -> None:
    with pytest.raises(ValueError, match="temperature"):
        MoonshotChatParameters(temperature=1.5)  # [0, 1]
    with pytest.raises(ValueError, match="reasoning_effort"):
        MoonshotChatParameters(reasoning_effort="medium")  # type: ignore[arg-type]

    model = MoonshotChatModel("kimi-k2.6", credential=MoonshotCredential(api_key="k"))
    assert model.type == "moonshot_chat"
    assert model.context_size == 131072
    assert isinstance(model.formatter, MoonshotChatFormatter)
    assert model.credential.get_base_url() == "https://api.moonshot.cn/v1"
    assert model._get_disable_thinking_kwargs() == {
        "extra_body": {"thinking": {"type": "disabled"}}
    }


async def test_missing_key_names_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MOONSHOT_API_KEY", raising=False)

    async with MoonshotChatModel("kimi-k2.6") as model:
        with pytest.raises(ModelCredentialError, match="MOONSHOT_API_KEY"):
            await model(MSGS)

"""What DashScope, DeepSeek and Moonshot share (trioagent/model/_openai_compat.py), each
provider in turn, over the loopback server: typed errors and retries, cancellation closing the
connection, non-streaming calls, and one agent reply with a tool round.

Provider-specific request bodies and the recorded transcripts are in ``test_dashscope_model.py``,
``test_deepseek_model.py`` and ``test_moonshot_model.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing
from provider_kit import (
    MSGS,
    Sink,
    call_cancelled_after,
    lookup_agent,
    open_connections,
    start_server,
)

from trioagent.credential import DashScopeCredential, DeepSeekCredential, MoonshotCredential
from trioagent.exception import (
    ModelAuthenticationError,
    ModelInvalidRequestError,
    ModelRateLimitError,
    ModelUpstreamError,
)
from trioagent.message import TextBlock, ThinkingBlock, ToolCallBlock, UserMsg
from trioagent.model import (
    ChatModelBase,
    DashScopeChatModel,
    DeepSeekChatModel,
    MoonshotChatModel,
)
from trioagent.testing import (
    OpenAICompatibleServer,
    ScriptedError,
    ScriptedReply,
    ScriptedSSE,
    ScriptedToolCall,
)
from trioagent.types import FinishedReason

KEY = "sk-compat-0123456789"


def _dashscope(server: OpenAICompatibleServer, **kwargs: Any) -> ChatModelBase:
    credential = DashScopeCredential(api_key=KEY, base_url=server.base_url)
    return DashScopeChatModel("qwen-plus", credential=credential, **kwargs)


def _deepseek(server: OpenAICompatibleServer, **kwargs: Any) -> ChatModelBase:
    # DeepSeek's base URL has no /v1: POST {host}/chat/completions
    credential = DeepSeekCredential(api_key=KEY, base_url=f"http://{server.host}:{server.port}")
    return DeepSeekChatModel("deepseek-chat", credential=credential, **kwargs)


def _moonshot(server: OpenAICompatibleServer, **kwargs: Any) -> ChatModelBase:
    credential = MoonshotCredential(api_key=KEY, base_url=server.base_url)
    return MoonshotChatModel("kimi-k2.6", credential=credential, **kwargs)


PROVIDERS: dict[str, Callable[..., ChatModelBase]] = {
    "dashscope": _dashscope,
    "deepseek": _deepseek,
    "moonshot": _moonshot,
}
PATHS = {"dashscope": "/v1/chat/completions", "deepseek": "/chat/completions"}


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    return await start_server(nursery, KEY)


@pytest.fixture(params=sorted(PROVIDERS))
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make(provider: str, server: OpenAICompatibleServer, **kwargs: Any) -> ChatModelBase:
    return PROVIDERS[provider](server, **kwargs)


# -- plain calls -----------------------------------------------------------------------------


async def test_stream_path_auth_and_reuse(provider: str, server: OpenAICompatibleServer) -> None:
    server.push(
        ScriptedReply(text="Sunny.", usage={"prompt_tokens": 3, "completion_tokens": 2}), "Again."
    )

    async with make(provider, server) as model:
        first = await model(MSGS)
        second = await model(MSGS)

    assert [b.text for b in first.content] == ["Sunny."]  # type: ignore[union-attr]
    assert [b.text for b in second.content] == ["Again."]  # type: ignore[union-attr]
    assert first.usage is not None
    assert (first.usage.input_tokens, first.usage.output_tokens) == (3, 2)
    request = server.requests[0]
    assert request.path == PATHS.get(provider, "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["accept"] == "text/event-stream"
    assert [r.connection_id for r in server.requests] == [0, 0]


async def test_non_stream_completion(provider: str, server: OpenAICompatibleServer) -> None:
    server.push(
        ScriptedReply(
            reasoning="think",
            text="Done.",
            tool_calls=[ScriptedToolCall("f", '{"x": 1}', id="call_1")],
            id="chatcmpl-77",
            usage={"prompt_tokens": 5, "completion_tokens": 6},
        )
    )
    sink = Sink()

    async with make(provider, server, stream=False) as model:
        final = await model(MSGS, emit=sink)

    assert sink.items == []
    assert final.id == "chatcmpl-77"
    thinking, text, call = final.content
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.thinking == "think"
    assert isinstance(text, TextBlock)
    assert text.text == "Done."
    assert isinstance(call, ToolCallBlock)
    assert (call.id, call.name, call.input) == ("call_1", "f", '{"x": 1}')
    body = server.requests[0].body
    assert body["stream"] is False
    assert "stream_options" not in body
    assert server.requests[0].headers["accept"] == "application/json"


# -- errors and retries ----------------------------------------------------------------------


async def test_429_is_retried_after_retry_after(
    provider: str, server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(ScriptedError(status=429, message="Too many requests", retry_after=4), "finally")
    start = trio.current_time()

    async with make(provider, server) as model:
        final = await model(MSGS)

    assert [b.text for b in final.content] == ["finally"]  # type: ignore[union-attr]
    assert len(server.requests) == 2
    assert trio.current_time() - start >= 4


async def test_429_exhausted_is_a_rate_limit_error(
    provider: str, server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(ScriptedError(status=429, retry_after=1), ScriptedError(status=429, retry_after=2))

    async with make(provider, server, max_retries=1) as model:
        with pytest.raises(ModelRateLimitError) as info:
            await model(MSGS)

    assert info.value.retry_after == 2
    assert len(server.requests) == 2


async def test_400_is_not_retried(provider: str, server: OpenAICompatibleServer) -> None:
    server.push(ScriptedError(status=400, message="bad param", code="invalid_parameter"), "unused")

    async with make(provider, server) as model:
        with pytest.raises(ModelInvalidRequestError) as info:
            await model(MSGS)

    assert (info.value.status_code, info.value.code) == (400, "invalid_parameter")
    assert len(server.requests) == 1


async def test_401_key_is_redacted(provider: str, server: OpenAICompatibleServer) -> None:
    server.push(ScriptedError(status=401, message=f"Invalid key {KEY}"))

    async with make(provider, server) as model:
        with pytest.raises(ModelAuthenticationError) as info:
            await model(MSGS)
        assert KEY not in repr(model)

    assert KEY not in str(info.value)
    assert "Invalid key ***" in str(info.value)


async def test_500_retried_then_raised(
    provider: str, server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(*(ScriptedError(status=503, message=f"busy {i}") for i in range(3)))

    async with make(provider, server, max_retries=2) as model:
        with pytest.raises(ModelUpstreamError, match="busy 2"):
            await model(MSGS)

    assert len(server.requests) == 3


async def test_error_chunk_inside_the_stream(provider: str, server: OpenAICompatibleServer) -> None:
    server.push(
        ScriptedSSE(
            events=[
                {"id": "x", "choices": [{"index": 0, "delta": {"content": "Hi"}}]},
                {"error": {"message": "internal failure", "code": "InternalError"}},
            ]
        )
    )

    async with make(provider, server) as model:
        with pytest.raises(ModelUpstreamError, match="internal failure") as info:
            await model(MSGS)

    assert not info.value.retryable
    assert len(server.requests) == 1


# -- cancellation ----------------------------------------------------------------------------


async def test_cancel_mid_stream_closes_the_connection(
    provider: str, server: OpenAICompatibleServer
) -> None:
    server.push(ScriptedReply(text="Hello world, how are you", chunk_size=5, stall_after=3))
    model = make(provider, server)

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
    await model.aclose()


# -- one agent reply with a tool round -------------------------------------------------------


async def test_agent_reply_with_a_tool_round(provider: str, server: OpenAICompatibleServer) -> None:
    server.push(
        ScriptedReply(
            reasoning="I should look it up.",
            tool_calls=[ScriptedToolCall("lookup", '{"city": "Paris"}', id="call_1")],
            chunk_size=5,
        ),
        ScriptedReply(text="It is sunny in Paris.", chunk_size=5),
    )
    seen: list[str] = []

    async with make(provider, server) as model:
        agent = lookup_agent(model, seen)
        msg = await agent.reply(UserMsg("user", "Weather in Paris?"))

    assert msg.get_text_content() == "It is sunny in Paris."
    assert seen == ["Paris"]
    first, second = (r.body for r in server.requests)
    assert first["tools"][0]["function"]["name"] == "lookup"
    *_, call, result = second["messages"]
    assert call["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"city": "Paris"}'},
        }
    ]
    assert call["content"] is None
    assert result == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "sunny in Paris",
        "name": "lookup",
    }
    # each provider's dialect: thinking replay and the name field
    if provider == "dashscope":
        assert "reasoning_content" not in call  # replayed only with application/x-thinking
        assert "name" not in call
    else:
        assert call["reasoning_content"] == "I should look it up."
        assert ("name" in call) is (provider == "moonshot")

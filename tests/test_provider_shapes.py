"""Malformed payload shapes from the non-OpenAI-chat providers, over the real HTTP path.

A stream event, NDJSON line or response body that is valid JSON but of the wrong shape (a
string where an object belongs, a list where a number belongs, ...) must fail the call with a
:class:`~trioagent.exception.ModelStreamError` (a streamed call) or a non-retryable
:class:`~trioagent.exception.ModelUpstreamError` (a non-streamed body) naming the model and
quoting a short, redacted excerpt — never a raw ``AttributeError``/``KeyError``/``TypeError``/
``ValueError`` from the parser.  Every payload carries the model's own API key, which the
error message must not contain (redaction), and the parser's exception is not chained (it may
quote the payload unredacted).

The loopback server answers through custom routes with raw SSE / NDJSON bodies; httpx2 is never
patched.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from provider_kit import MSGS, event_stream, start_server

from trioagent.credential import (
    AnthropicCredential,
    GeminiCredential,
    OllamaCredential,
    OpenAICredential,
)
from trioagent.exception import ModelStreamError, ModelUpstreamError
from trioagent.model import (
    AnthropicChatModel,
    ChatModelBase,
    GeminiChatModel,
    OllamaChatModel,
    OpenAIResponseModel,
)
from trioagent.testing import OpenAICompatibleServer, RecordedRequest, ScriptedResponse

KEY = "sk-shape-test-0123456789abcdef"


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    return await start_server(nursery)


def route(server: OpenAICompatibleServer, path: str, answer: ScriptedResponse) -> None:
    """Answer every ``POST path`` with ``answer``."""

    def handler(request: RecordedRequest) -> ScriptedResponse:
        return answer

    server.add_route("POST", path, handler)


def leaky(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with the API key first (so it falls inside the quoted excerpt)."""
    return {"leak": KEY, **payload}


def sse(events: list[tuple[str, Any]]) -> ScriptedResponse:
    return event_stream(
        [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]
    )


async def stream_error(model: ChatModelBase, server: OpenAICompatibleServer) -> ModelStreamError:
    """The ``ModelStreamError`` of a streamed call, checked: names the model, no key, no
    chained parser exception, not retried."""
    async with model:
        with pytest.raises(ModelStreamError) as info:
            await model(MSGS)
    message = info.value.message
    assert message.startswith("malformed "), message
    assert f"in the answer of {model.model!r}" in message, message
    assert KEY not in message
    assert KEY not in str(info.value)
    assert info.value.__cause__ is None
    assert not info.value.retryable
    assert len(server.requests) == 1
    return info.value


async def body_error(model: ChatModelBase, server: OpenAICompatibleServer) -> ModelUpstreamError:
    """The non-retryable ``ModelUpstreamError`` of a non-streamed call, checked as above."""
    async with model:
        with pytest.raises(ModelUpstreamError) as info:
            await model(MSGS)
    message = info.value.message
    assert message.startswith(f"malformed response in the answer of {model.model!r}"), message
    assert KEY not in message
    assert info.value.__cause__ is None
    assert not info.value.retryable
    assert len(server.requests) == 1
    return info.value


# -- Anthropic ---------------------------------------------------------------------------------

MESSAGE_START = (
    "message_start",
    {
        "type": "message_start",
        "message": {"id": "msg_1", "content": [], "usage": {"input_tokens": 3}},
    },
)


def anthropic(server: OpenAICompatibleServer, **kwargs: Any) -> AnthropicChatModel:
    credential = AnthropicCredential(api_key=KEY, base_url=f"http://{server.host}:{server.port}")
    return AnthropicChatModel(
        "claude-shape", credential=credential, max_retries=3, retry_delay=0.001, **kwargs
    )


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(
            ("message_start", {"type": "message_start", "message": KEY}), id="message-str"
        ),
        pytest.param(
            ("message_start", {"type": "message_start", "message": {"usage": KEY}}),
            id="usage-str",
        ),
        pytest.param(
            ("message_start", {"type": "message_start", "message": {"usage": [1]}}),
            id="usage-list",
        ),
        pytest.param(
            (
                "message_start",
                {"type": "message_start", "message": {"usage": {"input_tokens": KEY}}},
            ),
            id="usage-count-str",
        ),
        pytest.param(
            ("content_block_start", {"type": "content_block_start", "index": KEY}),
            id="start-index-str",
        ),
        pytest.param(
            ("content_block_start", {"type": "content_block_start", "content_block": "text"}),
            id="block-str",
        ),
        pytest.param(
            (
                "content_block_start",
                {"type": "content_block_start", "content_block": {"type": "tool_use", "name": [1]}},
            ),
            id="tool-name-list",
        ),
        pytest.param(
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": KEY}),
            id="delta-str",
        ),
        pytest.param(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": [0], "delta": {"type": "text_delta"}},
            ),
            id="delta-index-list",
        ),
        pytest.param(
            ("content_block_stop", {"type": "content_block_stop", "index": {"i": 0}}),
            id="stop-index-object",
        ),
        pytest.param(
            ("message_delta", {"type": "message_delta", "usage": {"output_tokens": KEY}}),
            id="message-delta-usage-str",
        ),
        pytest.param(
            ("message_delta", {"type": "message_delta", "usage": KEY}),
            id="message-delta-usage-not-object",
        ),
    ],
)
async def test_anthropic_malformed_event(
    server: OpenAICompatibleServer, event: tuple[str, dict[str, Any]]
) -> None:
    name, payload = event
    events = [(name, leaky(payload))] if name == "message_start" else [MESSAGE_START]
    if name != "message_start":
        events.append((name, leaky(payload)))
    route(server, "/v1/messages", sse([*events, ("message_stop", {"type": "message_stop"})]))
    await stream_error(anthropic(server), server)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"content": "text"}, id="content-str"),
        pytest.param({"content": [None]}, id="content-null"),
        pytest.param({"content": {"type": "text"}}, id="content-object"),
        pytest.param({"content": [], "usage": {"input_tokens": KEY}}, id="usage-count-str"),
        pytest.param({"content": [{"type": "tool_use", "name": ["f"]}]}, id="name-list"),
    ],
)
async def test_anthropic_malformed_body(
    server: OpenAICompatibleServer, body: dict[str, Any]
) -> None:
    route(server, "/v1/messages", ScriptedResponse.json(leaky(body)))
    await body_error(anthropic(server, stream=False), server)


# -- Gemini ------------------------------------------------------------------------------------

GEMINI = "gemini-shape"
GEMINI_STREAM = f"/v1beta/models/{GEMINI}:streamGenerateContent"
GEMINI_GENERATE = f"/v1beta/models/{GEMINI}:generateContent"


def gemini(server: OpenAICompatibleServer, **kwargs: Any) -> GeminiChatModel:
    credential = GeminiCredential(api_key=KEY, base_url=f"http://{server.host}:{server.port}")
    return GeminiChatModel(
        GEMINI, credential=credential, max_retries=3, retry_delay=0.001, **kwargs
    )


def finished(parts: Any) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}


GEMINI_SHAPES = [
    pytest.param({"candidates": {"0": {}}}, id="candidates-object"),
    pytest.param({"candidates": KEY}, id="candidates-str"),
    pytest.param({"candidates": [KEY]}, id="candidate-str"),
    pytest.param({"candidates": [{"content": KEY, "finishReason": "STOP"}]}, id="content-str"),
    pytest.param(finished(KEY), id="parts-str"),
    pytest.param(finished([None]), id="part-null"),
    pytest.param(finished([KEY]), id="part-str"),
    pytest.param(finished([{"functionCall": KEY}]), id="function-call-str"),
    pytest.param(finished([{"functionCall": {"name": "f", "args": KEY}}]), id="args-str"),
    pytest.param(finished([{"functionCall": {"name": "f", "args": [1, 2]}}]), id="args-list"),
    pytest.param(finished([{"functionCall": {"name": 5, "args": {}}}]), id="name-number"),
    pytest.param({**finished([]), "usageMetadata": KEY}, id="usage-str"),
    pytest.param({**finished([]), "usageMetadata": [3]}, id="usage-list"),
    pytest.param(
        {**finished([]), "usageMetadata": {"promptTokenCount": KEY, "totalTokenCount": 3}},
        id="usage-count-str",
    ),
]


@pytest.mark.parametrize("chunk", GEMINI_SHAPES)
async def test_gemini_malformed_chunk(
    server: OpenAICompatibleServer, chunk: dict[str, Any]
) -> None:
    route(server, GEMINI_STREAM, event_stream([f"data: {json.dumps(leaky(chunk))}\n\n".encode()]))
    await stream_error(gemini(server), server)


@pytest.mark.parametrize("body", GEMINI_SHAPES)
async def test_gemini_malformed_body(server: OpenAICompatibleServer, body: dict[str, Any]) -> None:
    route(server, GEMINI_GENERATE, ScriptedResponse.json(leaky(body)))
    await body_error(gemini(server, stream=False), server)


async def test_gemini_non_object_body_is_redacted(server: OpenAICompatibleServer) -> None:
    route(server, GEMINI_GENERATE, ScriptedResponse.json([KEY]))
    credential = GeminiCredential(api_key=KEY, base_url=f"http://{server.host}:{server.port}")
    async with GeminiChatModel(GEMINI, credential=credential, stream=False, max_retries=0) as model:
        with pytest.raises(ModelUpstreamError) as info:
            await model(MSGS)
    assert repr(GEMINI) in info.value.message
    assert KEY not in info.value.message


# -- Ollama ------------------------------------------------------------------------------------


def ollama(server: OpenAICompatibleServer, **kwargs: Any) -> OllamaChatModel:
    credential = OllamaCredential(host=f"http://{server.host}:{server.port}", api_key=KEY)
    return OllamaChatModel(
        "qwen-shape", credential=credential, max_retries=3, retry_delay=0.001, **kwargs
    )


def last(message: Any, **fields: Any) -> dict[str, Any]:
    return leaky({"model": "qwen-shape", "message": message, "done": True, **fields})


OLLAMA_SHAPES = [
    pytest.param(last(KEY), id="message-str"),
    pytest.param(last([KEY]), id="message-list"),
    pytest.param(last({"role": "assistant", "tool_calls": KEY}), id="tool-calls-str"),
    pytest.param(last({"role": "assistant", "tool_calls": {"a": 1}}), id="tool-calls-object"),
    pytest.param(last({"role": "assistant", "tool_calls": [None]}), id="tool-call-null"),
    pytest.param(last({"role": "assistant", "tool_calls": [KEY]}), id="tool-call-str"),
    pytest.param(last({"role": "assistant", "tool_calls": [{"function": KEY}]}), id="function-str"),
    pytest.param(
        last({"role": "assistant", "tool_calls": [{"function": {"name": ["f"]}}]}),
        id="name-list",
    ),
    pytest.param(last({"content": "hi"}, prompt_eval_count=KEY, eval_count=1), id="count-str"),
]


@pytest.mark.parametrize("line", OLLAMA_SHAPES)
async def test_ollama_malformed_line(server: OpenAICompatibleServer, line: dict[str, Any]) -> None:
    first = json.dumps({"model": "qwen-shape", "message": {"content": "a"}, "done": False})
    body = [f"{first}\n".encode(), f"{json.dumps(line)}\n".encode()]
    route(server, "/api/chat", ScriptedResponse(body=body, media_type="application/x-ndjson"))
    await stream_error(ollama(server), server)


@pytest.mark.parametrize("body", OLLAMA_SHAPES)
async def test_ollama_malformed_body(server: OpenAICompatibleServer, body: dict[str, Any]) -> None:
    route(server, "/api/chat", ScriptedResponse.json(body))
    await body_error(ollama(server, stream=False), server)


# -- OpenAI Responses --------------------------------------------------------------------------


def responses(server: OpenAICompatibleServer, **kwargs: Any) -> OpenAIResponseModel:
    credential = OpenAICredential(api_key=KEY, base_url=server.base_url)
    return OpenAIResponseModel(
        "resp-shape", credential=credential, max_retries=3, retry_delay=0.001, **kwargs
    )


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(
            ("response.output_text.delta", {"delta": 5, "item_id": "m", "content_index": 0}),
            id="text-delta-number",
        ),
        pytest.param(
            ("response.output_text.delta", {"delta": {"text": "a"}, "item_id": "m"}),
            id="text-delta-object",
        ),
        pytest.param(
            ("response.output_text.delta", {"delta": "a", "item_id": "m", "content_index": KEY}),
            id="content-index-str",
        ),
        pytest.param(
            ("response.reasoning_summary_text.delta", {"delta": "a", "summary_index": [0]}),
            id="summary-index-list",
        ),
        pytest.param(("response.output_item.added", {"item": KEY}), id="item-str"),
        pytest.param(
            ("response.output_item.added", {"item": {"type": "function_call", "name": ["f"]}}),
            id="call-name-list",
        ),
        pytest.param(
            ("response.function_call_arguments.delta", {"item_id": "fc", "delta": 5}),
            id="arguments-delta-number",
        ),
        pytest.param(("response.completed", {"response": KEY}), id="response-str"),
        pytest.param(("response.completed", {"response": [1]}), id="response-list"),
        pytest.param(("response.completed", {"response": {"output": KEY}}), id="output-str"),
        pytest.param(("response.completed", {"response": {"output": [None]}}), id="output-null"),
        pytest.param(
            ("response.completed", {"response": {"output": [], "usage": KEY}}), id="usage-str"
        ),
        pytest.param(
            ("response.completed", {"response": {"usage": {"input_tokens": KEY}}}),
            id="usage-count-str",
        ),
        pytest.param(
            (
                "response.completed",
                {
                    "response": {
                        "output": [{"type": "function_call", "id": "fc", "arguments": {"a": 1}}]
                    }
                },
            ),
            id="arguments-object",
        ),
    ],
)
async def test_responses_malformed_event(
    server: OpenAICompatibleServer, event: tuple[str, dict[str, Any]]
) -> None:
    name, payload = event
    added = {
        "type": "response.output_item.added",
        "item": {"type": "function_call", "id": "fc", "call_id": "call_1", "name": "f"},
    }
    events: list[tuple[str, Any]] = [("response.output_item.added", added)]
    events.append((name, leaky({"type": name, **payload})))
    events.append(("response.completed", {"type": "response.completed", "response": {}}))
    route(server, "/v1/responses", sse(events))
    await stream_error(responses(server), server)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"output": KEY}, id="output-str"),
        pytest.param({"output": [None]}, id="output-null"),
        pytest.param({"output": [{"type": "message", "content": KEY}]}, id="content-str"),
        pytest.param({"output": [{"type": "message", "content": [None]}]}, id="part-null"),
        pytest.param({"output": [], "usage": {"output_tokens": KEY}}, id="usage-count-str"),
        pytest.param({"output": [], "usage": KEY}, id="usage-str"),
        pytest.param(
            {"output": [{"type": "function_call", "call_id": "c", "arguments": [1]}]},
            id="arguments-list",
        ),
        pytest.param({"output": [{"type": "reasoning", "summary": KEY}]}, id="summary-str"),
    ],
)
async def test_responses_malformed_body(
    server: OpenAICompatibleServer, body: dict[str, Any]
) -> None:
    route(server, "/v1/responses", ScriptedResponse.json(leaky(body)))
    await body_error(responses(server, stream=False), server)

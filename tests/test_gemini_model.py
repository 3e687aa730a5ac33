"""GeminiChatModel (trioagent/model/_gemini.py) over the real loopback server.

The Gemini endpoints are custom routes of ``serve_openai_compatible``: every call goes through
real sockets, real HTTP/1.1 (chunked SSE with Gemini's ``\\r\\n`` line endings) and real SSE
parsing; httpx2 is never patched.  Tests whose retries sleep use ``autojump_clock`` with the
model's read/connect timeouts off, so a clock jump can never fire a network deadline while
data is in flight on loopback.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import trio
import trio.testing
from provider_kit import (
    MSGS,
    ScriptedRoute,
    Sink,
    agent_with_tool,
    call_cancelled_after,
    event_stream,
    open_connections,
    start_server,
)

from trioagent.credential import GeminiCredential
from trioagent.exception import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelCredentialError,
    ModelInvalidRequestError,
    ModelRateLimitError,
    ModelStreamError,
    ModelUpstreamError,
)
from trioagent.formatter import GeminiChatFormatter
from trioagent.message import (
    AssistantMsg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMsg,
)
from trioagent.model import GeminiChatModel, GeminiChatParameters
from trioagent.model._gemini_schema import sanitize_gemini_schema, to_gemini_rest
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedResponse,
)
from trioagent.types import FinishedReason, ToolChoice

MODEL = "gemini-2.5-flash"
STREAM_PATH = f"/v1beta/models/{MODEL}:streamGenerateContent"
GENERATE_PATH = f"/v1beta/models/{MODEL}:generateContent"
KEY = "AIzaSy-test-0123456789"

# G1: text
G1 = [
    {
        "candidates": [
            {"content": {"parts": [{"text": "The weather"}], "role": "model"}, "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "kX9aaB",
    },
    {
        "candidates": [
            {"content": {"parts": [{"text": " in Paris is mild."}], "role": "model"}, "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 9, "totalTokenCount": 17},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "kX9aaB",
    },
    {
        "candidates": [
            {
                "content": {"parts": [{"text": ""}], "role": "model"},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 8,
            "candidatesTokenCount": 9,
            "totalTokenCount": 17,
            "cachedContentTokenCount": 4,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "kX9aaB",
    },
]

# G2: thought + text + two function calls (one with thoughtSignature)
G2 = [
    {
        "candidates": [
            {
                "content": {
                    "parts": [{"text": "**Planning** the lookup", "thought": True}],
                    "role": "model",
                },
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 31, "totalTokenCount": 55, "thoughtsTokenCount": 24},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r-gem-1",
    },
    {
        "candidates": [
            {"content": {"parts": [{"text": "Let me check."}], "role": "model"}, "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 31,
            "candidatesTokenCount": 3,
            "totalTokenCount": 58,
            "thoughtsTokenCount": 24,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r-gem-1",
    },
    {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {
                            "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                            "thoughtSignature": "CiQBcsjafA==",
                        },
                        {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
                    ],
                    "role": "model",
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 31,
            "candidatesTokenCount": 40,
            "totalTokenCount": 95,
            "thoughtsTokenCount": 24,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r-gem-1",
    },
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def sse(events: Sequence[dict[str, Any]]) -> list[bytes]:
    """One SSE event per piece, with Gemini's ``\\r\\n`` line endings."""
    return [f"data: {json.dumps(e)}\r\n\r\n".encode() for e in events]


def stream_response(events: Sequence[dict[str, Any]], **kwargs: Any) -> ScriptedResponse:
    return event_stream(sse(events), **kwargs)


def error_response(
    status: int,
    message: str,
    google_status: str,
    *,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> ScriptedResponse:
    error: dict[str, Any] = {"code": status, "message": message, "status": google_status}
    if details is not None:
        error["details"] = details
    return ScriptedResponse(
        status=status, body=json.dumps({"error": error}).encode(), headers=headers or {}
    )


class Gemini(ScriptedRoute):
    """The Gemini endpoints on the loopback server: scripted answers, key checked."""

    def __init__(self, server: OpenAICompatibleServer) -> None:
        super().__init__(server, STREAM_PATH, GENERATE_PATH)

    def answer(self, request: RecordedRequest) -> ScriptedResponse:
        if request.headers.get("x-goog-api-key") != KEY:
            return error_response(401, "Request had invalid credentials.", "UNAUTHENTICATED")
        return super().answer(request)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request the server received (custom routes added by a test included)."""
        return self.server.requests

    def credential(self, key: str = KEY) -> GeminiCredential:
        return GeminiCredential(
            api_key=key, base_url=f"http://{self.server.host}:{self.server.port}"
        )

    def model(self, **kwargs: Any) -> GeminiChatModel:
        return GeminiChatModel(MODEL, credential=self.credential(), **kwargs)


@pytest.fixture
async def gemini(nursery: trio.Nursery) -> Gemini:
    return Gemini(await start_server(nursery))


@pytest.fixture
async def model(gemini: Gemini) -> AsyncIterator[GeminiChatModel]:
    async with gemini.model(read_timeout=None, connect_timeout=None) as model:
        yield model


# -- streaming transcripts -------------------------------------------------------------------


async def test_g1_text_stream(gemini: Gemini, model: GeminiChatModel) -> None:
    gemini.push(stream_response(G1))
    sink = Sink()

    final = await model(MSGS, emit=sink)

    assert [[(type(b).__name__, b.text) for b in c.content] for c in sink.items] == [  # type: ignore[union-attr]
        [("TextBlock", "The weather")],
        [("TextBlock", " in Paris is mild.")],
    ]
    assert [(c.usage.input_tokens, c.usage.output_tokens) for c in sink.items] == [  # type: ignore[union-attr]
        (8, 0),
        (8, 9),
    ]
    assert all(not c.is_last and c.id == "kX9aaB" for c in sink.items)
    text_id = sink.items[0].content[0].id
    assert sink.items[1].content[0].id == text_id
    assert final.is_last
    assert final.id == "kX9aaB"
    (text,) = final.content
    assert isinstance(text, TextBlock)
    assert (text.id, text.text) == (text_id, "The weather in Paris is mild.")
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (8, 9)
    assert final.usage.cache_input_tokens == 4
    assert final.finished_reason == FinishedReason.COMPLETED
    assert final.metadata == {"finish_reason": "STOP"}
    (request,) = gemini.requests
    assert request.path == f"{STREAM_PATH}?alt=sse"


async def test_g2_thought_text_and_two_function_calls(
    gemini: Gemini, model: GeminiChatModel
) -> None:
    gemini.push(stream_response(G2))
    model.parameters = GeminiChatParameters(thinking_enable=True)
    sink = Sink()

    final = await model(MSGS, [WEATHER_TOOL], emit=sink)

    think, text, calls = sink.items
    (k,) = think.content
    assert isinstance(k, ThinkingBlock)
    assert k.thinking == "**Planning** the lookup"
    assert k.extra == {}
    assert think.usage is not None
    assert (think.usage.input_tokens, think.usage.output_tokens) == (31, 24)
    (t,) = text.content
    assert isinstance(t, TextBlock)
    assert t.text == "Let me check."
    assert text.usage is not None
    assert (text.usage.input_tokens, text.usage.output_tokens) == (31, 27)
    paris, rome = calls.content
    assert isinstance(paris, ToolCallBlock)
    assert isinstance(rome, ToolCallBlock)
    assert (paris.id, paris.name, paris.input) == (
        "gemini_ts:CiQBcsjafA==",
        "get_weather",
        '{"city": "Paris"}',
    )
    assert (rome.name, rome.input) == ("get_weather", '{"city": "Rome"}')
    assert len(rome.id) == 32  # a fresh uuid hex
    assert rome.id != paris.id
    assert calls.usage is not None
    assert (calls.usage.input_tokens, calls.usage.output_tokens) == (31, 64)

    assert final.id == "r-gem-1"
    assert [type(b).__name__ for b in final.content] == [
        "ThinkingBlock",
        "TextBlock",
        "ToolCallBlock",
        "ToolCallBlock",
    ]
    assert [b.id for b in final.content] == [k.id, t.id, paris.id, rome.id]
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (31, 64)
    assert final.usage.cache_input_tokens == 0

    body = gemini.requests[0].body
    assert body["generationConfig"] == {
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024}
    }
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Get the weather",
                    "parameters": WEATHER_TOOL["function"]["parameters"],  # type: ignore[index]
                }
            ]
        }
    ]
    assert "toolConfig" not in body

    # Replaying the turn sends the signature back from the call id.
    history = [
        *MSGS,
        AssistantMsg(
            "assistant",
            [
                *final.content,
                ToolResultBlock(id=paris.id, name="get_weather", output="Sunny"),
                ToolResultBlock(id=rome.id, name="get_weather", output="Rainy"),
            ],
        ),
    ]
    gemini.push(stream_response(G1))
    await model(history, [WEATHER_TOOL])
    contents = gemini.requests[1].body["contents"]
    assert contents[2] == {
        "role": "model",
        "parts": [
            {"thought": True, "text": "**Planning** the lookup"},
            {"text": "Let me check."},
            {
                "functionCall": {
                    "id": "gemini_ts:CiQBcsjafA==",
                    "name": "get_weather",
                    "args": {"city": "Paris"},
                },
                "thoughtSignature": "CiQBcsjafA==",
            },
            {"functionCall": {"id": rome.id, "name": "get_weather", "args": {"city": "Rome"}}},
        ],
    }
    assert contents[3] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": paris.id,
                    "name": "get_weather",
                    "response": {"output": "Sunny"},
                }
            },
            {
                "functionResponse": {
                    "id": rome.id,
                    "name": "get_weather",
                    "response": {"output": "Rainy"},
                }
            },
        ],
    }


async def test_events_split_across_reads_and_a_urlsafe_signature(
    gemini: Gemini, model: GeminiChatModel
) -> None:
    event = {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {"text": "é", "thoughtSignature": "AAA="},
                        {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "-_8="},
                        {"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}},
                    ]
                },
                "finishReason": "STOP",
            }
        ]
    }
    raw = f"data: {json.dumps(event, ensure_ascii=False)}\r\n\r\n".encode()
    gemini.push(ScriptedResponse(body=[raw[:7], raw[7:31], raw[31:-1], raw[-1:]]))

    final = await model(MSGS)

    text, call, image = final.content
    assert isinstance(text, TextBlock)
    assert text.text == "é"
    assert isinstance(call, ToolCallBlock)
    assert (call.id, call.input) == ("gemini_ts:" + base64.b64encode(b"\xfb\xff").decode(), "{}")
    assert image.source.media_type == "image/png"  # type: ignore[union-attr]
    assert final.usage is None


# -- request ---------------------------------------------------------------------------------


async def test_request_body_and_headers(gemini: Gemini, model: GeminiChatModel) -> None:
    model.parameters = GeminiChatParameters(
        max_tokens=100, temperature=0.2, top_p=0.9, thinking_enable=True, thinking_budget=-1
    )
    tools = [
        WEATHER_TOOL,
        {
            "type": "function",
            "function": {
                "name": "book",
                "description": "Book a table",
                "parameters": {
                    "$schema": "http://json-schema.org/draft-07/schema#",
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "when": {"$ref": "#/$defs/When"},
                        "note": {"type": ["string", "null"]},
                        "kind": {
                            "anyOf": [{"type": "string", "const": "c"}, {"type": "null"}],
                            "default": None,
                        },
                    },
                    "$defs": {
                        "When": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {"day": {"type": "string"}},
                        }
                    },
                },
            },
        },
        {"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}},
    ]
    gemini.push(stream_response(G1))

    await model(MSGS, tools, ToolChoice(mode="book", tools=["book", "noop"]))

    (request,) = gemini.requests
    assert request.method == "POST"
    assert request.path == f"{STREAM_PATH}?alt=sse"
    assert request.headers["x-goog-api-key"] == KEY
    assert "authorization" not in request.headers
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert request.body == {
        "contents": [
            {"role": "user", "parts": [{"text": "Be brief."}]},
            {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
        ],
        "generationConfig": {
            "maxOutputTokens": 100,
            "temperature": 0.2,
            "topP": 0.9,
            "thinkingConfig": {"includeThoughts": True, "thinkingBudget": -1},
        },
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "book",
                        "description": "Book a table",
                        "parameters": {
                            "type": "object",
                            "properties": {
                                "when": {
                                    "type": "object",
                                    "properties": {"day": {"type": "string"}},
                                },
                                "note": {"type": "string"},
                                "kind": {"type": "string", "enum": ["c"], "default": None},
                            },
                        },
                    },
                    {"name": "noop"},
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["book"]}},
    }
    assert list(request.body) == ["contents", "generationConfig", "tools", "toolConfig"]


@pytest.mark.parametrize(
    ("mode", "expected"), [("auto", "AUTO"), ("none", "NONE"), ("required", "ANY")]
)
async def test_tool_choice_modes_and_plain_generate_content(
    gemini: Gemini, mode: str, expected: str
) -> None:
    gemini.push(ScriptedResponse.json({"candidates": [{"content": {"parts": [{"text": "ok"}]}}]}))

    async with gemini.model(stream=False) as model:
        await model(MSGS, [WEATHER_TOOL], ToolChoice(mode=mode))

    (request,) = gemini.requests
    assert request.path == GENERATE_PATH
    assert request.headers["accept"] == "application/json"
    assert request.body["toolConfig"] == {"functionCallingConfig": {"mode": expected}}
    assert request.body["generationConfig"] == {
        "thinkingConfig": {"includeThoughts": False, "thinkingBudget": 0}
    }


async def test_generation_config_extra_body_and_model_path(gemini: Gemini) -> None:
    gemini.server.add_route(
        "POST",
        "/v1/tunedModels/mine:streamGenerateContent",
        lambda request: stream_response(G1),
    )
    credential = gemini.credential()
    async with GeminiChatModel(
        "tunedModels/mine",
        credential=credential,
        api_version="v1",
        generation_config={"stopSequences": ["END"], "thinkingConfig": {"thinkingLevel": "low"}},
        extra_body={"safetySettings": [], "generationConfig": {"candidateCount": 1}},
    ) as model:
        await model(MSGS, tool_choice=ToolChoice("required"))

    body = gemini.requests[0].body
    assert body["generationConfig"] == {
        "thinkingConfig": {"thinkingLevel": "low"},
        "stopSequences": ["END"],
        "candidateCount": 1,
    }
    assert body["safetySettings"] == []
    assert "tools" not in body
    assert "toolConfig" not in body


def test_parameter_validation() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        GeminiChatParameters(max_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        GeminiChatParameters(temperature=2.5)
    with pytest.raises(ValueError, match="top_p"):
        GeminiChatParameters(top_p=1.5)
    with pytest.raises(ValueError, match="thinking_budget"):
        GeminiChatParameters(thinking_budget=-2)


def test_schema_sanitising() -> None:
    assert sanitize_gemini_schema({"type": ["string", "null"]}) == {"type": "string"}
    assert sanitize_gemini_schema(
        {"anyOf": [{"type": "string", "const": "c"}, {"type": "null"}], "default": None}
    ) == {"type": "string", "enum": ["c"], "default": None}
    assert sanitize_gemini_schema({"type": ["string", "integer", "null"]}) == {
        "anyOf": [{"type": "string"}, {"type": "integer"}]
    }
    assert sanitize_gemini_schema(
        {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}
    ) == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert sanitize_gemini_schema({"type": "null"}) == {"type": "object"}
    assert sanitize_gemini_schema(
        {"type": "array", "items": {"const": 1, "enum": [1, 2]}, "description": "d"}
    ) == {"type": "array", "items": {"enum": [1, 2]}, "description": "d"}
    with pytest.raises(ValueError, match="anyOf"):
        sanitize_gemini_schema({"type": ["string", "integer"], "anyOf": [{"type": "string"}]})


def test_rest_conversion_keeps_user_data() -> None:
    contents = [
        {
            "role": "model",
            "parts": [
                {
                    "function_call": {"id": "x", "name": "f", "args": {"snake_key": b"\x01"}},
                    "thought_signature": b"\x01\x02",
                },
                {"inline_data": {"data": "AA==", "mime_type": "image/png"}},
                {"function_response": {"name": "f", "response": {"the_output": "o"}}},
            ],
        }
    ]

    assert to_gemini_rest(contents) == [
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"id": "x", "name": "f", "args": {"snake_key": "AQ=="}},
                    "thoughtSignature": "AQI=",
                },
                {"inlineData": {"data": "AA==", "mimeType": "image/png"}},
                {"functionResponse": {"name": "f", "response": {"the_output": "o"}}},
            ],
        }
    ]


# -- non-streaming ---------------------------------------------------------------------------


async def test_non_stream_generate_content(gemini: Gemini) -> None:
    gemini.push(
        ScriptedResponse.json(
            {
                "candidates": [
                    {
                        "content": {
                            "parts": [
                                {"text": "plan", "thought": True},
                                {"text": "Hello "},
                                {"text": "there."},
                                {"functionCall": {"id": "fc-1", "name": "f", "args": {"x": 1}}},
                            ],
                            "role": "model",
                        },
                        "finishReason": "STOP",
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": 5,
                    "candidatesTokenCount": 6,
                    "thoughtsTokenCount": 2,
                    "toolUsePromptTokenCount": 1,
                    "totalTokenCount": 14,
                },
                "responseId": "resp-7",
            }
        )
    )
    sink = Sink()

    async with gemini.model(stream=False) as model:
        final = await model(MSGS, emit=sink)

    assert sink.items == []
    assert final.is_last
    assert final.id == "resp-7"
    thinking, text, call = final.content
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.thinking == "plan"
    assert isinstance(text, TextBlock)
    assert text.text == "Hello there."
    assert isinstance(call, ToolCallBlock)
    assert (call.id, call.name, call.input) == ("fc-1", "f", '{"x": 1}')
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (6, 8)
    assert final.metadata == {"finish_reason": "STOP"}


async def test_blocked_prompt_is_a_complete_empty_response(
    gemini: Gemini, model: GeminiChatModel
) -> None:
    gemini.push(
        stream_response(
            [
                {
                    "promptFeedback": {"blockReason": "SAFETY"},
                    "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 3},
                }
            ]
        )
    )

    final = await model(MSGS)

    assert final.content == []
    assert final.metadata == {"block_reason": "SAFETY"}


# -- errors and retries ----------------------------------------------------------------------


async def test_429_with_retry_after_is_retried_then_succeeds(
    gemini: Gemini, model: GeminiChatModel, autojump_clock: trio.testing.MockClock
) -> None:
    gemini.push(
        error_response(
            429, "Resource has been exhausted.", "RESOURCE_EXHAUSTED", headers={"Retry-After": "7"}
        ),
        stream_response(G1),
    )
    start = trio.current_time()

    final = await model(MSGS)

    assert [b.text for b in final.content] == ["The weather in Paris is mild."]  # type: ignore[union-attr]
    assert len(gemini.requests) == 2
    assert trio.current_time() - start >= 7


async def test_429_retry_info_delay_is_honoured(
    gemini: Gemini, autojump_clock: trio.testing.MockClock
) -> None:
    retry_info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}
    gemini.push(
        error_response(429, "Quota exceeded.", "RESOURCE_EXHAUSTED", details=[retry_info]),
        error_response(429, "Quota exceeded.", "RESOURCE_EXHAUSTED", details=[retry_info]),
    )

    async with gemini.model(max_retries=1, read_timeout=None, connect_timeout=None) as model:
        start = trio.current_time()
        with pytest.raises(ModelRateLimitError) as info:
            await model(MSGS)

    assert trio.current_time() - start >= 12
    assert info.value.retry_after == 12
    assert info.value.code == "RESOURCE_EXHAUSTED"
    assert info.value.retryable
    assert len(gemini.requests) == 2


async def test_400_keeps_the_provider_message_and_is_retried_like_agentscope(
    gemini: Gemini, autojump_clock: trio.testing.MockClock
) -> None:
    message = 'Invalid JSON payload received. Unknown name "foo": Cannot find field.'
    gemini.push(*(error_response(400, message, "INVALID_ARGUMENT") for _ in range(3)))

    async with gemini.model(max_retries=2, read_timeout=None, connect_timeout=None) as model:
        with pytest.raises(ModelInvalidRequestError) as info:
            await model(MSGS)

    assert info.value.status_code == 400
    assert info.value.code == "INVALID_ARGUMENT"
    assert info.value.message == message
    assert f"HTTP 400 {message}" in str(info.value)
    assert len(gemini.requests) == 3  # every google.genai APIError is retryable


async def test_invalid_key_is_an_authentication_error_and_redacted(gemini: Gemini) -> None:
    details = [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
        }
    ]
    gemini.push(
        error_response(400, f"API key not valid: {KEY}.", "INVALID_ARGUMENT", details=details)
    )

    async with gemini.model(max_retries=0) as model:
        with pytest.raises(ModelAuthenticationError) as info:
            await model(MSGS)

    assert info.value.code == "API_KEY_INVALID"
    assert KEY not in str(info.value)
    assert "API key not valid: ***." in str(info.value)
    assert KEY not in repr(model)
    assert KEY not in repr(model.credential)


async def test_wrong_key_gets_401(gemini: Gemini) -> None:
    async with GeminiChatModel(
        MODEL, credential=gemini.credential("AIza-wrong"), max_retries=0
    ) as model:
        with pytest.raises(ModelAuthenticationError, match="UNAUTHENTICATED") as info:
            await model(MSGS)

    assert info.value.status_code == 401


async def test_5xx_retried_then_exhausted(
    gemini: Gemini, autojump_clock: trio.testing.MockClock
) -> None:
    gemini.push(*(error_response(503, f"overloaded {i}", "UNAVAILABLE") for i in range(3)))

    async with gemini.model(max_retries=2, read_timeout=None, connect_timeout=None) as model:
        with pytest.raises(ModelUpstreamError, match="overloaded 2") as info:
            await model(MSGS)

    assert info.value.status_code == 503
    assert len(gemini.requests) == 3


async def test_error_event_mid_stream_is_typed_and_not_replayed(
    gemini: Gemini, model: GeminiChatModel
) -> None:
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    gemini.push(stream_response([G1[0], error]), stream_response(G1))
    sink = Sink()

    with pytest.raises(ModelUpstreamError, match=r"The model is overloaded\.") as info:
        await model(MSGS, emit=sink)

    assert info.value.status_code == 503
    assert info.value.code == "UNAVAILABLE"
    assert len(gemini.requests) == 1  # content was emitted: never replayed
    assert [b.text for c in sink.items for b in c.content] == ["The weather"]  # type: ignore[union-attr]


async def test_error_event_before_content_is_retried(
    gemini: Gemini, model: GeminiChatModel, autojump_clock: trio.testing.MockClock
) -> None:
    error = {"error": {"code": 429, "message": "Slow down.", "status": "RESOURCE_EXHAUSTED"}}
    gemini.push(stream_response([error]), stream_response(G1))

    final = await model(MSGS)

    assert [b.text for b in final.content] == ["The weather in Paris is mild."]  # type: ignore[union-attr]
    assert len(gemini.requests) == 2


async def test_stream_ending_before_finish_reason_is_a_stream_error(
    gemini: Gemini, model: GeminiChatModel
) -> None:
    gemini.push(stream_response(G1[:2]), stream_response(G1))
    sink = Sink()

    with pytest.raises(ModelStreamError, match="ended before a finishReason"):
        await model(MSGS, emit=sink)

    assert len(gemini.requests) == 1
    assert len(sink.items) == 2


async def test_unparseable_stream_chunk(gemini: Gemini, model: GeminiChatModel) -> None:
    gemini.push(ScriptedResponse(body=[b"data: {not json\r\n\r\n"]))

    with pytest.raises(ModelStreamError, match="unparseable chunk"):
        await model(MSGS)


async def test_connection_refused_is_retried_then_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens on this port now
    credential = GeminiCredential(api_key=KEY, base_url=f"http://127.0.0.1:{port}")

    async with GeminiChatModel(
        MODEL, credential=credential, max_retries=1, connect_timeout=None
    ) as model:
        with pytest.raises(ModelConnectionError, match="could not reach") as info:
            await model(MSGS)

    assert info.value.retryable
    assert KEY not in str(info.value)


# -- cancellation ----------------------------------------------------------------------------


async def test_cancel_mid_stream_emits_the_partial_and_closes_the_connection(
    gemini: Gemini, model: GeminiChatModel
) -> None:
    gemini.push(stream_response(G2, stall_after=2))

    sink, caught = await call_cancelled_after(model, 2)

    assert [type(e) for e in caught] == [trio.Cancelled]
    *deltas, last = sink.items
    assert len(deltas) == 2
    assert last.is_last
    assert last.finished_reason == FinishedReason.INTERRUPTED
    assert last.id == "r-gem-1"
    assert [
        (type(b).__name__, getattr(b, "text", None) or getattr(b, "thinking", None))
        for b in last.content
    ] == [
        ("ThinkingBlock", "**Planning** the lookup"),
        ("TextBlock", "Let me check."),
    ]
    with trio.fail_after(5):
        await gemini.server.wait_all_closed()
    assert gemini.server.connections[0].closed_by_client
    assert open_connections(model.http_client) == []


async def test_connection_reused_after_a_complete_stream(
    gemini: Gemini, model: GeminiChatModel
) -> None:
    gemini.push(stream_response(G1), stream_response(G1))

    await model(MSGS)
    await model(MSGS)

    assert [r.connection_id for r in gemini.requests] == [0, 0]
    assert len(open_connections(model.http_client)) == 1


# -- credentials, structured output, agent -----------------------------------------------------


async def test_missing_key_names_the_env_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)

    async with GeminiChatModel(MODEL) as model:
        with pytest.raises(ModelCredentialError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
            await model(MSGS)


async def test_key_and_base_url_from_environment(
    gemini: Gemini, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_BASE_URL", f"http://{gemini.server.host}:{gemini.server.port}/")
    gemini.push(stream_response(G1))

    async with GeminiChatModel(MODEL) as model:
        final = await model(MSGS)
        assert KEY not in repr(model)

    assert final.id == "kX9aaB"
    assert isinstance(model.formatter, GeminiChatFormatter)
    assert model.context_size == 1048576


async def test_structured_output_forces_the_tool(gemini: Gemini, model: GeminiChatModel) -> None:
    call = {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {
                            "functionCall": {
                                "name": "generate_structured_output",
                                "args": {"city": "Paris", "n": 3},
                            }
                        }
                    ]
                },
                "finishReason": "STOP",
            }
        ]
    }
    gemini.push(stream_response([call]))
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["city", "n"],
    }

    result = await model.generate_structured_output(MSGS, schema)

    assert result.content == {"city": "Paris", "n": 3}
    body = gemini.requests[0].body
    assert body["toolConfig"] == {
        "functionCallingConfig": {
            "mode": "ANY",
            "allowedFunctionNames": ["generate_structured_output"],
        }
    }
    assert body["contents"][-1]["parts"][-1]["text"].startswith("<system-reminder>")


async def test_agent_reply_with_a_tool_round(gemini: Gemini) -> None:
    answer = [
        {
            "candidates": [
                {
                    "content": {"parts": [{"text": "It is sunny in Paris."}], "role": "model"},
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 60,
                "candidatesTokenCount": 6,
                "totalTokenCount": 66,
            },
            "responseId": "r-gem-2",
        }
    ]
    gemini.push(stream_response(G2), stream_response(answer))
    looked_up: list[str] = []

    async def get_weather(city: str) -> str:
        """Get the weather.

        Args:
            city: the city.
        """
        looked_up.append(city)
        return f"sunny in {city}"

    async with gemini.model(parameters=GeminiChatParameters(thinking_enable=True)) as model:
        agent = agent_with_tool(model, get_weather)
        reply = await agent(UserMsg("user", "Weather in Paris and Rome?"))

    assert reply.get_text_content() == "It is sunny in Paris."
    assert sorted(looked_up) == ["Paris", "Rome"]
    first, second = (r.body for r in gemini.requests)
    assert first["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    assert first["contents"][0] == {"role": "user", "parts": [{"text": "Be brief."}]}
    # The second request replays what the agent stored: thinking, text, both calls (the
    # first with its thought signature) and both results under the same ids.
    model_turn, results = second["contents"][-2:]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][:2] == [
        {"thought": True, "text": "**Planning** the lookup"},
        {"text": "Let me check."},
    ]
    paris, rome = model_turn["parts"][2:]
    assert paris == {
        "functionCall": {
            "id": "gemini_ts:CiQBcsjafA==",
            "name": "get_weather",
            "args": {"city": "Paris"},
        },
        "thoughtSignature": "CiQBcsjafA==",
    }
    assert rome["functionCall"]["args"] == {"city": "Rome"}
    assert "thoughtSignature" not in rome
    assert results["role"] == "user"
    responses = [p["functionResponse"] for p in results["parts"]]
    assert [(r["id"], r["name"]) for r in responses] == [
        ("gemini_ts:CiQBcsjafA==", "get_weather"),
        (rome["functionCall"]["id"], "get_weather"),
    ]
    assert "sunny in Paris" in responses[0]["response"]["output"]

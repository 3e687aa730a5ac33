"""AnthropicChatModel (trioagent/model/_anthropic.py) over the real loopback server.

The loopback server answers ``POST /v1/messages`` through a custom route that replays the
Messages-API SSE transcripts recorded from the API (and JSON bodies) over real
sockets and real HTTP/1.1; httpx2 is never patched.  Tests that sleep through backoff use
``autojump_clock``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
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
    lookup_agent,
    open_connections,
    start_server,
)

from trioagent.agent import Agent
from trioagent.credential import AnthropicCredential, MiniMaxCredential
from trioagent.exception import (
    ModelAuthenticationError,
    ModelCredentialError,
    ModelInvalidRequestError,
    ModelRateLimitError,
    ModelStreamError,
    ModelUpstreamError,
)
from trioagent.formatter import MiniMaxChatFormatter
from trioagent.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    SystemMsg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMsg,
)
from trioagent.model import (
    AnthropicChatModel,
    AnthropicChatParameters,
    ChatResponse,
    MiniMaxChatModel,
    MiniMaxChatParameters,
)
from trioagent.model._anthropic_stream import AnthropicStreamParser
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedResponse,
    SweepRun,
    cancel_sweep,
)
from trioagent.types import FinishedReason, ToolChoice

KEY = "sk-ant-test-0123456789"

Event = tuple[str, dict[str, Any]]


def sse(events: list[Event]) -> list[bytes]:
    """One chunked piece per SSE event."""
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]


def streamed(events: list[Event], **kwargs: Any) -> ScriptedResponse:
    return event_stream(sse(events), **kwargs)


def error_response(
    status: int, kind: str, message: str, headers: dict[str, str] | None = None
) -> ScriptedResponse:
    payload = {"type": "error", "error": {"type": kind, "message": message}}
    return ScriptedResponse(status=status, body=json.dumps(payload).encode(), headers=headers or {})


def message_start(msg_id: str, usage: dict[str, Any]) -> Event:
    return (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        },
    )


def block_start(index: int, block: dict[str, Any]) -> Event:
    return (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def block_delta(index: int, delta: dict[str, Any]) -> Event:
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> Event:
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def message_delta(stop_reason: str, output_tokens: int) -> Event:
    return (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
    )


MESSAGE_STOP: Event = ("message_stop", {"type": "message_stop"})
PING: Event = ("ping", {"type": "ping"})

# A recorded stream: thinking(signature) + text + tool_use + argument-less tool_use
A1: list[Event] = [
    message_start(
        "msg_01",
        {
            "input_tokens": 25,
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 10,
        },
    ),
    block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
    block_delta(0, {"type": "thinking_delta", "thinking": "User wants weather."}),
    block_delta(0, {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}),
    block_stop(0),
    block_start(1, {"type": "text", "text": ""}),
    PING,
    block_delta(1, {"type": "text_delta", "text": "Checking"}),
    block_delta(1, {"type": "text_delta", "text": " now."}),
    block_stop(1),
    block_start(2, {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}),
    block_delta(2, {"type": "input_json_delta", "partial_json": ""}),
    block_delta(2, {"type": "input_json_delta", "partial_json": '{"city": "Pa'}),
    block_delta(2, {"type": "input_json_delta", "partial_json": 'ris"}'}),
    block_stop(2),
    block_start(3, {"type": "tool_use", "id": "toolu_02", "name": "get_time", "input": {}}),
    block_stop(3),
    message_delta("tool_use", 89),
    MESSAGE_STOP,
]

# A recorded stream: redacted thinking + text
A2: list[Event] = [
    message_start("msg_A1", {"input_tokens": 12, "output_tokens": 1}),
    block_start(0, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"}),
    block_stop(0),
    block_start(1, {"type": "text", "text": ""}),
    block_delta(1, {"type": "text_delta", "text": "Hello"}),
    block_delta(1, {"type": "text_delta", "text": "!"}),
    block_stop(1),
    message_delta("end_turn", 6),
    MESSAGE_STOP,
]

# A recorded stream: an error event after message_start
OVERLOADED: Event = (
    "error",
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
)


def text_events(*fragments: str, msg_id: str = "msg_t", stop: bool = True) -> list[Event]:
    events = [
        message_start(msg_id, {"input_tokens": 3, "output_tokens": 1}),
        block_start(0, {"type": "text", "text": ""}),
    ]
    events += [block_delta(0, {"type": "text_delta", "text": f}) for f in fragments]
    if stop:
        events += [block_stop(0), message_delta("end_turn", 2), MESSAGE_STOP]
    return events


def tool_events(call_id: str, name: str, arguments: str, *, msg_id: str) -> list[Event]:
    return [
        message_start(msg_id, {"input_tokens": 30, "output_tokens": 1}),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(0, {"type": "thinking_delta", "thinking": "Need the weather."}),
        block_delta(0, {"type": "signature_delta", "signature": "sig-1"}),
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": call_id, "name": name, "input": {}}),
        block_delta(1, {"type": "input_json_delta", "partial_json": arguments[:5]}),
        block_delta(1, {"type": "input_json_delta", "partial_json": arguments[5:]}),
        block_stop(1),
        message_delta("tool_use", 20),
        MESSAGE_STOP,
    ]


class FakeAnthropic(ScriptedRoute):
    """A ``POST /v1/messages`` route on the loopback server, answering from a script (an
    event list is sent as an SSE stream)."""

    def __init__(self, server: OpenAICompatibleServer) -> None:
        super().__init__(server, "/v1/messages")

    @property
    def base_url(self) -> str:
        return f"http://{self.server.host}:{self.server.port}"

    def push(self, *entries: ScriptedResponse | list[Event]) -> None:
        super().push(*(streamed(e) if isinstance(e, list) else e for e in entries))

    def model(self, model: str = "claude-sonnet-4-5", **kwargs: Any) -> AnthropicChatModel:
        credential = AnthropicCredential(api_key=KEY, base_url=self.base_url)
        return AnthropicChatModel(model, credential=credential, **kwargs)

    def answer(self, request: RecordedRequest) -> ScriptedResponse:
        key = request.headers.get("x-api-key") or request.headers.get("authorization", "")
        if key.removeprefix("Bearer ") != KEY:
            return error_response(401, "authentication_error", f"invalid x-api-key: {key}")
        return super().answer(request)


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    return await start_server(nursery)


@pytest.fixture
def fake(server: OpenAICompatibleServer) -> FakeAnthropic:
    return FakeAnthropic(server)


@pytest.fixture
async def model(fake: FakeAnthropic) -> AsyncIterator[AnthropicChatModel]:
    async with fake.model(retry_delay=0.5) as model:
        yield model


def describe(block: Any) -> tuple[Any, ...]:
    match block:
        case TextBlock():
            return ("text", block.id, block.text)
        case ThinkingBlock():
            return ("thinking", block.id, block.thinking, block.extra)
        case ToolCallBlock():
            return ("call", block.id, block.name, block.input)
    raise AssertionError(block)


def usage_of(chunk: ChatResponse) -> tuple[int, int, int | None, int | None]:
    assert chunk.usage is not None
    u = chunk.usage
    return (u.input_tokens, u.output_tokens, u.cache_input_tokens, u.cache_creation_input_tokens)


# -- streaming transcripts -----------------------------------------------------------------------


async def test_a1_thinking_text_and_tool_calls(
    fake: FakeAnthropic, model: AnthropicChatModel
) -> None:
    fake.push(A1)
    sink = Sink()

    final = await model(MSGS, emit=sink)

    assert all(len(chunk.content) == 1 and not chunk.is_last for chunk in sink.items)
    deltas = [describe(chunk.content[0]) for chunk in sink.items]
    k0, k1 = deltas[0][1], deltas[2][1]
    assert k0 != k1
    assert deltas == [
        ("thinking", k0, "User wants weather.", {}),
        ("thinking", k0, "", {"signature": "EqQBCgIYAhIM"}),
        ("text", k1, "Checking"),
        ("text", k1, " now."),
        ("call", "toolu_01", "get_weather", ""),
        ("call", "toolu_01", "get_weather", ""),
        ("call", "toolu_01", "get_weather", '{"city": "Pa'),
        ("call", "toolu_01", "get_weather", 'ris"}'),
        ("call", "toolu_02", "get_time", ""),
        ("call", "toolu_02", "get_time", "{}"),
    ]
    assert {chunk.id for chunk in sink.items} == {"msg_01"}
    assert {usage_of(chunk) for chunk in sink.items} == {(25, 1, 10, 0)}

    assert final.is_last
    assert final.id == "msg_01"
    assert final.finished_reason == FinishedReason.COMPLETED
    assert [describe(b) for b in final.content] == [
        ("thinking", k0, "User wants weather.", {"signature": "EqQBCgIYAhIM"}),
        ("text", k1, "Checking now."),
        ("call", "toolu_01", "get_weather", '{"city": "Paris"}'),
        ("call", "toolu_02", "get_time", "{}"),
    ]
    assert usage_of(final) == (25, 89, 10, 0)
    assert final.usage is not None
    assert 0 <= final.usage.time < 5
    assert final.metadata == {"stop_reason": "tool_use"}


async def test_a2_redacted_thinking_and_text(
    fake: FakeAnthropic, model: AnthropicChatModel
) -> None:
    fake.push(A2)
    sink = Sink()

    final = await model(MSGS, emit=sink)

    deltas = [describe(chunk.content[0]) for chunk in sink.items]
    redacted_id, text_id = deltas[0][1], deltas[1][1]
    assert deltas == [
        ("thinking", redacted_id, "", {"redacted_thinking_data": "EmwKAhgBEgy3va"}),
        ("text", text_id, "Hello"),
        ("text", text_id, "!"),
    ]
    assert [describe(b) for b in final.content] == [
        ("thinking", redacted_id, "", {"redacted_thinking_data": "EmwKAhgBEgy3va"}),
        ("text", text_id, "Hello!"),
    ]
    assert final.id == "msg_A1"
    assert usage_of(final) == (12, 6, 0, 0)  # absent cache counters are 0


async def test_a3_error_event_is_typed_and_not_retried(
    fake: FakeAnthropic, model: AnthropicChatModel
) -> None:
    fake.push([A2[0], OVERLOADED], A2)

    with pytest.raises(ModelUpstreamError, match="Overloaded") as info:
        await model(MSGS)

    assert info.value.code == "overloaded_error"
    assert not info.value.retryable
    assert len(fake.requests) == 1


async def test_error_event_after_content(fake: FakeAnthropic, model: AnthropicChatModel) -> None:
    rate: Event = (
        "error",
        {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}},
    )
    fake.push([*text_events("Hi", stop=False), rate])
    sink = Sink()

    with pytest.raises(ModelRateLimitError, match="Slow down") as info:
        await model(MSGS, emit=sink)

    assert not info.value.retryable
    assert [describe(c.content[0])[2] for c in sink.items] == ["Hi"]


async def test_stream_cut_after_content_is_a_stream_error(
    fake: FakeAnthropic, model: AnthropicChatModel
) -> None:
    fake.push(text_events("Hello", " wor", stop=False), A2)
    sink = Sink()

    with pytest.raises(ModelStreamError, match="ended before 'message_stop'"):
        await model(MSGS, emit=sink)

    assert len(fake.requests) == 1  # content was emitted: never replayed
    assert [describe(c.content[0])[2] for c in sink.items] == ["Hello", " wor"]


async def test_stream_cut_before_content_is_retried(
    fake: FakeAnthropic, model: AnthropicChatModel, autojump_clock: trio.testing.MockClock
) -> None:
    fake.push([A1[0]], text_events("second", " try"))

    final = await model(MSGS)

    assert [describe(b)[2] for b in final.content] == ["second try"]
    assert len(fake.requests) == 2


async def test_unparseable_event(fake: FakeAnthropic, model: AnthropicChatModel) -> None:
    fake.push(ScriptedResponse(body=[b"event: message_start\ndata: {oops\n\n"]))

    with pytest.raises(ModelStreamError, match="unparseable event"):
        await model(MSGS)


async def test_crlf_split_events_and_unknown_blocks(
    fake: FakeAnthropic, model: AnthropicChatModel
) -> None:
    events = text_events("Hé", "llo")
    events[2:2] = [
        block_start(5, {"type": "server_tool_use", "id": "srv", "name": "web", "input": {}}),
        block_delta(5, {"type": "input_json_delta", "partial_json": '{"query": "x"}'}),
        block_stop(5),
        block_delta(0, {"type": "citations_delta", "citation": {}}),
    ]
    raw = b"".join(sse(events)).replace(b"\n", b"\r\n")
    fake.push(ScriptedResponse(body=[raw[i : i + 7] for i in range(0, len(raw), 7)]))

    final = await model(MSGS)

    assert [describe(b)[2] for b in final.content] == ["Héllo"]


async def test_parser_edge_cases() -> None:
    parser = AnthropicStreamParser(trio.current_time())
    events: list[Event] = [
        block_delta(0, {"type": "text_delta", "text": "no start"}),
        block_start(1, {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": "é"}}),
        block_stop(1),
        block_start(2, {"type": "thinking", "thinking": "pre", "signature": "s0"}),
        block_delta(2, {"type": "text_delta", "text": "wrong kind"}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {},
                "usage": {"output_tokens": 9, "input_tokens": 4, "cache_read_input_tokens": 2},
            },
        ),
        ("mystery", {"type": "mystery"}),
    ]

    chunks = [c for name, data in events for c in parser.feed(data, name)]

    assert [describe(b)[2:] for c in chunks for b in c.content] == [
        ("no start",),
        ("f", '{"a": "é"}'),
        ("pre", {"signature": "s0"}),
    ]
    assert usage_of(chunks[-1]) == (4, 9, 2, 0)
    assert not parser.done
    assert parser.feed({"type": "message_stop"}) == []
    assert parser.done


# -- non-streaming -------------------------------------------------------------------------------


async def test_non_stream_message(fake: FakeAnthropic) -> None:
    fake.push(
        ScriptedResponse.json(
            {
                "id": "msg_77",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "enc"},
                    {"type": "text", "text": "Voilà."},
                    {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {"city": "Zürich"}},
                    {"type": "tool_use", "id": "toolu_10", "name": "g", "input": {}},
                ],
                "stop_reason": "tool_use",
                "usage": {
                    "input_tokens": 5,
                    "output_tokens": 6,
                    "cache_creation_input_tokens": 2,
                    "cache_read_input_tokens": None,
                },
            }
        )
    )
    sink = Sink()
    async with fake.model(stream=False) as model:
        final = await model(MSGS, emit=sink)

    assert sink.items == []
    assert final.is_last
    assert final.id == "msg_77"
    assert [(type(b).__name__, describe(b)[2:]) for b in final.content] == [
        ("ThinkingBlock", ("hmm", {"signature": "sig"})),
        ("ThinkingBlock", ("", {"redacted_thinking_data": "enc"})),
        ("TextBlock", ("Voilà.",)),
        ("ToolCallBlock", ("f", '{"city": "Zürich"}')),
        ("ToolCallBlock", ("g", "{}")),
    ]
    assert usage_of(final) == (5, 6, 0, 2)
    assert final.metadata == {"stop_reason": "tool_use"}
    assert fake.requests[0].body["stream"] is False
    assert fake.requests[0].headers["accept"] == "application/json"


async def test_non_stream_error_body_with_200(fake: FakeAnthropic) -> None:
    fake.push(error_response(200, "invalid_request_error", "bad thing"))

    async with fake.model(stream=False) as model:
        with pytest.raises(ModelInvalidRequestError, match="bad thing"):
            await model(MSGS)


# -- request ---------------------------------------------------------------------------------------

WEATHER_TOOL = {
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
TIME_TOOL = {"type": "function", "function": {"name": "get_time"}}
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}


async def test_request_body_and_headers_match_the_captured_agentscope(
    fake: FakeAnthropic,
) -> None:
    history = [
        SystemMsg("system", "Be brief."),
        UserMsg("user", "Weather in Paris?"),
        AssistantMsg(
            "assistant",
            [
                ToolCallBlock(id="toolu_00", name="get_weather", input='{"city": "Rome"}'),
                ToolResultBlock(
                    id="toolu_00", name="get_weather", output=[TextBlock(text="sunny")]
                ),
            ],
        ),
    ]
    params = AnthropicChatParameters(thinking_enable=True, thinking_budget=2048, max_tokens=1024)
    fake.push(A2)

    async with fake.model(parameters=params) as model:
        await model(history, [WEATHER_TOOL, TIME_TOOL], ToolChoice("required"))

    (request,) = fake.requests
    assert request.method == "POST"
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert "authorization" not in request.headers
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert request.body == {
        "max_tokens": 3072,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_00",
                        "name": "get_weather",
                        "input": {"city": "Rome"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_00",
                        "content": [{"type": "text", "text": "sunny"}],
                    }
                ],
            },
        ],
        "model": "claude-sonnet-4-5",
        "stream": True,
        "system": [{"type": "text", "text": "Be brief."}],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tool_choice": {"type": "any"},
        "tools": [
            {
                "name": "get_weather",
                "description": "Get weather",
                "input_schema": WEATHER_TOOL["function"]["parameters"],  # type: ignore[index]
            },
            {
                "name": "get_time",
                "description": "",
                "input_schema": {"type": "object", "properties": {}},
            },
        ],
    }


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            AnthropicChatParameters(
                thinking_mode="adaptive", thinking_display="summarized", reasoning_effort="high"
            ),
            {
                "max_tokens": 8192,
                "thinking": {"type": "adaptive", "display": "summarized"},
                "output_config": {"effort": "high"},
            },
        ),
        (
            AnthropicChatParameters(thinking_mode="enabled", max_tokens=1000, thinking_budget=4000),
            {"max_tokens": 5024, "thinking": {"type": "enabled", "budget_tokens": 4000}},
        ),
        (
            AnthropicChatParameters(thinking_enable=True, max_tokens=4000),
            {"max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 2000}},
        ),
        (
            AnthropicChatParameters(
                thinking_enable=True, thinking_mode="disabled", thinking_display="omitted"
            ),
            {"max_tokens": 8192, "thinking": {"type": "disabled"}},
        ),
        (
            AnthropicChatParameters(temperature=0.3, top_p=0.9, top_k=40),
            {"max_tokens": 8192, "temperature": 0.3, "top_p": 0.9, "top_k": 40},
        ),
        (AnthropicChatParameters(), {"max_tokens": 8192}),
    ],
)
async def test_thinking_and_sampling_options(
    fake: FakeAnthropic, params: AnthropicChatParameters, expected: dict[str, Any]
) -> None:
    fake.push(A2)

    async with fake.model(parameters=params) as model:
        await model(MSGS)

    body = fake.requests[0].body
    keys = {"model", "messages", "stream", "system"}
    assert {k: v for k, v in body.items() if k not in keys} == expected


async def test_extra_body_overrides_thinking_and_tool_choice_mapping(
    fake: FakeAnthropic,
) -> None:
    params = AnthropicChatParameters(thinking_enable=True, reasoning_effort="low")
    fake.push(A2, A2, A2)
    extra = {"thinking": {"type": "disabled"}, "output_config": {"effort": "max"}, "metadata": {}}

    async with fake.model(parameters=params, extra_body=extra) as model:
        await model(MSGS, [WEATHER_TOOL, TIME_TOOL], ToolChoice("get_time", tools=["get_time"]))
        await model(MSGS, [WEATHER_TOOL], ToolChoice("auto"))
        await model(MSGS, [WEATHER_TOOL, WEB_SEARCH], ToolChoice("none"))

    first, second, third = (r.body for r in fake.requests)
    assert first["thinking"] == {"type": "disabled"}
    assert first["max_tokens"] == 8192
    assert first["output_config"] == {"effort": "max"}
    assert first["metadata"] == {}
    assert [t["name"] for t in first["tools"]] == ["get_time"]
    assert first["tool_choice"] == {"type": "tool", "name": "get_time"}
    assert second["tool_choice"] == {"type": "auto"}
    assert third["tool_choice"] == {"type": "none"}
    assert third["tools"][1] == WEB_SEARCH  # already in Anthropic form: sent as it is


async def test_bearer_auth_version_and_extra_headers(fake: FakeAnthropic) -> None:
    fake.push(A2)

    async with fake.model(
        auth_scheme="bearer",
        api_version="2026-10-21",
        extra_headers={"anthropic-beta": "context-1m-2025-08-07"},
    ) as model:
        await model(MSGS)

    headers = fake.requests[0].headers
    assert headers["authorization"] == f"Bearer {KEY}"
    assert "x-api-key" not in headers
    assert headers["anthropic-version"] == "2026-10-21"
    assert headers["anthropic-beta"] == "context-1m-2025-08-07"
    assert KEY not in repr(fake.model())


async def test_only_a_leading_system_message_is_lifted(
    fake: FakeAnthropic, model: AnthropicChatModel
) -> None:
    fake.push(A2)

    await model([UserMsg("user", "hi"), SystemMsg("system", "Be kind.")])

    body = fake.requests[0].body
    assert "system" not in body
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "user", "content": [{"type": "text", "text": "Be kind."}]},
    ]


def test_parameter_validation() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        AnthropicChatParameters(max_tokens=0)
    with pytest.raises(ValueError, match="thinking_budget"):
        AnthropicChatParameters(thinking_budget=-1)
    with pytest.raises(ValueError, match="thinking_mode"):
        AnthropicChatParameters(thinking_mode="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reasoning_effort"):
        AnthropicChatParameters(reasoning_effort="extreme")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="temperature"):
        AnthropicChatParameters(temperature=1.5)
    with pytest.raises(ValueError, match="auth_scheme"):
        AnthropicChatModel("m", auth_scheme="basic")  # type: ignore[arg-type]


def test_defaults() -> None:
    model = AnthropicChatModel("claude-sonnet-4-5")

    assert model.type == "anthropic_chat"
    assert model.context_size == 200000
    assert isinstance(model.credential, AnthropicCredential)
    assert model.credential.get_base_url() == "https://api.anthropic.com"
    assert model.formatter is not None
    assert model.formatter.input_types == ["text/plain", "image/*", "application/pdf"]
    assert model._get_disable_thinking_kwargs() == {"thinking": {"type": "disabled"}}


# -- HTTP errors ---------------------------------------------------------------------------------


async def test_401_is_not_retried_and_the_key_is_redacted(fake: FakeAnthropic) -> None:
    credential = AnthropicCredential(api_key="sk-ant-wrong-key", base_url=fake.base_url)

    async with AnthropicChatModel("m", credential=credential) as model:
        with pytest.raises(ModelAuthenticationError) as info:
            await model(MSGS)

    assert info.value.status_code == 401
    assert info.value.code == "authentication_error"
    assert "sk-ant-wrong-key" not in str(info.value)
    assert "invalid x-api-key: ***" in str(info.value)
    assert len(fake.requests) == 1


async def test_429_with_retry_after_then_success(
    fake: FakeAnthropic, model: AnthropicChatModel, autojump_clock: trio.testing.MockClock
) -> None:
    fake.push(
        error_response(429, "rate_limit_error", "Number of requests", {"retry-after": "7"}), A2
    )
    start = trio.current_time()

    final = await model(MSGS)

    assert [describe(b)[2] for b in final.content] == ["", "Hello!"]
    assert len(fake.requests) == 2
    assert trio.current_time() - start >= 7


async def test_400_surfaces_the_provider_message(
    fake: FakeAnthropic, model: AnthropicChatModel
) -> None:
    fake.push(error_response(400, "invalid_request_error", "max_tokens: Field required"), A2)

    with pytest.raises(ModelInvalidRequestError) as info:
        await model(MSGS)

    assert info.value.status_code == 400
    assert info.value.code == "invalid_request_error"
    assert info.value.message == "max_tokens: Field required"
    assert len(fake.requests) == 1


@pytest.mark.parametrize(("status", "kind"), [(500, "api_error"), (529, "overloaded_error")])
async def test_5xx_retried_then_exhausted(
    fake: FakeAnthropic, autojump_clock: trio.testing.MockClock, status: int, kind: str
) -> None:
    fake.push(*(error_response(status, kind, f"oops {i}") for i in range(3)))

    async with fake.model(max_retries=2) as model:
        with pytest.raises(ModelUpstreamError, match="oops 2") as info:
            await model(MSGS)

    assert info.value.status_code == status
    assert info.value.code == kind
    assert len(fake.requests) == 3


# -- cancellation ----------------------------------------------------------------------------------


async def test_cancel_mid_stream_closes_the_connection(
    server: OpenAICompatibleServer, fake: FakeAnthropic, model: AnthropicChatModel
) -> None:
    fake.push(streamed(A1, stall_after=8))  # stalls after the first text fragment

    sink, caught = await call_cancelled_after(model, 3)

    assert [type(e) for e in caught] == [trio.Cancelled]
    *deltas, last = sink.items
    assert len(deltas) == 3
    assert last.is_last
    assert last.finished_reason == FinishedReason.INTERRUPTED
    assert last.id == "msg_01"
    assert [describe(b)[2:] for b in last.content] == [
        ("User wants weather.", {"signature": "EqQBCgIYAhIM"}),
        ("Checking",),
    ]
    with trio.fail_after(5):
        await server.wait_all_closed()
    assert server.connections[0].closed_by_client


# -- credentials ----------------------------------------------------------------------------------


async def test_missing_key_names_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    async with AnthropicChatModel("claude-sonnet-4-5") as model:
        with pytest.raises(ModelCredentialError, match="ANTHROPIC_API_KEY"):
            await model(MSGS)


async def test_key_and_base_url_from_environment(
    fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url + "/")
    fake.push(A2)

    async with AnthropicChatModel("claude-haiku-4-5") as model:
        final = await model(MSGS)

    assert final.id == "msg_A1"
    assert fake.requests[0].path == "/v1/messages"


# -- structured output ----------------------------------------------------------------------------


async def test_structured_output_falls_back_when_forced_tool_use_is_rejected(
    fake: FakeAnthropic,
) -> None:
    rejected = error_response(
        400,
        "invalid_request_error",
        "Thinking may not be enabled when tool_choice forces tool use.",
    )
    fake.push(
        rejected,
        tool_events(
            "toolu_s", "generate_structured_output", '{"city": "Paris", "n": 3', msg_id="m"
        ),
    )
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["city", "n"],
    }

    async with fake.model(parameters=AnthropicChatParameters(thinking_enable=True)) as model:
        result = await model.generate_structured_output(MSGS, schema)

    assert result.content == {"city": "Paris", "n": 3}
    forced, auto = (r.body for r in fake.requests)
    assert forced["tool_choice"] == {"type": "tool", "name": "generate_structured_output"}
    assert auto["tool_choice"] == {"type": "auto"}
    assert auto["tools"][0]["name"] == "generate_structured_output"


async def test_structured_output_no_think_strategy_disables_thinking(
    fake: FakeAnthropic,
) -> None:
    fake.push(A2, A2)  # forced and auto answer with text only: no tool call
    fake.push(tool_events("toolu_s", "generate_structured_output", '{"ok": true}', msg_id="m"))

    async with fake.model(parameters=AnthropicChatParameters(thinking_enable=True)) as model:
        result = await model.generate_structured_output(MSGS, {"type": "object"})

    assert result.content == {"ok": True}
    no_think = fake.requests[2].body
    assert no_think["thinking"] == {"type": "disabled"}
    assert no_think["tool_choice"] == {"type": "tool", "name": "generate_structured_output"}
    assert fake.requests[0].body["thinking"]["type"] == "enabled"


# -- the agent, end to end ------------------------------------------------------------------------


async def test_agent_reply_with_a_tool_round(
    server: OpenAICompatibleServer, fake: FakeAnthropic
) -> None:
    fake.push(
        tool_events("toolu_w", "lookup", '{"city": "Paris"}', msg_id="msg_1"),
        text_events("It is ", "sunny.", msg_id="msg_2"),
    )
    seen: list[str] = []

    async with fake.model() as model:
        agent = lookup_agent(model, seen)
        msg = await agent.reply(UserMsg("user", "Weather in Paris?"))

    assert msg.get_text_content() == "It is sunny."
    assert seen == ["Paris"]
    first, second = (r.body for r in fake.requests)
    assert first["system"] == [{"type": "text", "text": "Be brief."}]
    assert [t["name"] for t in first["tools"]] == ["lookup"]
    assert first["tools"][0]["input_schema"]["properties"]["city"]["type"] == "string"
    assert second["system"] == first["system"]
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Need the weather.", "signature": "sig-1"},
                {"type": "tool_use", "id": "toolu_w", "name": "lookup", "input": {"city": "Paris"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_w",
                    "content": [{"type": "text", "text": "sunny in Paris"}],
                }
            ],
        },
    ]
    with trio.fail_after(5):
        await server.wait_all_closed()


# -- MiniMax ---------------------------------------------------------------------------------------


async def test_minimax_adaptive_thinking_and_video(
    fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINIMAX_API_KEY", KEY)
    monkeypatch.setenv("MINIMAX_BASE_URL", fake.base_url)
    fake.push(A2)
    video = DataBlock(source=Base64Source(data="AAAA", media_type="video/mp4"))

    async with MiniMaxChatModel(
        "MiniMax-M2", parameters=MiniMaxChatParameters(thinking_enable=True)
    ) as model:
        assert isinstance(model.credential, MiniMaxCredential)
        assert isinstance(model.formatter, MiniMaxChatFormatter)
        assert model.context_size == 1_000_000
        await model([UserMsg("user", [TextBlock(text="What happens?"), video])])

    body = fake.requests[0].body
    assert body["thinking"] == {"type": "adaptive"}
    assert body["max_tokens"] == 8192
    assert "output_config" not in body
    assert body["messages"][0]["content"][1] == {
        "type": "video",
        "source": {"type": "base64", "media_type": "video/mp4", "data": "AAAA"},
    }
    assert MiniMaxCredential().get_base_url() == fake.base_url
    assert MiniMaxChatModel("m").credential.get_base_url() == fake.base_url


async def test_cancel_sweep_over_a_tool_round(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Cancelling the reply at every schedule point: one INTERRUPTED end, a consistent
    context, no busy connection (the sweep's rules), then every connection closed."""
    servers: list[OpenAICompatibleServer] = []
    models: list[AnthropicChatModel] = []

    async def lookup(city: str) -> str:
        """Look up the weather.

        Args:
            city: the city.
        """
        await trio.sleep(1)
        return f"sunny in {city}"

    async def make_agent() -> Agent:
        server = await start_server(nursery)
        fake = FakeAnthropic(server)
        fake.push(
            tool_events("toolu_w", "lookup", '{"city": "Paris"}', msg_id="msg_1"),
            text_events("It is ", "sunny.", msg_id="msg_2"),
        )
        model = fake.model(read_timeout=None, connect_timeout=None, max_retries=0)
        servers.append(server)
        models.append(model)
        return agent_with_tool(model, lookup)

    def no_busy_connection(run: SweepRun) -> None:
        connections = open_connections(run.agent.model.http_client)
        assert all(c.is_idle() or c.is_closed() for c in connections), run.cancel_at

    report = await cancel_sweep(
        make_agent, lambda: UserMsg("user", "weather?"), check=no_busy_connection
    )

    assert report.runs[0].msg is not None
    assert report.runs[0].msg.get_text_content() == "It is sunny."
    assert report.outcomes["interrupted"] >= 3
    for model in models:
        await model.aclose()
    for server in servers:
        with trio.fail_after(5):
            await server.wait_all_closed()

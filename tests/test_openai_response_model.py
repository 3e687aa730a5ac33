"""OpenAIResponseModel (trioagent/model/_openai_response.py) over the real loopback server.

The Responses endpoint is a custom route of ``serve_openai_compatible`` (``POST
/v1/responses``) replaying scripted bodies — a recorded transcript byte for byte — over real
sockets, HTTP/1.1 and SSE parsing; httpx2 is never patched.  Tests with backoff sleeps use
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
    event_stream as stream,
    open_connections,
    start_server,
)

from trioagent.credential import OpenAICredential
from trioagent.exception import (
    ModelAuthenticationError,
    ModelInvalidRequestError,
    ModelRateLimitError,
    ModelStreamError,
    ModelUpstreamError,
)
from trioagent.formatter import OpenAIResponseFormatter
from trioagent.message import (
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    UserMsg,
)
from trioagent.model import OpenAIResponseModel, OpenAIResponseParameters
from trioagent.testing import (
    OpenAICompatibleServer,
    ScriptedResponse,
)
from trioagent.types import FinishedReason, ToolChoice

KEY = "sk-test-resp-0123456789"

# A recorded stream, verbatim (one event/data pair per SSE event)
R1_WIRE = r"""event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"o4-mini","output":[],"parallel_tool_calls":true,"tool_choice":"auto","tools":[]}}
event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}
event: response.reasoning_summary_part.added
data: {"type":"response.reasoning_summary_part.added","sequence_number":2,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}
event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Need weather."}
event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Need weather."}]}}
event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":5,"output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}
event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":6,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Let me","logprobs":[]}
event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_1","output_index":1,"content_index":0,"delta":" check.","logprobs":[]}
event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":8,"output_index":2,"item":{"id":"fc_1","type":"function_call","status":"in_progress","call_id":"call_abc","name":"get_weather","arguments":""}}
event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":9,"item_id":"fc_1","output_index":2,"delta":"{\"city\":"}
event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":10,"item_id":"fc_1","output_index":2,"delta":"\"Paris\"}"}
event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","sequence_number":11,"item_id":"fc_1","output_index":2,"arguments":"{\"city\":\"Paris\"}"}
event: response.completed
data: {"type":"response.completed","sequence_number":12,"response":{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"o4-mini","parallel_tool_calls":true,"tool_choice":"auto","tools":[],"output":[{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Need weather."}]},{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me check.","annotations":[]}]},{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_abc","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}],"usage":{"input_tokens":40,"input_tokens_details":{"cached_tokens":0},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":10},"total_tokens":60}}}
"""


def wire_pieces(wire: str) -> list[bytes]:
    """The transcript as SSE events (a blank line after each ``event``/``data`` pair), one
    piece per event."""
    lines = wire.strip("\n").split("\n")
    return [f"{lines[i]}\n{lines[i + 1]}\n\n".encode() for i in range(0, len(lines), 2)]


def sse(*events: dict[str, Any]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def completed(output: list[dict[str, Any]], **usage: Any) -> dict[str, Any]:
    return {
        "type": "response.completed",
        "response": {
            "id": "resp_x",
            "status": "completed",
            "output": output,
            "usage": usage or {"input_tokens": 3, "output_tokens": 2},
        },
    }


def text_delta(text: str, item: str = "msg_1", index: int = 0) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "item_id": item,
        "content_index": index,
        "delta": text,
    }


def error(
    status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None
) -> ScriptedResponse:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    return ScriptedResponse(status=status, body=json.dumps(body).encode(), headers=headers or {})


class ResponsesAPI(ScriptedRoute):
    """The scripted ``POST /v1/responses`` route of a loopback server."""

    def __init__(self, server: OpenAICompatibleServer) -> None:
        super().__init__(server, "/v1/responses")

    def model(self, **kwargs: Any) -> OpenAIResponseModel:
        credential = OpenAICredential(api_key=KEY, base_url=self.server.base_url)
        return OpenAIResponseModel("o4-mini", credential=credential, **kwargs)


@pytest.fixture
async def api(nursery: trio.Nursery) -> ResponsesAPI:
    return ResponsesAPI(await start_server(nursery, KEY))


@pytest.fixture
async def model(api: ResponsesAPI) -> AsyncIterator[OpenAIResponseModel]:
    async with api.model(retry_delay=0.5) as model:
        yield model


def describe(block: Any) -> tuple[Any, ...]:
    match block:
        case ThinkingBlock():
            return ("think", block.id, block.thinking, block.extra)
        case TextBlock():
            return ("text", block.id, block.text)
        case ToolCallBlock():
            return ("call", block.id, block.name, block.input)
    raise AssertionError(block)


R1_RAW = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Need weather."}],
}
R1_EXTRA = {"reasoning_item_id": "rs_1", "reasoning_item_raw": R1_RAW}


# -- streaming ---------------------------------------------------------------------------------


async def test_r1_transcript_deltas_and_final(
    api: ResponsesAPI, model: OpenAIResponseModel
) -> None:
    api.push(stream(wire_pieces(R1_WIRE)))
    sink = Sink()

    final = await model(MSGS, emit=sink)

    k = sink.items[0].content[0].id
    t = sink.items[1].content[0].id
    assert [[describe(b) for b in c.content] for c in sink.items] == [
        [("think", k, "Need weather.", {})],
        [("text", t, "Let me")],
        [("text", t, " check.")],
        [("call", "call_abc", "get_weather", '{"city":')],
        [("call", "call_abc", "get_weather", '"Paris"}')],
        [("think", k, "", R1_EXTRA)],
    ]
    assert k != t
    assert [c.usage is not None for c in sink.items] == [False] * 5 + [True]
    # one local response id for the whole stream (as AgentScope does); upstream id in metadata
    assert {c.id for c in sink.items} == {final.id}
    assert final.id != "resp_1"
    assert final.is_last
    assert final.finished_reason == FinishedReason.COMPLETED
    assert [describe(b) for b in final.content] == [
        ("think", k, "Need weather.", R1_EXTRA),
        ("text", t, "Let me check."),
        ("call", "call_abc", "get_weather", '{"city":"Paris"}'),
    ]
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (40, 20)
    assert (final.usage.cache_input_tokens, final.usage.cache_creation_input_tokens) == (0, 0)
    assert final.metadata == {"response_id": "resp_1", "finish_reason": "completed"}
    # the final response replays as the reasoning item, the message and the call
    formatted = await OpenAIResponseFormatter().format(
        [Msg("assistant", final.content, "assistant")]
    )
    assert formatted == [
        R1_RAW,
        {"role": "assistant", "content": [{"type": "output_text", "text": "Let me check."}]},
        {
            "type": "function_call",
            "call_id": "call_abc",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
    ]


async def test_events_split_across_reads_are_parsed(
    api: ResponsesAPI, model: OpenAIResponseModel
) -> None:
    wire = b"".join(wire_pieces(R1_WIRE)).replace(b"\n", b"\r\n")
    api.push(stream([wire[i : i + 37] for i in range(0, len(wire), 37)]))

    final = await model(MSGS)

    assert [describe(b)[2:] for b in final.content] == [
        ("Need weather.", R1_EXTRA),
        ("Let me check.",),
        ("get_weather", '{"city":"Paris"}'),
    ]


async def test_reasoning_without_text_parts_refusal_and_unstreamed_calls(
    api: ResponsesAPI, model: OpenAIResponseModel
) -> None:
    raw_reasoning = {
        "id": "rs_2",
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "gAAA",
        "status": None,
    }
    api.push(
        stream(
            sse(
                {"type": "response.output_item.added", "item": {"id": "rs_2", "type": "reasoning"}},
                {
                    "type": "response.reasoning_text.delta",
                    "item_id": "rs_3",
                    "content_index": 0,
                    "delta": "raw thought",
                },
                {
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": "rs_3",
                    "summary_index": 0,
                    "delta": "summary",
                },
                text_delta("Hello"),
                {
                    "type": "response.refusal.delta",
                    "item_id": "msg_1",
                    "content_index": 1,
                    "delta": "No.",
                },
                {
                    "type": "response.output_item.added",
                    "item": {
                        "id": "fc_1",
                        "type": "function_call",
                        "call_id": "call_1",
                        "name": "",
                    },
                },
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": "fc_1",
                    "arguments": "",
                },
                {"type": "response.function_call_arguments.delta", "item_id": "fc_9", "delta": "x"},
                {"type": "response.in_progress", "response": {}},
                completed(
                    [
                        raw_reasoning,
                        {"id": "rs_3", "type": "reasoning", "summary": []},
                        {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f"},
                        {
                            "id": "fc_2",
                            "type": "function_call",
                            "call_id": "call_2",
                            "name": "g",
                            "arguments": '{"a": 1}',
                        },
                    ],
                    input_tokens=100,
                    output_tokens=7,
                    input_tokens_details={"cached_tokens": 64},
                ),
            )
        )
    )

    final = await model(MSGS)

    raw, summary, text, refusal, call, empty_reasoning, unstreamed = final.content
    assert isinstance(raw, ThinkingBlock)
    assert isinstance(summary, ThinkingBlock)
    assert (raw.thinking, summary.thinking) == ("raw thought", "summary")
    assert raw.id != summary.id  # raw reasoning and summary parts stay separate blocks
    assert raw.extra["reasoning_item_id"] == summary.extra["reasoning_item_id"] == "rs_3"
    assert [describe(b)[2:] for b in (text, refusal, call)] == [
        ("Hello",),
        ("No.",),
        ("unknown", "{}"),  # no name on the item, no arguments
    ]
    assert text.id != refusal.id
    assert isinstance(empty_reasoning, ThinkingBlock)
    assert empty_reasoning.thinking == ""
    assert empty_reasoning.extra == {
        "reasoning_item_id": "rs_2",
        "reasoning_item_raw": {
            "id": "rs_2",
            "type": "reasoning",
            "summary": [],
            "encrypted_content": "gAAA",
        },
    }
    assert describe(unstreamed) == ("call", "call_2", "g", '{"a": 1}')
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.cache_input_tokens) == (100, 64)


async def test_incomplete_response_ends_the_stream(
    api: ResponsesAPI, model: OpenAIResponseModel
) -> None:
    api.push(
        stream(
            sse(
                text_delta("Partial"),
                {
                    "type": "response.incomplete",
                    "response": {
                        "id": "resp_i",
                        "status": "incomplete",
                        "incomplete_details": {"reason": "max_output_tokens"},
                        "output": [],
                        "usage": {"input_tokens": 5, "output_tokens": 16},
                    },
                },
            )
        )
    )

    final = await model(MSGS)

    assert [describe(b)[2] for b in final.content] == ["Partial"]
    assert final.metadata == {"response_id": "resp_i", "finish_reason": "max_output_tokens"}
    assert final.usage is not None
    assert final.usage.output_tokens == 16


# -- request -------------------------------------------------------------------------------------


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
OTHER_TOOL = {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}


async def test_request_matches_the_captured_agentscope_body(api: ResponsesAPI) -> None:
    api.push(stream(wire_pieces(R1_WIRE)))
    params = OpenAIResponseParameters(
        thinking_enable=True, reasoning_effort="medium", max_tokens=500
    )
    credential = OpenAICredential(api_key=KEY, base_url=api.server.base_url, organization="org-1")

    async with OpenAIResponseModel("o4-mini", credential=credential, parameters=params) as model:
        await model(MSGS, [WEATHER_TOOL], ToolChoice(mode="auto", tools=["get_weather"]))

    (request,) = api.requests
    assert request.method == "POST"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["openai-organization"] == "org-1"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["content-type"] == "application/json"
    assert request.body == json.loads(
        '{"model":"o4-mini","stream":true,"input":[{"role":"system","content":[{"type":"input_text","text":"Be brief."}]},{"role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]}],"max_output_tokens":500,"reasoning":{"effort":"medium"},"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"get_weather"}]},"tools":[{"type":"function","name":"get_weather","description":"Get weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}'
    )


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (ToolChoice(mode="get_weather"), {"type": "function", "name": "get_weather"}),
        (ToolChoice(mode="required"), "required"),
        (ToolChoice(mode="none"), "none"),
        (
            ToolChoice(mode="required", tools=["other"]),
            {
                "type": "allowed_tools",
                "mode": "required",
                "tools": [{"type": "function", "name": "other"}],
            },
        ),
    ],
)
async def test_tool_choice_mapping_never_filters_tools(
    api: ResponsesAPI, model: OpenAIResponseModel, choice: ToolChoice, expected: Any
) -> None:
    api.push(stream(sse(completed([]))))

    await model(MSGS, [WEATHER_TOOL, OTHER_TOOL], choice)

    body = api.requests[0].body
    assert body["tool_choice"] == expected
    assert [t["name"] for t in body["tools"]] == ["get_weather", "other"]
    assert all(t["type"] == "function" and "function" not in t for t in body["tools"])


async def test_effort_needs_thinking_temperature_and_extra_body(api: ResponsesAPI) -> None:
    api.push(stream(sse(completed([]))))
    params = OpenAIResponseParameters(reasoning_effort="high", temperature=0.3)

    async with api.model(parameters=params, extra_body={"store": False}) as model:
        await model(MSGS)

    body = api.requests[0].body
    assert "reasoning" not in body
    assert "max_output_tokens" not in body
    assert "stream_options" not in body
    assert "tools" not in body
    assert "tool_choice" not in body
    assert body["temperature"] == 0.3
    assert body["store"] is False


def test_parameter_validation_and_defaults() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        OpenAIResponseParameters(max_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        OpenAIResponseParameters(temperature=3)
    model = OpenAIResponseModel("o4-mini", credential=OpenAICredential(api_key=KEY))
    assert model.type == "openai_response"
    assert model.context_size == 200000
    assert isinstance(model.formatter, OpenAIResponseFormatter)
    assert KEY not in repr(model)
    assert KEY not in repr(model.credential)


# -- non-streaming ---------------------------------------------------------------------------


async def test_non_stream_response(api: ResponsesAPI) -> None:
    reasoning = {
        "id": "rs_7",
        "type": "reasoning",
        "summary": [
            {"type": "summary_text", "text": "first"},
            {"type": "summary_text", "text": "second"},
        ],
        "content": [{"type": "reasoning_text", "text": "raw"}],
        "encrypted_content": None,
    }
    body = {
        "id": "resp_77",
        "object": "response",
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "output": [
            reasoning,
            {"id": "rs_8", "type": "reasoning", "summary": []},
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "Done.", "annotations": []},
                    {"type": "refusal", "refusal": "Not that."},
                ],
            },
            {
                "id": "fc_1",
                "type": "function_call",
                "call_id": "call_1",
                "name": "f",
                "arguments": "",
            },
        ],
        "usage": {
            "input_tokens": 11,
            "input_tokens_details": {"cached_tokens": 8},
            "output_tokens": 6,
        },
    }
    api.push(ScriptedResponse.json(body))
    sink = Sink()

    async with api.model(stream=False) as model:
        final = await model(MSGS, emit=sink)

    assert sink.items == []
    assert api.requests[0].body["stream"] is False
    assert api.requests[0].headers["accept"] == "application/json"
    assert final.is_last
    assert final.id == "resp_77"
    *thinking, text, refusal, call = final.content
    assert [t.thinking for t in thinking] == ["first", "second", "raw", ""]  # type: ignore[union-attr]
    raw_7 = {k: v for k, v in reasoning.items() if v is not None}
    assert [t.extra for t in thinking] == [  # type: ignore[union-attr]
        *[{"reasoning_item_id": "rs_7", "reasoning_item_raw": raw_7}] * 3,
        {"reasoning_item_id": "rs_8", "reasoning_item_raw": body["output"][1]},
    ]
    assert [describe(b)[2:] for b in (text, refusal, call)] == [
        ("Done.",),
        ("Not that.",),
        ("f", "{}"),
    ]
    assert call.id == "call_1"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (11, 6)
    assert final.usage.cache_input_tokens == 8
    assert final.metadata == {"response_id": "resp_77", "finish_reason": "completed"}


async def test_non_stream_failed_response_is_an_error(api: ResponsesAPI) -> None:
    api.push(
        ScriptedResponse.json(
            {"id": "r", "status": "failed", "error": {"code": "server_error", "message": "boom"}}
        )
    )

    async with api.model(stream=False) as model:
        with pytest.raises(ModelUpstreamError, match="boom") as info:
            await model(MSGS)

    assert info.value.code == "server_error"
    assert not info.value.retryable


# -- errors and retries ----------------------------------------------------------------------


async def test_401_is_not_retried_and_the_key_is_redacted(
    api: ResponsesAPI, model: OpenAIResponseModel
) -> None:
    api.push(error(401, f"Incorrect API key provided: {KEY}.", "invalid_api_key"))

    with pytest.raises(ModelAuthenticationError) as info:
        await model(MSGS)

    assert KEY not in str(info.value)
    assert "Incorrect API key provided: ***." in str(info.value)
    assert len(api.requests) == 1


async def test_wrong_key_is_rejected_by_the_server(api: ResponsesAPI) -> None:
    credential = OpenAICredential(api_key="sk-wrong", base_url=api.server.base_url)

    async with OpenAIResponseModel("o4-mini", credential=credential) as model:
        with pytest.raises(ModelAuthenticationError):
            await model(MSGS)

    assert api.server.requests[0].headers["authorization"] == "Bearer sk-wrong"


async def test_429_with_retry_after_then_success(
    api: ResponsesAPI, model: OpenAIResponseModel, autojump_clock: trio.testing.MockClock
) -> None:
    api.push(
        error(429, "Rate limit reached", "rate_limit_exceeded", {"Retry-After": "7"}),
        stream(wire_pieces(R1_WIRE)),
    )
    start = trio.current_time()

    final = await model(MSGS)

    assert len(final.content) == 3
    assert len(api.requests) == 2
    assert trio.current_time() - start >= 7


async def test_429_exhausted(api: ResponsesAPI, autojump_clock: trio.testing.MockClock) -> None:
    api.push(error(429, "slow down", headers={"Retry-After": "1"}), error(429, "slow down"))

    async with api.model(max_retries=1) as model:
        with pytest.raises(ModelRateLimitError, match="slow down"):
            await model(MSGS)

    assert len(api.requests) == 2


async def test_400_is_not_retried_and_surfaces_the_provider_message(
    api: ResponsesAPI, model: OpenAIResponseModel
) -> None:
    api.push(error(400, "Unsupported parameter: 'temperature'.", "unsupported_parameter"))

    with pytest.raises(ModelInvalidRequestError) as info:
        await model(MSGS)

    assert info.value.status_code == 400
    assert info.value.code == "unsupported_parameter"
    assert info.value.message == "Unsupported parameter: 'temperature'."
    assert len(api.requests) == 1


async def test_5xx_retried_then_exhausted(
    api: ResponsesAPI, autojump_clock: trio.testing.MockClock
) -> None:
    api.push(*(error(500 + i, f"oops {i}") for i in range(3)))

    async with api.model(max_retries=2) as model:
        with pytest.raises(ModelUpstreamError, match="oops 2") as info:
            await model(MSGS)

    assert info.value.status_code == 502
    assert len(api.requests) == 3


async def test_response_failed_event_mid_stream(
    api: ResponsesAPI, model: OpenAIResponseModel
) -> None:
    failed = {
        "type": "response.failed",
        "response": {
            "id": "resp_f",
            "status": "failed",
            "error": {"code": "server_error", "message": f"The model crashed ({KEY})"},
        },
    }
    api.push(stream(sse(text_delta("Hi"), failed)))
    sink = Sink()

    with pytest.raises(ModelUpstreamError, match="The model crashed") as info:
        await model(MSGS, emit=sink)

    assert info.value.code == "server_error"
    assert not info.value.retryable
    assert KEY not in str(info.value)
    assert [describe(b)[2] for c in sink.items for b in c.content] == ["Hi"]
    assert len(api.requests) == 1


async def test_error_event_before_content_is_not_retried(
    api: ResponsesAPI, model: OpenAIResponseModel
) -> None:
    api.push(
        stream(
            sse(
                {
                    "type": "error",
                    "code": "context_length_exceeded",
                    "message": "Your input exceeds the context window.",
                    "param": None,
                }
            )
        )
    )

    with pytest.raises(ModelUpstreamError, match="exceeds the context window") as info:
        await model(MSGS)

    assert info.value.code == "context_length_exceeded"
    assert len(api.requests) == 1


async def test_cut_stream_is_a_stream_error(api: ResponsesAPI, model: OpenAIResponseModel) -> None:
    api.push(stream(wire_pieces(R1_WIRE)[:-1]))  # everything but response.completed
    sink = Sink()

    with pytest.raises(ModelStreamError, match=r"ended before 'response\.completed'"):
        await model(MSGS, emit=sink)

    assert len(sink.items) == 5  # the content already emitted is never replayed
    assert len(api.requests) == 1


async def test_cut_before_content_is_retried(
    api: ResponsesAPI, model: OpenAIResponseModel, autojump_clock: trio.testing.MockClock
) -> None:
    api.push(stream(wire_pieces(R1_WIRE)[:2]), stream(wire_pieces(R1_WIRE)))

    final = await model(MSGS)

    assert len(final.content) == 3
    assert len(api.requests) == 2


async def test_unparseable_event(api: ResponsesAPI, model: OpenAIResponseModel) -> None:
    api.push(stream([b"event: response.output_text.delta\ndata: {nope\n\n"]))

    with pytest.raises(ModelStreamError, match="unparseable event"):
        await model(MSGS)


# -- cancellation ----------------------------------------------------------------------------


async def test_cancel_mid_stream_emits_the_partial_and_closes_the_connection(
    api: ResponsesAPI, model: OpenAIResponseModel
) -> None:
    api.push(stream(wire_pieces(R1_WIRE), stall_after=10))  # stalls inside the tool call

    sink, caught = await call_cancelled_after(model, 4)

    assert [type(e) for e in caught] == [trio.Cancelled]
    *deltas, last = sink.items
    assert len(deltas) == 4
    assert last.is_last
    assert last.finished_reason == FinishedReason.INTERRUPTED
    assert [describe(b)[2:] for b in last.content] == [
        ("Need weather.", {}),
        ("Let me check.",),
        ("get_weather", '{"city":'),
    ]
    with trio.fail_after(5):
        await api.server.wait_all_closed()
    assert api.server.connections[0].closed_by_client
    assert open_connections(model.http_client) == []


# -- agent -----------------------------------------------------------------------------------


async def test_agent_reply_with_a_tool_round(api: ResponsesAPI) -> None:
    answer = [
        {
            "type": "response.output_item.added",
            "item": {"id": "msg_2", "type": "message", "role": "assistant", "content": []},
        },
        text_delta("It is sunny", "msg_2"),
        text_delta(" in Paris.", "msg_2"),
        completed(
            [
                {
                    "id": "msg_2",
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "It is sunny in Paris."}],
                }
            ]
        ),
    ]
    api.push(stream(wire_pieces(R1_WIRE)), stream(sse(*answer)))
    seen: list[str] = []

    async def get_weather(city: str) -> str:
        """Get the weather.

        Args:
            city: the city.
        """
        seen.append(city)
        return f"Sunny in {city}"

    async with api.model(max_retries=0) as model:
        agent = agent_with_tool(model, get_weather)
        msg = await agent.reply(UserMsg("user", "Weather in Paris?"))

    assert msg.get_text_content() == "It is sunny in Paris."
    assert seen == ["Paris"]
    first, second = api.requests
    assert [t["name"] for t in first.body["tools"]] == ["get_weather"]
    assert second.body["input"][:2] == first.body["input"]
    assert second.body["input"][2:] == [
        R1_RAW,
        {"role": "assistant", "content": [{"type": "output_text", "text": "Let me check."}]},
        {
            "type": "function_call",
            "call_id": "call_abc",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_abc", "output": "Sunny in Paris"},
    ]

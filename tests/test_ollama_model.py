"""OllamaChatModel (trioagent/model/_ollama.py) over real loopback HTTP.

The loopback server answers ``POST /api/chat`` through a custom route with NDJSON bodies sent
piece by piece (chunked), so every test exercises real sockets, real chunked transfer and the
real line decoder; httpx2 is never patched.  Tests with backoff sleeps or timeouts use
``autojump_clock`` (loopback I/O completes without waiting, so only the sleeps jump).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing
from provider_kit import (
    MSGS,
    ScriptedRoute,
    Sink,
    call_cancelled_after,
    lookup_agent,
    open_connections,
    start_server,
)

from trioagent.credential import OllamaCredential
from trioagent.exception import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelInvalidRequestError,
    ModelStreamError,
    ModelTimeoutError,
    ModelUpstreamError,
)
from trioagent.message import (
    AssistantMsg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMsg,
)
from trioagent.model import ChatResponse, OllamaChatModel, OllamaChatParameters
from trioagent.model._ollama import NDJSONDecoder
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedResponse,
)
from trioagent.types import FinishedReason, ToolChoice

TOOLS = [
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
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]


def line(message: dict[str, Any], *, done: bool = False, **extra: Any) -> bytes:
    payload = {
        "model": "qwen3:8b",
        "created_at": "2025-01-01T00:00:00Z",
        "message": {"role": "assistant", **message},
        "done": done,
        **extra,
    }
    return json.dumps(payload, ensure_ascii=False).encode() + b"\n"


# N1: a recorded Ollama stream, verbatim
N1 = [
    b'{"model":"qwen3:8b","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":"","thinking":"User asks"},"done":false}\n',
    b'{"model":"qwen3:8b","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":"","thinking":" weather."},"done":false}\n',
    b'{"model":"qwen3:8b","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},"done":false}\n',
    b'{"model":"qwen3:8b","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":"Done"},"done":false}\n',
    b'{"model":"qwen3:8b","created_at":"2025-01-01T00:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":1,"load_duration":1,"prompt_eval_count":26,"prompt_eval_duration":1,"eval_count":41,"eval_duration":1}\n',
]

DONE = line({"content": ""}, done=True, done_reason="stop", prompt_eval_count=3, eval_count=4)


class OllamaServer(ScriptedRoute):
    """The loopback server with a scripted ``/api/chat`` route (a default answer once the
    script is done)."""

    def __init__(self, server: OpenAICompatibleServer) -> None:
        super().__init__(server, "/api/chat")

    def answer(self, request: RecordedRequest) -> ScriptedResponse:
        if self.script:
            return super().answer(request)
        return ndjson([line({"content": "default"}), DONE])

    @property
    def host(self) -> str:
        return f"http://{self.server.host}:{self.server.port}"

    def model(self, **kwargs: Any) -> OllamaChatModel:
        return OllamaChatModel("qwen3:8b", credential=OllamaCredential(host=self.host), **kwargs)


def ndjson(pieces: list[bytes], **kwargs: Any) -> ScriptedResponse:
    return ScriptedResponse(body=pieces, media_type="application/x-ndjson", **kwargs)


def error(status: int, message: str) -> ScriptedResponse:
    return ScriptedResponse(status=status, body=json.dumps({"error": message}).encode())


@pytest.fixture(autouse=True)
def _no_ollama_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    monkeypatch.delenv("OLLAMA_HOST", raising=False)


@pytest.fixture
async def ollama(nursery: trio.Nursery) -> OllamaServer:
    return OllamaServer(await start_server(nursery))


@pytest.fixture
async def model(ollama: OllamaServer) -> AsyncIterator[OllamaChatModel]:
    async with ollama.model(retry_delay=0.5) as model:
        yield model


def describe(chunk: ChatResponse) -> list[tuple[str, str, str]]:
    out = []
    for block in chunk.content:
        match block:
            case ThinkingBlock():
                out.append(("think", block.id, block.thinking))
            case TextBlock():
                out.append(("text", block.id, block.text))
            case ToolCallBlock():
                out.append(("call", block.name, block.input))
    return out


# -- the line decoder -------------------------------------------------------------------------


def test_ndjson_decoder_splits_only_complete_lines() -> None:
    decoder = NDJSONDecoder()

    assert decoder.feed('{"a":') == []
    assert decoder.feed(' 1}\r\n\n  \n{"b": 2}\n{"c"') == ['{"a": 1}', '{"b": 2}']
    assert decoder.feed(": 3}\u2028") == []  # U+2028 is not a line break in NDJSON
    assert decoder.close() == '{"c": 3}\u2028'
    assert decoder.close() is None
    assert decoder.feed("\n\n") == []


# -- streaming --------------------------------------------------------------------------------


async def test_n1_transcript_replayed(ollama: OllamaServer, model: OllamaChatModel) -> None:
    ollama.push(ndjson(N1))
    sink = Sink()

    final = await model(MSGS, emit=sink)

    assert [describe(c) for c in sink.items] == [
        [("think", sink.items[0].content[0].id, "User asks")],
        [("think", sink.items[0].content[0].id, " weather.")],
        [("call", "get_weather", '{"city": "Paris"}')],
        [("text", sink.items[3].content[0].id, "Done")],
    ]
    for delta in sink.items:
        assert not delta.is_last
        assert delta.usage is not None
        assert (delta.usage.input_tokens, delta.usage.output_tokens) == (0, 0)
    call = sink.items[2].content[0]
    assert isinstance(call, ToolCallBlock)
    assert len(call.id) == 32
    assert int(call.id, 16) >= 0  # a fresh uuid hex id (Ollama sends none)
    assert len({c.id for c in sink.items}) == 1  # one local response id for the stream

    assert final.is_last
    assert final.finished_reason == FinishedReason.COMPLETED
    assert final.id == sink.items[0].id
    thinking, tool_call, text = final.content
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.thinking == "User asks weather."
    assert thinking.id == sink.items[0].content[0].id
    assert isinstance(tool_call, ToolCallBlock)
    assert (tool_call.id, tool_call.name) == (call.id, "get_weather")
    assert tool_call.input == json.dumps({"city": "Paris"})
    assert json.loads(tool_call.input) == {"city": "Paris"}
    assert isinstance(text, TextBlock)
    assert text.text == "Done"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (26, 41)
    assert final.usage.metadata == {
        "total_duration": 1,
        "load_duration": 1,
        "prompt_eval_duration": 1,
        "eval_duration": 1,
    }
    assert final.metadata == {"finish_reason": "stop"}

    (request,) = ollama.requests
    assert (request.method, request.path) == ("POST", "/api/chat")
    assert request.headers["accept"] == "application/x-ndjson"
    assert "authorization" not in request.headers
    assert request.body == {
        "model": "qwen3:8b",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        "stream": True,
        "think": False,
    }


async def test_request_body_options_think_tools_keep_alive(
    ollama: OllamaServer, caplog: pytest.LogCaptureFixture
) -> None:
    parameters = OllamaChatParameters(max_tokens=100, temperature=0.2, thinking_enable=True)
    async with ollama.model(
        parameters=parameters,
        keep_alive="5m",
        extra_body={"options": {"num_ctx": 8192}, "format": "json"},
    ) as model:
        with caplog.at_level(logging.WARNING, logger="trioagent.model"):
            await model(MSGS, TOOLS, ToolChoice(mode="get_weather", tools=["get_weather"]))
        await model(MSGS, TOOLS, ToolChoice(mode="auto"))

    first, second = (r.body for r in ollama.requests)
    assert first == {
        "model": "qwen3:8b",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        "stream": True,
        "options": {"num_predict": 100, "temperature": 0.2, "num_ctx": 8192},
        "think": True,
        "keep_alive": "5m",
        "format": "json",
        "tools": [TOOLS[0]],  # filtered by tool_choice.tools; no tool_choice key
    }
    assert second["tools"] == TOOLS
    assert "tool_choice" not in second
    assert [r.getMessage() for r in caplog.records if "tool_choice" in r.getMessage()] == [
        "Ollama does not support tool_choice: mode 'get_weather' ignored (tool_choice.tools "
        "still filters the tool schemas)"
    ]


async def test_odd_splits_crlf_blank_lines_and_no_final_newline(
    ollama: OllamaServer, model: OllamaChatModel
) -> None:
    first = line({"content": "Hé"}).replace(b"\n", b"\r\n")
    cut = first.index("é".encode()) + 1  # inside the two bytes of "é"
    second = line({"content": "llo"})
    last = DONE.rstrip(b"\n")  # the body ends without a final newline
    ollama.push(ndjson([first[:cut], first[cut:] + b"\n  \n", second[:9], second[9:], last]))

    final = await model(MSGS)

    assert [b.text for b in final.content] == ["Héllo"]  # type: ignore[union-attr]
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (3, 4)


async def test_non_stream_completion(ollama: OllamaServer) -> None:
    body = {
        "model": "qwen3:8b",
        "message": {
            "role": "assistant",
            "content": "Sunny.",
            "thinking": "Check.",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Rome"}}}],
        },
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 9,
        "eval_count": 5,
    }
    no_counts = {"message": {"role": "assistant", "content": "x"}, "done": True}
    ollama.push(ScriptedResponse.json(body), ScriptedResponse.json(no_counts))

    async with ollama.model(stream=False) as model:
        final = await model(MSGS)
        bare = await model(MSGS)

    assert ollama.requests[0].body["stream"] is False
    assert ollama.requests[0].headers["accept"] == "application/json"
    thinking, text, call = final.content
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.thinking == "Check."
    assert isinstance(text, TextBlock)
    assert text.text == "Sunny."
    assert isinstance(call, ToolCallBlock)
    assert (call.name, call.input) == ("get_weather", '{"city": "Rome"}')
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (9, 5)
    assert final.metadata == {"finish_reason": "stop"}
    assert bare.usage is None  # usage only when both counts are reported


# -- errors and retries (transport errors only, as AgentScope) --------------------------------


async def test_http_error_is_typed_and_never_retried(
    ollama: OllamaServer, model: OllamaChatModel
) -> None:
    ollama.push(error(404, "model 'qwen9' not found"), error(500, "llama runner crashed"))

    with pytest.raises(ModelInvalidRequestError) as info:
        await model(MSGS)
    assert info.value.status_code == 404
    assert info.value.message == "model 'qwen9' not found"
    assert not info.value.retryable
    assert len(ollama.requests) == 1

    with pytest.raises(ModelUpstreamError, match="llama runner crashed") as upstream:
        await model(MSGS)
    assert upstream.value.status_code == 500
    assert not upstream.value.retryable
    assert len(ollama.requests) == 2  # a 5xx is not retried either (unlike OpenAI)


async def test_connection_refused_is_retried_then_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens on this port now
    credential = OllamaCredential(host=f"127.0.0.1:{port}")

    async with OllamaChatModel("m", credential=credential, max_retries=2) as model:
        start = trio.current_time()
        with pytest.raises(ModelConnectionError, match="could not reach") as info:
            await model(MSGS)

    assert info.value.retryable
    assert trio.current_time() - start >= 1.0 + 2.0  # two backoff sleeps: it was retried


async def test_stream_ending_without_done(
    ollama: OllamaServer, model: OllamaChatModel, autojump_clock: trio.testing.MockClock
) -> None:
    empty = line({"content": ""})
    ollama.push(
        ndjson([empty]),  # no content yet: retried
        ndjson([line({"content": "Hel"}), line({"content": "lo"}), DONE]),
        ndjson([line({"content": "partial"})]),  # content emitted: never replayed
    )

    final = await model(MSGS)
    assert [b.text for b in final.content] == ["Hello"]  # type: ignore[union-attr]
    assert len(ollama.requests) == 2

    sink = Sink()
    with pytest.raises(ModelStreamError, match="ended before its last line") as info:
        await model(MSGS, emit=sink)
    assert info.value.retryable
    assert len(ollama.requests) == 3
    assert [describe(c)[0][2] for c in sink.items] == ["partial"]


async def test_error_line_inside_the_stream(ollama: OllamaServer, model: OllamaChatModel) -> None:
    ollama.push(ndjson([line({"content": "Hi"}), b'{"error": "out of memory"}\n']))

    with pytest.raises(ModelUpstreamError, match="out of memory") as info:
        await model(MSGS)

    assert not info.value.retryable
    assert len(ollama.requests) == 1


async def test_unparseable_line(ollama: OllamaServer, model: OllamaChatModel) -> None:
    ollama.push(ndjson([b"{not json\n"]), ndjson([b"[1, 2]\n"]))

    with pytest.raises(ModelStreamError, match="unparseable line"):
        await model(MSGS)
    with pytest.raises(ModelStreamError, match="unexpected line"):
        await model(MSGS)
    assert len(ollama.requests) == 2


async def test_stall_past_read_timeout_closes_the_connection(
    ollama: OllamaServer, autojump_clock: trio.testing.MockClock
) -> None:
    ollama.push(ndjson([line({"content": "Hel"}), DONE], stall_after=1))

    async with ollama.model(read_timeout=30, max_retries=0) as model:
        start = trio.current_time()
        with pytest.raises(ModelTimeoutError, match="waiting for data"):
            await model(MSGS)
        assert trio.current_time() - start == pytest.approx(30)
        assert open_connections(model.http_client) == []

    await ollama.server.wait_all_closed()


async def test_key_from_environment_is_sent_and_redacted(
    ollama: OllamaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "ollama-secret-0123456789"
    monkeypatch.setenv("OLLAMA_API_KEY", key)
    monkeypatch.setenv("OLLAMA_HOST", ollama.host)
    ollama.push(error(401, f"unauthorized key {key}"))

    async with OllamaChatModel("qwen3:8b") as model:
        with pytest.raises(ModelAuthenticationError) as info:
            await model(MSGS)

    assert ollama.requests[0].headers["authorization"] == f"Bearer {key}"
    assert key not in str(info.value)
    assert "unauthorized key ***" in str(info.value)
    assert key not in repr(model)


def test_parameter_validation_and_defaults() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        OllamaChatParameters(max_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        OllamaChatParameters(temperature=2.5)
    model = OllamaChatModel("qwen3:8b")
    assert model.context_size == 32768
    assert model.type == "ollama_chat"
    assert model.credential.get_base_url() == "http://localhost:11434"


# -- cancellation -----------------------------------------------------------------------------


async def test_cancel_mid_stream_closes_the_connection(
    ollama: OllamaServer, model: OllamaChatModel
) -> None:
    pieces = [line({"content": word}) for word in ["Hello", " world", ",", " how"]]
    ollama.push(ndjson(pieces, stall_after=2))  # then holds the stream open

    sink, caught = await call_cancelled_after(model, 2)

    assert [type(e) for e in caught] == [trio.Cancelled]
    *deltas, last = sink.items
    assert [describe(c)[0][2] for c in deltas] == ["Hello", " world"]
    assert last.is_last
    assert last.finished_reason == FinishedReason.INTERRUPTED
    assert [b.text for b in last.content] == ["Hello world"]  # type: ignore[union-attr]
    with trio.fail_after(5):
        await ollama.server.wait_all_closed()
    assert ollama.server.connections[0].closed_by_client
    assert open_connections(model.http_client) == []


async def test_connection_reused_after_a_complete_stream(
    ollama: OllamaServer, model: OllamaChatModel
) -> None:
    await model(MSGS)
    await model(MSGS)

    assert [r.connection_id for r in ollama.requests] == [0, 0]
    assert len(open_connections(model.http_client)) == 1


# -- structured output, history, agent --------------------------------------------------------


async def test_structured_output(ollama: OllamaServer, model: OllamaChatModel) -> None:
    call = {"function": {"name": "generate_structured_output", "arguments": {"city": "Paris"}}}
    ollama.push(ndjson([line({"content": "", "tool_calls": [call]}), DONE]))
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

    result = await model.generate_structured_output(MSGS, schema)

    assert result.content == {"city": "Paris"}
    body = ollama.requests[0].body
    assert [t["function"]["name"] for t in body["tools"]] == ["generate_structured_output"]
    assert "tool_choice" not in body


async def test_history_with_a_tool_round_is_formatted_for_ollama(
    ollama: OllamaServer, model: OllamaChatModel
) -> None:
    history = [
        *MSGS,
        AssistantMsg(
            "assistant",
            [
                ToolCallBlock(id="c1", name="get_weather", input='{"city": "Paris"}'),
                ToolResultBlock(id="c1", name="get_weather", output="Sunny"),
            ],
        ),
    ]

    await model(history)

    assert ollama.requests[0].body["messages"][2:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "tool_name": "get_weather", "content": "Sunny"},
    ]


async def test_agent_reply_with_a_tool_round(ollama: OllamaServer, model: OllamaChatModel) -> None:
    call = {"function": {"name": "lookup", "arguments": {"city": "Paris"}}}
    ollama.push(
        ndjson([line({"content": "", "tool_calls": [call]}), DONE]),
        ndjson([line({"content": "It is sunny"}), line({"content": " in Paris."}), DONE]),
    )
    agent = lookup_agent(model)

    msg = await agent.reply(UserMsg("user", "weather?"))

    assert msg.get_text_content() == "It is sunny in Paris."
    first, second = (r.body for r in ollama.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["lookup"]
    assert first["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "weather?"},
    ]
    assert second["messages"][2:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "lookup", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "tool_name": "lookup", "content": "sunny in Paris"},
    ]


def test_ndjson_line_over_max_size_raises_a_typed_error() -> None:
    from trioagent.exception import ModelStreamError
    from trioagent.model._ollama import NDJSONDecoder

    decoder = NDJSONDecoder(max_size=50)
    assert decoder.feed('{"a": 1}\n{"b": ') == ['{"a": 1}']
    with pytest.raises(ModelStreamError, match="one line of the stream is larger than 50") as info:
        decoder.feed("2" * 60)
    assert not info.value.retryable
    with pytest.raises(ModelStreamError):
        NDJSONDecoder(max_size=50).feed('{"c": "' + "z" * 60 + '"}\n')

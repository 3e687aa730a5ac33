"""The scripted OpenAI-compatible loopback server of ``trioagent.testing``.

Driven here with a plain httpx client, to check the wire protocol itself.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import httpx
import pytest
import trio

from trioagent.message import UserMsg
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedError,
    ScriptedReply,
    ScriptedSSE,
    ScriptedToolCall,
    serve_openai_compatible,
)


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    server: OpenAICompatibleServer = await nursery.start(serve_openai_compatible)
    return server


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5) as client:
        yield client


def body(stream: bool = False, text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        "stream": stream,
        **extra,
    }


async def sse_chunks(client: httpx.AsyncClient, url: str, payload: dict[str, Any]) -> list[Any]:
    response = await client.post(url, json=payload)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [e for e in response.text.split("\n\n") if e]
    return [e.removeprefix("data: ") for e in events]


async def test_started_with_nursery_start_on_an_ephemeral_port(
    server: OpenAICompatibleServer,
) -> None:
    assert server.port > 0
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert "OpenAICompatibleServer" in repr(server)


async def test_echo_when_the_script_is_empty(
    server: OpenAICompatibleServer, client: httpx.AsyncClient
) -> None:
    response = await client.post(f"{server.base_url}/chat/completions", json=body(text="ping"))

    payload = response.json()
    assert payload["object"] == "chat.completion"
    assert payload["choices"][0]["message"]["content"] == "Echo: ping"
    assert payload["choices"][0]["finish_reason"] == "stop"
    assert payload["usage"]["total_tokens"] > 0


async def test_streamed_reply_wire_format(
    server: OpenAICompatibleServer, client: httpx.AsyncClient
) -> None:
    server.push(
        ScriptedReply(
            text="abcdef",
            reasoning="xy",
            tool_calls=[ScriptedToolCall("f", '{"a": 1}', id="call_1")],
            chunk_size=4,
            usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
        )
    )

    raw = await sse_chunks(
        client,
        f"{server.base_url}/chat/completions",
        body(stream=True, stream_options={"include_usage": True}),
    )

    assert raw[-1] == "[DONE]"
    chunks = [json.loads(c) for c in raw[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert [d.get("reasoning_content") for d in deltas if "reasoning_content" in d] == ["xy"]
    assert [d["content"] for d in deltas[1:] if "content" in d] == ["abcd", "ef"]
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert calls[0] == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "f", "arguments": ""},
    }
    assert "".join(c["function"]["arguments"] for c in calls) == '{"a": 1}'
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    assert all(c["usage"] is None for c in chunks[:-1])


async def test_no_usage_chunk_unless_asked(
    server: OpenAICompatibleServer, client: httpx.AsyncClient
) -> None:
    raw = await sse_chunks(client, f"{server.base_url}/chat/completions", body(stream=True))

    chunks = [json.loads(c) for c in raw[:-1]]
    assert all(c["choices"] for c in chunks)
    assert all("usage" not in c for c in chunks)


async def test_requests_are_recorded(
    server: OpenAICompatibleServer, client: httpx.AsyncClient
) -> None:
    await client.post(
        f"{server.base_url}/chat/completions?x=1",
        json=body(),
        headers={"X-Test": "yes", "Authorization": "Bearer k"},
    )

    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions?x=1"
    assert request.headers["x-test"] == "yes"
    assert request.body == body()
    assert json.loads(request.raw_body) == body()
    assert request.last_user_text() == "hello"
    assert not request.stream
    assert "Bearer" not in repr(request)


async def test_callable_entries_sync_and_async(
    server: OpenAICompatibleServer, client: httpx.AsyncClient
) -> None:
    def shout(request: RecordedRequest) -> str:
        return request.last_user_text().upper()

    async def later(request: RecordedRequest) -> ScriptedError:
        await trio.lowlevel.checkpoint()
        return ScriptedError(status=503, message="busy")

    server.push(shout, later)
    url = f"{server.base_url}/chat/completions"

    first = await client.post(url, json=body(text="quiet"))
    second = await client.post(url, json=body())

    assert first.json()["choices"][0]["message"]["content"] == "QUIET"
    assert second.status_code == 503


async def test_error_entry(server: OpenAICompatibleServer, client: httpx.AsyncClient) -> None:
    server.push(
        ScriptedError(
            status=429, message="slow", code="rate_limit", retry_after=2.5, headers={"X-A": "b"}
        )
    )

    response = await client.post(f"{server.base_url}/chat/completions", json=body())

    assert response.status_code == 429
    assert response.headers["retry-after"] == "2.5"
    assert response.headers["x-a"] == "b"
    assert response.json() == {
        "error": {"message": "slow", "type": "server_error", "param": None, "code": "rate_limit"}
    }


async def test_raw_sse_entry(server: OpenAICompatibleServer, client: httpx.AsyncClient) -> None:
    server.push(ScriptedSSE(events=[": comment\n\n", {"a": 1}], done=False))

    response = await client.post(f"{server.base_url}/chat/completions", json=body(stream=True))

    assert response.text == ': comment\n\ndata: {"a": 1}\n\n'


async def test_unknown_path_bad_body_and_api_key(
    nursery: trio.Nursery, client: httpx.AsyncClient
) -> None:
    server: OpenAICompatibleServer = await nursery.start(
        partial(serve_openai_compatible, ["never used"], api_key="sk-k")
    )

    missing = await client.post(f"{server.base_url}/embeddings", json=body())
    no_key = await client.post(f"{server.base_url}/chat/completions", json=body())
    bad = await client.post(
        f"{server.base_url}/chat/completions",
        content=b"not json",
        headers={"Authorization": "Bearer sk-k"},
    )

    assert missing.status_code == 404
    assert no_key.status_code == 401
    assert no_key.json()["error"]["code"] == "invalid_api_key"
    assert bad.status_code == 400
    assert list(server.script) == ["never used"]
    assert server.credential().get_api_key() == "sk-k"


async def test_clean_and_abrupt_cuts(
    server: OpenAICompatibleServer, client: httpx.AsyncClient
) -> None:
    server.push(
        ScriptedReply(text="abcdefgh", chunk_size=2, cut_after=2),
        ScriptedReply(text="abcdefgh", chunk_size=2, cut_after=2, cut_abruptly=True),
    )
    url = f"{server.base_url}/chat/completions"

    raw = await sse_chunks(client, url, body(stream=True))
    assert len(raw) == 2
    assert "[DONE]" not in raw

    with pytest.raises(httpx.RemoteProtocolError):
        await client.post(url, json=body(stream=True))
    with trio.fail_after(5):
        await server.wait_all_closed()
    assert not server.connections[-1].closed_by_client


async def test_stall_until_the_client_goes_away(
    server: OpenAICompatibleServer, client: httpx.AsyncClient
) -> None:
    server.push(ScriptedReply(text="abcdef", chunk_size=2, stall_after=1))
    url = f"{server.base_url}/chat/completions"
    received: list[str] = []

    # Cancelled inside the next socket read (so httpx's nested generators all finish); leaving
    # the block closes the half-read response's connection.
    with trio.CancelScope() as scope:
        async with client.stream("POST", url, json=body(stream=True)) as response:
            async for text in response.aiter_text():
                received.append(text)
                scope.cancel()

    with trio.fail_after(5):
        await server.wait_all_closed()
    (connection,) = server.connections
    assert connection.closed_by_client
    assert connection.requests == 1
    assert received[0].startswith("data: ")


async def test_keep_alive_and_client_close(
    server: OpenAICompatibleServer, client: httpx.AsyncClient
) -> None:
    url = f"{server.base_url}/chat/completions"
    await client.post(url, json=body())
    await client.post(url, json=body(stream=True))

    assert [r.connection_id for r in server.requests] == [0, 0]
    assert server.open_connections == 1
    await client.aclose()
    with trio.fail_after(5):
        await server.wait_all_closed()
    assert server.connections[0].closed_by_client


async def test_files(server: OpenAICompatibleServer, client: httpx.AsyncClient) -> None:
    url = server.add_file("x.png", b"\x89PNG", "image/png")

    found = await client.get(url)
    missing = await client.get(url.replace("x.png", "y.png"))

    assert (found.status_code, found.content) == (200, b"\x89PNG")
    assert found.headers["content-type"] == "image/png"
    assert missing.status_code == 404


async def test_chat_model_helper_and_non_stream_stall(server: OpenAICompatibleServer) -> None:
    server.push(ScriptedReply(text="x", stall_after=0))

    async with server.chat_model(stream=False, read_timeout=0.05, max_retries=0) as model:
        assert model.model == "trioagent-test"
        with pytest.raises(Exception, match="timed out"):
            await model([UserMsg("user", "hi")])


async def test_wait_until(server: OpenAICompatibleServer, client: httpx.AsyncClient) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(client.post, f"{server.base_url}/chat/completions", json=body()))
        with trio.fail_after(5):
            await server.wait_until(lambda: len(server.requests) == 1)


async def test_bad_script_entry_is_reported(
    nursery: trio.Nursery, client: httpx.AsyncClient
) -> None:
    with pytest.raises(BaseExceptionGroup) as info:  # noqa: PT012 - the server's own nursery
        async with trio.open_nursery() as inner:
            server: OpenAICompatibleServer = await inner.start(
                serve_openai_compatible,
                [42],  # not a script entry
            )
            with contextlib.suppress(httpx.HTTPError):  # the server drops the connection
                await client.post(f"{server.base_url}/chat/completions", json=body())
            await trio.sleep_forever()  # until the server's error cancels this nursery

    assert info.group_contains(TypeError, match="not a script entry")

"""The scripted OpenAI-compatible loopback server of ``trioagent.testing``.

Driven here with a plain httpx2 client (and raw sockets), to check the wire protocol itself,
then under malformed, concurrent and vanishing clients.

Network tests run on the real clock (an autojumping clock could fire an HTTP deadline while
loopback I/O is in flight); they never sleep, and ``trio.fail_after`` only guards hangs.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from trioagent.message import UserMsg
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedError,
    ScriptedReply,
    ScriptedResponse,
    ScriptedSSE,
    ScriptedToolCall,
    serve_openai_compatible,
)


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    server: OpenAICompatibleServer = await nursery.start(serve_openai_compatible)
    return server


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(timeout=5) as client:
        yield client


def body(stream: bool = False, text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        "stream": stream,
        **extra,
    }


async def sse_chunks(client: httpx2.AsyncClient, url: str, payload: dict[str, Any]) -> list[Any]:
    response = await client.post(url, json=payload)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [e for e in response.text.split("\n\n") if e]
    return [e.removeprefix("data: ") for e in events]


def chat(text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


def raw_request(content: bytes, path: str = "/v1/chat/completions") -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(content)}\r\n\r\n"
    )
    return head.encode() + content


async def read_until(stream: trio.SocketStream, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = await stream.receive_some()
        if not chunk:
            break
        data += chunk
    return data


async def read_to_eof(stream: trio.SocketStream) -> bytes:
    data = b""
    while chunk := await stream.receive_some():
        data += chunk
    return data


async def test_started_with_nursery_start_on_an_ephemeral_port(
    server: OpenAICompatibleServer,
) -> None:
    assert server.port > 0
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert "OpenAICompatibleServer" in repr(server)


async def test_the_server_module_docstring_example(nursery: trio.Nursery):
    async with trio.open_nursery() as inner:
        server = await inner.start(serve_openai_compatible, ["Hello!"])
        async with server.chat_model() as model:
            response = await model([UserMsg("user", "Hi")])
        inner.cancel_scope.cancel()
    assert response.content[0].text == "Hello!"  # type: ignore[union-attr]
    assert server.requests[0].last_user_text() == "Hi"


async def test_echo_when_the_script_is_empty(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
) -> None:
    response = await client.post(f"{server.base_url}/chat/completions", json=body(text="ping"))

    payload = response.json()
    assert payload["object"] == "chat.completion"
    assert payload["choices"][0]["message"]["content"] == "Echo: ping"
    assert payload["choices"][0]["finish_reason"] == "stop"
    assert payload["usage"]["total_tokens"] > 0


async def test_streamed_reply_wire_format(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
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
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
) -> None:
    raw = await sse_chunks(client, f"{server.base_url}/chat/completions", body(stream=True))

    chunks = [json.loads(c) for c in raw[:-1]]
    assert all(c["choices"] for c in chunks)
    assert all("usage" not in c for c in chunks)


async def test_requests_are_recorded(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
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
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
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


async def test_error_entry(server: OpenAICompatibleServer, client: httpx2.AsyncClient) -> None:
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


async def test_raw_sse_entry(server: OpenAICompatibleServer, client: httpx2.AsyncClient) -> None:
    server.push(ScriptedSSE(events=[": comment\n\n", {"a": 1}], done=False))

    response = await client.post(f"{server.base_url}/chat/completions", json=body(stream=True))

    assert response.text == ': comment\n\ndata: {"a": 1}\n\n'


async def test_unknown_path_bad_body_and_api_key(
    nursery: trio.Nursery, client: httpx2.AsyncClient
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
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
) -> None:
    server.push(
        ScriptedReply(text="abcdefgh", chunk_size=2, cut_after=2),
        ScriptedReply(text="abcdefgh", chunk_size=2, cut_after=2, cut_abruptly=True),
    )
    url = f"{server.base_url}/chat/completions"

    raw = await sse_chunks(client, url, body(stream=True))
    assert len(raw) == 2
    assert "[DONE]" not in raw

    with pytest.raises(httpx2.RemoteProtocolError):
        await client.post(url, json=body(stream=True))
    with trio.fail_after(5):
        await server.wait_all_closed()
    assert not server.connections[-1].closed_by_client


async def test_stall_until_the_client_goes_away(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
) -> None:
    server.push(ScriptedReply(text="abcdef", chunk_size=2, stall_after=1))
    url = f"{server.base_url}/chat/completions"
    received: list[str] = []

    # Cancelled inside the next socket read (so httpx2's nested generators all finish); leaving
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
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
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


async def test_files(server: OpenAICompatibleServer, client: httpx2.AsyncClient) -> None:
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


async def test_wait_until(server: OpenAICompatibleServer, client: httpx2.AsyncClient) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(client.post, f"{server.base_url}/chat/completions", json=body()))
        with trio.fail_after(5):
            await server.wait_until(lambda: len(server.requests) == 1)


async def test_bad_script_entry_is_reported(
    nursery: trio.Nursery, client: httpx2.AsyncClient
) -> None:
    with pytest.raises(BaseExceptionGroup) as info:  # noqa: PT012 - the server's own nursery
        async with trio.open_nursery() as inner:
            server: OpenAICompatibleServer = await inner.start(
                serve_openai_compatible,
                [42],  # not a script entry
            )
            with contextlib.suppress(httpx2.HTTPError):  # the server drops the connection
                await client.post(f"{server.base_url}/chat/completions", json=body())
            await trio.sleep_forever()  # until the server's error cancels this nursery

    assert info.group_contains(TypeError, match="not a script entry")


# -- edges: malformed, concurrent and vanishing clients -------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"not json", b"[1, 2]", b'{"model": "m"}', b"", b"\xff\xfe", b"null", b'"messages"'],
)
async def test_a_malformed_body_gets_a_400_json_error_and_the_server_lives_on(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient, content: bytes
):
    server.push("scripted")
    url = f"{server.base_url}/chat/completions"

    bad = await client.post(url, content=content, headers={"Content-Type": "application/json"})
    good = await client.post(url, json=chat())

    assert bad.status_code == 400
    assert "messages" in bad.json()["error"]["message"]
    assert good.json()["choices"][0]["message"]["content"] == "scripted"
    assert server.requests[0].raw_body == content
    recorded = server.requests[0].body
    assert not (isinstance(recorded, dict) and "messages" in recorded)
    assert not server.script  # the bad request consumed no script entry


async def test_concurrent_requests_each_take_one_entry(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
):
    n = 8
    server.push(*[f"answer {i}" for i in range(n)])
    url = f"{server.base_url}/chat/completions"
    answers: list[str] = []

    async def one(i: int) -> None:
        async with httpx2.AsyncClient(timeout=5) as own:  # a connection each
            response = await own.post(url, json=chat(f"q{i}", stream=i % 2 == 0))
            answers.append(response.text)

    with trio.fail_after(10):
        async with trio.open_nursery() as clients:
            for i in range(n):
                clients.start_soon(one, i)
        await server.wait_all_closed()

    numbers = sorted(int(m[1]) for a in answers if (m := re.search(r"answer (\d)", a)))
    assert numbers == list(range(n))
    assert len(server.requests) == n
    assert len({r.connection_id for r in server.requests}) == n
    assert sorted(r.last_user_text() for r in server.requests) == [f"q{i}" for i in range(n)]
    assert not server.script


async def test_a_client_vanishing_mid_stream_does_not_crash_the_server(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
):
    server.push(ScriptedReply(text="abcdefgh", chunk_size=1, stall_after=3))
    sock = await trio.open_tcp_stream(server.host, server.port)
    await sock.send_all(raw_request(json.dumps(chat(stream=True)).encode()))
    with trio.fail_after(5):
        head = await read_until(sock, b"data: ")
        assert head.startswith(b"HTTP/1.1 200")
        await sock.aclose()
        await server.wait_all_closed()
    assert server.connections[0].closed_by_client

    # The server still answers (the script is empty now: it echoes).
    response = await client.post(f"{server.base_url}/chat/completions", json=chat("again"))
    assert response.json()["choices"][0]["message"]["content"] == "Echo: again"


async def test_a_client_vanishing_mid_request_body_records_nothing(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
):
    sock = await trio.open_tcp_stream(server.host, server.port)
    await sock.send_all(raw_request(json.dumps(chat()).encode())[:-5])
    await sock.aclose()
    with trio.fail_after(5):
        await server.wait_all_closed()
    assert server.requests == []
    response = await client.post(f"{server.base_url}/chat/completions", json=chat("still"))
    assert response.status_code == 200


async def test_garbage_on_the_wire_closes_that_connection_only(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
):
    sock = await trio.open_tcp_stream(server.host, server.port)
    await sock.send_all(b"NOT HTTP AT ALL\r\n\r\n")
    with trio.fail_after(5):
        await read_to_eof(sock)
        await server.wait_all_closed()
    await sock.aclose()
    response = await client.post(f"{server.base_url}/chat/completions", json=chat())
    assert response.status_code == 200
    assert server.requests[-1].body == chat()


async def test_wait_all_closed(server: OpenAICompatibleServer, client: httpx2.AsyncClient):
    with trio.fail_after(5):
        await server.wait_all_closed()  # nothing accepted yet: returns at once
    await client.post(f"{server.base_url}/chat/completions", json=chat())
    assert server.open_connections == 1  # keep-alive

    closed = False

    async def waiter() -> None:
        nonlocal closed
        await server.wait_all_closed()
        closed = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert not closed
        await client.aclose()
    assert closed
    assert server.connections[0].closed_by_client


async def test_cancelling_the_servers_nursery_closes_listener_and_connections():
    async with trio.open_nursery() as owner:
        server: OpenAICompatibleServer = await owner.start(
            serve_openai_compatible, [ScriptedReply(text="x", stall_after=0)]
        )
        sock = await trio.open_tcp_stream(server.host, server.port)
        await sock.send_all(raw_request(json.dumps(chat(stream=True)).encode()))
        with trio.fail_after(5):
            await server.wait_until(lambda: len(server.requests) == 1)
        owner.cancel_scope.cancel()

    assert server.open_connections == 0
    assert not server.connections[0].closed_by_client  # the server closed it
    with trio.fail_after(5):
        received = await read_to_eof(sock)  # the stalled stream ends: EOF
    assert received.startswith(b"HTTP/1.1 200")
    await sock.aclose()
    with pytest.raises(OSError):  # noqa: PT011 - refused, whatever the platform's errno
        await trio.open_tcp_stream(server.host, server.port)


async def test_recorded_request_bodies(server: OpenAICompatibleServer, client: httpx2.AsyncClient):
    payload = chat("plain string", stream=True, tools=[{"type": "function"}])
    raw = json.dumps(payload, separators=(",", ":")).encode()
    await client.post(f"{server.base_url}/chat/completions", content=raw)
    await client.post(f"{server.base_url}/chat/completions", json={"messages": []})

    first, second = server.requests
    assert first.raw_body == raw
    assert first.body == payload
    assert first.stream
    assert first.last_user_text() == "plain string"
    assert first.headers["content-length"] == str(len(raw))
    assert second.last_user_text() == ""
    assert not second.stream
    # Recorded bodies are the server's own parse: the client's later changes do not matter.
    payload["messages"].clear()
    assert first.body["messages"]


async def test_custom_routes(nursery: trio.Nursery, client: httpx2.AsyncClient):
    server: OpenAICompatibleServer = await nursery.start(
        partial(serve_openai_compatible, api_key="sk-r")
    )
    auth = {"Authorization": "Bearer sk-r"}
    seen: list[RecordedRequest] = []

    def speech(request: RecordedRequest) -> ScriptedResponse:
        seen.append(request)
        return ScriptedResponse(body=[b"RIFF", b"data"], media_type="audio/wav")

    async def decide(request: RecordedRequest) -> ScriptedResponse:
        await trio.lowlevel.checkpoint()
        return ScriptedResponse.json({"echo": request.body}, status=201)

    server.add_route("post", "/v1/audio/speech", speech)
    server.add_route("PUT", "/v1/decisions", decide)

    audio = await client.post(
        f"{server.base_url}/audio/speech?format=wav", json={"input": "hi"}, headers=auth
    )
    decision = await client.put(f"{server.base_url}/decisions", json={"a": 1}, headers=auth)
    unauthorized = await client.post(f"{server.base_url}/audio/speech", json={})
    wrong_method = await client.get(f"{server.base_url}/audio/speech", headers=auth)

    assert (audio.status_code, audio.content) == (200, b"RIFFdata")
    assert audio.headers["content-type"] == "audio/wav"
    assert seen[0].body == {"input": "hi"}
    assert seen[0].path == "/v1/audio/speech?format=wav"
    assert (decision.status_code, decision.json()) == (201, {"echo": {"a": 1}})
    assert unauthorized.status_code == 401
    assert len(seen) == 1  # the handler never saw the unauthorized request
    assert wrong_method.status_code == 404


# -- regressions: malformed fields, a client leaving mid-body -------------------------------------


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"messages": 5}, 400),
        ({"messages": ["not an object"]}, 400),
        ({"messages": [], "stream": True, "stream_options": True}, 400),
        ({"messages": [{"role": "user", "content": ["x", {"type": "text", "text": "t"}]}]}, 200),
    ],
)
async def test_malformed_fields_get_a_400_and_the_server_lives_on(
    payload: Any, status: int
) -> None:
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_openai_compatible)
        async with httpx2.AsyncClient(timeout=5) as client:
            response = await client.post(f"{server.base_url}/chat/completions", json=payload)
            assert response.status_code == status
            if status == 400:
                assert response.json()["error"]["type"] == "invalid_request_error"
            else:  # odd content parts are skipped by the echo
                assert response.json()["choices"][0]["message"]["content"] == "Echo: t"
            ok = await client.post(
                f"{server.base_url}/chat/completions",
                json={"messages": [{"role": "user", "content": "hi"}]},
            )
            assert ok.status_code == 200
        nursery.cancel_scope.cancel()


async def test_closed_by_client_when_the_client_leaves_mid_body() -> None:
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_openai_compatible)
        sock = await trio.open_tcp_stream(server.host, server.port)
        await sock.send_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b'Content-Length: 100\r\n\r\n{"messages"'
        )
        await sock.aclose()
        with trio.fail_after(5):
            await server.wait_all_closed()
        assert server.connections[0].closed_by_client
        nursery.cancel_scope.cancel()


# -- /v1/models and what the server refuses ------------------------------------------------


async def test_the_official_openai_client_lists_and_retrieves_the_model(
    nursery: trio.Nursery,
) -> None:
    """``models.list()`` of the official ``openai`` client (in a worker thread: it is a sync
    client) reads the list llama.cpp, vLLM and Ollama serve too."""
    import openai

    server = await nursery.start(partial(serve_openai_compatible, api_key="sk-test", model="tiny"))

    def use_client() -> tuple[list[str], str, str]:
        with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as client:
            listed = [m.id for m in client.models.list()]
            retrieved = client.models.retrieve("tiny").owned_by
            try:
                client.models.retrieve("other")
            except openai.NotFoundError as exc:
                missing = str(exc.code)
            return listed, retrieved, missing

    with trio.fail_after(30):
        listed, owner, missing = await trio.to_thread.run_sync(use_client)
    assert (listed, owner, missing) == (["tiny"], "trioagent", "model_not_found")
    assert [r.path for r in server.requests] == [
        "/v1/models",
        "/v1/models/tiny",
        "/v1/models/other",
    ]


async def test_models_need_the_api_key_when_one_is_set(nursery: trio.Nursery) -> None:
    server = await nursery.start(partial(serve_openai_compatible, api_key="sk-test"))
    async with httpx2.AsyncClient(timeout=5) as client:
        refused = await client.get(f"{server.base_url}/models")
        listed = await client.get(
            f"{server.base_url}/models/", headers={"Authorization": "Bearer sk-test"}
        )
    assert refused.status_code == 401
    assert listed.json()["data"][0]["id"] == "trioagent-test"


@pytest.mark.parametrize(
    ("n", "message"), [(2, "Only one completion choice"), (0, "Invalid 'n'"), ("2", "Invalid 'n'")]
)
async def test_n_other_than_one_is_refused_as_a_real_server_refuses_it(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient, n: object, message: str
) -> None:
    response = await client.post(f"{server.base_url}/chat/completions", json=body(n=n))
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", "n")
    assert error["message"].startswith(message)
    ok = await client.post(f"{server.base_url}/chat/completions", json=body(n=1, text="x"))
    assert ok.json()["choices"][0]["message"]["content"] == "Echo: x"


async def test_the_official_openai_client_gets_a_bad_request_for_n_2(nursery: trio.Nursery) -> None:
    import openai

    server = await nursery.start(serve_openai_compatible, ["never sent"])

    def ask_for_two() -> openai.BadRequestError:
        with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as client:
            try:
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], n=2
                )
            except openai.BadRequestError as exc:
                return exc
        raise AssertionError("n=2 was answered")

    with trio.fail_after(30):
        error = await trio.to_thread.run_sync(ask_for_two)
    assert (error.status_code, error.param, error.type) == (400, "n", "invalid_request_error")
    assert list(server.script) == ["never sent"]

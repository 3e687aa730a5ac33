"""The internal HTTP package shared by every provider (trioagent/_http).

Covers ``parse_retry_after``, the error mapping (``error_from_response``,
``error_from_payload``, ``error_from_transport``), ``safe_url``, ``bearer_headers``,
``parse_event``, ``response_json``, ``incomplete_stream_error``, ``HTTPClientOwner``, and the
I/O helpers ``send_request``, ``read_decoded`` and ``stream_sse``.  The I/O helpers run
against real loopback servers (``serve_openai_compatible``, or a raw trio socket server for a
body cut short); httpx2 is never patched and nothing sleeps in real time (stalls run under
``autojump_clock``).

The second half calls ``OpenAIChatModel`` where a test needs byte-level control of what
reaches the socket (a raw HTTP/1.1 server defined here: SSE framing split at every byte,
keep-alive comments, the end of a body after ``[DONE]``, redirects, JSON where an event stream
was asked for).  A test that needs data to arrive *before* a read timeout runs on mock time,
where the order of the two is fixed; one measuring a backoff gives the model no network
deadline (``NO_NET_DEADLINE``).
"""

from __future__ import annotations

import collections
import contextlib
import email.utils
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx2
import pytest
import trio
import trio.lowlevel
import trio.testing
from provider_kit import (
    MSGS,
    NO_NET_DEADLINE,
    ROLE,
    USAGE,
    Sink,
    busy,
    chunk,
    open_connections,
    response_texts,
    text_of,
)

from trioagent._http import (
    DRAIN_GRACE,
    MAX_BODY_SIZE,
    HTTPClientOwner,
    RequestBody,
    ServerSentEvent,
    aclose_response,
    bearer_headers,
    error_from_payload,
    error_from_redirect,
    error_from_response,
    error_from_transport,
    incomplete_stream_error,
    parse_event,
    parse_retry_after,
    read_decoded,
    response_json,
    safe_url,
    send_request,
    stream_sse,
)
from trioagent.credential import OpenAICredential
from trioagent.exception import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelInvalidRequestError,
    ModelPermissionError,
    ModelRateLimitError,
    ModelStreamError,
    ModelTimeoutError,
    ModelUpstreamError,
)
from trioagent.message import (
    ToolCallBlock,
)
from trioagent.model import OpenAIChatModel
from trioagent.testing import (
    OpenAICompatibleServer,
    ScriptedError,
    ScriptedResponse,
    ScriptedSSE,
    serve_openai_compatible,
)

KEY = "sk-test-0123456789abcdef"
REDACT = OpenAICredential(api_key=KEY).redact


def http_date(offset: float) -> str:
    """An HTTP-date ``offset`` seconds from now."""
    return email.utils.format_datetime(
        datetime.fromtimestamp(time.time() + offset, tz=UTC), usegmt=True
    )


def error_body(message: str = "nope", code: str | None = "bad") -> bytes:
    return json.dumps({"error": {"message": message, "code": code}}).encode()


# -- parse_retry_after -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),  # the ms header wins
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": "2.5"}, 2.5),
        ({"Retry-After": "-3"}, 0.0),
        ({"retry-after-ms": "-40"}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": ""}, None),
        ({"retry-after-ms": "abc", "Retry-After": "4"}, 4.0),  # unparseable ms falls through
        ({"retry-after-ms": "abc"}, None),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # in the past
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(httpx2.Headers(headers)) == expected


def test_parse_retry_after_http_date_in_the_future() -> None:
    headers = httpx2.Headers({"Retry-After": http_date(120)})

    # HTTP-dates have whole seconds: up to one second is lost in the formatting.
    assert parse_retry_after(headers) == pytest.approx(119.5, abs=1.0)


def test_parse_retry_after_http_date_in_the_past_is_zero() -> None:
    assert parse_retry_after(httpx2.Headers({"Retry-After": http_date(-3600)})) == 0.0


# -- error_from_response -----------------------------------------------------------------------


def _http_server_error_page(code: int, message: str, explain: str) -> bytes:
    """The HTML error page the standard library's HTTP server sends."""
    from http.server import DEFAULT_ERROR_MESSAGE

    page = DEFAULT_ERROR_MESSAGE % {"code": code, "message": message, "explain": explain}
    return page.encode()


def test_an_html_error_page_is_one_summary_line() -> None:
    body = _http_server_error_page(501, "Unsupported method ('POST')", "Not supported.")
    error = error_from_response(501, httpx2.Headers({"content-type": "text/html"}), body)
    text = str(error)
    assert "\n" not in text
    assert "<" not in text
    assert text.startswith("HTTP 501 (HTML page) Error response: Error code: 501 Message: ")
    assert "Unsupported method ('POST')" in text
    lower = b"<html><head><title>502 Bad Gateway</title><style>p{x}</style></head><body>"
    lower += b"<center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>"
    assert str(error_from_response(502, httpx2.Headers(), lower)) == (
        "HTTP 502 (HTML page) 502 Bad Gateway: nginx"
    )
    assert "(HTML page)" not in str(error_from_response(500, httpx2.Headers(), b"<b>plain</b>"))


@pytest.mark.parametrize(
    ("status", "cls", "retryable", "carries_retry_after"),
    [
        (400, ModelInvalidRequestError, False, False),
        (401, ModelAuthenticationError, False, False),
        (403, ModelPermissionError, False, False),
        (404, ModelInvalidRequestError, False, False),
        (408, ModelTimeoutError, True, True),
        (409, ModelUpstreamError, True, True),
        (422, ModelInvalidRequestError, False, False),
        (429, ModelRateLimitError, True, True),
        (500, ModelUpstreamError, True, True),
        (502, ModelUpstreamError, True, True),
        (503, ModelUpstreamError, True, True),
    ],
)
def test_error_from_response_status_mapping(
    status: int, cls: type[ModelError], retryable: bool, carries_retry_after: bool
) -> None:
    headers = httpx2.Headers({"Retry-After": "7"})

    exc = error_from_response(status, headers, error_body("the message", "the_code"))

    assert type(exc) is cls
    assert exc.status_code == status
    assert exc.code == "the_code"
    assert exc.message == "the message"
    assert exc.retryable is retryable
    assert exc.retry_after == (7.0 if carries_retry_after else None)
    assert str(exc) == f"HTTP {status} the message (code: the_code)"


@pytest.mark.parametrize(
    ("body", "message", "code"),
    [
        (
            {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
            "Rate limit reached",
            "rate_limit_exceeded",
        ),
        (
            {"error": {"message": "bad", "type": "invalid_request_error", "code": None}},
            "bad",
            "invalid_request_error",
        ),
        (
            {"error": {"message": "quota", "status": "RESOURCE_EXHAUSTED"}},
            "quota",
            "RESOURCE_EXHAUSTED",
        ),
        ({"error": {"message": 42, "code": 7}}, "42", "7"),
        ({"error": "model 'llama9' not found"}, "model 'llama9' not found", None),
        ({"message": "Overloaded", "type": "overloaded_error"}, "Overloaded", "overloaded_error"),
    ],
)
def test_error_from_response_provider_message_and_code(
    body: dict[str, Any], message: str, code: str | None
) -> None:
    exc = error_from_response(400, httpx2.Headers(), json.dumps(body).encode())

    assert exc.message == message
    assert exc.code == code


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>Bad Gateway</html>", "(HTML page) Bad Gateway"),
        (b"  upstream said no \r\n", "upstream said no"),
        (b"x" * 600, "x" * 500),
        (b"\xff\xfebad", "\ufffd\ufffdbad"),
        # JSON without a message: the raw body is the message, the code is kept.
        (b'{"error": {"code": "c1"}}', '{"error": {"code": "c1"}}'),
        (b"[1, 2]", "[1, 2]"),
        (b'{"error": null}', '{"error": null}'),
    ],
)
def test_error_from_response_raw_body_as_message(body: bytes, message: str) -> None:
    exc = error_from_response(502, httpx2.Headers(), body)

    assert type(exc) is ModelUpstreamError
    assert exc.message == message


@pytest.mark.parametrize(
    "body", [b'{"error": {"code": "c1"}}', b'{"error": {"code": "c1", "message": ""}}']
)
def test_error_from_response_keeps_the_code_of_a_body_without_message(body: bytes) -> None:
    exc = error_from_response(400, httpx2.Headers(), body)

    assert exc.code == "c1"
    assert exc.message == body.decode()  # never an empty message


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (503, "Service Unavailable"),
        (429, "Too Many Requests"),
        (404, "Not Found"),
        (599, "error"),  # no reason phrase
    ],
)
@pytest.mark.parametrize("body", [b"", b" \n "])
def test_error_from_response_empty_body_uses_the_reason_phrase(
    status: int, message: str, body: bytes
) -> None:
    exc = error_from_response(status, httpx2.Headers(), body)

    assert exc.message == message
    assert exc.code is None


@pytest.mark.parametrize(
    "body",
    [
        error_body(f"Incorrect API key provided: {KEY}.", "invalid_api_key"),
        json.dumps({"error": f"bad key {KEY}."}).encode(),
        f"<p>bad key {KEY}.</p>".encode(),
    ],
)
def test_error_from_response_redacts_the_message(body: bytes) -> None:
    exc = error_from_response(401, httpx2.Headers(), body, redact=REDACT)

    assert KEY not in exc.message
    assert KEY not in str(exc)
    assert "***." in exc.message


def test_error_from_response_redacts_a_key_cut_by_the_truncation() -> None:
    body = ("a" * 490 + KEY + "b" * 100).encode()

    exc = error_from_response(500, httpx2.Headers(), body, redact=REDACT)

    assert KEY[:10] not in exc.message


def test_error_from_response_redacts_the_code() -> None:
    exc = error_from_response(400, httpx2.Headers(), error_body("bad", f"key_{KEY}"), redact=REDACT)

    assert exc.code == "key_***"
    assert KEY not in str(exc)


def test_error_object_in_a_2xx_response_is_an_upstream_error_not_retried() -> None:
    exc = error_from_response(200, httpx2.Headers(), error_body("quota", "insufficient_quota"))

    assert type(exc) is ModelUpstreamError
    assert (exc.status_code, exc.message, exc.code) == (200, "quota", "insufficient_quota")
    assert not exc.retryable


# -- error_from_payload ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "message", "code"),
    [
        (
            {"error": {"message": "Overloaded", "type": "server_error"}},
            "Overloaded",
            "server_error",
        ),
        ({"error": "the model crashed"}, "the model crashed", None),
        ({"message": "top level", "code": "x1"}, "top level", "x1"),
        ({"foo": 1}, "error event in the stream: {'foo': 1}", None),
        (["boom"], "error event in the stream: ['boom']", None),
    ],
)
def test_error_from_payload(payload: Any, message: str, code: str | None) -> None:
    exc = error_from_payload(payload)

    assert type(exc) is ModelUpstreamError
    assert exc.message == message
    assert exc.code == code
    assert exc.status_code is None
    assert exc.retryable is False


def test_error_from_payload_redacts() -> None:
    exc = error_from_payload({"error": {"message": f"key {KEY} revoked"}}, redact=REDACT)

    assert exc.message == "key *** revoked"


def test_error_from_payload_redacts_the_code() -> None:
    exc = error_from_payload({"error": {"message": "m", "code": f"bad_{KEY}"}}, redact=REDACT)

    assert exc.code == "bad_***"


# -- error_from_transport ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "wording"),
    [
        (httpx2.ConnectTimeout("slow"), "timed out connecting"),
        (httpx2.ReadTimeout("slow"), "timed out waiting for data"),
        (httpx2.WriteTimeout("slow"), "timed out sending the request"),
        (httpx2.PoolTimeout("slow"), "timed out waiting for a free connection"),
        (httpx2.TimeoutException("slow"), "timed out waiting"),
    ],
)
@pytest.mark.parametrize("phase", ["request", "body"])
def test_error_from_transport_timeouts(
    exc: httpx2.TimeoutException, wording: str, phase: Any
) -> None:
    error = error_from_transport(exc, phase=phase, url="http://h:1/v1")

    assert type(error) is ModelTimeoutError
    assert error.message == f"{wording}: slow"
    assert error.endpoint == "http://h:1/v1"
    assert str(error) == f"at http://h:1/v1: {wording}: slow"
    assert error.retryable


def test_error_from_transport_request_phase_is_a_connection_error() -> None:
    error = error_from_transport(
        httpx2.ConnectError("refused"), phase="request", url="https://api.example.com/v1"
    )

    assert type(error) is ModelConnectionError
    assert error.message == "could not reach the provider: refused"
    assert error.endpoint == "https://api.example.com/v1"
    assert str(error) == "at https://api.example.com/v1: could not reach the provider: refused"
    assert error.retryable


def test_error_from_transport_body_phase_is_a_retryable_stream_error() -> None:
    error = error_from_transport(httpx2.RemoteProtocolError("peer closed"), phase="body")

    assert type(error) is ModelStreamError
    assert error.retryable  # ModelStreamError is not retryable by default
    assert error.message == (
        "the stream was cut: the connection failed before the response ended: peer closed"
    )


def test_error_from_transport_without_url_or_detail() -> None:
    error = error_from_transport(httpx2.ReadError(""), phase="request")

    assert error.message == "could not reach the provider: ReadError"


# -- safe_url, bearer_headers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.example.com/v1/chat", "https://api.example.com/v1/chat"),
        (
            "https://user:secret@api.example.com:8443/v1/chat?key=abc#frag",
            "https://api.example.com:8443/v1/chat",
        ),
        ("http://127.0.0.1:11434/api/chat?x=1", "http://127.0.0.1:11434/api/chat"),
        ("https://api.example.com:443/v1", "https://api.example.com/v1"),  # default port
        ("http://localhost:8080", "http://localhost:8080"),
    ],
)
def test_safe_url(url: str, expected: str) -> None:
    assert safe_url(httpx2.URL(url)) == expected


def test_safe_url_ipv6_host_keeps_its_brackets() -> None:
    assert safe_url(httpx2.URL("http://[::1]:8080/v1?k=1")) == "http://[::1]:8080/v1"


@pytest.mark.parametrize(
    ("stream", "accept"), [(True, "text/event-stream"), (False, "application/json")]
)
def test_bearer_headers(stream: bool, accept: str) -> None:
    assert bearer_headers("sk-1", stream=stream) == {
        "Authorization": "Bearer sk-1",
        "Accept": accept,
    }


@pytest.mark.parametrize("organization", [None, ""])
def test_bearer_headers_without_organization(organization: str | None) -> None:
    assert "OpenAI-Organization" not in bearer_headers(
        "sk-1", stream=False, organization=organization
    )


def test_bearer_headers_with_organization() -> None:
    headers = bearer_headers("sk-1", stream=True, organization="org-42")

    assert headers["OpenAI-Organization"] == "org-42"
    assert headers["Authorization"] == "Bearer sk-1"


# -- parse_event, response_json ----------------------------------------------------------------


def test_parse_event() -> None:
    assert parse_event('{"a": [1]}', model="m", unit="chunk") == {"a": [1]}


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ("{not json", r"unparseable line in the stream of 'gpt-x': '\{not json'"),
        ("[1, 2]", r"unexpected line in the stream of 'gpt-x': '\[1, 2\]'"),
    ],
)
def test_parse_event_rejects(data: str, match: str) -> None:
    with pytest.raises(ModelStreamError, match=match):
        parse_event(data, model="gpt-x", unit="line")


@pytest.mark.parametrize(
    ("data", "wording"),
    [(f"{{not json {KEY}", "unparseable"), (f'["{KEY}"]', "unexpected")],
)
def test_parse_event_redacts_the_quoted_data(data: str, wording: str) -> None:
    with pytest.raises(ModelStreamError, match=wording) as info:
        parse_event(data, model="gpt-x", unit="chunk", redact=REDACT)

    assert KEY not in str(info.value)
    assert "***" in info.value.message


def test_parse_event_redacts_before_it_cuts() -> None:
    """A key spanning the 200-character cut must not leak its first half."""
    with pytest.raises(ModelStreamError) as info:
        parse_event("{" + "x" * 190 + KEY, model="gpt-x", unit="chunk", redact=REDACT)

    assert KEY[:8] not in info.value.message


def test_response_json_returns_the_object() -> None:
    response = httpx2.Response(200, json={"id": "r1"})

    assert response_json(response, model="gpt-x") == {"id": "r1"}


@pytest.mark.parametrize(
    ("response", "match"),
    [
        (
            httpx2.Response(200, text="<html>oops</html>"),
            r"response of 'gpt-x' is not JSON: '<html>oops</html>'",
        ),
        (httpx2.Response(200, json=[1, 2]), r"unexpected response of 'gpt-x': \[1, 2\]"),
        (httpx2.Response(200, json="text"), r"unexpected response of 'gpt-x': 'text'"),
    ],
)
@pytest.mark.parametrize("retryable", [None, False, True])
def test_response_json_rejects(
    response: httpx2.Response, match: str, retryable: bool | None
) -> None:
    with pytest.raises(ModelUpstreamError, match=match) as info:
        response_json(response, model="gpt-x", retryable=retryable)

    assert type(info.value) is ModelUpstreamError
    assert info.value.retryable is (True if retryable is None else retryable)


@pytest.mark.parametrize(
    "response",
    [
        httpx2.Response(200, text="<p>" + "x" * 190 + KEY + "</p>"),  # the key spans the cut
        httpx2.Response(200, json=[f"key {KEY}"]),
    ],
)
def test_response_json_redacts_the_quoted_body(response: httpx2.Response) -> None:
    with pytest.raises(ModelUpstreamError) as info:
        response_json(response, model="gpt-x", redact=REDACT)

    assert KEY[:8] not in info.value.message


def test_response_json_truncates_the_body_in_the_message() -> None:
    response = httpx2.Response(200, text="x" * 1000)

    with pytest.raises(ModelUpstreamError) as info:
        response_json(response, model="m")

    assert "x" * 200 in info.value.message
    assert "x" * 201 not in info.value.message


# -- send_request over loopback ----------------------------------------------------------------


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    server: OpenAICompatibleServer = await nursery.start(serve_openai_compatible)
    return server


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(timeout=5) as client:
        yield client


def chat_request(
    client: httpx2.AsyncClient, server: OpenAICompatibleServer, *, stream: bool
) -> httpx2.Request:
    return client.build_request(
        "POST",
        f"{server.base_url}/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream},
        headers=bearer_headers(KEY, stream=stream),
    )


@pytest.mark.parametrize("stream", [True, False])
async def test_send_request_returns_a_2xx_response(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient, stream: bool
) -> None:
    server.push("Hello")
    request = chat_request(client, server, stream=stream)

    response = await send_request(client, request, stream=stream)
    try:
        assert response.status_code == 200
        assert response.is_stream_consumed is not stream  # a stream's body is left unread
        await response.aread()
    finally:
        await aclose_response(response)

    if stream:
        assert response.text.endswith("data: [DONE]\n\n")
    else:
        assert response.json()["choices"][0]["message"]["content"] == "Hello"
    [recorded] = server.requests
    assert recorded.body["messages"] == [{"role": "user", "content": "hi"}]
    assert recorded.headers["authorization"] == f"Bearer {KEY}"


async def test_request_body_yields_its_bytes_once_per_iteration() -> None:
    body = RequestBody(b"payload")

    assert [chunk async for chunk in body] == [b"payload"]
    assert [chunk async for chunk in body] == [b"payload"]  # each iteration starts over
    chunks = aiter(body)
    assert aiter(chunks) is chunks
    assert [chunk async for chunk in chunks] == [b"payload"]
    assert [chunk async for chunk in chunks] == []  # an iterator is used up
    await body.aclose()


class _Chunks(httpx2.AsyncByteStream):
    """A streamed request body (not an ``httpx2.ByteStream``), without an async generator."""

    def __init__(self, *chunks: bytes) -> None:
        self._chunks = list(chunks)

    def __aiter__(self) -> _Chunks:
        return self

    async def __anext__(self) -> bytes:
        if not self._chunks:
            raise StopAsyncIteration
        return self._chunks.pop(0)


async def test_send_request_sends_a_streamed_request_body_as_given(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
) -> None:
    server.add_route("POST", "/v1/upload", lambda r: ScriptedResponse.json({"n": len(r.raw_body)}))
    request = client.build_request(
        "POST", f"{server.base_url}/upload", content=_Chunks(b"abc", b"def")
    )

    response = await send_request(client, request, stream=False)

    assert response.json() == {"n": 6}
    assert server.requests[0].raw_body == b"abcdef"


@pytest.mark.parametrize("stream", [True, False])
async def test_send_request_raises_the_typed_error_and_closes_the_response(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient, stream: bool
) -> None:
    server.push(
        ScriptedError(
            status=429,
            message=f"Rate limit reached for key {KEY}",
            code="rate_limit_exceeded",
            retry_after=3,
        ),
        "after the error",
    )

    with pytest.raises(ModelRateLimitError) as info:
        await send_request(
            client, chat_request(client, server, stream=stream), stream=stream, redact=REDACT
        )

    exc = info.value
    assert exc.status_code == 429
    assert exc.code == "rate_limit_exceeded"
    assert exc.message == "Rate limit reached for key ***"
    assert exc.retry_after == 3.0
    # The error response was read and closed: its connection is idle in the pool, and the
    # next request reuses it.
    assert [c.is_idle() for c in open_connections(client)] == [True]
    response = await send_request(client, chat_request(client, server, stream=False), stream=False)
    assert response.status_code == 200
    assert [r.connection_id for r in server.requests] == [0, 0]


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, ModelInvalidRequestError),
        (401, ModelAuthenticationError),
        (403, ModelPermissionError),
        (404, ModelInvalidRequestError),
        (422, ModelInvalidRequestError),
    ],
)
async def test_send_request_4xx_from_a_custom_route(
    server: OpenAICompatibleServer,
    client: httpx2.AsyncClient,
    status: int,
    cls: type[ModelError],
) -> None:
    server.add_route(
        "POST",
        "/v1/thing",
        lambda r: ScriptedResponse(status=status, body=error_body(f"refused {status}", "c")),
    )
    request = client.build_request("POST", f"{server.base_url}/thing", json={})

    with pytest.raises(cls) as info:
        await send_request(client, request, stream=True)

    assert type(info.value) is cls
    assert (info.value.status_code, info.value.message, info.value.code) == (
        status,
        f"refused {status}",
        "c",
    )
    assert [c.is_idle() for c in open_connections(client)] == [True]


async def test_send_request_uses_the_given_error_mapper(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
) -> None:
    server.add_route(
        "POST", "/v1/thing", lambda r: ScriptedResponse(status=418, body=b"short and stout")
    )
    seen: list[tuple[int, bytes, str]] = []

    def mapper(
        status: int, headers: httpx2.Headers, body: bytes, *, redact: Callable[[str], str]
    ) -> ModelError:
        seen.append((status, body, redact(KEY)))
        return ModelPermissionError("mapped", status_code=status)

    request = client.build_request("POST", f"{server.base_url}/thing", json={})
    with pytest.raises(ModelPermissionError, match="mapped"):
        await send_request(client, request, stream=True, redact=REDACT, error=mapper)

    assert seen == [(418, b"short and stout", "***")]


def add_stalled_error_route(server: OpenAICompatibleServer) -> None:
    """``POST /v1/thing``: a 500 whose body stalls after its first piece."""
    server.add_route(
        "POST",
        "/v1/thing",
        lambda r: ScriptedResponse(status=500, body=[b'{"error": ', b"{}}"], stall_after=1),
    )


async def test_send_request_cancelled_while_reading_an_error_body_closes_the_connection(
    server: OpenAICompatibleServer,
    client: httpx2.AsyncClient,
    autojump_clock: trio.testing.MockClock,
) -> None:
    add_stalled_error_route(server)
    request = client.build_request("POST", f"{server.base_url}/thing", json={})

    with trio.move_on_after(1) as scope:  # before the client's 5 s read timeout
        await send_request(client, request, stream=True)

    assert scope.cancelled_caught
    assert open_connections(client) == []
    with trio.fail_after(5):
        await server.wait_all_closed()
    assert server.connections[0].closed_by_client


async def test_send_request_error_body_stalled_past_the_read_timeout(
    server: OpenAICompatibleServer,
    client: httpx2.AsyncClient,
    autojump_clock: trio.testing.MockClock,
) -> None:
    add_stalled_error_route(server)
    request = client.build_request("POST", f"{server.base_url}/thing", json={})
    start = trio.current_time()

    with pytest.raises(ModelUpstreamError) as info:
        await send_request(client, request, stream=True)

    assert trio.current_time() - start == pytest.approx(5)  # the client's read timeout
    # The body could not be read: the status's reason phrase is the message.
    assert (info.value.status_code, info.value.message) == (500, "Internal Server Error")
    assert open_connections(client) == []


def answer_then_close(data: bytes) -> Callable[[trio.SocketStream], Awaitable[None]]:
    """A raw connection handler: read one request's head, send ``data``, close the socket
    (so a body shorter than announced is cut short)."""

    async def handler(stream: trio.SocketStream) -> None:
        received = b""
        while b"\r\n\r\n" not in received:
            piece = await stream.receive_some(65536)
            if not piece:
                return
            received += piece
        await stream.send_all(data)
        await stream.aclose()

    return handler


async def start_raw_server(nursery: trio.Nursery, data: bytes) -> str:
    """A raw trio TCP server on loopback answering every connection with ``data``; returns
    its base URL."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, answer_then_close(data), listeners)
    port: int = listeners[0].socket.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def chunked(status: str, *pieces: bytes, media_type: str = "text/event-stream") -> bytes:
    """A chunked HTTP/1.1 response whose body ends without its last chunk (cut short)."""
    head = f"HTTP/1.1 {status}\r\nContent-Type: {media_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
    return head.encode() + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)


@pytest.mark.parametrize("stream", [True, False])
async def test_send_request_error_body_cut_short_falls_back_to_the_reason_phrase(
    nursery: trio.Nursery, client: httpx2.AsyncClient, stream: bool
) -> None:
    base = await start_raw_server(
        nursery,
        b"HTTP/1.1 503 Service Unavailable\r\n"
        b"Content-Type: application/json\r\n"
        b"Retry-After: 3\r\n"
        b"Content-Length: 100\r\n"
        b"\r\n"
        b'{"error": {"message": ',
    )
    request = client.build_request("GET", f"{base}/v1/models")

    with pytest.raises(ModelUpstreamError) as info:
        await send_request(client, request, stream=stream)

    exc = info.value
    assert type(exc) is ModelUpstreamError
    assert (exc.status_code, exc.message, exc.code) == (503, "Service Unavailable", None)
    assert exc.retry_after == 3.0
    assert open_connections(client) == []


async def test_send_request_success_body_cut_short_is_a_stream_error_not_unreachable(
    nursery: trio.Nursery, client: httpx2.AsyncClient
) -> None:
    """The response arrived, its body did not: retryable as a cut stream, not reported as
    "could not reach the provider"."""
    base = await start_raw_server(
        nursery,
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        + b'{"id": ',
    )
    request = client.build_request("GET", f"{base}/v1/models?key=s3cr3t")
    with pytest.raises(ModelStreamError) as info:
        await send_request(client, request, stream=False)
    assert info.value.retryable
    assert "the stream was cut" in info.value.message
    assert info.value.endpoint == f"{base}/v1/models"
    assert str(info.value).startswith(f"at {base}/v1/models: the stream was cut")
    assert "s3cr3t" not in str(info.value)
    assert open_connections(client) == []


async def test_send_request_non_streaming_success_reads_the_body(
    nursery: trio.Nursery, client: httpx2.AsyncClient
) -> None:
    base = await start_raw_server(
        nursery,
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
        + b'{"id": "x"}',
    )
    response = await send_request(client, client.build_request("GET", f"{base}/v1"), stream=False)
    assert response.json() == {"id": "x"}
    assert response.is_closed


async def test_send_request_connection_refused(client: httpx2.AsyncClient) -> None:
    probe = trio.socket.socket()
    await probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens on this port now
    request = client.build_request(
        "POST", f"http://user:hunter2@127.0.0.1:{port}/v1/chat?key=s3cr3t", json={}
    )

    with pytest.raises(ModelConnectionError) as info:
        await send_request(client, request, stream=False)

    exc = info.value
    assert type(exc) is ModelConnectionError
    assert exc.retryable
    assert exc.message.startswith("could not reach the provider: ")
    assert exc.endpoint == f"http://127.0.0.1:{port}/v1/chat"
    assert str(exc).startswith(f"at http://127.0.0.1:{port}/v1/chat: could not reach")
    for secret in ("hunter2", "user", "s3cr3t", "key="):
        assert secret not in str(exc)
    assert isinstance(exc.__cause__, httpx2.ConnectError)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_send_request_never_follows_a_redirect(
    nursery: trio.Nursery, status: int, stream: bool
) -> None:
    """Not even with a client made to follow redirects: the POST and its key would go
    elsewhere.  The error names the target without its credentials or query string."""
    base = await start_raw_server(
        nursery,
        f"HTTP/1.1 {status} Moved\r\nLocation: https://user:{KEY}@api.example.test/v1/chat?"
        f"key={KEY}\r\nContent-Length: 0\r\n\r\n".encode(),
    )
    async with httpx2.AsyncClient(timeout=5, follow_redirects=True) as client:
        request = client.build_request("POST", f"{base}/v1/chat", json={})
        with pytest.raises(ModelInvalidRequestError) as info:
            await send_request(client, request, stream=stream, redact=REDACT)
        assert open_connections(client) == []

    exc = info.value
    assert (exc.status_code, exc.retryable) == (status, False)
    assert exc.message == (
        "redirects to https://api.example.test/v1/chat "
        "(redirects are not followed: use https:// in the base URL)"
    )
    assert exc.endpoint == f"{base}/v1/chat"
    assert str(exc) == f"at {base}/v1/chat: HTTP {status} {exc.message}"
    assert KEY not in str(exc)


@pytest.mark.parametrize(
    ("location", "target"),
    [
        ("/v2/chat", "{base}/v2/chat"),  # relative: resolved against the request URL
        (None, "no Location header"),
    ],
)
async def test_send_request_redirect_target_variants(
    nursery: trio.Nursery, client: httpx2.AsyncClient, location: str | None, target: str
) -> None:
    header = f"Location: {location}\r\n" if location is not None else ""
    base = await start_raw_server(
        nursery, f"HTTP/1.1 302 Found\r\n{header}Content-Length: 0\r\n\r\n".encode()
    )

    with pytest.raises(ModelInvalidRequestError) as info:
        await send_request(client, client.build_request("GET", f"{base}/v1/chat"), stream=True)

    assert info.value.message == (
        f"redirects to {target.format(base=base)} "
        "(redirects are not followed: use the final address as the base URL)"
    )
    assert info.value.endpoint == f"{base}/v1/chat"


def test_error_from_redirect_quotes_a_location_that_is_no_url() -> None:
    """(httpx2 itself rejects such a response before ``send_request`` sees it.)"""
    headers = httpx2.Headers({"Location": f"http://[::1/{KEY}"})

    exc = error_from_redirect(302, httpx2.URL("http://h/v1"), headers, redact=REDACT)

    assert exc.message == (
        "redirects to 'http://[::1/***' "
        "(redirects are not followed: use the final address as the base URL)"
    )
    assert exc.endpoint == "http://h/v1"


def json_route(server: OpenAICompatibleServer, payload: Any) -> httpx2.URL:
    """Answer ``POST /v1/json`` with ``payload`` as ``application/json`` (status 200)."""
    server.add_route("POST", "/v1/json", lambda r: ScriptedResponse.json(payload))
    return httpx2.URL(f"{server.base_url}/json")


async def test_stream_sse_json_error_object_raises_the_mapped_error(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
) -> None:
    url = json_route(server, {"error": {"message": f"quota of {KEY}", "code": "quota"}})

    async def handle(event: ServerSentEvent) -> bool:
        raise AssertionError("no event expected")

    with pytest.raises(ModelUpstreamError) as info:
        await stream_sse(client, client.build_request("POST", url), handle, redact=REDACT)

    exc = info.value
    assert (exc.status_code, exc.message, exc.code, exc.retryable) == (
        200,
        "quota of ***",
        "quota",
        False,
    )
    assert [c.is_idle() for c in open_connections(client)] == [True]  # read whole: reusable


async def test_stream_sse_other_json_goes_to_json_body(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
) -> None:
    url = json_route(server, {"id": "x", "answer": 42})
    seen: list[dict[str, Any]] = []

    async def handle(event: ServerSentEvent) -> bool:
        raise AssertionError("no event expected")

    async def json_body(payload: dict[str, Any]) -> bool:
        seen.append(payload)
        return True

    assert await stream_sse(client, client.build_request("POST", url), handle, json_body=json_body)
    assert seen == [{"id": "x", "answer": 42}]


@pytest.mark.parametrize("understood", [False, None])
async def test_stream_sse_json_nobody_understands_is_a_stream_error(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient, understood: bool | None
) -> None:
    url = json_route(server, {"status": "queued", "token": KEY})

    async def handle(event: ServerSentEvent) -> bool:
        raise AssertionError("no event expected")

    async def json_body(payload: dict[str, Any]) -> bool:
        return False

    with pytest.raises(ModelStreamError) as info:
        await stream_sse(
            client,
            client.build_request("POST", url),
            handle,
            redact=REDACT,
            json_body=json_body if understood is False else None,
        )

    exc = info.value
    assert exc.message.startswith("answered a streaming request with JSON, not an event stream: ")
    assert exc.endpoint == str(url)
    assert "queued" in exc.message
    assert KEY not in exc.message
    assert (exc.status_code, exc.retryable) == (200, False)


async def test_stream_sse_json_in_pieces_labelled_as_an_event_stream_is_json(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
) -> None:
    """The body decides, not the ``Content-Type``; blank lines may come first."""
    pieces = [b"\r\n", b"  ", b'{"error": {"mess', b'age": "overloaded", "code": "busy"}}']
    server.add_route(
        "POST", "/v1/odd", lambda r: ScriptedResponse(body=pieces, media_type="text/event-stream")
    )

    async def handle(event: ServerSentEvent) -> bool:
        raise AssertionError("no event expected")

    request = client.build_request("POST", f"{server.base_url}/odd")
    with pytest.raises(ModelUpstreamError) as info:
        await stream_sse(client, request, handle)

    assert (info.value.message, info.value.code) == ("overloaded", "busy")


async def test_stream_sse_event_stream_labelled_as_json_is_still_streamed(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
) -> None:
    pieces = ["\ufeff\n".encode(), b'data: {"n": 1}\n\n', b"data: [DONE]\n\n"]
    server.add_route(
        "POST", "/v1/odd", lambda r: ScriptedResponse(body=pieces, media_type="application/json")
    )
    seen: list[str] = []

    async def handle(event: ServerSentEvent) -> bool:
        seen.append(event.data)
        return event.data == "[DONE]"

    request = client.build_request("POST", f"{server.base_url}/odd")
    assert await stream_sse(client, request, handle)

    assert seen == ['{"n": 1}', "[DONE]"]


# -- read_decoded, read_sse, stream_sse --------------------------------------------------------


class LineDecoder:
    """An incremental line decoder: ``feed`` returns the completed lines, ``close`` the
    unterminated rest."""

    def __init__(self) -> None:
        self.buffer = ""

    def feed(self, piece: str) -> list[str]:
        *lines, self.buffer = (self.buffer + piece).split("\n")
        return lines

    def close(self) -> str | None:
        return self.buffer or None


class Handler:
    """Records the items handed to it; returns ``True`` (the terminator) on ``stop``."""

    def __init__(self, stop: str) -> None:
        self.stop = stop
        self.seen: list[str] = []

    async def __call__(self, item: str) -> bool:
        self.seen.append(item)
        return item == self.stop


async def read_lines(
    client: httpx2.AsyncClient, url: str, handler: Handler, *, with_close: bool = True
) -> bool:
    response = await send_request(client, client.build_request("GET", url), stream=True)
    try:
        decoder = LineDecoder()
        close = decoder.close if with_close else None
        return await read_decoded(response, decoder.feed, handler, close=close)
    finally:
        await aclose_response(response)


@pytest.fixture
def lines_route(server: OpenAICompatibleServer) -> Callable[[list[bytes]], str]:
    """Serve ``GET /v1/lines`` with the given pieces (text/plain, chunked); returns its URL."""

    def serve(pieces: list[bytes]) -> str:
        server.add_route(
            "GET",
            "/v1/lines",
            lambda r: ScriptedResponse(body=pieces, media_type="text/plain"),
        )
        return f"{server.base_url}/lines"

    return serve


async def test_read_decoded_stops_handling_at_the_terminator_and_reads_the_rest(
    server: OpenAICompatibleServer,
    client: httpx2.AsyncClient,
    lines_route: Callable[[list[bytes]], str],
) -> None:
    url = lines_route([b"a\nb\nSTOP\nc\n", b"d\n"])
    handler = Handler("STOP")

    assert await read_lines(client, url, handler)

    assert handler.seen == ["a", "b", "STOP"]  # nothing after the terminator
    # The rest was drained: the connection went back to the pool and is reused.
    assert [c.is_idle() for c in open_connections(client)] == [True]
    assert await read_lines(client, url, Handler("STOP"))
    assert [r.connection_id for r in server.requests] == [0, 0]


@pytest.mark.parametrize(
    ("pieces", "with_close", "done", "seen"),
    [
        ([b"a\nST", b"OP"], True, True, ["a", "STOP"]),  # the unterminated rest via close()
        ([b"a\nST", b"OP"], False, False, ["a"]),  # no close(): the rest is dropped
        ([b"a\nb\n"], True, False, ["a", "b"]),  # close() has nothing left
        ([b"a\nb"], True, False, ["a", "b"]),  # close()'s item is not the terminator
        ([], True, False, []),
    ],
)
async def test_read_decoded_end_of_body(
    client: httpx2.AsyncClient,
    lines_route: Callable[[list[bytes]], str],
    pieces: list[bytes],
    with_close: bool,
    done: bool,
    seen: list[str],
) -> None:
    handler = Handler("STOP")

    assert await read_lines(client, lines_route(pieces), handler, with_close=with_close) is done

    assert handler.seen == seen


async def test_read_decoded_cut_after_the_terminator_is_a_success(
    nursery: trio.Nursery, client: httpx2.AsyncClient
) -> None:
    base = await start_raw_server(nursery, chunked("200 OK", b"a\nSTOP\n", b"more\n"))
    handler = Handler("STOP")

    assert await read_lines(client, f"{base}/lines", handler)

    assert handler.seen == ["a", "STOP"]
    assert open_connections(client) == []


async def test_read_decoded_cut_before_the_terminator_is_a_stream_error(
    nursery: trio.Nursery, client: httpx2.AsyncClient
) -> None:
    base = await start_raw_server(nursery, chunked("200 OK", b"a\nb\n"))
    handler = Handler("STOP")

    with pytest.raises(ModelStreamError, match="the stream was cut") as info:
        await read_lines(client, f"{base}/lines", handler)

    assert info.value.retryable
    assert isinstance(info.value.__cause__, httpx2.RemoteProtocolError)
    assert handler.seen == ["a", "b"]
    assert open_connections(client) == []


async def test_read_decoded_stalled_past_the_read_timeout(
    server: OpenAICompatibleServer,
    client: httpx2.AsyncClient,
    autojump_clock: trio.testing.MockClock,
) -> None:
    server.add_route(
        "GET",
        "/v1/lines",
        lambda r: ScriptedResponse(body=[b"a\n", b"b\n"], media_type="text/plain", stall_after=1),
    )
    handler = Handler("STOP")

    with pytest.raises(ModelTimeoutError, match="timed out waiting for data"):
        await read_lines(client, f"{server.base_url}/lines", handler)

    assert handler.seen == ["a"]
    assert open_connections(client) == []


async def test_read_decoded_handler_error_closes_the_connection(
    server: OpenAICompatibleServer,
    client: httpx2.AsyncClient,
    lines_route: Callable[[list[bytes]], str],
) -> None:
    url = lines_route([b"a\n", b"b\n", b"c\n"])

    async def handler(item: str) -> bool:
        raise KeyError(item)

    response = await send_request(client, client.build_request("GET", url), stream=True)
    with pytest.raises(KeyError, match="'a'"):
        await read_decoded(response, LineDecoder().feed, handler)

    assert response.is_closed
    assert open_connections(client) == []
    with trio.fail_after(5):
        await server.wait_all_closed()


async def test_read_sse_and_stream_sse(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
) -> None:
    server.push("Hi")
    events: list[ServerSentEvent] = []

    async def handle(event: ServerSentEvent) -> bool:
        events.append(event)
        return event.data == "[DONE]"

    assert await stream_sse(client, chat_request(client, server, stream=True), handle)

    assert events[-1].data == "[DONE]"
    contents = [json.loads(e.data)["choices"][0]["delta"].get("content") for e in events[:-1]]
    assert "".join(c for c in contents if c) == "Hi"
    assert [c.is_idle() for c in open_connections(client)] == [True]


async def test_stream_sse_error_status(
    server: OpenAICompatibleServer, client: httpx2.AsyncClient
) -> None:
    server.push(ScriptedError(status=403, message="no access", code="forbidden"))

    async def handle(event: ServerSentEvent) -> bool:
        raise AssertionError("no event expected")

    with pytest.raises(ModelPermissionError, match="no access"):
        await stream_sse(client, chat_request(client, server, stream=True), handle)


def test_incomplete_stream_error() -> None:
    exc = incomplete_stream_error("gpt-x", "'data: [DONE]'")

    assert type(exc) is ModelStreamError
    assert exc.retryable
    assert exc.message.startswith("the stream of 'gpt-x' ended before 'data: [DONE]' (")


# -- HTTPClientOwner ---------------------------------------------------------------------------


class Owner(HTTPClientOwner):
    def __init__(self, http_client: httpx2.AsyncClient | None = None) -> None:
        self.read_timeout = 30.0
        self.connect_timeout = 4.0
        self._set_http_client(http_client)


async def test_http_client_owner_creates_and_closes_its_client() -> None:
    async with Owner() as owner:
        client = owner.http_client
        assert owner.http_client is client  # created once
        assert client.timeout == httpx2.Timeout(connect=4.0, read=30.0, write=30.0, pool=4.0)

    assert client.is_closed
    await owner.aclose()  # closing twice is harmless


async def test_http_client_owner_leaves_an_injected_client_open(
    client: httpx2.AsyncClient,
) -> None:
    async with Owner(client) as owner:
        assert owner.http_client is client

    assert not client.is_closed
    assert owner.http_client is client


# -- a raw HTTP/1.1 server: byte-level control of the socket --------------------------------

WAIT = object()  #: a plan step: wait until every task (the client too) is blocked
STALL = object()  #: a plan step: send nothing more until the client goes away


class RawServer:
    """Answers each request with the next plan: byte strings sent as they are (so they may cut
    the HTTP framing anywhere), floats (sleep that long), ``WAIT`` and ``STALL`` steps.  After
    its plan the connection is kept for the next request (``keep=True``) or closed."""

    def __init__(self) -> None:
        self.plans: collections.deque[tuple[list[Any], bool]] = collections.deque()
        self.requests: list[bytes] = []
        self.accepted = 0
        self.closed = 0
        self.closed_by_client = 0
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, steps: list[Any], *, keep: bool = True) -> None:
        self.plans.append((steps, keep))

    async def handle(self, stream: trio.SocketStream) -> None:
        self.accepted += 1
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        self.closed_by_client += 1
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                found = re.search(rb"content-length:\s*(\d+)", head, re.IGNORECASE)
                length = int(found.group(1)) if found else 0
                while len(buffer) < length:
                    buffer += await stream.receive_some(65536)
                buffer = buffer[length:]
                self.requests.append(head)
                steps, keep = self.plans.popleft()
                for step in steps:
                    if step is WAIT:
                        await trio.testing.wait_all_tasks_blocked()
                    elif isinstance(step, float):
                        await trio.sleep(step)
                    elif step is STALL:
                        if not await stream.receive_some(65536):
                            self.closed_by_client += 1
                        return
                    else:
                        await stream.send_all(step)
                if not keep:
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.closed_by_client += 1
        finally:
            # Shielded so the socket is closed when the test's nursery is cancelled;
            # deadline: 1 second (a loopback close is immediate).
            with trio.CancelScope(shield=True, deadline=trio.current_time() + 1):
                await stream.aclose()
            self.closed += 1


async def start_raw(nursery: trio.Nursery) -> RawServer:
    raw = RawServer()
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    raw.port = listeners[0].socket.getsockname()[1]
    await nursery.start(trio.serve_listeners, raw.handle, listeners)
    return raw


def raw_model(raw: RawServer, **kwargs: Any) -> OpenAIChatModel:
    credential = OpenAICredential(api_key=KEY, base_url=raw.base_url)
    return OpenAIChatModel("gpt-edge", credential=credential, **kwargs)


def sse_head() -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )


def http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def chunked_response(*pieces: bytes) -> bytes:
    return sse_head() + b"".join(http_chunk(p) for p in pieces) + b"0\r\n\r\n"


# -- a stream cut or spoiled part-way --------------------------------------------------------


async def test_connection_cut_after_only_carriers_is_retried(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    raw = await start_raw(nursery)
    carriers = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in (ROLE, USAGE))
    raw.push([sse_head(), http_chunk(carriers)], keep=False)  # then the socket closes
    body = f"data: {json.dumps(chunk({'content': 'fine'}))}\n\ndata: [DONE]\n\n".encode()
    raw.push([chunked_response(body)])
    sink = Sink()

    async with raw_model(raw, **NO_NET_DEADLINE) as m:
        final = await m(MSGS, emit=sink)

    assert text_of(final) == "fine"
    assert response_texts(sink.items) == ["fine"]
    assert len(raw.requests) == 2


@pytest.mark.parametrize(
    ("line", "match"),
    [("data: {broken", "unparseable chunk"), ('data: ["a", "list"]', "unexpected chunk")],
)
async def test_bad_data_line_after_content_is_a_stream_error(
    server: OpenAICompatibleServer, line: str, match: str
) -> None:
    server.push(ScriptedSSE(events=[chunk({"content": "Hi"}), f"{line}\n\n"]), "unused")
    sink = Sink()

    async with server.chat_model(max_retries=3, retry_delay=0.001) as m:
        with pytest.raises(ModelStreamError, match=match):
            await m(MSGS, emit=sink)
        assert busy(m) == []

    assert response_texts(sink.items) == ["Hi"]
    assert len(server.requests) == 1


async def test_bytes_after_done_are_ignored_and_the_connection_reused(
    server: OpenAICompatibleServer,
) -> None:
    server.push(
        ScriptedSSE(
            events=[chunk({"content": "ok"}), "data: [DONE]\n\n", "data: {garbage\n\n"],
            done=False,
        ),
        "again",
    )

    async with server.chat_model() as m:
        first = await m(MSGS)
        second = await m(MSGS)

    assert (text_of(first), text_of(second)) == ("ok", "again")
    assert [r.connection_id for r in server.requests] == [0, 0]


# -- SSE framing at every byte boundary ------------------------------------------------------

_FIRST = json.dumps(chunk({"content": "Hé🙂"}), ensure_ascii=False)
_SECOND = json.dumps(chunk({"content": "llo"}, usage=None))
_CUT = _FIRST.index('"choices"')
SSE_BODY = (
    "\ufeff: opening comment\r\n\r\n"
    "event: message\r\nid: 7\r\n"
    f"data: {_FIRST[:_CUT]}\r\n"  # one JSON object on two data lines, joined by "\n"
    f"data:{_FIRST[_CUT:]}\r\n\r\n"
    ": keep-alive\n"
    f"data: {_SECOND}\r\r"
    f"data: {json.dumps(USAGE)}\n\n"
    "data: [DONE]\n\n"
).encode()


async def test_sse_split_at_every_byte_of_the_response(nursery: trio.Nursery) -> None:
    raw = await start_raw(nursery)
    response = chunked_response(SSE_BODY[:40], SSE_BODY[40:])
    cuts = range(1, len(response))
    for cut in cuts:
        raw.push([response[:cut], WAIT, response[cut:]])
    sink = Sink()

    async with raw_model(raw, max_retries=0) as m:
        finals = []
        for _ in cuts:
            finals.append(await m(MSGS, emit=sink))

    assert all(text_of(f) == "Hé🙂llo" for f in finals)
    assert all(f.usage is not None and f.usage.input_tokens == 3 for f in finals)
    assert response_texts(sink.items) == ["Hé🙂", "llo"] * len(cuts)
    assert raw.accepted == 1  # every split response was read to its end and reused


# -- read timeout vs a slow but alive stream -------------------------------------------------


async def test_keepalive_comments_keep_a_slow_stream_alive(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Mock time: the server's 40 ms gaps always come before the 150 ms read timeout (on the
    real clock a loaded machine could stretch a gap past it)."""
    raw = await start_raw(nursery)
    content = f"data: {json.dumps(chunk({'content': 'late'}))}\n\ndata: [DONE]\n\n".encode()
    plan: list[Any] = [sse_head()]
    for _ in range(6):  # 6 x 40 ms of comments: well past the 150 ms read timeout in total
        plan += [http_chunk(b": ping\n\n"), 0.04]
    plan += [http_chunk(content), b"0\r\n\r\n"]
    raw.push(plan)
    # Then a stream that goes silent after one comment: the read timeout fires.
    raw.push([sse_head(), http_chunk(b": ping\n\n"), STALL])
    sink = Sink()

    async with raw_model(raw, read_timeout=0.15, max_retries=0) as m:
        with trio.fail_after(5):
            final = await m(MSGS, emit=sink)
            assert text_of(final) == "late"
            assert response_texts(sink.items) == ["late"]  # comments never become empty deltas
            with pytest.raises(ModelTimeoutError, match="waiting for data"):
                await m(MSGS)
        assert busy(m) == []
    with trio.fail_after(5):
        while raw.closed < raw.accepted:
            await trio.sleep(0.01)


# -- non-streaming calls ---------------------------------------------------------------------


async def test_non_stream_body_cut_short_is_retried(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    raw = await start_raw(nursery)
    body = json.dumps(
        {"id": "c", "choices": [{"index": 0, "message": {"content": "whole"}}]}
    ).encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    raw.push([head % len(body), body[:10]], keep=False)  # fewer bytes than announced
    raw.push([head % len(body), body])

    async with raw_model(raw, stream=False, **NO_NET_DEADLINE) as m:
        final = await m(MSGS)

    assert text_of(final) == "whole"
    assert len(raw.requests) == 2


# -- after data: [DONE] ----------------------------------------------------------------------


def sse_events(*items: dict[str, Any] | str) -> bytes:
    """SSE text: objects as ``data: <json>`` events, strings as given."""
    return "".join(
        i if isinstance(i, str) else f"data: {json.dumps(i)}\n\n" for i in items
    ).encode()


@pytest.mark.parametrize("read_timeout", [None, 60.0])
async def test_done_without_the_end_of_the_body_returns_and_drops_the_connection(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, read_timeout: float | None
) -> None:
    """A server that sends [DONE] and never ends the body cannot hold the finished call
    (until the read timeout, or forever without one)."""
    raw = await start_raw(nursery)
    raw.push(
        [sse_head(), http_chunk(sse_events(chunk({"content": "ok"}), "data: [DONE]\n\n")), STALL]
    )
    sink = Sink()

    async with raw_model(raw, read_timeout=read_timeout, connect_timeout=None) as m:
        start = trio.current_time()
        with trio.fail_after(30):
            final = await m(MSGS, emit=sink)
        elapsed = trio.current_time() - start
        assert (
            open_connections(m.http_client) == []
        )  # the unfinished connection was closed, not pooled

    assert text_of(final) == "ok"
    assert response_texts(sink.items) == ["ok"]
    assert elapsed == pytest.approx(DRAIN_GRACE)
    with trio.fail_after(5):
        while raw.closed_by_client < 1:
            await trio.sleep(0.01)


@pytest.mark.parametrize(
    ("delay", "connections"),
    [
        pytest.param(0.0, 1, id="at-once"),
        pytest.param(DRAIN_GRACE / 2, 1, id="within-the-grace"),
        pytest.param(DRAIN_GRACE * 4, 2, id="too-late"),
    ],
)
async def test_end_of_the_body_after_done_is_waited_for_only_briefly(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, delay: float, connections: int
) -> None:
    """The end of a body usually follows [DONE] in the next read: it is waited for (the
    connection is reused), but only ``DRAIN_GRACE`` seconds."""
    raw = await start_raw(nursery)
    first = sse_events(chunk({"content": "one"}), "data: [DONE]\n\n")
    raw.push([sse_head(), http_chunk(first), delay, b"0\r\n\r\n"])
    raw.push([chunked_response(sse_events(chunk({"content": "two"}), "data: [DONE]\n\n"))])

    async with raw_model(raw, **NO_NET_DEADLINE) as m:
        start = trio.current_time()
        one = await m(MSGS)
        elapsed = trio.current_time() - start
        two = await m(MSGS)

    assert (text_of(one), text_of(two)) == ("one", "two")
    assert elapsed == pytest.approx(min(delay, DRAIN_GRACE))
    assert raw.accepted == connections


# -- a non-streamed body that is not a JSON object -------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(("<p>" + "x" * 186 + KEY + "</p>").encode(), id="not-json"),
        pytest.param(json.dumps(["x" * 186 + KEY]).encode(), id="not-an-object"),
    ],
)
async def test_bad_non_streamed_body_error_hides_the_key(
    server: OpenAICompatibleServer, body: bytes
) -> None:
    server.add_route(
        "POST",
        "/v1/odd/chat/completions",
        lambda r: ScriptedResponse(body=body, media_type="text/html"),
    )
    credential = OpenAICredential(api_key=KEY, base_url=f"{server.base_url}/odd")

    async with OpenAIChatModel("gpt-edge", credential=credential, stream=False, max_retries=0) as m:
        with pytest.raises(ModelUpstreamError) as info:
            await m(MSGS)

    assert "x" * 20 in info.value.message
    assert KEY[:8] not in str(info.value)


# -- redirects -------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_redirect_is_an_error_naming_its_target_never_followed_or_retried(
    nursery: trio.Nursery, status: int, stream: bool
) -> None:
    raw = await start_raw(nursery)
    target = f"https://api.example.test/v1/chat/completions?api-key={KEY}"
    head = f"HTTP/1.1 {status} Moved\r\nLocation: {target}\r\nContent-Length: 0\r\n\r\n"
    for _ in range(4):  # what a retrying client would get
        raw.push([head.encode()])

    async with raw_model(raw, stream=stream, max_retries=3, retry_delay=0.001) as m:
        with pytest.raises(ModelInvalidRequestError) as info:
            await m(MSGS)
        assert busy(m) == []

    error = info.value
    assert (error.status_code, error.retryable) == (status, False)
    assert str(error) == (
        f"openai model gpt-edge at {raw.base_url}/chat/completions: HTTP {status} redirects to "
        "https://api.example.test/v1/chat/completions "
        "(redirects are not followed: use https:// in the base URL)"
    )
    assert KEY not in repr(error)
    assert len(raw.requests) == 1


async def test_redirect_is_not_followed_by_a_client_made_to_follow_redirects(
    server: OpenAICompatibleServer,
) -> None:
    """Following would re-send the POST and its key elsewhere (here the target would even
    answer)."""
    server.add_route(
        "POST",
        "/v1/old/chat/completions",
        lambda r: ScriptedResponse(
            status=307, headers={"Location": f"{server.base_url}/chat/completions"}
        ),
    )
    server.push("never sent")
    credential = OpenAICredential(api_key=KEY, base_url=f"{server.base_url}/old")

    async with httpx2.AsyncClient(follow_redirects=True) as client:
        model = OpenAIChatModel("gpt-edge", credential=credential, http_client=client)
        with pytest.raises(ModelInvalidRequestError, match=r"redirects to .*not followed") as info:
            await model(MSGS)

    assert info.value.status_code == 307
    assert [r.path for r in server.requests] == ["/v1/old/chat/completions"]


# -- JSON instead of an event stream ---------------------------------------------------------


def json_answer(server: OpenAICompatibleServer, payload: Any) -> OpenAIChatModel:
    """A streaming model whose ``chat/completions`` answers ``payload`` as plain JSON (200)."""
    server.add_route("POST", "/v1/json/chat/completions", lambda r: ScriptedResponse.json(payload))
    credential = OpenAICredential(api_key=KEY, base_url=f"{server.base_url}/json")
    return OpenAIChatModel(
        "gpt-edge", credential=credential, max_retries=3, retry_delay=0.001, **NO_NET_DEADLINE
    )


async def test_json_error_object_instead_of_a_stream_raises_the_provider_error(
    server: OpenAICompatibleServer,
) -> None:
    error = {"message": f"quota exceeded for {KEY}", "type": "insufficient_quota", "code": "quota"}

    async with json_answer(server, {"error": error}) as m:
        with pytest.raises(ModelUpstreamError) as info:
            await m(MSGS)
        assert busy(m) == []

    exc = info.value
    assert str(exc) == (
        f"openai model gpt-edge at {server.base_url}/json/chat/completions: "
        "HTTP 200 quota exceeded for *** (code: quota)"
    )
    assert not exc.retryable
    assert len(server.requests) == 1


async def test_json_completion_instead_of_a_stream_is_used_as_one_delta(
    server: OpenAICompatibleServer,
) -> None:
    """A server ignoring ``stream: true`` still gives a complete, valid answer."""
    completion = {
        "id": "chatcmpl-whole",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "whole answer",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3},
    }
    sink = Sink()

    async with json_answer(server, completion) as m:
        final = await m(MSGS, emit=sink)

    assert [c.is_last for c in sink.items] == [False]  # the consumer saw the answer
    assert text_of(sink.items[0]) == "whole answer"
    assert final.is_last
    assert final.id == "chatcmpl-whole"
    assert text_of(final) == "whole answer"
    (call,) = [b for b in final.content if isinstance(b, ToolCallBlock)]
    assert (call.id, call.name, call.input) == ("call_1", "get_weather", '{"city": "Paris"}')
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (5, 3)
    assert final.metadata["finish_reason"] == "tool_calls"
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({"status": "queued", "token": KEY}, id="unknown-object"),
        pytest.param([1, 2], id="array"),
    ],
)
async def test_other_json_instead_of_a_stream_is_a_clear_error(
    server: OpenAICompatibleServer, payload: Any
) -> None:
    async with json_answer(server, payload) as m:
        with pytest.raises(ModelStreamError, match="with JSON, not an event stream") as info:
            await m(MSGS)

    assert not info.value.retryable
    assert KEY not in str(info.value)
    assert len(server.requests) == 1


async def test_send_request_refuses_a_huge_content_length_before_reading(
    nursery: trio.Nursery, client: httpx2.AsyncClient
) -> None:
    """A non-streamed 2xx that announces a terabyte is refused at the headers (typed, not
    retried), its connection closed — never buffered."""
    base = await start_raw_server(
        nursery,
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n"
        b"\r\n" + b'{"id": "x", ',
    )
    with pytest.raises(ModelUpstreamError) as info:
        await send_request(client, client.build_request("GET", f"{base}/v1"), stream=False)

    exc = info.value
    assert not exc.retryable
    assert "1000000000000 bytes (Content-Length)" in exc.message
    assert exc.endpoint == f"{base}/v1"
    assert open_connections(client) == []


async def test_send_request_stops_reading_a_chunked_body_past_the_limit(
    nursery: trio.Nursery, client: httpx2.AsyncClient
) -> None:
    """A chunked 2xx announces no length: it is read only up to MAX_BODY_SIZE, then refused
    (typed, not retried) with its connection closed, while the server would go on forever."""
    sent = 0

    async def endless(stream: trio.SocketStream) -> None:
        nonlocal sent
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        piece = b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20))
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while True:
                await stream.send_all(piece)
                sent += 1 << 20

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, endless, listeners)
    port = listeners[0].socket.getsockname()[1]

    with trio.fail_after(60), pytest.raises(ModelUpstreamError) as info:
        await send_request(
            client, client.build_request("GET", f"http://127.0.0.1:{port}/v1"), stream=False
        )

    assert not info.value.retryable
    assert f"passed the {MAX_BODY_SIZE} bytes" in info.value.message
    assert open_connections(client) == []
    assert sent < 2 * MAX_BODY_SIZE  # the reader stopped; the server's writes then failed


async def test_stream_sse_invalid_utf8_mid_stream_is_replaced_not_fatal(
    nursery: trio.Nursery, client: httpx2.AsyncClient
) -> None:
    """Bytes that are no UTF-8 in the middle of an event become U+FFFD; the stream goes on."""
    base = await start_raw_server(
        nursery, chunked("200 OK", b"data: caf\xc3", b"\xa9 \xff\xfe ok\n\n", b"data: [DONE]\n\n")
    )
    seen: list[str] = []

    async def handle(event: ServerSentEvent) -> bool:
        seen.append(event.data)
        return event.data == "[DONE]"

    assert await stream_sse(client, client.build_request("POST", f"{base}/v1"), handle)
    assert seen == ["café \ufffd\ufffd ok", "[DONE]"]

"""Adversarial edges of the model layer's call contract, over real loopback HTTP.

``ChatModelBase`` (retries, backoff, ``Retry-After``, the accumulator, cancellation),
``_http``/``_sse`` and ``OpenAIChatModel`` talk to ``serve_openai_compatible`` or, where a
test needs byte-level control of what reaches the socket, to a raw trio TCP server defined
here.  The agent's own retries and fallback model (``ModelConfig``) are driven the same way.

Tests measuring backoff sleeps use ``autojump_clock`` and give the model no read or connect
timeout (``NO_NET_DEADLINE``), so an autojump can never fire a network deadline while data is
in flight on loopback (see tests/test_cancel_sweep_http.py).  A test that needs httpx's read
timeout to fire runs on the real clock with a deadline of a fraction of a second, against a
server that stalls for good; one that needs data to arrive *before* a read timeout uses mock
time, where the order of the two is fixed.
"""

from __future__ import annotations

import collections
import email.utils
import json
import logging
import os
import re
import time
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import httpx
import pytest
import trio
import trio.lowlevel
import trio.testing
from provider_kit import MSGS, Sink, open_connections, start_server

from trioagent._http import DRAIN_GRACE
from trioagent.agent import Agent, InjectionConfig, ModelConfig
from trioagent.credential import OpenAICredential
from trioagent.event import ReplyEndEvent, TextBlockDeltaEvent
from trioagent.exception import (
    ModelAuthenticationError,
    ModelError,
    ModelInvalidRequestError,
    ModelRateLimitError,
    ModelStreamError,
    ModelTimeoutError,
    ModelUpstreamError,
)
from trioagent.message import (
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    UserMsg,
)
from trioagent.model import ChatModelBase, ChatResponse, OpenAIChatModel
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
from trioagent.types import FinishedReason, ToolChoice

KEY = "sk-edge-FAKEKEY-7f3a9c1e5d"
NO_NET_DEADLINE: dict[str, Any] = {"read_timeout": None, "connect_timeout": None}


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-edge",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


ROLE = chunk({"role": "assistant", "content": ""})
USAGE = {
    "id": "chatcmpl-edge",
    "choices": [],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}


def texts(items: Sequence[ChatResponse]) -> list[str]:
    return [b.text for c in items for b in c.content if isinstance(b, TextBlock)]


def text_of(response: ChatResponse) -> str:
    return "".join(texts([response]))


def busy(model: ChatModelBase) -> list[Any]:
    """Pooled connections that are neither idle (reusable) nor closed."""
    return [c for c in open_connections(model.http_client) if not (c.is_idle() or c.is_closed())]


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    return await start_server(nursery, KEY)


class Clocked:
    """A script entry that records the (trio) time each request arrived, then answers."""

    def __init__(self, *entries: Any) -> None:
        self.entries = collections.deque(entries)
        self.times: list[float] = []

    def __call__(self, request: RecordedRequest) -> Any:
        self.times.append(trio.current_time())
        return self.entries.popleft()

    @property
    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.times, self.times[1:], strict=False)]


def push_clocked(server: OpenAICompatibleServer, *entries: Any) -> Clocked:
    clocked = Clocked(*entries)
    server.push(*[clocked] * len(entries))
    return clocked


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


# -- Retry-After and backoff -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "low", "high"),
    [
        pytest.param({"Retry-After": "86400"}, 4.0, 4.0, id="huge-capped"),
        pytest.param({"Retry-After": "1e999"}, 4.0, 4.0, id="infinite-capped"),
        pytest.param({"Retry-After": "2.5"}, 2.5, 2.5, id="fractional"),
        pytest.param({"Retry-After": "-30"}, 0.0, 1.25, id="negative-not-waited"),
        pytest.param({"Retry-After": "soon"}, 1.0, 1.25, id="garbage-falls-back-to-backoff"),
        pytest.param({"retry-after-ms": "1500", "Retry-After": "3"}, 1.5, 1.5, id="ms-wins"),
        pytest.param({"retry-after-ms": "nope", "Retry-After": "3"}, 3.0, 3.0, id="bad-ms"),
        pytest.param({"retry-after-ms": "250000"}, 4.0, 4.0, id="ms-capped"),
    ],
)
async def test_429_retry_after_variants(
    server: OpenAICompatibleServer,
    autojump_clock: trio.testing.MockClock,
    headers: dict[str, str],
    low: float,
    high: float,
) -> None:
    clocked = push_clocked(
        server, ScriptedError(status=429, message="slow down", headers=headers), "ok"
    )

    async with server.chat_model(retry_delay=1.0, max_retry_delay=4.0, **NO_NET_DEADLINE) as m:
        final = await m(MSGS)

    assert text_of(final) == "ok"
    (gap,) = clocked.gaps
    assert low - 1e-6 <= gap <= high + 1e-6


async def test_http_date_retry_after_is_honoured(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    future = email.utils.formatdate(time.time() + 10, usegmt=True)
    past = email.utils.formatdate(time.time() - 3600, usegmt=True)
    clocked = push_clocked(
        server,
        ScriptedError(status=503, headers={"Retry-After": future}),
        ScriptedError(status=429, headers={"Retry-After": past}),
        "ok",
    )

    async with server.chat_model(retry_delay=5.0, max_retry_delay=60, **NO_NET_DEADLINE) as m:
        final = await m(MSGS)

    assert text_of(final) == "ok"
    first, second = clocked.gaps
    assert 8.0 <= first <= 10.5  # whole-second dates; wall time moves on while we run
    assert second == pytest.approx(0.0, abs=1e-6)  # a date in the past: retry at once


async def test_backoff_doubles_with_upward_jitter_and_is_capped(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    clocked = push_clocked(server, *[ScriptedError(status=503)] * 5, "ok")

    async with server.chat_model(
        max_retries=5, retry_delay=1.0, max_retry_delay=3.0, **NO_NET_DEADLINE
    ) as m:
        final = await m(MSGS)

    assert text_of(final) == "ok"
    g1, g2, g3, g4, g5 = clocked.gaps
    eps = 1e-6
    assert 1.0 - eps <= g1 <= 1.25 + eps
    assert 2.0 - eps <= g2 <= 2.5 + eps
    assert [g3, g4, g5] == pytest.approx([3.0, 3.0, 3.0])


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503, 504, 529])
async def test_retryable_statuses_are_retried(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock, status: int
) -> None:
    server.push(ScriptedError(status=status, message="transient"), "recovered")

    async with server.chat_model(retry_delay=0.5, **NO_NET_DEADLINE) as m:
        final = await m(MSGS)

    assert text_of(final) == "recovered"
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
async def test_client_errors_are_never_retried(server: OpenAICompatibleServer, status: int) -> None:
    server.push(ScriptedError(status=status, message="no", retry_after=1), "unused")

    async with server.chat_model(max_retries=5) as m:
        with pytest.raises(ModelError) as info:
            await m(MSGS)

    assert info.value.status_code == status
    assert not info.value.retryable
    assert len(server.requests) == 1


async def test_max_retries_zero_makes_exactly_one_request(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(ScriptedError(status=503, message="busy", retry_after=1), "unused")
    start = trio.current_time()

    async with server.chat_model(max_retries=0, **NO_NET_DEADLINE) as m:
        with pytest.raises(ModelUpstreamError, match="busy"):
            await m(MSGS)

    assert len(server.requests) == 1
    assert trio.current_time() == start  # no sleep at all


async def test_exhausted_retries_raise_the_last_error_with_its_details(
    server: OpenAICompatibleServer,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.push(
        ScriptedError(status=503, message="first", code="c1", retry_after=1),
        ScriptedError(status=500, message="second", code="c2"),
        ScriptedError(status=429, message=f"third for key {KEY}", code="rate", retry_after=2),
        "unused",
    )

    async with server.chat_model(max_retries=2, retry_delay=0.1, **NO_NET_DEADLINE) as m:
        with pytest.raises(ModelRateLimitError) as info:
            await m(MSGS)

    error = info.value
    assert (error.status_code, error.code, error.retry_after) == (429, "rate", 2)
    assert error.message == "third for key ***"
    assert str(error) == "HTTP 429 third for key *** (code: rate)"
    assert error.retryable
    assert len(server.requests) == 3
    assert server.script[0] == "unused"
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING"]
    assert "HTTP 503 first (code: c1)" in caplog.records[0].getMessage()
    assert KEY not in caplog.text


async def test_retry_after_past_the_total_timeout_gives_up_at_once(
    server: OpenAICompatibleServer,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Sleeping into the deadline could only end in a timeout: the provider's own error is
    raised instead, at once."""
    caplog.set_level(logging.INFO, logger="trioagent.model")
    server.push(ScriptedError(status=429, message="slow down", retry_after=20), "unused")
    sink = Sink()
    start = trio.current_time()

    async with server.chat_model(timeout=5, max_retry_delay=60, **NO_NET_DEADLINE) as m:
        with pytest.raises(ModelRateLimitError, match="slow down") as info:
            await m(MSGS, emit=sink)
        assert busy(m) == []

    assert trio.current_time() == start
    assert info.value.retry_after == 20
    assert len(server.requests) == 1
    assert sink.items == []  # an error, not an interruption
    assert "not retried: Retry-After 20.00s is past the total timeout" in caplog.text


async def test_retry_after_within_the_total_timeout_is_honoured(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    clocked = push_clocked(server, ScriptedError(status=429, retry_after=3), "ok")

    async with server.chat_model(timeout=5, **NO_NET_DEADLINE) as m:
        final = await m(MSGS)

    assert text_of(final) == "ok"
    assert clocked.gaps == [pytest.approx(3)]


async def test_total_timeout_while_backing_off_names_the_provider_error(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(ScriptedError(status=503, message=f"busy, key {KEY}", code="overloaded"), "unused")
    sink = Sink()
    start = trio.current_time()

    async with server.chat_model(
        timeout=5, retry_delay=10, max_retry_delay=10, **NO_NET_DEADLINE
    ) as m:
        with pytest.raises(ModelTimeoutError) as info:
            await m(MSGS, emit=sink)
        assert busy(m) == []

    assert trio.current_time() - start == pytest.approx(5)
    error = info.value
    assert str(error) == (
        f"model call to {m.model!r} did not finish within its total timeout of 5s while "
        "retrying after the provider error: HTTP 503 busy, key *** (code: overloaded)"
    )
    assert not error.retryable
    cause = error.__cause__
    assert isinstance(cause, ModelUpstreamError)
    assert (cause.status_code, cause.code) == (503, "overloaded")
    assert len(server.requests) == 1
    assert sink.items == []


async def test_total_timeout_during_the_retried_attempt_names_the_earlier_error(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(
        ScriptedError(status=429, message="later", retry_after=1),
        ScriptedSSE(events=[ROLE], done=False, chunk_delay=60),
    )

    async with server.chat_model(timeout=5, **NO_NET_DEADLINE) as m:
        with pytest.raises(ModelTimeoutError, match="after the provider error: HTTP 429 later"):
            await m(MSGS)
        assert busy(m) == []

    assert len(server.requests) == 2


# -- where in the stream an error lands ------------------------------------------------------


async def test_stream_ending_without_done_before_content_is_retried(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(
        ScriptedSSE(events=[ROLE, ": keep-alive\n\n", USAGE], done=False),
        ScriptedReply(text="second", chunk_size=3),
    )
    sink = Sink()

    async with server.chat_model(**NO_NET_DEADLINE) as m:
        final = await m(MSGS, emit=sink)

    assert text_of(final) == "second"
    assert texts(sink.items) == ["sec", "ond"]  # nothing of the first attempt leaked out
    assert len(server.requests) == 2


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
    assert texts(sink.items) == ["fine"]
    assert len(raw.requests) == 2


async def test_cut_after_the_first_content_chunk_is_never_replayed(
    server: OpenAICompatibleServer,
) -> None:
    server.push(
        ScriptedReply(text="abcdefgh", chunk_size=2, cut_after=3, cut_abruptly=True), "unused"
    )
    sink = Sink()

    async with server.chat_model(max_retries=5, retry_delay=0.001) as m:
        with pytest.raises(ModelStreamError, match="stream was cut") as info:
            await m(MSGS, emit=sink)
        assert busy(m) == []

    assert info.value.retryable  # retryable in principle, but content was already emitted
    assert len(server.requests) == 1
    assert list(server.script) == ["unused"]
    assert texts(sink.items) == ["ab", "cd"]  # the partial deltas reached the consumer
    assert all(not c.is_last for c in sink.items)  # no INTERRUPTED final for an error


async def test_thinking_only_counts_as_content_and_blocks_a_retry(
    server: OpenAICompatibleServer,
) -> None:
    server.push(ScriptedSSE(events=[chunk({"reasoning_content": "hmm"})], done=False), "unused")
    sink = Sink()

    async with server.chat_model(max_retries=3, retry_delay=0.001) as m:
        with pytest.raises(ModelStreamError, match=r"ended before 'data: \[DONE\]'"):
            await m(MSGS, emit=sink)

    assert len(server.requests) == 1
    assert [type(b) for c in sink.items for b in c.content] == [ThinkingBlock]


async def test_error_object_before_content_is_not_retried_and_keeps_its_details(
    server: OpenAICompatibleServer,
) -> None:
    error = {"message": f"context too long for {KEY}", "type": "invalid_request", "code": "ctx"}
    server.push(ScriptedSSE(events=[ROLE, {"error": error}]), "unused")
    sink = Sink()

    async with server.chat_model(max_retries=3, retry_delay=0.001) as m:
        with pytest.raises(ModelUpstreamError) as info:
            await m(MSGS, emit=sink)

    assert info.value.message == "context too long for ***"
    assert info.value.code == "ctx"
    assert not info.value.retryable
    assert len(server.requests) == 1
    assert sink.items == []


async def test_null_error_field_is_not_an_error(server: OpenAICompatibleServer) -> None:
    server.push(ScriptedSSE(events=[chunk({"content": "fine"}, error=None)]))

    async with server.chat_model() as m:
        final = await m(MSGS)

    assert text_of(final) == "fine"


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

    assert texts(sink.items) == ["Hi"]
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
    assert texts(sink.items) == ["Hé🙂", "llo"] * len(cuts)
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
            assert texts(sink.items) == ["late"]  # comments never become empty deltas
            with pytest.raises(ModelTimeoutError, match="waiting for data"):
                await m(MSGS)
        assert busy(m) == []
    with trio.fail_after(5):
        while raw.closed < raw.accepted:
            await trio.sleep(0.01)


# -- cancellation ----------------------------------------------------------------------------


async def test_cancel_during_the_backoff_sleep(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(ScriptedError(status=429, message="later", retry_after=10), "never sent")
    sink = Sink()

    async with server.chat_model(**NO_NET_DEADLINE) as m:
        with trio.move_on_after(4) as scope:
            await m(MSGS, emit=sink)
        assert scope.cancelled_caught  # trio.Cancelled propagated out of the call
        (interrupted,) = sink.items
        assert interrupted.is_last
        assert interrupted.finished_reason == FinishedReason.INTERRUPTED
        assert interrupted.content == []
        await trio.sleep(60)  # long past the Retry-After: no request is made any more
        assert len(server.requests) == 1
        assert busy(m) == []
    with trio.fail_after(5):
        await server.wait_all_closed()


async def test_cancel_while_a_stream_stalls_before_its_first_chunk(
    server: OpenAICompatibleServer,
) -> None:
    server.push(ScriptedReply(text="never", stall_after=1))  # the role chunk, then silence
    sink = Sink()

    async with server.chat_model() as m:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(m, MSGS, emit=sink))
            with trio.fail_after(5):
                await server.wait_until(lambda: len(server.requests) == 1)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert [(c.is_last, c.finished_reason, c.content) for c in sink.items] == [
            (True, FinishedReason.INTERRUPTED, [])
        ]
        assert open_connections(m.http_client) == []  # a half-read stream is closed, never pooled
    with trio.fail_after(5):
        await server.wait_all_closed()
    assert server.connections[0].closed_by_client


class _StepCounter(trio.abc.Instrument):
    """Counts the schedule points of one task and its descendants; cancels at the k-th."""

    def __init__(self, root: trio.lowlevel.Task, cancel_at: int | None, scope: trio.CancelScope):
        self.root, self.cancel_at, self.scope = root, cancel_at, scope
        self.steps = 0

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        current: trio.lowlevel.Task | None = task
        while current is not None and current is not self.root:
            nursery = current.parent_nursery
            current = nursery.parent_task if nursery is not None else None
        if current is None:
            return
        self.steps += 1
        if self.steps == self.cancel_at:
            self.scope.cancel()


async def _swept_call(cancel_at: int | None) -> dict[str, Any]:
    """One call of a fresh model against a fresh server scripted with a 503 (``Retry-After:
    1``) and then a streamed reply, cancelled after its ``cancel_at``-th schedule point."""
    run: dict[str, Any] = {"sink": Sink(), "cancelled": False, "final": None}
    async with trio.open_nursery() as servers:
        server = await servers.start(
            partial(
                serve_openai_compatible,
                [
                    ScriptedError(status=503, retry_after=1),
                    ScriptedReply(text="abcdefgh", chunk_size=3),
                ],
            )
        )
        model = server.chat_model(**NO_NET_DEADLINE)
        scope = trio.CancelScope()

        async def call() -> None:
            counter = _StepCounter(trio.lowlevel.current_task(), cancel_at, scope)
            trio.lowlevel.add_instrument(counter)
            try:
                with scope:
                    try:
                        run["final"] = await model(MSGS, emit=run["sink"])
                    except trio.Cancelled:
                        run["cancelled"] = True
                        raise
            finally:
                trio.lowlevel.remove_instrument(counter)
                run["steps"] = counter.steps

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
        run["requests"] = len(server.requests)
        run["busy"] = busy(model)
        await model.aclose()
        with trio.fail_after(5):
            await server.wait_all_closed()
        servers.cancel_scope.cancel()
    return run


async def test_cancel_a_retried_http_call_at_every_schedule_point(
    autojump_clock: trio.testing.MockClock,
) -> None:
    baseline = await _swept_call(None)
    assert text_of(baseline["final"]) == "abcdefgh"
    assert baseline["requests"] == 2
    seen: collections.Counter[tuple[int, bool]] = collections.Counter()
    for k in range(1, baseline["steps"] + 1):
        run = await _swept_call(k)
        assert run["busy"] == [], k
        if run["final"] is not None:  # socket timing moved the end before point k
            assert text_of(run["final"]) == "abcdefgh", k
            continue
        assert run["cancelled"], k  # never swallowed, never turned into another error
        *deltas, last = run["sink"].items
        assert last.is_last, k
        assert last.finished_reason == FinishedReason.INTERRUPTED, k
        assert all(not d.is_last for d in deltas), k
        assert text_of(last) == "".join(texts(deltas)), k
        seen[(run["requests"], bool(deltas))] += 1
    assert seen[(0, False)] >= 1  # cancelled while connecting / sending the first request
    assert seen[(1, False)] >= 1  # cancelled on the 503 or during the backoff sleep
    assert seen[(2, False)] >= 1  # cancelled after the retry was sent, before content
    assert seen[(2, True)] >= 1  # cancelled mid-body: the partial is the emitted text


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


# -- the agent's retries and fallback model --------------------------------------------------


def _agent(model: ChatModelBase, **kwargs: Any) -> Agent:
    return Agent(
        "assistant",
        "Be brief.",
        model,
        injection_config=InjectionConfig(inject_runtime_state=False),
        **kwargs,
    )


async def _two_servers(nursery: trio.Nursery) -> tuple[OpenAICompatibleServer, ...]:
    return (await start_server(nursery, KEY), await start_server(nursery, KEY))


async def test_agent_falls_back_after_the_primarys_retries_are_exhausted(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    primary_server, fallback_server = await _two_servers(nursery)
    primary_server.push(*[ScriptedError(status=503, message="down")] * 4)
    fallback_server.push(ScriptedReply(text="from the fallback", chunk_size=5))
    events: list[Any] = []

    async def on_event(event: Any) -> None:
        events.append(event)

    async with (
        primary_server.chat_model("primary", max_retries=1, **NO_NET_DEADLINE) as primary,
        fallback_server.chat_model("backup", **NO_NET_DEADLINE) as fallback,
    ):
        agent = _agent(primary, model_config=ModelConfig(max_retries=1, fallback_model=fallback))
        msg = await agent.reply(UserMsg("user", "hi"), on_event=on_event)
        assert busy(primary) == busy(fallback) == []

    assert msg.get_text_content() == "from the fallback"
    # (1 + model retries) x (1 + agent retries) requests to the primary, then one fallback call.
    assert len(primary_server.requests) == 4
    assert [r.body["model"] for r in fallback_server.requests] == ["backup"]
    deltas = [e.delta for e in events if isinstance(e, TextBlockDeltaEvent)]
    assert "".join(deltas) == "from the fallback"
    (end,) = [e for e in events if isinstance(e, ReplyEndEvent)]
    assert end.finished_reason == "completed"


async def test_agent_does_not_fall_back_once_chunks_were_streamed(
    nursery: trio.Nursery,
) -> None:
    primary_server, fallback_server = await _two_servers(nursery)
    primary_server.push(
        ScriptedReply(text="partial answer", chunk_size=4, cut_after=3, cut_abruptly=True)
    )
    events: list[Any] = []

    async def on_event(event: Any) -> None:
        events.append(event)

    async with (
        primary_server.chat_model(max_retries=3, retry_delay=0.001) as primary,
        fallback_server.chat_model() as fallback,
    ):
        agent = _agent(primary, model_config=ModelConfig(max_retries=2, fallback_model=fallback))
        with pytest.raises(ModelStreamError, match="stream was cut"):
            await agent.reply(UserMsg("user", "hi"), on_event=on_event)
        assert busy(primary) == []

    assert len(primary_server.requests) == 1  # neither the model nor the agent replayed it
    assert fallback_server.requests == []
    assert [e.delta for e in events if isinstance(e, TextBlockDeltaEvent)] == ["part", "ial "]
    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    assert end.finished_reason == "error"
    assert end.error is not None
    assert "stream was cut" in end.error.message


async def test_agent_error_end_keeps_the_status_and_hides_the_key(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    primary_server, fallback_server = await _two_servers(nursery)
    primary_server.push(ScriptedError(status=401, message=f"Incorrect API key provided: {KEY}"))
    fallback_server.push(ScriptedError(status=400, message=f"bad request for {KEY}", code="x"))
    events: list[Any] = []

    async def on_event(event: Any) -> None:
        events.append(event)

    async with (
        primary_server.chat_model() as primary,
        fallback_server.chat_model() as fallback,
    ):
        agent = _agent(primary, model_config=ModelConfig(fallback_model=fallback))
        with pytest.raises(ModelInvalidRequestError) as info:
            await agent.reply(UserMsg("user", "hi"), on_event=on_event)

    assert str(info.value) == "HTTP 400 bad request for *** (code: x)"
    # Even a 401 is retried by the agent (any error), then the fallback is tried once.
    assert (len(primary_server.requests), len(fallback_server.requests)) == (1, 1)
    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    assert end.error is not None
    assert end.error.message == "HTTP 400 bad request for *** (code: x)"
    assert KEY not in caplog.text
    assert "Incorrect API key provided: ***" in caplog.text


# -- credentials never leak ------------------------------------------------------------------


async def test_key_is_redacted_from_error_bodies_reprs_and_logs(
    server: OpenAICompatibleServer,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def echo_raw(request: RecordedRequest) -> ScriptedResponse:
        auth = request.headers["authorization"]
        return ScriptedResponse(status=502, body=f"<h1>Bad gateway</h1>{auth}".encode())

    server.add_route("POST", "/v1/raw/chat/completions", echo_raw)
    server.push(*[ScriptedError(status=500, message=f"oops, key={KEY}")] * 2)
    credential = OpenAICredential(api_key=KEY, base_url=f"{server.base_url}/raw")

    async with server.chat_model(max_retries=1, **NO_NET_DEADLINE) as m:
        m.credential = credential
        with pytest.raises(ModelUpstreamError) as raw_info:
            await m(MSGS)
        m.credential = server.credential()
        with pytest.raises(ModelUpstreamError) as json_info:
            await m(MSGS)
        shown = [repr(m), str(m), repr(m.credential), str(m.credential)]

    assert str(raw_info.value) == "HTTP 502 <h1>Bad gateway</h1>Bearer ***"
    assert str(json_info.value) == "HTTP 500 oops, key=*** (code: server_error)"
    for text in [*shown, repr(raw_info.value), repr(json_info.value), caplog.text]:
        assert KEY not in text
    assert caplog.records  # the retries were logged, redacted


async def test_key_in_the_base_url_is_not_in_transport_errors() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there
    credential = OpenAICredential(
        api_key=KEY, base_url=f"http://user:{KEY}@127.0.0.1:{port}/v1?api-key={KEY}"
    )

    async with OpenAIChatModel("m", credential=credential, max_retries=0) as m:
        with pytest.raises(ModelError, match="could not reach") as info:
            await m(MSGS)

    assert KEY not in str(info.value)
    assert KEY not in repr(info.value)


# -- structured output and token counting over HTTP ------------------------------------------

PNG = Base64Source(data="iVBORw0KGgo=", media_type="image/png")
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def test_structured_output_strategies_over_http(
    server: OpenAICompatibleServer, autojump_clock: trio.testing.MockClock
) -> None:
    call = ScriptedToolCall("generate_structured_output", '{"n": "7"}')
    server.push(
        ScriptedError(status=503),  # retried by the model: the same strategy again
        ScriptedError(status=400, message="tool_choice not supported"),  # next strategy
        ScriptedReply(text="I'd rather chat."),  # no tool call: next strategy
        ScriptedReply(tool_calls=[call]),
    )
    async with server.chat_model(retry_delay=0.1, **NO_NET_DEADLINE) as m:
        result = await m.generate_structured_output(MSGS, SCHEMA)

    assert result.content == {"n": 7}
    choices = [r.body.get("tool_choice", "<absent>") for r in server.requests]
    forced = {"type": "function", "function": {"name": "generate_structured_output"}}
    assert choices == [forced, forced, "auto", "<absent>"]
    assert all(r.body["tools"][0]["function"]["parameters"] == SCHEMA for r in server.requests)


async def test_structured_output_does_not_swallow_a_non_retryable_error(
    server: OpenAICompatibleServer,
) -> None:
    server.push(ScriptedError(status=401, message="nope"), "unused")

    async with server.chat_model() as m:
        with pytest.raises(ModelAuthenticationError):
            await m.generate_structured_output(MSGS, SCHEMA)

    assert len(server.requests) == 1


async def test_count_tokens_counts_utf8_bytes_and_makes_no_request(
    server: OpenAICompatibleServer,
) -> None:
    msgs = [
        UserMsg("user", "é" * 8),  # 16 bytes
        UserMsg("user", [TextBlock(text="abcd"), DataBlock(source=PNG)]),  # 4 bytes + 2000
    ]
    tools = [{"type": "function", "function": {"name": "ü"}}]

    async with server.chat_model() as m:
        count = await m.count_tokens(msgs, tools)

    tool_bytes = len(json.dumps(tools, ensure_ascii=False).encode())
    assert count == int((16 + 4 + tool_bytes) / 4 + 0.5) + 2000
    assert server.requests == []


# -- connecting ------------------------------------------------------------------------------


async def _unanswered_port(sockets: list[trio.socket.SocketType]) -> int:
    """A loopback port whose accept queue is full: a new connect hangs in the SYN phase."""
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    sockets.append(listener)
    port: int = listener.getsockname()[1]
    for _ in range(8):
        filler = trio.socket.socket()
        sockets.append(filler)
        with trio.move_on_after(0.05) as probe:
            await filler.connect(("127.0.0.1", port))
        if probe.cancelled_caught:  # this connect hung: the queue is full
            return port
    raise AssertionError("could not fill the accept queue")


async def test_cancel_and_timeout_while_connecting(caplog: pytest.LogCaptureFixture) -> None:
    sockets: list[trio.socket.SocketType] = []
    try:
        port = await _unanswered_port(sockets)
        credential = OpenAICredential(api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1")
        sink = Sink()
        async with OpenAIChatModel("m", credential=credential, connect_timeout=None) as m:
            with trio.move_on_after(0.1) as scope:
                await m(MSGS, emit=sink)
            assert scope.cancelled_caught
            assert [(c.finished_reason, c.content) for c in sink.items] == [
                (FinishedReason.INTERRUPTED, [])
            ]
            assert open_connections(m.http_client) == []

        async with OpenAIChatModel(
            "m", credential=credential, connect_timeout=0.05, max_retries=1, retry_delay=0.01
        ) as m:
            with trio.fail_after(5), pytest.raises(ModelTimeoutError) as info:
                await m(MSGS)
            assert open_connections(m.http_client) == []
        assert str(info.value).startswith(f"timed out connecting (http://127.0.0.1:{port}/v1/")
        assert info.value.retryable
        assert [r.getMessage().count("retry 1 of 1") for r in caplog.records] == [1]
        assert KEY not in caplog.text
    finally:
        for sock in sockets:
            sock.close()


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
    assert texts(sink.items) == ["ok"]
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


# -- provider text in error messages is redacted ---------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("data: {" + "x" * 190 + KEY + "\n\n", id="unparseable"),
        pytest.param(f"data: {json.dumps(['x' * 188 + KEY])}\n\n", id="not-an-object"),
    ],
)
async def test_bad_chunk_error_quotes_the_chunk_redacted_before_the_cut(
    server: OpenAICompatibleServer, line: str
) -> None:
    """The key spans the 200-character cut: only redacting before cutting hides its first
    half (a later redaction of the message cannot recognise half a key)."""
    server.push(ScriptedSSE(events=[chunk({"content": "Hi"}), line]))

    async with server.chat_model(max_retries=0) as m:
        with pytest.raises(ModelStreamError) as info:
            await m(MSGS)

    assert "x" * 20 in info.value.message
    assert KEY[:8] not in str(info.value)


async def test_bad_chunk_error_in_the_end_event_and_logs_hides_the_key(
    server: OpenAICompatibleServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.push(ScriptedSSE(events=[chunk({"content": "Hi"}), f"data: {{oops {KEY}\n\n"]))
    events: list[Any] = []

    async def on_event(event: Any) -> None:
        events.append(event)

    async with server.chat_model(max_retries=0) as m:
        with pytest.raises(ModelStreamError):
            await _agent(m).reply(UserMsg("user", "hi"), on_event=on_event)

    end = events[-1]
    assert isinstance(end, ReplyEndEvent)
    assert end.error is not None
    assert end.error.message.startswith(f"unparseable chunk in the stream of {m.model!r}: ")
    assert "{oops ***" in end.error.message
    assert KEY not in caplog.text


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


@pytest.mark.parametrize("stream", [True, False])
async def test_provider_error_code_is_redacted(
    server: OpenAICompatibleServer, stream: bool
) -> None:
    server.push(ScriptedError(status=400, message="bad", code=f"key_{KEY}"))

    async with server.chat_model(stream=stream) as m:
        with pytest.raises(ModelInvalidRequestError) as info:
            await m(MSGS)

    assert info.value.code == "key_***"
    assert KEY not in str(info.value)


async def test_error_event_code_is_redacted(server: OpenAICompatibleServer) -> None:
    server.push(ScriptedSSE(events=[ROLE, {"error": {"message": "no", "code": f"c_{KEY}"}}]))

    async with server.chat_model() as m:
        with pytest.raises(ModelUpstreamError) as info:
            await m(MSGS)

    assert info.value.code == "c_***"


class _UnredactedModel(ChatModelBase):
    """A provider that quotes the key in its errors without redacting it."""

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        send: trio.MemorySendChannel[ChatResponse],
    ) -> None:
        raise ModelUpstreamError(f"echo of {KEY}", status_code=500, code=f"c_{KEY}")


async def test_every_provider_error_is_redacted_before_it_is_logged_or_raised(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The safety net of the retry loop, for a provider that forgets to redact."""
    model = _UnredactedModel("m", credential=OpenAICredential(api_key=KEY), max_retries=1)

    with pytest.raises(ModelUpstreamError) as info:
        await model(MSGS)

    error = info.value
    assert (error.message, error.code) == ("echo of ***", "c_***")
    assert KEY not in repr(error)
    assert KEY not in str(error)
    assert caplog.records  # the retry was logged, redacted
    assert KEY not in caplog.text


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
        f"HTTP {status} {raw.base_url}/chat/completions redirects to "
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

    async with httpx.AsyncClient(follow_redirects=True) as client:
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
    assert str(exc) == "HTTP 200 quota exceeded for *** (code: quota)"
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


# -- malformed chunks ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        pytest.param({"choices": [None]}, "'choices[0]' is not an object", id="choice-null"),
        pytest.param(
            {"choices": [{"delta": f"text {KEY}"}]}, "'delta' is not an object", id="delta-text"
        ),
        pytest.param({"choices": {"0": {}}}, "'choices' is not a list", id="choices-object"),
        pytest.param(
            {"choices": [{"delta": {"tool_calls": [{"index": "x"}]}}]},
            "a tool call's 'index' is not a number",
            id="index-x",
        ),
        pytest.param({"choices": [], "usage": "n/a"}, "'usage' is not an object", id="usage-text"),
        pytest.param(
            {"choices": [], "usage": {"prompt_tokens": "n/a"}},
            "invalid literal for int()",
            id="usage-count-text",
        ),
        pytest.param(
            {"choices": [{"delta": {"tool_calls": "call"}}]},
            "'tool_calls' is not a list",
            id="tool-calls-text",
        ),
        pytest.param(
            {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": "f"}]}}]},
            "a tool call's 'function' is not an object",
            id="function-text",
        ),
        pytest.param(
            {"choices": [{"delta": {"tool_calls": [{"function": {"name": 7}}]}}]},
            "a tool call's name is not a string",
            id="name-number",
        ),
    ],
)
async def test_malformed_chunk_is_a_stream_error_naming_the_model(
    server: OpenAICompatibleServer, bad: dict[str, Any], reason: str
) -> None:
    server.push(ScriptedSSE(events=[ROLE, {"id": "c", **bad}]), "unused")

    async with server.chat_model("gpt-edge", max_retries=3, retry_delay=0.001) as m:
        with pytest.raises(ModelStreamError) as info:
            await m(MSGS)
        assert busy(m) == []

    message = info.value.message
    assert message.startswith(f"malformed chunk in the answer of 'gpt-edge' ({reason}")
    assert '"choices"' in message  # a short excerpt of the chunk
    assert KEY not in message
    assert info.value.__cause__ is None  # the parser's exception may quote the chunk
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"choices": [{"message": "text"}]}, id="message-text"),
        pytest.param({"choices": [{"message": {"tool_calls": [None]}}]}, id="tool-call-null"),
        pytest.param({"choices": "none"}, id="choices-text"),
    ],
)
async def test_malformed_completion_is_an_upstream_error_naming_the_model(
    server: OpenAICompatibleServer, body: dict[str, Any]
) -> None:
    server.add_route("POST", "/v1/bad/chat/completions", lambda r: ScriptedResponse.json(body))
    credential = OpenAICredential(api_key=KEY, base_url=f"{server.base_url}/bad")

    async with OpenAIChatModel("gpt-edge", credential=credential, stream=False) as m:
        with pytest.raises(
            ModelUpstreamError, match="malformed completion in the answer of 'gpt-edge'"
        ) as info:
            await m(MSGS)

    assert not info.value.retryable
    assert len(server.requests) == 1


# -- Retry-After dates and long backoffs -----------------------------------------------------


@pytest.fixture
def local_time_not_utc() -> Iterator[None]:
    """Local time 5 hours ahead of UTC (a POSIX TZ string: no zone database needed)."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "XXX-05"
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()


@pytest.mark.parametrize(
    "style",
    [
        pytest.param("asctime", id="asctime"),
        pytest.param("rfc850", id="rfc850"),
        pytest.param("imf", id="imf-fixdate"),
    ],
)
async def test_retry_after_dates_are_gmt_whatever_the_local_time(
    server: OpenAICompatibleServer,
    autojump_clock: trio.testing.MockClock,
    local_time_not_utc: None,
    style: str,
) -> None:
    when = time.gmtime(time.time() + 20)
    formats = {
        "asctime": "%a %b %d %H:%M:%S %Y",
        "rfc850": "%A, %d-%b-%y %H:%M:%S GMT",
        "imf": "%a, %d %b %Y %H:%M:%S GMT",
    }
    value = time.strftime(formats[style], when)
    clocked = push_clocked(server, ScriptedError(status=503, headers={"Retry-After": value}), "ok")

    async with server.chat_model(max_retry_delay=60, **NO_NET_DEADLINE) as m:
        final = await m(MSGS)

    assert text_of(final) == "ok"
    (gap,) = clocked.gaps
    assert 18.0 <= gap <= 20.5  # whole-second dates; wall time moves on while we run


@pytest.mark.parametrize("attempt", [1023, 1024, 10**6])
def test_backoff_of_a_very_late_attempt_is_the_cap(attempt: int) -> None:
    model = OpenAIChatModel("m", credential=OpenAICredential(api_key=KEY), max_retry_delay=7.5)

    assert model._retry_delay_for(attempt, ModelUpstreamError("x")) == 7.5


def test_backoff_with_no_base_delay_stays_zero_for_a_very_late_attempt() -> None:
    model = OpenAIChatModel("m", credential=OpenAICredential(api_key=KEY), retry_delay=0.0)

    assert model._retry_delay_for(10**6, ModelUpstreamError("x")) == 0.0

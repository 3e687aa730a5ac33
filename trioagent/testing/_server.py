"""A scripted OpenAI-compatible HTTP server on loopback, for tests and examples.

It speaks real HTTP/1.1 (``trio`` sockets + ``h11``) and the Chat Completions protocol:
``POST …/chat/completions`` answered with SSE (``"stream": true``) or JSON, from a script.
Tests use it as the peer of :class:`~trioagent.model.OpenAIChatModel`, so they exercise real
sockets, real SSE parsing and real connection closing.

Start it in a nursery you own; ``nursery.start`` returns the running server::

    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_openai_compatible, ["Hello!"])
        async with server.chat_model() as model:
            response = await model([UserMsg("user", "Hi")])
        nursery.cancel_scope.cancel()  # stops the server

Options are keyword-only (``nursery.start`` passes positional arguments only)::

    server = await nursery.start(partial(serve_openai_compatible, script, api_key="sk-test"))

In pytest-trio tests, the ``nursery`` fixture is the natural owner (cancelled after the test).

Script entries (consumed one per chat request, in order; :meth:`OpenAICompatibleServer.push`
adds more):

* ``"text"`` or :class:`ScriptedReply` — text, reasoning (``reasoning_content``), tool calls
  (arguments split across chunks), usage; ``stall_after`` (sleep until the client goes away),
  ``cut_after`` (end without ``data: [DONE]``; ``cut_abruptly`` closes the socket mid-body);
* :class:`ScriptedError` — an error status with an OpenAI-style JSON body and ``Retry-After``;
* :class:`ScriptedSSE` — raw SSE text or chunk objects, sent as given;
* a callable ``(RecordedRequest) -> entry`` (sync or async) computing the reply.

With the script empty the server echoes: ``"Echo: <last user text>"``.  Every request is
recorded (:attr:`OpenAICompatibleServer.requests`) and every connection too
(:attr:`OpenAICompatibleServer.connections`, with a ``closed`` event and whether the client
closed it) — so a test can assert that a cancelled call closed its connection.
:meth:`OpenAICompatibleServer.add_file` serves media at ``GET /files/<name>``, and
:meth:`OpenAICompatibleServer.add_route` answers any other endpoint (``/v1/audio/speech``,
``/v1/decisions``, ...) with :class:`ScriptedResponse` objects computed by a handler.
"""

from __future__ import annotations

import collections
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import attrs
import h11
import trio

from .._core.ids import generate_id
from ..credential import OpenAICredential
from ..model import OpenAIChatModel

__all__ = [
    "ConnectionRecord",
    "OpenAICompatibleServer",
    "RecordedRequest",
    "RouteHandler",
    "ScriptEntry",
    "ScriptedError",
    "ScriptedReply",
    "ScriptedResponse",
    "ScriptedSSE",
    "ScriptedToolCall",
    "serve_openai_compatible",
]

_CLOSE_GRACE = 1.0  # seconds a shielded socket close may take


@attrs.frozen
class ScriptedToolCall:
    """A tool call in a scripted reply; ``arguments`` is streamed in fragments."""

    name: str
    arguments: str = "{}"
    id: str = attrs.field(factory=lambda: f"call_{generate_id()[:24]}")


@attrs.frozen(kw_only=True)
class ScriptedReply:
    """A successful answer.

    Attributes:
        text: the assistant text (streamed ``chunk_size`` characters at a time).
        reasoning: ``reasoning_content`` streamed before the text.
        tool_calls: tool calls, each opened by a fragment with id and name, then its
            arguments in fragments.
        usage: the ``usage`` object (default: rough counts); streamed as a usage-only chunk
            when the client asked for ``stream_options.include_usage``.
        chunk_size: characters per streamed fragment.
        chunk_delay: seconds to sleep between SSE events.
        stall_after: after this many SSE events (0: right after the headers; non-streaming:
            before responding), stop sending and wait until the client goes away.
        cut_after: after this many SSE events, end the body without ``data: [DONE]``.
        cut_abruptly: with ``cut_after``, close the socket instead of ending the body.
        finish_reason: default ``"tool_calls"`` with tool calls, else ``"stop"``.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: Sequence[ScriptedToolCall] = ()
    usage: Mapping[str, Any] | None = None
    chunk_size: int = 8
    chunk_delay: float = 0.0
    stall_after: int | None = None
    cut_after: int | None = None
    cut_abruptly: bool = False
    id: str = attrs.field(factory=lambda: f"chatcmpl-{generate_id()[:24]}")
    model: str | None = None
    finish_reason: str | None = None


@attrs.frozen(kw_only=True)
class ScriptedError:
    """An error response: ``{"error": {"message", "type", "param", "code"}}``."""

    status: int = 500
    message: str = "The server had an error while processing your request."
    type: str = "server_error"
    code: str | None = None
    retry_after: float | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)


_UNAUTHORIZED = ScriptedError(
    status=401,
    message="Incorrect API key provided.",
    type="invalid_request_error",
    code="invalid_api_key",
)


@attrs.frozen(kw_only=True)
class ScriptedSSE:
    """A raw streamed answer: each item is a chunk object (sent as ``data: <json>``) or text
    sent verbatim (comments, ``\\r\\n`` line endings, an ``{"error": ...}`` payload, ...)."""

    events: Sequence[Mapping[str, Any] | str]
    done: bool = True
    chunk_delay: float = 0.0


@attrs.frozen(kw_only=True)
class ScriptedResponse:
    """A raw answer of a custom route (:meth:`OpenAICompatibleServer.add_route`).

    Attributes:
        status: the HTTP status.
        body: the body; a sequence of byte strings is sent piece by piece (chunked).
        media_type: the ``Content-Type``.
        headers: extra headers.
        chunk_delay: seconds to sleep between pieces.
        stall_after: after this many pieces, stop sending and wait until the client goes away.
    """

    status: int = 200
    body: bytes | Sequence[bytes] = b""
    media_type: str = "application/json"
    headers: Mapping[str, str] = attrs.field(factory=dict)
    chunk_delay: float = 0.0
    stall_after: int | None = None

    @classmethod
    def json(cls, payload: Any, status: int = 200) -> ScriptedResponse:
        """A JSON answer."""
        return cls(status=status, body=json.dumps(payload).encode())


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """A request the server received (headers lower-cased; the body parsed as JSON)."""

    method: str
    path: str
    headers: Mapping[str, str] = attrs.field(repr=False)
    body: Any
    raw_body: bytes = attrs.field(repr=False)
    connection_id: int

    @property
    def stream(self) -> bool:
        """Whether the client asked for a streamed answer."""
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    def last_user_text(self) -> str:
        """The text of the last ``user`` message (parts joined by spaces)."""
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        if not isinstance(messages, list):
            return ""
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list):
                    return " ".join(
                        str(p.get("text", ""))
                        for p in content
                        if isinstance(p, dict) and p.get("type") == "text"
                    )
        return ""


@attrs.define(eq=False)
class ConnectionRecord:
    """One accepted TCP connection."""

    id: int
    closed: trio.Event = attrs.Factory(trio.Event)
    #: Whether the server saw the client close (EOF or reset) rather than closing it itself.
    closed_by_client: bool = False
    requests: int = 0


#: A custom route's handler: the request → the answer (sync or async).
RouteHandler: TypeAlias = Callable[
    [RecordedRequest], "ScriptedResponse | Awaitable[ScriptedResponse]"
]

_Entry: TypeAlias = str | ScriptedReply | ScriptedError | ScriptedSSE
ScriptEntry: TypeAlias = _Entry | Callable[[RecordedRequest], _Entry | Awaitable[_Entry]]


class _ClientGone(Exception):
    """The client closed the connection while we were answering."""


class _Abort(Exception):
    """The script asked to drop the connection."""


class OpenAICompatibleServer:
    """The running server returned by :func:`serve_openai_compatible`."""

    def __init__(
        self,
        script: Iterable[ScriptEntry],
        *,
        host: str,
        api_key: str | None,
        model: str,
    ) -> None:
        self.host = host
        self.port = 0
        self.api_key = api_key
        self.model = model
        self.script: collections.deque[ScriptEntry] = collections.deque(script)
        self.requests: list[RecordedRequest] = []
        self.connections: list[ConnectionRecord] = []
        self.files: dict[str, tuple[bytes, str]] = {}
        self.routes: dict[tuple[str, str], RouteHandler] = {}
        self._changed = trio.Event()

    def __repr__(self) -> str:
        return f"<OpenAICompatibleServer {self.base_url} script={len(self.script)}>"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def push(self, *entries: ScriptEntry) -> None:
        """Append entries to the script."""
        self.script.extend(entries)

    def add_file(self, name: str, data: bytes, media_type: str) -> str:
        """Serve ``data`` at ``GET /files/<name>`` (media for formatter tests and examples);
        returns its URL."""
        self.files[name] = (data, media_type)
        return f"http://{self.host}:{self.port}/files/{name}"

    def add_route(self, method: str, path: str, handler: RouteHandler) -> None:
        """Answer ``method path`` (e.g. ``"POST", "/v1/audio/speech"``; the query string is
        ignored) with ``handler(request)``, checked before the built-in routes.  The
        ``api_key`` check applies as for chat requests."""
        self.routes[(method.upper(), path)] = handler

    def credential(self) -> OpenAICredential:
        """An :class:`OpenAICredential` pointing at this server."""
        return OpenAICredential(api_key=self.api_key or "sk-test", base_url=self.base_url)

    def chat_model(self, model: str | None = None, **kwargs: Any) -> OpenAIChatModel:
        """An :class:`OpenAIChatModel` talking to this server (``kwargs`` go to it)."""
        return OpenAIChatModel(model or self.model, credential=self.credential(), **kwargs)

    @property
    def open_connections(self) -> int:
        """How many accepted connections are still open."""
        return sum(not c.closed.is_set() for c in self.connections)

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds (checked whenever a request or connection event
        happens)."""
        while not predicate():
            await self._changed.wait()

    async def wait_all_closed(self) -> None:
        """Wait until every connection accepted so far is closed."""
        await self.wait_until(lambda: self.open_connections == 0)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- connections -------------------------------------------------------------------------

    async def _handle(self, stream: trio.SocketStream) -> None:
        record = ConnectionRecord(id=len(self.connections))
        self.connections.append(record)
        self._notify()
        conn = h11.Connection(h11.SERVER)
        try:
            while await self._serve_one(stream, conn, record):
                conn.start_next_cycle()
        # ``except*``: these may arrive wrapped in the group of the answering nursery.
        except* (_ClientGone, trio.BrokenResourceError, trio.ClosedResourceError):
            record.closed_by_client = True
        except* (_Abort, h11.ProtocolError):
            # A client closing in the middle of its request is a protocol error for h11 too.
            _, eof = conn.trailing_data
            record.closed_by_client = record.closed_by_client or eof
        finally:
            # Shielded so the socket is closed even when the server is being cancelled;
            # deadline: _CLOSE_GRACE seconds.
            with trio.CancelScope(shield=True, deadline=trio.current_time() + _CLOSE_GRACE):
                await stream.aclose()
            record.closed.set()
            self._notify()

    async def _next_event(self, stream: trio.SocketStream, conn: h11.Connection) -> Any:
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            data = await stream.receive_some(65536)
            conn.receive_data(data)  # b"" tells h11 the client closed its side

    async def _serve_one(
        self, stream: trio.SocketStream, conn: h11.Connection, record: ConnectionRecord
    ) -> bool:
        """Read one request and answer it; ``False`` when the connection is done."""
        event = await self._next_event(stream, conn)
        if isinstance(event, h11.ConnectionClosed):
            raise _ClientGone
        if not isinstance(event, h11.Request):
            return False
        chunks: list[bytes] = []
        while True:
            part = await self._next_event(stream, conn)
            if isinstance(part, h11.Data):
                chunks.append(bytes(part.data))
            elif isinstance(part, h11.EndOfMessage):
                break
            elif isinstance(part, h11.ConnectionClosed):
                raise _ClientGone
        raw = b"".join(chunks)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = RecordedRequest(
            method=event.method.decode("ascii"),
            path=event.target.decode("latin-1"),
            headers=headers,
            body=body,
            raw_body=raw,
            connection_id=record.id,
        )
        self.requests.append(request)
        record.requests += 1
        self._notify()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_client, stream, conn, record, nursery.cancel_scope)
            await self._answer(stream, conn, request)
            nursery.cancel_scope.cancel()
        if record.closed_by_client:
            raise _ClientGone
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE

    async def _watch_client(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        record: ConnectionRecord,
        scope: trio.CancelScope,
    ) -> None:
        """While answering, notice at once when the client goes away (a stalled answer would
        otherwise never find out)."""
        while True:
            try:
                data = await stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                record.closed_by_client = True
                scope.cancel()
                return
            conn.receive_data(data)  # a pipelined next request: h11 keeps it for later

    # -- answers -------------------------------------------------------------------------------

    async def _answer(
        self, stream: trio.SocketStream, conn: h11.Connection, request: RecordedRequest
    ) -> None:
        route = self.routes.get((request.method, request.path.split("?")[0]))
        if route is not None:
            if not self._authorized(request):
                await self._send_error(stream, conn, _UNAUTHORIZED)
                return
            result = route(request)
            answer = await result if inspect.isawaitable(result) else result
            await self._send_custom(stream, conn, answer)
            return
        if request.method == "GET" and request.path.startswith("/files/"):
            await self._send_file(stream, conn, request.path.removeprefix("/files/"))
            return
        if request.method != "POST" or not request.path.split("?")[0].endswith("/chat/completions"):
            await self._send_error(
                stream, conn, ScriptedError(status=404, message="Not found", type="not_found")
            )
            return
        if not self._authorized(request):
            await self._send_error(stream, conn, _UNAUTHORIZED)
            return
        problem = _request_problem(request.body)
        if problem is not None:
            await self._send_error(
                stream,
                conn,
                ScriptedError(status=400, message=problem, type="invalid_request_error"),
            )
            return
        entry = await self._next_entry(request)
        match entry:
            case ScriptedError():
                await self._send_error(stream, conn, entry)
            case ScriptedSSE():
                await self._send_sse(stream, conn, entry.events, entry.done, entry.chunk_delay)
            case ScriptedReply() if request.stream:
                await self._send_stream(stream, conn, request, entry)
            case ScriptedReply():
                if entry.stall_after is not None:
                    await trio.sleep_forever()
                await self._send_json(stream, conn, 200, _completion(request, entry, self.model))

    def _authorized(self, request: RecordedRequest) -> bool:
        return self.api_key is None or request.headers.get("authorization") == (
            f"Bearer {self.api_key}"
        )

    async def _send_custom(
        self, stream: trio.SocketStream, conn: h11.Connection, answer: ScriptedResponse
    ) -> None:
        if not isinstance(answer, ScriptedResponse):
            raise TypeError(f"a route handler must return a ScriptedResponse, got {answer!r}")
        headers = [("Content-Type", answer.media_type), *answer.headers.items()]
        if isinstance(answer.body, bytes):
            headers.append(("Content-Length", str(len(answer.body))))
            pieces: Sequence[bytes] = [answer.body] if answer.body else []
        else:
            headers.append(("Transfer-Encoding", "chunked"))
            pieces = answer.body
        await self._send(stream, conn, h11.Response(status_code=answer.status, headers=headers))
        for sent, piece in enumerate(pieces):
            if answer.stall_after is not None and sent >= answer.stall_after:
                await trio.sleep_forever()
            await self._send(stream, conn, h11.Data(data=piece))
            if answer.chunk_delay:
                await trio.sleep(answer.chunk_delay)
        if answer.stall_after is not None:
            await trio.sleep_forever()
        await self._send(stream, conn, h11.EndOfMessage())

    async def _next_entry(
        self, request: RecordedRequest
    ) -> ScriptedReply | ScriptedError | ScriptedSSE:
        if self.script:
            entry = self.script.popleft()
        else:
            entry = ScriptedReply(text=f"Echo: {request.last_user_text()}")
        if callable(entry):
            result = entry(request)
            entry = await result if inspect.isawaitable(result) else result
        if isinstance(entry, str):
            return ScriptedReply(text=entry)
        if isinstance(entry, ScriptedReply | ScriptedError | ScriptedSSE):
            return entry
        raise TypeError(f"not a script entry: {entry!r}")

    async def _send(self, stream: trio.SocketStream, conn: h11.Connection, event: Any) -> None:
        data = conn.send(event)
        if data:
            await stream.send_all(data)

    async def _send_json(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        status: int,
        payload: Any,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        body = json.dumps(payload).encode()
        headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            *(extra_headers or {}).items(),
        ]
        await self._send(stream, conn, h11.Response(status_code=status, headers=headers))
        await self._send(stream, conn, h11.Data(data=body))
        await self._send(stream, conn, h11.EndOfMessage())

    async def _send_file(self, stream: trio.SocketStream, conn: h11.Connection, name: str) -> None:
        if name not in self.files:
            await self._send_error(
                stream, conn, ScriptedError(status=404, message="Not found", type="not_found")
            )
            return
        data, media_type = self.files[name]
        headers = [("Content-Type", media_type), ("Content-Length", str(len(data)))]
        await self._send(stream, conn, h11.Response(status_code=200, headers=headers))
        await self._send(stream, conn, h11.Data(data=data))
        await self._send(stream, conn, h11.EndOfMessage())

    async def _send_error(
        self, stream: trio.SocketStream, conn: h11.Connection, error: ScriptedError
    ) -> None:
        headers = dict(error.headers)
        if error.retry_after is not None:
            headers["Retry-After"] = f"{error.retry_after:g}"
        payload = {
            "error": {
                "message": error.message,
                "type": error.type,
                "param": None,
                "code": error.code,
            }
        }
        await self._send_json(stream, conn, error.status, payload, headers)

    async def _start_sse(self, stream: trio.SocketStream, conn: h11.Connection) -> None:
        headers = [
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("Cache-Control", "no-cache"),
            ("Transfer-Encoding", "chunked"),
        ]
        await self._send(stream, conn, h11.Response(status_code=200, headers=headers))

    async def _send_sse(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        events: Sequence[Mapping[str, Any] | str],
        done: bool,
        delay: float,
    ) -> None:
        await self._start_sse(stream, conn)
        for item in events:
            text = item if isinstance(item, str) else f"data: {json.dumps(item)}\n\n"
            await self._send(stream, conn, h11.Data(data=text.encode()))
            if delay:
                await trio.sleep(delay)
        if done:
            await self._send(stream, conn, h11.Data(data=b"data: [DONE]\n\n"))
        await self._send(stream, conn, h11.EndOfMessage())

    async def _send_stream(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        request: RecordedRequest,
        reply: ScriptedReply,
    ) -> None:
        await self._start_sse(stream, conn)
        chunks = _stream_chunks(request, reply, self.model)
        for sent, chunk in enumerate(chunks):
            if reply.stall_after is not None and sent >= reply.stall_after:
                await trio.sleep_forever()
            if reply.cut_after is not None and sent >= reply.cut_after:
                if reply.cut_abruptly:
                    raise _Abort  # closes the socket mid-body: an incomplete chunked read
                await self._send(stream, conn, h11.EndOfMessage())
                return
            await self._send(stream, conn, h11.Data(data=f"data: {json.dumps(chunk)}\n\n".encode()))
            if reply.chunk_delay:
                await trio.sleep(reply.chunk_delay)
        if reply.stall_after is not None:
            await trio.sleep_forever()
        await self._send(stream, conn, h11.Data(data=b"data: [DONE]\n\n"))
        await self._send(stream, conn, h11.EndOfMessage())


# -- payloads ------------------------------------------------------------------------------------


def _fragments(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage(request: RecordedRequest, reply: ScriptedReply) -> dict[str, Any]:
    if reply.usage is not None:
        return dict(reply.usage)
    prompt = len(json.dumps(request.body.get("messages", []))) // 4 + 1
    produced = reply.text + reply.reasoning + "".join(c.arguments for c in reply.tool_calls)
    completion = len(produced) // 4 + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _finish_reason(reply: ScriptedReply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _stream_chunks(
    request: RecordedRequest, reply: ScriptedReply, default_model: str
) -> list[dict[str, Any]]:
    options = request.body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    base = {
        "id": reply.id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": reply.model or request.body.get("model") or default_model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        out = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if include_usage:
            out["usage"] = None
        return out

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [
        chunk({"reasoning_content": f}) for f in _fragments(reply.reasoning, reply.chunk_size)
    ]
    chunks += [chunk({"content": f}) for f in _fragments(reply.text, reply.chunk_size)]
    for index, call in enumerate(reply.tool_calls):
        opening = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [opening]}))
        for fragment in _fragments(call.arguments, reply.chunk_size):
            chunks.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
            )
    chunks.append(chunk({}, _finish_reason(reply)))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": _usage(request, reply)})
    return chunks


def _completion(
    request: RecordedRequest, reply: ScriptedReply, default_model: str
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ]
    return {
        "id": reply.id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or request.body.get("model") or default_model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(reply)}],
        "usage": _usage(request, reply),
    }


async def serve_openai_compatible(
    script: Iterable[ScriptEntry] = (),
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    api_key: str | None = None,
    model: str = "trioagent-test",
    task_status: trio.TaskStatus[OpenAICompatibleServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the OpenAI chat-completions protocol on ``host:port`` until cancelled.

    Start it with ``server = await nursery.start(serve_openai_compatible, script)``; the
    server is bound (``port=0``: an ephemeral port, see ``server.base_url``) before
    ``nursery.start`` returns.  Cancelling the nursery stops it and closes its connections.

    Args:
        script: the answers, in order (see the module docstring).
        host: the interface to bind (loopback by default).
        port: the TCP port; 0 picks a free one.
        api_key: when set, requests without ``Authorization: Bearer <api_key>`` get a 401.
        model: the model name reported when the request names none.
    """
    server = OpenAICompatibleServer(script, host=host, api_key=api_key, model=model)
    listeners = await trio.open_tcp_listeners(port, host=host)
    server.port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, server._handle, listeners)
        task_status.started(server)


def _request_problem(body: Any) -> str | None:
    """Why a chat-completions body is malformed (answered with HTTP 400), or ``None``."""
    if not isinstance(body, dict) or "messages" not in body:
        return "The body must be a JSON object with 'messages'."
    messages = body["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return "'messages' must be a list of objects."
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        return "'stream_options' must be an object."
    return None

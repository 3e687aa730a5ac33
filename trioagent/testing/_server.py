"""A scripted OpenAI-compatible HTTP server on loopback, for tests and examples.

It speaks real HTTP/1.1 (``trio`` sockets + ``h11``) and the Chat Completions protocol:
``POST …/chat/completions`` answered with SSE (``"stream": true``) or JSON, from a script,
and ``GET …/models`` listing the one model it answers as.  What it cannot do it refuses as an
OpenAI-compatible server does: ``n`` other than 1 is an HTTP 400 ``invalid_request_error``.
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
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

import h11
import trio

from .._core.json_types import JSONValue
from ..credential import OpenAICredential
from ..model import OpenAIChatModel
from ._server_payloads import completion, model_entry, model_list, request_problem, stream_chunks
from ._server_script import (
    UNAUTHORIZED,
    ConnectionRecord,
    RecordedRequest,
    RouteHandler,
    ScriptedError,
    ScriptedReply,
    ScriptedSSE,
    ScriptEntry,
)
from ._server_wire import Abort, ClientGone, Exchange

__all__ = ["OpenAICompatibleServer", "serve_openai_compatible"]

_CLOSE_GRACE = 1.0  # seconds a shielded socket close may take
_MODELS_PATH = re.compile(r"/models(?:/(?P<id>[^/]+))?/?$")


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
        self.started_at = int(time.time())  # the ``created`` of the model it lists
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
        exchange = Exchange(stream, conn)
        try:
            while await self._serve_one(exchange, record):
                conn.start_next_cycle()
        # ``except*``: these may arrive wrapped in the group of the answering nursery.
        except* (ClientGone, trio.BrokenResourceError, trio.ClosedResourceError):
            record.closed_by_client = True
        except* (Abort, h11.ProtocolError):
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

    async def _serve_one(self, exchange: Exchange, record: ConnectionRecord) -> bool:
        """Read one request and answer it; ``False`` when the connection is done."""
        conn = exchange.conn
        event = await exchange.next_event()
        if isinstance(event, h11.ConnectionClosed):
            raise ClientGone
        if not isinstance(event, h11.Request):
            return False
        chunks: list[bytes] = []
        while True:
            part = await exchange.next_event()
            if isinstance(part, h11.Data):
                chunks.append(bytes(part.data))
            elif isinstance(part, h11.EndOfMessage):
                break
            elif isinstance(part, h11.ConnectionClosed):
                raise ClientGone
        raw = b"".join(chunks)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
        try:
            body: JSONValue = json.loads(raw) if raw else None
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
            nursery.start_soon(self._watch_client, exchange, record, nursery.cancel_scope)
            await self._answer(exchange, request)
            nursery.cancel_scope.cancel()
        if record.closed_by_client:
            raise ClientGone
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE

    async def _watch_client(
        self, exchange: Exchange, record: ConnectionRecord, scope: trio.CancelScope
    ) -> None:
        """While answering, notice at once when the client goes away (a stalled answer would
        otherwise never find out)."""
        while True:
            try:
                data = await exchange.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                record.closed_by_client = True
                scope.cancel()
                return
            exchange.conn.receive_data(data)  # a pipelined next request: h11 keeps it for later

    # -- answers -------------------------------------------------------------------------------

    async def _answer(self, exchange: Exchange, request: RecordedRequest) -> None:
        route = self.routes.get((request.method, request.path.split("?")[0]))
        if route is not None:
            if not self._authorized(request):
                await exchange.send_error(UNAUTHORIZED)
                return
            result = route(request)
            answer = await result if inspect.isawaitable(result) else result
            await exchange.send_custom(answer)
            return
        if request.method == "GET" and request.path.startswith("/files/"):
            found = self.files.get(request.path.removeprefix("/files/"))
            await (exchange.send_not_found() if found is None else exchange.send_file(*found))
            return
        path = request.path.split("?")[0]
        if request.method == "GET" and (models := _MODELS_PATH.search(path)) is not None:
            await self._answer_models(exchange, request, models["id"])
            return
        if request.method != "POST" or not path.endswith("/chat/completions"):
            await exchange.send_not_found()
            return
        if not self._authorized(request):
            await exchange.send_error(UNAUTHORIZED)
            return
        problem = request_problem(request.body)
        if problem is not None:
            await exchange.send_error(problem)
            return
        entry = await self._next_entry(request)
        match entry:
            case ScriptedError():
                await exchange.send_error(entry)
            case ScriptedSSE():
                await exchange.send_sse(entry.events, entry.done, entry.chunk_delay)
            case ScriptedReply() if request.stream:
                await exchange.send_stream(stream_chunks(request, entry, self.model), entry)
            case ScriptedReply():
                if entry.stall_after is not None:
                    await trio.sleep_forever()
                await exchange.send_json(200, completion(request, entry, self.model))

    async def _answer_models(
        self, exchange: Exchange, request: RecordedRequest, model_id: str | None
    ) -> None:
        """``GET …/models`` lists the one model this server answers as; ``GET …/models/<id>``
        returns it, or OpenAI's 404 ``model_not_found`` for any other id."""
        if not self._authorized(request):
            await exchange.send_error(UNAUTHORIZED)
            return
        if model_id is None:
            await exchange.send_json(200, model_list(self.model, self.started_at))
        elif model_id == self.model:
            await exchange.send_json(200, model_entry(self.model, self.started_at))
        else:
            await exchange.send_error(
                ScriptedError(
                    status=404,
                    message=f"The model '{model_id}' does not exist",
                    type="invalid_request_error",
                    code="model_not_found",
                    param="model",
                )
            )

    def _authorized(self, request: RecordedRequest) -> bool:
        return self.api_key is None or request.headers.get("authorization") == (
            f"Bearer {self.api_key}"
        )

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

"""``AGUIApp``: one agent served over AG-UI (SSE) as a plain ASGI application.

Hand-written ASGI rather than a framework: four routes, and every task of a request lives in
that request's own task (the one the server gave it), so a cancelled request scope is an outer
cancellation of the reply -- which still ends with exactly one INTERRUPTED end and a saved
partial answer.  It runs under any ASGI server on ``trio.run`` (Hypercorn's trio worker:
:func:`trioagent.web.serve`), and mounts inside another ASGI application.

Routes (relative to where it is mounted)::

    GET  /                      the built-in chat page (page=True)
    POST /agui                  run the agent (or the pipeline): AG-UI RunAgentInput in,
                                AG-UI events out (SSE)
    POST /agui/stop             {"threadId": ...}: interrupt that thread's running reply
    GET  /agui/threads/<id>     the thread's conversation, waiting calls, and whether it runs
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from importlib import resources
from typing import Any, TypeAlias
from urllib.parse import unquote

import orjson
import pydantic
import trio
from ag_ui.core import BaseEvent, RunAgentInput

from .._core.concurrency import reraise_unwrapped
from ..agent import Agent, AgentState
from ..event import AgentEvent
from ..exception import TrioagentError
from ..message import Msg
from ..middleware import MiddlewareBase
from ..pipeline import PipelineBase
from ..session import SessionMiddleware, SessionStore, SessionStoreError
from ._agui import AGUIRun, encode_sse
from ._history import thread_snapshot
from ._inputs import InputError, reply_inputs
from ._served import (
    MakeAgent,
    MakePipeline,
    Served,
    build_agent,
    build_pipeline,
    waiting_calls,
)
from ._stop import StopBus

__all__ = ["AGUIApp"]

logger = logging.getLogger("trioagent.web")

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]

MAX_BODY = 1 << 20
#: Seconds a new run waits for the previous run of its thread to close its response.
ENDING_WAIT = 5.0
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # proxies must not hold the stream back
]


class HTTPError(TrioagentError):
    """A request the app refuses, with its status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Running:
    """A run in progress on one thread of this process."""

    def __init__(self) -> None:
        self.target: Agent | PipelineBase | None = None
        self.stop_requested = False
        self.disconnected = False
        self.ended = False  # its terminal event is on its way to the client
        self.done = trio.Event()

    def stop(self) -> None:
        self.stop_requested = True
        if self.target is not None:
            self.target.interrupt()  # a no-op until its reply registered; see _Run.on_event


class AGUIApp:
    """An ASGI application serving the agent ``make_agent`` builds, one conversation per AG-UI
    ``threadId``, kept in ``store``.

    Args:
        make_agent: builds the agent of one thread (sync or async) from a list of middlewares
            to place first in its ``middlewares`` (the thread's
            :class:`~trioagent.session.SessionMiddleware`, and one that marks each answer with
            how its reply ended): ``lambda first: Agent(..., middlewares=[*first, ...])``.  A
            fresh agent per run; its state comes from the store, so any process serves any
            thread.
        store: where the threads live (``SQLiteSessionStore``; ``RedisSessionStore`` for
            several processes).
        stop_bus: carries Stop requests between processes (``RedisStopBus``); without it a Stop
            reaches the replies of this process only.
        page: serve the built-in chat page at ``/``.
        shutdown_grace: seconds :meth:`shutdown` waits for interrupted replies to end.

    Run :meth:`run` for the app's background work (the Stop listener) -- the ASGI lifespan
    does it, and :func:`trioagent.web.serve` too.  :meth:`for_pipeline` serves a pipeline
    instead of one agent.
    """

    def __init__(
        self,
        make_agent: MakeAgent,
        store: SessionStore,
        *,
        stop_bus: StopBus | None = None,
        page: bool = True,
        shutdown_grace: float = 10.0,
    ) -> None:
        if not isinstance(store, SessionStore):
            raise TypeError(f"store must be a SessionStore, got {type(store).__name__}")
        if stop_bus is not None and not isinstance(stop_bus, StopBus):
            raise TypeError(f"stop_bus must be a StopBus, got {type(stop_bus).__name__}")
        self.make_agent = make_agent
        self.make_pipeline: MakePipeline | None = None
        self._shape: dict[str, frozenset[str]] | None = None  # the pipeline's, once built
        self.store = store
        self.stop_bus = stop_bus
        self.page = page
        self.shutdown_grace = shutdown_grace
        self._running: dict[str, _Running] = {}
        self._closing = False

    @classmethod
    def for_pipeline(
        cls,
        make_pipeline: MakePipeline,
        store: SessionStore,
        *,
        stop_bus: StopBus | None = None,
        page: bool = True,
        shutdown_grace: float = 10.0,
    ) -> AGUIApp:
        """An app serving the pipeline ``make_pipeline`` builds (a ``TeamPipeline``, a
        ``GoalPipeline``), one conversation per ``threadId``, as :class:`AGUIApp` serves an agent.

        ``make_pipeline(first)`` builds the pipeline of one run (sync or async), giving each
        participant ``first(name)`` first in its ``middlewares``: the participant's session
        (stored under ``<threadId>/<name>``) and the end marker.  Stop interrupts the whole
        pipeline; a member's confirmation reaches the client and its answer resumes that member
        (routed by reply id).  The other arguments are :class:`AGUIApp`'s.
        """

        def unused(first: list[MiddlewareBase]) -> Agent:
            raise TypeError("this app serves a pipeline: it builds no lone agent")

        app = cls(unused, store, stop_bus=stop_bus, page=page, shutdown_grace=shutdown_grace)
        app.make_pipeline = make_pipeline
        return app

    def __repr__(self) -> str:
        return f"<AGUIApp store={self.store!r} running={len(self._running)}>"

    @property
    def running_threads(self) -> list[str]:
        """The threads with a run in progress in this process."""
        return list(self._running)

    # -- lifecycle ---------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The app's background work until cancelled: listen for Stops on the bus."""
        if self.stop_bus is None:
            task_status.started()
            await trio.sleep_forever()
        else:
            await self.stop_bus.listen(self.stop_local, task_status=task_status)

    def stop_local(self, thread_id: str) -> bool:
        """Interrupt this process's running reply of ``thread_id``; whether there was one."""
        running = self._running.get(thread_id)
        if running is None:
            return False
        running.stop()
        return True

    async def shutdown(self) -> None:
        """Refuse new runs, interrupt every running reply and wait (up to ``shutdown_grace``)
        until each has ended -- its INTERRUPTED end sent and its partial answer saved."""
        self._closing = True
        waiting = list(self._running.values())
        for running in waiting:
            running.stop()
        with trio.move_on_after(self.shutdown_grace):
            for running in waiting:
                await running.done.wait()

    # -- ASGI ----------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # no websockets: the server closes the connection
        path = _route_path(scope)
        method = scope["method"]
        try:
            if path == "/agui" and method == "POST":
                await self._run(await _read_body(receive), receive, send)
            elif path == "/agui/stop" and method == "POST":
                await self._stop(await _read_body(receive), send)
            elif path.startswith("/agui/threads/") and method == "GET":
                await self._thread(unquote(path.removeprefix("/agui/threads/")), send)
            elif path == "/" and method == "GET" and self.page:
                await _respond(send, 200, _page(), b"text/html; charset=utf-8")
            else:
                raise HTTPError(404, f"no route for {method} {path}")
        except HTTPError as exc:
            await _respond_json(send, exc.status, {"error": str(exc)})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(self.run)
            except Exception as exc:
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            await self.shutdown()
            nursery.cancel_scope.cancel()
        await send({"type": "lifespan.shutdown.complete"})

    # -- routes --------------------------------------------------------------------------------------

    async def _run(self, body: bytes, receive: Receive, send: Send) -> None:
        try:
            run_input = RunAgentInput.model_validate_json(body)
        except pydantic.ValidationError as exc:
            raise HTTPError(400, f"not an AG-UI RunAgentInput: {exc}") from None
        self._session(run_input.thread_id)  # a bad threadId is a 400
        thread_id = run_input.thread_id
        if self._closing:
            raise HTTPError(503, "the server is shutting down")
        while (earlier := self._running.get(thread_id)) is not None:
            # A run whose last event is sent may still be closing its response: a client
            # that saw RUN_FINISHED can go on at once.
            if earlier.ended:
                with trio.move_on_after(ENDING_WAIT):
                    await earlier.done.wait()
            if not earlier.done.is_set():
                raise HTTPError(409, f"thread {thread_id!r} has a run in progress: stop it first")
        running = self._running[thread_id] = _Running()
        try:
            served = await self._served(thread_id)
            try:
                inputs = reply_inputs(run_input, served.waiting())
            except InputError as exc:
                raise HTTPError(409 if exc.conflict else 400, str(exc)) from None
            running.target = served.target
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await _Run(served, AGUIRun(thread_id, run_input.run_id), running, send).serve(
                inputs, receive
            )
        finally:
            del self._running[thread_id]
            running.done.set()

    def _session(self, thread_id: object) -> SessionMiddleware:
        """The thread's session (a bad ``threadId`` is a 400)."""
        try:
            return SessionMiddleware(self.store, thread_id)  # type: ignore[arg-type]  # checked
        except (TypeError, ValueError) as exc:
            raise HTTPError(400, f"threadId: {exc}") from None

    async def _served(self, thread_id: str) -> Served:
        """The thread's agent or pipeline, built fresh, with its state from the store."""
        if self.make_pipeline is None:
            served = await build_agent(self.make_agent, self.store, thread_id)
        else:
            served = await build_pipeline(self.make_pipeline, self.store, thread_id)
            self._shape = served.shape
        try:
            await served.restore()
        except SessionStoreError as exc:
            raise HTTPError(503, f"the session store failed: {exc}") from None
        return served

    async def _stop(self, body: bytes, send: Send) -> None:
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            request = None
        if not isinstance(request, dict):
            raise HTTPError(400, 'expected a JSON object {"threadId": ...}')
        thread_id = str(self._session(request.get("threadId")).session_id)
        local = self.stop_local(thread_id)
        if self.stop_bus is not None:
            await self.stop_bus.publish(thread_id)
        await _respond_json(
            send,
            202,
            {"threadId": thread_id, "stopped": local, "published": self.stop_bus is not None},
        )

    async def _thread(self, thread_id: str, send: Send) -> None:
        session = self._session(thread_id)
        running = session.session_id in self._running
        if self.make_pipeline is None:
            snapshot = thread_snapshot(await self._load(thread_id), running=running)
        else:
            # The conversation is the face participant's (the first); any participant may
            # be waiting.  Who takes part is learned from one built pipeline (every thread's
            # pipeline has the same participants).
            if self._shape is None:
                self._shape = (await self._served(thread_id)).shape
            states = {name: await self._load(f"{thread_id}/{name}") for name in self._shape}
            calls = [call for _, call in waiting_calls(self._shape, states)]
            face = next(iter(states.values()))
            snapshot = thread_snapshot(face, running=running, waiting=calls)
        await _respond_json(send, 200, {"threadId": thread_id, **snapshot})

    async def _load(self, session_id: str) -> AgentState:
        try:
            stored = await self.store.load(session_id)
        except SessionStoreError as exc:
            raise HTTPError(503, f"the session store failed: {exc}") from None
        return stored.state if stored is not None else AgentState()


class _Run:
    """One run's stream: agent (or pipeline) events in, AG-UI SSE frames out."""

    def __init__(self, served: Served, agui: AGUIRun, running: _Running, send: Send) -> None:
        self.served = served
        self.target = served.target
        self.agui = agui
        self.running = running
        self._send = send

    async def serve(self, inputs: Any, receive: Receive) -> None:
        await self.write(self.agui.start())
        msg: Msg | None = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_disconnect, receive)
                try:
                    msg = await self.target.reply(inputs, on_event=self.on_event)
                except Exception as exc:
                    # The reply ended with its ERROR end (already sent as RUN_ERROR) and raised.
                    logger.warning("a run on thread %r failed: %r", self.agui.thread_id, exc)
                    if not self.agui.finished:
                        await self.write(self.agui.error(str(exc), type(exc).__name__))
                finally:
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # A cancelled request scope: the server expects its Cancelled, not a group.
            reraise_unwrapped(group)
        if not self.agui.finished and msg is not None and msg.finished_reason is not None:
            # A pipeline's reply: its participants' ends were relayed, its own is the Msg's.
            await self.write(self.agui.end_of(msg))
        if not self.agui.finished:
            calls = [call for _, call in self.served.waiting()]
            if calls:
                await self.write(self.agui.parked(calls))
            else:
                await self.write(self.agui.error("the reply ended without an end", "no_end"))
        if not self.running.disconnected:
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def on_event(self, event: AgentEvent) -> None:
        if self.running.stop_requested:
            # A Stop (or a disconnect) that came before the reply registered with the agent.
            self.target.interrupt()
        for out in self.agui.translate(event):
            await self.write(out)

    async def write(self, event: BaseEvent) -> None:
        self.running.ended = self.agui.finished
        if self.running.disconnected:
            return
        try:
            await self._send(
                {"type": "http.response.body", "body": encode_sse(event), "more_body": True}
            )
        except OSError:
            # The connection is gone (some servers raise rather than report a disconnect).
            self.running.disconnected = True
            self.running.stop()

    async def _watch_disconnect(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.running.disconnected = True
                self.running.stop()
                return


# -- HTTP helpers ------------------------------------------------------------------------------------


def _route_path(scope: Scope) -> str:
    """The path inside the app (a mounting app may leave its prefix in ``path``)."""
    path: str = scope.get("path", "/")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path or "/"


async def _read_body(receive: Receive) -> bytes:
    """The request body; past ``MAX_BODY`` the rest is read and dropped, then refused (a
    client still sending would not see an answer sent before it is done)."""
    body = bytearray()
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise HTTPError(499, "the client went away before sending its request")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= MAX_BODY:
            body += chunk
        if not message.get("more_body", False):
            if size > MAX_BODY:
                raise HTTPError(413, f"the request body exceeds {MAX_BODY} bytes")
            return bytes(body)


async def _respond(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _respond_json(send: Send, status: int, value: Any) -> None:
    await _respond(send, status, orjson.dumps(value), b"application/json")


def _page() -> bytes:
    return resources.files(__package__).joinpath("chat.html").read_bytes()

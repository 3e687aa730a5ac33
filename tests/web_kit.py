"""Helpers of the trioagent.web tests: a served app on loopback, SSE reading, a recorder.

Not a test module (no ``test_`` prefix).
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import httpx2
import orjson
import trio

from trioagent.agent import Agent, AgentState, InjectionConfig, ReplyStream
from trioagent.event import AgentEvent
from trioagent.message import Msg
from trioagent.middleware import MiddlewareBase
from trioagent.permission import PermissionDecision
from trioagent.pipeline import TeamPipeline
from trioagent.serialization import dumps, loads
from trioagent.session import SessionConflictError, StoredSession
from trioagent.testing import ScriptedModel, text_chunks
from trioagent.tool import Toolkit
from trioagent.web import AGUIApp, serve

NO_INJECTION = InjectionConfig(inject_runtime_state=False)
TERMINAL = ("RUN_FINISHED", "RUN_ERROR")
_ids = itertools.count()


def words(n: int = 40) -> list[Any]:
    """A streamed answer of ``n`` chunks ``"w0 "``, ``"w1 "``, ..."""
    return text_chunks(*[f"w{i} " for i in range(n)])


class Recorder(MiddlewareBase):
    """Records every event of every reply by thread, and forwards them to ``tee`` if set."""

    def __init__(self, events: dict[str, list[AgentEvent]]) -> None:
        self.events = events
        self.tee: Callable[[Any], Awaitable[None]] | None = None

    async def on_reply(self, agent: Any, input_kwargs: Any, next_handler: Any, emit: Any) -> None:
        async def sink(item: Any) -> None:
            if not isinstance(item, Msg):
                self.events.setdefault(agent.state.session_id, []).append(item)
            if self.tee is not None:
                await self.tee(item)
            await emit(item)

        await next_handler(sink)


async def ask_time() -> str:
    """The time (a tool that asks for confirmation)."""
    return "12:00"


def toolkit(ask: bool = True) -> Toolkit:
    kit = Toolkit()
    behavior = "ask" if ask else "allow"
    kit.register_function(ask_time, permission=PermissionDecision(behavior=behavior, message="t"))
    return kit


def agent_factory(
    steps: Callable[[], Sequence[Any]],
    recorder: Recorder | None = None,
    *,
    chunk_delay: float = 0.0,
) -> Callable[[list[MiddlewareBase]], Agent]:
    """``make_agent`` for an app: a fresh ScriptedModel playing ``steps()`` per run; every
    event goes through ``recorder``."""
    recorder = recorder if recorder is not None else Recorder({})

    def make(first: list[MiddlewareBase]) -> Agent:
        model = ScriptedModel(list(steps()), chunk_delay=chunk_delay)
        return Agent(
            "assistant",
            "Be brief.",
            model,
            toolkit(),
            middlewares=[*first, recorder],
            injection_config=NO_INJECTION,
        )

    return make


async def start(nursery: trio.Nursery, app: AGUIApp) -> str:
    """Serve ``app`` with Hypercorn on a free loopback port; its base URL."""
    urls: list[str] = await nursery.start(serve, app, "127.0.0.1", 0)
    return urls[0]


@contextlib.contextmanager
def served_processes(store: str, n: int = 1) -> Iterator[list[tuple[str, subprocess.Popen[str]]]]:
    """``n`` processes of ``trioagent serve`` (the embedded demo model), started at once on
    free ports, keeping their threads in ``store``; yields their URLs and processes, and stops
    them with SIGINT (each must exit 0)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "trioagent", "serve", "--port", "0", "--store", store],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(n)
    ]
    try:
        served = []
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "trioagent serve: http://" in line, line + proc.stdout.read()
            served.append((line.split()[2].rstrip("/"), proc))
        yield served
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in procs:
            assert proc.wait(timeout=20) in (0, -signal.SIGKILL)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def run_body(thread: str, text: str | None = None, resume: list[Any] | None = None) -> bytes:
    body: dict[str, Any] = {"threadId": thread, "runId": f"run-{next(_ids)}", "messages": []}
    if text is not None:
        body["messages"] = [{"id": f"m-{next(_ids)}", "role": "user", "content": text}]
    if resume is not None:
        body["resume"] = resume
    return orjson.dumps(body)


def parse_sse(data: bytes) -> list[dict[str, Any]]:
    """The AG-UI events of an SSE body."""
    return [
        orjson.loads(frame[len(b"data: ") :])
        for frame in data.split(b"\n\n")
        if frame.startswith(b"data: ")
    ]


async def post_run(client: httpx2.AsyncClient, body: bytes) -> list[dict[str, Any]]:
    response = await client.post(
        "/agui", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, (response.status_code, response.text)
    return parse_sse(response.content)


async def disconnect_after(base_url: Any, body: bytes, marker: bytes, times: int = 1) -> bytes:
    """POST a run over a plain socket, close the connection once ``marker`` was received
    ``times`` times; what was received."""
    url = httpx2.URL(str(base_url))
    stream = await trio.open_tcp_stream(url.host, url.port or 80)
    async with stream:
        head = (
            f"POST {url.path.rstrip('/')}/agui HTTP/1.1\r\nHost: {url.host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        await stream.send_all(head.encode() + body)
        received = b""
        while received.count(marker) < times:
            chunk = await stream.receive_some()
            if not chunk:
                raise AssertionError(f"the stream ended before {marker!r}: {received!r}")
            received += chunk
    return received


def check_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The stream opens with RUN_STARTED and closes with exactly one terminal event; returns it."""
    assert events[0]["type"] == "RUN_STARTED"
    terminal = [i for i, e in enumerate(events) if e["type"] in TERMINAL]
    assert terminal == [len(events) - 1], [e["type"] for e in events]
    return events[-1]


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


class MemoryStore:
    """A SessionStore in a dict (the in-memory seam of the swept tests: no worker threads)."""

    def __init__(self) -> None:
        self.data: dict[str, tuple[int, bytes]] = {}

    async def load(self, session_id: str) -> StoredSession | None:
        await trio.lowlevel.checkpoint()
        if session_id not in self.data:
            return None
        version, payload = self.data[session_id]
        return StoredSession(session_id, version, loads(payload, AgentState))

    async def version(self, session_id: str) -> int:
        await trio.lowlevel.checkpoint()
        return self.data.get(session_id, (0, b""))[0]

    async def save(self, session_id: str, state: AgentState, *, expected_version: int) -> int:
        payload = dumps(state).encode()
        current = self.data.get(session_id, (0, b""))[0]
        if current != expected_version:
            raise SessionConflictError(session_id, expected_version, current)
        self.data[session_id] = (current + 1, payload)
        return current + 1

    async def list(self) -> builtins.list[str]:
        return sorted(self.data)

    async def delete(self, session_id: str, *, expected_version: int | None = None) -> bool:
        return self.data.pop(session_id, None) is not None


class ServedAgent:
    """One reply driven through an :class:`AGUIApp` in memory, shaped like an agent for
    ``cancel_sweep``: ``interrupt()`` is the client closing the connection; an outer
    cancellation cancels the request's scope.  ``sse`` is what the client was sent."""

    name = "assistant"

    def __init__(self, steps: Callable[[], Sequence[Any]]) -> None:
        self.store = MemoryStore()
        self.events: dict[str, list[AgentEvent]] = {}
        self.recorder = Recorder(self.events)
        make = agent_factory(steps, self.recorder)
        self.agent: Agent | None = None

        def make_agent(first: list[MiddlewareBase]) -> Agent:
            self.agent = make(first)
            return self.agent

        self.app = AGUIApp(make_agent, self.store, page=False)
        self.sse = bytearray()
        self._gone = trio.Event()

    @property
    def state(self) -> AgentState:
        return self.agent.state if self.agent is not None else AgentState()

    @property
    def model(self) -> Any:
        return self.agent.model if self.agent is not None else None

    def interrupt(self) -> None:
        self._gone.set()

    async def reply(
        self, inputs: Any, *, structured_schema: Any = None, on_event: Any = None
    ) -> None:
        async def events_only(item: Any) -> None:
            if not isinstance(item, Msg):
                await on_event(item)

        await self._call(inputs, events_only)

    def stream(self, inputs: Any, *, structured_schema: Any = None) -> ReplyStream:
        def run(consume: Any, registered: Callable[[], object]) -> Awaitable[None]:
            registered()
            return self._call(inputs, consume)

        return ReplyStream(run)

    async def _call(self, inputs: Msg, consume: Any) -> None:
        self.recorder.tee = consume
        messages = [{"type": "http.request", "body": run_body("sweep", inputs.get_text_content())}]

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop()
            await self._gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            self.sse += message.get("body", b"")

        scope = {"type": "http", "method": "POST", "path": "/agui", "headers": []}
        await self.app(scope, receive, send)


class _TappedTeam(TeamPipeline):
    """A team whose events and final Msg also go to ``tap.tee`` (the sweep's consumer)."""

    def __init__(self, tap: Recorder, *args: Any) -> None:
        super().__init__(*args)
        self.tap = tap

    async def reply(self, inputs: Any = None, *, on_event: Any = None) -> Msg:
        async def both(event: AgentEvent) -> None:
            if self.tap.tee is not None:
                await self.tap.tee(event)
            await on_event(event)

        msg = await super().reply(inputs, on_event=both)
        if self.tap.tee is not None:
            await self.tap.tee(msg)
        return msg


class ServedPipeline(ServedAgent):
    """One reply of a team driven through :meth:`AGUIApp.for_pipeline` in memory, shaped
    like a pipeline for ``cancel_sweep`` (its ``participants`` are the served team's), with
    :class:`ServedAgent`'s ``interrupt()`` (the client leaves) and outer cancellation.

    ``make_team(first)`` builds ``(leader, members)`` with ``first(name)`` in each
    participant's middlewares."""

    name = "team"

    def __init__(self, make_team: Callable[[Any], tuple[Agent, list[Any]]]) -> None:
        self.store = MemoryStore()
        self.events = {}
        self.recorder = Recorder(self.events)  # only its tee is used
        self.team: TeamPipeline | None = None

        def make_pipeline(first: Any) -> TeamPipeline:
            self.team = _TappedTeam(self.recorder, *make_team(first))
            return self.team

        self.app = AGUIApp.for_pipeline(make_pipeline, self.store, page=False)
        self.sse = bytearray()
        self._gone = trio.Event()

    @property
    def participants(self) -> list[Agent]:
        assert self.team is not None, "the app did not build the team"
        return list(self.team.participants)

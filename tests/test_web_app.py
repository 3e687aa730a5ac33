"""AGUIApp over real loopback sockets (Hypercorn's trio worker started by each test).

Streaming, Stop, a closed connection, a server shutdown, HITL (also resumed by another app
on the same store), threads that continue, the page, mounting, and refused requests.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import httpx2
import pydantic
import pytest
import trio
from ag_ui.core import Event
from web_kit import (
    Recorder,
    agent_factory,
    check_stream,
    disconnect_after,
    parse_sse,
    post_run,
    run_body,
    start,
    text_of,
    words,
)

from trioagent.agent import Agent
from trioagent.event import AgentEvent, ReplyEndEvent
from trioagent.middleware import MiddlewareBase
from trioagent.session import SQLiteSessionStore
from trioagent.testing import ScriptedModel, text_chunks, tool_call_chunks
from trioagent.web import AGUIApp, serve

EVENT = pydantic.TypeAdapter(Event)


def _app(
    tmp_path: Path, steps: Any, events: dict[str, list[AgentEvent]], delay: float = 0.0
) -> AGUIApp:
    store = SQLiteSessionStore(tmp_path / "threads.sqlite3")
    return AGUIApp(agent_factory(steps, Recorder(events), chunk_delay=delay), store)


def _ends(events: list[AgentEvent]) -> list[str]:
    return [str(e.finished_reason) for e in events if isinstance(e, ReplyEndEvent)]


async def _stream_until(
    client: httpx2.AsyncClient, body: bytes, n_deltas: int, then: Any
) -> list[dict[str, Any]]:
    """POST a run, call ``then()`` after ``n_deltas`` text deltas, read the rest."""
    seen: list[dict[str, Any]] = []
    async with client.stream("POST", "/agui", content=body) as response:
        assert response.status_code == 200
        buffer = b""
        async for chunk in response.aiter_bytes():
            buffer += chunk
            *frames, buffer = buffer.split(b"\n\n")
            for event in parse_sse(b"\n\n".join(frames) + b"\n\n"):
                seen.append(event)
                if event["type"] == "TEXT_MESSAGE_CONTENT":
                    n_deltas -= 1
                    if n_deltas == 0:
                        await then()
    return seen


async def test_a_reply_streams_as_valid_agui_events(nursery, tmp_path) -> None:
    events: dict[str, list[AgentEvent]] = {}
    app = _app(tmp_path, lambda: [words(5)], events)
    async with httpx2.AsyncClient(base_url=await start(nursery, app)) as client:
        response = await client.post("/agui", content=run_body("t1", "hi"))
    assert response.headers["content-type"].startswith("text/event-stream")
    stream = parse_sse(response.content)
    for event in stream:
        EVENT.validate_python(event)  # every frame is an AG-UI 1.0 event
    end = check_stream(stream)
    assert end["type"] == "RUN_FINISHED"
    assert end["outcome"] == {"type": "success"}
    assert text_of(stream) == "w0 w1 w2 w3 w4 "
    types = [e["type"] for e in stream]
    assert types.index("TEXT_MESSAGE_START") < types.index("TEXT_MESSAGE_END")
    assert _ends(events["t1"]) == ["completed"]


async def test_stop_interrupts_keeps_the_partial_answer_and_the_thread_continues(
    nursery, tmp_path
) -> None:
    events: dict[str, list[AgentEvent]] = {}
    scripts = iter([[words(200)], [text_chunks("again")]])
    app = _app(tmp_path, lambda: next(scripts), events, delay=0.01)
    async with httpx2.AsyncClient(base_url=await start(nursery, app)) as client:

        async def stop() -> None:
            response = await client.post("/agui/stop", json={"threadId": "t1"})
            assert response.json() == {"threadId": "t1", "stopped": True, "published": False}

        stream = await _stream_until(client, run_body("t1", "tell me"), 3, stop)
        end = check_stream(stream)
        assert end["outcome"] == {"type": "cancelled"}
        partial = text_of(stream)
        assert partial.startswith("w0 w1 w2 ")
        assert len(partial) < len("w0 ") * 200
        thread = (await client.get("/agui/threads/t1")).json()
        answer = thread["messages"][1]
        assert answer["content"] == partial
        assert answer["metadata"] == {"finishedReason": "interrupted"}
        # The next message continues the conversation after the kept partial answer.
        second = await post_run(client, run_body("t1", "go on"))
        assert check_stream(second)["outcome"] == {"type": "success"}
        thread = (await client.get("/agui/threads/t1")).json()
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "user", "assistant"]
    assert thread["messages"][3]["metadata"] == {"finishedReason": "completed"}
    assert _ends(events["t1"]) == ["interrupted", "completed"]


async def test_a_closed_connection_interrupts_the_reply(nursery, tmp_path) -> None:
    events: dict[str, list[AgentEvent]] = {}
    app = _app(tmp_path, lambda: [words(500)], events, delay=0.01)
    async with httpx2.AsyncClient(base_url=await start(nursery, app)) as client:
        # Leaving mid-stream closes the connection.
        await disconnect_after(client.base_url, run_body("t1", "hi"), b"TEXT_MESSAGE_CONTENT")
        with trio.fail_after(10):
            while app.running_threads:
                await trio.sleep(0.01)
        thread = (await client.get("/agui/threads/t1")).json()
    assert _ends(events["t1"]) == ["interrupted"]
    assert thread["messages"][1]["content"].startswith("w0 ")
    assert thread["running"] is False


async def test_a_shutdown_interrupts_every_running_reply_first(tmp_path) -> None:
    events: dict[str, list[AgentEvent]] = {}
    app = _app(tmp_path, lambda: [words(500)], events, delay=0.01)
    trigger = trio.Event()
    streams: dict[str, list[dict[str, Any]]] = {}

    async def client(base: str, thread: str, started: trio.Event) -> None:
        async with httpx2.AsyncClient(base_url=base) as http:

            async def mark() -> None:
                started.set()

            streams[thread] = await _stream_until(http, run_body(thread, "hi"), 1, mark)

    async with trio.open_nursery() as nursery:
        serving = functools.partial(serve, shutdown_trigger=trigger.wait)
        base = (await nursery.start(serving, app, "127.0.0.1", 0))[0]
        for thread in ("a", "b"):
            started = trio.Event()
            nursery.start_soon(client, base, thread, started)
            await started.wait()
        trigger.set()  # serve() returns once the replies ended and the connections closed
    for thread in ("a", "b"):
        assert check_stream(streams[thread])["outcome"] == {"type": "cancelled"}
        assert _ends(events[thread]) == ["interrupted"]
    assert app.running_threads == []


def _time_or_answer(request: Any) -> Any:
    """Calls ask_time, or answers once its result is in."""
    if request.messages[-1].has_content_blocks("tool_result"):
        return text_chunks("It is noon.")
    return tool_call_chunks("c1", "ask_time", "{}")


async def test_hitl_parks_and_another_app_on_the_store_resumes_it(nursery, tmp_path) -> None:
    events: dict[str, list[AgentEvent]] = {}
    first = _app(tmp_path, lambda: [_time_or_answer], events)
    second = _app(tmp_path, lambda: [_time_or_answer], events)  # another server, same file
    async with (
        httpx2.AsyncClient(base_url=await start(nursery, first)) as one,
        httpx2.AsyncClient(base_url=await start(nursery, second)) as two,
    ):
        stream = await post_run(one, run_body("t1", "time?"))
        end = check_stream(stream)
        assert end["outcome"]["type"] == "interrupt"
        (interrupt,) = end["outcome"]["interrupts"]
        assert interrupt["id"] == "c1"
        assert interrupt["reason"] == "tool_confirmation"
        # A reloaded page (on the other server) sees the question...
        thread = (await two.get("/agui/threads/t1")).json()
        assert [i["id"] for i in thread["interrupts"]] == ["c1"]
        # ... and a new message is refused until it is answered.
        refused = await two.post("/agui", content=run_body("t1", "hello?"))
        assert refused.status_code == 409
        resume = [{"interruptId": "c1", "status": "resolved", "payload": {"approved": True}}]
        stream = await post_run(two, run_body("t1", resume=resume))
        assert check_stream(stream)["outcome"] == {"type": "success"}
        result = next(e for e in stream if e["type"] == "TOOL_CALL_RESULT")
        assert result["toolCallId"] == "c1"
        assert result["content"] == "12:00"
        assert text_of(stream) == "It is noon."
        again = await two.post("/agui", content=run_body("t1", resume=resume))
        assert again.status_code == 409  # nothing waits any more
    assert _ends(events["t1"]) == ["completed"]


async def test_a_denied_call_gets_a_denied_result(nursery, tmp_path) -> None:
    scripts = iter([[tool_call_chunks("c1", "ask_time", "{}")], [text_chunks("OK, I won't.")]])
    app = _app(tmp_path, lambda: next(scripts), {})
    async with httpx2.AsyncClient(base_url=await start(nursery, app)) as client:
        await post_run(client, run_body("t1", "time?"))
        resume = [{"interruptId": "c1", "status": "cancelled"}]
        stream = await post_run(client, run_body("t1", resume=resume))
        thread = (await client.get("/agui/threads/t1")).json()
    result = next(e for e in stream if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == "c1"
    tool_message = next(m for m in thread["messages"] if m["role"] == "tool")
    assert tool_message["metadata"] == {"state": "denied"}
    assert thread["interrupts"] == []


async def test_refused_requests_get_clear_errors(nursery, tmp_path) -> None:
    app = _app(tmp_path, lambda: [words(300)], {}, delay=0.01)
    async with httpx2.AsyncClient(base_url=await start(nursery, app)) as client:
        cases = [
            (await client.post("/agui", content=b"{not json"), 400, "RunAgentInput"),
            (await client.post("/agui", content=b'{"threadId": "t"}'), 400, "RunAgentInput"),
            (await client.post("/agui", content=run_body("", "x")), 400, "threadId"),
            (await client.post("/agui", content=run_body("t")), 400, "no user message"),
            (await client.post("/agui/stop", content=b"[]"), 400, "threadId"),
            (await client.get("/nowhere"), 404, "no route"),
            (await client.post("/agui", content=b"x" * (1 << 21)), 413, "exceeds"),
        ]
        for response, status, words_ in cases:
            assert response.status_code == status, response.text
            assert words_ in response.json()["error"]
        # A second run on a thread that is running is refused, the first one unharmed.

        async def second_then_stop() -> None:
            second = await client.post("/agui", content=run_body("busy", "again"))
            assert second.status_code == 409
            await client.post("/agui/stop", json={"threadId": "busy"})

        first = await _stream_until(client, run_body("busy", "hi"), 1, second_then_stop)
        assert check_stream(first)["outcome"] == {"type": "cancelled"}


async def test_the_page_is_served_and_the_app_mounts_under_a_prefix(nursery, tmp_path) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    app = _app(tmp_path, lambda: [text_chunks("mounted")], {})
    parent = Starlette(routes=[Mount("/chat", app=app)])
    urls = await nursery.start(serve, parent, "127.0.0.1", 0)  # type: ignore[arg-type]
    async with httpx2.AsyncClient(base_url=urls[0]) as client:
        page = await client.get("/chat/")
        response = await client.post("/chat/agui", content=run_body("t1", "hi"))
        thread = await client.get("/chat/agui/threads/t1")
    assert page.status_code == 200
    assert "<title>trioagent chat</title>" in page.text
    assert "http://" not in page.text
    assert "https://" not in page.text  # no CDN
    assert text_of(parse_sse(response.content)) == "mounted"
    assert thread.json()["messages"][1]["content"] == "mounted"


async def test_make_agent_must_place_the_session(nursery, tmp_path) -> None:
    def without_session(first: list[MiddlewareBase]) -> Agent:
        return Agent("assistant", "", ScriptedModel([text_chunks("x")]))

    app = AGUIApp(without_session, SQLiteSessionStore(tmp_path / "s.sqlite3"))
    with pytest.raises(TypeError, match="middlewares start with the ones given"):
        await app._served("t")


class _Bus:
    """A StopBus in memory: what it was asked to publish, and who listens."""

    def __init__(self) -> None:
        self.published: list[str] = []
        self.listener: Any = None

    async def publish(self, thread_id: str) -> None:
        self.published.append(thread_id)

    async def listen(self, on_stop: Any, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        self.listener = on_stop
        task_status.started()
        await trio.sleep_forever()


async def test_the_lifespan_runs_the_stop_listener_and_a_stop_is_published(
    nursery, tmp_path
) -> None:
    events: dict[str, list[AgentEvent]] = {}
    bus = _Bus()
    app = AGUIApp(
        agent_factory(lambda: [words(500)], Recorder(events), chunk_delay=0.01),
        SQLiteSessionStore(tmp_path / "threads.sqlite3"),
        stop_bus=bus,
    )
    to_app, app_receives = trio.open_memory_channel[dict[str, Any]](1)
    sent: list[str] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])

    nursery.start_soon(app, {"type": "lifespan"}, app_receives.receive, send)
    await to_app.send({"type": "lifespan.startup"})
    with trio.fail_after(10):
        while bus.listener is None:
            await trio.sleep(0.01)
    assert sent == ["lifespan.startup.complete"]
    async with httpx2.AsyncClient(base_url=await start(nursery, app)) as client:

        async def stop_from_another_process() -> None:
            response = await client.post("/agui/stop", json={"threadId": "elsewhere"})
            assert response.json()["published"] is True
            bus.listener("t1")  # a Stop for t1 published by another process arrives

        stream = await _stream_until(client, run_body("t1", "hi"), 2, stop_from_another_process)
    assert check_stream(stream)["outcome"] == {"type": "cancelled"}
    assert bus.published == ["elsewhere"]
    await to_app.send({"type": "lifespan.shutdown"})
    with trio.fail_after(10):
        while len(sent) < 2:
            await trio.sleep(0.01)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert _ends(events["t1"]) == ["interrupted"]

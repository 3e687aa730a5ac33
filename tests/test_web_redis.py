"""Several ``trioagent serve`` processes on one Redis (a real redis-server, real subprocesses):
a Stop sent to one process interrupts the reply running in another, a confirmation asked by
one is answered through another, and a process killed mid-reply leaves its thread resumable.
"""

from __future__ import annotations

import signal
from typing import Any

import httpx2
import trio
from session_kit import redis_server
from web_kit import check_stream, parse_sse, post_run, run_body, served_processes, text_of

TERMINAL = ("RUN_FINISHED", "RUN_ERROR")


async def _stream(base: str, body: bytes, seen: list[dict[str, Any]], started: trio.Event) -> None:
    """Read a run's events into ``seen``; ``started`` is set at the fifth text delta.  A
    connection the server drops (a killed process) just ends the stream."""
    try:
        async with (
            httpx2.AsyncClient(base_url=base, timeout=60) as client,
            client.stream("POST", "/agui", content=body) as response,
        ):
            assert response.status_code == 200
            buffer = b""
            async for chunk in response.aiter_bytes():
                buffer += chunk
                *frames, buffer = buffer.split(b"\n\n")
                seen.extend(parse_sse(b"\n\n".join(frames) + b"\n\n"))
                if sum(e["type"] == "TEXT_MESSAGE_CONTENT" for e in seen) >= 5:
                    started.set()
    except httpx2.RemoteProtocolError:
        assert not any(e["type"] in TERMINAL for e in seen)


async def _start_story(nursery: trio.Nursery, base: str, thread: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    started = trio.Event()
    nursery.start_soon(_stream, base, run_body(thread, "tell me a story"), seen, started)
    with trio.fail_after(30):
        await started.wait()
    return seen


async def test_three_processes_share_threads_through_redis() -> None:
    with redis_server() as url, served_processes(url, 3) as served:
        (one, first), (two, _), (three, _) = served
        async with (
            httpx2.AsyncClient(base_url=one, timeout=60) as client_one,
            httpx2.AsyncClient(base_url=two, timeout=60) as client_two,
            httpx2.AsyncClient(base_url=three, timeout=60) as client_three,
        ):
            # A Stop sent to process two interrupts the reply running in process one.
            async with trio.open_nursery() as nursery:
                seen = await _start_story(nursery, one, "t1")
                stop = await client_two.post("/agui/stop", json={"threadId": "t1"})
            assert stop.json() == {"threadId": "t1", "stopped": False, "published": True}
            assert check_stream(seen)["outcome"] == {"type": "cancelled"}
            partial = text_of(seen)
            assert partial.startswith("Once upon a time")

            # The thread continues in process two; the confirmation it asks is answered
            # through process one.
            stream = await post_run(client_two, run_body("t1", "what time is it?"))
            (interrupt,) = check_stream(stream)["outcome"]["interrupts"]
            resume = [{"interruptId": interrupt["id"], "status": "resolved"}]
            stream = await post_run(client_one, run_body("t1", resume=resume))
            assert text_of(stream).startswith("The tool says:")
            thread = (await client_three.get("/agui/threads/t1")).json()
            said = [m for m in thread["messages"] if m["role"] in ("user", "assistant")]
            assert [m["content"] for m in said[:3]] == [
                "tell me a story",
                partial,
                "what time is it?",
            ]
            assert said[1]["metadata"] == {"finishedReason": "interrupted"}

            # Process one dies mid-reply: process three takes the thread over.
            async with trio.open_nursery() as nursery:
                seen = await _start_story(nursery, one, "t2")
                first.send_signal(signal.SIGKILL)
            assert not any(e["type"] in TERMINAL for e in seen)
            stream = await post_run(client_three, run_body("t2", "hello"))
            assert check_stream(stream)["outcome"] == {"type": "success"}
            assert text_of(stream) == "Echo: hello"
            thread = (await client_two.get("/agui/threads/t2")).json()
    users = [m["content"] for m in thread["messages"] if m["role"] == "user"]
    assert users == ["tell me a story", "hello"]
    assert thread["messages"][-1]["content"] == "Echo: hello"
    assert thread["running"] is False

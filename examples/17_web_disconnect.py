"""17 — Serve an agent over HTTP (AG-UI): a client leaves mid-stream, then the thread goes on.

``trioagent.web.AGUIApp`` serves the agent with Hypercorn's trio worker, one conversation per
AG-UI ``threadId`` in a session store (an SQLite file here).  A client asks for a long answer
and closes its connection after a few words, as a closed browser tab does.  The server notices
the disconnect and interrupts the reply: exactly one INTERRUPTED end, the partial answer saved
in the thread, the model's HTTP connection closed.  The next request on the thread continues
the conversation after the kept partial answer.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import httpx2
import orjson
import trio
from _common import check, open_model, orphaned_ids, require_extra

from trioagent import Agent
from trioagent.middleware import MiddlewareBase
from trioagent.session import SQLiteSessionStore
from trioagent.testing import ScriptedReply

require_extra("trioagent.web", "web")  # Hypercorn and the AG-UI event types

from trioagent.web import AGUIApp, serve  # noqa: E402

STORY = "Once upon a time, a request was cancelled and nothing was lost. " * 30


def run_input(thread: str, text: str) -> bytes:
    """An AG-UI RunAgentInput with one new user message."""
    return orjson.dumps(
        {
            "threadId": thread,
            "runId": f"run-{text[:8]}",
            "messages": [{"id": text[:8], "role": "user", "content": text}],
        }
    )


def sse_events(data: bytes) -> list[dict[str, object]]:
    return [orjson.loads(f[6:]) for f in data.split(b"\n\n") if f.startswith(b"data: ")]


async def leave_after(host: str, port: int, body: bytes, deltas: int) -> bytes:
    """A client that sends the run, reads ``deltas`` text deltas, and closes its connection."""
    received = b""
    async with await trio.open_tcp_stream(host, port) as stream:
        await stream.send_all(
            b"POST /agui HTTP/1.1\r\nHost: example\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        while received.count(b"TEXT_MESSAGE_CONTENT") < deltas:
            chunk = await stream.receive_some()
            if not chunk:
                check(False, "the server streams until the client leaves")
            received += chunk
    return received


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteSessionStore(Path(tmp) / "threads.sqlite3")
        async with trio.open_nursery() as nursery:
            model, server = await open_model(
                nursery,
                [
                    ScriptedReply(text=STORY, chunk_size=5, chunk_delay=0.01),
                    ScriptedReply(text="Where was I? Ah yes: nothing was lost."),
                ],
            )

            def make_agent(first: list[MiddlewareBase]) -> Agent:
                # A fresh agent per request; its conversation comes from the store.
                return Agent("assistant", "You tell stories.", model, middlewares=first)

            async with model, trio.open_nursery() as serving:
                app = AGUIApp(make_agent, store)
                (url,) = await serving.start(serve, app, "127.0.0.1", 0)
                address = httpx2.URL(url)
                print(f"serving on {url}")

                cut = await leave_after(
                    address.host, address.port or 80, run_input("t1", "Tell me a long story."), 3
                )
                deltas = re.findall(rb'"delta":"([^"]*)"', cut)
                print("the client left after:", b"".join(deltas).decode())
                with trio.move_on_after(10):
                    while app.running_threads:  # noqa: ASYNC110  # the reply saves and ends
                        await trio.sleep(0.01)
                check(app.running_threads == [], "the server ended the reply of the left client")

                async with httpx2.AsyncClient(base_url=url, timeout=60) as client:
                    thread = (await client.get("/agui/threads/t1")).json()
                    answer = thread["messages"][-1]
                    print("kept:", repr(answer["content"][:60]), answer.get("metadata"))
                    check(
                        answer.get("metadata") == {"finishedReason": "interrupted"},
                        "the thread's answer is marked interrupted",
                    )
                    if server is not None:
                        check(
                            0 < len(answer["content"]) < len(STORY),
                            "the partial answer is saved in the thread",
                        )

                    response = await client.post("/agui", content=run_input("t1", "Go on."))
                    events = sse_events(response.content)
                    print("next:", "".join(str(e.get("delta", "")) for e in events))
                    ends = [e for e in events if e["type"] in ("RUN_FINISHED", "RUN_ERROR")]
                    check(
                        len(ends) == 1 and events[-1] is ends[0], "exactly one RUN_FINISHED, last"
                    )
                    check(ends[0].get("outcome") == {"type": "success"}, "the next run completes")
                    thread = (await client.get("/agui/threads/t1")).json()
                roles = [m["role"] for m in thread["messages"]]
                check(
                    roles == ["user", "assistant", "user", "assistant"],
                    "the thread goes on after the kept answer",
                )
                if server is not None:
                    second = server.requests[-1].body
                    said = [
                        "".join(part["text"] for part in m["content"])
                        for m in second["messages"]
                        if m["role"] == "assistant"
                    ]
                    check(said == [answer["content"]], "the model saw the partial answer")
                    check(not orphaned_ids(second), "the next request is valid")
                    first = server.connections[0]
                    with trio.move_on_after(5):
                        await first.closed.wait()
                    check(first.closed.is_set(), "the interrupted stream's model connection closed")
                serving.cancel_scope.cancel()  # the server stops before the model closes
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)

"""100 concurrent SSE clients of one server, 30 of which close their connection mid-stream:
100 consistent threads in the store, exactly the 30 interrupted, no task or connection left.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
import trio
from web_kit import (
    Recorder,
    agent_factory,
    check_stream,
    disconnect_after,
    post_run,
    run_body,
    start,
    text_of,
    words,
)

from trioagent.event import AgentEvent, ReplyEndEvent
from trioagent.session import SQLiteSessionStore
from trioagent.testing import check_reply_rules
from trioagent.web import AGUIApp

CLIENTS = 100
LEAVING = 30
CHUNKS = 30


def _server_tasks(root: trio.lowlevel.Task) -> list[str]:
    """The names of the connection and request tasks still running under ``root``."""
    found: list[str] = []
    pending = [root]
    while pending:
        task = pending.pop()
        if "TCPServer" in task.name or "_handle" in task.name:
            found.append(task.name)
        pending.extend(t for n in task.child_nurseries for t in n.child_tasks)
    return found


async def test_100_clients_30_leave_mid_stream(nursery, tmp_path: Path) -> None:
    events: dict[str, list[AgentEvent]] = {}
    store = SQLiteSessionStore(tmp_path / "threads.sqlite3")
    app = AGUIApp(agent_factory(lambda: [words(CHUNKS)], Recorder(events), chunk_delay=0.02), store)
    base = await start(nursery, app)
    leaving = {f"t{i}" for i in range(LEAVING)}
    finished: dict[str, str] = {}

    async with httpx2.AsyncClient(
        base_url=base, limits=httpx2.Limits(max_connections=CLIENTS), timeout=60
    ) as client:

        async def one(thread: str) -> None:
            if thread in leaving:
                await disconnect_after(base, run_body(thread, "hi"), b"TEXT_MESSAGE_CONTENT", 3)
            else:
                stream = await post_run(client, run_body(thread, "hi"))
                assert check_stream(stream)["outcome"] == {"type": "success"}
                finished[thread] = text_of(stream)

        async with trio.open_nursery() as clients:
            for i in range(CLIENTS):
                clients.start_soon(one, f"t{i}")

    with trio.fail_after(30):
        while app.running_threads or _server_tasks(trio.lowlevel.current_task()):
            await trio.sleep(0.02)

    complete = "".join(f"w{i} " for i in range(CHUNKS))
    assert set(finished.values()) == {complete}
    assert sorted(await store.list()) == sorted(f"t{i}" for i in range(CLIENTS))
    reasons = {}
    for thread in await store.list():
        stored = await store.load(thread)
        assert stored is not None
        check_reply_rules(stored.state, "assistant", events[thread], where=thread)
        (end,) = [e for e in events[thread] if isinstance(e, ReplyEndEvent)]
        reasons[thread] = str(end.finished_reason)
        answer = stored.state.context[-1].get_text_content() or ""
        if thread in leaving:
            # The partial answer is saved: cut off, not the whole.
            assert complete.startswith(answer)
            assert answer != complete
        else:
            assert answer == complete
    assert {t for t, r in reasons.items() if r == "interrupted"} == leaving
    assert {t for t, r in reasons.items() if r == "completed"} == set(finished)

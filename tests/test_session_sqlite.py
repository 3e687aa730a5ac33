"""``SQLiteSessionStore`` over real files: the store contract, concurrent writers (one wins,
the others get a conflict, nothing is lost), a save cancelled while its thread runs, WAL mode,
and clear errors for corrupt data and unusable paths."""

from __future__ import annotations

import concurrent.futures
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import trio
import trio.testing
from session_kit import (
    WORKER,
    check_a_cancelled_save_completes_whole,
    check_a_damaged_record,
    check_store_contract,
    open_fresh_stores,
    sample_state,
)

from trioagent.agent import AgentState
from trioagent.message import UserMsg
from trioagent.serialization import dumps
from trioagent.session import (
    SessionConflictError,
    SessionStore,
    SessionStoreError,
    SQLiteSessionStore,
)


async def test_the_store_contract(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "sessions.sqlite3")
    assert isinstance(store, SessionStore)
    await check_store_contract(store)


async def test_one_file_in_wal_mode_created_with_its_directory(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "sessions.sqlite3"
    async with SQLiteSessionStore(path) as store:
        await store.save("s", AgentState(), expected_version=0)
    assert path.is_file()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert "sessions.sqlite3" in repr(store)


async def test_concurrent_writers_one_wins_the_others_conflict(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    await SQLiteSessionStore(path).save("s", sample_state(), expected_version=0)
    writers = 8
    outcomes: dict[int, object] = {}
    states = {}
    for i in range(writers):
        states[i] = sample_state(2)
        states[i].context.append(UserMsg("user", f"writer {i}"))

    async def write(i: int) -> None:
        # Each writer has its own store object (its own connections), as another worker would.
        try:
            outcomes[i] = await SQLiteSessionStore(path).save("s", states[i], expected_version=1)
        except SessionConflictError as exc:
            outcomes[i] = exc

    async with trio.open_nursery() as nursery:
        for i in range(writers):
            nursery.start_soon(write, i)
    winners = [i for i, o in outcomes.items() if o == 2]
    assert len(winners) == 1
    losers = [o for o in outcomes.values() if isinstance(o, SessionConflictError)]
    assert len(losers) == writers - 1
    assert all((e.expected, e.actual) == (1, 2) for e in losers)
    stored = await SQLiteSessionStore(path).load("s")
    assert stored is not None
    assert stored.version == 2
    assert dumps(stored.state) == dumps(states[winners[0]])  # the winner's state, whole


async def test_a_save_cancelled_while_its_thread_runs_still_commits_whole(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.sqlite3")
    await store.version("warm-up")  # the schema exists: the save below is one transaction
    # The cancellation comes once the save waits on its thread.
    await check_a_cancelled_save_completes_whole(store, trio.testing.wait_all_tasks_blocked)


async def test_a_corrupt_payload_is_a_store_error_naming_the_session(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = SQLiteSessionStore(path)
    await store.save("s", AgentState(), expected_version=0)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE sessions SET payload = ?", (b'{"context": 5}',))
    with pytest.raises(SessionStoreError, match="session 's' cannot be loaded"):
        await store.load("s")


@pytest.mark.parametrize(
    ("version", "payload", "readable"),
    [
        ("two", b"{}", None),  # a version that is not an integer
        (1.5, b"{}", None),
        (0, b"{}", None),  # versions start at 1
        (None, b"{}", None),  # wrong type in the column: SQLite's NULL
        (1, b"{not json", 1),
        (1, b"[1, 2]", 1),  # JSON of the wrong shape
        (1, b'{"context": 5}', 1),  # a field of the wrong type
        (1, 5, 1),  # not bytes at all
    ],
    ids=["text", "real", "zero", "null", "json", "shape", "field", "int-payload"],
)
async def test_a_damaged_record_is_a_typed_error_and_never_overwritten(
    tmp_path: Path, version: object, payload: object, readable: int | None
) -> None:
    path = tmp_path / "s.sqlite3"
    store = SQLiteSessionStore(path)
    await store.save("s", sample_state(), expected_version=0)
    with sqlite3.connect(path) as conn:
        # The table as an older or foreign writer might leave it: no NOT NULL on version.
        conn.execute("ALTER TABLE sessions RENAME TO old")
        conn.execute(
            "CREATE TABLE sessions (session_id TEXT PRIMARY KEY, version, payload, updated_at)"
        )
        conn.execute("INSERT INTO sessions VALUES ('s', ?, ?, 'now')", (version, payload))

    async def raw() -> object:
        with sqlite3.connect(path) as conn:
            return conn.execute("SELECT * FROM sessions").fetchall()

    await check_a_damaged_record(store, "s", raw, readable_version=readable)


def test_threads_and_processes_open_a_fresh_store_at_once(tmp_path: Path) -> None:
    """Several threads, then several processes, released together on fresh files: every first
    connection gets a usable WAL store (none fails with 'database is locked')."""
    threads, files = 4, 200  # the old race lost about one opening in a hundred
    go = threading.Barrier(threads)
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        jobs = [
            pool.submit(open_fresh_stores, str(tmp_path / "t"), files, go) for _ in range(threads)
        ]
        errors = [e for job in jobs for e in job.result(timeout=120)]
    assert errors == []
    start = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER.parent / "session_kit.py"),
                str(tmp_path / "p"),
                str(files // 4),
                str(start),
                str(n),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for n in range(threads)
    ]
    deadline = time.monotonic() + 60
    while not all(start.with_suffix(f".{n}").exists() for n in range(threads)):
        assert time.monotonic() < deadline, "the openers did not start"
        time.sleep(0.01)
    start.touch()  # all of them are waiting: go
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * threads, outputs
    for i in range(files // 4):
        with sqlite3.connect(tmp_path / f"p{i}.sqlite3") as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_an_unusable_path_is_a_store_error(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path)  # a directory
    with pytest.raises(SessionStoreError, match="SQLite session store"):
        await store.load("s")
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteSessionStore(tmp_path / "x", synchronous="OFF")  # type: ignore[arg-type]


async def test_full_synchronous_mode_round_trips(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.sqlite3", synchronous="FULL")
    await store.save("s", sample_state(), expected_version=0)
    assert (await store.version("s")) == 1

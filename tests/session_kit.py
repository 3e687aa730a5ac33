"""Helpers of the session tests: a real redis-server per test module, the store contract, and
the worker processes of the cross-process tests (``session_worker.py``).

redis-server missing is a failure, not a skip: ``.ci/run`` installs it.  Only when ``.ci/run``
could not install it (it then says so and sets ``TRIOAGENT_NO_REDIS_SERVER=1``) are the Redis
tests skipped, with that reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import trio

from trioagent.agent import AgentState
from trioagent.message import TextBlock, ToolCallBlock, ToolResultBlock, UserMsg
from trioagent.serialization import dumps
from trioagent.session import (
    SessionConflictError,
    SessionCorruptError,
    SessionStore,
    SQLiteSessionStore,
)

TESTS = Path(__file__).resolve().parent
WORKER = TESTS / "session_worker.py"
NO_REDIS_ENV = "TRIOAGENT_NO_REDIS_SERVER"


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A redis-server on a unix socket in a temporary directory (no TCP port, no disk
    persistence); yields its URL and stops it afterwards."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get(NO_REDIS_ENV):
            pytest.skip(f"redis-server could not be installed ({NO_REDIS_ENV} is set by .ci/run)")
        pytest.fail(
            "redis-server is not installed: the Redis session tests need it "
            "(apt-get install redis-server; .ci/run installs it)"
        )
    with tempfile.TemporaryDirectory(prefix="trioagent-redis-") as tmp:
        sock = Path(tmp) / "redis.sock"
        proc = subprocess.Popen(
            [
                binary,
                "--port", "0",
                "--unixsocket", str(sock),
                "--unixsocketperm", "700",
                "--save", "",
                "--appendonly", "no",
                "--dir", tmp,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait_ready(sock, proc)
            yield f"unix://{sock}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_ready(sock: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"redis-server exited with code {proc.returncode} at start")
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(1)
                s.connect(str(sock))
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.01)
    pytest.fail("redis-server did not answer PING within 15 s")


def unique(prefix: str = "ns") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def sample_state(n: int = 3) -> AgentState:
    """A state with ``n`` user messages and one answered tool call."""
    state = AgentState()
    for i in range(n):
        state.context.append(UserMsg("user", f"message {i} — ünïcode"))
    call = ToolCallBlock(id="c1", name="ask", input='{"x": "1"}')
    result = ToolResultBlock(id="c1", name="ask", output=[TextBlock(text="ok")])
    state.append_context("agent", [call, result])
    return state


async def check_store_contract(store: SessionStore) -> None:
    """What every store does: versions from 1, conflicts, list, delete, a lossless payload."""
    sid = unique("s")
    assert await store.load(sid) is None
    assert await store.version(sid) == 0
    state = sample_state()
    assert await store.save(sid, state, expected_version=0) == 1
    loaded = await store.load(sid)
    assert loaded is not None
    assert (loaded.session_id, loaded.version) == (sid, 1)
    assert dumps(loaded.state) == dumps(state)
    assert await store.version(sid) == 1
    # A stale version is refused and changes nothing.
    with pytest.raises(SessionConflictError) as caught:
        await store.save(sid, AgentState(), expected_version=0)
    assert (caught.value.session_id, caught.value.expected, caught.value.actual) == (sid, 0, 1)
    assert dumps((await store.load(sid)).state) == dumps(state)  # type: ignore[union-attr]
    state.context.append(UserMsg("user", "more"))
    assert await store.save(sid, state, expected_version=1) == 2
    other = unique("a")
    await store.save(other, AgentState(), expected_version=0)
    names = await store.list()
    assert {sid, other} <= set(names)
    assert names == sorted(names)
    with pytest.raises(SessionConflictError):
        await store.delete(sid, expected_version=1)
    assert await store.delete(sid, expected_version=2) is True
    assert await store.delete(sid) is False
    assert await store.load(sid) is None
    assert sid not in await store.list()
    # Saving a deleted session starts again from version 0.
    with pytest.raises(SessionConflictError):
        await store.save(sid, state, expected_version=2)
    assert await store.save(sid, state, expected_version=0) == 1
    for bad in ("", "a\nb", "x" * 600):
        with pytest.raises(ValueError, match="session_id"):
            await store.load(bad)
    with pytest.raises(TypeError):
        await store.save(sid, {"context": []}, expected_version=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected_version"):
        await store.save(sid, state, expected_version=-1)


async def check_a_cancelled_save_completes_whole(
    store: SessionStore, until_saving: Callable[[], Awaitable[object]]
) -> None:
    """A save cancelled while it runs (``until_saving`` returns once it is under way) still
    stores the whole state, the cancellation lands after it, and the store stays usable."""
    state = sample_state(2000)
    versions: list[int] = []

    async def save() -> None:
        versions.append(await store.save("s", state, expected_version=0))
        await trio.sleep(0)  # the cancellation lands here, after the save
        raise AssertionError("not cancelled")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(save)
        await until_saving()
        nursery.cancel_scope.cancel()
    assert versions == [1]  # the save returned, then the cancellation landed
    stored = await store.load("s")
    assert stored is not None
    assert stored.version == 1
    assert dumps(stored.state) == dumps(state)
    assert await store.save("s", AgentState(), expected_version=1) == 2


async def check_a_damaged_record(
    store: SessionStore,
    session_id: str,
    raw: Callable[[], Awaitable[object]],
    *,
    readable_version: int | None,
) -> None:
    """A damaged record (``raw`` reads it as stored): loading it is a
    :class:`SessionCorruptError` naming the session, no save or conditional delete changes it,
    and a delete without ``expected_version`` removes it.  ``readable_version``: the record's
    version when only its payload is damaged (``None``: the version cannot be read either)."""
    before = await raw()
    with pytest.raises(SessionCorruptError, match=f"session '{session_id}'") as caught:
        await store.load(session_id)
    assert caught.value.session_id == session_id
    if readable_version is None:
        with pytest.raises(SessionCorruptError, match=f"session '{session_id}'"):
            await store.version(session_id)
        for expected in (0, 1, 2):
            with pytest.raises(SessionCorruptError, match=f"session '{session_id}'"):
                await store.save(session_id, sample_state(), expected_version=expected)
            with pytest.raises(SessionCorruptError):
                await store.delete(session_id, expected_version=expected)
    else:
        assert await store.version(session_id) == readable_version
        with pytest.raises(SessionConflictError):  # not an overwrite as a new session
            await store.save(session_id, sample_state(), expected_version=0)
    assert await raw() == before  # nothing overwritten
    assert session_id in await store.list()
    assert await store.delete(session_id) is True
    assert await store.load(session_id) is None
    assert await store.save(session_id, sample_state(), expected_version=0) == 1


def run_worker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``session_worker.py`` in a fresh interpreter; it must exit 0."""
    done = subprocess.run(
        [sys.executable, str(WORKER), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert done.returncode == 0, f"worker {args}:\n{done.stdout}\n{done.stderr}"
    return done


def start_worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def open_fresh_stores(prefix: str, files: int, go: threading.Barrier | None) -> list[str]:
    """Open each of ``files`` fresh SQLite stores (``{prefix}{i}.sqlite3``) in one event loop,
    each time released with the other threads' loops by ``go``; the errors, as text."""
    errors: list[str] = []

    async def main() -> None:
        await trio.to_thread.run_sync(lambda: None)  # a worker thread ready before the race
        for i in range(files):
            store = SQLiteSessionStore(f"{prefix}{i}.sqlite3")
            if go is not None:
                go.wait()  # blocks this loop on purpose: every thread's first open at once
            try:
                await store.version("s")
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

    trio.run(main)
    return errors


if __name__ == "__main__":
    # python session_kit.py PREFIX FILES GO N: say "ready" (the file GO.N), wait for GO, then
    # open the fresh stores; exit 1 with the errors if any.
    prefix, files, go, n = sys.argv[1:5]
    Path(go).with_suffix(f".{n}").touch()
    while not Path(go).exists():
        time.sleep(0.001)
    failures = open_fresh_stores(prefix, int(files), None)
    print("\n".join(failures))
    sys.exit(1 if failures else 0)

"""``SQLiteSessionStore``: sessions in one SQLite file (WAL), the embedded default.

Every operation opens its own connection in a worker thread (``trio.to_thread.run_sync``), so
the event loop never waits on the disk and the store needs no closing.  The thread is never
abandoned (``abandon_on_cancel=False``): a save cancelled while its thread runs still commits
or rolls back its whole transaction, and the cancellation is delivered when it returns.  A
process killed at any moment leaves the last committed state (SQLite's atomic commit).

Any number of threads and processes may open a fresh file at once: the first connections
race to switch it to WAL, and SQLite answers a loser "database is locked" at once (no busy
wait); that is retried, within ``timeout``.
"""

from __future__ import annotations

import builtins
import functools
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

import trio

from .._core.ids import generate_timestamp
from ..agent import AgentState
from ._store import (
    SessionConflictError,
    SessionStoreError,
    StoredSession,
    check_session_id,
    check_version,
    decode_state,
    encode_state,
    stored_version,
)

__all__ = ["SQLiteSessionStore"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    payload BLOB NOT NULL,
    updated_at TEXT NOT NULL
)
"""


class SQLiteSessionStore:
    """Sessions in the SQLite file at ``path`` (created with its directory when missing).

    Args:
        path: the database file; several processes may share it.
        timeout: seconds a writer waits for another's transaction (SQLite's busy timeout).
        synchronous: ``"NORMAL"`` (default) survives a killed process; ``"FULL"`` also
            survives a power loss, at the cost of a disk flush per save.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        self.path = Path(path)
        self._timeout = timeout
        self._synchronous = synchronous
        self._ready = False

    def __repr__(self) -> str:
        return f"<SQLiteSessionStore {str(self.path)!r}>"

    async def __aenter__(self) -> SQLiteSessionStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Nothing to close: every operation has its own connection."""

    # -- the protocol ---------------------------------------------------------------------------

    async def load(self, session_id: str) -> StoredSession | None:
        check_session_id(session_id)
        row = await self._run(self._load, session_id)
        if row is None:
            return None
        version, payload = row
        return StoredSession(
            session_id, stored_version(session_id, version), decode_state(session_id, payload)
        )

    async def version(self, session_id: str) -> int:
        check_session_id(session_id)
        return await self._run(self._version, session_id)

    async def save(self, session_id: str, state: AgentState, *, expected_version: int) -> int:
        check_session_id(session_id)
        check_version(expected_version)
        payload = encode_state(state)
        return await self._run(self._save, session_id, payload, expected_version)

    async def list(self) -> builtins.list[str]:
        return await self._run(self._list)

    async def delete(self, session_id: str, *, expected_version: int | None = None) -> bool:
        check_session_id(session_id)
        if expected_version is not None:
            check_version(expected_version)
        return await self._run(self._delete, session_id, expected_version)

    # -- in the worker thread ---------------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        try:
            # Never abandoned: the transaction always completes before a cancellation lands.
            return await trio.to_thread.run_sync(
                functools.partial(self._in_thread, fn, *args), abandon_on_cancel=False
            )
        except sqlite3.Error as exc:
            raise SessionStoreError(f"SQLite session store {str(self.path)!r}: {exc}") from exc

    def _in_thread(self, fn: Callable[..., T], *args: object) -> T:
        conn = self._connect()
        try:
            return fn(conn, *args)
        finally:
            conn.close()

    def _connect(self) -> sqlite3.Connection:
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are opened explicitly (BEGIN IMMEDIATE).
        conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
        try:
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            if not self._ready:
                self._prepare(conn)
                self._ready = True
        except BaseException:
            conn.close()
            raise
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL and create the table; a first connection that loses the
        race for the switch ("database is locked", returned without a busy wait) retries."""
        deadline = time.monotonic() + self._timeout
        pause = 0.001
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() == "wal":
                    conn.execute(_SCHEMA)
                    return
                problem = f"the file stays in journal mode {mode!r}, not WAL"
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                problem = str(exc)
            if time.monotonic() >= deadline:
                raise sqlite3.OperationalError(problem)
            time.sleep(pause)  # in the worker thread
            pause = min(pause * 2, 0.05)

    @staticmethod
    def _load(conn: sqlite3.Connection, session_id: str) -> tuple[object, object] | None:
        row = conn.execute(
            "SELECT version, payload FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        return None if row is None else (row[0], row[1])

    @staticmethod
    def _version(conn: sqlite3.Connection, session_id: str) -> int:
        row = conn.execute(
            "SELECT version FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        return 0 if row is None else stored_version(session_id, row[0])

    @staticmethod
    def _save(conn: sqlite3.Connection, session_id: str, payload: bytes, expected: int) -> int:
        conn.execute("BEGIN IMMEDIATE")  # the write lock first: the check and the write are one
        try:
            current = SQLiteSessionStore._version(conn, session_id)
            if current != expected:
                raise SessionConflictError(session_id, expected, current)
            conn.execute(
                "INSERT INTO sessions (session_id, version, payload, updated_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
                "version = excluded.version, payload = excluded.payload, "
                "updated_at = excluded.updated_at",
                (session_id, current + 1, payload, generate_timestamp()),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return current + 1

    @staticmethod
    def _list(conn: sqlite3.Connection) -> builtins.list[str]:
        rows = conn.execute("SELECT session_id FROM sessions ORDER BY session_id").fetchall()
        return [str(row[0]) for row in rows]

    @staticmethod
    def _delete(conn: sqlite3.Connection, session_id: str, expected: int | None) -> bool:
        """Remove the row; with ``expected``, only at that version (a damaged row's version is
        unknown: only an unconditional delete removes it)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            if expected is not None:
                current = SQLiteSessionStore._version(conn, session_id)
                if current != expected:
                    raise SessionConflictError(session_id, expected, current)
            deleted = conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return deleted.rowcount > 0

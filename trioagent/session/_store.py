"""The store protocol: load, save with a version check, list and delete agent states.

A session is one :class:`~trioagent.agent.AgentState` under a name, with a version that
grows by one on every save.  A save names the version it read (``expected_version``; ``0`` for
a session that does not exist yet) and fails with :class:`SessionConflictError` when the
stored version is another: two workers never silently overwrite each other, the loser learns
it and can reload.
"""

from __future__ import annotations

import builtins
from typing import Protocol, runtime_checkable

import attrs

from ..agent import AgentState
from ..exception import TrioagentError
from ..serialization import SerializationError, dumps, loads

__all__ = [
    "SessionConflictError",
    "SessionStore",
    "SessionStoreError",
    "StoredSession",
    "check_session_id",
    "check_version",
    "decode_state",
    "encode_state",
]

MAX_SESSION_ID = 512


class SessionStoreError(TrioagentError):
    """A store could not do what was asked (unreachable, corrupt data, a bad name)."""


class SessionConflictError(SessionStoreError):
    """A save or delete expected one version of a session and found another.

    Attributes:
        session_id: the session's name.
        expected: the version the caller read (``0``: it expected no session).
        actual: the version in the store (``0``: there is none).
    """

    def __init__(self, session_id: str, expected: int, actual: int) -> None:
        self.session_id = session_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"session {session_id!r} is at version {actual}, not {expected}: another writer "
            "saved it first (reload it and try again)"
        )


@attrs.frozen
class StoredSession:
    """A loaded session: its name, its version and the state."""

    session_id: str
    version: int
    state: AgentState


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions live.  Every method is safe to call from many tasks at once.

    A save or delete is never cut short by a cancellation: it completes (or fails) and the
    cancellation is delivered after it, so a stored session is always one whole state.
    """

    async def load(self, session_id: str) -> StoredSession | None:
        """The stored session, or ``None`` when there is none."""

    async def version(self, session_id: str) -> int:
        """The stored version (``0`` when there is no such session); cheaper than a load."""

    async def save(self, session_id: str, state: AgentState, *, expected_version: int) -> int:
        """Store ``state`` if the stored version is ``expected_version``; returns the new one.

        Raises:
            SessionConflictError: the stored version is another.
        """

    async def list(self) -> builtins.list[str]:
        """The names of the stored sessions, sorted."""

    async def delete(self, session_id: str, *, expected_version: int | None = None) -> bool:
        """Remove a session; returns whether there was one.

        Raises:
            SessionConflictError: ``expected_version`` is given and is not the stored one.
        """


def check_session_id(session_id: object) -> str:
    """``session_id`` if it is a usable name: a non-empty string of printable characters."""
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, got {type(session_id).__name__}")
    if not session_id or len(session_id) > MAX_SESSION_ID or not session_id.isprintable():
        raise ValueError(
            f"session_id must be 1 to {MAX_SESSION_ID} printable characters, got {session_id!r}"
        )
    return session_id


def check_version(version: object) -> int:
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ValueError(f"expected_version must be an int >= 0, got {version!r}")
    return version


def encode_state(state: AgentState) -> bytes:
    """The state's JSON as UTF-8 bytes (taken at once, before any other task runs)."""
    if not isinstance(state, AgentState):
        raise TypeError(f"a session stores an AgentState, got {type(state).__name__}")
    return dumps(state).encode()


def decode_state(session_id: str, payload: bytes) -> AgentState:
    """The stored JSON back into a state; a corrupt payload is a :class:`SessionStoreError`."""
    try:
        return loads(payload, AgentState)
    except (SerializationError, ValueError, UnicodeDecodeError) as exc:
        raise SessionStoreError(f"session {session_id!r} cannot be loaded: {exc}") from exc

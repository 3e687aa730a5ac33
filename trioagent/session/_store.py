"""The store protocol: load, save with a version check, list and delete agent states.

A session is one :class:`~trioagent.agent.AgentState` under a name, with a version that
grows by one on every save.  A save names the version it read (``expected_version``; ``0`` for
a session that does not exist yet) and fails with :class:`SessionConflictError` when the
stored version is another: two workers never silently overwrite each other, the loser learns
it and can reload.

A record the store cannot read (a version that is not a whole number, a payload that is not a
state, a missing field, a key of the wrong type) is a :class:`SessionCorruptError`, and is
never written over unawares (see there).
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
    "SessionCorruptError",
    "SessionStore",
    "SessionStoreError",
    "StoredSession",
    "check_session_id",
    "check_version",
    "decode_state",
    "encode_state",
    "stored_version",
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


class SessionCorruptError(SessionStoreError):
    """A stored session cannot be read; the store leaves it as it is.

    When its version cannot be read, every save and every delete with ``expected_version``
    refuses with this error; when only its payload is damaged, only a save naming exactly its
    version replaces it.  ``delete(session_id)`` without ``expected_version`` removes it.

    Attributes:
        session_id: the session's name.
        problem: what is wrong with the stored record.
    """

    def __init__(self, session_id: str, problem: str) -> None:
        self.session_id = session_id
        self.problem = problem
        super().__init__(f"session {session_id!r} cannot be loaded: {problem}")


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


#: The most digits a stored version may have (a version is a count of saves).
_MAX_VERSION_DIGITS = 15


def stored_version(session_id: str, raw: object) -> int:
    """A version as a store holds it (an int, or its decimal digits as bytes or text),
    checked: a whole number from 1.

    Raises:
        SessionCorruptError: anything else.
    """
    if isinstance(raw, bytes | str):
        text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
        if text.isascii() and text.isdigit() and len(text) <= _MAX_VERSION_DIGITS:
            raw = int(text)
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 1:
        return raw
    shown = repr(raw if not isinstance(raw, bytes | str) or len(raw) <= 40 else raw[:40])
    raise SessionCorruptError(session_id, f"its version {shown} is not a whole number from 1")


def encode_state(state: AgentState) -> bytes:
    """The state's JSON as UTF-8 bytes (taken at once, before any other task runs)."""
    if not isinstance(state, AgentState):
        raise TypeError(f"a session stores an AgentState, got {type(state).__name__}")
    return dumps(state).encode()


def decode_state(session_id: str, payload: object) -> AgentState:
    """The stored JSON (bytes, or text) back into a state.

    Raises:
        SessionCorruptError: the payload is not the JSON of a state.
    """
    if isinstance(payload, str):
        payload = payload.encode("utf-8", "surrogatepass")
    if not isinstance(payload, bytes):
        raise SessionCorruptError(
            session_id, f"its payload is a {type(payload).__name__}, not JSON bytes"
        )
    try:
        return loads(payload, AgentState)
    except (SerializationError, ValueError, UnicodeDecodeError) as exc:
        raise SessionCorruptError(session_id, f"its payload is not a state: {exc}") from exc

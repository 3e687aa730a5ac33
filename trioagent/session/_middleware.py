"""``SessionMiddleware``: an agent whose state lives in a :class:`SessionStore`.

Before each reply it brings the agent's state up to date with the stored session; it saves
when the reply ends (before the end event goes on, so a consumer that sees ``REPLY_END`` can
rely on the save) and when the reply parks.  With ``checkpoints`` (the default) it also saves
around every reasoning step, so a process killed mid-reply leaves the state of its last step:
loaded again, its calls without a result are answered as interrupted before the next reply.

A middleware rather than an agent option: the agent stays unaware of stores, and the
middleware is one layer the user places (outermost, so it saves what every inner layer did).
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
import trio

from .._core.chain import Kwargs, NextHandler
from .._core.emit import Emit
from ..agent import AgentLike, AgentState, ReplyItem
from ..event import ReplyEndEvent
from ..middleware import MiddlewareBase
from ._store import SessionStore, SessionStoreError, check_session_id

__all__ = ["SessionMiddleware"]

logger = logging.getLogger("trioagent.session")

MIDDLEWARE_KEY = "session"
SAVE_GRACE = 10.0  # seconds a final save may take while a cancellation waits


class SessionMiddleware(MiddlewareBase):
    """Keep an agent's state in ``store`` under ``session_id``.

    Args:
        store: a :class:`SessionStore` (``SQLiteSessionStore``, ``RedisSessionStore``, ...).
        session_id: the session's name; by default the agent's ``state.session_id``.
        checkpoints: also save before and after every reasoning step (default ``True``).

    The version the agent's state was loaded or saved at is kept in
    ``state.middle_context["session"]["version"]``.  A reply starts from the stored session
    when the store has another version than that (another worker saved it, or the agent is
    new); otherwise the agent's own state is kept, with whatever was observed since.  When two
    agents reply on one session at once, the second save fails with
    :class:`SessionConflictError` (the reply ends with ERROR and the error propagates); the
    store still holds the first agent's whole state.

    Place it first in ``middlewares`` so that it saves after every other layer's changes.
    """

    def __init__(
        self, store: SessionStore, session_id: str | None = None, *, checkpoints: bool = True
    ) -> None:
        if not isinstance(store, SessionStore):
            raise TypeError(f"store must be a SessionStore, got {type(store).__name__}")
        self.store = store
        self.session_id = None if session_id is None else check_session_id(session_id)
        self.checkpoints = checkpoints

    def __repr__(self) -> str:
        return f"<SessionMiddleware {self.store!r} session_id={self.session_id!r}>"

    async def get_middleware_key(self) -> str:
        return MIDDLEWARE_KEY

    # -- public helpers -------------------------------------------------------------------------

    def key_of(self, agent: AgentLike) -> str:
        """The session the agent's state is stored under."""
        return self.session_id or agent.state.session_id

    async def restore(self, agent: AgentLike) -> bool:
        """Bring ``agent.state`` up to date with the store now (what a reply does first).

        For a caller that needs the stored state before replying, e.g. to read the parked
        calls of a session a reply must resume.  Returns whether a stored state was taken.
        """
        key = self.key_of(agent)
        if self.session_id is not None:
            agent.state.session_id = key
        known = version_of(agent.state)
        stored_version = await self.store.version(key)
        if stored_version == known:
            return False
        if stored_version == 0:
            logger.warning("session %r was deleted from the store; it will be saved anew", key)
            set_version(agent.state, 0)
            return False
        stored = await self.store.load(key)
        if stored is None:  # deleted between the two calls
            set_version(agent.state, 0)
            return False
        adopt(agent.state, stored.state)
        if self.session_id is not None:
            agent.state.session_id = key
        set_version(agent.state, stored.version)
        return True

    async def save(self, agent: AgentLike) -> int:
        """Save ``agent.state`` now; returns the new version.

        Raises:
            SessionConflictError: the store holds another version than the agent's.
            SessionStoreError: the store failed.
        """
        state = agent.state
        expected = version_of(state)
        set_version(state, expected + 1)  # the saved payload carries its own version
        try:
            version = await self.store.save(self.key_of(agent), state, expected_version=expected)
        except BaseException:
            set_version(state, expected)
            raise
        set_version(state, version)
        return version

    # -- hooks ------------------------------------------------------------------------------------

    async def on_reply(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        await self.restore(agent)
        saved_end = False
        failed = False  # a save failed: the error propagates, no second try on the way out

        async def sink(item: ReplyItem) -> None:
            nonlocal saved_end, failed
            if isinstance(item, ReplyEndEvent):
                try:
                    await self.save(agent)
                except SessionStoreError:
                    failed = True
                    raise
                saved_end = True
            await emit(item)

        try:
            await next_handler(sink)
        except SessionStoreError:
            failed = True
            raise
        finally:
            if not saved_end and not failed:
                # Parked, or ended without an end event reaching this layer: save what is.
                with trio.CancelScope(shield=True) as scope:
                    # Shielded so the state of a cancelled reply is saved; bounded by SAVE_GRACE.
                    scope.deadline = trio.current_time() + SAVE_GRACE
                    await self.save(agent)

    async def on_reasoning(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        if self.checkpoints:
            await self.save(agent)  # the input, or the results of the last round of tools
        await next_handler()
        if self.checkpoints:
            await self.save(agent)  # the model's answer, before its calls run


def version_of(state: AgentState) -> int:
    """The stored version ``state`` was loaded or saved at (``0``: never)."""
    entry = state.middle_context.get(MIDDLEWARE_KEY)
    version = entry.get("version") if isinstance(entry, dict) else None
    return version if isinstance(version, int) and not isinstance(version, bool) else 0


def set_version(state: AgentState, version: int) -> None:
    entry = state.middle_context.get(MIDDLEWARE_KEY)
    if not isinstance(entry, dict):
        entry = state.middle_context[MIDDLEWARE_KEY] = {}
    entry["version"] = version


def adopt(target: AgentState, source: AgentState) -> None:
    """Make ``target`` the stored state, in place: objects holding ``target`` (the agent's
    permission engine holds its permission context) see the stored values."""
    for field in attrs.fields(AgentState):
        if field.name == "permission_context":
            _copy_fields(target.permission_context, source.permission_context)
        else:
            setattr(target, field.name, getattr(source, field.name))


def _copy_fields(target: Any, source: Any) -> None:
    for field in attrs.fields(type(source)):
        setattr(target, field.name, getattr(source, field.name))

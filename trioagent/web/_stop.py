"""Stop requests that cross processes: a Stop reaching one server interrupts a reply in another.

A :class:`StopBus` carries thread ids.  Each server process listens on it and interrupts its own
running reply of a thread it hears about; a Stop that reaches a process publishes the thread on
it (after interrupting a local reply, if there is one).  :class:`RedisStopBus` is the bus of
servers that share a ``RedisSessionStore``: Redis pub/sub on one channel.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import trio

from ..exception import MissingExtraError

if TYPE_CHECKING:
    import coredis

__all__ = ["RedisStopBus", "StopBus"]


@runtime_checkable
class StopBus(Protocol):
    """Carries Stop requests (thread ids) between server processes."""

    async def publish(self, thread_id: str) -> None:
        """Tell every listening process to interrupt its running reply of ``thread_id``."""

    async def listen(
        self,
        on_stop: Callable[[str], object],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Call ``on_stop(thread_id)`` for every Stop published, until cancelled; reports
        ``task_status.started()`` once subscribed (a Stop published after that is heard)."""


class RedisStopBus:
    """Stop requests over Redis pub/sub (the ``redis`` extra).

    Args:
        url: the Redis server (as for ``RedisSessionStore``; never shown in a repr).
        namespace: the channel is ``<namespace>:stop``.

    Use it as an async context manager (it opens and closes its own connection pool).
    """

    def __init__(self, url: str, *, namespace: str = "trioagent") -> None:
        self._url = url
        self.channel = f"{namespace}:stop"
        self._client: coredis.Redis[str] | None = None
        self._stack: contextlib.AsyncExitStack | None = None

    def __repr__(self) -> str:
        return f"<RedisStopBus channel={self.channel!r}>"

    async def __aenter__(self) -> RedisStopBus:
        try:
            import coredis
        except ImportError as exc:
            raise MissingExtraError("RedisStopBus", "redis", module="coredis") from exc
        stack = contextlib.AsyncExitStack()
        try:
            client: coredis.Redis[str] = coredis.Redis.from_url(self._url, decode_responses=True)
            await stack.enter_async_context(client)
        except BaseException:
            await stack.aclose()
            raise
        self._client, self._stack = client, stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    def _redis(self) -> coredis.Redis[str]:
        if self._client is None:
            raise RuntimeError("RedisStopBus is not open: use `async with RedisStopBus(url)`")
        return self._client

    async def publish(self, thread_id: str) -> None:
        await self._redis().publish(self.channel, thread_id)

    async def listen(
        self,
        on_stop: Callable[[str], object],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async with self._redis().pubsub(
            channels=[self.channel], ignore_subscribe_messages=True
        ) as pubsub:
            task_status.started()
            async for message in pubsub:
                data = message.get("data")
                if message.get("type") == "message" and isinstance(data, str):
                    on_stop(data)

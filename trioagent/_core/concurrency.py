"""Small structured-concurrency helpers shared by the chains, models and tools.

* :func:`unwrap_group` turns a nursery's exception group back into the one exception a caller
  expects, so hooks and callers can keep using plain ``except ModelError:``.
* :class:`PullStream` is the pull form of an emit-callback chain (``next_handler.stream()``):
  the inner layers run in a child task and their items cross over a memory channel.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, Protocol

import trio

__all__ = [
    "EndSettler",
    "PullStream",
    "is_cancellation",
    "raise_as_is",
    "reraise_unwrapped",
    "unwrap_group",
]

Emit = Callable[[Any], Awaitable[None]]


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def unwrap_group(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception a caller of a nursery expects instead of the nursery's group.

    * only cancellations: the first ``Cancelled``;
    * one error (next to any cancellations): that error -- looked for through nested groups,
      so a lone error deep in groups is unwrapped too, but a group raised with several errors
      is returned as it was raised, not wrapped once more;
    * several errors: the group itself.
    """
    errors = [e for e in group.exceptions if not is_cancellation(e)]
    if not errors:
        return _leaves(group)[0]
    if len(errors) > 1:
        return group
    (error,) = errors
    return unwrap_group(error) if isinstance(error, BaseExceptionGroup) else error


def reraise_unwrapped(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Raise :func:`unwrap_group` of ``group`` (from its ``except`` block) as if it had never
    been in a group: its own ``__cause__`` and ``__context__`` kept, not the group's."""
    raise_as_is(unwrap_group(group))


def raise_as_is(exc: BaseException) -> NoReturn:
    """Raise ``exc`` from inside an ``except`` block without chaining the exception being
    handled to it: its own ``__cause__`` and ``__context__`` are kept (and no cycle forms when
    the handled exception holds or wraps ``exc``)."""
    cause, context, suppress = exc.__cause__, exc.__context__, exc.__suppress_context__
    try:
        raise exc
    finally:
        exc.__cause__, exc.__context__, exc.__suppress_context__ = cause, context, suppress
        del exc


def is_cancellation(exc: BaseException) -> bool:
    """``trio.Cancelled``, or a group made only of cancellations."""
    return all(isinstance(leaf, trio.Cancelled) for leaf in _leaves(exc))


class EndSettler(Protocol):
    """The agent side of a pull layer in the ``on_reply`` chain."""

    async def settle_end(self, send: trio.MemorySendChannel[Any]) -> None:
        """Wait until an end event handed to the puller was delivered or dropped."""

    def note_failure(self, exc: BaseException) -> None:
        """The puller failed with ``exc``: the inner layers about to be cancelled should end
        the reply with ERROR (not INTERRUPTED)."""


class PullStream:
    """``async with next_handler.stream() as items:`` — run inner layers in a child task.

    ``inner(sink)`` runs the inner layers with ``sink`` as their emit; a value it returns (a
    tool chain's final response) is handed over last.  The channel has no buffer, so the inner
    layers advance only as fast as the puller takes items, as in the callback form.  Leaving
    the block early cancels them; items they still produce while unwinding (such as an
    INTERRUPTED end event) go straight to ``emit``, so nothing is lost.

    Written as a class, not ``@asynccontextmanager``: the library has no async generators.
    """

    def __init__(
        self,
        inner: Callable[[Emit], Awaitable[Any]],
        emit: Emit,
        settler: EndSettler | None = None,
    ) -> None:
        self._inner = inner
        self._emit = emit
        self._settler = settler
        self._stack = contextlib.AsyncExitStack()
        self._nursery: trio.Nursery | None = None
        self._recv: trio.MemoryReceiveChannel[Any] | None = None
        self._puller_gone = False

    async def __aenter__(self) -> trio.MemoryReceiveChannel[Any]:
        send, recv = trio.open_memory_channel[Any](0)
        self._recv = recv
        try:
            self._nursery = await self._stack.enter_async_context(trio.open_nursery())
        except BaseException:
            send.close()
            recv.close()
            raise
        self._nursery.start_soon(self._run_inner, send)
        return recv

    async def _offer(self, send: trio.MemorySendChannel[Any], item: Any) -> bool:
        """Hand ``item`` to the puller; ``False`` once it has gone.

        Never raises for a departed puller: that would replace a ``Cancelled`` unwinding the
        inner layers (the bug the checkpoint sweep found in the prototype).
        """
        if self._puller_gone:
            return False
        try:
            await send.send(item)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._puller_gone = True
            return False
        return True

    async def _run_inner(self, send: trio.MemorySendChannel[Any]) -> None:
        async def sink(item: Any) -> None:
            if not await self._offer(send, item):
                await self._emit(item)  # the puller left: deliver it outward ourselves
            elif self._settler is not None and getattr(item, "type", None) == "REPLY_END":
                await self._settler.settle_end(send)

        with send:
            result = await self._inner(sink)
            if result is not None:
                await self._offer(send, result)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> bool:
        assert self._recv is not None
        assert self._nursery is not None
        if exc is not None and self._settler is not None and not is_cancellation(exc):
            self._settler.note_failure(exc)
        self._puller_gone = True
        self._recv.close()
        if exc_type is None:
            # The puller stopped before the inner layers finished: cancel them, as leaving a
            # nursery block should.
            self._nursery.cancel_scope.cancel()
        try:
            return bool(await self._stack.__aexit__(exc_type, exc, tb))
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)

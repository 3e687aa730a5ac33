"""The onion chain runtime (DESIGN.md §3).

Streaming hooks run in the caller's task: every layer receives an ``emit`` callback that passes
items outward, and a :class:`NextHandler` that runs the inner layers.  Items of the inner layers
go to the ``sink`` given to ``next_handler`` (by default the layer's own ``emit``), so a layer
that does not wrap ``emit`` costs nothing per item.  Channels appear only where an item crosses
a task boundary: :meth:`NextHandler.stream` (opt-in pull style) runs the inner layers in a child
task and hands back a ``trio.MemoryReceiveChannel``.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import trio

__all__ = [
    "AwaitHandler",
    "Emit",
    "Handler",
    "NextHandler",
    "compose_awaitable",
    "compose_streaming",
    "unwrap_group",
]

Emit = Callable[[Any], Awaitable[None]]
Handler = Callable[[dict[str, Any], Emit], Awaitable[None]]
T = TypeVar("T")
AwaitHandler = Callable[[dict[str, Any]], Awaitable[Any]]


class EndSettler(Protocol):
    """Lets a pull layer wait until an end event it passed on was either delivered or dropped."""

    async def settle_end(self, send: trio.MemorySendChannel[Any]) -> None: ...


class StreamingHook(Protocol):
    def __call__(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: NextHandler, emit: Emit
    ) -> Awaitable[None]: ...


class NextHandler:
    """Runs the inner layers of a streaming hook.

    ``await next_handler(sink=None, /, **overrides)`` runs them with
    ``{**input_kwargs, **overrides}``; their items go to ``sink`` (default: this layer's
    ``emit``).  Calling it with no arguments forwards what this layer received, including
    in-place changes to ``input_kwargs``.

    ``async with next_handler.stream(**overrides) as items:`` runs them in a child task and
    hands back a ``trio.MemoryReceiveChannel`` of their items (pull style, e.g. to race the
    stream against a timer).  Leaving the block early cancels the inner layers; items they still
    produce while unwinding (such as the INTERRUPTED end event) go straight to this layer's
    ``emit``, so nothing is lost.
    """

    __slots__ = ("_emit", "_inner", "_kwargs", "_settler")

    def __init__(
        self,
        inner: Handler,
        kwargs: dict[str, Any],
        emit: Emit,
        settler: EndSettler | None = None,
    ) -> None:
        self._inner = inner
        self._kwargs = kwargs
        self._emit = emit
        self._settler = settler

    def __call__(self, sink: Emit | None = None, /, **overrides: Any) -> Awaitable[None]:
        kwargs = {**self._kwargs, **overrides} if overrides else self._kwargs
        return self._inner(kwargs, self._emit if sink is None else sink)

    def stream(self, **overrides: Any) -> PullStream:
        """Run the inner layers in a child task; see the class docstring."""
        kwargs = {**self._kwargs, **overrides} if overrides else self._kwargs
        return PullStream(self._inner, kwargs, self._emit, self._settler)


class PullStream:
    """The async context manager behind :meth:`NextHandler.stream`.

    Written as a class (not ``@asynccontextmanager``) because the library contains no async
    generators.  The channel has no buffer, so the inner layers advance only as fast as the
    puller takes items, as in the callback form.
    """

    def __init__(
        self, inner: Handler, kwargs: dict[str, Any], emit: Emit, settler: EndSettler | None
    ) -> None:
        self._inner = inner
        self._kwargs = kwargs
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

    async def _run_inner(self, send: trio.MemorySendChannel[Any]) -> None:
        async def sink(item: Any) -> None:
            if self._puller_gone:
                await self._emit(item)
                return
            try:
                await send.send(item)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                # The puller left (it finished, failed or was cancelled): deliver the item
                # outward ourselves.  Raising here would replace a Cancelled that is unwinding
                # the inner layers (the bug the checkpoint sweep found in the prototype).
                self._puller_gone = True
                await self._emit(item)
                return
            if self._settler is not None and getattr(item, "type", None) == "REPLY_END":
                await self._settler.settle_end(send)

        with send:
            await self._inner(self._kwargs, sink)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> bool:
        assert self._recv is not None
        assert self._nursery is not None
        self._puller_gone = True
        self._recv.close()
        if exc_type is None:
            # The puller stopped before the inner layers finished: cancel them, as leaving a
            # nursery block should.  What they emit while unwinding goes to our emit.
            self._nursery.cancel_scope.cancel()
        try:
            return bool(await self._stack.__aexit__(exc_type, exc, tb))
        except BaseExceptionGroup as group:
            raise unwrap_group(group) from None


def unwrap_group(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The lone non-Cancelled exception of a nursery's group, else the group itself.

    Hooks and callers can then keep using plain ``except ModelError:``.
    """
    leaves = [e for e in _flatten(group) if not isinstance(e, trio.Cancelled)]
    if len(leaves) == 1:
        return leaves[0]
    if not leaves:
        return _flatten(group)[0]
    return group


def _flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _flatten(e)]
    return [exc]


def compose_streaming(
    agent: Any, hooks: Sequence[StreamingHook], core: Handler, settler: EndSettler | None = None
) -> Handler:
    """Wrap ``core`` in the hooks; the first hook is the outermost layer."""
    handler = core
    for hook in reversed(hooks):
        handler = _bind_streaming(agent, hook, handler, settler)
    return handler


def _bind_streaming(
    agent: Any, hook: StreamingHook, inner: Handler, settler: EndSettler | None
) -> Handler:
    async def layer(kwargs: dict[str, Any], emit: Emit) -> None:
        await hook(agent, kwargs, NextHandler(inner, kwargs, emit, settler), emit)

    return layer


class AwaitableHook(Protocol):
    def __call__(
        self,
        agent: Any,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., Awaitable[Any]],
    ) -> Awaitable[Any]: ...


def compose_awaitable(
    agent: Any, hooks: Sequence[AwaitableHook], core: AwaitHandler
) -> AwaitHandler:
    """Wrap an awaitable core; ``await next_handler(**overrides)`` returns the inner result."""
    handler = core
    for hook in reversed(hooks):
        handler = _bind_awaitable(agent, hook, handler)
    return handler


def _bind_awaitable(agent: Any, hook: AwaitableHook, inner: AwaitHandler) -> AwaitHandler:
    async def layer(kwargs: dict[str, Any]) -> Any:
        def next_handler(**overrides: Any) -> Awaitable[Any]:
            return inner({**kwargs, **overrides} if overrides else kwargs)

        return await hook(agent, kwargs, next_handler)

    return layer

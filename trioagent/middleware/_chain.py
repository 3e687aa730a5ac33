"""The onion chain runtime (DESIGN.md §3).

Streaming hooks run in the caller's task: every layer receives an ``emit`` callback that passes
items outward, and a :class:`NextHandler` that runs the inner layers.  Items of the inner layers
go to the ``sink`` given to ``next_handler`` (by default the layer's own ``emit``), so a layer
that does not wrap ``emit`` costs nothing per item.  Channels appear only where an item crosses
a task boundary: :meth:`NextHandler.stream` (opt-in pull style) runs the inner layers in a child
task and hands back a ``trio.MemoryReceiveChannel``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from .._core.concurrency import EndSettler, PullStream

__all__ = [
    "AwaitHandler",
    "Emit",
    "Handler",
    "NextHandler",
    "compose_awaitable",
    "compose_streaming",
]

Emit = Callable[[Any], Awaitable[None]]
Handler = Callable[[dict[str, Any], Emit], Awaitable[None]]
T = TypeVar("T")
AwaitHandler = Callable[[dict[str, Any]], Awaitable[Any]]


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
        inner = self._inner
        return PullStream(lambda sink: inner(kwargs, sink), self._emit, self._settler)


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

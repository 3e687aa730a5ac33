"""The onion runtime behind every interceptable step: agent hooks and tool middlewares alike.

A :class:`Chain` is a tuple of *layers* around a *core*; the first layer is the outermost.
Everything runs in the caller's task, and every item travels outward through ``emit``
callbacks:

* a layer is ``async def layer(kwargs, next_handler, emit) -> None``; it passes items on,
  its final item last, by awaiting ``emit(item)``;
* ``await next_handler(sink=None, /, **overrides)`` runs the inner layers with
  ``{**kwargs, **overrides}`` (so in-place edits of ``kwargs`` are forwarded too); their items
  go to ``sink``, by default this layer's ``emit``.  A layer that keeps the default sink costs
  nothing per item;
* ``async with next_handler.stream(**overrides) as items:`` is the pull form: the inner layers
  run in a child task of a nursery owned by the context manager and their items cross over an
  unbuffered memory channel (see :class:`PullStream`);
* ``await next_handler.result(**overrides)`` runs the inner layers and returns their final
  item, for layers written as functions that return a value (:func:`returning_layer`);
* not calling ``next_handler`` skips the inner layers; calling it twice runs them twice;
* exceptions propagate outward through every layer unchanged.

The core is ``async def core(kwargs, emit) -> None`` with the same emit contract.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, Protocol, TypeAlias

import trio
from typing_extensions import TypeVar

from .concurrency import is_cancellation, reraise_unwrapped
from .emit import Emit

__all__ = [
    "Chain",
    "Core",
    "Kwargs",
    "Layer",
    "NextHandler",
    "PullObserver",
    "PullStream",
    "PulledItems",
    "returning_layer",
]

T = TypeVar("T", default=Any)
T_contra = TypeVar("T_contra", contravariant=True, default=Any)

#: The input of a layer: named values whose types belong to the hook (``tool_call``, ...).
Kwargs: TypeAlias = dict[str, Any]
Core: TypeAlias = Callable[[Kwargs, Emit[T]], Awaitable[None]]
Layer: TypeAlias = Callable[[Kwargs, "NextHandler[T]", Emit[T]], Awaitable[None]]
#: A layer written as a function returning its final item; ``next_handler`` returns the inner
#: layers' final item.
ReturningLayer: TypeAlias = Callable[[Kwargs, Callable[..., Awaitable[T]]], Awaitable[T]]


class PullObserver(Protocol[T_contra]):
    """What the owner of a run learns from the pull layers of its chain (optional).

    The agent's reply passes one to its ``on_reply`` chain, so that a layer pulling the reply
    with :meth:`NextHandler.stream` still lets the reply tell a delivered end event from a
    dropped one, and ends with ERROR when the pulling layer fails.
    """

    def holds(self, item: T_contra) -> bool:
        """Whether the producer waits, after the puller took ``item``, until the puller is
        done with it: it asked for the next item, or left the block."""

    def puller_failed(self, exc: BaseException) -> None:
        """The pulling layer failed with ``exc`` (not a cancellation); the inner layers are
        about to be cancelled."""


class Chain(Generic[T]):
    """``layers`` (index 0 outermost) around ``core``; immutable, reusable, re-entrant."""

    __slots__ = ("_core", "_layers")

    def __init__(self, layers: Sequence[Layer[T]], core: Core[T]) -> None:
        self._layers: tuple[Layer[T], ...] = tuple(layers)
        self._core = core

    @property
    def layers(self) -> tuple[Layer[T], ...]:
        """The layers, outermost first."""
        return self._layers

    def run(
        self, kwargs: Kwargs, emit: Emit[T], observer: PullObserver[T] | None = None
    ) -> Awaitable[None]:
        """Run the chain; every item reaches ``emit``."""
        return self._run(0, kwargs, emit, observer)

    async def result(self, kwargs: Kwargs) -> T:
        """Run the chain and return its final item (earlier items are discarded)."""
        return await _collect_final(lambda sink: self._run(0, kwargs, sink, None))

    def _run(
        self, index: int, kwargs: Kwargs, emit: Emit[T], observer: PullObserver[T] | None
    ) -> Awaitable[None]:
        if index == len(self._layers):
            return self._core(kwargs, emit)
        rest = _Rest(self, index + 1, observer)
        return self._layers[index](kwargs, NextHandler(rest, kwargs, emit, observer), emit)


class _Rest(Generic[T]):
    """The layers of a chain from ``index`` inward, as a core."""

    __slots__ = ("_chain", "_index", "_observer")

    def __init__(self, chain: Chain[T], index: int, observer: PullObserver[T] | None) -> None:
        self._chain = chain
        self._index = index
        self._observer = observer

    def __call__(self, kwargs: Kwargs, emit: Emit[T]) -> Awaitable[None]:
        return self._chain._run(self._index, kwargs, emit, self._observer)


class NextHandler(Generic[T]):
    """Runs the inner layers of one layer; see the module docstring for the contract.

    ``NextHandler(inner, kwargs, emit)`` wraps any ``inner(kwargs, emit)`` (a chain's inner
    layers, or a stand-in when a middleware is driven on its own in a test).
    """

    __slots__ = ("_emit", "_inner", "_kwargs", "_observer")

    def __init__(
        self,
        inner: Core[T],
        kwargs: Kwargs,
        emit: Emit[T],
        observer: PullObserver[T] | None = None,
    ) -> None:
        self._inner = inner
        self._kwargs = kwargs
        self._emit = emit
        self._observer = observer

    def __call__(self, sink: Emit[T] | None = None, /, **overrides: object) -> Awaitable[None]:
        """Run the inner layers with ``{**kwargs, **overrides}``; their items go to ``sink``."""
        if sink is not None and not callable(sink):
            raise TypeError(
                "next_handler takes an optional sink as its only positional argument; "
                "pass input overrides as keyword arguments"
            )
        kwargs = {**self._kwargs, **overrides} if overrides else self._kwargs
        return self._inner(kwargs, self._emit if sink is None else sink)

    def stream(self, **overrides: object) -> PullStream[T]:
        """Run the inner layers in a child task and pull their items; see :class:`PullStream`."""
        kwargs = {**self._kwargs, **overrides} if overrides else self._kwargs
        inner = self._inner
        return PullStream(lambda sink: inner(kwargs, sink), self._emit, self._observer)

    async def result(self, **overrides: object) -> T:
        """Run the inner layers and return their final item (earlier items are discarded)."""
        kwargs = {**self._kwargs, **overrides} if overrides else self._kwargs
        inner = self._inner
        return await _collect_final(lambda sink: inner(kwargs, sink))

    def with_emit(self, emit: Emit[T]) -> NextHandler[T]:
        """The same inner layers with another default sink (for adapters that wrap ``emit``)."""
        return NextHandler(self._inner, self._kwargs, emit, self._observer)


async def _collect_final(run: Callable[[Emit[T]], Awaitable[None]]) -> T:
    final: list[T] = []

    async def keep(item: T) -> None:
        final[:] = [item]

    await run(keep)
    if not final:
        raise RuntimeError("the chain ended without passing on a result")
    return final[0]


def returning_layer(fn: ReturningLayer[T]) -> Layer[T]:
    """A layer from a function that returns its final item instead of emitting it.

    ``fn(kwargs, next_handler)`` gets a ``next_handler(**overrides)`` that returns the inner
    layers' final item; what ``fn`` returns is passed on as this layer's final item.
    """

    async def layer(kwargs: Kwargs, next_handler: NextHandler[T], emit: Emit[T]) -> None:
        await emit(await fn(kwargs, next_handler.result))

    return layer


class PulledItems(trio.abc.ReceiveChannel[T]):
    """The receive side of :meth:`NextHandler.stream`: a memory channel's, plus the puller's
    side of the hand-shake that tells the producer when the puller is done with an item."""

    def __init__(self, recv: trio.MemoryReceiveChannel[T], stream: PullStream[T]) -> None:
        self._recv = recv
        self._stream = stream

    async def receive(self) -> T:
        self._stream._puller_ready()
        item = await self._recv.receive()
        self._stream._taken += 1
        return item

    def receive_nowait(self) -> T:
        self._stream._puller_ready()
        item = self._recv.receive_nowait()
        self._stream._taken += 1
        return item

    def statistics(self) -> trio.MemoryChannelStatistics:
        return self._recv.statistics()

    def close(self) -> None:
        self._recv.close()
        self._stream._puller_left()

    async def aclose(self) -> None:
        self.close()
        await trio.lowlevel.checkpoint()


class PullStream(Generic[T]):
    """``async with next_handler.stream() as items:`` — run inner layers in a child task.

    ``inner(sink)`` runs the inner layers with ``sink`` as their emit.  The channel has no
    buffer, so the inner layers advance only as fast as the puller takes items, as in the
    callback form.  Leaving the block early cancels them; items they still produce while
    unwinding (such as an INTERRUPTED end event) go straight to ``emit``, so nothing is lost.

    For an item the ``observer`` :meth:`~PullObserver.holds`, the producer waits after the
    hand-over until the puller asks for the next item or leaves: the puller either passed the
    item on or dropped it by then, and the producer may need to know which.

    Written as a class, not ``@asynccontextmanager``: the library has no async generators.
    """

    def __init__(
        self,
        inner: Callable[[Emit[T]], Awaitable[None]],
        emit: Emit[T],
        observer: PullObserver[T] | None = None,
    ) -> None:
        self._inner = inner
        self._emit = emit
        self._observer = observer
        self._stack = contextlib.AsyncExitStack()
        self._nursery: trio.Nursery | None = None
        self._items: PulledItems[T] | None = None
        self._puller_gone = False
        self._offered = 0
        self._taken = 0
        self._held: int | None = None
        self._released = trio.Event()

    async def __aenter__(self) -> PulledItems[T]:
        send, recv = trio.open_memory_channel[T](0)
        self._items = PulledItems(recv, self)
        try:
            self._nursery = await self._stack.enter_async_context(trio.open_nursery())
        except BaseException:
            send.close()
            recv.close()
            raise
        self._nursery.start_soon(self._run_inner, send)
        return self._items

    def _puller_ready(self) -> None:
        if self._held is not None and self._taken >= self._held:
            self._released.set()

    def _puller_left(self) -> None:
        self._puller_gone = True
        self._released.set()

    async def _offer(self, send: trio.MemorySendChannel[T], item: T) -> bool:
        """Hand ``item`` to the puller; ``False`` once it has gone.

        Never raises for a departed puller: that would replace a ``Cancelled`` unwinding the
        inner layers.
        """
        if self._puller_gone:
            return False
        try:
            await send.send(item)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._puller_gone = True
            return False
        self._offered += 1
        return True

    async def _run_inner(self, send: trio.MemorySendChannel[T]) -> None:
        observer = self._observer

        async def sink(item: T) -> None:
            if observer is None or not observer.holds(item):
                if not await self._offer(send, item):
                    await self._emit(item)  # the puller left: deliver it outward ourselves
                return
            # Armed before the hand-over: the puller may ask for the next item before this
            # task runs again.
            self._held, self._released = self._offered + 1, trio.Event()
            try:
                if await self._offer(send, item):
                    await self._released.wait()
                else:
                    await self._emit(item)
            finally:
                self._held = None

        with send:
            await self._inner(sink)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> bool:
        assert self._items is not None
        assert self._nursery is not None
        if exc is not None and self._observer is not None and not is_cancellation(exc):
            self._observer.puller_failed(exc)
        self._items.close()
        if exc_type is None:
            # The puller stopped before the inner layers finished: cancel them, as leaving a
            # nursery block should.
            self._nursery.cancel_scope.cancel()
        try:
            return bool(await self._stack.__aexit__(exc_type, exc, tb))
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)

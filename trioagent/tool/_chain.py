"""The onion chain shared by toolkit-wide and per-tool middlewares (DESIGN.md §3).

Everything runs in the caller's task; chunks travel outward through ``emit`` callbacks.

A *layer* is ``async def layer(kwargs, next_handler, emit) -> ToolResponse | None``:

* ``await next_handler(sink=None, /, **overrides)`` runs the inner layers with
  ``{**kwargs, **overrides}`` (so in-place edits of ``kwargs`` are forwarded too) and returns the
  inner layers' final :class:`ToolResponse`.  Their chunks go to ``sink`` — by default this
  layer's ``emit``.  Pass your own sink to observe, rewrite, drop or buffer chunks.
* What the layer returns is its final result:

  - ``None`` → the accumulation (:meth:`ToolResponse.append_chunk`) of every chunk the layer
    emitted, directly or through the default sink — so a layer that only rewrites chunks with a
    sink needs no bookkeeping;
  - a :class:`ToolResponse` → that response, as is (the layer is responsible for it matching
    what it emitted).  If the layer emitted **nothing**, the response is also emitted as one
    chunk, so a short-circuit ``return ToolResponse(content=[...])`` still reaches the stream.

* ``async with next_handler.stream(**overrides) as items:`` is the pull form: the inner layers
  run in a child task of a nursery owned by the context manager, and ``items`` (a
  ``trio.MemoryReceiveChannel``) yields their chunks and then, last, their final
  :class:`ToolResponse`.  Nothing is forwarded for you: emit what you want to pass on.  Leaving
  the block early cancels the inner layers; chunks they still emit while unwinding go to this
  layer's ``emit``.  Useful to race a tool against a timer.
* Not calling ``next_handler`` skips every inner layer.  Calling it twice runs them twice.
* Exceptions propagate outward through every layer unchanged (the pull form unwraps the
  nursery's exception group when it holds a single exception).

The innermost *core* has the same return contract without ``next_handler``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeAlias

from .._core.concurrency import PullStream
from ..exception import DeveloperOrientedException
from ._response import Emit, ToolChunk, ToolResponse, chunk_from_response

__all__ = ["ChainCore", "ChainLayer", "PullStream", "ToolNextHandler", "run_chain"]


class ToolNextHandler(Protocol):
    """Runs the inner layers of a tool middleware chain; see the module docstring."""

    def __call__(self, sink: Emit | None = None, /, **overrides: Any) -> Awaitable[ToolResponse]:
        """Run the inner layers with ``{**kwargs, **overrides}``; chunks go to ``sink``."""
        ...

    def stream(self, **overrides: Any) -> PullStream:
        """Run the inner layers in a child task; pull their chunks, then their response."""
        ...


ChainLayer: TypeAlias = Callable[
    [dict[str, Any], ToolNextHandler, Emit], Awaitable[ToolResponse | None]
]
ChainCore: TypeAlias = Callable[[dict[str, Any], Emit], Awaitable[ToolResponse | None]]


async def _discard(chunk: ToolChunk) -> None:
    """The sink of a chain nobody listens to."""


async def run_chain(
    layers: Sequence[ChainLayer],
    core: ChainCore,
    kwargs: dict[str, Any],
    emit: Emit | None,
) -> ToolResponse:
    """Run ``layers`` (index 0 outermost) around ``core`` and return the final response."""
    return await _Chain(tuple(layers), core).run(0, kwargs, emit or _discard)


class _Chain:
    __slots__ = ("_core", "_layers")

    def __init__(self, layers: tuple[ChainLayer, ...], core: ChainCore) -> None:
        self._layers = layers
        self._core = core

    async def run(self, index: int, kwargs: dict[str, Any], emit: Emit) -> ToolResponse:
        accumulated = ToolResponse()
        emitted = False

        async def layer_emit(chunk: ToolChunk) -> None:
            nonlocal emitted
            if not isinstance(chunk, ToolChunk):
                raise DeveloperOrientedException(
                    f"a tool or tool middleware emitted {type(chunk).__name__}; "
                    "only ToolChunk objects can be emitted"
                )
            emitted = True
            accumulated.append_chunk(chunk)
            await emit(chunk)

        if index == len(self._layers):
            result = await self._core(kwargs, layer_emit)
            where = "the tool"
        else:
            layer = self._layers[index]
            result = await layer(
                kwargs, _NextHandler(self, index + 1, kwargs, layer_emit), layer_emit
            )
            where = f"tool middleware {_describe(layer)}"

        if result is None:
            return accumulated
        if not isinstance(result, ToolResponse):
            raise DeveloperOrientedException(
                f"{where} returned {type(result).__name__}; expected a ToolResponse or None"
            )
        if not emitted:
            await layer_emit(chunk_from_response(result))
        return result


class _NextHandler:
    """The ``next_handler`` handed to one layer."""

    __slots__ = ("_chain", "_emit", "_index", "_kwargs")

    def __init__(self, chain: _Chain, index: int, kwargs: dict[str, Any], emit: Emit) -> None:
        self._chain = chain
        self._index = index
        self._kwargs = kwargs
        self._emit = emit

    async def __call__(self, sink: Emit | None = None, /, **overrides: Any) -> ToolResponse:
        if sink is not None and not callable(sink):
            raise TypeError(
                "next_handler takes an optional sink as its only positional argument; "
                "pass input overrides as keyword arguments"
            )
        target = self._emit if sink is None else sink
        return await self._chain.run(self._index, {**self._kwargs, **overrides}, target)

    def stream(self, **overrides: Any) -> PullStream:
        """The pull form; see the module docstring."""
        kwargs = {**self._kwargs, **overrides}

        async def inner(sink: Emit) -> ToolResponse:
            return await self._chain.run(self._index, kwargs, sink)

        return PullStream(inner, self._emit)


def _describe(layer: Any) -> str:
    while isinstance(layer, functools.partial):
        layer = layer.func
    owner = getattr(layer, "__self__", None)
    if owner is not None:
        return type(owner).__name__
    return getattr(layer, "__qualname__", None) or repr(layer)

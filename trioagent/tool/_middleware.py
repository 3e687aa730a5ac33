"""Tool middlewares over the library's one chain runtime, in their return form.

A tool call is a chain (``trioagent._core.chain``) whose items are :class:`ToolChunk` s and, last,
one :class:`ToolResponse`.  Tool middlewares — toolkit-wide functions and per-tool
:class:`~trioagent.tool.ToolMiddlewareBase` — are written in the *return form*
``async def layer(kwargs, next_handler, emit) -> ToolResponse | None``:

* ``await next_handler(sink=None, /, **overrides)`` runs the inner layers with
  ``{**kwargs, **overrides}`` and returns their final :class:`ToolResponse`; their chunks go to
  ``sink`` — by default this layer's ``emit``.  Pass your own sink to observe, rewrite, drop or
  buffer chunks.
* What the layer returns is its final result:

  - ``None`` → the accumulation (:meth:`ToolResponse.append_chunk`) of every chunk the layer
    emitted, directly or through the default sink — so a layer that only rewrites chunks with a
    sink needs no bookkeeping;
  - a :class:`ToolResponse` → that response, as is (the layer is responsible for it matching
    what it emitted).  If the layer emitted **nothing**, the response is also emitted as one
    chunk, so a short-circuit ``return ToolResponse(content=[...])`` still reaches the stream.

* ``async with next_handler.stream(**overrides) as items:`` is the pull form: ``items`` yields
  the inner layers' chunks and then, last, their final :class:`ToolResponse`.  Nothing is
  forwarded for you: emit what you want to pass on.  Leaving the block early cancels the inner
  layers; chunks they still emit while unwinding go to this layer's ``emit``.
* Not calling ``next_handler`` skips every inner layer.  Calling it twice runs them twice.
* Exceptions propagate outward through every layer unchanged.

:func:`returning_layer` adapts such a function to a layer of the chain (which passes its final
response on through ``emit``); :func:`run_returning` runs a chain and returns that response.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from .._core.chain import Kwargs, Layer, NextHandler, PullStream
from .._core.emit import Emit as ChainEmit
from ..exception import DeveloperOrientedException
from ._response import Emit, ToolChunk, ToolResponse, chunk_from_response

__all__ = [
    "ChunkCollector",
    "ReturningToolLayer",
    "ToolItem",
    "ToolNextHandler",
    "returning_layer",
    "run_returning",
]

#: What travels along a tool call's chain: chunks, then one final response.
ToolItem: TypeAlias = ToolChunk | ToolResponse


class ToolNextHandler:
    """The ``next_handler`` of a tool middleware: runs the inner layers, returns their final
    :class:`ToolResponse`; see the module docstring."""

    __slots__ = ("_emit", "_inner")

    def __init__(self, inner: NextHandler[ToolItem], emit: Emit) -> None:
        self._inner = inner
        self._emit = emit

    async def __call__(self, sink: Emit | None = None, /, **overrides: object) -> ToolResponse:
        """Run the inner layers with ``{**kwargs, **overrides}``; chunks go to ``sink``."""
        if sink is not None and not callable(sink):
            raise TypeError(
                "next_handler takes an optional sink as its only positional argument; "
                "pass input overrides as keyword arguments"
            )
        return await run_returning(
            functools.partial(self._inner, **overrides), self._emit if sink is None else sink
        )

    def stream(self, **overrides: object) -> PullStream[ToolItem]:
        """Run the inner layers in a child task; pull their chunks, then their response."""
        return self._inner.with_emit(self._unwinding).stream(**overrides)

    async def _unwinding(self, item: ToolItem) -> None:
        # The puller has left: its chunks still reach this layer; a final response has no
        # reader any more.
        if isinstance(item, ToolChunk):
            await self._emit(item)


ReturningToolLayer: TypeAlias = Callable[
    [Kwargs, ToolNextHandler, Emit], Awaitable[ToolResponse | None]
]


class ChunkCollector:
    """The ``emit`` of a return-form layer: checks, accumulates and passes on its chunks."""

    __slots__ = ("_emit", "accumulated", "emitted")

    def __init__(self, emit: ChainEmit[ToolItem]) -> None:
        self._emit = emit
        self.accumulated = ToolResponse()
        self.emitted = False

    async def __call__(self, chunk: ToolChunk) -> None:
        if not isinstance(chunk, ToolChunk):
            raise DeveloperOrientedException(
                f"a tool or tool middleware emitted {type(chunk).__name__}; "
                "only ToolChunk objects can be emitted"
            )
        self.emitted = True
        self.accumulated.append_chunk(chunk)
        await self._emit(chunk)

    async def final(self, result: object, where: str) -> ToolResponse:
        """The layer's final response from what it returned (see the module docstring)."""
        if result is None:
            return self.accumulated
        if not isinstance(result, ToolResponse):
            raise DeveloperOrientedException(
                f"{where} returned {type(result).__name__}; expected a ToolResponse or None"
            )
        if not self.emitted:
            await self(chunk_from_response(result))
        return result


def returning_layer(fn: ReturningToolLayer, where: str) -> Layer[ToolItem]:
    """A chain layer running the return-form ``fn``; ``where`` names it in contract errors."""

    async def layer(
        kwargs: Kwargs, next_handler: NextHandler[ToolItem], emit: ChainEmit[ToolItem]
    ) -> None:
        collector = ChunkCollector(emit)
        result = await fn(kwargs, ToolNextHandler(next_handler, collector), collector)
        await emit(await collector.final(result, where))

    return layer


async def run_returning(
    run: Callable[[ChainEmit[ToolItem]], Awaitable[None]], emit: Emit | None
) -> ToolResponse:
    """Run a tool chain (``run(sink)``); chunks go to ``emit``, the final response is returned."""
    final: ToolResponse | None = None

    async def split(item: ToolItem) -> None:
        nonlocal final
        if isinstance(item, ToolResponse):
            final = item
        elif emit is not None:
            await emit(item)

    await run(split)
    if final is None:
        raise DeveloperOrientedException("a tool chain ended without a final ToolResponse")
    return final

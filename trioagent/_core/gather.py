"""Run a few awaitables concurrently in a nursery owned by the caller and collect their
results in order (the Trio form of ``asyncio.gather`` without ``return_exceptions``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, cast

import trio

from .concurrency import reraise_unwrapped

__all__ = ["gather"]

T = TypeVar("T")


async def gather(thunks: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """``[await t() for t in thunks]``, run concurrently; results in order.

    One thunk runs inline (no task).  The first failure cancels the others and propagates as
    the plain exception (not an exception group), as callers of ``asyncio.gather`` expect;
    cancellation propagates untouched.
    """
    if len(thunks) == 1:
        return [await thunks[0]()]
    results: list[T | None] = [None] * len(thunks)

    async def run(index: int) -> None:
        results[index] = await thunks[index]()

    try:
        async with trio.open_nursery() as nursery:
            for index in range(len(thunks)):
                nursery.start_soon(run, index)
    except BaseExceptionGroup as group:
        reraise_unwrapped(group)
    return cast("list[T]", results)

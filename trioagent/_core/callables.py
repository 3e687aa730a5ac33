"""Checking, where a callable is handed over, that it can be awaited as it will be called.

A sync function passed where the library awaits the call (an ``on_event`` callback, a
middleware hook, a tool middleware) would otherwise fail mid-reply with "object NoneType can't
be used in 'await' expression"; an async generator (the hook form of AgentScope) or a hook
without ``emit`` would fail the same way.  :func:`require_async` names the culprit up front.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Sequence

__all__ = ["require_async"]

#: Plain functions already found fine, keyed by what their check depends on: a reply checks
#: its ``on_event`` callback, often a closure made anew per call from the same code.
_PASSED: dict[tuple[object, ...], None] = {}
_PASSED_MAX = 1024


def require_async(fn: object, what: str, params: Sequence[str]) -> None:
    """Check that ``fn`` is an async function callable with ``len(params)`` positional arguments.

    ``what`` names the culprit in the error (``"SyncHook.on_reasoning"``); ``params`` are the
    names of the arguments it is called with (``("agent", "input_kwargs", ...)``).

    Raises:
        TypeError: ``fn`` is not callable, is a sync function or an async generator function,
            or its signature does not take those arguments.
    """
    key = _cache_key(fn, params)
    if key is not None and key in _PASSED:
        return
    _check(fn, what, params)
    if key is not None:
        if len(_PASSED) >= _PASSED_MAX:
            _PASSED.clear()
        _PASSED[key] = None


def _cache_key(fn: object, params: Sequence[str]) -> tuple[object, ...] | None:
    """What the check of a plain function depends on (``None``: any other callable)."""
    if type(fn) is not types.FunctionType:
        return None
    attributes = fn.__dict__
    if "__wrapped__" in attributes or "__signature__" in attributes:
        return None
    kwdefaults = tuple(fn.__kwdefaults__ or ())
    return (fn.__code__, len(fn.__defaults__ or ()), kwdefaults, tuple(params))


def _check(fn: object, what: str, params: Sequence[str]) -> None:
    last = what.rsplit(".", 1)[-1]
    def_name = last if last.isidentifier() else what.split(" ", 1)[0]
    expected = f"async def {def_name}({', '.join(params)})"
    if not callable(fn):
        raise TypeError(f"{what} is not callable ({type(fn).__name__}); expected `{expected}`")
    target = _function_of(fn)
    if inspect.isasyncgenfunction(target):
        raise TypeError(
            f"{what} is an async generator function (the hook form of AgentScope, which "
            f"yields its items); write `{expected}` and pass items on with `await emit(item)`"
        )
    if not _is_async(target):
        raise TypeError(
            f"{what} is not an async function (a `def` where `async def` belongs: its call "
            f"would be awaited); expected `{expected}`"
        )
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read (some builtins): trust it
        return
    try:
        signature.bind(*params)
    except TypeError:
        count = len(params)
        raise TypeError(
            f"{what} cannot be called with {count} argument{'s' if count != 1 else ''}: it "
            f"takes {signature} but is called as ({', '.join(params)}); expected `{expected}`"
        ) from None


def _function_of(fn: object) -> object:
    """The function behind a partial or a callable object."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)) and not inspect.isbuiltin(fn):
        call = getattr(type(fn), "__call__", None)  # noqa: B004 - callable objects
        if call is not None and not isinstance(fn, type):
            return call
    return fn


def _is_async(fn: object) -> bool:
    """An ``async def`` function, also behind ``functools.wraps`` decorators (and mocks)."""
    if inspect.iscoroutinefunction(fn):
        return True
    try:
        unwrapped = inspect.unwrap(fn)  # type: ignore[arg-type]
    except ValueError:  # a cycle of __wrapped__
        return False
    return inspect.iscoroutinefunction(unwrapped)

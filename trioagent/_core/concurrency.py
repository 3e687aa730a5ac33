"""Small structured-concurrency helpers shared by the chains, models and tools.

:func:`unwrap_group` turns a nursery's exception group back into the one exception a caller
expects, so hooks and callers can keep using plain ``except ModelError:``.
"""

from __future__ import annotations

from typing import NoReturn

import trio

__all__ = [
    "is_cancellation",
    "raise_as_is",
    "reraise_unwrapped",
    "unwrap_group",
]


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

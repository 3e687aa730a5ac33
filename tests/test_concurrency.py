"""The structured-concurrency helpers of trioagent/_core/concurrency.py, tested directly and
adversarially: ``unwrap_group``, ``reraise_unwrapped`` and ``is_cancellation`` on flat and
nested groups."""

from __future__ import annotations

from collections.abc import Callable

import trio
import trio.lowlevel
import trio.testing

from trioagent._core.concurrency import is_cancellation, reraise_unwrapped, unwrap_group


async def a_cancelled() -> trio.Cancelled:
    """A real ``trio.Cancelled`` (it has no public constructor)."""
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            return exc
    raise AssertionError("the checkpoint was not cancelled")


# -- unwrap_group ---------------------------------------------------------------------------------


def test_unwrap_group_returns_the_lone_error_itself() -> None:
    error = ValueError("boom")
    assert unwrap_group(ExceptionGroup("g", [error])) is error


async def test_unwrap_group_of_only_cancellations_is_the_first_cancelled() -> None:
    first, second = await a_cancelled(), await a_cancelled()
    assert unwrap_group(BaseExceptionGroup("g", [first])) is first
    assert unwrap_group(BaseExceptionGroup("g", [first, second])) is first
    nested = BaseExceptionGroup("g", [BaseExceptionGroup("inner", [first]), second])
    assert unwrap_group(nested) is first


async def test_unwrap_group_drops_cancellations_next_to_a_lone_error() -> None:
    error = KeyError("k")
    cancelled = await a_cancelled()
    assert unwrap_group(BaseExceptionGroup("g", [cancelled, error])) is error
    assert unwrap_group(BaseExceptionGroup("g", [error, cancelled])) is error


async def test_unwrap_group_finds_a_lone_error_at_any_depth() -> None:
    error = ValueError("deep")
    cancelled = await a_cancelled()
    group = BaseExceptionGroup(
        "outer",
        [cancelled, BaseExceptionGroup("mid", [ExceptionGroup("inner", [error]), cancelled])],
    )
    assert unwrap_group(group) is error


async def test_unwrap_group_keeps_the_group_when_several_errors_remain() -> None:
    cancelled = await a_cancelled()
    flat = ExceptionGroup("g", [ValueError("a"), KeyError("b")])
    assert unwrap_group(flat) is flat
    nested = BaseExceptionGroup(
        "g", [cancelled, ExceptionGroup("x", [ValueError("a")]), ExceptionGroup("y", [OSError()])]
    )
    assert unwrap_group(nested) is nested
    # The group is returned untouched, cancellations included.
    assert nested.exceptions[0] is cancelled


async def test_unwrap_group_returns_a_raised_group_of_several_errors_as_raised() -> None:
    cancelled = await a_cancelled()
    mine = ExceptionGroup("mine", [ValueError("a"), KeyError("b")])
    nursery = BaseExceptionGroup("Exceptions from Trio nursery", [mine, cancelled])
    assert unwrap_group(nursery) is mine


# -- reraise_unwrapped ---------------------------------------------------------------------------


def raised_in_a_group(make: Callable[[], BaseException]) -> BaseException:
    """What ``reraise_unwrapped`` raises for a nursery group around ``make()``'s exception."""
    try:
        try:
            raise make()
        except BaseException as exc:
            raise BaseExceptionGroup("Exceptions from Trio nursery", [exc]) from None
    except BaseExceptionGroup as group:
        try:
            reraise_unwrapped(group)
        except BaseException as unwrapped:
            return unwrapped
    raise AssertionError("nothing raised")


def test_reraise_unwrapped_keeps_the_explicit_cause() -> None:
    def make() -> BaseException:
        try:
            raise OSError("connection reset")
        except OSError as err:
            try:
                raise RuntimeError("model call failed") from err
            except RuntimeError as exc:
                return exc

    exc = raised_in_a_group(make)
    assert isinstance(exc, RuntimeError)
    assert isinstance(exc.__cause__, OSError)
    assert exc.__suppress_context__


def test_reraise_unwrapped_keeps_the_implicit_context_and_no_cycle() -> None:
    def make() -> BaseException:
        try:
            raise OSError("connection reset")
        except OSError:
            try:
                raise RuntimeError("model call failed")  # implicit context
            except RuntimeError as exc:
                return exc

    exc = raised_in_a_group(make)
    assert isinstance(exc.__context__, OSError)
    assert not exc.__suppress_context__
    assert exc.__cause__ is None


def test_reraise_unwrapped_of_a_plain_error_has_no_context() -> None:
    exc = raised_in_a_group(lambda: ValueError("plain"))
    assert exc.__context__ is None
    assert exc.__cause__ is None


async def test_unwrap_group_treats_keyboard_interrupt_as_an_error() -> None:
    interrupt = KeyboardInterrupt()
    cancelled = await a_cancelled()
    assert unwrap_group(BaseExceptionGroup("g", [interrupt])) is interrupt
    assert unwrap_group(BaseExceptionGroup("g", [cancelled, interrupt])) is interrupt
    both = BaseExceptionGroup("g", [interrupt, ValueError("v")])
    assert unwrap_group(both) is both


# -- is_cancellation ------------------------------------------------------------------------------


async def test_is_cancellation_of_plain_exceptions() -> None:
    assert is_cancellation(await a_cancelled())
    assert not is_cancellation(ValueError())
    assert not is_cancellation(KeyboardInterrupt())
    assert not is_cancellation(trio.TooSlowError())


async def test_is_cancellation_of_groups() -> None:
    c1, c2 = await a_cancelled(), await a_cancelled()
    assert is_cancellation(BaseExceptionGroup("g", [c1]))
    assert is_cancellation(BaseExceptionGroup("g", [c1, BaseExceptionGroup("n", [c2])]))
    assert not is_cancellation(BaseExceptionGroup("g", [c1, ValueError()]))
    assert not is_cancellation(BaseExceptionGroup("g", [c1, KeyboardInterrupt()]))
    deep = BaseExceptionGroup(
        "g", [c1, BaseExceptionGroup("n", [c2, ExceptionGroup("e", [OSError()])])]
    )
    assert not is_cancellation(deep)
    assert not is_cancellation(ExceptionGroup("g", [ValueError()]))

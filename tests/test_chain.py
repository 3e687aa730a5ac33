"""The chain runtime of trioagent/_core/chain.py: ``Chain`` and its ``NextHandler``, and
``PullStream`` (the pull form ``next_handler.stream()``) tested directly and adversarially under
producer errors, early exits, puller errors and cancellation at every schedule point (one end,
cancellation never swallowed, no task outlives the block)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing

from trioagent._core.chain import Chain, NextHandler, PullObserver, PullStream, returning_layer
from trioagent.testing._sweep import _StepCounter  # the sweep's own instrument

# -- helpers --------------------------------------------------------------------------------------


@attrs.frozen
class Ev:
    """A stand-in for an agent event: only ``type`` matters to the observer."""

    type: str
    reason: str = ""


TEXT = Ev("TEXT")
COMPLETED = Ev("REPLY_END", "completed")
INTERRUPTED = Ev("REPLY_END", "interrupted")


def child_tasks() -> list[trio.lowlevel.Task]:
    """Tasks running in nurseries of the calling task (PullStream's nursery is one)."""
    return [t for n in trio.lowlevel.current_task().child_nurseries for t in n.child_tasks]


class Recorder:
    """An ``emit`` that records what reached it (no checkpoint, so a cancelled caller still
    delivers)."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    async def __call__(self, item: Any) -> None:
        self.items.append(item)


class RecordingObserver:
    """A :class:`PullObserver` that holds the producer after every end event and records the
    puller's failures."""

    def __init__(self) -> None:
        self.held: list[Any] = []
        self.failures: list[BaseException] = []

    def holds(self, item: Any) -> bool:
        if getattr(item, "type", None) == "REPLY_END":
            self.held.append(item)
            return True
        return False

    def puller_failed(self, exc: BaseException) -> None:
        self.failures.append(exc)


def three_then_end(log: list[str] | None = None) -> Callable[[Any], Any]:
    """A producer shaped like a reply: three items a second apart, then exactly one end
    (INTERRUPTED if cancelled, emitted shielded as the agent does), then a final item."""

    async def producer(sink: Any) -> None:
        reason = INTERRUPTED
        try:
            for i in range(3):
                await sink(i)
                await trio.sleep(1)
            reason = COMPLETED
        except trio.Cancelled:
            if log is not None:
                log.append("producer:cancelled")
            raise
        finally:
            with trio.CancelScope(shield=True):
                await sink(reason)
        await sink("result")

    return producer


async def test_an_inner_error_keeps_its_cause_across_the_pull_form() -> None:
    async def producer(sink: Any) -> None:
        await trio.lowlevel.checkpoint()
        try:
            raise OSError("connection reset")
        except OSError as err:
            raise RuntimeError("model call failed") from err

    async def pull() -> None:
        async with PullStream(producer, Recorder()) as items:
            async for _ in items:
                pass

    with pytest.raises(RuntimeError, match="model call failed") as info:
        await pull()
    assert isinstance(info.value.__cause__, OSError)


async def test_a_puller_error_keeps_its_cause() -> None:
    async def pull() -> None:
        async with PullStream(three_then_end(), Recorder()):
            try:
                raise KeyError("missing field")
            except KeyError as err:
                raise ValueError("bad item") from err

    with pytest.raises(ValueError, match="bad item") as info:
        await pull()
    assert isinstance(info.value.__cause__, KeyError)


async def test_a_puller_exception_group_of_several_errors_propagates_as_raised() -> None:
    group = ExceptionGroup("mine", [ValueError("a"), KeyError("b")])

    async def pull() -> None:
        async with PullStream(three_then_end(), Recorder()):
            raise group

    with pytest.raises(ExceptionGroup) as info:
        await pull()
    # Not wrapped in the nursery's group; trio may hand back a derived copy of it.
    assert info.value.message == "mine"
    assert info.value.exceptions == group.exceptions


# -- PullStream: the happy path -------------------------------------------------------------------


async def test_items_arrive_in_order_then_the_final_item_then_end_of_channel(
    autojump_clock: Any,
) -> None:
    emit = Recorder()
    async with PullStream(three_then_end(), emit) as items:
        assert len(child_tasks()) == 1  # the inner layers run in exactly one child task
        pulled = [item async for item in items]
        with pytest.raises(trio.EndOfChannel):
            await items.receive()
    assert pulled == [0, 1, 2, COMPLETED, "result"]
    assert emit.items == []
    assert child_tasks() == []
    assert trio.current_time() == 3


async def test_only_emitted_items_are_handed_over() -> None:
    async def producer(sink: Any) -> None:
        await sink(TEXT)

    async with PullStream(producer, Recorder()) as items:
        pulled = [item async for item in items]
    assert pulled == [TEXT]


async def test_items_channel_is_closed_after_the_block() -> None:
    async with PullStream(three_then_end(), Recorder()) as items:
        pass
    with pytest.raises(trio.ClosedResourceError):
        items.receive_nowait()


async def test_unbuffered_channel_keeps_the_producer_in_step_with_the_puller() -> None:
    log: list[str] = []

    async def producer(sink: Any) -> None:
        for i in range(3):
            log.append(f"offer {i}")
            await sink(i)
            log.append(f"taken {i}")

    async with PullStream(producer, Recorder()) as items:
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["offer 0"]
        assert await items.receive() == 0
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["offer 0", "taken 0", "offer 1"]
        assert [item async for item in items] == [1, 2]
    assert log == ["offer 0", "taken 0", "offer 1", "taken 1", "offer 2", "taken 2"]


async def test_a_producer_of_a_single_item_ends_the_stream() -> None:
    async def producer(sink: Any) -> None:
        await sink("only")

    async with PullStream(producer, Recorder()) as items:
        assert [item async for item in items] == ["only"]


# -- PullStream: the producer fails ---------------------------------------------------------------


async def test_producer_error_before_any_item_propagates_unwrapped() -> None:
    error = ValueError("no connection")

    async def producer(sink: Any) -> None:
        await trio.lowlevel.checkpoint()
        raise error

    async def pull() -> None:
        async with PullStream(producer, Recorder()) as items:
            async for _ in items:
                pytest.fail("no item was produced")

    with pytest.raises(ValueError, match="no connection") as info:
        await pull()
    assert info.value is error
    assert child_tasks() == []


async def test_producer_error_mid_stream_cancels_a_busy_puller(autojump_clock: Any) -> None:
    error = RuntimeError("stream broke")
    puller_log: list[str] = []

    async def producer(sink: Any) -> None:
        await sink(TEXT)
        raise error

    async def pull() -> None:
        async with PullStream(producer, Recorder()) as items:
            assert await items.receive() == TEXT
            try:
                await trio.sleep(100)  # the puller is busy elsewhere when the producer fails
            except trio.Cancelled:
                puller_log.append("puller:cancelled")
                raise

    with pytest.raises(RuntimeError, match="stream broke") as info:
        await pull()
    assert info.value is error
    assert puller_log == ["puller:cancelled"]
    assert trio.current_time() == 0
    assert child_tasks() == []


async def test_producer_error_while_puller_receives_ends_the_channel_then_raises() -> None:
    error = OSError("reset")

    async def producer(sink: Any) -> None:
        await sink(TEXT)
        await trio.lowlevel.checkpoint()
        raise error

    pulled: list[Any] = []

    async def pull() -> None:
        async with PullStream(producer, Recorder()) as items:
            async for item in items:
                pulled.append(item)

    with pytest.raises(OSError, match="reset") as info:
        await pull()
    assert info.value is error
    assert pulled == [TEXT]


async def test_keyboard_interrupt_from_the_producer_propagates_unwrapped() -> None:
    interrupt = KeyboardInterrupt()

    async def producer(sink: Any) -> None:
        await trio.lowlevel.checkpoint()
        raise interrupt

    async def pull() -> None:
        async with PullStream(producer, Recorder()) as items:
            async for _ in items:
                pass

    with pytest.raises(KeyboardInterrupt) as info:
        await pull()
    assert info.value is interrupt


# -- PullStream: the puller leaves early ----------------------------------------------------------


async def test_leaving_early_cancels_the_producer_and_its_end_goes_to_emit(
    autojump_clock: Any,
) -> None:
    emit = Recorder()
    log: list[str] = []
    async with PullStream(three_then_end(log), emit) as items:
        async for item in items:
            assert item == 0
            break
    assert log == ["producer:cancelled"]
    assert emit.items == [INTERRUPTED]  # produced while unwinding: nothing is lost
    assert trio.current_time() == 0  # the producer's sleep did not run to its end
    assert child_tasks() == []


async def test_leaving_without_pulling_routes_everything_to_emit(autojump_clock: Any) -> None:
    emit = Recorder()
    log: list[str] = []
    async with PullStream(three_then_end(log), emit):
        pass
    # The producer had not started: it runs already cancelled, so its first item (before any
    # checkpoint) and its INTERRUPTED end both go straight to emit.
    assert emit.items == [0, INTERRUPTED]
    assert log == ["producer:cancelled"]
    assert trio.current_time() == 0


async def test_an_item_pending_when_the_puller_leaves_goes_to_emit() -> None:
    emit = Recorder()

    async def producer(sink: Any) -> None:
        await sink(TEXT)
        await sink(COMPLETED)  # still pending when the puller leaves

    async with PullStream(producer, emit) as items:
        assert await items.receive() == TEXT
        await trio.testing.wait_all_tasks_blocked()
    assert emit.items == [COMPLETED]


async def test_items_after_the_puller_left_skip_the_channel() -> None:
    emit = Recorder()

    async def producer(sink: Any) -> None:
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                for i in range(3):
                    await sink(i)
                    await trio.lowlevel.checkpoint()

    async with PullStream(producer, emit) as items:
        await trio.testing.wait_all_tasks_blocked()
    assert emit.items == [0, 1, 2]
    with pytest.raises(trio.ClosedResourceError):
        items.receive_nowait()


async def test_the_final_item_of_a_producer_whose_puller_left_goes_to_emit() -> None:
    emit = Recorder()

    async def producer(sink: Any) -> None:
        with trio.CancelScope(shield=True):
            await sink(TEXT)
            await trio.lowlevel.checkpoint()
            await sink("result")

    async with PullStream(producer, emit):
        pass
    assert emit.items == [TEXT, "result"]  # the final item is an item like any other


async def test_the_puller_closing_items_itself_routes_items_to_emit() -> None:
    emit = Recorder()

    async def producer(sink: Any) -> None:
        await sink(TEXT)
        await sink(COMPLETED)

    async with PullStream(producer, emit) as items:
        assert await items.receive() == TEXT
        await items.aclose()
        await trio.testing.wait_all_tasks_blocked()
        assert emit.items == [COMPLETED]
    assert emit.items == [COMPLETED]


async def test_a_cancelled_producer_still_emits_once_the_puller_closed_items() -> None:
    emit = Recorder()
    producer_scope = trio.CancelScope()

    async def producer(sink: Any) -> None:
        await sink(TEXT)  # the puller closed items: this one already went to emit
        with producer_scope:
            try:
                await trio.sleep_forever()
            finally:
                # Still inside the cancelled scope, unshielded: a departed puller must not turn
                # this into a Cancelled that loses the end event.
                await sink(INTERRUPTED)

    async with PullStream(producer, emit) as items:
        await items.aclose()
        await trio.testing.wait_all_tasks_blocked()
        assert emit.items == [TEXT]
        producer_scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert emit.items == [TEXT, INTERRUPTED]
    assert producer_scope.cancelled_caught


async def test_a_sink_called_after_the_inner_layers_returned_goes_to_emit() -> None:
    emit = Recorder()
    kept: list[Any] = []

    async def producer(sink: Any) -> None:
        kept.append(sink)
        await sink("result")

    async with PullStream(producer, emit) as items:
        assert [item async for item in items] == ["result"]
        await kept[0](TEXT)  # its channel end is closed now
        assert emit.items == [TEXT]
    await kept[0](COMPLETED)
    assert emit.items == [TEXT, COMPLETED]


async def test_emit_error_after_the_puller_left_propagates_unwrapped() -> None:
    error = LookupError("consumer gone")

    async def failing_emit(item: Any) -> None:
        raise error

    async def producer(sink: Any) -> None:
        await sink(TEXT)

    with pytest.raises(LookupError) as info:
        async with PullStream(producer, failing_emit):
            pass
    assert info.value is error
    assert child_tasks() == []


# -- PullStream: the puller fails -----------------------------------------------------------------


async def test_puller_error_propagates_as_is_and_cancels_the_producer(autojump_clock: Any) -> None:
    error = ValueError("bad item")
    emit = Recorder()
    log: list[str] = []

    async def pull() -> None:
        async with PullStream(three_then_end(log), emit) as items:
            async for _ in items:
                raise error

    with pytest.raises(ValueError, match="bad item") as info:
        await pull()
    assert info.value is error
    assert log == ["producer:cancelled"]
    assert emit.items == [INTERRUPTED]
    assert trio.current_time() == 0
    assert child_tasks() == []


async def test_puller_error_while_the_producer_is_blocked_on_send() -> None:
    error = ValueError("gave up")
    emit = Recorder()
    log: list[str] = []

    async def producer(sink: Any) -> None:
        try:
            await sink(TEXT)
            log.append("sent")
            await trio.lowlevel.checkpoint()
        except trio.Cancelled:
            log.append("cancelled")
            raise

    async def pull() -> None:
        async with PullStream(producer, emit):
            await trio.testing.wait_all_tasks_blocked()  # the producer waits in send
            raise error

    with pytest.raises(ValueError, match="gave up") as info:
        await pull()
    assert info.value is error
    # The pending item reached emit (the channel broke), then the producer was cancelled.
    assert emit.items == [TEXT]
    assert log == ["sent", "cancelled"]


async def test_puller_error_while_the_producer_sends_shielded() -> None:
    error = ValueError("gave up")
    emit = Recorder()

    async def producer(sink: Any) -> None:
        with trio.CancelScope(shield=True):
            await sink(INTERRUPTED)

    async def pull() -> None:
        async with PullStream(producer, emit):
            await trio.testing.wait_all_tasks_blocked()
            raise error

    with pytest.raises(ValueError, match="gave up"):
        await pull()
    assert emit.items == [INTERRUPTED]


async def test_both_sides_failing_raise_a_group_with_both() -> None:
    puller_error = ValueError("puller")
    producer_error = KeyError("producer")

    async def producer(sink: Any) -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise producer_error

    async def pull() -> None:
        async with PullStream(producer, Recorder()):
            await trio.testing.wait_all_tasks_blocked()
            raise puller_error

    with pytest.raises(ExceptionGroup) as info:
        await pull()
    assert list(info.value.exceptions) == [puller_error, producer_error]


async def test_keyboard_interrupt_from_the_puller_propagates_unwrapped() -> None:
    interrupt = KeyboardInterrupt()
    log: list[str] = []

    async def pull() -> None:
        async with PullStream(three_then_end(log), Recorder()):
            await trio.testing.wait_all_tasks_blocked()
            raise interrupt

    with pytest.raises(KeyboardInterrupt) as info:
        await pull()
    assert info.value is interrupt
    assert log == ["producer:cancelled"]


async def test_failure_to_open_the_nursery_closes_both_channel_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    error = RuntimeError("no nursery")

    def broken_open_nursery(*args: Any, **kwargs: Any) -> Any:
        raise error

    started: list[str] = []

    async def producer(sink: Any) -> None:
        started.append("producer")

    stream = PullStream(producer, Recorder())
    with monkeypatch.context() as patch:  # restored before the next checkpoint
        patch.setattr(trio, "open_nursery", broken_open_nursery)
        with pytest.raises(RuntimeError, match="no nursery"):
            await stream.__aenter__()
    recv = stream._items  # white box: the receive end __aenter__ would have returned
    assert recv is not None
    assert recv.statistics().open_send_channels == 0
    with pytest.raises(trio.ClosedResourceError):
        recv.receive_nowait()
    await trio.testing.wait_all_tasks_blocked()
    assert started == []


# -- PullStream: outer cancellation ---------------------------------------------------------------


async def test_outer_cancel_propagates_as_a_plain_cancelled(autojump_clock: Any) -> None:
    emit = Recorder()
    escaped: list[BaseException] = []
    pulled: list[Any] = []
    with trio.move_on_after(1.5) as scope:
        try:
            async with PullStream(three_then_end(), emit) as items:
                async for item in items:
                    pulled.append(item)
        except BaseException as exc:
            escaped.append(exc)
            raise
    assert scope.cancelled_caught
    assert len(escaped) == 1
    assert type(escaped[0]) is trio.Cancelled  # not a group of cancellations
    assert pulled == [0, 1]
    assert emit.items == [INTERRUPTED]  # the shielded end still got out
    assert trio.current_time() == 1.5
    assert child_tasks() == []


async def test_outer_cancel_while_the_producer_is_blocked_on_send() -> None:
    emit = Recorder()
    log: list[str] = []

    async def producer(sink: Any) -> None:
        reason = INTERRUPTED
        try:
            await sink(TEXT)
            reason = COMPLETED
        except trio.Cancelled:
            log.append("producer:cancelled")
            raise
        finally:
            with trio.CancelScope(shield=True):
                await sink(reason)

    with trio.CancelScope() as scope:
        async with PullStream(producer, emit):
            await trio.testing.wait_all_tasks_blocked()  # the producer waits in send(TEXT)
            scope.cancel()
            await trio.lowlevel.checkpoint()
            pytest.fail("the puller was not cancelled")
    assert scope.cancelled_caught
    assert log == ["producer:cancelled"]
    # The unshielded send was cancelled (TEXT is not delivered twice or late); the shielded end
    # reached emit once the puller had gone.
    assert emit.items == [INTERRUPTED]
    assert child_tasks() == []


async def test_outer_cancel_while_the_producer_sends_shielded_does_not_hang() -> None:
    emit = Recorder()

    async def producer(sink: Any) -> None:
        with trio.CancelScope(shield=True):
            await sink(INTERRUPTED)

    with trio.CancelScope() as scope:
        async with PullStream(producer, emit):
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert emit.items == [INTERRUPTED]


async def test_entering_an_already_cancelled_scope(autojump_clock: Any) -> None:
    emit = Recorder()
    log: list[str] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        async with PullStream(three_then_end(log), emit) as items:
            async for _ in items:
                pytest.fail("a cancelled puller received an item")
    assert scope.cancelled_caught
    assert log == ["producer:cancelled"]
    # The producer's first item was offered before any checkpoint: it either reached the
    # channel's broken end (then emit) or was cancelled in send, never pulled.
    assert emit.items in ([INTERRUPTED], [0, INTERRUPTED])
    assert trio.current_time() == 0
    assert child_tasks() == []


async def test_outer_cancel_and_a_producer_error_while_unwinding_raise_the_error() -> None:
    error = OSError("close failed")

    async def producer(sink: Any) -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise error

    scope = trio.CancelScope()

    async def pull() -> None:
        with scope:
            async with PullStream(producer, Recorder()):
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
                await trio.lowlevel.checkpoint()

    with pytest.raises(OSError, match="close failed") as info:
        await pull()
    assert info.value is error
    assert not scope.cancelled_caught  # the error replaced the cancellation on its way out


# -- PullStream and the PullObserver ---------------------------------------------------------------


async def test_an_observer_holds_the_producer_until_the_puller_asks_for_more() -> None:
    log: list[str] = []
    observer = RecordingObserver()

    async def producer(sink: Any) -> None:
        await sink(TEXT)
        log.append("producer:after-text")
        await sink(COMPLETED)
        log.append("producer:after-end")
        await sink("final")

    async with PullStream(producer, Recorder(), observer) as items:
        assert await items.receive() == TEXT
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["producer:after-text"]  # not held for items that are not an end
        assert await items.receive() == COMPLETED
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["producer:after-text"]  # held: the puller has not decided yet
        assert [item async for item in items] == ["final"]
    assert log == ["producer:after-text", "producer:after-end"]
    assert observer.held == [COMPLETED]
    assert observer.failures == []


async def test_an_observer_hold_ends_when_the_puller_leaves() -> None:
    log: list[str] = []
    observer = RecordingObserver()
    emit = Recorder()

    async def producer(sink: Any) -> None:
        with trio.CancelScope(shield=True):
            await sink(COMPLETED)
            log.append("producer:after-end")
            await sink("final")

    async with PullStream(producer, emit, observer) as items:
        assert await items.receive() == COMPLETED
        await trio.testing.wait_all_tasks_blocked()
        assert log == []
    assert log == ["producer:after-end"]
    assert emit.items == ["final"]  # the puller left: the rest goes to emit


async def test_an_end_the_puller_never_took_is_not_held() -> None:
    observer = RecordingObserver()
    emit = Recorder()
    async with PullStream(three_then_end(), emit, observer) as items:
        assert await items.receive() == 0
    assert emit.items == [INTERRUPTED]
    assert observer.failures == []


async def test_cancel_while_the_producer_is_held(autojump_clock: Any) -> None:
    log: list[str] = []
    observer = RecordingObserver()
    pulled: list[Any] = []

    async def producer(sink: Any) -> None:
        await sink(TEXT)
        await sink(COMPLETED)  # unshielded: the cancellation reaches the hold
        log.append("producer:after-end")

    release = trio.Event()
    with trio.move_on_after(5) as scope:
        async with PullStream(producer, Recorder(), observer) as items:
            async for item in items:
                pulled.append(item)
                if item == COMPLETED:
                    await release.wait()  # the puller dwells on the end
    assert scope.cancelled_caught
    assert trio.current_time() == 5
    assert pulled == [TEXT, COMPLETED]
    assert log == []
    assert observer.failures == []
    assert child_tasks() == []


async def test_puller_failed_sees_the_puller_error_before_the_producer_is_cancelled() -> None:
    error = ValueError("middleware bug")
    observer = RecordingObserver()
    seen: list[list[BaseException]] = []

    async def producer(sink: Any) -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            seen.append(list(observer.failures))
            raise

    async def pull() -> None:
        async with PullStream(producer, Recorder(), observer):
            await trio.testing.wait_all_tasks_blocked()
            raise error

    with pytest.raises(ValueError, match="middleware bug"):
        await pull()
    assert seen == [[error]]
    assert observer.failures == [error]


async def test_puller_failed_is_not_called_for_a_normal_exit_or_a_cancellation() -> None:
    observer = RecordingObserver()
    async with PullStream(three_then_end(), Recorder(), observer) as items:
        assert await items.receive() == 0
    with trio.CancelScope() as scope:
        async with PullStream(three_then_end(), Recorder(), observer) as items:
            scope.cancel()
            await items.receive()
    assert scope.cancelled_caught
    assert observer.failures == []


async def test_puller_failed_is_not_called_for_a_producer_error() -> None:
    # The producer's own failure is the inner layers' business; only the puller's is noted.
    observer = RecordingObserver()

    async def producer(sink: Any) -> None:
        await trio.lowlevel.checkpoint()
        raise ValueError("inner")

    async def pull() -> None:
        async with PullStream(producer, Recorder(), observer) as items:
            async for _ in items:
                pass

    with pytest.raises(ValueError, match="inner"):
        await pull()
    assert observer.failures == []


def test_recording_observer_satisfies_the_protocol() -> None:
    observer: PullObserver[Any] = RecordingObserver()
    assert observer.holds(COMPLETED)
    assert not observer.holds(TEXT)


# -- PullStream: sweeps ---------------------------------------------------------------------------


@attrs.define
class SweepRun:
    routed: list[tuple[str, Any]] = attrs.Factory(list)
    escaped: BaseException | None = None
    steps: int = 0
    fired: bool = False


async def run_cancelled_at(cancel_at: int | None, with_observer: bool) -> SweepRun:
    run = SweepRun()

    async def emit(item: Any) -> None:
        run.routed.append(("emit", item))

    observer = RecordingObserver() if with_observer else None
    outer = trio.CancelScope()

    async def body() -> None:
        counter = _StepCounter(trio.lowlevel.current_task(), cancel_at, outer.cancel)
        trio.lowlevel.add_instrument(counter)
        try:
            with outer:
                try:
                    async with PullStream(three_then_end(), emit, observer) as items:
                        async for item in items:
                            run.routed.append(("pull", item))
                            await trio.lowlevel.checkpoint()
                except BaseException as exc:
                    run.escaped = exc
                    raise
            assert child_tasks() == []
        finally:
            trio.lowlevel.remove_instrument(counter)
            run.steps, run.fired = counter.steps, counter.fired

    async with trio.open_nursery() as nursery:
        nursery.start_soon(body)
    assert child_tasks() == []  # nothing outlived the body
    if observer is not None:
        assert observer.failures == []
    return run


def check_sweep_run(run: SweepRun, where: str) -> None:
    items = [item for _, item in run.routed]
    ends = [i for i, item in enumerate(items) if isinstance(item, Ev)]
    assert len(ends) == 1, f"{where}: {len(ends)} ends in {run.routed}"
    end_at = ends[0]
    # Items keep their order, none is duplicated or skipped, the end comes after all of them,
    # and only the final item (pulled, or emitted once the puller left) may follow it.
    assert items[:end_at] == list(range(end_at)), where
    assert items[end_at + 1 :] in ([], ["result"]), where
    # Once an item went to emit the puller was gone: nothing is pulled after that.
    routes = [route for route, _ in run.routed]
    if "emit" in routes:
        assert "pull" not in routes[routes.index("emit") :], where
    end = items[end_at]
    if end == INTERRUPTED:
        assert end_at <= 3, where
        # Rule 3: the cancellation that interrupted the producer is not swallowed.
        assert type(run.escaped) is trio.Cancelled, f"{where}: escaped {run.escaped!r}"
    else:
        assert end == COMPLETED, where
        assert end_at == 3, where
    if run.escaped is not None:
        assert type(run.escaped) is trio.Cancelled, f"{where}: escaped {run.escaped!r}"


@pytest.mark.parametrize("with_observer", [False, True])
async def test_outer_cancel_at_every_schedule_point(
    autojump_clock: Any, with_observer: bool
) -> None:
    baseline = await run_cancelled_at(None, with_observer)
    check_sweep_run(baseline, "baseline")
    assert baseline.escaped is None
    assert baseline.routed == [("pull", x) for x in (0, 1, 2, COMPLETED, "result")]
    assert baseline.steps > 10
    outcomes: set[str] = set()
    for cancel_at in range(1, baseline.steps + 1):
        for attempt in range(4):  # trio may reverse each batch: try both orders
            run = await run_cancelled_at(cancel_at, with_observer)
            assert run.fired
            check_sweep_run(run, f"point {cancel_at}, attempt {attempt}")
            outcomes.add(next(item.reason for _, item in run.routed if isinstance(item, Ev)))
    assert outcomes == {"interrupted", "completed"}


@pytest.mark.parametrize(
    ("leave_after", "pulled", "emitted", "elapsed"),
    [
        (0, [], [0, INTERRUPTED], 0),
        (1, [0], [INTERRUPTED], 0),
        (2, [0, 1], [INTERRUPTED], 1),
        (3, [0, 1, 2], [INTERRUPTED], 2),
        (4, [0, 1, 2, COMPLETED], ["result"], 3),
        (5, [0, 1, 2, COMPLETED, "result"], [], 3),
        (6, [0, 1, 2, COMPLETED, "result"], [], 3),
    ],
)
@pytest.mark.parametrize("how", ["break", "raise"])
async def test_puller_leaving_after_each_item(
    autojump_clock: Any,
    leave_after: int,
    pulled: list[Any],
    emitted: list[Any],
    elapsed: int,
    how: str,
) -> None:
    error = ValueError("leaving")
    emit = Recorder()
    observer = RecordingObserver()
    got: list[Any] = []
    start = trio.current_time()

    async def pull() -> None:
        async with PullStream(three_then_end(), emit, observer) as items:
            if leave_after == 0:
                if how == "raise":
                    raise error
                return
            async for item in items:
                got.append(item)
                if len(got) == leave_after:
                    if how == "raise":
                        raise error
                    break

    raises = how == "raise" and leave_after < 6  # the last case drains the stream first
    if raises:
        with pytest.raises(ValueError, match="leaving") as info:
            await pull()
        assert info.value is error
    else:
        await pull()
    assert got == pulled
    assert emit.items == emitted
    assert observer.failures == ([error] if raises else [])
    # Leaving early never waits for the producer's timers.
    assert trio.current_time() - start == elapsed
    assert child_tasks() == []


# -- Chain and NextHandler ------------------------------------------------------------------------


async def test_a_chain_without_layers_runs_the_core_itself() -> None:
    seen: list[Any] = []

    async def core(kwargs: dict[str, Any], emit: Any) -> None:
        await emit(kwargs["x"])

    chain: Chain[int] = Chain([], core)
    assert chain.layers == ()
    await chain.run({"x": 1}, Recorder().__call__)
    assert await chain.result({"x": 2}) == 2
    emit = Recorder()
    await chain.run({"x": 3}, emit)
    seen.extend(emit.items)
    assert seen == [3]


async def test_layers_nest_outermost_first_and_overrides_reach_the_inner_layers() -> None:
    log: list[str] = []

    def layer(label: str) -> Any:
        async def run(kwargs: dict[str, Any], next_handler: NextHandler[Any], emit: Any) -> None:
            log.append(f"{label}-pre")
            await next_handler(x=kwargs["x"] + label)
            log.append(f"{label}-post")

        return run

    async def core(kwargs: dict[str, Any], emit: Any) -> None:
        await emit(kwargs["x"])

    emit = Recorder()
    await Chain([layer("a"), layer("b")], core).run({"x": ""}, emit)
    assert emit.items == ["ab"]
    assert log == ["a-pre", "b-pre", "b-post", "a-post"]


async def test_a_sink_observes_the_inner_items_and_a_positional_override_is_refused() -> None:
    async def upper(kwargs: dict[str, Any], next_handler: NextHandler[Any], emit: Any) -> None:
        async def sink(item: str) -> None:
            await emit(item.upper())

        await next_handler(sink)
        with pytest.raises(TypeError, match="keyword arguments"):
            await next_handler({"x": "no"})  # type: ignore[arg-type]

    async def core(kwargs: dict[str, Any], emit: Any) -> None:
        await emit("a")
        await emit("b")

    emit = Recorder()
    await Chain([upper], core).run({}, emit)
    assert emit.items == ["A", "B"]


async def test_a_returning_layer_gets_the_inner_result_and_passes_on_its_own() -> None:
    async def double(kwargs: dict[str, Any], next_handler: Any) -> int:
        return 2 * await next_handler(x=kwargs["x"] + 1)

    async def core(kwargs: dict[str, Any], emit: Any) -> None:
        await emit(kwargs["x"])

    chain: Chain[int] = Chain([returning_layer(double)], core)
    assert await chain.result({"x": 1}) == 4


async def test_the_result_of_a_chain_that_emits_nothing_is_an_error() -> None:
    async def core(kwargs: dict[str, Any], emit: Any) -> None:
        pass

    with pytest.raises(RuntimeError, match="without passing on a result"):
        await Chain([], core).result({})

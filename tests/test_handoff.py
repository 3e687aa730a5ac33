"""``trioagent._core.handoff``: the queue behind ``agent.stream()`` that wakes its receiver once
per batch: order, the hand-over points (the producer waits, ends, or held too long), room,
closing and cancellation."""

from __future__ import annotations

import time

import pytest
import trio
import trio.lowlevel
import trio.testing

from trioagent._core.handoff import MAX_HELD, MAX_STEPS, Handoff


class StepCounter(trio.abc.Instrument):
    """Counts the scheduling steps of one task."""

    def __init__(self) -> None:
        self.task: trio.lowlevel.Task | None = None
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


async def drain(handoff: Handoff[int], into: list[int]) -> None:
    """Take what is queued without waiting; wait (``get()``) only when nothing is."""
    while True:
        try:
            into.append(handoff.get_nowait())
            continue
        except trio.WouldBlock:
            pass
        except trio.EndOfChannel:
            return
        try:
            into.append(await handoff.get())
        except trio.EndOfChannel:
            return


async def test_a_runnable_producer_wakes_the_receiver_once_per_batch() -> None:
    handoff = Handoff[int](256)
    received: list[int] = []
    counter = StepCounter()
    trio.lowlevel.add_instrument(counter)

    async def produce() -> None:
        for i in range(1000):
            await trio.lowlevel.checkpoint()  # runnable throughout: never waits
            handoff.put_nowait(i)
        handoff.close()

    async def receive() -> None:
        counter.task = trio.lowlevel.current_task()
        await drain(handoff, received)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive)
        nursery.start_soon(produce)
    handoff.close_receiver()
    trio.lowlevel.remove_instrument(counter)
    assert received == list(range(1000))
    # A wake-up per item would be 1000 steps; held batches of up to MAX_HELD items need
    # about 1000 / MAX_HELD.
    assert counter.steps <= 1000 // MAX_HELD + 5


async def test_a_producer_that_waits_hands_its_items_over_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The producer waits for the receiver's answer after each item: were the item still held
    # while it waits, both would wait forever.
    handoff = Handoff[int](256)
    answers: list[trio.Event] = [trio.Event() for _ in range(5)]
    seen: list[int] = []

    async def produce() -> None:
        for i in range(5):
            await trio.lowlevel.checkpoint()
            handoff.put_nowait(i)
            await answers[i].wait()
        handoff.close()

    async def receive() -> None:
        while True:
            try:
                item = await handoff.get()
            except trio.EndOfChannel:
                return
            seen.append(item)
            answers[item].set()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive)
            nursery.start_soon(produce)
    handoff.close_receiver()
    assert seen == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("step_cost", "most_steps"),
    [
        # Cheap steps: the item goes after MAX_STEPS of them.
        (0.0, MAX_STEPS + 2),
        # Real clock, each step burning 2 ms (more than MAX_DELAY): the item goes at the first
        # clock reading (every eighth step), long before MAX_STEPS.
        (0.002, 10),
    ],
    ids=["max-steps", "max-delay"],
)
async def test_held_items_are_handed_over_while_the_producer_stays_runnable(
    step_cost: float, most_steps: int
) -> None:
    handoff = Handoff[int](256)
    got = trio.Event()
    steps_before_delivery: list[int] = []

    async def produce() -> None:
        handoff.put_nowait(0)
        steps = 0
        while not got.is_set():  # runnable, and no further items
            steps += 1
            if step_cost:
                time.sleep(step_cost)  # a producer busy on the CPU
            await trio.lowlevel.checkpoint()
        steps_before_delivery.append(steps)
        handoff.close()

    async def receive() -> None:
        assert await handoff.get() == 0
        got.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(produce)
    handoff.close_receiver()
    assert 1 <= steps_before_delivery[0] <= most_steps


async def test_items_of_a_producer_that_ends_without_closing_are_handed_over() -> None:
    handoff = Handoff[int](256)

    async def produce() -> None:
        handoff.put_nowait(7)
        handoff.put_nowait(8)

    received: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain, handoff, received)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(produce)
        await trio.testing.wait_all_tasks_blocked()
        assert received == [7, 8]
        handoff.close()
    handoff.close_receiver()


async def test_a_busy_receiver_finds_items_queued_and_the_producer_waits_for_room() -> None:
    handoff = Handoff[int](3)
    for i in range(3):
        handoff.put_nowait(i)
    with pytest.raises(trio.WouldBlock):
        handoff.put_nowait(3)
    put_done = trio.Event()

    async def put_more() -> None:
        await handoff.put(3)
        put_done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(put_more)
        await trio.testing.wait_all_tasks_blocked()
        assert not put_done.is_set()
        assert handoff.get_nowait() == 0
        await trio.testing.wait_all_tasks_blocked()
        assert put_done.is_set()
    handoff.close()
    assert [await handoff.get() for _ in range(3)] == [1, 2, 3]
    with pytest.raises(trio.EndOfChannel):
        await handoff.get()
    handoff.close_receiver()


async def test_a_cancelled_get_loses_nothing() -> None:
    handoff = Handoff[int](256)
    with trio.move_on_after(0.01) as scope:
        await handoff.get()
    assert scope.cancelled_caught
    handoff.put_nowait(1)  # nobody waits: queued at once
    handoff.put_nowait(2)
    assert [await handoff.get(), await handoff.get()] == [1, 2]
    handoff.close_receiver()


async def test_closing_either_side() -> None:
    handoff = Handoff[int](256)
    handoff.put_nowait(1)
    handoff.close_receiver()
    with pytest.raises(trio.BrokenResourceError):
        handoff.put_nowait(2)
    with pytest.raises(trio.BrokenResourceError):
        await handoff.put(2)
    with pytest.raises(trio.ClosedResourceError):
        handoff.get_nowait()
    handoff.close_receiver()  # idempotent

    other = Handoff[int](256)
    other.close()
    with pytest.raises(trio.ClosedResourceError):
        other.put_nowait(1)
    with pytest.raises(trio.EndOfChannel):
        await other.get()
    other.close_receiver()


async def test_a_producer_waiting_for_room_is_released_when_the_receiver_leaves() -> None:
    handoff = Handoff[int](1)
    handoff.put_nowait(0)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:

            async def put_one() -> None:
                with pytest.raises(trio.BrokenResourceError):
                    await handoff.put(1)

            nursery.start_soon(put_one)
            await trio.testing.wait_all_tasks_blocked()
            handoff.close_receiver()


async def test_two_receivers_waiting_at_once_is_an_error() -> None:
    handoff = Handoff[int](256)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(handoff.get)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(trio.BusyResourceError):
            await handoff.get()
        nursery.cancel_scope.cancel()
    handoff.close_receiver()


async def test_get_is_a_checkpoint_even_with_items_queued() -> None:
    handoff = Handoff[int](256)
    handoff.put_nowait(1)
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await handoff.get()
    assert handoff.get_nowait() == 1  # the cancelled get() took nothing
    with trio.testing.assert_checkpoints():
        handoff.put_nowait(2)
        assert await handoff.get() == 2
    handoff.close_receiver()


def test_a_handoff_needs_room() -> None:
    with pytest.raises(ValueError, match="capacity of at least 1"):
        trio.run(Handoff[int], 0)

"""A one-way, single-receiver queue whose waiting receiver is woken once per batch.

A producer task that passes a schedule point after every item (a model stream whose chunks
are already there) would wake a waiting receiver once per item: one task switch each.
:class:`Handoff` holds the items back while the producing task stays runnable and hands them
over together as soon as it waits for something (a socket read, a lock, a confirmation), ends,
or has held them for :data:`MAX_HELD` items, :data:`MAX_STEPS` of its scheduling steps or
:data:`MAX_DELAY` seconds of trio time, whichever comes first.  A receiver that is busy when
an item arrives finds it queued; nothing is reordered, and nothing is dropped while the
receiver is open.

Seeing when the producer stops being runnable takes a trio instrument (its
``after_task_step`` hook), installed while at least one handoff is open.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

import trio

__all__ = ["MAX_DELAY", "MAX_HELD", "MAX_STEPS", "Handoff", "HandoffReceiver"]

T = TypeVar("T")

#: Items held back at most before they are handed over.
MAX_HELD = 64
#: Scheduling steps of the producing task at most while items are held.
MAX_STEPS = 64
#: Seconds (trio time) at most that an item is held.
MAX_DELAY = 0.001


class Handoff(Generic[T]):
    """Items from producers to one receiver, batching the receiver's wake-ups.

    Producers call :meth:`put` (waiting while ``capacity`` items are queued) and finally
    :meth:`close`; the receiver calls :meth:`get` (``trio.EndOfChannel`` at the end) and
    :meth:`close_receiver` when it leaves.  Open it inside ``trio.run``.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a handoff needs a capacity of at least 1")
        self._capacity = capacity
        self._ready: deque[T] = deque()
        self._held: list[T] | None = None
        self._held_since = 0.0
        self._held_steps = 0
        self._receiver: trio.lowlevel.Task | None = None
        self._room = trio.lowlevel.ParkingLot()
        self._producers_waiting = 0
        self._closed = False
        self._receiver_closed = False
        self._flusher = _flusher()
        self._flusher.open()

    # -- the producer side --------------------------------------------------------------------

    def put_nowait(self, item: T) -> None:
        """Pass ``item`` on without waiting.

        Raises:
            trio.WouldBlock: ``capacity`` items are queued (:meth:`put` waits for room).
            trio.BrokenResourceError: the receiver has left.
            trio.ClosedResourceError: the handoff was closed.
        """
        held = self._held
        if held is not None:
            held.append(item)
            if len(held) >= MAX_HELD:
                self.hand_over()
        elif self._receiver is not None:
            self._held = [item]
            self._held_since = trio.current_time()
            self._held_steps = 0
            self._flusher.watch(trio.lowlevel.current_task(), self)
        elif self._receiver_closed:
            raise trio.BrokenResourceError("the receiver has left")
        elif self._closed:
            raise trio.ClosedResourceError("the handoff was closed")
        elif len(self._ready) >= self._capacity:
            raise trio.WouldBlock
        else:
            self._ready.append(item)

    async def put(self, item: T) -> None:
        """Pass ``item`` on, waiting while ``capacity`` items are queued.

        Raises:
            trio.BrokenResourceError: the receiver has left.
            trio.ClosedResourceError: the handoff was closed.
        """
        while True:
            try:
                self.put_nowait(item)
            except trio.WouldBlock:
                self._producers_waiting += 1
                try:
                    await self._room.park()
                finally:
                    self._producers_waiting -= 1
            else:
                await trio.lowlevel.checkpoint()
                return

    def hand_over(self) -> None:
        """Queue every held item now, waking a waiting receiver."""
        held, self._held = self._held, None
        if held:
            self._ready.extend(held)
            self._wake_receiver()

    def keeps_holding(self, task: trio.lowlevel.Task) -> bool:
        """Whether held items may wait for their producer's next step (called after each
        step of ``task``, the producer)."""
        # trio has no public "is this task scheduled to run" query; a scheduled task has its
        # next send function set.  Without the attribute every step counts as a wait: items
        # are handed over after each step, unbatched but never late.
        if not self._held or getattr(task, "_next_send_fn", None) is None:
            return False
        steps = self._held_steps = self._held_steps + 1
        if steps >= MAX_STEPS:
            return False
        # Reading the clock every eighth step keeps the check cheap on the hot path.
        return bool(steps & 7) or trio.current_time() - self._held_since < MAX_DELAY

    def close(self) -> None:
        """The producers are done: hand over what is held; the receiver then gets
        ``trio.EndOfChannel`` after the last item."""
        self.hand_over()
        self._closed = True
        self._wake_receiver()

    # -- the receiver side --------------------------------------------------------------------

    def get_nowait(self) -> T:
        """The next queued item, without waiting.

        Raises:
            trio.WouldBlock: none is queued.
            trio.EndOfChannel: the producers closed the handoff and every item was taken.
            trio.ClosedResourceError: the receiver has left.
        """
        ready = self._ready
        if not ready:
            if self._held:
                self.hand_over()
            elif self._receiver_closed:
                raise trio.ClosedResourceError("the receiver has left")
            elif self._closed:
                raise trio.EndOfChannel
            else:
                raise trio.WouldBlock
        item = ready.popleft()
        if self._producers_waiting and len(ready) < self._capacity:
            self._room.unpark()
        return item

    async def get(self) -> T:
        """The next item, waiting for one if none is queued.  A checkpoint, like
        ``MemoryReceiveChannel.receive()``: a cancellation never loses an item.

        Raises:
            trio.EndOfChannel: the producers closed the handoff and every item was taken.
            trio.ClosedResourceError: the receiver has left.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        waited = False
        while True:
            try:
                item = self.get_nowait()
            except trio.WouldBlock:
                pass
            except trio.EndOfChannel:
                await trio.lowlevel.cancel_shielded_checkpoint()
                raise
            else:
                if not waited:
                    await trio.lowlevel.cancel_shielded_checkpoint()
                return item
            if self._receiver is not None:
                raise trio.BusyResourceError("another task is already waiting on this handoff")
            self._receiver = trio.lowlevel.current_task()

            def abort(_: object) -> trio.lowlevel.Abort:
                self._receiver = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
            waited = True

    def close_receiver(self) -> None:
        """The receiver leaves: what is queued is dropped, later puts raise
        ``trio.BrokenResourceError``."""
        if self._receiver_closed:
            return
        self._receiver_closed = True
        self._held = None
        self._ready.clear()
        self._room.unpark_all()
        self._flusher.close()

    def _wake_receiver(self) -> None:
        receiver, self._receiver = self._receiver, None
        if receiver is not None:
            trio.lowlevel.reschedule(receiver)


class HandoffReceiver(trio.abc.ReceiveChannel[T]):
    """The receiver side of a :class:`Handoff` as a ``trio.abc.ReceiveChannel``."""

    def __init__(self, handoff: Handoff[T]) -> None:
        self._handoff = handoff

    def receive_nowait(self) -> T:
        """The next queued item, without waiting (see :meth:`Handoff.get_nowait`)."""
        return self._handoff.get_nowait()

    async def receive(self) -> T:
        return await self._handoff.get()

    async def aclose(self) -> None:
        self._handoff.close_receiver()
        await trio.lowlevel.checkpoint()


class _Flusher(trio.abc.Instrument):
    """Hands a handoff's held items over once their producer stops being runnable."""

    def __init__(self) -> None:
        self._watched: dict[trio.lowlevel.Task, Handoff[object]] = {}
        self._open = 0

    def __dir__(self) -> list[str]:
        # trio's add_instrument() looks for hooks among dir(instrument): listing just ours
        # makes installing it (once per stream opened with none open) ten times cheaper.
        return ["after_task_step", "task_exited"]

    def open(self) -> None:
        if not self._open:
            trio.lowlevel.add_instrument(self)
        self._open += 1

    def close(self) -> None:
        self._open -= 1
        if not self._open:
            trio.lowlevel.remove_instrument(self)
            self._watched.clear()

    def watch(self, task: trio.lowlevel.Task, handoff: Handoff[T]) -> None:
        previous = self._watched.get(task)
        if previous is not None and previous is not handoff:
            previous.hand_over()
        self._watched[task] = handoff  # type: ignore[assignment]

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        handoff = self._watched.get(task)
        if handoff is None:
            return
        if handoff.keeps_holding(task):
            return
        del self._watched[task]
        handoff.hand_over()

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        handoff = self._watched.pop(task, None)
        if handoff is not None:
            handoff.hand_over()


_FLUSHER: trio.lowlevel.RunVar[_Flusher] = trio.lowlevel.RunVar("trioagent_handoff_flusher")


def _flusher() -> _Flusher:
    try:
        return _FLUSHER.get()
    except LookupError:
        flusher = _Flusher()
        _FLUSHER.set(flusher)
        return flusher

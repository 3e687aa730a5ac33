"""Per-reply runtime bookkeeping (not persisted): what reached the consumer, and how it ended."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from .._core.concurrency import is_cancellation
from ..event import ReplyEndEvent, ReplyStartEvent
from ..message import Msg
from ..types import ReplyFinishedReason

__all__ = ["ReplyRun", "StopReply", "is_cancellation"]

logger = logging.getLogger("trioagent.agent")

Consumer = Callable[[Any], Awaitable[None]]


class StopReply(Exception):
    """Internal: end the reply as INTERRUPTED without a trio cancellation.

    Raised for a ``UserInterruptEvent`` on a parked reply and for an interrupted model response
    or tool result produced without a cancellation (e.g. a middleware cut a stream short).
    """


class ReplyRun:
    """One call of ``reply()`` / ``stream()``: the cancel scope ``interrupt()`` cancels, and
    the outermost sink of the ``on_reply`` chain, which records what the consumer received."""

    __slots__ = (
        "_consumer",
        "end",
        "exit_msg",
        "failure",
        "final_msg",
        "outcome",
        "parked",
        "reply_id",
        "scope",
        "session_id",
        "started",
    )

    def __init__(self, consumer: Consumer | None) -> None:
        self._consumer = consumer
        self.scope = trio.CancelScope()
        self.started = False
        self.parked = False
        self.reply_id = ""
        self.session_id = ""
        self.end: ReplyEndEvent | None = None
        self.final_msg: Msg | None = None
        #: The final Msg of the exit being emitted: delivered after the end even when a
        #: cancellation lands while the end event is on its way to the consumer.
        self.exit_msg: Msg | None = None
        self.outcome: ReplyFinishedReason | None = None
        #: An outer ``on_reply`` layer's error that is cancelling the inner layers.
        self.failure: BaseException | None = None

    async def deliver(self, item: Any) -> None:
        """The outermost sink: enforce "one end, last" and pass items to the consumer."""
        if isinstance(item, Msg):
            self.final_msg = item
        elif self.end is not None:
            logger.warning("dropping %s emitted after the reply's end event", type(item).__name__)
            return
        elif isinstance(item, ReplyEndEvent):
            self.end = item
        elif isinstance(item, ReplyStartEvent):
            self.started = True
        if self._consumer is not None:
            await self._consumer(item)

    def holds(self, item: Any) -> bool:
        """A pull layer of the ``on_reply`` chain waits after handing over an end event until
        the puller passed it on (the end reached the consumer) or moved on without it."""
        return isinstance(item, ReplyEndEvent)

    def puller_failed(self, exc: BaseException) -> None:
        """An ``on_reply`` pull layer failed: the cancelled inner layers end the reply with
        ERROR, not INTERRUPTED."""
        if self.failure is None:
            self.failure = exc

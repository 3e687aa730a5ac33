"""The per-reply context: what one call of ``reply()`` / ``stream()`` knows while it runs.

Not persisted (the state is): the cancel scope ``interrupt()`` cancels, the outermost sink of
the ``on_reply`` chain with what reached the consumer, the reply-scoped tools, and the model
input of the current reasoning step.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeAlias, TypeVar

import trio

from .._core.chain import Kwargs
from .._core.concurrency import is_cancellation
from .._core.emit import Emit
from .._core.json_types import JSONObject
from ..event import AgentEvent, ReplyEndEvent, ReplyStartEvent
from ..message import Msg, SystemMsg, ToolCallBlock, UserMsg
from ..model import ChatModelBase
from ..tool import ToolBase, ToolChunk, Toolkit, ToolResponse
from ..types import ReplyFinishedReason
from ._state import AgentState

__all__ = ["ModelInput", "Reply", "ReplyItem", "ReplyTools", "StopReply"]

logger = logging.getLogger("trioagent.agent")

#: What travels along the ``on_reply`` and ``on_reasoning`` chains: events, then a ``Msg``.
ReplyItem: TypeAlias = AgentEvent | Msg


class StopReply(Exception):
    """Internal: end the reply as INTERRUPTED without a trio cancellation.

    Raised for a ``UserInterruptEvent`` on a parked reply and for an interrupted model response
    or tool result produced without a cancellation (e.g. a middleware cut a stream short).
    """


class ReplyTools:
    """The tools of one reply: the caller's toolkit plus the reply's own tools.

    The reply's own tools (the structured-output tool, the compression tool) live in a toolkit
    of their own that shares the caller's toolkit-wide middlewares, so the caller's toolkit is
    never written to and can serve several agents replying at once.
    """

    __slots__ = ("_own", "toolkit")

    def __init__(self, toolkit: Toolkit, own: Sequence[ToolBase] = ()) -> None:
        self.toolkit = toolkit
        self._own = Toolkit(tools=list(own), middlewares=toolkit.middlewares) if own else None

    def _owner(self, name: str) -> Toolkit:
        if self._own is not None and self._own.get_tool(name) is not None:
            return self._own
        return self.toolkit

    def get_tool(self, name: str) -> ToolBase | None:
        """The tool named ``name`` (a reply-scoped one first), or ``None``."""
        return self._owner(name).get_tool(name)

    def validate_call(
        self, call: ToolCallBlock, activated_groups: Sequence[str]
    ) -> tuple[ToolBase, Kwargs]:
        """Resolve the call's tool and validate its arguments (see ``Toolkit.validate_call``)."""
        return self._owner(call.name).validate_call(call, activated_groups)

    def get_tool_schemas(self, activated_groups: Sequence[str]) -> list[JSONObject]:
        """The schemas offered to the model: the caller's tools, then the reply's own."""
        schemas = self.toolkit.get_tool_schemas(activated_groups)
        if self._own is None:
            return schemas
        own = self._own.get_tool_schemas()
        names = {schema["function"]["name"] for schema in own}
        return [s for s in schemas if s["function"]["name"] not in names] + own

    async def call_tool(
        self,
        call: ToolCallBlock,
        state: AgentState,
        emit: Emit[ToolChunk],
        tool_input: Kwargs | None = None,
    ) -> ToolResponse:
        """Run the call through the toolkit-wide middlewares and the tool (``tool_input``:
        the call's arguments, already validated; ``None``: parse and validate them)."""
        return await self._owner(call.name).call_tool(
            call, state=state, emit=emit, tool_input=tool_input
        )


class ModelInput:
    """The input of one reasoning step's model call, built once per step.

    The system prompt (``on_system_prompt`` runs once) and the tool schemas are fixed for the
    step; the messages are read from the state when asked, so a compression or an injected
    hint before the call is included.  The token estimate is counted at most once for the same
    messages.
    """

    __slots__ = ("_base", "_counted", "_state", "system_prompt", "tools")

    def __init__(self, state: AgentState, system_prompt: str, tools: list[JSONObject]) -> None:
        self._state = state
        self.system_prompt = system_prompt
        self.tools = tools
        self._counted: tuple[tuple[object, ...], int] | None = None
        self._base: tuple[tuple[object, ...], list[Msg]] | None = None

    def base_messages(self) -> list[Msg]:
        """The system prompt and the summary, as the first messages of a request (built once
        while both are unchanged: the token count and the call share them)."""
        summary = self._state.summary
        key = (self.system_prompt, id(summary))
        if self._base is not None and self._base[0] == key:
            return list(self._base[1])
        base: list[Msg] = []
        if self.system_prompt:
            base.append(SystemMsg("system", self.system_prompt))
        if summary:
            base.append(UserMsg("user", summary if isinstance(summary, str) else list(summary)))
        self._base = (key, base)
        return list(base)

    def messages(self) -> list[Msg]:
        """The messages of the request as the context stands now."""
        return [*self.base_messages(), *self._state.context]

    def _fingerprint(self) -> tuple[object, ...]:
        context = self._state.context
        last = context[-1] if context else None
        size = len(last.content) if last is not None else 0
        return (id(self._state.summary), len(context), id(last), size)

    async def count_tokens(self, model: ChatModelBase) -> int:
        """The model's token estimate of the request (counted once while it is unchanged)."""
        key = self._fingerprint()
        if self._counted is not None and self._counted[0] == key:
            return self._counted[1]
        tokens = int(await model.count_tokens(self.messages(), self.tools))
        self._counted = (key, tokens)
        return tokens


Consumer = Callable[[ReplyItem], Awaitable[None]]

T = TypeVar("T")


def cancel_pending() -> bool:
    """Whether the calling task is in a cancelled scope (its next checkpoint raises)."""
    return trio.current_effective_deadline() == -math.inf


class Reply:
    """One call of ``reply()`` / ``stream()``: its cancel scope, the outermost sink of the
    ``on_reply`` chain (which records what the consumer received), and the reply's tools and
    model input.

    It is also the :class:`~trioagent._core.chain.PullObserver` of the ``on_reply`` chain: a
    layer pulling the reply hands an end event over and the reply waits until that layer
    passed it on or dropped it.
    """

    __slots__ = (
        "_budget_spent",
        "_cleanup_deadline",
        "_event_sink",
        "_msg_sink",
        "end",
        "exit_msg",
        "failure",
        "final_msg",
        "grace",
        "made_progress",
        "outcome",
        "parked",
        "reply_id",
        "scope",
        "session_id",
        "started",
        "tools",
    )

    def __init__(
        self,
        consumer: Consumer | None,
        toolkit: Toolkit,
        grace: float,
        on_event: Callable[[AgentEvent], Awaitable[None]] | None = None,
    ) -> None:
        #: Where the items go: every item (``consumer``), or the events only (``on_event``).
        self._msg_sink = consumer
        self._event_sink = on_event if on_event is not None else consumer
        #: ``react_config.interrupt_grace`` when the reply started: the budget of its cleanup.
        self.grace = grace
        self._cleanup_deadline: float | None = None
        self._budget_spent = False
        self.scope = trio.CancelScope()
        self.tools = ReplyTools(toolkit)
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
        #: Whether reasoning or acting ran since the last end event was dropped.
        self.made_progress = True

    async def deliver(self, item: ReplyItem) -> None:
        """The outermost sink: enforce "one end, last" and pass items to the consumer."""
        if isinstance(item, Msg):
            self.final_msg = item
            if self._msg_sink is not None:
                await self._msg_sink(item)
            return
        if self.end is not None:
            logger.warning("dropping %s emitted after the reply's end event", type(item).__name__)
            return
        if isinstance(item, ReplyEndEvent):
            self.end = item
        elif isinstance(item, ReplyStartEvent):
            self.started = True
        if self._event_sink is not None:
            await self._event_sink(item)

    def cleanup_deadline(self) -> float:
        """When the reply's cleanup must be over: one ``grace`` after it began.

        Every layer's cleanup (the model call's, the tools', the reply's end) shares this one
        deadline, so the whole cleanup is bounded by one grace, not one per layer.
        """
        if self._cleanup_deadline is None:
            self._cleanup_deadline = trio.current_time() + self.grace
        return self._cleanup_deadline

    async def hand_over(self, emit: Callable[[T], Awaitable[None]], items: Iterable[T]) -> None:
        """Emit the closing items of a step whose state is already written.

        Outside a cancellation they are emitted as usual; once one is pending (or lands while
        they are emitted) the rest are emitted within the reply's cleanup budget
        (:meth:`cleanup_deadline`).  Each item is still handed to ``emit`` after the budget
        ran out -- what its layers do without waiting (record it, put it in a buffer with
        room) still happens -- but any wait for a slow consumer is cut short at once.  The
        state never depends on these deliveries: a slow consumer can lose the tail of the
        closing events, never the partial answer, the results or the final Msg.
        """
        pending = iter(items)
        if self._cleanup_deadline is None and not cancel_pending():
            try:
                for item in pending:
                    await emit(item)
            except BaseException as exc:
                if not is_cancellation(exc):
                    raise
                await self._within_budget(emit, pending)
                raise
            return
        await self._within_budget(emit, pending)

    async def _within_budget(
        self, emit: Callable[[T], Awaitable[None]], items: Iterable[T]
    ) -> None:
        deadline = self.cleanup_deadline()
        pending = iter(items)
        while True:
            with trio.CancelScope(shield=True, deadline=deadline) as scope:
                # Shielded so the closing items reach the consumer while the reply is
                # cancelled; bounded by the reply's cleanup deadline (one
                # react_config.interrupt_grace for the whole cleanup).
                for item in pending:
                    await emit(item)
            if not scope.cancelled_caught:
                return
            # The budget ran out during an item: each of the rest is still handed over, in a
            # scope already past its deadline, so only its first wait is cut short.
            if not self._budget_spent:
                self._budget_spent = True
                logger.warning(
                    "the consumer did not take the closing events of reply %s within "
                    "interrupt_grace (%ss): the rest are handed over without waiting "
                    "(the context and the final Msg are complete)",
                    self.reply_id,
                    self.grace,
                )

    def holds(self, item: ReplyItem) -> bool:
        """Hold a pulling layer's producer after an end event until the layer passed it on
        (the end reached the consumer) or moved on without it (a dropped end)."""
        return isinstance(item, ReplyEndEvent)

    def puller_failed(self, exc: BaseException) -> None:
        """A pulling ``on_reply`` layer failed: the cancelled inner layers end the reply with
        ERROR, not INTERRUPTED."""
        if self.failure is None:
            self.failure = exc

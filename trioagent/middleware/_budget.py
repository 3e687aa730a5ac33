"""``ReplyBudgetControlMiddleware``: a weighted token budget per reply.

Every model call of a reply costs
``input_token_weight * input_tokens + output_token_weight * output_tokens`` (read from its
``ModelCallEndEvent``).  Once the reply's accumulated cost reaches ``token_budget``, every
further reasoning step gets a hint asking the model to wrap up and a tool choice that stops it
from calling tools — or, while a structured output is still owed, that lets it call only the
``GenerateStructuredOutput`` tool.
"""

from __future__ import annotations

from .._core.chain import Kwargs, NextHandler
from .._core.emit import Emit
from .._core.json_types import JSONObject
from ..agent import STRUCTURED_OUTPUT_TOOL_NAME, AgentLike, ReplyItem
from ..event import ModelCallEndEvent, ReplyStartEvent
from ..message import HintBlock
from ..types import ToolChoice
from ._base import MiddlewareBase

__all__ = ["DEFAULT_BUDGET_HINT", "STRUCTURED_BUDGET_HINT", "ReplyBudgetControlMiddleware"]

DEFAULT_BUDGET_HINT = (
    "<system-reminder>You have reached the maximum token budget set by the user. Now you MUST "
    "wrap up immediately and provide a final concluding response without invoking any tools."
    "</system-reminder>"
)
STRUCTURED_BUDGET_HINT = (
    "<system-reminder>You have reached the maximum token budget set by the user. Now you MUST "
    "wrap up immediately by calling the '{tool}' tool with the final structured output, "
    "without invoking any other tools.</system-reminder>"
)
HINT_SOURCE = '{"label": "System", "sublabel": "Token Budget Reached"}'


def _number(value: float) -> float | int:
    """Keep integral costs integral (so the saved state reads ``300``, not ``300.0``)."""
    return int(value) if float(value).is_integer() else value


def _check_non_negative(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")  # NaN too
    return value


class ReplyBudgetControlMiddleware(MiddlewareBase):
    """Limit the weighted token cost of one reply.

    Args:
        token_budget: the maximum weighted cost of a reply's model calls.  Once reached
            (``cost >= token_budget``, so ``0`` triggers on the very first step), the agent is
            told to wrap up without calling tools.
        input_token_weight: multiplier of a call's input tokens.
        output_token_weight: multiplier of a call's output tokens.
        hint_message: the hint appended to the context when the budget is exhausted (the
            name AgentScope uses).
        hint: alias of ``hint_message``; wins when given.

    Hooks:

    * ``on_reply`` passes every item through.  On ``ReplyStartEvent`` it *replaces*
      ``agent.state.middle_context[key]`` with ``{reply_id: 0}`` (earlier replies are dropped);
      on ``ModelCallEndEvent`` it adds the call's weighted cost to ``[key][event.reply_id]``
      (starting from 0 when the entry is missing, e.g. a state saved without it).  The entry
      is not removed at the reply end — an outer middleware may drop the end event and keep
      the reply going — so after a reply exactly one entry, its cost, remains until the next
      reply starts.  A resumed (parked) reply emits no ``ReplyStartEvent``: its cost keeps
      accumulating under the same reply id.  ``key`` is :meth:`get_middleware_key` (the class
      name).
    * ``on_reasoning``: when the current reply's cost has reached the budget, appends a
      :class:`~trioagent.message.HintBlock` to the current reply's assistant message (creating
      it when the context's tail is not that message) and sets ``tool_choice`` to
      ``ToolChoice(mode="none")``.  While a structured output is owed (the reply has a
      ``structured_schema`` and no ``structured_output`` yet) the hint asks for the
      ``GenerateStructuredOutput`` tool and ``tool_choice`` becomes
      ``ToolChoice(mode="auto", tools=["GenerateStructuredOutput"])`` — or forces that tool
      when the incoming ``tool_choice`` already did.  Repeated on every reasoning step while
      over budget.

    The instance is stateless (the cost lives in the agent's state, so it survives a
    park/resume and a JSON round trip) and can be shared between agents.

    The hint always goes to the current reply's assistant message, never to one of an earlier
    reply that happens to end the context.  A ``ModelCallEndEvent`` with no bucket starts
    from 0.
    """

    def __init__(
        self,
        token_budget: float,
        input_token_weight: float = 1.0,
        output_token_weight: float = 1.0,
        hint_message: str = DEFAULT_BUDGET_HINT,
        *,
        hint: str | None = None,
    ) -> None:
        self.token_budget = _check_non_negative("token_budget", token_budget)
        self.input_token_weight = _check_non_negative("input_token_weight", input_token_weight)
        self.output_token_weight = _check_non_negative("output_token_weight", output_token_weight)
        message = hint if hint is not None else hint_message
        if not isinstance(message, str) or not message:
            raise ValueError("the budget hint must be a non-empty string")
        self.hint_message = message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(token_budget={self.token_budget!r}, "
            f"input_token_weight={self.input_token_weight!r}, "
            f"output_token_weight={self.output_token_weight!r})"
        )

    @property
    def hint(self) -> str:
        """The hint appended when the budget is exhausted (same as ``hint_message``)."""
        return self.hint_message

    def cost(self, input_tokens: int, output_tokens: int) -> float | int:
        """The weighted cost of one model call."""
        return _number(
            self.input_token_weight * input_tokens + self.output_token_weight * output_tokens
        )

    async def used(self, agent: AgentLike) -> float | int:
        """The weighted cost the agent's current reply has spent so far."""
        bucket = agent.state.middle_context.get(await self.get_middleware_key())
        if not isinstance(bucket, dict):
            return 0
        value = bucket.get(agent.state.reply_id, 0)
        return value if isinstance(value, int | float) else 0

    async def on_reply(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        key = await self.get_middleware_key()
        middle_context: JSONObject = agent.state.middle_context

        async def sink(item: ReplyItem) -> None:
            if isinstance(item, ReplyStartEvent):
                middle_context[key] = {item.reply_id: 0}
            elif isinstance(item, ModelCallEndEvent):
                bucket = middle_context.get(key)
                if not isinstance(bucket, dict):
                    bucket = middle_context[key] = {}
                spent = bucket.get(item.reply_id, 0)
                bucket[item.reply_id] = _number(
                    (spent if isinstance(spent, int | float) else 0)
                    + self.cost(item.input_tokens, item.output_tokens)
                )
            await emit(item)

        await next_handler(sink)

    async def on_reasoning(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        if await self.used(agent) >= self.token_budget:
            reply_context = agent.state.reply_context
            if (
                reply_context.structured_schema is not None
                and reply_context.structured_output is None
            ):
                tool = STRUCTURED_OUTPUT_TOOL_NAME
                text = STRUCTURED_BUDGET_HINT.format(tool=tool)
                incoming = input_kwargs.get("tool_choice")
                forced = isinstance(incoming, ToolChoice) and incoming.mode == tool
                choice = ToolChoice(mode=tool if forced else "auto", tools=[tool])
            else:
                text = self.hint_message
                choice = ToolChoice(mode="none")
            agent.state.append_context(agent.name, [HintBlock(hint=text, source=HINT_SOURCE)])
            input_kwargs["tool_choice"] = choice
        await next_handler()

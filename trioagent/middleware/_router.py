"""``ModelRouterMiddleware``: pick the chat model of each reply from the user's input.

Once per reply the latest user text of the reply's inputs goes to a router — a
:class:`~trioagent.classifier.ClassifierModelBase` asked one choice question, or a chat model
asked for structured output — which names one of the candidates.  ``agent.model`` is that
candidate's model for the whole reply (every reasoning step, retries and the fallback model
included) and the agent's own model again afterwards.

The choice is stored as the candidate's *name* in
``agent.state.middle_context["ModelRouterMiddleware"] = {reply_id: name}``, so a parked reply
resumes with the same model, also after a JSON round trip of the state.

Any router failure — an error, an unknown name, a timeout — or a reply without user text keeps
the agent's own model; the reply never fails because of the router.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence

import attrs
import trio

from .._core.chain import Kwargs, NextHandler
from .._core.emit import Emit
from .._core.json_types import JSONObject
from ..agent import AgentLike, ReplyItem
from ..classifier import ChoiceAnswer, ChoiceQuestion, ClassifierModelBase
from ..event import (
    ExternalExecutionResultEvent,
    ReplyStartEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from ..message import Msg, SystemMsg, UserMsg
from ..model import ChatModelBase, as_chat_model
from ._base import MiddlewareBase

__all__ = ["DEFAULT_INSTRUCTIONS", "ChatModelCandidate", "ModelRouterMiddleware"]

logger = logging.getLogger("trioagent.middleware")

DEFAULT_INSTRUCTIONS = "Select the most suitable chat model for responding to the user input."
QUESTION_NAME = "chat_model"


def _candidate_model(model: ChatModelBase | str) -> ChatModelBase:
    return as_chat_model(model, "ChatModelCandidate.model")


@attrs.frozen
class ChatModelCandidate:
    """A model the router may pick.

    Attributes:
        name: what the router answers to pick it (unique among the candidates).
        model: the chat model used when picked, or a ``"provider:model"`` spec string.
        description: when to pick it (shown to the router).
    """

    name: str = attrs.field(validator=attrs.validators.instance_of(str))
    model: ChatModelBase = attrs.field(
        converter=_candidate_model,
        validator=attrs.validators.instance_of(ChatModelBase),
    )
    description: str = attrs.field(validator=attrs.validators.instance_of(str))

    @name.validator
    def _check_name(self, attribute: attrs.Attribute[str], value: str) -> None:
        if not value:
            raise ValueError("ChatModelCandidate.name must be a non-empty string")


class ModelRouterMiddleware(MiddlewareBase):
    """Route each reply to one of several chat models (hook: ``on_reply``).

    Args:
        classifier_model: the router — a classifier model (one
            :class:`~trioagent.classifier.ChoiceQuestion`; its answer's ``choice`` is the pick)
            or a chat model (``generate_structured_output`` with an enum of the names; a
            ``"provider:model"`` spec string builds one).
        candidates: the models to pick from; names must be unique.
        instructions: the routing instructions.
        timeout: seconds the routing call may take before the agent's own model is used
            (``None``: no limit besides the router's own timeouts).

    The ``ReplyStartEvent`` is passed on *before* the routing call (an interruption while routing still shows a started reply that then
    ends INTERRUPTED; outer middlewares see the routed model from the first model call on),
    and a stored name that is not a candidate any more (a state restored under another
    configuration) falls back to the agent's own model with a warning.
    """

    def __init__(
        self,
        classifier_model: ClassifierModelBase | ChatModelBase | str,
        candidates: Sequence[ChatModelCandidate],
        instructions: str = DEFAULT_INSTRUCTIONS,
        *,
        timeout: float | None = None,
    ) -> None:
        if isinstance(classifier_model, str):
            classifier_model = as_chat_model(classifier_model, "classifier_model")
        if not isinstance(classifier_model, ClassifierModelBase | ChatModelBase):
            raise TypeError(
                "classifier_model must be a ClassifierModelBase or a ChatModelBase, got "
                f"{type(classifier_model).__name__}"
            )
        candidates = list(candidates)
        if not candidates:
            raise ValueError("ModelRouterMiddleware needs at least one candidate")
        for candidate in candidates:
            if not isinstance(candidate, ChatModelCandidate):
                raise TypeError(f"candidates must be ChatModelCandidate, got {candidate!r:.80}")
        names = [c.name for c in candidates]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"Duplicate chat model candidates: {duplicates}")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be > 0 or None")
        self.classifier_model = classifier_model
        self.candidates: dict[str, ChatModelCandidate] = {c.name: c for c in candidates}
        self.instructions = instructions
        self.timeout = timeout
        criteria: dict[str, str | None] = {c.name: c.description for c in candidates}
        self.question = ChoiceQuestion(criteria=criteria, instructions=instructions)
        self.prompt = (
            f"{instructions}\n\nSelect exactly one candidate using these criteria:\n"
            + json.dumps(criteria, ensure_ascii=False, indent=2)
        )
        self.schema: JSONObject = {
            "type": "object",
            "properties": {"choice": {"type": "string", "enum": names}},
            "required": ["choice"],
            "additionalProperties": False,
        }

    async def on_reply(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        key = await self.get_middleware_key()
        original = agent.model
        inputs = input_kwargs.get("inputs")
        if isinstance(
            inputs, UserConfirmResultEvent | ExternalExecutionResultEvent | UserInterruptEvent
        ):
            # Resuming a parked reply: no REPLY_START follows; use the stored choice.
            agent.model = self._stored_model(agent, key, original)
        text = latest_user_text(inputs)

        async def sink(item: ReplyItem) -> None:
            await emit(item)
            if isinstance(item, ReplyStartEvent):
                name = await self.route(text) if text else None
                agent.state.middle_context[key] = {item.reply_id: name}
                agent.model = self.candidates[name].model if name is not None else original

        try:
            await next_handler(sink)
        finally:
            agent.model = original

    def _stored_model(self, agent: AgentLike, key: str, original: ChatModelBase) -> ChatModelBase:
        entry = agent.state.middle_context.get(key)
        name = entry.get(agent.state.reply_id) if isinstance(entry, dict) else None
        if name is None:
            return original
        candidate = self.candidates.get(name)
        if candidate is None:
            logger.warning(
                "ModelRouterMiddleware: the stored choice %r is not a candidate; "
                "resuming with the agent's own model",
                name,
            )
            return original
        return candidate.model

    async def route(self, text: str) -> str | None:
        """The candidate name the router picks for ``text``; ``None`` on any failure."""
        deadline = self.timeout if self.timeout is not None else math.inf
        name: str | None = None
        with trio.move_on_after(deadline) as scope:
            try:
                name = await self._ask(text)
            except Exception as exc:  # routing is best effort; Cancelled is not an Exception
                logger.warning(
                    "ModelRouterMiddleware: routing failed (%s: %s); using the agent's own model",
                    type(exc).__name__,
                    exc,
                )
                return None
        if scope.cancelled_caught:
            logger.warning(
                "ModelRouterMiddleware: routing took longer than %ss; using the agent's own model",
                self.timeout,
            )
            return None
        if not isinstance(name, str) or name not in self.candidates:
            logger.warning(
                "ModelRouterMiddleware: the router picked %r, which is not a candidate %s; "
                "using the agent's own model",
                name,
                list(self.candidates),
            )
            return None
        return name

    async def _ask(self, text: str) -> str | None:
        router = self.classifier_model
        if isinstance(router, ClassifierModelBase):
            response = await router(text, {QUESTION_NAME: self.question})
            answer = response.content.get(QUESTION_NAME)
            return answer.choice if isinstance(answer, ChoiceAnswer) else None
        structured = await router.generate_structured_output(
            [SystemMsg("system", self.prompt), UserMsg("user", text)], self.schema
        )
        choice = structured.content.get("choice")
        return choice if isinstance(choice, str) else None


def latest_user_text(inputs: object) -> str | None:
    """The text of the latest user message among ``inputs`` (``None``: none, or no text)."""
    if isinstance(inputs, Msg):
        msgs: list[object] = [inputs]
    elif isinstance(inputs, list | tuple):
        msgs = list(inputs)
    else:
        return None
    for msg in reversed(msgs):
        if isinstance(msg, Msg) and msg.role == "user":
            text = msg.get_text_content()
            return text if text and text.strip() else None
    return None

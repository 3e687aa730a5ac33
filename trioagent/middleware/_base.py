"""``MiddlewareBase``: the seven hooks a middleware may implement.

A middleware overrides any subset of the hooks.  ``Agent.__init__`` sorts middlewares into
per-hook lists once (:meth:`MiddlewareBase.is_implemented`), so a hook that is not overridden
costs nothing.  The first middleware of the list is the outermost layer.

Every hook receives the agent as an :class:`~trioagent.agent.AgentLike`.  Streaming hooks
(``on_reply``, ``on_reasoning``, ``on_acting``, ``on_model_call``) receive ``emit`` and a
:class:`~trioagent.middleware.NextHandler`::

    class Timing(MiddlewareBase):
        async def on_model_call(self, agent, input_kwargs, next_handler, emit):
            start = trio.current_time()
            await next_handler()
            print("model call took", trio.current_time() - start)

Items per hook: agent events and finally the ``Msg`` (``on_reply``); agent events and the
candidate ``Msg`` (``on_reasoning``); ``ToolChunk`` items then one ``ToolResponse``
(``on_acting``); ``ChatResponse`` deltas then exactly one ``is_last=True`` response
(``on_model_call``).

Middleware instances are stateless: per-reply state belongs in
``agent.state.middle_context[await self.get_middleware_key()][agent.state.reply_id]``, so one
instance can serve many agents and survives a park/resume.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from .._core.chain import Kwargs, NextHandler
from .._core.emit import Emit
from ..agent import ActingItem, AgentLike, ReplyItem
from ..model import ChatResponse
from ..permission import PermissionDecision
from ..tool import ToolBase

__all__ = ["MiddlewareBase"]


class MiddlewareBase:
    """Base class of agent middlewares; override the hooks you need."""

    STREAMING_HOOKS: ClassVar[tuple[str, ...]] = (
        "on_reply",
        "on_reasoning",
        "on_acting",
        "on_model_call",
    )
    AWAITABLE_HOOKS: ClassVar[tuple[str, ...]] = ("on_check_permission", "on_compress_context")
    HOOKS: ClassVar[tuple[str, ...]] = (
        *STREAMING_HOOKS,
        *AWAITABLE_HOOKS,
        "on_system_prompt",
    )

    def is_implemented(self, hook: str) -> bool:
        """Whether this middleware's class overrides ``hook``."""
        if hook not in self.HOOKS and hook != "list_tools":
            raise ValueError(f"unknown middleware hook {hook!r}")
        return getattr(type(self), hook) is not getattr(MiddlewareBase, hook)

    async def get_middleware_key(self) -> str:
        """The key of this middleware's entry in ``agent.state.middle_context``."""
        return type(self).__name__

    async def list_tools(self) -> list[ToolBase]:
        """Tools this middleware contributes.  The agent never calls this itself."""
        return []

    # -- streaming hooks ----------------------------------------------------------------------

    async def on_reply(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        """Wrap a whole reply.  ``input_kwargs``: ``inputs``, ``structured_schema``."""
        raise RuntimeError("MiddlewareBase.on_reply is not implemented")

    async def on_reasoning(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        """Wrap one reasoning step.  ``input_kwargs``: ``tool_choice``."""
        raise RuntimeError("MiddlewareBase.on_reasoning is not implemented")

    async def on_acting(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ActingItem],
        emit: Emit[ActingItem],
    ) -> None:
        """Wrap the raw execution of one tool call.  ``input_kwargs``: ``tool_call``."""
        raise RuntimeError("MiddlewareBase.on_acting is not implemented")

    async def on_model_call(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ChatResponse],
        emit: Emit[ChatResponse],
    ) -> None:
        """Wrap one model API call (re-run on every retry and for the fallback model).

        ``input_kwargs``: ``current_model``, ``messages``, ``tools``, ``tool_choice``.
        """
        raise RuntimeError("MiddlewareBase.on_model_call is not implemented")

    # -- awaitable hooks ----------------------------------------------------------------------

    async def on_check_permission(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: Callable[..., Awaitable[PermissionDecision]],
    ) -> PermissionDecision:
        """Wrap the permission check of one call; returns the decision.

        ``input_kwargs``: ``tool_call``, ``tool``, ``tool_input`` (deep copies: changing them
        never changes what runs).
        """
        raise RuntimeError("MiddlewareBase.on_check_permission is not implemented")

    async def on_compress_context(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: Callable[..., Awaitable[None]],
    ) -> None:
        """Wrap the context-compression check.  ``input_kwargs``: ``context_config``,
        ``instructions``."""
        raise RuntimeError("MiddlewareBase.on_compress_context is not implemented")

    # -- transformer --------------------------------------------------------------------------

    async def on_system_prompt(self, agent: AgentLike, current_prompt: str) -> str:
        """Transform the system prompt; middlewares apply left to right."""
        raise RuntimeError("MiddlewareBase.on_system_prompt is not implemented")

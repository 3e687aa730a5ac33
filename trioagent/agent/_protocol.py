"""What a middleware may use of an agent (:class:`AgentLike`), and what the agent calls on a
middleware (:class:`MiddlewareLike`).

Both are protocols, so the agent does not depend on the middleware package above it, and hook
signatures can say what their ``agent`` is::

    class Timing(MiddlewareBase):
        async def on_model_call(self, agent: AgentLike, input_kwargs, next_handler, emit):
            ...
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, TypeAlias, runtime_checkable

from .._core.callables import require_async
from .._core.chain import Kwargs, NextHandler
from .._core.emit import Emit
from ..event import (
    AgentEvent,
    ExternalExecutionResultEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from ..message import Msg, ToolCallBlock
from ..model import ChatModelBase, ChatResponse
from ..permission import PermissionDecision, PermissionEngine
from ..tool import ToolChunk, Toolkit, ToolResponse
from ._background import BackgroundToolHandle
from ._config import ContextConfig, InjectionConfig, ModelConfig, ReActConfig
from ._reply import ReplyItem
from ._state import AgentState
from ._stream import ReplyStream

__all__ = [
    "ActingItem",
    "AgentLike",
    "MiddlewareLike",
    "ReplyInputs",
    "ReplyItem",
    "check_middlewares",
    "check_on_event",
]

#: What ``reply()`` and ``stream()`` accept: new messages, or an event resuming a parked reply.
ReplyInputs: TypeAlias = (
    Msg
    | Sequence[Msg]
    | UserConfirmResultEvent
    | ExternalExecutionResultEvent
    | UserInterruptEvent
    | None
)
#: What travels along the ``on_acting`` chain: chunks, then one final response.
ActingItem: TypeAlias = ToolChunk | ToolResponse


class AgentLike(Protocol):
    """The agent as its middlewares and tools see it (:class:`~trioagent.agent.Agent` is one).

    The attributes may be read and, between steps, replaced (``agent.model = other`` routes
    the next model call); per-reply middleware state belongs in
    ``state.middle_context[middleware_key][state.reply_id]``.
    """

    name: str
    system_prompt: str
    model: ChatModelBase
    toolkit: Toolkit
    state: AgentState
    model_config: ModelConfig
    context_config: ContextConfig
    react_config: ReActConfig
    injection_config: InjectionConfig
    permission_engine: PermissionEngine

    @property
    def is_replying(self) -> bool:
        """Whether a reply is running now."""

    @property
    def background_tasks(self) -> Mapping[str, BackgroundToolHandle]:
        """The background tool calls by call id."""

    async def reply(
        self,
        inputs: ReplyInputs = None,
        *,
        structured_schema: object = None,
        on_event: Callable[[AgentEvent], Awaitable[None]] | None = None,
    ) -> Msg:
        """Run one reply (or resume a parked one) and return its final Msg."""

    def stream(
        self, inputs: ReplyInputs = None, *, structured_schema: object = None
    ) -> ReplyStream:
        """Run one reply in a child task and stream its events."""

    def interrupt(self) -> None:
        """Cancel the running reply, if any."""

    async def compress_context(
        self, context_config: ContextConfig | None = None, instructions: str | None = None
    ) -> None:
        """Compress the context now when it is past the configured trigger."""

    def start_soon_supervised(self, fn: Callable[..., Awaitable[object]], *args: object) -> bool:
        """Run ``fn(*args)`` in the supervision scope of ``async with agent:``."""

    async def run_in_background(self, tool_call: ToolCallBlock, emit: Emit[ActingItem]) -> None:
        """Move a call to the supervision scope (from an ``on_acting`` middleware)."""


@runtime_checkable
class MiddlewareLike(Protocol):
    """What the agent calls on a middleware (``MiddlewareBase`` implements every hook).

    The agent wraps only the hooks :meth:`is_implemented` reports; the others are never called.
    """

    def is_implemented(self, hook: str) -> bool:
        """Whether this middleware overrides ``hook``."""

    async def get_middleware_key(self) -> str:
        """The key of this middleware's entry in ``agent.state.middle_context``."""

    async def on_reply(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        """Wrap a whole reply."""

    async def on_reasoning(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        """Wrap one reasoning step."""

    async def on_acting(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ActingItem],
        emit: Emit[ActingItem],
    ) -> None:
        """Wrap the execution of one tool call."""

    async def on_model_call(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ChatResponse],
        emit: Emit[ChatResponse],
    ) -> None:
        """Wrap one model API call."""

    async def on_check_permission(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: Callable[..., Awaitable[PermissionDecision]],
    ) -> PermissionDecision:
        """Wrap the permission check of one call."""

    async def on_compress_context(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: Callable[..., Awaitable[None]],
    ) -> None:
        """Wrap the context-compression check."""

    async def on_system_prompt(self, agent: AgentLike, current_prompt: str) -> str:
        """Transform the system prompt."""


#: The arguments each hook is called with (after ``self``).
_STREAMING = ("agent", "input_kwargs", "next_handler", "emit")
_AWAITABLE = ("agent", "input_kwargs", "next_handler")
HOOK_PARAMETERS: dict[str, tuple[str, ...]] = {
    "on_reply": _STREAMING,
    "on_reasoning": _STREAMING,
    "on_acting": _STREAMING,
    "on_model_call": _STREAMING,
    "on_check_permission": _AWAITABLE,
    "on_compress_context": _AWAITABLE,
    "on_system_prompt": ("agent", "current_prompt"),
}


def check_middlewares(middlewares: Sequence[object]) -> tuple[MiddlewareLike, ...]:
    """The middlewares, each checked: a ``MiddlewareLike``, listed once, and every hook it
    implements an ``async def`` taking the arguments it is called with.

    Raises:
        TypeError: not a middleware, or a hook that cannot be awaited as it is called (a sync
            ``def``, an async generator, AgentScope's signature without ``emit``).
        ValueError: the same instance listed twice.
    """
    seen: dict[int, int] = {}
    for index, mw in enumerate(middlewares):
        if not isinstance(mw, MiddlewareLike):
            raise TypeError(
                f"middlewares must be MiddlewareBase instances (or implement every hook), "
                f"got {mw!r}"
            )
        if id(mw) in seen:
            raise ValueError(
                f"middlewares[{index}] ({type(mw).__name__}) is listed twice (also at "
                f"[{seen[id(mw)]}]): each hook would run twice over one state entry; pass "
                "another instance if you mean two layers"
            )
        seen[id(mw)] = index
        name = type(mw).__name__
        require_async(mw.get_middleware_key, f"{name}.get_middleware_key", ())
        for hook, params in HOOK_PARAMETERS.items():
            if mw.is_implemented(hook):
                require_async(getattr(mw, hook), f"{name}.{hook}", params)
    return tuple(middlewares)  # type: ignore[arg-type]  # each one checked above


def check_on_event(on_event: object) -> None:
    """Check a ``reply(on_event=...)`` callback (see :func:`check_middlewares`)."""
    name = getattr(on_event, "__qualname__", None) or repr(on_event)
    require_async(on_event, f"on_event ({name})", ("event",))

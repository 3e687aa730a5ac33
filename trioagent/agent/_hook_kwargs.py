"""The ``input_kwargs`` of each middleware hook, as a ``TypedDict`` per hook.

The agent calls a hook with a plain ``dict`` (``next_handler(**overrides)`` merges overrides
into it, so a layer may add keys of its own); these types name the keys the agent puts in, for
middleware authors who want them checked::

    async def on_model_call(self, agent, input_kwargs, next_handler, emit):
        kwargs = cast(OnModelCallKwargs, input_kwargs)
        model = kwargs["current_model"]

The hook signatures keep ``input_kwargs: dict[str, Any]``, so an override annotated either
way type-checks.
"""

from __future__ import annotations

from typing import Any, TypedDict

from ..message import Msg, ToolCallBlock
from ..model import ChatModelBase
from ..tool import ToolBase
from ..types import ToolChoice
from ._config import ContextConfig
from ._protocol import ReplyInputs

__all__ = [
    "OnActingKwargs",
    "OnCheckPermissionKwargs",
    "OnCompressContextKwargs",
    "OnModelCallKwargs",
    "OnReasoningKwargs",
    "OnReplyKwargs",
]


class OnReplyKwargs(TypedDict):
    """``on_reply``: what the reply was called with."""

    inputs: ReplyInputs
    #: The structured-output schema (a pydantic-like class or a JSON schema), or ``None``.
    structured_schema: Any


class OnReasoningKwargs(TypedDict):
    """``on_reasoning``: one reasoning step."""

    tool_choice: ToolChoice | None


class OnActingKwargs(TypedDict):
    """``on_acting``: the raw execution of one allowed tool call (its ``input`` is the JSON of
    the arguments it runs with)."""

    tool_call: ToolCallBlock


class OnModelCallKwargs(TypedDict):
    """``on_model_call``: one model API call (re-run on retries and for the fallback model)."""

    current_model: ChatModelBase
    messages: list[Msg]
    tools: list[dict[str, Any]]
    tool_choice: ToolChoice | None


class OnCheckPermissionKwargs(TypedDict):
    """``on_check_permission``: deep copies of the call and of its validated arguments."""

    tool_call: ToolCallBlock
    tool: ToolBase
    tool_input: dict[str, Any]


class OnCompressContextKwargs(TypedDict):
    """``on_compress_context``: the check's overrides (``None``: the agent's own)."""

    context_config: ContextConfig | None
    instructions: str | None

"""What a chat model returns: :class:`ChatResponse` chunks and :class:`ChatUsage`."""

from __future__ import annotations

from typing import ClassVar, TypeAlias

import attrs

from .._core.ids import generate_id, generate_timestamp
from .._core.json_types import JSONObject
from ..message import DataBlock, TextBlock, ThinkingBlock, ToolCallBlock
from ..types import FinishedReason

__all__ = [
    "CONTENT_FILTER_REASONS",
    "OUTPUT_LIMIT_REASONS",
    "ChatResponse",
    "ChatUsage",
    "ResponseBlock",
    "finished_reason_of",
]

ResponseBlock: TypeAlias = TextBlock | ToolCallBlock | ThinkingBlock | DataBlock


@attrs.define(kw_only=True)
class ChatUsage:
    """Token usage of one model call; ``time`` is seconds since the request started.

    The cache counters may be reported as ``None`` by a provider; the agent normalizes them to 0.
    """

    type: ClassVar[str] = "chat"
    input_tokens: int = 0
    output_tokens: int = 0
    time: float = 0.0
    cache_creation_input_tokens: int | None = 0
    cache_input_tokens: int | None = 0
    metadata: JSONObject | None = None


@attrs.define(kw_only=True)
class ChatResponse:
    """One chunk of a model's answer.

    Streaming contract: chunks with ``is_last=False`` carry *deltas* (text fragments, a fragment
    of a tool call's ``input`` under a stable block id); exactly one final chunk has
    ``is_last=True`` and the complete accumulated content.  A non-streaming call returns just
    the final chunk.  ``finished_reason`` is ``INTERRUPTED`` on the partial response of a
    cancelled call, ``MAX_TOKENS`` on a response cut off at the model's output limit and
    ``CONTENT_FILTER`` on one stopped by the provider's content filter (the provider's own
    reason stays in ``metadata["finish_reason"]`` or ``metadata["stop_reason"]``): the agent
    runs none of their tool calls.
    """

    type: ClassVar[str] = "chat_response"
    content: list[ResponseBlock] = attrs.field(factory=list)
    is_last: bool = True
    id: str = attrs.field(factory=generate_id)
    created_at: str = attrs.field(factory=generate_timestamp)
    usage: ChatUsage | None = None
    finished_reason: FinishedReason = attrs.field(
        default=FinishedReason.COMPLETED, converter=FinishedReason
    )
    metadata: JSONObject = attrs.field(factory=dict)


#: The providers' reasons for a response cut off at the output limit: OpenAI Chat
#: Completions, DashScope, DeepSeek, Moonshot, xAI and Ollama say ``length``; Anthropic
#: ``max_tokens`` (or ``model_context_window_exceeded``); Gemini ``MAX_TOKENS``; the OpenAI
#: Responses API ``max_output_tokens``.
OUTPUT_LIMIT_REASONS = frozenset(
    {"length", "max_tokens", "MAX_TOKENS", "max_output_tokens", "model_context_window_exceeded"}
)


#: The providers' reasons for a response stopped by a safety or content filter: OpenAI
#: (Chat Completions and Responses), Azure OpenAI and the OpenAI-compatible providers say
#: ``content_filter``; Anthropic ``refusal``; Gemini ``SAFETY``, ``RECITATION``, ``BLOCKLIST``,
#: ``PROHIBITED_CONTENT``, ``SPII`` or ``IMAGE_SAFETY``.
CONTENT_FILTER_REASONS = frozenset(
    {
        "content_filter",
        "refusal",
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
    }
)


def finished_reason_of(metadata: JSONObject) -> FinishedReason:
    """``MAX_TOKENS`` if the provider's reason in ``metadata`` (``finish_reason`` or
    ``stop_reason``) is one of :data:`OUTPUT_LIMIT_REASONS`, ``CONTENT_FILTER`` if it is one of
    :data:`CONTENT_FILTER_REASONS` or the prompt was blocked (Gemini's ``block_reason``), else
    ``COMPLETED``."""
    if metadata.get("block_reason"):
        return FinishedReason.CONTENT_FILTER
    for key in ("finish_reason", "stop_reason"):
        reason = metadata.get(key)
        if isinstance(reason, str):
            if reason in OUTPUT_LIMIT_REASONS:
                return FinishedReason.MAX_TOKENS
            if reason in CONTENT_FILTER_REASONS:
                return FinishedReason.CONTENT_FILTER
    return FinishedReason.COMPLETED

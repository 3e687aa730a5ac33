"""Moonshot (Kimi) Chat Completions.

``POST {base_url}/chat/completions`` (default base ``https://api.moonshot.cn/v1``) with a
Bearer key; the stream is the OpenAI chunk format with the thinking in ``reasoning_content``.
Only the top-level ``usage`` is read (Moonshot's legacy copy inside ``choices[0]`` is
ignored).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import attrs

from .._core.json_types import JSONObject
from ..credential import MoonshotCredential
from ..formatter import MoonshotChatFormatter
from ..message import Msg
from ..types import ToolChoice
from ._openai_compat import OpenAICompatibleChatModel
from ._params import in_range, one_of, positive_or_none, select_tools

__all__ = ["MoonshotChatModel", "MoonshotChatParameters"]


@attrs.define(kw_only=True)
class MoonshotChatParameters:
    """Generation parameters of :class:`MoonshotChatModel`.

    For most models ``thinking_enable`` is sent as ``thinking: {"type": …}`` and
    ``reasoning_effort`` is ignored; for the models in
    :attr:`MoonshotChatModel.reasoning_effort_models` (``kimi-k3``) ``reasoning_effort`` is
    sent instead and ``max_tokens`` goes out as ``max_completion_tokens``.
    """

    max_tokens: int | None = attrs.field(default=None, validator=positive_or_none)
    thinking_enable: bool = False
    reasoning_effort: Literal["low", "high", "max"] | None = attrs.field(
        default=None, validator=one_of("low", "high", "max")
    )
    temperature: float | None = attrs.field(default=None, validator=in_range(0, 1))
    top_p: float | None = attrs.field(default=None, validator=in_range(0, 1, low_open=True))


class MoonshotChatModel(OpenAICompatibleChatModel[MoonshotCredential, MoonshotChatParameters]):
    """Moonshot's Kimi models.

    Request body (most models): ``max_tokens``, ``temperature``, ``top_p``, the extra body,
    ``thinking`` (``{"type": …}`` updated with the extra body's ``thinking`` object), tools
    (sent as given), ``tool_choice``.  For ``kimi-k3``: ``max_completion_tokens`` and
    ``reasoning_effort`` instead of ``max_tokens`` and ``thinking``.

    Defaults: ``MoonshotCredential()`` (``MOONSHOT_API_KEY`` / ``MOONSHOT_BASE_URL``),
    :class:`MoonshotChatParameters`, a context of 131072 tokens,
    :class:`~trioagent.formatter.MoonshotChatFormatter`.  The keywords:
    :class:`~trioagent.model.ProviderChatModel`; a per-call extra body (structured output's
    disable-thinking step) updates ``extra_body`` key by key.
    """

    type: ClassVar[str] = "moonshot_chat"
    Parameters = MoonshotChatParameters
    default_credential = MoonshotCredential
    default_formatter = MoonshotChatFormatter
    default_context_size = 131072
    #: Models that take ``reasoning_effort`` + ``max_completion_tokens`` (no ``thinking``).
    reasoning_effort_models: ClassVar[frozenset[str]] = frozenset({"kimi-k3"})

    async def _build_body(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
    ) -> JSONObject:
        p = self.parameters
        effort_model = self.model in self.reasoning_effort_models
        max_tokens_key = "max_completion_tokens" if effort_model else "max_tokens"
        body = await self._chat_body(
            messages,
            stream=stream,
            **{max_tokens_key: p.max_tokens},
            temperature=p.temperature,
            top_p=p.top_p,
            reasoning_effort=p.reasoning_effort if effort_model else None,
        )
        extra, call_kwargs = self._split_call_kwargs()
        body.update(call_kwargs)
        thinking = None if effort_model else self._merge_thinking(extra, p.thinking_enable)
        body.update(extra)
        if thinking is not None:
            body["thinking"] = thinking
        return self._finish_body(body, select_tools(tools, tool_choice), tool_choice, stream=stream)

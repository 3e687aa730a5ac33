"""DeepSeek Chat Completions.

``POST {base_url}/chat/completions`` (default base ``https://api.deepseek.com``) with a
Bearer key; the stream is the OpenAI chunk format with the thinking in ``reasoning_content``
and the usage on the last choice chunk (cached prompt tokens in ``prompt_cache_hit_tokens``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import attrs

from .._core.json_types import JSONObject
from ..credential import DeepSeekCredential
from ..formatter import DeepSeekChatFormatter
from ..message import Msg
from ..types import ToolChoice
from ._openai_compat import OpenAICompatibleChatModel
from ._params import in_range, one_of, positive_or_none, select_tools

__all__ = ["DeepSeekChatModel", "DeepSeekChatParameters"]


@attrs.define(kw_only=True)
class DeepSeekChatParameters:
    """Generation parameters of :class:`DeepSeekChatModel`.

    ``thinking_enable`` is always sent (``thinking: {"type": "enabled" | "disabled"}``);
    ``reasoning_effort`` is sent whenever set.
    """

    max_tokens: int | None = attrs.field(default=None, validator=positive_or_none)
    thinking_enable: bool = False
    reasoning_effort: Literal["high", "max"] | None = attrs.field(
        default=None, validator=one_of("high", "max")
    )
    temperature: float | None = attrs.field(default=None, validator=in_range(0, 2))
    top_p: float | None = attrs.field(default=None, validator=in_range(0, 1, low_open=True))


class DeepSeekChatModel(OpenAICompatibleChatModel[DeepSeekCredential, DeepSeekChatParameters]):
    """DeepSeek models (``deepseek-chat``, ``deepseek-reasoner``, ...).

    Request body: ``max_tokens``, ``temperature``, ``top_p``, ``reasoning_effort``, the extra
    body, ``thinking`` (``{"type": …}`` updated with the extra body's ``thinking`` object),
    tools (sent as given), ``tool_choice``.

    Defaults: ``DeepSeekCredential()`` (``DEEPSEEK_API_KEY`` / ``DEEPSEEK_BASE_URL``),
    :class:`DeepSeekChatParameters`, a context of 65536 tokens,
    :class:`~trioagent.formatter.DeepSeekChatFormatter`.  The keywords:
    :class:`~trioagent.model.ProviderChatModel`; a per-call extra body (structured output's
    disable-thinking step) updates ``extra_body`` key by key.
    """

    type: ClassVar[str] = "deepseek_chat"
    Parameters = DeepSeekChatParameters
    default_credential = DeepSeekCredential
    default_formatter = DeepSeekChatFormatter
    default_context_size = 65536
    cache_usage: ClassVar[Literal["openai", "deepseek"]] = "deepseek"

    async def _build_body(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
    ) -> JSONObject:
        p = self.parameters
        body = await self._chat_body(
            messages,
            stream=stream,
            max_tokens=p.max_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            reasoning_effort=p.reasoning_effort,
        )
        extra, call_kwargs = self._split_call_kwargs()
        body.update(call_kwargs)
        thinking = self._merge_thinking(extra, p.thinking_enable)
        body.update(extra)
        body["thinking"] = thinking
        return self._finish_body(body, select_tools(tools, tool_choice), tool_choice, stream=stream)

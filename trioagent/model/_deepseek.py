"""DeepSeek Chat Completions (reference/model.md §2.3).

``POST {base_url}/chat/completions`` (default base ``https://api.deepseek.com``) with a
Bearer key; the stream is the OpenAI chunk format with the thinking in ``reasoning_content``
and the usage on the last choice chunk (cached prompt tokens in ``prompt_cache_hit_tokens``).
"""

from __future__ import annotations

import builtins
from typing import Any, ClassVar, Literal, Unpack

import attrs

from ..credential import DeepSeekCredential
from ..formatter import DeepSeekChatFormatter, FormatterBase
from ..message import Msg
from ..types import ToolChoice
from ._base import ChatModelOptions, select_tools
from ._openai_compat import OpenAICompatibleChatModel, in_range, one_of, positive_or_none

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


class DeepSeekChatModel(OpenAICompatibleChatModel):
    """DeepSeek models (``deepseek-chat``, ``deepseek-reasoner``, ...).

    Request body: ``max_tokens``, ``temperature``, ``top_p``, ``reasoning_effort``, the extra
    body, ``thinking`` (``{"type": …}`` updated with the extra body's ``thinking`` object),
    tools (sent as given), ``tool_choice``.

    Args:
        model: the model name (``"deepseek-chat"``).
        credential: key and base URL (default: ``DeepSeekCredential()``, which reads
            ``DEEPSEEK_API_KEY`` / ``DEEPSEEK_BASE_URL``).
        parameters: generation parameters.
        extra_body: extra top-level request keys (a per-call extra body, such as structured
            output's disable-thinking step, updates it key by key).
        context_size: the context window (default 65536).
        formatter: default :class:`~trioagent.formatter.DeepSeekChatFormatter`.
        **options: the other :class:`~trioagent.model.ChatModelBase` options
            (:class:`~trioagent.model.ChatModelOptions`).
    """

    type: ClassVar[str] = "deepseek_chat"
    Parameters: ClassVar[builtins.type[DeepSeekChatParameters]] = DeepSeekChatParameters
    cache_usage: ClassVar[Literal["openai", "deepseek"]] = "deepseek"
    credential: DeepSeekCredential

    def __init__(
        self,
        model: str,
        *,
        credential: DeepSeekCredential | None = None,
        parameters: DeepSeekChatParameters | None = None,
        extra_body: dict[str, Any] | None = None,
        context_size: int = 65536,
        formatter: FormatterBase | None = None,
        **options: Unpack[ChatModelOptions],
    ) -> None:
        super().__init__(
            model,
            credential=credential or DeepSeekCredential(),
            context_size=context_size,
            formatter=formatter or DeepSeekChatFormatter(),
            **options,
        )
        self.parameters = parameters or DeepSeekChatParameters()
        self.extra_body = dict(extra_body) if extra_body else None

    async def _build_body(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        body = await self._base_body(messages, stream=stream)
        p = self.parameters
        if p.max_tokens is not None:
            body["max_tokens"] = p.max_tokens
        if p.temperature is not None:
            body["temperature"] = p.temperature
        if p.top_p is not None:
            body["top_p"] = p.top_p
        if p.reasoning_effort is not None:
            body["reasoning_effort"] = p.reasoning_effort
        extra, call_kwargs = self._split_call_kwargs()
        body.update(call_kwargs)
        thinking = self._merge_thinking(extra, p.thinking_enable)
        body.update(extra)
        body["thinking"] = thinking
        if formatted_tools := select_tools(tools, tool_choice):
            body["tools"] = formatted_tools
        if tool_choice is not None:
            body["tool_choice"] = self._format_tool_choice(tool_choice)
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

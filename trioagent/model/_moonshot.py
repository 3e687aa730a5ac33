"""Moonshot (Kimi) Chat Completions (reference/model.md §2.4).

``POST {base_url}/chat/completions`` (default base ``https://api.moonshot.cn/v1``) with a
Bearer key; the stream is the OpenAI chunk format with the thinking in ``reasoning_content``.
Only the top-level ``usage`` is read (Moonshot's legacy copy inside ``choices[0]`` is ignored,
as in the reference).
"""

from __future__ import annotations

import builtins
from typing import Any, ClassVar, Literal, Unpack

import attrs

from ..credential import MoonshotCredential
from ..formatter import FormatterBase, MoonshotChatFormatter
from ..message import Msg
from ..types import ToolChoice
from ._base import ChatModelOptions, select_tools
from ._openai_compat import OpenAICompatibleChatModel, in_range, one_of, positive_or_none

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


class MoonshotChatModel(OpenAICompatibleChatModel):
    """Moonshot's Kimi models.

    Request body (most models): ``max_tokens``, ``temperature``, ``top_p``, the extra body,
    ``thinking`` (``{"type": …}`` updated with the extra body's ``thinking`` object), tools
    (sent as given), ``tool_choice``.  For ``kimi-k3``: ``max_completion_tokens`` and
    ``reasoning_effort`` instead of ``max_tokens`` and ``thinking``.

    Args:
        model: the model name (``"kimi-k2.6"``).
        credential: key and base URL (default: ``MoonshotCredential()``, which reads
            ``MOONSHOT_API_KEY`` / ``MOONSHOT_BASE_URL``).
        parameters: generation parameters.
        extra_body: extra top-level request keys (a per-call extra body, such as structured
            output's disable-thinking step, updates it key by key).
        context_size: the context window (default 131072).
        formatter: default :class:`~trioagent.formatter.MoonshotChatFormatter`.
        **options: the other :class:`~trioagent.model.ChatModelBase` options
            (:class:`~trioagent.model.ChatModelOptions`).
    """

    type: ClassVar[str] = "moonshot_chat"
    Parameters: ClassVar[builtins.type[MoonshotChatParameters]] = MoonshotChatParameters
    #: Models that take ``reasoning_effort`` + ``max_completion_tokens`` (no ``thinking``).
    reasoning_effort_models: ClassVar[frozenset[str]] = frozenset({"kimi-k3"})
    credential: MoonshotCredential

    def __init__(
        self,
        model: str,
        *,
        credential: MoonshotCredential | None = None,
        parameters: MoonshotChatParameters | None = None,
        extra_body: dict[str, Any] | None = None,
        context_size: int = 131072,
        formatter: FormatterBase | None = None,
        **options: Unpack[ChatModelOptions],
    ) -> None:
        super().__init__(
            model,
            credential=credential or MoonshotCredential(),
            context_size=context_size,
            formatter=formatter or MoonshotChatFormatter(),
            **options,
        )
        self.parameters = parameters or MoonshotChatParameters()
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
        effort_model = self.model in self.reasoning_effort_models
        if p.max_tokens is not None:
            body["max_completion_tokens" if effort_model else "max_tokens"] = p.max_tokens
        if p.temperature is not None:
            body["temperature"] = p.temperature
        if p.top_p is not None:
            body["top_p"] = p.top_p
        if effort_model and p.reasoning_effort is not None:
            body["reasoning_effort"] = p.reasoning_effort
        extra, call_kwargs = self._split_call_kwargs()
        body.update(call_kwargs)
        thinking = None if effort_model else self._merge_thinking(extra, p.thinking_enable)
        body.update(extra)
        if thinking is not None:
            body["thinking"] = thinking
        if formatted_tools := select_tools(tools, tool_choice):
            body["tools"] = formatted_tools
        if tool_choice is not None:
            body["tool_choice"] = self._format_tool_choice(tool_choice)
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

"""DashScope (Alibaba Cloud Model Studio, Qwen) in OpenAI-compatible mode (reference/model.md
§2.2).

``POST {base_url}/chat/completions`` (default base
``https://dashscope.aliyuncs.com/compatible-mode/v1``) with a Bearer key; the stream is the
OpenAI chunk format (thinking in ``reasoning_content``, continuation tool-call fragments with
``"id": ""``, usage in a trailing usage-only chunk).
"""

from __future__ import annotations

import builtins
import warnings
from typing import Any, ClassVar, Unpack

import attrs

from ..credential import DashScopeCredential
from ..formatter import DashScopeChatFormatter, FormatterBase
from ..message import Msg
from ..types import ToolChoice
from ._base import ChatModelOptions, select_tools
from ._openai_compat import OpenAICompatibleChatModel, in_range, positive_or_none

__all__ = ["DashScopeChatModel", "DashScopeChatParameters"]


@attrs.define(kw_only=True)
class DashScopeChatParameters:
    """Generation parameters of :class:`DashScopeChatModel`.

    ``thinking_enable`` is always sent (as ``enable_thinking``, ``false`` by default, which
    hybrid Qwen3 models need to answer without thinking); ``thinking_budget`` caps the thinking
    tokens; ``voice`` asks an Omni model for audio output (returned as an ``audio/wav`` data
    block).
    """

    max_tokens: int | None = attrs.field(default=None, validator=positive_or_none)
    thinking_enable: bool = False
    thinking_budget: int | None = attrs.field(default=None, validator=positive_or_none)
    temperature: float | None = attrs.field(default=None, validator=in_range(0, 2, high_open=True))
    top_p: float | None = attrs.field(default=None, validator=in_range(0, 1, low_open=True))
    top_k: int | None = attrs.field(default=None, validator=in_range(0, 100, low_open=True))
    parallel_tool_calls: bool = True
    voice: str | None = None


class DashScopeChatModel(OpenAICompatibleChatModel):
    """Qwen models on DashScope, through its OpenAI-compatible endpoint.

    Request body: ``max_tokens``, ``temperature``, ``top_p``, ``audio``/``modalities`` (with a
    ``voice``), tools (sent as given — each must be ``{"type": "function", "function": …}``),
    ``parallel_tool_calls: false`` when disabled, ``tool_choice``, then the extra body with
    ``enable_thinking``, ``thinking_budget`` and ``top_k`` filled in unless it sets them.

    DashScope has no ``tool_choice: "required"``: it is sent as ``"auto"`` with a
    ``UserWarning`` (the reference raises a ``DeprecationWarning``, which Python hides by
    default; the downgrade deserves to be seen).

    Args:
        model: the model name (``"qwen-plus"``).
        credential: key and base URL (default: ``DashScopeCredential()``, which reads
            ``DASHSCOPE_API_KEY`` / ``DASHSCOPE_BASE_URL``).
        parameters: generation parameters.
        extra_body: extra top-level request keys (a per-call extra body, such as structured
            output's disable-thinking step, updates it key by key).
        context_size: the context window (default 131072).
        formatter: default :class:`~trioagent.formatter.DashScopeChatFormatter`.
        **options: the other :class:`~trioagent.model.ChatModelBase` options
            (:class:`~trioagent.model.ChatModelOptions`).
    """

    type: ClassVar[str] = "dashscope_chat"
    Parameters: ClassVar[builtins.type[DashScopeChatParameters]] = DashScopeChatParameters
    credential: DashScopeCredential

    def __init__(
        self,
        model: str,
        *,
        credential: DashScopeCredential | None = None,
        parameters: DashScopeChatParameters | None = None,
        extra_body: dict[str, Any] | None = None,
        context_size: int = 131072,
        formatter: FormatterBase | None = None,
        **options: Unpack[ChatModelOptions],
    ) -> None:
        super().__init__(
            model,
            credential=credential or DashScopeCredential(),
            context_size=context_size,
            formatter=formatter or DashScopeChatFormatter(),
            **options,
        )
        self.parameters = parameters or DashScopeChatParameters()
        self.extra_body = dict(extra_body) if extra_body else None

    def _get_disable_thinking_kwargs(self) -> dict[str, Any]:
        return {"extra_body": {"enable_thinking": False}}

    def _format_tool_choice(self, tool_choice: ToolChoice) -> str | dict[str, Any]:
        if tool_choice.mode == "required":
            warnings.warn(
                'DashScope does not support tool_choice "required"; sending "auto" instead',
                UserWarning,
                stacklevel=2,
            )
            return "auto"
        return super()._format_tool_choice(tool_choice)

    @staticmethod
    def _validate_tools(tools: list[dict[str, Any]]) -> None:
        for tool in tools:
            if (
                not isinstance(tool, dict)
                or tool.get("type") != "function"
                or not isinstance(tool.get("function"), dict)
            ):
                raise ValueError(
                    'each DashScope tool must be {"type": "function", "function": {...}}, '
                    f"got {tool!r:.200}"
                )

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
        if p.voice:
            # DashScope documents "wav"; the streamed data is raw 16-bit PCM either way.
            body["audio"] = {"voice": p.voice, "format": "wav"}
            body["modalities"] = ["text", "audio"]
        extra, call_kwargs = self._split_call_kwargs()
        body.update(call_kwargs)
        if tools:
            self._validate_tools(tools)
        if formatted_tools := select_tools(tools, tool_choice):
            body["tools"] = formatted_tools
            if not p.parallel_tool_calls:
                body["parallel_tool_calls"] = False
        if tool_choice is not None:
            body["tool_choice"] = self._format_tool_choice(tool_choice)
        extra.setdefault("enable_thinking", p.thinking_enable)
        if p.thinking_budget is not None:
            extra.setdefault("thinking_budget", p.thinking_budget)
        if p.top_k is not None:
            extra.setdefault("top_k", p.top_k)
        body.update(extra)
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

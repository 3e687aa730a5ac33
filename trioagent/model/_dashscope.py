"""DashScope (Alibaba Cloud Model Studio, Qwen) in OpenAI-compatible mode.

``POST {base_url}/chat/completions`` (default base
``https://dashscope.aliyuncs.com/compatible-mode/v1``) with a Bearer key; the stream is the
OpenAI chunk format (thinking in ``reasoning_content``, continuation tool-call fragments with
``"id": ""``, usage in a trailing usage-only chunk).
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import attrs

from .._core.json_types import JSONObject
from ..credential import DashScopeCredential
from ..formatter import DashScopeChatFormatter
from ..message import Msg
from ..types import ToolChoice
from ._openai_compat import OpenAICompatibleChatModel
from ._params import in_range, positive_or_none, present, select_tools

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


class DashScopeChatModel(OpenAICompatibleChatModel[DashScopeCredential, DashScopeChatParameters]):
    """Qwen models on DashScope, through its OpenAI-compatible endpoint.

    Request body: ``max_tokens``, ``temperature``, ``top_p``, ``audio``/``modalities`` (with a
    ``voice``), tools (sent as given — each must be ``{"type": "function", "function": …}``),
    ``parallel_tool_calls: false`` when disabled, ``tool_choice``, then the extra body with
    ``enable_thinking``, ``thinking_budget`` and ``top_k`` filled in unless it sets them.

    DashScope has no ``tool_choice: "required"``: it is sent as ``"auto"`` with a
    ``UserWarning`` (a ``DeprecationWarning`` would be hidden by default, and the downgrade
    deserves to be seen).

    Defaults: ``DashScopeCredential()`` (``DASHSCOPE_API_KEY`` / ``DASHSCOPE_BASE_URL``),
    :class:`DashScopeChatParameters`, a context of 131072 tokens,
    :class:`~trioagent.formatter.DashScopeChatFormatter`.  The keywords:
    :class:`~trioagent.model.ProviderChatModel`; a per-call extra body (structured output's
    disable-thinking step) updates ``extra_body`` key by key.
    """

    type: ClassVar[str] = "dashscope_chat"
    Parameters = DashScopeChatParameters
    default_credential = DashScopeCredential
    default_formatter = DashScopeChatFormatter
    default_context_size = 131072

    def _get_disable_thinking_kwargs(self) -> JSONObject:
        return {"extra_body": {"enable_thinking": False}}

    def _format_tool_choice(self, tool_choice: ToolChoice) -> str | JSONObject:
        if tool_choice.mode == "required":
            warnings.warn(
                'DashScope does not support tool_choice "required"; sending "auto" instead',
                UserWarning,
                stacklevel=2,
            )
            return "auto"
        return super()._format_tool_choice(tool_choice)

    @staticmethod
    def _validate_tools(tools: list[JSONObject]) -> None:
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
        )
        if p.voice:
            # DashScope documents "wav"; the streamed data is raw 16-bit PCM either way.
            body["audio"] = {"voice": p.voice, "format": "wav"}
            body["modalities"] = ["text", "audio"]
        extra, call_kwargs = self._split_call_kwargs()
        body.update(call_kwargs)
        if tools:
            self._validate_tools(tools)
        self._finish_body(
            body,
            select_tools(tools, tool_choice),
            tool_choice,
            stream=False,
            parallel_tool_calls=p.parallel_tool_calls,
        )
        extra.setdefault("enable_thinking", p.thinking_enable)
        for key, value in present(thinking_budget=p.thinking_budget, top_k=p.top_k).items():
            extra.setdefault(key, value)
        body.update(extra)
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

"""xAI (Grok) over httpx (reference/model.md §2.5, §2.10).

The reference speaks xAI's gRPC API through ``xai_sdk``; trioagent uses xAI's
OpenAI-compatible REST API instead (no vendor SDK, no gRPC): ``POST {base}/chat/completions``
with a Bearer key (``https://api.x.ai/v1`` by default), streamed as SSE and parsed by the
shared :class:`~trioagent.model._openai.OpenAIStreamParser` (reasoning arrives in
``delta.reasoning_content``).  Differences from OpenAI chat:

* parameters as the reference: ``max_tokens`` (sent as ``max_tokens``), ``temperature``,
  ``top_p``, and ``reasoning_effort`` (low/medium/high) only with ``thinking_enable``;
* tools are sent unflattened (``description`` defaults to ``""``), filtered by
  ``tool_choice.tools``; a tool name as ``tool_choice`` becomes
  ``{"type": "function", "function": {"name": ...}}`` (the REST form of ``required_tool``);
* usage: ``output_tokens = completion_tokens + completion_tokens_details.reasoning_tokens``,
  cached prompt tokens from ``prompt_tokens_details.cached_tokens``;
* retries as the reference, whose SDK raises one ``grpc.RpcError`` class for everything
  (§1.9): **every** provider error is retryable — HTTP 4xx included — while no content has
  been emitted yet (a missing key is not: it is a set-up error, raised before any request).
"""

from __future__ import annotations

import builtins
from typing import Any, ClassVar, Literal, Unpack

import attrs
import trio

from ..credential import XAICredential
from ..exception import ModelCredentialError, ModelError
from ..formatter import FormatterBase, XAIChatFormatter
from ..message import Msg
from ..types import ToolChoice
from ._base import ChatModelOptions, in_range, positive_or_none, select_tools
from ._openai import ChatCompletionsModel, OpenAIStreamParser
from ._response import ChatResponse, ChatUsage

__all__ = ["XAIChatModel", "XAIChatParameters"]

XAIReasoningEffort = Literal["low", "medium", "high"]


@attrs.define(kw_only=True)
class XAIChatParameters:
    """Generation parameters of :class:`XAIChatModel`.

    ``reasoning_effort`` is sent only when ``thinking_enable`` is set (reasoning models such
    as ``grok-3-mini``).
    """

    max_tokens: int | None = attrs.field(default=None, validator=positive_or_none)
    thinking_enable: bool = False
    reasoning_effort: XAIReasoningEffort | None = None
    temperature: float | None = attrs.field(default=None, validator=in_range(0, 2))
    top_p: float | None = attrs.field(default=None, validator=in_range(0, 1, low_open=True))


def _xai_usage(raw: dict[str, Any], elapsed: float) -> ChatUsage:
    completion = raw.get("completion_tokens_details")
    reasoning = completion.get("reasoning_tokens") if isinstance(completion, dict) else None
    prompt = raw.get("prompt_tokens_details")
    cached = prompt.get("cached_tokens") if isinstance(prompt, dict) else None
    return ChatUsage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0) + int(reasoning or 0),
        time=elapsed,
        cache_input_tokens=int(cached or 0),
        metadata=dict(raw),
    )


class _XAIStreamParser(OpenAIStreamParser):
    """The OpenAI-compatible parser with xAI's usage (reasoning tokens are output tokens)."""

    def parse(self, chunk: dict[str, Any]) -> ChatResponse | None:
        delta = super().parse(chunk)
        raw = chunk.get("usage")
        if isinstance(raw, dict) and raw and self.usage is not None:
            self.usage = _xai_usage(raw, self.usage.time)
            if delta is not None:
                delta.usage = self.usage
        return delta

    def parse_completion(self, body: dict[str, Any]) -> ChatResponse:
        response = super().parse_completion(body)
        raw = body.get("usage")
        if isinstance(raw, dict) and raw and response.usage is not None:
            response.usage = _xai_usage(raw, response.usage.time)
        return response


class XAIChatModel(ChatCompletionsModel):
    """xAI Grok models over the OpenAI-compatible REST API (see the module docstring).

    Args:
        model: the model name (``"grok-4"``, ``"grok-3-mini"``).
        credential: key and host (default: ``XAICredential()``, which reads ``XAI_API_KEY``
            and ``XAI_BASE_URL``, else ``https://{api_host}/v1``).
        parameters: generation parameters.
        extra_body: extra top-level request keys (merged after the parameters; a per-call
            ``extra_body`` replaces it).
        context_size: the context window (default 131072).
        formatter: default :class:`~trioagent.formatter.XAIChatFormatter`.
        **options: the other :class:`~trioagent.model.ChatModelBase` options
            (:class:`~trioagent.model.ChatModelOptions`).
    """

    type: ClassVar[str] = "xai_chat"
    Parameters: ClassVar[builtins.type[XAIChatParameters]] = XAIChatParameters
    credential: XAICredential

    def __init__(
        self,
        model: str,
        *,
        credential: XAICredential | None = None,
        parameters: XAIChatParameters | None = None,
        extra_body: dict[str, Any] | None = None,
        context_size: int = 131072,
        formatter: FormatterBase | None = None,
        **options: Unpack[ChatModelOptions],
    ) -> None:
        super().__init__(
            model,
            credential=credential or XAICredential(),
            context_size=context_size,
            formatter=formatter or XAIChatFormatter(),
            **options,
        )
        self.parameters = parameters or XAIChatParameters()
        self.extra_body = dict(extra_body) if extra_body else None

    # -- request -------------------------------------------------------------------------------

    @staticmethod
    def _format_tools(
        tools: list[dict[str, Any]] | None, tool_choice: ToolChoice | None
    ) -> list[dict[str, Any]]:
        formatted = []
        for tool in select_tools(tools, tool_choice) or []:
            function = tool.get("function")
            if tool.get("type") != "function" or not isinstance(function, dict):
                continue  # the reference sends function tools only
            formatted.append(
                {
                    "type": "function",
                    "function": {
                        "name": function["name"],
                        "description": function.get("description", ""),
                        "parameters": function.get("parameters", {}),
                    },
                }
            )
        return formatted

    async def _build_body(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        formatter = self.formatter or XAIChatFormatter()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": await formatter.format(messages, http_client=self.http_client),
            "stream": stream,
        }
        p = self.parameters
        if p.max_tokens is not None:
            body["max_tokens"] = p.max_tokens
        if p.temperature is not None:
            body["temperature"] = p.temperature
        if p.top_p is not None:
            body["top_p"] = p.top_p
        if p.thinking_enable and p.reasoning_effort:
            body["reasoning_effort"] = p.reasoning_effort
        extra_body, call_kwargs = self._body_overrides(self.extra_body)
        body.update(extra_body)
        body.update(call_kwargs)
        if formatted_tools := self._format_tools(tools, tool_choice):
            body["tools"] = formatted_tools
        if tool_choice is not None:
            body["tool_choice"] = self._format_tool_choice(tool_choice)
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def _parser(self) -> OpenAIStreamParser:
        return _XAIStreamParser(trio.current_time())

    # -- hooks ---------------------------------------------------------------------------------

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        send: trio.MemorySendChannel[ChatResponse],
    ) -> None:
        try:
            await super()._stream_api(messages, tools, tool_choice, send)
        except ModelCredentialError:
            raise
        except ModelError as exc:
            exc.retryable = True  # §1.9: the reference retries every xAI error
            raise

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        try:
            return await super()._call_api(messages, tools, tool_choice)
        except ModelCredentialError:
            raise
        except ModelError as exc:
            exc.retryable = True  # §1.9: the reference retries every xAI error
            raise

    def _is_structured_output_fallback_error(self, exc: Exception) -> bool:
        """None for xAI (reference §1.6): errors are retried, never worked around."""
        return False

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
from typing import Any, ClassVar, Literal

import attrs
import httpx
import trio

from ..credential import XAICredential
from ..exception import ModelCredentialError, ModelError
from ..formatter import FormatterBase, XAIChatFormatter
from ..message import Msg
from ..types import ToolChoice
from ._base import ChatModelBase
from ._openai import OpenAIStreamParser, complete_chat_completions, stream_chat_completions
from ._response import ChatResponse, ChatUsage

__all__ = ["XAIChatModel", "XAIChatParameters"]

XAIReasoningEffort = Literal["low", "medium", "high"]


def _positive_or_none(
    instance: Any, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value}")


def _temperature(
    instance: Any, attribute: attrs.Attribute[float | None], value: float | None
) -> None:
    if value is not None and not 0 <= value <= 2:
        raise ValueError(f"{attribute.name} must be in [0, 2], got {value}")


def _top_p(instance: Any, attribute: attrs.Attribute[float | None], value: float | None) -> None:
    if value is not None and not 0 < value <= 1:
        raise ValueError(f"{attribute.name} must be in (0, 1], got {value}")


@attrs.define(kw_only=True)
class XAIChatParameters:
    """Generation parameters of :class:`XAIChatModel`.

    ``reasoning_effort`` is sent only when ``thinking_enable`` is set (reasoning models such
    as ``grok-3-mini``).
    """

    max_tokens: int | None = attrs.field(default=None, validator=_positive_or_none)
    thinking_enable: bool = False
    reasoning_effort: XAIReasoningEffort | None = None
    temperature: float | None = attrs.field(default=None, validator=_temperature)
    top_p: float | None = attrs.field(default=None, validator=_top_p)


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


class XAIChatModel(ChatModelBase):
    """xAI Grok models over the OpenAI-compatible REST API (see the module docstring).

    Args:
        model: the model name (``"grok-4"``, ``"grok-3-mini"``).
        credential: key and host (default: ``XAICredential()``, which reads ``XAI_API_KEY``
            and ``XAI_BASE_URL``, else ``https://{api_host}/v1``).
        parameters: generation parameters.
        extra_body: extra top-level request keys (merged after the parameters; a per-call
            ``extra_body`` replaces it).
        formatter: default :class:`~trioagent.formatter.XAIChatFormatter`.
        Other keyword arguments: see :class:`ChatModelBase`.
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
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        max_retry_delay: float = 30.0,
        context_size: int = 131072,
        formatter: FormatterBase | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: float | None = None,
        read_timeout: float | None = 120.0,
        connect_timeout: float | None = 10.0,
        interrupt_grace: float = 5.0,
    ) -> None:
        super().__init__(
            model,
            credential=credential or XAICredential(),
            stream=stream,
            max_retries=max_retries,
            retry_delay=retry_delay,
            max_retry_delay=max_retry_delay,
            context_size=context_size,
            formatter=formatter or XAIChatFormatter(),
            http_client=http_client,
            timeout=timeout,
            read_timeout=read_timeout,
            connect_timeout=connect_timeout,
            interrupt_grace=interrupt_grace,
        )
        self.parameters = parameters or XAIChatParameters()
        self.extra_body = dict(extra_body) if extra_body else None

    # -- request -------------------------------------------------------------------------------

    def _headers(self, *, stream: bool) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.credential.get_api_key()}",
            "Accept": "text/event-stream" if stream else "application/json",
        }

    @staticmethod
    def _format_tools(
        tools: list[dict[str, Any]] | None, tool_choice: ToolChoice | None
    ) -> tuple[list[dict[str, Any]], str | dict[str, Any] | None]:
        if tools and tool_choice is not None and tool_choice.tools:
            allowed = set(tool_choice.tools)
            tools = [t for t in tools if t.get("function", {}).get("name") in allowed]
        formatted = []
        for tool in tools or []:
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
        if tool_choice is None:
            return formatted, None
        if tool_choice.mode in ("auto", "none", "required"):
            return formatted, tool_choice.mode
        return formatted, {"type": "function", "function": {"name": tool_choice.mode}}

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
        call_kwargs = self._call_kwargs()
        extra_body = call_kwargs.pop("extra_body", self.extra_body)
        if extra_body:
            body.update(extra_body)
        body.update(call_kwargs)
        formatted_tools, formatted_choice = self._format_tools(tools, tool_choice)
        if formatted_tools:
            body["tools"] = formatted_tools
        if formatted_choice is not None:
            body["tool_choice"] = formatted_choice
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def _request(self, body: dict[str, Any], *, stream: bool) -> httpx.Request:
        return self.http_client.build_request(
            "POST",
            f"{self.credential.get_base_url()}/chat/completions",
            json=body,
            headers=self._headers(stream=stream),
        )

    # -- hooks ---------------------------------------------------------------------------------

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        send: trio.MemorySendChannel[ChatResponse],
    ) -> None:
        try:
            body = await self._build_body(messages, tools, tool_choice, stream=True)
            request = self._request(body, stream=True)
            await stream_chat_completions(
                self.http_client,
                request,
                _XAIStreamParser(trio.current_time()),
                send,
                model=self.model,
                redact=self._redact,
            )
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
            body = await self._build_body(messages, tools, tool_choice, stream=False)
            request = self._request(body, stream=False)
            return await complete_chat_completions(
                self.http_client,
                request,
                _XAIStreamParser(trio.current_time()),
                model=self.model,
                redact=self._redact,
            )
        except ModelCredentialError:
            raise
        except ModelError as exc:
            exc.retryable = True  # §1.9: the reference retries every xAI error
            raise

    def _is_structured_output_fallback_error(self, exc: Exception) -> bool:
        """None for xAI (reference §1.6): errors are retried, never worked around."""
        return False

"""xAI (Grok) over httpx2.

trioagent speaks xAI's OpenAI-compatible REST API (no vendor SDK, no gRPC): ``POST {base}/chat/completions``
with a Bearer key (``https://api.x.ai/v1`` by default), streamed as SSE and parsed by the
shared :class:`~trioagent.model._openai.OpenAIStreamParser` (reasoning arrives in
``delta.reasoning_content``).  Differences from OpenAI chat:

* parameters: ``max_tokens`` (sent as ``max_tokens``), ``temperature``,
  ``top_p``, and ``reasoning_effort`` (low/medium/high) only with ``thinking_enable``;
* tools are sent unflattened (``description`` defaults to ``""``), filtered by
  ``tool_choice.tools``; a tool name as ``tool_choice`` becomes
  ``{"type": "function", "function": {"name": ...}}`` (the REST form of ``required_tool``);
* usage: ``output_tokens = completion_tokens + completion_tokens_details.reasoning_tokens``,
  cached prompt tokens from ``prompt_tokens_details.cached_tokens``;
* retries as xAI's own SDK does it, which raises one ``grpc.RpcError`` class for
  everything: **every** provider error is retryable — HTTP 4xx included — while no content has
  been emitted yet (a missing key is not: it is a set-up error, raised before any request).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import attrs
import trio

from .._core.json_types import JSONObject
from ..credential import XAICredential
from ..exception import ModelCredentialError, ModelError
from ..formatter import XAIChatFormatter
from ..message import Msg
from ..types import ToolChoice
from ._base import ChunkSink
from ._openai import ChatCompletionsModel, OpenAIStreamParser
from ._params import in_range, positive_or_none, select_tools
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


def _xai_usage(raw: JSONObject, elapsed: float) -> ChatUsage:
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

    def parse(self, chunk: JSONObject) -> ChatResponse | None:
        delta = super().parse(chunk)
        raw = chunk.get("usage")
        if isinstance(raw, dict) and raw and self.usage is not None:
            self.usage = _xai_usage(raw, self.usage.time)
            if delta is not None:
                delta.usage = self.usage
        return delta

    def parse_completion(self, body: JSONObject) -> ChatResponse:
        response = super().parse_completion(body)
        raw = body.get("usage")
        if isinstance(raw, dict) and raw and response.usage is not None:
            response.usage = _xai_usage(raw, response.usage.time)
        return response


class XAIChatModel(ChatCompletionsModel[XAICredential, XAIChatParameters]):
    """xAI Grok models over the OpenAI-compatible REST API (see the module docstring).

    Defaults: ``XAICredential()`` (``XAI_API_KEY``, and ``XAI_BASE_URL`` else
    ``https://{api_host}/v1``), :class:`XAIChatParameters`, a context of 131072 tokens,
    :class:`~trioagent.formatter.XAIChatFormatter`.  The keywords:
    :class:`~trioagent.model.ProviderChatModel`; ``extra_body`` is merged after the
    parameters and a per-call ``extra_body`` replaces it.
    """

    type: ClassVar[str] = "xai_chat"
    Parameters = XAIChatParameters
    default_credential = XAICredential
    default_formatter = XAIChatFormatter
    default_context_size = 131072

    @staticmethod
    def _format_tools(
        tools: list[JSONObject] | None, tool_choice: ToolChoice | None
    ) -> list[JSONObject]:
        formatted = []
        for tool in select_tools(tools, tool_choice) or []:
            function = tool.get("function")
            if tool.get("type") != "function" or not isinstance(function, dict):
                continue  # only function tools are sent
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
            reasoning_effort=p.reasoning_effort if p.thinking_enable else None,
        )
        extra_body, call_kwargs = self._body_overrides()
        body.update(extra_body)
        body.update(call_kwargs)
        return self._finish_body(
            body, self._format_tools(tools, tool_choice), tool_choice, stream=stream
        )

    def _parser(self) -> OpenAIStreamParser:
        return _XAIStreamParser(trio.current_time())

    # -- hooks ---------------------------------------------------------------------------------

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        emit: ChunkSink,
    ) -> None:
        try:
            await super()._stream_api(messages, tools, tool_choice, emit)
        except ModelCredentialError:
            raise
        except ModelError as exc:
            exc.retryable = True  # xAI errors are all retried, as xAI's own SDK does
            raise

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        try:
            return await super()._call_api(messages, tools, tool_choice)
        except ModelCredentialError:
            raise
        except ModelError as exc:
            exc.retryable = True  # xAI errors are all retried, as xAI's own SDK does
            raise

    def _is_structured_output_fallback_error(self, exc: Exception) -> bool:
        """None for xAI: errors are retried, never worked around."""
        return False

"""Anthropic Messages API over httpx2.

``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version: 2023-06-01``
(both configurable: ``auth_scheme="bearer"`` sends ``Authorization: Bearer`` instead).
Streaming reads the SSE events until ``message_stop`` (``ping`` ignored, ``error`` raised); a
stream that ends without it raises :class:`~trioagent.exception.ModelStreamError`.  The
sans-IO :class:`~trioagent.model._anthropic_stream.AnthropicStreamParser` turns the events
into delta chunks.

:class:`MiniMaxChatModel` speaks the same protocol to MiniMax's Anthropic-compatible
endpoint (the shared half: :class:`MessagesAPIModel`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal, Protocol, TypeVar, Unpack

import attrs
import trio

from .._core.json_types import JSONObject
from .._http import (
    ServerSentEvent,
    incomplete_stream_error,
    parse_event,
    response_json,
    send_request,
    stream_sse,
)
from ..credential import AnthropicCredential, CredentialBase, MiniMaxCredential
from ..formatter import AnthropicChatFormatter, MiniMaxChatFormatter
from ..message import Msg
from ..types import ToolChoice
from ._anthropic_stream import AnthropicStreamParser, stream_error
from ._base import ChunkSink
from ._params import in_range, positive_or_none, present, select_tools
from ._provider import CredentialT, ProviderChatModel, ProviderOptions
from ._response import ChatResponse
from ._wire import parse_stream_unit, parse_whole_body

__all__ = [
    "AnthropicChatModel",
    "AnthropicChatParameters",
    "MessagesAPIModel",
    "MiniMaxChatModel",
    "MiniMaxChatParameters",
]

ThinkingMode = Literal["adaptive", "enabled", "disabled"]
ThinkingDisplay = Literal["summarized", "omitted"]
ReasoningEffort = Literal["low", "medium", "high", "xhigh", "max"]

DEFAULT_MAX_TOKENS = 8192
DEFAULT_API_VERSION = "2023-06-01"

_in = attrs.validators.in_
_optional = attrs.validators.optional


@attrs.define(kw_only=True)
class AnthropicChatParameters:
    """Generation parameters of :class:`AnthropicChatModel`.

    Thinking: ``thinking_mode`` when set, else ``"enabled"`` if ``thinking_enable``, else no
    ``thinking`` field.  ``enabled`` sends ``budget_tokens`` (``thinking_budget``, default
    ``max_tokens // 2``) and raises ``max_tokens`` to ``budget + 1024`` when the budget
    would not fit.  ``thinking_display`` is sent unless the mode is ``disabled``;
    ``reasoning_effort`` becomes ``output_config.effort``.  ``max_tokens`` defaults to 8192.

    ``temperature``, ``top_p`` and ``top_k`` are sent only when set (Anthropic rejects some of
    them together with thinking).
    """

    max_tokens: int | None = attrs.field(default=None, validator=positive_or_none)
    thinking_enable: bool = False
    thinking_budget: int | None = attrs.field(default=None, validator=positive_or_none)
    thinking_mode: ThinkingMode | None = attrs.field(
        default=None, validator=_optional(_in(("adaptive", "enabled", "disabled")))
    )
    thinking_display: ThinkingDisplay | None = attrs.field(
        default=None, validator=_optional(_in(("summarized", "omitted")))
    )
    reasoning_effort: ReasoningEffort | None = attrs.field(
        default=None, validator=_optional(_in(("low", "medium", "high", "xhigh", "max")))
    )
    temperature: float | None = attrs.field(default=None, validator=in_range(0, 1))
    top_p: float | None = attrs.field(default=None, validator=in_range(0, 1))
    top_k: int | None = attrs.field(default=None, validator=positive_or_none)


@attrs.define(kw_only=True)
class MiniMaxChatParameters:
    """Generation parameters of :class:`MiniMaxChatModel`: thinking is ``adaptive`` when
    enabled (no budget); ``max_tokens`` defaults to 8192."""

    max_tokens: int | None = attrs.field(default=None, validator=positive_or_none)
    thinking_enable: bool = False


# -- the model ---------------------------------------------------------------------------------


class _MessagesParameters(Protocol):
    """What the shared Messages-API body reads from a provider's parameters."""

    max_tokens: int | None


MessagesParametersT = TypeVar("MessagesParametersT", bound=_MessagesParameters)


class MessagesAPIModel(ProviderChatModel[CredentialT, MessagesParametersT]):
    """The Anthropic Messages API, shared by Anthropic and MiniMax.

    Args:
        model: the model name.
        api_version: the ``anthropic-version`` header.
        auth_scheme: ``"x-api-key"`` (the documented API) or ``"bearer"``
            (``Authorization: Bearer <key>``).
        extra_headers: more request headers (``anthropic-beta``, ...).
        **options: the :class:`~trioagent.model.ProviderChatModel` keywords (a per-call
            ``extra_body`` replaces ``extra_body``).

    Request: the formatted messages; a leading ``system`` message becomes the top-level
    ``system`` field, and later system messages are sent as ``user`` turns (the API accepts
    no other place for them).  Tools are sent as ``{"name", "description", "input_schema"}``
    (a tool without parameters gets ``{"type": "object", "properties": {}}``; a tool given
    without an OpenAI-style ``function`` key — an Anthropic server tool, say — is sent as it
    is); ``tool_choice`` ``required`` becomes ``{"type": "any"}`` and a tool name
    ``{"type": "tool", "name": ...}``.

    Errors: HTTP statuses map as for every provider (429, 5xx incl. 529 "overloaded" and
    transport failures are retried before any content arrived); an ``error`` event inside
    the stream raises the matching typed error and is never retried.
    """

    endpoint = "/v1/messages"

    def __init__(
        self,
        model: str,
        *,
        api_version: str = DEFAULT_API_VERSION,
        auth_scheme: Literal["x-api-key", "bearer"] = "x-api-key",
        extra_headers: Mapping[str, str] | None = None,
        **options: Unpack[ProviderOptions[CredentialT, MessagesParametersT]],
    ) -> None:
        if auth_scheme not in ("x-api-key", "bearer"):
            raise ValueError(f"auth_scheme must be 'x-api-key' or 'bearer', got {auth_scheme!r}")
        super().__init__(model, **options)
        self.api_version = api_version
        self.auth_scheme = auth_scheme
        self.extra_headers = dict(extra_headers) if extra_headers else {}

    def _get_disable_thinking_kwargs(self) -> JSONObject:
        return {"thinking": {"type": "disabled"}}

    # -- request -------------------------------------------------------------------------------

    def _headers(self, *, stream: bool) -> dict[str, str]:
        key = self.credential.get_api_key() or ""
        headers: dict[str, str] = {}
        if self.auth_scheme == "bearer":
            headers["Authorization"] = f"Bearer {key}"
        else:
            headers["x-api-key"] = key
        headers["anthropic-version"] = self.api_version
        headers.update(self.extra_headers)
        headers["Accept"] = "text/event-stream" if stream else "application/json"
        return headers

    def _thinking_fields(self, max_tokens: int) -> tuple[JSONObject | None, int]:
        """The ``thinking`` field (``None``: not sent) and the possibly raised max_tokens."""
        return None, max_tokens

    def _output_config(self) -> JSONObject | None:
        """The ``output_config`` field (``None``: not sent)."""
        return None

    def _sampling_fields(self) -> JSONObject:
        """The sampling keys to send (``temperature``, ...)."""
        return {}

    @staticmethod
    def _format_tools(
        tools: list[JSONObject] | None, tool_choice: ToolChoice | None
    ) -> tuple[list[JSONObject], JSONObject | None]:
        formatted = []
        for tool in select_tools(tools, tool_choice) or []:
            function = tool.get("function")
            if not isinstance(function, dict):
                formatted.append(tool)  # already in Anthropic form (server tools, ...)
                continue
            formatted.append(
                {
                    "name": function.get("name"),
                    "description": function.get("description") or "",
                    "input_schema": function.get("parameters")
                    or {"type": "object", "properties": {}},
                }
            )
        if tool_choice is None:
            return formatted, None
        mode = tool_choice.mode
        choice = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}
        return formatted, choice.get(mode) or {"type": "tool", "name": mode}

    async def _build_body(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
    ) -> JSONObject:
        formatted = await self._format(messages)
        system: list[JSONObject] | None = None
        if formatted and formatted[0].get("role") == "system":
            system = formatted[0]["content"]
            formatted = formatted[1:]
        formatted = [{**m, "role": "user"} if m.get("role") == "system" else m for m in formatted]

        extra_body, call_kwargs = self._body_overrides()
        overrides = {**extra_body, **call_kwargs}
        max_tokens = self.parameters.max_tokens or DEFAULT_MAX_TOKENS
        thinking = None
        if "thinking" not in overrides:
            thinking, max_tokens = self._thinking_fields(max_tokens)
        body: JSONObject = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": formatted,
            "stream": stream,
        }
        if system:
            body["system"] = system
        body.update(self._sampling_fields())
        if thinking is not None:
            body["thinking"] = thinking
        if "output_config" not in overrides and (output_config := self._output_config()):
            body["output_config"] = output_config
        formatted_tools, formatted_choice = self._format_tools(tools, tool_choice)
        if formatted_tools:
            body["tools"] = formatted_tools
        if formatted_choice is not None:
            body["tool_choice"] = formatted_choice
        body.update(overrides)
        return body

    # -- hooks ---------------------------------------------------------------------------------

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        emit: ChunkSink,
    ) -> None:
        request = await self._prepare(messages, tools, tool_choice, stream=True)
        parser = AnthropicStreamParser(trio.current_time(), redact=self._redact)

        async def handle(event: ServerSentEvent) -> bool:
            payload = parse_event(event.data, model=self.model, unit="event", redact=self._redact)
            chunks = parse_stream_unit(
                lambda: parser.feed(payload, event.event),
                unit="event",
                model=self.model,
                text=event.data,
                redact=self._redact,
            )
            for chunk in chunks:
                await emit(chunk)
            return parser.done

        if not await stream_sse(
            self.http_client,
            request,
            handle,
            redact=self._redact,
            max_event_size=self.max_event_size,
        ):
            raise incomplete_stream_error(self.model, "'message_stop'")

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        request = await self._prepare(messages, tools, tool_choice, stream=False)
        parser = AnthropicStreamParser(trio.current_time(), redact=self._redact)
        response = await send_request(self.http_client, request, stream=False, redact=self._redact)
        payload = response_json(response, model=self.model, redact=self._redact)
        if payload.get("type") == "error":
            raise stream_error(payload, redact=self._redact)
        return parse_whole_body(
            parser.parse_message, payload, model=self.model, text=response.text, redact=self._redact
        )


class AnthropicChatModel(MessagesAPIModel[CredentialBase, AnthropicChatParameters]):
    """Anthropic Claude through the Messages API.

    Defaults: :class:`~trioagent.credential.AnthropicCredential` (``ANTHROPIC_API_KEY`` /
    ``ANTHROPIC_BASE_URL``; base ``https://api.anthropic.com``), :class:`AnthropicChatParameters`,
    a context of 200000 tokens, :class:`~trioagent.formatter.AnthropicChatFormatter`.  The
    keywords and the request: :class:`MessagesAPIModel`.
    """

    type: ClassVar[str] = "anthropic_chat"
    Parameters = AnthropicChatParameters
    default_credential = AnthropicCredential
    default_formatter = AnthropicChatFormatter
    default_context_size = 200000

    def _thinking_fields(self, max_tokens: int) -> tuple[JSONObject | None, int]:
        p = self.parameters
        mode = p.thinking_mode or ("enabled" if p.thinking_enable else None)
        if mode is None:
            return None, max_tokens
        thinking: JSONObject = {"type": mode}
        if mode == "enabled":
            budget = p.thinking_budget or max_tokens // 2
            thinking["budget_tokens"] = budget
            if budget >= max_tokens:
                max_tokens = budget + 1024
        if mode != "disabled" and p.thinking_display:
            thinking["display"] = p.thinking_display
        return thinking, max_tokens

    def _output_config(self) -> JSONObject | None:
        effort = self.parameters.reasoning_effort
        return {"effort": effort} if effort else None

    def _sampling_fields(self) -> JSONObject:
        p = self.parameters
        return present(temperature=p.temperature, top_p=p.top_p, top_k=p.top_k)


class MiniMaxChatModel(MessagesAPIModel[CredentialBase, MiniMaxChatParameters]):
    """MiniMax through its Anthropic-compatible endpoint (``https://api.minimax.io/anthropic``;
    China: ``https://api.minimax.cn/anthropic``).

    Parameters are only ``max_tokens`` and ``thinking_enable`` (thinking is
    ``{"type": "adaptive"}``, no budget; no ``output_config``).  Defaults:
    :class:`~trioagent.credential.MiniMaxCredential` (``MINIMAX_API_KEY``),
    :class:`MiniMaxChatParameters`, a context of 1,000,000 tokens,
    :class:`~trioagent.formatter.MiniMaxChatFormatter` (adds ``video/*``).  The keywords:
    :class:`MessagesAPIModel`.
    """

    type: ClassVar[str] = "minimax_chat"
    Parameters = MiniMaxChatParameters
    default_credential = MiniMaxCredential
    default_formatter = MiniMaxChatFormatter
    default_context_size = 1_000_000

    def _thinking_fields(self, max_tokens: int) -> tuple[JSONObject | None, int]:
        if self.parameters.thinking_enable:
            return {"type": "adaptive"}, max_tokens
        return None, max_tokens

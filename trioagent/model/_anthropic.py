"""Anthropic Messages API over httpx (reference/model.md §2.7).

``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version: 2023-06-01``
(both configurable: the SDK bundled with the reference sends ``Authorization: Bearer``).
Streaming reads the SSE events ``message_start`` / ``content_block_start`` /
``content_block_delta`` / ``content_block_stop`` / ``message_delta`` / ``message_stop``
(``ping`` ignored, ``error`` raised) until ``message_stop``; a stream that ends without it
raises :class:`~trioagent.exception.ModelStreamError`.  The sans-IO
:class:`AnthropicStreamParser` turns the events into delta chunks.

:class:`MiniMaxChatModel` speaks the same protocol to MiniMax's Anthropic-compatible
endpoint.
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, Unpack

import attrs
import httpx
import trio

from .._core.ids import generate_id
from ..credential import AnthropicCredential, CredentialBase, MiniMaxCredential
from ..exception import (
    ModelAuthenticationError,
    ModelError,
    ModelInvalidRequestError,
    ModelPermissionError,
    ModelRateLimitError,
    ModelStreamError,
    ModelUpstreamError,
)
from ..formatter import FormatterBase
from ..formatter._anthropic import AnthropicChatFormatter, MiniMaxChatFormatter
from ..message import Msg, TextBlock, ThinkingBlock, ToolCallBlock
from ..types import ToolChoice
from ._base import ChatModelBase, ChatModelOptions, in_range, positive_or_none, select_tools
from ._http import (
    incomplete_stream_error,
    parse_event,
    response_json,
    send_request,
    stream_sse,
)
from ._openai import _MALFORMED, _list, _malformed, _object, _text, parse_whole_body
from ._response import ChatResponse, ChatUsage, ResponseBlock
from ._sse import ServerSentEvent

__all__ = [
    "AnthropicChatModel",
    "AnthropicChatOptions",
    "AnthropicChatParameters",
    "AnthropicStreamParser",
    "MiniMaxChatModel",
    "MiniMaxChatParameters",
]

logger = logging.getLogger("trioagent.model")

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

    ``temperature``, ``top_p`` and ``top_k`` are sent only when set (the reference has no
    such parameters; Anthropic rejects some of them together with thinking).
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


# -- errors ------------------------------------------------------------------------------------

#: Anthropic error ``type`` → exception class (errors reported inside the stream or a body).
_ERROR_CLASSES: dict[str, builtins.type[ModelError]] = {
    "invalid_request_error": ModelInvalidRequestError,
    "not_found_error": ModelInvalidRequestError,
    "request_too_large": ModelInvalidRequestError,
    "authentication_error": ModelAuthenticationError,
    "permission_error": ModelPermissionError,
    "billing_error": ModelPermissionError,
    "rate_limit_error": ModelRateLimitError,
    "api_error": ModelUpstreamError,
    "overloaded_error": ModelUpstreamError,
}


def stream_error(
    payload: Mapping[str, Any], *, redact: Callable[[str], str] | None = None
) -> ModelError:
    """The typed error for an ``event: error`` payload (never retried, as the reference).

    ``{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`` →
    :class:`~trioagent.exception.ModelUpstreamError` with ``code="overloaded_error"``.
    """
    error = payload.get("error")
    kind = message = None
    if isinstance(error, Mapping):
        kind = error.get("type")
        message = error.get("message")
    elif isinstance(error, str):
        message = error
    text = str(message) if message else f"error event in the stream: {dict(payload)!r:.300}"
    if redact is not None:
        text = redact(text)
    cls = _ERROR_CLASSES.get(str(kind), ModelUpstreamError)
    return cls(text, code=str(kind) if kind else None, retryable=False)


# -- parsing -----------------------------------------------------------------------------------


def _usage(raw: Mapping[str, Any], elapsed: float) -> ChatUsage:
    return ChatUsage(
        input_tokens=int(raw.get("input_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        time=elapsed,
        cache_creation_input_tokens=int(raw.get("cache_creation_input_tokens") or 0),
        cache_input_tokens=int(raw.get("cache_read_input_tokens") or 0),
        metadata=dict(raw),
    )


#: Delta type → the kind of content block it belongs to.
_DELTA_KINDS = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": "tool_use",
}


@attrs.define
class _Block:
    """A content block of the stream, by its ``index``."""

    kind: str
    id: str
    name: str = ""
    has_input: bool = False


class AnthropicStreamParser:
    """Turns Messages-API stream events into delta chunks (sans-IO, one parser per call).

    * ``message_start`` sets the response id and usage (input, output, cache creation, cache
      read → ``cache_input_tokens``; absent counters are 0) and yields a carrier;
    * ``content_block_start``: a text or thinking block gets a fresh block id for its
      ``index``; a ``tool_use`` block yields an opening tool-call delta (its id and name,
      input ``""``); a ``redacted_thinking`` block yields a thinking block with ``thinking=""``
      and ``extra["redacted_thinking_data"]``;
    * ``content_block_delta``: ``text_delta`` / ``thinking_delta`` fragments,
      ``signature_delta`` (an empty thinking delta with ``extra["signature"]``),
      ``input_json_delta`` (a tool-input fragment, even an empty one);
    * ``content_block_stop`` of a tool call that got no input yields input ``"{}"``;
    * ``message_delta`` updates the usage (``output_tokens``, and any other counter it
      reports) and yields a carrier with it and ``metadata["stop_reason"]``;
    * ``message_stop`` ends the stream (:attr:`done`); ``ping`` is ignored; ``error`` raises.

    Every delta carries the response id and the usage known at that point.

    An event of the wrong shape (a ``message``, ``content_block``, ``delta`` or ``usage``
    that is not an object, an ``index`` or a token count that is not a number, ...) raises
    ``ValueError`` (or, for a shape not checked, another of ``_MALFORMED``); the model turns
    it into a :class:`~trioagent.exception.ModelStreamError` naming the model.
    """

    def __init__(self, start: float, *, redact: Callable[[str], str] | None = None) -> None:
        self.start = start
        self.redact = redact
        self.response_id = generate_id()
        self.usage: ChatUsage | None = None
        self.done = False
        self._raw_usage: dict[str, Any] = {}
        self._blocks: dict[int, _Block] = {}

    def feed(self, payload: Mapping[str, Any], event: str = "") -> list[ChatResponse]:
        """The chunks for one event (``payload`` is its parsed ``data``).

        Raises:
            ModelError: an ``error`` event.
        """
        kind = payload.get("type") or event
        match kind:
            case "message_start":
                message = _object(payload.get("message") or {}, "'message'")
                self.response_id = message.get("id") or self.response_id
                self._set_usage(_object(message.get("usage") or {}, "'usage'"))
                return [self._chunk([])]
            case "content_block_start":
                return self._block_start(payload)
            case "content_block_delta":
                return self._block_delta(payload)
            case "content_block_stop":
                return self._block_stop(payload)
            case "message_delta":
                delta = _object(payload.get("delta") or {}, "'delta'")
                if (usage := payload.get("usage")) is not None:
                    self._set_usage(_object(usage, "'usage'"))
                metadata = {}
                if delta.get("stop_reason"):
                    metadata["stop_reason"] = delta["stop_reason"]
                return [self._chunk([], metadata)]
            case "message_stop":
                self.done = True
            case "error":
                raise stream_error(payload, redact=self.redact)
            case _:
                pass  # ping and event types this parser does not know
        return []

    def _set_usage(self, raw: Mapping[str, Any]) -> None:
        self._raw_usage.update({k: v for k, v in raw.items() if v is not None})
        self.usage = _usage(self._raw_usage, trio.current_time() - self.start)

    def _chunk(
        self, blocks: list[ResponseBlock], metadata: dict[str, Any] | None = None
    ) -> ChatResponse:
        return ChatResponse(
            content=blocks,
            is_last=False,
            id=self.response_id,
            usage=self.usage,
            metadata=metadata or {},
        )

    def _block_start(self, payload: Mapping[str, Any]) -> list[ChatResponse]:
        index = int(payload.get("index") or 0)
        raw = _object(payload.get("content_block") or {}, "'content_block'")
        kind = str(raw.get("type") or "")
        match kind:
            case "text" | "thinking":
                block = self._blocks[index] = _Block(kind, generate_id())
                text = raw.get(kind)
                signature = raw.get("signature") if kind == "thinking" else None
                if text or signature:
                    return [self._chunk([self._fragment(block, text or "", signature)])]
            case "tool_use":
                call_id = str(raw.get("id") or f"toolu_{generate_id()}")
                name = _text(raw.get("name"), "a tool call's name") or ""
                block = self._blocks[index] = _Block(kind, call_id, name)
                initial = raw.get("input")
                text = json.dumps(initial, ensure_ascii=False) if initial else ""
                block.has_input = bool(text)
                call = ToolCallBlock(id=block.id, name=block.name, input=text)
                return [self._chunk([call])]
            case "redacted_thinking":
                block = self._blocks[index] = _Block(kind, generate_id())
                thinking = ThinkingBlock(
                    thinking="",
                    id=block.id,
                    extra={"redacted_thinking_data": str(raw.get("data") or "")},
                )
                return [self._chunk([thinking])]
            case _:
                # Server tools (web search results, ...) are not represented; skip them.
                logger.debug("ignoring a %r content block in the stream", kind)
                self._blocks[index] = _Block(kind, generate_id())
        return []

    def _block_delta(self, payload: Mapping[str, Any]) -> list[ChatResponse]:
        index = int(payload.get("index") or 0)
        delta = _object(payload.get("delta") or {}, "'delta'")
        delta_type = delta.get("type")
        kind = _DELTA_KINDS.get(str(delta_type))
        block = self._block(index, kind) if kind else None
        if block is None or block.kind != kind:
            # Citations, and deltas of blocks this parser skips (a server tool's input).
            logger.debug("ignoring a %r delta in the stream", delta_type)
            return []
        match delta_type:
            case "text_delta":
                if text := str(delta.get("text") or ""):
                    return [self._chunk([TextBlock(text=text, id=block.id)])]
            case "thinking_delta":
                if thinking := str(delta.get("thinking") or ""):
                    return [self._chunk([self._fragment(block, thinking)])]
            case "signature_delta":
                signature = str(delta.get("signature") or "")
                return [self._chunk([self._fragment(block, "", signature)])]
            case _:  # input_json_delta
                fragment = str(delta.get("partial_json") or "")
                block.has_input = block.has_input or bool(fragment)
                call = ToolCallBlock(id=block.id, name=block.name, input=fragment)
                return [self._chunk([call])]
        return []

    def _block_stop(self, payload: Mapping[str, Any]) -> list[ChatResponse]:
        block = self._blocks.get(int(payload.get("index") or 0))
        if block is not None and block.kind == "tool_use" and not block.has_input:
            block.has_input = True
            return [self._chunk([ToolCallBlock(id=block.id, name=block.name, input="{}")])]
        return []

    def _block(self, index: int, kind: str) -> _Block:
        """The block at ``index``; a delta without its start opens one."""
        block = self._blocks.get(index)
        if block is None:
            block_id = f"toolu_{generate_id()}" if kind == "tool_use" else generate_id()
            block = self._blocks[index] = _Block(kind, block_id)
        return block

    @staticmethod
    def _fragment(
        block: _Block, text: str, signature: str | None = None
    ) -> ThinkingBlock | TextBlock:
        if block.kind == "text":
            return TextBlock(text=text, id=block.id)
        extra = {"signature": signature} if signature else {}
        return ThinkingBlock(thinking=text, id=block.id, extra=extra)

    def parse_message(self, body: Mapping[str, Any]) -> ChatResponse:
        """The complete response of a non-streaming call (a body of the wrong shape raises
        as :meth:`feed`)."""
        blocks: list[ResponseBlock] = []
        for raw in _list(body.get("content"), "'content'"):
            match _object(raw, "a content block").get("type"):
                case "text":
                    if text := raw.get("text"):
                        blocks.append(TextBlock(text=str(text)))
                case "thinking":
                    signature = raw.get("signature")
                    blocks.append(
                        ThinkingBlock(
                            thinking=str(raw.get("thinking") or ""),
                            extra={"signature": str(signature)} if signature else {},
                        )
                    )
                case "redacted_thinking":
                    blocks.append(
                        ThinkingBlock(
                            thinking="",
                            extra={"redacted_thinking_data": str(raw.get("data") or "")},
                        )
                    )
                case "tool_use":
                    blocks.append(
                        ToolCallBlock(
                            id=str(raw.get("id") or f"toolu_{generate_id()}"),
                            name=_text(raw.get("name"), "a tool call's name") or "",
                            input=json.dumps(raw.get("input") or {}, ensure_ascii=False),
                        )
                    )
                case other:
                    logger.debug("ignoring a %r content block in the response", other)
        usage = None
        if isinstance(body.get("usage"), Mapping):
            usage = _usage(body["usage"], trio.current_time() - self.start)
        metadata = {"stop_reason": body["stop_reason"]} if body.get("stop_reason") else {}
        return ChatResponse(
            content=blocks,
            is_last=True,
            id=str(body.get("id") or generate_id()),
            usage=usage,
            metadata=metadata,
        )


# -- the model ---------------------------------------------------------------------------------


class AnthropicChatOptions(ChatModelOptions, total=False):
    """The :class:`AnthropicChatModel` keywords :class:`MiniMaxChatModel` passes through: the
    :class:`~trioagent.model.ChatModelOptions` and Anthropic's own request settings."""

    extra_body: dict[str, Any] | None
    api_version: str
    auth_scheme: Literal["x-api-key", "bearer"]
    extra_headers: Mapping[str, str] | None


class AnthropicChatModel(ChatModelBase):
    """Anthropic Claude through the Messages API.

    Args:
        model: the model name (``"claude-sonnet-4-5"``).
        credential: key and base URL (default: :class:`~trioagent.credential.AnthropicCredential`,
            which reads ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``; base
            ``https://api.anthropic.com``).
        parameters: generation parameters (:class:`AnthropicChatParameters`).
        extra_body: extra top-level request keys (a per-call ``extra_body`` replaces it).
        api_version: the ``anthropic-version`` header.
        auth_scheme: ``"x-api-key"`` (the documented API) or ``"bearer"``
            (``Authorization: Bearer <key>``, as the SDK bundled with the reference).
        extra_headers: more request headers (``anthropic-beta``, ...).
        context_size: the context window (default 200000).
        formatter: default :class:`~trioagent.formatter.AnthropicChatFormatter`.
        **options: the other :class:`ChatModelBase` options (:class:`ChatModelOptions`).

    Request: the formatted messages; a leading ``system`` message becomes the top-level
    ``system`` field.  Unlike the reference (which sends them as they are, and the API
    rejects them), later system messages are sent as ``user`` turns.  Tools are sent as
    ``{"name", "description", "input_schema"}`` (a tool without parameters gets
    ``{"type": "object", "properties": {}}``; a tool given without an OpenAI-style
    ``function`` key — an Anthropic server tool, say — is sent as it is);
    ``tool_choice`` ``required`` becomes ``{"type": "any"}`` and a tool name
    ``{"type": "tool", "name": ...}``.

    Errors: HTTP statuses map as for every provider (429, 5xx incl. 529 "overloaded" and
    transport failures are retried before any content arrived); an ``error`` event inside
    the stream raises the matching typed error and is never retried.
    """

    type: ClassVar[str] = "anthropic_chat"
    Parameters: ClassVar[builtins.type[Any]] = AnthropicChatParameters
    credential: CredentialBase
    parameters: Any

    def __init__(
        self,
        model: str,
        *,
        credential: CredentialBase | None = None,
        parameters: AnthropicChatParameters | None = None,
        extra_body: dict[str, Any] | None = None,
        api_version: str = DEFAULT_API_VERSION,
        auth_scheme: Literal["x-api-key", "bearer"] = "x-api-key",
        extra_headers: Mapping[str, str] | None = None,
        context_size: int = 200000,
        formatter: FormatterBase | None = None,
        **options: Unpack[ChatModelOptions],
    ) -> None:
        if auth_scheme not in ("x-api-key", "bearer"):
            raise ValueError(f"auth_scheme must be 'x-api-key' or 'bearer', got {auth_scheme!r}")
        super().__init__(
            model,
            credential=credential or AnthropicCredential(),
            context_size=context_size,
            formatter=formatter or AnthropicChatFormatter(),
            **options,
        )
        self.parameters = parameters or self.Parameters()
        self.extra_body = dict(extra_body) if extra_body else None
        self.api_version = api_version
        self.auth_scheme = auth_scheme
        self.extra_headers = dict(extra_headers) if extra_headers else {}

    def _get_disable_thinking_kwargs(self) -> dict[str, Any]:
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

    def _thinking_fields(self, max_tokens: int) -> tuple[dict[str, Any] | None, int]:
        """The ``thinking`` field (``None``: not sent) and the possibly raised max_tokens."""
        p = self.parameters
        mode = p.thinking_mode or ("enabled" if p.thinking_enable else None)
        if mode is None:
            return None, max_tokens
        thinking: dict[str, Any] = {"type": mode}
        if mode == "enabled":
            budget = p.thinking_budget or max_tokens // 2
            thinking["budget_tokens"] = budget
            if budget >= max_tokens:
                max_tokens = budget + 1024
        if mode != "disabled" and p.thinking_display:
            thinking["display"] = p.thinking_display
        return thinking, max_tokens

    def _output_config(self) -> dict[str, Any] | None:
        effort = self.parameters.reasoning_effort
        return {"effort": effort} if effort else None

    def _sampling_fields(self) -> dict[str, Any]:
        p = self.parameters
        fields = {"temperature": p.temperature, "top_p": p.top_p, "top_k": p.top_k}
        return {k: v for k, v in fields.items() if v is not None}

    @staticmethod
    def _format_tools(
        tools: list[dict[str, Any]] | None, tool_choice: ToolChoice | None
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
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
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        formatter = self.formatter or AnthropicChatFormatter()
        formatted = await formatter.format(messages, http_client=self.http_client)
        system: list[dict[str, Any]] | None = None
        if formatted and formatted[0].get("role") == "system":
            system = formatted[0]["content"]
            formatted = formatted[1:]
        formatted = [{**m, "role": "user"} if m.get("role") == "system" else m for m in formatted]

        extra_body, call_kwargs = self._body_overrides(self.extra_body)
        overrides = {**extra_body, **call_kwargs}
        max_tokens = self.parameters.max_tokens or DEFAULT_MAX_TOKENS
        thinking = None
        if "thinking" not in overrides:
            thinking, max_tokens = self._thinking_fields(max_tokens)
        body: dict[str, Any] = {
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

    def _request(self, body: dict[str, Any], *, stream: bool) -> httpx.Request:
        return self.http_client.build_request(
            "POST",
            f"{self.credential.get_base_url()}/v1/messages",
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
        body = await self._build_body(messages, tools, tool_choice, stream=True)
        request = self._request(body, stream=True)
        parser = AnthropicStreamParser(trio.current_time(), redact=self._redact)

        async def handle(event: ServerSentEvent) -> bool:
            payload = parse_event(event.data, model=self.model, unit="event", redact=self._redact)
            try:
                chunks = parser.feed(payload, event.event)
            except _MALFORMED as exc:
                # From None: the parser's exception may quote the event unredacted.
                raise ModelStreamError(
                    _malformed("event", self.model, event.data, exc, self._redact)
                ) from None
            for chunk in chunks:
                await send.send(chunk)
            return parser.done

        if not await stream_sse(self.http_client, request, handle, redact=self._redact):
            raise incomplete_stream_error(self.model, "'message_stop'")

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        body = await self._build_body(messages, tools, tool_choice, stream=False)
        request = self._request(body, stream=False)
        parser = AnthropicStreamParser(trio.current_time(), redact=self._redact)
        response = await send_request(self.http_client, request, stream=False, redact=self._redact)
        payload = response_json(response, model=self.model, redact=self._redact)
        if payload.get("type") == "error":
            raise stream_error(payload, redact=self._redact)
        return parse_whole_body(
            parser.parse_message, payload, model=self.model, text=response.text, redact=self._redact
        )


class MiniMaxChatModel(AnthropicChatModel):
    """MiniMax through its Anthropic-compatible endpoint (``https://api.minimax.io/anthropic``;
    China: ``https://api.minimax.cn/anthropic``).

    Parameters are only ``max_tokens`` and ``thinking_enable`` (thinking is
    ``{"type": "adaptive"}``, no budget; no ``output_config``).  The default credential is
    :class:`~trioagent.credential.MiniMaxCredential` (``MINIMAX_API_KEY``), the default
    formatter :class:`~trioagent.formatter.MiniMaxChatFormatter` (adds ``video/*``), the
    default ``context_size`` 1,000,000.  The other keyword arguments
    (:class:`AnthropicChatOptions`): see :class:`AnthropicChatModel`.
    """

    type: ClassVar[str] = "minimax_chat"
    Parameters: ClassVar[builtins.type[Any]] = MiniMaxChatParameters

    def __init__(
        self,
        model: str,
        *,
        credential: CredentialBase | None = None,
        parameters: MiniMaxChatParameters | None = None,
        context_size: int = 1_000_000,
        formatter: FormatterBase | None = None,
        **options: Unpack[AnthropicChatOptions],
    ) -> None:
        super().__init__(
            model,
            credential=credential or MiniMaxCredential(),
            context_size=context_size,
            formatter=formatter or MiniMaxChatFormatter(),
            **options,
        )
        self.parameters = parameters or MiniMaxChatParameters()

    def _thinking_fields(self, max_tokens: int) -> tuple[dict[str, Any] | None, int]:
        if self.parameters.thinking_enable:
            return {"type": "adaptive"}, max_tokens
        return None, max_tokens

    def _output_config(self) -> dict[str, Any] | None:
        return None

    def _sampling_fields(self) -> dict[str, Any]:
        return {}

"""Google Gemini over httpx2.

``POST {base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse`` (streaming) or
``…:generateContent`` with the key in the ``x-goog-api-key`` header.  The body is the REST
form of what a google-genai call sends::

    {"contents": [...], "generationConfig": {"maxOutputTokens", "temperature", "topP",
     "thinkingConfig": {"includeThoughts", "thinkingBudget"}},
     "tools": [{"functionDeclarations": [...]}],
     "toolConfig": {"functionCallingConfig": {"mode": "AUTO" | "NONE" | "ANY",
                                              "allowedFunctionNames": [...]}}}

Each SSE event is a whole ``GenerateContentResponse``; :class:`GeminiStreamParser` turns it
into one delta: ``thought`` text parts into the call's thinking block, other text into its
text block, and every ``functionCall`` part into a complete tool call.  Gemini's calls carry
no id: a call with a ``thoughtSignature`` gets the id ``gemini_ts:<base64 signature>`` (the
formatter sends the signature back from it), any other call a fresh uuid.  Usage comes from
``usageMetadata`` (thinking tokens count as output).  The stream has no terminator: it is
complete when a candidate reported its ``finishReason`` (or the prompt was blocked); a body
that ends before that raises :class:`~trioagent.exception.ModelStreamError`.

Errors: every HTTP error status is retryable, as google-genai's ``APIError`` — transport
failures too; Gemini's ``API_KEY_INVALID`` (sent as HTTP 400) maps to
:class:`~trioagent.exception.ModelAuthenticationError`, and a 429's ``RetryInfo.retryDelay``
is honoured like ``Retry-After``.  An ``{"error": ...}`` event inside the stream raises the
typed error for its code.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import json
import logging
import re
from typing import ClassVar, Unpack

import attrs
import httpx2
import trio

from .._core.ids import generate_id
from .._core.json_types import JSONObject, JSONValue
from .._http import (
    Redact,
    ServerSentEvent,
    error_from_response,
    excerpt,
    identity,
    incomplete_stream_error,
    parse_event,
    send_request,
    stream_sse,
)
from ..credential import GeminiCredential
from ..exception import ModelAuthenticationError, ModelError, ModelStreamError, ModelUpstreamError
from ..formatter import THOUGHT_SIGNATURE_PREFIX, GeminiChatFormatter
from ..message import Base64Source, DataBlock, Msg, TextBlock, ThinkingBlock, ToolCallBlock
from ..types import ToolChoice
from ._accumulator import StreamAccumulator
from ._base import ChunkSink
from ._gemini_schema import function_declaration, to_gemini_rest
from ._params import in_range, positive_or_none, present, select_tools
from ._provider import ProviderChatModel, ProviderOptions
from ._response import ChatResponse, ChatUsage, ResponseBlock
from ._wire import StreamParser, json_list, json_object, parse_stream_unit, parse_whole_body

__all__ = [
    "GeminiChatModel",
    "GeminiChatParameters",
    "GeminiStreamParser",
    "gemini_error",
]

logger = logging.getLogger("trioagent.model")

_DEFAULT_THINKING_BUDGET = 1024
_TOOL_CHOICE_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


# -- parameters ------------------------------------------------------------------------------


def _budget(instance: object, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is not None and value < -1:
        raise ValueError(f"{attribute.name} must be >= 0, or -1 (dynamic), got {value}")


@attrs.define(kw_only=True)
class GeminiChatParameters:
    """Generation parameters of :class:`GeminiChatModel`.

    ``thinkingConfig`` is always sent: with ``thinking_enable`` it asks
    for thought summaries with ``thinking_budget`` tokens (default 1024; ``-1`` lets the model
    decide), without it the budget is 0.  For models that cannot turn thinking off, or Gemini 3's
    ``thinkingLevel``, override it with ``GeminiChatModel(generation_config={"thinkingConfig":
    {...}})``.
    """

    max_tokens: int | None = attrs.field(default=None, validator=positive_or_none)
    thinking_enable: bool = False
    thinking_budget: int | None = attrs.field(default=None, validator=_budget)
    temperature: float | None = attrs.field(default=None, validator=in_range(0, 2))
    top_p: float | None = attrs.field(default=None, validator=in_range(0, 1))


# -- errors ----------------------------------------------------------------------------------

_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _error_details(body: JSONValue) -> tuple[str | None, list[str], float | None]:
    """(status, reasons, retryDelay seconds) of a Google API error body."""
    if not isinstance(body, dict) or not isinstance(error := body.get("error"), dict):
        return None, [], None
    status = error.get("status") if isinstance(error.get("status"), str) else None
    reasons: list[str] = []
    delay: float | None = None
    for detail in error.get("details") or []:
        if not isinstance(detail, dict):
            continue
        if isinstance(reason := detail.get("reason"), str):
            reasons.append(reason)
        if isinstance(raw := detail.get("retryDelay"), str) and (m := _DELAY.match(raw)):
            delay = float(m.group(1))
    return status, reasons, delay


def gemini_error(
    status: int, headers: httpx2.Headers, body: bytes, *, redact: Redact = identity
) -> ModelError:
    """The typed, retryable error for a Gemini error response (or an error event's JSON).

    The type follows the HTTP status (as :func:`~trioagent._http.error_from_response`),
    except that an invalid API key (``API_KEY_INVALID``, sent with 400) is an authentication
    error.  ``code`` is the Google reason or status (``"RESOURCE_EXHAUSTED"``); a 429's
    ``RetryInfo.retryDelay`` is used when there is no ``Retry-After`` header.
    """
    base = error_from_response(status, headers, body, redact=redact)
    try:
        parsed: JSONValue = json.loads(body) if body else None
    except ValueError:
        parsed = None
    google_status, reasons, delay = _error_details(parsed)
    cls: builtins.type[ModelError] = type(base)
    if "API_KEY_INVALID" in reasons or google_status == "UNAUTHENTICATED":
        cls = ModelAuthenticationError
    return cls(
        base.message,
        status_code=base.status_code,
        code=(reasons[0] if reasons else google_status) or base.code,
        retryable=True,  # google-genai retries every APIError too
        retry_after=base.retry_after if base.retry_after is not None else delay,
    )


# -- response parsing ------------------------------------------------------------------------


def _usage(meta: JSONValue, elapsed: float) -> ChatUsage | None:
    if meta is None:
        return None
    meta = json_object(meta, "'usageMetadata'")
    prompt = meta.get("promptTokenCount")
    total = meta.get("totalTokenCount")
    if prompt is None or total is None:
        return None
    input_tokens = int(prompt) + int(meta.get("toolUsePromptTokenCount") or 0)
    candidates = meta.get("candidatesTokenCount")
    if candidates is None:
        output_tokens = int(total) - input_tokens
    else:
        output_tokens = int(candidates) + int(meta.get("thoughtsTokenCount") or 0)
    return ChatUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        time=elapsed,
        cache_input_tokens=int(meta.get("cachedContentTokenCount") or 0),
        metadata=dict(meta),
    )


def _signature_id(signature: str) -> str:
    """``gemini_ts:`` + the signature in standard base64 (the REST value may be URL-safe)."""
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        try:
            raw = base64.urlsafe_b64decode(signature)
        except (binascii.Error, ValueError):
            return THOUGHT_SIGNATURE_PREFIX + signature
    return THOUGHT_SIGNATURE_PREFIX + base64.b64encode(raw).decode("ascii")


class GeminiStreamParser(StreamParser):
    """Turns ``GenerateContentResponse`` objects (REST JSON) into delta chunks.

    One parser per call: it fixes the text and thinking block ids (one block of each per
    call), keeps the last usage reported, and records whether the response
    finished (:attr:`finished`: a ``finishReason`` or a blocked prompt).

    A response of the wrong shape (``candidates`` or ``parts`` not a list, a candidate, its
    ``content``, a part, a ``functionCall``, its ``args`` or ``usageMetadata`` not an object,
    a token count that is not a number, ...) raises ``ValueError`` (or, for a shape not
    checked, another of ``MALFORMED``); the model turns it into a
    :class:`~trioagent.exception.ModelStreamError` naming the model.
    """

    def __init__(self, start: float) -> None:
        super().__init__(start)
        self.text_id = generate_id()
        self.thinking_id = generate_id()
        self.finished = False

    def parse(self, chunk: JSONObject) -> ChatResponse | None:
        """The delta for one streamed response (``None`` when it carries nothing)."""
        if isinstance(response_id := chunk.get("responseId"), str) and response_id:
            self.response_id = response_id
        usage = _usage(chunk.get("usageMetadata"), trio.current_time() - self.start)
        if usage is not None:
            self.usage = usage
        blocks: list[ResponseBlock] = []
        metadata: JSONObject = {}
        candidates = json_list(chunk.get("candidates"), "'candidates'")
        if candidates:
            candidate = json_object(candidates[0], "'candidates[0]'")
            content = json_object(candidate.get("content") or {}, "a candidate's 'content'")
            for part in json_list(content.get("parts"), "'parts'"):
                if (block := self._block(json_object(part, "a part"))) is not None:
                    blocks.append(block)
            if candidate.get("finishReason"):
                metadata["finish_reason"] = candidate["finishReason"]
                self.finished = True
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            metadata["block_reason"] = feedback["blockReason"]
            self.finished = True
        if blocks or self.usage or metadata:
            return self.delta(blocks, metadata)
        return None

    def _block(self, part: JSONObject) -> ResponseBlock | None:
        if (call := part.get("functionCall")) is not None:
            call = json_object(call, "'functionCall'")
            signature = part.get("thoughtSignature")
            if isinstance(signature, str) and signature:
                call_id = _signature_id(signature)
            else:
                call_id = call.get("id") or generate_id()
            return ToolCallBlock(
                id=call_id,
                name=call.get("name") or "unknown",
                input=json.dumps(
                    json_object(call.get("args") or {}, "'functionCall.args'"), ensure_ascii=False
                ),
            )
        text = part.get("text")
        if isinstance(text, str) and text:
            # A thoughtSignature on a text part is dropped: only function calls replay it.
            if part.get("thought"):
                return ThinkingBlock(thinking=text, id=self.thinking_id)
            return TextBlock(text=text, id=self.text_id)
        inline = part.get("inlineData")
        if isinstance(inline, dict) and isinstance(data := inline.get("data"), str) and data:
            media_type = inline.get("mimeType") or "application/octet-stream"
            return DataBlock(source=Base64Source(data=data, media_type=media_type))
        return None

    def parse_response(self, body: JSONObject) -> ChatResponse:
        """The complete response of a non-streaming call (text parts joined)."""
        accumulator = StreamAccumulator()
        if (delta := self.parse(body)) is not None:
            accumulator.add(delta)
        response = accumulator.build()
        response.id = body.get("responseId") or generate_id()
        return response


# -- the model -------------------------------------------------------------------------------


class GeminiChatModel(ProviderChatModel[GeminiCredential, GeminiChatParameters]):
    """Google Gemini through the Generative Language REST API.

    Args:
        model: the model name (``"gemini-2.5-flash"``; ``"models/…"`` accepted too).
        generation_config: extra ``generationConfig`` keys in REST form (``"stopSequences"``,
            ``"responseModalities"``, ``"thinkingConfig"`` …), merged over the parameters.
        api_version: the API version in the URL path.
        **options: the :class:`~trioagent.model.ProviderChatModel` keywords.  Defaults:
            ``GeminiCredential()`` (``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` and
            ``GEMINI_BASE_URL``), :class:`GeminiChatParameters`, a context of 1048576 tokens,
            :class:`~trioagent.formatter.GeminiChatFormatter`; ``extra_body`` takes top-level
            keys (``"safetySettings"``, ``"systemInstruction"``, ``"cachedContent"`` …).
            Unlike other providers, every HTTP error status is retried (``max_retries``
            times), as google-genai does.
    """

    type: ClassVar[str] = "gemini_chat"
    Parameters = GeminiChatParameters
    default_credential = GeminiCredential
    default_formatter = GeminiChatFormatter
    default_context_size = 1048576

    def __init__(
        self,
        model: str,
        *,
        generation_config: JSONObject | None = None,
        api_version: str = "v1beta",
        **options: Unpack[ProviderOptions[GeminiCredential, GeminiChatParameters]],
    ) -> None:
        super().__init__(model, **options)
        self.generation_config = dict(generation_config) if generation_config else None
        self.api_version = api_version

    # -- request -------------------------------------------------------------------------------

    def _url(self, *, stream: bool) -> str:
        model = self.model
        if not model.startswith(("models/", "tunedModels/")):
            model = f"models/{model}"
        method = "streamGenerateContent" if stream else "generateContent"
        return f"{self.credential.get_base_url()}/{self.api_version}/{model}:{method}"

    def _headers(self, *, stream: bool) -> dict[str, str]:
        return {
            "x-goog-api-key": self.credential.get_api_key() or "",
            "Accept": "text/event-stream" if stream else "application/json",
        }

    @staticmethod
    def _format_tools(
        tools: list[JSONObject] | None, tool_choice: ToolChoice | None
    ) -> tuple[list[JSONObject] | None, JSONObject | None]:
        tools = select_tools(tools, tool_choice)
        if not tools:
            return None, None
        formatted = [{"functionDeclarations": [function_declaration(t) for t in tools]}]
        if tool_choice is None:
            return formatted, None
        mode = _TOOL_CHOICE_MODES.get(tool_choice.mode)
        config: JSONObject = (
            {"mode": mode}
            if mode is not None
            else {"mode": "ANY", "allowedFunctionNames": [tool_choice.mode]}
        )
        return formatted, {"functionCallingConfig": config}

    def _generation_config(self) -> JSONObject:
        p = self.parameters
        config = present(maxOutputTokens=p.max_tokens, temperature=p.temperature, topP=p.top_p)
        if p.thinking_enable:
            budget = p.thinking_budget or _DEFAULT_THINKING_BUDGET
            config["thinkingConfig"] = {"includeThoughts": True, "thinkingBudget": budget}
        else:
            config["thinkingConfig"] = {"includeThoughts": False, "thinkingBudget": 0}
        if self.generation_config:
            config.update(self.generation_config)
        return config

    async def _build_body(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
    ) -> JSONObject:
        contents = await self._format(messages)
        body: JSONObject = {
            "contents": to_gemini_rest(contents),
            "generationConfig": self._generation_config(),
        }
        formatted_tools, tool_config = self._format_tools(tools, tool_choice)
        if formatted_tools:
            body["tools"] = formatted_tools
        if tool_config is not None:
            body["toolConfig"] = tool_config
        for extra in (self.extra_body, self._call_kwargs()):
            for key, value in (extra or {}).items():
                if key == "generationConfig" and isinstance(value, dict):
                    body["generationConfig"] = {**body["generationConfig"], **value}
                else:
                    body[key] = value
        return body

    def _request(self, body: JSONObject, *, stream: bool) -> httpx2.Request:
        return self.http_client.build_request(
            "POST",
            self._url(stream=stream),
            params={"alt": "sse"} if stream else None,
            json=body,
            headers=self._headers(stream=stream),
        )

    def _is_structured_output_fallback_error(self, exc: Exception) -> bool:
        # No fallback errors for Gemini: every API error is retried within the strategy instead.
        return False

    # -- hooks ---------------------------------------------------------------------------------

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        emit: ChunkSink,
    ) -> None:
        request = await self._prepare(messages, tools, tool_choice, stream=True)
        parser = GeminiStreamParser(trio.current_time())

        async def handle(event: ServerSentEvent) -> bool:
            payload = self._decode(event.data)
            delta = parse_stream_unit(
                lambda: parser.parse(payload),
                unit="chunk",
                model=self.model,
                text=event.data,
                redact=self._redact,
            )
            if delta is not None:
                await emit(delta)
            return False  # no terminator: the stream ends with the body

        await stream_sse(
            self.http_client,
            request,
            handle,
            redact=self._redact,
            error=gemini_error,
            max_event_size=self.max_event_size,
        )
        if not parser.finished:
            raise incomplete_stream_error(self.model, "a finishReason")

    def _decode(self, data: str) -> JSONObject:
        payload = parse_event(data, model=self.model, unit="chunk", redact=self._redact)
        if isinstance(error := payload.get("error"), dict):
            code = error.get("code")
            status = code if isinstance(code, int) and code >= 400 else 500
            raw = json.dumps(payload).encode()
            raise gemini_error(status, httpx2.Headers(), raw, redact=self._redact)
        return payload

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        request = await self._prepare(messages, tools, tool_choice, stream=False)
        parser = GeminiStreamParser(trio.current_time())
        response = await send_request(
            self.http_client, request, stream=False, redact=self._redact, error=gemini_error
        )
        try:
            payload = self._decode(response.text)
        except ModelStreamError as exc:
            raise ModelUpstreamError(
                f"the response of {self.model!r} is not a JSON object: "
                f"{excerpt(response.text, self._redact)}"
            ) from exc
        return parse_whole_body(
            parser.parse_response,
            payload,
            model=self.model,
            text=response.text,
            redact=self._redact,
        )

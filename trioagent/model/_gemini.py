"""Google Gemini over httpx (reference/model.md §2.8).

``POST {base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse`` (streaming) or
``…:generateContent`` with the key in the ``x-goog-api-key`` header.  The body is the REST
form of what the reference's google-genai call sends::

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

Errors: every HTTP error status is retryable, as the reference's ``APIError`` (model.md
§1.9) — transport failures too; Gemini's ``API_KEY_INVALID`` (sent as HTTP 400) maps to
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
from collections.abc import Callable
from typing import Any, ClassVar, Unpack

import attrs
import httpx
import trio

from .._core.ids import generate_id
from .._json_repair import flatten_json_schema
from ..credential import GeminiCredential
from ..exception import (
    ModelAuthenticationError,
    ModelError,
    ModelStreamError,
    ModelUpstreamError,
)
from ..formatter import FormatterBase, GeminiChatFormatter
from ..formatter._gemini import THOUGHT_SIGNATURE_PREFIX
from ..message import Base64Source, DataBlock, Msg, TextBlock, ThinkingBlock, ToolCallBlock
from ..types import ToolChoice
from ._accumulator import StreamAccumulator
from ._base import ChatModelBase, ChatModelOptions, in_range, positive_or_none, select_tools
from ._http import (
    error_from_response,
    excerpt,
    incomplete_stream_error,
    parse_event,
    send_request,
    stream_sse,
)
from ._openai import _MALFORMED, _list, _malformed, _object, parse_whole_body
from ._response import ChatResponse, ChatUsage, ResponseBlock
from ._sse import ServerSentEvent

__all__ = [
    "GeminiChatModel",
    "GeminiChatParameters",
    "GeminiStreamParser",
    "gemini_error",
    "sanitize_gemini_schema",
    "to_gemini_rest",
]

logger = logging.getLogger("trioagent.model")

_Redact = Callable[[str], str]

_DEFAULT_THINKING_BUDGET = 1024
_TOOL_CHOICE_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def _identity(text: str) -> str:
    return text


# -- parameters ------------------------------------------------------------------------------


def _budget(instance: Any, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is not None and value < -1:
        raise ValueError(f"{attribute.name} must be >= 0, or -1 (dynamic), got {value}")


@attrs.define(kw_only=True)
class GeminiChatParameters:
    """Generation parameters of :class:`GeminiChatModel`.

    ``thinkingConfig`` is always sent, as in the reference: with ``thinking_enable`` it asks
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


# -- tool schemas ----------------------------------------------------------------------------

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs")
_SCHEMA_SINGLE = ("items", "not", "if", "then", "else")
_SCHEMA_LISTS = ("allOf", "oneOf", "anyOf")


def _is_null_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def sanitize_gemini_schema(schema: Any) -> Any:
    """A JSON schema reduced to what Gemini's function declarations accept (model.md §2.8).

    Drops ``$schema`` and ``additionalProperties``; ``const: v`` becomes ``enum: [v]``; a
    ``null`` type becomes ``object``; a type list loses ``"null"`` (one type left: that type;
    several: an ``anyOf`` of them); an ``anyOf`` with a null member loses it (one member left:
    inlined, the outer keys such as ``default`` and ``description`` kept).  Applied
    recursively to sub-schemas.  The input is not modified.

    Raises:
        ValueError: a schema with both a multi-type ``type`` list and an ``anyOf``.
    """
    if isinstance(schema, list):
        return [sanitize_gemini_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if isinstance(any_of := schema.get("anyOf"), list) and any(map(_is_null_schema, any_of)):
        members = [m for m in any_of if not _is_null_schema(m)]
        outer = {k: v for k, v in schema.items() if k != "anyOf"}
        if len(members) == 1 and isinstance(members[0], dict):
            return sanitize_gemini_schema({**members[0], **outer})
        schema = {**schema, "anyOf": members} if members else outer
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("$schema", "additionalProperties"):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: sanitize_gemini_schema(sub) for name, sub in value.items()}
        elif key in _SCHEMA_SINGLE or key in _SCHEMA_LISTS:
            out[key] = sanitize_gemini_schema(value)
        else:
            out[key] = value
    if "const" in out:
        out.setdefault("enum", [out.pop("const")])
    kind = out.get("type")
    if kind == "null":
        out["type"] = "object"
    elif isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) <= 1:
            out["type"] = kinds[0] if kinds else "object"
        else:
            if "anyOf" in out:
                raise ValueError(
                    f"cannot convert the type list {kind!r} to anyOf: the schema already has one"
                )
            del out["type"]
            out["anyOf"] = [{"type": k} for k in kinds]
    return out


def _function_declaration(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function", tool)
    declaration: dict[str, Any] = {"name": function.get("name", "")}
    if function.get("description"):
        declaration["description"] = function["description"]
    parameters = function.get("parameters")
    if isinstance(parameters, dict):
        parameters = sanitize_gemini_schema(flatten_json_schema(parameters))
        # Gemini rejects an OBJECT schema without properties; a tool without arguments is
        # declared without parameters instead.
        if parameters.get("type") != "object" or parameters.get("properties"):
            declaration["parameters"] = parameters
    return declaration


# -- REST conversion -------------------------------------------------------------------------

#: Values under these keys are user data (function arguments and results): kept verbatim.
_VERBATIM_KEYS = frozenset({"args", "response"})


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def to_gemini_rest(value: Any) -> Any:
    """SDK-shaped (snake_case) Gemini dicts as REST JSON: camelCase keys, bytes as base64.

    Function-call arguments and function responses are left as they are; keys that are
    already camelCase pass through.
    """
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list):
        return [to_gemini_rest(item) for item in value]
    if isinstance(value, dict):
        return {
            _camel(key): (_bytes_to_base64(item) if key in _VERBATIM_KEYS else to_gemini_rest(item))
            for key, item in value.items()
        }
    return value


def _bytes_to_base64(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list):
        return [_bytes_to_base64(item) for item in value]
    if isinstance(value, dict):
        return {key: _bytes_to_base64(item) for key, item in value.items()}
    return value


# -- errors ----------------------------------------------------------------------------------

_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _error_details(body: Any) -> tuple[str | None, list[str], float | None]:
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
    status: int, headers: httpx.Headers, body: bytes, *, redact: _Redact = _identity
) -> ModelError:
    """The typed, retryable error for a Gemini error response (or an error event's JSON).

    The type follows the HTTP status (as :func:`~trioagent.model._http.error_from_response`),
    except that an invalid API key (``API_KEY_INVALID``, sent with 400) is an authentication
    error.  ``code`` is the Google reason or status (``"RESOURCE_EXHAUSTED"``); a 429's
    ``RetryInfo.retryDelay`` is used when there is no ``Retry-After`` header.
    """
    base = error_from_response(status, headers, body, redact=redact)
    try:
        parsed: Any = json.loads(body) if body else None
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
        retryable=True,  # the reference retries every google.genai APIError (model.md §1.9)
        retry_after=base.retry_after if base.retry_after is not None else delay,
    )


# -- response parsing ------------------------------------------------------------------------


def _usage(meta: Any, elapsed: float) -> ChatUsage | None:
    if meta is None:
        return None
    meta = _object(meta, "'usageMetadata'")
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


class GeminiStreamParser:
    """Turns ``GenerateContentResponse`` objects (REST JSON) into delta chunks.

    One parser per call: it fixes the text and thinking block ids (one block of each per call,
    as the reference), keeps the last usage reported, and records whether the response
    finished (:attr:`finished`: a ``finishReason`` or a blocked prompt).

    A response of the wrong shape (``candidates`` or ``parts`` not a list, a candidate, its
    ``content``, a part, a ``functionCall``, its ``args`` or ``usageMetadata`` not an object,
    a token count that is not a number, ...) raises ``ValueError`` (or, for a shape not
    checked, another of ``_MALFORMED``); the model turns it into a
    :class:`~trioagent.exception.ModelStreamError` naming the model.
    """

    def __init__(self, start: float) -> None:
        self.start = start
        self.response_id = generate_id()
        self.text_id = generate_id()
        self.thinking_id = generate_id()
        self.usage: ChatUsage | None = None
        self.finished = False

    def parse(self, chunk: dict[str, Any]) -> ChatResponse | None:
        """The delta for one streamed response (``None`` when it carries nothing)."""
        if isinstance(response_id := chunk.get("responseId"), str) and response_id:
            self.response_id = response_id
        usage = _usage(chunk.get("usageMetadata"), trio.current_time() - self.start)
        if usage is not None:
            self.usage = usage
        blocks: list[ResponseBlock] = []
        metadata: dict[str, Any] = {}
        candidates = _list(chunk.get("candidates"), "'candidates'")
        if candidates:
            candidate = _object(candidates[0], "'candidates[0]'")
            content = _object(candidate.get("content") or {}, "a candidate's 'content'")
            for part in _list(content.get("parts"), "'parts'"):
                if (block := self._block(_object(part, "a part"))) is not None:
                    blocks.append(block)
            if candidate.get("finishReason"):
                metadata["finish_reason"] = candidate["finishReason"]
                self.finished = True
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            metadata["block_reason"] = feedback["blockReason"]
            self.finished = True
        if blocks or self.usage or metadata:
            return ChatResponse(
                content=blocks,
                is_last=False,
                id=self.response_id,
                usage=self.usage,
                metadata=metadata,
            )
        return None

    def _block(self, part: dict[str, Any]) -> ResponseBlock | None:
        if (call := part.get("functionCall")) is not None:
            call = _object(call, "'functionCall'")
            signature = part.get("thoughtSignature")
            if isinstance(signature, str) and signature:
                call_id = _signature_id(signature)
            else:
                call_id = call.get("id") or generate_id()
            return ToolCallBlock(
                id=call_id,
                name=call.get("name") or "unknown",
                input=json.dumps(
                    _object(call.get("args") or {}, "'functionCall.args'"), ensure_ascii=False
                ),
            )
        text = part.get("text")
        if isinstance(text, str) and text:
            # A thoughtSignature on a text part is dropped, as in the reference.
            if part.get("thought"):
                return ThinkingBlock(thinking=text, id=self.thinking_id)
            return TextBlock(text=text, id=self.text_id)
        inline = part.get("inlineData")
        if isinstance(inline, dict) and isinstance(data := inline.get("data"), str) and data:
            media_type = inline.get("mimeType") or "application/octet-stream"
            return DataBlock(source=Base64Source(data=data, media_type=media_type))
        return None

    def parse_response(self, body: dict[str, Any]) -> ChatResponse:
        """The complete response of a non-streaming call (text parts joined)."""
        accumulator = StreamAccumulator()
        if (delta := self.parse(body)) is not None:
            accumulator.add(delta)
        response = accumulator.build()
        response.id = body.get("responseId") or generate_id()
        return response


# -- the model -------------------------------------------------------------------------------


class GeminiChatModel(ChatModelBase):
    """Google Gemini through the Generative Language REST API.

    Args:
        model: the model name (``"gemini-2.5-flash"``; ``"models/…"`` accepted too).
        credential: key and base URL (default: ``GeminiCredential()``, which reads
            ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` and ``GEMINI_BASE_URL``).
        parameters: generation parameters.
        generation_config: extra ``generationConfig`` keys in REST form (``"stopSequences"``,
            ``"responseModalities"``, ``"thinkingConfig"`` …), merged over the parameters.
        extra_body: extra top-level request keys (``"safetySettings"``,
            ``"systemInstruction"``, ``"cachedContent"`` …).
        api_version: the API version in the URL path.
        context_size: the context window (default 1048576).
        formatter: default :class:`~trioagent.formatter.GeminiChatFormatter`.
        **options: the other :class:`ChatModelBase` options (:class:`ChatModelOptions`).
            Unlike other providers, every HTTP error status is retried (``max_retries``
            times), as the reference does.
    """

    type: ClassVar[str] = "gemini_chat"
    Parameters: ClassVar[builtins.type[GeminiChatParameters]] = GeminiChatParameters
    credential: GeminiCredential

    def __init__(
        self,
        model: str,
        *,
        credential: GeminiCredential | None = None,
        parameters: GeminiChatParameters | None = None,
        generation_config: dict[str, Any] | None = None,
        extra_body: dict[str, Any] | None = None,
        api_version: str = "v1beta",
        context_size: int = 1048576,
        formatter: FormatterBase | None = None,
        **options: Unpack[ChatModelOptions],
    ) -> None:
        super().__init__(
            model,
            credential=credential or GeminiCredential(),
            context_size=context_size,
            formatter=formatter or GeminiChatFormatter(),
            **options,
        )
        self.parameters = parameters or GeminiChatParameters()
        self.generation_config = dict(generation_config) if generation_config else None
        self.extra_body = dict(extra_body) if extra_body else None
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
        tools: list[dict[str, Any]] | None, tool_choice: ToolChoice | None
    ) -> tuple[list[dict[str, Any]] | None, dict[str, Any] | None]:
        tools = select_tools(tools, tool_choice)
        if not tools:
            return None, None
        formatted = [{"functionDeclarations": [_function_declaration(t) for t in tools]}]
        if tool_choice is None:
            return formatted, None
        mode = _TOOL_CHOICE_MODES.get(tool_choice.mode)
        config: dict[str, Any] = (
            {"mode": mode}
            if mode is not None
            else {"mode": "ANY", "allowedFunctionNames": [tool_choice.mode]}
        )
        return formatted, {"functionCallingConfig": config}

    def _generation_config(self) -> dict[str, Any]:
        p = self.parameters
        config: dict[str, Any] = {}
        if p.max_tokens is not None:
            config["maxOutputTokens"] = p.max_tokens
        if p.temperature is not None:
            config["temperature"] = p.temperature
        if p.top_p is not None:
            config["topP"] = p.top_p
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
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
    ) -> dict[str, Any]:
        formatter = self.formatter or GeminiChatFormatter()
        contents = await formatter.format(messages, http_client=self.http_client)
        body: dict[str, Any] = {
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

    def _request(self, body: dict[str, Any], *, stream: bool) -> httpx.Request:
        return self.http_client.build_request(
            "POST",
            self._url(stream=stream),
            params={"alt": "sse"} if stream else None,
            json=body,
            headers=self._headers(stream=stream),
        )

    def _is_structured_output_fallback_error(self, exc: Exception) -> bool:
        # The reference has no fallback errors for Gemini (model.md §1.6): every API error is
        # retried within the strategy instead.
        return False

    # -- hooks ---------------------------------------------------------------------------------

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        send: trio.MemorySendChannel[ChatResponse],
    ) -> None:
        body = await self._build_body(messages, tools, tool_choice)
        request = self._request(body, stream=True)
        parser = GeminiStreamParser(trio.current_time())

        async def handle(event: ServerSentEvent) -> bool:
            payload = self._decode(event.data)
            try:
                delta = parser.parse(payload)
            except _MALFORMED as exc:
                # From None: the parser's exception may quote the chunk unredacted.
                raise ModelStreamError(
                    _malformed("chunk", self.model, event.data, exc, self._redact)
                ) from None
            if delta is not None:
                await send.send(delta)
            return False  # no terminator: the stream ends with the body

        await stream_sse(self.http_client, request, handle, redact=self._redact, error=gemini_error)
        if not parser.finished:
            raise incomplete_stream_error(self.model, "a finishReason")

    def _decode(self, data: str) -> dict[str, Any]:
        payload = parse_event(data, model=self.model, unit="chunk", redact=self._redact)
        if isinstance(error := payload.get("error"), dict):
            code = error.get("code")
            status = code if isinstance(code, int) and code >= 400 else 500
            raw = json.dumps(payload).encode()
            raise gemini_error(status, httpx.Headers(), raw, redact=self._redact)
        return payload

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        body = await self._build_body(messages, tools, tool_choice)
        request = self._request(body, stream=False)
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

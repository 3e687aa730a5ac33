"""OpenAI Responses API over httpx2.

``POST {base_url}/responses`` with a Bearer key.  A streamed call reads typed SSE events
(``response.output_text.delta``, ``response.function_call_arguments.delta``, ...) until
``response.completed`` (or ``response.incomplete``); a stream that ends before it raises
:class:`~trioagent.exception.ModelStreamError`, and ``response.failed`` / ``error`` events
raise :class:`~trioagent.exception.ModelUpstreamError`.  The parser
(:class:`OpenAIResponseStreamParser`) is sans-IO.

Reasoning is kept for replay: every thinking block produced from a ``reasoning`` output item
carries the extras ``reasoning_item_id`` and ``reasoning_item_raw`` (the item as the API
returned it, ``null`` fields dropped), which
:class:`~trioagent.formatter.OpenAIResponseFormatter` sends back as the reasoning item.
"""

from __future__ import annotations

from typing import ClassVar

import attrs
import trio

from .._core.ids import generate_id
from .._core.json_types import JSONObject, JSONValue
from .._http import (
    Redact,
    ServerSentEvent,
    error_from_payload,
    incomplete_stream_error,
    parse_event,
    response_json,
    send_request,
    stream_sse,
)
from ..credential import OpenAICredential
from ..exception import ModelUpstreamError
from ..formatter import OpenAIResponseFormatter
from ..message import Msg, TextBlock, ThinkingBlock, ToolCallBlock
from ..types import ToolChoice
from ._base import ChunkSink
from ._openai import ReasoningEffort, openai_headers
from ._params import in_range, positive_or_none, present
from ._provider import ProviderChatModel
from ._response import ChatResponse, ChatUsage, ResponseBlock
from ._wire import (
    StreamParser,
    json_list,
    json_object,
    json_text,
    parse_stream_unit,
    parse_whole_body,
)

__all__ = ["OpenAIResponseModel", "OpenAIResponseParameters", "OpenAIResponseStreamParser"]

#: Per-call body keys the Responses API does not take (chat-completions audio output).
_DROPPED_CALL_KWARGS = ("modalities", "audio")
_LITERAL_MODES = ("auto", "none", "required")


@attrs.define(kw_only=True)
class OpenAIResponseParameters:
    """Generation parameters of :class:`OpenAIResponseModel`.

    ``max_tokens`` is sent as ``max_output_tokens``; ``reasoning: {"effort": ...}`` is sent only
    when ``thinking_enable`` is set and ``reasoning_effort`` is given.
    """

    max_tokens: int | None = attrs.field(default=None, validator=positive_or_none)
    thinking_enable: bool = False
    reasoning_effort: ReasoningEffort | None = None
    temperature: float | None = attrs.field(default=None, validator=in_range(0, 2))


def _drop_none(value: JSONValue) -> JSONValue:
    """A deep copy of a JSON value without ``null`` object members (pydantic's
    ``exclude_none`` dump, as AgentScope keeps it)."""
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def _usage_of(response: JSONObject, elapsed: float) -> ChatUsage | None:
    """The usage of a response object (``None`` when absent or empty)."""
    raw = response.get("usage")
    if raw is None:
        return None
    raw = json_object(raw, "'usage'")
    return _usage(raw, elapsed) if raw else None


def _usage(raw: JSONObject, elapsed: float) -> ChatUsage:
    details = raw.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return ChatUsage(
        input_tokens=int(raw.get("input_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        time=elapsed,
        cache_input_tokens=int(cached) if cached is not None else 0,
        metadata=dict(raw),
    )


def _finish_metadata(response: JSONObject) -> JSONObject:
    """The upstream response id and why it stopped (``completed``, ``max_output_tokens``, ...)."""
    metadata: JSONObject = {}
    if isinstance(response.get("id"), str):
        metadata["response_id"] = response["id"]
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    if reason or response.get("status"):
        metadata["finish_reason"] = reason or response["status"]
    return metadata


def _error_from_event(payload: JSONObject, *, redact: Redact) -> ModelUpstreamError:
    """The error for a ``response.failed`` or ``error`` stream event (not retryable, as the
    OpenAI SDK's ``openai.APIError``)."""
    if payload.get("type") == "response.failed":
        response = payload.get("response")
        error = response.get("error") if isinstance(response, dict) else None
        if not isinstance(error, dict):
            return ModelUpstreamError(
                "the response failed without an error message", code=None, retryable=False
            )
        return error_from_payload({"error": error}, redact=redact)
    if isinstance(payload.get("error"), dict):
        return error_from_payload(payload, redact=redact)
    message = payload.get("message")
    code = payload.get("code")
    return ModelUpstreamError(
        redact(str(message) if message else f"error event in the stream: {payload!r:.300}"),
        code=str(code) if code else None,
        retryable=False,
    )


class OpenAIResponseStreamParser(StreamParser):
    """Turns Responses API stream events into delta chunks.

    One parser per call.  Block ids are allocated per output item and part: a reasoning item
    gets one thinking block per summary part (``reasoning_summary_text``) and per raw
    reasoning part (``reasoning_text``); a message item one text block per content part; a
    function call is keyed by its ``call_id`` (which becomes the tool-call block id).  Every
    chunk carries one locally generated response id (as AgentScope does); the upstream
    ``resp_...`` id is kept in the final chunk's ``metadata["response_id"]``.

    An event of the wrong shape (a ``delta`` that is not a string, an index that is not a
    number, an ``item``, ``response`` or ``usage`` that is not an object, ``output`` not a
    list of objects, ...) raises ``ValueError`` (or, for a shape not checked, another of
    ``MALFORMED``); the model turns it into a
    :class:`~trioagent.exception.ModelStreamError` naming the model.
    """

    def __init__(self, start: float) -> None:
        super().__init__(start)
        #: item id -> (event key -> block id), in allocation order.
        self.thinking_ids: dict[str, dict[tuple[str, int], str]] = {}
        self.text_ids: dict[tuple[str, int], str] = {}
        #: function-call item id -> (call id, name).
        self.calls: dict[str, tuple[str, str]] = {}
        self.calls_sent: set[str] = set()
        #: Whether the terminal event (``response.completed`` / ``.incomplete``) was seen.
        self.done = False

    def parse(self, payload: JSONObject, *, redact: Redact) -> ChatResponse | None:
        """The delta for one event (``None`` when it carries nothing).

        Raises:
            ModelUpstreamError: a ``response.failed`` or ``error`` event.
        """
        kind = payload.get("type")
        match kind:
            case "response.failed" | "error":
                raise _error_from_event(payload, redact=redact)
            case "response.reasoning_summary_text.delta":
                return self._thinking(payload, "summary_index")
            case "response.reasoning_text.delta":
                return self._thinking(payload, "content_index")
            case "response.output_text.delta" | "response.refusal.delta":
                delta = json_text(payload.get("delta"), "'delta'")
                if not delta:
                    return None
                key = (str(payload.get("item_id") or ""), int(payload.get("content_index") or 0))
                block_id = self.text_ids.setdefault(key, generate_id())
                return self.delta([TextBlock(text=delta, id=block_id)])
            case "response.output_item.added":
                item = json_object(payload.get("item") or {}, "'item'")
                if item.get("type") == "function_call":
                    self._remember_call(item)
                return None
            case "response.function_call_arguments.delta":
                delta = json_text(payload.get("delta"), "'delta'")
                call = self.calls.get(str(payload.get("item_id")))
                if call is None or not delta:
                    return None
                self.calls_sent.add(str(payload.get("item_id")))
                return self.delta([ToolCallBlock(id=call[0], name=call[1], input=delta)])
            case "response.function_call_arguments.done":
                item_id = str(payload.get("item_id"))
                call = self.calls.get(item_id)
                if call is None or item_id in self.calls_sent:
                    return None
                self.calls_sent.add(item_id)
                arguments = payload.get("arguments") or "{}"
                return self.delta([ToolCallBlock(id=call[0], name=call[1], input=arguments)])
            case "response.completed" | "response.incomplete":
                self.done = True
                return self._finish(json_object(payload.get("response") or {}, "'response'"))
        return None

    def _thinking(self, payload: JSONObject, index_key: str) -> ChatResponse | None:
        delta = json_text(payload.get("delta"), "'delta'")
        if not delta:
            return None
        item_ids = self.thinking_ids.setdefault(str(payload.get("item_id") or ""), {})
        key = (str(payload["type"]), int(payload.get(index_key) or 0))
        block_id = item_ids.setdefault(key, generate_id())
        return self.delta([ThinkingBlock(thinking=delta, id=block_id)])

    def _remember_call(self, item: JSONObject) -> None:
        item_id = str(item.get("id") or "")
        if item_id not in self.calls:
            call_id = item.get("call_id") or item_id or f"call_{generate_id()}"
            name = json_text(item.get("name"), "a function call's name") or "unknown"
            self.calls[item_id] = (str(call_id), name)

    def _finish(self, response: JSONObject) -> ChatResponse:
        """Usage, the reasoning-item extras on every thinking block of each reasoning item,
        and any function call whose arguments were never streamed."""
        if (usage := _usage_of(response, trio.current_time() - self.start)) is not None:
            self.usage = usage
        blocks: list[ResponseBlock] = []
        for item in json_list(response.get("output"), "'output'"):
            item = json_object(item, "an output item")
            if item.get("type") == "reasoning" and item.get("id"):
                item_id = str(item["id"])
                extras = {"reasoning_item_id": item_id, "reasoning_item_raw": _drop_none(item)}
                ids = self.thinking_ids.setdefault(item_id, {})
                if not ids:
                    ids[("metadata", 0)] = generate_id()
                blocks.extend(
                    ThinkingBlock(thinking="", id=block_id, extra=dict(extras))
                    for block_id in ids.values()
                )
            elif item.get("type") == "function_call":
                # Beyond AgentScope: a call whose arguments never arrived as events
                # would otherwise be lost.
                item_id = str(item.get("id") or "")
                self._remember_call(item)
                if item_id not in self.calls_sent:
                    self.calls_sent.add(item_id)
                    call_id, name = self.calls[item_id]
                    arguments = item.get("arguments") or "{}"
                    blocks.append(ToolCallBlock(id=call_id, name=name, input=arguments))
        return self.delta(blocks, _finish_metadata(response))

    def parse_response(self, body: JSONObject) -> ChatResponse:
        """The complete response of a non-streaming call (a body of the wrong shape raises
        as :meth:`parse`)."""
        blocks: list[ResponseBlock] = []
        for item in json_list(body.get("output"), "'output'"):
            item = json_object(item, "an output item")
            match item.get("type"):
                case "reasoning":
                    blocks.extend(_reasoning_blocks(item))
                case "message":
                    for part in json_list(item.get("content"), "a message's 'content'"):
                        part = json_object(part, "a content part")
                        if part.get("type") == "output_text":
                            blocks.append(TextBlock(text=str(part.get("text") or "")))
                        elif part.get("type") == "refusal":
                            blocks.append(TextBlock(text=str(part.get("refusal") or "")))
                case "function_call":
                    blocks.append(
                        ToolCallBlock(
                            id=str(
                                item.get("call_id") or item.get("id") or f"call_{generate_id()}"
                            ),
                            name=str(item.get("name") or "unknown"),
                            input=item.get("arguments") or "{}",
                        )
                    )
        usage = _usage_of(body, trio.current_time() - self.start)
        return ChatResponse(
            content=blocks,
            is_last=True,
            id=str(body.get("id") or generate_id()),
            usage=usage,
            metadata=_finish_metadata(body),
        )


def _reasoning_blocks(item: JSONObject) -> list[ThinkingBlock]:
    """One thinking block per summary text and per raw reasoning text of a reasoning item
    (one empty block when it has neither), each carrying the item for replay."""
    texts = [
        str(part.get("text") or "")
        for part in json_list(item.get("summary"), "a reasoning item's 'summary'")
        if isinstance(part, dict) and part.get("type") == "summary_text"
    ]
    texts += [
        str(part.get("text") or "")
        for part in json_list(item.get("content"), "a reasoning item's 'content'")
        if isinstance(part, dict) and part.get("type") == "reasoning_text"
    ]
    if not item.get("id"):
        return [ThinkingBlock(thinking=t) for t in texts]
    extras = {"reasoning_item_id": str(item["id"]), "reasoning_item_raw": _drop_none(item)}
    return [ThinkingBlock(thinking=t, extra=dict(extras)) for t in texts or [""]]


class OpenAIResponseModel(ProviderChatModel[OpenAICredential, OpenAIResponseParameters]):
    """The OpenAI Responses API (``POST /responses``).

    Tools are sent in the Responses shape (``{"type": "function", "name", "description",
    "parameters"}``), always the full list; ``tool_choice`` becomes the literal mode, a
    ``{"type": "function", "name"}`` object for a tool name, or — when ``tool_choice.tools``
    restricts the tools — ``{"type": "allowed_tools", "mode", "tools"}``.

    Defaults: ``OpenAICredential()`` (``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` /
    ``OPENAI_ORG_ID``), :class:`OpenAIResponseParameters`, a context of 200000 tokens,
    :class:`~trioagent.formatter.OpenAIResponseFormatter`.  The keywords:
    :class:`~trioagent.model.ProviderChatModel`; ``extra_body`` is merged after the
    parameters and a per-call ``extra_body`` replaces it.
    """

    type: ClassVar[str] = "openai_response"
    Parameters = OpenAIResponseParameters
    default_credential = OpenAICredential
    default_formatter = OpenAIResponseFormatter
    default_context_size = 200000
    endpoint = "/responses"

    def _headers(self, *, stream: bool) -> dict[str, str]:
        return openai_headers(self.credential, stream=stream)

    @staticmethod
    def _format_tools(tools: list[JSONObject] | None) -> list[JSONObject] | None:
        if not tools:
            return None
        formatted = []
        for tool in tools:
            function = tool.get("function")
            if tool.get("type", "function") == "function" and isinstance(function, dict):
                formatted.append({"type": "function", **function})
            else:
                formatted.append(tool)  # already in the Responses shape, or a built-in tool
        return formatted

    @staticmethod
    def _format_tool_choice(tool_choice: ToolChoice) -> str | JSONObject:
        if tool_choice.mode not in _LITERAL_MODES:
            return {"type": "function", "name": tool_choice.mode}
        if tool_choice.tools:
            return {
                "type": "allowed_tools",
                "mode": tool_choice.mode,
                "tools": [{"type": "function", "name": name} for name in tool_choice.tools],
            }
        return tool_choice.mode

    async def _build_body(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
    ) -> JSONObject:
        p = self.parameters
        body: JSONObject = {
            "model": self.model,
            "input": await self._format(messages),
            "stream": stream,
            **present(
                max_output_tokens=p.max_tokens,
                temperature=p.temperature,
                reasoning={"effort": p.reasoning_effort}
                if p.thinking_enable and p.reasoning_effort
                else None,
            ),
        }
        extra_body, call_kwargs = self._body_overrides()
        for key in _DROPPED_CALL_KWARGS:
            call_kwargs.pop(key, None)
        body.update(extra_body)
        body.update(call_kwargs)
        if (formatted_tools := self._format_tools(tools)) is not None:
            body["tools"] = formatted_tools
        if tool_choice is not None:
            body["tool_choice"] = self._format_tool_choice(tool_choice)
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
        parser = OpenAIResponseStreamParser(trio.current_time())

        async def handle(event: ServerSentEvent) -> bool:
            data = event.data.strip()
            if data == "[DONE]":
                return True
            payload = parse_event(data, model=self.model, unit="event", redact=self._redact)
            if "type" not in payload and event.event != "message":
                payload["type"] = event.event
            delta = parse_stream_unit(
                lambda: parser.parse(payload, redact=self._redact),
                unit="event",
                model=self.model,
                text=data,
                redact=self._redact,
            )
            if delta is not None:
                await emit(delta)
            return parser.done

        finished = await stream_sse(
            self.http_client,
            request,
            handle,
            redact=self._redact,
            max_event_size=self.max_event_size,
        )
        if not finished or not parser.done:
            raise incomplete_stream_error(self.model, "'response.completed'")

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        request = await self._prepare(messages, tools, tool_choice, stream=False)
        parser = OpenAIResponseStreamParser(trio.current_time())
        response = await send_request(self.http_client, request, stream=False, redact=self._redact)
        payload = response_json(response, model=self.model, redact=self._redact)
        if payload.get("error") or payload.get("status") == "failed":
            raise error_from_payload(
                {"error": payload.get("error") or "the response failed"}, redact=self._redact
            )
        return parse_whole_body(
            parser.parse_response,
            payload,
            model=self.model,
            text=response.text,
            redact=self._redact,
        )

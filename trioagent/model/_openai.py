"""OpenAI Chat Completions over httpx2.

``POST {base_url}/chat/completions`` with a Bearer key.  Streaming requests set
``stream_options.include_usage`` and read the SSE stream until ``data: [DONE]``; a stream
that ends without it, or a chunk of the wrong shape, raises
:class:`~trioagent.exception.ModelStreamError`.  A server that ignores ``stream: true`` and
answers with a whole completion is understood (:func:`stream_chat_completions`).  The parser
(:class:`OpenAIStreamParser`) and the transport (:class:`ChatCompletionsModel`) are shared
with xAI and the other OpenAI-compatible providers.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import ClassVar, Literal

import attrs
import httpx2
import trio

from .._core.ids import generate_id
from .._core.json_types import JSONObject, JSONValue
from .._http import (
    DEFAULT_MAX_EVENT_SIZE,
    Redact,
    ServerSentEvent,
    bearer_headers,
    error_from_payload,
    incomplete_stream_error,
    parse_event,
    response_json,
    send_request,
    stream_sse,
)
from .._json_repair import flatten_json_schema
from ..credential import OpenAICredential
from ..formatter import OpenAIChatFormatter
from ..message import Base64Source, DataBlock, Msg, TextBlock, ThinkingBlock, ToolCallBlock
from ..types import ToolChoice
from ._accumulator import wav_header
from ._base import ChunkSink
from ._params import in_range, positive_or_none, present, select_tools
from ._provider import CredentialT, ParametersT, ProviderChatModel
from ._response import ChatResponse, ChatUsage, ResponseBlock
from ._wire import (
    StreamParser,
    json_list,
    json_object,
    json_text,
    parse_stream_unit,
    parse_whole_body,
)

__all__ = [
    "ChatCompletionsModel",
    "OpenAIChatModel",
    "OpenAIChatParameters",
    "OpenAIStreamParser",
    "complete_chat_completions",
    "openai_headers",
    "stream_chat_completions",
]

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]


@attrs.define(kw_only=True)
class OpenAIChatParameters:
    """Generation parameters of :class:`OpenAIChatModel`.

    ``reasoning_effort`` is sent only when ``thinking_enable`` is set; ``voice`` asks for audio
    output (PCM16, returned as a ``audio/wav`` data block).
    """

    max_tokens: int | None = attrs.field(default=None, validator=positive_or_none)
    thinking_enable: bool = False
    reasoning_effort: ReasoningEffort | None = None
    temperature: float | None = attrs.field(default=None, validator=in_range(0, 2))
    top_p: float | None = attrs.field(default=None, validator=in_range(0, 1, low_open=True))
    parallel_tool_calls: bool = True
    voice: str | None = None


def _usage(
    raw: JSONValue, elapsed: float, cache: Literal["openai", "deepseek"] = "openai"
) -> ChatUsage:
    raw = json_object(raw, "'usage'")
    if cache == "deepseek":
        cached = raw.get("prompt_cache_hit_tokens")
    else:
        details = raw.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return ChatUsage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        time=elapsed,
        cache_input_tokens=int(cached) if cached is not None else 0,
        metadata=dict(raw),
    )


def _pcm_to_wav_b64(data: str, *, streaming: bool) -> str:
    try:
        pcm = base64.b64decode(data)
    except (binascii.Error, ValueError):
        return data
    header = wav_header(None if streaming else len(pcm))
    return base64.b64encode(header + pcm).decode("ascii")


class OpenAIStreamParser(StreamParser):
    """Turns OpenAI-compatible ``chat.completion.chunk`` objects into delta chunks.

    One parser per call: it fixes the text, thinking and audio block ids (one block of each per
    call, as AgentScope), maps tool-call ``index`` to the call id and name from its first
    fragment, and remembers the usage once reported (later deltas carry it).

    A chunk of the wrong shape (``choices`` not a list of objects, a ``delta`` or ``usage``
    that is not an object, a tool-call ``index`` that is not a number, ...) raises
    ``ValueError`` (or, for a shape not checked, another of ``MALFORMED``); the transport
    (:func:`stream_chat_completions`) turns it into a
    :class:`~trioagent.exception.ModelStreamError` naming the model.
    """

    def __init__(self, start: float, *, cache: Literal["openai", "deepseek"] = "openai") -> None:
        super().__init__(start)
        self.cache: Literal["openai", "deepseek"] = cache
        self.text_id = generate_id()
        self.thinking_id = generate_id()
        self.audio_id = generate_id()
        self.tool_calls: dict[int, tuple[str, str]] = {}
        self._audio_started = False

    def parse(self, chunk: JSONObject) -> ChatResponse | None:
        """The delta for one chunk (``None`` when it carries nothing)."""
        self.response_id = chunk.get("id") or self.response_id
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"], trio.current_time() - self.start, self.cache)
        choices = json_list(chunk.get("choices"), "'choices'")
        if not choices:
            return self.delta([], {}) if self.usage else None
        choice = json_object(choices[0], "'choices[0]'")
        delta = json_object(choice.get("delta") or {}, "'delta'")
        blocks: list[ResponseBlock] = []
        thinking = delta.get("reasoning_content")
        if not isinstance(thinking, str):
            thinking = delta.get("reasoning")
        if isinstance(thinking, str) and thinking:
            blocks.append(ThinkingBlock(thinking=thinking, id=self.thinking_id))
        if isinstance(text := delta.get("content"), str) and text:
            blocks.append(TextBlock(text=text, id=self.text_id))
        audio = delta.get("audio")
        if isinstance(audio, dict):
            if isinstance(transcript := audio.get("transcript"), str) and transcript:
                blocks.append(TextBlock(text=transcript, id=self.text_id))
            if isinstance(data := audio.get("data"), str) and data:
                if not self._audio_started:
                    data = _pcm_to_wav_b64(data, streaming=True)
                    self._audio_started = True
                blocks.append(
                    DataBlock(
                        id=self.audio_id, source=Base64Source(data=data, media_type="audio/wav")
                    )
                )
        for call in json_list(delta.get("tool_calls"), "'tool_calls'"):
            blocks.append(self._tool_call(json_object(call, "a tool call")))
        metadata = {"finish_reason": choice["finish_reason"]} if choice.get("finish_reason") else {}
        if blocks or self.usage or metadata:
            return self.delta(blocks, metadata)
        return None

    def _tool_call(self, call: JSONObject) -> ToolCallBlock:
        try:
            index = int(call.get("index") or 0)
        except (TypeError, ValueError):
            raise ValueError("a tool call's 'index' is not a number") from None
        function = json_object(call.get("function") or {}, "a tool call's 'function'")
        name = json_text(function.get("name"), "a tool call's name")
        arguments = json_text(function.get("arguments"), "a tool call's arguments")
        if index not in self.tool_calls:
            # A first fragment without an id would make an invalid block; give it one.
            call_id = json_text(call.get("id"), "a tool call's id")
            self.tool_calls[index] = (call_id or f"call_{generate_id()}", name or "unknown")
        # The index identifies the call: an id arriving (or changing) in a later fragment
        # must not split it in two.
        stored_id, stored_name = self.tool_calls[index]
        return ToolCallBlock(id=stored_id, name=name or stored_name, input=arguments or "")

    def parse_completion(self, body: JSONObject) -> ChatResponse:
        """The complete response of a non-streaming call (a body of the wrong shape raises as
        :meth:`parse` does)."""
        blocks: list[ResponseBlock] = []
        choices = json_list(body.get("choices"), "'choices'")
        metadata: JSONObject = {}
        if choices:
            choice = json_object(choices[0], "'choices[0]'")
            message = json_object(choice.get("message") or {}, "'message'")
            if choice.get("finish_reason"):
                metadata["finish_reason"] = choice["finish_reason"]
            thinking = message.get("reasoning_content")
            if not isinstance(thinking, str):
                thinking = message.get("reasoning")
            if isinstance(thinking, str) and thinking:
                blocks.append(ThinkingBlock(thinking=thinking))
            raw_audio = message.get("audio")
            audio: JSONObject = raw_audio if isinstance(raw_audio, dict) else {}
            text = message.get("content") or audio.get("transcript")
            if isinstance(text, str) and text:
                blocks.append(TextBlock(text=text))
            if isinstance(data := audio.get("data"), str) and data:
                blocks.append(
                    DataBlock(
                        source=Base64Source(
                            data=_pcm_to_wav_b64(data, streaming=False), media_type="audio/wav"
                        )
                    )
                )
            for raw_call in json_list(message.get("tool_calls"), "'tool_calls'"):
                call = json_object(raw_call, "a tool call")
                function = json_object(call.get("function") or {}, "a tool call's 'function'")
                blocks.append(
                    ToolCallBlock(
                        id=json_text(call.get("id"), "a tool call's id") or f"call_{generate_id()}",
                        name=json_text(function.get("name"), "a tool call's name") or "unknown",
                        input=json_text(function.get("arguments"), "a tool call's arguments") or "",
                    )
                )
        usage = None
        if body.get("usage"):
            usage = _usage(body["usage"], trio.current_time() - self.start, self.cache)
        return ChatResponse(
            content=blocks,
            is_last=True,
            id=body.get("id") or generate_id(),
            usage=usage,
            metadata=metadata,
        )


class ChatCompletionsModel(ProviderChatModel[CredentialT, ParametersT]):
    """The Chat Completions transport shared by :class:`OpenAIChatModel`, xAI and the
    OpenAI-compatible providers.

    ``POST {base_url}/chat/completions`` with a Bearer key (:meth:`_headers`), sent and read by
    :func:`stream_chat_completions` / :func:`complete_chat_completions` with the parser of
    :meth:`_parser`; a subclass builds the request body (:meth:`_build_body`, usually with
    :meth:`_chat_body` and :meth:`_finish_body`).
    """

    endpoint = "/chat/completions"

    async def _chat_body(
        self, messages: list[Msg], *, stream: bool, **fields: JSONValue
    ) -> JSONObject:
        """``model``, ``messages`` (through the formatter), ``stream``, and the ``fields``
        that are set."""
        return {
            "model": self.model,
            "messages": await self._format(messages),
            "stream": stream,
            **present(**fields),
        }

    def _finish_body(
        self,
        body: JSONObject,
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
        parallel_tool_calls: bool = True,
    ) -> JSONObject:
        """``body`` with the (already formatted) ``tools``, ``parallel_tool_calls: false``
        when disabled, ``tool_choice``, and ``stream_options.include_usage`` when streaming."""
        if tools:
            body["tools"] = tools
            if not parallel_tool_calls:
                body["parallel_tool_calls"] = False
        if tool_choice is not None:
            body["tool_choice"] = self._format_tool_choice(tool_choice)
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def _finish_flattened_body(
        self,
        body: JSONObject,
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
        parallel_tool_calls: bool,
    ) -> JSONObject:
        """``body`` with the call's overrides (``extra_body``, per-call keys) merged, then the
        selected tools with their parameter schemas flattened (no ``$ref``), as
        :meth:`_finish_body` adds them."""
        extra_body, call_kwargs = self._body_overrides()
        body.update(extra_body)
        body.update(call_kwargs)
        selected = select_tools(tools, tool_choice)
        formatted = [_flatten_tool(t) for t in selected] if selected else None
        return self._finish_body(
            body, formatted, tool_choice, stream=stream, parallel_tool_calls=parallel_tool_calls
        )

    def _format_tool_choice(self, tool_choice: ToolChoice) -> str | JSONObject:
        """``auto``/``none``/``required`` as strings, a tool name as a function object."""
        if tool_choice.mode in ("auto", "none", "required"):
            return tool_choice.mode
        return {"type": "function", "function": {"name": tool_choice.mode}}

    def _parser(self) -> OpenAIStreamParser:
        """A parser for one call (started now)."""
        return OpenAIStreamParser(trio.current_time())

    # -- hooks ---------------------------------------------------------------------------------

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        emit: ChunkSink,
    ) -> None:
        request = await self._prepare(messages, tools, tool_choice, stream=True)
        await stream_chat_completions(
            self.http_client,
            request,
            self._parser(),
            emit,
            model=self.model,
            redact=self._redact,
            max_event_size=self.max_event_size,
        )

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        request = await self._prepare(messages, tools, tool_choice, stream=False)
        return await complete_chat_completions(
            self.http_client, request, self._parser(), model=self.model, redact=self._redact
        )


def openai_headers(credential: OpenAICredential, *, stream: bool) -> dict[str, str]:
    """OpenAI's request headers: the Bearer key and the organization, when there is one."""
    return bearer_headers(
        credential.get_api_key(), stream=stream, organization=credential.get_organization()
    )


class OpenAIChatModel(ChatCompletionsModel[OpenAICredential, OpenAIChatParameters]):
    """OpenAI Chat Completions (and any OpenAI-compatible server).

    Defaults: ``OpenAICredential()`` (``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` /
    ``OPENAI_ORG_ID``), :class:`OpenAIChatParameters`, a context of 128000 tokens,
    :class:`~trioagent.formatter.OpenAIChatFormatter`.  The keywords:
    :class:`~trioagent.model.ProviderChatModel`; ``extra_body`` is merged after the
    parameters and a per-call ``extra_body`` replaces it.  Tool parameter schemas are sent
    flattened (no ``$ref``).
    """

    type: ClassVar[str] = "openai_chat"
    Parameters = OpenAIChatParameters
    default_credential = OpenAICredential
    default_formatter = OpenAIChatFormatter
    default_context_size = 128000

    def _headers(self, *, stream: bool) -> dict[str, str]:
        return openai_headers(self.credential, stream=stream)

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
            max_completion_tokens=p.max_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            reasoning_effort=p.reasoning_effort if p.thinking_enable else None,
        )
        if p.voice:
            body["audio"] = {"voice": p.voice, "format": "pcm16"}
            body["modalities"] = ["text", "audio"]
        return self._finish_flattened_body(
            body, tools, tool_choice, stream=stream, parallel_tool_calls=p.parallel_tool_calls
        )


def _flatten_tool(tool: JSONObject) -> JSONObject:
    function = tool.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("parameters"), dict):
        return tool
    return {
        **tool,
        "function": {**function, "parameters": flatten_json_schema(function["parameters"])},
    }


# -- transport shared by the OpenAI-compatible providers ---------------------------------------


async def stream_chat_completions(
    client: httpx2.AsyncClient,
    request: httpx2.Request,
    parser: OpenAIStreamParser,
    emit: ChunkSink,
    *,
    model: str,
    redact: Redact,
    max_event_size: int | None = DEFAULT_MAX_EVENT_SIZE,
) -> None:
    """Send a streaming ``chat/completions`` request; pass each parsed delta to ``emit``.

    Raises :class:`~trioagent.exception.ModelStreamError` for an unparseable or malformed
    chunk or a stream that ends before ``data: [DONE]``, and the typed error of an
    ``{"error": ...}`` chunk.  The response is closed in every case
    (:func:`~trioagent._http.stream_sse`).

    A server that ignores ``stream: true`` and answers with a JSON ``chat.completion`` is
    understood: the completion is parsed as a non-streamed one and sent as a single delta, so
    ``emit`` still sees the answer.  It is complete and valid, and failing it instead would
    fail the same way on every retry.  A JSON error object raises the provider's error
    (:func:`~trioagent._http.stream_sse`); any other JSON is a ``ModelStreamError``.
    """

    async def handle(event: ServerSentEvent) -> bool:
        if event.data.strip() == "[DONE]":
            return True
        payload = parse_event(event.data, model=model, unit="chunk", redact=redact)
        if payload.get("error"):
            raise error_from_payload(payload, redact=redact)
        delta = parse_stream_unit(
            lambda: parser.parse(payload), unit="chunk", model=model, text=event.data, redact=redact
        )
        if delta is not None:
            await emit(delta)
        return False

    async def whole(payload: JSONObject) -> bool:
        if not isinstance(payload.get("choices"), list):
            return False  # not a completion: stream_sse raises with an excerpt
        response = _parse_completion(parser, payload, model=model, redact=redact)
        await emit(attrs.evolve(response, is_last=False))
        return True

    if not await stream_sse(
        client, request, handle, redact=redact, json_body=whole, max_event_size=max_event_size
    ):
        raise incomplete_stream_error(model, "'data: [DONE]'")


def _parse_completion(
    parser: OpenAIStreamParser, payload: JSONObject, *, model: str, redact: Redact
) -> ChatResponse:
    """``parser.parse_completion(payload)``, with :func:`parse_whole_body`'s error."""
    text = json.dumps(payload, ensure_ascii=False, default=str)
    return parse_whole_body(
        parser.parse_completion, payload, unit="completion", model=model, text=text, redact=redact
    )


async def complete_chat_completions(
    client: httpx2.AsyncClient,
    request: httpx2.Request,
    parser: OpenAIStreamParser,
    *,
    model: str,
    redact: Redact,
) -> ChatResponse:
    """Send a non-streaming ``chat/completions`` request and parse the complete response."""
    response = await send_request(client, request, stream=False, redact=redact)
    payload = response_json(response, model=model, redact=redact)
    if payload.get("error"):
        raise error_from_payload(payload, redact=redact)
    return _parse_completion(parser, payload, model=model, redact=redact)

"""Ollama over httpx2.

``POST {host}/api/chat`` (no key; ``Authorization: Bearer`` only when an ``OLLAMA_API_KEY`` /
``api_key`` is set, as for Ollama's hosted models).  A streamed answer is NDJSON: one JSON
object per line, the last one with ``"done": true`` and the token counts.  The body is read
line by line by :func:`read_ndjson` (a sans-IO :class:`NDJSONDecoder` fed from
``response.aiter_text()``, with the same cleanup as :func:`~trioagent._http.read_sse`);
a stream that ends before its ``done`` line raises
:class:`~trioagent.exception.ModelStreamError`.

Retries follow AgentScope: only transport failures (connection refused or reset,
read timeouts, a cut stream) are retried — never an HTTP error status, whose body
(``{"error": "model 'x' not found"}``) becomes the typed error's message.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import ClassVar, Unpack

import attrs
import httpx2
import trio

from .._core.ids import generate_id
from .._core.json_types import JSONObject, JSONValue
from .._http import (
    DEFAULT_MAX_EVENT_SIZE,
    Redact,
    aclose_response,
    error_from_payload,
    error_from_response,
    media_type,
    not_a_stream_error,
    parse_event,
    read_decoded,
    response_json,
    send_request,
    too_large_error,
)
from ..credential import OllamaCredential
from ..exception import ModelError, ModelStreamError
from ..formatter import OllamaChatFormatter
from ..message import Msg, TextBlock, ThinkingBlock, ToolCallBlock
from ..types import ToolChoice
from ._base import ChunkSink
from ._params import in_range, positive_or_none, present, select_tools
from ._provider import ProviderChatModel, ProviderOptions
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
    "NDJSONDecoder",
    "OllamaChatModel",
    "OllamaChatParameters",
    "OllamaStreamParser",
    "read_ndjson",
]

logger = logging.getLogger("trioagent.model")

_JSON_SPACE = " \t\r"  # JSON whitespace besides the "\n" that ends a line
#: Media types an NDJSON stream may come as (an empty one included).
_NDJSON_TYPES = frozenset({"", "application/x-ndjson", "application/json", "application/jsonl"})


class NDJSONDecoder:
    """Incremental splitter of newline-delimited JSON text into lines (sans-IO).

    :meth:`feed` takes decoded text in arbitrary pieces and returns the lines it completed;
    lines end with ``"\\n"`` only (a ``"\\r"`` before it is dropped, as other JSON whitespace
    around a line), and blank lines are skipped.  :meth:`close` returns a last line that had
    no newline, so a body that ends without one still yields its final object.

    ``max_size`` (characters, ``None``: no limit) bounds one line: a longer one raises
    :class:`~trioagent.exception.ModelStreamError` (not retried) instead of being buffered.
    """

    def __init__(self, max_size: int | None = None) -> None:
        self.max_size = max_size
        self._partial: list[str] = []  # pieces of the current incomplete line
        self._partial_size = 0

    def feed(self, text: str) -> list[str]:
        """Consume a piece of the body; return the complete non-blank lines, in order."""
        if "\n" not in text:
            if text:
                self._partial.append(text)  # joined once, when the line ends
                self._partial_size += len(text)
                self._check(self._partial_size)
            return []
        lines = text.split("\n")
        lines[0] = "".join(self._partial) + lines[0]
        tail = lines.pop()
        self._partial = [tail] if tail else []
        self._partial_size = len(tail)
        if self.max_size is not None:
            self._check(max(len(tail), *(len(line) for line in lines)))
        return [stripped for line in lines if (stripped := line.strip(_JSON_SPACE))]

    def close(self) -> str | None:
        """The buffered unterminated line (``None`` if there is none or it is blank)."""
        rest = "".join(self._partial).strip(_JSON_SPACE)
        self._partial = []
        self._partial_size = 0
        return rest or None

    def _check(self, size: int) -> None:
        if self.max_size is not None and size > self.max_size:
            raise too_large_error("line", self.max_size)


async def read_ndjson(
    response: httpx2.Response,
    handle: Callable[[str], Awaitable[bool]],
    *,
    max_line_size: int | None = DEFAULT_MAX_EVENT_SIZE,
) -> bool:
    """Feed the response's NDJSON lines to ``handle`` until it returns ``True`` (the last line).

    After that line the rest of the body is drained (so the connection can be reused).
    Returns whether ``handle`` saw the last line; a connection failure mid-body raises
    :class:`~trioagent.exception.ModelStreamError` (``ModelTimeoutError`` for a stall past the
    read timeout).  If ``handle`` raises (or the call is cancelled) the response is closed and
    httpx2's nested iterators finished, in this task, before the exception propagates.  A
    line longer than ``max_line_size`` characters raises
    :class:`~trioagent.exception.ModelStreamError` (:class:`NDJSONDecoder`).
    """
    decoder = NDJSONDecoder(max_line_size)
    return await read_decoded(response, decoder.feed, handle, close=decoder.close)


@attrs.define(kw_only=True)
class OllamaChatParameters:
    """Generation parameters of :class:`OllamaChatModel`.

    ``max_tokens`` and ``temperature`` go to ``options`` (``num_predict``, ``temperature``);
    ``thinking_enable`` is sent as ``think`` on every request (``false`` by default, so
    thinking models such as qwen3 answer directly).
    """

    max_tokens: int | None = attrs.field(default=None, validator=positive_or_none)
    thinking_enable: bool = False
    temperature: float | None = attrs.field(default=None, validator=in_range(0, 2))


def _arguments_text(arguments: JSONValue) -> str:
    """A tool call's arguments (a JSON object on Ollama's wire) as the block's input text."""
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return "{}"
    return json.dumps(arguments)


class OllamaStreamParser(StreamParser):
    """Turns Ollama ``/api/chat`` objects into delta chunks.

    One parser per call: the text and thinking block ids and the response id are fixed per
    call; every tool call (Ollama sends each one whole) gets a fresh id, since Ollama's own
    ids are not used for replay (the formatter sends ``tool_name`` back, not ids).  Every line
    becomes a delta carrying ``usage`` (``prompt_eval_count``/``eval_count``, 0 until the
    last line reports them); lines without content are carriers, absorbed by the base class.

    A line of the wrong shape (``message``, a tool call or its ``function`` not an object,
    ``tool_calls`` not a list, a name that is not a string, a count that is not a number, ...)
    raises ``ValueError`` (or, for a shape not checked, another of ``MALFORMED``); the model
    turns it into a :class:`~trioagent.exception.ModelStreamError` naming the model.
    """

    def __init__(self, start: float) -> None:
        super().__init__(start)
        self.text_id = generate_id()
        self.thinking_id = generate_id()

    def _blocks(self, message: JSONObject, *, stream: bool) -> list[ResponseBlock]:
        blocks: list[ResponseBlock] = []
        thinking = message.get("thinking")
        if isinstance(thinking, str) and thinking:
            block_id = self.thinking_id if stream else generate_id()
            blocks.append(ThinkingBlock(thinking=thinking, id=block_id))
        text = message.get("content")
        if isinstance(text, str) and text:
            blocks.append(TextBlock(text=text, id=self.text_id if stream else generate_id()))
        for call in json_list(message.get("tool_calls"), "'tool_calls'"):
            call = json_object(call, "a tool call")
            function = json_object(call.get("function") or {}, "a tool call's 'function'")
            blocks.append(
                ToolCallBlock(
                    id=generate_id(),
                    name=json_text(function.get("name"), "a tool call's name") or "",
                    input=_arguments_text(function.get("arguments")),
                )
            )
        return blocks

    def _usage(self, chunk: JSONObject) -> ChatUsage:
        timings = {k: v for k, v in chunk.items() if k.endswith("_duration")}
        return ChatUsage(
            input_tokens=int(chunk.get("prompt_eval_count") or 0),
            output_tokens=int(chunk.get("eval_count") or 0),
            time=trio.current_time() - self.start,
            metadata=timings or None,
        )

    @staticmethod
    def _metadata(chunk: JSONObject) -> JSONObject:
        reason = chunk.get("done_reason")
        return {"finish_reason": reason} if chunk.get("done") and reason else {}

    def parse(self, chunk: JSONObject) -> ChatResponse:
        """The delta for one line (a carrier when it holds no content)."""
        message = chunk.get("message")
        blocks = self._blocks(json_object(message or {}, "'message'"), stream=True)
        self.usage = self._usage(chunk)
        return self.delta(blocks, self._metadata(chunk))

    def parse_completion(self, body: JSONObject) -> ChatResponse:
        """The complete response of a non-streaming call (usage only if both counts are
        reported, as AgentScope does)."""
        message = body.get("message")
        usage = None
        if body.get("prompt_eval_count") is not None and body.get("eval_count") is not None:
            usage = self._usage(body)
        return ChatResponse(
            content=self._blocks(json_object(message or {}, "'message'"), stream=False),
            is_last=True,
            id=self.response_id,
            usage=usage,
            metadata=self._metadata(body),
        )


def _http_error(status: int, headers: httpx2.Headers, body: bytes, *, redact: Redact) -> ModelError:
    """The typed error for an HTTP error response, never retryable: Ollama calls retry only
    transport failures."""
    exc = error_from_response(status, headers, body, redact=redact)
    exc.retryable = False
    return exc


class OllamaChatModel(ProviderChatModel[OllamaCredential, OllamaChatParameters]):
    """A model served by Ollama (``/api/chat``), streamed as NDJSON.

    Args:
        model: the model name (``"qwen3:8b"``).
        keep_alive: how long Ollama keeps the model loaded after the call (``"5m"``, seconds,
            ``-1``); not sent when ``None`` (the server's default).
        **options: the :class:`~trioagent.model.ProviderChatModel` keywords.  Defaults:
            ``OllamaCredential()`` (``OLLAMA_HOST`` or ``http://localhost:11434``; no key
            needed), :class:`OllamaChatParameters`, a context of 32768 tokens,
            :class:`~trioagent.formatter.OllamaChatFormatter`.  ``extra_body`` (``format``,
            ``options``, ...) is merged after the parameters; an ``options`` dict is merged
            into the parameters' options.

    ``tool_choice`` is not supported by Ollama: only its ``tools`` list filters the schemas (a
    mode other than ``auto`` is logged and ignored).
    """

    type: ClassVar[str] = "ollama_chat"
    Parameters = OllamaChatParameters
    default_credential = OllamaCredential
    default_formatter = OllamaChatFormatter
    default_context_size = 32768
    endpoint = "/api/chat"

    def __init__(
        self,
        model: str,
        *,
        keep_alive: str | float | None = None,
        **options: Unpack[ProviderOptions[OllamaCredential, OllamaChatParameters]],
    ) -> None:
        super().__init__(model, **options)
        self.keep_alive = keep_alive

    # -- request -------------------------------------------------------------------------------

    def _headers(self, *, stream: bool) -> dict[str, str]:
        headers = {"Accept": "application/x-ndjson" if stream else "application/json"}
        if key := self.credential.get_api_key():
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _format_tools(
        self, tools: list[JSONObject] | None, tool_choice: ToolChoice | None
    ) -> list[JSONObject] | None:
        if tool_choice is None:
            return tools
        tools = select_tools(tools, tool_choice)
        if tool_choice.mode != "auto":
            logger.warning(
                "Ollama does not support tool_choice: mode %r ignored (tool_choice.tools "
                "still filters the tool schemas)",
                tool_choice.mode,
            )
        return tools

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
            "messages": await self._format(messages),
            "stream": stream,
        }
        if options := present(num_predict=p.max_tokens, temperature=p.temperature):
            body["options"] = options
        body["think"] = p.thinking_enable
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        for extra in self._body_overrides():
            for key, value in extra.items():
                if key == "options" and isinstance(value, dict):
                    body["options"] = {**body.get("options", {}), **value}
                else:
                    body[key] = value
        if formatted_tools := self._format_tools(tools, tool_choice):
            body["tools"] = formatted_tools
        return body

    async def _send(self, request: httpx2.Request, *, stream: bool) -> httpx2.Response:
        return await send_request(
            self.http_client, request, stream=stream, redact=self._redact, error=_http_error
        )

    def _decode(self, line: str) -> JSONObject:
        payload = parse_event(line, model=self.model, unit="line", redact=self._redact)
        if payload.get("error"):
            raise error_from_payload(payload, redact=self._redact)
        return payload

    # -- hooks ---------------------------------------------------------------------------------

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        emit: ChunkSink,
    ) -> None:
        request = await self._prepare(messages, tools, tool_choice, stream=True)
        parser = OllamaStreamParser(trio.current_time())
        response: httpx2.Response | None = None
        first = True

        async def handle(line: str) -> bool:
            nonlocal first
            if first and response is not None and media_type(response) not in _NDJSON_TYPES:
                # An HTML page or a plain text answering the stream: say what it is.
                try:
                    json.loads(line)
                except ValueError:
                    raise not_a_stream_error(
                        response, line, self._redact, what="NDJSON stream"
                    ) from None
            first = False
            payload = self._decode(line)
            delta = parse_stream_unit(
                lambda: parser.parse(payload),
                unit="line",
                model=self.model,
                text=line,
                redact=self._redact,
            )
            await emit(delta)
            return bool(payload.get("done"))

        response = await self._send(request, stream=True)
        try:
            done = await read_ndjson(response, handle, max_line_size=self.max_event_size)
        finally:
            await aclose_response(response)
        if not done:
            raise ModelStreamError(
                f"the stream of {self.model!r} ended before its last line ('\"done\": true'; "
                "connection closed early, the response is incomplete)",
                retryable=True,
            )

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        request = await self._prepare(messages, tools, tool_choice, stream=False)
        parser = OllamaStreamParser(trio.current_time())
        response = await self._send(request, stream=False)
        payload = response_json(response, model=self.model, retryable=False, redact=self._redact)
        if payload.get("error"):
            raise error_from_payload(payload, redact=self._redact)
        return parse_whole_body(
            parser.parse_completion,
            payload,
            model=self.model,
            text=response.text,
            redact=self._redact,
        )

    def _is_structured_output_fallback_error(self, exc: Exception) -> bool:
        """None for Ollama: a rejected request is raised, not worked around."""
        return False

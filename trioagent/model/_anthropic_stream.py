"""Reading the Anthropic Messages API's answers: stream events and whole messages.

The sans-IO :class:`AnthropicStreamParser` turns the SSE events ``message_start`` /
``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` / ``message_delta``
/ ``message_stop`` into delta chunks (and a non-streamed message into the complete
response); :func:`stream_error` maps an ``error`` event or body to the typed error.
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Mapping

import attrs
import trio

from .._core.ids import generate_id
from .._core.json_types import JSONObject, JSONValue
from .._http import Redact
from ..exception import (
    ModelAuthenticationError,
    ModelError,
    ModelInvalidRequestError,
    ModelPermissionError,
    ModelRateLimitError,
    ModelUpstreamError,
)
from ..message import TextBlock, ThinkingBlock, ToolCallBlock
from ._response import ChatResponse, ChatUsage, ResponseBlock
from ._wire import StreamParser, json_list, json_object, json_text

__all__ = ["AnthropicStreamParser", "stream_error"]

logger = logging.getLogger("trioagent.model")


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


def stream_error(payload: Mapping[str, JSONValue], *, redact: Redact | None = None) -> ModelError:
    """The typed error for an ``event: error`` payload (never retried, as Anthropic's SDK).

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


def _usage(raw: Mapping[str, JSONValue], elapsed: float) -> ChatUsage:
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


class AnthropicStreamParser(StreamParser):
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
    ``ValueError`` (or, for a shape not checked, another of ``MALFORMED``); the model turns
    it into a :class:`~trioagent.exception.ModelStreamError` naming the model.
    """

    def __init__(self, start: float, *, redact: Redact | None = None) -> None:
        super().__init__(start)
        self.redact = redact
        self.done = False
        self._raw_usage: JSONObject = {}
        self._blocks: dict[int, _Block] = {}

    def feed(self, payload: Mapping[str, JSONValue], event: str = "") -> list[ChatResponse]:
        """The chunks for one event (``payload`` is its parsed ``data``).

        Raises:
            ModelError: an ``error`` event.
        """
        kind = payload.get("type") or event
        match kind:
            case "message_start":
                message = json_object(payload.get("message") or {}, "'message'")
                self.response_id = message.get("id") or self.response_id
                self._set_usage(json_object(message.get("usage") or {}, "'usage'"))
                return [self.delta([])]
            case "content_block_start":
                return self._block_start(payload)
            case "content_block_delta":
                return self._block_delta(payload)
            case "content_block_stop":
                return self._block_stop(payload)
            case "message_delta":
                delta = json_object(payload.get("delta") or {}, "'delta'")
                if (usage := payload.get("usage")) is not None:
                    self._set_usage(json_object(usage, "'usage'"))
                metadata = {}
                if delta.get("stop_reason"):
                    metadata["stop_reason"] = delta["stop_reason"]
                return [self.delta([], metadata)]
            case "message_stop":
                self.done = True
            case "error":
                raise stream_error(payload, redact=self.redact)
            case _:
                pass  # ping and event types this parser does not know
        return []

    def _set_usage(self, raw: Mapping[str, JSONValue]) -> None:
        self._raw_usage.update({k: v for k, v in raw.items() if v is not None})
        self.usage = _usage(self._raw_usage, trio.current_time() - self.start)

    def _block_start(self, payload: Mapping[str, JSONValue]) -> list[ChatResponse]:
        index = int(payload.get("index") or 0)
        raw = json_object(payload.get("content_block") or {}, "'content_block'")
        kind = str(raw.get("type") or "")
        match kind:
            case "text" | "thinking":
                block = self._blocks[index] = _Block(kind, generate_id())
                text = raw.get(kind)
                signature = raw.get("signature") if kind == "thinking" else None
                if text or signature:
                    return [self.delta([self._fragment(block, text or "", signature)])]
            case "tool_use":
                call_id = str(raw.get("id") or f"toolu_{generate_id()}")
                name = json_text(raw.get("name"), "a tool call's name") or ""
                block = self._blocks[index] = _Block(kind, call_id, name)
                initial = raw.get("input")
                text = json.dumps(initial, ensure_ascii=False) if initial else ""
                block.has_input = bool(text)
                call = ToolCallBlock(id=block.id, name=block.name, input=text)
                return [self.delta([call])]
            case "redacted_thinking":
                block = self._blocks[index] = _Block(kind, generate_id())
                thinking = ThinkingBlock(
                    thinking="",
                    id=block.id,
                    extra={"redacted_thinking_data": str(raw.get("data") or "")},
                )
                return [self.delta([thinking])]
            case _:
                # Server tools (web search results, ...) are not represented; skip them.
                logger.debug("ignoring a %r content block in the stream", kind)
                self._blocks[index] = _Block(kind, generate_id())
        return []

    def _block_delta(self, payload: Mapping[str, JSONValue]) -> list[ChatResponse]:
        index = int(payload.get("index") or 0)
        delta = json_object(payload.get("delta") or {}, "'delta'")
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
                    return [self.delta([TextBlock(text=text, id=block.id)])]
            case "thinking_delta":
                if thinking := str(delta.get("thinking") or ""):
                    return [self.delta([self._fragment(block, thinking)])]
            case "signature_delta":
                signature = str(delta.get("signature") or "")
                return [self.delta([self._fragment(block, "", signature)])]
            case _:  # input_json_delta
                fragment = str(delta.get("partial_json") or "")
                block.has_input = block.has_input or bool(fragment)
                call = ToolCallBlock(id=block.id, name=block.name, input=fragment)
                return [self.delta([call])]
        return []

    def _block_stop(self, payload: Mapping[str, JSONValue]) -> list[ChatResponse]:
        block = self._blocks.get(int(payload.get("index") or 0))
        if block is not None and block.kind == "tool_use" and not block.has_input:
            block.has_input = True
            return [self.delta([ToolCallBlock(id=block.id, name=block.name, input="{}")])]
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

    def parse_message(self, body: Mapping[str, JSONValue]) -> ChatResponse:
        """The complete response of a non-streaming call (a body of the wrong shape raises
        as :meth:`feed`)."""
        blocks: list[ResponseBlock] = []
        for raw in json_list(body.get("content"), "'content'"):
            match json_object(raw, "a content block").get("type"):
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
                            name=json_text(raw.get("name"), "a tool call's name") or "",
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

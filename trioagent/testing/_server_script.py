"""What a test scripts for the loopback server, and what the server records.

Script entries are consumed one per chat request: a ``str`` or :class:`ScriptedReply` (a
successful answer, streamed or not), a :class:`ScriptedError`, a :class:`ScriptedSSE` (raw
events), or a callable computing one of these from the :class:`RecordedRequest`.  Custom routes
answer with :class:`ScriptedResponse` objects.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeAlias

import attrs
import trio

from .._core.ids import generate_id
from .._core.json_types import JSONValue

__all__ = [
    "UNAUTHORIZED",
    "Answer",
    "ConnectionRecord",
    "RecordedRequest",
    "RouteHandler",
    "ScriptEntry",
    "ScriptedError",
    "ScriptedReply",
    "ScriptedResponse",
    "ScriptedSSE",
    "ScriptedToolCall",
]


@attrs.frozen
class ScriptedToolCall:
    """A tool call in a scripted reply; ``arguments`` is streamed in fragments."""

    name: str
    arguments: str = "{}"
    id: str = attrs.field(factory=lambda: f"call_{generate_id()[:24]}")


@attrs.frozen(kw_only=True)
class ScriptedReply:
    """A successful answer.

    Attributes:
        text: the assistant text (streamed ``chunk_size`` characters at a time).
        reasoning: ``reasoning_content`` streamed before the text.
        tool_calls: tool calls, each opened by a fragment with id and name, then its
            arguments in fragments.
        usage: the ``usage`` object (default: rough counts); streamed as a usage-only chunk
            when the client asked for ``stream_options.include_usage``.
        chunk_size: characters per streamed fragment.
        chunk_delay: seconds to sleep between SSE events.
        stall_after: after this many SSE events (0: right after the headers; non-streaming:
            before responding), stop sending and wait until the client goes away.
        cut_after: after this many SSE events, end the body without ``data: [DONE]``.
        cut_abruptly: with ``cut_after``, close the socket instead of ending the body.
        finish_reason: default ``"tool_calls"`` with tool calls, else ``"stop"``.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: Sequence[ScriptedToolCall] = ()
    usage: Mapping[str, JSONValue] | None = None
    chunk_size: int = 8
    chunk_delay: float = 0.0
    stall_after: int | None = None
    cut_after: int | None = None
    cut_abruptly: bool = False
    id: str = attrs.field(factory=lambda: f"chatcmpl-{generate_id()[:24]}")
    model: str | None = None
    finish_reason: str | None = None


@attrs.frozen(kw_only=True)
class ScriptedError:
    """An error response: ``{"error": {"message", "type", "param", "code"}}``."""

    status: int = 500
    message: str = "The server had an error while processing your request."
    type: str = "server_error"
    code: str | None = None
    param: str | None = None
    retry_after: float | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)


UNAUTHORIZED = ScriptedError(
    status=401,
    message="Incorrect API key provided.",
    type="invalid_request_error",
    code="invalid_api_key",
)


@attrs.frozen(kw_only=True)
class ScriptedSSE:
    """A raw streamed answer: each item is a chunk object (sent as ``data: <json>``) or text
    sent verbatim (comments, ``\\r\\n`` line endings, an ``{"error": ...}`` payload, ...)."""

    events: Sequence[Mapping[str, JSONValue] | str]
    done: bool = True
    chunk_delay: float = 0.0


@attrs.frozen(kw_only=True)
class ScriptedResponse:
    """A raw answer of a custom route (:meth:`OpenAICompatibleServer.add_route`).

    Attributes:
        status: the HTTP status.
        body: the body; a sequence of byte strings is sent piece by piece (chunked).
        media_type: the ``Content-Type``.
        headers: extra headers.
        chunk_delay: seconds to sleep between pieces.
        stall_after: after this many pieces, stop sending and wait until the client goes away.
    """

    status: int = 200
    body: bytes | Sequence[bytes] = b""
    media_type: str = "application/json"
    headers: Mapping[str, str] = attrs.field(factory=dict)
    chunk_delay: float = 0.0
    stall_after: int | None = None

    @classmethod
    def json(cls, payload: JSONValue, status: int = 200) -> ScriptedResponse:
        """A JSON answer."""
        return cls(status=status, body=json.dumps(payload).encode())


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """A request the server received (headers lower-cased; the body parsed as JSON)."""

    method: str
    path: str
    headers: Mapping[str, str] = attrs.field(repr=False)
    body: JSONValue
    raw_body: bytes = attrs.field(repr=False)
    connection_id: int

    @property
    def stream(self) -> bool:
        """Whether the client asked for a streamed answer."""
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    def last_user_text(self) -> str:
        """The text of the last ``user`` message (parts joined by spaces)."""
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        if not isinstance(messages, list):
            return ""
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list):
                    return " ".join(
                        str(p.get("text", ""))
                        for p in content
                        if isinstance(p, dict) and p.get("type") == "text"
                    )
        return ""


@attrs.define(eq=False)
class ConnectionRecord:
    """One accepted TCP connection."""

    id: int
    closed: trio.Event = attrs.Factory(trio.Event)
    #: Whether the server saw the client close (EOF or reset) rather than closing it itself.
    closed_by_client: bool = False
    requests: int = 0


#: A custom route's handler: the request → the answer (sync or async).
RouteHandler: TypeAlias = Callable[
    [RecordedRequest], "ScriptedResponse | Awaitable[ScriptedResponse]"
]

Answer: TypeAlias = str | ScriptedReply | ScriptedError | ScriptedSSE
ScriptEntry: TypeAlias = Answer | Callable[[RecordedRequest], Answer | Awaitable[Answer]]

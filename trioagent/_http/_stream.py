"""Reading a streamed body: incremental decoders fed from httpx2, with the cleanup trio needs.

* :func:`read_decoded` feeds ``response.aiter_text()`` (under ``contextlib.aclosing``) to an
  incremental decoder and hands each item it completes to a callback, returning soon after the
  terminator; :func:`read_sse` does it with an :class:`~trioagent._http.SSEDecoder`, and
  :func:`read_bytes` hands on raw body pieces.
* :func:`stream_sse` sends a streaming request and reads its events (or reads the JSON body a
  provider sent instead), closing the response in every case.
* :func:`parse_event` checks one JSON object received in a stream.

httpx2's body iterators are nested async generators: each reader closes the response and runs
them to their end in the task that owns the call, so none is left to the garbage collector.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from typing import TypeVar, cast

import httpx2
import trio

from .._core.json_types import JSONObject, JSONValue
from ..exception import ModelError, ModelStreamError
from ._errors import (
    ErrorMapper,
    Redact,
    error_from_response,
    error_from_transport,
    excerpt,
    identity,
    located,
    safe_url,
)
from ._send import CLOSE_GRACE, aclose_response, send_request
from ._sse import ServerSentEvent, SSEDecoder, too_large_error

__all__ = [
    "DEFAULT_MAX_EVENT_SIZE",
    "DRAIN_GRACE",
    "media_type",
    "not_a_stream_error",
    "parse_event",
    "read_bytes",
    "read_decoded",
    "read_sse",
    "stream_sse",
]

#: Seconds a body may take to end after its terminator (``data: [DONE]``) before the call
#: returns without it, dropping the connection instead of pooling it.
DRAIN_GRACE = 1.0

#: The default bound of one streamed event or line, in characters (4 MiB): a stream that
#: sends more without ending it is abandoned with a typed error instead of being buffered.
DEFAULT_MAX_EVENT_SIZE = 4 * 1024 * 1024

_T = TypeVar("_T")


async def _discard_rest(response: httpx2.Response, pieces: AsyncGenerator[object, None]) -> None:
    """Close the response, then run its iterator to the end.

    httpx2's ``aiter_text()`` iterates nested async generators (``aiter_bytes``, ``aiter_raw``,
    the transport streams).  Closing only the outer one leaves the inner ones to the garbage
    collector, which trio reports as a ``ResourceWarning``.  Closing the connection first makes
    the inner generators end with a read error (or drain what is already buffered), so every
    one of them finishes here, in the task that owns the call.
    """
    # Shielded: also runs when the call is being cancelled; deadline: CLOSE_GRACE seconds.
    with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_GRACE):
        await response.aclose()
        with contextlib.suppress(Exception):
            async for _ in pieces:
                pass


async def _drain_rest(pieces: AsyncGenerator[str, None]) -> None:
    """Read what is left of a body after its terminator, waiting at most ``DRAIN_GRACE``.

    Nothing after the terminator is needed, and a server may send the terminator and never
    end the body: waiting for the end would hold a finished call until the read timeout (or
    forever).  What is already buffered is read at once; the end of the body, which usually
    follows the terminator in the next read, gets ``DRAIN_GRACE`` seconds.  A body that ends
    in time leaves the connection reusable; one that does not is left unfinished, so the
    caller's close makes httpcore2 drop the connection instead of pooling it.  A body cut
    after the terminator is no error either.
    """
    with trio.move_on_after(DRAIN_GRACE), contextlib.suppress(httpx2.TransportError):
        async for _ in pieces:
            pass


async def read_decoded(
    response: httpx2.Response,
    feed: Callable[[str], Iterable[_T]],
    handle: Callable[[_T], Awaitable[bool]],
    *,
    close: Callable[[], _T | None] | None = None,
) -> bool:
    """Feed the response's text to an incremental decoder and each item it completes to
    ``handle``, until ``handle`` returns ``True`` (the terminator).

    ``feed`` takes a piece of decoded text and returns the items it completed; ``close``
    (optional) returns an item left unterminated at the end of the body.  The call returns
    soon after the terminator: what is left of the body is read as far as it is already
    buffered, and its end is waited for at most ``DRAIN_GRACE`` seconds (:func:`_drain_rest`),
    so a body that ends leaves its connection reusable and one that never ends cannot hold
    the call.  Returns whether the terminator was seen; a connection failure mid-body raises
    :class:`~trioagent.exception.ModelStreamError` (or ``ModelTimeoutError`` for a stall past
    the read timeout).  If ``handle`` raises (or the call is cancelled) the response is
    closed and its iterators finished before the exception propagates.
    """
    done = False
    # httpx2 types aiter_text() as an AsyncIterator; it is an async generator.
    pieces = cast(AsyncGenerator[str, None], response.aiter_text())
    async with contextlib.aclosing(pieces):
        try:
            async for piece in pieces:
                for item in feed(piece):
                    if await handle(item):
                        done = True
                        break
                if done:
                    break
            if not done and close is not None and (rest := close()) is not None:
                done = await handle(rest)
            if done:
                await _drain_rest(pieces)
        except httpx2.TransportError as exc:
            raise error_from_transport(exc, phase="body") from exc
        except BaseException:
            await _discard_rest(response, pieces)
            raise
    return done


async def read_sse(
    response: httpx2.Response,
    handle: Callable[[ServerSentEvent], Awaitable[bool]],
    *,
    max_event_size: int | None = DEFAULT_MAX_EVENT_SIZE,
) -> bool:
    """Feed the response's SSE events to ``handle`` until it returns ``True`` (the terminator).

    Returns soon after the terminator, as :func:`read_decoded`.  Returns whether the
    terminator was seen; a connection failure mid-body raises
    :class:`~trioagent.exception.ModelStreamError` (or ``ModelTimeoutError`` for a stall past
    the read timeout).  If ``handle`` raises (or the call is cancelled) the response is closed
    and its iterators finished before the exception propagates.  One event larger than
    ``max_event_size`` characters raises :class:`~trioagent.exception.ModelStreamError`
    (:class:`~trioagent._http.SSEDecoder`).
    """
    return await read_decoded(response, SSEDecoder(max_event_size).feed, handle)


async def read_bytes(response: httpx2.Response, handle: Callable[[bytes], Awaitable[None]]) -> None:
    """Feed the body's raw pieces to ``handle`` as they arrive, to the end of the body.

    A connection cut mid-body raises :class:`~trioagent.exception.ModelStreamError`; if
    ``handle`` raises (or the call is cancelled) the response is closed and its iterators
    finished, in this task, before the exception propagates.
    """
    pieces = response.aiter_bytes()
    async with contextlib.aclosing(pieces):
        try:
            async for piece in pieces:
                await handle(piece)
        except httpx2.TransportError as exc:
            raise error_from_transport(exc, phase="body") from exc
        except BaseException:
            await _discard_rest(response, pieces)
            raise


class _JSONBody:
    """The whole text of a body that was JSON where an event stream was expected."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


#: Media types that are never an event stream: such an answer fails at once.
_NEVER_A_STREAM = ("text/html", "application/xhtml+xml")
#: Characters of a body kept for the excerpt of a "not an event stream" error.
_HEAD_SIZE = 300


def media_type(response: httpx2.Response) -> str:
    """The response's media type, lower case, without parameters (``""`` if none)."""
    value: str = response.headers.get("content-type", "")
    return value.partition(";")[0].strip().lower()


def not_a_stream_error(
    response: httpx2.Response, head: str, redact: Redact, *, what: str = "event stream"
) -> ModelStreamError:
    """The error for a 2xx answer to a streaming request that is no stream (an HTML page, a
    plain text): it names the content type, with a short redacted excerpt of the body.  Not
    retried: the server would answer the same way again."""
    kind = media_type(response) or "no Content-Type"
    return ModelStreamError(
        f"the answer to a streaming request is {kind}, not an {what}: "
        f"{excerpt(head.strip(), redact)}",
        status_code=response.status_code,
        retryable=False,
    )


class _EventsOrJSON:
    """An SSE decoder that first looks at the start of the body.

    A body whose first character (after blanks and a BOM) is ``{`` or ``[`` is no event
    stream: such a line is an unknown field, ignored, and the stream would seem to end
    without a single event.  It is collected whole and handed over at its end (``close``) as
    a :class:`_JSONBody`.  Anything else goes to an :class:`SSEDecoder`, piece by piece.  The
    body decides, not the ``Content-Type``: servers label event streams ``application/json``
    too.

    Two answers are no stream whatever their body: an HTML page (a proxy's login page) fails
    as soon as its first characters are in, and a body of another type than
    ``text/event-stream`` that ends without a single event fails at its end — both with
    :func:`not_a_stream_error`, never as a stream "closed early" (which would be retried).
    ``max_size`` bounds one event and a JSON body.
    """

    def __init__(self, response: httpx2.Response, redact: Redact, max_size: int | None) -> None:
        self._response = response
        self._redact = redact
        self._max_size = max_size
        self._sse = SSEDecoder(max_size)
        self._media_type = media_type(response)
        self._head = ""  # the blank start of the body, before anything decided
        self._start = ""  # the first characters of the body, for an error's excerpt
        self._decided = False
        self._events = False  # whether an event was dispatched
        self._json: list[str] | None = None
        self._json_size = 0

    def feed(self, piece: str) -> list[ServerSentEvent]:
        if len(self._start) < _HEAD_SIZE:
            self._start += piece[: _HEAD_SIZE - len(self._start)]
            if self._media_type in _NEVER_A_STREAM and len(self._start) >= _HEAD_SIZE:
                raise not_a_stream_error(self._response, self._start, self._redact)
        if self._json is not None:
            self._json.append(piece)
            self._json_size += len(piece)
            if self._max_size is not None and self._json_size > self._max_size:
                raise too_large_error("JSON body", self._max_size)
            return []
        if not self._decided:
            piece = self._head + piece
            start = piece.lstrip("\ufeff \t\r\n")
            if not start:
                self._head = piece
                return []
            self._decided, self._head = True, ""
            if start[0] in "{[" and self._media_type not in _NEVER_A_STREAM:
                self._json = [piece]
                self._json_size = len(piece)
                return []
        events = self._sse.feed(piece)
        self._events = self._events or bool(events)
        return events

    def close(self) -> _JSONBody | None:
        if self._json is not None:
            return _JSONBody("".join(self._json))
        if self._media_type in _NEVER_A_STREAM or (
            not self._events and self._start.strip() and self._media_type != "text/event-stream"
        ):
            raise not_a_stream_error(self._response, self._start, self._redact)
        return None


async def _json_answer(
    response: httpx2.Response,
    body: bytes,
    *,
    redact: Redact,
    error: ErrorMapper,
    json_body: Callable[[JSONObject], Awaitable[bool]] | None,
) -> bool:
    """A 2xx JSON body where an event stream was asked for.

    Providers answer so when they fail a streaming request with status 200 (an error object),
    and some OpenAI-compatible servers ignore ``stream: true`` (a whole completion).  An error
    object is raised through ``error`` (for the generic mapping: not retried, as an error event
    in a stream); any other object goes to ``json_body`` (which returns ``False`` for an object
    it does not know).  What remains is a :class:`~trioagent.exception.ModelStreamError`
    with a redacted excerpt, not retried (the server would answer the same way again).
    """
    try:
        payload: JSONValue = json.loads(body)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        if payload.get("error") or payload.get("type") == "error":
            raise error(response.status_code, response.headers, body, redact=redact)
        if json_body is not None and await json_body(payload):
            return True
    text = excerpt(body.decode("utf-8", "replace").strip(), redact)
    raise ModelStreamError(
        f"answered a streaming request with JSON, not an event stream: {text}",
        status_code=response.status_code,
        retryable=False,
    )


async def stream_sse(
    client: httpx2.AsyncClient,
    request: httpx2.Request,
    handle: Callable[[ServerSentEvent], Awaitable[bool]],
    *,
    redact: Redact = identity,
    error: ErrorMapper = error_from_response,
    json_body: Callable[[JSONObject], Awaitable[bool]] | None = None,
    max_event_size: int | None = DEFAULT_MAX_EVENT_SIZE,
) -> bool:
    """Send a streaming request (:func:`~trioagent._http.send_request`) and feed its SSE
    events to ``handle`` (as :func:`read_sse`); the response is closed in every case
    (shielded, bounded: :func:`~trioagent._http.aclose_response`).  Returns whether
    ``handle`` saw the terminator.

    A 2xx answer whose body is JSON instead of an event stream (:class:`_EventsOrJSON`) is
    read whole: an error object raises the mapped error (``error``), another object goes to
    ``json_body`` when given (a provider that can use a non-streamed answer; it returns
    whether it did), anything else raises :class:`~trioagent.exception.ModelStreamError`
    (:func:`_json_answer`).  An answer that is no stream at all (an HTML page, a plain text
    without events) is a :class:`~trioagent.exception.ModelStreamError` naming its content
    type, not retried; so is an event (or a JSON body) over ``max_event_size`` characters.
    Every error names the request's URL (``endpoint``).
    """
    response = await send_request(client, request, stream=True, redact=redact, error=error)
    try:
        return await _read_events(response, handle, redact, error, json_body, max_event_size)
    except ModelError as exc:
        located(exc, safe_url(request.url))
        raise
    finally:
        await aclose_response(response)


async def _read_events(
    response: httpx2.Response,
    handle: Callable[[ServerSentEvent], Awaitable[bool]],
    redact: Redact,
    error: ErrorMapper,
    json_body: Callable[[JSONObject], Awaitable[bool]] | None,
    max_event_size: int | None,
) -> bool:
    decoder = _EventsOrJSON(response, redact, max_event_size)

    async def dispatch(item: ServerSentEvent | _JSONBody) -> bool:
        if isinstance(item, _JSONBody):
            return await _json_answer(
                response,
                item.text.encode(),
                redact=redact,
                error=error,
                json_body=json_body,
            )
        return await handle(item)

    feed: Callable[[str], Iterable[ServerSentEvent | _JSONBody]] = decoder.feed
    return await read_decoded(response, feed, dispatch, close=decoder.close)


def parse_event(data: str, *, model: str, unit: str, redact: Redact = identity) -> JSONObject:
    """One JSON object received in a stream (``unit`` names it in errors: ``"chunk"``,
    ``"event"``, ``"line"``).

    The provider's text quoted in an error is passed through ``redact`` (the model's
    credential redaction): these messages reach logs and ``ReplyEndEvent.error``.

    Raises:
        ModelStreamError: ``data`` is not JSON, or not a JSON object.
    """
    try:
        payload: JSONValue = json.loads(data)
    except ValueError as exc:
        raise ModelStreamError(
            f"unparseable {unit} in the stream of {model!r}: {excerpt(data, redact)}"
        ) from exc
    if not isinstance(payload, dict):
        raise ModelStreamError(
            f"unexpected {unit} in the stream of {model!r}: {excerpt(data, redact)}"
        )
    return payload

"""HTTP plumbing shared by the providers: sending, error mapping, SSE reading, closing.

* :func:`send_request` sends a request (streaming or not) and turns transport failures and
  HTTP error statuses into typed :class:`~trioagent.exception.ModelError` subclasses, with the
  provider's message and code parsed from the JSON error body and ``Retry-After`` honoured;
  a redirect is never followed (:func:`error_from_redirect`).
* :func:`read_sse` feeds ``response.aiter_text()`` (under ``contextlib.aclosing``) to an
  :class:`~trioagent.model._sse.SSEDecoder` and hands each event to a callback
  (:func:`read_decoded` does it for any incremental decoder), returning soon after the
  terminator; :func:`stream_sse` sends a streaming request and reads it so (or reads the
  JSON body a provider sent instead), closing the response in every case.
* :func:`bearer_headers`, :func:`parse_event`, :func:`response_json` and
  :func:`incomplete_stream_error`: the request headers and the body checks the providers
  share.  Provider text quoted in an error message goes through the model's credential
  redaction (the ``redact`` arguments, :func:`excerpt`): error messages reach logs and events.
* :func:`aclose_response` closes a response in a shielded, bounded scope, so a cancelled
  stream's connection is closed — never returned to the pool half-read.
"""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import json
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any, Literal, Protocol, Self, TypeVar, cast

import httpx
import trio

from ..exception import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelInvalidRequestError,
    ModelPermissionError,
    ModelRateLimitError,
    ModelStreamError,
    ModelTimeoutError,
    ModelUpstreamError,
)
from ._sse import ServerSentEvent, SSEDecoder

__all__ = [
    "CLOSE_GRACE",
    "DRAIN_GRACE",
    "ErrorMapper",
    "aclose_response",
    "bearer_headers",
    "error_from_payload",
    "error_from_redirect",
    "error_from_response",
    "error_from_transport",
    "excerpt",
    "incomplete_stream_error",
    "parse_event",
    "parse_retry_after",
    "read_decoded",
    "read_sse",
    "response_json",
    "send_request",
    "stream_sse",
]

#: Seconds a shielded response close may take (a plain TCP close is immediate).
CLOSE_GRACE = 5.0
#: Seconds a body may take to end after its terminator (``data: [DONE]``) before the call
#: returns without it, dropping the connection instead of pooling it.
DRAIN_GRACE = 1.0

_Redact = Callable[[str], str]
_T = TypeVar("_T")


def _identity(text: str) -> str:
    return text


class ErrorMapper(Protocol):
    """Turns an HTTP error response into the typed error (:func:`error_from_response`)."""

    def __call__(
        self, status: int, headers: httpx.Headers, body: bytes, *, redact: _Redact
    ) -> ModelError: ...


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date,
    in any of the three formats HTTP allows: IMF-fixdate, RFC 850, asctime — all GMT)."""
    if (ms := headers.get("retry-after-ms")) is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(ms) / 1000)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        # An asctime date (or a "-0000" zone) parses naive; HTTP dates are always GMT
        # (RFC 9110 §5.6.7), so a naive one must not be read as local time.
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - time.time())


def _error_fields(body: Any) -> tuple[str | None, str | None]:
    """(message, code) from the usual provider error bodies."""
    if not isinstance(body, dict):
        return None, None
    error = body.get("error", body)
    if isinstance(error, str):
        return error, None
    if not isinstance(error, dict):
        return None, None
    message = error.get("message")
    code = error.get("code") or error.get("type") or error.get("status")
    return (
        str(message) if message is not None else None,
        str(code) if code is not None else None,
    )


def error_from_payload(payload: Any, *, redact: _Redact = _identity) -> ModelUpstreamError:
    """A ``{"error": ...}`` object received inside a stream (not retryable, as upstream SDKs).

    Its message and code are the provider's text: both are redacted.
    """
    message, code = _error_fields(payload)
    return ModelUpstreamError(
        redact(message or f"error event in the stream: {payload!r}"),
        code=redact(code) if code else None,
        retryable=False,
    )


def error_from_response(
    status: int, headers: httpx.Headers, body: bytes, *, redact: _Redact = _identity
) -> ModelError:
    """The typed error for an HTTP error response.

    The provider's message and code are redacted (a provider may echo the key in either).
    An error object in a 2xx response (a provider failing a request with status 200, or a
    JSON error where an event stream was asked for) is a
    :class:`~trioagent.exception.ModelUpstreamError` that is not retried, as an error event
    inside a stream.
    """
    try:
        parsed: Any = json.loads(body) if body else None
    except ValueError:
        parsed = None
    message, code = _error_fields(parsed)
    if not message:
        # Redacted before it is cut, so a key spanning the cut cannot leak its first half.
        text = redact(body.decode("utf-8", "replace").strip())
        message = text[:500] if text else httpx.codes.get_reason_phrase(status) or "error"
    message = redact(message)
    retry_after = parse_retry_after(headers)
    kwargs: dict[str, Any] = {"status_code": status, "code": redact(code) if code else None}
    if status < 300:
        return ModelUpstreamError(message, retryable=False, **kwargs)
    if status == 401:
        return ModelAuthenticationError(message, **kwargs)
    if status == 403:
        return ModelPermissionError(message, **kwargs)
    if status == 429:
        return ModelRateLimitError(message, retry_after=retry_after, **kwargs)
    if status == 408:
        return ModelTimeoutError(message, retry_after=retry_after, **kwargs)
    if status == 409 or status >= 500:
        return ModelUpstreamError(message, retry_after=retry_after, **kwargs)
    return ModelInvalidRequestError(message, **kwargs)


def error_from_redirect(
    status: int, url: httpx.URL, headers: httpx.Headers, *, redact: _Redact = _identity
) -> ModelInvalidRequestError:
    """The error for a 3xx answer: redirects are never followed.

    Following one would re-send the request (and its key) to another address, and an
    ``http://`` to ``https://`` redirect of a POST may turn it into a GET.  A redirect almost
    always means the base URL is wrong, so the error names the target (without credentials or
    query string, redacted) and asks to fix the base URL; it is not retryable: every retry
    would be redirected the same way.
    """
    location = headers.get("location")
    if location is None:
        target = "no Location header"
    else:
        try:
            target = redact(_safe_url(url.join(location)))
        except (httpx.InvalidURL, ValueError):
            target = repr(redact(location)[:200])
    hint = "use the final address as the base URL"
    if location is not None and url.scheme == "http" and target.startswith("https://"):
        hint = "use https:// in the base URL"
    return ModelInvalidRequestError(
        f"{_safe_url(url)} redirects to {target} (redirects are not followed: {hint})",
        status_code=status,
        retryable=False,
    )


def error_from_transport(
    exc: httpx.TransportError, *, phase: Literal["request", "body"], url: str = ""
) -> ModelError:
    """The typed error for an httpx transport failure.

    ``phase="request"``: before the response headers (nothing was received, always safe to
    retry); ``phase="body"``: while reading the body — a cut connection there is a
    :class:`~trioagent.exception.ModelStreamError`.
    """
    detail = str(exc) or type(exc).__name__
    where = f" ({url})" if url else ""
    if isinstance(exc, httpx.TimeoutException):
        kind = {
            httpx.ConnectTimeout: "connecting",
            httpx.ReadTimeout: "waiting for data",
            httpx.WriteTimeout: "sending the request",
            httpx.PoolTimeout: "waiting for a free connection",
        }.get(type(exc), "waiting")
        return ModelTimeoutError(f"timed out {kind}{where}: {detail}")
    if phase == "body":
        return ModelStreamError(
            f"the stream was cut: the connection failed before the response ended{where}: {detail}",
            retryable=True,
        )
    return ModelConnectionError(f"could not reach the provider{where}: {detail}")


def _safe_url(url: httpx.URL) -> str:
    """The URL for error messages: no credentials, no query string."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


def bearer_headers(
    api_key: str | None, *, stream: bool, organization: str | None = None
) -> dict[str, str]:
    """``Authorization: Bearer <key>`` (and ``OpenAI-Organization`` when given), and
    ``Accept``: ``text/event-stream`` for a streaming request, else ``application/json``."""
    headers = {"Authorization": f"Bearer {api_key}"}
    if organization:
        headers["OpenAI-Organization"] = organization
    headers["Accept"] = "text/event-stream" if stream else "application/json"
    return headers


class HTTPClientOwner:
    """One ``httpx.AsyncClient`` per object: injectable, else created on first use.

    The object never closes a client it was given; :meth:`aclose` (or ``async with obj:``)
    closes one it created.  Subclasses set ``read_timeout`` and ``connect_timeout`` and call
    :meth:`_set_http_client` from their constructor.
    """

    read_timeout: float | None
    connect_timeout: float | None
    _http_client: httpx.AsyncClient | None
    _owns_client: bool

    def _set_http_client(self, http_client: httpx.AsyncClient | None) -> None:
        self._http_client = http_client
        self._owns_client = http_client is None

    @property
    def http_client(self) -> httpx.AsyncClient:
        """The ``httpx.AsyncClient`` (created on first use when none was injected)."""
        if self._http_client is None:
            self._http_client = httpx.AsyncClient(
                timeout=httpx.Timeout(
                    connect=self.connect_timeout,
                    read=self.read_timeout,
                    write=self.read_timeout,
                    pool=self.connect_timeout,
                ),
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            )
        return self._http_client

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it (an injected one is left open)."""
        if self._http_client is not None and self._owns_client:
            client, self._http_client = self._http_client, None
            await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


async def aclose_response(response: httpx.Response) -> None:
    """Close ``response`` even inside a cancelled scope.

    An unfinished body makes httpcore close the connection instead of pooling it.
    """
    # Shielded so a cancelled call still closes its connection; deadline: CLOSE_GRACE seconds
    # (closing plain TCP is immediate, a TLS close_notify must not hang the caller).
    with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_GRACE):
        await response.aclose()


class _RequestBody(httpx.AsyncByteStream):
    """A request body iterated by a plain iterator object instead of an async generator.

    httpx's own ``ByteStream`` yields from an async generator; when a send is cancelled in
    the middle of the body, httpcore abandons it and trio reports the unfinished generator
    (a ``ResourceWarning``).  Nothing here needs finalizing.
    """

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __aiter__(self) -> _OneChunk:
        return _OneChunk(self._data)

    async def aclose(self) -> None:
        return None


class _OneChunk:
    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data

    def __aiter__(self) -> _OneChunk:
        return self

    async def __anext__(self) -> bytes:
        if self._data is None:
            raise StopAsyncIteration
        data, self._data = self._data, None
        return data


async def send_request(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    stream: bool,
    redact: _Redact = _identity,
    error: ErrorMapper = error_from_response,
) -> httpx.Response:
    """Send ``request``; return a 2xx response or raise the typed error.

    With ``stream=True`` the body is left unread: the caller must finish with
    :func:`aclose_response`.  An error response's body is read (for the provider's message)
    and the response closed; ``error`` maps it to the exception raised (a provider with its
    own error bodies passes its mapping).  A 3xx is never followed, even by a client made
    with ``follow_redirects=True``: it raises :func:`error_from_redirect`.
    """
    url = _safe_url(request.url)
    if isinstance(request.stream, httpx.ByteStream):
        request.stream = _RequestBody(request.content)
    try:
        # Always streamed: the body is read here, so a failure while reading it is told apart
        # from one before the response (which is always safe to retry).
        response = await client.send(request, stream=True, follow_redirects=False)
    except httpx.TransportError as exc:
        raise error_from_transport(exc, phase="request", url=url) from exc
    if response.status_code < 300:
        if not stream:
            try:
                await response.aread()
            except httpx.TransportError as exc:
                raise error_from_transport(exc, phase="body", url=url) from exc
            finally:
                await aclose_response(response)
        return response
    try:
        body = await response.aread()
    except httpx.TransportError:
        body = b""
    finally:
        await aclose_response(response)
    if response.status_code < 400:
        raise error_from_redirect(
            response.status_code, request.url, response.headers, redact=redact
        )
    raise error(response.status_code, response.headers, body, redact=redact)


async def _discard_rest(response: httpx.Response, pieces: AsyncGenerator[str, None]) -> None:
    """Close the response, then run its iterator to the end.

    httpx's ``aiter_text()`` iterates nested async generators (``aiter_bytes``, ``aiter_raw``,
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
    caller's close makes httpcore drop the connection instead of pooling it.  A body cut
    after the terminator is no error either.
    """
    with trio.move_on_after(DRAIN_GRACE), contextlib.suppress(httpx.TransportError):
        async for _ in pieces:
            pass


async def read_decoded(
    response: httpx.Response,
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
    # httpx types aiter_text() as an AsyncIterator; it is an async generator.
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
        except httpx.TransportError as exc:
            raise error_from_transport(exc, phase="body") from exc
        except BaseException:
            await _discard_rest(response, pieces)
            raise
    return done


async def read_sse(
    response: httpx.Response,
    handle: Callable[[ServerSentEvent], Awaitable[bool]],
) -> bool:
    """Feed the response's SSE events to ``handle`` until it returns ``True`` (the terminator).

    Returns soon after the terminator, as :func:`read_decoded`.  Returns whether the
    terminator was seen; a connection failure mid-body raises
    :class:`~trioagent.exception.ModelStreamError` (or ``ModelTimeoutError`` for a stall past
    the read timeout).  If ``handle`` raises (or the call is cancelled) the response is closed
    and its iterators finished before the exception propagates.
    """
    return await read_decoded(response, SSEDecoder().feed, handle)


class _JSONBody:
    """The whole text of a body that was JSON where an event stream was expected."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _EventsOrJSON:
    """An SSE decoder that first looks at the start of the body.

    A body whose first character (after blanks and a BOM) is ``{`` or ``[`` is no event
    stream: such a line is an unknown field, ignored, and the stream would seem to end
    without a single event.  It is collected whole and handed over at its end (``close``) as
    a :class:`_JSONBody`.  Anything else goes to an :class:`SSEDecoder`, piece by piece.  The
    body decides, not the ``Content-Type``: servers label event streams ``application/json``
    too.
    """

    def __init__(self) -> None:
        self._sse = SSEDecoder()
        self._head = ""  # the blank start of the body, before anything decided
        self._decided = False
        self._json: list[str] | None = None

    def feed(self, piece: str) -> list[ServerSentEvent]:
        if self._json is not None:
            self._json.append(piece)
            return []
        if not self._decided:
            piece = self._head + piece
            start = piece.lstrip("\ufeff \t\r\n")
            if not start:
                self._head = piece
                return []
            self._decided, self._head = True, ""
            if start[0] in "{[":
                self._json = [piece]
                return []
        return self._sse.feed(piece)

    def close(self) -> _JSONBody | None:
        return _JSONBody("".join(self._json)) if self._json is not None else None


async def _json_answer(
    response: httpx.Response,
    body: bytes,
    *,
    redact: _Redact,
    error: ErrorMapper,
    json_body: Callable[[dict[str, Any]], Awaitable[bool]] | None,
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
        payload: Any = json.loads(body)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        if payload.get("error") or payload.get("type") == "error":
            raise error(response.status_code, response.headers, body, redact=redact)
        if json_body is not None and await json_body(payload):
            return True
    text = excerpt(body.decode("utf-8", "replace").strip(), redact)
    raise ModelStreamError(
        f"{_safe_url(response.request.url)} answered a streaming request with JSON, not an "
        f"event stream: {text}",
        status_code=response.status_code,
        retryable=False,
    )


async def stream_sse(
    client: httpx.AsyncClient,
    request: httpx.Request,
    handle: Callable[[ServerSentEvent], Awaitable[bool]],
    *,
    redact: _Redact = _identity,
    error: ErrorMapper = error_from_response,
    json_body: Callable[[dict[str, Any]], Awaitable[bool]] | None = None,
) -> bool:
    """Send a streaming request (:func:`send_request`) and feed its SSE events to ``handle``
    (as :func:`read_sse`); the response is closed in every case (shielded, bounded:
    :func:`aclose_response`).  Returns whether ``handle`` saw the terminator.

    A 2xx answer whose body is JSON instead of an event stream (:class:`_EventsOrJSON`) is
    read whole: an error object raises the mapped error (``error``), another object goes to
    ``json_body`` when given (a provider that can use a non-streamed answer; it returns
    whether it did), anything else raises :class:`~trioagent.exception.ModelStreamError`
    (:func:`_json_answer`).
    """
    response = await send_request(client, request, stream=True, redact=redact, error=error)
    try:
        decoder = _EventsOrJSON()

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
    finally:
        await aclose_response(response)


def incomplete_stream_error(model: str, before: str) -> ModelStreamError:
    """The retryable error for a stream that ended before its terminator (``before``: what
    was missing, as ``"'data: [DONE]'"``)."""
    return ModelStreamError(
        f"the stream of {model!r} ended before {before} (connection closed early; the "
        "response is incomplete)",
        retryable=True,
    )


def excerpt(text: str, redact: _Redact = _identity, *, limit: int = 200) -> str:
    """``text`` for an error message: redacted, then cut to ``limit`` characters, quoted.

    Redacted before it is cut, so a key spanning the cut cannot leak its first half.
    """
    return repr(redact(text)[:limit])


def parse_event(data: str, *, model: str, unit: str, redact: _Redact = _identity) -> dict[str, Any]:
    """One JSON object received in a stream (``unit`` names it in errors: ``"chunk"``,
    ``"event"``, ``"line"``).

    The provider's text quoted in an error is passed through ``redact`` (the model's
    credential redaction): these messages reach logs and ``ReplyEndEvent.error``.

    Raises:
        ModelStreamError: ``data`` is not JSON, or not a JSON object.
    """
    try:
        payload = json.loads(data)
    except ValueError as exc:
        raise ModelStreamError(
            f"unparseable {unit} in the stream of {model!r}: {excerpt(data, redact)}"
        ) from exc
    if not isinstance(payload, dict):
        raise ModelStreamError(
            f"unexpected {unit} in the stream of {model!r}: {excerpt(data, redact)}"
        )
    return payload


def response_json(
    response: httpx.Response,
    *,
    model: str,
    retryable: bool | None = None,
    redact: _Redact = _identity,
) -> dict[str, Any]:
    """The JSON object of a non-streaming response.

    The body quoted in an error is passed through ``redact`` (as :func:`parse_event`).

    Raises:
        ModelUpstreamError: the body is not JSON, or not a JSON object (``retryable``:
            ``None`` for the error class's default).
    """
    try:
        payload = response.json()
    except ValueError as exc:
        raise ModelUpstreamError(
            f"the response of {model!r} is not JSON: {excerpt(response.text, redact)}",
            retryable=retryable,
        ) from exc
    if not isinstance(payload, dict):
        raise ModelUpstreamError(
            f"unexpected response of {model!r}: {redact(repr(payload))[:200]}",
            retryable=retryable,
        )
    return payload

"""HTTP plumbing shared by the providers: sending, error mapping, SSE reading, closing.

* :func:`send_request` sends a request (streaming or not) and turns transport failures and
  HTTP error statuses into typed :class:`~trioagent.exception.ModelError` subclasses, with the
  provider's message and code parsed from the JSON error body and ``Retry-After`` honoured.
* :func:`read_sse` feeds ``response.aiter_text()`` (under ``contextlib.aclosing``) to an
  :class:`~trioagent.model._sse.SSEDecoder` and hands each event to a callback
  (:func:`read_decoded` does it for any incremental decoder); :func:`stream_sse` sends a
  streaming request and reads it so, closing the response in every case.
* :func:`bearer_headers`, :func:`parse_event`, :func:`response_json` and
  :func:`incomplete_stream_error`: the request headers and the body checks the providers
  share.
* :func:`aclose_response` closes a response in a shielded, bounded scope, so a cancelled
  stream's connection is closed — never returned to the pool half-read.
"""

from __future__ import annotations

import contextlib
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
    "ErrorMapper",
    "aclose_response",
    "bearer_headers",
    "error_from_payload",
    "error_from_response",
    "error_from_transport",
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
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
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
    """A ``{"error": ...}`` object received inside a stream (not retryable, as upstream SDKs)."""
    message, code = _error_fields(payload)
    return ModelUpstreamError(
        redact(message or f"error event in the stream: {payload!r}"), code=code, retryable=False
    )


def error_from_response(
    status: int, headers: httpx.Headers, body: bytes, *, redact: _Redact = _identity
) -> ModelError:
    """The typed error for an HTTP error response."""
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
    kwargs: dict[str, Any] = {"status_code": status, "code": code}
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
    own error bodies passes its mapping).
    """
    url = _safe_url(request.url)
    if isinstance(request.stream, httpx.ByteStream):
        request.stream = _RequestBody(request.content)
    try:
        # Always streamed: the body is read here, so a failure while reading it is told apart
        # from one before the response (which is always safe to retry).
        response = await client.send(request, stream=True)
    except httpx.TransportError as exc:
        raise error_from_transport(exc, phase="request", url=url) from exc
    if response.status_code < 400:
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
    (optional) returns an item left unterminated at the end of the body.  After the
    terminator the rest of the body is drained (so the connection can be reused).  Returns
    whether the terminator was seen; a connection failure mid-body raises
    :class:`~trioagent.exception.ModelStreamError` (or ``ModelTimeoutError`` for a stall past
    the read timeout).  If ``handle`` raises (or the call is cancelled) the response is closed
    and its iterators finished before the exception propagates.
    """
    done = False
    # httpx types aiter_text() as an AsyncIterator; it is an async generator.
    pieces = cast(AsyncGenerator[str, None], response.aiter_text())
    async with contextlib.aclosing(pieces):
        try:
            async for piece in pieces:
                for item in feed(piece):
                    if not done:
                        done = await handle(item)
            if not done and close is not None and (rest := close()) is not None:
                done = await handle(rest)
        except httpx.TransportError as exc:
            if done:
                return True
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

    After the terminator the rest of the body is drained (so the connection can be reused).
    Returns whether the terminator was seen; a connection failure mid-body raises
    :class:`~trioagent.exception.ModelStreamError` (or ``ModelTimeoutError`` for a stall past
    the read timeout).  If ``handle`` raises (or the call is cancelled) the response is closed
    and its iterators finished before the exception propagates.
    """
    return await read_decoded(response, SSEDecoder().feed, handle)


async def stream_sse(
    client: httpx.AsyncClient,
    request: httpx.Request,
    handle: Callable[[ServerSentEvent], Awaitable[bool]],
    *,
    redact: _Redact = _identity,
    error: ErrorMapper = error_from_response,
) -> bool:
    """Send a streaming request (:func:`send_request`) and feed its SSE events to ``handle``
    (:func:`read_sse`); the response is closed in every case (shielded, bounded:
    :func:`aclose_response`).  Returns whether ``handle`` saw the terminator."""
    response = await send_request(client, request, stream=True, redact=redact, error=error)
    try:
        return await read_sse(response, handle)
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


def parse_event(data: str, *, model: str, unit: str) -> dict[str, Any]:
    """One JSON object received in a stream (``unit`` names it in errors: ``"chunk"``,
    ``"event"``, ``"line"``).

    Raises:
        ModelStreamError: ``data`` is not JSON, or not a JSON object.
    """
    try:
        payload = json.loads(data)
    except ValueError as exc:
        raise ModelStreamError(
            f"unparseable {unit} in the stream of {model!r}: {data[:200]!r}"
        ) from exc
    if not isinstance(payload, dict):
        raise ModelStreamError(f"unexpected {unit} in the stream: {data[:200]!r}")
    return payload


def response_json(
    response: httpx.Response, *, model: str, retryable: bool | None = None
) -> dict[str, Any]:
    """The JSON object of a non-streaming response.

    Raises:
        ModelUpstreamError: the body is not JSON, or not a JSON object (``retryable``:
            ``None`` for the error class's default).
    """
    try:
        payload = response.json()
    except ValueError as exc:
        raise ModelUpstreamError(
            f"the response of {model!r} is not JSON: {response.text[:200]!r}",
            retryable=retryable,
        ) from exc
    if not isinstance(payload, dict):
        raise ModelUpstreamError(
            f"unexpected response of {model!r}: {payload!r:.200}", retryable=retryable
        )
    return payload

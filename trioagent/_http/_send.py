"""Sending a request: a 2xx response or a typed error, and closing a response safely.

:func:`send_request` never follows a redirect and reads an error response's body for the
provider's message; :func:`aclose_response` closes a response in a shielded, bounded scope, so
a cancelled call's connection is closed — never returned to the pool half-read;
:func:`response_json` checks a non-streamed body.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import trio

from .._core.json_types import JSONObject, JSONValue
from ..exception import ModelError, ModelUpstreamError
from ._errors import (
    ErrorMapper,
    Redact,
    error_from_redirect,
    error_from_response,
    error_from_transport,
    excerpt,
    identity,
    located,
    safe_url,
)

__all__ = [
    "CLOSE_GRACE",
    "MAX_BODY_SIZE",
    "RequestBody",
    "aclose_response",
    "response_json",
    "send_request",
]

#: Seconds a shielded response close may take (a plain TCP close is immediate).
CLOSE_GRACE = 5.0

#: The largest non-streamed 2xx answer that is read (64 MiB): a bigger ``Content-Length`` is
#: refused before the body is read, a chunked body as soon as it passes the limit.
MAX_BODY_SIZE = 64 * 1024 * 1024


async def aclose_response(response: httpx2.Response) -> None:
    """Close ``response`` even inside a cancelled scope.

    An unfinished body makes httpcore2 close the connection instead of pooling it.
    """
    # Shielded so a cancelled call still closes its connection; deadline: CLOSE_GRACE seconds
    # (closing plain TCP is immediate, a TLS close_notify must not hang the caller).
    with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_GRACE):
        await response.aclose()


class RequestBody(httpx2.AsyncByteStream):
    """A request body iterated by a plain iterator object instead of an async generator.

    httpx2's own ``ByteStream`` yields from an async generator; when a send is cancelled in
    the middle of the body, httpcore2 abandons it and trio reports the unfinished generator
    (a ``ResourceWarning``).  Nothing here needs finalizing.
    """

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __aiter__(self) -> _OneChunk:
        return _OneChunk(self._data)

    async def aclose(self) -> None:
        return None


class _BoundedBody(httpx2.AsyncByteStream):
    """A response body that raises a typed error once it passes :data:`MAX_BODY_SIZE` bytes.

    A chunked answer announces no length, so the bound is counted while reading.
    """

    def __init__(self, inner: httpx2.AsyncByteStream | httpx2.SyncByteStream, status: int) -> None:
        if not isinstance(inner, httpx2.AsyncByteStream):
            raise TypeError("an async client's response has an async body")
        self._inner = inner
        self._status = status

    def __aiter__(self) -> _BoundedChunks:
        return _BoundedChunks(self._inner.__aiter__(), self._status)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedChunks:
    def __init__(self, chunks: AsyncIterator[bytes], status: int) -> None:
        self._chunks = chunks
        self._status = status
        self._size = 0

    def __aiter__(self) -> _BoundedChunks:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self._chunks.__anext__()
        self._size += len(chunk)
        if self._size > MAX_BODY_SIZE:
            raise ModelUpstreamError(
                f"the response body passed the {MAX_BODY_SIZE} bytes a non-streamed answer "
                "may have; not read further",
                status_code=self._status,
                retryable=False,
            )
        return chunk


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
    client: httpx2.AsyncClient,
    request: httpx2.Request,
    *,
    stream: bool,
    redact: Redact = identity,
    error: ErrorMapper = error_from_response,
) -> httpx2.Response:
    """Send ``request``; return a 2xx response or raise the typed error.

    With ``stream=True`` the body is left unread: the caller must finish with
    :func:`aclose_response`.  An error response's body is read (for the provider's message)
    and the response closed; ``error`` maps it to the exception raised (a provider with its
    own error bodies passes its mapping).  A 3xx is never followed, even by a client made
    with ``follow_redirects=True``: it raises :func:`error_from_redirect`.  Every error
    raised names the request's URL (:attr:`~trioagent.exception.ModelError.endpoint`,
    without credentials or query string).
    """
    url = safe_url(request.url)
    try:
        return await _send(client, request, url, stream=stream, redact=redact, error=error)
    except ModelError as exc:
        located(exc, url)
        raise


async def _send(
    client: httpx2.AsyncClient,
    request: httpx2.Request,
    url: str,
    *,
    stream: bool,
    redact: Redact,
    error: ErrorMapper,
) -> httpx2.Response:
    if isinstance(request.stream, httpx2.ByteStream):
        request.stream = RequestBody(request.content)
    try:
        # Always streamed: the body is read here, so a failure while reading it is told apart
        # from one before the response (which is always safe to retry).
        response = await client.send(request, stream=True, follow_redirects=False)
    except httpx2.TransportError as exc:
        raise error_from_transport(exc, phase="request", url=url) from exc
    if response.status_code < 300:
        if not stream:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_BODY_SIZE:
                await aclose_response(response)
                raise ModelUpstreamError(
                    f"the response announces {declared} bytes (Content-Length), more than the "
                    f"{MAX_BODY_SIZE} bytes a non-streamed answer may have; not read",
                    status_code=response.status_code,
                    retryable=False,
                )
            response.stream = _BoundedBody(response.stream, response.status_code)
            try:
                await response.aread()
            except httpx2.TransportError as exc:
                raise error_from_transport(exc, phase="body", url=url) from exc
            finally:
                await aclose_response(response)
        return response
    try:
        body = await response.aread()
    except httpx2.TransportError:
        body = b""
    finally:
        await aclose_response(response)
    if response.status_code < 400:
        raise error_from_redirect(
            response.status_code, request.url, response.headers, redact=redact
        )
    raise error(response.status_code, response.headers, body, redact=redact)


def response_json(
    response: httpx2.Response,
    *,
    model: str,
    retryable: bool | None = None,
    redact: Redact = identity,
) -> JSONObject:
    """The JSON object of a non-streaming response.

    The body quoted in an error is passed through ``redact`` (as
    :func:`~trioagent._http.parse_event`).

    Raises:
        ModelUpstreamError: the body is not JSON, or not a JSON object (``retryable``:
            ``None`` for the error class's default).
    """
    try:
        payload: JSONValue = response.json()
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

"""Typed errors for HTTP answers and transport failures.

Every HTTP caller in trioagent raises the :class:`~trioagent.exception.ModelError` family:
:func:`error_from_response` maps an error status (with the provider's message and code parsed
from the usual JSON error bodies, and ``Retry-After`` honoured), :func:`error_from_redirect` a
3xx (never followed), :func:`error_from_transport` an httpx2 transport failure, and
:func:`error_from_payload` an error object received inside a stream.  Provider text quoted in
a message goes through the caller's credential redaction (the ``redact`` arguments,
:func:`excerpt`): error messages reach logs and events.
"""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import html
import json
import re
import time
from collections.abc import Callable
from typing import Literal, Protocol, TypeVar

import httpx2

from .._core.json_types import JSONValue
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

__all__ = [
    "ErrorMapper",
    "Redact",
    "error_from_payload",
    "error_from_redirect",
    "error_from_response",
    "error_from_transport",
    "excerpt",
    "identity",
    "incomplete_stream_error",
    "located",
    "parse_retry_after",
    "safe_url",
]

#: A credential's redaction: the text with every secret replaced by ``***``.
Redact = Callable[[str], str]


def identity(text: str) -> str:
    """The redaction of a caller without secrets: ``text`` unchanged."""
    return text


class ErrorMapper(Protocol):
    """Turns an HTTP error response into the typed error (:func:`error_from_response`)."""

    def __call__(
        self, status: int, headers: httpx2.Headers, body: bytes, *, redact: Redact
    ) -> ModelError: ...


def parse_retry_after(headers: httpx2.Headers) -> float | None:
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


def _error_fields(body: JSONValue) -> tuple[str | None, str | None]:
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


def error_from_payload(payload: JSONValue, *, redact: Redact = identity) -> ModelUpstreamError:
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
    status: int, headers: httpx2.Headers, body: bytes, *, redact: Redact = identity
) -> ModelError:
    """The typed error for an HTTP error response.

    The provider's message and code are redacted (a provider may echo the key in either).
    An error object in a 2xx response (a provider failing a request with status 200, or a
    JSON error where an event stream was asked for) is a
    :class:`~trioagent.exception.ModelUpstreamError` that is not retried, as an error event
    inside a stream.
    """
    try:
        parsed: JSONValue = json.loads(body) if body else None
    except ValueError:
        parsed = None
    message, code = _error_fields(parsed)
    if not message:
        # Redacted before it is cut, so a key spanning the cut cannot leak its first half.
        text = redact(body.decode("utf-8", "replace").strip())
        text = html_summary(text) or text
        message = text[:500] if text else httpx2.codes.get_reason_phrase(status) or "error"
    message = redact(message)
    code = redact(code) if code else None
    retry_after = parse_retry_after(headers)
    if status < 300:
        return ModelUpstreamError(message, status_code=status, code=code, retryable=False)
    if status == 401:
        return ModelAuthenticationError(message, status_code=status, code=code)
    if status == 403:
        return ModelPermissionError(message, status_code=status, code=code)
    if status == 429:
        return ModelRateLimitError(message, status_code=status, code=code, retry_after=retry_after)
    if status == 408:
        return ModelTimeoutError(message, status_code=status, code=code, retry_after=retry_after)
    if status == 409 or status >= 500:
        return ModelUpstreamError(message, status_code=status, code=code, retry_after=retry_after)
    return ModelInvalidRequestError(message, status_code=status, code=code)


def error_from_redirect(
    status: int, url: httpx2.URL, headers: httpx2.Headers, *, redact: Redact = identity
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
            target = redact(safe_url(url.join(location)))
        except (httpx2.InvalidURL, ValueError):
            target = repr(redact(location)[:200])
    hint = "use the final address as the base URL"
    if location is not None and url.scheme == "http" and target.startswith("https://"):
        hint = "use https:// in the base URL"
    error = ModelInvalidRequestError(
        f"redirects to {target} (redirects are not followed: {hint})",
        status_code=status,
        retryable=False,
    )
    return located(error, safe_url(url))


def error_from_transport(
    exc: httpx2.TransportError, *, phase: Literal["request", "body"], url: str = ""
) -> ModelError:
    """The typed error for an httpx2 transport failure.

    ``phase="request"``: before the response headers (nothing was received, always safe to
    retry); ``phase="body"``: while reading the body — a cut connection there is a
    :class:`~trioagent.exception.ModelStreamError`.  ``url`` (already safe: no credentials,
    no query string) becomes the error's ``endpoint``.
    """
    return located(_transport_error(exc, phase), url) if url else _transport_error(exc, phase)


def _transport_error(exc: httpx2.TransportError, phase: Literal["request", "body"]) -> ModelError:
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx2.TimeoutException):
        kind = {
            httpx2.ConnectTimeout: "connecting",
            httpx2.ReadTimeout: "waiting for data",
            httpx2.WriteTimeout: "sending the request",
            httpx2.PoolTimeout: "waiting for a free connection",
        }.get(type(exc), "waiting")
        return ModelTimeoutError(f"timed out {kind}: {detail}")
    if phase == "body":
        return ModelStreamError(
            f"the stream was cut: the connection failed before the response ended: {detail}",
            retryable=True,
        )
    return ModelConnectionError(f"could not reach the provider: {detail}")


_E = TypeVar("_E", bound=ModelError)


def located(exc: _E, endpoint: str) -> _E:
    """``exc`` with its ``endpoint`` set to ``endpoint`` (a safe URL: :func:`safe_url`),
    unless it names one already."""
    if exc.endpoint is None:
        exc.endpoint = endpoint
    return exc


def safe_url(url: httpx2.URL) -> str:
    """The URL for error messages: no credentials, no query string."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


def incomplete_stream_error(model: str, before: str) -> ModelStreamError:
    """The retryable error for a stream that ended before its terminator (``before``: what
    was missing, as ``"'data: [DONE]'"``)."""
    return ModelStreamError(
        f"the stream of {model!r} ended before {before} (connection closed early; the "
        "response is incomplete)",
        retryable=True,
    )


_TAG = re.compile(r"<[^>]*>")
_INVISIBLE = re.compile(r"<(script|style|head)\b[^>]*>.*?</\1\s*>", re.S | re.I)
_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.S | re.I)


def html_summary(text: str, *, limit: int = 300) -> str | None:
    """An HTML error page (a proxy's, a web server's) as one line: its title and visible text,
    tags and markup dropped; ``None`` when ``text`` is not HTML."""
    start = text.lstrip()[:15].lower()
    if not start.startswith(("<!doctype html", "<html")):
        return None
    found = _TITLE.search(text)
    title = " ".join(html.unescape(_TAG.sub(" ", found.group(1))).split()) if found else ""
    visible = " ".join(html.unescape(_TAG.sub(" ", _INVISIBLE.sub(" ", text))).split())
    if title and visible.startswith(title):
        visible = visible[len(title) :].lstrip(" :")
    line = f"{title}: {visible}" if title and visible else title or visible or "an HTML page"
    return f"(HTML page) {line}"[:limit]


def excerpt(text: str, redact: Redact = identity, *, limit: int = 200) -> str:
    """``text`` for an error message: redacted, then cut to ``limit`` characters, quoted.

    Redacted before it is cut, so a key spanning the cut cannot leak its first half.
    """
    return repr(redact(text)[:limit])

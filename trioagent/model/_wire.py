"""What the stream parsers share: checked reads of a provider's decoded JSON, and the
per-call state every parser keeps (:class:`StreamParser`).

A parser reads the wire JSON with :func:`json_object`, :func:`json_list` and
:func:`json_text`, which raise ``ValueError`` naming what had the wrong shape; any other
surprise surfaces as one of :data:`MALFORMED`.  :func:`parse_stream_unit` and
:func:`parse_whole_body` turn those into the typed errors of a streamed and of a non-streamed
answer, naming the model, with a short redacted excerpt of what was received.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .._core.ids import generate_id
from .._core.json_types import JSONObject, JSONValue
from .._http import Redact, excerpt
from ..exception import ModelStreamError, ModelUpstreamError
from ._response import ChatResponse, ChatUsage, ResponseBlock

__all__ = [
    "MALFORMED",
    "StreamParser",
    "json_list",
    "json_object",
    "json_text",
    "malformed_message",
    "parse_stream_unit",
    "parse_whole_body",
]

_T = TypeVar("_T")

#: What a parser raises for a chunk or body of the wrong shape (its own checks raise
#: ``ValueError``; the others cover a shape they did not foresee).  The transport turns them
#: into a :class:`~trioagent.exception.ModelError` naming the model.
MALFORMED = (AttributeError, IndexError, KeyError, TypeError, ValueError)


class StreamParser:
    """The state every provider's stream parser keeps for one call: when it started (for
    ``usage.time``), the response id (a fresh one until the provider names its own) and the
    latest usage reported; :meth:`delta` stamps both on a delta chunk."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.response_id = generate_id()
        self.usage: ChatUsage | None = None

    def delta(
        self, blocks: list[ResponseBlock], metadata: JSONObject | None = None
    ) -> ChatResponse:
        """A delta chunk (``is_last=False``) of ``blocks`` with the response id and usage."""
        return ChatResponse(
            content=blocks,
            is_last=False,
            id=self.response_id,
            usage=self.usage,
            metadata=metadata or {},
        )


def json_object(value: JSONValue, what: str) -> JSONObject:
    """``value`` if it is a JSON object, else ``ValueError`` naming ``what``."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not an object")
    return value


def json_list(value: JSONValue, what: str) -> list[JSONValue]:
    """``value`` if it is a JSON array (``None`` counts as empty), else ``ValueError``."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    return value


def json_text(value: JSONValue, what: str) -> str | None:
    """``value`` if it is a string or ``None``, else ``ValueError`` naming ``what``."""
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{what} is not a string")
    return value


def malformed_message(unit: str, model: str, text: str, exc: Exception, redact: Redact) -> str:
    """The error message for a ``unit`` of the wrong shape: the model, what was wrong (the
    parser's own message, or the exception type) and a short redacted excerpt."""
    reason = redact(str(exc))[:100] if isinstance(exc, ValueError) else type(exc).__name__
    return f"malformed {unit} in the answer of {model!r} ({reason}): {excerpt(text, redact)}"


def parse_stream_unit(
    parse: Callable[[], _T], *, unit: str, model: str, text: str, redact: Redact
) -> _T:
    """``parse()`` for one streamed ``unit`` (``"chunk"``, ``"event"``, ``"line"``); a unit
    of the wrong shape is a :class:`~trioagent.exception.ModelStreamError` naming the model
    with a redacted excerpt of ``text``."""
    try:
        return parse()
    except MALFORMED as exc:
        # From None: the parser's exception may quote the unit unredacted.
        raise ModelStreamError(malformed_message(unit, model, text, exc, redact)) from None


def parse_whole_body(
    parse: Callable[[JSONObject], _T],
    payload: JSONObject,
    *,
    model: str,
    text: str,
    redact: Redact,
    unit: str = "response",
) -> _T:
    """``parse(payload)`` for a non-streamed answer; a body of the wrong shape is a
    :class:`~trioagent.exception.ModelUpstreamError` naming the model with a redacted excerpt
    of ``text`` (not retried: the provider would answer the same way)."""
    try:
        return parse(payload)
    except MALFORMED as exc:
        raise ModelUpstreamError(
            malformed_message(unit, model, text, exc, redact), retryable=False
        ) from None

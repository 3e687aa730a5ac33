"""A sans-IO decoder for ``text/event-stream`` (WHATWG HTML, "Server-sent events").

:class:`SSEDecoder` takes decoded text in arbitrary pieces and returns the events completed by
each piece.  It implements the spec's parsing rules exactly:

* lines end with ``\\r\\n``, ``\\r`` or ``\\n`` — and only those (unlike ``str.splitlines``,
  which also splits on U+2028 and friends); a ``\\r`` ending one piece followed by a ``\\n``
  starting the next is a single line break;
* a leading U+FEFF (BOM) of the stream is dropped;
* ``:`` starts a comment; ``field: value`` loses one leading space of the value; a line without
  a colon is a field with an empty value;
* ``data`` lines are joined with ``\\n``; ``event`` sets the type (default ``"message"``);
  ``id`` sets the last event id (ignored if it contains NUL) which persists across events;
  ``retry`` (ASCII digits only) sets the reconnection time; unknown fields are ignored;
* a blank line dispatches the event — unless its data is empty; the end of the stream never
  dispatches an incomplete event (:attr:`SSEDecoder.pending` tells whether one was left).

Feeding it from httpx2::

    decoder = SSEDecoder()
    async with contextlib.aclosing(response.aiter_text()) as pieces:
        async for piece in pieces:
            for event in decoder.feed(piece):
                ...
"""

from __future__ import annotations

import re

import attrs

from ..exception import ModelStreamError

__all__ = ["SSEDecoder", "ServerSentEvent", "too_large_error"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@attrs.frozen
class ServerSentEvent:
    """One dispatched event.

    ``id`` is the stream's last event id at dispatch time; ``retry`` is the reconnection time
    (ms) set by a ``retry`` field inside this event's block, if any.
    """

    data: str
    event: str = "message"
    id: str = ""
    retry: int | None = None


def too_large_error(unit: str, limit: int) -> ModelStreamError:
    """The error for one ``unit`` of a stream (an event, a line) over ``limit`` characters:
    not retried (the provider would send the same again)."""
    return ModelStreamError(
        f"one {unit} of the stream is larger than {limit} characters (the model's "
        "max_event_size); the stream was abandoned",
        retryable=False,
    )


class SSEDecoder:
    """Incremental event-stream parser; see the module docstring.

    ``max_size`` (characters, ``None``: no limit) bounds what one event may buffer: a single
    line, and the data of one event; past it :meth:`feed` raises
    :class:`~trioagent.exception.ModelStreamError` (not retried) instead of buffering on.
    """

    def __init__(self, max_size: int | None = None) -> None:
        self.max_size = max_size
        self._partial: list[str] = []  # pieces of the current incomplete line
        self._partial_size = 0
        self._data_size = 0
        self._started = False
        self._after_cr = False  # the previous piece ended with "\r"
        self._data: list[str] = []
        self._event = ""
        self._retry: int | None = None
        self._fields_seen = False
        #: The last event id (persists across events, as the spec says).
        self.last_event_id = ""
        #: The latest reconnection time (ms) announced by the server.
        self.retry: int | None = None

    @property
    def pending(self) -> bool:
        """Whether an incomplete line or event is buffered (it will never be dispatched)."""
        return bool(self._partial) or self._fields_seen

    def feed(self, text: str) -> list[ServerSentEvent]:
        """Consume a piece of the stream; return the events it completed, in order."""
        if not text:
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        self._after_cr = text.endswith("\r")
        lines = _LINE_BREAK.split(text)
        if len(lines) == 1:  # no line break: keep the piece (joined once, when the line ends)
            if text:
                self._partial.append(text)
                self._partial_size += len(text)
                self._check(self._partial_size)
            return []
        lines[0] = "".join(self._partial) + lines[0]
        tail = lines.pop()  # after the last line break: incomplete
        self._partial = [tail] if tail else []
        self._partial_size = len(tail)
        if self.max_size is not None:
            self._check(max(len(tail), *(len(line) for line in lines)))
        events: list[ServerSentEvent] = []
        for line in lines:
            event = self._process_line(line)
            if event is not None:
                events.append(event)
        return events

    def _process_line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        self._fields_seen = True
        match name:
            case "event":
                self._event = value
            case "data":
                self._data.append(value)
                self._data_size += len(value) + 1
                self._check(self._data_size)
            case "id":
                if "\0" not in value:
                    self.last_event_id = value
            case "retry":
                if value.isascii() and value.isdigit():
                    self._retry = self.retry = int(value)
            case _:
                pass
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        data, event, retry = self._data, self._event, self._retry
        self._data, self._event, self._retry = [], "", None
        self._data_size = 0
        self._fields_seen = False
        if not data:
            return None
        return ServerSentEvent(
            data="\n".join(data), event=event or "message", id=self.last_event_id, retry=retry
        )

    def _check(self, size: int) -> None:
        if self.max_size is not None and size > self.max_size:
            raise too_large_error("event", self.max_size)

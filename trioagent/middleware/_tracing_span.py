"""The span handling shared by :class:`~trioagent.middleware.TracingMiddleware`'s traces:
starting a span with scrubbed attributes, running the inner layers with it current, ending it
whatever happens."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Mapping
from typing import TypeVar

from opentelemetry import context as otel_context, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from .._core.chain import NextHandler
from . import _tracing_attrs as conv

__all__ = ["NO_SESSION_ID", "Trace", "agent_models", "build", "conversation_id"]

logger = logging.getLogger("trioagent.middleware.tracing")
_T = TypeVar("_T")

NO_SESSION_ID = "[no_session_id]"


def build(factory: Callable[..., _T], *args: object) -> _T | None:
    """Start a span; on a tracing bug, log it and run untraced (the span is started last, so
    a failure leaves no span open)."""
    try:
        return factory(*args)
    except Exception:
        logger.exception("TracingMiddleware could not start a span; running untraced")
        return None


def conversation_id(agent: object) -> str:
    state = getattr(agent, "state", None)
    session_id = getattr(state, "session_id", None)
    return session_id if isinstance(session_id, str) and session_id else NO_SESSION_ID


def agent_models(agent: object) -> list[object]:
    models = [getattr(agent, "model", None)]
    config = getattr(agent, "model_config", None)
    models.append(getattr(config, "fallback_model", None))
    return [m for m in models if m is not None]


class Trace:
    """One span: scrubbed attributes, the attach/detach around the inner layers, the end."""

    __slots__ = ()
    span: Span
    scrub: conv.Scrubber

    def start(
        self,
        tracer: Tracer,
        name: str,
        attributes: Mapping[str, object],
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Span:
        """Start the span (parent: the current context) with all its start attributes."""
        return tracer.start_span(
            name, kind=kind, attributes=conv.clean_attributes(attributes, self.scrub)
        )

    def set(self, attributes: Mapping[str, object]) -> None:
        """Set attributes in one call (``None`` values are skipped, strings scrubbed)."""
        self.span.set_attributes(conv.clean_attributes(attributes, self.scrub))

    def record_error(self, exc: BaseException) -> None:
        message = self.scrub.error_text(str(exc))
        self.span.set_status(Status(StatusCode.ERROR, message or type(exc).__name__))
        self.span.set_attribute("error.type", type(exc).__qualname__)
        stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.span.record_exception(
            exc,
            attributes={
                "exception.message": message,
                "exception.stacktrace": self.scrub.error_text(stack),
            },
        )

    async def run(self, next_handler: NextHandler) -> None:
        """Run the inner layers with the span current in this task; always end the span."""
        token = otel_context.attach(trace.set_span_in_context(self.span))
        error: BaseException | None = None
        try:
            await next_handler(self.sink)
        except BaseException as exc:
            error = exc
            raise
        finally:
            otel_context.detach(token)
            try:
                self.finish(error)
            except Exception:  # tracing must never change how a reply ends
                logger.exception("TracingMiddleware failed to finish span %r", self.span)
            finally:
                self.end()

    async def sink(self, item: object) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def finish(self, error: BaseException | None) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def end(self) -> None:
        if self.span.is_recording():
            try:
                self.span.end()
            except Exception as exc:  # a span processor failing must never fail the reply
                logger.warning(
                    "TracingMiddleware: ending a span failed: %s: %s", type(exc).__name__, exc
                )

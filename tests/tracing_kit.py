"""OpenTelemetry test rig for the tracing tests: an SDK provider exporting to memory, and a
processor tracking the spans started and not yet ended."""

from __future__ import annotations

from typing import Any

import attrs
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class OpenSpans(SpanProcessor):
    """Tracks the spans started and not yet ended."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}
        self.started = 0

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.started += 1
        self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        self.open.pop(span.context.span_id, None)


@attrs.define
class Otel:
    provider: TracerProvider
    exporter: InMemorySpanExporter
    tracker: OpenSpans

    def spans(self, prefix: str = "") -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(prefix)]

    def one(self, prefix: str) -> ReadableSpan:
        found = self.spans(prefix)
        assert len(found) == 1, [s.name for s in self.exporter.get_finished_spans()]
        return found[0]

    def reset(self) -> None:
        self.exporter.clear()
        self.tracker.open.clear()


def new_otel(*extra: SpanProcessor) -> Otel:
    """A provider with the open-span tracker, ``extra`` processors, then the memory export."""
    exporter = InMemorySpanExporter()
    tracker = OpenSpans()
    provider = TracerProvider()
    provider.add_span_processor(tracker)
    for processor in extra:
        provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Otel(provider, exporter, tracker)

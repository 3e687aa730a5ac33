"""10 — Tracing an interrupted reply with OpenTelemetry (``TracingMiddleware``).

``TracingMiddleware`` records one span per reply (``invoke_agent``), per model call
(``chat``) and per tool execution (``execute_tool``), with the GenAI semantic-convention
attributes.  Here the model calls a tool, then starts streaming a long answer, and the reply
is interrupted mid-stream.

What an interrupted reply looks like in the trace:

* every span was *ended* (each is closed in a ``finally`` in the task that opened it — no span
  is left open across the cancellation, and no "Failed to detach context" error);
* the reply span says ``trioagent.reply.finished_reason = interrupted`` and the cut model call
  ``trioagent.interrupted = true`` — with status UNSET: a cancellation is not an error;
* the tool span is a child of the reply span, although the tool ran in the acting nursery.

Spans go to an in-memory exporter and are printed as a tree.  If
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set and ``opentelemetry-exporter-otlp-proto-http`` is
installed, they are also exported over OTLP/HTTP (e.g. to a local Jaeger).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import trio
from _common import check, open_model
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from trioagent import Toolkit, UserMsg
from trioagent.agent import Agent
from trioagent.event import ReplyEndEvent, TextBlockDeltaEvent
from trioagent.middleware import TracingMiddleware
from trioagent.permission import PermissionDecision
from trioagent.testing import ScriptedReply, ScriptedToolCall

WATCHED = ("trioagent.reply.finished_reason", "trioagent.interrupted", "gen_ai.tool.name")


async def lookup_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: the order number.
    """
    await trio.sleep(0.01)
    return f"order {order_id}: shipped yesterday"


def add_otlp_export(provider: TracerProvider) -> None:
    """Also export over OTLP/HTTP when an endpoint is configured and the exporter exists."""
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found]
            OTLPSpanExporter,
        )
    except ImportError:
        print("(OTEL_EXPORTER_OTLP_ENDPOINT is set, but opentelemetry-exporter-otlp-proto-http")
        print(" is not installed: spans stay in memory)")
        return
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    print(f"also exporting spans to {os.environ['OTEL_EXPORTER_OTLP_ENDPOINT']}")


def print_tree(spans: Sequence[ReadableSpan]) -> None:
    ids = {s.context.span_id for s in spans}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)

    def show(span: ReadableSpan, depth: int) -> None:
        ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        notes = [
            f"{k.split('.')[-1]}={span.attributes[k]}"
            for k in WATCHED
            if k in (span.attributes or {})
        ]
        status = span.status.status_code.name
        print(
            f"  {'  ' * depth}{span.name:<28} {ms:7.1f} ms  {status:<5} {' '.join(notes)}".rstrip()
        )
        for child in children.get(span.context.span_id, []):
            show(child, depth + 1)

    for root in children.get(None, []):
        show(root, 0)


async def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    add_otlp_export(provider)

    toolkit = Toolkit()
    toolkit.register_function(
        lookup_order, permission=PermissionDecision(behavior="allow", message="read-only")
    )
    call = ScriptedToolCall("lookup_order", '{"order_id": "A-17"}', id="call_order")
    async with trio.open_nursery() as nursery:
        model, server = await open_model(
            nursery,
            [
                ScriptedReply(tool_calls=[call]),
                ScriptedReply(text="Your order A-17 shipped yesterday. " * 40, chunk_delay=0.01),
            ],
        )
        async with model:
            agent = Agent(
                "support",
                "You answer questions about orders.",
                model,
                toolkit,
                middlewares=[TracingMiddleware(tracer_provider=provider)],
            )
            events = []
            async with agent.stream(UserMsg("user", "Where is my order A-17?")) as reply:
                async for event in reply:
                    events.append(event)
                    if sum(isinstance(e, TextBlockDeltaEvent) for e in events) == 3:
                        agent.interrupt()
        nursery.cancel_scope.cancel()
    provider.shutdown()  # flushes the processors (and the OTLP export, if any)

    ends = [e for e in events if isinstance(e, ReplyEndEvent)]
    check(len(ends) == 1 and ends[0].finished_reason == "interrupted", "one INTERRUPTED end")
    spans = exporter.get_finished_spans()
    print("span tree:")
    print_tree(spans)
    by_name = {s.name: s for s in spans}
    names = [s.name for s in spans]
    reply_span = next(s for s in spans if s.name.startswith("invoke_agent"))
    model_spans = [s for s in spans if s.name.startswith("chat")]
    tool_spans = [s for s in spans if s.name.startswith("execute_tool")]
    check(names.count(reply_span.name) == 1, "one reply span")
    if server is not None:
        check(len(model_spans) == 2 and len(tool_spans) == 1, "... with 2 model calls and 1 tool")
        check("execute_tool lookup_order" in by_name, "the tool span is named after the tool")
    check(all(s.end_time is not None for s in spans), "every span was ended")
    check(
        all(
            s.parent is not None and s.parent.span_id == reply_span.context.span_id
            for s in model_spans + tool_spans
        ),
        "model and tool spans are children of the reply span",
    )
    attributes = reply_span.attributes or {}
    check(
        attributes.get("trioagent.reply.finished_reason") == "interrupted",
        "the reply span says interrupted",
    )
    if server is not None:
        cut = model_spans[-1].attributes or {}
        check(cut.get("trioagent.interrupted") is True, "the cut model call is marked interrupted")
    check(
        all(s.status.status_code != StatusCode.ERROR for s in spans),
        "a cancellation is not an error",
    )


if __name__ == "__main__":
    trio.run(main)

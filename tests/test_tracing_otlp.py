"""The integration tier: TracingMiddleware's spans and metrics as a real OTLP receiver reads
them.

The receiver is OtelTap (the ``oteltap`` package: an OTLP/HTTP protobuf receiver written in
Rust, shipped as a native library), run as ``python -m oteltap --port N`` in a subprocess on a
free loopback port; it prints every span and metric it decoded as one JSON line.  The agent
exports with OpenTelemetry's own OTLP/HTTP exporters (``opentelemetry-exporter-otlp-proto-http``),
so both ends of the wire are OpenTelemetry's and OtelTap's code, not this project's.

Marked ``integration`` (deselected by default): it starts a process and real sockets.
Real clock, generous bounds.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from agent_kit import ALLOW, call, calls, make_agent, run, user
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from trioagent.message import TextBlock
from trioagent.middleware import TracingMiddleware
from trioagent.model import ChatResponse, ChatUsage
from trioagent.tool import Toolkit

pytestmark = pytest.mark.integration

SPAN_KIND_CLIENT = 3  # opentelemetry.proto.trace.v1.Span.SpanKind
SPAN_KIND_INTERNAL = 1


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Receiver:
    """The receiver process and the JSON lines it printed."""

    def __init__(self, process: trio.Process, port: int) -> None:
        self.process = process
        self.port = port
        self.items: list[dict[str, Any]] = []
        self.listening = False
        self._buffer = b""
        self._changed = trio.Event()

    async def read(self) -> None:
        assert self.process.stdout is not None
        async for data in self.process.stdout:
            self._buffer += data
            *lines, self._buffer = self._buffer.split(b"\n")
            for line in lines:
                if line.startswith(b"{"):
                    self.items.append(json.loads(line))
                self.listening = self.listening or line.startswith(b"Listening for OTLP")
            self._changed.set()
            self._changed = trio.Event()

    async def wait_until_listening(self) -> None:
        while not self.listening:
            await self._changed.wait()

    async def wait_for(self, names: set[str]) -> dict[str, list[dict[str, Any]]]:
        while not names <= {item.get("name", "").split(" ")[0] for item in self.items}:
            await self._changed.wait()
        found: dict[str, list[dict[str, Any]]] = {}
        for item in self.items:
            found.setdefault(item["name"].split(" ")[0], []).append(item)
        return found


@pytest.fixture
async def receiver(nursery: trio.Nursery) -> AsyncIterator[Receiver]:
    port = _free_port()
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "oteltap", "--port", str(port)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    tap = Receiver(process, port)
    nursery.start_soon(tap.read)
    with trio.fail_after(60):  # it prints a line once it listens
        await tap.wait_until_listening()
    try:
        yield tap
    finally:
        process.kill()
        with trio.move_on_after(10):
            await process.wait()


def attributes(item: dict[str, Any]) -> dict[str, Any]:
    """OTLP JSON attributes as plain values."""
    values: dict[str, Any] = {}
    for attribute in item.get("attributes", []):
        value = attribute["value"]
        if "arrayValue" in value:
            values[attribute["key"]] = [
                next(iter(v.values())) for v in value["arrayValue"].get("values", [])
            ]
        else:
            values[attribute["key"]] = next(iter(value.values()), None)
    return values


async def test_spans_and_metrics_reach_a_real_otlp_receiver(receiver: Receiver) -> None:
    endpoint = f"http://127.0.0.1:{receiver.port}"
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=10))
    )
    meter_provider = MeterProvider(
        metric_readers=[
            PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics", timeout=10),
                export_interval_millis=3_600_000,  # exported by the flush below
            )
        ]
    )
    toolkit = Toolkit()

    async def get_weather(city: str) -> str:
        """Get the weather of a city."""
        return f"{city}: clear sky"

    toolkit.register_function(get_weather, permission=ALLOW)
    first = calls(call("c1", "get_weather", city="Oslo"))
    first.usage = ChatUsage(input_tokens=10, output_tokens=3)
    last = ChatResponse(
        content=[TextBlock(text="Clear sky.")],
        usage=ChatUsage(input_tokens=20, output_tokens=4, cache_input_tokens=12),
    )
    middleware = TracingMiddleware(tracer_provider, meter_provider=meter_provider)
    agent = make_agent([first, last], toolkit, middlewares=[middleware])
    await run(agent, user("Weather in Oslo? secret-question"))
    await trio.to_thread.run_sync(tracer_provider.force_flush)
    await trio.to_thread.run_sync(meter_provider.force_flush)

    with trio.fail_after(60):
        found = await receiver.wait_for(
            {
                "invoke_agent",
                "chat",
                "execute_tool",
                "gen_ai.client.operation.duration",
                "gen_ai.client.token.usage",
            }
        )
    await trio.to_thread.run_sync(tracer_provider.shutdown)
    await trio.to_thread.run_sync(meter_provider.shutdown)

    tool_call, answer = found["chat"]
    assert {tool_call["kind"], answer["kind"]} == {SPAN_KIND_CLIENT}
    assert found["invoke_agent"][0]["kind"] == SPAN_KIND_INTERNAL
    assert attributes(tool_call)["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert attributes(answer)["gen_ai.response.finish_reasons"] == ["stop"]
    assert attributes(answer)["gen_ai.usage.cache_read.input_tokens"] == "12"  # OTLP int64
    assert "secret-question" not in json.dumps(receiver.items)  # content is off by default

    (duration,) = found["gen_ai.client.operation.duration"]
    (point,) = duration["histogram"]["dataPoints"]
    assert point["count"] == "2"
    assert attributes(point)["gen_ai.operation.name"] == "chat"
    (usage,) = found["gen_ai.client.token.usage"]
    by_type = {attributes(p)["gen_ai.token.type"]: p for p in usage["histogram"]["dataPoints"]}
    assert (by_type["input"]["sum"], by_type["output"]["sum"]) == (30, 7)

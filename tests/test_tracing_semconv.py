"""TracingMiddleware against the OpenTelemetry GenAI semantic conventions: span kinds, finish
reasons, cache-token attributes, the content-capture switch and the GenAI client metrics, read
back from the SDK's in-memory span exporter and metric reader."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from agent_kit import ALLOW, call, calls, make_agent, run, user
from opentelemetry.metrics import get_meter_provider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as semconv
from opentelemetry.trace import SpanKind
from tracing_kit import Otel, new_otel

from trioagent.agent import Agent
from trioagent.message import TextBlock
from trioagent.middleware import TracingMiddleware
from trioagent.middleware._tracing_attrs import CAPTURE_CONTENT_ENV
from trioagent.model import ChatResponse, ChatUsage
from trioagent.tool import Toolkit

CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


def answer(inp: int, out: int, cached: int = 0, created: int = 0) -> ChatResponse:
    usage = ChatUsage(
        input_tokens=inp,
        output_tokens=out,
        cache_input_tokens=cached,
        cache_creation_input_tokens=created,
    )
    return ChatResponse(content=[TextBlock(text="Clear sky.")], usage=usage)


def weather_agent(middleware: TracingMiddleware, steps: Sequence[Any]) -> Agent:
    toolkit = Toolkit()

    async def get_weather(city: str) -> str:
        """Get the weather of a city."""
        return f"{city}: clear sky"

    toolkit.register_function(get_weather, permission=ALLOW)
    return make_agent(steps, toolkit, middlewares=[middleware])


def tool_round(*, cached: int = 0, created: int = 0) -> list[Any]:
    first = calls(call("c1", "get_weather", city="Oslo"))
    first.usage = ChatUsage(input_tokens=10, output_tokens=3)
    return [first, answer(20, 4, cached, created)]


@pytest.fixture
def otel() -> Otel:
    return new_otel()


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


def histograms(reader: InMemoryMetricReader) -> dict[str, list[HistogramDataPoint]]:
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, list[HistogramDataPoint]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "trioagent"
            for metric in scope.metrics:
                points = metric.data.data_points
                found[metric.name] = [p for p in points if isinstance(p, HistogramDataPoint)]
    return found


async def test_chat_spans_are_client_spans_with_tool_calls_and_cache_tokens(otel: Otel) -> None:
    """A model call is a CLIENT span; a response that calls tools finishes with
    ``tool_calls``; cached tokens use the conventions' names, on the reply span too."""
    agent = weather_agent(TracingMiddleware(otel.provider), tool_round(cached=12, created=5))
    await run(agent, user("Weather in Oslo?"))
    first, last = otel.spans("chat ")
    assert first.kind is SpanKind.CLIENT
    assert otel.one("invoke_agent").kind is SpanKind.INTERNAL
    assert otel.one("execute_tool").kind is SpanKind.INTERNAL
    assert list(first.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS]) == ["tool_calls"]
    assert list(last.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]
    for span in (last, otel.one("invoke_agent")):
        assert span.attributes[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 12
        assert span.attributes[semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 5
    assert semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS not in first.attributes
    every_key = {key for span in otel.spans() for key in span.attributes}
    assert not any(key.startswith("agentscope.usage") for key in every_key)


async def test_message_content_is_off_by_default(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    await run(weather_agent(TracingMiddleware(otel.provider), tool_round()), user("secret"))
    spans = otel.spans()
    assert len(spans) == 4
    for span in spans:
        assert CONTENT_KEYS.isdisjoint(span.attributes), span.name
        assert "secret" not in repr(dict(span.attributes))
    assert otel.one("execute_tool").attributes["gen_ai.tool.name"] == "get_weather"


@pytest.mark.parametrize(
    ("env", "argument", "captured"),
    [
        ("true", None, True),
        ("SPAN_ONLY", None, True),
        ("false", None, False),
        ("true", False, False),
        (None, True, True),
    ],
)
async def test_the_environment_switch_or_the_argument_turns_content_on(
    otel: Otel,
    monkeypatch: pytest.MonkeyPatch,
    env: str | None,
    argument: bool | None,
    captured: bool,
) -> None:
    if env is None:
        monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    else:
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, env)
    middleware = TracingMiddleware(otel.provider, capture_message_content=argument)
    await run(weather_agent(middleware, tool_round()), user("Weather in Oslo?"))
    recorded = {key for span in otel.spans() for key in span.attributes} & CONTENT_KEYS
    assert recorded == (CONTENT_KEYS if captured else set())


async def test_model_calls_record_the_genai_client_metrics(
    reader: InMemoryMetricReader,
) -> None:
    """Metrics alone (no tracer provider is configured): one duration and two token-usage
    records per model call, with the conventions' attributes and advised buckets."""
    assert type(get_meter_provider()).__name__ == "_ProxyMeterProvider"  # none configured
    middleware = TracingMiddleware(meter_provider=MeterProvider(metric_readers=[reader]))
    assert middleware.enabled
    await run(weather_agent(middleware, tool_round()), user("Weather in Oslo?"))
    found = histograms(reader)
    (duration,) = found["gen_ai.client.operation.duration"]
    assert duration.count == 2
    assert duration.explicit_bounds[:3] == (0.01, 0.02, 0.04)
    assert dict(duration.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "unknown",
        "gen_ai.request.model": "scripted-model",
    }
    tokens = {p.attributes["gen_ai.token.type"]: p for p in found["gen_ai.client.token.usage"]}
    assert (tokens["input"].count, tokens["input"].sum) == (2, 30)
    assert (tokens["output"].count, tokens["output"].sum) == (2, 7)
    assert tokens["input"].explicit_bounds[:3] == (1, 4, 16)


async def test_a_failed_model_call_records_its_duration_with_the_error_type(
    reader: InMemoryMetricReader,
) -> None:
    middleware = TracingMiddleware(meter_provider=MeterProvider(metric_readers=[reader]))
    agent = make_agent([RuntimeError("boom")], middlewares=[middleware])
    with pytest.raises(RuntimeError, match="boom"):
        await run(agent, user())
    found = histograms(reader)
    (duration,) = found["gen_ai.client.operation.duration"]
    assert duration.attributes["error.type"] == "RuntimeError"
    assert "gen_ai.client.token.usage" not in found

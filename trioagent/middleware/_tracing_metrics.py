"""The GenAI client metrics of :class:`~trioagent.middleware.TracingMiddleware`.

Two histograms of the OpenTelemetry GenAI semantic conventions, recorded once per model call:
``gen_ai.client.operation.duration`` (seconds, with ``error.type`` when the call failed) and
``gen_ai.client.token.usage`` (tokens, one record per ``gen_ai.token.type``: ``input`` and
``output``), with the bucket boundaries the conventions advise.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import metrics
from opentelemetry.metrics import Histogram, MeterProvider
from opentelemetry.metrics._internal import _ProxyMeterProvider

from .._version import __version__
from ._tracing_attrs import AttributeValue

__all__ = ["ChatMetrics", "meter_provider_in_use"]

METER_NAME = "trioagent"
_DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
_TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip


def meter_provider_in_use(given: MeterProvider | None) -> MeterProvider | None:
    """``given``, else the global provider; ``None`` while that is OpenTelemetry's proxy or
    no-op provider (no SDK configured: metrics cost nothing)."""
    provider = given if given is not None else metrics.get_meter_provider()
    if isinstance(provider, _ProxyMeterProvider | metrics.NoOpMeterProvider):
        return None
    return provider


class ChatMetrics:
    """The two histograms, made once per meter provider."""

    def __init__(self, provider: MeterProvider) -> None:
        meter = provider.get_meter(METER_NAME, __version__)
        self.duration: Histogram = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.tokens: Histogram = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )

    def record(
        self,
        attributes: Mapping[str, AttributeValue],
        seconds: float,
        usage: tuple[int, int] | None,
        error_type: str | None = None,
    ) -> None:
        """One model call: its duration and, when the provider reported it, its usage
        ``(input_tokens, output_tokens)``."""
        duration_attributes = dict(attributes)
        if error_type is not None:
            duration_attributes["error.type"] = error_type
        self.duration.record(seconds, duration_attributes)
        if usage is None:
            return
        for token_type, count in zip(("input", "output"), usage, strict=True):
            self.tokens.record(count, {**attributes, "gen_ai.token.type": token_type})

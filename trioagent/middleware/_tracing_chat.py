"""The ``chat <model>`` span of :class:`~trioagent.middleware.TracingMiddleware` (a CLIENT
span per model call) and the GenAI client metrics recorded with it."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from .._core.concurrency import is_cancellation
from .._core.emit import Emit
from ..message import Msg
from ..model import ChatModelBase, ChatResponse
from ..types import FinishedReason
from . import _tracing_attrs as conv
from ._tracing_metrics import ChatMetrics
from ._tracing_span import Trace, agent_models, conversation_id, logger

__all__ = ["ModelCallTrace"]


class ModelCallTrace(Trace):
    __slots__ = (
        "capture",
        "emit",
        "finalized",
        "instruments",
        "metric_attributes",
        "scrub",
        "span",
        "started",
    )

    def __init__(
        self,
        tracer: Tracer,
        instruments: ChatMetrics | None,
        capture: bool,
        agent: object,
        model: ChatModelBase,
        input_kwargs: Mapping[str, object],
        emit: Emit,
    ) -> None:
        self.emit = emit
        self.capture = capture
        self.instruments = instruments
        self.finalized = False
        self.scrub = conv.Scrubber(conv.secrets_of([model, *agent_models(agent)]))
        provider = conv.provider_name(model)
        host, port = conv.server_address(model)
        self.metric_attributes = conv.clean_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": model.model,
                "server.address": host,
                "server.port": port,
            },
            self.scrub,
        )
        messages = input_kwargs.get("messages")
        if not isinstance(messages, Iterable) or not capture:
            messages = None
        self.started = time.monotonic()
        self.span = self.start(
            tracer,
            f"chat {model.model}",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.system": provider,
                "gen_ai.request.model": model.model,
                "gen_ai.conversation.id": conversation_id(agent),
                "server.address": host,
                "server.port": port,
                **conv.request_attributes(model, input_kwargs),
                "gen_ai.tool.definitions": conv.tool_definitions(
                    input_kwargs.get("tools"), input_kwargs.get("tool_choice")
                ),
                "gen_ai.input.messages": (
                    conv.to_json([conv.to_otel_message(m) for m in messages if isinstance(m, Msg)])
                    if messages is not None
                    else None
                ),
            },
            SpanKind.CLIENT,
        )

    async def sink(self, item: object) -> None:
        if not self.finalized and getattr(item, "is_last", False):
            self.finalize(item)
        await self.emit(item)

    def finalize(self, response: object) -> None:
        """The ``is_last`` response arrived: record it and end the span now."""
        self.finalized = True
        try:
            attributes: dict[str, object] = {
                "gen_ai.response.finish_reasons": [conv.finish_reason(response)]
            }
            interrupted = False
            if isinstance(response, ChatResponse):
                usage = response.usage
                interrupted = response.finished_reason == FinishedReason.INTERRUPTED
                attributes["gen_ai.response.id"] = response.id or "unknown_id"
                if self.capture:
                    attributes["gen_ai.output.messages"] = conv.to_json(
                        conv.chat_output_messages(response)
                    )
                if usage is not None:
                    attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
                    attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
                    attributes["gen_ai.usage.cache_read.input_tokens"] = (
                        usage.cache_input_tokens or None
                    )
                    attributes["gen_ai.usage.cache_creation.input_tokens"] = (
                        usage.cache_creation_input_tokens or None
                    )
                if interrupted:
                    attributes["trioagent.interrupted"] = True
            self.set(attributes)
            self.measure(response)
            if not interrupted:
                self.span.set_status(Status(StatusCode.OK))
        except Exception:
            logger.exception("TracingMiddleware failed to record a model response")
        finally:
            self.end()

    def measure(self, response: object = None, error: BaseException | None = None) -> None:
        """Record the call's duration and usage in the GenAI client metrics."""
        if self.instruments is None:
            return
        usage = response.usage if isinstance(response, ChatResponse) else None
        self.instruments.record(
            self.metric_attributes,
            time.monotonic() - self.started,
            (usage.input_tokens, usage.output_tokens) if usage is not None else None,
            type(error).__qualname__ if error is not None and not is_cancellation(error) else None,
        )

    def finish(self, error: BaseException | None) -> None:
        if self.finalized:
            return
        self.measure(error=error)
        if error is None:
            self.span.set_status(
                Status(StatusCode.ERROR, "the model call ended without an is_last response")
            )
        elif is_cancellation(error):
            self.span.set_attribute("trioagent.interrupted", True)
        else:
            self.record_error(error)

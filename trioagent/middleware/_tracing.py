"""``TracingMiddleware``: OpenTelemetry spans for replies, model calls and tool executions,
and the GenAI client metrics of model calls.

Follows the OpenTelemetry GenAI semantic conventions.  Span tree of one reply with one tool
call::

    invoke_agent <agent>          on_reply       INTERNAL (parent: the caller's current span)
    ├── chat <model>              on_model_call  CLIENT
    ├── execute_tool <tool>       on_acting      INTERNAL (also for the concurrent acting nursery)
    └── chat <model>

Design notes:

* Spans wrap ``await next_handler(...)`` — never a ``yield`` — and the span is attached to the
  OpenTelemetry context of the running task for exactly that await and detached in ``finally``
  in the same task, so there is no "Failed to detach context" error.  A model call streams in
  the task that awaits it, so its ``chat`` span is that task's.  Trio copies the context into
  every task spawned meanwhile (the acting nursery's workers, a background tool, the reply
  task of ``agent.stream()``), which is what parents their spans.  A background tool that outlives the
  reply keeps the reply span as its parent (its span may end after the parent's).
* Every span is ended in a ``finally``: no span stays open across a cancellation.
* ``trio.Cancelled`` is not an error: an interrupted reply's span gets
  ``trioagent.reply.finished_reason = "interrupted"`` and status UNSET; a cancelled model call
  or tool execution gets ``trioagent.interrupted = True``, status UNSET.  Real errors get status
  ERROR, ``error.type`` and the recorded exception (its text scrubbed of credentials).
* Credentials never reach a span: API keys and URL passwords of the models' credentials are
  replaced by ``***`` in every recorded string; headers and base URLs are never recorded
  (only ``server.address`` / ``server.port``).
* Message content (``gen_ai.input.messages`` / ``output.messages``, tool arguments and
  results) is recorded only when asked for, as the conventions require: with
  ``capture_message_content=True`` or the environment variable
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.
* With no SDK tracer or meter provider (the global ones are OpenTelemetry's proxy or no-op
  ones, and none was passed), every hook is ``await next_handler()``: no sink, no per-event
  work.  With a meter provider but no tracer provider, model calls are measured under
  non-recording spans.

The reply and tool spans are here; the model-call span and its metrics are in
``_tracing_chat`` / ``_tracing_metrics``, the span handling they share in ``_tracing_span``,
the attribute values in ``_tracing_attrs``.

Attribute names are the conventions' (``gen_ai.*``); what they do not cover keeps the names of
AgentScope's tracing (``agentscope.agent.*``), so that dashboards built for AgentScope keep
working; trioagent's own additions are ``trioagent.*``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Status, StatusCode, Tracer, TracerProvider

from .._core.chain import Kwargs, NextHandler
from .._core.concurrency import is_cancellation
from .._core.emit import Emit
from .._version import __version__
from ..agent import ActingItem, AgentLike, ReplyItem
from ..event import (
    ExternalExecutionResultEvent,
    ModelCallEndEvent,
    ReplyEndEvent,
    ReplyStartEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    ToolResultEndEvent,
    UserConfirmResultEvent,
)
from ..message import Msg, ToolCallBlock, ToolResultBlock
from ..model import ChatModelBase, ChatResponse
from ..serialization import unstructure
from ..tool import ToolResponse
from ..types import ReplyFinishedReason
from . import _tracing_attrs as conv
from ._base import MiddlewareBase
from ._tracing_chat import ModelCallTrace
from ._tracing_metrics import ChatMetrics, meter_provider_in_use
from ._tracing_span import Trace, agent_models, build, conversation_id

__all__ = ["TracingMiddleware"]

logger = logging.getLogger("trioagent.middleware.tracing")

TRACER_NAME = "trioagent"
_NO_OP_TRACER = trace.NoOpTracer()  # spans of model calls measured with tracing off

_INCOMING = {
    UserConfirmResultEvent: "user_confirm_result",
    ExternalExecutionResultEvent: "external_execution_result",
}
#: The on_reply items the reply span looks at; every other event costs one set lookup.
_REPLY_WATCHED = frozenset(
    {
        ReplyStartEvent,
        ReplyEndEvent,
        ModelCallEndEvent,
        ToolResultEndEvent,
        RequireUserConfirmEvent,
        RequireExternalExecutionEvent,
    }
)


class TracingMiddleware(MiddlewareBase):
    """OpenTelemetry tracing of replies (``on_reply``), model calls (``on_model_call``) and
    tool executions (``on_acting``); see the module docstring for the span tree.

    Args:
        tracer_provider: the provider to trace with.  ``None`` (default) uses the global one
            (``opentelemetry.trace.get_tracer_provider()``), looked up on every hook call so a
            provider configured later is picked up.  Tracing is off while that provider is
            OpenTelemetry's proxy or no-op provider: every hook then just runs the inner
            layers.
        meter_provider: the provider of the GenAI client metrics, looked up likewise
            (``opentelemetry.metrics.get_meter_provider()``); metrics are off while it is the
            proxy or no-op provider.
        capture_message_content: record message content — the input and output messages of
            replies and model calls, tool arguments and results.  ``None`` (default) reads
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` when a span starts
            (``true`` turns it on); off otherwise, as the GenAI conventions require, since
            content may hold personal data.

    The instance holds no per-reply state and can be shared between agents.

    Reply span (``invoke_agent <name>``): ``gen_ai.operation.name``, ``gen_ai.agent.name``,
    ``gen_ai.agent.description``, ``gen_ai.conversation.id`` (the session id),
    ``gen_ai.input.messages`` / ``agentscope.agent.incoming_event_type``,
    ``agentscope.agent.reply_id``, ``agentscope.agent.hitl_pending_tools`` /
    ``agentscope.agent.external_execution_pending_tools`` (JSON lists of the tools a parked reply
    waits for; the parked reply also gets ``trioagent.reply.parked``), ``gen_ai.output.messages``,
    ``gen_ai.usage.input_tokens`` / ``output_tokens`` (summed over the reply's model calls) and
    ``trioagent.reply.finished_reason``.  When a parked reply resumes with an
    ``ExternalExecutionResultEvent``, each result applied gets a compensation span
    ``execute_tool <name>`` (``agentscope.agent.is_external_execution``), started when the
    event was received — these tools never ran through ``on_acting``.

    Model span (``chat <model>``, kind CLIENT): request attributes (``gen_ai.provider.name`` /
    ``gen_ai.system``, ``gen_ai.request.model``, generation parameters, tool definitions, input
    messages); on the ``is_last`` response — where a streamed call is finalized and ended —
    ``gen_ai.response.id``, ``gen_ai.response.finish_reasons`` (``tool_calls`` for a response
    that calls tools), ``gen_ai.usage.input_tokens`` / ``output_tokens`` /
    ``cache_read.input_tokens`` / ``cache_creation.input_tokens`` and output messages.

    Metrics, per model call: ``gen_ai.client.operation.duration`` (s) and
    ``gen_ai.client.token.usage`` (one record per ``gen_ai.token.type``), with
    ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
    ``server.address`` / ``server.port`` (and ``error.type`` for a failed call).

    Tool span (``execute_tool <tool>``): ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
    ``gen_ai.tool.call.arguments``, ``gen_ai.tool.description``, and on the final
    ``ToolResponse`` ``gen_ai.tool.call.result`` and ``trioagent.tool.result_state``.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        meter_provider: MeterProvider | None = None,
        capture_message_content: bool | None = None,
    ) -> None:
        self._provider = tracer_provider
        self._cached: tuple[TracerProvider, Tracer] | None = None
        self._meter_provider = meter_provider
        self._cached_metrics: tuple[MeterProvider, ChatMetrics] | None = None
        self.capture_message_content = capture_message_content

    def _capture(self) -> bool:
        """Whether spans started now record message content."""
        if self.capture_message_content is not None:
            return self.capture_message_content
        return conv.capture_content_from_env()

    def _tracer(self) -> Tracer | None:
        """The tracer to use now, or ``None`` when tracing is off (no SDK provider)."""
        provider = self._provider if self._provider is not None else trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return None
        cached = self._cached
        if cached is not None and cached[0] is provider:
            return cached[1]
        tracer = provider.get_tracer(TRACER_NAME, __version__)
        self._cached = (provider, tracer)
        return tracer

    def _metrics(self) -> ChatMetrics | None:
        """The metric instruments to record with now, or ``None`` (no SDK meter provider)."""
        provider = meter_provider_in_use(self._meter_provider)
        if provider is None:
            return None
        cached = self._cached_metrics
        if cached is not None and cached[0] is provider:
            return cached[1]
        instruments = ChatMetrics(provider)
        self._cached_metrics = (provider, instruments)
        return instruments

    @property
    def enabled(self) -> bool:
        """Whether the hooks would record spans or metrics now."""
        return self._tracer() is not None or self._metrics() is not None

    async def on_reply(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        tracer = self._tracer()
        traced = (
            build(_ReplyTrace, tracer, self._capture(), agent, input_kwargs, emit)
            if tracer is not None
            else None
        )
        if traced is None:
            await next_handler()
            return
        await traced.run(next_handler)

    async def on_model_call(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ChatResponse],
        emit: Emit[ChatResponse],
    ) -> None:
        model = input_kwargs.get("current_model")
        traced = None
        if isinstance(model, ChatModelBase):
            tracer, instruments = self._tracer(), self._metrics()
            if tracer is not None or instruments is not None:
                traced = build(
                    ModelCallTrace,
                    tracer or _NO_OP_TRACER,
                    instruments,
                    self._capture(),
                    agent,
                    model,
                    input_kwargs,
                    emit,
                )
        if traced is None:
            await next_handler()
            return
        await traced.run(next_handler)

    async def on_acting(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ActingItem],
        emit: Emit[ActingItem],
    ) -> None:
        call = input_kwargs.get("tool_call")
        tracer = self._tracer() if isinstance(call, ToolCallBlock) else None
        traced = (
            build(_ToolTrace, tracer, self._capture(), agent, call, emit)
            if tracer is not None
            else None
        )
        if traced is None:
            await next_handler()
            return
        await traced.run(next_handler)


# -- reply --------------------------------------------------------------------------------------------


class _ReplyTrace(Trace):
    __slots__ = (
        "agent",
        "cache_creation_tokens",
        "cache_read_tokens",
        "capture",
        "emit",
        "end_event",
        "external",
        "final_msg",
        "hitl",
        "input_tokens",
        "output_tokens",
        "pending_external",
        "received_ns",
        "reply_id",
        "scrub",
        "span",
        "tracer",
    )

    def __init__(
        self,
        tracer: Tracer,
        capture: bool,
        agent: object,
        input_kwargs: Mapping[str, object],
        emit: Emit,
    ) -> None:
        self.tracer = tracer
        self.capture = capture
        self.agent = agent
        self.emit = emit
        self.received_ns = time.time_ns()
        self.scrub = conv.Scrubber(conv.secrets_of(agent_models(agent)))
        self.reply_id: str | None = None
        self.end_event: ReplyEndEvent | None = None
        self.final_msg: Msg | None = None
        self.hitl: list[str] = []
        self.external: list[str] = []
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read_tokens = 0
        self.cache_creation_tokens = 0
        self.pending_external: dict[str, ToolResultBlock] = {}

        inputs = input_kwargs.get("inputs")
        name = str(getattr(agent, "name", type(agent).__name__))
        messages: list[Msg] | None = None
        if isinstance(inputs, Msg):
            messages = [inputs]
        elif isinstance(inputs, list | tuple) and all(isinstance(m, Msg) for m in inputs):
            messages = list(inputs)
        if isinstance(inputs, ExternalExecutionResultEvent):
            self.pending_external = {r.id: r for r in inputs.execution_results}
        self.span = self.start(
            tracer,
            f"invoke_agent {name}",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": name,
                "gen_ai.agent.description": conv.agent_description(agent),
                "gen_ai.conversation.id": conversation_id(agent),
                "gen_ai.input.messages": (
                    conv.to_json([conv.to_otel_message(m) for m in messages])
                    if messages is not None and capture
                    else None
                ),
                "agentscope.agent.incoming_event_type": _INCOMING.get(type(inputs)),
            },
        )

    async def sink(self, item: object) -> None:
        if type(item) in _REPLY_WATCHED:
            try:
                self.observe(item)
            except Exception:  # tracing must never break the event stream
                logger.exception("TracingMiddleware failed to observe %s", type(item).__name__)
        elif isinstance(item, Msg):
            self.final_msg = item
        await self.emit(item)

    def observe(self, item: object) -> None:
        if isinstance(item, ReplyStartEvent):
            self.reply_id = item.reply_id
        elif isinstance(item, ReplyEndEvent):
            self.end_event = item
        elif isinstance(item, ModelCallEndEvent):
            self.input_tokens += item.input_tokens
            self.output_tokens += item.output_tokens
            self.cache_read_tokens += item.cache_input_tokens
            self.cache_creation_tokens += item.cache_creation_input_tokens
        elif isinstance(item, ToolResultEndEvent):
            result = self.pending_external.pop(item.tool_call_id, None)
            if result is not None and item.state == result.state:
                self.compensation_span(result)
        elif isinstance(item, RequireUserConfirmEvent):
            self.hitl.extend(c.name for c in item.tool_calls)
            self.span.add_event(
                "require_user_confirm",
                {"gen_ai.tool.call.id": [c.id for c in item.tool_calls]},
            )
        elif isinstance(item, RequireExternalExecutionEvent):
            self.external.extend(c.name for c in item.tool_calls)
            self.span.add_event(
                "require_external_execution",
                {"gen_ai.tool.call.id": [c.id for c in item.tool_calls]},
            )

    def compensation_span(self, result: ToolResultBlock) -> None:
        """A span for a tool the caller executed (it never ran through ``on_acting``),
        stamped from the moment the result event was received."""
        span = self.tracer.start_span(
            f"execute_tool {result.name}",
            context=trace.set_span_in_context(self.span),
            start_time=self.received_ns,
            attributes=conv.clean_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.call.id": result.id,
                    "gen_ai.tool.name": result.name,
                    "gen_ai.conversation.id": conversation_id(self.agent),
                    "agentscope.agent.is_external_execution": True,
                    "gen_ai.tool.call.result": (
                        conv.to_json(result.output) if self.capture else None
                    ),
                    "trioagent.tool.result_state": str(result.state),
                },
                self.scrub,
            ),
        )
        span.end()

    def finish(self, error: BaseException | None) -> None:
        state = getattr(self.agent, "state", None)
        end = self.end_event
        cancelled = error is not None and is_cancellation(error)
        reason: str | None = str(end.finished_reason) if end is not None else None
        if reason is None and cancelled:
            reason = str(ReplyFinishedReason.INTERRUPTED)
        parked = reason is None and error is None and bool(self.hitl or self.external)
        self.set(
            {
                "agentscope.agent.reply_id": self.reply_id
                or getattr(state, "reply_id", None)
                or None,
                "agentscope.agent.hitl_pending_tools": (
                    conv.to_json(self.hitl) if self.hitl else None
                ),
                "agentscope.agent.external_execution_pending_tools": (
                    conv.to_json(self.external) if self.external else None
                ),
                "gen_ai.usage.input_tokens": self.input_tokens,
                "gen_ai.usage.output_tokens": self.output_tokens,
                "gen_ai.usage.cache_read.input_tokens": self.cache_read_tokens or None,
                "gen_ai.usage.cache_creation.input_tokens": self.cache_creation_tokens or None,
                "gen_ai.output.messages": (
                    conv.to_json([conv.to_otel_message(self.final_msg, _output_reason(reason))])
                    if self.final_msg is not None and self.capture
                    else None
                ),
                "trioagent.reply.finished_reason": reason,
                "trioagent.reply.parked": True if parked else None,
            }
        )
        if error is not None and not cancelled:
            self.record_error(error)
        elif end is not None and end.finished_reason == ReplyFinishedReason.ERROR:
            message = end.error.message if end.error is not None else "the reply failed"
            self.span.set_status(Status(StatusCode.ERROR, self.scrub.error_text(message)))
        elif reason != ReplyFinishedReason.INTERRUPTED:
            self.span.set_status(Status(StatusCode.OK))


def _output_reason(reply_reason: str | None) -> str:
    """The output message's ``finish_reason`` for a reply that ended with ``reply_reason``."""
    if reply_reason is None or reply_reason == ReplyFinishedReason.COMPLETED:
        return "stop"
    return reply_reason


# -- tool execution ------------------------------------------------------------------------------------


class _ToolTrace(Trace):
    __slots__ = ("capture", "emit", "response", "scrub", "span")

    def __init__(
        self, tracer: Tracer, capture: bool, agent: object, call: ToolCallBlock, emit: Emit
    ) -> None:
        self.capture = capture
        self.emit = emit
        self.response: ToolResponse | None = None
        self.scrub = conv.Scrubber(conv.secrets_of(agent_models(agent)))
        toolkit = getattr(agent, "toolkit", None)
        tool = toolkit.get_tool(call.name) if toolkit is not None else None
        description = getattr(tool, "description", None)
        self.span = self.start(
            tracer,
            f"execute_tool {call.name}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.call.id": call.id,
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.arguments": call.input if capture else None,
                "gen_ai.tool.description": description if isinstance(description, str) else None,
                "gen_ai.conversation.id": conversation_id(agent),
            },
        )

    async def sink(self, item: object) -> None:
        if isinstance(item, ToolResponse):
            self.response = item
        await self.emit(item)

    def finish(self, error: BaseException | None) -> None:
        response = self.response
        cancelled = error is not None and is_cancellation(error)
        interrupted = cancelled or (response is not None and response.state == "interrupted")
        if response is not None:
            self.set(
                {
                    "gen_ai.tool.call.result": (
                        conv.to_json(unstructure(response)) if self.capture else None
                    ),
                    "trioagent.tool.result_state": str(response.state),
                    "trioagent.interrupted": True if interrupted else None,
                }
            )
        elif interrupted:
            self.span.set_attribute("trioagent.interrupted", True)
        if error is not None and not cancelled:
            self.record_error(error)
        elif response is None and not cancelled:
            self.span.set_status(
                Status(StatusCode.ERROR, "the tool execution ended without a ToolResponse")
            )
        elif not interrupted:
            self.span.set_status(Status(StatusCode.OK))

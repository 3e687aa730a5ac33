"""``TracingMiddleware``: OpenTelemetry spans for replies, model calls and tool executions.

Follows the OpenTelemetry GenAI semantic conventions.  Span tree of one reply with one tool
call::

    invoke_agent <agent>          on_reply       (parent: the caller's current span, if any)
    ├── chat <model>              on_model_call
    ├── execute_tool <tool>       on_acting      (also for tools of the concurrent acting nursery)
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
* With no SDK tracer provider (the global provider is OpenTelemetry's proxy or no-op one, and
  none was passed), every hook is ``await next_handler()``: no sink, no per-event work.

Attribute names are those AgentScope's tracing uses (``gen_ai.*`` and ``agentscope.agent.*``), so that
dashboards built for AgentScope keep working; trioagent's own additions are ``trioagent.*``.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from opentelemetry import context as otel_context, trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer, TracerProvider

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
from ..types import FinishedReason, ReplyFinishedReason
from . import _tracing_attrs as conv
from ._base import MiddlewareBase

__all__ = ["TracingMiddleware"]

logger = logging.getLogger("trioagent.middleware.tracing")
_T = TypeVar("_T")

NO_SESSION_ID = "[no_session_id]"
TRACER_NAME = "trioagent"

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

    Model span (``chat <model>``): request attributes (``gen_ai.provider.name`` /
    ``gen_ai.system``, ``gen_ai.request.model``, generation parameters, tool definitions, input
    messages); on the ``is_last`` response — where a streamed call is finalized and ended —
    ``gen_ai.response.id``, ``gen_ai.response.finish_reasons``, usage and output messages.

    Tool span (``execute_tool <tool>``): ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
    ``gen_ai.tool.call.arguments``, ``gen_ai.tool.description``, and on the final
    ``ToolResponse`` ``gen_ai.tool.call.result`` and ``trioagent.tool.result_state``.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self._provider = tracer_provider
        self._cached: tuple[TracerProvider, Tracer] | None = None

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

    @property
    def enabled(self) -> bool:
        """Whether the hooks would record spans now."""
        return self._tracer() is not None

    async def on_reply(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        tracer = self._tracer()
        traced = (
            _build(_ReplyTrace, tracer, agent, input_kwargs, emit) if tracer is not None else None
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
        tracer = self._tracer() if isinstance(model, ChatModelBase) else None
        traced = (
            _build(_ModelCallTrace, tracer, agent, model, input_kwargs, emit)
            if tracer is not None
            else None
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
        traced = _build(_ToolTrace, tracer, agent, call, emit) if tracer is not None else None
        if traced is None:
            await next_handler()
            return
        await traced.run(next_handler)


# -- shared span handling ---------------------------------------------------------------------------


def _build(factory: Callable[..., _T], *args: object) -> _T | None:
    """Start a span; on a tracing bug, log it and run untraced (the span is started last, so
    a failure leaves no span open)."""
    try:
        return factory(*args)
    except Exception:
        logger.exception("TracingMiddleware could not start a span; running untraced")
        return None


def _conversation_id(agent: object) -> str:
    state = getattr(agent, "state", None)
    session_id = getattr(state, "session_id", None)
    return session_id if isinstance(session_id, str) and session_id else NO_SESSION_ID


def _agent_models(agent: object) -> list[object]:
    models = [getattr(agent, "model", None)]
    config = getattr(agent, "model_config", None)
    models.append(getattr(config, "fallback_model", None))
    return [m for m in models if m is not None]


class _Trace:
    """One span: scrubbed attributes, the attach/detach around the inner layers, the end."""

    __slots__ = ()
    span: Span
    scrub: conv.Scrubber

    def start(self, tracer: Tracer, name: str, attributes: Mapping[str, object]) -> Span:
        """Start the span (parent: the current context) with all its start attributes."""
        return tracer.start_span(name, attributes=conv.clean_attributes(attributes, self.scrub))

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


# -- reply --------------------------------------------------------------------------------------------


class _ReplyTrace(_Trace):
    __slots__ = (
        "agent",
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
        self, tracer: Tracer, agent: object, input_kwargs: Mapping[str, object], emit: Emit
    ) -> None:
        self.tracer = tracer
        self.agent = agent
        self.emit = emit
        self.received_ns = time.time_ns()
        self.scrub = conv.Scrubber(conv.secrets_of(_agent_models(agent)))
        self.reply_id: str | None = None
        self.end_event: ReplyEndEvent | None = None
        self.final_msg: Msg | None = None
        self.hitl: list[str] = []
        self.external: list[str] = []
        self.input_tokens = 0
        self.output_tokens = 0
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
                "gen_ai.conversation.id": _conversation_id(agent),
                "gen_ai.input.messages": (
                    conv.to_json([conv.to_otel_message(m) for m in messages])
                    if messages is not None
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
                    "gen_ai.conversation.id": _conversation_id(self.agent),
                    "agentscope.agent.is_external_execution": True,
                    "gen_ai.tool.call.result": conv.to_json(result.output),
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
                "gen_ai.output.messages": (
                    conv.to_json([conv.to_otel_message(self.final_msg)])
                    if self.final_msg is not None
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


# -- model call ----------------------------------------------------------------------------------------


class _ModelCallTrace(_Trace):
    __slots__ = ("emit", "finalized", "scrub", "span")

    def __init__(
        self,
        tracer: Tracer,
        agent: object,
        model: ChatModelBase,
        input_kwargs: Mapping[str, object],
        emit: Emit,
    ) -> None:
        self.emit = emit
        self.finalized = False
        self.scrub = conv.Scrubber(conv.secrets_of([model, *_agent_models(agent)]))
        provider = conv.provider_name(model)
        host, port = conv.server_address(model)
        messages = input_kwargs.get("messages")
        if not isinstance(messages, Iterable):
            messages = []
        self.span = self.start(
            tracer,
            f"chat {model.model}",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.system": provider,
                "gen_ai.request.model": model.model,
                "gen_ai.conversation.id": _conversation_id(agent),
                "server.address": host,
                "server.port": port,
                **conv.request_attributes(model, input_kwargs),
                "gen_ai.tool.definitions": conv.tool_definitions(
                    input_kwargs.get("tools"), input_kwargs.get("tool_choice")
                ),
                "gen_ai.input.messages": conv.to_json(
                    [conv.to_otel_message(m) for m in messages if isinstance(m, Msg)]
                ),
            },
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
                attributes["gen_ai.output.messages"] = conv.to_json(
                    conv.chat_output_messages(response)
                )
                if usage is not None:
                    attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
                    attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
                    attributes["agentscope.usage.cache_input_tokens"] = (
                        usage.cache_input_tokens or None
                    )
                    attributes["agentscope.usage.cache_creation_input_tokens"] = (
                        usage.cache_creation_input_tokens or None
                    )
                if interrupted:
                    attributes["trioagent.interrupted"] = True
            self.set(attributes)
            if not interrupted:
                self.span.set_status(Status(StatusCode.OK))
        except Exception:
            logger.exception("TracingMiddleware failed to record a model response")
        finally:
            self.end()

    def finish(self, error: BaseException | None) -> None:
        if self.finalized:
            return
        if error is None:
            self.span.set_status(
                Status(StatusCode.ERROR, "the model call ended without an is_last response")
            )
        elif is_cancellation(error):
            self.span.set_attribute("trioagent.interrupted", True)
        else:
            self.record_error(error)


# -- tool execution ------------------------------------------------------------------------------------


class _ToolTrace(_Trace):
    __slots__ = ("emit", "response", "scrub", "span")

    def __init__(self, tracer: Tracer, agent: object, call: ToolCallBlock, emit: Emit) -> None:
        self.emit = emit
        self.response: ToolResponse | None = None
        self.scrub = conv.Scrubber(conv.secrets_of(_agent_models(agent)))
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
                "gen_ai.tool.call.arguments": call.input,
                "gen_ai.tool.description": description if isinstance(description, str) else None,
                "gen_ai.conversation.id": _conversation_id(agent),
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
                    "gen_ai.tool.call.result": conv.to_json(unstructure(response)),
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

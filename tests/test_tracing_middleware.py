"""TracingMiddleware: the span tree of replies, model calls and tool executions, and its edge
cases (nesting, concurrency, HITL, retries, background tools, broken processors, big
attributes, cancellation sweeps).

Spans go to an SDK ``TracerProvider`` passed to the middleware explicitly, with a
``SimpleSpanProcessor`` + ``InMemorySpanExporter`` and a processor that tracks which spans were
started and not ended; the global provider is never changed.  Message content is recorded
here (the conventions' environment switch is set for every test of this module); the
switch itself, span kinds and metrics are tested in test_tracing_semconv.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing
from agent_kit import (
    ALLOW,
    call,
    calls,
    confirm,
    ends,
    make_agent,
    run,
    run_and_interrupt,
    text,
    tool_calls,
    user,
)
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tracing_kit import Otel, new_otel

from trioagent.agent import Agent, ModelConfig
from trioagent.credential import OpenAICredential
from trioagent.event import (
    ExternalExecutionResultEvent,
    ModelCallEndEvent,
    ReplyEndEvent,
    ToolResultTextDeltaEvent,
    UserInterruptEvent,
)
from trioagent.message import TextBlock, ToolResultBlock, ToolResultState
from trioagent.middleware import (
    MiddlewareBase,
    ReplyBudgetControlMiddleware,
    TracingMiddleware,
    _tracing_attrs,
)
from trioagent.middleware._tracing_attrs import Scrubber, provider_name, to_json
from trioagent.model import ChatResponse, ChatUsage
from trioagent.testing import ScriptedModel, SweepRun, cancel_sweep, text_chunks
from trioagent.tool import ToolBase, ToolChunk, Toolkit
from trioagent.types import FinishedReason, ReplyFinishedReason

MAX_TOKENS = FinishedReason.MAX_TOKENS

FAKE_KEY = "sk-FAKEKEY-0123456789abcdef"
FAKE_URL_PASSWORD = "pw-FAKEURLSECRET-42"


@pytest.fixture(autouse=True)
def _capture_content(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")


@pytest.fixture
def otel() -> Otel:
    return new_otel()


def attr(span: ReadableSpan, key: str) -> Any:
    assert span.attributes is not None
    return span.attributes.get(key)


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def usage_text(value: str, inp: int, out: int) -> ChatResponse:
    return ChatResponse(
        content=[TextBlock(text=value)], usage=ChatUsage(input_tokens=inp, output_tokens=out)
    )


def weather_toolkit() -> Toolkit:
    toolkit = Toolkit()

    async def get_weather(city: str) -> str:
        """Get the weather of a city."""
        return f"{city}: clear sky"

    toolkit.register_function(get_weather, permission=ALLOW)
    return toolkit


def traced(
    otel_or_mw: Otel | TracingMiddleware,
    steps: Sequence[Any],
    toolkit: Toolkit | None = None,
    **kw: Any,
) -> Agent:
    """An agent traced by ``otel_or_mw`` (after the middlewares of ``before=[...]``)."""
    mw = (
        otel_or_mw
        if isinstance(otel_or_mw, TracingMiddleware)
        else TracingMiddleware(tracer_provider=otel_or_mw.provider)
    )
    return make_agent(steps, toolkit, middlewares=[*kw.pop("before", []), mw], **kw)


# -- the span tree and its attributes ----------------------------------------------------------------


async def test_reply_with_a_tool_builds_one_nested_tree(otel: Otel) -> None:
    agent = traced(
        otel,
        [
            calls(call("c1", "get_weather", city="Wuhan")),
            usage_text("Wuhan weather: clear sky.", 15, 8),
        ],
        weather_toolkit(),
    )
    await run(agent, user("Simple question?"))

    reply = otel.one("invoke_agent")
    chats = otel.spans("chat ")
    tool = otel.one("execute_tool")
    assert reply.name == "invoke_agent agent"
    assert reply.parent is None
    assert [s.name for s in chats] == ["chat scripted-model", "chat scripted-model"]
    for child in [*chats, tool]:
        assert parent_id(child) == reply.context.span_id
        assert child.context.trace_id == reply.context.trace_id
    every = otel.spans()
    assert {attr(s, "gen_ai.conversation.id") for s in every} == {agent.state.session_id}
    assert otel.tracker.open == {}

    assert attr(reply, "gen_ai.operation.name") == "invoke_agent"
    assert attr(reply, "gen_ai.agent.name") == "agent"
    assert attr(reply, "gen_ai.agent.description").startswith("A ReAct agent")
    assert json.loads(attr(reply, "gen_ai.input.messages")) == [
        {
            "role": "user",
            "parts": [{"type": "text", "content": "Simple question?"}],
            "name": "user",
        }
    ]
    assert json.loads(attr(reply, "gen_ai.output.messages")) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Wuhan weather: clear sky."}],
            "name": "agent",
            "finish_reason": "stop",
        }
    ]
    assert attr(reply, "agentscope.agent.reply_id") == agent.state.reply_id
    assert attr(reply, "trioagent.reply.finished_reason") == "completed"
    assert attr(reply, "agentscope.agent.hitl_pending_tools") is None
    assert attr(reply, "gen_ai.usage.output_tokens") == 8
    assert reply.status.status_code == StatusCode.OK

    first, last = chats
    assert attr(last, "gen_ai.operation.name") == "chat"
    assert attr(last, "gen_ai.request.model") == "scripted-model"
    assert attr(last, "gen_ai.provider.name") == "unknown"
    assert attr(last, "gen_ai.usage.input_tokens") == 15
    assert attr(last, "gen_ai.usage.output_tokens") == 8
    assert list(attr(last, "gen_ai.response.finish_reasons")) == ["stop"]
    assert json.loads(attr(last, "gen_ai.output.messages")) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Wuhan weather: clear sky."}],
            "finish_reason": "stop",
        }
    ]
    assert list(attr(first, "gen_ai.response.finish_reasons")) == ["tool_calls"]
    (definition,) = json.loads(attr(first, "gen_ai.tool.definitions"))
    assert definition["name"] == "get_weather"
    assert definition["type"] == "function"
    assert json.loads(attr(first, "gen_ai.output.messages"))[0]["parts"] == [
        {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Wuhan"}}
    ]
    assert first.status.status_code == StatusCode.OK

    assert tool.name == "execute_tool get_weather"
    assert attr(tool, "gen_ai.tool.name") == "get_weather"
    assert attr(tool, "gen_ai.tool.call.id") == "c1"
    assert json.loads(attr(tool, "gen_ai.tool.call.arguments")) == {"city": "Wuhan"}
    assert attr(tool, "gen_ai.tool.description") == "Get the weather of a city."
    result = json.loads(attr(tool, "gen_ai.tool.call.result"))
    assert result["state"] == "success"
    assert result["content"][0]["text"] == "Wuhan: clear sky"
    assert tool.status.status_code == StatusCode.OK


async def test_caller_span_is_the_parent_and_tool_definitions_drop_with_mode_none(
    otel: Otel,
) -> None:
    agent = traced(
        otel,
        [text("ok")],
        weather_toolkit(),
        before=[ReplyBudgetControlMiddleware(token_budget=0)],
    )
    tracer = otel.provider.get_tracer("test")
    with tracer.start_as_current_span("caller") as caller:
        await run(agent, user())
    reply = otel.one("invoke_agent")
    assert parent_id(reply) == caller.get_span_context().span_id
    assert attr(otel.one("chat"), "gen_ai.tool.definitions") is None  # tool_choice "none"


async def test_streamed_model_span_is_finalized_on_the_last_chunk(otel: Otel) -> None:
    seen: list[tuple[bool, int]] = []

    class Watch(MiddlewareBase):
        """Outside the tracing layer: what was finished when each chunk passed."""

        async def on_model_call(
            self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any
        ) -> None:
            async def sink(chunk: Any) -> None:
                seen.append((chunk.is_last, len(otel.spans("chat"))))
                await emit(chunk)

            await next_handler(sink)

    chunks = text_chunks("Hel", "lo", usage=ChatUsage(input_tokens=3, output_tokens=2))
    agent = traced(otel, [chunks], before=[Watch()])
    await run(agent, user())
    # Not ended during the deltas; ended (with the response recorded) when is_last passed.
    assert seen == [(False, 0), (False, 0), (True, 1)]
    chat = otel.one("chat")
    assert json.loads(attr(chat, "gen_ai.output.messages"))[0]["parts"] == [
        {"type": "text", "content": "Hello"}
    ]
    assert attr(chat, "gen_ai.usage.input_tokens") == 3
    assert chat.status.status_code == StatusCode.OK


async def test_parallel_tools_are_children_of_the_reply_span(otel: Otel) -> None:
    both_started = trio.Event()
    started: list[str] = []
    current: dict[str, Any] = {}
    toolkit = Toolkit()

    async def probe(name: str) -> str:
        """Waits until both calls run: only passes when they run concurrently."""
        current[name] = trace.get_current_span().get_span_context().span_id
        started.append(name)
        if len(started) == 2:
            both_started.set()
        await both_started.wait()
        return name

    toolkit.register_function(probe, permission=ALLOW)
    agent = traced(
        otel, [calls(call("p1", "probe", name="a"), call("p2", "probe", name="b")), text("done")]
    )
    agent.toolkit = toolkit
    with trio.fail_after(5):
        await run(agent, user())
    reply = otel.one("invoke_agent")
    tools = otel.spans("execute_tool")
    assert sorted(attr(s, "gen_ai.tool.call.id") for s in tools) == ["p1", "p2"]
    assert {parent_id(s) for s in tools} == {reply.context.span_id}
    # Inside the tool, its own span is current (so a tool's spans nest under it).
    by_call = {attr(s, "gen_ai.tool.call.id"): s.context.span_id for s in tools}
    assert current == {"a": by_call["p1"], "b": by_call["p2"]}
    assert otel.tracker.open == {}


# -- interruption, cancellation, errors --------------------------------------------------------------


async def test_interrupted_reply_is_marked_interrupted_not_error(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    slow = text_chunks(*(["tok "] * 20))
    agent = traced(otel, [slow])
    agent.model.chunk_delay = 1.0  # type: ignore[attr-defined]
    msg, events = await run_and_interrupt(agent, user(), after=5.5)
    assert msg is not None
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert ends(events)[0].finished_reason == ReplyFinishedReason.INTERRUPTED
    assert otel.tracker.open == {}
    reply = otel.one("invoke_agent")
    assert attr(reply, "trioagent.reply.finished_reason") == "interrupted"
    assert reply.status.status_code == StatusCode.UNSET
    assert not [e for e in reply.events if e.name == "exception"]
    chat = otel.one("chat")
    assert list(attr(chat, "gen_ai.response.finish_reasons")) == ["interrupted"]
    assert attr(chat, "trioagent.interrupted") is True
    assert chat.status.status_code == StatusCode.UNSET


async def test_a_response_cut_off_at_the_output_limit_reports_length(otel: Otel) -> None:
    """GenAI's ``length`` finish reason for a response that hit the output limit."""
    cut = [*text_chunks("half an ans"), ChatResponse(content=[], finished_reason=MAX_TOKENS)]
    agent = traced(otel, [cut])
    await run(agent, user())
    (first,) = otel.spans("chat ")
    assert list(attr(first, "gen_ai.response.finish_reasons")) == ["length"]
    assert json.loads(attr(first, "gen_ai.output.messages"))[0]["finish_reason"] == "length"


async def test_a_response_stopped_by_a_content_filter_reports_content_filter(otel: Otel) -> None:
    """GenAI's ``content_filter`` finish reason for a response a provider's filter stopped."""
    stopped = [
        *text_chunks("half an ans"),
        ChatResponse(content=[], finished_reason=FinishedReason.CONTENT_FILTER),
    ]
    agent = traced(otel, [stopped])
    await run(agent, user())
    (first,) = otel.spans("chat ")
    assert list(attr(first, "gen_ai.response.finish_reasons")) == ["content_filter"]
    output = json.loads(attr(first, "gen_ai.output.messages"))
    assert output[0]["finish_reason"] == "content_filter"


async def test_outer_cancellation_during_a_tool_ends_every_span(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    toolkit = Toolkit()

    async def sleepy(seconds: float) -> str:
        """Sleeps."""
        await trio.sleep(seconds)
        return "woke"

    toolkit.register_function(sleepy, permission=ALLOW)
    agent = traced(otel, [calls(call("s1", "sleepy", seconds=100)), text("never")], toolkit)
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    with trio.move_on_after(10) as scope:
        await agent.reply(user(), on_event=record)
    assert scope.cancelled_caught  # the Cancelled propagated out of reply()
    assert ends(events)[-1].finished_reason == ReplyFinishedReason.INTERRUPTED
    assert otel.tracker.open == {}
    tool = otel.one("execute_tool")
    assert attr(tool, "trioagent.interrupted") is True
    assert tool.status.status_code == StatusCode.UNSET
    reply = otel.one("invoke_agent")
    assert attr(reply, "trioagent.reply.finished_reason") == "interrupted"
    assert reply.status.status_code == StatusCode.UNSET


async def test_error_reply_has_error_status_and_the_exception(otel: Otel) -> None:
    agent = traced(otel, [RuntimeError("model exploded")])
    with pytest.raises(RuntimeError, match="model exploded"):
        await agent.reply(user())
    assert otel.tracker.open == {}
    reply = otel.one("invoke_agent")
    assert reply.status.status_code == StatusCode.ERROR
    assert reply.status.description == "model exploded"
    assert attr(reply, "trioagent.reply.finished_reason") == "error"
    assert attr(reply, "error.type") == "RuntimeError"
    (exception,) = [e for e in reply.events if e.name == "exception"]
    assert exception.attributes is not None
    assert exception.attributes["exception.type"] == "RuntimeError"
    assert exception.attributes["exception.message"] == "model exploded"
    chat = otel.one("chat")
    assert chat.status.status_code == StatusCode.ERROR


async def test_failing_tool_middleware_marks_the_tool_span_error(otel: Otel) -> None:
    class Broken(MiddlewareBase):
        async def on_acting(
            self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any
        ) -> None:
            raise ValueError("acting layer broke")

    agent = make_agent(
        [calls(call("c1", "get_weather", city="x")), text("never")],
        weather_toolkit(),
        middlewares=[TracingMiddleware(tracer_provider=otel.provider), Broken()],
    )
    with pytest.raises(ValueError, match="acting layer broke"):
        await agent.reply(user())
    tool = otel.one("execute_tool")
    assert tool.status.status_code == StatusCode.ERROR
    assert attr(tool, "error.type") == "ValueError"
    assert otel.one("invoke_agent").status.status_code == StatusCode.ERROR
    assert otel.tracker.open == {}


# -- human in the loop ----------------------------------------------------------------------------------


def ask_toolkit() -> Toolkit:
    toolkit = Toolkit()

    async def get_weather(city: str) -> str:
        """Needs confirmation."""
        return f"{city}: rain"

    toolkit.register_function(get_weather)  # no permission: the engine asks
    return toolkit


async def test_hitl_park_and_confirm(otel: Otel) -> None:
    agent = traced(
        otel, [calls(call("w1", "get_weather", city="Oslo")), text("rainy")], ask_toolkit()
    )
    _, events = await run(agent, user())
    assert ends(events) == []
    parked = otel.one("invoke_agent")
    assert json.loads(attr(parked, "agentscope.agent.hitl_pending_tools")) == ["get_weather"]
    assert attr(parked, "trioagent.reply.parked") is True
    assert attr(parked, "trioagent.reply.finished_reason") is None
    assert parked.status.status_code == StatusCode.OK
    assert [e.name for e in parked.events] == ["require_user_confirm"]
    otel.reset()

    await run(agent, confirm(tool_calls(agent)["w1"]))
    resumed = otel.one("invoke_agent")
    assert attr(resumed, "agentscope.agent.incoming_event_type") == "user_confirm_result"
    assert attr(resumed, "gen_ai.input.messages") is None
    assert attr(resumed, "agentscope.agent.reply_id") == attr(parked, "agentscope.agent.reply_id")
    assert attr(resumed, "trioagent.reply.finished_reason") == "completed"
    assert parent_id(otel.one("execute_tool")) == resumed.context.span_id


class External(ToolBase):
    name = "get_weather"
    description = "Executed by the caller."
    input_schema = {"type": "object", "properties": {"city": {"type": "string"}}}  # noqa: RUF012
    is_external_tool = True

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> Any:
        return ALLOW


async def test_external_execution_gets_a_compensation_span(otel: Otel) -> None:
    agent = traced(
        otel, [calls(call("x1", "get_weather", city="Rome")), text("sunny")], Toolkit([External()])
    )
    await run(agent, user())
    parked = otel.one("invoke_agent")
    assert json.loads(attr(parked, "agentscope.agent.external_execution_pending_tools")) == [
        "get_weather"
    ]
    assert otel.spans("execute_tool") == []
    otel.reset()

    result = ToolResultBlock(
        id="x1", name="get_weather", output="Rome: sun", state=ToolResultState.SUCCESS
    )
    await run(agent, ExternalExecutionResultEvent(execution_results=[result]))
    resumed = otel.one("invoke_agent")
    assert attr(resumed, "agentscope.agent.incoming_event_type") == "external_execution_result"
    assert attr(resumed, "agentscope.agent.reply_id") == attr(parked, "agentscope.agent.reply_id")
    compensation = otel.one("execute_tool")
    assert compensation.name == "execute_tool get_weather"
    assert parent_id(compensation) == resumed.context.span_id
    assert attr(compensation, "agentscope.agent.is_external_execution") is True
    assert attr(compensation, "gen_ai.tool.call.id") == "x1"
    assert attr(compensation, "gen_ai.tool.name") == "get_weather"
    assert attr(compensation, "gen_ai.tool.call.result") == '"Rome: sun"'
    chat_start = otel.one("chat").start_time
    assert compensation.start_time is not None
    assert chat_start is not None
    assert compensation.start_time <= chat_start  # stamped when the event was received
    assert otel.tracker.open == {}


async def test_rejected_external_result_gets_no_compensation_span(otel: Otel) -> None:
    agent = traced(otel, [calls(call("x1", "get_weather", city="Rome"))], Toolkit([External()]))
    await run(agent, user())
    otel.reset()
    wrong = ToolResultBlock(id="nope", name="get_weather", output="?")
    with pytest.raises(ValueError, match="not awaiting"):
        await agent.reply(ExternalExecutionResultEvent(execution_results=[wrong]))
    assert otel.spans("execute_tool") == []
    assert otel.one("invoke_agent").status.status_code == StatusCode.ERROR


# -- credentials ---------------------------------------------------------------------------------------


def all_strings(span: ReadableSpan) -> list[str]:
    found = [span.name, span.status.description or ""]
    attributes = [span.attributes or {}, *(e.attributes or {} for e in span.events)]
    for mapping in attributes:
        for key, value in mapping.items():
            found.append(key)
            found.extend(str(v) for v in value) if isinstance(value, tuple) else found.append(
                str(value)
            )
    return found


async def test_no_api_key_in_any_span(otel: Otel) -> None:
    credential = OpenAICredential(
        api_key=FAKE_KEY, base_url=f"https://bot:{FAKE_URL_PASSWORD}@llm.example.com:8443/v1"
    )
    leak = f"Authorization: Bearer {FAKE_KEY} for https://llm.example.com/?key={FAKE_KEY}"
    agent = traced(
        otel,
        [calls(call("c1", "get_weather", city=FAKE_KEY)), text(f"echo {FAKE_KEY}")],
        weather_toolkit(),
    )
    agent.model.credential = credential
    await run(agent, user(f"my key is {FAKE_KEY}"))
    failing = traced(otel, [RuntimeError(leak)])
    failing.model.credential = credential
    with pytest.raises(RuntimeError):
        await failing.reply(user())

    spans = otel.spans()
    assert len(spans) == 6
    for span in spans:
        for value in all_strings(span):
            assert FAKE_KEY not in value, (span.name, value)
            assert FAKE_URL_PASSWORD not in value, (span.name, value)
    chat = otel.spans("chat")[0]
    assert attr(chat, "server.address") == "llm.example.com"
    assert attr(chat, "server.port") == 8443
    assert "***" in attr(otel.spans("invoke_agent")[0], "gen_ai.input.messages")


def test_scrubber_and_provider_names() -> None:
    scrub = Scrubber(["abcd1234", "abc", ""])
    assert scrub.secrets == ("abcd1234",)  # too-short secrets are ignored
    assert scrub("x abcd1234 y") == "x *** y"
    assert scrub.error_text("api_key=zzz9 and Bearer qqq") == "api_key=*** and Bearer ***"

    class OpenAIChatModel:
        def __init__(self, url: str | None) -> None:
            self.credential = OpenAICredential(api_key="k", base_url=url)

    class DeepSeekChatModel:
        pass

    assert provider_name(OpenAIChatModel("https://api.deepseek.com/v1")) == "deepseek"
    assert provider_name(OpenAIChatModel("http://127.0.0.1:8000/v1")) == "openai"
    assert provider_name(DeepSeekChatModel()) == "deepseek"
    assert to_json({"when": ReplyFinishedReason.ERROR, "s": {1}}) == '{"when": "error", "s": [1]}'


# -- no provider: no spans, no per-event work ------------------------------------------------------------


class EmitProbe(MiddlewareBase):
    """Records the ``emit`` each streaming hook receives."""

    def __init__(self) -> None:
        self.emits: dict[str, list[Any]] = {}

    async def _record(self, hook: str, next_handler: Any, emit: Any) -> None:
        self.emits.setdefault(hook, []).append(emit)
        await next_handler()

    async def on_reply(self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any) -> None:
        await self._record("on_reply", next_handler, emit)

    async def on_model_call(
        self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any
    ) -> None:
        await self._record("on_model_call", next_handler, emit)

    async def on_acting(self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any) -> None:
        await self._record("on_acting", next_handler, emit)


async def test_no_sdk_provider_means_no_spans_and_no_per_event_work(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    inside: list[Any] = []
    toolkit = Toolkit()

    async def peek() -> str:
        """Looks at the current span."""
        inside.append(trace.get_current_span())
        return "ok"

    toolkit.register_function(peek, permission=ALLOW)
    outer, inner = EmitProbe(), EmitProbe()
    for tracing in (TracingMiddleware(), TracingMiddleware(trace.NoOpTracerProvider())):
        assert not tracing.enabled
        agent = make_agent(
            [calls(call("c1", "peek")), text("done")],
            toolkit,
            middlewares=[outer, tracing, inner],
        )
        await run(agent, user())
    # The inner layers received the very emit the tracing layer got: no sink was wrapped.
    for hook in ("on_reply", "on_model_call", "on_acting"):
        assert len(inner.emits[hook]) == len(outer.emits[hook]) > 0
        assert all(a is b for a, b in zip(inner.emits[hook], outer.emits[hook], strict=True))
    assert inside == [trace.INVALID_SPAN, trace.INVALID_SPAN]
    assert otel.tracker.started == 0


async def test_global_sdk_provider_is_used_by_default(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: otel.provider)
    tracing = TracingMiddleware()
    assert tracing.enabled
    agent = make_agent([text("hi")], middlewares=[tracing])
    await run(agent, user())
    assert [s.name for s in otel.spans()] == ["chat scripted-model", "invoke_agent agent"]
    assert otel.one("invoke_agent").instrumentation_scope.name == "trioagent"  # type: ignore[union-attr]


async def test_fallback_model_call_gets_its_own_span(otel: Otel) -> None:
    fallback = ScriptedModel([text("from fallback")], model="backup-model")
    agent = traced(
        otel, [RuntimeError("primary down")], model_config=ModelConfig(fallback_model=fallback)
    )
    msg, _ = await run(agent, user())
    assert msg.get_text_content() == "from fallback"
    failed, ok = otel.spans("chat")
    assert (failed.name, failed.status.status_code) == ("chat scripted-model", StatusCode.ERROR)
    assert (ok.name, ok.status.status_code) == ("chat backup-model", StatusCode.OK)
    assert otel.one("invoke_agent").status.status_code == StatusCode.OK


# -- checkpoint sweep: tracing + budget stacked ------------------------------------------------------------


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_cancel_sweep_with_tracing_and_budget(
    otel: Otel,
    mode: str,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    budget = ReplyBudgetControlMiddleware(token_budget=250, output_token_weight=2)
    tracing = TracingMiddleware(tracer_provider=otel.provider)

    def make() -> Agent:
        otel.reset()
        return make_agent(
            [
                ChatResponse(
                    content=[
                        call("c1", "get_weather", city="a"),
                        call("c2", "get_weather", city="b"),
                    ],
                    usage=ChatUsage(input_tokens=100, output_tokens=80),
                ),
                text_chunks("fin", "al", usage=ChatUsage(input_tokens=5, output_tokens=5)),
            ],
            weather_toolkit(),
            middlewares=[tracing, budget],
        )

    outcomes: list[str] = []

    def check(run: SweepRun) -> None:
        agent = run.agent
        assert otel.tracker.open == {}, f"spans left open at point {run.cancel_at}"
        replies = otel.spans("invoke_agent")
        assert len(replies) <= 1
        if not run.events:
            return
        (reply,) = replies
        for child in otel.spans("chat") + otel.spans("execute_tool"):
            assert parent_id(child) == reply.context.span_id
        end = run.end
        assert end is not None
        outcomes.append(str(end.finished_reason))
        assert attr(reply, "trioagent.reply.finished_reason") == str(end.finished_reason)
        if end.finished_reason == ReplyFinishedReason.INTERRUPTED:
            assert reply.status.status_code == StatusCode.UNSET
        else:
            assert reply.status.status_code == StatusCode.OK
        # Budget: one entry, for this reply, holding the weighted cost of its model calls.
        spent = sum(
            e.input_tokens + 2 * e.output_tokens
            for e in run.events
            if isinstance(e, ModelCallEndEvent)
        )
        assert agent.state.middle_context["ReplyBudgetControlMiddleware"] == {
            agent.state.reply_id: spent
        }
        if len(agent.model.requests) == 2:
            assert agent.model.requests[1].tool_choice is not None  # budget 250 < 260

    with caplog.at_level(logging.WARNING):
        report = await cancel_sweep(make, user, mode=mode, check=check)
    assert report.points > 10
    assert "interrupted" in outcomes
    assert "completed" in outcomes
    assert [r for r in caplog.records if r.name.startswith("opentelemetry")] == []


async def test_reply_end_dropped_by_outer_layer_still_ends_span(otel: Otel) -> None:
    class DropOnce(MiddlewareBase):
        async def on_reply(
            self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any
        ) -> None:
            dropped = False

            async def sink(item: Any) -> None:
                nonlocal dropped
                if isinstance(item, ReplyEndEvent) and not dropped:
                    dropped = True
                    return
                await emit(item)

            await next_handler(sink)

    agent = traced(otel, [text("one"), text("two")], before=[DropOnce()])
    msg, _ = await run(agent, user())
    assert msg.get_text_content() == "two"
    reply = otel.one("invoke_agent")
    assert len(otel.spans("chat")) == 2
    assert json.loads(attr(reply, "gen_ai.output.messages"))[0]["parts"][0]["content"] == "two"


async def test_streaming_tool_chunks_pass_through_unchanged(otel: Otel) -> None:
    toolkit = Toolkit()

    async def stream_tool(emit: Any) -> str:
        """Streams."""
        await emit(ToolChunk(content=[TextBlock(text="part ")], is_last=False))
        return "end"

    toolkit.register_function(stream_tool, permission=ALLOW)
    agent = traced(otel, [calls(call("t1", "stream_tool")), text("ok")], toolkit)
    _, events = await run(agent, user())
    deltas = [e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent)]
    assert "".join(deltas) == "part end"
    result = json.loads(attr(otel.one("execute_tool"), "gen_ai.tool.call.result"))
    assert [b["text"] for b in result["content"]] == ["part end"]


async def test_pull_layer_leaving_early_ends_spans_without_detach_errors(
    otel: Otel, caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    """The trio analog of AgentScope's "generator closed from another task": an outer layer
    pulls the inner layers (tracing included) from a child task and leaves after two items."""

    class TakeTwo(MiddlewareBase):
        async def on_reply(
            self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any
        ) -> None:
            async with next_handler.stream() as items:
                for _ in range(2):
                    await emit(await items.receive())

    slow = text_chunks(*(["tok "] * 10))
    agent = traced(otel, [slow], before=[TakeTwo()])
    agent.model.chunk_delay = 1.0  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING):
        msg, events = await run(agent, user())
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert ends(events)[-1].finished_reason == ReplyFinishedReason.INTERRUPTED
    assert otel.tracker.open == {}
    reply = otel.one("invoke_agent")
    assert attr(reply, "trioagent.reply.finished_reason") == "interrupted"
    assert parent_id(otel.one("chat")) == reply.context.span_id
    assert [r for r in caplog.records if r.name.startswith("opentelemetry")] == []


async def test_aborting_a_parked_reply_marks_it_interrupted(otel: Otel) -> None:
    agent = traced(otel, [calls(call("w1", "get_weather", city="Oslo"))], ask_toolkit())
    await run(agent, user())
    otel.reset()
    msg, _ = await run(agent, UserInterruptEvent())
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    reply = otel.one("invoke_agent")
    assert attr(reply, "trioagent.reply.finished_reason") == "interrupted"
    assert attr(reply, "agentscope.agent.incoming_event_type") is None
    assert reply.status.status_code == StatusCode.UNSET


async def test_a_tracing_failure_never_breaks_the_reply(
    otel: Otel, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(agent: Any) -> str:
        raise RuntimeError("attribute bug")

    monkeypatch.setattr(_tracing_attrs, "agent_description", broken)
    agent = traced(otel, [text("fine")])
    msg, _ = await run(agent, user())
    assert msg.get_text_content() == "fine"
    assert otel.spans("invoke_agent") == []
    assert [s.name for s in otel.spans()] == ["chat scripted-model"]
    assert otel.tracker.open == {}
    assert "could not start a span" in caplog.text


def sid(span: ReadableSpan) -> int:
    return span.context.span_id


def named(
    name: str, mw: TracingMiddleware, steps: list[Any], toolkit: Toolkit | None = None
) -> Agent:
    agent = make_agent(steps, toolkit, middlewares=[mw])
    agent.name = name
    return agent


# -- nesting ------------------------------------------------------------------------------------------


async def test_nested_agent_reply_nests_under_the_calling_tool_span(otel: Otel) -> None:
    mw = TracingMiddleware(tracer_provider=otel.provider)
    inner = named("inner", mw, [calls(call("i1", "leaf", x=1)), text("inner done")])
    leaf_kit = Toolkit()

    async def leaf(x: int) -> str:
        """Leaf tool of the inner agent."""
        return f"leaf {x}"

    leaf_kit.register_function(leaf, permission=ALLOW)
    inner.toolkit = leaf_kit

    outer_kit = Toolkit()

    async def ask_inner(question: str) -> str:
        """Delegates to the inner agent."""
        msg = await inner.reply(user(question))
        return msg.get_text_content() or ""

    outer_kit.register_function(ask_inner, permission=ALLOW)
    outer = named(
        "outer", mw, [calls(call("o1", "ask_inner", question="q?")), text("outer done")], outer_kit
    )
    msg, _ = await run(outer, user())
    assert msg.get_text_content() == "outer done"
    assert otel.tracker.open == {}

    outer_reply = otel.one("invoke_agent outer")
    inner_reply = otel.one("invoke_agent inner")
    delegate = otel.one("execute_tool ask_inner")
    leaf_span = otel.one("execute_tool leaf")
    assert outer_reply.parent is None
    assert parent_id(delegate) == sid(outer_reply)
    assert parent_id(inner_reply) == sid(delegate)
    assert parent_id(leaf_span) == sid(inner_reply)
    chats = otel.spans("chat")
    assert len(chats) == 4
    inner_chats = [c for c in chats if parent_id(c) == sid(inner_reply)]
    outer_chats = [c for c in chats if parent_id(c) == sid(outer_reply)]
    assert len(inner_chats) == len(outer_chats) == 2
    assert {s.context.trace_id for s in otel.spans()} == {outer_reply.context.trace_id}
    # No cross-talk in the reply attributes.
    assert attr(inner_reply, "gen_ai.conversation.id") == inner.state.session_id
    assert attr(outer_reply, "gen_ai.conversation.id") == outer.state.session_id
    assert json.loads(attr(inner_reply, "gen_ai.output.messages"))[0]["parts"][0]["content"] == (
        "inner done"
    )
    assert json.loads(attr(outer_reply, "gen_ai.output.messages"))[0]["parts"][0]["content"] == (
        "outer done"
    )
    for span in (outer_reply, inner_reply, delegate, leaf_span):
        assert span.status.status_code == StatusCode.OK
    # The delegating tool's span contains the whole inner reply.
    assert delegate.start_time <= inner_reply.start_time  # type: ignore[operator]
    assert inner_reply.end_time <= delegate.end_time  # type: ignore[operator]


# -- concurrency ---------------------------------------------------------------------------------------


async def test_two_concurrent_replies_sharing_one_middleware_never_mix_spans(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    mw = TracingMiddleware(tracer_provider=otel.provider)
    both = trio.Event()
    inside: list[str] = []

    def kit() -> Toolkit:
        toolkit = Toolkit()

        async def rendezvous(who: str) -> str:
            """Blocks until both agents are inside their tool."""
            inside.append(who)
            if len(inside) == 2:
                both.set()
            await both.wait()
            await trio.sleep(1)
            return who

        toolkit.register_function(rendezvous, permission=ALLOW)
        return toolkit

    agents = {
        who: named(
            who,
            mw,
            [calls(call(f"{who}-c", "rendezvous", who=who)), text_chunks(f"{who} ", "done")],
            kit(),
        )
        for who in ("alpha", "beta")
    }
    out: dict[str, Any] = {}

    async def go(who: str) -> None:
        out[who] = await run(agents[who], user(f"from {who}"))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for who in agents:
                nursery.start_soon(go, who)
    assert otel.tracker.open == {}
    assert len(otel.spans()) == 2 * 4
    trace_ids = set()
    for who, agent in agents.items():
        reply = otel.one(f"invoke_agent {who}")
        assert reply.parent is None
        trace_ids.add(reply.context.trace_id)
        children = [s for s in otel.spans() if parent_id(s) == sid(reply)]
        assert sorted(s.name for s in children) == [
            "chat scripted-model",
            "chat scripted-model",
            "execute_tool rendezvous",
        ]
        for child in children:
            assert child.context.trace_id == reply.context.trace_id
            assert attr(child, "gen_ai.conversation.id") == agent.state.session_id
        (tool,) = [s for s in children if s.name.startswith("execute_tool")]
        assert attr(tool, "gen_ai.tool.call.id") == f"{who}-c"
        assert json.loads(attr(reply, "gen_ai.input.messages"))[0]["parts"][0]["content"] == (
            f"from {who}"
        )
        assert json.loads(attr(reply, "gen_ai.output.messages"))[0]["parts"][0]["content"] == (
            f"{who} done"
        )
        assert attr(reply, "agentscope.agent.reply_id") == agent.state.reply_id
    assert len(trace_ids) == 2


async def test_concurrent_replies_one_interrupted_one_completed(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    mw = TracingMiddleware(tracer_provider=otel.provider)
    slow = named("slow", mw, [text_chunks(*(["tok "] * 20))])
    slow.model.chunk_delay = 1.0  # type: ignore[attr-defined]
    fast = named("fast", mw, [text_chunks(*(["ok "] * 20))])
    fast.model.chunk_delay = 0.5  # type: ignore[attr-defined]
    results: dict[str, Any] = {}

    async def go(agent: Agent) -> None:
        results[agent.name] = await run(agent, user())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(go, slow)
        nursery.start_soon(go, fast)
        await trio.sleep(5.25)
        slow.interrupt()
    assert results["slow"][0].finished_reason == ReplyFinishedReason.INTERRUPTED
    assert results["fast"][0].finished_reason == ReplyFinishedReason.COMPLETED
    assert otel.tracker.open == {}
    slow_reply = otel.one("invoke_agent slow")
    fast_reply = otel.one("invoke_agent fast")
    assert attr(slow_reply, "trioagent.reply.finished_reason") == "interrupted"
    assert slow_reply.status.status_code == StatusCode.UNSET
    assert attr(fast_reply, "trioagent.reply.finished_reason") == "completed"
    assert fast_reply.status.status_code == StatusCode.OK
    (slow_chat,) = [s for s in otel.spans("chat") if parent_id(s) == sid(slow_reply)]
    (fast_chat,) = [s for s in otel.spans("chat") if parent_id(s) == sid(fast_reply)]
    assert attr(slow_chat, "trioagent.interrupted") is True
    assert attr(fast_chat, "trioagent.interrupted") is None
    assert fast_chat.status.status_code == StatusCode.OK


# -- HITL ----------------------------------------------------------------------------------------------


async def test_parked_reply_span_closes_at_park_and_resume_is_a_new_span(otel: Otel) -> None:
    agent = traced(
        otel, [calls(call("w1", "get_weather", city="Oslo")), text("rainy")], ask_toolkit()
    )
    _, events = await run(agent, user())
    assert ends(events) == []
    assert otel.tracker.open == {}  # nothing stays open while the reply is parked
    parked = otel.one("invoke_agent")
    assert otel.spans("execute_tool") == []  # the unconfirmed tool never ran
    assert attr(parked, "trioagent.reply.parked") is True

    msg, events = await run(agent, confirm(tool_calls(agent)["w1"]))
    assert msg.get_text_content() == "rainy"
    assert otel.tracker.open == {}
    first, resumed = otel.spans("invoke_agent")
    assert first is parked or sid(first) == sid(parked)
    assert sid(resumed) != sid(parked)
    assert attr(resumed, "agentscope.agent.reply_id") == attr(parked, "agentscope.agent.reply_id")
    assert attr(resumed, "trioagent.reply.parked") is None
    assert attr(resumed, "trioagent.reply.finished_reason") == "completed"
    tool = otel.one("execute_tool")
    assert parent_id(tool) == sid(resumed)
    assert tool.status.status_code == StatusCode.OK


async def test_denied_confirmation_gets_no_tool_span(otel: Otel) -> None:
    agent = traced(
        otel, [calls(call("w1", "get_weather", city="Oslo")), text("fine")], ask_toolkit()
    )
    await run(agent, user())
    otel.reset()
    msg, _ = await run(agent, confirm(tool_calls(agent)["w1"], confirmed=False))
    assert msg.get_text_content() == "fine"
    assert otel.tracker.open == {}
    reply = otel.one("invoke_agent")
    assert reply.status.status_code == StatusCode.OK
    assert otel.spans("execute_tool") == []  # a denied tool never runs through on_acting


# -- model retries -------------------------------------------------------------------------------------


async def test_model_retries_get_one_span_per_attempt_and_none_left_open(otel: Otel) -> None:
    agent = traced(
        otel,
        [RuntimeError("flaky 1"), RuntimeError("flaky 2"), text("third time")],
        model_config=ModelConfig(max_retries=2),
    )
    msg, events = await run(agent, user())
    assert msg.get_text_content() == "third time"
    assert ends(events)[-1].finished_reason == ReplyFinishedReason.COMPLETED
    assert otel.tracker.open == {}
    chats = otel.spans("chat")
    assert [c.status.status_code for c in chats] == [
        StatusCode.ERROR,
        StatusCode.ERROR,
        StatusCode.OK,
    ]
    assert [attr(c, "error.type") for c in chats] == ["RuntimeError", "RuntimeError", None]
    reply = otel.one("invoke_agent")
    assert {parent_id(c) for c in chats} == {sid(reply)}
    assert reply.status.status_code == StatusCode.OK
    assert not [e for e in reply.events if e.name == "exception"]


async def test_retries_exhausted_then_every_span_ends_with_error(otel: Otel) -> None:
    agent = traced(
        otel,
        [RuntimeError("down 1"), RuntimeError("down 2")],
        model_config=ModelConfig(max_retries=1),
    )
    with pytest.raises(RuntimeError, match="down 2"):
        await agent.reply(user())
    assert otel.tracker.open == {}
    assert [c.status.status_code for c in otel.spans("chat")] == [StatusCode.ERROR] * 2
    reply = otel.one("invoke_agent")
    assert reply.status.status_code == StatusCode.ERROR
    assert attr(reply, "error.type") == "RuntimeError"


async def test_interrupt_during_retry_is_not_an_error(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    agent = traced(
        otel,
        [RuntimeError("flaky"), text_chunks(*(["tok "] * 20))],
        model_config=ModelConfig(max_retries=1),
    )
    agent.model.chunk_delay = 1.0  # type: ignore[attr-defined]
    async with trio.open_nursery() as nursery:
        result: list[Any] = []

        async def go() -> None:
            result.append(await run(agent, user()))

        nursery.start_soon(go)
        await trio.sleep(3.5)
        agent.interrupt()
    assert result[0][0].finished_reason == ReplyFinishedReason.INTERRUPTED
    assert otel.tracker.open == {}
    failed, interrupted = otel.spans("chat")
    assert failed.status.status_code == StatusCode.ERROR
    assert interrupted.status.status_code == StatusCode.UNSET
    assert attr(interrupted, "trioagent.interrupted") is True
    reply = otel.one("invoke_agent")
    assert reply.status.status_code == StatusCode.UNSET
    assert attr(reply, "trioagent.reply.finished_reason") == "interrupted"


# -- background tools ----------------------------------------------------------------------------------


def bg_toolkit() -> Toolkit:
    toolkit = Toolkit()

    async def crunch(n: int, delay: float = 10.0) -> str:
        """Long computation."""
        await trio.sleep(delay)
        return f"crunched {n}"

    toolkit.register_function(crunch, permission=ALLOW, is_background=True)
    return toolkit


async def test_background_tool_finishing_after_the_reply_ends_its_span(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    agent = traced(otel, [calls(call("b1", "crunch", n=7)), text("started")], bg_toolkit())
    async with agent:
        msg, _ = await run(agent, user())
        assert msg.get_text_content() == "started"
        reply = otel.one("invoke_agent")
        assert reply.status.status_code == StatusCode.OK
        # Documented choice: the tool span outlives its (ended) reply span.
        assert list(otel.tracker.open.values()) == ["execute_tool crunch"]
        result = await agent.background_tasks["b1"].wait()
        assert result.text() == "crunched 7"
        await trio.testing.wait_all_tasks_blocked()
    assert otel.tracker.open == {}
    tool = otel.one("execute_tool crunch")
    assert tool.context.trace_id == reply.context.trace_id
    assert parent_id(tool) == sid(reply)
    assert tool.status.status_code == StatusCode.OK
    assert "crunched 7" in attr(tool, "gen_ai.tool.call.result")
    assert tool.end_time > reply.end_time  # type: ignore[operator]


async def test_background_tool_cancelled_by_leaving_the_agent_scope_is_not_an_error(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    agent = traced(
        otel, [calls(call("b1", "crunch", n=1, delay=1000)), text("started")], bg_toolkit()
    )
    async with agent:
        await run(agent, user())
        await trio.sleep(5)
    assert otel.tracker.open == {}
    reply = otel.one("invoke_agent")
    assert reply.status.status_code == StatusCode.OK
    for span in otel.spans():
        assert span.status.status_code != StatusCode.ERROR, span.name
    tool = otel.one("execute_tool crunch")
    assert attr(tool, "trioagent.interrupted") is True


# -- broken processors / exporters ---------------------------------------------------------------------


class FailingExporter(InMemorySpanExporter):
    def export(self, spans: Any) -> Any:
        raise RuntimeError("exporter down")


async def test_a_failing_exporter_never_fails_the_reply() -> None:
    exporter = FailingExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = make_agent(
        [calls(call("c1", "get_weather", city="x")), text("fine")],
        weather_toolkit(),
        middlewares=[TracingMiddleware(tracer_provider=provider)],
    )
    msg, events = await run(agent, user())
    assert msg.get_text_content() == "fine"
    assert ends(events)[-1].finished_reason == ReplyFinishedReason.COMPLETED


# -- very large attributes -----------------------------------------------------------------------------


async def test_megabyte_tool_output_is_recorded_without_breaking_the_reply(otel: Otel) -> None:
    toolkit = Toolkit()
    big = "x" * (3 * 1024 * 1024)

    async def dump() -> str:
        """Returns a huge text."""
        return big

    toolkit.register_function(dump, permission=ALLOW)
    agent = traced(otel, [calls(call("d1", "dump")), text("ok")], toolkit)
    agent.model.context_size = 10**8  # no compression: only tracing is under test
    msg, _ = await run(agent, user())
    assert msg.get_text_content() == "ok"
    assert otel.tracker.open == {}
    tool = otel.one("execute_tool")
    assert tool.status.status_code == StatusCode.OK
    recorded = attr(tool, "gen_ai.tool.call.result")
    assert isinstance(recorded, str)
    assert json.loads(recorded)["state"] == "success"


# -- cancellation sweeps -------------------------------------------------------------------------------


def sweep_toolkit() -> Toolkit:
    toolkit = Toolkit()

    async def nap(seconds: float) -> str:
        """Sleeps (sequential)."""
        await trio.sleep(seconds)
        return "rested"

    async def probe(name: str, emit: Any) -> str:
        """Streams, then sleeps (concurrent)."""
        from trioagent.message import TextBlock
        from trioagent.tool import ToolChunk

        await emit(ToolChunk(content=[TextBlock(text=f"{name} ")], is_last=False))
        await trio.sleep(1)
        return name

    toolkit.register_function(nap, permission=ALLOW, is_concurrency_safe=False)
    toolkit.register_function(probe, permission=ALLOW)
    return toolkit


def check_spans(otel: Otel, run: SweepRun, outcomes: list[str]) -> None:
    assert otel.tracker.open == {}, f"spans left open at point {run.cancel_at}"
    for span in otel.spans():
        assert span.end_time is not None
    replies = otel.spans("invoke_agent")
    assert len(replies) <= 1
    if not replies:
        return
    (reply,) = replies
    for span in otel.spans():
        assert span.context.trace_id == reply.context.trace_id
        # Nothing in this script fails: an ERROR status anywhere is an interruption
        # recorded as an error.
        assert span.status.status_code != StatusCode.ERROR, (run.cancel_at, span.name)
    for child in otel.spans("chat") + otel.spans("execute_tool"):
        assert parent_id(child) == sid(reply)
    end = run.end
    if end is None:
        return
    outcomes.append(str(end.finished_reason))
    assert attr(reply, "trioagent.reply.finished_reason") == str(end.finished_reason)
    if end.finished_reason == ReplyFinishedReason.INTERRUPTED:
        assert reply.status.status_code == StatusCode.UNSET
        assert not [e for e in reply.events if e.name == "exception"]
    else:
        assert reply.status.status_code == StatusCode.OK


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_cancel_sweep_traced_reply_with_sequential_and_concurrent_tools(
    otel: Otel, mode: str, autojump_clock: trio.testing.MockClock
) -> None:
    mw = TracingMiddleware(tracer_provider=otel.provider)

    def make() -> Agent:
        otel.reset()
        return make_agent(
            [
                calls(call("n1", "nap", seconds=2)),
                calls(call("p1", "probe", name="a"), call("p2", "probe", name="b")),
                text_chunks("all ", "done"),
            ],
            sweep_toolkit(),
            middlewares=[mw],
        )

    outcomes: list[str] = []
    report = await cancel_sweep(
        make, user, mode=mode, check=lambda r: check_spans(otel, r, outcomes)
    )
    assert report.points > 10
    assert "interrupted" in outcomes
    assert "completed" in outcomes


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_cancel_sweep_over_a_nested_agent_reply(
    otel: Otel, mode: str, autojump_clock: trio.testing.MockClock
) -> None:
    mw = TracingMiddleware(tracer_provider=otel.provider)

    def make() -> Agent:
        otel.reset()
        inner = named("inner", mw, [text_chunks("in", "ner")])
        toolkit = Toolkit()

        async def delegate() -> str:
            """Asks the inner agent."""
            msg = await inner.reply(user("sub"))
            return msg.get_text_content() or ""

        toolkit.register_function(delegate, permission=ALLOW)
        return make_agent(
            [calls(call("d1", "delegate")), text("outer done")], toolkit, middlewares=[mw]
        )

    outcomes: list[str] = []

    def check(run: SweepRun) -> None:
        assert otel.tracker.open == {}, f"spans left open at point {run.cancel_at}"
        for span in otel.spans():
            assert span.status.status_code != StatusCode.ERROR, (run.cancel_at, span.name)
        outer = otel.spans("invoke_agent agent")
        inner = otel.spans("invoke_agent inner")
        if inner:
            (delegate,) = otel.spans("execute_tool delegate")
            assert parent_id(inner[0]) == sid(delegate)
            assert parent_id(delegate) == sid(outer[0])
        end = run.end
        if end is not None and outer:
            outcomes.append(str(end.finished_reason))
            assert attr(outer[0], "trioagent.reply.finished_reason") == str(end.finished_reason)

    report = await cancel_sweep(make, user, mode=mode, check=check)
    assert report.points > 5
    assert "interrupted" in outcomes
    assert "completed" in outcomes


# -- found by this hunt, fixed ---------------------------------------------------------------------


class FailingOnEnd(SpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("processor on_end down")


async def test_a_failing_span_processor_never_fails_the_reply(
    caplog: pytest.LogCaptureFixture,
) -> None:
    otel = new_otel(FailingOnEnd())
    agent = traced(
        otel, [calls(call("c1", "get_weather", city="x")), text("fine")], weather_toolkit()
    )
    msg, _ = await run(agent, user())
    assert msg.get_text_content() == "fine"
    assert "processor on_end down" in caplog.text

"""TracingMiddleware (tools_middleware.md §8.2; trio_design.md §6).

Spans go to an SDK ``TracerProvider`` passed to the middleware explicitly, with a
``SimpleSpanProcessor`` + ``InMemorySpanExporter`` and a processor that tracks which spans were
started and not ended; the global provider is never changed.
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
from opentelemetry.sdk.trace import ReadableSpan
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
from trioagent.types import ReplyFinishedReason

FAKE_KEY = "sk-FAKEKEY-0123456789abcdef"
FAKE_URL_PASSWORD = "pw-FAKEURLSECRET-42"


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


def traced(otel: Otel, steps: Sequence[Any], toolkit: Toolkit | None = None, **kw: Any) -> Agent:
    middlewares = [*kw.pop("before", []), TracingMiddleware(tracer_provider=otel.provider)]
    return make_agent(steps, toolkit, middlewares=middlewares, **kw)


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
            "finish_reason": "stop",
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
    """The trio analog of the reference's "generator closed from another task": an outer layer
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

"""All four built-in middlewares stacked on one agent, swept at every cancellation point.

Tracing (outermost) + Budget + TTS (realtime) + Router: every run must keep the reply rules
(exactly one end event, paired tool calls, no orphaned task; checked by ``cancel_sweep``), leave no span open, close every audio block before the
one REPLY_END, restore the agent's own model, and keep the budget entry equal to the weighted
cost of the model calls the consumer saw.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from agent_helpers import make_agent, user
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from tts_kit import ChannelRealtimeTTS

from trioagent.agent import Agent
from trioagent.event import (
    AgentEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    ModelCallEndEvent,
    ReplyEndEvent,
)
from trioagent.message import ToolCallBlock
from trioagent.middleware import (
    ChatModelCandidate,
    ModelRouterMiddleware,
    ReplyBudgetControlMiddleware,
    TracingMiddleware,
    TTSMiddleware,
)
from trioagent.model import ChatResponse, ChatUsage
from trioagent.testing import CancelMode, ScriptedModel, SweepRun, cancel_sweep, text_chunks


class OpenSpans(SpanProcessor):
    """Spans started and not yet ended."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}
        self.names: list[str] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.open[span.context.span_id] = span.name
        self.names.append(span.name)

    def on_end(self, span: ReadableSpan) -> None:
        self.open.pop(span.context.span_id, None)


def pick(name: str) -> ChatResponse:
    """The router's structured-output answer choosing ``name``."""
    return ChatResponse(
        content=[
            ToolCallBlock(
                id="route", name="generate_structured_output", input=json.dumps({"choice": name})
            )
        ]
    )


def audio_closed_before_the_end(events: list[AgentEvent]) -> bool:
    ends = [i for i, e in enumerate(events) if isinstance(e, ReplyEndEvent)]
    opened = {e.block_id: i for i, e in enumerate(events) if isinstance(e, DataBlockStartEvent)}
    closed = {e.block_id: i for i, e in enumerate(events) if isinstance(e, DataBlockEndEvent)}
    return (
        ends == [len(events) - 1]
        and set(opened) == set(closed)
        and all(opened[b] < closed[b] < ends[0] for b in opened)
    )


@pytest.mark.parametrize("mode", [CancelMode.INTERRUPT, CancelMode.OUTER])
async def test_cancel_sweep_tracing_budget_tts_router(
    mode: CancelMode, autojump_clock: trio.testing.MockClock
) -> None:
    spans = OpenSpans()
    provider = TracerProvider()
    provider.add_span_processor(spans)
    tracing = TracingMiddleware(tracer_provider=provider)
    budget = ReplyBudgetControlMiddleware(token_budget=10_000)
    own_models: dict[int, ScriptedModel] = {}

    def make() -> Agent:
        spans.open.clear()
        router = ScriptedModel([pick("smart")], model="router")
        smart = ScriptedModel(
            [text_chunks("Hel", "lo", " there", usage=ChatUsage(input_tokens=7, output_tokens=3))],
            model="smart",
            chunk_delay=0.5,
        )
        own = ScriptedModel([], model="own")
        agent, _ = make_agent(
            model=own,
            middlewares=[
                tracing,
                budget,
                TTSMiddleware(ChannelRealtimeTTS(latency=0.25)),
                ModelRouterMiddleware(router, [ChatModelCandidate("smart", smart, "all")]),
            ],
        )
        own_models[id(agent)] = own
        return agent

    def check(run: SweepRun) -> None:
        agent = run.agent
        assert spans.open == {}, f"spans left open at point {run.cancel_at}: {spans.open}"
        assert agent.model is own_models[id(agent)], "the agent's own model was not restored"
        if not run.events:
            return
        assert audio_closed_before_the_end(run.events), run.cancel_at
        spent = sum(
            e.input_tokens + e.output_tokens for e in run.events if isinstance(e, ModelCallEndEvent)
        )
        entry = agent.state.middle_context.get("ReplyBudgetControlMiddleware", {})
        assert entry.get(agent.state.reply_id, 0) == spent

    report = await cancel_sweep(make, lambda: user("hi"), mode=mode, check=check)
    baseline = report.runs[0]
    assert baseline.end is not None
    assert baseline.end.finished_reason == "completed"
    assert any(isinstance(e, DataBlockStartEvent) for e in baseline.events)  # it spoke
    assert report.points > 20
    assert report.outcomes["interrupted"] > 0
    assert "invoke_agent assistant" in spans.names

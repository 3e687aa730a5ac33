"""A reply's cleanup against a consumer slower than ``react_config.interrupt_grace``.

The state writes of a cancelled reply (the partial response saved as INTERRUPTED, an
interrupted result for every open tool call, the final Msg) come first and never wait for the
consumer; the closing events then get what is left of one grace, shared by every layer.  So a
stalled consumer (a websocket client that stopped reading) delays the end of the reply by at
most one grace and never loses the answer: ``interrupt()`` still makes ``reply()`` return the
interrupted Msg and an outer cancellation still propagates.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
from agent_kit import ALLOW, call, calls, make_agent, reply_cancelled, text
from provider_kit import open_connections

from trioagent import UserMsg
from trioagent.agent import Agent, InjectionConfig, ReActConfig
from trioagent.event import (
    AgentEvent,
    ModelCallEndEvent,
    ReplyEndEvent,
    TextBlockDeltaEvent,
    ToolResultEndEvent,
)
from trioagent.message import Msg, TextBlock, ToolResultBlock
from trioagent.testing import (
    ScriptedReply,
    cancel_sweep,
    serve_openai_compatible,
    text_chunks,
)
from trioagent.tool import Toolkit

GRACE = 1.0
SLOW = 1.5  # the consumer's time per event: longer than the grace


def _assistant_text(agent: Agent) -> str:
    return "".join(
        block.text
        for msg in agent.state.context
        if msg.role == "assistant"
        for block in msg.content
        if isinstance(block, TextBlock)
    )


def _check_end(events: list[AgentEvent]) -> ReplyEndEvent:
    ends = [e for e in events if isinstance(e, ReplyEndEvent)]
    assert len(ends) == 1
    assert events[-1] is ends[0]
    return ends[0]


async def _reply_cancelled(
    agent: Agent,
    mode: str,
    cancel_when: trio.Event,
    events: list[AgentEvent],
    slow: float = SLOW,
) -> tuple[Msg | None, bool, float]:
    """A reply whose consumer records each event and then stalls for ``slow`` seconds,
    cancelled (``mode``) once ``cancel_when`` is set; see ``agent_kit.reply_cancelled``."""

    async def stalled(event: AgentEvent) -> None:
        events.append(event)
        await trio.sleep(slow)

    return await reply_cancelled(agent, UserMsg("user", "hi"), mode, cancel_when.wait, stalled)


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_a_stalled_consumer_over_http_loses_neither_the_partial_nor_the_msg(
    nursery: trio.Nursery, mode: str
) -> None:
    """Real sockets: the answer streams from the loopback server; the consumer takes longer
    per event than the grace.  The partial answer the consumer saw is in the context, the
    model call ends with MODEL_CALL_END(interrupted), ``interrupt()`` returns the interrupted
    Msg and an outer cancellation propagates; the HTTP connection is not left busy."""
    words = " ".join(f"w{i}" for i in range(60))
    server = await nursery.start(
        serve_openai_compatible, [ScriptedReply(text=words, chunk_size=3, chunk_delay=0.01)]
    )
    model = server.chat_model(max_retries=0)
    agent = Agent(
        "assistant",
        model=model,
        react_config=ReActConfig(interrupt_grace=0.3),
        injection_config=InjectionConfig(inject_runtime_state=False),
    )
    events: list[AgentEvent] = []
    two_deltas = trio.Event()

    async def watch() -> None:
        # cancel while the consumer stalls on its second text delta
        while sum(isinstance(e, TextBlockDeltaEvent) for e in events) < 2:
            await trio.sleep(0.01)
        two_deltas.set()

    nursery.start_soon(watch)
    msg, propagated, _ = await _reply_cancelled(agent, mode, two_deltas, events, slow=0.6)
    seen = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    saved = _assistant_text(agent)
    assert seen
    assert saved.startswith(seen)
    model_ends = [e for e in events if isinstance(e, ModelCallEndEvent)]
    assert [e.finished_reason for e in model_ends] == ["interrupted"]
    assert _check_end(events).finished_reason == "interrupted"
    if mode == "interrupt":
        assert msg is not None
        assert msg.finished_reason == "interrupted"
        assert not propagated
    else:
        assert msg is None
        assert propagated
    assert all(c.is_idle() or c.is_closed() for c in open_connections(model.http_client))
    await model.aclose()


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_the_whole_cleanup_is_bounded_by_one_grace(
    autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    """The issue's reproduction: 50 chunks, a consumer taking 1.5 s per event, a grace of
    1 s, a cancellation at 5 s.  The reply ends exactly one grace after the cancellation
    (not one per layer), with the partial saved and the interrupted Msg returned."""
    agent = make_agent(
        [text_chunks(*["chunk "] * 50)], react_config=ReActConfig(interrupt_grace=GRACE)
    )
    agent.model.chunk_delay = 0.01  # type: ignore[attr-defined]
    events: list[AgentEvent] = []
    at_five = trio.Event()

    async def alarm() -> None:
        await trio.sleep(5)
        at_five.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(alarm)
        msg, propagated, took = await _reply_cancelled(agent, mode, at_five, events)
    assert took == pytest.approx(GRACE)
    assert _assistant_text(agent).startswith("chunk ")
    assert [e.finished_reason for e in events if isinstance(e, ModelCallEndEvent)] == [
        "interrupted"
    ]
    assert _check_end(events).finished_reason == "interrupted"
    assert (msg is not None and msg.finished_reason == "interrupted") is (mode == "interrupt")
    assert propagated is (mode == "outer")
    assert not agent.is_replying


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_a_stalled_consumer_cannot_keep_tool_calls_without_results(
    autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    """Three concurrent tool calls are cancelled while the consumer stalls: each gets its
    interrupted result in the context, the closing events are all handed to the consumer,
    and the reply still ends one grace after the cancellation."""
    toolkit = Toolkit()

    async def wait(seconds: float) -> str:
        """Wait.

        Args:
            seconds: how long.
        """
        await trio.sleep(seconds)
        return "done"

    toolkit.register_function(wait, permission=ALLOW)
    agent = make_agent(
        [calls(*(call(f"c{i}", "wait", seconds=30) for i in range(3))), text("never")],
        toolkit,
        react_config=ReActConfig(interrupt_grace=GRACE),
    )
    events: list[AgentEvent] = []
    started = trio.Event()

    async def alarm() -> None:
        while not any(isinstance(e, ToolResultEndEvent) for e in events) and len(events) < 8:
            await trio.sleep(0.5)
        started.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(alarm)
        msg, propagated, took = await _reply_cancelled(agent, mode, started, events)
    assert took <= GRACE
    results = [
        block
        for m in agent.state.context
        for block in m.content
        if isinstance(block, ToolResultBlock)
    ]
    assert sorted(r.id for r in results) == ["c0", "c1", "c2"]
    assert {r.state for r in results} == {"interrupted"}
    ended = {e.tool_call_id for e in events if isinstance(e, ToolResultEndEvent)}
    assert ended == {"c0", "c1", "c2"}
    assert _check_end(events).finished_reason == "interrupted"
    assert (msg is not None) is (mode == "interrupt")
    assert propagated is (mode == "outer")


async def _sweep_with_a_slow_consumer(make: Callable[[], Agent], mode: str, answer: str) -> None:
    """Sweep both the cancellation points and a consumer taking SLOW (> the grace) per
    event; the baseline still answers ``answer``."""
    report = await cancel_sweep(make, UserMsg("user", "hi"), mode=mode, consumer_delay=SLOW)
    assert report.points > 5
    assert report.outcomes["interrupted"] >= 1
    assert report.runs[0].msg is not None
    assert report.runs[0].msg.get_text_content() == answer


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_a_text_reply_with_a_consumer_slower_than_the_grace(
    autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    def make() -> Agent:
        return make_agent(
            [text_chunks("Trio ", "keeps ", "every ", "task ", "owned.")],
            react_config=ReActConfig(interrupt_grace=GRACE),
        )

    await _sweep_with_a_slow_consumer(make, mode, "Trio keeps every task owned.")


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_a_tool_round_with_a_consumer_slower_than_the_grace(
    autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    async def lookup(city: str) -> str:
        """Look up the weather.

        Args:
            city: the city.
        """
        await trio.sleep(1)
        return f"sunny in {city}"

    def make() -> Agent:
        toolkit = Toolkit()
        toolkit.register_function(lookup, permission=ALLOW)
        return make_agent(
            [
                calls(call("c1", "lookup", city="Paris"), call("c2", "lookup", city="Rome")),
                text("Sunny in both."),
            ],
            toolkit,
            react_config=ReActConfig(interrupt_grace=GRACE),
        )

    await _sweep_with_a_slow_consumer(make, mode, "Sunny in both.")

"""Interruption and the exactly-once end (trioagent/agent/_agent.py, _run.py, _stream.py):
one end event per reply, always last; cleanup and the INTERRUPTED end on ``agent.interrupt()``
and on an outer cancellation (which still propagates); a consistent, resumable context; no task
left behind; and AgentScope's interrupted tool results."""

from __future__ import annotations

import pytest
import trio
from agent_helpers import (
    Recorder,
    assert_paired,
    make_agent,
    sequential_toolkit,
    user,
)

from trioagent.agent import AgentState, ReActConfig
from trioagent.event import ReplyEndEvent, UserInterruptEvent
from trioagent.exception import ReplyInterruptedError
from trioagent.message import TextBlock, ToolCallBlock, ToolCallState, ToolResultBlock
from trioagent.middleware import MiddlewareBase
from trioagent.serialization import dumps, loads
from trioagent.testing import ScriptedModel, check_reply_rules, text_chunks, tool_call_chunks
from trioagent.tool import Toolkit
from trioagent.types import ReplyFinishedReason

INTERRUPTED_TOOL_TEXT = (
    "<system-reminder>The tool call has been interrupted by the user.</system-reminder>"
)


def slow_model(*steps, delay: float = 1.0) -> ScriptedModel:
    return ScriptedModel(list(steps), chunk_delay=delay)


async def interrupt_at(agent, when: float) -> None:
    await trio.sleep(when)
    agent.interrupt()


async def run_with_interrupt(agent, when: float, inputs=None, **kwargs):
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt_at, agent, when)
        msg = await agent.reply(inputs if inputs is not None else user(), on_event=rec, **kwargs)
    return msg, rec


async def test_interrupt_mid_stream_returns_the_interrupted_msg(autojump_clock):
    agent, _ = make_agent(model=slow_model(text_chunks("par", "tial", " never")))
    msg, rec = await run_with_interrupt(agent, 2.5)

    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert msg.get_text_content() == agent.react_config.interruption_message
    assert msg.id == agent.state.reply_id
    assert rec.types == [
        "REPLY_START",
        "MODEL_CALL_START",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_END",
        "MODEL_CALL_END",
        "REPLY_END",
    ]
    assert rec.events[-2].finished_reason == "interrupted"
    assert len(rec.ends) == 1
    assert rec.ends[0].finished_reason == ReplyFinishedReason.INTERRUPTED
    # The partial text is saved; the closing Msg is not written to the context.
    reply_msg = agent.state.context[-1]
    assert reply_msg.get_text_content() == "partial"
    assert reply_msg.finished_reason is None
    assert not agent.is_replying
    check_reply_rules(agent.state, agent.name, rec.events)


async def test_custom_interruption_message(autojump_clock):
    agent, _ = make_agent(
        model=slow_model(text_chunks("a", "b")),
        react_config=ReActConfig(interruption_message="Stopped."),
    )
    msg, _ = await run_with_interrupt(agent, 0.5)
    assert msg.get_text_content() == "Stopped."


async def test_interrupt_while_idle_is_a_no_op():
    agent, _ = make_agent([text_chunks("ok")])
    agent.interrupt()
    agent.interrupt()
    assert (await agent.reply(user())).finished_reason == "completed"


async def test_outer_cancellation_propagates_after_one_interrupted_end(autojump_clock):
    agent, model = make_agent(model=slow_model(text_chunks("a", "b", "c")))
    rec = Recorder()
    with trio.move_on_after(1.5) as scope:
        await agent.reply(user(), on_event=rec)
        pytest.fail("the cancellation was swallowed")
    assert scope.cancelled_caught
    assert len(rec.ends) == 1
    assert rec.types[-1] == "REPLY_END"
    assert rec.ends[0].finished_reason == "interrupted"
    assert agent.state.context[-1].get_text_content() == "a"
    assert not agent.is_replying
    check_reply_rules(agent.state, agent.name, rec.events)
    # The agent replies normally afterwards.
    model.add_steps(text_chunks("next"))
    assert (await agent.reply(user())).get_text_content() == "next"


async def test_outer_cancellation_of_a_nursery(autojump_clock):
    agent, _ = make_agent(model=slow_model(text_chunks("a", "b", "c")))
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: agent.reply(user(), on_event=rec))
        await trio.sleep(1.5)
        nursery.cancel_scope.cancel()
    assert nursery.cancel_scope.cancelled_caught
    assert [e.finished_reason for e in rec.ends] == ["interrupted"]


class DropEnds(MiddlewareBase):
    """Drops every ReplyEndEvent (and the final Msg) it sees."""

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        async def sink(item):
            if not isinstance(item, ReplyEndEvent):
                await emit(item)

        await next_handler(sink)


async def test_a_dropped_interrupted_end_still_reaches_the_consumer(autojump_clock):
    agent, _ = make_agent(model=slow_model(text_chunks("a", "b", "c")), middlewares=[DropEnds()])
    msg, rec = await run_with_interrupt(agent, 1.5)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [e.finished_reason for e in rec.ends] == ["interrupted"]
    assert rec.types[-1] == "REPLY_END"


async def test_a_dropped_error_end_still_reaches_the_consumer():
    agent, _ = make_agent([RuntimeError("model down")], middlewares=[DropEnds()])
    rec = Recorder()
    with pytest.raises(RuntimeError, match="model down"):
        await agent.reply(user(), on_event=rec)
    assert [e.finished_reason for e in rec.ends] == ["error"]
    assert rec.types[-1] == "REPLY_END"


async def test_interruption_raise_cancelled_error(autojump_clock):
    agent, _ = make_agent(
        model=slow_model(text_chunks("a", "b", "c")),
        react_config=ReActConfig(interruption_raise_cancelled_error=True),
    )
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt_at, agent, 1.5)
        with pytest.raises(ReplyInterruptedError) as info:
            await agent.reply(user(), on_event=rec)
    assert info.value.msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [e.finished_reason for e in rec.ends] == ["interrupted"]
    assert not agent.is_replying


# -- tools ---------------------------------------------------------------------------------------


async def slow_tool(x: str) -> str:
    """Take a long time.

    Args:
        x: the value.
    """
    await trio.sleep(100)
    return f"slow {x}"


async def test_interrupt_during_a_sequential_tool(autojump_clock):
    toolkit = sequential_toolkit(slow_tool)
    agent, _ = make_agent(
        [
            [
                *tool_call_chunks("c1", "slow_tool", '{"x": "1"}'),
                *tool_call_chunks("c2", "slow_tool", '{"x": "2"}'),
            ]
        ],
        toolkit=toolkit,
    )
    msg, rec = await run_with_interrupt(agent, 10)
    assert msg.finished_reason == "interrupted"
    assert rec.types[-1] == "REPLY_END"
    assert len(rec.ends) == 1
    reply_msg = agent.state.context[-1]
    calls = [b for b in reply_msg.content if isinstance(b, ToolCallBlock)]
    results = [b for b in reply_msg.content if isinstance(b, ToolResultBlock)]
    assert [c.state for c in calls] == [ToolCallState.FINISHED] * 2
    assert [r.id for r in results] == ["c1", "c2"]
    assert [r.state for r in results] == ["interrupted", "interrupted"]
    # The running call was interrupted by its own cancel path (list output); the pending one
    # was closed by the cleanup (str output).
    assert isinstance(results[0].output, list)
    assert [type(b) for b in results[0].output] == [TextBlock]
    assert results[0].output[0].text == INTERRUPTED_TOOL_TEXT  # type: ignore[union-attr]
    assert results[1].output == INTERRUPTED_TOOL_TEXT
    labels = [f"{e.type}:{getattr(e, 'tool_call_id', '')}" for e in rec.events]
    assert labels[-6:] == [
        "TOOL_RESULT_TEXT_DELTA:c1",
        "TOOL_RESULT_END:c1",
        "TOOL_RESULT_START:c2",
        "TOOL_RESULT_TEXT_DELTA:c2",
        "TOOL_RESULT_END:c2",
        "REPLY_END:",
    ]
    check_reply_rules(agent.state, agent.name, rec.events)


async def test_interrupt_during_concurrent_tools(autojump_clock):
    toolkit = Toolkit()
    from agent_helpers import ALLOW

    toolkit.register_function(slow_tool, is_concurrency_safe=True, permission=ALLOW)
    agent, _ = make_agent(
        [
            [
                *tool_call_chunks("c1", "slow_tool", '{"x": "1"}'),
                *tool_call_chunks("c2", "slow_tool", '{"x": "2"}'),
            ]
        ],
        toolkit=toolkit,
    )
    msg, rec = await run_with_interrupt(agent, 10)
    assert msg.finished_reason == "interrupted"
    results = [b for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock)]
    assert [r.id for r in results] == ["c1", "c2"]  # in call order
    assert all(r.state == "interrupted" and isinstance(r.output, list) for r in results)
    assert rec.types[-1] == "REPLY_END"
    assert len(rec.ends) == 1
    check_reply_rules(agent.state, agent.name, rec.events)


async def test_interrupt_mid_tool_call_stream_closes_the_partial_call(autojump_clock):
    toolkit = sequential_toolkit(slow_tool)
    agent, _ = make_agent(
        model=slow_model(tool_call_chunks("c1", "slow_tool", '{"x": ', '"1"', "}")),
        toolkit=toolkit,
    )
    msg, rec = await run_with_interrupt(agent, 2.5)
    assert msg.finished_reason == "interrupted"
    reply_msg = agent.state.context[-1]
    [call] = [b for b in reply_msg.content if isinstance(b, ToolCallBlock)]
    assert call.input == '{"x": "1"'  # the partial call is saved...
    assert call.state == ToolCallState.FINISHED
    [result] = [b for b in reply_msg.content if isinstance(b, ToolResultBlock)]
    assert result.state == "interrupted"  # ...and closed
    assert rec.types[-4:] == [
        "TOOL_RESULT_START",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_END",
        "REPLY_END",
    ]


async def test_state_round_trip_after_interrupt_and_a_valid_next_request(autojump_clock):
    toolkit = sequential_toolkit(slow_tool)
    agent, _ = make_agent(
        [
            [
                *text_chunks("working"),
                *tool_call_chunks("c1", "slow_tool", '{"x": "1"}'),
                *tool_call_chunks("c2", "slow_tool", '{"x": "2"}'),
            ]
        ],
        toolkit=toolkit,
    )
    await run_with_interrupt(agent, 5)
    payload = dumps(agent.state)
    restored = loads(payload, AgentState)
    assert dumps(restored) == payload

    agent2, model2 = make_agent(
        [text_chunks("fresh start")], toolkit=sequential_toolkit(slow_tool), state=restored
    )
    rec = Recorder()
    msg = await agent2.reply(user("again"), on_event=rec)
    assert msg.get_text_content() == "fresh start"
    assert rec.types[0] == "REPLY_START"
    assert agent2.state.reply_id != agent.state.reply_id
    sent = model2.requests[0].messages
    assert_paired(sent)
    calls = [b for m in sent for b in m.content if isinstance(b, ToolCallBlock)]
    assert [c.id for c in calls] == ["c1", "c2"]


# -- the channel form -------------------------------------------------------------------------


async def test_leaving_the_stream_early_interrupts_the_reply(autojump_clock):
    agent, model = make_agent(model=slow_model(text_chunks("a", "b", "c", "d")))
    events = []
    start = trio.current_time()
    async with agent.stream(user()) as reply:
        async for event in reply:
            events.append(event)
            if event.type == "TEXT_BLOCK_DELTA":
                break
    assert not agent.is_replying
    assert reply.msg is not None
    assert reply.msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert agent.state.context[-1].get_text_content() == "a"
    assert trio.current_time() - start < 2  # it did not wait for the remaining chunks
    model.add_steps(text_chunks("ok"))
    assert (await agent.reply(user())).get_text_content() == "ok"


async def test_stream_interrupted_from_the_consumer(autojump_clock):
    agent, _ = make_agent(model=slow_model(text_chunks("a", "b", "c", "d")))
    events = []
    async with agent.stream(user()) as reply:
        async for event in reply:
            events.append(event)
            if event.type == "TEXT_BLOCK_DELTA":
                agent.interrupt()
    assert events[-1].type == "REPLY_END"
    assert events[-1].finished_reason == "interrupted"
    assert sum(isinstance(e, ReplyEndEvent) for e in events) == 1
    assert reply.msg is not None
    assert reply.msg.finished_reason == "interrupted"


async def test_stream_completes_normally():
    agent, _ = make_agent([text_chunks("x", "y")])
    async with agent.stream(user()) as reply:
        events = [event async for event in reply]
    assert events[0].type == "REPLY_START"
    assert events[-1].type == "REPLY_END"
    assert reply.msg is not None
    assert reply.msg.get_text_content() == "xy"


async def test_user_interrupt_with_nothing_parked_is_silent():
    agent, model = make_agent([])
    rec = Recorder()
    with pytest.raises(RuntimeError, match="did not produce a final message"):
        await agent.reply(UserInterruptEvent(), on_event=rec)
    assert rec.events == []
    assert agent.state.context == []
    assert model.requests == []


async def test_interrupt_right_after_entering_the_stream_is_not_lost(autojump_clock):
    agent, _ = make_agent(model=slow_model(text_chunks("a", "b", "c")))
    start = trio.current_time()
    async with agent.stream(user()) as reply:
        agent.interrupt()  # the reply task may not have run yet
        events = [event async for event in reply]
    assert events[-1].type == "REPLY_END"
    assert events[-1].finished_reason == "interrupted"
    assert reply.msg is not None
    assert reply.msg.finished_reason == "interrupted"
    assert trio.current_time() - start < 1  # no chunk was waited for


async def test_stream_while_replying_fails_at_entry(autojump_clock):
    agent, _ = make_agent(model=slow_model(text_chunks("a", "b")))
    async with agent.stream(user()) as first:
        with pytest.raises(RuntimeError, match="already replying"):
            async with agent.stream(user()):
                pytest.fail("entered a second stream")  # pragma: no cover
        events = [event async for event in first]
    assert events[-1].finished_reason == "completed"


class SlowPreLogic(MiddlewareBase):
    """An on_reply middleware that awaits before the reply starts (like a model router)."""

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        await trio.sleep(5)
        await next_handler()


async def test_interrupt_before_the_reply_started_returns_the_interrupted_msg(autojump_clock):
    # Nothing was emitted yet, so there is no end event either; the caller asked for an
    # interruption and gets the interrupted Msg (not "Agent did not produce a final message").
    agent, model = make_agent([text_chunks("a")], middlewares=[SlowPreLogic()])
    msg, rec = await run_with_interrupt(agent, 1)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert msg.get_text_content() == agent.react_config.interruption_message
    assert rec.events == []
    assert agent.state.context == []
    assert model.requests == []
    assert not agent.is_replying


async def test_interrupt_from_the_event_callback(autojump_clock):
    agent, _ = make_agent(model=slow_model(text_chunks("a", "b", "c")))
    rec = Recorder()

    async def consumer(event):
        await rec(event)
        if event.type == "TEXT_BLOCK_DELTA":
            agent.interrupt()  # e.g. "stop after the first token"

    msg = await agent.reply(user(), on_event=consumer)
    assert msg.finished_reason == "interrupted"
    assert rec.types.count("TEXT_BLOCK_DELTA") == 1
    assert [e.finished_reason for e in rec.ends] == ["interrupted"]
    assert agent.state.context[-1].get_text_content() == "a"


async def test_a_stuck_consumer_cannot_hold_the_cleanup_past_the_grace(autojump_clock):
    agent, _ = make_agent(
        model=slow_model(text_chunks("a", "b", "c")),
        react_config=ReActConfig(interrupt_grace=2.0),
    )
    rec = Recorder()

    async def stuck(event):
        await rec(event)
        if event.type == "REPLY_END":
            await trio.sleep_forever()

    start = trio.current_time()
    with trio.move_on_after(1.5) as scope:
        await agent.reply(user(), on_event=stuck)
    assert scope.cancelled_caught
    assert trio.current_time() - start == pytest.approx(1.5 + 2.0)  # bounded by interrupt_grace
    assert [e.finished_reason for e in rec.ends] == ["interrupted"]
    assert not agent.is_replying


async def test_an_error_in_the_consumer_interrupts_the_reply_and_propagates(autojump_clock):
    agent, _ = make_agent(model=slow_model(text_chunks("a", "b", "c")))
    stream = agent.stream(user())

    async def consume() -> None:
        async with stream as reply:
            async for event in reply:
                if event.type == "TEXT_BLOCK_DELTA":
                    raise ValueError("consumer bug")

    with pytest.raises(ValueError, match="consumer bug"):  # not wrapped in a group
        await consume()
    assert not agent.is_replying
    assert stream.msg is not None
    assert stream.msg.finished_reason == "interrupted"
    assert_paired(agent.state.context)


async def test_outer_cancellation_around_the_stream(autojump_clock):
    agent, _ = make_agent(model=slow_model(text_chunks("a", "b", "c")))
    events = []
    with trio.move_on_after(1.5) as scope:
        async with agent.stream(user()) as reply:
            async for event in reply:
                events.append(event)
    assert scope.cancelled_caught
    assert events[-1].type == "TEXT_BLOCK_DELTA"  # the consumer was cancelled too
    assert reply.msg is not None
    assert reply.msg.finished_reason == "interrupted"
    assert not agent.is_replying

"""The ReAct agent (trioagent/agent/_agent.py): streamed replies, usage, thinking-only answers,
tool rounds and config hygiene as in AgentScope, adapted to the trio API, plus errors, the
missing-final-chunk guard and the max-iters round.

Further down: adversarial edge cases of the ReAct loop (trioagent/agent/_agent.py and friends):
interplay cases that the other test_agent*.py modules do not cover (replies, interruption and
the exactly-once end).
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import pydantic
import pytest
import trio
import trio.testing
from agent_helpers import (
    ALLOW,
    Recorder,
    assert_paired,
    final_response,
    kinds,
    make_agent,
    sequential_toolkit,
    user,
)

from trioagent.agent import Agent, ContextConfig, InjectionConfig, ModelConfig, ReActConfig
from trioagent.event import (
    ModelCallEndEvent,
    ReplyEndEvent,
    ReplyStartEvent,
    TextBlockDeltaEvent,
    ToolResultEndEvent,
)
from trioagent.exception import ModelError, ModelUpstreamError, ReplyInterruptedError
from trioagent.message import (
    AssistantMsg,
    HintBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
)
from trioagent.middleware import MiddlewareBase
from trioagent.model import ChatResponse, ChatUsage
from trioagent.testing import (
    ScriptedModel,
    cancel_sweep,
    check_reply_rules,
    text_chunks,
    thinking_chunks,
    tool_call_chunks,
)
from trioagent.tool import Toolkit
from trioagent.types import ErrorType, ReplyFinishedReason

# -- 1. a streamed text reply ---------------------------------------------------------------------


async def test_streaming_text_reply_events_context_and_final_msg():
    agent, model = make_agent([text_chunks("Hel", "lo", " world")])
    rec = Recorder()
    msg = await agent.reply(user("hi"), on_event=rec)

    assert rec.types == [
        "REPLY_START",
        "MODEL_CALL_START",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_END",
        "MODEL_CALL_END",
        "REPLY_END",
    ]
    assert [e.delta for e in rec.events if isinstance(e, TextBlockDeltaEvent)] == [
        "Hel",
        "lo",
        " world",
    ]
    start, end = rec.events[0], rec.events[-1]
    assert isinstance(start, ReplyStartEvent)
    assert start.name == "assistant"
    assert start.session_id == agent.state.session_id
    call_end = rec.events[-2]
    assert isinstance(call_end, ModelCallEndEvent)
    assert (call_end.input_tokens, call_end.output_tokens) == (0, 0)
    assert call_end.finished_reason == "completed"
    assert isinstance(end, ReplyEndEvent)
    assert end.finished_reason == "completed"
    assert end.error is None
    reply_id = agent.state.reply_id
    assert {e.reply_id for e in rec.events} == {reply_id}

    # context: [user msg (finished_at set), assistant msg holding the final text]
    ctx = agent.state.context
    assert [m.role for m in ctx] == ["user", "assistant"]
    assert ctx[0].finished_at is not None
    assert ctx[1].id == reply_id
    assert ctx[1].name == "assistant"
    assert ctx[1].get_text_content() == "Hello world"
    assert ctx[1].finished_reason is None
    assert ctx[1].finished_at is None
    assert agent.state.cur_iter == 1

    assert msg.id == reply_id
    assert msg.get_text_content() == "Hello world"
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert msg.usage is None
    # Unlike AgentScope, the final Msg does not share block objects with the context.
    assert msg.content[0] is not ctx[1].content[0]
    model.assert_consumed()


async def test_second_reply_appends_two_messages_with_a_new_reply_id():
    agent, model = make_agent([text_chunks("one"), text_chunks("two")])
    first = await agent.reply(user("a"))
    first_id = agent.state.reply_id
    second = await agent.reply(user("b"))
    assert agent.state.reply_id != first_id
    assert first.id == first_id
    assert second.id == agent.state.reply_id
    assert len(agent.state.context) == 4
    assert [m.get_text_content() for m in agent.state.context] == ["a", "one", "b", "two"]
    assert agent.state.cur_iter == 1
    # The second request carried the whole history.
    sent = model.requests[1].messages
    assert [m.role for m in sent] == ["system", "user", "assistant", "user"]


async def test_reply_with_a_str_raises_type_error():
    agent, model = make_agent([text_chunks("x")])
    with pytest.raises(TypeError, match="Msg"):
        await agent.reply("hello")  # type: ignore[arg-type]
    assert model.requests == []
    assert not agent.is_replying


async def test_call_is_reply_and_a_list_of_messages_is_accepted():
    agent, model = make_agent([text_chunks("ok")])
    msg = await agent([user("a"), user("b")])
    assert msg.get_text_content() == "ok"
    assert [m.get_text_content() for m in model.requests[0].messages[1:]] == ["a", "b"]


async def test_incoming_messages_are_deep_copies():
    agent, _ = make_agent([text_chunks("ok")])
    incoming = user("original")
    await agent.reply(incoming)
    incoming.content[0].text = "mutated"  # type: ignore[union-attr]
    assert agent.state.context[0].get_text_content() == "original"


async def test_non_streaming_response_is_converted_once():
    # A plain (non-streamed) response is converted as if it were a single chunk.
    model = ScriptedModel(
        [
            [*text_chunks("Let me ", "check."), *tool_call_chunks("c1", "_echo", '{"x": "1"}')],
            text_chunks("done"),
        ],
        stream=False,
    )
    agent, _ = make_agent(model=model, toolkit=sequential_toolkit(_echo))
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert rec.types == [
        "REPLY_START",
        "MODEL_CALL_START",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "TOOL_CALL_START",
        "TOOL_CALL_DELTA",
        "TEXT_BLOCK_END",
        "TOOL_CALL_END",
        "MODEL_CALL_END",
        "TOOL_RESULT_START",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_END",
        "MODEL_CALL_START",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_END",
        "MODEL_CALL_END",
        "REPLY_END",
    ]
    assert [e.delta for e in rec.events if isinstance(e, TextBlockDeltaEvent)] == [
        "Let me check.",
        "done",
    ]
    assert msg.get_text_content() == "done"


# -- 2. usage -------------------------------------------------------------------------------------


async def test_usage_reaches_model_call_end_context_and_final_msg():
    usage = ChatUsage(
        input_tokens=11, output_tokens=7, cache_input_tokens=None, cache_creation_input_tokens=3
    )
    agent, _ = make_agent([text_chunks("a", "b", usage=usage)])
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    end = next(e for e in rec.events if isinstance(e, ModelCallEndEvent))
    assert (end.input_tokens, end.output_tokens) == (11, 7)
    assert end.cache_input_tokens == 0  # None becomes 0
    assert end.cache_creation_input_tokens == 3
    for u in (agent.state.context[-1].usage, msg.usage):
        assert u is not None
        assert (u.input_tokens, u.output_tokens) == (11, 7)
        assert (u.cache_input_tokens, u.cache_creation_input_tokens) == (0, 3)


async def test_usage_accumulates_over_the_model_calls_of_a_reply():
    toolkit = sequential_toolkit(_echo)
    agent, _ = make_agent(
        [
            [
                *tool_call_chunks("c1", "_echo", '{"x": "a"}'),
                ChatResponse(content=[], is_last=False, usage=ChatUsage(input_tokens=5)),
            ],
            text_chunks("done", usage=ChatUsage(input_tokens=7, output_tokens=2)),
        ],
        toolkit=toolkit,
    )
    msg = await agent.reply(user())
    assert msg.usage is not None
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (12, 2)


# -- 3. thinking-only, then text ------------------------------------------------------------------


async def test_thinking_only_response_continues_the_loop():
    agent, model = make_agent([thinking_chunks("let me ", "think"), text_chunks("answer")])
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert len(model.requests) == 2
    assert agent.state.cur_iter == 2
    assert [type(b) for b in msg.content] == [TextBlock]
    assert msg.get_text_content() == "answer"
    reply_msg = agent.state.context[-1]
    assert [type(b) for b in reply_msg.content] == [ThinkingBlock, TextBlock]
    assert reply_msg.content[0].thinking == "let me think"  # type: ignore[union-attr]
    assert rec.types == [
        "REPLY_START",
        "MODEL_CALL_START",
        "THINKING_BLOCK_START",
        "THINKING_BLOCK_DELTA",
        "THINKING_BLOCK_DELTA",
        "THINKING_BLOCK_END",
        "MODEL_CALL_END",
        "MODEL_CALL_START",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_END",
        "MODEL_CALL_END",
        "REPLY_END",
    ]
    # The second request saw the thinking and no extra hint.
    second = model.requests[1].messages[-1]
    assert [type(b) for b in second.content] == [ThinkingBlock]


async def test_final_msg_keeps_thinking_of_the_last_response():
    agent, _ = make_agent(
        [[*thinking_chunks("hmm"), *text_chunks("answer")]],
    )
    msg = await agent.reply(user())
    assert [type(b) for b in msg.content] == [ThinkingBlock, TextBlock]


async def test_empty_response_ends_the_reply_with_an_empty_msg():
    # Kept from AgentScope: an empty model answer is a (blank) final answer.
    agent, model = make_agent([final_response()])
    msg = await agent.reply(user())
    assert msg.content == []
    assert msg.finished_reason == "completed"
    assert len(model.requests) == 1


# -- 4/5. tool rounds -----------------------------------------------------------------------------


def _echo(x: str) -> str:
    """Echo sequentially.

    Args:
        x: the value.
    """
    return f"Sequential result: {x}"


async def test_one_tool_round_then_text_with_max_iters_2():
    agent, model = make_agent(
        [tool_call_chunks("c1", "_echo", '{"x": "x"}'), text_chunks("done")],
        toolkit=sequential_toolkit(_echo),
        react_config=ReActConfig(max_iters=2),
    )
    msg = await agent.reply(user())
    assert msg.finished_reason == "completed"
    assert msg.get_text_content() == "done"
    assert len(model.requests) == 2
    assert agent.state.cur_iter == 2
    result = next(b for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock))
    assert result.state == ToolResultState.SUCCESS
    assert [b.text for b in result.output] == ["Sequential result: x"]  # type: ignore[union-attr]
    # The second request paired the call with its result.
    assert_paired(model.requests[1].messages)


async def test_sequential_tool_calls_streamed_in_fragments():
    toolkit = sequential_toolkit(_echo)
    chunks = [
        *text_chunks("I will ", "call", block_id="t1"),
        *tool_call_chunks("c1", "_echo", '{"x": ', '"a"}'),
        *tool_call_chunks("c2", "_echo", '{"x": "b"}'),
    ]
    agent, _ = make_agent([chunks, text_chunks("all done")], toolkit=toolkit)
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)

    def label(e):
        ident = getattr(e, "tool_call_id", None)
        return f"{e.type}:{ident}" if ident else str(e.type)

    assert [label(e) for e in rec.events] == [
        "REPLY_START",
        "MODEL_CALL_START",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_END",  # the first chunk without text closes the text block
        "TOOL_CALL_START:c1",
        "TOOL_CALL_DELTA:c1",
        "TOOL_CALL_DELTA:c1",
        "TOOL_CALL_START:c2",
        "TOOL_CALL_DELTA:c2",
        "TOOL_CALL_END:c1",  # c1 is missing from the chunk that starts c2
        "TOOL_CALL_END:c2",
        "MODEL_CALL_END",
        "TOOL_RESULT_START:c1",
        "TOOL_RESULT_TEXT_DELTA:c1",
        "TOOL_RESULT_END:c1",
        "TOOL_RESULT_START:c2",
        "TOOL_RESULT_TEXT_DELTA:c2",
        "TOOL_RESULT_END:c2",
        "MODEL_CALL_START",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_END",
        "MODEL_CALL_END",
        "REPLY_END",
    ]
    reply_msg = agent.state.context[-1]
    assert len(agent.state.context) == 2
    shape = [
        (type(b).__name__, getattr(b, "id", None) if not isinstance(b, TextBlock) else b.text)
        for b in reply_msg.content
    ]
    assert shape == [
        ("TextBlock", "I will call"),
        ("ToolCallBlock", "c1"),
        ("ToolCallBlock", "c2"),
        ("ToolResultBlock", "c1"),
        ("ToolResultBlock", "c2"),
        ("TextBlock", "all done"),
    ]
    calls = [b for b in reply_msg.content if isinstance(b, ToolCallBlock)]
    assert [c.state for c in calls] == [ToolCallState.FINISHED] * 2
    assert json.loads(calls[0].input) == {"x": "a"}
    results = [b for b in reply_msg.content if isinstance(b, ToolResultBlock)]
    assert [r.output[0].text for r in results] == [  # type: ignore[index,union-attr]
        "Sequential result: a",
        "Sequential result: b",
    ]
    ends = [e for e in rec.events if isinstance(e, ToolResultEndEvent)]
    assert [e.state for e in ends] == ["success", "success"]
    assert agent.state.cur_iter == 2
    assert msg.get_text_content() == "all done"


async def test_tool_exception_becomes_an_error_result_and_the_reply_continues():
    def boom() -> str:
        """Fail."""
        raise ValueError("kaput")

    agent, _ = make_agent(
        [tool_call_chunks("c1", "boom", "{}"), text_chunks("recovered")],
        toolkit=sequential_toolkit(boom),
    )
    msg = await agent.reply(user())
    assert msg.get_text_content() == "recovered"
    result = next(b for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock))
    assert result.state == ToolResultState.ERROR
    assert "kaput" in json.dumps([b.text for b in result.output])  # type: ignore[union-attr]


async def test_unknown_tool_gets_an_error_result():
    agent, model = make_agent(
        [tool_call_chunks("c1", "nope", "{}"), text_chunks("ok")],
    )
    rec = Recorder()
    await agent.reply(user(), on_event=rec)
    result = next(b for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock))
    assert result.state == ToolResultState.ERROR
    assert isinstance(result.output, str)
    assert "nope" in result.output
    assert_paired(model.requests[1].messages)


# -- max iterations ------------------------------------------------------------------------------


async def test_max_iters_forces_a_text_only_round():
    agent, model = make_agent(
        [tool_call_chunks("c1", "_echo", '{"x": "1"}'), text_chunks("summary")],
        toolkit=sequential_toolkit(_echo),
        react_config=ReActConfig(max_iters=1),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert model.requests[0].tool_choice is None
    forced = model.requests[1]
    assert forced.tool_choice is not None
    assert forced.tool_choice.mode == "none"
    hint = forced.messages[-1].content[-1]
    assert isinstance(hint, HintBlock)
    assert "maximum of 1 reasoning-acting iterations" in str(hint.hint)
    # As in AgentScope: the forced-final answer comes back as exceed_max_iters.
    assert msg.get_text_content() == "summary"
    assert msg.finished_reason == ReplyFinishedReason.EXCEED_MAX_ITERS
    assert agent.state.cur_iter == 2
    assert rec.types[-2:] == ["EXCEED_MAX_ITERS", "REPLY_END"]
    assert rec.ends[0].finished_reason == "exceed_max_iters"


async def test_max_iters_zero_first_reasoning_is_forced():
    agent, model = make_agent([text_chunks("final")], react_config=ReActConfig(max_iters=0))
    msg = await agent.reply(user())
    assert model.requests[0].tool_choice is not None
    assert model.requests[0].tool_choice.mode == "none"
    assert msg.finished_reason == ReplyFinishedReason.EXCEED_MAX_ITERS


async def test_model_ignoring_tool_choice_none_gets_the_canned_exceed_msg():
    agent, _ = make_agent(
        [tool_call_chunks("c1", "_echo", '{"x": "1"}')],
        toolkit=sequential_toolkit(_echo),
        react_config=ReActConfig(max_iters=0),
    )
    msg = await agent.reply(user())
    assert msg.get_text_content() == "The maximum reasoning-acting iterations are exceeded."
    assert msg.finished_reason == "exceed_max_iters"
    # As in AgentScope, the tool still ran (the model ignored tool_choice=none) and has its result.
    assert_paired(agent.state.context)


# -- 7. config hygiene ----------------------------------------------------------------------------


async def test_default_configs_are_separate_objects_per_agent():
    a, _ = make_agent(inject=True)
    b, _ = make_agent(inject=True)
    for attr in ("model_config", "context_config", "react_config", "injection_config"):
        assert getattr(a, attr) is not getattr(b, attr)
    assert a.state is not b.state
    a.react_config.max_iters = 3
    assert b.react_config.max_iters == 50


def test_reserve_ratio_must_be_below_trigger_ratio():
    with pytest.raises(ValueError, match="reserve_ratio"):
        ContextConfig(trigger_ratio=0.5, reserve_ratio=0.5)
    with pytest.raises(ValueError, match="reserve_ratio"):
        ContextConfig(trigger_ratio=0.5, reserve_ratio=0.6)


@pytest.mark.parametrize(
    ("field", "value", "interval"),
    [
        ("trigger_ratio", 0, "(0, 0.9]"),
        ("trigger_ratio", 0.91, "(0, 0.9]"),
        ("reserve_ratio", 0, "(0, 0.9)"),
        ("reserve_ratio", 0.9, "(0, 0.9)"),
        ("context_buffer_ratio", -0.1, "[0, 1]"),
        ("context_buffer_ratio", 1.1, "[0, 1]"),
    ],
)
def test_ratios_outside_their_interval_are_rejected(field: str, value: float, interval: str):
    with pytest.raises(ValueError, match=re.escape(f"{field} must be in {interval}, got {value}")):
        ContextConfig(**{field: value})


def test_ratios_at_their_closed_bounds_are_accepted():
    config = ContextConfig(trigger_ratio=0.9, reserve_ratio=0.05, context_buffer_ratio=0)
    assert (config.trigger_ratio, config.context_buffer_ratio) == (0.9, 0)
    assert ContextConfig(context_buffer_ratio=1).context_buffer_ratio == 1


def test_compression_tool_needs_a_buffer_below_the_trigger():
    config = ContextConfig(
        trigger_ratio=0.5, context_buffer_ratio=0.5, compression_tool_enabled=True
    )
    off = InjectionConfig(inject_runtime_state=False)
    with pytest.raises(ValueError, match="context_buffer_ratio must be smaller than trigger_ratio"):
        Agent("a", "", ScriptedModel(), context_config=config, injection_config=off)
    config.compression_tool_enabled = False
    Agent("a", "", ScriptedModel(), context_config=config, injection_config=off)  # no check


def test_injection_template_must_hold_the_runtime_state():
    with pytest.raises(ValueError, match=re.escape("must contain '{runtime_state}'")):
        InjectionConfig(template="no placeholder")


def test_an_unknown_timezone_warns_and_falls_back_to_utc():
    with pytest.warns(RuntimeWarning, match="unknown timezone 'Mars/Olympus'"):
        config = InjectionConfig(timezone="Mars/Olympus")
    assert config.timezone == "UTC"


def test_deprecated_injection_buffer_ratio_at_or_above_trigger_raises():
    with pytest.warns(DeprecationWarning, match="context_buffer_ratio"):
        injection = InjectionConfig(context_buffer_ratio=0.8)
    with pytest.raises(ValueError, match="context_buffer_ratio"):
        Agent("a", "", ScriptedModel(), injection_config=injection)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ok = InjectionConfig(context_buffer_ratio=0.3)
    agent = Agent("a", "", ScriptedModel(), injection_config=ok)
    assert agent.context_config.context_buffer_ratio == 0.3


def test_agent_constructor_checks():
    with pytest.raises(ValueError, match="name"):
        Agent("", "", ScriptedModel())
    with pytest.raises(TypeError, match="model"):
        Agent("a", "")
    with pytest.raises(TypeError, match="MiddlewareBase"):
        Agent("a", "", ScriptedModel(), middlewares=[object()])  # type: ignore[list-item]


# -- errors: exactly one ERROR end, then the exception -------------------------------------------


async def test_model_error_emits_one_error_end_then_propagates_from_reply():
    agent, model = make_agent([ModelUpstreamError("upstream exploded", status_code=500)])
    rec = Recorder()
    with pytest.raises(ModelError, match="upstream exploded"):
        await agent.reply(user(), on_event=rec)
    assert rec.types == ["REPLY_START", "MODEL_CALL_START", "REPLY_END"]
    end = rec.events[-1]
    assert isinstance(end, ReplyEndEvent)
    assert end.finished_reason == ReplyFinishedReason.ERROR
    assert end.error is not None
    assert "upstream exploded" in end.error.message
    assert end.error.type == ErrorType.UPSTREAM
    assert not agent.is_replying
    # The agent is usable again afterwards.
    model.add_steps(text_chunks("fine"))
    assert (await agent.reply(user())).get_text_content() == "fine"


async def test_a_stream_used_outside_its_async_with_is_a_clear_error():
    agent, _ = make_agent([text_chunks("never")])
    stream = agent.stream(user())
    with pytest.raises(RuntimeError, match=re.escape("use `async with agent.stream(...)")):
        await stream.__anext__()
    with pytest.raises(RuntimeError, match="the stream is not open"):
        await stream.receive()
    with pytest.raises(RuntimeError, match="the stream is not open"):
        _ = stream.channel
    assert not agent.is_replying


async def test_a_streams_result_is_its_final_msg_and_an_error_before_the_end():
    agent, _ = make_agent([text_chunks("all ", "done")])
    async with agent.stream(user()) as reply:
        with pytest.raises(RuntimeError, match="has not produced its final Msg yet"):
            _ = reply.result
        async for _event in reply:
            pass
    assert reply.result is reply.msg
    assert reply.result.get_text_content() == "all done"


async def test_model_error_propagates_from_stream_after_the_error_end():
    agent, _ = make_agent([RuntimeError("bad model")])
    events = []
    stream = agent.stream(user())

    async def consume() -> None:
        async with stream as reply:
            async for event in reply:
                events.append(event)

    with pytest.raises(RuntimeError, match="bad model"):
        await consume()
    assert kinds(events) == ["REPLY_START", "MODEL_CALL_START", "REPLY_END"]
    assert events[-1].finished_reason == "error"
    assert stream.msg is not None
    assert stream.msg.finished_reason == ReplyFinishedReason.ERROR
    assert stream.msg.error is not None


async def test_error_after_streamed_chunks_is_not_retried_and_ends_once():
    class Failing(ScriptedModel):
        calls = 0

        async def _stream_api(self, messages, tools, tool_choice, send):
            Failing.calls += 1
            await send(text_chunks("partial")[0])
            raise ModelError("broke mid-stream", status_code=500)

    model = Failing([text_chunks("unused")])
    agent, _ = make_agent(model=model, model_config=ModelConfig(max_retries=2))
    rec = Recorder()
    with pytest.raises(ModelError, match="broke mid-stream"):
        await agent.reply(user(), on_event=rec)
    assert Failing.calls == 1  # a stream that emitted chunks is never replayed
    assert len(rec.ends) == 1
    assert rec.types[-1] == "REPLY_END"
    # The open text block was closed before the end.
    assert rec.types[-3:] == ["TEXT_BLOCK_DELTA", "TEXT_BLOCK_END", "REPLY_END"]


class DeltasOnly(MiddlewareBase):
    """An on_model_call middleware that forwards only the deltas (drops the final chunk)."""

    async def on_model_call(self, agent, input_kwargs, next_handler, emit):
        async def sink(item: ChatResponse) -> None:
            if not item.is_last:
                await emit(item)

        await next_handler(sink)


async def test_stream_without_final_chunk_is_a_clear_runtime_error():
    agent, _ = make_agent([text_chunks("a", "b")], middlewares=[DeltasOnly()])
    rec = Recorder()
    with pytest.raises(RuntimeError, match="no is_last=True chunk"):
        await agent.reply(user(), on_event=rec)
    assert len(rec.ends) == 1
    assert rec.events[-1].finished_reason == "error"
    assert "is_last" in rec.events[-1].error.message
    # The open text block was closed before the ERROR end.
    assert rec.types[-2:] == ["TEXT_BLOCK_END", "REPLY_END"]


async def test_one_reply_at_a_time():
    async def hang(request):
        await trio.sleep_forever()

    agent, _ = make_agent([hang])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.reply, user())
        await trio.testing.wait_all_tasks_blocked()
        assert agent.is_replying
        with pytest.raises(RuntimeError, match="already replying"):
            await agent.reply(user())
        agent.interrupt()


# -- retries and fallback -------------------------------------------------------------------------


async def test_model_config_retries_then_fallback():
    fallback = ScriptedModel([text_chunks("from fallback")], model="backup")
    agent, primary = make_agent(
        [ModelError("p1", status_code=500), ModelError("p2", status_code=500)],
        model_config=ModelConfig(max_retries=1, fallback_model=fallback),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.get_text_content() == "from fallback"
    assert len(primary.requests) == 2
    assert len(fallback.requests) == 1
    starts = [e for e in rec.events if e.type == "MODEL_CALL_START"]
    assert len(starts) == 1
    # As in AgentScope, MODEL_CALL_START names the primary model (also for a fallback).
    assert starts[0].model_name == "scripted-model"


async def test_all_attempts_failing_raises_the_last_error():
    fallback = ScriptedModel([ValueError("fb failed")])
    agent, _ = make_agent(
        [ValueError("p failed")],
        model_config=ModelConfig(fallback_model=fallback),
    )
    rec = Recorder()
    with pytest.raises(ValueError, match="fb failed"):
        await agent.reply(user(), on_event=rec)
    assert rec.ends[-1].finished_reason == "error"


# -- observe --------------------------------------------------------------------------------------


async def test_observe_appends_copies_without_a_model_call():
    agent, model = make_agent()
    msg = user("note")
    await agent.observe(msg)
    await agent.observe([user("x"), user("y")])
    await agent.observe(None)
    assert [m.get_text_content() for m in agent.state.context] == ["note", "x", "y"]
    assert agent.state.context[0] is not msg
    assert model.requests == []


async def test_observe_rejects_system_and_tool_blocks():
    from trioagent.message import AssistantMsg, SystemMsg

    agent, _ = make_agent()
    with pytest.raises(ValueError, match="system"):
        await agent.observe(SystemMsg("s", "x"))
    with pytest.raises(ValueError, match="tool_call"):
        await agent.observe(AssistantMsg("a", [ToolCallBlock(id="c", name="t", input="{}")]))
    with pytest.raises(TypeError, match="Msg"):  # a wrong type is a TypeError
        await agent.observe(["text"])  # type: ignore[list-item]
    assert agent.state.context == []


async def test_unsupported_media_is_replaced_by_a_reminder():
    from trioagent.message import Base64Source, DataBlock, URLSource, UserMsg

    class Formatter:
        supported_input_media_types = ("image/*",)

    agent, _ = make_agent()
    agent.model.formatter = Formatter()  # type: ignore[assignment]
    await agent.observe(
        UserMsg(
            "user",
            [
                DataBlock(source=Base64Source(data="AAAA", media_type="image/png")),
                DataBlock(source=Base64Source(data="AAAA", media_type="audio/wav"), name="a.wav"),
                DataBlock(
                    source=URLSource(url="https://x.test/f.pdf", media_type="application/pdf")
                ),
            ],
        )
    )
    content = agent.state.context[0].content
    assert isinstance(content[0], DataBlock)
    assert content[1] == TextBlock(
        id=content[1].id,
        created_at=content[1].created_at,
        text="<system-reminder>An unsupported input file named 'a.wav' is attached with media type 'audio/wav'.</system-reminder>",
    )
    assert "is saved into https://x.test/f.pdf" in content[2].text  # type: ignore[union-attr]


async def test_toolkit_default_is_empty():
    agent, _ = make_agent()
    assert isinstance(agent.toolkit, Toolkit)
    assert agent.toolkit.get_tool_schemas() == []


async def test_register_with_allow_permission_runs_without_asking():
    toolkit = Toolkit()
    toolkit.register_function(_echo, permission=ALLOW)
    agent, _ = make_agent(
        [tool_call_chunks("c1", "_echo", '{"x": "q"}'), text_chunks("ok")], toolkit=toolkit
    )
    await agent.reply(user())
    assert_paired(agent.state.context)


class _AbandonStalledCall(MiddlewareBase):
    """Pull-style watchdog: gives up on a model call that sent nothing for 1 s and raises."""

    async def on_model_call(self, agent, input_kwargs, next_handler, emit):
        async with next_handler.stream() as chunks:
            while True:
                with trio.move_on_after(1) as timer:
                    try:
                        item = await chunks.receive()
                    except trio.EndOfChannel:
                        return
                if timer.cancelled_caught:
                    raise TimeoutError("the model stalled")
                await emit(item)


async def test_abandoned_call_is_retried_despite_its_interrupted_partial(autojump_clock):
    # Leaving the pull stream cancels the inner call, whose (empty) INTERRUPTED final response
    # still travels outward; it carries no delta, so the agent-level retry must still happen.
    async def stall(request):
        await trio.sleep_forever()

    agent, model = make_agent(
        [stall, text_chunks("second try")],
        middlewares=[_AbandonStalledCall()],
        model_config=ModelConfig(max_retries=1),
    )
    recorder = Recorder()
    msg = await agent.reply(user(), on_event=recorder)
    assert msg.get_text_content() == "second try"
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert len(model.requests) == 2
    assert [e.finished_reason for e in recorder.ends] == [ReplyFinishedReason.COMPLETED]


# == edge cases ====================================================================================
def call(call_id: str, name: str, **arguments: object) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, input=json.dumps(arguments))


def calls(*blocks: ToolCallBlock, usage: ChatUsage | None = None) -> ChatResponse:
    return ChatResponse(content=list(blocks), usage=usage)


def text(value: str, usage: ChatUsage | None = None) -> ChatResponse:
    return ChatResponse(content=[TextBlock(text=value)], usage=usage)


async def echo(x: str) -> str:
    """Echo the input.

    Args:
        x: the text.
    """
    return f"echo:{x}"


class Answer(pydantic.BaseModel):
    value: int


def results(agent) -> list[ToolResultBlock]:
    return [b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock)]


def rules(agent, rec: Recorder) -> None:
    check_reply_rules(agent.state, agent.name, rec.events)
    assert_paired(agent.state.context)


# -- max_iters ------------------------------------------------------------------------------------


async def test_max_iters_one_tool_round_then_forced_text():
    agent, model = make_agent(
        [calls(call("c1", "echo", x="a")), text("done")],
        toolkit=sequential_toolkit(echo),
        react_config=ReActConfig(max_iters=1),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    # The forced-final answer is EXCEED_MAX_ITERS, as in AgentScope.
    assert msg.finished_reason == ReplyFinishedReason.EXCEED_MAX_ITERS
    assert msg.get_text_content() == "done"
    assert model.requests[0].tool_choice is None
    assert model.requests[1].tool_choice.mode == "none"
    rules(agent, rec)
    model.assert_consumed()


async def test_max_iters_zero_with_a_tool_call_ignoring_tool_choice_none():
    agent, model = make_agent(
        [calls(call("c1", "echo", x="a"))],
        toolkit=sequential_toolkit(echo),
        react_config=ReActConfig(max_iters=0),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.EXCEED_MAX_ITERS
    assert [e.finished_reason for e in rec.ends] == ["exceed_max_iters"]
    rules(agent, rec)
    model.assert_consumed()


async def test_max_iters_zero_structured_output_is_forced_at_once():
    agent, model = make_agent(
        [calls(call("s1", "GenerateStructuredOutput", value=3))],
        react_config=ReActConfig(max_iters=0),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec, structured_schema=Answer)
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert msg.structured_output == {"value": 3}
    assert model.requests[0].tool_choice.mode == "GenerateStructuredOutput"
    rules(agent, rec)
    model.assert_consumed()


async def test_max_iters_zero_structured_output_never_given_exceeds():
    agent, model = make_agent(
        [text("no")] * 10,
        react_config=ReActConfig(max_iters=0),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec, structured_schema=Answer)
    assert msg.finished_reason == ReplyFinishedReason.EXCEED_MAX_ITERS
    assert msg.structured_output is None
    assert len(rec.ends) == 1
    assert rec.events[-1] is rec.ends[0]
    rules(agent, rec)
    assert len(model.requests) == agent.react_config.structured_output_grace_iters


# -- odd model responses --------------------------------------------------------------------------


async def test_empty_response_after_a_tool_round_ends_with_an_empty_msg():
    agent, model = make_agent(
        [calls(call("c1", "echo", x="a")), ChatResponse(content=[])],
        toolkit=sequential_toolkit(echo),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert msg.content == []
    rules(agent, rec)
    model.assert_consumed()


async def test_thinking_only_responses_count_as_iterations():
    thinking = ChatResponse(content=[ThinkingBlock(thinking="hmm")])
    agent, _model = make_agent(
        [thinking, thinking, thinking, text("fine")],
        react_config=ReActConfig(max_iters=2),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    # Two free rounds, then the forced text-only round; never an endless loop.
    assert msg.finished_reason in {
        ReplyFinishedReason.COMPLETED,
        ReplyFinishedReason.EXCEED_MAX_ITERS,
    }
    assert len(rec.ends) == 1
    rules(agent, rec)


async def test_unknown_and_valid_tool_in_one_response():
    agent, _model = make_agent(
        [calls(call("c1", "nope", x="a"), call("c2", "echo", x="b")), text("ok")],
        toolkit=sequential_toolkit(echo),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.get_text_content() == "ok"
    by_id = {r.id: r for r in results(agent)}
    assert set(by_id) == {"c1", "c2"}
    assert "echo:b" in str(by_id["c2"].output)
    assert by_id["c1"].state == "error"
    rules(agent, rec)


async def test_empty_tool_name_is_an_error_result():
    agent, _model = make_agent(
        [calls(call("c1", "", x="a")), text("ok")],
        toolkit=sequential_toolkit(echo),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.get_text_content() == "ok"
    (result,) = results(agent)
    assert result.id == "c1"
    assert result.state == "error"
    rules(agent, rec)


async def test_duplicate_tool_call_id_in_one_response():
    agent, model = make_agent(
        [calls(call("dup", "echo", x="a"), call("dup", "echo", x="b")), text("ok")],
        toolkit=sequential_toolkit(echo),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.get_text_content() == "ok"
    # The provider bug is absorbed (the blocks are merged by id): one call, one result, and
    # the next request holds no orphaned or doubled id.
    rules(agent, rec)
    last_request = model.requests[-1].messages
    assert_paired(last_request)
    assert [r.id for r in results(agent)] == ["dup"]


# -- interrupt() in odd places --------------------------------------------------------------------


async def test_interrupt_twice_ends_once(autojump_clock):
    agent, _ = make_agent(model=ScriptedModel([text_chunks("a", "b", "c")], chunk_delay=1.0))
    rec = Recorder()
    async with trio.open_nursery() as nursery:

        async def twice() -> None:
            await trio.sleep(1.5)
            agent.interrupt()
            agent.interrupt()
            await trio.testing.wait_all_tasks_blocked()
            agent.interrupt()

        nursery.start_soon(twice)
        msg = await agent.reply(user(), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [e.finished_reason for e in rec.ends] == ["interrupted"]
    assert rec.events[-1] is rec.ends[0]
    assert not agent.is_replying


async def test_interrupt_after_the_reply_does_not_touch_the_next_one():
    agent, _model = make_agent([text("one"), text("two")])
    await agent.reply(user())
    agent.interrupt()
    agent.interrupt()
    msg = await agent.reply(user())
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert msg.get_text_content() == "two"


async def test_interrupt_from_inside_a_tool():
    agent_box: list = []

    async def stopper(x: str) -> str:
        """Interrupt the agent running this tool.

        Args:
            x: ignored.
        """
        agent_box[0].interrupt()
        await trio.sleep_forever()
        return "never"  # pragma: no cover

    agent, model = make_agent(
        [calls(call("c1", "stopper", x="a"), call("c2", "echo", x="b"))],
        toolkit=sequential_toolkit(stopper, echo),
    )
    agent_box.append(agent)
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert {r.id for r in results(agent)} == {"c1", "c2"}
    assert all(r.state == "interrupted" for r in results(agent))
    rules(agent, rec)
    model.assert_consumed()


async def test_interrupt_from_a_tool_that_then_returns_normally():
    agent_box: list = []

    async def quitter(x: str) -> str:
        """Interrupt the agent and return at once.

        Args:
            x: ignored.
        """
        agent_box[0].interrupt()
        return "done anyway"

    agent, _model = make_agent(
        [calls(call("c1", "quitter", x="a"))], toolkit=sequential_toolkit(quitter)
    )
    agent_box.append(agent)
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [r.id for r in results(agent)] == ["c1"]
    rules(agent, rec)


async def test_interrupt_from_on_event_at_the_tool_result():
    agent, _model = make_agent(
        [calls(call("c1", "echo", x="a"), call("c2", "echo", x="b")), text("never")],
        toolkit=sequential_toolkit(echo),
    )
    events: list = []

    async def on_event(event) -> None:
        events.append(event)
        if str(event.type) == "TOOL_RESULT_END":
            agent.interrupt()

    msg = await agent.reply(user(), on_event=on_event)
    # The cancellation lands at the next checkpoint (the tools here have none, so the second
    # one may still finish), but the reply ends interrupted and never answers "never".
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert "never" not in msg.get_text_content()
    check_reply_rules(agent.state, agent.name, events)
    assert_paired(agent.state.context)
    assert not any(
        isinstance(b, TextBlock) and b.text == "never"
        for m in agent.state.context
        for b in m.content
    )


# -- concurrent and odd reply() calls -------------------------------------------------------------


async def _drain(stream) -> None:
    async with stream as events:
        async for _ in events:
            pass  # pragma: no cover


async def test_a_second_reply_while_replying_is_a_clear_error_and_leaves_the_first_alone(
    autojump_clock,
):
    agent, _ = make_agent(model=ScriptedModel([text_chunks("a", "b")], chunk_delay=1.0))
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        first: list = []

        async def reply() -> None:
            first.append(await agent.reply(user(), on_event=rec))

        nursery.start_soon(reply)
        await trio.testing.wait_all_tasks_blocked()
        assert agent.is_replying
        with pytest.raises(RuntimeError, match="already replying"):
            await agent.reply(user("again"))
        with pytest.raises(RuntimeError, match="already replying"):
            await _drain(agent.stream(user("again")))
    assert first[0].finished_reason == ReplyFinishedReason.COMPLETED
    assert first[0].get_text_content() == "ab"
    assert len(rec.ends) == 1
    assert [m.get_text_content() for m in agent.state.context if m.role == "user"] == ["hi"]


async def test_reply_with_a_list_holding_an_assistant_message():
    agent, model = make_agent([text("third")])
    history = [user("first"), AssistantMsg("someone", "second")]
    msg = await agent.reply(history)
    assert msg.get_text_content() == "third"
    sent = model.requests[0].messages
    assert [m.role for m in sent] == ["system", "user", "assistant"]
    assert [m.role for m in agent.state.context] == ["user", "assistant", "assistant"]


async def test_reply_with_a_list_holding_an_assistant_tool_call_is_rejected():
    agent, model = make_agent([text("never")])
    bad = AssistantMsg("someone", [call("x", "echo", x="a")])
    with pytest.raises(ValueError, match="tool_call"):
        await agent.reply([user(), bad])
    assert not agent.is_replying
    assert len(model.requests) == 0


# -- middlewares failing after partial output -----------------------------------------------------


class FailAfterReasoning(MiddlewareBase):
    async def on_reasoning(self, agent, input_kwargs, next_handler, emit):
        await next_handler()
        raise ValueError("reasoning hook broke")


class FailAfterActing(MiddlewareBase):
    async def on_acting(self, agent, input_kwargs, next_handler, emit):
        await next_handler()
        raise ValueError("acting hook broke")


class FailMidActing(MiddlewareBase):
    """Lets the tool's first chunk out, then fails."""

    async def on_acting(self, agent, input_kwargs, next_handler, emit):
        async def sink(item):
            await emit(item)
            raise ValueError("acting sink broke")

        await next_handler(sink)


@pytest.mark.parametrize(
    ("middleware", "message"),
    [
        (FailAfterReasoning(), "reasoning hook broke"),
        (FailAfterActing(), "acting hook broke"),
        (FailMidActing(), "acting sink broke"),
    ],
)
async def test_hook_failing_after_partial_output_ends_with_one_error(middleware, message):
    agent, model = make_agent(
        [calls(call("c1", "echo", x="a"), call("c2", "echo", x="b")), text("never")],
        toolkit=sequential_toolkit(echo),
        middlewares=[middleware],
    )
    rec = Recorder()
    with pytest.raises(ValueError, match=message):
        await agent.reply(user(), on_event=rec)
    assert [e.finished_reason for e in rec.ends] == ["error"]
    assert message in rec.ends[0].error.message
    assert not agent.is_replying
    # Every call got exactly one result (an error one where the tool never finished), and
    # the reply stopped: no further model call.
    rules(agent, rec)
    assert {r.id for r in results(agent)} == {"c1", "c2"}
    assert model.remaining == 1


async def test_hook_failing_after_the_final_text_ends_with_one_error():
    agent, _model = make_agent([text("final")], middlewares=[FailAfterReasoning()])
    rec = Recorder()
    with pytest.raises(ValueError, match="reasoning hook broke"):
        await agent.reply(user(), on_event=rec)
    assert rec.types[-1] == "REPLY_END"
    assert [e.finished_reason for e in rec.ends] == ["error"]


# -- interruption_raise_cancelled_error ------------------------------------------------------------


RAISE = ReActConfig(interruption_raise_cancelled_error=True)


async def test_raise_cancelled_error_with_interrupt_during_a_tool(autojump_clock):
    async def slow(x: str) -> str:
        """Take long.

        Args:
            x: ignored.
        """
        await trio.sleep(10)
        return "late"  # pragma: no cover

    agent, _model = make_agent(
        [calls(call("c1", "slow", x="a"))], toolkit=sequential_toolkit(slow), react_config=RAISE
    )
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _interrupt_later(agent, 1.0))
        with pytest.raises(ReplyInterruptedError) as info:
            await agent.reply(user(), on_event=rec)
    assert info.value.msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [e.finished_reason for e in rec.ends] == ["interrupted"]
    rules(agent, rec)


async def _interrupt_later(agent, delay: float) -> None:
    await trio.sleep(delay)
    agent.interrupt()


async def test_raise_cancelled_error_with_an_outer_cancel_propagates_cancelled(autojump_clock):
    agent, _ = make_agent(
        model=ScriptedModel([text_chunks("a", "b", "c")], chunk_delay=1.0), react_config=RAISE
    )
    rec = Recorder()
    with trio.move_on_after(1.5) as scope:
        await agent.reply(user(), on_event=rec)
    assert scope.cancelled_caught
    assert [e.finished_reason for e in rec.ends] == ["interrupted"]
    assert not agent.is_replying


async def test_raise_cancelled_error_with_interrupt_and_outer_cancel_together(autojump_clock):
    agent, _ = make_agent(
        model=ScriptedModel([text_chunks("a", "b", "c")], chunk_delay=1.0), react_config=RAISE
    )
    rec = Recorder()
    with trio.move_on_after(1.5) as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: _interrupt_later(agent, 1.5))
            await agent.reply(user(), on_event=rec)
    # Whichever lands first, the outer cancel is never swallowed and there is one end.
    assert scope.cancelled_caught
    assert [e.finished_reason for e in rec.ends] == ["interrupted"]
    assert not agent.is_replying


async def test_raise_cancelled_error_does_not_apply_to_a_user_interrupt_event_with_nothing_parked():
    from trioagent.event import UserInterruptEvent

    agent, _ = make_agent([], react_config=RAISE)
    with pytest.raises(RuntimeError, match="final message"):
        await agent.reply(UserInterruptEvent())


# -- usage accounting -----------------------------------------------------------------------------


async def test_usage_sums_over_tool_rounds_and_ignores_failed_attempts():
    agent, model = make_agent(
        [
            RuntimeError("flaky"),
            calls(call("c1", "echo", x="a"), usage=ChatUsage(input_tokens=10, output_tokens=1)),
            RuntimeError("flaky again"),
            text("done", usage=ChatUsage(input_tokens=20, output_tokens=2, cache_input_tokens=5)),
        ],
        toolkit=sequential_toolkit(echo),
        model_config=ModelConfig(max_retries=1),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.get_text_content() == "done"
    assert msg.usage is not None
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (30, 3)
    assert msg.usage.cache_input_tokens == 5
    ends = [e for e in rec.events if str(e.type) == "MODEL_CALL_END"]
    assert sum(e.input_tokens for e in ends) == 30
    model.assert_consumed()


async def test_usage_of_an_exceeded_reply_counts_every_round():
    agent, _model = make_agent(
        [
            calls(call("c1", "echo", x="a"), usage=ChatUsage(input_tokens=1, output_tokens=1)),
            calls(call("c2", "echo", x="b"), usage=ChatUsage(input_tokens=2, output_tokens=2)),
        ],
        toolkit=sequential_toolkit(echo),
        react_config=ReActConfig(max_iters=0),
    )
    msg = await agent.reply(user())
    assert msg.finished_reason == ReplyFinishedReason.EXCEED_MAX_ITERS
    assert msg.usage is not None
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (1, 1)


# -- cancel sweeps over the odd shapes ------------------------------------------------------------


def _odd_steps() -> list:
    return [
        calls(call("c1", "nope", x="a"), call("c2", "echo", x="b"), call("c3", "", x="c")),
        ChatResponse(content=[ThinkingBlock(thinking="hmm")]),
        calls(call("dup", "echo", x="d"), call("dup", "echo", x="e")),
        ChatResponse(content=[]),
    ]


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_cancel_sweep_over_odd_tool_calls_and_empty_responses(autojump_clock, mode):
    def build():
        agent, _ = make_agent(_odd_steps(), toolkit=sequential_toolkit(echo))
        return agent

    report = await cancel_sweep(build, user, mode=mode)
    assert report.points > 0


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_cancel_sweep_over_a_forced_structured_reply(autojump_clock, mode):
    def build():
        agent, _ = make_agent(
            [
                calls(call("s0", "GenerateStructuredOutput", value="x")),
                calls(call("s1", "GenerateStructuredOutput", value=3)),
            ],
            react_config=ReActConfig(max_iters=0, structured_output_grace_iters=2),
        )
        return agent

    report = await cancel_sweep(build, user, mode=mode, structured_schema=Answer)
    assert report.points > 0


# -- re-entrancy ----------------------------------------------------------------------------------


async def test_a_tool_replying_on_its_own_agent_gets_an_error_result():
    agent_box: list = []

    async def reenter(x: str) -> str:
        """Reply on the agent running this tool.

        Args:
            x: ignored.
        """
        await agent_box[0].reply(user("inner"))
        return "never"  # pragma: no cover

    agent, _model = make_agent(
        [calls(call("c1", "reenter", x="a")), text("ok")], toolkit=sequential_toolkit(reenter)
    )
    agent_box.append(agent)
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.get_text_content() == "ok"
    (result,) = results(agent)
    assert result.state == "error"
    assert "already replying" in str(result.output)
    assert [m.get_text_content() for m in agent.state.context if m.role == "user"] == ["hi"]
    rules(agent, rec)


async def test_a_reply_from_the_event_callback_is_refused_and_the_reply_goes_on():
    agent, _ = make_agent([text("ok")])
    refused: list[RuntimeError] = []

    async def on_event(event) -> None:
        if str(event.type) == "REPLY_START":
            with pytest.raises(RuntimeError, match="already replying") as info:
                await agent.reply(user("nested"))
            refused.append(info.value)

    msg = await agent.reply(user(), on_event=on_event)
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert len(refused) == 1


async def test_interrupt_from_inside_concurrent_tools():
    agent_box: list = []

    async def stopper(x: str) -> str:
        """Interrupt the agent running this tool.

        Args:
            x: ignored.
        """
        agent_box[0].interrupt()
        await trio.sleep_forever()
        return "never"  # pragma: no cover

    toolkit = Toolkit()
    toolkit.register_function(stopper, is_concurrency_safe=True, permission=ALLOW)
    agent, _ = make_agent(
        [calls(call("c1", "stopper", x="a"), call("c2", "stopper", x="b"))], toolkit=toolkit
    )
    agent_box.append(agent)
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert sorted(r.id for r in results(agent)) == ["c1", "c2"]
    rules(agent, rec)


# -- found by this hunt, fixed ---------------------------------------------------------------------


async def test_interrupt_while_the_completed_end_is_being_delivered() -> None:
    """A "stop" click racing the end of a reply: the caller gets the Msg of the end it saw."""
    agent, _ = make_agent([ChatResponse(content=[TextBlock(text="hi")])])
    events: list[Any] = []

    async def on_event(event: Any) -> None:
        events.append(event)
        if str(event.type) == "REPLY_END":
            agent.interrupt()
            await trio.lowlevel.checkpoint()

    msg = await agent.reply(user(), on_event=on_event)
    ends = [e for e in events if str(e.type) == "REPLY_END"]
    assert len(ends) == 1
    assert msg.finished_reason == ends[0].finished_reason == "completed"
    assert msg.get_text_content() == "hi"
    assert not agent.is_replying


# -- a rejected input changes nothing ------------------------------------------------------------


def _bad_inputs() -> list[Any]:
    from trioagent.event import UserInterruptEvent
    from trioagent.message import SystemMsg

    tool_call = AssistantMsg("someone", [ToolCallBlock(id="c", name="t", input="{}")])
    return [
        pytest.param([user("ok"), 42], TypeError, r"inputs\[1\] must be a Msg, got int", id="int"),
        pytest.param([user("ok"), "text"], TypeError, r"inputs\[1\] must be a Msg", id="str"),
        pytest.param(
            [user("ok"), UserInterruptEvent()], TypeError, r"inputs\[1\].*alone", id="event"
        ),
        pytest.param(
            [user("ok"), SystemMsg("s", "x")], ValueError, r"inputs\[1\].*system", id="system"
        ),
        pytest.param([user("ok"), tool_call], ValueError, r"inputs\[1\].*tool_call", id="tool"),
        pytest.param(b"ab", TypeError, "bytes", id="bytes"),
        pytest.param({"role": "user"}, TypeError, "dict", id="dict"),
    ]


@pytest.mark.parametrize(("inputs", "error", "match"), _bad_inputs())
async def test_a_rejected_reply_input_leaves_the_context_unchanged(
    inputs: Any, error: type[Exception], match: str
) -> None:
    agent, model = make_agent([text_chunks("fine")])
    with pytest.raises(error, match=match):
        await agent.reply(inputs)
    stream = agent.stream(inputs)
    with pytest.raises(error, match=match):
        await stream.__aenter__()
    assert agent.state.context == []
    assert model.requests == []
    assert not agent.is_replying
    await agent.reply(user("next"))  # the next reply sends only its own message
    sent = model.requests[0].messages
    assert [(m.role, m.get_text_content()) for m in sent[1:]] == [("user", "next")]


@pytest.mark.parametrize(("inputs", "error", "match"), _bad_inputs()[:-2])
async def test_a_rejected_observe_leaves_the_context_unchanged(
    inputs: Any, error: type[Exception], match: str
) -> None:
    agent, _ = make_agent()
    await agent.observe(user("before"))
    with pytest.raises(error, match=match.replace("inputs", "msgs")):
        await agent.observe(inputs)
    assert [m.get_text_content() for m in agent.state.context] == ["before"]


async def test_a_block_appended_to_a_msg_after_construction_is_checked() -> None:
    agent, model = make_agent([text_chunks("fine")])
    msg = user("ok")
    msg.content.append("not a block")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"inputs\[1\]\.content\[1\] is not a content block"):
        await agent.reply([user("first"), msg])
    assert agent.state.context == []
    assert model.requests == []


async def test_an_input_rewritten_by_an_on_reply_middleware_is_checked_before_any_change() -> None:
    class Rewrite(MiddlewareBase):
        async def on_reply(self, agent, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
            await next_handler(inputs=[user("smuggled"), 7])

    agent, model = make_agent([text_chunks("fine")], middlewares=[Rewrite()])
    with pytest.raises(TypeError, match=r"inputs\[1\] must be a Msg, got int"):
        await agent.reply(user())
    assert agent.state.context == []
    assert model.requests == []


async def test_a_sync_on_event_callback_is_refused_before_the_reply_starts() -> None:
    agent, model = make_agent([text_chunks("fine")])
    seen: list[Any] = []
    with pytest.raises(TypeError, match=r"on_event .*<lambda>.* is not an async function"):
        await agent.reply(user(), on_event=lambda e: seen.append(e))  # type: ignore[arg-type,func-returns-value]

    async def two(event: Any, extra: Any) -> None: ...

    with pytest.raises(TypeError, match=r"on_event .*two.* cannot be called with 1 argument"):
        await agent.reply(user(), on_event=two)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"on_event .* is not callable"):
        await agent.reply(user(), on_event="print")  # type: ignore[arg-type]
    assert seen == []
    assert agent.state.context == []
    assert model.requests == []


# -- configs and constructor arguments that could only fail mid-reply -----------------------------


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: ContextConfig(trigger_ratio=float("nan")), "trigger_ratio must be in"),
        (lambda: ContextConfig(reserve_ratio=float("nan")), "reserve_ratio must be in"),
        (lambda: ContextConfig(context_buffer_ratio=float("nan")), "context_buffer_ratio"),
        (lambda: ContextConfig(trigger_ratio="0.5"), "trigger_ratio must be a number, got str"),
        (lambda: ReActConfig(interrupt_grace=float("inf")), "interrupt_grace must be finite"),
        (lambda: InjectionConfig(time_interval=float("nan")), "time_interval"),
        (lambda: InjectionConfig(time_interval=-1.0), "time_interval"),
        (lambda: InjectionConfig(time_interval=float("inf")), "time_interval"),
    ],
)
def test_non_finite_or_mistyped_config_values_are_refused(make: Any, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_the_agent_refuses_arguments_of_the_wrong_kind() -> None:
    with pytest.raises(TypeError, match=r"a 'provider:model' string such as 'openai:gpt-4o'"):
        Agent("a", "", 4)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"'provider:model' string such as 'openai:gpt-4o'"):
        Agent("a", "")
    with pytest.raises(ValueError, match=r"Agent's model: .*'<provider>:<model>'.*'gpt-4o'"):
        Agent("a", "", "gpt-4o")
    with pytest.raises(TypeError, match="fallback_model must be a chat model, a 'provider:model'"):
        Agent("a", "", ScriptedModel(), model_config=ModelConfig(fallback_model=4))
    with pytest.raises(TypeError, match="toolkit must be a Toolkit"):
        Agent("a", "", ScriptedModel(), toolkit=[len])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="system_prompt must be a str"):
        Agent("a", None, ScriptedModel())  # type: ignore[arg-type]


async def test_the_on_event_check_is_cached_per_code_but_still_refuses_a_bad_callback() -> None:
    from trioagent._core import callables

    agent, _ = make_agent([text_chunks("a"), text_chunks("b")])
    for _ in range(2):  # a new closure per call, from the same code: checked once

        async def on_event(event: Any) -> None: ...

        await agent.reply(user(), on_event=on_event)
    keys = [k for k in callables._PASSED if k[0] is on_event.__code__]
    assert len(keys) == 1

    async def two(event: Any, extra: Any) -> None: ...

    for _ in range(2):  # a failing check is never cached
        with pytest.raises(TypeError, match=r"cannot be called with 1 argument"):
            await agent.reply(user(), on_event=two)  # type: ignore[arg-type]

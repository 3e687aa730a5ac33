"""Adversarial edge cases of the ReAct loop (trioagent/agent/_agent.py and friends):
interplay cases that the other test_agent*.py modules do not cover (DESIGN.md §4)."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
import trio
import trio.testing
from agent_helpers import ALLOW, Recorder, assert_paired, make_agent, sequential_toolkit, user

from trioagent.agent import ModelConfig, ReActConfig
from trioagent.exception import ReplyInterruptedError
from trioagent.message import (
    AssistantMsg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from trioagent.middleware import MiddlewareBase
from trioagent.model import ChatResponse, ChatUsage
from trioagent.testing import ScriptedModel, cancel_sweep, check_reply_rules, text_chunks
from trioagent.tool import Toolkit
from trioagent.types import ReplyFinishedReason


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
    # The forced-final answer is EXCEED_MAX_ITERS (reference/agent.md §3.7).
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

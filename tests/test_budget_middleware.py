"""ReplyBudgetControlMiddleware: the weighted token budget of a reply, its wrap-up hint and
``tool_choice="none"``, its bookkeeping in ``middle_context``; and the edge cases (limits at
the boundaries, models without usage, interruptions in the wrap-up step, a budget shared by
concurrent agents, a cancel sweep)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing
from agent_helpers import assert_paired, make_agent as agent_and_model, user as user_msg
from agent_kit import call, confirm, ends, make_agent, model_of, run, tool_calls, user
from middleware_kit import interrupt_after, lookup_toolkit, no_tasks_left, text

from trioagent.agent import STRUCTURED_OUTPUT_TOOL_NAME as TOOL_NAME, Agent, AgentState, ReActConfig
from trioagent.event import (
    ReplyEndEvent,
    ReplyStartEvent,
)
from trioagent.message import HintBlock, Msg, TextBlock, ToolCallBlock
from trioagent.middleware import (
    MiddlewareBase,
    ReplyBudgetControlMiddleware,
)
from trioagent.middleware._budget import (
    DEFAULT_BUDGET_HINT,
    STRUCTURED_BUDGET_HINT,
)
from trioagent.model import ChatResponse, ChatUsage
from trioagent.serialization import dumps, loads
from trioagent.testing import (
    CancelMode,
    ScriptedModel,
    SweepRun,
    cancel_sweep,
    text_chunks,
)
from trioagent.tool import Toolkit
from trioagent.types import ReplyFinishedReason, ToolChoice

KEY = "ReplyBudgetControlMiddleware"


def answer(text: str, inp: int = 10, out: int = 5) -> ChatResponse:
    return ChatResponse(
        content=[TextBlock(text=text)], usage=ChatUsage(input_tokens=inp, output_tokens=out)
    )


def tool_step(*blocks: ToolCallBlock, inp: int = 200, out: int = 100) -> ChatResponse:
    return ChatResponse(content=list(blocks), usage=ChatUsage(input_tokens=inp, output_tokens=out))


def hints(msgs: list[Msg]) -> list[HintBlock]:
    return [b for m in msgs for b in m.content if isinstance(b, HintBlock)]


def budget_hints(msgs: list[Msg]) -> list[str]:
    return [
        h.hint for h in hints(msgs) if isinstance(h.hint, str) and "maximum token budget" in h.hint
    ]


def bucket(agent: Any) -> dict[str, Any]:
    value = agent.state.middle_context[KEY]
    assert isinstance(value, dict)
    return value


async def test_under_budget_no_hint_and_cost_recorded() -> None:
    mw = ReplyBudgetControlMiddleware(token_budget=1000)
    agent = make_agent([answer("done", 10, 5)], middlewares=[mw])
    msg, events = await run(agent, user())
    assert msg.get_text_content() == "done"
    assert budget_hints(agent.state.context) == []
    assert model_of(agent).requests[0].tool_choice is None
    # Exactly one entry, for the finished reply, kept after the end (never cleaned).
    assert bucket(agent) == {agent.state.reply_id: 15}
    assert ends(events)[0].finished_reason == ReplyFinishedReason.COMPLETED


async def test_zero_budget_triggers_on_the_first_step() -> None:
    agent = make_agent(
        [answer("wrapping up")], middlewares=[ReplyBudgetControlMiddleware(token_budget=0)]
    )
    await run(agent, user())
    (request,) = model_of(agent).requests
    assert request.tool_choice == ToolChoice(mode="none")
    assert budget_hints(request.messages) == [DEFAULT_BUDGET_HINT]
    # The hint lives in the reply's own assistant message, before the model's answer.
    reply_msg = agent.state.context[-1]
    assert reply_msg.id == agent.state.reply_id
    assert [b.type for b in reply_msg.content] == ["hint", "text"]


async def test_hint_before_the_step_after_the_budget_is_spent() -> None:
    agent = make_agent(
        [tool_step(call("c1", "lookup", q="x"), inp=200, out=100), answer("final")],
        lookup_toolkit(),
        middlewares=[ReplyBudgetControlMiddleware(token_budget=300)],
    )
    msg, _ = await run(agent, user())
    first, second = model_of(agent).requests
    assert first.tool_choice is None
    assert budget_hints(first.messages) == []
    assert second.tool_choice == ToolChoice(mode="none")
    assert budget_hints(second.messages) == [DEFAULT_BUDGET_HINT]
    assert msg.get_text_content() == "final"
    assert bucket(agent) == {agent.state.reply_id: 315}


async def test_one_token_under_the_budget_is_not_exhausted() -> None:
    agent = make_agent(
        [tool_step(call("c1", "lookup", q="x"), inp=200, out=99), answer("final")],
        lookup_toolkit(),
        middlewares=[ReplyBudgetControlMiddleware(token_budget=300)],
    )
    await run(agent, user())
    assert model_of(agent).requests[1].tool_choice is None
    assert budget_hints(agent.state.context) == []


async def test_weights_apply_to_input_and_output_tokens() -> None:
    mw = ReplyBudgetControlMiddleware(200, input_token_weight=1, output_token_weight=3)
    assert mw.cost(50, 50) == 200
    agent = make_agent(
        [tool_step(call("c1", "lookup", q="x"), inp=50, out=50), answer("final", 1, 1)],
        lookup_toolkit(),
        middlewares=[mw],
    )
    await run(agent, user())
    assert model_of(agent).requests[1].tool_choice == ToolChoice(mode="none")
    assert bucket(agent) == {agent.state.reply_id: 204}


async def test_fractional_weights_accumulate_exactly() -> None:
    mw = ReplyBudgetControlMiddleware(1000, input_token_weight=0.5, output_token_weight=1.5)
    agent = make_agent([answer("done", 3, 1)], middlewares=[mw])
    await run(agent, user())
    assert bucket(agent) == {agent.state.reply_id: 3.0}
    assert mw.cost(1, 0) == 0.5


async def test_custom_hint_and_alias() -> None:
    assert ReplyBudgetControlMiddleware(1, hint="stop now").hint_message == "stop now"
    assert ReplyBudgetControlMiddleware(1, hint_message="halt").hint == "halt"
    agent = make_agent(
        [answer("ok")], middlewares=[ReplyBudgetControlMiddleware(0, hint="STOP SPENDING")]
    )
    await run(agent, user())
    assert [h.hint for h in hints(model_of(agent).requests[0].messages)] == ["STOP SPENDING"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"token_budget": -1},
        {"token_budget": 10, "input_token_weight": -0.5},
        {"token_budget": 10, "output_token_weight": "2"},
        {"token_budget": True},
        {"token_budget": 10, "hint": ""},
    ],
)
def test_invalid_arguments_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        ReplyBudgetControlMiddleware(**kwargs)


async def test_the_hint_repeats_on_every_step_while_over_budget() -> None:
    agent = make_agent(
        [
            tool_step(call("c1", "lookup", q="a"), inp=200, out=100),
            tool_step(call("c2", "lookup", q="b"), inp=1, out=1),
            answer("final"),
        ],
        lookup_toolkit(),
        middlewares=[ReplyBudgetControlMiddleware(token_budget=300)],
    )
    await run(agent, user())
    requests = model_of(agent).requests
    assert [r.tool_choice for r in requests] == [None, ToolChoice("none"), ToolChoice("none")]
    assert len(budget_hints(requests[2].messages)) == 2


async def test_budget_resets_per_reply_and_drops_older_entries() -> None:
    agent = make_agent(
        [answer("first", 200, 200), answer("second", 1, 1)],
        middlewares=[ReplyBudgetControlMiddleware(token_budget=300)],
    )
    await run(agent, user("one"))
    first_id = agent.state.reply_id
    assert bucket(agent) == {first_id: 400}
    await run(agent, user("two"))
    second_id = agent.state.reply_id
    assert second_id != first_id
    # Replaced at REPLY_START: the new reply counts from zero, the old entry is gone.
    assert bucket(agent) == {second_id: 2}
    assert model_of(agent).requests[1].tool_choice is None


async def test_hitl_park_resume_and_json_round_trip_keep_counting() -> None:
    mw = ReplyBudgetControlMiddleware(token_budget=300)
    agent = make_agent(
        [tool_step(call("a1", "lookup", q="x"), inp=200, out=100), answer("done", 7, 3)],
        lookup_toolkit(ask=True),
        middlewares=[mw],
    )
    _, events = await run(agent, user())
    assert ends(events) == []  # parked: no REPLY_END
    reply_id = agent.state.reply_id
    assert bucket(agent) == {reply_id: 300}

    # Save and restore the state; the restored agent resumes the same reply.
    restored = loads(dumps(agent.state), AgentState)
    assert restored.middle_context == {KEY: {reply_id: 300}}
    resumed = make_agent(
        [answer("done", 7, 3)], lookup_toolkit(ask=True), state=restored, middlewares=[mw]
    )
    msg, events = await run(resumed, confirm(tool_calls(resumed)["a1"]))
    assert "REPLY_START" not in [str(e.type) for e in events]
    assert isinstance(events[-1], ReplyEndEvent)
    assert msg.get_text_content() == "done"
    (request,) = model_of(resumed).requests
    assert request.tool_choice == ToolChoice(mode="none")
    # The hint joined the reply's existing assistant message (tool call, result, hint, text).
    reply_msg = next(m for m in resumed.state.context if m.id == reply_id)
    assert [b.type for b in reply_msg.content] == ["tool_call", "tool_result", "hint", "text"]
    assert bucket(resumed) == {reply_id: 310}


async def test_missing_bucket_on_resume_starts_from_zero() -> None:
    mw = ReplyBudgetControlMiddleware(token_budget=300)
    agent = make_agent(
        [tool_step(call("a1", "lookup", q="x"), inp=200, out=100), answer("done", 7, 3)],
        lookup_toolkit(ask=True),
        middlewares=[mw],
    )
    await run(agent, user())
    agent.state.middle_context.clear()  # e.g. a state saved before the middleware was added
    msg, _ = await run(agent, confirm(tool_calls(agent)["a1"]))
    assert msg.get_text_content() == "done"
    assert model_of(agent).requests[1].tool_choice is None
    assert bucket(agent) == {agent.state.reply_id: 10}


class DropFirstEnd(MiddlewareBase):
    """Drops the first COMPLETED end: the agent runs another round in the same reply."""

    async def on_reply(self, agent: Any, kw: dict[str, Any], next_handler: Any, emit: Any) -> None:
        dropped = False

        async def sink(item: Any) -> None:
            nonlocal dropped
            if isinstance(item, ReplyEndEvent) and not dropped:
                dropped = True
                return
            await emit(item)

        await next_handler(sink)


async def test_budget_survives_a_swallowed_end() -> None:
    agent = make_agent(
        [answer("first", 200, 100), answer("second", 1, 1)],
        middlewares=[DropFirstEnd(), ReplyBudgetControlMiddleware(token_budget=300)],
    )
    msg, events = await run(agent, user())
    assert len(ends(events)) == 1
    assert msg.get_text_content() == "second"
    # The entry was not cleaned at the (dropped) end: the extra round is over budget.
    assert model_of(agent).requests[1].tool_choice == ToolChoice(mode="none")
    assert bucket(agent) == {agent.state.reply_id: 302}


async def test_one_instance_serves_several_agents() -> None:
    mw = ReplyBudgetControlMiddleware(token_budget=100)
    big = make_agent([answer("a", 100, 100), answer("b")], middlewares=[mw])
    small = make_agent([answer("c", 1, 1)], middlewares=[mw])
    await run(big, user())
    await run(small, user())
    assert bucket(big) == {big.state.reply_id: 200}
    assert bucket(small) == {small.state.reply_id: 2}
    assert vars(mw) == {
        "token_budget": 100,
        "input_token_weight": 1.0,
        "output_token_weight": 1.0,
        "hint_message": DEFAULT_BUDGET_HINT,
    }


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


async def test_structured_output_owed_lets_only_the_structured_tool_run() -> None:
    assert TOOL_NAME == "GenerateStructuredOutput"
    agent = make_agent(
        [tool_step(call("s1", TOOL_NAME, answer="42"), inp=5, out=5)],
        middlewares=[ReplyBudgetControlMiddleware(token_budget=0)],
    )
    msg = await agent.reply(user(), structured_schema=SCHEMA)
    (request,) = model_of(agent).requests
    assert request.tool_choice == ToolChoice(mode="auto", tools=[TOOL_NAME])
    assert budget_hints(request.messages) == [STRUCTURED_BUDGET_HINT.format(tool=TOOL_NAME)]
    assert msg.structured_output == {"answer": "42"}


async def test_structured_output_keeps_a_forced_tool_choice() -> None:
    # max_iters=1: after one round the agent itself forces the structured tool.
    agent = make_agent(
        [
            tool_step(call("c1", "lookup", q="x"), inp=10, out=10),
            tool_step(call("s1", TOOL_NAME, answer="x"), inp=1, out=1),
        ],
        lookup_toolkit(),
        middlewares=[ReplyBudgetControlMiddleware(token_budget=20)],
        react_config=ReActConfig(max_iters=1),
    )
    msg = await agent.reply(user(), structured_schema=SCHEMA)
    first, second = model_of(agent).requests
    assert first.tool_choice is None
    assert second.tool_choice == ToolChoice(mode=TOOL_NAME, tools=[TOOL_NAME])
    assert msg.structured_output == {"answer": "x"}


BUDGET_KEY = "ReplyBudgetControlMiddleware"


# -- shared helpers ----------------------------------------------------------------------------


def free_tool_step(*blocks: ToolCallBlock, inp: int = 0, out: int = 0) -> ChatResponse:
    return ChatResponse(content=list(blocks), usage=ChatUsage(input_tokens=inp, output_tokens=out))


# -- ReplyBudgetControlMiddleware ------------------------------------------------------------------


def budget_agent(steps: Sequence[Any], budget: float, **kwargs: Any) -> tuple[Agent, ScriptedModel]:
    weights = {
        k: kwargs.pop(k) for k in ("input_token_weight", "output_token_weight") if k in kwargs
    }
    return agent_and_model(
        list(steps),
        middlewares=[ReplyBudgetControlMiddleware(budget, **weights)],
        **kwargs,
    )


def budget_hint_blocks(msgs: Sequence[Msg]) -> list[HintBlock]:
    return [
        b
        for m in msgs
        for b in m.content
        if isinstance(b, HintBlock) and "maximum token budget" in str(b.hint)
    ]


async def test_a_model_without_usage_costs_nothing() -> None:
    agent, model = budget_agent(
        [free_tool_step(call("c1", "lookup", q="x")), text("done")],
        budget=1,
        toolkit=lookup_toolkit(),
    )
    # The tool step reports 0/0 tokens, the answer no usage at all.
    msg = await agent.reply(user_msg())
    assert msg.get_text_content() == "done"
    assert [r.tool_choice for r in model.requests] == [None, None]
    assert agent.state.middle_context[BUDGET_KEY] == {agent.state.reply_id: 0}


async def test_no_usage_and_a_zero_budget_still_triggers_every_step() -> None:
    agent, model = budget_agent(
        [ChatResponse(content=[call("c1", "lookup", q="x")]), text("done")],
        budget=0,
        toolkit=lookup_toolkit(),
    )
    msg = await agent.reply(user_msg())
    assert msg.get_text_content() == "done"
    assert [r.tool_choice for r in model.requests] == [ToolChoice("none"), ToolChoice("none")]
    assert len(budget_hint_blocks(model.requests[1].messages)) == 2
    assert agent.state.middle_context[BUDGET_KEY] == {agent.state.reply_id: 0}


async def test_zero_weights_never_exhaust_a_positive_budget() -> None:
    agent, model = budget_agent(
        [free_tool_step(call("c1", "lookup", q="x"), inp=10**9, out=10**9), text("done", 5, 5)],
        budget=1,
        input_token_weight=0,
        output_token_weight=0,
        toolkit=lookup_toolkit(),
    )
    await agent.reply(user_msg())
    assert model.requests[1].tool_choice is None
    assert agent.state.middle_context[BUDGET_KEY] == {agent.state.reply_id: 0}


@pytest.mark.parametrize(
    ("budget", "exhausted"),
    [(17.5, True), (17.500001, False), (17, True)],
    ids=["exactly", "a-hair-above", "below"],
)
async def test_a_fractional_cost_exactly_at_the_budget_exhausts_it(
    budget: float, exhausted: bool
) -> None:
    agent, model = budget_agent(
        [free_tool_step(call("c1", "lookup", q="x"), inp=10, out=5), text("done", 0, 0)],
        budget=budget,
        input_token_weight=1.0,
        output_token_weight=1.5,
        toolkit=lookup_toolkit(),
    )
    await agent.reply(user_msg())
    assert (model.requests[1].tool_choice == ToolChoice("none")) is exhausted
    assert agent.state.middle_context[BUDGET_KEY] == {agent.state.reply_id: 17.5}


async def test_a_corrupt_saved_cost_counts_as_zero_on_resume() -> None:
    toolkit = Toolkit()

    async def deploy(target: str) -> str:
        """Deploy (asks first)."""
        return target

    toolkit.register_function(deploy)
    mw = ReplyBudgetControlMiddleware(token_budget=300)
    agent, _ = agent_and_model(
        [free_tool_step(call("d1", "deploy", target="x"), inp=300, out=0)],
        toolkit=toolkit,
        middlewares=[mw],
    )
    await agent.reply(user_msg())
    reply_id = agent.state.reply_id
    assert agent.state.middle_context[BUDGET_KEY] == {reply_id: 300}
    state = loads(dumps(agent.state), AgentState)
    state.middle_context[BUDGET_KEY] = {reply_id: "three hundred"}
    resumed, resumed_model = agent_and_model(
        [text("done", 1, 1)], toolkit=toolkit, middlewares=[mw], state=state
    )
    msg = await resumed.reply(confirm(tool_calls(resumed)["d1"]))
    assert msg.get_text_content() == "done"
    assert await mw.used(resumed) == 2
    assert resumed_model.requests[0].tool_choice is None


async def test_interrupt_in_the_wrap_up_step(autojump_clock: trio.testing.MockClock) -> None:
    agent, model = budget_agent(
        [
            free_tool_step(call("c1", "lookup", q="x"), inp=200, out=100),
            text_chunks(
                "wrapping", " up", " now", usage=ChatUsage(input_tokens=9, output_tokens=9)
            ),
            text("next reply", 1, 1),
        ],
        budget=300,
        toolkit=lookup_toolkit(),
    )
    model.chunk_delay = 1.0
    msg, rec = await interrupt_after(agent, user_msg("one"), 1.5)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [str(e.finished_reason) for e in rec.ends] == ["interrupted"]
    first_id = agent.state.reply_id
    wrap_up = model.requests[1]
    assert wrap_up.tool_choice == ToolChoice("none")
    assert len(budget_hint_blocks(agent.state.context)) == 1  # added once, before the cut step
    assert agent.state.middle_context[BUDGET_KEY][first_id] >= 300
    assert_paired(agent.state.context)

    # Saved and restored, the next reply starts from zero: no wrap-up forced on it.
    restored = loads(dumps(agent.state), AgentState)
    agent2, model2 = budget_agent([text("fresh", 1, 1)], budget=300, state=restored)
    assert (await agent2.reply(user_msg("two"))).get_text_content() == "fresh"
    assert model2.requests[0].tool_choice is None
    assert agent2.state.middle_context[BUDGET_KEY] == {agent2.state.reply_id: 2}
    assert first_id not in agent2.state.middle_context[BUDGET_KEY]
    no_tasks_left()


async def test_two_agents_share_one_budget_concurrently(
    autojump_clock: trio.testing.MockClock,
) -> None:
    mw = ReplyBudgetControlMiddleware(token_budget=100)
    big, big_model = agent_and_model(
        [free_tool_step(call("c1", "lookup", q="x"), inp=100, out=0), text("big done", 1, 1)],
        toolkit=lookup_toolkit(),
        middlewares=[mw],
    )
    small, small_model = agent_and_model(
        [free_tool_step(call("c1", "lookup", q="x"), inp=1, out=0), text("small done", 1, 1)],
        toolkit=lookup_toolkit(),
        middlewares=[mw],
    )
    big_model.chunk_delay = small_model.chunk_delay = 1.0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(big.reply, user_msg())
        nursery.start_soon(small.reply, user_msg())
    assert big_model.requests[1].tool_choice == ToolChoice("none")
    assert small_model.requests[1].tool_choice is None
    assert big.state.middle_context[BUDGET_KEY] == {big.state.reply_id: 102}
    assert small.state.middle_context[BUDGET_KEY] == {small.state.reply_id: 3}


@pytest.mark.parametrize("mode", [CancelMode.INTERRUPT, CancelMode.OUTER])
async def test_cancel_sweep_budget_wrap_up(
    mode: CancelMode, autojump_clock: trio.testing.MockClock
) -> None:
    def make() -> Agent:
        agent, model = budget_agent(
            [
                free_tool_step(call("c1", "lookup", q="x"), inp=200, out=100),
                text_chunks("wrap", "ped", usage=ChatUsage(input_tokens=5, output_tokens=5)),
            ],
            budget=300,
            toolkit=lookup_toolkit(),
        )
        model.chunk_delay = 0.25
        return agent

    def check(run: SweepRun) -> None:
        agent = run.agent
        model = agent.model
        hints = budget_hint_blocks(agent.state.context)
        assert len(hints) <= 1
        if len(model.requests) == 2:
            assert model.requests[1].tool_choice == ToolChoice("none")
        started = [e for e in run.events if isinstance(e, ReplyStartEvent)]
        if started:
            bucket = agent.state.middle_context[BUDGET_KEY]
            assert set(bucket) == {started[0].reply_id}
            assert bucket[started[0].reply_id] in (0, 300, 310)
            if hints:
                assert bucket[started[0].reply_id] >= 300

    report = await cancel_sweep(make, user_msg, mode=mode, check=check)
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert report.outcomes["interrupted"] > 5


@pytest.mark.parametrize("field", ["token_budget", "input_token_weight", "output_token_weight"])
def test_a_nan_budget_or_weight_is_rejected(field: str) -> None:
    kwargs: dict[str, Any] = {"token_budget": 100.0, field: math.nan}
    with pytest.raises(ValueError, match="non-negative number"):
        ReplyBudgetControlMiddleware(**kwargs)

"""ReplyBudgetControlMiddleware (tools_middleware.md §8.1; agent.md §7.5 middle_context)."""

from __future__ import annotations

from typing import Any

import pytest
from agent_kit import ALLOW, call, confirm, ends, make_agent, model_of, run, tool_calls, user

from trioagent.agent import STRUCTURED_OUTPUT_TOOL_NAME as TOOL_NAME, AgentState, ReActConfig
from trioagent.event import ReplyEndEvent
from trioagent.message import HintBlock, Msg, TextBlock, ToolCallBlock
from trioagent.middleware import MiddlewareBase, ReplyBudgetControlMiddleware
from trioagent.middleware._budget import (
    DEFAULT_BUDGET_HINT,
    STRUCTURED_BUDGET_HINT,
    _structured_tool_name,
)
from trioagent.model import ChatResponse, ChatUsage
from trioagent.serialization import dumps, loads
from trioagent.tool import Toolkit
from trioagent.types import ReplyFinishedReason, ToolChoice

KEY = "ReplyBudgetControlMiddleware"


def answer(text: str, inp: int = 10, out: int = 5) -> ChatResponse:
    return ChatResponse(
        content=[TextBlock(text=text)], usage=ChatUsage(input_tokens=inp, output_tokens=out)
    )


def tool_step(*blocks: ToolCallBlock, inp: int = 200, out: int = 100) -> ChatResponse:
    return ChatResponse(content=list(blocks), usage=ChatUsage(input_tokens=inp, output_tokens=out))


def lookup_toolkit(*, ask: bool = False) -> Toolkit:
    toolkit = Toolkit()

    async def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    toolkit.register_function(lookup, permission=None if ask else ALLOW)
    return toolkit


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
    assert _structured_tool_name() == TOOL_NAME == "GenerateStructuredOutput"
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

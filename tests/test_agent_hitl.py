"""Human-in-the-loop: confirmation, external execution, park / resume / abort, and the
``on_check_permission`` chain (reference/agent.md §5, §10 behaviours 10, 11, 17–21, 24)."""

from __future__ import annotations

from typing import Any

import attrs
import jsonschema
import pytest
import trio
from agent_kit import (
    ALLOW,
    INTERRUPTED_TEXT,
    PARKED_TEXT,
    call,
    calls,
    confirm,
    ends,
    kinds,
    make_agent,
    model_of,
    of_call,
    output_text,
    result_of,
    results,
    run,
    run_and_interrupt,
    text,
    tool_calls,
    user,
)

from trioagent.agent import Agent, AgentState
from trioagent.event import (
    ConfirmResult,
    ExternalExecutionResultEvent,
    ReplyEndEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    ToolResultEndEvent,
    ToolResultTextDeltaEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from trioagent.message import (
    TextBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
)
from trioagent.middleware import MiddlewareBase
from trioagent.permission import (
    PermissionBehavior,
    PermissionDecision,
    PermissionEngine,
    PermissionRule,
)
from trioagent.serialization import dumps, loads
from trioagent.testing import ScriptedModel, check_reply_rules
from trioagent.tool import ToolBase, ToolChunk, Toolkit
from trioagent.types import ReplyFinishedReason

DENIED_TEXT = '<system-reminder>The execution of tool "{name}" is denied by user!</system-reminder>'


class External(ToolBase):
    """An external tool: the caller executes it (permission: allowed)."""

    name = "ext"
    description = "Executed by the caller."
    input_schema = {"type": "object", "properties": {"q": {"type": "string"}}}  # noqa: RUF012
    is_external_tool = True
    is_concurrency_safe = True

    def __init__(self, metadata_schema: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.metadata_schema = metadata_schema

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> Any:
        return ALLOW


def hitl_toolkit(log: list[str]) -> Toolkit:
    """``ask`` / ``other`` (concurrent, prompt), ``ask_seq`` (sequential, prompts),
    ``slow`` (allowed, streams then sleeps) and the external ``ext``."""
    toolkit = Toolkit()

    async def ask(x: str) -> str:
        """Needs confirmation."""
        log.append(f"ask:{x}")
        return f"ask:{x}"

    async def other(x: str) -> str:
        """Needs confirmation too."""
        log.append(f"other:{x}")
        return f"other:{x}"

    async def ask_seq(x: str) -> str:
        """Sequential, needs confirmation."""
        log.append(f"ask_seq:{x}")
        return f"ask_seq:{x}"

    async def slow(delay: float, emit: Any) -> str:
        """Allowed and slow."""
        await emit(ToolChunk(content=[TextBlock(text="working ")], is_last=False))
        await trio.sleep(delay)
        log.append("slow")
        return "slow-done"

    toolkit.register_function(ask)
    toolkit.register_function(other)
    toolkit.register_function(ask_seq, is_concurrency_safe=False)
    toolkit.register_function(slow, permission=ALLOW)
    toolkit.add_tool(External())
    return toolkit


def confirms(events: list[Any]) -> list[RequireUserConfirmEvent]:
    return [e for e in events if isinstance(e, RequireUserConfirmEvent)]


def parked_call(agent: Agent, call_id: str) -> ToolCallBlock:
    return tool_calls(agent)[call_id]


def ext_result(call_id: str, output: str = "ext-out", **kw: Any) -> ToolResultBlock:
    return ToolResultBlock(id=call_id, name="ext", output=output, **kw)


# -- behaviour 17: one call needing confirmation -----------------------------------------------------


async def test_single_confirmation_parks_and_resumes() -> None:
    log: list[str] = []
    agent = make_agent([calls(call("a1", "ask", x="1")), text("all done")], hitl_toolkit(log))
    msg, events = await run(agent, user())

    # Parked: no REPLY_END, the "waiting" Msg.
    assert kinds(events)[-1] == "REQUIRE_USER_CONFIRM"
    assert ends(events) == []
    assert msg.get_text_content() == PARKED_TEXT
    assert msg.finished_reason is None
    assert msg.usage is None
    assert msg.id == agent.state.reply_id
    (prompt,) = confirms(events)
    (asked,) = prompt.tool_calls
    assert asked.id == "a1"
    assert asked.state == ToolCallState.ASKING
    assert asked.suggested_rules == [
        PermissionRule(
            tool_name="ask",
            rule_content=None,
            behavior=PermissionBehavior.ALLOW,
            source="suggested",
        )
    ]
    assert parked_call(agent, "a1").state == ToolCallState.ASKING
    assert log == []
    check_reply_rules(agent.state, agent.name, events)
    reply_id = agent.state.reply_id

    msg, events = await run(agent, confirm(asked))
    assert log == ["ask:1"]
    assert "REPLY_START" not in kinds(events)
    assert kinds(events)[:3] == ["TOOL_RESULT_START", "TOOL_RESULT_TEXT_DELTA", "TOOL_RESULT_END"]
    assert "MODEL_CALL_START" in kinds(events)
    assert kinds(events)[-1] == "REPLY_END"
    assert ends(events)[0].finished_reason == ReplyFinishedReason.COMPLETED
    assert all(e.reply_id == reply_id for e in events)  # type: ignore[attr-defined]
    assert msg.get_text_content() == "all done"
    assert msg.id == reply_id
    assert agent.state.cur_iter == 2
    assert output_text(result_of(agent, "a1")) == "ask:1"
    assert parked_call(agent, "a1").state == ToolCallState.FINISHED


async def test_denied_confirmation_writes_a_denied_result() -> None:
    log: list[str] = []
    agent = make_agent([calls(call("a1", "ask", x="1")), text("ok")], hitl_toolkit(log))
    await run(agent, user())
    msg, events = await run(agent, confirm(parked_call(agent, "a1"), confirmed=False))
    assert log == []
    assert of_call(events, "a1") == [
        "TOOL_RESULT_START",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_END",
    ]
    denied = result_of(agent, "a1")
    assert denied.state == ToolResultState.DENIED
    assert denied.output == DENIED_TEXT.format(name="ask")
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED


# -- parked-reply rules ----------------------------------------------------------------------------


@pytest.mark.parametrize("inputs", [None, "msg"])
async def test_no_event_while_parked_is_a_value_error(inputs: str | None) -> None:
    log: list[str] = []
    agent = make_agent([calls(call("a1", "ask", x="1")), text("ok")], hitl_toolkit(log))
    await run(agent, user())
    before = dumps(agent.state)
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    with pytest.raises(ValueError, match="waiting for 1 tool call"):
        await agent.reply(user("again") if inputs else None, on_event=record)
    assert events == []
    assert dumps(agent.state) == before  # still parked, nothing appended
    # ... and the park still resumes normally.
    msg, _ = await run(agent, confirm(parked_call(agent, "a1")))
    assert msg.get_text_content() == "ok"


async def test_mismatched_resume_events_are_value_errors() -> None:
    log: list[str] = []
    agent = make_agent([calls(call("a1", "ask", x="1")), text("ok")], hitl_toolkit(log))
    await run(agent, user())
    before = dumps(agent.state)
    with pytest.raises(ValueError, match="no tool call awaits an external result"):
        await agent.reply(ExternalExecutionResultEvent(execution_results=[ext_result("a1")]))
    stranger = ToolCallBlock(id="zz", name="ask", input='{"x": "1"}')
    with pytest.raises(ValueError, match="not awaiting confirmation"):
        await agent.reply(confirm(stranger))
    assert dumps(agent.state) == before
    assert log == []
    msg, _ = await run(agent, confirm(parked_call(agent, "a1")))
    assert msg.get_text_content() == "ok"


async def test_confirm_event_with_nothing_parked_is_a_value_error() -> None:
    agent = make_agent([], hitl_toolkit([]))
    with pytest.raises(ValueError, match="no tool call awaits confirmation"):
        await agent.reply(confirm(ToolCallBlock(id="a1", name="ask", input="{}")))


async def test_parked_state_round_trips_and_resumes_in_a_new_agent() -> None:
    log: list[str] = []
    toolkit = hitl_toolkit(log)
    agent = make_agent([calls(call("a1", "ask", x="1"))], toolkit)
    await run(agent, user())
    reply_id = agent.state.reply_id

    restored = loads(dumps(agent.state), AgentState)
    assert dumps(restored) == dumps(agent.state)
    fresh = make_agent([text("resumed")], toolkit, state=restored)
    assert fresh.state.has_awaiting_tool_calls("agent")
    msg, events = await run(fresh, confirm(tool_calls(fresh)["a1"]))
    assert log == ["ask:1"]
    assert msg.get_text_content() == "resumed"
    assert msg.id == reply_id
    assert "REPLY_START" not in kinds(events)
    assert ends(events)[0].reply_id == reply_id
    # The new model saw the call and its result.
    request = model_of(fresh).requests[0]
    stored = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert [r.id for r in stored] == ["a1"]


async def test_confirm_can_edit_the_call_name_and_input() -> None:
    log: list[str] = []
    agent = make_agent([calls(call("a1", "ask", x="original")), text("ok")], hitl_toolkit(log))
    await run(agent, user())
    edited = attrs.evolve(parked_call(agent, "a1"), name="other", input='{"x": "edited"}')
    await run(agent, confirm(edited))
    assert log == ["other:edited"]
    assert parked_call(agent, "a1").name == "other"
    assert parked_call(agent, "a1").input == '{"x": "edited"}'
    assert result_of(agent, "a1").name == "other"


async def test_confirm_with_rules_persists_them_in_the_state() -> None:
    log: list[str] = []
    toolkit = hitl_toolkit(log)
    agent = make_agent(
        [
            calls(call("a1", "ask", x="1")),
            text("ok"),
            calls(call("a2", "ask", x="2")),
            text("ok again"),
        ],
        toolkit,
    )
    _, events = await run(agent, user())
    suggested = confirms(events)[0].tool_calls[0].suggested_rules
    await run(agent, confirm(parked_call(agent, "a1"), rules=suggested))
    assert agent.state.permission_context.allow_rules["ask"] == suggested
    # Persisted with the state, and honoured by the next reply: no prompt.
    restored = loads(dumps(agent.state), AgentState)
    assert restored.permission_context.allow_rules["ask"] == suggested
    msg, events = await run(agent, user("more"))
    assert confirms(events) == []
    assert msg.get_text_content() == "ok again"
    assert log == ["ask:1", "ask:2"]


# -- behaviour 18: two sequential confirm calls -----------------------------------------------------


async def test_two_sequential_confirmations_prompt_one_at_a_time() -> None:
    log: list[str] = []
    agent = make_agent(
        [calls(call("s1", "ask_seq", x="1"), call("s2", "ask_seq", x="2")), text("done")],
        hitl_toolkit(log),
    )
    _, events = await run(agent, user())
    assert [p.tool_calls[0].id for p in confirms(events)] == ["s1"]
    assert parked_call(agent, "s2").state == ToolCallState.PENDING

    msg, events = await run(agent, confirm(parked_call(agent, "s1")))
    assert log == ["ask_seq:1"]
    assert [p.tool_calls[0].id for p in confirms(events)] == ["s2"]
    assert kinds(events)[-1] == "REQUIRE_USER_CONFIRM"
    assert msg.get_text_content() == PARKED_TEXT
    assert agent.state.cur_iter == 0

    msg, events = await run(agent, confirm(parked_call(agent, "s2")))
    assert log == ["ask_seq:1", "ask_seq:2"]
    assert msg.get_text_content() == "done"
    assert ends(events)[0].finished_reason == ReplyFinishedReason.COMPLETED
    assert [r.id for r in results(agent)] == ["s1", "s2"]


async def test_sequential_prompt_skips_the_later_batches(autojump_clock: Any) -> None:
    log: list[str] = []
    agent = make_agent(
        [calls(call("s1", "ask_seq", x="1"), call("r1", "slow", delay=1.0)), text("done")],
        hitl_toolkit(log),
    )
    _, events = await run(agent, user())
    assert [p.tool_calls[0].id for p in confirms(events)] == ["s1"]
    assert log == []  # the later (concurrent) batch did not run
    assert parked_call(agent, "r1").state == ToolCallState.PENDING
    assert of_call(events, "r1") == []
    msg, _ = await run(agent, confirm(parked_call(agent, "s1")))
    assert log == ["ask_seq:1", "slow"]
    assert msg.get_text_content() == "done"
    assert [r.id for r in results(agent)] == ["s1", "r1"]


# -- behaviour 19: two concurrent confirm calls -----------------------------------------------------


async def test_concurrent_same_tool_prompts_once_then_again_without_rule() -> None:
    log: list[str] = []
    agent = make_agent(
        [calls(call("a1", "ask", x="1"), call("a2", "ask", x="2")), text("done")],
        hitl_toolkit(log),
    )
    _, events = await run(agent, user())
    assert [p.tool_calls[0].id for p in confirms(events)] == ["a1"]
    assert parked_call(agent, "a2").state == ToolCallState.PENDING

    msg, events = await run(agent, confirm(parked_call(agent, "a1")))
    # a1 runs, and a2 prompts in the same resume.
    assert log == ["ask:1"]
    assert [p.tool_calls[0].id for p in confirms(events)] == ["a2"]
    assert msg.get_text_content() == PARKED_TEXT

    msg, _ = await run(agent, confirm(parked_call(agent, "a2")))
    assert log == ["ask:1", "ask:2"]
    assert msg.get_text_content() == "done"


async def test_concurrent_same_tool_with_suggested_rule_runs_the_second_silently() -> None:
    log: list[str] = []
    agent = make_agent(
        [calls(call("a1", "ask", x="1"), call("a2", "ask", x="2")), text("done")],
        hitl_toolkit(log),
    )
    _, events = await run(agent, user())
    rules = confirms(events)[0].tool_calls[0].suggested_rules
    msg, events = await run(agent, confirm(parked_call(agent, "a1"), rules=rules))
    assert confirms(events) == []
    assert log == ["ask:1", "ask:2"]
    assert msg.get_text_content() == "done"
    assert agent.state.cur_iter == 2


async def test_concurrent_different_tools_prompt_twice_answered_in_one_event() -> None:
    log: list[str] = []
    agent = make_agent(
        [calls(call("a1", "ask", x="1"), call("o1", "other", x="2")), text("done")],
        hitl_toolkit(log),
    )
    _, events = await run(agent, user())
    assert [p.tool_calls[0].id for p in confirms(events)] == ["a1", "o1"]
    msg, events = await run(agent, confirm(parked_call(agent, "a1"), parked_call(agent, "o1")))
    assert sorted(log) == ["ask:1", "other:2"]
    assert msg.get_text_content() == "done"
    assert [r.id for r in results(agent)] == ["a1", "o1"]


async def test_concurrent_prompts_follow_call_order() -> None:
    """Trio may schedule the workers in any order; prompts and de-duplication still follow
    the calls' order (the first call to a tool prompts, later ones wait)."""
    agent = make_agent(
        [
            calls(
                call("a1", "ask", x="1"),
                call("o1", "other", x="1"),
                call("a2", "ask", x="2"),
                call("o2", "other", x="2"),
                call("a3", "ask", x="3"),
            )
        ],
        hitl_toolkit([]),
    )
    _, events = await run(agent, user())
    assert [p.tool_calls[0].id for p in confirms(events)] == ["a1", "o1"]
    states = {k: v.state for k, v in tool_calls(agent).items()}
    assert states == {
        "a1": ToolCallState.ASKING,
        "o1": ToolCallState.ASKING,
        "a2": ToolCallState.PENDING,
        "o2": ToolCallState.PENDING,
        "a3": ToolCallState.PENDING,
    }


# -- behaviour 20: partial confirmation -------------------------------------------------------------


async def test_partial_confirmation_keeps_cur_iter_until_the_round_is_done() -> None:
    log: list[str] = []
    agent = make_agent(
        [calls(call("a1", "ask", x="1"), call("o1", "other", x="2")), text("done")],
        hitl_toolkit(log),
    )
    await run(agent, user())
    assert agent.state.cur_iter == 0
    msg, events = await run(agent, confirm(parked_call(agent, "a1")))
    assert log == ["ask:1"]
    assert msg.get_text_content() == PARKED_TEXT
    assert ends(events) == []
    # No new prompt: o1 is still asking from the first park.
    assert confirms(events) == []
    assert parked_call(agent, "o1").state == ToolCallState.ASKING
    assert agent.state.cur_iter == 0
    msg, _ = await run(agent, confirm(parked_call(agent, "o1")))
    assert msg.get_text_content() == "done"
    assert agent.state.cur_iter == 2


# -- behaviour 21: external execution ---------------------------------------------------------------


async def test_external_execution_parks_and_resumes() -> None:
    agent = make_agent([calls(call("x1", "ext", q="hello")), text("thanks")], hitl_toolkit([]))
    msg, events = await run(agent, user())
    assert kinds(events)[-2:] == ["TOOL_RESULT_START", "REQUIRE_EXTERNAL_EXECUTION"]
    (request,) = [e for e in events if isinstance(e, RequireExternalExecutionEvent)]
    assert request.tool_calls[0].state == ToolCallState.SUBMITTED
    assert parked_call(agent, "x1").state == ToolCallState.SUBMITTED
    assert msg.get_text_content() == PARKED_TEXT
    assert ends(events) == []

    result = ext_result("x1", "42", state=ToolResultState.SUCCESS, metadata={"rows": 1})
    msg, events = await run(agent, ExternalExecutionResultEvent(execution_results=[result]))
    # No second START: it was emitted at park time.
    assert kinds(events)[:2] == ["TOOL_RESULT_TEXT_DELTA", "TOOL_RESULT_END"]
    end = next(e for e in events if isinstance(e, ToolResultEndEvent))
    assert end.state == ToolResultState.SUCCESS
    assert end.metadata == {"rows": 1}
    stored = result_of(agent, "x1")
    assert stored.output == "42"
    assert stored.metadata == {"rows": 1}
    assert parked_call(agent, "x1").state == ToolCallState.FINISHED
    assert msg.get_text_content() == "thanks"
    assert ends(events)[0].finished_reason == ReplyFinishedReason.COMPLETED
    # The model read the external result.
    seen = [
        b
        for m in model_of(agent).requests[1].messages
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]
    assert [(r.id, r.output) for r in seen] == [("x1", "42")]


async def test_external_error_result_is_stored_and_reasoning_continues() -> None:
    agent = make_agent([calls(call("x1", "ext", q="q")), text("noted")], hitl_toolkit([]))
    await run(agent, user())
    result = ext_result("x1", "it failed", state=ToolResultState.ERROR)
    msg, _ = await run(agent, ExternalExecutionResultEvent(execution_results=[result]))
    assert result_of(agent, "x1").state == ToolResultState.ERROR
    assert msg.get_text_content() == "noted"


async def test_several_external_results_in_one_event_are_applied_before_reasoning() -> None:
    agent = make_agent(
        [calls(call("x1", "ext", q="a"), call("x2", "ext", q="b")), text("both")],
        hitl_toolkit([]),
    )
    _, events = await run(agent, user())
    assert len([e for e in events if isinstance(e, RequireExternalExecutionEvent)]) == 2
    msg, events = await run(
        agent,
        ExternalExecutionResultEvent(
            execution_results=[ext_result("x2", "B"), ext_result("x1", "A")]
        ),
    )
    assert msg.get_text_content() == "both"
    first_model = kinds(events).index("MODEL_CALL_START")
    assert [e.tool_call_id for e in events[:first_model] if isinstance(e, ToolResultEndEvent)] == [
        "x2",
        "x1",
    ]
    assert len(model_of(agent).requests) == 2


async def test_external_results_may_arrive_one_at_a_time() -> None:
    agent = make_agent(
        [calls(call("x1", "ext", q="a"), call("x2", "ext", q="b")), text("both")],
        hitl_toolkit([]),
    )
    await run(agent, user())
    msg, events = await run(
        agent, ExternalExecutionResultEvent(execution_results=[ext_result("x1", "A")])
    )
    assert msg.get_text_content() == PARKED_TEXT
    assert ends(events) == []
    assert len(model_of(agent).requests) == 1
    msg, _ = await run(
        agent, ExternalExecutionResultEvent(execution_results=[ext_result("x2", "B")])
    )
    assert msg.get_text_content() == "both"


async def test_external_result_failing_metadata_schema_keeps_the_reply_parked() -> None:
    toolkit = Toolkit()
    toolkit.add_tool(
        External(
            metadata_schema={
                "type": "object",
                "properties": {"rows": {"type": "integer"}},
                "required": ["rows"],
            }
        )
    )
    agent = make_agent([calls(call("x1", "ext", q="q")), text("ok")], toolkit)
    await run(agent, user())
    before = dumps(agent.state)
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    bad = ext_result("x1", "out", state=ToolResultState.SUCCESS, metadata={"rows": "many"})
    with pytest.raises(jsonschema.ValidationError):
        await agent.reply(ExternalExecutionResultEvent(execution_results=[bad]), on_event=record)
    assert events == []
    assert dumps(agent.state) == before
    assert agent.state.has_awaiting_tool_calls("agent")
    good = ext_result("x1", "out", state=ToolResultState.SUCCESS, metadata={"rows": 3})
    msg, _ = await run(agent, ExternalExecutionResultEvent(execution_results=[good]))
    assert msg.get_text_content() == "ok"


async def test_confirm_then_external_execution_parks_twice() -> None:
    class AskingExternal(External):
        name = "ask_ext"

        async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> Any:
            return PermissionDecision(behavior=PermissionBehavior.ASK, message="ask first")

    toolkit = Toolkit()
    toolkit.add_tool(AskingExternal())
    agent = make_agent([calls(call("x1", "ask_ext", q="q")), text("ok")], toolkit)
    _, events = await run(agent, user())
    assert kinds(events)[-1] == "REQUIRE_USER_CONFIRM"
    msg, events = await run(agent, confirm(parked_call(agent, "x1")))
    assert kinds(events) == ["TOOL_RESULT_START", "REQUIRE_EXTERNAL_EXECUTION"]
    assert msg.get_text_content() == PARKED_TEXT
    result = ToolResultBlock(id="x1", name="ask_ext", output="done")
    msg, _ = await run(agent, ExternalExecutionResultEvent(execution_results=[result]))
    assert msg.get_text_content() == "ok"


# -- behaviour 11: UserInterruptEvent ---------------------------------------------------------------


async def test_user_interrupt_with_nothing_parked_is_a_no_op() -> None:
    agent = make_agent([text("hi")], hitl_toolkit([]))
    await run(agent, user())
    before = dumps(agent.state)
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    with pytest.raises(RuntimeError, match="did not produce a final message"):
        await agent.reply(UserInterruptEvent(), on_event=record)
    assert events == []
    assert dumps(agent.state) == before


async def test_user_interrupt_closes_asking_and_submitted_calls() -> None:
    agent = make_agent(
        [calls(call("a1", "ask", x="1"), call("x1", "ext", q="q"), call("a2", "ask", x="2"))],
        hitl_toolkit([]),
    )
    _, park_events = await run(agent, user())
    assert parked_call(agent, "a1").state == ToolCallState.ASKING
    assert parked_call(agent, "x1").state == ToolCallState.SUBMITTED
    assert parked_call(agent, "a2").state == ToolCallState.PENDING  # de-duplicated
    reply_id = agent.state.reply_id

    msg, events = await run(agent, UserInterruptEvent(reply_id=reply_id))
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert msg.get_text_content() == agent.react_config.interruption_message
    assert kinds(events)[-1] == "REPLY_END"
    assert len(ends(events)) == 1
    assert ends(events)[0].finished_reason == ReplyFinishedReason.INTERRUPTED
    assert ends(events)[0].reply_id == reply_id
    assert "REPLY_START" not in kinds(events)
    for call_id in ("a1", "x1", "a2"):
        stored = result_of(agent, call_id)
        assert stored.state == ToolResultState.INTERRUPTED
        assert stored.output == INTERRUPTED_TEXT
        # Exactly one START per call across the park and the interrupt.
        starts = of_call(park_events, call_id).count("TOOL_RESULT_START") + of_call(
            events, call_id
        ).count("TOOL_RESULT_START")
        assert starts == 1
    assert not agent.state.has_awaiting_tool_calls("agent")
    check_reply_rules(agent.state, agent.name, events)
    assert len(model_of(agent).requests) == 1


# -- behaviour 10: cancel with an asking (or submitted) call next to a running one -------------------


@pytest.mark.parametrize("parked", ["ask", "ext"])
async def test_interrupt_with_parked_and_running_call(parked: str, autojump_clock: Any) -> None:
    first = call("p1", "ask", x="1") if parked == "ask" else call("p1", "ext", q="q")
    agent = make_agent([calls(first, call("r1", "slow", delay=10.0))], hitl_toolkit([]))
    msg, events = await run_and_interrupt(agent, user(), after=1.0)
    assert msg is not None
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    # The running call's result (list output) comes first, then the parked call's (str).
    assert [r.id for r in results(agent)] == ["r1", "p1"]
    running = result_of(agent, "r1")
    assert running.state == ToolResultState.INTERRUPTED
    assert isinstance(running.output, list)
    parked_result = result_of(agent, "p1")
    assert parked_result.state == ToolResultState.INTERRUPTED
    assert parked_result.output == INTERRUPTED_TEXT
    assert of_call(events, "p1").count("TOOL_RESULT_START") == 1
    if parked == "ask":
        assert parked_call(agent, "p1").suggested_rules  # kept after the interrupt
        assert kinds(events).index("REQUIRE_USER_CONFIRM") < kinds(events).index("REPLY_END")
    else:
        assert "REQUIRE_EXTERNAL_EXECUTION" in kinds(events)
    assert parked_call(agent, "p1").state == ToolCallState.FINISHED
    assert kinds(events)[-1] == "REPLY_END"
    assert len(ends(events)) == 1
    check_reply_rules(agent.state, agent.name, events)


# -- behaviour 24: on_check_permission ---------------------------------------------------------------


class RecordingEngine(PermissionEngine):
    def __init__(self, agent: Agent, log: list[str]) -> None:
        super().__init__(agent.state.permission_context)
        self.log = log
        self.inputs: list[dict[str, Any]] = []

    async def check_permission(self, tool: Any, tool_input: dict[str, Any]) -> PermissionDecision:
        self.log.append("engine")
        self.inputs.append(tool_input)
        return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="engine says yes")


class Logged(MiddlewareBase):
    def __init__(self, name: str, log: list[str], **behaviour: Any) -> None:
        self.name = name
        self.log = log
        self.behaviour = behaviour
        self.keys: list[set[str]] = []
        self.decisions: list[str] = []

    async def on_check_permission(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: Any
    ) -> PermissionDecision:
        self.keys.append(set(input_kwargs))
        self.log.append(f"{self.name}_pre")
        if "raise_" in self.behaviour:
            raise self.behaviour["raise_"]
        if "short" in self.behaviour:
            return self.behaviour["short"]  # type: ignore[no-any-return]
        if "tool_input" in self.behaviour:
            decision = await next_handler(tool_input=self.behaviour["tool_input"])
        else:
            decision = await next_handler()
        self.decisions.append(str(decision.behavior))
        self.log.append(f"{self.name}_post")
        if "replace" in self.behaviour:
            return self.behaviour["replace"]  # type: ignore[no-any-return]
        return decision  # type: ignore[no-any-return]


def echo_toolkit(received: list[str]) -> Toolkit:
    toolkit = Toolkit()

    async def echo(x: str) -> str:
        """Echo."""
        received.append(x)
        return x

    toolkit.register_function(echo)
    return toolkit


async def test_permission_hooks_run_as_an_onion_around_the_engine() -> None:
    log: list[str] = []
    received: list[str] = []
    mw1, mw2 = Logged("mw1", log), Logged("mw2", log)
    agent = make_agent(
        [calls(call("e1", "echo", x="v")), text("ok")],
        echo_toolkit(received),
        middlewares=[mw1, mw2],
    )
    agent.permission_engine = RecordingEngine(agent, log)
    await run(agent, user())
    assert log == ["mw1_pre", "mw2_pre", "engine", "mw2_post", "mw1_post"]
    assert mw1.keys == mw2.keys == [{"tool_call", "tool", "tool_input"}]
    assert mw1.decisions == ["allow"]
    assert received == ["v"]


async def test_permission_hook_can_short_circuit_with_deny() -> None:
    log: list[str] = []
    received: list[str] = []
    deny = PermissionDecision(behavior=PermissionBehavior.DENY, message="policy says no")
    agent = make_agent(
        [calls(call("e1", "echo", x="v")), text("ok")],
        echo_toolkit(received),
        middlewares=[Logged("mw1", log, short=deny)],
    )
    agent.permission_engine = RecordingEngine(agent, log)
    _, events = await run(agent, user())
    assert log == ["mw1_pre"]  # the engine was never awaited
    assert received == []
    assert result_of(agent, "e1").state == ToolResultState.DENIED
    assert result_of(agent, "e1").output == "policy says no"
    assert of_call(events, "e1") == [
        "TOOL_RESULT_START",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_END",
    ]


async def test_permission_hook_can_replace_the_decision() -> None:
    log: list[str] = []
    received: list[str] = []
    ask = PermissionDecision(behavior=PermissionBehavior.ASK, message="let me ask")
    agent = make_agent(
        [calls(call("e1", "echo", x="v"))],
        echo_toolkit(received),
        middlewares=[Logged("mw1", log, replace=ask)],
    )
    agent.permission_engine = RecordingEngine(agent, log)
    _, events = await run(agent, user())
    assert log == ["mw1_pre", "engine", "mw1_post"]
    assert kinds(events)[-1] == "REQUIRE_USER_CONFIRM"
    assert received == []


async def test_permission_hook_forwarded_input_reaches_the_engine_only() -> None:
    log: list[str] = []
    received: list[str] = []
    agent = make_agent(
        [calls(call("e1", "echo", x="v")), text("ok")],
        echo_toolkit(received),
        middlewares=[Logged("mw1", log, tool_input={"x": "replaced"}), Logged("mw2", log)],
    )
    engine = RecordingEngine(agent, log)
    agent.permission_engine = engine
    await run(agent, user())
    assert engine.inputs == [{"x": "replaced"}]
    # The originals are untouched: the call and what runs are the model's.
    assert tool_calls(agent)["e1"].input == '{"x": "v"}'
    assert received == ["v"]


async def test_permission_hook_exception_ends_the_reply_with_an_error() -> None:
    log: list[str] = []
    received: list[str] = []
    agent = make_agent(
        [calls(call("e1", "echo", x="v"))],
        echo_toolkit(received),
        middlewares=[Logged("mw1", log, raise_=KeyError("policy store down"))],
    )
    engine = RecordingEngine(agent, log)
    agent.permission_engine = engine
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    with pytest.raises(KeyError, match="policy store down"):
        await agent.reply(user(), on_event=record)
    assert engine.inputs == []
    assert received == []
    assert isinstance(events[-1], ReplyEndEvent)
    assert events[-1].finished_reason == ReplyFinishedReason.ERROR
    # Rule 6 still holds after the error: the call got a result.
    check_reply_rules(agent.state, agent.name, events)


async def test_allowed_call_skips_the_engine_but_not_the_hooks() -> None:
    log: list[str] = []
    received: list[str] = []
    mw = Logged("mw1", log)
    agent = make_agent(
        [calls(call("e1", "echo", x="v")), text("ok")],
        echo_toolkit(received),
        middlewares=[mw],
    )
    # The first check asks (the real engine: a function tool without permission).
    _, events = await run(agent, user())
    assert kinds(events)[-1] == "REQUIRE_USER_CONFIRM"
    assert mw.decisions == ["ask"]
    engine = RecordingEngine(agent, log)
    agent.permission_engine = engine
    log.clear()
    await run(agent, confirm(parked_call(agent, "e1")))
    assert log == ["mw1_pre", "mw1_post"]
    assert engine.inputs == []
    assert mw.decisions == ["ask", "allow"]
    assert received == ["v"]


async def test_allowed_call_can_still_be_denied_by_a_hook() -> None:
    received: list[str] = []

    class DenyAllowed(MiddlewareBase):
        async def on_check_permission(
            self, agent: Any, input_kwargs: dict[str, Any], next_handler: Any
        ) -> PermissionDecision:
            decision: PermissionDecision = await next_handler()
            if input_kwargs["tool_call"].state == ToolCallState.ALLOWED:
                return PermissionDecision(behavior=PermissionBehavior.DENY, message="changed mind")
            return decision

    agent = make_agent(
        [calls(call("e1", "echo", x="v")), text("ok")],
        echo_toolkit(received),
        middlewares=[DenyAllowed()],
    )
    await run(agent, user())
    msg, _ = await run(agent, confirm(parked_call(agent, "e1")))
    assert received == []
    assert result_of(agent, "e1").state == ToolResultState.DENIED
    assert result_of(agent, "e1").output == "changed mind"
    assert msg.get_text_content() == "ok"


async def test_permission_hooks_get_copies() -> None:
    received: list[str] = []

    class Mutate(MiddlewareBase):
        async def on_check_permission(
            self, agent: Any, input_kwargs: dict[str, Any], next_handler: Any
        ) -> PermissionDecision:
            input_kwargs["tool_call"].input = '{"x": "mutated"}'
            input_kwargs["tool_input"]["x"] = "mutated"
            return ALLOW

    agent = make_agent(
        [calls(call("e1", "echo", x="v")), text("ok")],
        echo_toolkit(received),
        middlewares=[Mutate()],
    )
    await run(agent, user())
    assert received == ["v"]
    assert tool_calls(agent)["e1"].input == '{"x": "v"}'


# -- the resume path through the stream API ----------------------------------------------------------


async def test_resume_through_stream() -> None:
    log: list[str] = []
    agent = make_agent([calls(call("a1", "ask", x="1")), text("streamed")], hitl_toolkit(log))
    async with agent.stream(user()) as reply:
        parked = [event async for event in reply]
    assert reply.msg is not None
    assert reply.msg.get_text_content() == PARKED_TEXT
    assert isinstance(parked[-1], RequireUserConfirmEvent)
    answer = UserConfirmResultEvent(
        confirm_results=[ConfirmResult(confirmed=True, tool_call=parked[-1].tool_calls[0])]
    )
    async with agent.stream(answer) as reply:
        resumed = [event async for event in reply]
    assert reply.msg is not None
    assert reply.msg.get_text_content() == "streamed"
    assert isinstance(resumed[-1], ReplyEndEvent)
    assert [e.delta for e in resumed if isinstance(e, ToolResultTextDeltaEvent)] == ["ask:1"]


async def test_parked_model_scripts_are_consumed_exactly() -> None:
    """The park itself costs one model call; the resume the rest (no extra model call)."""
    agent = make_agent([calls(call("a1", "ask", x="1")), text("x")], hitl_toolkit([]))
    await run(agent, user())
    assert model_of(agent).remaining == 1
    await run(agent, confirm(parked_call(agent, "a1")))
    model_of(agent).assert_consumed()
    assert isinstance(agent.model, ScriptedModel)


# -- concurrent prompts ----------------------------------------------------------------------------

#: One safety ASK shared by every call, as a tool may keep it in a module constant.
SHARED_SAFETY_ASK = PermissionDecision(
    behavior="ask", message="dangerous", decision_reason="dangerous path", bypass_immune=True
)


class SharedAskTool(ToolBase):
    name = "danger"
    description = "Touch a dangerous path."
    is_concurrency_safe = True
    input_schema = {"type": "object", "properties": {"path": {"type": "string"}}}  # noqa: RUF012

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> Any:
        await trio.sleep(0)
        return SHARED_SAFETY_ASK

    async def generate_suggestions(self, tool_input: dict[str, Any]) -> list[PermissionRule]:
        await trio.sleep(0)
        return [
            PermissionRule(
                tool_name="danger",
                rule_content=tool_input["path"],
                behavior="allow",
                source="suggested",
            )
        ]

    async def call(self, emit: Any, /, **kwargs: Any) -> ToolChunk:
        return ToolChunk(content=[TextBlock(text="ran")])


async def test_each_concurrent_prompt_carries_its_own_suggestions() -> None:
    """reference/agent.md §5.1: a prompt's suggestions are the rules for *that* call, even when
    the tool returns one shared decision object to checks running at the same time."""
    toolkit = Toolkit()
    toolkit.add_tool(SharedAskTool())
    batch = calls(*(call(c, "danger", path=f"/{c}") for c in "abc"))
    agent = make_agent([batch, text("x")], toolkit)
    _, events = await run(agent, user())
    prompts = {
        block.id: [rule.rule_content for rule in block.suggested_rules]
        for event in events
        if isinstance(event, RequireUserConfirmEvent)
        for block in event.tool_calls
    }
    assert prompts == {"a": ["/a"], "b": ["/b"], "c": ["/c"]}
    assert SHARED_SAFETY_ASK.suggested_rules is None  # the tool's object is left alone

"""Human-in-the-loop: confirmation, external execution, park / resume / abort, and the
``on_check_permission`` chain, with AgentScope's events, prompts and resume rules.

Further down: the edges of saving, restoring and resuming (after any interruption the context
stays consistent and resumable).

* A parked reply saved with ``dumps`` and loaded into a *new* Agent resumes exactly as the
  original would: same events, same final Msg, same state, same model requests.
* A reply interrupted at any schedule point (``cancel_sweep``) leaves a state that, restored in
  a new Agent, continues: the next provider request pairs every tool call with one result.
* Malformed resume inputs (unknown, repeated or mismatched ids, a confirmation with nothing
  parked, a new message while parked) are clear errors that leave the park resumable.
* Forward compatibility of the saved JSON: unknown keys are a ``SerializationError`` naming
  their path (the converter forbids extra keys); missing keys that have defaults are tolerated.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import jsonschema
import pytest
import trio
import trio.testing
from agent_kit import (
    ALLOW,
    INTERRUPTED_TEXT,
    NO_INJECTION,
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

from trioagent.agent import Agent, AgentState, ContextConfig
from trioagent.event import (
    AgentEvent,
    ConfirmResult,
    ExternalExecutionResultEvent,
    ReplyEndEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from trioagent.exception import DeveloperOrientedException
from trioagent.formatter import OpenAIChatFormatter
from trioagent.message import (
    AssistantMsg,
    DataBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
    URLSource,
    UserMsg,
)
from trioagent.middleware import MiddlewareBase
from trioagent.permission import (
    PermissionBehavior,
    PermissionDecision,
    PermissionEngine,
    PermissionRule,
)
from trioagent.serialization import SerializationError, dumps, loads
from trioagent.testing import (
    ScriptedModel,
    SweepRun,
    cancel_sweep,
    check_reply_rules,
    text_chunks,
    tool_call_chunks,
)
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
    """A prompt's suggestions are the rules for *that* call, even when
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


# == edge cases ====================================================================================
NAME = "agent"


# -- tools -------------------------------------------------------------------------------------------


class EdgeExternal(ToolBase):
    """Executed by the caller; allowed without asking."""

    name = "ext"
    description = "Executed by the caller."
    input_schema = {"type": "object", "properties": {"q": {"type": "string"}}}  # noqa: RUF012
    is_external_tool = True
    is_concurrency_safe = True

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> Any:
        return ALLOW


class AskingExternal(EdgeExternal):
    """Executed by the caller, after the user confirmed it."""

    name = "ask_ext"

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> Any:
        return PermissionDecision(behavior=PermissionBehavior.ASK, message="ask first")


def hitl_kit(log: list[str], *, without: Sequence[str] = ()) -> Toolkit:
    """``ask`` / ``other`` (concurrent, prompt), ``ask_seq`` (sequential, prompts), ``slow``
    (allowed, sleeps ``delay``), the external ``ext`` and the confirm-then-external
    ``ask_ext``; ``without`` leaves tools out (a toolkit that lost them)."""
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

    async def slow(delay: float) -> str:
        """Allowed and slow."""
        await trio.sleep(delay)
        log.append("slow")
        return "slow-done"

    functions: list[tuple[Any, dict[str, Any]]] = [
        (ask, {}),
        (other, {}),
        (ask_seq, {"is_concurrency_safe": False}),
        (slow, {"permission": ALLOW, "is_concurrency_safe": False}),
    ]
    for fn, options in functions:
        if fn.__name__ not in without:
            toolkit.register_function(fn, **options)
    for tool in (EdgeExternal(), AskingExternal()):
        if tool.name not in without:
            toolkit.add_tool(tool)
    return toolkit


def new_agent(
    steps: Sequence[Any],
    log: list[str],
    state: AgentState | None = None,
    *,
    without: Sequence[str] = (),
    **kwargs: Any,
) -> Agent:
    kwargs.setdefault("injection_config", NO_INJECTION)
    model = kwargs.pop("model", None) or ScriptedModel(list(steps))
    return Agent(NAME, model=model, toolkit=hitl_kit(log, without=without), state=state, **kwargs)


def restored(agent: Agent) -> AgentState:
    """The agent's state after a trip through JSON (a save and a load elsewhere)."""
    payload = dumps(agent.state)
    state = loads(payload, AgentState)
    assert dumps(state) == payload
    return state


def edge_model_of(agent: Agent) -> ScriptedModel:
    assert isinstance(agent.model, ScriptedModel)
    return agent.model


def edge_ext_result(call_id: str, output: str = "ext-out", **kw: Any) -> ToolResultBlock:
    kw.setdefault("state", ToolResultState.SUCCESS)
    return ToolResultBlock(id=call_id, name="ext", output=output, **kw)


def answer(*results_: ToolResultBlock) -> ExternalExecutionResultEvent:
    return ExternalExecutionResultEvent(execution_results=list(results_))


async def openai_valid(messages: Sequence[Msg]) -> None:
    """The request a provider would get is valid: every call pairs with one result, each
    result follows its call's assistant turn, and no result is orphaned.

    Checked on the OpenAI chat wire format, the strictest about ordering: the ``tool``
    messages answering an assistant turn's ``tool_calls`` must come right after it.
    """
    calls_ = collections.Counter(
        b.id for m in messages for b in m.content if isinstance(b, ToolCallBlock)
    )
    results_ = collections.Counter(
        b.id for m in messages for b in m.content if isinstance(b, ToolResultBlock)
    )
    assert all(n == 1 for n in calls_.values()), calls_
    assert results_ == calls_, (calls_, results_)
    wire = await OpenAIChatFormatter().format(list(messages))
    index = 0
    while index < len(wire):
        message = wire[index]
        assert message["role"] != "tool", f"orphaned tool message at {index}: {wire}"
        index += 1
        asked = {c["id"] for c in message.get("tool_calls") or []}
        answered: list[str] = []
        while index < len(wire) and wire[index]["role"] == "tool":
            answered.append(wire[index]["tool_call_id"])
            index += 1
        assert sorted(answered) == sorted(asked), (asked, answered, wire)


def assert_consistent(agent: Agent) -> None:
    """Rule 6 on a resting agent: every call finished with exactly one result, no orphan."""
    context = agent.state.context
    for msg in context:
        for block in msg.content:
            if isinstance(block, ToolCallBlock):
                assert block.state == ToolCallState.FINISHED, block
    ids = [b.id for m in context for b in m.content if isinstance(b, ToolCallBlock)]
    answered = [b.id for m in context for b in m.content if isinstance(b, ToolResultBlock)]
    assert sorted(ids) == sorted(answered), (ids, answered)
    assert len(set(ids)) == len(ids)


# -- 1. park -> save -> load into a new Agent -> resume: the same outcome -----------------------------

_GENERATED_ID = re.compile(r"\b[0-9a-f]{32}\b")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?")


def canon(payload: str) -> str:
    """Generated ids and timestamps differ between two runs; everything else must not."""
    return _TIMESTAMP.sub("<ts>", _GENERATED_ID.sub("<id>", payload))


def event_view(events: Sequence[AgentEvent]) -> tuple[list[str], dict[str, list[str]]]:
    """The events, with each tool call's own events kept apart: calls of a concurrent batch
    interleave in whatever order Trio schedules them."""
    flow: list[str] = []
    per_call: dict[str, list[str]] = collections.defaultdict(list)
    for event in events:
        item = canon(dumps(event, AgentEvent))
        call_id = getattr(event, "tool_call_id", None)
        (per_call[call_id] if call_id else flow).append(item)
    return flow, dict(per_call)


Turn = Callable[[Agent], Any]


@attrs.frozen
class Scenario:
    steps: Callable[[], list[Any]]
    turns: tuple[Turn, ...]
    last_reason: str  # the finished reason of the last resume
    schema: dict[str, Any] | None = None


def confirming(call_id: str, *, edit: str | None = None, **kw: Any) -> Turn:
    def build(agent: Agent) -> UserConfirmResultEvent:
        block = tool_calls(agent)[call_id]
        if edit is not None:
            block = attrs.evolve(block, input=edit)
        return confirm(block, **kw)

    return build


def confirming_with_suggested_rules(call_id: str) -> Turn:
    def build(agent: Agent) -> UserConfirmResultEvent:
        block = tool_calls(agent)[call_id]
        return confirm(block, rules=list(block.suggested_rules))

    return build


def external(call_id: str, output: str, name: str = "ext") -> Turn:
    return lambda agent: answer(ToolResultBlock(id=call_id, name=name, output=output))


WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "default": "celsius"}},
    "required": ["city"],
}

SCENARIOS: dict[str, Scenario] = {
    "confirm": Scenario(
        lambda: [calls(call("a1", "ask", x="1")), text("done")],
        (confirming("a1"),),
        "completed",
    ),
    "deny": Scenario(
        lambda: [calls(call("a1", "ask", x="1")), text("done")],
        (confirming("a1", confirmed=False),),
        "completed",
    ),
    "edited-input": Scenario(
        lambda: [calls(call("a1", "ask", x="1")), text("done")],
        (confirming("a1", edit='{"x": "edited"}'),),
        "completed",
    ),
    "edited-input-violating-the-schema": Scenario(
        lambda: [calls(call("a1", "ask", x="1")), text("done")],
        (confirming("a1", edit='{"y": "no x"}'),),
        "completed",
    ),
    "suggested-rule-runs-the-pending-call": Scenario(
        lambda: [calls(call("a1", "ask", x="1"), call("a2", "ask", x="2")), text("done")],
        (confirming_with_suggested_rules("a1"),),
        "completed",
    ),
    "two-sequential-prompts": Scenario(
        lambda: [calls(call("s1", "ask_seq", x="1"), call("s2", "ask_seq", x="2")), text("d")],
        (confirming("s1"), confirming("s2")),
        "completed",
    ),
    "partial-confirmation": Scenario(
        lambda: [calls(call("a1", "ask", x="1"), call("o1", "other", x="2")), text("done")],
        (confirming("a1"), confirming("o1", confirmed=False)),
        "completed",
    ),
    "external": Scenario(
        lambda: [calls(call("x1", "ext", q="q")), text("done")],
        (external("x1", "42"),),
        "completed",
    ),
    "confirm-then-external": Scenario(
        lambda: [calls(call("y1", "ask_ext", q="q")), text("done")],
        (confirming("y1"), external("y1", "out", name="ask_ext")),
        "completed",
    ),
    "external-then-confirm": Scenario(
        lambda: [calls(call("a1", "ask", x="1"), call("x1", "ext", q="q")), text("done")],
        (external("x1", "42"), confirming("a1")),
        "completed",
    ),
    "user-interrupt": Scenario(
        lambda: [calls(call("a1", "ask", x="1"), call("x1", "ext", q="q"))],
        (lambda agent: UserInterruptEvent(reply_id=agent.state.reply_id),),
        "interrupted",
    ),
    "structured-output": Scenario(
        lambda: [
            calls(call("a1", "ask", x="1")),
            calls(call("so", "GenerateStructuredOutput", city="Kyiv")),
        ],
        (confirming("a1"),),
        "completed",
        schema=WEATHER,
    ),
}


async def play(scenario: Scenario, restore: bool) -> list[dict[str, Any]]:
    """Run the scenario's park and resumes (then one more plain reply), optionally moving the
    state into a brand-new Agent (new model object, new toolkit) before each resume."""
    log: list[str] = []
    steps = [*scenario.steps(), text("follow-up")]
    used = 0
    agent = new_agent(steps, log)
    trace: list[dict[str, Any]] = []
    turns: list[Turn] = [lambda _: user("start"), *scenario.turns, lambda _: user("more")]
    for index, turn in enumerate(turns):
        if restore and index:
            agent = new_agent(steps[used:], log, restored(agent))
        model = edge_model_of(agent)
        before = len(model.requests)
        schema = scenario.schema if index == 0 else None
        events: list[AgentEvent] = []

        async def record(event: AgentEvent) -> None:
            events.append(event)  # noqa: B023 - consumed within the iteration

        msg = await agent.reply(turn(agent), structured_schema=schema, on_event=record)
        used += len(model.requests) - before
        check_reply_rules(agent.state, NAME, events, where=f"turn {index}")
        trace.append(
            {
                "events": event_view(events),
                "msg": canon(dumps(msg)),
                "state": canon(dumps(agent.state)),
                "requests": [
                    (canon(dumps(r.messages, list[Msg])), r.tools, r.tool_choice)
                    for r in model.requests[before:]
                ],
                "log": sorted(log),
                "reply_id": agent.state.reply_id,
                "finished_reason": msg.finished_reason,
            }
        )
    edge_model_of(agent).assert_consumed()
    return trace


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_a_restored_park_resumes_exactly_like_the_original(name: str) -> None:
    scenario = SCENARIOS[name]
    original = await play(scenario, restore=False)
    again = await play(scenario, restore=True)
    # The scenario did what it says: parked first, the last resume ended as expected, and the
    # follow-up is a fresh, completed reply.
    assert original[0]["finished_reason"] is None
    assert original[-2]["finished_reason"] == scenario.last_reason
    assert original[-1]["finished_reason"] == ReplyFinishedReason.COMPLETED
    for trace in (original, again):
        assert len({step["reply_id"] for step in trace[:-1]}) == 1  # one reply across parks
        assert trace[-1]["reply_id"] != trace[0]["reply_id"]
    for step, (mine, theirs) in enumerate(zip(original, again, strict=True)):
        for key in mine:
            if key == "reply_id":
                continue
            assert theirs[key] == mine[key], f"turn {step}: {key} differs after a restore"


# -- 2. interrupted anywhere, saved, restored, continued ---------------------------------------------


def answer_waiting(state: AgentState) -> Any:
    """Confirm every asking call, else return a result for every submitted one."""
    waiting = state.get_awaiting_tool_calls(NAME)
    asking = [c for c in waiting if c.state == ToolCallState.ASKING]
    if asking:
        return confirm(*asking)
    return answer(*(edge_ext_result(c.id, name=c.name) for c in waiting))


async def continue_in_a_new_agent(run_: SweepRun) -> Agent:
    """Restore the swept agent's state into a new Agent and take the conversation on: answer
    what is still parked, else ask again.  Returns the new agent after its reply completed."""
    state = restored(run_.agent)
    saved = [m.id for m in state.context]
    fresh = new_agent([text_chunks("next"), text_chunks("and the next")], [], state)
    if state.has_awaiting_tool_calls(NAME):
        msg, events = await run(fresh, answer_waiting(state))
        while msg.finished_reason is None:  # parked again (e.g. a de-duplicated call)
            msg, more = await run(fresh, answer_waiting(fresh.state))
            events += more
    else:
        msg, events = await run(fresh, user("again"))
    where = f"point {run_.cancel_at}"
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED, where
    check_reply_rules(fresh.state, NAME, events, where=where)
    assert_consistent(fresh)
    # The request the new model got: the restored context, unchanged, and valid.
    request = edge_model_of(fresh).requests[-1].messages
    await openai_valid(request)
    sent = {m.id for m in request}
    assert all(i in sent for i in saved), where
    return fresh


def one_start_and_end_per_call(run_: SweepRun) -> None:
    """No call is opened or closed twice in a run, whatever point the cancellation hit."""
    for kind in ("TOOL_RESULT_START", "TOOL_RESULT_END"):
        seen = collections.Counter(
            getattr(e, "tool_call_id", None) for e in run_.events if str(e.type) == kind
        )
        twice = {k: n for k, n in seen.items() if n > 1}
        assert not twice, f"point {run_.cancel_at}: {kind} repeated for {twice}"


async def sweep_and_continue(build: Any, inputs: Any, mode: str) -> Any:
    report = await cancel_sweep(build, inputs, mode=mode, check=one_start_and_end_per_call)
    assert report.outcomes["interrupted"] > 0
    for run_ in report.runs:
        await continue_in_a_new_agent(run_)
    return report


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_a_streamed_tool_round_interrupted_anywhere_continues_after_a_restore(
    mode: str, autojump_clock: Any
) -> None:
    def build() -> Agent:
        model = ScriptedModel(
            [
                [
                    *text_chunks("Let me ", "look."),
                    *tool_call_chunks("c1", "slow", '{"delay": ', "1.0}"),
                    *tool_call_chunks("a1", "ask", '{"x": "1"}'),
                ],
                text_chunks("done"),
            ],
            chunk_delay=0.1,
        )
        return new_agent([], [], model=model)

    report = await sweep_and_continue(build, user, mode)
    assert report.outcomes["parked"] > 0  # the baseline parks on a1


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_a_resumed_confirmation_interrupted_anywhere_continues_after_a_restore(
    mode: str, autojump_clock: Any
) -> None:
    """The resume runs the confirmed call, a pending one and the next model call; cancelled
    anywhere, the restored state has no call without exactly one result."""

    async def build() -> Agent:
        first = new_agent(
            [
                calls(
                    call("a1", "ask", x="1"),
                    call("a2", "ask", x="2"),
                    call("r1", "slow", delay=1.0),
                )
            ],
            [],
        )
        await run(first, user())
        assert [c.id for c in first.state.get_awaiting_tool_calls(NAME)] == ["a1"]
        model = ScriptedModel([text_chunks("all ", "done")], chunk_delay=0.1)
        return new_agent([], [], restored(first), model=model)

    def event() -> UserConfirmResultEvent:
        return confirm(ToolCallBlock(id="a1", name="ask", input='{"x": "1"}'))

    await sweep_and_continue(build, event, mode)


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_an_external_result_resume_interrupted_anywhere_continues_after_a_restore(
    mode: str, autojump_clock: Any
) -> None:
    async def build() -> Agent:
        first = new_agent([calls(call("x1", "ext", q="q"), call("s1", "slow", delay=1.0))], [])
        await run(first, user())
        model = ScriptedModel([text_chunks("thanks")], chunk_delay=0.1)
        return new_agent([], [], restored(first), model=model)

    await sweep_and_continue(build, lambda: answer(edge_ext_result("x1", "42")), mode)


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_a_denial_resume_interrupted_anywhere_continues_after_a_restore(
    mode: str, autojump_clock: Any
) -> None:
    async def build() -> Agent:
        first = new_agent([calls(call("a1", "ask", x="1"), call("o1", "other", x="2"))], [])
        await run(first, user())
        model = ScriptedModel([text_chunks("as ", "you wish")], chunk_delay=0.1)
        return new_agent([], [], restored(first), model=model)

    def event() -> UserConfirmResultEvent:
        return confirm(
            ToolCallBlock(id="a1", name="ask", input='{"x": "1"}'),
            ToolCallBlock(id="o1", name="other", input='{"x": "2"}'),
            confirmed=False,
        )

    await sweep_and_continue(build, event, mode)


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_aborting_a_restored_park_anywhere_continues(mode: str, autojump_clock: Any) -> None:
    """A UserInterruptEvent sent to an agent rebuilt from a parked state."""

    async def build() -> Agent:
        agent = new_agent([calls(call("a1", "ask", x="1"), call("x1", "ext", q="q"))], [])
        await run(agent, user())
        return new_agent([], [], restored(agent))

    def check(run_: SweepRun) -> None:
        assert run_.end is not None
        assert run_.end.finished_reason == ReplyFinishedReason.INTERRUPTED

    report = await cancel_sweep(build, lambda: UserInterruptEvent(), mode=mode, check=check)
    for run_ in report.runs:
        fresh = await continue_in_a_new_agent(run_)
        assert {r.id: r.output for r in results(fresh)} == {
            "a1": INTERRUPTED_TEXT,
            "x1": INTERRUPTED_TEXT,
        }


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_a_compressed_reply_interrupted_anywhere_keeps_its_summary_across_a_restore(
    mode: str, autojump_clock: Any
) -> None:
    """Compression runs, then the model calls a tool: saved at any point, the summary and the
    context agree (compressed whole or not at all) and the restored agent continues."""
    from agent_helpers import summary_step, tokens

    old = tokens(60, "1")

    def build() -> Agent:
        # 20 (prompt) + 48 (the slow tool's schema) + 60 + 10 + 10 tokens reach the trigger
        # (0.7 * 200); after compression the summary is 2 tokens and nothing triggers again.
        model = ScriptedModel(
            [summary_step(), calls(call("r1", "slow", delay=1.0)), text_chunks("x", "y")],
            context_size=200,
            chunk_delay=0.1,
        )
        agent = new_agent(
            [],
            [],
            model=model,
            system_prompt=tokens(20, "S"),
            context_config=ContextConfig(
                trigger_ratio=0.7, reserve_ratio=0.4, summary_template="{task_overview}"
            ),
            without=["ask", "other", "ask_seq", "ext", "ask_ext"],
        )
        agent.state.context = [UserMsg("user", old), AssistantMsg(NAME, tokens(10, "2"))]
        return agent

    def check(run_: SweepRun) -> None:
        state = restored(run_.agent)
        texts = [m.get_text_content() for m in state.context]
        assert (old in texts) != bool(state.summary)

    report = await cancel_sweep(build, lambda: UserMsg("user", tokens(10, "3")), mode=mode)
    assert {bool(r.agent.state.summary) for r in report.runs} == {True, False}
    for run_ in report.runs:
        check(run_)
        fresh = await continue_in_a_new_agent(run_)
        request = edge_model_of(fresh).requests[-1].messages
        if run_.agent.state.summary:
            assert request[0].get_text_content() == run_.agent.state.summary
        else:
            assert request[0].get_text_content() == old


# -- 3. malformed resume inputs leave the park intact ------------------------------------------------


async def parked_agent(steps: Sequence[Any], log: list[str] | None = None) -> Agent:
    """An agent parked on ``steps[0]``'s calls, then moved into a new Agent via JSON."""
    log = log if log is not None else []
    first = new_agent(steps[:1], log)
    await run(first, user())
    assert first.state.has_awaiting_tool_calls(NAME)
    return new_agent(steps[1:], log, restored(first))


async def rejected(agent: Agent, inputs: Any, error: type[Exception], match: str) -> None:
    """``inputs`` is refused before anything changes: no event, the same state."""
    before = dumps(agent.state)
    events: list[AgentEvent] = []

    async def record(event: AgentEvent) -> None:
        events.append(event)

    with pytest.raises(error, match=match):
        await agent.reply(inputs, on_event=record)
    assert events == []
    assert dumps(agent.state) == before
    assert not agent.is_replying


async def test_unknown_call_ids_are_refused_and_the_restored_park_still_resumes() -> None:
    log: list[str] = []
    agent = await parked_agent([calls(call("a1", "ask", x="1")), text("ok")], log)
    stranger = ToolCallBlock(id="zz", name="ask", input='{"x": "1"}')
    await rejected(agent, confirm(stranger), ValueError, r"\['zz'\] are not awaiting")
    # One known and one unknown id: the whole event is refused, the known one not applied.
    await rejected(
        agent, confirm(tool_calls(agent)["a1"], stranger), ValueError, "not awaiting confirmation"
    )
    await rejected(
        agent, answer(edge_ext_result("a1")), ValueError, "no tool call awaits an external"
    )
    assert log == []
    msg, _ = await run(agent, confirm(tool_calls(agent)["a1"]))
    assert msg.get_text_content() == "ok"
    assert log == ["ask:1"]


async def test_a_deduplicated_pending_call_cannot_be_confirmed_before_it_asks() -> None:
    """a2 was de-duplicated behind a1's prompt (same tool, covered by its suggested rule): it
    is pending, not asking, so an answer for it is refused; it prompts once a1 is answered
    without a rule."""
    log: list[str] = []
    agent = await parked_agent(
        [calls(call("a1", "ask", x="1"), call("a2", "ask", x="2")), text("ok")], log
    )
    assert tool_calls(agent)["a2"].state == ToolCallState.PENDING
    await rejected(agent, confirm(tool_calls(agent)["a2"]), ValueError, r"\['a2'\] are not")
    msg, events = await run(agent, confirm(tool_calls(agent)["a1"]))
    assert [
        c.id for e in events if isinstance(e, RequireUserConfirmEvent) for c in e.tool_calls
    ] == ["a2"]
    assert msg.get_text_content() == PARKED_TEXT
    msg, _ = await run(
        new_agent([text("ok")], log, restored(agent)), confirm(tool_calls(agent)["a2"])
    )
    assert msg.get_text_content() == "ok"
    assert log == ["ask:1", "ask:2"]


async def test_interrupt_on_a_parked_agent_changes_nothing() -> None:
    """``agent.interrupt()`` cancels a *running* reply; a parked one is aborted only by a
    UserInterruptEvent, as in AgentScope."""
    agent = await parked_agent([calls(call("a1", "ask", x="1")), text("ok")])
    before = dumps(agent.state)
    agent.interrupt()
    assert not agent.is_replying
    assert dumps(agent.state) == before
    msg, _ = await run(agent, confirm(tool_calls(agent)["a1"]))
    assert msg.get_text_content() == "ok"


async def test_external_result_for_the_wrong_call_or_state_is_refused() -> None:
    agent = await parked_agent(
        [calls(call("a1", "ask", x="1"), call("x1", "ext", q="q")), text("ok")]
    )
    assert {c.id: c.state for c in agent.state.get_awaiting_tool_calls(NAME)} == {
        "a1": ToolCallState.ASKING,
        "x1": ToolCallState.SUBMITTED,
    }
    # A result for the asking call, a confirmation for the submitted one: both mismatched.
    await rejected(agent, answer(edge_ext_result("a1")), ValueError, r"\['a1'\] are not awaiting")
    await rejected(
        agent, confirm(tool_calls(agent)["x1"]), ValueError, r"\['x1'\] are not awaiting"
    )
    msg, _ = await run(agent, answer(edge_ext_result("x1", "42")))
    assert msg.get_text_content() == PARKED_TEXT  # a1 still asks
    # x1 is answered now: a second result for it is refused.
    await rejected(agent, answer(edge_ext_result("x1", "again")), ValueError, "no tool call awaits")
    msg, _ = await run(agent, confirm(tool_calls(agent)["a1"]))
    assert msg.get_text_content() == "ok"
    assert_consistent(agent)
    assert output_text(result_of(agent, "x1")) == "42"


async def test_confirmation_with_nothing_parked_is_refused_after_a_restore() -> None:
    """A restored agent whose last reply completed, and one whose reply was interrupted."""
    agent = new_agent([text("hi")], [])
    await run(agent, user())
    fresh = new_agent([], [], restored(agent))
    block = ToolCallBlock(id="a1", name="ask", input="{}")
    await rejected(fresh, confirm(block), ValueError, "no tool call awaits confirmation")
    await rejected(
        fresh, answer(edge_ext_result("a1")), ValueError, "no tool call awaits an external"
    )

    aborted = await parked_agent([calls(call("a1", "ask", x="1"))])
    await run(aborted, UserInterruptEvent())
    fresh = new_agent([], [], restored(aborted))
    await rejected(fresh, confirm(tool_calls(fresh)["a1"]), ValueError, "no tool call awaits")


async def test_two_confirmations_in_a_row() -> None:
    """The second copy of an answer already applied is refused, whether the reply finished or
    parked again on another call; nothing runs twice."""
    log: list[str] = []
    agent = await parked_agent(
        [calls(call("a1", "ask", x="1"), call("o1", "other", x="2")), text("done")], log
    )
    first = confirm(tool_calls(agent)["a1"])
    msg, _ = await run(agent, first)
    assert msg.get_text_content() == PARKED_TEXT  # o1 still asks
    await rejected(agent, first, ValueError, r"\['a1'\] are not awaiting")
    again = new_agent([text("done")], log, restored(agent))
    await rejected(again, first, ValueError, r"\['a1'\] are not awaiting")
    last = confirm(tool_calls(again)["o1"])
    msg, _ = await run(again, last)
    assert msg.get_text_content() == "done"
    await rejected(again, last, ValueError, "no tool call awaits confirmation")
    assert sorted(log) == ["ask:1", "other:2"]
    assert_consistent(again)


async def test_a_repeated_id_in_one_confirmation_gets_one_answer() -> None:
    """Two answers for one call in one event: as in AgentScope (a dict keyed by call id),
    the last one is applied, and the call still gets exactly one result."""
    log: list[str] = []
    agent = await parked_agent([calls(call("a1", "ask", x="1")), text("ok")], log)
    block = tool_calls(agent)["a1"]
    event = UserConfirmResultEvent(
        confirm_results=[
            ConfirmResult(confirmed=True, tool_call=block),
            ConfirmResult(confirmed=False, tool_call=block),
        ]
    )
    msg, events = await run(agent, event)
    assert msg.get_text_content() == "ok"
    assert log == []
    assert result_of(agent, "a1").state == ToolResultState.DENIED
    assert result_of(agent, "a1").output == DENIED_TEXT.format(name="ask")
    assert of_call(events, "a1") == [
        "TOOL_RESULT_START",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_END",
    ]
    assert_consistent(agent)


@pytest.mark.parametrize("inputs", ["message", "messages", "none", "empty-list"])
async def test_a_new_message_to_a_restored_park_is_refused(inputs: str) -> None:
    """As in AgentScope, while parked, ``reply(None)`` or ``reply(new Msg)`` raises
    ValueError; the park stays resumable."""
    agent = await parked_agent([calls(call("a1", "ask", x="1")), text("ok")])
    value: Any = {
        "message": user("something else"),
        "messages": [user("one"), user("two")],
        "none": None,
        "empty-list": [],
    }[inputs]
    await rejected(agent, value, ValueError, "waiting for 1 tool call")
    msg, _ = await run(agent, confirm(tool_calls(agent)["a1"]))
    assert msg.get_text_content() == "ok"
    assert [m.get_text_content() for m in agent.state.context if m.role == "user"] == ["go"]


async def test_an_empty_answer_keeps_the_reply_parked() -> None:
    """An event with no results is a valid resume that changes nothing: the reply parks again
    (no events, the waiting Msg) and the real answer still resumes it."""
    agent = await parked_agent(
        [calls(call("a1", "ask", x="1"), call("x1", "ext", q="q")), text("ok")]
    )
    for empty in (UserConfirmResultEvent(confirm_results=[]), answer()):
        msg, events = await run(agent, empty)
        assert msg.get_text_content() == PARKED_TEXT
        assert events == []
    await run(agent, answer(edge_ext_result("x1")))
    msg, _ = await run(agent, confirm(tool_calls(agent)["a1"]))
    assert msg.get_text_content() == "ok"
    assert_consistent(agent)


async def test_a_confirmation_sent_twice_at_once_runs_the_call_once(autojump_clock: Any) -> None:
    """A second copy of the answer arriving while the first resume still runs is refused
    (one reply at a time), and refused again once the call has its result."""
    log: list[str] = []
    agent = await parked_agent(
        [calls(call("a1", "ask", x="1"), call("r1", "slow", delay=5.0)), text("ok")], log
    )
    answer_ = confirm(tool_calls(agent)["a1"])
    outcome: list[Msg] = []

    async def first() -> None:
        outcome.append(await agent.reply(answer_))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(first)
        await trio.testing.wait_all_tasks_blocked()
        assert agent.is_replying
        with pytest.raises(RuntimeError, match="already replying"):
            await agent.reply(answer_)
    assert outcome[0].get_text_content() == "ok"
    await rejected(agent, answer_, ValueError, "no tool call awaits confirmation")
    assert log == ["ask:1", "slow"]
    assert_consistent(agent)


async def test_an_error_during_a_resume_leaves_a_state_that_restores_and_continues() -> None:
    """A developer error raised by the confirmed tool ends the resumed reply with ERROR
    (and the error propagates); every call of the parked round still gets one result, and a new
    agent restored from the state replies with a valid request."""
    toolkit = Toolkit()

    async def boom(x: str) -> str:
        """Fails in a way the model must not see."""
        raise DeveloperOrientedException("the tool is misconfigured")

    async def later(x: str) -> str:
        """Runs after boom."""
        return x

    toolkit.register_function(boom)
    toolkit.register_function(later, is_concurrency_safe=False, permission=ALLOW)
    agent = Agent(
        NAME,
        model=ScriptedModel([calls(call("b1", "boom", x="1"), call("l1", "later", x="2"))]),
        toolkit=toolkit,
        injection_config=NO_INJECTION,
    )
    await run(agent, user())
    assert tool_calls(agent)["l1"].state == ToolCallState.PENDING
    events: list[AgentEvent] = []

    async def record(event: AgentEvent) -> None:
        events.append(event)

    with pytest.raises(DeveloperOrientedException, match="misconfigured"):
        await agent.reply(confirm(tool_calls(agent)["b1"]), on_event=record)
    assert ends_with_one(events, ReplyFinishedReason.ERROR)
    check_reply_rules(agent.state, NAME, events)
    assert {r.id: r.state for r in results(agent)} == {
        "b1": ToolResultState.INTERRUPTED,
        "l1": ToolResultState.INTERRUPTED,
    }
    assert of_call(events, "b1").count("TOOL_RESULT_START") == 1
    fresh = Agent(
        NAME,
        model=ScriptedModel([text("recovered")]),
        toolkit=toolkit,
        state=restored(agent),
        injection_config=NO_INJECTION,
    )
    msg, _ = await run(fresh, user("again"))
    assert msg.get_text_content() == "recovered"
    assert_consistent(fresh)
    await openai_valid(edge_model_of(fresh).requests[-1].messages)


# -- 4. edited inputs and lost tools -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("edited", "expected"),
    [
        ('{"y": "1"}', "Input validation failed for tool 'ask': 'x' is a required property"),
        ("[1, 2]", "but a dict obj"),
        ("not json", "When decoding your tool arguments"),
    ],
)
async def test_a_confirmed_input_that_violates_the_schema_is_an_error_result(
    edited: str, expected: str
) -> None:
    """The user's edited input is validated like the model's: an error result the model
    reads, not a crash; the edit is kept in the call."""
    log: list[str] = []
    agent = await parked_agent([calls(call("a1", "ask", x="1")), text("noted")], log)
    block = attrs.evolve(tool_calls(agent)["a1"], input=edited)
    msg, events = await run(agent, confirm(block))
    assert log == []
    stored = result_of(agent, "a1")
    assert stored.state == ToolResultState.ERROR
    assert expected in output_text(stored)
    assert tool_calls(agent)["a1"].input == edited
    assert msg.get_text_content() == "noted"
    assert ends_with_one(events, ReplyFinishedReason.COMPLETED)
    await openai_valid(edge_model_of(agent).requests[-1].messages)


async def test_a_confirmed_call_renamed_to_an_unknown_tool_is_an_error_result() -> None:
    agent = await parked_agent([calls(call("a1", "ask", x="1")), text("noted")])
    msg, _ = await run(agent, confirm(attrs.evolve(tool_calls(agent)["a1"], name="nope")))
    stored = result_of(agent, "a1")
    assert stored.state == ToolResultState.ERROR
    assert "ToolNotFoundError" in output_text(stored)
    assert stored.name == "nope"
    assert msg.get_text_content() == "noted"


def ends_with_one(events: Sequence[AgentEvent], reason: str) -> bool:
    ends = [e for e in events if isinstance(e, ReplyEndEvent)]
    return len(ends) == 1 and events[-1] is ends[0] and ends[0].finished_reason == reason


async def test_resuming_after_the_toolkit_lost_the_confirmed_tool() -> None:
    first = new_agent([calls(call("a1", "ask", x="1"), call("s1", "ask_seq", x="2"))], [])
    await run(first, user())
    assert tool_calls(first)["a1"].state == ToolCallState.ASKING
    assert tool_calls(first)["s1"].state == ToolCallState.PENDING
    log: list[str] = []
    fresh = new_agent([text("sorry")], log, restored(first), without=["ask"])
    msg, events = await run(fresh, confirm(tool_calls(fresh)["a1"]))
    # The lost tool is an error result the model will read; the pending call still prompts.
    stored = result_of(fresh, "a1")
    assert stored.state == ToolResultState.ERROR
    assert "ToolNotFoundError" in output_text(stored)
    assert of_call(events, "a1") == [
        "TOOL_RESULT_START",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_END",
    ]
    assert msg.get_text_content() == PARKED_TEXT
    assert [
        c.id for e in events if isinstance(e, RequireUserConfirmEvent) for c in e.tool_calls
    ] == ["s1"]
    msg, _ = await run(fresh, confirm(tool_calls(fresh)["s1"]))
    assert msg.get_text_content() == "sorry"
    assert log == ["ask_seq:2"]
    assert_consistent(fresh)
    await openai_valid(edge_model_of(fresh).requests[-1].messages)


async def test_resuming_an_external_call_after_the_toolkit_lost_the_tool() -> None:
    first = new_agent([calls(call("x1", "ext", q="q"))], [])
    await run(first, user())
    fresh = new_agent([text("thanks")], [], restored(first), without=["ext"])
    msg, events = await run(fresh, answer(edge_ext_result("x1", "42")))
    assert msg.get_text_content() == "thanks"
    assert output_text(result_of(fresh, "x1")) == "42"
    assert kinds(events)[:2] == ["TOOL_RESULT_TEXT_DELTA", "TOOL_RESULT_END"]
    assert_consistent(fresh)


# -- 5. what the state carries across the trip -------------------------------------------------------


async def test_rules_accepted_on_a_restored_agent_persist_into_the_next_save() -> None:
    """Rules added while resuming a restored agent land in *its* state (the engine is bound
    to the loaded permission context) and survive the next save."""
    log: list[str] = []
    agent = await parked_agent([calls(call("a1", "ask", x="1")), text("ok")], log)
    block = tool_calls(agent)["a1"]
    await run(agent, confirm(block, rules=list(block.suggested_rules)))
    later = new_agent([calls(call("a2", "ask", x="2")), text("ok2")], log, restored(agent))
    msg, events = await run(later, user("more"))
    assert [e for e in events if isinstance(e, RequireUserConfirmEvent)] == []
    assert msg.get_text_content() == "ok2"
    assert log == ["ask:1", "ask:2"]


async def test_cur_iter_and_the_pending_call_survive_two_restores() -> None:
    """Sequential prompts, with a save between every step: the pending call is persisted,
    prompted after the first answer, and the round counts once."""
    log: list[str] = []
    agent = await parked_agent(
        [calls(call("s1", "ask_seq", x="1"), call("s2", "ask_seq", x="2")), text("d")], log
    )
    assert tool_calls(agent)["s2"].state == ToolCallState.PENDING
    reply_id = agent.state.reply_id
    msg, events = await run(agent, confirm(tool_calls(agent)["s1"]))
    assert msg.get_text_content() == PARKED_TEXT
    assert [
        c.id for e in events if isinstance(e, RequireUserConfirmEvent) for c in e.tool_calls
    ] == ["s2"]
    assert agent.state.cur_iter == 0
    agent = new_agent([text("d")], log, restored(agent))
    assert agent.state.reply_id == reply_id
    msg, _ = await run(agent, confirm(tool_calls(agent)["s2"]))
    assert msg.get_text_content() == "d"
    assert msg.id == reply_id
    assert agent.state.cur_iter == 2
    assert log == ["ask_seq:1", "ask_seq:2"]


async def test_a_summary_made_of_blocks_survives_and_reaches_the_model() -> None:
    agent = await parked_agent([calls(call("a1", "ask", x="1")), text("ok")])
    image = DataBlock(source=URLSource(url="https://example.com/a.png", media_type="image/png"))
    agent.state.summary = [TextBlock(text="earlier: the user likes trains"), image]
    fresh = new_agent([text("ok")], [], restored(agent))
    assert isinstance(fresh.state.summary, list)
    assert dumps(fresh.state.summary, list[TextBlock | DataBlock]) == dumps(
        agent.state.summary, list[TextBlock | DataBlock]
    )
    await run(fresh, confirm(tool_calls(fresh)["a1"]))
    first = edge_model_of(fresh).requests[0].messages[0]
    assert first.role == "user"
    assert first.get_text_content() == "earlier: the user likes trains"
    assert [b.type for b in first.content] == ["text", "data"]


async def test_a_restored_interrupted_reply_starts_a_new_reply() -> None:
    """As in AgentScope, there is no special resume after an interrupt; the next reply has a
    new id and a REPLY_START, and the old message stays as it was."""
    first = new_agent([calls(call("a1", "ask", x="1"))], [])
    await run(first, user())
    await run(first, UserInterruptEvent())
    old_id = first.state.reply_id
    fresh = new_agent([text("new")], [], restored(first))
    msg, events = await run(fresh, None)
    assert kinds(events)[0] == "REPLY_START"
    assert msg.id != old_id
    assert msg.get_text_content() == "new"
    assert [m.id for m in fresh.state.context][:2] == [m.id for m in first.state.context]


# -- 6. the saved JSON: forward compatibility ----------------------------------------------------------


async def parked_json() -> dict[str, Any]:
    agent = new_agent([calls(call("a1", "ask", x="1"))], [])
    await run(agent, user())
    data: dict[str, Any] = json.loads(dumps(agent.state))
    return data


@pytest.mark.parametrize(
    ("where", "path"),
    [
        ((), "$"),
        (("reply_context",), "$.reply_context"),
        (("permission_context",), "$.permission_context"),
        (("context", 1), "$.context[1]"),
        (("context", 1, "content", 0), "$.context[1].content[0]"),
    ],
)
async def test_an_unknown_key_is_a_serialization_error_naming_its_path(
    where: tuple[Any, ...], path: str
) -> None:
    data = await parked_json()
    target: Any = data
    for key in where:
        target = target[key]
    target["added_in_a_later_version"] = 1
    with pytest.raises(SerializationError) as info:
        loads(json.dumps(data), AgentState)
    assert f"extra fields found (added_in_a_later_version) @ {path}" in str(info.value)
    assert info.value.errors


@pytest.mark.parametrize(
    "missing",
    [
        "session_id",
        "summary",
        "reply_context.structured_schema",
        "reply_context.structured_output",
        "permission_context",
        "tool_context",
        "tasks_context",
        "middle_context",
    ],
)
async def test_a_missing_key_with_a_default_is_tolerated_and_the_park_resumes(
    missing: str,
) -> None:
    data = await parked_json()
    target = data
    *parents, key = missing.split(".")
    for parent in parents:
        target = target[parent]
    del target[key]
    state = loads(json.dumps(data), AgentState)
    log: list[str] = []
    agent = new_agent([text("ok")], log, state)
    msg, _ = await run(agent, confirm(tool_calls(agent)["a1"]))
    assert msg.get_text_content() == "ok"
    assert log == ["ask:1"]


@pytest.mark.parametrize(
    ("missing", "path"),
    [
        ("context.1.content.0.id", "$.context[1].content[0].id"),
        ("context.1.role", "$.context[1].role"),
        ("context.1.content.0.name", "$.context[1].content[0].name"),
    ],
)
async def test_a_missing_required_key_is_a_serialization_error(missing: str, path: str) -> None:
    data = await parked_json()
    target: Any = data
    *parents, key = missing.split(".")
    for parent in parents:
        target = target[int(parent)] if parent.isdigit() else target[parent]
    del target[key]
    with pytest.raises(SerializationError, match=re.escape(path)):
        loads(json.dumps(data), AgentState)


async def test_the_legacy_top_level_reply_id_and_cur_iter_still_resume() -> None:
    """As in AgentScope, a before-validator moves a legacy top-level ``reply_id`` and
    ``cur_iter`` into ``reply_context``."""
    data = await parked_json()
    reply_context = data.pop("reply_context")
    data["reply_id"] = reply_context["reply_id"]
    data["cur_iter"] = 0
    state = loads(json.dumps(data), AgentState)
    assert state.reply_id == reply_context["reply_id"]
    log: list[str] = []
    agent = new_agent([text("ok")], log, state)
    msg, events = await run(agent, confirm(tool_calls(agent)["a1"]))
    assert msg.id == reply_context["reply_id"]
    assert msg.get_text_content() == "ok"
    assert "REPLY_START" not in kinds(events)


async def test_a_bad_value_names_its_path_and_leaves_the_input_alone() -> None:
    data = await parked_json()
    data["context"][1]["content"][0]["state"] = "paused"  # no such call state
    before = json.dumps(data)
    with pytest.raises(SerializationError, match=re.escape("$.context[1].content[0].state")):
        loads(before, AgentState)
    assert json.dumps(data) == before


# -- 7. a sanity check of the helpers --------------------------------------------------------------


async def test_openai_valid_catches_an_orphan_and_a_late_result() -> None:
    tool_call = ToolCallBlock(id="c1", name="t", input="{}")
    result = ToolResultBlock(id="c1", name="t", output="r", state="success")
    await openai_valid([AssistantMsg(NAME, [tool_call, result])])
    with pytest.raises(AssertionError):
        await openai_valid([AssistantMsg(NAME, [tool_call])])
    with pytest.raises(AssertionError):
        await openai_valid(
            [AssistantMsg(NAME, [tool_call]), UserMsg("user", "hi"), AssistantMsg(NAME, [result])]
        )


# -- found by this hunt, fixed ---------------------------------------------------------------------


async def test_a_repeated_id_in_one_external_answer_is_refused() -> None:
    agent = await parked_agent([calls(call("x1", "ext", q="q")), text("ok")])
    before = dumps(agent.state)
    with pytest.raises(ValueError, match="more than one result"):
        await run(agent, answer(edge_ext_result("x1", "A"), edge_ext_result("x1", "B")))
    assert dumps(agent.state) == before
    await run(agent, answer(edge_ext_result("x1", "A")))  # the park still resumes
    assert [r.id for r in results(agent)] == ["x1"]
    await openai_valid(edge_model_of(agent).requests[-1].messages)


async def test_observe_on_a_parked_agent_is_refused_and_the_park_survives() -> None:
    agent = await parked_agent([calls(call("a1", "ask", x="1")), text("ok")])
    before = dumps(agent.state)
    with pytest.raises(ValueError, match="Agent is parked"):
        await agent.observe(user("a note from another agent"))
    assert dumps(agent.state) == before
    assert agent.state.has_awaiting_tool_calls(NAME)


async def test_a_state_saved_while_a_tool_runs_restores_to_a_valid_request(
    autojump_clock: Any,
) -> None:
    """A per-event checkpoint holds an allowed call with no result: a new reply on the
    restored state answers it INTERRUPTED first, so the request is valid."""
    agent = new_agent([calls(call("r1", "slow", delay=5.0)), text("done")], [])
    snapshots: list[str] = []

    async def checkpoint(event: Any) -> None:
        if isinstance(event, ToolResultStartEvent):
            snapshots.append(dumps(agent.state))

    await agent.reply(user(), on_event=checkpoint)
    fresh = new_agent([text("again")], [], loads(snapshots[0], AgentState))
    msg, _ = await run(fresh, user("are you there?"))
    assert msg.get_text_content() == "again"
    await openai_valid(edge_model_of(fresh).requests[-1].messages)
    [result] = [r for r in results(fresh) if r.id == "r1"]
    assert result.state == "interrupted"


async def _sunny(city: str) -> str:
    """The weather of a city."""
    return f"Sunny in {city}"


async def test_a_reply_parked_by_a_default_function_tool_logs_a_warning_saying_how_to_allow_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    toolkit = Toolkit()
    toolkit.register_function(_sunny)
    agent = make_agent([calls(call("w1", "_sunny", city="Paris")), text("ok")], toolkit)
    with caplog.at_level("WARNING", logger="trioagent.agent"):
        msg, events = await run(agent, user())
    assert msg.finished_reason is None
    assert ends(events) == []
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, caplog.records
    said = warnings[0].getMessage()
    assert warnings[0].name == "trioagent.agent"
    assert "parked" in said
    assert "_sunny (asking for the user's confirmation)" in said
    assert "permission=PermissionDecision('allow', ...)" in said
    assert "Toolkit(default_permission=...)" in said
    assert "UserConfirmResultEvent" in said
    assert "UserInterruptEvent" in said


async def test_a_new_message_to_a_parked_agent_says_the_reply_is_parked_and_how_to_go_on() -> None:
    toolkit = Toolkit()
    toolkit.register_function(_sunny)
    agent = make_agent([calls(call("w1", "_sunny", city="Paris")), text("ok")], toolkit)
    await run(agent, user())
    with pytest.raises(ValueError, match="previous one is parked") as caught:
        await agent.reply(user("again"))
    said = str(caught.value)
    assert "_sunny (asking for the user's confirmation)" in said
    assert "agent.reply(UserConfirmResultEvent" in said
    assert "agent.reply(UserInterruptEvent())" in said
    # Aborting as the error says works.
    msg, _ = await run(agent, UserInterruptEvent())
    assert msg.finished_reason == "interrupted"


async def test_an_external_call_parks_with_its_own_advice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = make_agent([calls(call("e1", "ext", x="1")), text("ok")], hitl_toolkit([]))
    with caplog.at_level("WARNING", logger="trioagent.agent"):
        await run(agent, user())
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "ext (executed externally, awaiting its result)" in said
    assert "ExternalExecutionResultEvent" in said
    assert "default_permission" not in said

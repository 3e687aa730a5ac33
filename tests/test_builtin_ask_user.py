"""``AskUser`` as in AgentScope 2.0.11: the reply parks on the question (the external-execution
path) without asking for permission, and resumes with the answer, whose metadata must have the
answers' shape; the input schema bounds the questions and options."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from agent_kit import call, calls, ends, kinds, make_agent, model_of, run, text, user

from trioagent.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
from trioagent.message import ToolCallBlock, ToolResultBlock
from trioagent.permission import PermissionContext, PermissionEngine
from trioagent.serialization import dumps
from trioagent.testing import cancel_sweep
from trioagent.tool import AskUser, AskUserAnswer, Toolkit

QUESTIONS: list[dict[str, Any]] = [
    {
        "question": "Which database?",
        "header": "Database",
        "options": [
            {"label": "Postgres (Recommended)", "description": "Relational"},
            {"label": "SQLite", "description": "A file"},
        ],
    }
]


async def test_the_reply_parks_on_the_question_and_resumes_with_the_answer() -> None:
    agent = make_agent(
        [calls(call("q1", "AskUser", questions=QUESTIONS)), text("Postgres it is")],
        Toolkit([AskUser()]),
    )
    msg, events = await run(agent, user())
    assert kinds(events)[-2:] == ["TOOL_RESULT_START", "REQUIRE_EXTERNAL_EXECUTION"]
    (request,) = [e for e in events if isinstance(e, RequireExternalExecutionEvent)]
    assert [c.name for c in request.tool_calls] == ["AskUser"]
    assert ends(events) == []  # parked, not ended
    assert "REQUIRE_USER_CONFIRM" not in kinds(events)  # no prompt about a prompt

    answer = AskUser.answer("q1", [AskUserAnswer(question="Which database?", selected=["SQLite"])])
    msg, events = await run(agent, ExternalExecutionResultEvent(execution_results=[answer]))
    assert msg.get_text_content() == "Postgres it is"
    seen = [
        b
        for m in model_of(agent).requests[1].messages
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]
    assert [(r.id, r.output) for r in seen] == [
        ("q1", 'User has answered your questions: "Which database?" = "SQLite"')
    ]
    assert seen[0].metadata == {
        "answers": [{"question": "Which database?", "selected": ["SQLite"], "other": None}]
    }


async def test_an_answer_with_the_wrong_metadata_is_rejected_and_the_reply_stays_parked() -> None:
    agent = make_agent(
        [calls(call("q1", "AskUser", questions=QUESTIONS)), text("ok")], Toolkit([AskUser()])
    )
    await run(agent, user())
    before = dumps(agent.state)
    bad = ToolResultBlock(id="q1", name="AskUser", output="SQLite", state="success", metadata={})
    with pytest.raises(jsonschema.ValidationError, match="'answers' is a required property"):
        await agent.reply(ExternalExecutionResultEvent(execution_results=[bad]))
    assert dumps(agent.state) == before
    assert agent.state.has_awaiting_tool_calls("agent")


def test_answer_summary_with_free_text() -> None:
    result = AskUser.answer(
        "q1",
        [
            AskUserAnswer(question="A?", selected=["x", "y"], other="and z"),
            AskUserAnswer(question="B?"),
        ],
    )
    assert result.output == (
        'User has answered your questions: "A?" = "x, y; and z" "B?" = "(no answer)"'
    )
    assert result.state == "success"


@pytest.mark.parametrize(
    "questions",
    [
        [],
        [{**QUESTIONS[0], "header": "Much too long a header"}],
        [{**QUESTIONS[0], "options": QUESTIONS[0]["options"][:1]}],
        [QUESTIONS[0]] * 5,
    ],
)
def test_the_schema_bounds_questions_and_options(questions: list[Any]) -> None:
    toolkit = Toolkit([AskUser()])
    with pytest.raises(Exception, match="Input validation failed for tool 'AskUser'"):
        toolkit.validate_call(
            ToolCallBlock(id="1", name="AskUser", input=json.dumps({"questions": questions}))
        )


async def test_always_allowed_even_in_dont_ask_and_explore() -> None:
    for mode in ("dont_ask", "explore", "default"):
        engine = PermissionEngine(PermissionContext(mode=mode))
        decision = await engine.check_permission(AskUser(), {"questions": QUESTIONS})
        assert decision.behavior == "allow"


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_the_reply_that_resumes_with_the_answer(mode: str) -> None:
    """Cancelled at every point of the resumed reply: one end, the question has exactly one
    result (the answer, or interrupted), and the state round-trips."""

    async def parked() -> Any:
        agent = make_agent(
            [calls(call("q1", "AskUser", questions=QUESTIONS)), text("SQLite it is")],
            Toolkit([AskUser()]),
        )
        await run(agent, user())
        return agent

    def answer() -> ExternalExecutionResultEvent:
        chosen = AskUserAnswer(question="Which database?", selected=["SQLite"])
        return ExternalExecutionResultEvent(execution_results=[AskUser.answer("q1", [chosen])])

    report = await cancel_sweep(parked, answer, mode=mode)
    assert report.runs[0].end is not None
    assert report.runs[0].end.finished_reason == "completed"
    assert report.outcomes["interrupted"] > 0

"""AGUIApp.for_pipeline over real loopback sockets (Hypercorn's trio worker per test).

A team's members stream to the client tagged with their agent path; a Stop in the middle of a
round ends every participant once, INTERRUPTED, with every tool call answered in the stored
states, and the thread continues; a member's confirmation is approved over the wire and the
team resumes; a goal loop is served the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx2
import pydantic
import pytest
from ag_ui.core import Event
from pipeline_kit import assign, call, calls, structured, text, work_toolkit
from web_kit import NO_INJECTION, check_stream, post_run, run_body, start

from trioagent.agent import Agent, AgentState
from trioagent.message import ToolCallBlock, ToolResultBlock
from trioagent.pipeline import GoalPipeline, TeamMember, TeamPipeline
from trioagent.session import SQLiteSessionStore
from trioagent.testing import ScriptedModel
from trioagent.web import AGUIApp

EVENT = pydantic.TypeAdapter(Event)
Scripts = dict[str, Iterator[Sequence[Any]]]


def _team_app(tmp_path: Path, scripts: Scripts, seconds: float = 0.0) -> AGUIApp:
    """A team ``lead`` over ``ann`` and ``ben``; each run plays the next script of each."""

    def participant(name: str, first: Any) -> Agent:
        return Agent(
            name,
            "Work.",
            ScriptedModel(list(next(scripts[name], []))),
            work_toolkit(seconds=seconds),
            middlewares=first(name),
            injection_config=NO_INJECTION,
        )

    def make_team(first: Any) -> TeamPipeline:
        members = [TeamMember(participant(n, first), f"{n} works") for n in ("ann", "ben")]
        return TeamPipeline(participant("lead", first), members)

    return AGUIApp.for_pipeline(make_team, SQLiteSessionStore(tmp_path / "threads.sqlite3"))


def _reply_ends(stream: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each participant's REPLY_END in the stream: (agent path, finished reason)."""
    return [
        ("/".join(e["value"]["metadata"]["agent_path"]), e["value"]["finished_reason"])
        for e in stream
        if e["type"] == "CUSTOM" and e["name"] == "reply_end"
    ]


async def _states(app: AGUIApp, thread: str) -> dict[str, AgentState]:
    """The stored state of each participant that replied on ``thread``."""
    out = {}
    for name in ("lead", "ann", "ben"):
        stored = await app.store.load(f"{thread}/{name}")
        if stored is not None:
            out[name] = stored.state
    return out


def _answered_once(state: AgentState) -> None:
    """Every tool call of the context has exactly one result."""
    blocks = [b for m in state.context for b in m.content]
    call_ids = [b.id for b in blocks if isinstance(b, ToolCallBlock)]
    result_ids = [b.id for b in blocks if isinstance(b, ToolResultBlock)]
    assert sorted(call_ids) == sorted(result_ids), (call_ids, result_ids)


async def test_a_team_streams_its_members_text_tagged_with_their_path(nursery, tmp_path) -> None:
    scripts: Scripts = {
        "lead": iter(
            [
                [calls(assign("1", "ann", "red?"), assign("2", "ben", "blue?")), text("3+4")],
                [calls(assign("3", "ann", "green?")), text("0")],
            ]
        ),
        "ann": iter([[text("3 red")], [text("0 green")]]),
        "ben": iter([[text("4 blue")]]),
    }
    app = _team_app(tmp_path, scripts)
    async with httpx2.AsyncClient(base_url=await start(nursery, app)) as client:
        stream = await post_run(client, run_body("t1", "how many?"))
        thread = (await client.get("/agui/threads/t1")).json()
        again = await post_run(client, run_body("t1", "and green?"))
    for event in stream:
        EVENT.validate_python(event)
    assert check_stream(stream)["outcome"] == {"type": "success"}
    starts = {e["messageId"]: e for e in stream if e["type"] == "TEXT_MESSAGE_START"}
    by_message = {}
    for e in stream:
        if e["type"] == "TEXT_MESSAGE_CONTENT":
            start_event = starts[e["messageId"]]
            assert e["metadata"] == {"agentPath": [start_event["name"]]}
            by_message[start_event["name"]] = e["delta"]
    assert by_message == {"ann": "3 red", "ben": "4 blue", "lead": "3+4"}
    assert sorted(_reply_ends(stream)[:2]) == [("ann", "completed"), ("ben", "completed")]
    assert _reply_ends(stream)[2:] == [("lead", "completed")]
    # The thread is the leader's conversation; each participant has its own record.
    assert thread["messages"][0]["role"] == "user"
    assert thread["messages"][-1]["content"] == "3+4"
    assert thread["interrupts"] == []
    assert sorted(await app.store.list()) == ["t1/ann", "t1/ben", "t1/lead"]
    # The next leader reply starts with fresh members (reset_members), as in one process.
    assert check_stream(again)["outcome"] == {"type": "success"}
    ann = (await _states(app, "t1"))["ann"]
    assert [m.get_text_content() for m in ann.context] == ["green?", "0 green"]


async def test_stop_mid_round_ends_every_participant_once_and_the_thread_continues(
    nursery, tmp_path
) -> None:
    scripts: Scripts = {
        "lead": iter([[calls(assign("1", "ann", "a"), assign("2", "ben", "b"))], [text("again")]]),
        "ann": iter([[calls(call("wa", "work", task="a"))]]),
        "ben": iter([[calls(call("wb", "work", task="b"))]]),
    }
    app = _team_app(tmp_path, scripts, seconds=60.0)  # members work until stopped
    seen: list[dict[str, Any]] = []
    async with httpx2.AsyncClient(base_url=await start(nursery, app)) as client:
        async with client.stream("POST", "/agui", content=run_body("t1", "go")) as response:
            stopped = False
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    seen.append(EVENT.validate_json(line[6:]).model_dump(by_alias=True))
                working = {e["toolCallId"] for e in seen if e["type"] == "TOOL_CALL_END"}
                if not stopped and {"wa", "wb"} <= working:
                    # Both members are inside their `work` call: stop the whole team.
                    answer = await client.post("/agui/stop", json={"threadId": "t1"})
                    assert answer.json()["stopped"] is True
                    stopped = True
        seen = [{k: v for k, v in e.items() if v is not None} for e in seen]
        assert check_stream(seen)["outcome"] == {"type": "cancelled"}
        ends = _reply_ends(seen)
        assert sorted(ends[:2]) == [("ann", "interrupted"), ("ben", "interrupted")]
        assert ends[2:] == [("lead", "interrupted")]  # exactly one each, the leader last
        states = await _states(app, "t1")
        assert sorted(states) == ["ann", "ben", "lead"]
        for state in states.values():
            _answered_once(state)
        second = await post_run(client, run_body("t1", "once more"))
        thread = (await client.get("/agui/threads/t1")).json()
    assert check_stream(second)["outcome"] == {"type": "success"}
    assert thread["messages"][-1]["content"] == "again"
    assert [m["content"] for m in thread["messages"] if m["role"] == "user"] == ["go", "once more"]


async def test_a_members_confirmation_approved_over_the_wire_resumes_the_team(
    nursery, tmp_path
) -> None:
    scripts: Scripts = {
        "lead": iter([[calls(assign("1", "ann", "ship it"))], [text("ann shipped")]]),
        "ann": iter([[calls(call("p1", "approve", what="ship"))], [text("shipped")]]),
        "ben": iter([]),
    }
    app = _team_app(tmp_path, scripts)
    async with httpx2.AsyncClient(base_url=await start(nursery, app)) as client:
        first = await post_run(client, run_body("t1", "ship"))
        end = check_stream(first)
        assert end["outcome"]["type"] == "interrupt"
        (interrupt,) = end["outcome"]["interrupts"]
        assert (interrupt["id"], interrupt["reason"]) == ("p1", "tool_confirmation")
        asks = [e for e in first if e["type"] == "CUSTOM" and e["name"] == "require_user_confirm"]
        assert [e["metadata"] for e in asks] == [{"agentPath": ["ann"]}]
        # A reload sees the member's waiting call.
        thread = (await client.get("/agui/threads/t1")).json()
        assert [i["id"] for i in thread["interrupts"]] == ["p1"]
        approve = [{"interruptId": "p1", "status": "resolved", "payload": {"approved": True}}]
        second = await post_run(client, run_body("t1", resume=approve))
    assert check_stream(second)["outcome"] == {"type": "success"}
    # The member's approved call ran, then its answer became the leader's assignment result.
    results = {e["toolCallId"]: e for e in second if e["type"] == "TOOL_CALL_RESULT"}
    assert [(k, r["content"], r["metadata"]) for k, r in results.items()] == [
        ("p1", "approved ship", {"agentPath": ["ann"]}),
        ("1", "shipped", {"agentPath": ["lead"]}),
    ]
    assert _reply_ends(second) == [("ann", "completed"), ("lead", "completed")]
    states = await _states(app, "t1")
    assert sorted(states) == ["ann", "lead"]  # ben had nothing to do
    assert states["lead"].context[-1].get_text_content() == "ann shipped"
    for state in states.values():
        _answered_once(state)


async def test_a_pipeline_factory_must_give_every_participant_its_middlewares(tmp_path) -> None:
    def make_team(first: Any) -> TeamPipeline:
        first("lead")
        lead = Agent("lead", "Lead.", ScriptedModel([]))  # without first("lead")
        ann = Agent("ann", "Work.", ScriptedModel([]), middlewares=first("ann"))
        return TeamPipeline(lead, [TeamMember(ann, "works")])

    app = AGUIApp.for_pipeline(make_team, SQLiteSessionStore(tmp_path / "t.sqlite3"))
    with pytest.raises(TypeError, match=r"first\(name\) first in its middlewares"):
        await app._served("t1")


async def test_a_goal_loop_is_served_too(nursery, tmp_path) -> None:
    def make_goal(first: Any) -> GoalPipeline:
        maker = Agent(
            "maker",
            "Work.",
            ScriptedModel([structured("r", report="poem.txt written")]),
            middlewares=first("maker"),
            injection_config=NO_INJECTION,
        )
        judge = Agent(
            "judge",
            "Check.",
            ScriptedModel([structured("v", result="pass", message="")]),
            middlewares=first("judge"),
            injection_config=NO_INJECTION,
        )
        return GoalPipeline(maker, judge)

    store = SQLiteSessionStore(tmp_path / "goals.sqlite3")
    app = AGUIApp.for_pipeline(make_goal, store)
    async with httpx2.AsyncClient(base_url=await start(nursery, app)) as client:
        stream = await post_run(client, run_body("g1", "write poem.txt"))
        thread = (await client.get("/agui/threads/g1")).json()
    assert check_stream(stream)["outcome"] == {"type": "success"}
    assert _reply_ends(stream) == [("maker", "completed"), ("judge", "completed")]
    assert sorted(await store.list()) == ["g1/judge", "g1/maker"]
    assert thread["messages"][0]["content"].startswith("write poem.txt")

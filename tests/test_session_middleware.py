"""``SessionMiddleware`` with real stores: a conversation continues in a new agent, a parked
reply resumes in another process (SQLite and Redis), a process killed with SIGKILL mid-reply
leaves a state that continues, concurrent agents on one session conflict without losing
anything, and a reply cancelled at any schedule point leaves a saved state that loads and is
consistent."""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
from agent_kit import call, calls, confirm, make_agent, model_of, text, tool_calls, user
from session_kit import redis_server, run_worker, start_worker, unique

from trioagent.agent import Agent, AgentState
from trioagent.event import ReplyEndEvent
from trioagent.message import ToolResultBlock, ToolResultState, UserMsg
from trioagent.middleware import MiddlewareBase
from trioagent.permission import PermissionDecision
from trioagent.serialization import dumps
from trioagent.session import (
    RedisSessionStore,
    SessionConflictError,
    SessionCorruptError,
    SessionMiddleware,
    SessionStore,
    SQLiteSessionStore,
)
from trioagent.testing import SweepRun, cancel_sweep, check_reply_rules
from trioagent.tool import Toolkit
from trioagent.types import ReplyFinishedReason


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


def toolkit(log: list[str]) -> Toolkit:
    kit = Toolkit()

    async def ask(x: str) -> str:
        """Needs confirmation."""
        log.append(f"ask:{x}")
        return f"ask:{x}"

    async def look(x: str) -> str:
        """Allowed."""
        await trio.sleep(0)
        log.append(f"look:{x}")
        return f"look:{x}"

    kit.register_function(ask)
    kit.register_function(look, permission=PermissionDecision(behavior="allow", message="ok"))
    return kit


def session_agent(
    steps: list[Any],
    store: SessionStore,
    session: str,
    log: list[str] | None = None,
    *,
    inner: Sequence[MiddlewareBase] = (),
    **kw: Any,
) -> Agent:
    return make_agent(
        steps,
        toolkit(log if log is not None else []),
        middlewares=[SessionMiddleware(store, session, **kw), *inner],
    )


class Rendezvous(MiddlewareBase):
    """Holds each reply, after the session layer restored it, until ``parties`` replies have
    been restored: both replies start from the same stored version, whatever the threads do."""

    def __init__(self, parties: int) -> None:
        self.waiting = parties
        self.all_here = trio.Event()

    async def on_reply(self, agent: Any, input_kwargs: Any, next_handler: Any, emit: Any) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.all_here.set()
        await self.all_here.wait()
        await next_handler()


def results_by_call(state: AgentState) -> dict[str, int]:
    counts: dict[str, int] = {}
    for msg in state.context:
        for block in msg.content:
            if isinstance(block, ToolResultBlock):
                counts[block.id] = counts.get(block.id, 0) + 1
    return counts


# -- in one process --------------------------------------------------------------------------------


async def test_a_conversation_continues_in_a_new_agent(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.sqlite3")
    first = session_agent([text("hello")], store, "conv", checkpoints=False)
    await first.reply(user("hi"))
    stored = await store.load("conv")
    assert stored is not None
    assert stored.version == 1  # one save: at the end (no checkpoints)
    assert dumps(stored.state) == dumps(first.state)
    assert stored.state.session_id == "conv"

    second = session_agent([text("again")], store, "conv")
    msg = await second.reply(user("more"))
    assert msg.get_text_content() == "again"
    request = model_of(second).requests[0]
    said = [m.get_text_content() for m in request.messages]
    assert said == ["hi", "hello", "more"]  # the stored conversation reached the model
    assert (await store.version("conv")) == 4  # before and after reasoning, and at the end


async def test_a_damaged_session_fails_the_reply_and_stays_as_it_was(tmp_path: Path) -> None:
    """A stored version that is not a number: the reply raises a typed error naming the
    session, the model is never called, and nothing is written over the stored conversation."""
    path = tmp_path / "s.sqlite3"
    store = SQLiteSessionStore(path)
    await session_agent([text("hello")], store, "conv").reply(user("hi"))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE sessions SET version = 'seven'")
        before = conn.execute("SELECT * FROM sessions").fetchall()
    agent = session_agent([text("again")], store, "conv")
    with pytest.raises(SessionCorruptError, match="session 'conv'"):
        await agent.reply(user("more"))
    assert model_of(agent).requests == []
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT * FROM sessions").fetchall() == before


async def test_a_parked_reply_is_saved_and_resumes_in_a_new_agent(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.sqlite3")
    log: list[str] = []
    first = session_agent([calls(call("a1", "ask", x="1"))], store, "p", log)
    await first.reply(user())
    assert first.state.has_awaiting_tool_calls("agent")
    second = session_agent([text("done")], store, "p", log)
    middleware = second.middlewares[0]
    assert isinstance(middleware, SessionMiddleware)
    assert await middleware.restore(second) is True
    assert await middleware.restore(second) is False  # already up to date
    msg = await second.reply(confirm(tool_calls(second)["a1"]))
    assert msg.get_text_content() == "done"
    assert log == ["ask:1"]
    stored = await store.load("p")
    assert stored is not None
    assert dumps(stored.state) == dumps(second.state)


async def test_observed_messages_are_kept_and_a_newer_save_elsewhere_wins(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.sqlite3")
    agent = session_agent([text("one"), text("two"), text("three")], store, "o")
    await agent.reply(user("a"))
    await agent.observe(UserMsg("user", "observed"))
    await agent.reply(user("b"))  # the store has our version: the observed message stays
    said = [m.get_text_content() for m in model_of(agent).requests[1].messages]
    assert "observed" in said
    # Another worker saves a newer state; our next reply starts from it.
    other = session_agent([text("elsewhere")], store, "o")
    await other.reply(user("c"))
    await agent.reply(user("d"))
    said = [m.get_text_content() for m in model_of(agent).requests[2].messages]
    assert said[-3:] == ["c", "elsewhere", "d"]


async def test_the_agent_session_id_is_the_default_name(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.sqlite3")
    agent = make_agent([text("x")], middlewares=[SessionMiddleware(store)])
    await agent.reply(user())
    assert await store.list() == [agent.state.session_id]
    with pytest.raises(TypeError, match="SessionStore"):
        SessionMiddleware(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="session_id"):
        SessionMiddleware(store, "")


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_two_agents_on_one_session_one_save_wins_nothing_lost(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async def both(store: SessionStore) -> None:
        gate = trio.Event()
        log: list[str] = []
        both_restored = Rendezvous(2)
        a, b = (
            session_agent(
                [calls(call(f"l{n}", "look", x=name)), text(f"{name} done")],
                store,
                "c",
                log,
                inner=[both_restored],
            )
            for n, name in ((1, "a"), (2, "b"))
        )
        outcome: dict[str, object] = {}
        ends: dict[str, list[ReplyEndEvent]] = {"a": [], "b": []}

        async def run(name: str, agent: Agent) -> None:
            async def record(event: Any) -> None:
                if isinstance(event, ReplyEndEvent):
                    ends[name].append(event)

            await gate.wait()
            try:
                outcome[name] = await agent.reply(user(name), on_event=record)
            except SessionConflictError as exc:
                outcome[name] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "a", a)
            nursery.start_soon(run, "b", b)
            gate.set()
        conflicts = [o for o in outcome.values() if isinstance(o, SessionConflictError)]
        assert len(conflicts) == 1, outcome
        winner = a if not isinstance(outcome["a"], SessionConflictError) else b
        loser = "b" if winner is a else "a"
        assert [e.finished_reason for e in ends[loser]] == [ReplyFinishedReason.ERROR]
        assert [e.finished_reason for e in ends["a" if loser == "b" else "b"]] == [
            ReplyFinishedReason.COMPLETED
        ]
        stored = await store.load("c")
        assert stored is not None
        assert dumps(stored.state) == dumps(winner.state)  # the winner's reply, whole
        assert check_reply_rules(stored.state, "agent", []) is None

    if kind == "sqlite":
        await both(SQLiteSessionStore(tmp_path / "s.sqlite3"))
    else:
        url = request.getfixturevalue("redis_url")
        async with RedisSessionStore(url, namespace=unique()) as store:
            await both(store)


class EndWitness(MiddlewareBase):
    """Outside the session middleware: when an end event passes, is it saved already?"""

    def __init__(self, store: SessionStore, seen: dict[str, bool]) -> None:
        self.store = store
        self.seen = seen

    async def on_reply(self, agent: Any, input_kwargs: Any, next_handler: Any, emit: Any) -> None:
        async def sink(item: Any) -> None:
            if isinstance(item, ReplyEndEvent):
                key = agent.state.session_id
                stored = await self.store.load(key)
                self.seen[key] = stored is not None and dumps(stored.state) == dumps(agent.state)
            await emit(item)

        await next_handler(sink)


SWEPT = {
    "tools": [calls(call("l1", "look", x="1"), call("l2", "look", x="2")), text("done")],
    "park": [calls(call("l1", "look", x="1"), call("a1", "ask", x="2"))],
}


@pytest.mark.parametrize("script", sorted(SWEPT))
async def test_cancelled_at_every_point_the_saved_state_loads_and_is_consistent(
    script: str, tmp_path: Path
) -> None:
    """Real clock: the store's worker thread is real work (an autojump clock would skip the
    deadlines of the cleanup while it runs)."""
    store = SQLiteSessionStore(tmp_path / "s.sqlite3")
    made: list[str] = []
    saved_at_end: dict[str, bool] = {}

    def make() -> Agent:
        made.append(f"run-{len(made)}")
        middlewares = [EndWitness(store, saved_at_end), SessionMiddleware(store, made[-1])]
        return make_agent(list(SWEPT[script]), toolkit([]), middlewares=middlewares)

    checked: list[SweepRun] = []
    for mode in ("interrupt", "outer"):
        report = await cancel_sweep(make, lambda: user(), mode=mode, check=checked.append)
        assert report.points > 20
    for run in checked:
        key = run.agent.state.session_id
        stored = await store.load(key)
        assert stored is not None, key
        assert dumps(stored.state) == dumps(run.agent.state), key
        check_reply_rules(stored.state, "agent", run.events, where=key)
        assert all(n == 1 for n in results_by_call(stored.state).values())
    # Every end event reached the consumer after its save (the parking reply has ends only
    # when a cancellation interrupted it before it parked).
    assert saved_at_end
    assert all(saved_at_end.values()), [k for k, v in saved_at_end.items() if not v]
    if script == "park":
        assert any(run.agent.state.has_awaiting_tool_calls("agent") for run in checked)


# -- across processes ------------------------------------------------------------------------------


def store_spec(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:{tmp_path / 'shared.sqlite3'}"
    return f"redis:{request.getfixturevalue('redis_url')}"


async def open_store(spec: str) -> Any:
    kind, _, where = spec.partition(":")
    return SQLiteSessionStore(where) if kind == "sqlite" else RedisSessionStore(where)


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_a_parked_reply_resumes_in_another_process(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    spec = store_spec(kind, tmp_path, request)
    session = unique("conv")
    ledger = tmp_path / "ledger.txt"
    parked = await trio.to_thread.run_sync(run_worker, spec, session, "park", str(ledger))
    assert "parked ['call-transfer'] None" in parked.stdout
    assert not ledger.exists()  # process A only asked
    resumed = await trio.to_thread.run_sync(run_worker, spec, session, "resume", str(ledger))
    assert "resumed paid completed" in resumed.stdout
    assert ledger.read_text() == "transfer 5\n"  # the tool ran once, in process B
    async with await open_store(spec) as store:
        stored = await store.load(session)
    assert stored is not None
    (result,) = [
        b for m in stored.state.context for b in m.content if isinstance(b, ToolResultBlock)
    ]
    assert (result.id, result.state) == ("call-transfer", ToolResultState.SUCCESS)
    assert not stored.state.has_awaiting_tool_calls("agent")


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_a_process_killed_mid_reply_leaves_a_state_that_continues(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    spec = store_spec(kind, tmp_path, request)
    session = unique("conv")
    proc = start_worker(spec, session, "hang", str(tmp_path / "ledger.txt"))
    try:
        assert proc.stdout is not None
        line = await trio.to_thread.run_sync(proc.stdout.readline)
        assert line == "tool started\n", proc.stderr.read() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
        await trio.to_thread.run_sync(proc.wait)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert proc.returncode == -signal.SIGKILL
    async with await open_store(spec) as store:
        stored = await store.load(session)
        assert stored is not None
        # The last checkpoint: the model's call, still without its result.
        assert stored.state.get_unfinished_tool_calls("agent")[0].id == "call-slow"
        agent = session_agent([text("back again")], store, session)
        msg = await agent.reply(user("are you there?"))
        assert msg.finished_reason == ReplyFinishedReason.COMPLETED
        sent = model_of(agent).requests[0].messages
        results = [b for m in sent for b in m.content if isinstance(b, ToolResultBlock)]
        assert [(r.id, r.state) for r in results] == [("call-slow", ToolResultState.INTERRUPTED)]
        stored = await store.load(session)
    assert stored is not None
    assert results_by_call(stored.state) == {"call-slow": 1}

"""Mem0Middleware over a fake async mem0 client, and Mem0PlatformClient against a loopback
route: the memory search and write-back around a reply, the memory tools, the hosted
platform's wire shape, and the edge cases (odd answers, transport failures, interruptions
during HTTP calls, keys never shown)."""

from __future__ import annotations

import functools
import json
import logging
from functools import partial
from typing import Any

import httpx2
import pytest
import trio
import trio.testing
from agent_helpers import Recorder, make_agent, user

from trioagent.agent import Agent
from trioagent.event import (
    ConfirmResult,
    ExternalExecutionResultEvent,
    ReplyEndEvent,
    UserConfirmResultEvent,
)
from trioagent.memory import extract_memory_texts, extract_query_text, mem0_extracted_anything
from trioagent.message import (
    AssistantMsg,
    HintBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
    UserMsg,
)
from trioagent.middleware import (
    Mem0APIError,
    Mem0Middleware,
    Mem0PlatformClient,
)
from trioagent.middleware._mem0 import DEFAULT_TOOL_INSTRUCTIONS
from trioagent.model import ChatResponse
from trioagent.permission import PermissionBehavior, PermissionContext, PermissionDecision
from trioagent.testing import (
    CancelMode,
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedModel,
    ScriptedResponse,
    SweepRun,
    cancel_sweep,
    serve_openai_compatible,
)
from trioagent.tool import Toolkit
from trioagent.types import ReplyFinishedReason

BASE_PROMPT = "You are a helpful assistant."


def text(value: str) -> ChatResponse:
    return ChatResponse(content=[TextBlock(text=value)])


def tool_call(name: str, call_id: str = "call-1", **arguments: Any) -> ChatResponse:
    return ChatResponse(content=[ToolCallBlock(id=call_id, name=name, input=json.dumps(arguments))])


class FakeMem0:
    """An async mem0 client: records every call; answers from scripts."""

    def __init__(
        self,
        memories: Any = None,
        *,
        add_results: list[Any] | None = None,
        search_error: Exception | None = None,
        add_error: Exception | None = None,
        delay: float = 0.0,
        add_delay: float | None = None,
    ) -> None:
        self.memories = memories if memories is not None else {"results": []}
        self.add_results = list(add_results or [])
        self.search_error = search_error
        self.add_error = add_error
        self.delay = delay
        self.add_delay = delay if add_delay is None else add_delay
        self.searches: list[tuple[str, dict[str, Any]]] = []
        self.adds: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
        self.adds_done = 0
        self.searches_done = 0

    async def _pause(self, delay: float) -> None:
        if delay:
            await trio.sleep(delay)
        else:
            await trio.lowlevel.checkpoint()

    async def search(self, query: str, **kwargs: Any) -> Any:
        self.searches.append((query, kwargs))
        await self._pause(self.delay)
        if self.search_error is not None:
            raise self.search_error
        self.searches_done += 1
        return self.memories(query) if callable(self.memories) else self.memories

    async def add(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        self.adds.append((messages, kwargs))
        await self._pause(self.add_delay)
        if self.add_error is not None:
            raise self.add_error
        self.adds_done += 1
        return self.add_results.pop(0) if self.add_results else {"results": [{"id": "m1"}]}


async def build(
    client: Any,
    steps: list[Any],
    *,
    mode: str = "static_control",
    tools: bool = False,
    **kwargs: Any,
) -> tuple[Agent, ScriptedModel, Mem0Middleware]:
    """An agent with the middleware; ``tools``: its tools in the toolkit, as a caller does."""
    kwargs.setdefault("agent_id", "agent_under_test")
    mw = Mem0Middleware(user_id="alice", client=client, mode=mode, **kwargs)  # type: ignore[arg-type]
    toolkit = Toolkit(tools=await mw.list_tools()) if tools else None
    agent, model = make_agent(steps, toolkit=toolkit, middlewares=[mw])
    return agent, model, mw


def memory_msgs(agent: Agent) -> list[Msg]:
    return [m for m in agent.state.context if m.name == "memory"]


def result_texts(agent: Agent) -> list[tuple[str, str]]:
    return [
        (str(b.state), b.output_text())
        for m in agent.state.context
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]


# -- helpers --------------------------------------------------------------------------------------


def test_query_extraction() -> None:
    assert extract_query_text(None) is None
    assert extract_query_text([]) is None
    assert extract_query_text(UserMsg("u", "hello")) == "hello"
    assert extract_query_text([UserMsg("u", "first"), UserMsg("u", "second")]) == "first\nsecond"
    assert extract_query_text([AssistantMsg("a", "not me"), UserMsg("u", "me")]) == "me"
    assert extract_query_text(UserMsg("u", [])) is None
    assert extract_query_text(UserConfirmResultEvent(confirm_results=[])) is None
    assert extract_query_text(ExternalExecutionResultEvent(execution_results=[])) is None


def test_search_result_flattening() -> None:
    assert extract_memory_texts({"results": [{"memory": "a"}, {"text": "b"}, {"x": 1}]}) == [
        "a",
        "b",
    ]
    assert extract_memory_texts([{"memory": "a"}, {"memory": ""}]) == ["a"]
    assert extract_memory_texts(["a", "b"]) == ["a", "b"]
    assert extract_memory_texts({"results": ["s"]}) == ["s"]
    assert extract_memory_texts(None) == []
    assert extract_memory_texts("garbage") == []
    assert extract_memory_texts({"results": "garbage"}) == []
    assert mem0_extracted_anything({"results": [{"id": 1}]})
    assert not mem0_extracted_anything({"results": []})
    assert not mem0_extracted_anything([{"id": 1}])


# -- construction ---------------------------------------------------------------------------------


@pytest.mark.parametrize("user_id", [None, "", "   "])
def test_blank_user_id_is_rejected_first(user_id: Any) -> None:
    with pytest.raises(ValueError, match="non-empty `user_id`"):
        Mem0Middleware(user_id=user_id, mode="bogus")  # type: ignore[arg-type]


def test_unknown_mode_is_rejected_before_the_client() -> None:
    with pytest.raises(ValueError, match="Unknown mode 'bogus'"):
        Mem0Middleware(user_id="alice", mode="bogus")  # type: ignore[arg-type]


def test_no_backend_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEM0_API_KEY", raising=False)
    with pytest.raises(ValueError, match="client") as info:
        Mem0Middleware(user_id="alice")
    assert "mem0_config" in str(info.value)
    assert "chat_model" in str(info.value)


def test_one_model_without_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEM0_API_KEY", raising=False)
    with pytest.raises(ValueError, match="must be passed together"):
        Mem0Middleware(user_id="alice", chat_model=object())
    with pytest.raises(ValueError, match="must be passed together"):
        Mem0Middleware(user_id="alice", embedding_model=object())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"chat_model": object(), "embedding_model": object()},
        {"mem0_config": {"vector_store": {}}},
        {"mem0_config": {}, "chat_model": object()},
    ],
)
def test_building_oss_mem0_is_not_available(kwargs: dict[str, Any]) -> None:
    with pytest.raises(NotImplementedError, match="Pass `client=` instead"):
        Mem0Middleware(user_id="alice", **kwargs)


def test_a_client_wins_and_ignored_kwargs_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    client = FakeMem0()
    with caplog.at_level(logging.WARNING, logger="trioagent.middleware"):
        mw = Mem0Middleware(user_id="alice", client=client)
    assert caplog.records == []
    assert mw.client is client
    with caplog.at_level(logging.WARNING, logger="trioagent.middleware"):
        Mem0Middleware(user_id="alice", client=client, chat_model=object(), mem0_config={})
    [record] = caplog.records
    assert record.name == "trioagent.middleware"
    assert "chat_model, mem0_config are ignored" in record.getMessage()


def test_sync_clients_are_rejected_and_wrapped_async_accepted() -> None:
    class SyncClient:
        def search(self, query: str, **kwargs: Any) -> Any:
            return []

        def add(self, messages: Any, **kwargs: Any) -> Any:
            return {}

    with pytest.raises(TypeError, match="async mem0 client"):
        Mem0Middleware(user_id="alice", client=SyncClient())

    class HalfAsync(FakeMem0):
        def add(self, messages: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return {}

    with pytest.raises(TypeError):
        Mem0Middleware(user_id="alice", client=HalfAsync())

    def handler(func: Any) -> Any:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return func(*args, **kwargs)  # returns the coroutine

        return wrapper

    class Wrapped(FakeMem0):
        search = handler(FakeMem0.search)
        add = handler(FakeMem0.add)

    Mem0Middleware(user_id="alice", client=Wrapped())


async def test_hosted_platform_is_the_default_with_an_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEM0_API_KEY", "m0-secret-key")
    mw = Mem0Middleware(user_id="alice")
    assert isinstance(mw.client, Mem0PlatformClient)
    assert "m0-secret-key" not in repr(mw.client)
    mw.client.http_client  # noqa: B018 - create the client the middleware owns
    await mw.aclose()
    assert mw.client._http_client is None


# -- static_control -------------------------------------------------------------------------------


async def test_static_control_searches_injects_and_writes_back() -> None:
    client = FakeMem0({"results": [{"memory": "Alice is vegetarian"}]})
    agent, model, mw = await build(client, [text("Try a lentil curry.")])
    msg = await agent.reply(user("What should I cook tonight?"))
    assert msg.get_text_content() == "Try a lentil curry."

    assert client.searches == [
        (
            "What should I cook tonight?",
            {"filters": {"user_id": "alice", "agent_id": "agent_under_test"}, "top_k": 5},
        )
    ]
    assert client.adds == [
        (
            [
                {"role": "user", "content": "What should I cook tonight?"},
                {"role": "assistant", "content": "Try a lentil curry."},
            ],
            {"user_id": "alice", "agent_id": "agent_under_test"},
        )
    ]
    [memory] = memory_msgs(agent)
    assert memory.role == "assistant"
    [hint] = memory.content
    assert isinstance(hint, HintBlock)
    assert hint.hint == (
        "## Relevant memories from past conversations\nThe following memories about the user "
        "may be relevant. Use them only if they are pertinent to the current request.\n"
        "- Alice is vegetarian"
    )
    names = [m.name for m in agent.state.context]
    assert names.index("user") < names.index("memory") < names.index("assistant")
    # The model saw the memory, and an unchanged system prompt, and no memory tools.
    request = model.requests[0]
    assert request.messages[0].get_text_content() == BASE_PROMPT
    assert any(m.name == "memory" for m in request.messages)
    assert await mw.list_tools() == []
    assert agent.toolkit.get_tool_schemas() == []


async def test_static_control_with_no_memories_injects_nothing() -> None:
    client = FakeMem0({"results": []})
    agent, _, _ = await build(client, [text("hi")])
    await agent.reply(user("hello"))
    assert memory_msgs(agent) == []
    assert len(client.searches) == 1
    assert len(client.adds) == 1


async def test_a_failing_search_keeps_the_reply_and_the_write(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = FakeMem0(search_error=RuntimeError("mem0 is down"))
    agent, _, _ = await build(client, [text("fine")])
    with caplog.at_level(logging.WARNING, logger="trioagent.middleware"):
        msg = await agent.reply(user("hello"))
    assert msg.get_text_content() == "fine"
    assert memory_msgs(agent) == []
    assert len(client.adds) == 1
    assert "mem0 is down" in caplog.text


async def test_a_failing_write_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    client = FakeMem0(add_error=RuntimeError("write refused"))
    agent, _, _ = await build(client, [text("fine")])
    with caplog.at_level(logging.WARNING, logger="trioagent.middleware"):
        msg = await agent.reply(user("hello"))
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert "write refused" in caplog.text


async def test_unscoped_search_still_tags_the_write_and_threshold_is_passed() -> None:
    client = FakeMem0()
    agent, _, _ = await build(
        client, [text("ok")], scope_search_by_agent=False, threshold=0.4, top_k=2
    )
    await agent.reply(user("q"))
    assert client.searches == [
        ("q", {"filters": {"user_id": "alice"}, "top_k": 2, "threshold": 0.4})
    ]
    assert client.adds[0][1] == {"user_id": "alice", "agent_id": "agent_under_test"}


async def test_without_agent_id_nothing_is_scoped_by_agent() -> None:
    client = FakeMem0()
    agent, _, _ = await build(client, [text("ok")], agent_id=None)
    await agent.reply(user("q"))
    assert client.searches[0][1]["filters"] == {"user_id": "alice"}
    assert client.adds[0][1] == {"user_id": "alice"}


async def test_event_inputs_and_a_parked_reply_are_not_written() -> None:
    client = FakeMem0({"results": ["m"]})
    toolkit = Toolkit()

    async def risky() -> str:
        """A tool that needs confirmation."""
        return "done"

    toolkit.register_function(
        risky, permission=PermissionDecision(behavior=PermissionBehavior.ASK, message="sure?")
    )
    mw = Mem0Middleware(user_id="alice", client=client, mode="static_control")
    agent, _ = make_agent([tool_call("risky"), text("all done")], toolkit=toolkit, middlewares=[mw])
    parked = await agent.reply(user("do it"))
    assert parked.finished_reason is None  # parked, waiting for the confirmation
    assert client.adds == []  # AgentScope writes the "waiting" text; here nothing
    [call] = [b for m in agent.state.context for b in m.content if isinstance(b, ToolCallBlock)]
    done = await agent.reply(
        UserConfirmResultEvent(confirm_results=[ConfirmResult(confirmed=True, tool_call=call)])
    )
    assert done.get_text_content() == "all done"
    assert len(client.searches) == 1  # the resumption has no user text
    assert client.adds == []


async def test_interrupt_during_the_search_ends_the_started_reply_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = FakeMem0({"results": ["m"]}, delay=60.0)
    agent, model, _ = await build(client, [text("never")])
    rec = Recorder()

    async def interrupt_later() -> None:
        await trio.sleep(1)
        agent.interrupt()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt_later)
        msg = await agent.reply(user("hello"), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert rec.types == ["REPLY_START", "REPLY_END"]
    assert [str(e.finished_reason) for e in rec.ends] == ["interrupted"]
    assert model.requests == []
    assert client.adds == []
    assert memory_msgs(agent) == []


async def test_outer_cancellation_during_the_search_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = FakeMem0({"results": ["m"]}, delay=60.0)
    agent, _, _ = await build(client, [text("never")])
    rec = Recorder()
    with trio.move_on_after(1) as scope:
        await agent.reply(user("hello"), on_event=rec)
    assert scope.cancelled_caught
    assert rec.types == ["REPLY_START", "REPLY_END"]
    assert isinstance(rec.events[-1], ReplyEndEvent)
    assert rec.events[-1].finished_reason == "interrupted"


# -- await_write=False ----------------------------------------------------------------------------


async def test_unawaited_write_runs_in_the_supervision_nursery(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = FakeMem0(add_delay=10.0)
    agent, _, _ = await build(client, [text("one"), text("two")], await_write=False)
    async with agent:
        start = trio.current_time()
        await agent.reply(user("first"))
        await trio.testing.wait_all_tasks_blocked()
        assert trio.current_time() - start < 10  # the reply did not wait for the write
        assert len(client.adds) == 1
        assert client.adds_done == 0
        await trio.sleep(11)
        assert client.adds_done == 1
        await agent.reply(user("second"))
        await trio.testing.wait_all_tasks_blocked()
        assert len(client.adds) == 2
    # Leaving `async with agent:` cancelled the write still running.
    assert len(client.adds) == 2
    assert client.adds_done == 1


async def test_unawaited_write_outside_the_supervision_scope_is_awaited(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = FakeMem0(add_delay=10.0)
    agent, _, _ = await build(client, [text("one")], await_write=False)
    await agent.reply(user("first"))
    assert client.adds_done == 1


# -- agent_control ------------------------------------------------------------------------------


async def test_agent_control_exposes_tools_and_never_searches_by_itself() -> None:
    client = FakeMem0({"results": ["m"]})
    agent, model, mw = await build(client, [text("hello")], mode="agent_control", tools=True)
    await agent.reply(user("hi"))
    assert client.searches == []
    assert client.adds == []
    assert memory_msgs(agent) == []
    names = [t.name for t in await mw.list_tools()]
    assert names == ["search_memory", "add_memory"]
    assert [t.name for t in agent.toolkit.tool_groups[0].tools] == names
    assert agent.toolkit.tool_groups[0].name == "basic"
    prompt = model.requests[0].messages[0].get_text_content() or ""
    assert prompt == f"{BASE_PROMPT}\n\n{DEFAULT_TOOL_INSTRUCTIONS}"
    assert "Long-term memory" in prompt
    assert "search_memory" in prompt
    assert "add_memory" in prompt


async def test_the_middleware_alone_never_touches_a_toolkit() -> None:
    toolkit = Toolkit()
    mw = Mem0Middleware(user_id="alice", client=FakeMem0(), mode="both")
    agent, _ = make_agent([text("x")], toolkit=toolkit, middlewares=[mw])
    await agent.reply(user("hi"))
    assert toolkit.get_tool_schemas() == []


async def test_search_tool_searches_each_keyword_with_the_limit() -> None:
    def memories(query: str) -> Any:
        return {"results": [{"memory": f"{query}-fact"}, {"memory": "shared"}]}

    client = FakeMem0(memories)
    agent, _, mw = await build(
        client,
        [tool_call("search_memory", keywords=["q1", "q2"], limit=3), text("ok")],
        mode="agent_control",
        tools=True,
    )
    await agent.reply(user("recall"))
    filters = {"user_id": "alice", "agent_id": "agent_under_test"}
    assert sorted(client.searches, key=lambda s: s[0]) == [
        ("q1", {"filters": filters, "top_k": 3}),
        ("q2", {"filters": filters, "top_k": 3}),
    ]
    assert mw.memory.top_k == 5
    assert result_texts(agent) == [("success", "- q1-fact\n- shared\n- q2-fact")]


async def test_search_tool_edge_cases() -> None:
    mw = Mem0Middleware(user_id="alice", client=FakeMem0(), mode="agent_control")
    search, _ = await mw.list_tools()
    empty = await search(keywords=[])
    assert empty.text() == "(no keywords supplied — nothing to search)"
    none = await search(keywords=["x"])
    assert none.text() == "(no relevant memories found)"
    failing = Mem0Middleware(
        user_id="alice", client=FakeMem0(search_error=RuntimeError("boom")), mode="both"
    )
    search, _ = await failing.list_tools()
    error = await search(keywords=["a", "b"])
    assert error.state == ToolResultState.ERROR
    assert error.text() == "Error retrieving memory: boom"


async def test_memory_tools_are_always_allowed() -> None:
    mw = Mem0Middleware(user_id="alice", client=FakeMem0(), mode="both")
    for tool in await mw.list_tools():
        decision = await tool.check_permissions({}, PermissionContext())
        assert decision.behavior == PermissionBehavior.ALLOW
    search, add = await mw.list_tools()
    assert (search.is_read_only, search.is_concurrency_safe) == (True, True)
    assert (add.is_read_only, add.is_concurrency_safe) == (False, False)


async def test_add_tool_falls_back_to_a_raw_save_and_keeps_thinking_out() -> None:
    client = FakeMem0(add_results=[{"results": []}, {"results": [{"id": "raw"}]}])
    agent, _, _ = await build(
        client,
        [
            tool_call(
                "add_memory", thinking="she told me twice", content=["Alice is vegan", "Likes tea"]
            ),
            text("noted"),
        ],
        mode="agent_control",
        tools=True,
    )
    msg = await agent.reply(user("remember this"))
    assert msg.get_text_content() == "noted"  # not parked: the tool is auto-allowed
    assert client.adds == [
        (
            [{"role": "user", "content": "Alice is vegan\nLikes tea", "name": "user"}],
            {"user_id": "alice", "agent_id": "agent_under_test"},
        ),
        (
            [{"role": "user", "content": "Alice is vegan\nLikes tea", "name": "user"}],
            {"user_id": "alice", "agent_id": "agent_under_test", "infer": False},
        ),
    ]
    assert "she told me twice" not in json.dumps(client.adds)
    [(state, output)] = result_texts(agent)
    assert state == "success"
    assert output == (
        "Successfully recorded to memory (rationale: she told me twice) → "
        "{'results': [{'id': 'raw'}]}"
    )


async def test_add_tool_errors() -> None:
    mw = Mem0Middleware(user_id="alice", client=FakeMem0(add_error=RuntimeError("full")))
    _, add = await mw.list_tools()
    empty = await add(thinking="t", content=[])
    assert empty.state == ToolResultState.ERROR
    assert "nothing to record" in empty.text()
    failed = await add(thinking="t", content=["x"])
    assert failed.state == ToolResultState.ERROR
    assert failed.text() == "Error recording memory: full"
    ok = Mem0Middleware(user_id="alice", client=FakeMem0())
    _, add = await ok.list_tools()
    assert (await add(thinking="", content=["x"])).text() == (
        "Successfully recorded to memory → {'results': [{'id': 'm1'}]}"
    )


# -- both -------------------------------------------------------------------------------------------


async def test_both_mode_searches_writes_nudges_and_exposes_tools() -> None:
    client = FakeMem0({"results": [{"memory": "Alice lives in Lyon"}]})
    agent, model, mw = await build(client, [text("Bonjour")], mode="both", tools=True)
    await agent.reply(user("Where do I live?"))
    assert len(client.searches) == 1
    assert len(client.adds) == 1
    [memory] = memory_msgs(agent)
    assert "Alice lives in Lyon" in str(memory.content[0].hint)  # type: ignore[union-attr]
    prompt = model.requests[0].messages[0].get_text_content() or ""
    assert prompt.endswith(DEFAULT_TOOL_INSTRUCTIONS)
    assert [t.name for t in await mw.list_tools()] == ["search_memory", "add_memory"]
    assert {t["function"]["name"] for t in model.requests[0].tools or []} == {
        "search_memory",
        "add_memory",
    }


# -- cancellation sweep -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [CancelMode.INTERRUPT, CancelMode.OUTER])
async def test_cancel_sweep_over_search_tool_and_write(
    mode: CancelMode, autojump_clock: trio.testing.MockClock
) -> None:
    clients: list[FakeMem0] = []

    async def make() -> Agent:
        client = FakeMem0({"results": [{"memory": "fact"}]}, delay=0.5)
        clients.append(client)
        agent, _, _ = await build(
            client,
            [tool_call("search_memory", keywords=["a", "b"]), text("done")],
            mode="both",
            tools=True,
        )
        return agent

    def check(run: SweepRun) -> None:
        client = clients[-1]
        assert len(memory_msgs(run.agent)) <= 1
        completed = run.end is not None and run.end.finished_reason == "completed"
        if not completed:
            assert client.adds == []  # only a completed reply is written back
        else:
            assert client.adds[0][0][1] == {"role": "assistant", "content": "done"}

    report = await cancel_sweep(make, lambda: user("q"), mode=mode, check=check)
    assert report.points > 10
    assert report.outcomes["interrupted"] > 0
    # Cancellations hit running searches: the automatic one and the tool's concurrent ones.
    cut = [c for c in clients if len(c.searches) > c.searches_done]
    assert any(len(c.searches) == 1 for c in cut)
    assert any(len(c.searches) == 3 for c in cut)


# -- the hosted platform client -------------------------------------------------------------------


async def test_platform_client_speaks_the_rest_api(nursery: trio.Nursery) -> None:
    server: OpenAICompatibleServer = await nursery.start(partial(serve_openai_compatible, []))
    seen: list[RecordedRequest] = []

    def search(request: RecordedRequest) -> ScriptedResponse:
        seen.append(request)
        return ScriptedResponse.json([{"id": "1", "memory": "Alice likes tea"}])

    def add(request: RecordedRequest) -> ScriptedResponse:
        seen.append(request)
        return ScriptedResponse.json({"results": [{"id": "2", "event": "ADD"}]})

    server.add_route("POST", "/v2/memories/search/", search)
    server.add_route("POST", "/v1/memories/", add)
    host = f"http://{server.host}:{server.port}"
    async with Mem0PlatformClient("m0-key-123", host=host, project_id="proj") as client:
        mw = Mem0Middleware(user_id="alice", client=client, agent_id="bot", mode="static_control")
        agent, model = make_agent([text("Here is some tea.")], middlewares=[mw])
        await agent.reply(user("What do I like?"))
    search_request, add_request = seen
    assert search_request.path == "/v2/memories/search/"
    assert search_request.headers["authorization"] == "Token m0-key-123"
    assert search_request.body == {
        "query": "What do I like?",
        "filters": {"user_id": "alice", "agent_id": "bot"},
        "top_k": 5,
        "project_id": "proj",
    }
    assert add_request.path == "/v1/memories/"
    assert add_request.headers["authorization"] == "Token m0-key-123"
    assert add_request.body == {
        "messages": [
            {"role": "user", "content": "What do I like?"},
            {"role": "assistant", "content": "Here is some tea."},
        ],
        "user_id": "alice",
        "agent_id": "bot",
        "version": "v2",
        "output_format": "v1.1",
        "project_id": "proj",
    }
    assert "Alice likes tea" in str(memory_msgs(agent)[0].content[0].hint)  # type: ignore[union-attr]
    assert any(m.name == "memory" for m in model.requests[0].messages)


async def test_platform_client_errors_and_options(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    server: OpenAICompatibleServer = await nursery.start(partial(serve_openai_compatible, []))
    bodies: list[Any] = []

    def denied(request: RecordedRequest) -> ScriptedResponse:
        bodies.append(request.body)
        return ScriptedResponse.json({"detail": "bad token m0-secret"}, status=401)

    def raw(request: RecordedRequest) -> ScriptedResponse:
        bodies.append(request.body)
        return ScriptedResponse.json({"results": []})

    server.add_route("POST", "/v2/memories/search/", denied)
    server.add_route("POST", "/v1/memories/", raw)
    host = f"http://{server.host}:{server.port}/"
    monkeypatch.setenv("MEM0_API_KEY", "m0-secret")
    async with Mem0PlatformClient(host=host, org_id="org") as client:
        assert repr(client) == f"Mem0PlatformClient(host={host.rstrip('/')!r})"
        with pytest.raises(Mem0APIError) as info:
            await client.search("q", filters={"user_id": "u"}, top_k=2, threshold=0.5)
        assert info.value.status_code == 401
        assert "m0-secret" not in str(info.value)
        assert await client.add("plain text", user_id="u", infer=False) == {"results": []}
    assert bodies[0] == {
        "query": "q",
        "filters": {"user_id": "u"},
        "top_k": 2,
        "threshold": 0.5,
        "org_id": "org",
    }
    assert bodies[1]["infer"] is False
    assert "agent_id" not in bodies[1]
    monkeypatch.delenv("MEM0_API_KEY")
    with pytest.raises(ValueError, match="MEM0_API_KEY"):
        Mem0PlatformClient()


# -- Mem0 over HTTP: edge cases ---------------------------------------------------------------


KEY = "m0-very-secret-key-0123456789"


async def start_server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    server: OpenAICompatibleServer = await nursery.start(partial(serve_openai_compatible, []))
    return server


def host_of(server: OpenAICompatibleServer) -> str:
    return f"http://{server.host}:{server.port}"


def ok_add(request: RecordedRequest) -> ScriptedResponse:
    return ScriptedResponse.json({"results": [{"id": "1", "event": "ADD"}]})


@pytest.mark.parametrize(
    "answer",
    [
        ScriptedResponse(
            status=500, body=f"boom, your key is {KEY}".encode(), media_type="text/plain"
        ),
        ScriptedResponse.json({"error": {"message": f"bad key {KEY}", "code": KEY}}, status=401),
        ScriptedResponse.json({"detail": f"Token {KEY} rejected"}, status=403),
        ScriptedResponse(status=200, body=b"{not json", media_type="application/json"),
        ScriptedResponse(status=200, body=f"<html>{KEY}</html>".encode(), media_type="text/html"),
    ],
)
async def test_a_failing_search_over_http_keeps_the_reply_and_hides_the_key(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture, answer: ScriptedResponse
) -> None:
    server = await start_server(nursery)
    server.add_route("POST", "/v2/memories/search/", lambda request: answer)
    adds: list[RecordedRequest] = []

    def add(request: RecordedRequest) -> ScriptedResponse:
        adds.append(request)
        return ok_add(request)

    server.add_route("POST", "/v1/memories/", add)
    async with Mem0PlatformClient(KEY, host=host_of(server)) as client:
        mw = Mem0Middleware(user_id="alice", client=client, mode="static_control")
        agent, _ = make_agent([text("answer")], middlewares=[mw])
        rec = Recorder()
        with caplog.at_level(logging.DEBUG):
            msg = await agent.reply(user("hello"), on_event=rec)
        assert KEY not in repr(client)
        assert KEY not in repr(mw)
    assert msg.get_text_content() == "answer"
    assert [str(e.finished_reason) for e in rec.ends] == ["completed"]
    assert "mem0 search failed" in caplog.text
    assert KEY not in caplog.text
    assert all(KEY not in str(e) for e in rec.events)
    assert len(adds) == 1  # the write-back still happens


@pytest.mark.parametrize(
    "payload",
    [
        {"results": "not a list"},
        [1, None, {"memory": ""}, {"text": None}, {"other": "x"}],
        {"results": [{"memory": 5}, {"text": "kept"}]},
        "just a string",
        None,
        42,
    ],
)
async def test_odd_but_valid_json_search_answers(nursery: trio.Nursery, payload: Any) -> None:
    server = await start_server(nursery)
    server.add_route("POST", "/v2/memories/search/", lambda r: ScriptedResponse.json(payload))
    server.add_route("POST", "/v1/memories/", ok_add)
    async with Mem0PlatformClient(KEY, host=host_of(server)) as client:
        mw = Mem0Middleware(user_id="alice", client=client, mode="static_control")
        agent, _ = make_agent([text("answer")], middlewares=[mw])
        msg = await agent.reply(user("hello"))
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    memory_hints = [m for m in agent.state.context if m.name == "memory"]
    if isinstance(payload, dict) and payload.get("results") == [{"memory": 5}, {"text": "kept"}]:
        [memory] = memory_hints
        assert "- 5\n- kept" in str(memory.content[0].hint)  # type: ignore[union-attr]
    else:
        assert memory_hints == []


@pytest.mark.parametrize(
    "exc",
    [
        httpx2.ReadTimeout("read timed out"),
        httpx2.ConnectTimeout("connect timed out"),
        httpx2.ConnectError("refused"),
        httpx2.RemoteProtocolError("peer closed"),
    ],
)
async def test_transport_failures_become_mem0_errors_and_the_reply_completes(
    caplog: pytest.LogCaptureFixture, exc: Exception
) -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        raise exc

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    client = Mem0PlatformClient(KEY, host="http://mem0.invalid", http_client=http)
    with pytest.raises(Mem0APIError) as info:
        await client.add("x", user_id="u")
    assert info.value.status_code is None
    assert KEY not in str(info.value)
    assert KEY not in repr(info.value)
    mw = Mem0Middleware(user_id="alice", client=client, mode="static_control")
    agent, _ = make_agent([text("answer")], middlewares=[mw])
    rec = Recorder()
    with caplog.at_level(logging.WARNING, logger="trioagent.middleware"):
        msg = await agent.reply(user("hello"), on_event=rec)
    await http.aclose()
    assert msg.get_text_content() == "answer"
    assert [str(e.finished_reason) for e in rec.ends] == ["completed"]
    assert "mem0 search failed" in caplog.text
    assert "mem0 add failed" in caplog.text
    assert KEY not in caplog.text
    assert [r.headers["authorization"] for r in seen] == [f"Token {KEY}"] * 3


async def test_interrupt_during_an_http_search_ends_once_and_frees_the_connection(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    arrived = trio.Event()
    calls = {"search": 0}

    async def search(request: RecordedRequest) -> ScriptedResponse:
        calls["search"] += 1
        if calls["search"] == 1:
            arrived.set()
            await trio.sleep_forever()
        return ScriptedResponse.json({"results": [{"memory": "Alice likes tea"}]})

    server.add_route("POST", "/v2/memories/search/", search)
    server.add_route("POST", "/v1/memories/", ok_add)
    async with Mem0PlatformClient(KEY, host=host_of(server)) as client:
        mw = Mem0Middleware(user_id="alice", client=client, mode="static_control")
        agent, model = make_agent([text("second answer")], middlewares=[mw])
        rec = Recorder()

        async def interrupt_when_the_search_arrives() -> None:
            await arrived.wait()
            agent.interrupt()

        with trio.fail_after(10):
            async with trio.open_nursery() as inner:
                inner.start_soon(interrupt_when_the_search_arrives)
                msg = await agent.reply(user("hello"), on_event=rec)
        assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
        assert rec.types == ["REPLY_START", "REPLY_END"]
        assert model.requests == []
        with trio.fail_after(10):
            await server.wait_until(lambda: server.connections[0].closed.is_set())
        assert server.connections[0].closed_by_client
        # The client is still usable: the next reply searches, answers and writes back.
        rec2 = Recorder()
        with trio.fail_after(10):
            msg2 = await agent.reply(user("again"), on_event=rec2)
    assert msg2.get_text_content() == "second answer"
    assert [str(e.finished_reason) for e in rec2.ends] == ["completed"]
    assert [r.path for r in server.requests] == [
        "/v2/memories/search/",
        "/v2/memories/search/",
        "/v1/memories/",
    ]


async def test_interrupt_during_an_http_write_back_ends_once_and_frees_the_connection(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    arrived = trio.Event()

    async def add(request: RecordedRequest) -> ScriptedResponse:
        arrived.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    server.add_route("POST", "/v2/memories/search/", lambda r: ScriptedResponse.json([]))
    server.add_route("POST", "/v1/memories/", add)
    async with Mem0PlatformClient(KEY, host=host_of(server)) as client:
        mw = Mem0Middleware(user_id="alice", client=client, mode="static_control")
        agent, _ = make_agent([text("answer")], middlewares=[mw])
        rec = Recorder()

        async def interrupt_when_the_write_arrives() -> None:
            await arrived.wait()
            agent.interrupt()

        with trio.fail_after(10):
            async with trio.open_nursery() as inner:
                inner.start_soon(interrupt_when_the_write_arrives)
                msg = await agent.reply(user("hello"), on_event=rec)
        add_connection = server.connections[-1]
        with trio.fail_after(10):
            await server.wait_until(add_connection.closed.is_set)
    assert len(rec.ends) == 1
    assert isinstance(rec.events[-1], type(rec.ends[0]))
    assert msg.get_text_content() == "answer"
    assert add_connection.closed_by_client

"""Edge cases of the public testing kit (trioagent/testing/), from a user's point of view:
``ScriptedModel``, ``cancel_sweep`` / ``check_reply_rules`` on deliberately broken agents and
middlewares, and ``serve_openai_compatible`` under malformed, concurrent and vanishing clients.

Network tests run on the real clock (an autojumping clock could fire an HTTP deadline while
loopback I/O is in flight); they never sleep, and ``trio.fail_after`` only guards hangs.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from trioagent import Agent, MiddlewareBase, Toolkit, UserMsg
from trioagent.agent import AgentState, InjectionConfig
from trioagent.event import ReplyEndEvent, ReplyStartEvent, TextBlockDeltaEvent
from trioagent.exception import ModelUpstreamError
from trioagent.message import AssistantMsg, TextBlock, ToolCallBlock, ToolResultBlock
from trioagent.model import ChatResponse
from trioagent.permission import PermissionDecision
from trioagent.testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedModel,
    ScriptedReply,
    ScriptedRequest,
    ScriptedResponse,
    ScriptError,
    SweepRun,
    SweepViolation,
    cancel_sweep,
    check_reply_rules,
    serve_openai_compatible,
    text_chunks,
    tool_call_chunks,
)

DOCS = Path(__file__).resolve().parent.parent / "docs" / "testing.md"
ALLOW = PermissionDecision("allow", "test")
NO_INJECTION = InjectionConfig(inject_runtime_state=False)


def user(text: str = "hi") -> UserMsg:
    return UserMsg("user", text)


async def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    await trio.sleep(1)
    return f"value of {key}"


def agent_on(model: ScriptedModel, *middlewares: MiddlewareBase, tools: bool = False) -> Agent:
    toolkit = None
    if tools:
        toolkit = Toolkit()
        toolkit.register_function(lookup, permission=ALLOW)
    return Agent(
        "assistant",
        "You help.",
        model,
        toolkit,
        middlewares=list(middlewares),
        injection_config=NO_INJECTION,
    )


def text_agent(*middlewares: MiddlewareBase) -> Agent:
    return agent_on(ScriptedModel([text_chunks("a", "b")], chunk_delay=0.1), *middlewares)


# == the documentation ============================================================================


def _doc_example() -> str:
    text = DOCS.read_text()
    section = text.split("## A complete example", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)[:1]
    return code


async def test_the_docs_complete_example_runs_as_pytest_trio_tests(autojump_clock):
    """docs/testing.md: 'the same functions work as pytest-trio tests'."""
    code = _doc_example()
    assert code.rstrip().endswith(
        "trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))"
    )
    namespace: dict[str, Any] = {"__name__": "doc_example"}
    exec(compile(code.rstrip().rsplit("\n", 1)[0], "testing.md", "exec"), namespace)
    start = trio.current_time()
    await namespace["test_answer"]()
    assert trio.current_time() - start == pytest.approx(2.0)  # the tool's sleep, on the clock
    await namespace["test_cancellation_sweep"]()


async def test_the_server_module_docstring_example(nursery: trio.Nursery):
    async with trio.open_nursery() as inner:
        server = await inner.start(serve_openai_compatible, ["Hello!"])
        async with server.chat_model() as model:
            response = await model([UserMsg("user", "Hi")])
        inner.cancel_scope.cancel()
    assert response.content[0].text == "Hello!"  # type: ignore[union-attr]
    assert server.requests[0].last_user_text() == "Hi"


# == ScriptedModel ================================================================================


async def test_an_exhausted_script_fails_the_agents_reply_clearly(autojump_clock):
    model = ScriptedModel([tool_call_chunks("c1", "lookup", '{"key": "a"}')])
    agent = agent_on(model, tools=True)
    with pytest.raises(ScriptError, match=r"unexpected model call #2: the script has no step"):
        await agent.reply(user())
    assert len(model.requests) == 2  # the unexpected call is recorded too
    assert any(m.has_content_blocks("tool_result") for m in model.requests[1].messages)


async def test_a_script_error_is_not_retried_by_model_retries(autojump_clock):
    model = ScriptedModel([], max_retries=3)
    with pytest.raises(ScriptError):
        await model([user()])
    assert len(model.requests) == 1


async def test_an_exception_step_exercises_model_retries(autojump_clock):
    model = ScriptedModel(
        [ModelUpstreamError("busy", status_code=503), text_chunks("ok")],
        max_retries=1,
        retry_delay=5.0,
    )
    start = trio.current_time()
    response = await model([user()])
    assert response.content[0].text == "ok"  # type: ignore[union-attr]
    assert len(model.requests) == 2
    assert trio.current_time() > start  # the backoff slept on the (mock) clock
    model.assert_consumed()


async def test_callable_steps_edge_cases(autojump_clock):
    async def raising(request: ScriptedRequest) -> Any:
        await trio.sleep(1)
        raise KeyError("raised, not returned")

    def nested(request: ScriptedRequest) -> Any:
        return lambda r: text_chunks("too deep")

    def chunks_of_tool_call(request: ScriptedRequest) -> Any:
        return [*text_chunks("pre"), *tool_call_chunks("c9", "t", "{}")]

    model = ScriptedModel([raising, nested, chunks_of_tool_call])
    with pytest.raises(KeyError, match="raised, not returned"):
        await model([user()])
    with pytest.raises(ScriptError, match="invalid scripted step"):
        await model([user()])
    response = await model([user()])
    assert [b.type for b in response.content] == ["text", "tool_call"]
    model.assert_consumed()


async def test_a_callable_step_can_extend_the_script(autojump_clock):
    model = ScriptedModel()

    def first(request: ScriptedRequest) -> Any:
        model.add_steps(text_chunks("second"))
        return text_chunks("first")

    model.add_steps(first)
    assert model.remaining == 1
    assert (await model([user()])).content[0].text == "first"  # type: ignore[union-attr]
    assert model.remaining == 1
    assert (await model([user()])).content[0].text == "second"  # type: ignore[union-attr]
    model.assert_consumed()


async def test_assert_consumed_counts_unplayed_error_steps():
    model = ScriptedModel([text_chunks("x"), ValueError("never raised")])
    await model([user()])
    with pytest.raises(ScriptError, match=r"^1 scripted step\(s\) were never played$"):
        model.assert_consumed()


@pytest.mark.parametrize(
    ("step", "stream", "expected"),
    [
        (text_chunks("a", "b", "c"), True, 6.0),  # between streamed chunks
        (ChatResponse(content=[TextBlock(text="whole")]), True, 2.0),  # one delta
        (text_chunks("a", "b", "c"), False, 2.0),  # a plain call pauses once
    ],
)
async def test_chunk_delay_is_mock_clock_time(step, stream, expected, autojump_clock):
    model = ScriptedModel([step], chunk_delay=2.0, stream=stream)
    start = trio.current_time()
    await model([user()])
    assert trio.current_time() - start == pytest.approx(expected)


async def test_recorded_requests_survive_the_agents_later_mutations(autojump_clock):
    tools = [{"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}]
    model = ScriptedModel([text_chunks("1"), text_chunks("2")])
    conversation = [user("first")]
    await model(conversation, tools)
    tools[0]["function"]["name"] = "renamed"
    conversation.append(AssistantMsg("assistant", "appended later"))
    conversation[0].content.append(TextBlock(text="extra"))
    first = model.requests[0]
    assert first.tools is not None
    assert first.tools[0]["function"]["name"] == "t"
    assert [m.get_text_content() for m in first.messages] == ["first"]
    with pytest.raises(AttributeError):
        first.messages = []  # type: ignore[misc]  # frozen record

    # Through an agent: the first request does not see the reply appended afterwards.
    model = ScriptedModel([tool_call_chunks("c1", "lookup", '{"key": "a"}'), text_chunks("done")])
    agent = agent_on(model, tools=True)
    await agent.reply(user("q"))
    assert len(model.requests[0].messages) < len(model.requests[1].messages)
    assert not any(m.has_content_blocks("tool_call") for m in model.requests[0].messages)


@pytest.mark.parametrize("stream", [True, False])
async def test_steps_shared_between_agents_are_not_mutated(stream, autojump_clock):
    """A module-level script reused by many agents (as a sweep's ``make_agent`` does)."""
    call = ChatResponse(content=[ToolCallBlock(id="c1", name="lookup", input='{"key": "a"}')])
    chunks = tool_call_chunks("c2", "lookup", '{"key": ', '"b"}')
    final = ChatResponse(content=[TextBlock(text="done")])
    for steps in ([call, final], [chunks, final]):
        before = [repr(s) for s in steps]
        for _ in range(2):
            agent = agent_on(ScriptedModel(steps, stream=stream), tools=True)
            msg = await agent.reply(user())
            assert msg.get_text_content() == "done"
        assert [repr(s) for s in steps] == before


# == cancel_sweep: the harness itself ==============================================================


async def test_a_make_agent_that_raises_propagates_unchanged(autojump_clock):
    def broken() -> Agent:
        raise LookupError("no such agent")

    async def broken_async() -> Agent:
        await trio.lowlevel.checkpoint()
        raise LookupError("no such async agent")

    with pytest.raises(LookupError, match="no such agent"):
        await cancel_sweep(broken, user)
    with pytest.raises(LookupError, match="no such async agent"):
        await cancel_sweep(broken_async, user)


async def test_a_make_agent_that_fails_on_a_later_run(autojump_clock):
    made = 0

    def flaky() -> Agent:
        nonlocal made
        made += 1
        if made == 3:
            raise LookupError("third agent")
        return text_agent()

    with pytest.raises(LookupError, match="third agent"):
        await cancel_sweep(flaky, user)


async def test_an_async_make_agent_and_fresh_inputs_per_run(autojump_clock):
    inputs: list[UserMsg] = []

    async def make() -> Agent:
        await trio.sleep(1)
        return text_agent()

    def fresh() -> UserMsg:
        inputs.append(user())
        return inputs[-1]

    report = await cancel_sweep(make, fresh, max_points=3)
    assert len(inputs) == len(report.runs) == 4
    assert len({id(m) for m in inputs}) == 4


async def test_max_points_caps_the_runs_but_reports_every_point(autojump_clock):
    full = await cancel_sweep(text_agent, user)
    assert len(full.runs) == full.points + 1
    capped = await cancel_sweep(text_agent, user, max_points=2)
    assert capped.points == capped.runs[0].steps > 2  # the baseline's count, not the cap
    assert [r.cancel_at for r in capped.runs] == [None, 1, 2]
    only_baseline = await cancel_sweep(text_agent, user, max_points=0)
    assert [r.cancel_at for r in only_baseline.runs] == [None]
    assert not only_baseline.runs[0].fired


async def test_a_long_reply_terminates_with_one_run_per_point(autojump_clock):
    parts = [f"w{i} " for i in range(60)]

    def make() -> Agent:
        return agent_on(ScriptedModel([text_chunks(*parts)], chunk_delay=0.01))

    report = await cancel_sweep(make, user, mode="outer")
    assert report.points > 60
    assert len(report.runs) == report.points + 1
    assert [r.cancel_at for r in report.runs[1:]] == list(range(1, report.points + 1))
    assert report.outcomes["interrupted"] > 60


async def test_an_unknown_mode_is_rejected_before_any_run(autojump_clock):
    made = 0

    def make() -> Agent:
        nonlocal made
        made += 1
        return text_agent()

    with pytest.raises(ValueError, match="'sideways' is not a valid CancelMode"):
        await cancel_sweep(make, user, mode="sideways")
    assert made == 0


async def test_a_failing_check_propagates_with_the_run(autojump_clock):
    seen: list[SweepRun] = []

    def check(run: SweepRun) -> None:
        seen.append(run)
        assert run.cancel_at != 2, "my own assertion"

    with pytest.raises(AssertionError, match="my own assertion"):
        await cancel_sweep(text_agent, user, check=check)
    assert [r.cancel_at for r in seen] == [None, 1, 2]


async def test_an_error_in_the_baseline_names_the_baseline(autojump_clock):
    def make() -> Agent:
        return agent_on(ScriptedModel([RuntimeError("model down")]))

    for mode in ("interrupt", "outer"):
        with pytest.raises(SweepViolation, match=r"^\(baseline\) the reply raised RuntimeError"):
            await cancel_sweep(make, user, mode=mode)


# == cancel_sweep on a minimal fake agent (no guards of the real Agent in the way) =================


class FakeAgent:
    """The surface ``cancel_sweep(mode="outer")`` uses, emitting a fixed list of events."""

    name = "fake"
    model = None

    def __init__(self, events: list[Any], *, checkpoints: bool = True) -> None:
        self.state = AgentState()
        self.events = events
        self.checkpoints = checkpoints

    def interrupt(self) -> None:  # pragma: no cover - outer mode only
        raise AssertionError("not used")

    async def reply(self, inputs: Any, *, structured_schema: Any = None, on_event: Any) -> None:
        for event in self.events:
            if self.checkpoints:
                await trio.lowlevel.checkpoint()
            await on_event(event)


START = ReplyStartEvent(session_id="s", reply_id="r", name="fake")
END = ReplyEndEvent(session_id="s", reply_id="r")
LATE = TextBlockDeltaEvent(reply_id="r", block_id="b", delta="late")


async def test_sweep_reports_two_end_events(autojump_clock):
    with pytest.raises(SweepViolation, match=r"^rule 1 \(baseline\): 2 ReplyEndEvents"):
        await cancel_sweep(lambda: FakeAgent([START, END, END]), user, mode="outer")


async def test_sweep_reports_an_event_after_the_end(autojump_clock):
    with pytest.raises(SweepViolation, match=r"^rule 1 \(baseline\).*not the last event"):
        await cancel_sweep(lambda: FakeAgent([START, END, LATE]), user, mode="outer")


async def test_sweep_reports_a_reply_without_end_cut_by_a_cancellation(autojump_clock):
    # The baseline is fine; a cancellation between START and END shows the missing cleanup.
    with pytest.raises(SweepViolation, match=r"^rule 1 \(point \d+\): 0 ReplyEndEvents"):
        await cancel_sweep(lambda: FakeAgent([START, END]), user, mode="outer")


async def test_a_reply_that_never_checkpoints_is_swept_and_terminates(autojump_clock):
    report = await cancel_sweep(
        lambda: FakeAgent([START, END], checkpoints=False), user, mode="outer"
    )
    # No schedule point inside the reply: nothing to cancel, the baseline alone is checked.
    assert report.points == 0
    (baseline,) = report.runs
    assert baseline.events == [START, END]
    assert not baseline.fired


# == cancel_sweep on broken middlewares of a real agent ===========================================


class SwallowCancelInModelCall(MiddlewareBase):
    """Broken: swallows trio.Cancelled around the model call (rule 3)."""

    async def on_model_call(self, agent, input_kwargs, next_handler, emit):
        try:  # noqa: SIM105 - the bug on display
            await next_handler()
        except trio.Cancelled:
            pass


async def test_sweep_catches_a_cancellation_swallowed_in_on_model_call(autojump_clock):
    await cancel_sweep(lambda: text_agent(SwallowCancelInModelCall()), user, max_points=0)
    with pytest.raises(SweepViolation, match=r"\(point \d+\) an outer cancellation was swallowed"):
        await cancel_sweep(lambda: text_agent(SwallowCancelInModelCall()), user, mode="outer")


class ExtraEnd(MiddlewareBase):
    """Broken: emits a second ReplyEndEvent after the reply."""

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        await next_handler()
        await emit(ReplyEndEvent(session_id="s", reply_id=agent.state.reply_id))


class LateDelta(MiddlewareBase):
    """Broken: emits an event after the reply's end."""

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        await next_handler()
        await emit(TextBlockDeltaEvent(reply_id=agent.state.reply_id, block_id="x", delta="!"))


@pytest.mark.parametrize("middleware", [ExtraEnd, LateDelta])
@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_the_agent_drops_events_after_the_end_so_rule_1_holds(
    middleware, mode, autojump_clock, caplog
):
    def check(run: SweepRun) -> None:
        ends = [i for i, e in enumerate(run.events) if isinstance(e, ReplyEndEvent)]
        assert ends == [len(run.events) - 1]

    report = await cancel_sweep(lambda: text_agent(middleware()), user, mode=mode, check=check)
    assert report.outcomes["interrupted"] >= 1
    assert "emitted after the reply's end event" in caplog.text


async def test_sweep_catches_a_task_leaked_into_the_nursery_fixture(
    nursery: trio.Nursery, autojump_clock
):
    class LeakIntoFixture(MiddlewareBase):
        async def on_reply(self, agent, input_kwargs, next_handler, emit):
            nursery.start_soon(trio.sleep_forever)
            await next_handler()

    with pytest.raises(SweepViolation, match=r"^rule 7 \(point None\): a task outlived"):
        await cancel_sweep(lambda: text_agent(LeakIntoFixture()), user, max_points=0)


# == check_reply_rules on hand-built states ========================================================


def _state(*blocks: Any) -> AgentState:
    state = AgentState()
    state.context = [user(), AssistantMsg("assistant", list(blocks))]
    return state


FINISHED_CALL = ToolCallBlock(id="c1", name="t", state="finished")
RESULT = ToolResultBlock(id="c1", name="t", output="ok", state="success")


def test_check_reply_rules_accepts_a_paired_call():
    check_reply_rules(_state(FINISHED_CALL, RESULT), "assistant", [START, END])


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        ([FINISHED_CALL], r"rule 6 \(here\): tool call c1 has 0 results"),
        ([FINISHED_CALL, RESULT, RESULT], r"tool call c1 has 2 results"),
        ([FINISHED_CALL, RESULT, ToolResultBlock(id="zz", name="t")], r"results without a call"),
        ([ToolCallBlock(id="c1", name="t"), RESULT], r"tool call c1 left in state pending"),
    ],
)
def test_check_reply_rules_flags_rule_6(blocks, message):
    with pytest.raises(SweepViolation, match=message):
        check_reply_rules(_state(*blocks), "assistant", [START, END], where="here")


def test_check_reply_rules_flags_an_event_after_the_end():
    with pytest.raises(SweepViolation, match=r"rule 1 \(x\): the ReplyEndEvent is not the last"):
        check_reply_rules(AgentState(), "assistant", [START, END, LATE], where="x")


def test_check_reply_rules_accepts_no_events_at_all():
    check_reply_rules(AgentState(), "assistant", [])


# == serve_openai_compatible =======================================================================


@pytest.fixture
async def server(nursery: trio.Nursery) -> OpenAICompatibleServer:
    server: OpenAICompatibleServer = await nursery.start(serve_openai_compatible)
    return server


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5) as client:
        yield client


def chat(text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


def raw_request(body: bytes, path: str = "/v1/chat/completions") -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_until(stream: trio.SocketStream, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = await stream.receive_some()
        if not chunk:
            break
        data += chunk
    return data


async def read_to_eof(stream: trio.SocketStream) -> bytes:
    data = b""
    while chunk := await stream.receive_some():
        data += chunk
    return data


@pytest.mark.parametrize(
    "content",
    [b"not json", b"[1, 2]", b'{"model": "m"}', b"", b"\xff\xfe", b"null", b'"messages"'],
)
async def test_a_malformed_body_gets_a_400_json_error_and_the_server_lives_on(
    server: OpenAICompatibleServer, client: httpx.AsyncClient, content: bytes
):
    server.push("scripted")
    url = f"{server.base_url}/chat/completions"

    bad = await client.post(url, content=content, headers={"Content-Type": "application/json"})
    good = await client.post(url, json=chat())

    assert bad.status_code == 400
    assert "messages" in bad.json()["error"]["message"]
    assert good.json()["choices"][0]["message"]["content"] == "scripted"
    assert server.requests[0].raw_body == content
    recorded = server.requests[0].body
    assert not (isinstance(recorded, dict) and "messages" in recorded)
    assert not server.script  # the bad request consumed no script entry


async def test_concurrent_requests_each_take_one_entry(
    server: OpenAICompatibleServer, client: httpx.AsyncClient
):
    n = 8
    server.push(*[f"answer {i}" for i in range(n)])
    url = f"{server.base_url}/chat/completions"
    answers: list[str] = []

    async def one(i: int) -> None:
        async with httpx.AsyncClient(timeout=5) as own:  # a connection each
            response = await own.post(url, json=chat(f"q{i}", stream=i % 2 == 0))
            answers.append(response.text)

    with trio.fail_after(10):
        async with trio.open_nursery() as clients:
            for i in range(n):
                clients.start_soon(one, i)
        await server.wait_all_closed()

    numbers = sorted(int(m[1]) for a in answers if (m := re.search(r"answer (\d)", a)))
    assert numbers == list(range(n))
    assert len(server.requests) == n
    assert len({r.connection_id for r in server.requests}) == n
    assert sorted(r.last_user_text() for r in server.requests) == [f"q{i}" for i in range(n)]
    assert not server.script


async def test_a_client_vanishing_mid_stream_does_not_crash_the_server(
    server: OpenAICompatibleServer, client: httpx.AsyncClient
):
    server.push(ScriptedReply(text="abcdefgh", chunk_size=1, stall_after=3))
    sock = await trio.open_tcp_stream(server.host, server.port)
    await sock.send_all(raw_request(json.dumps(chat(stream=True)).encode()))
    with trio.fail_after(5):
        head = await read_until(sock, b"data: ")
        assert head.startswith(b"HTTP/1.1 200")
        await sock.aclose()
        await server.wait_all_closed()
    assert server.connections[0].closed_by_client

    # The server still answers (the script is empty now: it echoes).
    response = await client.post(f"{server.base_url}/chat/completions", json=chat("again"))
    assert response.json()["choices"][0]["message"]["content"] == "Echo: again"


async def test_a_client_vanishing_mid_request_body_records_nothing(
    server: OpenAICompatibleServer, client: httpx.AsyncClient
):
    sock = await trio.open_tcp_stream(server.host, server.port)
    await sock.send_all(raw_request(json.dumps(chat()).encode())[:-5])
    await sock.aclose()
    with trio.fail_after(5):
        await server.wait_all_closed()
    assert server.requests == []
    response = await client.post(f"{server.base_url}/chat/completions", json=chat("still"))
    assert response.status_code == 200


async def test_garbage_on_the_wire_closes_that_connection_only(
    server: OpenAICompatibleServer, client: httpx.AsyncClient
):
    sock = await trio.open_tcp_stream(server.host, server.port)
    await sock.send_all(b"NOT HTTP AT ALL\r\n\r\n")
    with trio.fail_after(5):
        await read_to_eof(sock)
        await server.wait_all_closed()
    await sock.aclose()
    response = await client.post(f"{server.base_url}/chat/completions", json=chat())
    assert response.status_code == 200
    assert server.requests[-1].body == chat()


async def test_wait_all_closed(server: OpenAICompatibleServer, client: httpx.AsyncClient):
    with trio.fail_after(5):
        await server.wait_all_closed()  # nothing accepted yet: returns at once
    await client.post(f"{server.base_url}/chat/completions", json=chat())
    assert server.open_connections == 1  # keep-alive

    closed = False

    async def waiter() -> None:
        nonlocal closed
        await server.wait_all_closed()
        closed = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert not closed
        await client.aclose()
    assert closed
    assert server.connections[0].closed_by_client


async def test_cancelling_the_servers_nursery_closes_listener_and_connections():
    async with trio.open_nursery() as owner:
        server: OpenAICompatibleServer = await owner.start(
            serve_openai_compatible, [ScriptedReply(text="x", stall_after=0)]
        )
        sock = await trio.open_tcp_stream(server.host, server.port)
        await sock.send_all(raw_request(json.dumps(chat(stream=True)).encode()))
        with trio.fail_after(5):
            await server.wait_until(lambda: len(server.requests) == 1)
        owner.cancel_scope.cancel()

    assert server.open_connections == 0
    assert not server.connections[0].closed_by_client  # the server closed it
    with trio.fail_after(5):
        received = await read_to_eof(sock)  # the stalled stream ends: EOF
    assert received.startswith(b"HTTP/1.1 200")
    await sock.aclose()
    with pytest.raises(OSError):  # noqa: PT011 - refused, whatever the platform's errno
        await trio.open_tcp_stream(server.host, server.port)


async def test_recorded_request_bodies(server: OpenAICompatibleServer, client: httpx.AsyncClient):
    payload = chat("plain string", stream=True, tools=[{"type": "function"}])
    raw = json.dumps(payload, separators=(",", ":")).encode()
    await client.post(f"{server.base_url}/chat/completions", content=raw)
    await client.post(f"{server.base_url}/chat/completions", json={"messages": []})

    first, second = server.requests
    assert first.raw_body == raw
    assert first.body == payload
    assert first.stream
    assert first.last_user_text() == "plain string"
    assert first.headers["content-length"] == str(len(raw))
    assert second.last_user_text() == ""
    assert not second.stream
    # Recorded bodies are the server's own parse: the client's later changes do not matter.
    payload["messages"].clear()
    assert first.body["messages"]


async def test_custom_routes(nursery: trio.Nursery, client: httpx.AsyncClient):
    server: OpenAICompatibleServer = await nursery.start(
        partial(serve_openai_compatible, api_key="sk-r")
    )
    auth = {"Authorization": "Bearer sk-r"}
    seen: list[RecordedRequest] = []

    def speech(request: RecordedRequest) -> ScriptedResponse:
        seen.append(request)
        return ScriptedResponse(body=[b"RIFF", b"data"], media_type="audio/wav")

    async def decide(request: RecordedRequest) -> ScriptedResponse:
        await trio.lowlevel.checkpoint()
        return ScriptedResponse.json({"echo": request.body}, status=201)

    server.add_route("post", "/v1/audio/speech", speech)
    server.add_route("PUT", "/v1/decisions", decide)

    audio = await client.post(
        f"{server.base_url}/audio/speech?format=wav", json={"input": "hi"}, headers=auth
    )
    decision = await client.put(f"{server.base_url}/decisions", json={"a": 1}, headers=auth)
    unauthorized = await client.post(f"{server.base_url}/audio/speech", json={})
    wrong_method = await client.get(f"{server.base_url}/audio/speech", headers=auth)

    assert (audio.status_code, audio.content) == (200, b"RIFFdata")
    assert audio.headers["content-type"] == "audio/wav"
    assert seen[0].body == {"input": "hi"}
    assert seen[0].path == "/v1/audio/speech?format=wav"
    assert (decision.status_code, decision.json()) == (201, {"echo": {"a": 1}})
    assert unauthorized.status_code == 401
    assert len(seen) == 1  # the handler never saw the unauthorized request
    assert wrong_method.status_code == 404


# -- found by this hunt, fixed ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"messages": 5}, 400),
        ({"messages": ["not an object"]}, 400),
        ({"messages": [], "stream": True, "stream_options": True}, 400),
        ({"messages": [{"role": "user", "content": ["x", {"type": "text", "text": "t"}]}]}, 200),
    ],
)
async def test_malformed_fields_get_a_400_and_the_server_lives_on(
    payload: Any, status: int
) -> None:
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_openai_compatible)
        async with httpx.AsyncClient(timeout=5) as client:
            response = await client.post(f"{server.base_url}/chat/completions", json=payload)
            assert response.status_code == status
            if status == 400:
                assert response.json()["error"]["type"] == "invalid_request_error"
            else:  # odd content parts are skipped by the echo
                assert response.json()["choices"][0]["message"]["content"] == "Echo: t"
            ok = await client.post(
                f"{server.base_url}/chat/completions",
                json={"messages": [{"role": "user", "content": "hi"}]},
            )
            assert ok.status_code == 200
        nursery.cancel_scope.cancel()


class NeverReplies(MiddlewareBase):
    async def on_reply(self, agent: Any, input_kwargs: Any, next_handler: Any, emit: Any) -> None:
        return


@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_sweep_reports_a_reply_that_never_runs(mode: str, autojump_clock: Any) -> None:
    # interrupt mode: no event at all; outer mode: reply() says it produced no final message.
    with pytest.raises(SweepViolation, match=r"rule 1|did not produce a final message"):
        await cancel_sweep(
            lambda: text_agent(NeverReplies()), lambda: UserMsg("user", "hi"), mode=mode
        )


async def test_closed_by_client_when_the_client_leaves_mid_body() -> None:
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_openai_compatible)
        sock = await trio.open_tcp_stream(server.host, server.port)
        await sock.send_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b'Content-Length: 100\r\n\r\n{"messages"'
        )
        await sock.aclose()
        with trio.fail_after(5):
            await server.wait_all_closed()
        assert server.connections[0].closed_by_client
        nursery.cancel_scope.cancel()

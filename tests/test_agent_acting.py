"""Acting: batching, concurrency, results in call order, streaming, bad calls, interruption,
``on_acting`` and permission ``updated_input``, with AgentScope's event order for concurrent and
mixed batches and its interrupted results.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import trio
from agent_kit import (
    ALLOW,
    INTERRUPTED_TEXT,
    call,
    calls,
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

from trioagent.event import (
    ModelCallEndEvent,
    ModelCallStartEvent,
    ReplyEndEvent,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultTextDeltaEvent,
)
from trioagent.exception import DeveloperOrientedException
from trioagent.message import (
    Base64Source,
    DataBlock,
    TextBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
)
from trioagent.middleware import MiddlewareBase
from trioagent.permission import PermissionBehavior, PermissionDecision
from trioagent.testing import check_reply_rules
from trioagent.tool import ToolBase, ToolChunk, Toolkit, ToolResponse
from trioagent.types import ReplyFinishedReason

RESULT_EVENTS = {"TOOL_RESULT_START", "TOOL_RESULT_TEXT_DELTA", "TOOL_RESULT_END"}


def sleepy_toolkit(log: list[str] | None = None) -> Toolkit:
    """``conc`` (concurrency-safe) and ``seq`` (not): each streams two chunks around a sleep."""
    toolkit = Toolkit()

    async def conc(name: str, delay: float, emit: Any) -> str:
        """Concurrent worker."""
        await emit(ToolChunk(content=[TextBlock(text=f"{name}-a ")], is_last=False))
        await trio.sleep(delay)
        await emit(ToolChunk(content=[TextBlock(text=f"{name}-b ")], is_last=False))
        if log is not None:
            log.append(name)
        return f"{name}-done"

    async def seq(name: str, delay: float = 0.0) -> str:
        """Sequential worker."""
        await trio.sleep(delay)
        if log is not None:
            log.append(name)
        return f"{name}-done"

    toolkit.register_function(conc, permission=ALLOW)
    toolkit.register_function(seq, permission=ALLOW, is_concurrency_safe=False)
    return toolkit


# -- behaviour 6: concurrent and mixed batches ----------------------------------------------------


async def test_concurrent_calls_interleave_between_model_calls(autojump_clock: Any) -> None:
    agent = make_agent(
        [
            calls(
                call("c1", "conc", name="one", delay=2.0),
                call("c2", "conc", name="two", delay=1.0),
            ),
            text("done"),
        ],
        sleepy_toolkit(),
    )
    start = trio.current_time()
    msg, events = await run(agent, user())
    # They ran together: 2 s of tool time, not 3.
    assert trio.current_time() - start == pytest.approx(2.0)
    assert msg.get_text_content() == "done"

    first_end = next(i for i, e in enumerate(events) if isinstance(e, ModelCallEndEvent))
    second_start = [i for i, e in enumerate(events) if isinstance(e, ModelCallStartEvent)][1]
    between = events[first_end + 1 : second_start]
    assert {str(e.type) for e in between} == RESULT_EVENTS
    for call_id in ("c1", "c2"):
        # Every event of each call lies in that window, in its own order.
        assert of_call(between, call_id) == [
            "TOOL_RESULT_START",
            "TOOL_RESULT_TEXT_DELTA",
            "TOOL_RESULT_TEXT_DELTA",
            "TOOL_RESULT_TEXT_DELTA",
            "TOOL_RESULT_END",
        ]
        assert of_call(events[second_start:], call_id) == []
    # They really interleaved: c2 finished while c1 was still running.
    order = [(str(e.type), e.tool_call_id) for e in between if isinstance(e, ToolResultEndEvent)]
    assert order == [("TOOL_RESULT_END", "c2"), ("TOOL_RESULT_END", "c1")]
    first_c1_delta = next(
        i for i, e in enumerate(between) if getattr(e, "tool_call_id", "") == "c1"
    )
    c2_end = next(
        i
        for i, e in enumerate(between)
        if isinstance(e, ToolResultEndEvent) and e.tool_call_id == "c2"
    )
    assert first_c1_delta < c2_end


async def test_concurrent_results_are_written_in_call_order(autojump_clock: Any) -> None:
    agent = make_agent(
        [
            calls(
                call("c1", "conc", name="slow", delay=5.0),
                call("c2", "conc", name="mid", delay=3.0),
                call("c3", "conc", name="fast", delay=1.0),
            ),
            text("done"),
        ],
        sleepy_toolkit(),
    )
    _, events = await run(agent, user())
    finished = [e.tool_call_id for e in events if isinstance(e, ToolResultEndEvent)]
    assert finished == ["c3", "c2", "c1"]  # completion order
    assert [r.id for r in results(agent)] == ["c1", "c2", "c3"]  # context order = call order
    assert output_text(result_of(agent, "c1")) == "slow-a slow-b slow-done"
    # The next model request carries the calls followed by their results, in call order.
    request = model_of(agent).requests[1]
    blocks = [b for m in request.messages for b in m.content]
    ids = [
        (type(b).__name__, b.id)
        for b in blocks
        if isinstance(b, ToolResultBlock) or type(b).__name__ == "ToolCallBlock"
    ]
    assert ids == [
        ("ToolCallBlock", "c1"),
        ("ToolCallBlock", "c2"),
        ("ToolCallBlock", "c3"),
        ("ToolResultBlock", "c1"),
        ("ToolResultBlock", "c2"),
        ("ToolResultBlock", "c3"),
    ]


async def test_mixed_batches_run_the_sequential_batch_first(autojump_clock: Any) -> None:
    log: list[str] = []
    agent = make_agent(
        [
            calls(
                call("s1", "seq", name="s1", delay=3.0),
                call("s2", "seq", name="s2", delay=1.0),
                call("c1", "conc", name="c1", delay=2.0),
                call("c2", "conc", name="c2", delay=1.0),
            ),
            text("done"),
        ],
        sleepy_toolkit(log),
    )
    start = trio.current_time()
    _, events = await run(agent, user())
    # 3 + 1 sequential seconds, then 2 concurrent seconds.
    assert trio.current_time() - start == pytest.approx(6.0)
    assert log == ["s1", "s2", "c2", "c1"]
    owners = [e.tool_call_id for e in events if str(e.type) in RESULT_EVENTS]  # type: ignore[union-attr]
    # The sequential calls' events come first and in order, not interleaved.
    assert owners[:6] == ["s1"] * 3 + ["s2"] * 3
    assert set(owners[6:]) == {"c1", "c2"}
    assert [r.id for r in results(agent)] == ["s1", "s2", "c1", "c2"]


async def test_sequential_batch_then_concurrent_batch_order_is_kept(autojump_clock: Any) -> None:
    """[conc, seq, conc] gives three batches; the middle call waits for the first."""
    log: list[str] = []
    agent = make_agent(
        [
            calls(
                call("c1", "conc", name="c1", delay=2.0),
                call("s1", "seq", name="s1", delay=0.5),
                call("c2", "conc", name="c2", delay=0.1),
            ),
            text("done"),
        ],
        sleepy_toolkit(log),
    )
    await run(agent, user())
    assert log == ["c1", "s1", "c2"]


# -- streaming -------------------------------------------------------------------------------------


async def test_tool_chunks_become_one_delta_each(autojump_clock: Any) -> None:
    toolkit = Toolkit()

    async def stream(emit: Any) -> None:
        """Streams."""
        for part in ("alpha ", "beta ", "gamma"):
            await emit(ToolChunk(content=[TextBlock(text=part)], is_last=False))
            await trio.sleep(0.1)
        await emit(
            ToolChunk(
                content=[DataBlock(source=Base64Source(data="aGk=", media_type="image/png"))],
                is_last=False,
            )
        )

    toolkit.register_function(stream, permission=ALLOW)
    agent = make_agent([calls(call("c1", "stream")), text("done")], toolkit)
    _, events = await run(agent, user())
    deltas = [e for e in events if isinstance(e, ToolResultTextDeltaEvent)]
    assert [d.delta for d in deltas] == ["alpha ", "beta ", "gamma"]
    data = [e for e in events if isinstance(e, ToolResultDataDeltaEvent)]
    assert [(d.media_type, d.data) for d in data] == [("image/png", "aGk=")]
    assert of_call(events, "c1") == [
        "TOOL_RESULT_START",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_DATA_DELTA",
        "TOOL_RESULT_END",
    ]
    # The final response is not re-emitted; the stored result is the accumulation.
    stored = result_of(agent, "c1")
    assert stored.state == ToolResultState.SUCCESS
    assert isinstance(stored.output, list)
    assert output_text(stored) == "alpha beta gamma"
    assert any(isinstance(b, DataBlock) for b in stored.output)


# -- bad calls become error results -----------------------------------------------------------------


async def test_bad_calls_become_error_results_the_model_reads() -> None:
    toolkit = Toolkit()

    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    async def explode() -> str:
        """Fails."""
        raise ValueError("boom")

    toolkit.register_function(add, permission=ALLOW)
    toolkit.register_function(explode, permission=ALLOW)
    agent = make_agent(
        [
            calls(
                call("u1", "nope"),
                ToolCallBlock(id="j1", name="add", input="[1, 2"),
                call("v1", "add", a=1),
                call("v2", "add", a="x", b=2),
                call("e1", "explode"),
                call("ok", "add", a=1, b=2),
            ),
            text("sorry"),
        ],
        toolkit,
    )
    msg, events = await run(agent, user())
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert msg.get_text_content() == "sorry"
    assert ends(events)[0].finished_reason == ReplyFinishedReason.COMPLETED

    assert "doesn't exist" in output_text(result_of(agent, "u1"))
    assert "nope" in output_text(result_of(agent, "u1"))
    assert "JSONDecodeError" in output_text(result_of(agent, "j1"))
    assert "[1, 2" in output_text(result_of(agent, "j1"))  # shows the model its arguments
    assert "Input validation failed for tool 'add'" in output_text(result_of(agent, "v1"))
    assert "Input validation failed for tool 'add'" in output_text(result_of(agent, "v2"))
    assert "boom" in output_text(result_of(agent, "e1"))
    for bad in ("u1", "j1", "v1", "v2", "e1"):
        assert result_of(agent, bad).state == ToolResultState.ERROR
        # Quick-path (or failing-tool) results still stream START / DELTA / END.
        assert of_call(events, bad)[0] == "TOOL_RESULT_START"
        assert of_call(events, bad)[-1] == "TOOL_RESULT_END"
    assert result_of(agent, "ok").state == ToolResultState.SUCCESS
    assert output_text(result_of(agent, "ok")) == "3"
    assert all(c.state == ToolCallState.FINISHED for c in tool_calls(agent).values())

    # The model reads the errors in its next request.
    request = model_of(agent).requests[1]
    seen = {b.id: b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)}
    assert set(seen) == {"u1", "j1", "v1", "v2", "e1", "ok"}
    assert seen["e1"].state == ToolResultState.ERROR
    assert "boom" in output_text(seen["e1"])


async def test_a_denied_call_does_not_run() -> None:
    ran: list[str] = []
    toolkit = Toolkit()

    async def forbidden() -> str:
        """Never allowed."""
        ran.append("forbidden")
        return "ran"

    toolkit.register_function(
        forbidden,
        permission=PermissionDecision(behavior=PermissionBehavior.DENY, message="not today"),
    )
    agent = make_agent([calls(call("d1", "forbidden")), text("ok")], toolkit)
    _, events = await run(agent, user())
    assert ran == []
    stored = result_of(agent, "d1")
    assert stored.state == ToolResultState.DENIED
    assert stored.output == "not today"
    assert of_call(events, "d1") == [
        "TOOL_RESULT_START",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_END",
    ]


# -- behaviours 8 and 9: interruption during tools --------------------------------------------------


async def test_interrupt_during_slow_sequential_tool(autojump_clock: Any) -> None:
    agent = make_agent(
        [calls(call("s1", "seq", name="s1", delay=10.0), call("s2", "seq", name="s2"))],
        sleepy_toolkit(),
    )
    msg, events = await run_and_interrupt(agent, user(), after=1.0)
    assert msg is not None
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert msg.get_text_content() == agent.react_config.interruption_message
    assert isinstance(events[-1], ReplyEndEvent)
    assert events[-1].finished_reason == ReplyFinishedReason.INTERRUPTED
    assert len(ends(events)) == 1
    running = result_of(agent, "s1")
    assert running.state == ToolResultState.INTERRUPTED
    assert isinstance(running.output, list)
    assert [b.text for b in running.output if isinstance(b, TextBlock)] == [INTERRUPTED_TEXT]
    # The later call never ran; the cleanup closed it with a str output.
    later = result_of(agent, "s2")
    assert later.state == ToolResultState.INTERRUPTED
    assert later.output == INTERRUPTED_TEXT
    assert [r.id for r in results(agent)] == ["s1", "s2"]
    assert all(c.state == ToolCallState.FINISHED for c in tool_calls(agent).values())
    assert of_call(events, "s1").count("TOOL_RESULT_START") == 1
    assert of_call(events, "s2").count("TOOL_RESULT_START") == 1
    assert len(model_of(agent).requests) == 1


async def test_outer_cancel_during_slow_sequential_tool_propagates(autojump_clock: Any) -> None:
    agent = make_agent([calls(call("s1", "seq", name="s1", delay=10.0))], sleepy_toolkit())
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    with trio.move_on_after(1.0) as scope:
        await agent.reply(user(), on_event=record)
    assert scope.cancelled_caught  # trio.Cancelled propagated out of reply()
    assert isinstance(events[-1], ReplyEndEvent)
    assert events[-1].finished_reason == ReplyFinishedReason.INTERRUPTED
    assert result_of(agent, "s1").state == ToolResultState.INTERRUPTED
    assert isinstance(result_of(agent, "s1").output, list)


async def test_interrupt_during_two_slow_concurrent_tools(autojump_clock: Any) -> None:
    agent = make_agent(
        [
            calls(
                call("c1", "conc", name="one", delay=10.0),
                call("c2", "conc", name="two", delay=20.0),
            )
        ],
        sleepy_toolkit(),
    )
    msg, events = await run_and_interrupt(agent, user(), after=1.0)
    assert msg is not None
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert [r.id for r in results(agent)] == ["c1", "c2"]
    for call_id in ("c1", "c2"):
        stored = result_of(agent, call_id)
        assert stored.state == ToolResultState.INTERRUPTED
        assert isinstance(stored.output, list)
        assert [b.text for b in stored.output if isinstance(b, TextBlock)] == [INTERRUPTED_TEXT]
        assert of_call(events, call_id) == [
            "TOOL_RESULT_START",
            "TOOL_RESULT_TEXT_DELTA",  # the chunk streamed before the sleep
            "TOOL_RESULT_TEXT_DELTA",  # the interrupt text
            "TOOL_RESULT_END",
        ]
        end = [e for e in events if isinstance(e, ToolResultEndEvent) and e.tool_call_id == call_id]
        assert end[0].state == ToolResultState.INTERRUPTED
    assert kinds(events)[-1] == "REPLY_END"
    assert events[-1].finished_reason == ReplyFinishedReason.INTERRUPTED  # type: ignore[union-attr]
    assert len(ends(events)) == 1


async def test_interrupt_in_concurrent_batch_closes_the_later_batch(autojump_clock: Any) -> None:
    agent = make_agent(
        [
            calls(
                call("c1", "conc", name="one", delay=10.0),
                call("s1", "seq", name="s1"),
            )
        ],
        sleepy_toolkit(),
    )
    _, events = await run_and_interrupt(agent, user(), after=1.0)
    assert isinstance(result_of(agent, "c1").output, list)
    assert result_of(agent, "s1").output == INTERRUPTED_TEXT
    assert [r.id for r in results(agent)] == ["c1", "s1"]
    assert len(ends(events)) == 1


# -- on_acting and updated_input ---------------------------------------------------------------------


class ReplaceInput(MiddlewareBase):
    """Rewrites the call's arguments and records what it sees."""

    def __init__(self) -> None:
        self.seen_kwargs: list[set[str]] = []
        self.items: list[str] = []

    async def on_acting(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: Any, emit: Any
    ) -> None:
        self.seen_kwargs.append(set(input_kwargs))
        original = input_kwargs["tool_call"]
        replaced = copy.deepcopy(original)
        replaced.input = '{"value": "from-middleware"}'

        async def sink(item: Any) -> None:
            self.items.append(type(item).__name__)
            await emit(item)

        await next_handler(sink, tool_call=replaced)


async def test_on_acting_replaces_the_input_and_wraps_only_execution() -> None:
    received: list[str] = []
    toolkit = Toolkit()

    async def echo(value: str) -> str:
        """Echo."""
        received.append(value)
        return f"echo:{value}"

    async def forbidden(value: str) -> str:
        """Denied."""
        received.append("forbidden ran")
        return value

    toolkit.register_function(echo, permission=ALLOW)
    toolkit.register_function(
        forbidden, permission=PermissionDecision(behavior=PermissionBehavior.DENY, message="no")
    )
    middleware = ReplaceInput()
    agent = make_agent(
        [
            calls(
                call("e1", "echo", value="from-model"),
                call("d1", "forbidden", value="x"),
                call("u1", "missing"),
            ),
            text("done"),
        ],
        toolkit,
        middlewares=[middleware],
    )
    _, events = await run(agent, user())
    assert received == ["from-middleware"]
    assert output_text(result_of(agent, "e1")) == "echo:from-middleware"
    # Only the executed call went through on_acting: not the denied one, not the unknown one.
    assert middleware.seen_kwargs == [{"tool_call"}]
    assert middleware.items == ["ToolChunk", "ToolResponse"]
    # Events are the agent's (START before on_acting, END after), one set per call.
    assert of_call(events, "e1") == [
        "TOOL_RESULT_START",
        "TOOL_RESULT_TEXT_DELTA",
        "TOOL_RESULT_END",
    ]
    # The context keeps the model's original call.
    assert tool_calls(agent)["e1"].input == '{"value": "from-model"}'


class ReplaceResponse(MiddlewareBase):
    async def on_acting(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: Any, emit: Any
    ) -> None:
        async def drop(item: Any) -> None:
            pass

        await next_handler(drop)
        await emit(ToolResponse(content=[TextBlock(text="replaced")], metadata={"k": 1}))


async def test_on_acting_can_replace_the_response() -> None:
    toolkit = Toolkit()

    async def echo(value: str) -> str:
        """Echo."""
        return value

    toolkit.register_function(echo, permission=ALLOW)
    agent = make_agent(
        [calls(call("e1", "echo", value="v")), text("done")],
        toolkit,
        middlewares=[ReplaceResponse()],
    )
    _, events = await run(agent, user())
    stored = result_of(agent, "e1")
    assert output_text(stored) == "replaced"
    assert stored.metadata == {"k": 1}
    end = next(e for e in events if isinstance(e, ToolResultEndEvent))
    assert end.metadata == {"k": 1}
    assert not [e for e in events if isinstance(e, ToolResultTextDeltaEvent)]


class UpdateInput(MiddlewareBase):
    async def on_check_permission(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: Any
    ) -> PermissionDecision:
        decision = await next_handler()
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message=f"rewritten ({decision.behavior})",
            updated_input={"value": "sanitized"},
        )


async def test_permission_updated_input_is_what_the_tool_runs_with() -> None:
    received: list[str] = []
    toolkit = Toolkit()

    async def echo(value: str) -> str:
        """Echo."""
        received.append(value)
        return value

    toolkit.register_function(echo)  # no permission: the engine would ASK
    agent = make_agent(
        [calls(call("e1", "echo", value="rm -rf /")), text("done")],
        toolkit,
        middlewares=[UpdateInput()],
    )
    msg, _ = await run(agent, user())
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert received == ["sanitized"]
    assert output_text(result_of(agent, "e1")) == "sanitized"


async def test_allow_rule_updated_input_keeps_the_model_input() -> None:
    from trioagent.permission import PermissionRule

    received: list[str] = []
    toolkit = Toolkit()

    async def echo(value: str) -> str:
        """Echo."""
        received.append(value)
        return value

    toolkit.register_function(echo)
    agent = make_agent([calls(call("e1", "echo", value="v")), text("done")], toolkit)
    agent.permission_engine.add_rule(
        PermissionRule(tool_name="echo", behavior=PermissionBehavior.ALLOW)
    )
    await run(agent, user())
    assert received == ["v"]


async def test_a_forwarded_permission_input_never_reaches_the_execution() -> None:
    """As in AgentScope, a middleware's forwarded replacement input reaches the engine, whose
    allow rule echoes it back as ``updated_input`` -- the tool still runs the model's input."""
    from trioagent.permission import PermissionRule

    received: list[str] = []
    seen_by_engine: list[Any] = []
    toolkit = Toolkit()

    async def echo(value: str) -> str:
        """Echo."""
        received.append(value)
        return value

    class Forward(MiddlewareBase):
        async def on_check_permission(self, agent, input_kwargs, next_handler):
            decision = await next_handler(tool_input={"value": "from-middleware"})
            seen_by_engine.append(decision.behavior)
            return decision

    toolkit.register_function(echo)
    agent = make_agent(
        [calls(call("e1", "echo", value="from-model")), text("done")],
        toolkit,
        middlewares=[Forward()],
    )
    agent.permission_engine.add_rule(
        PermissionRule(tool_name="echo", behavior=PermissionBehavior.ALLOW)
    )
    await run(agent, user())
    assert seen_by_engine == [PermissionBehavior.ALLOW]
    assert received == ["from-model"]


async def test_a_tools_own_updated_input_is_honoured() -> None:
    """An ALLOW carrying a new input (here the tool's own check) runs the tool with that input."""
    received: list[str] = []

    class Normalizing(ToolBase):
        name = "norm"
        description = "Normalize."
        input_schema = {"type": "object", "properties": {"value": {"type": "string"}}}  # noqa: RUF012

        async def check_permissions(self, tool_input, context):
            return PermissionDecision(
                behavior="allow",
                message="ok",
                updated_input={"value": tool_input["value"].upper()},
            )

        async def call(self, emit, /, **kwargs):
            received.append(kwargs["value"])
            return ToolChunk(content=[TextBlock(text="done")])

    toolkit = Toolkit()
    toolkit.add_tool(Normalizing())
    agent = make_agent([calls(call("n1", "norm", value="abc")), text("ok")], toolkit)
    await run(agent, user())
    assert received == ["ABC"]


async def test_tool_error_in_concurrent_batch_does_not_cancel_siblings(
    autojump_clock: Any,
) -> None:
    toolkit = sleepy_toolkit()

    async def fail_fast() -> str:
        """Fails at once."""
        raise RuntimeError("early failure")

    toolkit.register_function(fail_fast, permission=ALLOW)
    agent = make_agent(
        [
            calls(call("f1", "fail_fast"), call("c1", "conc", name="one", delay=3.0)),
            text("done"),
        ],
        toolkit,
    )
    msg, _ = await run(agent, user())
    assert msg.finished_reason == ReplyFinishedReason.COMPLETED
    assert result_of(agent, "f1").state == ToolResultState.ERROR
    assert result_of(agent, "c1").state == ToolResultState.SUCCESS
    assert output_text(result_of(agent, "c1")) == "one-a one-b one-done"


async def test_developer_error_in_concurrent_batch_ends_the_reply_after_siblings(
    autojump_clock: Any,
) -> None:
    toolkit = sleepy_toolkit()

    async def misconfigured() -> str:
        """Raises a developer error."""
        raise DeveloperOrientedException("the tool is misconfigured")

    toolkit.register_function(misconfigured, permission=ALLOW)
    agent = make_agent(
        [calls(call("m1", "misconfigured"), call("c1", "conc", name="one", delay=3.0))],
        toolkit,
    )
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    start = trio.current_time()
    with pytest.raises(DeveloperOrientedException, match="misconfigured"):
        await agent.reply(user(), on_event=record)
    # The sibling was not cancelled: it ran to completion first.
    assert trio.current_time() - start == pytest.approx(3.0)
    assert result_of(agent, "c1").state == ToolResultState.SUCCESS
    # The failing call still has exactly one result, and the reply one ERROR end, last.
    assert result_of(agent, "m1").state == ToolResultState.INTERRUPTED
    assert isinstance(events[-1], ReplyEndEvent)
    assert events[-1].finished_reason == ReplyFinishedReason.ERROR
    assert len(ends(events)) == 1
    check_reply_rules(agent.state, agent.name, events)


# -- a response cut off at the output limit ---------------------------------------------------


@pytest.mark.parametrize(
    ("finish_reason", "expected", "refusal"),
    [
        ("length", "max_tokens", "output limit"),
        ("content_filter", "content_filter", "content filter"),
    ],
)
async def test_a_tool_call_cut_off_at_the_output_limit_never_runs_over_http(
    finish_reason: str, expected: str, refusal: str
) -> None:
    """OpenAI ``finish_reason: "length"`` (or a content filter's ``"content_filter"``) in the
    middle of ``{"city": "Par``: the call is answered with an error result the model reads,
    the tool never runs (not on a repaired ``{"city": "Par"}``), and the context stays
    consistent and round-trips."""
    from provider_kit import lookup_agent, start_server

    from trioagent import serialization
    from trioagent.agent import AgentState
    from trioagent.agent._reasoning import CUT_OFF_TEXT, FILTERED_TEXT
    from trioagent.testing import ScriptedReply, ScriptedToolCall
    from trioagent.types import FinishedReason

    text_of_result = {"length": CUT_OFF_TEXT, "content_filter": FILTERED_TEXT}[finish_reason]
    seen: list[str] = []
    events: list[Any] = []

    async def on_event(event: Any) -> None:
        events.append(event)

    async with trio.open_nursery() as nursery:
        server = await start_server(nursery)
        cut = ScriptedToolCall("lookup", '{"city": "Par', id="call_cut")
        server.push(ScriptedReply(tool_calls=[cut], finish_reason=finish_reason), "Sorry, again?")
        async with server.chat_model(max_retries=0) as model:
            agent = lookup_agent(model, seen)
            final = await agent.reply(user("weather?"), on_event=on_event)
        nursery.cancel_scope.cancel()

    assert seen == []
    assert "".join(b.text for b in final.content if isinstance(b, TextBlock)) == "Sorry, again?"
    [end_of_cut, _] = [e for e in events if isinstance(e, ModelCallEndEvent)]
    assert end_of_cut.finished_reason == FinishedReason(expected)
    [result] = results(agent)
    assert (result.id, result.state, result.output) == ("call_cut", "error", text_of_result)
    assert "was not run" in text_of_result
    assert refusal in text_of_result
    assert tool_calls(agent)["call_cut"].state == ToolCallState.FINISHED
    # The model saw the error result with its call in the next request.
    second = server.requests[1].body
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("call_cut", text_of_result)
    ]
    check_reply_rules(agent.state, agent.name, events)
    state = serialization.loads(serialization.dumps(agent.state), AgentState)
    assert serialization.dumps(state) == serialization.dumps(agent.state)


def recording_lookup(ran: list[str]) -> Toolkit:
    """A toolkit whose allowed ``lookup(city)`` records each city it runs with in ``ran``."""

    async def lookup(city: str) -> str:
        """Look up.

        Args:
            city: the city.
        """
        ran.append(city)
        return city

    toolkit = Toolkit()
    toolkit.register_function(lookup, permission=ALLOW)
    return toolkit


async def test_no_tool_call_of_a_cut_off_response_runs_and_each_gets_one_result() -> None:
    """A scripted response marked ``MAX_TOKENS`` with two calls: neither runs, each gets
    exactly one error result, written with the calls (before MODEL_CALL_END is emitted)."""
    from trioagent.agent._reasoning import CUT_OFF_TEXT
    from trioagent.model import ChatResponse
    from trioagent.testing import tool_call_chunks
    from trioagent.types import FinishedReason

    ran: list[str] = []
    toolkit = recording_lookup(ran)
    cut = [
        *tool_call_chunks("c1", "lookup", '{"city": "Paris"}'),
        *tool_call_chunks("c2", "lookup", '{"city": "Lo'),
        ChatResponse(content=[], is_last=False, finished_reason=FinishedReason.MAX_TOKENS),
    ]
    agent = make_agent([cut, text("ok")], toolkit=toolkit)
    _, events = await run(agent, user("go"))

    assert ran == []
    assert [(r.id, r.state, r.output) for r in results(agent)] == [
        ("c1", "error", CUT_OFF_TEXT),
        ("c2", "error", CUT_OFF_TEXT),
    ]
    check_reply_rules(agent.state, agent.name, events)


@pytest.mark.parametrize("reason", ["max_tokens", "content_filter"])
@pytest.mark.parametrize("mode", ["interrupt", "outer"])
async def test_cancel_sweep_over_a_cut_off_response(
    mode: str, reason: str, autojump_clock: Any
) -> None:
    """Cancelled at every point of a reply whose response is cut off at the output limit:
    one end event, every call exactly one result, the state round-trips, the tool never
    runs."""
    from trioagent.model import ChatResponse
    from trioagent.testing import ScriptedModel, cancel_sweep, tool_call_chunks
    from trioagent.types import FinishedReason

    ran: list[str] = []

    def build() -> Any:
        toolkit = recording_lookup(ran)
        cut = [
            *tool_call_chunks("c1", "lookup", '{"city": ', '"Pa'),
            ChatResponse(content=[], is_last=False, finished_reason=FinishedReason(reason)),
        ]
        agent = make_agent([], toolkit=toolkit)
        agent.model = ScriptedModel([cut, text("ok")], chunk_delay=0.1)
        return agent

    report = await cancel_sweep(build, lambda: user("go"), mode=mode)
    assert report.points >= 3
    assert ran == []


# -- the fast path: one validation, a batch of one inline -------------------------------------


class _CountingToolkit(Toolkit):
    """Counts how often a call's arguments are parsed and validated."""

    def __init__(self) -> None:
        super().__init__()
        self.validations = 0

    def validate_call(self, tool_call: Any, activated_groups: Any = None) -> Any:
        self.validations += 1
        return super().validate_call(tool_call, activated_groups)


async def test_a_call_is_parsed_and_validated_once() -> None:
    toolkit = _CountingToolkit()
    seen: list[dict[str, Any]] = []

    async def echo(value: str, count: int = 1) -> str:
        """Echo."""
        seen.append({"value": value, "count": count})
        return value * count

    toolkit.register_function(echo, permission=ALLOW)
    agent = make_agent([calls(call("c1", "echo", value="ab", count=2)), text("done")], toolkit)
    await run(agent, user("go"))
    assert toolkit.validations == 1
    assert seen == [{"value": "ab", "count": 2}]
    assert output_text(result_of(agent, "c1")) == "abab"


async def test_a_call_replaced_by_a_middleware_is_validated_again() -> None:
    toolkit = _CountingToolkit()

    async def echo(value: str) -> str:
        """Echo."""
        return value

    toolkit.register_function(echo, permission=ALLOW)

    class Replace(MiddlewareBase):
        async def on_acting(
            self, agent: Any, input_kwargs: Any, next_handler: Any, emit: Any
        ) -> None:
            replaced = copy.copy(input_kwargs["tool_call"])
            replaced.input = '{"value": "replaced"}'
            await next_handler(emit, tool_call=replaced)

    agent = make_agent(
        [calls(call("c1", "echo", value="ok")), text("done")], toolkit, middlewares=[Replace()]
    )
    await run(agent, user("go"))
    assert toolkit.validations == 2
    assert output_text(result_of(agent, "c1")) == "replaced"


async def test_a_batch_of_one_runs_in_the_reply_task() -> None:
    toolkit = Toolkit()
    tasks: list[trio.lowlevel.Task] = []

    async def where() -> str:
        """Record the task."""
        tasks.append(trio.lowlevel.current_task())
        return "here"

    toolkit.register_function(where, permission=ALLOW)
    agent = make_agent([calls(call("c1", "where")), text("done")], toolkit)
    await run(agent, user("go"))
    assert tasks == [trio.lowlevel.current_task()]

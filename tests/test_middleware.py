"""The middleware chain (trioagent/middleware/_base.py and _chain.py) as the agent wires it:
hook order, the kwargs merge rule and swallowing REPLY_END as in AgentScope, and the examples of
AgentScope's middleware guide ("自定义中间件" / "实用示例") adapted to trioagent's emit-callback
hooks."""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from agent_helpers import (
    ALLOW,
    Recorder,
    assert_paired,
    kinds,
    make_agent,
    sequential_toolkit,
    user,
)

from trioagent.agent import ContextConfig, ReActConfig
from trioagent.event import (
    CustomEvent,
    ReplyEndEvent,
    TextBlockDeltaEvent,
    ThinkingBlockDeltaEvent,
)
from trioagent.message import HintBlock, Msg, TextBlock, ToolResultBlock, UserMsg
from trioagent.middleware import MiddlewareBase, NextHandler
from trioagent.model import ChatResponse
from trioagent.permission import PermissionDecision
from trioagent.testing import ScriptedModel, text_chunks, thinking_chunks, tool_call_chunks
from trioagent.tool import ToolChunk, Toolkit, ToolResponse
from trioagent.types import ReplyFinishedReason, ToolChoice

STREAMING = ("on_reply", "on_reasoning", "on_acting", "on_model_call")


def _echo(x: str) -> str:
    """Echo.

    Args:
        x: the value.
    """
    return f"echo {x}"


def tool_round_steps() -> list[Any]:
    return [tool_call_chunks("c1", "_echo", '{"x": "1"}'), text_chunks("done")]


def item_label(item: Any) -> str:
    if isinstance(item, Msg):
        return "MSG"
    if isinstance(item, ChatResponse):
        return "LAST" if item.is_last else "DELTA"
    return type(item).__name__ if not hasattr(item, "type") else str(item.type)


# -- is_implemented and zero cost ---------------------------------------------------------------


class OnlyModelCall(MiddlewareBase):
    async def on_model_call(self, agent, input_kwargs, next_handler, emit):
        await next_handler()


class OnlyPrompt(MiddlewareBase):
    async def on_system_prompt(self, agent, current_prompt):
        return current_prompt


def test_is_implemented():
    mw = OnlyModelCall()
    assert mw.is_implemented("on_model_call")
    for hook in (*STREAMING[:3], "on_check_permission", "on_compress_context", "on_system_prompt"):
        assert not mw.is_implemented(hook), hook
    assert not mw.is_implemented("list_tools")
    assert OnlyPrompt().is_implemented("on_system_prompt")
    with pytest.raises(ValueError, match="unknown middleware hook"):
        mw.is_implemented("on_everything")


async def test_defaults_of_list_tools_and_middleware_key():
    assert await OnlyModelCall().list_tools() == []
    assert await OnlyModelCall().get_middleware_key() == "OnlyModelCall"


async def test_base_hooks_raise_when_called():
    mw = MiddlewareBase()
    with pytest.raises(RuntimeError, match="not implemented"):
        await mw.on_reply(None, {}, None, None)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="not implemented"):
        await mw.on_system_prompt(None, "")


async def test_unimplemented_hooks_are_not_in_the_chain():
    agent, _ = make_agent([text_chunks("ok")], middlewares=[OnlyModelCall(), OnlyPrompt()])
    # The base methods (which raise) are never called: only implemented hooks are layers.
    assert (await agent.reply(user())).get_text_content() == "ok"


# -- onion order ----------------------------------------------------------------------------------


class Tracer(MiddlewareBase):
    """Logs pre, every item and post for each streaming hook."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def _trace(self, hook: str, next_handler: NextHandler, emit: Any) -> None:
        self.log.append(f"{self.name}.{hook}.pre")

        async def sink(item: Any) -> None:
            self.log.append(f"{self.name}.{hook}.item:{item_label(item)}")
            await emit(item)

        await next_handler(sink)
        self.log.append(f"{self.name}.{hook}.post")

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        await self._trace("reply", next_handler, emit)

    async def on_reasoning(self, agent, input_kwargs, next_handler, emit):
        await self._trace("reasoning", next_handler, emit)

    async def on_acting(self, agent, input_kwargs, next_handler, emit):
        await self._trace("acting", next_handler, emit)

    async def on_model_call(self, agent, input_kwargs, next_handler, emit):
        await self._trace("model_call", next_handler, emit)


@pytest.mark.parametrize("hook", ["reply", "reasoning", "acting", "model_call"])
async def test_onion_order_for_every_streaming_hook(hook):
    log: list[str] = []
    agent, _ = make_agent(
        tool_round_steps(),
        toolkit=sequential_toolkit(_echo),
        middlewares=[Tracer("mw1", log), Tracer("mw2", log)],
    )
    await agent.reply(user())
    mine = [entry for entry in log if f".{hook}." in entry]
    # Every invocation of the hook: mw1 pre, mw2 pre, (mw2 item, mw1 item)*, mw2 post, mw1 post.
    invocations: list[list[str]] = []
    for entry in mine:
        if entry == f"mw1.{hook}.pre":
            invocations.append([])
        invocations[-1].append(entry)
    assert invocations, hook
    for inv in invocations:
        assert inv[:2] == [f"mw1.{hook}.pre", f"mw2.{hook}.pre"]
        assert inv[-2:] == [f"mw2.{hook}.post", f"mw1.{hook}.post"]
        items = inv[2:-2]
        assert items, "each invocation carries items"
        assert len(items) % 2 == 0
        for inner, outer in zip(items[::2], items[1::2], strict=True):
            assert inner.startswith(f"mw2.{hook}.item:")
            assert outer == inner.replace("mw2.", "mw1.")
    if hook == "reply":
        # REPLY_END before the Msg, then the post-logic.
        labels = [e.split("item:")[1] for e in mine if e.startswith("mw1.reply.item:")]
        assert labels[-2:] == ["REPLY_END", "MSG"]
        assert labels[0] == "REPLY_START"
    if hook == "acting":
        labels = [e.split("item:")[1] for e in mine if e.startswith("mw1.acting.item:")]
        assert labels[-1] == "ToolResponse"
    if hook == "model_call":
        labels = [
            e.split("item:")[1] for e in invocations[0] if e.startswith("mw1.model_call.item")
        ]
        assert labels[-1] == "LAST"
        assert labels.count("LAST") == 1


async def test_system_prompt_transformers_apply_left_to_right():
    class Append(MiddlewareBase):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        async def on_system_prompt(self, agent, current_prompt):
            return f"{current_prompt}[{self.tag}]"

    agent, model = make_agent([text_chunks("ok")], middlewares=[Append("1"), Append("2")])
    await agent.reply(user())
    system = model.requests[0].messages[0]
    assert system.role == "system"
    assert system.get_text_content() == "You are a helpful assistant.[1][2]"
    assert agent.system_prompt == "You are a helpful assistant."  # not mutated


# -- the kwargs merge rule: outer overrides reach the model -------------------------------------


class ReplaceInputs(MiddlewareBase):
    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        await next_handler(inputs=UserMsg("user", "replaced by the outer layer"))


class EmitAfterTheEnd(MiddlewareBase):
    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        await next_handler()
        await emit(CustomEvent(reply_id="late", name="too-late"))


async def test_an_item_emitted_after_the_end_is_dropped_and_logged(caplog):
    agent, _ = make_agent([text_chunks("ok")], middlewares=[EmitAfterTheEnd()])
    rec = Recorder()
    with caplog.at_level(logging.WARNING, logger="trioagent"):
        msg = await agent.reply(user(), on_event=rec)
    assert msg.get_text_content() == "ok"
    assert rec.types[-1] == "REPLY_END"
    assert "CUSTOM" not in rec.types
    assert "dropping CustomEvent emitted after the reply's end event" in caplog.text


class ForwardAll(MiddlewareBase):
    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        await next_handler()


class ForwardPartial(MiddlewareBase):
    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        assert input_kwargs["inputs"].get_text_content() == "replaced by the outer layer"
        await next_handler(structured_schema=None)


class MutateInPlace(MiddlewareBase):
    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        input_kwargs["inputs"] = UserMsg("user", "mutated in place")
        await next_handler()


@pytest.mark.parametrize("inner", [ForwardAll, ForwardPartial])
async def test_outer_replacement_survives_an_inner_forward(inner):
    agent, model = make_agent([text_chunks("ok")], middlewares=[ReplaceInputs(), inner()])
    await agent.reply(user("original"))
    assert model.requests[0].messages[-1].get_text_content() == "replaced by the outer layer"
    assert [m.get_text_content() for m in agent.state.context] == [
        "replaced by the outer layer",
        "ok",
    ]


async def test_in_place_mutation_then_next_handler():
    agent, model = make_agent([text_chunks("ok")], middlewares=[MutateInPlace(), ForwardAll()])
    await agent.reply(user("original"))
    assert model.requests[0].messages[-1].get_text_content() == "mutated in place"


async def test_model_call_messages_replaced_outside_and_partial_override_inside():
    class ReplaceMessages(MiddlewareBase):
        async def on_model_call(self, agent, input_kwargs, next_handler, emit):
            msgs = [*input_kwargs["messages"], UserMsg("user", "extra from outer")]
            await next_handler(messages=msgs)

    class OverrideChoice(MiddlewareBase):
        async def on_model_call(self, agent, input_kwargs, next_handler, emit):
            await next_handler(tool_choice=ToolChoice(mode="required"))

    agent, model = make_agent(
        [text_chunks("ok")],
        middlewares=[ReplaceMessages(), OverrideChoice()],
        toolkit=sequential_toolkit(_echo),
    )
    await agent.reply(user())
    request = model.requests[0]
    assert request.messages[-1].get_text_content() == "extra from outer"
    assert request.tool_choice == ToolChoice(mode="required")
    # The agent's own context is untouched by a per-call message replacement.
    assert "extra from outer" not in [m.get_text_content() for m in agent.state.context]


async def test_on_reasoning_tool_choice_none_reaches_the_model():
    class NoTools(MiddlewareBase):
        async def on_reasoning(self, agent, input_kwargs, next_handler, emit):
            await next_handler(tool_choice=ToolChoice(mode="none"))

    agent, model = make_agent(
        [text_chunks("ok")], middlewares=[NoTools()], toolkit=sequential_toolkit(_echo)
    )
    await agent.reply(user())
    assert model.requests[0].tool_choice == ToolChoice(mode="none")
    assert model.requests[0].tools  # the tools are still listed


async def test_on_acting_replacing_the_call_input_changes_what_the_tool_gets():
    received: list[str] = []

    def tool(x: str) -> str:
        """Record.

        Args:
            x: the value.
        """
        received.append(x)
        return f"got {x}"

    class Rewrite(MiddlewareBase):
        async def on_acting(self, agent, input_kwargs, next_handler, emit):
            call = input_kwargs["tool_call"]
            await next_handler(tool_call=attrs.evolve(call, input=json.dumps({"x": "new"})))

    agent, _ = make_agent(
        [tool_call_chunks("c1", "tool", '{"x": "old"}'), text_chunks("ok")],
        middlewares=[Rewrite()],
        toolkit=sequential_toolkit(tool),
    )
    await agent.reply(user())
    assert received == ["new"]
    reply_msg = agent.state.context[-1]
    call = next(b for b in reply_msg.content if b.type == "tool_call")
    result = next(b for b in reply_msg.content if isinstance(b, ToolResultBlock))
    assert json.loads(call.input) == {"x": "old"}  # the stored call is unchanged
    assert (result.id, result.name) == ("c1", "tool")
    assert result.output[0].text == "got new"  # type: ignore[index,union-attr]


async def test_on_acting_without_a_response_is_an_error():
    class Swallow(MiddlewareBase):
        async def on_acting(self, agent, input_kwargs, next_handler, emit):
            async def sink(item):
                if not isinstance(item, ToolResponse):
                    await emit(item)

            await next_handler(sink)

    agent, _ = make_agent(
        [tool_call_chunks("c1", "_echo", '{"x": "1"}')],
        middlewares=[Swallow()],
        toolkit=sequential_toolkit(_echo),
    )
    rec = Recorder()
    with pytest.raises(RuntimeError, match="without a ToolResponse"):
        await agent.reply(user(), on_event=rec)
    assert rec.ends[-1].finished_reason == "error"
    assert_paired(agent.state.context)  # the call still got a (closing) result


# -- observe / replace / drop / inject -----------------------------------------------------------


class Rewriter(MiddlewareBase):
    """Upper-cases text deltas, drops thinking deltas, injects a custom event before the end."""

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        seen: list[str] = []

        async def sink(item):
            seen.append(item_label(item))
            if isinstance(item, TextBlockDeltaEvent):
                await emit(attrs.evolve(item, delta=item.delta.upper()))
            elif isinstance(item, ThinkingBlockDeltaEvent):
                return
            elif isinstance(item, ReplyEndEvent):
                await emit(
                    CustomEvent(reply_id=item.reply_id, name="stats", value={"seen": len(seen)})
                )
                await emit(item)
            else:
                await emit(item)

        await next_handler(sink)


async def test_observe_replace_drop_and_inject_items():
    agent, _ = make_agent(
        [[*thinking_chunks("private"), *text_chunks("hello ", "world")]],
        middlewares=[Rewriter()],
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert "THINKING_BLOCK_DELTA" not in rec.types
    assert "THINKING_BLOCK_START" in rec.types
    deltas = [e.delta for e in rec.events if isinstance(e, TextBlockDeltaEvent)]
    assert deltas == ["HELLO ", "WORLD"]
    assert rec.types[-2:] == ["CUSTOM", "REPLY_END"]
    custom = rec.events[-2]
    assert custom.name == "stats"
    # The sink saw every event the consumer got (but the injected one) plus the dropped delta.
    assert custom.value["seen"] == len(rec.events)
    # Events are presentation: the final Msg and the context keep the model's text.
    assert msg.get_text_content() == "hello world"


async def test_short_circuit_skips_the_inner_layers():
    class Canned(MiddlewareBase):
        async def on_model_call(self, agent, input_kwargs, next_handler, emit):
            await emit(ChatResponse(content=[TextBlock(text="canned")]))

    agent, model = make_agent([], middlewares=[Canned()])
    msg = await agent.reply(user())
    assert msg.get_text_content() == "canned"
    assert model.requests == []


# -- next_handler.stream() ------------------------------------------------------------------------


class Puller(MiddlewareBase):
    """Forwards everything through the pull-style ``next_handler.stream()``."""

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        async with next_handler.stream() as items:
            async for item in items:
                await emit(item)


class PullerReasoning(MiddlewareBase):
    async def on_reasoning(self, agent, input_kwargs, next_handler, emit):
        async with next_handler.stream() as items:
            async for item in items:
                await emit(item)


async def test_pull_stream_delivers_the_same_items_as_the_callback_form():
    def steps():
        return [
            [*thinking_chunks("t"), *text_chunks("a"), *tool_call_chunks("c1", "_echo", "{}")],
            text_chunks("b", "c"),
        ]

    def run(middlewares):
        return make_agent(steps(), middlewares=middlewares, toolkit=sequential_toolkit(_echo))

    callback_agent, _ = run([ForwardAll()])
    pull_agent, _ = run([Puller(), PullerReasoning()])
    cb, pl = Recorder(), Recorder()
    cb_msg = await callback_agent.reply(user(), on_event=cb)
    pl_msg = await pull_agent.reply(user(), on_event=pl)
    assert pl.types == cb.types
    assert pl_msg.get_text_content() == cb_msg.get_text_content() == "bc"


async def test_pull_stream_delivers_the_interrupted_end(autojump_clock):
    agent, _ = make_agent(
        model=ScriptedModel([text_chunks("a", "b", "c", "d")], chunk_delay=1.0),
        middlewares=[Puller()],
    )
    rec = Recorder()
    async with trio.open_nursery() as nursery:

        async def interrupt_later():
            await trio.sleep(2.5)
            agent.interrupt()

        nursery.start_soon(interrupt_later)
        msg = await agent.reply(user(), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert len(rec.ends) == 1
    assert rec.types[-1] == "REPLY_END"
    assert rec.ends[0].finished_reason == "interrupted"
    assert "TEXT_BLOCK_DELTA" in rec.types


class IdleTimeout(MiddlewareBase):
    """Races the inner stream against an idle timer (the reason the pull form exists)."""

    def __init__(self, idle: float) -> None:
        self.idle = idle

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        async with next_handler.stream() as items:
            while True:
                with trio.move_on_after(self.idle):
                    try:
                        item = await items.receive()
                    except trio.EndOfChannel:
                        return
                    await emit(item)
                    continue
                return  # idle too long: leaving the block cancels the inner layers


async def test_idle_timeout_middleware_interrupts_a_stalled_reply(autojump_clock):
    model = ScriptedModel([text_chunks("a", "b", "c")], chunk_delay=5.0)
    agent, _ = make_agent(model=model, middlewares=[IdleTimeout(idle=3.0)])
    rec = Recorder()
    start = trio.current_time()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert msg.get_text_content() == agent.react_config.interruption_message
    assert rec.types == ["REPLY_START", "MODEL_CALL_START", "MODEL_CALL_END", "REPLY_END"]
    assert rec.events[2].finished_reason == "interrupted"
    assert rec.ends[0].finished_reason == "interrupted"
    assert trio.current_time() - start == pytest.approx(3.0)
    assert not agent.is_replying


async def test_idle_timeout_middleware_lets_a_lively_reply_finish(autojump_clock):
    model = ScriptedModel([text_chunks("a", "b", "c")], chunk_delay=1.0)
    agent, _ = make_agent(model=model, middlewares=[IdleTimeout(idle=3.0)])
    msg = await agent.reply(user())
    assert msg.get_text_content() == "abc"
    assert msg.finished_reason == "completed"


# -- awaitable hooks ------------------------------------------------------------------------------


class PermissionTracer(MiddlewareBase):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    async def on_check_permission(self, agent, input_kwargs, next_handler):
        self.log.append(f"{self.name}.pre:{sorted(input_kwargs)}")
        decision = await next_handler()
        self.log.append(f"{self.name}.post:{decision.behavior}")
        return decision


async def test_permission_hook_onion_order_and_copies():
    log: list[str] = []
    agent, _ = make_agent(
        tool_round_steps(),
        toolkit=sequential_toolkit(_echo),
        middlewares=[PermissionTracer("mw1", log), PermissionTracer("mw2", log)],
    )
    await agent.reply(user())
    keys = "['tool', 'tool_call', 'tool_input']"
    assert log == [
        f"mw1.pre:{keys}",
        f"mw2.pre:{keys}",
        "mw2.post:allow",
        "mw1.post:allow",
    ]


async def test_permission_hook_can_deny():
    class Deny(MiddlewareBase):
        async def on_check_permission(self, agent, input_kwargs, next_handler):
            return PermissionDecision(behavior="deny", message="not today")

    ran: list[str] = []

    def tool() -> str:
        """Run."""
        ran.append("ran")
        return "x"

    toolkit = Toolkit()
    toolkit.register_function(tool, permission=ALLOW)
    agent, _ = make_agent(
        [tool_call_chunks("c1", "tool", "{}"), text_chunks("ok")],
        toolkit=toolkit,
        middlewares=[Deny()],
    )
    await agent.reply(user())
    assert ran == []
    result = next(b for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock))
    assert (result.state, result.output) == ("denied", "not today")


async def test_compress_context_hook_wraps_and_can_skip():
    log: list[Any] = []

    class Watch(MiddlewareBase):
        async def on_compress_context(self, agent, input_kwargs, next_handler):
            log.append(dict(input_kwargs))
            if input_kwargs["instructions"] == "skip":
                return None
            return await next_handler(instructions="from middleware")

    class Record(MiddlewareBase):
        async def on_compress_context(self, agent, input_kwargs, next_handler):
            log.append(("inner", input_kwargs["instructions"]))
            return await next_handler()

    agent, _ = make_agent(middlewares=[Watch(), Record()])
    await agent.compress_context(instructions="skip")
    cfg = ContextConfig()
    await agent.compress_context(cfg, instructions="go")
    assert log == [
        {"context_config": None, "instructions": "skip"},
        {"context_config": cfg, "instructions": "go"},
        ("inner", "from middleware"),
    ]


# -- the middleware guide's examples, adapted ---------------------------------------------------


class FullObservabilityMiddleware(MiddlewareBase):
    """The guide's "自定义中间件": observes every hook position."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        self.log.append(f"[reply] start for {agent.name}")
        await next_handler()
        self.log.append(f"[reply] end for {agent.name}")

    async def on_reasoning(self, agent, input_kwargs, next_handler, emit):
        self.log.append("[reasoning] start")
        await next_handler()
        self.log.append("[reasoning] end")

    async def on_acting(self, agent, input_kwargs, next_handler, emit):
        self.log.append(f"[acting] {input_kwargs['tool_call'].name}")
        await next_handler()
        self.log.append("[acting] done")

    async def on_model_call(self, agent, input_kwargs, next_handler, emit):
        self.log.append(f"[model_call] {input_kwargs['current_model'].model}")
        await next_handler()
        self.log.append("[model_call] done")

    async def on_compress_context(self, agent, input_kwargs, next_handler):
        self.log.append(f"[compress_context] checking context for {agent.name}")
        await next_handler()
        self.log.append("[compress_context] done")

    async def on_system_prompt(self, agent, current_prompt):
        self.log.append("[system_prompt]")
        return current_prompt

    async def list_tools(self):
        self.log.append("[list_tools]")
        return []


async def test_full_observability_every_hook_fires_in_lifecycle_order():
    log: list[str] = []
    mw = FullObservabilityMiddleware(log)
    agent, _ = make_agent(tool_round_steps(), toolkit=sequential_toolkit(_echo), middlewares=[mw])
    # Every hook the guide's example implements (it has no on_check_permission).
    assert [h for h in MiddlewareBase.HOOKS if not mw.is_implemented(h)] == ["on_check_permission"]
    await agent.reply(user())
    round_ = [
        "[system_prompt]",  # the step's model input, built once and shared
        "[compress_context] checking context for assistant",
        "[compress_context] done",
        "[reasoning] start",
        "[model_call] scripted-model",
        "[model_call] done",
        "[reasoning] end",
    ]
    assert log == [
        "[reply] start for assistant",
        *round_,
        "[acting] _echo",
        "[acting] done",
        *round_,
        "[reply] end for assistant",
    ]
    assert "[list_tools]" not in log  # the agent never calls list_tools


async def test_on_system_prompt_runs_once_per_reasoning_step():
    log: list[str] = []
    agent, model = make_agent(
        [text_chunks("hi")], inject=True, middlewares=[FullObservabilityMiddleware(log)]
    )
    await agent.reply(user())
    # Compression, injection (which counts tokens at cur_iter == 0) and the model call share
    # one model input.
    assert log.count("[system_prompt]") == 1
    assert len(model.requests) == 1

    log.clear()
    agent, model = make_agent(
        tool_round_steps(),
        toolkit=sequential_toolkit(_echo),
        inject=True,
        middlewares=[FullObservabilityMiddleware(log)],
    )
    await agent.reply(user())
    assert log.count("[system_prompt]") == len(model.requests) == 2


class ContinueOnceMiddleware(MiddlewareBase):
    """The guide's "控制智能体流程": swallow the first COMPLETED/EXCEED end and force one
    more round.

    Per-reply state lives in ``agent.state.middle_context`` (middleware instances are stateless).
    """

    def __init__(self, times: int = 1, release: bool = True) -> None:
        self.times = times
        self.release = release

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        key = await self.get_middleware_key()

        async def sink(item):
            store = agent.state.middle_context.setdefault(key, {})
            count = store.get(agent.state.reply_id, 0)
            if (
                isinstance(item, ReplyEndEvent)
                and item.finished_reason
                in (ReplyFinishedReason.COMPLETED, ReplyFinishedReason.EXCEED_MAX_ITERS)
                and count < self.times
            ):
                store[agent.state.reply_id] = count + 1
                if self.release:
                    agent.state.cur_iter = min(
                        agent.state.cur_iter, agent.react_config.max_iters - 1
                    )
                agent.state.append_context(
                    agent.name, [HintBlock(hint="Check the result once more before finishing.")]
                )
                return  # swallowed: the agent runs another round
            await emit(item)

        await next_handler(sink)


async def test_continue_once_runs_a_second_round_in_the_same_reply():
    agent, model = make_agent(
        [text_chunks("first answer"), text_chunks("second answer")],
        middlewares=[ContinueOnceMiddleware()],
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert len(model.requests) == 2
    assert rec.types.count("REPLY_START") == 1
    assert rec.types.count("REPLY_END") == 1
    assert rec.types[-1] == "REPLY_END"
    assert msg.get_text_content() == "second answer"
    assert msg.finished_reason == "completed"
    reply_id = agent.state.reply_id
    assert {e.reply_id for e in rec.events} == {reply_id}
    # One assistant message for the whole reply: text, the hint, the second text.
    assert len(agent.state.context) == 2
    content = agent.state.context[-1].content
    assert [type(b).__name__ for b in content] == ["TextBlock", "HintBlock", "TextBlock"]
    # The second request saw the hint.
    assert isinstance(model.requests[1].messages[-1].content[-1], HintBlock)


async def test_continue_releases_an_exceeded_reply():
    agent, model = make_agent(
        [text_chunks("forced"), text_chunks("again")],
        middlewares=[ContinueOnceMiddleware()],
        react_config=ReActConfig(max_iters=0),
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert model.requests[0].tool_choice == ToolChoice(mode="none")
    # The EXCEED end was swallowed after the middleware released an iteration.
    assert rec.types.count("EXCEED_MAX_ITERS") == 1
    assert rec.types.count("REPLY_END") == 1
    assert msg.get_text_content() == "again"
    assert msg.finished_reason == "completed"
    assert len(model.requests) == 2


async def test_swallowing_twice_without_progress_is_a_runtime_error():
    # max_iters=0: the answer exceeds; without releasing iterations the agent can only
    # re-emit EXCEED + REPLY_END, which the middleware swallows a second time.
    agent, model = make_agent(
        [text_chunks("only answer")],
        middlewares=[ContinueOnceMiddleware(times=5, release=False)],
        react_config=ReActConfig(max_iters=0),
    )
    rec = Recorder()
    with pytest.raises(RuntimeError, match="swallowed the ReplyEndEvent twice"):
        await agent.reply(user(), on_event=rec)
    assert len(model.requests) == 1
    assert rec.types.count("EXCEED_MAX_ITERS") == 2
    # The ERROR end cannot be swallowed: it still reaches the consumer, once, last.
    assert len(rec.ends) == 1
    assert rec.ends[0].finished_reason == "error"
    assert rec.types[-1] == "REPLY_END"


class TimingMiddleware(MiddlewareBase):
    """The guide's "计时中间件", with the trio clock (and middle_context for the results)."""

    async def on_model_call(self, agent, input_kwargs, next_handler, emit):
        model_name = input_kwargs["current_model"].model
        start = trio.current_time()
        await next_handler()
        elapsed = trio.current_time() - start
        agent.state.middle_context.setdefault("timing", []).append((model_name, elapsed))


async def test_timing_middleware(autojump_clock):
    model = ScriptedModel([text_chunks("a", "b", "c")], chunk_delay=0.5)
    agent, _ = make_agent(model=model, middlewares=[TimingMiddleware()])
    await agent.reply(user())
    [(name, elapsed)] = agent.state.middle_context["timing"]
    assert name == "scripted-model"
    assert elapsed == pytest.approx(1.5)  # three chunks, 0.5 s apart, in virtual time


class RateLimitMiddleware(MiddlewareBase):
    """The guide's "限速中间件": a minimum interval between two model calls (trio.sleep)."""

    def __init__(self, min_interval: float = 1.0) -> None:
        self._last_call = -float("inf")
        self._min_interval = min_interval

    async def on_model_call(self, agent, input_kwargs, next_handler, emit):
        wait = self._min_interval - (trio.current_time() - self._last_call)
        if wait > 0:
            await trio.sleep(wait)
        self._last_call = trio.current_time()
        await next_handler()


async def test_rate_limit_spaces_model_calls(autojump_clock):
    times: list[float] = []

    def timed(chunks):
        def step(request):
            times.append(trio.current_time())
            return chunks

        return step

    agent, _ = make_agent(
        [timed(tool_call_chunks("c1", "_echo", '{"x": "1"}')), timed(text_chunks("done"))],
        toolkit=sequential_toolkit(_echo),
        middlewares=[RateLimitMiddleware(min_interval=10.0)],
    )
    start = trio.current_time()
    await agent.reply(user())
    assert len(times) == 2
    assert times[0] == pytest.approx(start)  # the first call does not wait
    assert times[1] - times[0] == pytest.approx(10.0)


class DynamicContextMiddleware(MiddlewareBase):
    """The guide's "动态系统提示中间件"."""

    def __init__(self, context_fn) -> None:
        self._context_fn = context_fn

    async def on_system_prompt(self, agent, current_prompt):
        context = self._context_fn()
        return f"{current_prompt}\n\n## Current Context\n{context}"


async def test_dynamic_context_reaches_the_model():
    counter = iter(range(100))
    agent, model = make_agent(
        [text_chunks("ok")],
        middlewares=[DynamicContextMiddleware(lambda: f"Tick: {next(counter)}")],
    )
    await agent.reply(user())
    prompt = model.requests[0].messages[0].get_text_content()
    assert prompt is not None
    assert prompt.startswith("You are a helpful assistant.\n\n## Current Context\nTick: ")
    # Computed once per reasoning step, shared by the compression check and the request.
    assert prompt.endswith("Tick: 0")


class ModelFallbackMiddleware(MiddlewareBase):
    """The guide's "模型回退中间件"."""

    def __init__(self, fallback_model) -> None:
        self._fallback = fallback_model

    async def on_model_call(self, agent, input_kwargs, next_handler, emit):
        try:
            await next_handler()
        except Exception as exc:
            agent.state.middle_context["fallback_reason"] = str(exc)
            await next_handler(current_model=self._fallback)


async def test_model_fallback_middleware():
    fallback = ScriptedModel([text_chunks("from ", "fallback")], model="fallback-model")
    agent, primary = make_agent(
        [RuntimeError("primary is down")], middlewares=[ModelFallbackMiddleware(fallback)]
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.get_text_content() == "from fallback"
    assert len(primary.requests) == 1
    assert len(fallback.requests) == 1
    assert agent.state.middle_context["fallback_reason"] == "primary is down"
    assert rec.types.count("MODEL_CALL_START") == 1
    assert rec.types.count("REPLY_END") == 1
    assert kinds(rec.events)[-1] == "REPLY_END"


async def test_one_middleware_instance_serves_two_agents():
    mw = ContinueOnceMiddleware()
    a, _ = make_agent([text_chunks("a1"), text_chunks("a2")], middlewares=[mw])
    b, _ = make_agent([text_chunks("b1"), text_chunks("b2")], middlewares=[mw])
    assert (await a.reply(user())).get_text_content() == "a2"
    assert (await b.reply(user())).get_text_content() == "b2"


async def test_tool_chunks_pass_through_on_acting():
    async def streamer(emit) -> str:
        """Stream two chunks."""
        await emit(ToolChunk(content=[TextBlock(text="part1 ")]))
        await emit(ToolChunk(content=[TextBlock(text="part2")]))
        return "end"

    log: list[str] = []
    agent, _ = make_agent(
        [tool_call_chunks("c1", "streamer", "{}"), text_chunks("ok")],
        toolkit=sequential_toolkit(streamer),
        middlewares=[Tracer("mw", log)],
    )
    await agent.reply(user())
    acting = [e.split("item:")[1] for e in log if e.startswith("mw.acting.item:")]
    assert acting[:2] == ["ToolChunk", "ToolChunk"]
    assert acting[-1] == "ToolResponse"
    await trio.testing.wait_all_tasks_blocked()


class PullContinueOnce(MiddlewareBase):
    """ContinueOnce written in the pull style: drops the first COMPLETED end it pulls."""

    async def on_reply(self, agent, input_kwargs, next_handler, emit):
        dropped = False
        async with next_handler.stream() as items:
            async for item in items:
                is_end = isinstance(item, ReplyEndEvent) and item.finished_reason == "completed"
                if is_end and not dropped:
                    dropped = True
                    continue
                await emit(item)


async def test_pull_style_can_swallow_the_end_too(autojump_clock):
    agent, model = make_agent(
        [text_chunks("first"), text_chunks("second")], middlewares=[PullContinueOnce()]
    )
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert len(model.requests) == 2
    assert rec.types.count("REPLY_START") == 1
    assert rec.types.count("REPLY_END") == 1
    assert rec.types[-1] == "REPLY_END"
    assert msg.get_text_content() == "second"


async def test_pull_stream_propagates_errors_unwrapped():
    agent, _ = make_agent([RuntimeError("model down")], middlewares=[Puller(), PullerReasoning()])
    rec = Recorder()
    with pytest.raises(RuntimeError, match="model down"):
        await agent.reply(user(), on_event=rec)
    assert [e.finished_reason for e in rec.ends] == ["error"]
    assert rec.types[-1] == "REPLY_END"


@pytest.mark.parametrize("middlewares", [[], [Puller(), PullerReasoning()]])
async def test_interrupted_items_match_between_the_two_forms(middlewares, autojump_clock):
    agent, _ = make_agent(
        model=ScriptedModel([text_chunks("a", "b", "c", "d")], chunk_delay=1.0),
        middlewares=[ForwardAll(), *middlewares],
    )
    rec = Recorder()
    async with trio.open_nursery() as nursery:

        async def interrupt_later():
            await trio.sleep(2.5)
            agent.interrupt()

        nursery.start_soon(interrupt_later)
        msg = await agent.reply(user(), on_event=rec)
    assert msg.finished_reason == "interrupted"
    assert rec.types == [
        "REPLY_START",
        "MODEL_CALL_START",
        "TEXT_BLOCK_START",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_DELTA",
        "TEXT_BLOCK_END",
        "MODEL_CALL_END",
        "REPLY_END",
    ]


async def test_retries_and_the_fallback_rerun_the_model_call_chain():
    from trioagent.agent import ModelConfig

    seen: list[str] = []

    class Watch(MiddlewareBase):
        async def on_model_call(self, agent, input_kwargs, next_handler, emit):
            seen.append(input_kwargs["current_model"].model)
            await next_handler()

    fallback = ScriptedModel([text_chunks("ok")], model="fallback-model")
    agent, _ = make_agent(
        [RuntimeError("1"), RuntimeError("2")],
        middlewares=[Watch()],
        model_config=ModelConfig(max_retries=1, fallback_model=fallback),
    )
    assert (await agent.reply(user())).get_text_content() == "ok"
    assert seen == ["scripted-model", "scripted-model", "fallback-model"]


async def test_permission_updated_input_is_what_the_tool_runs_with():
    # AgentScope ignores PermissionDecision.updated_input; trioagent (and a user) expect an
    # ALLOW with updated_input to run the tool with that input.
    received: list[str] = []

    def tool(x: str) -> str:
        """Record.

        Args:
            x: the value.
        """
        received.append(x)
        return x

    class Sanitize(MiddlewareBase):
        async def on_check_permission(self, agent, input_kwargs, next_handler):
            assert input_kwargs["tool_input"] == {"x": "rm -rf /"}
            return PermissionDecision(
                behavior="allow", message="sanitized", updated_input={"x": "ls"}
            )

    agent, _ = make_agent(
        [tool_call_chunks("c1", "tool", '{"x": "rm -rf /"}'), text_chunks("ok")],
        toolkit=sequential_toolkit(tool),
        middlewares=[Sanitize()],
    )
    await agent.reply(user())
    assert received == ["ls"]


class CutAfterTwoDeltas(MiddlewareBase):
    """Leaves the pull stream after two deltas (a token guard): the model's INTERRUPTED partial
    still reaches this layer's emit while the inner layers unwind."""

    async def on_model_call(self, agent, input_kwargs, next_handler, emit):
        deltas = 0
        async with next_handler.stream() as items:
            async for item in items:
                await emit(item)
                if item.is_last:
                    return
                deltas += 1
                if deltas == 2:
                    return


async def test_a_model_call_cut_short_ends_the_reply_interrupted():
    agent, _ = make_agent([text_chunks("a", "b", "c", "d")], middlewares=[CutAfterTwoDeltas()])
    rec = Recorder()
    msg = await agent.reply(user(), on_event=rec)
    assert msg.finished_reason == ReplyFinishedReason.INTERRUPTED
    deltas = [e.delta for e in rec.events if isinstance(e, TextBlockDeltaEvent)]
    # A delta the model already handed over while the puller was leaving is delivered, not
    # lost (NextHandler.stream's contract); whether one was in flight depends on trio's
    # (deliberately randomized) scheduling order.
    assert deltas in (["a", "b"], ["a", "b", "c"])
    assert rec.types == [
        "REPLY_START",
        "MODEL_CALL_START",
        "TEXT_BLOCK_START",
        *["TEXT_BLOCK_DELTA"] * len(deltas),
        "TEXT_BLOCK_END",
        "MODEL_CALL_END",
        "REPLY_END",
    ]
    assert rec.events[-2].finished_reason == "interrupted"
    assert rec.ends[0].finished_reason == "interrupted"
    # The partial text is kept, and it is exactly what the consumer saw.
    assert agent.state.context[-1].get_text_content() == "".join(deltas)


async def test_a_failing_pull_layer_ends_the_reply_with_error(autojump_clock):
    """An on_reply layer using next_handler.stream() raises mid-reply: the inner layers are
    cancelled, yet the one end event says ERROR (with the layer's error), not INTERRUPTED."""

    class Picky(MiddlewareBase):
        async def on_reply(self, agent, input_kwargs, next_handler, emit):
            async with next_handler.stream() as items:
                async for item in items:
                    if getattr(item, "type", None) == "TEXT_BLOCK_DELTA":
                        raise ValueError("no text allowed")
                    await emit(item)

    agent, _ = make_agent([text_chunks("a", "b", "c")], middlewares=[Picky()])
    rec = Recorder()
    with pytest.raises(ValueError, match="no text allowed"):
        await agent.reply(user(), on_event=rec)
    assert [e.finished_reason for e in rec.ends] == [ReplyFinishedReason.ERROR]
    assert rec.events[-1] is rec.ends[0]
    assert rec.ends[0].error is not None
    assert "no text allowed" in rec.ends[0].error.message


# -- a sync callable where an async one belongs is refused at the entry ---------------------------


class SyncHook(MiddlewareBase):
    def on_reasoning(self, agent, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def,override]
        return None


class AgentScopeStyle(MiddlewareBase):
    async def on_reply(self, agent, kwargs, next_handler):  # type: ignore[no-untyped-def,override]
        await next_handler()


class AsyncGeneratorHook(MiddlewareBase):
    async def on_acting(self, agent, kwargs, next_handler):  # type: ignore[no-untyped-def,override]
        yield None


class SyncPrompt(MiddlewareBase):
    def on_system_prompt(self, agent, current_prompt):  # type: ignore[no-untyped-def,override]
        return current_prompt


class SyncKey(MiddlewareBase):
    def get_middleware_key(self):  # type: ignore[no-untyped-def,override]
        return "key"


@pytest.mark.parametrize(
    ("middleware", "match"),
    [
        (SyncHook(), r"SyncHook\.on_reasoning is not an async function"),
        (AgentScopeStyle(), r"AgentScopeStyle\.on_reply .*\(agent, kwargs, next_handler\).*emit"),
        (AsyncGeneratorHook(), r"AsyncGeneratorHook\.on_acting is an async generator"),
        (SyncPrompt(), r"SyncPrompt\.on_system_prompt is not an async function"),
        (SyncKey(), r"SyncKey\.get_middleware_key is not an async function"),
    ],
)
def test_a_hook_that_cannot_be_awaited_is_refused_by_the_agent(
    middleware: MiddlewareBase, match: str
) -> None:
    with pytest.raises(TypeError, match=match):
        make_agent([text_chunks("x")], middlewares=[middleware])


def test_the_same_middleware_instance_listed_twice_is_refused() -> None:
    class Passing(MiddlewareBase):
        async def on_reply(self, agent, input_kwargs, next_handler, emit):  # type: ignore[no-untyped-def]
            await next_handler()

    once = Passing()
    with pytest.raises(ValueError, match=r"middlewares\[1\] .*Passing.* listed twice"):
        make_agent([text_chunks("x")], middlewares=[once, once])
    make_agent([text_chunks("x")], middlewares=[once, Passing()])  # two instances are fine

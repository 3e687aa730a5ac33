"""Shared fakes and helpers for the agent acting / HITL / background / sweep tests.

Not a test module (no ``test_`` prefix); the test modules import it as ``agent_kit``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from trioagent.agent import Agent, AgentState, InjectionConfig
from trioagent.event import (
    AgentEvent,
    ConfirmResult,
    ReplyEndEvent,
    UserConfirmResultEvent,
)
from trioagent.message import (
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMsg,
)
from trioagent.model import ChatResponse
from trioagent.permission import PermissionBehavior, PermissionDecision
from trioagent.testing import ScriptedModel
from trioagent.tool import Toolkit

INTERRUPTED_TEXT = (
    "<system-reminder>The tool call has been interrupted by the user.</system-reminder>"
)
PARKED_TEXT = "I'm waiting for your permission or the external execution to finish."
ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed in the test")
NO_INJECTION = InjectionConfig(inject_runtime_state=False)


def call(call_id: str, name: str, /, **arguments: Any) -> ToolCallBlock:
    """A complete tool call block with JSON arguments."""
    return ToolCallBlock(id=call_id, name=name, input=json.dumps(arguments))


def calls(*blocks: ToolCallBlock) -> ChatResponse:
    """A model answer made of tool calls."""
    return ChatResponse(content=list(blocks))


def text(value: str) -> ChatResponse:
    """A text-only model answer."""
    return ChatResponse(content=[TextBlock(text=value)])


def make_agent(
    steps: Sequence[Any],
    toolkit: Toolkit | None = None,
    *,
    state: AgentState | None = None,
    **kwargs: Any,
) -> Agent:
    """An agent named ``"agent"`` over a ScriptedModel, runtime-state injection off."""
    kwargs.setdefault("injection_config", InjectionConfig(inject_runtime_state=False))
    return Agent(
        "agent",
        model=ScriptedModel(list(steps)),
        toolkit=toolkit if toolkit is not None else Toolkit(),
        state=state,
        **kwargs,
    )


def model_of(agent: Agent) -> ScriptedModel:
    model = agent.model
    assert isinstance(model, ScriptedModel)
    return model


async def run(agent: Agent, inputs: Any = None) -> tuple[Msg, list[AgentEvent]]:
    """``agent.reply(inputs)`` recording every event (callback form, in the reply's task)."""
    events: list[AgentEvent] = []

    async def record(event: AgentEvent) -> None:
        events.append(event)

    msg = await agent.reply(inputs, on_event=record)
    return msg, events


async def run_and_interrupt(
    agent: Agent, inputs: Any, after: float
) -> tuple[Msg | None, list[AgentEvent]]:
    """Start a reply, call ``agent.interrupt()`` after ``after`` (mock) seconds."""
    events: list[AgentEvent] = []
    result: list[Msg] = []

    async def record(event: AgentEvent) -> None:
        events.append(event)

    async def reply() -> None:
        result.append(await agent.reply(inputs, on_event=record))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reply)
        await trio.sleep(after)
        agent.interrupt()
    return (result[0] if result else None), events


async def reply_cancelled(
    agent: Agent,
    inputs: Any,
    mode: str,
    when: Callable[[], Awaitable[object]],
    on_event: Callable[[AgentEvent], Awaitable[None]],
) -> tuple[Msg | None, bool, float]:
    """Run ``agent.reply(inputs, on_event=...)`` and cancel it once ``await when()`` returns:
    ``agent.interrupt()`` (``mode="interrupt"``) or an enclosing scope (``"outer"``).

    Returns the Msg (``None`` when the cancellation propagated), whether the outer scope
    caught the cancellation, and the (trio) time from the cancellation to the reply's end.
    """
    result: list[Msg] = []
    outer = trio.CancelScope()

    async def reply() -> None:
        with outer:
            result.append(await agent.reply(inputs, on_event=on_event))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reply)
        await when()
        cancelled_at = trio.current_time()
        if mode == "interrupt":
            agent.interrupt()
        else:
            outer.cancel()
    return (
        (result[0] if result else None),
        outer.cancelled_caught,
        trio.current_time() - cancelled_at,
    )


def kinds(events: Sequence[AgentEvent]) -> list[str]:
    return [str(e.type) for e in events]


def of_call(events: Sequence[AgentEvent], call_id: str) -> list[str]:
    """The types of the TOOL_RESULT_* events of one tool call, in order."""
    return [
        str(e.type)
        for e in events
        if getattr(e, "tool_call_id", None) == call_id and str(e.type).startswith("TOOL_RESULT")
    ]


def ends(events: Sequence[AgentEvent]) -> list[ReplyEndEvent]:
    return [e for e in events if isinstance(e, ReplyEndEvent)]


def results(agent: Agent) -> list[ToolResultBlock]:
    """Every tool result in the context, in order."""
    return [b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock)]


def result_of(agent: Agent, call_id: str) -> ToolResultBlock:
    found = [r for r in results(agent) if r.id == call_id]
    assert len(found) == 1, f"{len(found)} results for {call_id}"
    return found[0]


def tool_calls(agent: Agent) -> dict[str, ToolCallBlock]:
    return {b.id: b for m in agent.state.context for b in m.content if isinstance(b, ToolCallBlock)}


def output_text(result: ToolResultBlock) -> str:
    if isinstance(result.output, str):
        return result.output
    return "".join(b.text for b in result.output if isinstance(b, TextBlock))


def confirm(
    *blocks: ToolCallBlock, confirmed: bool = True, rules: Any = None
) -> UserConfirmResultEvent:
    """Answer the confirmation of the given calls (all confirmed or all denied)."""
    return UserConfirmResultEvent(
        confirm_results=[
            ConfirmResult(confirmed=confirmed, tool_call=block, rules=rules) for block in blocks
        ]
    )


def user(value: str = "go") -> Msg:
    return UserMsg("user", value)

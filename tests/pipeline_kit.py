"""Shared builders for the pipeline and agents-as-tools tests (not a test module).

Agents run over ``ScriptedModel``s; a member's "work" is a tool that sleeps (free under the
mock clock) so a cancellation can land while members run concurrently, and ``approve`` is a
tool that asks the user before it runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import trio

from trioagent.agent import Agent, AgentState, InjectionConfig
from trioagent.event import (
    AgentEvent,
    ConfirmResult,
    ReplyEndEvent,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
    agent_path,
)
from trioagent.message import Msg, TextBlock, ToolCallBlock, ToolResultBlock
from trioagent.model import ChatResponse
from trioagent.permission import PermissionBehavior, PermissionDecision
from trioagent.testing import ScriptedModel
from trioagent.tool import Toolkit

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed in the test")


def call(call_id: str, name: str, /, **arguments: Any) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, input=json.dumps(arguments))


def assign(call_id: str, member: str, prompt: str) -> ToolCallBlock:
    """A leader's TeamAssign call."""
    return call(call_id, "TeamAssign", member=member, prompt=prompt)


def calls(*blocks: ToolCallBlock) -> ChatResponse:
    return ChatResponse(content=list(blocks))


def text(value: str) -> ChatResponse:
    return ChatResponse(content=[TextBlock(text=value)])


def structured(call_id: str, **output: Any) -> ChatResponse:
    """A call of the structured-output tool."""
    return calls(call(call_id, "GenerateStructuredOutput", **output))


def work_toolkit(log: list[str] | None = None, seconds: float = 1.0) -> Toolkit:
    """``work(task)`` sleeps ``seconds`` (mock time) and echoes; ``approve(what)`` asks the
    user before it runs."""
    toolkit = Toolkit()
    journal = log if log is not None else []

    async def work(task: str) -> str:
        """Do a piece of work.

        Args:
            task: what to do.
        """
        journal.append(f"work:{task}")
        await trio.sleep(seconds)
        return f"did {task}"

    async def approve(what: str) -> str:
        """Do something the user must approve first.

        Args:
            what: the thing to do.
        """
        journal.append(f"approve:{what}")
        return f"approved {what}"

    toolkit.register_function(work, permission=ALLOW)
    toolkit.register_function(approve)
    return toolkit


def agent(
    name: str,
    steps: Sequence[Any],
    toolkit: Toolkit | None = None,
    *,
    state: AgentState | None = None,
    **kwargs: Any,
) -> Agent:
    """An agent over a ScriptedModel, runtime-state injection off."""
    kwargs.setdefault("injection_config", InjectionConfig(inject_runtime_state=False))
    return Agent(
        name,
        model=ScriptedModel(list(steps)),
        toolkit=toolkit if toolkit is not None else Toolkit(),
        state=state,
        **kwargs,
    )


def model_of(target: Agent) -> ScriptedModel:
    model = target.model
    assert isinstance(model, ScriptedModel)
    return model


class Recorder:
    """An ``on_event`` callback keeping every event."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    def of(self, *path: str) -> list[AgentEvent]:
        """The events whose agent path is exactly ``path``."""
        return [e for e in self.events if agent_path(e) == path]

    def ends(self, *path: str) -> list[ReplyEndEvent]:
        return [e for e in self.of(*path) if isinstance(e, ReplyEndEvent)]

    def kinds(self, *path: str) -> list[str]:
        return [str(e.type) for e in self.of(*path)]


def results(target: Agent) -> list[ToolResultBlock]:
    return [b for m in target.state.context for b in m.content if isinstance(b, ToolResultBlock)]


def result_text(result: ToolResultBlock) -> str:
    if isinstance(result.output, str):
        return result.output
    return "".join(b.text for b in result.output if isinstance(b, TextBlock))


def texts(msg: Msg) -> str:
    return "".join(b.text for b in msg.content if isinstance(b, TextBlock))


def confirm(event: RequireUserConfirmEvent, confirmed: bool = True) -> UserConfirmResultEvent:
    """The answer to a confirmation request, for every call it names, by its reply id."""
    return UserConfirmResultEvent(
        reply_id=event.reply_id,
        confirm_results=[ConfirmResult(confirmed=confirmed, tool_call=c) for c in event.tool_calls],
    )


def worker(name: str, seconds: float = 1.0, **kwargs: Any) -> Agent:
    """An agent that runs ``work`` once (``seconds`` of mock time), then answers."""
    return agent(
        name,
        [calls(call(f"w-{name}", "work", task=name)), text(f"{name} done")],
        work_toolkit(seconds=seconds),
        **kwargs,
    )


def asker(name: str = "asker") -> Agent:
    """An agent whose ``approve`` call needs the user's confirmation, then answers."""
    return agent(
        name,
        [calls(call(f"p-{name}", "approve", what=name)), text(f"{name} approved")],
        work_toolkit(),
    )


def calling_chain(inner: Agent, **kwargs: Any) -> tuple[Agent, Agent]:
    """``boss`` calls ``clerk`` as a tool, ``clerk`` calls ``inner`` as a tool; each answers
    after its call: ``(boss, clerk)`` (``kwargs`` go to both agents)."""
    clerk_tools = Toolkit()
    clerk_tools.add_tool(inner.as_tool())
    clerk = agent(
        "clerk",
        [calls(call("c", inner.name, prompt=f"ask {inner.name}")), text("clerk done")],
        clerk_tools,
        **kwargs,
    )
    boss_tools = Toolkit()
    boss_tools.add_tool(clerk.as_tool())
    boss = agent(
        "boss",
        [calls(call("b", "clerk", prompt="ask clerk")), text("boss done")],
        boss_tools,
        **kwargs,
    )
    return boss, clerk

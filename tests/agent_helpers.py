"""Shared fakes and helpers for the agent-core tests (not a test module).

Fakes over mocks: the agent talks to a real :class:`~trioagent.testing.ScriptedModel` and to
real function tools; these helpers only build them and record what comes out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from trioagent.agent import Agent, InjectionConfig
from trioagent.event import AgentEvent, ReplyEndEvent
from trioagent.message import Msg, ToolCallBlock, ToolResultBlock, UserMsg
from trioagent.middleware import MiddlewareBase
from trioagent.model import ChatResponse, ChatUsage
from trioagent.permission import PermissionDecision
from trioagent.testing import ScriptedModel
from trioagent.tool import Toolkit

ALLOW = PermissionDecision(behavior="allow", message="ok")
NO_INJECTION = InjectionConfig(inject_runtime_state=False)


def user(text: str = "hi") -> Msg:
    return UserMsg("user", text)


def make_agent(
    steps: Sequence[Any] = (),
    *,
    toolkit: Toolkit | None = None,
    middlewares: Sequence[MiddlewareBase] | None = None,
    inject: bool = False,
    model: ScriptedModel | None = None,
    **kwargs: Any,
) -> tuple[Agent, ScriptedModel]:
    """An agent on a fresh ScriptedModel; runtime-state injection off unless ``inject``."""
    model = model if model is not None else ScriptedModel(steps)
    if not inject:
        kwargs.setdefault("injection_config", InjectionConfig(inject_runtime_state=False))
    agent = Agent(
        "assistant",
        "You are a helpful assistant.",
        model,
        toolkit=toolkit,
        middlewares=middlewares,
        **kwargs,
    )
    return agent, model


class Recorder:
    """An ``on_event`` callback that keeps every event."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    @property
    def types(self) -> list[str]:
        return kinds(self.events)

    @property
    def ends(self) -> list[ReplyEndEvent]:
        return [e for e in self.events if isinstance(e, ReplyEndEvent)]


def kinds(events: Sequence[Any]) -> list[str]:
    """The ``type`` of each event (``"MSG"`` for a Msg item)."""
    return ["MSG" if isinstance(e, Msg) else str(e.type) for e in events]


def final_response(*blocks: Any, **kwargs: Any) -> ChatResponse:
    return ChatResponse(content=list(blocks), **kwargs)


def assert_paired(messages: Sequence[Msg]) -> None:
    """Every tool call has exactly one result and every result has its call."""
    calls = [b.id for m in messages for b in m.content if isinstance(b, ToolCallBlock)]
    results = [b.id for m in messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert sorted(calls) == sorted(results), (calls, results)
    assert len(set(calls)) == len(calls)


def sequential_toolkit(*fns: Any) -> Toolkit:
    """A toolkit whose function tools are allowed and run one after another."""
    toolkit = Toolkit()
    for fn in fns:
        toolkit.register_function(fn, is_concurrency_safe=False, permission=ALLOW)
    return toolkit


SUMMARY_FIELDS = {
    "task_overview": "overview",
    "current_state": "state",
    "important_discoveries": "discoveries",
    "next_steps": "next",
    "context_to_preserve": "preserve",
}


def tokens(n: int, char: str = "a") -> str:
    """A text of ``n`` tokens by the default estimate (UTF-8 bytes / 4)."""
    return char * (4 * n)


def summary_step(fields: dict[str, str] | None = None, usage: ChatUsage | None = None) -> Any:
    """A compression-summary answer: the model layer's ``generate_structured_output`` call."""
    payload = json.dumps(fields or SUMMARY_FIELDS)
    return ChatResponse(
        content=[ToolCallBlock(id="summary", name="generate_structured_output", input=payload)],
        usage=usage,
    )

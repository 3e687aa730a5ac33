"""Agents as tools: ``agent.as_tool()`` lets any agent call another.

The calling agent's model sends a ``prompt``; the tool runs one reply of the inner agent and
returns its final answer as the tool result.  The inner reply's events reach the *caller's*
consumer, tagged with the path of agents they came through (see
:func:`trioagent.event.agent_path`), so a user watching the outer stream sees every level.

Human in the loop goes through: an inner reply that parks on a confirmation or an external
execution parks the calling reply too (its call waits, unanswered), the inner request reaches
the consumer tagged with its path, and the answer sent to the *outer* agent —
``UserConfirmResultEvent(reply_id=<the inner reply id>, ...)`` — is routed down to the inner
agent (any depth); when the inner reply finishes, its answer is the call's result and the
outer reply goes on.  A ``UserInterruptEvent`` to the outer agent aborts the parked inner
replies first.

Cancellation needs nothing special: the inner reply runs inside the outer reply's acting
nursery, so cancelling the outer reply cancels it; it ends with its own single
``ReplyEndEvent(INTERRUPTED)`` (relayed to the consumer), the call gets an interrupted result,
and then the outer reply ends.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

import trio

from ..event import (
    AgentEvent,
    ExternalExecutionResultEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
    tag_agent,
)
from ..message import (
    DataBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultState,
    UserMsg,
)
from ..permission import PermissionBehavior, PermissionDecision
from ..tool import ToolBase, Toolkit, ToolResponse
from ..types import ReplyFinishedReason
from ._protocol import ReplyInputs
from ._state import AgentState

__all__ = ["PARKED_KEY", "AgentTool", "Relay", "answer_of", "nested_waiting", "relaying"]

#: Where a running reply sends the events of agents it calls as tools (its consumer).
Relay = Callable[[AgentEvent], Awaitable[None]]

_RELAY: contextvars.ContextVar[Relay | None] = contextvars.ContextVar(
    "trioagent_agent_relay", default=None
)

ResumeInput = UserConfirmResultEvent | ExternalExecutionResultEvent

#: How a final Msg's reason becomes the tool result's state.
RESULT_STATES = {
    ReplyFinishedReason.COMPLETED: ToolResultState.SUCCESS,
    ReplyFinishedReason.EXCEED_MAX_ITERS: ToolResultState.SUCCESS,
    ReplyFinishedReason.INTERRUPTED: ToolResultState.INTERRUPTED,
    ReplyFinishedReason.ERROR: ToolResultState.ERROR,
}

PARKED_TEXT = "The agent {name!r} waits for a confirmation or an external result ({what})."

#: Marks the response of a call whose agent parked: the calling reply parks on the call.
PARKED_KEY = "trioagent.parked_agent"


class CallableAgent(Protocol):
    """What an :class:`AgentTool` needs of its agent (an :class:`~trioagent.agent.Agent`)."""

    name: str
    state: AgentState
    toolkit: Toolkit

    async def reply(self, inputs: ReplyInputs = None, *, on_event: Relay | None = None) -> Msg:
        """Run (or resume) one reply."""
        ...


@contextlib.contextmanager
def relaying(consumer: Relay | None) -> Iterator[None]:
    """Make ``consumer`` the destination of nested agents' events while a reply runs.

    A context variable: the acting nursery's tasks inherit it, so a tool running an inner
    agent finds the consumer of the reply that called it.
    """
    token = _RELAY.set(consumer)
    try:
        yield
    finally:
        _RELAY.reset(token)


class AgentTool(ToolBase):
    """A tool that runs one reply of ``agent`` with the model's ``prompt``.

    Args:
        agent: the agent to call.  It keeps its own context across calls (a conversation
            with the caller); calls to one ``AgentTool`` run one after another.
        name: the tool's name (default: the agent's name).
        description: what the caller's model reads (default: a sentence naming the agent).

    The result is the inner reply's final text and data; an inner reply that ended
    interrupted or with an error gives an interrupted or error result.  An inner reply that
    parks parks the caller's call (see the module docstring).
    """

    is_concurrency_safe = True  # runs in its own task of the acting nursery, see relaying()
    is_read_only = False

    def __init__(
        self, agent: CallableAgent, name: str | None = None, description: str | None = None
    ):
        super().__init__()
        self.agent = agent
        self.name = name or agent.name
        self.description = description or (
            f"Ask the agent {agent.name!r} to do a task and get its answer back.  It cannot "
            "see your context: the prompt must say everything it needs."
        )
        self.input_schema = {
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "The complete task for the agent."}
            },
            "required": ["prompt"],
        }
        self._lock = trio.StrictFIFOLock()

    async def check_permissions(self, tool_input: object, context: object) -> PermissionDecision:
        """Calling the agent is allowed; its own tools go through their own permission checks."""
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW, message="Calling an agent is always allowed."
        )

    async def call(self, emit: object, /, **kwargs: object) -> ToolResponse:
        prompt = kwargs.get("prompt")
        if not isinstance(prompt, str):
            raise TypeError("prompt must be a string")
        async with self._lock:
            if self.parked:
                # Left parked by a caller that was cancelled meanwhile: abort it first.
                await self.abort()
            return self._response(
                await self.agent.reply(UserMsg("user", prompt), on_event=self._forward())
            )

    @property
    def parked(self) -> bool:
        """Whether the agent waits for a confirmation or an external result."""
        return self.agent.state.has_awaiting_tool_calls(self.agent.name)

    def waits_on(self, reply_id: str) -> bool:
        """Whether the agent — or an agent it called as a tool, at any depth — is parked on
        the reply ``reply_id``."""
        return self.parked_agent(reply_id) is not None

    def parked_agent(self, reply_id: str) -> CallableAgent | None:
        """The agent parked on the reply ``reply_id``: this tool's agent, or one it called as
        a tool (at any depth); ``None`` if none is."""
        if not self.parked:
            return None
        state = self.agent.state
        if state.reply_id == reply_id:
            return self.agent
        found = nested_waiting(state, self.agent.name, self.agent.toolkit, reply_id)
        return found[1].parked_agent(reply_id) if found is not None else None

    async def resume(self, event: ResumeInput) -> ToolResponse:
        """Send a parked reply's answer to the agent (it routes it further down if needed);
        the call's response, marked parked again if the agent still waits."""
        async with self._lock:
            return self._response(await self.agent.reply(event, on_event=self._forward()))

    async def abort(self) -> None:
        """End the agent's parked reply (and those it waits on) with one INTERRUPTED end."""
        if self.parked:
            event = UserInterruptEvent(reply_id=self.agent.state.reply_id)
            await self.agent.reply(event, on_event=self._forward())

    def _forward(self) -> Relay:
        relay = _RELAY.get()
        name = self.agent.name

        async def forward(event: AgentEvent) -> None:
            if relay is not None:
                await relay(tag_agent(event, name))

        return forward

    def _response(self, msg: Msg) -> ToolResponse:
        name = self.agent.name
        if msg.finished_reason is None:
            awaiting = self.agent.state.get_awaiting_tool_calls(name)
            what = ", ".join(sorted({c.name for c in awaiting}))
            return ToolResponse(
                content=[TextBlock(text=PARKED_TEXT.format(name=name, what=what))],
                metadata={PARKED_KEY: self.agent.state.reply_id},
            )
        return answer_of(msg, name)


def answer_of(msg: Msg, name: str) -> ToolResponse:
    """What a finished reply's final Msg gives the one who asked for it as a tool result: its
    text and data blocks (or a note that there were none), interrupted or error as it ended."""
    if msg.finished_reason is None:
        raise ValueError("a parked reply has no answer yet")
    content = [b for b in msg.content if isinstance(b, TextBlock | DataBlock)]
    return ToolResponse(
        content=content or [TextBlock(text=f"{name!r} finished without an answer.")],
        state=RESULT_STATES[msg.finished_reason],
    )


class ToolSource(Protocol):
    """Where a tool is looked up by name (a toolkit, a reply's tools)."""

    def get_tool(self, name: str) -> ToolBase | None:
        """The tool named ``name``, or ``None``."""
        ...


def nested_waiting(
    state: AgentState, name: str, toolkit: ToolSource, reply_id: str
) -> tuple[ToolCallBlock, AgentTool] | None:
    """The parked call of an agent whose :class:`AgentTool` waits on ``reply_id``, if any."""
    for call in state.get_awaiting_tool_calls(name):
        tool = toolkit.get_tool(call.name)
        if (
            call.state == ToolCallState.SUBMITTED
            and isinstance(tool, AgentTool)
            and tool.waits_on(reply_id)
        ):
            return call, tool
    return None

"""What a thread runs: one agent, or a pipeline of agents, built fresh for each run with every
participant's state kept in the session store.

An agent's state is the record ``<threadId>``; a pipeline's participants each have their own,
``<threadId>/<name>`` (the agent's name), saved by a :class:`~trioagent.session.SessionMiddleware`
the app places first in that participant's ``middlewares`` -- so every reply end and every park
of every participant is stored as it happens, as for a lone agent.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from ..agent import Agent, AgentState
from ..message import ToolCallBlock
from ..middleware import MiddlewareBase
from ..pipeline import PipelineBase, TeamAssignTool, TeamPipeline
from ..session import SessionMiddleware, SessionStore
from ._marker import EndMarker

__all__ = ["MakeAgent", "MakePipeline", "Served", "build_agent", "build_pipeline", "waiting_calls"]

#: Builds the agent of one thread with the given middlewares first in its ``middlewares``.
MakeAgent: TypeAlias = Callable[[list[MiddlewareBase]], "Agent | Awaitable[Agent]"]
#: Builds the pipeline of one thread; ``first(name)`` gives the middlewares to place first in
#: the ``middlewares`` of the participant called ``name``.
MakePipeline: TypeAlias = Callable[
    [Callable[[str], list[MiddlewareBase]]], "PipelineBase | Awaitable[PipelineBase]"
]


class Served:
    """The agent or pipeline of one run, and the sessions of its participants."""

    def __init__(self, target: Agent | PipelineBase, sessions: dict[str, SessionMiddleware]):
        self.target = target
        self.participants: list[Agent] = (
            [target] if isinstance(target, Agent) else list(target.participants)
        )
        self.sessions = sessions

    @property
    def face(self) -> Agent:
        """The agent whose context is the thread's conversation (the leader, the executor)."""
        return self.participants[0]

    async def restore(self) -> None:
        """Every participant's state from the store (``SessionStoreError`` when it fails).

        A team with ``reset_members`` cleared its members when the leader's last reply ended,
        after they were saved: unless the leader is parked, the members start fresh again."""
        for agent in self.participants:
            await self.sessions[agent.name].restore(agent)
        team = self.target
        if not isinstance(team, TeamPipeline) or not team.reset_members:
            return
        if not team.leader.state.has_awaiting_tool_calls(team.leader.name):
            for member in team.members.values():
                member.agent.state.context.clear()
                member.agent.state.summary = ""

    @property
    def shape(self) -> dict[str, frozenset[str]]:
        """Each participant's name (the face first) and the names of its tools the pipeline
        runs itself (a team leader's ``TeamAssign``): what reading a stored thread needs."""
        return {
            agent.name: frozenset(
                tool.name
                for group in agent.toolkit.tool_groups
                for tool in group.tools
                if isinstance(tool, TeamAssignTool)
            )
            for agent in self.participants
        }

    def waiting(self) -> list[tuple[str, ToolCallBlock]]:
        """The tool calls waiting for the client, with the reply id each waits in."""
        return waiting_calls(self.shape, {agent.name: agent.state for agent in self.participants})


def waiting_calls(
    shape: dict[str, frozenset[str]], states: dict[str, AgentState]
) -> list[tuple[str, ToolCallBlock]]:
    """The calls of the participants' ``states`` waiting for the client, each with the reply
    id it waits in; not the calls the pipeline runs itself (see :attr:`Served.shape`)."""
    return [
        (state.reply_id, call)
        for name, state in states.items()
        for call in state.get_awaiting_tool_calls(name)
        if call.name not in shape.get(name, frozenset())
    ]


async def build_agent(make: MakeAgent, store: SessionStore, thread_id: str) -> Served:
    session = SessionMiddleware(store, thread_id)
    first: list[MiddlewareBase] = [session, EndMarker()]
    made = make(list(first))
    agent = await made if inspect.isawaitable(made) else made
    if not isinstance(agent, Agent) or list(agent.middlewares[:2]) != first:
        raise TypeError(
            "make_agent must return an Agent whose middlewares start with the ones given"
        )
    return Served(agent, {agent.name: session})


async def build_pipeline(make: MakePipeline, store: SessionStore, thread_id: str) -> Served:
    given: dict[str, list[MiddlewareBase]] = {}
    sessions: dict[str, SessionMiddleware] = {}

    def first(name: str) -> list[MiddlewareBase]:
        if name in given:
            raise ValueError(f"first({name!r}) was asked twice: participant names are unique")
        sessions[name] = SessionMiddleware(store, f"{thread_id}/{name}")
        given[name] = [sessions[name], EndMarker()]
        return list(given[name])

    made = make(first)
    pipeline = await made if inspect.isawaitable(made) else made
    if not isinstance(pipeline, PipelineBase):
        raise TypeError(f"make_pipeline must return a pipeline, got {type(pipeline).__name__}")
    names = [agent.name for agent in pipeline.participants]
    if sorted(names) != sorted(given) or any(
        list(agent.middlewares[:2]) != given[agent.name] for agent in pipeline.participants
    ):
        raise TypeError(
            "make_pipeline must give every participant first(name) first in its middlewares"
        )
    return Served(pipeline, sessions)

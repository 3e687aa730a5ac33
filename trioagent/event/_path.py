"""Which agent an event came from, when agents work together.

A pipeline streams the events of every participant, and an agent calling another agent as a
tool streams the inner agent's events too.  Each such event is tagged with the *path* of agent
names it came through, outermost first, in its ``metadata`` under :data:`AGENT_PATH_KEY` —
not a new field, so an untagged event serializes exactly as before.  An agent's own events
carry no path.
"""

from __future__ import annotations

import attrs

from ._events import AgentEvent

__all__ = ["AGENT_PATH_KEY", "agent_path", "tag_agent"]

#: The ``metadata`` key holding an event's agent path (a list of agent names).
AGENT_PATH_KEY = "agent_path"


def agent_path(event: AgentEvent) -> tuple[str, ...]:
    """The names of the agents ``event`` came through, outermost first (``()``: your own)."""
    path = event.metadata.get(AGENT_PATH_KEY)
    if isinstance(path, list) and all(isinstance(name, str) for name in path):
        return tuple(path)
    return ()


def tag_agent(event: AgentEvent, name: str) -> AgentEvent:
    """A copy of ``event`` whose path starts with ``name`` (the agent that relayed it)."""
    path: list[object] = [name, *agent_path(event)]
    return attrs.evolve(event, metadata={**event.metadata, AGENT_PATH_KEY: path})

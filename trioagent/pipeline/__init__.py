"""Agents working together: a leader assigning to a team, an executor/verifier goal loop.

Both pipelines have an agent's entry points (``reply``, ``stream``, ``__call__``,
``interrupt()``) and keep its cancellation promise across every participant.
"""

from ._base import PipelineBase as PipelineBase, PipelineProtocol as PipelineProtocol
from ._goal import GoalPipeline as GoalPipeline, GoalProgress as GoalProgress
from ._team import (
    TeamAssignTool as TeamAssignTool,
    TeamMember as TeamMember,
    TeamPipeline as TeamPipeline,
)

__all__ = [
    "GoalPipeline",
    "GoalProgress",
    "PipelineBase",
    "PipelineProtocol",
    "TeamAssignTool",
    "TeamMember",
    "TeamPipeline",
]

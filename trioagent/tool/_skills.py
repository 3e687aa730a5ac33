"""Skills in the toolkit: collecting them per group, the system-prompt listing, and the
``Skill`` viewer tool through which the model reads one."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeAlias

from .._core.json_types import JSONObject
from ..message import TextBlock, ToolResultState
from ..permission import PermissionBehavior, PermissionContext, PermissionDecision
from ..skill import LocalSkillLoader, Skill, SkillLoaderBase
from ._base import ToolBase
from ._response import Emit, ToolChunk

__all__ = [
    "SkillSource",
    "SkillViewer",
    "collect_skills",
    "render_skill_instructions",
    "to_skill_sources",
]

logger = logging.getLogger("trioagent.tool")

#: What ``skills_or_loaders=`` accepts: a directory path, a :class:`Skill`, or a loader.
SkillSource: TypeAlias = str | Skill | SkillLoaderBase


def to_skill_sources(items: Sequence[SkillSource] | None) -> list[Skill | SkillLoaderBase]:
    """Normalize ``skills_or_loaders``: a path becomes a :class:`LocalSkillLoader`.

    Raises:
        TypeError: an item is none of a path, a skill or a loader.
    """
    sources: list[Skill | SkillLoaderBase] = []
    for item in items or []:
        if isinstance(item, str):
            sources.append(LocalSkillLoader(item))
        elif isinstance(item, Skill | SkillLoaderBase):
            sources.append(item)
        else:
            raise TypeError(
                f"Invalid skill or loader: {item!r}. Must be a skill, a skill loader, or a "
                "directory path."
            )
    return sources


async def collect_skills(
    groups: Sequence[tuple[str, Sequence[Skill | SkillLoaderBase]]],
) -> dict[str, Skill]:
    """The skills of ``(group name, sources)`` pairs, by name; a later duplicate replaces an
    earlier one (logged)."""
    skills: dict[str, Skill] = {}
    for group_name, sources in groups:
        for source in sources:
            found = [source] if isinstance(source, Skill) else await source.list_skills()
            for skill in found:
                if skill.name in skills:
                    logger.warning(
                        "Duplicate skill name '%s' found in group '%s', overwriting it.",
                        skill.name,
                        group_name,
                    )
                skills[skill.name] = skill
    return skills


def render_skill_instructions(skills: Sequence[Skill], viewer_name: str) -> str:
    """The default system-prompt section listing ``skills``."""
    entries = "".join(
        f"\n<skill>\n<name>{s.name}</name>\n<description>{s.description}</description>\n"
        f"<dir>{s.dir}</dir>\n</skill>"
        for s in skills
    )
    return (
        "<agent-skills>\n"
        "Skills are a collection of instructions, scripts, and resources to extend your "
        "capabilities.\n\n"
        "**IMPORTANT**: Skills are NOT tools, and you cannot call a skill directly. To use a "
        f"skill, you MUST use the `{viewer_name}` tool to read the skill's full instructions, "
        "and then follow those instructions to use the tools and resources provided by the "
        "skill.\n\n"
        f"# Available Skills:{entries}\n"
        "</agent-skills>\n"
    )


class SkillViewer(ToolBase):
    """The ``Skill`` tool: returns the markdown of a skill visible in the active groups.

    Built by the toolkit, which hands it a coroutine function mapping the activated group
    names to the visible skills.  Always allowed, read-only and concurrency-safe.
    """

    name = "Skill"
    description = (
        "Retrieve a skill within the conversation. When users asks you to perform tasks, "
        "check if any of the available skills match. Skills provide specialized capabilities "
        "and domain knowledge."
    )
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "skill": {"type": "string", "description": "The exact name of the skill to view. "}
        },
        "required": ["skill"],
    }
    is_concurrency_safe = True
    is_read_only = True
    is_state_injected = True

    def __init__(self, get_skills: Callable[[list[str]], Awaitable[dict[str, Skill]]]) -> None:
        super().__init__()
        self._get_skills = get_skills

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        """Always allowed: it only reads instructions."""
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message="The skill viewer is always allowed to be called.",
        )

    async def call(
        self, emit: Emit, /, skill: str = "", _agent_state: object = None, **_: object
    ) -> ToolChunk:
        """The markdown of ``skill``, or an error naming it when it is not visible."""
        tool_context = getattr(_agent_state, "tool_context", None)
        groups = list(getattr(tool_context, "activated_groups", None) or [])
        found = (await self._get_skills(groups)).get(skill)
        if found is None:
            return ToolChunk(
                content=[TextBlock(text=f"SkillNotFoundError: Skill '{skill}' not found.")],
                state=ToolResultState.ERROR,
            )
        return ToolChunk(content=[TextBlock(text=found.markdown)])

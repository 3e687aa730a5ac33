"""Agent skills: directories of instructions and resources an agent reads on demand.

A skill is a directory holding a ``SKILL.md`` whose frontmatter names and describes it. The
toolkit lists the skills of the active tool groups in the system prompt and offers the
``Skill`` viewer tool, through which the model reads a skill's full instructions.
"""

from ._base import (
    Skill as Skill,
    SkillFormatError as SkillFormatError,
    SkillLoaderBase as SkillLoaderBase,
)
from ._local import (
    LocalSkillLoader as LocalSkillLoader,
    parse_skill_markdown as parse_skill_markdown,
)

__all__ = [
    "LocalSkillLoader",
    "Skill",
    "SkillFormatError",
    "SkillLoaderBase",
    "parse_skill_markdown",
]

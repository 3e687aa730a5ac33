"""The skill record and the loader interface."""

from __future__ import annotations

import abc
from typing import Any

import attrs

from ..exception import TrioagentError

__all__ = ["Skill", "SkillFormatError", "SkillLoaderBase"]


class SkillFormatError(TrioagentError, ValueError):
    """A ``SKILL.md`` that cannot be read as a skill (no frontmatter, frontmatter that is not
    YAML, a missing ``name`` or ``description``).  The message names the file and what is
    wrong."""


@attrs.define(kw_only=True)
class Skill:
    """One skill.

    Attributes:
        name: how the model names it to the ``Skill`` viewer.
        description: when the skill applies (listed in the system prompt).
        dir: the skill's directory (its scripts and resources are relative to it).
        markdown: the body of ``SKILL.md`` after the frontmatter, shown by the viewer.
        updated_at: the modification time of ``SKILL.md`` when it was loaded.
        frontmatter: every field of the frontmatter as YAML read it (``license``, a nested
            ``metadata`` map, ``allowed-tools``, ...), ``name`` and ``description`` included.
    """

    name: str
    description: str
    dir: str
    markdown: str
    updated_at: float = 0.0
    frontmatter: dict[str, Any] = attrs.field(factory=dict)


class SkillLoaderBase(abc.ABC):
    """Where skills come from.  :meth:`list_skills` is called whenever the toolkit needs the
    current skills (each model step), so a loader may pick up new or changed skills."""

    @abc.abstractmethod
    async def list_skills(self) -> list[Skill]:
        """The skills this loader can provide now."""

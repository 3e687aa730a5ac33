"""Skills from the local file system: directories holding a ``SKILL.md``.

``SKILL.md`` starts with a frontmatter block between two ``---`` lines, read as YAML
(``yaml.safe_load``): quoting, block scalars, comments, lists and nested maps such as the
``metadata:`` map of the Agent Skills format all work as YAML has them.  The block must be a
map with string ``name`` and ``description``; every field is kept in
:attr:`Skill.frontmatter`.  Text that is not valid YAML is a :class:`SkillFormatError` naming
the file and the line (a ``description`` holding ``: `` must be quoted, as YAML requires).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import trio

from ._base import Skill, SkillFormatError, SkillLoaderBase

__all__ = ["LocalSkillLoader", "parse_skill_markdown"]

logger = logging.getLogger("trioagent.skill")

SKILL_FILE = "SKILL.md"


def parse_skill_markdown(text: str, source: str = SKILL_FILE) -> tuple[dict[str, Any], str]:
    """Split a ``SKILL.md`` into its frontmatter (a YAML map) and its markdown body.

    Raises:
        SkillFormatError: no frontmatter block, an unterminated block, text that is not
            YAML, or YAML that is not a map (the message names ``source`` and, for a YAML
            error, the line in the file).
    """
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise SkillFormatError(f"{source}: expected a frontmatter block opened by '---' on line 1")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise SkillFormatError(
            f"{source}: the frontmatter block is never closed by '---'"
        ) from None
    import yaml  # imported on first use, not with trioagent

    try:
        fields = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 2}" if mark is not None else "the frontmatter"
        problem = getattr(exc, "problem", None) or str(exc)
        raise SkillFormatError(
            f"{source}: the frontmatter is not valid YAML ({where}: {problem}); quote a value "
            "that holds ': ' or starts with a special character"
        ) from None
    if fields is None:
        fields = {}
    if not isinstance(fields, dict):
        raise SkillFormatError(
            f"{source}: the frontmatter must be a YAML map of fields, got a {type(fields).__name__}"
        )
    return fields, "\n".join(lines[end + 1 :]).lstrip("\n")


def skill_from_text(text: str, skill_dir: str, updated_at: float, source: str) -> Skill:
    """Build a :class:`Skill` from the text of its ``SKILL.md``.

    Raises:
        SkillFormatError: see :func:`parse_skill_markdown`, or ``name`` / ``description``
            missing, empty or not a string.
    """
    fields, body = parse_skill_markdown(text, source)
    missing = [key for key in ("name", "description") if not fields.get(key)]
    if missing:
        raise SkillFormatError(
            f"{source}: the frontmatter lacks the required field(s) {', '.join(missing)}"
        )
    for key in ("name", "description"):
        if not isinstance(fields[key], str):
            raise SkillFormatError(
                f"{source}: the frontmatter field {key!r} must be a string, got "
                f"{type(fields[key]).__name__} (quote it)"
            )
    return Skill(
        name=fields["name"],
        description=fields["description"],
        dir=skill_dir,
        markdown=body,
        updated_at=updated_at,
        frontmatter=fields,
    )


class LocalSkillLoader(SkillLoaderBase):
    """Skills in a local directory: the directory itself when it holds a ``SKILL.md``, and,
    with ``scan_subdir=True``, every directory below it that holds one.

    :meth:`list_skills` skips a skill that cannot be loaded with a WARNING on the
    ``trioagent.skill`` logger naming its ``SKILL.md`` and the problem (a broken skill never
    breaks the agent); :meth:`load_skill` raises instead.  A skill is re-read only when
    its ``SKILL.md`` changed since the last listing.  File I/O runs in a worker thread.
    """

    def __init__(self, directory: str | os.PathLike[str], scan_subdir: bool = False) -> None:
        self.directory = os.path.abspath(os.path.expanduser(os.fspath(directory)))
        self.scan_subdir = scan_subdir
        self._cache: dict[str, Skill] = {}

    def __repr__(self) -> str:
        return f"LocalSkillLoader({self.directory!r}, scan_subdir={self.scan_subdir})"

    async def load_skill(self, skill_dir: str | os.PathLike[str]) -> Skill:
        """Load the skill in ``skill_dir`` (from the cache when its file is unchanged).

        Raises:
            SkillFormatError: the ``SKILL.md`` is malformed.
            OSError: it cannot be read.
        """
        root = os.fspath(skill_dir)
        return await trio.to_thread.run_sync(self._load_sync, root)

    def _load_sync(self, root: str) -> Skill:
        path = os.path.join(root, SKILL_FILE)
        updated_at = os.path.getmtime(path)
        cached = self._cache.get(root)
        if cached is not None and cached.updated_at == updated_at:
            return cached
        with open(path, encoding="utf-8-sig") as handle:
            text = handle.read()
        skill = skill_from_text(text, root, updated_at, path)
        self._cache[root] = skill
        return skill

    def _skill_dirs(self) -> list[str]:
        if not os.path.isdir(self.directory):
            logger.warning("Skill directory %s does not exist.", self.directory)
            return []
        found = []
        if os.path.isfile(os.path.join(self.directory, SKILL_FILE)):
            found.append(self.directory)
        if self.scan_subdir:
            for root, dirs, files in os.walk(self.directory):
                dirs.sort()
                if root != self.directory and SKILL_FILE in files:
                    found.append(root)
        return found

    async def list_skills(self) -> list[Skill]:
        """The loadable skills, in directory order; broken ones are logged and skipped."""
        roots = await trio.to_thread.run_sync(self._skill_dirs)
        skills = []
        for root in roots:
            try:
                skills.append(await self.load_skill(root))
            except (SkillFormatError, OSError, UnicodeDecodeError) as exc:
                if isinstance(exc, SkillFormatError):  # its message starts with the file
                    logger.warning("Skipping a skill: %s", exc)
                else:
                    logger.warning("Skipping the skill %s: %s", os.path.join(root, SKILL_FILE), exc)
        return skills

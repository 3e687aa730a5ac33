"""Skills from the local file system: directories holding a ``SKILL.md``.

``SKILL.md`` starts with a frontmatter block between two ``---`` lines.  The block is a small
subset of YAML, parsed here: ``key: value`` lines, values optionally in single or double
quotes, ``#`` comment lines, and ``key: |`` / ``key: >`` blocks whose indented lines follow
(kept as lines, or folded into one line).  ``name`` and ``description`` are required; other
keys are ignored.
"""

from __future__ import annotations

import logging
import os
import re

import trio

from ._base import Skill, SkillFormatError, SkillLoaderBase

__all__ = ["LocalSkillLoader", "parse_skill_markdown"]

logger = logging.getLogger("trioagent.skill")

SKILL_FILE = "SKILL.md"
_KEY = re.compile(r"^([A-Za-z_][\w-]*)\s*:(.*)$")


def parse_skill_markdown(text: str, source: str = SKILL_FILE) -> tuple[dict[str, str], str]:
    """Split a ``SKILL.md`` into its frontmatter fields and its markdown body.

    Raises:
        SkillFormatError: no frontmatter block, an unterminated block, or a line that is not
            ``key: value`` (the message names ``source`` and the line number).
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
    fields = _parse_fields(lines[1:end], source)
    return fields, "\n".join(lines[end + 1 :]).lstrip("\n")


def _parse_fields(lines: list[str], source: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _KEY.match(line)
        if match is None or line[0].isspace():
            raise SkillFormatError(
                f"{source}: line {i + 1} of the frontmatter is not 'key: value': {line!r}"
            )
        key, value = match.group(1), match.group(2).strip()
        if value in ("|", ">", "|-", ">-"):
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i][0].isspace()):
                block.append(lines[i].strip())
                i += 1
            value = ("\n" if value.startswith("|") else " ").join(block).strip()
        else:
            value = _unquote(value, source, i + 1)
        fields[key] = value
    return fields


def _unquote(value: str, source: str, line_no: int) -> str:
    if value[:1] in ("'", '"'):
        quote = value[0]
        if len(value) < 2 or value[-1] != quote:
            raise SkillFormatError(
                f"{source}: line {line_no} of the frontmatter has an unclosed {quote} quote"
            )
        inner = value[1:-1]
        return inner.replace("''", "'") if quote == "'" else inner.replace('\\"', '"')
    return value.split(" #", 1)[0].rstrip()


def skill_from_text(text: str, skill_dir: str, updated_at: float, source: str) -> Skill:
    """Build a :class:`Skill` from the text of its ``SKILL.md``.

    Raises:
        SkillFormatError: see :func:`parse_skill_markdown`, or ``name`` / ``description``
            missing or empty.
    """
    fields, body = parse_skill_markdown(text, source)
    missing = [key for key in ("name", "description") if not fields.get(key)]
    if missing:
        raise SkillFormatError(
            f"{source}: the frontmatter lacks the required field(s) {', '.join(missing)}"
        )
    return Skill(
        name=fields["name"],
        description=fields["description"],
        dir=skill_dir,
        markdown=body,
        updated_at=updated_at,
    )


class LocalSkillLoader(SkillLoaderBase):
    """Skills in a local directory: the directory itself when it holds a ``SKILL.md``, and,
    with ``scan_subdir=True``, every directory below it that holds one.

    :meth:`list_skills` logs and skips a skill that cannot be loaded (a broken ``SKILL.md``
    never breaks the agent); :meth:`load_skill` raises instead.  A skill is re-read only when
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
                logger.warning("Skipping the skill in %s: %s", root, exc)
        return skills

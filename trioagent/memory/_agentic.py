"""File-backed long-term memory the model manages itself: a directory of Markdown files with
an index, ``MEMORY.md``.

:class:`MemoryDirectory` is that directory: its index as a system-prompt section, a manifest of
its files (read from their frontmatter), and :meth:`MemoryDirectory.retrieve`, which lets a
chat model pick the files useful for a query and returns their contents as one hint text.
"""

from __future__ import annotations

import datetime
import logging
import re
import time

import attrs

from .._core.json_types import JSONObject
from ..message import SystemMsg, UserMsg
from ..model import ChatModelBase
from ._files import MemoryBackend

__all__ = [
    "DEFAULT_MEMORY_INSTRUCTIONS",
    "DEFAULT_RETRIEVAL_INSTRUCTIONS",
    "MEMORY_INDEX",
    "MemoryDirectory",
    "MemoryFileHeader",
    "parse_frontmatter",
    "truncate_to_tokens",
]

# The logger of the middleware that runs this memory for the agent.
logger = logging.getLogger("trioagent.middleware")

MEMORY_INDEX = "MEMORY.md"
#: How many selected files a retrieval surfaces at most.
MAX_SELECTED_FILES = 5

DEFAULT_MEMORY_INSTRUCTIONS = """# Long-term memory

You have a persistent, file-based memory at `{memory_dir}`. The directory exists already:
write to it directly with your file tools (no need to create it or check for it).

Build this memory up over time, so that future conversations know who the user is, how they
like to work with you, what to avoid or repeat, and the context behind their work. When the
user asks you to remember something, save it at once; when they ask you to forget something,
find the entry and remove it.

## Kinds of memory

- `user`: the user's role, goals, responsibilities and knowledge, so you can tailor your help.
- `feedback`: guidance on how to work — corrections ("don't do X") and confirmations of a
  non-obvious approach ("yes, exactly"). State the rule, then **Why:** and **How to apply:**.
- `project`: facts about ongoing work (goals, decisions, deadlines, incidents) that the code
  and its history do not tell. Convert relative dates to absolute dates.
- `reference`: where to find information in external systems (trackers, dashboards, channels).

Do not save what can be derived from the current files or their history, temporary task
state, or details of the current conversation only.

## How to save a memory

1. Write the memory to its own file (e.g. `user_role.md`) starting with this frontmatter:

```markdown
---
name: <memory name>
description: <one line: the situation in which you should read this file before acting>
type: <user | feedback | project | reference>
---

<memory content>
```

2. Add a one-line pointer to it in `MEMORY.md` (`- [Title](file.md) — hook`). `MEMORY.md` is
   an index, not a memory: never write memory content into it, and keep it short (it is
   always loaded, and cut when too long).

Keep names, descriptions and types up to date, organize by topic, update or remove memories
that turned out wrong, and never write duplicates — update the existing file instead.

## Using memories

Read a memory file when it seems relevant or the user refers to earlier work; you must check
your memory when the user asks you to recall something. If the user asks you not to use
memory, act as if `MEMORY.md` were empty. Memories can be stale: verify a remembered file,
function or flag still exists before recommending it, and fix memories that are wrong.
To search past context, grep the Markdown files under `{memory_dir}`.
"""

DEFAULT_RETRIEVAL_INSTRUCTIONS = (
    "You select the memory files that will be useful as context for answering a user's "
    "query. You are given the query and a list of the available memory files with their "
    "names, types, dates and descriptions.\n\n"
    f"Return the file names of the memories that will clearly be useful (up to "
    f"{MAX_SELECTED_FILES}), exactly as they are listed.\n"
    "- Only include a memory you are sure will help, judging by its name and description.\n"
    "- When unsure whether a memory is useful, leave it out.\n"
    "- When no memory is clearly useful, return an empty list."
)

SELECTION_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "selected_files": {
            "type": "array",
            "items": {"type": "string"},
            "description": (
                "File names of the memory files to surface, relative to the memory directory "
                f"(e.g. 'user_role.md'); at most {MAX_SELECTED_FILES}."
            ),
        }
    },
    "required": ["selected_files"],
}

_EMPTY_INDEX_TEXT = (
    "Your MEMORY.md is currently empty. When you save new memories, they will appear here."
)
_FRONTMATTER = re.compile(r"\A\s*---[ \t]*\r?\n(?P<body>.*?)(?:\r?\n)---[ \t]*(?:\r?\n|\Z)", re.S)
_FIELD = re.compile(r"^(?P<key>\w+)[ \t]*:[ \t]*(?P<value>.+?)[ \t]*$", re.M)


def estimate_tokens(text: str) -> int:
    """A cheap token estimate: UTF-8 bytes / 4, rounded."""
    return round(len(text.encode("utf-8")) / 4)


def estimate_bytes(tokens: int) -> int:
    """The byte budget of ``tokens`` tokens (the inverse estimate: 4 bytes per token)."""
    return max(0, 4 * tokens)


def truncate_to_tokens(content: str, max_tokens: int) -> str:
    """A prefix of ``content`` within ``max_tokens`` (estimated); ``""`` for ``max_tokens <= 0``.

    Starts at the proportional index, then steps back 10 characters at a time until the prefix
    fits.
    """
    if max_tokens <= 0:
        return ""
    total = estimate_tokens(content)
    if total <= max_tokens:
        return content
    index = int(max_tokens / total * len(content))
    while index > 0 and estimate_tokens(content[:index]) > max_tokens:
        index = max(0, index - 10)
    return content[:index]


def parse_frontmatter(content: str) -> dict[str, str]:
    """The scalar ``key: value`` lines of a leading ``---`` block (the closing fence may end
    the text); ``{}`` without one.  Nested structures are ignored."""
    match = _FRONTMATTER.match(content)
    if match is None:
        return {}
    return {m.group("key"): m.group("value").strip() for m in _FIELD.finditer(match["body"])}


@attrs.define(eq=False)
class MemoryFileHeader:
    """One memory file as the manifest shows it (read from its frontmatter only)."""

    filename: str  #: relative to the memory directory
    path: str  #: the backend path
    description: str | None
    type: str | None
    mtime: float | None


def _age(mtime: float) -> str:
    days = max(0, int((time.time() - mtime) / 86_400))
    if days == 0:
        return "today"
    if days == 1:
        return "yesterday"
    return f"{days} days ago"


class MemoryDirectory:
    """The memory directory ``join(workdir, memory_dir)`` of a :class:`MemoryBackend`."""

    def __init__(self, workdir: str, memory_dir: str, backend: MemoryBackend) -> None:
        self.workdir = workdir
        self.memory_dir = memory_dir
        self.backend = backend

    @property
    def path(self) -> str:
        """The memory directory (``join(workdir, memory_dir)`` in the backend's terms)."""
        return self.backend.join_path(self.workdir, self.memory_dir)

    @property
    def index_path(self) -> str:
        """The index file, ``<memory dir>/MEMORY.md``."""
        return self.backend.join_path(self.path, MEMORY_INDEX)

    async def ensure_layout(self) -> None:
        """Create an empty ``MEMORY.md`` (and so the directory) unless it exists; an existing
        index is never touched."""
        if not await self.backend.file_exists(self.index_path):
            logger.info("AgenticMemoryMiddleware: creating %s", self.index_path)
            await self.backend.write_file(self.index_path, b"")

    async def prompt_section(self, instructions: str, max_tokens: int) -> str:
        """The instructions (``{memory_dir}`` replaced by the directory) and the index, cut to
        ``max_tokens`` with a notice of how to read the rest."""
        await self.ensure_layout()
        index = (await self.backend.read_file(self.index_path)).decode("utf-8", "replace")
        shown = truncate_to_tokens(index, max_tokens)
        if len(shown) != len(index):
            kept = len(shown.split("\n"))
            omitted = len(index.split("\n")) - kept
            shown += (
                "\n<<<TRUNCATED>>>\n<system-reminder>The remaining "
                f"{omitted} lines have been omitted due to context length limits. Use the "
                f"`Read` tool with offset `{kept}` to access the rest of "
                f"'{self.index_path}'.</system-reminder>"
            )
        if not shown:
            shown = _EMPTY_INDEX_TEXT
        return f"{instructions.replace('{memory_dir}', self.path)}\n## MEMORY.md\n{shown}"

    async def retrieve(
        self,
        model: ChatModelBase,
        query: str,
        *,
        instructions: str = DEFAULT_RETRIEVAL_INSTRUCTIONS,
        max_files: int = 200,
        max_tokens_per_frontmatter: int = 256,
        max_tokens_per_file: int = 2_000,
    ) -> str | None:
        """Let ``model`` select the memory files useful for ``query`` (from a manifest of at
        most ``max_files``) and return their contents as one hint text (``None``: no memory
        files, or none selected)."""
        await self.ensure_layout()
        headers = await self.list_files(max_files, max_tokens_per_frontmatter)
        if not headers:
            return None
        response = await model.generate_structured_output(
            [
                SystemMsg("system", instructions),
                UserMsg(
                    "user",
                    f"Query: {query}\n\nAvailable memories:\n{self.format_manifest(headers)}",
                ),
            ],
            SELECTION_SCHEMA,
        )
        by_name = {h.filename: h for h in headers}
        raw = response.content.get("selected_files")
        selected: list[str] = []
        for name in raw if isinstance(raw, list) else []:
            if isinstance(name, str) and name in by_name and name not in selected:
                selected.append(name)
        parts: list[str] = []
        for name in selected[:MAX_SELECTED_FILES]:
            header = by_name[name]
            try:
                data = await self.backend.read_file(header.path)
            except Exception as exc:  # a file that vanished or cannot be read is skipped
                logger.debug("AgenticMemoryMiddleware: cannot read %s: %s", header.path, exc)
                continue
            content = truncate_to_tokens(data.decode("utf-8", "replace"), max_tokens_per_file)
            if header.mtime is not None:
                title = f"Memory (saved {_age(header.mtime)}): {header.path}:"
            else:
                title = f"Memory: {header.path}:"
            parts.append(f"{title}\n\n{content}")
        return "\n\n---\n\n".join(parts) if parts else None

    async def list_files(
        self, max_files: int = 200, max_tokens_per_frontmatter: int = 256
    ) -> list[MemoryFileHeader]:
        """The memory files (every ``.md`` below the memory directory except the index),
        newest first, at most ``max_files``; each read up to its first
        ``max_tokens_per_frontmatter`` tokens for the frontmatter."""
        backend = self.backend
        memory_dir = self.path
        try:
            entries = await backend.list_dir(memory_dir, recursive=True)
        except Exception as exc:
            logger.debug("AgenticMemoryMiddleware: cannot list %s: %s", memory_dir, exc)
            return []
        prefix = backend.join_path(backend.normpath(memory_dir), "")
        limit = estimate_bytes(max_tokens_per_frontmatter)
        headers: list[MemoryFileHeader] = []
        for entry in entries:
            entry_path = backend.normpath(entry)
            if backend.isabs(entry_path):
                if not entry_path.startswith(prefix):
                    continue
                filename, full_path = entry_path[len(prefix) :], entry_path
            elif entry_path == ".." or entry_path.startswith(("../", "..\\")):
                continue  # a relative entry leaving the memory directory
            else:
                filename, full_path = entry_path, backend.join_path(memory_dir, entry_path)
            if not filename.endswith(".md") or filename == MEMORY_INDEX:
                continue
            try:
                head = (await backend.read_file(full_path))[:limit].decode("utf-8", "replace")
                mtime = await backend.stat_mtime(full_path)
            except Exception as exc:
                logger.debug("AgenticMemoryMiddleware: skipping %s: %s", full_path, exc)
                continue
            fields = parse_frontmatter(head)
            headers.append(
                MemoryFileHeader(
                    filename=filename,
                    path=full_path,
                    description=fields.get("description") or None,
                    type=fields.get("type") or None,
                    mtime=mtime,
                )
            )
        headers.sort(key=lambda h: h.mtime or 0.0, reverse=True)
        return headers[: max(0, max_files)]

    @staticmethod
    def format_manifest(headers: list[MemoryFileHeader]) -> str:
        """One line per file: ``- [type] filename (YYYY-MM-DD): description`` (the tag and the
        description are left out when absent; the date is ``unknown`` without an mtime)."""
        lines = []
        for h in headers:
            tag = f"[{h.type}] " if h.type else ""
            date = (
                datetime.datetime.fromtimestamp(h.mtime).strftime("%Y-%m-%d")
                if h.mtime is not None
                else "unknown"
            )
            description = f": {h.description}" if h.description else ""
            lines.append(f"- {tag}{h.filename} ({date}){description}")
        return "\n".join(lines)

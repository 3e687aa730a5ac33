"""``AgenticMemoryMiddleware``: file-backed long-term memory managed by the model itself
(reference/tools_middleware.md §8.6; the seed's long-term memory section).

The memory is a directory of Markdown files (``<workdir>/<memory_dir>``, ``Memory`` by
default) with an index, ``MEMORY.md``.  The model writes the files itself with the usual file
tools; the middleware

* appends the memory instructions and the (bounded) index to the system prompt
  (``on_system_prompt``), creating an empty ``MEMORY.md`` on first use;
* starts a background retrieval at the beginning of every reply (``on_reply``): a model picks
  the memory files useful for the user's input from a manifest of their frontmatter, and the
  picked files' contents become one hint;
* adds that hint to the reply's assistant message on the first reasoning step after the
  retrieval finished (``on_reasoning``).  It never waits for it: a reply that answers in one
  step usually gets no hint.

Concurrency (DESIGN.md §4 rule 7; reference §10 notes 2): the retrieval runs in a nursery owned
by this middleware's ``on_reply`` layer — opened around ``await next_handler()`` — and is
cancelled when the reply ends, so it never outlives the reply.  Its handle lives in a context
variable set for the duration of that ``on_reply`` call (``on_reasoning`` runs in the same
task or a descendant of it), never on the instance: one middleware can serve many concurrent
agents, and each reply sees only its own retrieval.

File I/O goes through a :class:`MemoryBackend`; the default :class:`LocalBackend` does it off
the event loop (``trio.Path`` / ``trio.to_thread``).
"""

from __future__ import annotations

import contextvars
import datetime
import logging
import os
import re
import time
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs
import trio

from .._core.chain import NextHandler
from .._core.concurrency import reraise_unwrapped
from .._core.emit import Emit
from ..message import HintBlock, Msg, SystemMsg, UserMsg
from ..model import ChatModelBase
from ._base import MiddlewareBase

__all__ = [
    "DEFAULT_MEMORY_INSTRUCTIONS",
    "DEFAULT_RETRIEVAL_INSTRUCTIONS",
    "AgenticMemoryMiddleware",
    "LocalBackend",
    "MemoryBackend",
]

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

SELECTION_SCHEMA: dict[str, Any] = {
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
    """The token estimate of the reference: UTF-8 bytes / 4, rounded."""
    return round(len(text.encode("utf-8")) / 4)


def estimate_bytes(tokens: int) -> int:
    """The byte budget of ``tokens`` tokens (the inverse estimate: 4 bytes per token)."""
    return max(0, 4 * tokens)


def truncate_to_tokens(content: str, max_tokens: int) -> str:
    """A prefix of ``content`` within ``max_tokens`` (estimated); ``""`` for ``max_tokens <= 0``.

    As the reference: start at the proportional index, then step back 10 characters at a time
    until the prefix fits.
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


# -- storage ------------------------------------------------------------------------------------


@runtime_checkable
class MemoryBackend(Protocol):
    """Where the memory files live.  Paths are the backend's own strings.

    ``list_dir`` may return paths relative to the listed directory or absolute ones (absolute
    entries outside the memory directory are ignored).  ``write_file`` creates missing parent
    directories.  ``stat_mtime`` returns a Unix timestamp (``None`` when unknown).
    """

    async def file_exists(self, path: str) -> bool: ...

    async def read_file(self, path: str) -> bytes: ...

    async def write_file(self, path: str, data: bytes) -> None: ...

    async def list_dir(self, path: str, recursive: bool = False) -> list[str]: ...

    async def stat_mtime(self, path: str) -> float | None: ...

    def join_path(self, *parts: str) -> str: ...

    def normpath(self, path: str) -> str: ...

    def isabs(self, path: str) -> bool: ...


class LocalBackend:
    """The local file system, with every blocking call off the event loop
    (``trio.Path`` and ``trio.to_thread``).

    ``list_dir`` returns paths relative to the listed directory: with ``recursive=True`` every
    file below it (directories are walked, not listed), otherwise its direct entries.  Both
    are sorted.
    """

    async def file_exists(self, path: str) -> bool:
        return await trio.Path(path).is_file()

    async def read_file(self, path: str) -> bytes:
        return await trio.Path(path).read_bytes()

    async def write_file(self, path: str, data: bytes) -> None:
        target = trio.Path(path)
        await target.parent.mkdir(parents=True, exist_ok=True)
        await target.write_bytes(data)

    async def list_dir(self, path: str, recursive: bool = False) -> list[str]:
        return await trio.to_thread.run_sync(_list_dir, path, recursive)

    async def stat_mtime(self, path: str) -> float | None:
        return (await trio.Path(path).stat()).st_mtime

    def join_path(self, *parts: str) -> str:
        return os.path.join(*parts)

    def normpath(self, path: str) -> str:
        return os.path.normpath(path)

    def isabs(self, path: str) -> bool:
        return os.path.isabs(path)


def _list_dir(path: str, recursive: bool) -> list[str]:
    if not recursive:
        return sorted(os.listdir(path))
    found: list[str] = []
    inside = os.path.join(os.path.realpath(path), "")
    for root, _dirs, files in os.walk(path):
        relative = os.path.relpath(root, path)
        for name in files:
            # A symlinked file may point anywhere: only what really lies inside is listed.
            if not os.path.realpath(os.path.join(root, name)).startswith(inside):
                continue
            found.append(name if relative == os.curdir else os.path.join(relative, name))
    return sorted(found)


# -- per-reply retrieval ----------------------------------------------------------------------


@attrs.define(eq=False)
class _FileHeader:
    """One memory file as the manifest shows it (read from its frontmatter only)."""

    filename: str  #: relative to the memory directory
    path: str  #: the backend path
    description: str | None
    type: str | None
    mtime: float | None


@attrs.define(eq=False)
class _Retrieval:
    """The background retrieval of one reply: owned by that reply's ``on_reply`` nursery."""

    agent: Any
    result: str | None = None
    done: bool = False
    consumed: bool = False
    finished: trio.Event = attrs.Factory(trio.Event)


def _query_of(inputs: Any) -> str | None:
    """``"<name>: <text>"`` per input message with text, newline-joined (``None``: none)."""
    if isinstance(inputs, Msg):
        msgs: list[Any] = [inputs]
    elif isinstance(inputs, list | tuple) and all(isinstance(m, Msg) for m in inputs):
        msgs = list(inputs)
    else:
        return None
    lines = [f"{m.name}: {text}" for m in msgs if (text := m.get_text_content()) is not None]
    return "\n".join(lines) or None


def _age(mtime: float) -> str:
    days = max(0, int((time.time() - mtime) / 86_400))
    if days == 0:
        return "today"
    if days == 1:
        return "yesterday"
    return f"{days} days ago"


class AgenticMemoryMiddleware(MiddlewareBase):
    """Long-term memory as Markdown files the model manages itself.

    Args:
        workdir: the agent's working directory.
        memory_dir: the memory directory inside ``workdir`` (holds ``MEMORY.md``).
        parameters: an :class:`AgenticMemoryMiddleware.Parameters` (defaults when ``None``).
        backend: a :class:`MemoryBackend` (a :class:`LocalBackend` when ``None``).

    Hooks: ``on_system_prompt`` (instructions + the index), ``on_reply`` (starts the
    retrieval when ``parameters.retrieval_async``), ``on_reasoning`` (adds the finished
    retrieval's hint once).  The model needs file tools (e.g. ``Read``/``Write``) in its
    toolkit to manage the memory; the middleware contributes none.

    Differences from the reference: the reference keeps the retrieval task on the instance
    (shared by every agent and reply using it) and never awaits it; here it is a task of a
    nursery owned by the reply's ``on_reply`` layer, found through a context variable, and
    cancelled when the reply ends (also when it parks).  A failing retrieval is logged (the
    reference drops the error silently) and yields no hint.  :meth:`wait_retrieval` lets a
    tool or an inner middleware wait for the hint deterministically.
    """

    @attrs.define(kw_only=True)
    class Parameters:
        """The tunable parameters.

        Attributes:
            memory_max_tokens: the index's token budget in the system prompt (estimated as
                UTF-8 bytes / 4); a longer index is cut and a truncation notice appended.
            memory_instructions: appended to the system prompt before the index;
                ``{memory_dir}`` is replaced by the memory directory (plain substitution,
                other braces stay as they are).
            retrieval_async: start a retrieval at the beginning of each reply.
            retrieval_model: the model choosing the files (``None``: the agent's model).
            retrieval_max_tokens_per_md: the token budget of each surfaced file.
            retrieval_max_files: how many files (newest first) the manifest lists at most.
            retrieval_max_tokens_per_frontmatter: how much of each file is read for its
                frontmatter (4 bytes per token).
            retrieval_instructions: the system prompt of the selection call.
        """

        memory_max_tokens: int = attrs.field(
            default=4_000, validator=attrs.validators.instance_of(int)
        )
        memory_instructions: str = attrs.field(
            default=DEFAULT_MEMORY_INSTRUCTIONS, validator=attrs.validators.instance_of(str)
        )
        retrieval_async: bool = attrs.field(
            default=True, validator=attrs.validators.instance_of(bool)
        )
        retrieval_model: ChatModelBase | None = attrs.field(
            default=None,
            validator=attrs.validators.optional(attrs.validators.instance_of(ChatModelBase)),
        )
        retrieval_max_tokens_per_md: int = attrs.field(
            default=2_000, validator=attrs.validators.instance_of(int)
        )
        retrieval_max_files: int = attrs.field(
            default=200, validator=attrs.validators.instance_of(int)
        )
        retrieval_max_tokens_per_frontmatter: int = attrs.field(
            default=256, validator=attrs.validators.instance_of(int)
        )
        retrieval_instructions: str = attrs.field(
            default=DEFAULT_RETRIEVAL_INSTRUCTIONS, validator=attrs.validators.instance_of(str)
        )

    FILENAME_MEMORY_MD: ClassVar[str] = MEMORY_INDEX

    def __init__(
        self,
        *,
        workdir: str | os.PathLike[str],
        memory_dir: str = "Memory",
        parameters: AgenticMemoryMiddleware.Parameters | None = None,
        backend: MemoryBackend | None = None,
    ) -> None:
        if parameters is not None and not isinstance(parameters, self.Parameters):
            raise TypeError(
                "parameters must be an AgenticMemoryMiddleware.Parameters, got "
                f"{type(parameters).__name__}"
            )
        self.workdir = os.fspath(workdir)
        self.memory_dir = memory_dir
        self.parameters = parameters if parameters is not None else self.Parameters()
        self.backend: MemoryBackend = backend if backend is not None else LocalBackend()
        # A context variable, not instance state: each on_reply call sets its own retrieval
        # for the code it runs (and resets it when it returns).
        self._retrieval: contextvars.ContextVar[_Retrieval | None] = contextvars.ContextVar(
            f"AgenticMemoryMiddleware-{id(self):x}", default=None
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(memory_dir={self.memory_dir_path!r})"

    # -- paths ----------------------------------------------------------------------------------

    @property
    def memory_dir_path(self) -> str:
        """The memory directory (``join(workdir, memory_dir)`` in the backend's terms)."""
        return self.backend.join_path(self.workdir, self.memory_dir)

    @property
    def memory_md_path(self) -> str:
        """The index file, ``<memory dir>/MEMORY.md``."""
        return self.backend.join_path(self.memory_dir_path, MEMORY_INDEX)

    async def ensure_layout(self) -> None:
        """Create an empty ``MEMORY.md`` (and so the directory) unless it exists; an existing
        index is never touched."""
        if not await self.backend.file_exists(self.memory_md_path):
            logger.info("AgenticMemoryMiddleware: creating %s", self.memory_md_path)
            await self.backend.write_file(self.memory_md_path, b"")

    # -- system prompt ------------------------------------------------------------------------

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        await self.ensure_layout()
        index = (await self.backend.read_file(self.memory_md_path)).decode("utf-8", "replace")
        shown = truncate_to_tokens(index, self.parameters.memory_max_tokens)
        if len(shown) != len(index):
            kept = len(shown.split("\n"))
            omitted = len(index.split("\n")) - kept
            shown += (
                "\n<<<TRUNCATED>>>\n<system-reminder>The remaining "
                f"{omitted} lines have been omitted due to context length limits. Use the "
                f"`Read` tool with offset `{kept}` to access the rest of "
                f"'{self.memory_md_path}'.</system-reminder>"
            )
        if not shown:
            shown = _EMPTY_INDEX_TEXT
        instructions = self.parameters.memory_instructions.replace(
            "{memory_dir}", self.memory_dir_path
        )
        return f"{current_prompt}\n\n{instructions}\n## MEMORY.md\n{shown}"

    # -- reply / reasoning --------------------------------------------------------------------

    async def on_reply(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: NextHandler, emit: Emit
    ) -> None:
        query = _query_of(input_kwargs.get("inputs")) if self.parameters.retrieval_async else None
        if not query:
            await next_handler()
            return
        retrieval = _Retrieval(agent)
        token = self._retrieval.set(retrieval)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._run_retrieval, retrieval, query)
                try:
                    await next_handler()
                finally:
                    # The reply is over (finished, parked, failed or cancelled): the retrieval
                    # must not outlive it.
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The nursery wraps what the inner layers raised; hand outer layers the plain
            # exception (a Cancelled stays a Cancelled).
            reraise_unwrapped(group)
        finally:
            self._retrieval.reset(token)

    async def on_reasoning(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: NextHandler, emit: Emit
    ) -> None:
        retrieval = self._retrieval.get()
        if (
            retrieval is not None
            and retrieval.agent is agent
            and retrieval.done
            and not retrieval.consumed
        ):
            retrieval.consumed = True
            if retrieval.result:
                agent.state.append_context(agent.name, [HintBlock(hint=retrieval.result)])
        await next_handler()

    async def wait_retrieval(self, agent: Any) -> None:
        """Wait until the retrieval of ``agent``'s current reply has ended (at once when there
        is none here).  Call it from a tool or an inner middleware during the reply to make the
        next reasoning step get the hint deterministically."""
        retrieval = self._retrieval.get()
        if retrieval is not None and retrieval.agent is agent:
            await retrieval.finished.wait()

    async def _run_retrieval(self, retrieval: _Retrieval, query: str) -> None:
        try:
            try:
                retrieval.result = await self.retrieve(retrieval.agent, query)
            except Exception as exc:  # best effort: no hint; Cancelled is not an Exception
                logger.warning(
                    "AgenticMemoryMiddleware: memory retrieval failed (%s: %s)",
                    type(exc).__name__,
                    exc,
                )
                retrieval.result = None
            retrieval.done = True
        finally:
            retrieval.finished.set()

    # -- retrieval ----------------------------------------------------------------------------

    async def retrieve(self, agent: Any, query: str) -> str | None:
        """Select the memory files useful for ``query`` and return their contents as one hint
        text (``None``: no memory files, or none selected)."""
        await self.ensure_layout()
        headers = await self.list_memory_files()
        if not headers:
            return None
        model = self.parameters.retrieval_model or agent.model
        response = await model.generate_structured_output(
            [
                SystemMsg("system", self.parameters.retrieval_instructions),
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
        selected = selected[:MAX_SELECTED_FILES]
        parts: list[str] = []
        for name in selected:
            header = by_name[name]
            try:
                data = await self.backend.read_file(header.path)
            except Exception as exc:  # a file that vanished or cannot be read is skipped
                logger.debug("AgenticMemoryMiddleware: cannot read %s: %s", header.path, exc)
                continue
            content = truncate_to_tokens(
                data.decode("utf-8", "replace"), self.parameters.retrieval_max_tokens_per_md
            )
            if header.mtime is not None:
                title = f"Memory (saved {_age(header.mtime)}): {header.path}:"
            else:
                title = f"Memory: {header.path}:"
            parts.append(f"{title}\n\n{content}")
        return "\n\n---\n\n".join(parts) if parts else None

    async def list_memory_files(self) -> list[_FileHeader]:
        """The memory files (every ``.md`` below the memory directory except the index),
        newest first, at most ``retrieval_max_files``."""
        backend = self.backend
        memory_dir = self.memory_dir_path
        try:
            entries = await backend.list_dir(memory_dir, recursive=True)
        except Exception as exc:
            logger.debug("AgenticMemoryMiddleware: cannot list %s: %s", memory_dir, exc)
            return []
        prefix = backend.join_path(backend.normpath(memory_dir), "")
        limit = estimate_bytes(self.parameters.retrieval_max_tokens_per_frontmatter)
        headers: list[_FileHeader] = []
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
                _FileHeader(
                    filename=filename,
                    path=full_path,
                    description=fields.get("description") or None,
                    type=fields.get("type") or None,
                    mtime=mtime,
                )
            )
        headers.sort(key=lambda h: h.mtime or 0.0, reverse=True)
        return headers[: max(0, self.parameters.retrieval_max_files)]

    @staticmethod
    def format_manifest(headers: list[_FileHeader]) -> str:
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

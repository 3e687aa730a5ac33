"""The tool-side parts of the agent state: the file-read cache and the task list.

They live below the agent so that the built-in tools (``Read``, ``Write``, ``Edit`` and the
task tools) can build and update them; :class:`~trioagent.agent.AgentState` holds one
:class:`ToolContext` and one :class:`TaskContext` and persists them with the rest of the state.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from .._core.ids import generate_id, generate_timestamp

__all__ = ["ReadCacheEntry", "Task", "TaskContext", "TaskState", "ToolContext"]


@attrs.define(kw_only=True)
class ReadCacheEntry:
    """A file as ``Read`` (or a later ``Write`` / ``Edit``) last saw it.

    ``updated_at`` is the file's modification time when it was read; an entry whose file has a
    different modification time now is stale.  ``bytes`` is the size of ``lines`` in KiB.
    """

    file_path: str
    lines: list[str] = attrs.field(factory=list)
    updated_at: float = 0.0
    bytes: float = 0.0


@attrs.define(kw_only=True)
class ToolContext:
    """Tool-side state: the file-read cache (least recently used first) and the activated
    tool groups."""

    max_cache_files: int = attrs.field(default=100, validator=attrs.validators.gt(1))
    max_cache_bytes: int = attrs.field(default=25000, validator=attrs.validators.gt(10000))
    read_file_cache: list[ReadCacheEntry] = attrs.field(factory=list)
    activated_groups: list[str] = attrs.field(factory=list)

    def get_cache(self, file_path: str, mtime: float | None) -> ReadCacheEntry | None:
        """The cached entry of ``file_path`` if the file still has modification time ``mtime``.

        A hit moves the entry to the most recent position; a stale entry is dropped.
        """
        for entry in self.read_file_cache:
            if entry.file_path == file_path:
                self.read_file_cache.remove(entry)
                if mtime is None or mtime != entry.updated_at:
                    return None
                self.read_file_cache.append(entry)
                return entry
        return None

    def cache_file(self, file_path: str, lines: list[str], mtime: float) -> None:
        """Remember ``lines`` as the content of ``file_path`` at ``mtime``, evicting the
        least recently used entries beyond ``max_cache_files`` / ``max_cache_bytes``.

        An entry larger than the whole byte budget is not cached (and evicts nothing).
        """
        size = sum(len(line.encode("utf-8")) for line in lines) / 1024
        self.read_file_cache = [e for e in self.read_file_cache if e.file_path != file_path]
        if size > self.max_cache_bytes:
            return
        while len(self.read_file_cache) >= self.max_cache_files:
            self.read_file_cache.pop(0)
        used = sum(entry.bytes for entry in self.read_file_cache)
        while self.read_file_cache and used + size > self.max_cache_bytes:
            used -= self.read_file_cache.pop(0).bytes
        self.read_file_cache.append(
            ReadCacheEntry(file_path=file_path, lines=list(lines), updated_at=mtime, bytes=size)
        )


class TaskState(enum.StrEnum):
    """Where a task stands."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


@attrs.define(kw_only=True)
class Task:
    """One entry of the agent's task list (managed by the ``Task*`` tools).

    ``blocks`` are the ids of tasks waiting on this one; ``blocked_by`` the ids this one waits
    on.
    """

    subject: str
    description: str = ""
    metadata: dict[str, Any] = attrs.field(factory=dict)
    created_at: str = attrs.field(factory=generate_timestamp)
    state: TaskState = attrs.field(default=TaskState.PENDING, converter=TaskState)
    id: str = attrs.field(factory=generate_id)
    owner: str | None = None
    blocks: list[str] = attrs.field(factory=list)
    blocked_by: list[str] = attrs.field(factory=list)


@attrs.define(kw_only=True)
class TaskContext:
    """The agent's task list."""

    tasks: list[Task] = attrs.field(factory=list)

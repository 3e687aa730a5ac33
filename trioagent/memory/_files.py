"""Where agentic memory files live: the :class:`MemoryBackend` protocol and the local file
system as :class:`LocalBackend`."""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

import trio

__all__ = ["LocalBackend", "MemoryBackend"]


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

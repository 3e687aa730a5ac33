"""``Write`` and ``Edit``: changing files, only after ``Read`` has seen their current content."""

from __future__ import annotations

import difflib
import os

import trio

from ..._core.json_types import JSONObject
from ...message import TextBlock
from .._response import Emit, ToolChunk
from ._common import EditingTool, error, normalize_newlines, stat_mtime

__all__ = ["Edit", "Write"]

_NOT_READ = "Error: To edit a file, you must first read it using the Read tool."


async def _write_text(path: str, content: str) -> None:
    def write() -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(content)

    await trio.to_thread.run_sync(write)


async def _remember(state: object, path: str, content: str) -> None:
    """Refresh the state's read cache after a write, so a next edit needs no re-read."""
    cache = getattr(state, "tool_context", None)
    mtime = await stat_mtime(path)
    if cache is not None and mtime is not None:
        cache.cache_file(path, normalize_newlines(content).splitlines(True), mtime)


def _diff(before: str, after: str, path: str, existed: bool = True) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(True),
            after.splitlines(True),
            fromfile=f"a/{path}" if existed else "/dev/null",
            tofile=f"b/{path}",
            n=3,
        )
    )


async def _cached_text(state: object, path: str) -> str | None:
    """The content ``Read`` recorded for ``path`` if the file has not changed since."""
    cache = getattr(state, "tool_context", None)
    if cache is None:
        return None
    entry = cache.get_cache(path, await stat_mtime(path))
    return None if entry is None else "".join(entry.lines)


class Write(EditingTool):
    """Writes a whole file (creating its directories).  An existing file must have been read
    first (with the agent state injected, the state's read cache must hold its current
    version).  The unified diff is in the result's metadata."""

    name = "Write"
    verb = "Write"
    description = """Writes a file to the local filesystem.

Usage:
- This tool will overwrite the existing file if there is one at the provided path.
- If this is an existing file, you MUST use the Read tool first to read the file's contents. This tool will fail if you did not read the file first.
- ALWAYS prefer editing existing files in the codebase. NEVER write new files unless explicitly required.
- NEVER proactively create documentation files (*.md) or README files. Only create documentation files if explicitly requested by the User.
- Only use emojis if the user explicitly requests it. Avoid writing emojis to files unless asked."""
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "The absolute path to the file to write (must be absolute, "
                "not relative)",
            },
            "content": {"type": "string", "description": "The content to write to the file"},
        },
        "required": ["file_path", "content"],
    }

    async def call(
        self,
        emit: Emit,
        /,
        file_path: str = "",
        content: str = "",
        _agent_state: object = None,
        **_: object,
    ) -> ToolChunk:
        """Write ``content`` to ``file_path``."""
        if not os.path.isabs(file_path):
            return error(f"Error: file_path must be an absolute path, got: {file_path}")
        existed = await stat_mtime(file_path) is not None
        previous = ""
        if existed:
            if _agent_state is not None and await _cached_text(_agent_state, file_path) is None:
                return error(
                    f"Error: File {file_path} exists but has not been read yet. You must read "
                    "the file first before writing to it."
                )
            try:
                previous = (await _read_text(file_path)) or ""
            except OSError:
                previous = ""
        try:
            await _write_text(file_path, content)
        except OSError as exc:
            return error(f"Error writing file: {exc.strerror or exc}")
        if _agent_state is not None:
            await _remember(_agent_state, file_path, content)
        return ToolChunk(
            content=[
                TextBlock(
                    text=f"The file {file_path} has been written successfully "
                    f"({len(content.splitlines())} lines)."
                )
            ],
            metadata={
                "diff": _diff(previous, content, file_path, existed),
                "file_path": file_path,
                "occurrences": 1,
            },
        )


async def _read_text(path: str) -> str | None:
    """The file's text with normalized newlines, ``None`` when it is not UTF-8 text."""

    def read() -> str | None:
        with open(path, "rb") as handle:
            raw = handle.read()
        try:
            return normalize_newlines(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return None

    return await trio.to_thread.run_sync(read)


class Edit(EditingTool):
    """Replaces an exact string in a file: once (it must then be unique) or everywhere.  With
    the agent state injected, the file must have been read first and unchanged since."""

    name = "Edit"
    verb = "Edit"
    description = """Performs exact string replacements in files.

Usage:
- You must use your `Read` tool at least once in the conversation before editing. This tool will error if you attempt an edit without reading the file.
- When editing text from Read tool output, ensure you preserve the exact indentation (tabs/spaces) as it appears AFTER the line number prefix. The line number prefix format is: line number + tab. Everything after that is the actual file content to match. Never include any part of the line number prefix in the old_string or new_string.
- ALWAYS prefer editing existing files in the codebase. NEVER write new files unless explicitly required.
- Only use emojis if the user explicitly requests it. Avoid adding emojis to files unless asked.
- The edit will FAIL if `old_string` is not unique in the file."""
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "The absolute path to the file to edit.",
            },
            "old_string": {
                "type": "string",
                "minLength": 1,
                "description": "The nonempty string to replace. Must match exactly including "
                "whitespace and indentation.",
            },
            "new_string": {
                "type": "string",
                "description": "The string to replace old_string with.",
            },
            "replace_all": {
                "type": "boolean",
                "description": "If true, replace all occurrences. If false (default), only "
                "replace if there is exactly one occurrence.",
                "default": False,
            },
        },
        "required": ["file_path", "old_string", "new_string"],
    }

    async def call(
        self,
        emit: Emit,
        /,
        file_path: str = "",
        old_string: str = "",
        new_string: str = "",
        replace_all: bool = False,
        _agent_state: object = None,
        **_: object,
    ) -> ToolChunk:
        """Replace ``old_string`` with ``new_string`` in ``file_path``."""
        if not old_string:
            return error(
                "Error: old_string must not be empty. Use the Write tool to populate an empty file."
            )
        if not os.path.isabs(file_path):
            return error(f"Error: file_path must be an absolute path, got: {file_path}")
        if await stat_mtime(file_path) is None:
            return error(f"Error: File not found: {file_path}")
        if old_string == new_string:
            return error("Error: old_string and new_string are identical. No changes to make.")
        if _agent_state is not None:
            content = await _cached_text(_agent_state, file_path)
            if content is None:
                return error(_NOT_READ)
        else:
            try:
                content = await _read_text(file_path)
            except OSError as exc:
                return error(f"Error reading file: {exc.strerror or exc}")
            if content is None:
                return error(f"Error: {file_path} is not a UTF-8 text file.")
        occurrences = content.count(old_string)
        if occurrences == 0:
            return error(f"Error: old_string not found in {file_path}")
        if occurrences > 1 and not replace_all:
            return error(
                f"Error: old_string appears {occurrences} times in {file_path}. Set "
                "replace_all=true to replace all occurrences, or make old_string more specific."
            )
        updated = content.replace(old_string, new_string, -1 if replace_all else 1)
        try:
            await _write_text(file_path, updated)
        except OSError as exc:
            return error(f"Error writing file: {exc.strerror or exc}")
        if _agent_state is not None:
            await _remember(_agent_state, file_path, updated)
        replaced = f"all {occurrences} occurrences" if replace_all else "1 occurrence"
        return ToolChunk(
            content=[TextBlock(text=f"Successfully replaced {replaced} in {file_path}")],
            metadata={
                "diff": _diff(content, updated, file_path),
                "file_path": file_path,
                "occurrences": occurrences if replace_all else 1,
            },
        )

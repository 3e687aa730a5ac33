"""``Read``: a text file with line numbers, or an image as a data block."""

from __future__ import annotations

import base64
import fnmatch
import os
import stat

from ..._core.json_types import JSONObject
from ...message import Base64Source, DataBlock, TextBlock
from ...permission import PermissionBehavior, PermissionContext, PermissionDecision
from .._base import ToolMiddlewareBase
from .._response import Emit, ToolChunk
from ._common import PathRuleTool, error, normalize_newlines, read_bytes, stat_path

__all__ = ["Read"]

IMAGE_TYPES: dict[str, str] = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
    ".tiff": "image/tiff",
    ".tif": "image/tiff",
    ".ico": "image/x-icon",
}
DEFAULT_MODEL_INPUT_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
#: How much of a file is inspected for NUL bytes to call it binary.
BINARY_SNIFF_BYTES = 8192

_DESCRIPTION = """Reads a file from the local filesystem. You can access any file directly by using this tool.
Assume this tool is able to read all files on the machine. If the User provides a path to a file assume that path is valid. It is okay to read a file that does not exist; an error will be returned.

Usage:
- The file_path parameter must be an absolute path, not a relative path
- By default, it reads up to 2000 lines starting from the beginning of the file
- You can optionally specify a line offset and limit (especially handy for long files), but it's recommended to read the whole file by not providing these parameters
- Results are returned using cat -n format, with line numbers starting at 1"""


class Read(PathRuleTool):
    """Reads a file: text as numbered lines (``cat -n`` style), images the model accepts as
    a base64 data block.  Binary files, directories, missing files and relative paths are
    error results.  Read-only; records what it read in the agent state's file cache, which
    ``Write`` and ``Edit`` require.

    Args:
        max_line_characters: longer lines are cut and marked ``[truncated]``.
        model_input_types: media types the model accepts (globs allowed, e.g. ``image/*``);
            an image of another type is an error result.
        middlewares: this tool's middlewares.
    """

    name = "Read"
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "The absolute path to the file to read.",
            },
            "offset": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "Optional 1-based line number to start reading from. Only "
                "applies to plain text files (default: 1)",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 2000,
                "default": 2000,
                "description": "Optional maximum number of lines to read. Only applies to "
                "plain text files (default: 2000, max: 2000)",
            },
        },
        "required": ["file_path"],
    }
    is_read_only = True
    is_concurrency_safe = True
    is_state_injected = True

    def __init__(
        self,
        max_line_characters: int = 2000,
        model_input_types: list[str] | None = None,
        middlewares: list[ToolMiddlewareBase] | None = None,
    ) -> None:
        super().__init__(middlewares)
        self._max_line_characters = max_line_characters
        self.model_input_types = list(
            DEFAULT_MODEL_INPUT_TYPES if model_input_types is None else model_input_types
        )
        images = [t for t in self.model_input_types if t.startswith("image/")]
        self.description = _DESCRIPTION
        if images:
            self.description += (
                f"\n- This tool allows you to read images ({', '.join(images)}). When reading "
                "an image file the contents are presented visually as you're a multimodal LLM."
            )

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        """Reading defers to the engine (its read-only fast path allows it)."""
        return PermissionDecision(
            behavior=PermissionBehavior.PASSTHROUGH, message="File reading is read-only."
        )

    async def call(
        self,
        emit: Emit,
        /,
        file_path: str = "",
        offset: int = 1,
        limit: int = 2000,
        _agent_state: object = None,
        **_: object,
    ) -> ToolChunk:
        """Read ``file_path`` from line ``offset`` (1-based), at most ``limit`` lines."""
        if not os.path.isabs(file_path):
            return error(f"Error: file_path must be an absolute path, got: {file_path}")
        info = await stat_path(file_path)
        if info is None:
            return error(f"Error: File does not exist: {file_path}")
        if stat.S_ISDIR(info.st_mode):
            return error(f"Error: Path is a directory, not a file: {file_path}")
        mtime = info.st_mtime
        extension = os.path.splitext(file_path)[1].lower()
        try:
            if extension in IMAGE_TYPES:
                return await self._read_image(file_path, IMAGE_TYPES[extension])
            lines = await self._text_lines(file_path, mtime, _agent_state)
        except OSError as exc:
            return error(f"Error reading file: {exc.strerror or exc}")
        if lines is None:
            return error(
                f"Error: {file_path} is a binary file; only text files and images can be read."
            )
        selected = lines[offset - 1 : offset - 1 + limit]
        numbered = []
        for number, line in enumerate(selected, start=offset):
            text = line.rstrip("\n")
            if len(text) > self._max_line_characters:
                text = text[: self._max_line_characters] + "[truncated]"
            numbered.append(f"{number:6d}\t{text}")
        return ToolChunk(content=[TextBlock(text="\n".join(numbered))])

    async def _text_lines(self, path: str, mtime: float, state: object) -> list[str] | None:
        """The file's lines (from the state's cache when it is fresh); ``None`` for binary."""
        cache = getattr(state, "tool_context", None)
        entry = cache.get_cache(path, mtime) if cache is not None else None
        if entry is not None:
            return list(entry.lines)
        raw = await read_bytes(path)
        if b"\0" in raw[:BINARY_SNIFF_BYTES]:
            return None
        lines = normalize_newlines(raw.decode("utf-8", errors="replace")).splitlines(True)
        if cache is not None:
            cache.cache_file(path, lines, mtime)
        return lines

    async def _read_image(self, path: str, media_type: str) -> ToolChunk:
        if not any(fnmatch.fnmatch(media_type, t) for t in self.model_input_types):
            accepted = [t for t in self.model_input_types if t.startswith("image/")]
            return error(
                f"Error: Unsupported image type {media_type}, only "
                f"{', '.join(accepted) or 'none'} are supported."
            )
        raw = await read_bytes(path)
        block = DataBlock(
            source=Base64Source(data=base64.b64encode(raw).decode("ascii"), media_type=media_type),
            name=os.path.basename(path),
        )
        return ToolChunk(content=[block])

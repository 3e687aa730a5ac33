"""Pieces shared by the built-in tools: error chunks, path rules and suggestions, the edit
permission check, and file I/O run in a worker thread."""

from __future__ import annotations

import fnmatch
import glob
import os

import trio

from ..._core.json_types import JSONObject
from ...message import TextBlock, ToolResultState
from ...permission import (
    PermissionBehavior,
    PermissionContext,
    PermissionDecision,
    PermissionMode,
    PermissionRule,
)
from .._base import DANGEROUS_DIRECTORIES, DANGEROUS_FILES, ToolBase, ToolMiddlewareBase
from .._response import ToolChunk

__all__ = [
    "EditingTool",
    "PathRuleTool",
    "error",
    "normalize_newlines",
    "read_bytes",
    "stat_mtime",
    "stat_path",
    "suggest_directory_rule",
]


def error(text: str) -> ToolChunk:
    """An error chunk the model reads."""
    return ToolChunk(content=[TextBlock(text=text)], state=ToolResultState.ERROR)


def normalize_newlines(text: str) -> str:
    """``\\r\\n`` and lone ``\\r`` become ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


async def stat_path(path: str) -> os.stat_result | None:
    """``os.stat(path)`` in a worker thread, or ``None`` when it cannot be stat'ed."""

    def stat() -> os.stat_result | None:
        try:
            return os.stat(path)
        except OSError:
            return None

    return await trio.to_thread.run_sync(stat)


async def stat_mtime(path: str) -> float | None:
    """The modification time of ``path``, or ``None`` when it cannot be stat'ed."""
    result = await stat_path(path)
    return None if result is None else result.st_mtime


async def read_bytes(path: str) -> bytes:
    """The content of ``path`` (read in a worker thread)."""

    def read() -> bytes:
        with open(path, "rb") as handle:
            return handle.read()

    return await trio.to_thread.run_sync(read)


def suggest_directory_rule(tool_name: str, directory: str) -> list[PermissionRule]:
    """An allow rule for everything below ``directory`` (glob characters escaped)."""
    escaped = glob.escape(directory)
    pattern = (escaped.rstrip("/\\") + "/**") if escaped else "**"
    return [
        PermissionRule(
            tool_name=tool_name,
            rule_content=pattern,
            behavior=PermissionBehavior.ALLOW,
            source="suggested",
        )
    ]


class PathRuleTool(ToolBase):
    """A tool whose rules are glob patterns over its ``file_path`` argument
    (``Read(/src/**)``), suggesting a rule for the file's directory."""

    async def match_rule(self, rule_content: str | None, tool_input: JSONObject) -> bool:
        """``None`` matches every call; otherwise ``fnmatch`` against ``file_path``."""
        if rule_content is None:
            return True
        file_path = tool_input.get("file_path")
        return (
            isinstance(file_path, str)
            and bool(file_path)
            and fnmatch.fnmatch(file_path, rule_content)
        )

    async def generate_suggestions(self, tool_input: JSONObject) -> list[PermissionRule]:
        """Allow everything in the file's directory."""
        file_path = tool_input.get("file_path")
        if not isinstance(file_path, str) or not file_path:
            return []
        return suggest_directory_rule(self.name, os.path.dirname(file_path))


class EditingTool(PathRuleTool):
    """``Write`` and ``Edit``: a safety ASK for dangerous files and directories (which allow
    rules cannot silence), and edits inside the working directories auto-allowed in
    ``accept_edits`` and ``dont_ask`` modes.

    Args:
        dangerous_files: file names (matched case-insensitively against the basename) that
            always need an approval; ``[]`` disables the check.
        dangerous_directories: directory names (matched against every path segment) whose
            contents always need an approval; ``[]`` disables the check.
        middlewares: this tool's middlewares.
    """

    verb = "Edit"
    is_state_injected = True

    def __init__(
        self,
        dangerous_files: list[str] | tuple[str, ...] = DANGEROUS_FILES,
        dangerous_directories: list[str] | tuple[str, ...] = DANGEROUS_DIRECTORIES,
        middlewares: list[ToolMiddlewareBase] | None = None,
    ) -> None:
        super().__init__(middlewares)
        self.dangerous_files = tuple(dangerous_files)
        self.dangerous_directories = tuple(dangerous_directories)

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        """Dangerous path → safety ASK; in the working directories under ``accept_edits`` /
        ``dont_ask`` → ALLOW; otherwise PASSTHROUGH (rules and the mode decide)."""
        file_path = tool_input.get("file_path")
        if not isinstance(file_path, str) or not file_path:
            return PermissionDecision(
                behavior=PermissionBehavior.PASSTHROUGH, message="No file path provided"
            )
        if await trio.to_thread.run_sync(self._is_dangerous_path, file_path):
            return PermissionDecision(
                behavior=PermissionBehavior.ASK,
                message=f"Permission required: {self.verb} operation on sensitive file {file_path}",
                decision_reason="Safety check: dangerous file or directory",
                bypass_immune=True,
            )
        if context.mode in (
            PermissionMode.ACCEPT_EDITS,
            PermissionMode.DONT_ASK,
        ) and await trio.to_thread.run_sync(self._path_in_allowed_working_path, file_path, context):
            verb = "writing" if self.verb == "Write" else "editing"
            return PermissionDecision(
                behavior=PermissionBehavior.ALLOW,
                message=f"Permission granted for {verb} {file_path} (in working directory)",
                decision_reason="File is in working directory and not a dangerous path",
            )
        return PermissionDecision(behavior=PermissionBehavior.PASSTHROUGH, message="")

"""``Bash``: runs a command line in its own process group, streaming its output.

The command runs as ``/bin/sh -c <command>`` in a new session (so in a process group of its
own), stdout and stderr merged into one pipe whose output is streamed as ``ToolChunk``s.  On a
timeout or a cancellation the whole group gets SIGTERM, then SIGKILL after a short grace: no
child or grandchild outlives the call (a process that left the group with its own ``setsid``
is beyond reach, as with any process-group kill).
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import signal
import subprocess

import trio

from ..._core.json_types import JSONObject
from ...message import TextBlock
from ...permission import (
    PermissionBehavior,
    PermissionContext,
    PermissionDecision,
    PermissionMode,
    PermissionRule,
)
from .._base import DANGEROUS_DIRECTORIES, DANGEROUS_FILES, ToolBase, ToolMiddlewareBase
from .._response import Emit, ToolChunk
from . import _shell
from ._common import error

__all__ = ["Bash"]

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
MAX_OUTPUT_CHARS = 30_000
#: Seconds between SIGTERM and SIGKILL of the process group.
TERMINATE_GRACE = 1.0
#: Seconds the shielded cleanup may take in all (signals, reaping, closing the pipe).
CLEANUP_DEADLINE = TERMINATE_GRACE + 4.0
#: Seconds between two looks at whether the killed group is gone.
GROUP_POLL = 0.01
#: Commands ``accept_edits`` / ``dont_ask`` allow when every target is in a working directory.
FILESYSTEM_COMMANDS = frozenset({"mkdir", "touch", "rm", "rmdir", "mv", "cp", "sed"})

_DESCRIPTION = """Executes a bash command and returns its output.

The working directory persists between commands, but shell state does not. The shell environment is initialized from the user's profile (bash or zsh).

IMPORTANT: Avoid using this tool to run `find`, `grep`, `cat`, `head`, `tail`, `sed`, `awk`, or `echo` commands, unless explicitly instructed or after you have verified that a dedicated tool cannot accomplish your task. Instead, use the appropriate dedicated tool as this will provide a much better experience for the user:

 - File search: Use Glob (NOT find or ls)
 - Content search: Use Grep (NOT grep or rg)
 - Read files: Use Read (NOT cat/head/tail)
 - Edit files: Use Edit (NOT sed/awk)
 - Write files: Use Write (NOT echo >/cat <<EOF)
 - Communication: Output text directly (NOT echo/printf)

# Instructions
 - If your command will create new directories or files, first use this tool to run `ls` to verify the parent directory exists and is the correct location.
 - Always quote file paths that contain spaces with double quotes in your command (e.g., cd "path with spaces/file.txt")
 - Try to maintain your current working directory throughout the session by using absolute paths and avoiding usage of `cd`. You may use `cd` if the User explicitly requests it.
 - You may specify an optional timeout in milliseconds (up to 600000ms / 10 minutes). By default, your command will timeout after 120000ms (2 minutes).
 - Write a clear, concise description of what your command does. For simple commands, keep it brief (5-10 words).
 - When issuing multiple commands: if they are independent, make multiple Bash tool calls in a single message; if they depend on each other, chain them with '&&' in a single call. DO NOT use newlines to separate commands (newlines are ok in quoted strings).
 - For git commands: prefer a new commit over amending; consider safer alternatives to destructive operations; never skip hooks or bypass signing unless the user asked for it.
 - Avoid unnecessary `sleep` commands; if you must sleep, keep it short (1-5 seconds)."""


class Bash(ToolBase):
    """Runs a shell command line; see the module docstring for the process handling.

    Permissions: a read-only command line (``ls``, ``git status``, ``cat f | wc -l``, ...)
    is allowed in every mode.  Dynamic structure the static reading cannot follow
    (``$(...)``, backticks, ``${...}``, control flow, subshells), dangerous patterns
    (``rm -rf``, ``dd``, ...), in-place ``sed`` on dangerous files, dangerous paths and
    removing ``/``, ``~`` or a top-level directory are *safety* ASKs that allow rules cannot
    silence.  Under ``accept_edits`` / ``dont_ask``, ``mkdir touch rm rmdir mv cp sed`` are
    allowed when every target lies in a working directory.  Rules match the command:
    ``git status:*`` (prefix), ``npm run *`` (wildcards, ``\\*`` for a literal star) or a
    plain substring.

    Args:
        dangerous_files / dangerous_directories: as for ``Write``.
        cwd: the directory commands run in (default: the process's).
        middlewares: this tool's middlewares.
    """

    name = "Bash"
    description = _DESCRIPTION
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The bash command to execute."},
            "description": {
                "type": "string",
                "description": "Clear, concise description of what this command does. For "
                "simple commands, keep it brief (5-10 words). For complex commands, include "
                "enough context.",
            },
            "timeout": {
                "type": "integer",
                "description": "Optional timeout in milliseconds (default: 120000, max: 600000)",
                "default": DEFAULT_TIMEOUT_MS,
                "maximum": MAX_TIMEOUT_MS,
                "minimum": 0,
            },
        },
        "required": ["command"],
    }

    def __init__(
        self,
        dangerous_files: list[str] | tuple[str, ...] = DANGEROUS_FILES,
        dangerous_directories: list[str] | tuple[str, ...] = DANGEROUS_DIRECTORIES,
        cwd: str | os.PathLike[str] | None = None,
        middlewares: list[ToolMiddlewareBase] | None = None,
    ) -> None:
        super().__init__(middlewares)
        self.dangerous_files = tuple(dangerous_files)
        self.dangerous_directories = tuple(dangerous_directories)
        self._cwd = os.fspath(cwd) if cwd is not None else None

    # -- permissions -------------------------------------------------------------------------

    async def check_read_only(self, tool_input: JSONObject) -> bool:
        """Whether this command line provably only reads."""
        command = _command(tool_input)
        if not command or _shell.injection_risk(command):
            return False
        return _shell.is_read_only_command(command)

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        """The Bash-specific checks, in order (see the class docstring)."""
        command = _command(tool_input)
        if not command:
            return PermissionDecision(
                behavior=PermissionBehavior.PASSTHROUGH, message="Empty command"
            )
        risk = _shell.injection_risk(command)
        if risk:
            return _safety_ask(
                f"Permission required: {risk}",
                "Safety check: command contains dynamic expansion that cannot be statically "
                "analyzed",
            )
        if _shell.is_read_only_command(command):
            return PermissionDecision(
                behavior=PermissionBehavior.ALLOW,
                message="Permission granted for read-only command",
                decision_reason="Read-only command is allowed",
            )
        pattern = _shell.dangerous_pattern(command)
        if pattern:
            return _safety_ask(
                f"Permission required: Command contains dangerous pattern: {pattern}",
                "Safety check: dangerous command pattern detected",
            )
        sed = _shell.sed_violation(command, self.dangerous_files)
        if sed:
            return _safety_ask(
                f"Permission required: {sed}",
                "Safety check: sed in-place modification of dangerous file",
            )
        targets = [p for _, p in _shell.file_paths(command)]
        # Resolving paths (symlinks) touches the file system: in a worker thread.
        dangerous = await trio.to_thread.run_sync(
            lambda: [p for p in targets if self._is_dangerous_path(p)]
        )
        if dangerous:
            return _safety_ask(
                "Permission required: Bash command operates on sensitive paths: "
                + ", ".join(dangerous),
                "Safety check: dangerous file or directory in bash command",
            )
        removal = _dangerous_removal(command, self._cwd)
        if removal:
            return _safety_ask(
                f"Dangerous removal operation detected: '{removal}'\n\nThis command would "
                "remove a critical system directory. This requires explicit approval and "
                "cannot be auto-allowed by permission rules.",
                "Safety check: dangerous removal of critical system path",
            )
        if context.mode in (PermissionMode.ACCEPT_EDITS, PermissionMode.DONT_ASK):
            base = command.split()[0]
            if (
                base in FILESYSTEM_COMMANDS
                and targets
                and await trio.to_thread.run_sync(
                    lambda: all(self._path_in_allowed_working_path(p, context) for p in targets)
                )
            ):
                return PermissionDecision(
                    behavior=PermissionBehavior.ALLOW,
                    message=f"Permission granted for '{base}' command (filesystem command, "
                    "all targets in working directory)",
                    decision_reason=f"Filesystem command '{base}' is auto-allowed because all "
                    "target paths are within a working directory",
                )
        return PermissionDecision(
            behavior=PermissionBehavior.PASSTHROUGH, message=f"Execute bash command: {command}"
        )

    async def match_rule(self, rule_content: str | None, tool_input: JSONObject) -> bool:
        """Whether a rule's content matches the command (see the class docstring)."""
        if rule_content is None:
            return True
        return command_matches(rule_content, _command(tool_input))

    async def generate_suggestions(self, tool_input: JSONObject) -> list[PermissionRule]:
        """Prefix rules (``git commit:*``) for the command's two-word prefixes."""
        return [
            PermissionRule(
                tool_name=self.name,
                rule_content=f"{prefix}:*",
                behavior=PermissionBehavior.ALLOW,
                source="suggested",
            )
            for prefix in _shell.command_prefixes(_command(tool_input))
        ]

    # -- running -----------------------------------------------------------------------------

    async def call(
        self,
        emit: Emit,
        /,
        command: str = "",
        description: str = "",
        timeout: int = DEFAULT_TIMEOUT_MS,  # noqa: ASYNC109 (the tool's own parameter)
        **_: object,
    ) -> ToolChunk | None:
        """Run ``command``; output is streamed, a failure or timeout ends in an error chunk."""
        timeout_ms = max(0, min(timeout, MAX_TIMEOUT_MS))
        try:
            process = await trio.lowlevel.open_process(
                ["/bin/sh", "-c", command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=self._cwd,
                start_new_session=True,
            )
        except OSError as exc:
            return error(f"Command failed: {command}\nError: {exc}")
        output = _Output(emit)
        timer = trio.move_on_after(timeout_ms / 1000)
        finished = False
        try:
            with timer:
                assert process.stdout is not None
                while data := await process.stdout.receive_some(65536):
                    await output.add(bytes(data))
                await output.flush()
                await process.wait()
                finished = True
        finally:
            if finished:
                assert process.stdout is not None
                await process.stdout.aclose()
            else:
                # Cancelled, timed out or failed: even when the shell has exited, a background
                # grandchild may still hold the pipe.
                await _stop_group(process)
        gap = "\n" if output.emitted else ""
        if timer.cancelled_caught:
            return error(f"{gap}Command timed out after {timeout_ms}ms: {command}")
        code = process.returncode or 0
        if code != 0:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            return error(f"{gap}Command failed: {command} ({how})")
        return None if output.emitted else ToolChunk(content=[TextBlock(text="")])


class _Output:
    """Decodes the pipe's bytes (UTF-8, bad bytes replaced, newlines normalized) and emits
    them, up to ``MAX_OUTPUT_CHARS`` characters."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending_cr = False
        self._sent = 0
        self.emitted = False

    async def add(self, data: bytes, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        if self._pending_cr:
            text = "\r" + text
        self._pending_cr = not final and text.endswith("\r")
        if self._pending_cr:
            text = text[:-1]
        text = text.replace("\r\n", "\n")
        if not text or self._sent > MAX_OUTPUT_CHARS:
            return
        room = MAX_OUTPUT_CHARS - self._sent
        if len(text) > room:
            text = text[:room] + "\n... (output truncated)"
        self._sent += len(text)
        self.emitted = True
        await self._emit(ToolChunk(content=[TextBlock(text=text)], is_last=False))

    async def flush(self) -> None:
        await self.add(b"", final=True)


async def _stop_group(process: trio.Process) -> None:
    """SIGTERM the process group, SIGKILL it after ``TERMINATE_GRACE``, reap the shell."""
    # Shielded: this runs while the call is being cancelled (interrupt, timeout, an outer
    # scope) and must still kill and reap the group; the deadline bounds it if a process
    # hangs in an uninterruptible state.
    with trio.CancelScope(shield=True, deadline=trio.current_time() + CLEANUP_DEADLINE):
        _signal_group(process.pid, signal.SIGTERM)
        with trio.move_on_after(TERMINATE_GRACE):
            await process.wait()
        # Grandchildren may outlive the shell (or ignore SIGTERM): kill what is left.
        _signal_group(process.pid, signal.SIGKILL)
        await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()
        # SIGKILL is delivered asynchronously: wait until no member of the group still runs.
        # Polling, as nothing signals the end of processes that are not our children.
        while await trio.to_thread.run_sync(_group_running, process.pid):  # noqa: ASYNC110
            await trio.sleep(GROUP_POLL)


def _group_running(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (Linux ``/proc``; elsewhere ``False``).

    Zombies do not count: a reparented grandchild may wait a while for its new parent to reap
    it, but it is dead.
    """
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(pgid, signum)


def _command(tool_input: JSONObject) -> str:
    command = tool_input.get("command")
    return command if isinstance(command, str) else ""


def _safety_ask(message: str, reason: str) -> PermissionDecision:
    return PermissionDecision(
        behavior=PermissionBehavior.ASK,
        message=message,
        decision_reason=reason,
        bypass_immune=True,
    )


def command_matches(rule_content: str, command: str) -> bool:
    """Match a Bash rule against a command line.

    ``prefix:*`` matches the prefix alone or followed by a space; a pattern with unescaped
    ``*`` is a wildcard match over the whole command (a trailing `` *`` also matches the bare
    word); anything else is a substring test.  ``\\*`` is a literal star, ``\\\\`` a literal
    backslash.
    """
    if rule_content.endswith(":*"):
        prefix = rule_content[:-2].strip()
        return command == prefix or command.startswith(prefix + " ")
    pieces: list[str] = []
    wildcard = False
    i = 0
    while i < len(rule_content):
        ch = rule_content[i]
        if ch == "\\" and i + 1 < len(rule_content) and rule_content[i + 1] in "*\\":
            pieces.append(re.escape(rule_content[i + 1]))
            i += 2
            continue
        if ch == "*":
            wildcard = True
            pieces.append(".*")
        else:
            pieces.append(" " if ch == " " else re.escape(ch))
        i += 1
    if not wildcard:
        literal = rule_content.replace("\\\\", "\0").replace("\\*", "*").replace("\0", "\\")
        return literal in command
    pattern = "".join(pieces)
    if pattern.endswith(".*") and re.fullmatch(pattern[:-2].rstrip(), command):
        return True  # "git *" also matches a bare "git"
    return re.fullmatch(pattern, command, re.DOTALL) is not None


def _dangerous_removal(command: str, cwd: str | None) -> str | None:
    """An ``rm`` / ``rmdir`` target that is ``/``, ``~``, a top-level directory or a bare
    wildcard."""
    for part in _shell.split_commands(command) or [command]:
        tokens = part.split()
        if not tokens or tokens[0] not in ("rm", "rmdir"):
            continue
        for token in tokens[1:]:
            if token.startswith("-"):
                continue
            path = token.strip("'\"")
            if path in ("*", "./*", "/") or path.endswith(("/*", "\\*")):
                return path
            absolute = os.path.normpath(os.path.join(cwd or os.getcwd(), os.path.expanduser(path)))
            parent = os.path.dirname(absolute)
            if absolute == os.path.expanduser("~") or absolute == parent:
                return path
            if os.path.dirname(parent) == parent:
                return path
    return None

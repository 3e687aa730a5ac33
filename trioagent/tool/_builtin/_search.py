"""``Glob`` (files by pattern, newest first) and ``Grep`` (file contents by regex: ripgrep when
it is installed, otherwise a pure-Python search with the same options and output)."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import time
from collections.abc import Callable

import trio

from ..._core.json_types import JSONObject, JSONValue
from ...message import TextBlock
from ...permission import PermissionBehavior, PermissionContext, PermissionDecision, PermissionRule
from .._base import ToolBase, ToolMiddlewareBase
from .._response import Emit, ToolChunk
from ._common import error, suggest_directory_rule

__all__ = ["Glob", "Grep"]

DEFAULT_HEAD_LIMIT = 250
VCS_DIRECTORIES = (".git", ".svn", ".hg", ".bzr", ".jj", ".sl")
SEARCH_TIMEOUT = 30.0
MAX_COLUMNS = 500
#: ``Grep(type=...)`` names the pure-Python search knows (ripgrep knows many more).
FILE_TYPES: dict[str, tuple[str, ...]] = {
    "py": ("*.py", "*.pyi"),
    "js": ("*.js", "*.jsx", "*.mjs", "*.cjs"),
    "ts": ("*.ts", "*.tsx", "*.mts", "*.cts"),
    "rust": ("*.rs",),
    "go": ("*.go",),
    "java": ("*.java",),
    "c": ("*.c", "*.h"),
    "cpp": ("*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.h"),
    "md": ("*.md", "*.markdown"),
    "json": ("*.json",),
    "yaml": ("*.yaml", "*.yml"),
    "toml": ("*.toml",),
    "sh": ("*.sh", "*.bash"),
    "html": ("*.html", "*.htm"),
    "css": ("*.css",),
    "txt": ("*.txt",),
}


class _SearchTool(ToolBase):
    """Read-only search tools: rules match the searched directory, suggestions cover it."""

    is_read_only = True
    is_concurrency_safe = True

    def __init__(self, middlewares: list[ToolMiddlewareBase] | None = None) -> None:
        super().__init__(middlewares)

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        """Searching defers to the engine (its read-only fast path allows it)."""
        return PermissionDecision(
            behavior=PermissionBehavior.PASSTHROUGH, message=f"{self.name} is read-only."
        )

    async def generate_suggestions(self, tool_input: JSONObject) -> list[PermissionRule]:
        """Allow searches below the searched directory (the cwd by default)."""
        path = tool_input.get("path")
        base = os.path.normpath(os.path.join(os.getcwd(), path if isinstance(path, str) else ""))  # noqa: ASYNC240
        return suggest_directory_rule(self.name, base)


def _paginate(items: list[str], head_limit: int | None, offset: int) -> str:
    limit = DEFAULT_HEAD_LIMIT if head_limit is None else head_limit
    shown = items[offset : offset + limit] if limit else items[offset:]
    text = "\n".join(shown)
    if limit and len(items) - offset > limit:
        text += f"\n\n[Showing results with pagination = limit: {limit}"
        text += f", offset: {offset}]" if offset else "]"
    return text


def _bad_paging(head_limit: int | None, offset: int) -> ToolChunk | None:
    if head_limit is not None and head_limit < 0:
        return error("Error: head_limit must be non-negative.")
    if offset < 0:
        return error("Error: offset must be non-negative.")
    return None


def _segment_regex(segment: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(segment), re.DOTALL)


def glob_files(pattern: str, base: str) -> list[str]:
    """Files below ``base`` matching ``pattern`` (``*``, ``?``, ``[...]`` per segment, ``**``
    for any number of directories), newest first.  Symlinked directories are not followed."""
    parts = [p for p in re.split(r"[\\/]+", pattern) if p and p != "."]
    found: list[str] = []

    def walk(index: int, directory: str) -> None:
        if index >= len(parts):
            return
        part, last = parts[index], index == len(parts) - 1
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return
        if part == "**":
            if last:
                for root, _dirs, files in os.walk(directory):
                    found.extend(os.path.join(root, name) for name in files)
                return
            walk(index + 1, directory)
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    walk(index, entry.path)
            return
        regex = _segment_regex(part)
        for entry in entries:
            if not regex.match(entry.name):
                continue
            if last and entry.is_file(follow_symlinks=False):
                found.append(entry.path)
            elif not last and entry.is_dir(follow_symlinks=False):
                walk(index + 1, entry.path)

    walk(0, base)

    def mtime(path: str) -> float:
        try:
            return os.stat(path).st_mtime
        except OSError:
            return 0.0

    found.sort(key=mtime, reverse=True)
    return found


class Glob(_SearchTool):
    """Finds files by glob pattern below a directory (the cwd by default), newest first."""

    name = "Glob"
    description = """Fast file pattern matching tool that works with any codebase size.

Supports glob patterns like "**/*.js" or "src/**/*.ts" and returns matching file paths sorted by modification time (newest first).

Use this tool when you need to find files by pattern across the codebase.

Use head_limit to cap the number of results returned."""
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "The glob pattern to match against (e.g., '**/*.py', 'src/**/*.ts')",
            },
            "path": {
                "type": "string",
                "description": "The base directory to search from (defaults to current "
                "working directory)",
            },
            "head_limit": {
                "type": "integer",
                "minimum": 0,
                "description": "Limit output to first N paths. Defaults to 250 when "
                "unspecified. Pass 0 for unlimited.",
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "description": "Number of matching files to skip before returning results",
            },
        },
        "required": ["pattern"],
    }

    async def match_rule(self, rule_content: str | None, tool_input: JSONObject) -> bool:
        """``None`` matches every call; otherwise ``fnmatch`` against the path or the pattern."""
        if rule_content is None:
            return True
        candidates = (tool_input.get("path"), tool_input.get("pattern"))
        return any(
            isinstance(c, str) and c and fnmatch.fnmatch(c, rule_content) for c in candidates
        )

    async def call(
        self,
        emit: Emit,
        /,
        pattern: str = "",
        path: str | None = None,
        head_limit: int | None = None,
        offset: int = 0,
        **_: object,
    ) -> ToolChunk:
        """List the files matching ``pattern`` below ``path``."""
        bad = _bad_paging(head_limit, offset)
        if bad is not None:
            return bad
        base = path or os.getcwd()
        if not await trio.to_thread.run_sync(os.path.isdir, base):
            return error(f"Directory not found: {base}")
        matches = await trio.to_thread.run_sync(glob_files, pattern, base)
        if not matches:
            return ToolChunk(
                content=[TextBlock(text=f"No files found matching pattern: {pattern}")]
            )
        return ToolChunk(content=[TextBlock(text=_paginate(matches, head_limit, offset))])


class Grep(_SearchTool):
    """Searches file contents by regular expression.

    Uses ripgrep (``rg``) when it is on ``PATH`` (``use_ripgrep=None``, the default), else a
    pure-Python search with the same options: hidden files included, VCS directories and
    binary files skipped, results sorted by path.  Output modes: ``files_with_matches``
    (default), ``content`` (``path:line:text``, with context lines) and ``count``.
    """

    name = "Grep"
    description = """A powerful search tool built on ripgrep

  Usage:
- ALWAYS use Grep for search tasks. NEVER invoke `grep` or `rg` as a Bash command. The Grep tool has been optimized for correct permissions and access.
- Supports full regex syntax (e.g., "log.*Error", "function\\s+\\w+")
- Filter files with glob parameter (e.g., "*.js", "**/*.tsx") or type parameter (e.g., "js", "py", "rust")
- Output modes: "content" shows matching lines, "files_with_matches" shows only file paths (default), "count" shows match counts per file
- Context lines: use context parameter or -A/-B/-C for lines after/before/around matches
- Case-insensitive search: set i to true
- Multiline regex: set multiline to true for patterns spanning multiple lines
- Limit results: use head_limit to cap the number of results returned"""
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "The regular expression pattern to search for in file contents.",
            },
            "path": {
                "type": "string",
                "description": "File or directory to search in. Defaults to current working "
                "directory.",
            },
            "output_mode": {
                "type": "string",
                "enum": ["content", "files_with_matches", "count"],
                "description": "Output mode: 'content' shows matching lines (supports "
                "-A/-B/-C context, -n line numbers, head_limit), 'files_with_matches' shows "
                "file paths (supports head_limit), 'count' shows match counts (supports "
                "head_limit). Defaults to 'files_with_matches'.",
                "default": "files_with_matches",
            },
            "glob": {
                "type": "string",
                "description": "Glob pattern to filter files (e.g., '*.js', '*.{ts,tsx}').",
            },
            "type": {
                "type": "string",
                "description": "File type to search (rg --type). Common types: js, py, rust, "
                "go, java, etc.",
            },
            "-A": {
                "type": "integer",
                "description": "Number of lines to show after each match. Requires "
                "output_mode: 'content'.",
            },
            "-B": {
                "type": "integer",
                "description": "Number of lines to show before each match. Requires "
                "output_mode: 'content'.",
            },
            "-C": {"type": "integer", "description": "Alias for context."},
            "context": {
                "type": "integer",
                "description": "Number of context lines to show before and after matches. "
                "Requires output_mode: 'content'.",
            },
            "n": {
                "type": "boolean",
                "description": "Show line numbers in output. Requires output_mode: 'content'. "
                "Defaults to true.",
                "default": True,
            },
            "i": {"type": "boolean", "description": "Case insensitive search.", "default": False},
            "case_insensitive": {
                "type": "boolean",
                "description": "Case insensitive search (alias for i).",
                "default": False,
            },
            "multiline": {
                "type": "boolean",
                "description": "Enable multiline mode where . matches newlines and patterns "
                "can span lines. Default: false.",
                "default": False,
            },
            "head_limit": {
                "type": "integer",
                "description": "Limit output to first N lines/entries. Defaults to 250 when "
                "unspecified. Pass 0 for unlimited.",
                "minimum": 0,
            },
            "offset": {
                "type": "integer",
                "description": "Skip first N lines/entries before applying head_limit. "
                "Defaults to 0.",
                "default": 0,
                "minimum": 0,
            },
        },
        "required": ["pattern"],
    }

    def __init__(
        self,
        middlewares: list[ToolMiddlewareBase] | None = None,
        *,
        use_ripgrep: bool | None = None,
    ) -> None:
        super().__init__(middlewares)
        self._ripgrep = shutil.which("rg") if use_ripgrep is not False else None
        if use_ripgrep and self._ripgrep is None:
            raise ValueError("use_ripgrep=True but no 'rg' executable is on PATH")

    async def match_rule(self, rule_content: str | None, tool_input: JSONObject) -> bool:
        """``None`` matches every call; otherwise ``fnmatch`` against the searched path."""
        if rule_content is None:
            return True
        path = tool_input.get("path")
        return fnmatch.fnmatch(
            path if isinstance(path, str) and path else os.getcwd(), rule_content
        )

    async def call(self, emit: Emit, /, pattern: str = "", **options: JSONValue) -> ToolChunk:
        """Search for ``pattern``; see the input schema for the options."""
        query = _GrepQuery.of(pattern, options)
        bad = _bad_paging(query.head_limit, query.offset)
        if bad is not None:
            return bad
        if not await trio.to_thread.run_sync(os.path.exists, query.path):
            return error(f"Path not found: {query.path}")
        try:
            if self._ripgrep is not None:
                lines = await _run_ripgrep(self._ripgrep, query)
            else:
                lines = await trio.to_thread.run_sync(_python_grep, query)
        except (re.error, RuntimeError, TimeoutError) as exc:
            return error(f"Error: {exc}" if isinstance(exc, re.error) else str(exc))
        if not lines:
            return ToolChunk(content=[TextBlock(text=f"No matches found for pattern: {pattern}")])
        return ToolChunk(content=[TextBlock(text=_paginate(lines, query.head_limit, query.offset))])


class _GrepQuery:
    __slots__ = (
        "after", "before", "globs", "head_limit", "ignore_case", "line_numbers", "mode",
        "multiline", "offset", "path", "pattern", "type",
    )  # fmt: skip

    @classmethod
    def of(cls, pattern: str, options: dict[str, JSONValue]) -> _GrepQuery:
        def integer(key: str) -> int | None:
            value = options.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        query = cls()
        query.pattern = pattern
        path = options.get("path")
        query.path = path if isinstance(path, str) and path else os.getcwd()
        mode = options.get("output_mode")
        query.mode = mode if isinstance(mode, str) else "files_with_matches"
        glob = options.get("glob")
        query.globs = _split_globs(glob) if isinstance(glob, str) else []
        kind = options.get("type")
        query.type = kind if isinstance(kind, str) else None
        query.ignore_case = bool(options.get("i")) or bool(options.get("case_insensitive"))
        query.multiline = bool(options.get("multiline"))
        query.line_numbers = options.get("n", True) is not False
        query.head_limit = integer("head_limit")
        query.offset = integer("offset") or 0
        around = integer("context") if integer("context") is not None else integer("-C")
        query.before = around if around is not None else integer("-B") or 0
        query.after = around if around is not None else integer("-A") or 0
        if query.mode != "content":
            query.before = query.after = 0
        return query

    pattern: str
    path: str
    mode: str
    globs: list[str]
    type: str | None
    ignore_case: bool
    multiline: bool
    line_numbers: bool
    head_limit: int | None
    offset: int
    before: int
    after: int


def _split_globs(raw: str) -> list[str]:
    globs: list[str] = []
    for word in raw.split():
        globs.extend([word] if "{" in word and "}" in word else [p for p in word.split(",") if p])
    return globs


def _expand_braces(pattern: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [x for alt in match.group(1).split(",") for x in _expand_braces(head + alt + tail)]


def _file_filter(query: _GrepQuery, root: str) -> Callable[[str], bool]:
    include = [g for g in query.globs if not g.startswith("!")]
    exclude = [g[1:] for g in query.globs if g.startswith("!")]
    types = FILE_TYPES.get(query.type, ()) if query.type else ()

    def matches(path: str, patterns: list[str]) -> bool:
        relative = os.path.relpath(path, root)
        name = os.path.basename(path)
        return any(
            fnmatch.fnmatch(name, p) or fnmatch.fnmatch(relative, p.removeprefix("**/"))
            for pattern in patterns
            for p in _expand_braces(pattern)
        )

    def keep(path: str) -> bool:
        if include and not matches(path, include):
            return False
        if exclude and matches(path, exclude):
            return False
        return not query.type or matches(path, list(types))

    return keep


def _python_grep(query: _GrepQuery) -> list[str]:
    """The pure-Python search (runs in a worker thread, stops after ``SEARCH_TIMEOUT``)."""
    if query.type and query.type not in FILE_TYPES:
        raise RuntimeError(
            f"Unknown file type {query.type!r}; known types: {', '.join(sorted(FILE_TYPES))}"
        )
    flags = (re.IGNORECASE if query.ignore_case else 0) | re.MULTILINE
    if query.multiline:
        flags |= re.DOTALL
    regex = re.compile(query.pattern, flags)
    deadline = time.monotonic() + SEARCH_TIMEOUT
    single = os.path.isfile(query.path)
    files = [query.path] if single else _walk(query.path, _file_filter(query, query.path))
    out: list[str] = []
    for path in files:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"Grep search timed out after {SEARCH_TIMEOUT:g} seconds. Try searching a more "
                "specific path or pattern."
            )
        text = _text_of(path)
        if text is None:
            continue
        out.extend(_matches_in(regex, text, query, "" if single else path))
    return out


def _walk(root: str, keep: Callable[[str], bool]) -> list[str]:
    found: list[str] = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in VCS_DIRECTORIES)
        found.extend(p for p in (os.path.join(directory, f) for f in files) if keep(p))
    return sorted(found)


def _text_of(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    if b"\0" in raw[:8192]:
        return None
    return raw.decode("utf-8", errors="replace")


def _matches_in(regex: re.Pattern[str], text: str, query: _GrepQuery, label: str) -> list[str]:
    lines = text.splitlines()
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    hit_lines: list[int] = []
    for match in regex.finditer(text):
        first = _line_of(starts, match.start())
        last = _line_of(starts, max(match.start(), match.end() - 1)) if query.multiline else first
        hit_lines.extend(range(first, last + 1))
        if match.end() == match.start() and match.end() >= len(text):
            break
    hits = sorted({h for h in hit_lines if h < len(lines)})
    if not hits:
        return []
    prefix = f"{label}:" if label else ""
    if query.mode == "files_with_matches":
        return [label or query.path]
    if query.mode == "count":
        return [f"{prefix}{len(hits)}"]
    return _content_lines(lines, hits, query, label)


def _line_of(starts: list[int], offset: int) -> int:
    low, high = 0, len(starts) - 1
    while low < high:
        mid = (low + high + 1) // 2
        if starts[mid] <= offset:
            low = mid
        else:
            high = mid - 1
    return low


def _content_lines(lines: list[str], hits: list[int], query: _GrepQuery, label: str) -> list[str]:
    shown: dict[int, bool] = {}
    for hit in hits:
        for number in range(max(0, hit - query.before), min(len(lines), hit + query.after + 1)):
            shown[number] = shown.get(number, False) or number == hit
    out: list[str] = []
    previous: int | None = None
    for number in sorted(shown):
        if (query.before or query.after) and previous is not None and number != previous + 1:
            out.append("--")
        separator = ":" if shown[number] else "-"
        text = lines[number]
        if len(text) > MAX_COLUMNS:
            text = "[Omitted long line]"
        parts = [label] if label else []
        if query.line_numbers:
            parts.append(str(number + 1))
        out.append(separator.join([*parts, text]) if parts else text)
        previous = number
    return out


async def _run_ripgrep(executable: str, query: _GrepQuery) -> list[str]:
    args = [executable, "--hidden", "--sort", "path", "--max-columns", str(MAX_COLUMNS)]
    for directory in VCS_DIRECTORIES:
        args += ["--glob", f"!{directory}"]
    if query.multiline:
        args += ["-U", "--multiline-dotall"]
    if query.ignore_case:
        args.append("-i")
    args += {"files_with_matches": ["-l"], "count": ["-c"]}.get(query.mode, [])
    if query.mode == "content":
        if query.line_numbers:
            args.append("-n")
        if query.before:
            args += ["-B", str(query.before)]
        if query.after:
            args += ["-A", str(query.after)]
    args += ["-e", query.pattern]
    if query.type:
        args += ["--type", query.type]
    for glob in query.globs:
        args += ["--glob", glob]
    args += ["--", query.path]
    with trio.move_on_after(SEARCH_TIMEOUT) as timer:
        done = await trio.run_process(args, capture_stdout=True, capture_stderr=True, check=False)
    if timer.cancelled_caught:
        raise TimeoutError(
            f"Ripgrep search timed out after {SEARCH_TIMEOUT:g} seconds. Try searching a more "
            "specific path or pattern."
        )
    if done.returncode not in (0, 1):
        message = done.stderr.decode("utf-8", errors="ignore").strip()
        raise RuntimeError(f"ripgrep error (code {done.returncode}): {message}")
    return [line for line in done.stdout.decode("utf-8", errors="ignore").splitlines() if line]

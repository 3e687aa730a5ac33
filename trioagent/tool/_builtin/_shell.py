"""A small static reading of shell command lines, for ``Bash``'s permission checks.

Pure Python and deliberately conservative: it never executes anything, and whatever it cannot
read with confidence (command or process substitution, ``${...}`` expansions, control flow,
subshells, unbalanced quotes) is reported as an injection risk, so the call is asked about
instead of being let through as read-only.
"""

from __future__ import annotations

import re
import shlex

__all__ = [
    "command_prefixes",
    "dangerous_pattern",
    "file_paths",
    "injection_risk",
    "is_read_only_command",
    "sed_violation",
    "split_commands",
]

#: Commands that never write, whatever their arguments (no permission rule needed).
SAFE_COMMANDS = frozenset({"echo", "cat", "ls", "pwd", "cd", "true", "false", "printf", "grep"})

#: Variables a suggested prefix rule may skip over (``CI=1 npm test`` → ``npm test``).
SAFE_ENV_VARS = frozenset(
    {
        "NODE_ENV", "PYTHONUNBUFFERED", "RUST_LOG", "LANG", "TERM", "NO_COLOR", "FORCE_COLOR",
        "DEBUG", "VERBOSE", "CI", "PATH", "HOME", "USER", "SHELL", "EDITOR", "PAGER", "TZ",
        "LC_ALL", "LC_CTYPE", "COLUMNS", "LINES", "CLICOLOR", "CLICOLOR_FORCE",
    }
)  # fmt: skip

GIT_READ_ONLY = (
    "git status", "git log", "git diff", "git show", "git ls-files", "git ls-tree",
    "git cat-file", "git rev-parse", "git rev-list", "git describe", "git shortlog",
    "git blame", "git grep", "git config --get", "git config --list",
)  # fmt: skip

#: Command lines (or prefixes followed by a space) that only read.
READ_ONLY_COMMANDS = frozenset(
    {
        "ls", "cat", "head", "tail", "less", "more", "file", "stat", "wc", "grep", "rg", "ag",
        "ack", "find", "tree", "pwd", "which", "whereis", "type", *GIT_READ_ONLY,
        "docker ps", "docker images", "docker inspect", "docker logs", "docker version",
        "docker info", "gh repo view", "gh issue list", "gh pr list", "gh status",
        "python --version", "python -V", "node --version", "node -v", "npm list", "npm ls",
        "pip list", "pip show",
    }
)  # fmt: skip

#: ``find`` predicates that run commands or write files.
FIND_MUTATING = frozenset(
    {"-delete", "-exec", "-execdir", "-fls", "-fprint", "-fprint0", "-fprintf", "-ok", "-okdir"}
)

#: Patterns that always need an explicit approval.
DANGEROUS_COMMANDS = (
    "rm -rf", "sudo rm", "dd", "mkfs", "fdisk", "format", "chmod 777", "chmod -R 777",
    "chown -R", "kill -9", "> /dev/",
)  # fmt: skip

#: Commands whose arguments are files they change.
FILE_COMMANDS = frozenset({"rm", "mv", "cp", "chmod", "chown", "sed", "touch", "mkdir", "rmdir"})

_CONTROL_WORDS = {
    "for": "for_statement",
    "while": "while_statement",
    "until": "until_statement",
    "if": "if_statement",
    "case": "case_statement",
    "function": "function_definition",
    "[[": "test_command",
}
_FUNCTION_DEF = re.compile(r"^\s*[A-Za-z_][\w-]*\s*\(\s*\)")
_OPERATORS = ("&&", "||", ";;", "|&", ";", "|", "&", "\n")


def split_commands(command: str) -> list[str] | None:
    """The simple commands of a command line, split at ``&& || ; | &`` and newlines outside
    quotes; ``None`` when a quote is left open."""
    parts: list[str] = []
    current: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(command):
        ch = command[i]
        if quote is not None:
            current.append(ch)
            if ch == "\\" and quote == '"' and i + 1 < len(command):
                current.append(command[i + 1])
                i += 1
            elif ch == quote:
                quote = None
            i += 1
            continue
        if ch in ("'", '"'):
            quote = ch
        elif ch == "\\" and i + 1 < len(command):
            current.extend(command[i : i + 2])
            i += 2
            continue
        operator = next((op for op in _OPERATORS if command.startswith(op, i)), None)
        if operator is not None and not _is_redirect_ampersand(command, i, operator):
            parts.append("".join(current))
            current = []
            i += len(operator)
            continue
        current.append(ch)
        i += 1
    if quote is not None:
        return None
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _is_redirect_ampersand(command: str, i: int, operator: str) -> bool:
    """``2>&1`` and ``&>`` are redirections, not the background operator."""
    if operator != "&":
        return False
    return (i > 0 and command[i - 1] in "<>") or command.startswith("&>", i)


def injection_risk(command: str) -> str | None:
    """Why the command cannot be read statically, or ``None`` when it can."""
    quote: str | None = None
    i = 0
    while i < len(command):
        ch = command[i]
        if quote == "'":
            quote = None if ch == "'" else quote
            i += 1
            continue
        if ch == "\\":
            i += 2
            continue
        if ch == "'" and quote is None:
            quote = "'"
        elif ch == '"':
            quote = None if quote == '"' else '"'
        elif ch == "`" or command.startswith("$(", i):
            return _risk("command_substitution")
        elif command.startswith("${", i):
            return _risk("expansion")
        elif quote is None and command.startswith(("<(", ">("), i):
            return _risk("process_substitution")
        i += 1
    if quote is not None:
        return "Command parsing failed, cannot verify safety"
    for part in split_commands(command) or []:
        words = part.split()
        if part.startswith("(") or part.startswith("{"):
            return _risk("subshell" if part.startswith("(") else "compound_statement")
        if words and words[0] in _CONTROL_WORDS:
            return _risk(_CONTROL_WORDS[words[0]])
        if _FUNCTION_DEF.match(part):
            return _risk("function_definition")
    return None


def _risk(kind: str) -> str:
    return f"Command contains {kind} which cannot be statically analyzed"


def _words(command: str) -> list[str] | None:
    try:
        return shlex.split(command)
    except ValueError:
        return None


def _base_index(tokens: list[str]) -> int:
    """The index of the command name, after leading ``VAR=value`` assignments."""
    i = 0
    while i < len(tokens) and "=" in tokens[i] and not tokens[i].startswith("="):
        i += 1
    return i


def is_read_only_command(command: str) -> bool:
    """Whether every simple command of the line only reads (no output redirection either)."""
    cmd = command.strip()
    if ">" in cmd:
        return False
    parts = split_commands(cmd)
    if not parts:
        return False
    return all(_single_read_only(part) for part in parts)


def _single_read_only(cmd: str) -> bool:
    if cmd in READ_ONLY_COMMANDS:
        return True
    tokens = _words(cmd)
    if tokens is None:
        return False
    if tokens and tokens[0] == "find" and any(t in FIND_MUTATING for t in tokens[1:]):
        return False
    if cmd.startswith("git ") and any(
        t.startswith(("--output", "--op"))
        or (t.startswith("-") and not t.startswith("--") and "O" in t)
        for t in tokens[2:]
    ):
        return False  # git grep -O<cmd> runs a command, --output= writes a file
    if any(cmd.startswith(prefix + " ") for prefix in READ_ONLY_COMMANDS):
        return True
    base = _base_index(tokens)
    return base < len(tokens) and tokens[base] in SAFE_COMMANDS


def dangerous_pattern(command: str) -> str | None:
    """The first dangerous pattern the command contains (short words matched as words)."""
    normalized = " ".join(command.split())
    for pattern in DANGEROUS_COMMANDS:
        if " " not in pattern and len(pattern) <= 4:
            if re.search(r"\b" + re.escape(pattern) + r"\b", normalized):
                return pattern
        elif pattern in normalized:
            return pattern
    return None


def file_paths(command: str) -> list[tuple[str, str]]:
    """``(command, path)`` for every file argument of a file-changing command and every output
    redirection target (``"redirect"``)."""
    found: list[tuple[str, str]] = []
    for part in split_commands(command) or [command]:
        tokens = _words(part) or part.split()
        i = 0
        while i < len(tokens):
            token = tokens[i]
            redirect = re.fullmatch(r"(\d?|&)>>?(.*)", token)
            if redirect is not None:
                target = redirect.group(2) or (tokens[i + 1] if i + 1 < len(tokens) else "")
                if target and not target.startswith("&"):
                    found.append(("redirect", target))
                i += 1 if redirect.group(2) else 2
                continue
            i += 1
        base = _base_index(tokens)
        if base < len(tokens) and tokens[base] in FILE_COMMANDS:
            name = tokens[base]
            args = [t for t in tokens[base + 1 :] if not t.startswith("-") and ">" not in t]
            if name == "sed" and args and not args[0].startswith("/"):
                args = args[1:]  # the script, not a file
            found.extend((name, arg) for arg in args)
    return found


def sed_violation(command: str, dangerous_files: tuple[str, ...] | list[str]) -> str | None:
    """A reason when an in-place ``sed`` edits a dangerous file or runs a ``w``/``e`` command."""
    for part in split_commands(command) or []:
        tokens = _words(part) or []
        base = _base_index(tokens)
        if base >= len(tokens) or tokens[base] != "sed":
            continue
        args = tokens[base + 1 :]
        in_place = any(a == "-i" or a.startswith(("-i", "--in-place")) for a in args)
        scripts = [a for a in args if not a.startswith("-")][:1]
        if scripts and re.search(r"(^|[;}/\s])[wWeE](\s|$)", scripts[0]):
            return f"sed script may write files or run commands: {scripts[0]}"
        if in_place:
            for _, path in file_paths(part):
                if any(path.endswith(name) for name in dangerous_files):
                    return f"sed -i modifying dangerous file: {path}"
    return None


def command_prefixes(command: str, max_prefixes: int = 5) -> list[str]:
    """Two-word prefixes (``"git commit"``) of the simple commands, for suggested rules.

    Safe commands, single words and unknown leading variable
    assignments give no prefix.
    """
    prefixes: list[str] = []
    for part in (split_commands(command) or [])[:max_prefixes]:
        tokens = _words(part)
        if not tokens:
            continue
        base = _base_index(tokens)
        if any(t.split("=", 1)[0] not in SAFE_ENV_VARS for t in tokens[:base]):
            continue
        words = tokens[base : base + 2]
        if len(words) < 2 or words[0].lower() in SAFE_COMMANDS:
            continue
        prefix = " ".join(words)
        if prefix not in prefixes:
            prefixes.append(prefix)
    return prefixes

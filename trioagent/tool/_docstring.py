"""A small docstring parser: the description and per-parameter text of a function or class.

Understands the three common styles (what the reference gets from ``docstring_parser``):

* Google — ``Args:`` / ``Arguments:`` / ``Parameters:`` / ``Keyword Args:`` / ``Attributes:``
  sections with ``name (type): text`` or ``name: text`` entries (the type may nest
  parentheses: ``origin (tuple(int, int)): ...``); the text may continue (or start) on
  more-indented lines.  A section ends at the next section title or at the first non-blank
  line back at the title's column (a closing paragraph, an unknown title such as ``Usage:``):
  as in ``docstring_parser``, that text belongs neither to a parameter nor to the description;
* NumPy — a known section title (``Parameters``, ``Returns``, ``Notes``, ...) underlined with
  dashes, entries ``name : type`` / ``name1, name2 : type`` followed by indented text.  Any
  other underlined title (a ``Search`` heading in the description) is ordinary description
  text; after a section it ends that section;
* reST — ``:param name: text`` / ``:param type name: text`` fields.

The description is everything before the first section, as the reference builds it: the first
line, then (if any) the rest stripped, joined by a newline.  Other sections (``Returns:``,
``Raises:``, ``Example:``, ...) are left out.
"""

from __future__ import annotations

import inspect
import re

import attrs

__all__ = ["ParsedDocstring", "parse_docstring"]

_GOOGLE_PARAM_TITLES = {
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "kwargs",
    "other parameters",
    "attributes",
}
_GOOGLE_OTHER_TITLES = {
    "returns",
    "return",
    "yields",
    "yield",
    "raises",
    "raise",
    "exceptions",
    "except",
    "example",
    "examples",
    "note",
    "notes",
    "warning",
    "warnings",
    "warns",
    "see also",
    "references",
    "todo",
    "methods",
}
# numpydoc's sections plus the aliases docstring_parser accepts; ``Keyword Arguments`` and its
# short forms are kept as parameter sections too (they are in common use).
_NUMPY_PARAM_TITLES = _GOOGLE_PARAM_TITLES | {
    "other params",
    "other arguments",
    "other args",
    "attribute",
    "receives",
    "receive",
}
_NUMPY_OTHER_TITLES = {
    "returns",
    "return",
    "yields",
    "yield",
    "raises",
    "raise",
    "warns",
    "warn",
    "methods",
    "see also",
    "related",
    "notes",
    "note",
    "warnings",
    "warning",
    "references",
    "reference",
    "examples",
    "example",
}
_GOOGLE_HEADER = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*:\s*$")
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_REST_FIELD = re.compile(
    r"^\s*:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|except"
    r"|exception|yields?|ivar|cvar|var)\b"
)
_REST_PARAM = re.compile(
    r"^\s*:(?:param|parameter|arg|argument|key|keyword|ivar|cvar|var)\s+(?:[^:]*\s)?(\**\w+)\s*:(.*)$"
)
_GOOGLE_NAME = re.compile(r"(\**\w+)\s*")
_GOOGLE_LOOSE_TYPE = re.compile(r"\([^)]*\)")
_NUMPY_NAME = re.compile(r"\**\w+")


@attrs.frozen
class ParsedDocstring:
    """The parts of a docstring a tool schema needs."""

    description: str = ""
    params: dict[str, str] = attrs.field(factory=dict)


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Parse ``doc`` (any of the three styles; an empty or missing docstring is fine)."""
    if not doc or not doc.strip():
        return ParsedDocstring()
    lines = inspect.cleandoc(doc).splitlines()
    sections = _find_sections(lines)
    first = sections[0][0] if sections else len(lines)
    params: dict[str, str] = {}
    for start, end, kind, is_param in sections:
        if not is_param:
            continue
        body = lines[start:end]
        if kind == "google":
            params.update(_google_params(body[1:]))
        elif kind == "numpy":
            params.update(_numpy_params(body[2:]))
        else:
            params.update(_rest_params(body))
    return ParsedDocstring(description=_description(lines[:first]), params=params)


def _description(lines: list[str]) -> str:
    text = "\n".join(lines).strip("\n")
    if not text.strip():
        return ""
    short, _, long = text.partition("\n")
    parts = [short.strip(), long.strip()]
    return "\n".join(part for part in parts if part)


def _find_sections(lines: list[str]) -> list[tuple[int, int, str, bool]]:
    """``(start, end, style, holds_params)`` for every section, in order."""
    starts: list[tuple[int, str, bool]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = _indent(line)
        header = _GOOGLE_HEADER.match(line)
        if header and indent == 0:
            title = header.group(1).strip().lower()
            if title in _GOOGLE_PARAM_TITLES or title in _GOOGLE_OTHER_TITLES:
                starts.append((i, "google", title in _GOOGLE_PARAM_TITLES))
        elif (
            indent == 0
            and line.strip()
            and i + 1 < len(lines)
            and _NUMPY_UNDERLINE.match(lines[i + 1])
        ):
            title = line.strip().lower()
            if title in _NUMPY_PARAM_TITLES or title in _NUMPY_OTHER_TITLES:
                starts.append((i, "numpy", title in _NUMPY_PARAM_TITLES))
            elif starts:
                # An unknown underlined title: description text before the first section
                # (a ``Search`` heading), the end of the section it follows after one.
                starts.append((i, "numpy", False))
            i += 1
        elif _REST_FIELD.match(line) and indent == 0:
            starts.append((i, "rest", True))
            # A run of reST fields is one section.
            while i + 1 < len(lines) and (
                _REST_FIELD.match(lines[i + 1]) or lines[i + 1].startswith((" ", "\t"))
            ):
                i += 1
        i += 1
    sections = []
    for n, (start, kind, is_param) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        if kind == "google":
            end = _google_section_end(lines, start, end)
        sections.append((start, end, kind, is_param))
    return sections


def _google_section_end(lines: list[str], start: int, end: int) -> int:
    """Where the Google section titled at ``lines[start]`` ends (``end``: the next section).

    The body is the block indented under the title, so the first non-blank line back at the
    title's column (a closing paragraph, an unknown ``Usage:`` title) ends it.  A body that
    starts at column 0 runs to ``end``: that is what ``cleandoc`` makes of a docstring that
    opens with the title and has nothing after its section, and of unindented entries.
    """
    content = [j for j in range(start + 1, end) if lines[j].strip()]
    if not content or _indent(lines[content[0]]) == 0:
        return end
    return next((j for j in content if _indent(lines[j]) == 0), end)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _entries(body: list[str]) -> list[tuple[str, list[str]]]:
    """Split a section body into (entry line, continuation lines) at its base indent."""
    content = [line for line in body if line.strip()]
    if not content:
        return []
    base = min(len(line) - len(line.lstrip()) for line in content)
    entries: list[tuple[str, list[str]]] = []
    for line in body:
        if not line.strip():
            if entries:
                entries[-1][1].append("")
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= base:
            entries.append((line.strip(), []))
        elif entries:
            entries[-1][1].append(line)
    return entries


def _join(first: str, continuation: list[str]) -> str:
    """An entry's text: its first line, then the continuation lines dedented as one block.

    Every continuation line counts for the common margin (``cleandoc`` alone would strip the
    first one whole), so a code block that opens the continuation keeps its indentation.
    """
    rest = inspect.cleandoc("\n".join(["", *continuation])).rstrip()
    parts = [first.strip(), rest]
    return "\n".join(part for part in parts if part.strip())


def _google_params(body: list[str]) -> dict[str, str]:
    params = {}
    for head, continuation in _entries(body):
        entry = _google_entry(head)
        if entry is not None:
            params[entry[0]] = _join(entry[1], continuation)
    return params


def _google_entry(head: str) -> tuple[str, str] | None:
    """``(name, text)`` of a ``name (type): text`` / ``name: text`` line, else None.

    The type is everything up to the parenthesis that balances the opening one, so it may
    nest parentheses (``tuple(int, int)``) and hold colons (``:obj:`int```).
    """
    match = _GOOGLE_NAME.match(head)
    if match is None:
        return None
    rest = head[match.end() :]
    if rest.startswith("("):
        close = _closing_parenthesis(rest)
        if close is None:
            # Never balanced (a typo: ``origin (tuple(int, int): ...``): the type ends at the
            # first ``)``, as before nesting was understood and as docstring_parser reads it.
            loose = _GOOGLE_LOOSE_TYPE.match(rest)
            if loose is None:
                return None
            close = loose.end() - 1
        rest = rest[close + 1 :].lstrip()
    if not rest.startswith(":"):
        return None
    return match.group(1).lstrip("*"), rest[1:]


def _closing_parenthesis(text: str) -> int | None:
    """The index of the ``)`` balancing the ``(`` that ``text`` starts with, if any."""
    depth = 0
    for position, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return position
    return None


def _numpy_params(body: list[str]) -> dict[str, str]:
    params = {}
    for head, continuation in _entries(body):
        names = [name.strip() for name in head.split(":", 1)[0].split(",") if name.strip()]
        # ``x, y : float`` documents both; a line whose names are not all identifiers
        # (``bad-name : int``, a prose line) is not an entry.
        if all(_NUMPY_NAME.fullmatch(name) for name in names):
            for name in names:
                params[name.lstrip("*")] = _join("", continuation)
    return params


def _rest_params(body: list[str]) -> dict[str, str]:
    params = {}
    current: tuple[str, str, list[str]] | None = None
    for line in [*body, ":end:"]:
        if line.startswith((" ", "\t")) or not line.strip():
            if current is not None:
                current[2].append(line)
            continue
        if current is not None:
            params[current[0]] = _join(current[1], current[2])
            current = None
        match = _REST_PARAM.match(line)
        if match:
            current = (match.group(1).lstrip("*"), match.group(2), [])
    return params

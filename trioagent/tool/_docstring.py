"""A small docstring parser: the description and per-parameter text of a function or class.

Understands the three common styles (what the reference gets from ``docstring_parser``):

* Google — ``Args:`` / ``Arguments:`` / ``Parameters:`` / ``Keyword Args:`` / ``Attributes:``
  sections with ``name (type): text`` or ``name: text`` entries; the text may continue (or
  start) on more-indented lines;
* NumPy — a ``Parameters`` / ``Attributes`` title underlined with dashes, entries
  ``name : type`` followed by indented text;
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
_GOOGLE_HEADER = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*:\s*$")
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_REST_FIELD = re.compile(
    r"^\s*:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|except"
    r"|exception|yields?|ivar|cvar|var)\b"
)
_REST_PARAM = re.compile(
    r"^\s*:(?:param|parameter|arg|argument|key|keyword|ivar|cvar|var)\s+(?:[^:]*\s)?(\**\w+)\s*:(.*)$"
)
_GOOGLE_ENTRY = re.compile(r"^(\**\w+)\s*(?:\([^)]*\))?\s*:(.*)$")
_NUMPY_ENTRY = re.compile(r"^(\**\w+)\s*(?::.*)?$")


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
        indent = len(line) - len(line.lstrip())
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
            starts.append((i, "numpy", title in _GOOGLE_PARAM_TITLES))
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
        sections.append((start, end, kind, is_param))
    return sections


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
    rest = inspect.cleandoc("\n".join(continuation)) if any(continuation) else ""
    parts = [first.strip(), rest.strip()]
    return "\n".join(part for part in parts if part)


def _google_params(body: list[str]) -> dict[str, str]:
    params = {}
    for head, continuation in _entries(body):
        match = _GOOGLE_ENTRY.match(head)
        if match:
            params[match.group(1).lstrip("*")] = _join(match.group(2), continuation)
    return params


def _numpy_params(body: list[str]) -> dict[str, str]:
    params = {}
    for head, continuation in _entries(body):
        for name in head.split(":", 1)[0].split(","):
            match = _NUMPY_ENTRY.match(name.strip())
            if match:
                params[match.group(1).lstrip("*")] = _join("", continuation)
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

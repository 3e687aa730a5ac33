"""The description and per-parameter text of a docstring, read with ``docstring-parser``.

``docstring-parser`` reads the entries of a Google, NumPy or reST section.  This module adds
what a tool schema needs on top of it:

* **Sections of any style in one docstring**, found here: a Google title (``Args:``,
  ``Keyword Args:``, ``Returns:``, ...; any case, a space before the colon allowed) at column
  0, a known NumPy title underlined with dashes, or a run of reST fields.  A Google section ends
  at the first non-blank line back at the title's column (a closing paragraph, an unknown title
  such as ``Usage:``); an unknown underlined title is description text before the first
  section and ends the section it follows after one.  Each parameter section is handed to the
  library's parser for its style.
* **Google entry heads** whose type holds a colon or nested parentheses
  (``a (:obj:`int`): ...``, ``origin (tuple(int, int)): ...``): the type ends at the
  parenthesis that balances the opening one (at the first ``)`` when none does), and a line
  that is not ``name (type): text`` / ``name: text`` documents nothing.  Continuation lines
  are dedented as one block, so a code block that opens the continuation keeps its indentation.
* **NumPy entries** naming several parameters (``x, y : float``); an entry whose names are
  not all identifiers (a prose line) documents nothing.
* **reST fields** with a multi-word type (``:param dict[str, int] mapping:``); a line back at
  column 0 that is not a field ends the field before it.

The description is everything before the first section: its first line, then (if any) the
rest stripped, joined by a newline.  Other sections (``Returns:``, ``Raises:``, ...) are left
out.
"""

from __future__ import annotations

import inspect
import itertools
import re

import attrs
from docstring_parser import rest as rest_style
from docstring_parser.common import DocstringMeta, DocstringParam
from docstring_parser.google import GoogleParser, Section, SectionType
from docstring_parser.numpydoc import NumpydocParser

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
    *("returns", "return", "yields", "yield", "raises", "raise", "exceptions", "except"),
    *("example", "examples", "note", "notes", "warning", "warnings", "warns", "see also"),
    *("references", "todo", "methods"),
}
_NUMPY_PARAM_TITLES = _GOOGLE_PARAM_TITLES | {
    *("other params", "other arguments", "other args", "attribute", "receives", "receive"),
}
_NUMPY_OTHER_TITLES = _GOOGLE_OTHER_TITLES - {"exceptions", "except", "todo"} | {
    *("warn", "related", "reference"),
}
_GOOGLE_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*?)\s*:\s*$")
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_REST_FIELD = re.compile(
    r"^:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|except"
    r"|exception|yields?|ivar|cvar|var)\b"
)
_REST_PARAM = re.compile(
    r"^:(?:param|parameter|arg|argument|key|keyword|ivar|cvar|var)\s+(?:[^:]*\s)?(\**\w+)\s*:(.*)$"
)
_GOOGLE_NAME = re.compile(r"(\**\w+)\s*")
_GOOGLE_LOOSE_TYPE = re.compile(r"\([^)]*\)")
_IDENTIFIER = re.compile(r"\**\w+")


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
    params: dict[str, str] = {}
    for start, end, style, holds_params in sections:
        if holds_params:
            params.update(_READERS[style](lines[start:end]))
    first = sections[0][0] if sections else len(lines)
    return ParsedDocstring(description=_description(lines[:first]), params=params)


def _description(lines: list[str]) -> str:
    short, _, long = "\n".join(lines).strip("\n").partition("\n")
    return "\n".join(part for part in (short.strip(), long.strip()) if part)


# -- where the sections are ----------------------------------------------------------------


def _find_sections(lines: list[str]) -> list[tuple[int, int, str, bool]]:
    """``(start, end, style, holds_params)`` for every section, in order."""
    starts: list[tuple[int, str, bool]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        header = _GOOGLE_HEADER.match(line)
        if header:
            title = header.group(1).strip().lower()
            if title in _GOOGLE_PARAM_TITLES or title in _GOOGLE_OTHER_TITLES:
                starts.append((i, "google", title in _GOOGLE_PARAM_TITLES))
        elif line[:1].strip() and i + 1 < len(lines) and _NUMPY_UNDERLINE.match(lines[i + 1]):
            title = line.strip().lower()
            if title in _NUMPY_PARAM_TITLES or title in _NUMPY_OTHER_TITLES:
                starts.append((i, "numpy", title in _NUMPY_PARAM_TITLES))
            elif starts:  # an unknown underlined title: the end of the section it follows
                starts.append((i, "numpy", False))
            i += 1
        elif _REST_FIELD.match(line):
            starts.append((i, "rest", True))
            while i + 1 < len(lines) and (  # a run of reST fields is one section
                _REST_FIELD.match(lines[i + 1]) or lines[i + 1].startswith((" ", "\t"))
            ):
                i += 1
        i += 1
    sections = []
    for n, (start, style, holds_params) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        if style == "google":
            end = _google_section_end(lines, start, end)
        sections.append((start, end, style, holds_params))
    return sections


def _google_section_end(lines: list[str], start: int, end: int) -> int:
    """Where the Google section titled at ``lines[start]`` ends (``end``: the next section).

    The first non-blank line back at the title's column ends the indented body.  A body that
    starts at column 0 runs to ``end``: that is what ``cleandoc`` makes of a docstring that
    opens with the title, and of unindented entries.
    """
    content = [j for j in range(start + 1, end) if lines[j].strip()]
    if not content or not lines[content[0]][:1].isspace():
        return end
    return next((j for j in content if not lines[j][:1].isspace()), end)


# -- reading a section with docstring-parser ------------------------------------------------


class _GoogleEntries(GoogleParser):
    """The library's Google parser (it splits a section into entries), with entry heads read
    as described in the module docstring: the library splits a head at its first colon."""

    def __init__(self) -> None:
        super().__init__([Section("Args", "param", SectionType.MULTIPLE)])

    def _build_meta(self, text: str, title: str) -> DocstringMeta:
        head, _, continuation = text.partition("\n")
        entry = _google_head(head)
        if entry is None:
            return DocstringMeta(args=["text"], description=None)
        name, first = entry
        # every continuation line counts for the margin (cleandoc strips its first line whole)
        rest = inspect.cleandoc("\n" + continuation).rstrip()
        description = "\n".join(part for part in (first.strip(), rest) if part.strip())
        return DocstringParam(
            args=["param", name],
            description=description,
            arg_name=name,
            type_name=None,
            is_optional=None,
            default=None,
        )


def _google_head(head: str) -> tuple[str, str] | None:
    """``(name, text)`` of a ``name (type): text`` / ``name: text`` line, else None."""
    match = _GOOGLE_NAME.match(head)
    if match is None:
        return None
    rest = head[match.end() :]
    if rest.startswith("("):
        depths = itertools.accumulate({"(": 1, ")": -1}.get(char, 0) for char in rest)
        close = next((i for i, depth in enumerate(depths) if depth == 0), None)
        if close is None:  # never balanced (a typo): the type ends at the first ``)``
            loose = _GOOGLE_LOOSE_TYPE.match(rest)
            if loose is None:
                return None
            close = loose.end() - 1
        rest = rest[close + 1 :].lstrip()
    if not rest.startswith(":"):
        return None
    return match.group(1), rest[1:]


_GOOGLE = _GoogleEntries()
_NUMPY = NumpydocParser()


def _google_params(section: list[str]) -> dict[str, str]:
    body = [f"    {line}" if line.strip() else "" for line in section[1:]]
    if not any(body):
        return {}
    # the leading blank line keeps cleandoc from dedenting the body to the title's column
    parsed = _GOOGLE.parse("\nArgs:\n" + "\n".join(body))
    return {p.arg_name.lstrip("*"): p.description or "" for p in parsed.params}


def _numpy_params(section: list[str]) -> dict[str, str]:
    parsed = _NUMPY.parse("Parameters\n----------\n" + "\n".join(section[2:]))
    params = {}
    for param in parsed.params:
        names = [name.strip() for name in param.arg_name.split(",") if name.strip()]
        if all(_IDENTIFIER.fullmatch(name) for name in names):
            params.update(dict.fromkeys((n.lstrip("*") for n in names), param.description or ""))
    return params


def _rest_params(section: list[str]) -> dict[str, str]:
    """Only the parameter fields reach the library, each as ``:param name: text``."""
    fields: list[str] = []
    keep = False
    for line in section:
        if line[:1].isspace() or not line.strip():
            if keep:
                fields.append(line)
            continue
        match = _REST_PARAM.match(line)
        keep = match is not None
        if match is not None:
            fields.append(f":param {match.group(1)}:{match.group(2)}")
    parsed = rest_style.parse("\n".join(fields))
    return {p.arg_name.lstrip("*"): p.description or "" for p in parsed.params}


_READERS = {"google": _google_params, "numpy": _numpy_params, "rest": _rest_params}

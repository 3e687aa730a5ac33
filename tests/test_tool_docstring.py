"""Adversarial tests of tool-schema generation: docstring parsing (Google / NumPy / reST),
signature → JSON schema edge cases, and the round trip schema → call → typed arguments.

Complements ``test_tool_schema.py`` (basic shapes, pydantic parity of the common cases) and
``test_function_tool.py`` (calling conventions).  Like ``test_tool_schema.py`` this module uses
PEP 563 string annotations, so every annotation must be resolved before a schema is built; the
classes used in annotations therefore live at module level.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import enum
import functools
import inspect
import json
import typing
from typing import Annotated, Any, Literal, Optional, Union

import attrs
import jsonschema
import pydantic
import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st

from trioagent.message import ToolCallBlock, ToolResultState
from trioagent.tool import FunctionTool, Toolkit
from trioagent.tool._docstring import ParsedDocstring, parse_docstring
from trioagent.tool._schema import remove_title_field
from trioagent.tool._signature import function_input_schema

# -- helpers -----------------------------------------------------------------------------------


def check_schema(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """Assert ``schema`` is a valid Draft 2020-12 schema (what the toolkit picks for it: no
    ``$schema`` key) and return a validator for it."""
    assert "$schema" not in schema
    assert jsonschema.validators.validator_for(schema) is jsonschema.Draft202012Validator
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def pydantic_schema(func: Any) -> dict[str, Any]:
    """AgentScope's extractor: a pydantic model built from the
    signature, docstring descriptions attached, titles removed."""
    doc = parse_docstring(inspect.getdoc(func))
    hints = typing.get_type_hints(func, include_extras=True)
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(func).parameters.items():
        default = ... if param.default is param.empty else param.default
        description = doc.params.get(name)
        field = (
            pydantic.Field(default=default)
            if description is None
            else pydantic.Field(default=default, description=description)
        )
        fields[name] = (hints.get(name, Any), field)
    model = pydantic.create_model(
        "_M", __config__=pydantic.ConfigDict(arbitrary_types_allowed=True), **fields
    )
    return remove_title_field(model.model_json_schema())


class Recorder:
    """A tool function body that records the arguments it receives."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def record(self, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        return "ok"


async def run_call(toolkit: Toolkit, name: str, arguments: Any) -> Any:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return await toolkit.call_tool(ToolCallBlock(id="call-1", name=name, input=raw))


def toolkit_with(func: Any, **kwargs: Any) -> Toolkit:
    toolkit = Toolkit()
    toolkit.register_function(func, **kwargs)
    return toolkit


# -- Google docstrings -------------------------------------------------------------------------


def google_everything(
    query: str | None,
    mode: Literal["a", "b"] = "a",
) -> str:
    """Summary line
    continues here.

    Long paragraph one
    wraps.

    Long paragraph two.

    Args:
        query (str | None): The query
            spanning two lines.

            And a second paragraph.
        mode (Literal["a", "b"], optional):
            Starts on the next line.
        *args: Positional extras.
        **kwargs (Any): Keyword extras.
        ghost (int): Documented, but not a parameter.

    Returns:
        str: Something with a: colon.

    Raises:
        ValueError: bad: input.

    Examples:
        >>> google_everything(query="x")
        'x'
    """
    return str(query)


def test_google_multiline_typed_and_variadic_entries():
    parsed = parse_docstring(google_everything.__doc__)  # raw, still indented
    assert parsed == parse_docstring(inspect.getdoc(google_everything))
    assert parsed.params == {
        "query": "The query\nspanning two lines.\n\nAnd a second paragraph.",
        "mode": "Starts on the next line.",
        "args": "Positional extras.",
        "kwargs": "Keyword extras.",
        "ghost": "Documented, but not a parameter.",
    }
    assert parsed.description == (
        "Summary line\ncontinues here.\n\nLong paragraph one\nwraps.\n\nLong paragraph two."
    )


def test_google_other_sections_do_not_leak_into_the_tool():
    tool = FunctionTool(google_everything)
    text = json.dumps(tool.input_schema) + tool.description
    for leaked in ("colon", "bad", ">>>", "Returns", "Raises", "Examples", "ghost", "extras"):
        assert leaked not in text
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "query": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "description": "The query\nspanning two lines.\n\nAnd a second paragraph.",
            },
            "mode": {
                "enum": ["a", "b"],
                "type": "string",
                "description": "Starts on the next line.",
                "default": "a",
            },
        },
        "required": ["query"],
    }
    assert tool.description.startswith("Summary line\ncontinues here.")


def test_google_sections_out_of_order():
    parsed = parse_docstring(
        """Do it.

        Returns:
            int: count.

        Raises:
            KeyError: missing.

        Args:
            a: The a.

        Note:
            A note: not a parameter.

        Keyword Args:
            b (int): The b.
        """
    )
    assert parsed == ParsedDocstring(description="Do it.", params={"a": "The a.", "b": "The b."})


@pytest.mark.parametrize(
    "title",
    [
        "Args:",
        "Arguments:",
        "Parameters:",
        "Params:",
        "Keyword Args:",
        "Keyword Arguments:",
        "Kwargs:",
        "Other Parameters:",
        "Attributes:",
        "ARGS:",
        "Args :",
        "Args:   ",
    ],
)
def test_google_parameter_section_titles(title):
    parsed = parse_docstring(f"Summary.\n\n{title}\n    x (int): The x.\n")
    assert parsed == ParsedDocstring(description="Summary.", params={"x": "The x."})


def test_google_unknown_titles_stay_in_the_description():
    parsed = parse_docstring(
        """Summary.

        Usage:
            run(x)

        Args:
            x: The x.
        """
    )
    assert parsed.description == "Summary.\nUsage:\n    run(x)"
    assert parsed.params == {"x": "The x."}


def test_google_types_with_colons_brackets_and_pipes():
    parsed = parse_docstring(
        """Summary.

        Args:
            a (:obj:`int`): A.
            b (dict[str, list[int]] | None): B: with a colon.
            c (Callable[[int], str]): C.
            d(int):D without spaces.
        """
    )
    assert parsed.params == {
        "a": "A.",
        "b": "B: with a colon.",
        "c": "C.",
        "d": "D without spaces.",
    }


def test_google_lines_that_are_not_entries_are_ignored():
    parsed = parse_docstring(
        """Summary.

        Args:

            x: The x.
            see the docs for more
            y: The y.
        """
    )
    assert parsed.params == {"x": "The x.", "y": "The y."}


def test_google_section_without_entries():
    assert parse_docstring("Summary.\n\nArgs:\n") == ParsedDocstring(description="Summary.")
    assert parse_docstring("Summary.\n\nArgs:\n\nReturns:\n    x") == ParsedDocstring(
        description="Summary."
    )


def test_google_continuation_keeps_relative_indentation():
    parsed = parse_docstring(
        """Summary.

        Args:
            mode: One of:

                - ``fast``: quick
                    and dirty
                - ``slow``: thorough
            other: O.
        """
    )
    # As docstring_parser: the continuation is dedented as a block (so the nesting survives)
    # and blank lines right after the entry line are dropped.
    assert parsed.params["mode"] == (
        "One of:\n- ``fast``: quick\n    and dirty\n- ``slow``: thorough"
    )
    assert parsed.params["other"] == "O."


# -- NumPy docstrings --------------------------------------------------------------------------

NUMPY_EVERYTHING = """Summary.

Extended text.

Parameters
----------
x, y : float
    Coordinates,
    in metres.

    Second paragraph.
mode : {'a', 'b'}, optional
    The mode.
*args
    Extras.
**kwargs : dict
    More.

Returns
-------
float
    The distance: metres.

Other Parameters
----------------
z : int
    Z.

Examples
--------
>>> f(1, 2)
3.0
"""


def test_numpy_multiline_shared_and_variadic_entries():
    parsed = parse_docstring(NUMPY_EVERYTHING)
    coordinates = "Coordinates,\nin metres.\n\nSecond paragraph."
    assert parsed == ParsedDocstring(
        description="Summary.\nExtended text.",
        params={
            "x": coordinates,
            "y": coordinates,
            "mode": "The mode.",
            "args": "Extras.",
            "kwargs": "More.",
            "z": "Z.",
        },
    )


def test_numpy_sections_out_of_order_and_underline_lengths():
    parsed = parse_docstring(
        """Summary.

        Returns
        -------
        int
            A count.

        Parameters
        ---
        a : int
            The a.
        b
            The b, untyped.
        bad-name : int
            Not an identifier.
        """
    )
    assert parsed == ParsedDocstring(
        description="Summary.", params={"a": "The a.", "b": "The b, untyped."}
    )


def test_numpy_entry_without_description():
    parsed = parse_docstring("Summary.\n\nParameters\n----------\na : int\nb : str\n    B.\n")
    assert parsed.params == {"a": "", "b": "B."}


# -- reST docstrings ---------------------------------------------------------------------------

REST_EVERYTHING = """Summary.

Long.

:param query: The query
    spanning lines.

    Second paragraph.
:type query: str
:param int limit: Limit.
:param dict[str, int] mapping: Mapping: with a colon.
:param *args: Extras.
:keyword flag: A flag.
:returns: The result: text.
:rtype: str
:raises ValueError: When bad.
:param late:
    Documented after returns.

A trailing paragraph, not part of ``late``.
"""


def test_rest_fields():
    parsed = parse_docstring(REST_EVERYTHING)
    assert parsed == ParsedDocstring(
        description="Summary.\nLong.",
        params={
            "query": "The query\nspanning lines.\n\nSecond paragraph.",
            "limit": "Limit.",
            "mapping": "Mapping: with a colon.",
            "args": "Extras.",
            "flag": "A flag.",
            "late": "Documented after returns.",
        },
    )


def test_rest_type_field_does_not_replace_the_description():
    parsed = parse_docstring(":param a: The a.\n:type a: int\n:type b: str\n")
    assert parsed == ParsedDocstring(params={"a": "The a."})


def test_stray_continuation_lines_without_an_entry_are_dropped():
    rest = parse_docstring(":returns: The result\n    continued.\n:param a: A.\n")
    assert rest == ParsedDocstring(params={"a": "A."})
    numpy = parse_docstring("Parameters\n----------\n    stray\nx : int\n    The x.\n")
    assert numpy == ParsedDocstring(params={"x": "The x."})


# -- line endings, tabs, unicode, adjacency ---------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        "Summary.\r\n\r\nMore.\r\n\r\nArgs:\r\n    a: A\r\n        cont.\r\n",
        "Summary.\n\nMore.\n\nArgs:\n\ta: A\n\t\tcont.\n",
        "Summary.\nMore.\nArgs:\n    a: A\n        cont.\nReturns:\n    The a: again.\n",
        "Summary.\nMore.\n:param a: A\n    cont.\nReturns:\n    r: x\n",
    ],
    ids=["crlf", "tabs", "google-no-blank-lines", "rest-then-google"],
)
def test_line_endings_tabs_and_sections_without_blank_lines(doc):
    assert parse_docstring(doc) == ParsedDocstring(
        description="Summary.\nMore.", params={"a": "A\ncont."}
    )


def test_unicode_names_and_duplicate_fields():
    assert parse_docstring("Résumé.\n\nArgs:\n    café: Ünïcode.\n") == ParsedDocstring(
        description="Résumé.", params={"café": "Ünïcode."}
    )
    # a parameter documented twice: the later text wins, as in docstring_parser's mapping
    assert parse_docstring(":param a: one\n:param a: two\n").params == {"a": "two"}


# -- descriptions ------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", [None, "", "   ", "\n\n\t\n"])
def test_blank_docstrings(doc):
    assert parse_docstring(doc) == ParsedDocstring(description="", params={})


@pytest.mark.parametrize(
    "doc",
    [
        "Args:\n    a: The a.",
        "Parameters\n----------\na : int\n    The a.",
        ":param a: The a.",
    ],
    ids=["google", "numpy", "rest"],
)
def test_docstring_that_starts_with_a_section_has_no_description(doc):
    assert parse_docstring(doc) == ParsedDocstring(description="", params={"a": "The a."})


def described_over_paragraphs(a: int) -> None:
    """Summarise
    over two lines.

    First paragraph
    of the long description.

    Second paragraph.

    Args:
        a: The a.
    """


def test_description_spanning_paragraphs_reaches_the_model():
    expected = (
        "Summarise\nover two lines.\n\nFirst paragraph\nof the long description.\n\n"
        "Second paragraph."
    )
    toolkit = toolkit_with(described_over_paragraphs)
    function = toolkit.get_tool_schemas()[0]["function"]
    assert function["description"] == expected
    assert function["parameters"]["properties"]["a"] == {"type": "integer", "description": "The a."}


def test_explicit_description_wins_over_docstring_and_empty_is_kept():
    assert FunctionTool(described_over_paragraphs, description="Own.").description == "Own."
    assert FunctionTool(described_over_paragraphs, description="").description == ""


# -- where a section ends; nested types; underlined headings in the description ----------------


def test_google_section_ends_at_a_closing_paragraph() -> None:
    parsed = parse_docstring(
        """Copy a file.

        Args:
            src: Source path.
            dst: Destination path.

        The copy is atomic.
        """
    )
    # As docstring_parser: the closing paragraph ends the section, and it is neither a
    # parameter's text nor part of the description (which stops at the first section).
    assert parsed == ParsedDocstring(
        description="Copy a file.", params={"src": "Source path.", "dst": "Destination path."}
    )


def test_google_section_ends_at_an_unknown_title_which_is_not_a_parameter() -> None:
    parsed = parse_docstring(
        """Copy a file.

        Args:
            src: Source path.

        Usage:
            copy("a", "b")
        """
    )
    assert parsed == ParsedDocstring(description="Copy a file.", params={"src": "Source path."})


def test_google_column_zero_text_between_sections_leaves_both_sections_intact() -> None:
    parsed = parse_docstring(
        "Summary.\n\nArgs:\n    a: The a.\nnot indented: so not an entry\n    b: Dropped.\n"
        "Returns:\n    int: count.\n\nKeyword Args:\n    c: The c.\n\nTrailing.\n"
    )
    assert parsed == ParsedDocstring(description="Summary.", params={"a": "The a.", "c": "The c."})


def copy_atomically(src: str, dst: str) -> None:
    """Copy a file.

    Args:
        src: Source path.
        dst: Destination path.

    The copy is atomic.
    """


def test_descriptions_before_a_closing_paragraph_reach_the_model() -> None:
    function = toolkit_with(copy_atomically).get_tool_schemas()[0]["function"]
    assert function["description"] == "Copy a file."
    assert function["parameters"]["properties"] == {
        "src": {"type": "string", "description": "Source path."},
        "dst": {"type": "string", "description": "Destination path."},
    }


def test_google_indented_code_block_in_a_parameter_description_is_kept() -> None:
    parsed = parse_docstring(
        """Run a command.

        Args:
            command: The command line, for example::

                    run --fast \\
                        --quiet

                More text.
            timeout (float): Seconds.

        Run it once.
        """
    )
    assert parsed.params == {
        "command": (
            "The command line, for example::\n    run --fast \\\n        --quiet\n\nMore text."
        ),
        "timeout": "Seconds.",
    }


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (  # the block opens the continuation, no blank line before it
            "Run.\n\nArgs:\n    command: Run it like\n            run --fast\n"
            "        and so on.\n    timeout: Seconds.\n",
            "Run it like\n    run --fast\nand so on.",
        ),
        (
            "Run.\n\nParameters\n----------\ncommand : str\n    The command, for example::\n\n"
            "        run --fast\n\n    More text.\ntimeout : float\n    Seconds.\n",
            "The command, for example::\n\n    run --fast\n\nMore text.",
        ),
        (
            "Run.\n\n:param command: The command::\n\n        run --fast\n\n    More text.\n"
            ":param timeout: Seconds.\n",
            "The command::\n    run --fast\n\nMore text.",
        ),
    ],
    ids=["google", "numpy", "rest"],
)
def test_code_block_keeps_its_indentation_in_every_style(doc: str, expected: str) -> None:
    assert parse_docstring(doc) == ParsedDocstring(
        description="Run.", params={"command": expected, "timeout": "Seconds."}
    )


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        ("origin (tuple(int, int)): Where to start.", "Where to start."),
        ("origin (Callable[[int], tuple(int, int)]): A callable.", "A callable."),
        ("origin (f((a), (b)), optional): Deeply (nested): text.", "Deeply (nested): text."),
        ("origin(tuple(int,int)):No spaces.", "No spaces."),
    ],
)
def test_google_type_with_nested_parentheses(entry: str, text: str) -> None:
    parsed = parse_docstring(f"Move.\n\nArgs:\n    {entry}\n    steps (int): How far.\n")
    assert parsed.params == {"origin": text, "steps": "How far."}


@pytest.mark.parametrize(
    ("entry", "params"),
    [
        # a typo never balances: the type ends at the first ``)`` (docstring_parser agrees)
        ("origin (tuple(int, int): Typo.", {"origin": "Typo.", "steps": "How far."}),
        ("origin (int)) : Extra.", {"steps": "How far."}),
        ("origin (int)", {"steps": "How far."}),
        ("origin (tuple(int, int)", {"steps": "How far."}),
    ],
)
def test_google_entries_with_unbalanced_parentheses(entry: str, params: dict[str, str]) -> None:
    parsed = parse_docstring(f"Move.\n\nArgs:\n    {entry}\n    steps (int): How far.\n")
    assert parsed.params == params


def test_underlined_heading_in_the_description_is_not_a_section() -> None:
    parsed = parse_docstring("Search\n------\nSearch the web.\n\nArgs:\n    q: Q.")
    assert parsed == ParsedDocstring(
        description="Search\n------\nSearch the web.", params={"q": "Q."}
    )
    numpy = parse_docstring(
        "Search.\n\nUsage\n-----\nsearch(q)\n\nParameters\n----------\nq : str\n    Q.\n"
    )
    assert numpy == ParsedDocstring(
        description="Search.\nUsage\n-----\nsearch(q)", params={"q": "Q."}
    )


@pytest.mark.parametrize(
    "title",
    [
        "Parameters",
        "Params",
        "Arguments",
        "Args",
        "Other Parameters",
        "Other Params",
        "Attributes",
        "Keyword Arguments",
        "PARAMETERS",
    ],
)
def test_numpy_parameter_section_titles(title: str) -> None:
    parsed = parse_docstring(f"Summary.\n\n{title}\n{'-' * len(title)}\nx : int\n    The x.\n")
    assert parsed == ParsedDocstring(description="Summary.", params={"x": "The x."})


@pytest.mark.parametrize(
    "title",
    [
        "Returns",
        "Yields",
        "Raises",
        "Warns",
        "See Also",
        "Notes",
        "Warnings",
        "References",
        "Examples",
        "Methods",
    ],
)
def test_numpy_other_section_titles_end_the_description_but_hold_no_parameters(
    title: str,
) -> None:
    parsed = parse_docstring(f"Summary.\n\n{title}\n{'-' * len(title)}\nx : int\n    The x.\n")
    assert parsed == ParsedDocstring(description="Summary.")


def test_numpy_section_followed_by_column_zero_prose() -> None:
    parsed = parse_docstring(
        """Copy a file.

        Parameters
        ----------
        src : str
            Source path.
        dst : str
            Destination path.

        The copy is atomic.
        Note, existing files are replaced.
            An indented line under the prose.
        """
    )
    # Prose is not an entry (not all of its comma-separated "names" are identifiers), so it
    # ends ``dst`` and documents nothing — not even ``Note``.
    assert parsed == ParsedDocstring(
        description="Copy a file.", params={"src": "Source path.", "dst": "Destination path."}
    )


def test_unknown_underlined_heading_after_a_numpy_section_ends_it() -> None:
    parsed = parse_docstring(
        "Copy.\n\nParameters\n----------\nsrc : str\n    Source path.\n\n"
        "Custom\n------\nfoo\n    Not a parameter.\n"
    )
    assert parsed == ParsedDocstring(description="Copy.", params={"src": "Source path."})


# -- documented vs actual parameters -----------------------------------------------------------


def documented_mismatch(present: int, undocumented: str) -> None:
    """Mismatch.

    Args:
        present: Here.
        absent: Not in the signature.
        rest: Variadic positional.
        options: Variadic keyword.
    """


def test_documented_but_absent_and_present_but_undocumented():
    schema = function_input_schema(documented_mismatch)
    assert schema == {
        "type": "object",
        "properties": {
            "present": {"type": "integer", "description": "Here."},
            "undocumented": {"type": "string"},
        },
        "required": ["present", "undocumented"],
    }
    check_schema(schema)


def only_variadic(*args: int, **kwargs: str) -> str:
    """Only variadic."""
    return f"{args}{kwargs}"


def test_a_variadic_only_function_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"only_variadic takes \*args"):
        toolkit_with(only_variadic)


def keyword_only(a: int, *, b: str, c: bool = True) -> None:
    """Keyword-only."""


def test_keyword_only_parameters_are_part_of_the_schema():
    schema = function_input_schema(keyword_only)
    assert schema["required"] == ["a", "b"]
    assert schema["properties"]["c"] == {"type": "boolean", "default": True}


# -- schema edge cases, compared with AgentScope's pydantic shapes -----------------------------


class IntChoice(enum.Enum):
    ONE = 1
    TWO = 2


class StrChoice(enum.Enum):
    A = "a"
    B = "b"


class MixedChoice(enum.Enum):
    """Mixed values."""

    NUM = 1
    TEXT = "text"


class FloatChoice(enum.Enum):
    HALF = 0.5


class Single(enum.Enum):
    ONLY = "only"


class Mode(enum.StrEnum):
    FAST = "fast"
    SLOW = "slow"


def optionals_required_list(
    a: Optional[int],  # noqa: UP045
    b: int | None,
    c: int | None = None,
    d: Optional[str] = "x",  # noqa: UP045
    e: Union[int, str, None] = None,  # noqa: UP007
    f: Any = None,
) -> None:
    """Optional with and without defaults."""


def literals_mixed(
    a: Literal[1, "a", True, None],
    b: Literal[True, False],
    c: Literal[None],
    d: Literal[1.5, 2.5],
    e: Literal["x"] = "x",
    g: Literal[IntChoice.ONE, IntChoice.TWO] = IntChoice.ONE,
) -> None:
    """Literals of mixed types."""


def enums_of_each_kind(
    a: IntChoice, b: StrChoice, c: MixedChoice, d: FloatChoice, e: Single, f: Mode = Mode.FAST
) -> None:
    """Enums of ints, strs, mixed values, floats, one member; a StrEnum."""


def nested_containers(
    a: list[dict[str, int]],
    b: dict[str, list[int]],
    c: list[list[int | None]],
    d: dict[str, dict[str, float]],
    e: list[Optional[dict[str, Any]]],  # noqa: UP045
    f: typing.List[typing.Dict[str, int]],  # noqa: UP006
) -> None:
    """Nested containers."""


def collections_of_each_kind(
    a: tuple,  # type: ignore[type-arg]
    b: tuple[int, ...],
    c: tuple[int, str, bool],
    d: set[int],
    e: frozenset[str],
    f: cabc.Iterable[int],
    g: cabc.Mapping[str, str],
    h: cabc.MutableSequence[str],
    i: list,  # type: ignore[type-arg]
    j: set,  # type: ignore[type-arg]
    k: cabc.Set[int],
) -> None:
    """Tuples, sets, abstract collections."""


def unions_of_several(
    a: int | str | list[int] | None,
    b: Union[Literal["x"], int],  # noqa: UP007
    c: list[int] | dict[str, int],
    d: float | bool,
) -> None:
    """Unions."""


def mutable_defaults(
    a: list[int] = [1, 2],  # noqa: B006
    b: dict[str, int] = {"k": 1},  # noqa: B006
    c: tuple[int, int] = (1, 2),
    d: list[str] = [],  # noqa: B006
    e: dict[str, Any] = {},  # noqa: B006
    f: IntChoice = IntChoice.TWO,
) -> None:
    """Mutable defaults."""


PYDANTIC_PARITY = [
    optionals_required_list,
    literals_mixed,
    enums_of_each_kind,
    nested_containers,
    collections_of_each_kind,
    unions_of_several,
    mutable_defaults,
]


@pytest.mark.parametrize("func", PYDANTIC_PARITY, ids=lambda f: f.__name__)
def test_edge_case_schemas_match_pydantic_and_are_valid(func):
    schema = function_input_schema(func)
    assert schema == pydantic_schema(func)
    check_schema(schema)
    FunctionTool(func)  # the tool accepts its own schema


def test_required_list_follows_defaults_not_optionality():
    schema = function_input_schema(optionals_required_list)
    assert schema["required"] == ["a", "b"]
    assert schema["properties"]["a"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    validator = check_schema(schema)
    assert validator.is_valid({"a": None, "b": None})
    assert not validator.is_valid({"a": None})  # b is Optional but has no default
    assert not validator.is_valid({"b": 1})


def test_literal_of_mixed_types_distinguishes_bool_from_int():
    schema = function_input_schema(literals_mixed)
    props = schema["properties"]
    assert props["a"] == {"enum": [1, "a", True, None]}
    assert props["b"] == {"enum": [True, False], "type": "boolean"}
    assert props["c"] == {"const": None, "type": "null"}
    assert props["d"] == {"enum": [1.5, 2.5], "type": "number"}
    assert props["g"] == {"enum": [1, 2], "type": "integer", "default": 1}
    validator = jsonschema.Draft202012Validator(props["a"])
    for ok in (1, "a", True, None):
        assert validator.is_valid(ok)
    for bad in (2, "b", False, 1.5):
        assert not validator.is_valid(bad)
    assert not jsonschema.Draft202012Validator(props["b"]).is_valid(1)


def test_enum_definitions_by_value_type():
    schema = function_input_schema(enums_of_each_kind)
    assert schema["$defs"] == {
        "IntChoice": {"enum": [1, 2], "type": "integer"},
        "StrChoice": {"enum": ["a", "b"], "type": "string"},
        "MixedChoice": {"description": "Mixed values.", "enum": [1, "text"]},
        "FloatChoice": {"enum": [0.5], "type": "number"},
        "Single": {"enum": ["only"], "type": "string"},
        "Mode": {"enum": ["fast", "slow"], "type": "string"},
    }
    assert schema["properties"]["f"] == {"$ref": "#/$defs/Mode", "default": "fast"}
    validator = check_schema(schema)
    good = {"a": 2, "b": "a", "c": "text", "d": 0.5, "e": "only"}
    assert validator.is_valid(good)
    for name, bad in {"a": "1", "b": "A", "c": "1", "d": 1, "e": "ONLY"}.items():
        assert not validator.is_valid({**good, name: bad}), name


def test_tuple_and_set_constraints_are_enforced_by_validation():
    props = function_input_schema(collections_of_each_kind)["properties"]
    fixed = jsonschema.Draft202012Validator(props["c"])
    assert fixed.is_valid([1, "a", True])
    assert not fixed.is_valid([1, "a"])
    assert not fixed.is_valid([1, "a", True, 4])
    assert not fixed.is_valid(["a", 1, True])
    assert jsonschema.Draft202012Validator(props["b"]).is_valid([])
    unique = jsonschema.Draft202012Validator(props["d"])
    assert unique.is_valid([1, 2])
    assert not unique.is_valid([1, 1])
    assert props["k"] == {"items": {"type": "integer"}, "type": "array", "uniqueItems": True}
    assert props["a"] == props["i"] == {"items": {}, "type": "array"}


def test_mutable_defaults_are_json_copies():
    props = function_input_schema(mutable_defaults)["properties"]
    assert [props[name]["default"] for name in "abcdef"] == [[1, 2], {"k": 1}, [1, 2], [], {}, 2]
    props["a"]["default"].append(99)
    assert mutable_defaults.__defaults__[0] == [1, 2]  # the function's own default is untouched
    assert function_input_schema(mutable_defaults)["properties"]["a"]["default"] == [1, 2]


class Opaque:
    """Not a data class."""


def unserialisable_defaults(
    a: float = float("nan"),
    b: float = float("inf"),
    c: bytes = b"raw",
    d: object = Opaque(),
    e: set[int] = {3},  # noqa: B006
    f: frozenset[str] = frozenset({"x"}),
    g: list[Any] = [Opaque()],  # noqa: B006, B008
    h: Any = ...,
) -> None:
    """Defaults a model cannot be shown."""


def test_unserialisable_defaults_are_left_out_but_stay_optional():
    schema = function_input_schema(unserialisable_defaults)
    props = schema["properties"]
    assert "required" not in schema
    for name in "abcdgh":
        assert "default" not in props[name], name
    assert props["d"] == {}
    assert props["e"]["default"] == [3]
    assert props["f"]["default"] == ["x"]
    check_schema(schema)


def annotated_constraints(
    a: Annotated[int, pydantic.Field(gt=0, lt=10, multiple_of=2)],
    b: Annotated[list[str], pydantic.Field(min_length=1), "Some names."],
    c: Annotated[str, 5, None] = "x",
) -> None:
    """Annotated metadata."""


def test_annotated_constraints_and_non_descriptive_metadata():
    props = function_input_schema(annotated_constraints)["properties"]
    assert props["a"] == {
        "type": "integer",
        "exclusiveMinimum": 0,
        "exclusiveMaximum": 10,
        "multipleOf": 2,
    }
    assert props["b"] == {
        "items": {"type": "string"},
        "type": "array",
        "minItems": 1,
        "description": "Some names.",
    }
    assert props["c"] == {"type": "string", "default": "x"}
    validator = check_schema(function_input_schema(annotated_constraints))
    assert validator.is_valid({"a": 4, "b": ["n"]})
    for bad in (
        {"a": 0, "b": ["n"]},
        {"a": 3, "b": ["n"]},
        {"a": 10, "b": ["n"]},
        {"a": 4, "b": []},
    ):
        assert not validator.is_valid(bad)


# -- parameters named like JSON-schema keywords ------------------------------------------------


@attrs.define
class Meta:
    """Meta data.

    Attributes:
        title: The title.
        type: The kind.
    """

    title: str
    type: str = "doc"


keyword_calls = Recorder()


def json_keywords(
    type: str,
    properties: dict[str, int],
    required: bool,
    items: list[str],
    meta: Meta,
    default: str = "d",
    enum: int = 0,
    title: str = "t",
    description: str = "",
    additionalProperties: bool = False,
    anyOf: int | None = None,
) -> str:
    """Parameters named like schema keywords.

    Args:
        type: The type.
        title: The title.
        description: The description.
    """
    return keyword_calls.record(
        type=type,
        properties=properties,
        required=required,
        items=items,
        meta=meta,
        default=default,
        enum=enum,
        title=title,
        description=description,
        additionalProperties=additionalProperties,
        anyOf=anyOf,
    )


async def test_parameters_named_like_json_schema_keywords():
    toolkit = toolkit_with(json_keywords)
    parameters = toolkit.get_tool_schemas()[0]["function"]["parameters"]
    assert parameters == toolkit.get_tool("json_keywords").input_schema
    assert list(parameters["properties"]) == [
        "type",
        "properties",
        "required",
        "items",
        "meta",
        "default",
        "enum",
        "title",
        "description",
        "additionalProperties",
        "anyOf",
    ]
    assert parameters["properties"]["title"] == {
        "type": "string",
        "description": "The title.",
        "default": "t",
    }
    assert parameters["required"] == ["type", "properties", "required", "items", "meta"]
    assert parameters["$defs"]["Meta"]["properties"]["title"] == {
        "type": "string",
        "description": "The title.",
    }
    check_schema(parameters)
    arguments = {
        "type": "t",
        "properties": {"a": 1},
        "required": True,
        "items": ["x"],
        "meta": {"title": "T"},
    }
    response = await run_call(toolkit, "json_keywords", arguments)
    assert response.state == ToolResultState.SUCCESS, response.text()
    assert keyword_calls.calls[-1] == {
        **arguments,
        "meta": Meta(title="T"),
        "default": "d",
        "enum": 0,
        "title": "t",
        "description": "",
        "additionalProperties": False,
        "anyOf": None,
    }


# -- classes: attrs, dataclasses, recursion, forward references -------------------------------


@attrs.define
class Address:
    """A postal address.

    Attributes:
        street: The street,
            possibly long.
        country: ISO code.
    """

    street: str
    country: str = "JP"
    lines: list[str] = attrs.field(factory=list)
    internal: int = attrs.field(init=False, default=0)


@attrs.define
class Customer:
    """A customer."""

    name: str
    address: Address
    billing: Address | None = None
    home: Address = Address("Main St")  # noqa: RUF009 - a default instance, on purpose
    tier: IntChoice = IntChoice.ONE


@dataclasses.dataclass
class Coupon:
    """A coupon.

    Parameters
    ----------
    code : str
        The code.
    """

    code: str
    percent: float = 10.0
    used: bool = dataclasses.field(init=False, default=False)


@attrs.define
class Settings:
    verbose: bool = False
    retries: int = attrs.field(default=3)


def configure(settings: Settings = Settings()) -> None:  # noqa: B008
    """Configure."""


def test_class_without_required_fields_or_docstring():
    schema = function_input_schema(configure)
    assert schema["$defs"]["Settings"] == {
        "properties": {
            "verbose": {"type": "boolean", "default": False},
            "retries": {"type": "integer", "default": 3},
        },
        "type": "object",
    }
    assert schema["properties"]["settings"] == {
        "$ref": "#/$defs/Settings",
        "default": {"verbose": False, "retries": 3},
    }
    assert "required" not in schema
    validator = check_schema(schema)
    assert validator.is_valid({})
    assert validator.is_valid({"settings": {}})


def make_order(customer: Customer, coupons: list[Coupon], rush: bool = False) -> None:
    """Order."""


def test_nested_attrs_classes_with_defaults():
    schema = function_input_schema(make_order)
    defs = schema["$defs"]
    assert set(defs) == {"Customer", "Address", "IntChoice", "Coupon"}
    assert defs["Customer"] == {
        "description": "A customer.",
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/Address"},
            "billing": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None},
            "home": {
                "$ref": "#/$defs/Address",
                # init=False fields are not part of the default shown to the model
                "default": {"street": "Main St", "country": "JP", "lines": []},
            },
            "tier": {"$ref": "#/$defs/IntChoice", "default": 1},
        },
        "type": "object",
        "required": ["name", "address"],
    }
    assert defs["Address"] == {
        "description": "A postal address.",
        "properties": {
            "street": {"type": "string", "description": "The street,\npossibly long."},
            "country": {"type": "string", "description": "ISO code.", "default": "JP"},
            "lines": {"items": {"type": "string"}, "type": "array"},
        },
        "type": "object",
        "required": ["street"],
    }
    assert defs["Coupon"] == {
        "description": "A coupon.",
        "properties": {
            "code": {"type": "string", "description": "The code."},
            "percent": {"type": "number", "default": 10.0},
        },
        "type": "object",
        "required": ["code"],
    }
    check_schema(schema)


order_calls = Recorder()


def place_order(customer: Customer, coupons: list[Coupon], rush: bool = False) -> str:
    """Place an order."""
    return order_calls.record(customer=customer, coupons=coupons, rush=rush)


async def test_nested_classes_arrive_as_instances():
    toolkit = toolkit_with(place_order)
    arguments = {
        "customer": {
            "name": "Ann",
            "address": {"street": "1st", "lines": ["flat 2"]},
            "billing": None,
            "tier": 2,
        },
        "coupons": [{"code": "X"}, {"code": "Y", "percent": 5}],
    }
    check_schema(toolkit.get_tool("place_order").input_schema).validate(arguments)
    response = await run_call(toolkit, "place_order", arguments)
    assert response.state == ToolResultState.SUCCESS, response.text()
    received = order_calls.calls[-1]
    assert received == {
        "customer": Customer(
            name="Ann",
            address=Address("1st", lines=["flat 2"]),
            billing=None,
            tier=IntChoice.TWO,
        ),
        "coupons": [Coupon("X"), Coupon("Y", 5)],
        "rush": False,
    }
    assert received["customer"].tier is IntChoice.TWO
    assert isinstance(received["coupons"][1].percent, float)


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"customer": {"name": "A"}, "coupons": []}, "'address' is a required property"),
        ({"customer": {"name": "A", "address": {}}, "coupons": []}, "'street'"),
        (
            {"customer": {"name": "A", "address": {"street": "s"}, "tier": 3}, "coupons": []},
            "3 is not one of [1, 2]",
        ),
        ({"customer": {"name": "A", "address": {"street": "s"}}, "coupons": [{}]}, "'code'"),
        (
            {"customer": {"name": "A", "address": {"street": "s"}}, "coupons": [], "rush": "maybe"},
            "'maybe' is not of type 'boolean'",
        ),
    ],
)
async def test_invalid_nested_input_is_rejected_before_the_call(arguments, fragment):
    toolkit = toolkit_with(place_order)
    before = len(order_calls.calls)
    response = await run_call(toolkit, "place_order", arguments)
    assert response.state == ToolResultState.ERROR
    assert response.text().startswith("Input validation failed for tool 'place_order'")
    assert fragment in response.text()
    assert len(order_calls.calls) == before


def uses_later_classes(first: Employee, team: list[Team] | None = None) -> None:
    """Uses classes defined below (resolved at schema time)."""


@attrs.define
class Team:
    """A team."""

    name: str
    lead: Employee | None = None
    members: list[Employee] = attrs.field(factory=list)


@attrs.define
class Employee:
    """An employee."""

    name: str
    team: Team | None = None
    reports: list[Employee] = attrs.field(factory=list)


@dataclasses.dataclass
class Chain:
    """A linked chain."""

    value: int
    next: Chain | None = None


def test_mutually_recursive_forward_referenced_classes():
    schema = function_input_schema(uses_later_classes)
    defs = schema["$defs"]
    assert schema["properties"]["first"] == {"$ref": "#/$defs/Employee"}
    assert defs["Employee"]["properties"]["team"] == {
        "anyOf": [{"$ref": "#/$defs/Team"}, {"type": "null"}],
        "default": None,
    }
    assert defs["Employee"]["properties"]["reports"] == {
        "items": {"$ref": "#/$defs/Employee"},
        "type": "array",
    }
    assert defs["Team"]["properties"]["lead"]["anyOf"][0] == {"$ref": "#/$defs/Employee"}
    validator = check_schema(schema)
    deep = {"name": "a", "team": {"name": "t", "lead": {"name": "b", "reports": [{"name": "c"}]}}}
    assert validator.is_valid({"first": deep})
    assert not validator.is_valid({"first": {"name": "a", "team": {"name": 5}}})
    assert not validator.is_valid({"first": {"name": "a", "reports": [{"team": None}]}})


recursion_calls = Recorder()


def recurse(first: Employee, chain: Chain) -> str:
    """Recursive arguments."""
    return recursion_calls.record(first=first, chain=chain)


async def test_recursive_arguments_arrive_as_nested_instances():
    toolkit = toolkit_with(recurse)
    arguments = {
        "first": {"name": "a", "reports": [{"name": "b", "team": {"name": "t"}}]},
        "chain": {"value": 1, "next": {"value": 2, "next": {"value": 3}}},
    }
    response = await run_call(toolkit, "recurse", arguments)
    assert response.state == ToolResultState.SUCCESS, response.text()
    received = recursion_calls.calls[-1]
    assert received["first"] == Employee("a", reports=[Employee("b", team=Team("t"))])
    assert received["chain"] == Chain(1, Chain(2, Chain(3)))


def _make_point_classes() -> tuple[type, type]:
    @attrs.define
    class Point:
        x: int

    first = Point

    @attrs.define
    class Point:  # type: ignore[no-redef]  # same name, different class
        name: str

    return first, Point


PointA, PointB = _make_point_classes()


def test_same_named_classes_get_distinct_definitions():
    def place(a, b, c):  # type: ignore[no-untyped-def]
        """Place."""

    place.__annotations__ = {"a": PointA, "b": PointB, "c": list[PointB]}
    schema = function_input_schema(place)
    assert schema["properties"]["a"] == {"$ref": "#/$defs/Point"}
    other = schema["properties"]["b"]["$ref"]
    assert other != "#/$defs/Point"
    assert schema["properties"]["c"] == {"items": {"$ref": other}, "type": "array"}
    assert len(schema["$defs"]) == 2
    validator = check_schema(schema)
    assert validator.is_valid({"a": {"x": 1}, "b": {"name": "n"}, "c": [{"name": "m"}]})
    assert not validator.is_valid({"a": {"x": 1}, "b": {"x": 1}, "c": []})


def unresolvable(key: str, cache: NoSuchCache | None = None) -> str:  # noqa: F821
    """An annotation that names nothing."""
    return key


async def test_unresolvable_annotation_does_not_break_registration_or_calls():
    toolkit = toolkit_with(unresolvable)
    schema = toolkit.get_tool("unresolvable").input_schema
    assert list(schema["properties"]) == ["key", "cache"]
    assert schema["required"] == ["key"]
    assert schema["properties"]["cache"] == {"default": None}
    check_schema(schema)
    response = await run_call(toolkit, "unresolvable", {"key": "k", "cache": {"any": "thing"}})
    assert response.text() == "k"


# -- round trip: enums, unions, annotated ------------------------------------------------------


typed_calls = Recorder()


def typed_values(
    choice: StrChoice,
    number: IntChoice,
    mixed: MixedChoice,
    mode: Mode,
    choices: list[StrChoice],
    by_name: dict[str, IntChoice],
    either: int | StrChoice,
    maybe: Customer | None,
    noted: Annotated[Address, "Where."],
    pair: tuple[Address, int],
    coupon_or_address: Coupon | Address | None = None,
    fallback: Mode = Mode.SLOW,
) -> str:
    """Typed values."""
    return typed_calls.record(
        choice=choice,
        number=number,
        mixed=mixed,
        mode=mode,
        choices=choices,
        by_name=by_name,
        either=either,
        maybe=maybe,
        noted=noted,
        pair=pair,
        coupon_or_address=coupon_or_address,
        fallback=fallback,
    )


async def test_enums_unions_and_annotated_classes_arrive_typed():
    toolkit = toolkit_with(typed_values)
    schema = toolkit.get_tool("typed_values").input_schema
    assert schema["properties"]["noted"] == {"$ref": "#/$defs/Address", "description": "Where."}
    arguments = {
        "choice": "b",
        "number": 1,
        "mixed": "text",
        "mode": "fast",
        "choices": ["a", "b", "a"],
        "by_name": {"x": 2},
        "either": "a",
        "maybe": None,
        "noted": {"street": "s"},
        "pair": [{"street": "p"}, 3],
        "coupon_or_address": {"code": "C"},
    }
    check_schema(schema).validate(arguments)
    response = await run_call(toolkit, "typed_values", arguments)
    assert response.state == ToolResultState.SUCCESS, response.text()
    received = typed_calls.calls[-1]
    assert received["choice"] is StrChoice.B
    assert received["number"] is IntChoice.ONE
    assert received["mixed"] is MixedChoice.TEXT
    assert received["mode"] is Mode.FAST
    assert received["choices"] == [StrChoice.A, StrChoice.B, StrChoice.A]
    assert received["by_name"] == {"x": IntChoice.TWO}
    assert received["either"] is StrChoice.A
    assert received["maybe"] is None
    assert received["noted"] == Address("s")
    assert received["pair"] == (Address("p"), 3)
    assert received["coupon_or_address"] == Coupon("C")
    assert received["fallback"] is Mode.SLOW

    arguments.update(either=7, coupon_or_address={"street": "z"}, number=2)
    response = await run_call(toolkit, "typed_values", arguments)
    assert response.state == ToolResultState.SUCCESS, response.text()
    received = typed_calls.calls[-1]
    assert received["either"] == 7
    assert received["number"] is IntChoice.TWO
    assert received["coupon_or_address"] == Address("z")


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({"choice": "c"}, "'c' is not one of ['a', 'b']"),
        ({"number": "one"}, "'one' is not one of [1, 2]"),
        ({"mode": "FAST"}, "'FAST' is not one of ['fast', 'slow']"),
        ({"choices": ["a", "z"]}, "'z' is not one of ['a', 'b']"),
        ({"pair": [{"street": "p"}]}, "is too short"),
        ({"either": 1.5}, "is not valid under any of the given schemas"),
    ],
)
async def test_values_outside_the_schema_never_reach_the_function(override, fragment):
    toolkit = toolkit_with(typed_values)
    arguments = {
        "choice": "a",
        "number": 1,
        "mixed": 1,
        "mode": "slow",
        "choices": [],
        "by_name": {},
        "either": 1,
        "maybe": None,
        "noted": {"street": "s"},
        "pair": [{"street": "p"}, 3],
        **override,
    }
    before = len(typed_calls.calls)
    response = await run_call(toolkit, "typed_values", arguments)
    assert response.state == ToolResultState.ERROR
    assert fragment in response.text()
    assert len(typed_calls.calls) == before


async def test_repaired_scalars_arrive_with_the_schema_type():
    toolkit = toolkit_with(place_order)
    arguments = {"customer": {"name": "A", "address": {"street": "s"}}, "coupons": [], "rush": 1}
    response = await run_call(toolkit, "place_order", arguments)
    assert response.state == ToolResultState.SUCCESS, response.text()
    assert order_calls.calls[-1]["rush"] is True
    toolkit = toolkit_with(typed_values)
    arguments = {
        "choice": "a",
        "number": "2",
        "mixed": 1,
        "mode": "slow",
        "choices": [],
        "by_name": {},
        "either": 1,
        "maybe": None,
        "noted": {"street": "s"},
        "pair": [{"street": "p"}, 3],
    }
    response = await run_call(toolkit, "typed_values", arguments)
    assert response.state == ToolResultState.SUCCESS, response.text()
    assert typed_calls.calls[-1]["number"] is IntChoice.TWO


async def test_schema_guided_repair_with_refs_and_defaults():
    toolkit = toolkit_with(place_order)
    truncated = '{"customer": {"name": "A", "address": {"street": "s"}}, "coupons": [{"code": "X"'
    _, arguments = toolkit.validate_call(ToolCallBlock(id="c", name="place_order", input=truncated))
    check_schema(toolkit.get_tool("place_order").input_schema).validate(arguments)
    response = await run_call(toolkit, "place_order", truncated)
    assert response.state == ToolResultState.SUCCESS, response.text()
    received = order_calls.calls[-1]
    assert received["customer"].address == Address("s")
    assert received["coupons"][0].code == "X"


# -- callables that are not plain functions ----------------------------------------------------


class Multiplier:
    """Multiply numbers.

    Args:
        x: The number.
    """

    def __call__(self, x: int, factor: int = 2) -> int:
        return x * factor

    def scaled(self, x: float, *, by: IntChoice = IntChoice.TWO) -> float:
        """Scale ``x``.

        Args:
            x: The value.
            by: The factor.
        """
        return x * by.value

    @classmethod
    def build(cls, size: int) -> str:
        """Build.

        Args:
            size: How big.
        """
        return cls.__name__ * size


async def test_callable_objects_bound_methods_and_classmethods():
    multiplier = Multiplier()
    toolkit = Toolkit()
    toolkit.register_function(multiplier, name="multiply")
    toolkit.register_function(multiplier.scaled)
    toolkit.register_function(Multiplier.build)
    schemas = {s["function"]["name"]: s["function"] for s in toolkit.get_tool_schemas()}
    assert schemas["multiply"]["description"] == "Multiply numbers."
    assert schemas["multiply"]["parameters"] == {
        "type": "object",
        "properties": {
            "x": {"type": "integer", "description": "The number."},
            "factor": {"type": "integer", "default": 2},
        },
        "required": ["x"],
    }
    assert schemas["scaled"]["parameters"]["properties"] == {
        "x": {"type": "number", "description": "The value."},
        "by": {"$ref": "#/$defs/IntChoice", "description": "The factor.", "default": 2},
    }
    assert schemas["build"]["parameters"]["properties"] == {
        "size": {"type": "integer", "description": "How big."}
    }
    assert (await run_call(toolkit, "multiply", {"x": 4})).text() == "8"
    assert (await run_call(toolkit, "scaled", {"x": 1.5, "by": 1})).text() == "1.5"
    assert (await run_call(toolkit, "build", {"size": 2})).text() == "MultiplierMultiplier"


# -- functools.partial ------------------------------------------------------------------------


partial_calls = Recorder()


def ship(address: Address, choice: StrChoice, note: str = "", *, fast: bool = False) -> str:
    """Ship a parcel.

    Args:
        address: Where to.
        note: A note.
    """
    return partial_calls.record(address=address, choice=choice, note=note, fast=fast)


async def test_partials_keep_descriptions_bound_defaults_and_structuring():
    toolkit = toolkit_with(functools.partial(ship, note="fragile", fast=True))
    schema = toolkit.get_tool("ship").input_schema
    assert schema["properties"]["address"] == {
        "$ref": "#/$defs/Address",
        "description": "Where to.",
    }
    assert schema["properties"]["note"] == {
        "type": "string",
        "description": "A note.",
        "default": "fragile",
    }
    assert schema["properties"]["fast"] == {"type": "boolean", "default": True}
    assert schema["required"] == ["address", "choice"]
    response = await run_call(toolkit, "ship", {"address": {"street": "s"}, "choice": "b"})
    assert response.state == ToolResultState.SUCCESS, response.text()
    assert partial_calls.calls[-1] == {
        "address": Address("s"),
        "choice": StrChoice.B,
        "note": "fragile",
        "fast": True,
    }
    positional = function_input_schema(functools.partial(ship, Address("x")))
    assert list(positional["properties"]) == ["choice", "note", "fast"]
    assert positional["required"] == ["choice"]


# -- pydantic models nested inside a parameter -------------------------------------------------


class Inner(pydantic.BaseModel):
    """Inner."""

    y: str


class Outer(pydantic.BaseModel):
    """Outer."""

    inner: Inner
    count: int = 1


outer_calls = Recorder()


def take_outer(outer: Outer) -> str:
    """Take an outer model."""
    return outer_calls.record(outer=outer)


async def test_nested_pydantic_model_is_resolvable_and_validated():
    toolkit = toolkit_with(take_outer)
    parameters = toolkit.get_tool_schemas()[0]["function"]["parameters"]
    assert "title" not in json.dumps(parameters)
    assert parameters["$defs"]["Outer"]["properties"]["inner"] == {"$ref": "#/$defs/Inner"}
    assert parameters["$defs"]["Inner"]["properties"] == {"y": {"type": "string"}}
    validator = check_schema(parameters)
    assert validator.is_valid({"outer": {"inner": {"y": "v"}}})
    assert not validator.is_valid({"outer": {"inner": {"y": 1}}})
    response = await run_call(toolkit, "take_outer", {"outer": {"inner": {"y": "v"}}})
    assert response.state == ToolResultState.SUCCESS, response.text()
    assert outer_calls.calls[-1] == {"outer": Outer(inner=Inner(y="v"))}


# -- title removal on schemas that are not dicts all the way down ------------------------------


def test_remove_title_field_skips_boolean_property_schemas():
    schema = {
        "title": "T",
        "type": "object",
        "properties": {"anything": True, "nothing": False, "x": {"title": "X"}},
    }
    assert remove_title_field(schema) == {
        "type": "object",
        "properties": {"anything": True, "nothing": False, "x": {}},
    }


# -- property-based round trip: generate from the schema, call, check the types ---------------


def _json_values() -> st.SearchStrategy[Any]:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-1000, 1000)
        | st.floats(allow_nan=False, allow_infinity=False, width=32)
        | st.text(max_size=4)
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
        ),
        max_leaves=4,
    )


def from_schema(schema: Any, root: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values satisfying ``schema`` (the subset of JSON Schema that the generator emits)."""
    if schema is True or schema == {} or set(schema) <= {"description", "default"}:
        return _json_values()
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return st.deferred(lambda: from_schema(root["$defs"][name], root))
    if "anyOf" in schema:
        return st.one_of([from_schema(sub, root) for sub in schema["anyOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema["type"]
    if kind == "string":
        return st.text(max_size=6)
    if kind == "integer":
        return st.integers(-(2**40), 2**40)
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False) | st.integers(-100, 100)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        if "prefixItems" in schema:
            return st.tuples(*(from_schema(s, root) for s in schema["prefixItems"])).map(list)
        return st.lists(
            from_schema(schema.get("items", {}), root),
            max_size=3,
            unique_by=(lambda v: json.dumps(v, sort_keys=True))
            if schema.get("uniqueItems")
            else None,
        )
    assert kind == "object", schema
    if "properties" in schema:
        required = schema.get("required", [])
        optional = [name for name in schema["properties"] if name not in required]
        return st.fixed_dictionaries(
            {name: from_schema(schema["properties"][name], root) for name in required},
            optional={name: from_schema(schema["properties"][name], root) for name in optional},
        )
    values = schema.get("additionalProperties", True)
    return st.dictionaries(st.text(max_size=3), from_schema(values, root), max_size=3)


roundtrip_calls = Recorder()


def everything(
    text: str,
    count: int,
    ratio: float,
    flag: bool,
    pick: Literal["a", "b", 3],
    choice: StrChoice,
    number: IntChoice,
    mixed: MixedChoice,
    customer: Customer,
    coupons: list[Coupon],
    grid: list[dict[str, int]],
    by_name: dict[str, Address],
    levels: list[IntChoice],
    either: int | str | None,
    labels: set[str],
    anything: Any = None,
    maybe: Address | None = None,
    mode: Mode = Mode.FAST,
) -> str:
    """Everything at once."""
    return roundtrip_calls.record(
        text=text,
        count=count,
        ratio=ratio,
        flag=flag,
        pick=pick,
        choice=choice,
        number=number,
        mixed=mixed,
        customer=customer,
        coupons=coupons,
        grid=grid,
        by_name=by_name,
        levels=levels,
        either=either,
        labels=labels,
        anything=anything,
        maybe=maybe,
        mode=mode,
    )


EVERYTHING_TOOLKIT = toolkit_with(everything)
EVERYTHING_SCHEMA = EVERYTHING_TOOLKIT.get_tool("everything").input_schema


def _address(data: dict[str, Any]) -> Address:
    return Address(data["street"], data.get("country", "JP"), data.get("lines", []))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments=from_schema(EVERYTHING_SCHEMA, EVERYTHING_SCHEMA))
def test_generated_arguments_are_accepted_and_arrive_typed(arguments):
    check_schema(EVERYTHING_SCHEMA).validate(arguments)
    before = len(roundtrip_calls.calls)
    response = trio.run(run_call, EVERYTHING_TOOLKIT, "everything", arguments)
    assert response.state == ToolResultState.SUCCESS, response.text()
    assert len(roundtrip_calls.calls) == before + 1
    got = roundtrip_calls.calls[-1]
    for name in ("text", "count", "ratio", "flag", "pick", "grid", "either", "anything"):
        assert got[name] == arguments.get(name), name
    assert type(got["flag"]) is bool
    assert got["choice"] is StrChoice(arguments["choice"])
    assert got["number"] is IntChoice(arguments["number"])
    assert got["mixed"] is MixedChoice(arguments["mixed"])
    assert got["levels"] == [IntChoice(v) for v in arguments["levels"]]
    assert all(isinstance(level, IntChoice) for level in got["levels"])
    assert got["mode"] is Mode(arguments.get("mode", "fast"))
    assert got["coupons"] == [
        Coupon(c["code"], c.get("percent", 10.0)) for c in arguments["coupons"]
    ]
    assert got["by_name"] == {k: _address(v) for k, v in arguments["by_name"].items()}
    maybe = arguments.get("maybe")
    assert got["maybe"] == (None if maybe is None else _address(maybe))
    assert sorted(got["labels"]) == sorted(arguments["labels"])
    customer = arguments["customer"]
    assert isinstance(got["customer"], Customer)
    assert got["customer"].name == customer["name"]
    assert got["customer"].address == _address(customer["address"])
    assert got["customer"].tier is IntChoice(customer.get("tier", 1))
    billing = customer.get("billing")
    assert got["customer"].billing == (None if billing is None else _address(billing))

"""``Glob`` and ``Grep`` as in AgentScope 2.0.11, over a real directory tree: patterns,
newest-first order, pagination, the three output modes of Grep with context, filters, case and
multiline options, and bad input as error results.  The Grep cases run on the pure-Python
search and, where ``rg`` is installed, on ripgrep too: both give the same output."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from trioagent.tool import Glob, Grep


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    files = {
        "a.py": "import os\nprint('hello')\n",
        "src/b.py": "def f():\n    return 'Hello'\n\n\nx = 1\n",
        "src/deep/c.txt": "nothing\nhello there\n",
        ".hidden/d.py": "hello = 2\n",
        ".git/e.py": "hello = 3\n",
        "bin.dat": "hello\0binary",
    }
    for i, (name, content) in enumerate(files.items()):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    return tmp_path


async def glob(**kwargs: object) -> str:
    return (await Glob().run(kwargs)).text()  # type: ignore[arg-type]


BACKENDS = ["python", *(["ripgrep"] if shutil.which("rg") else [])]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def grep(backend: str = "python", **kwargs: object) -> str:
    tool = Grep(use_ripgrep=backend == "ripgrep")
    return (await tool.run(kwargs)).text()  # type: ignore[arg-type]


async def test_glob_patterns_newest_first(tree: pathlib.Path) -> None:
    assert (await glob(pattern="**/*.py", path=str(tree))).split("\n") == [
        str(tree / ".git/e.py"),
        str(tree / ".hidden/d.py"),
        str(tree / "src/b.py"),
        str(tree / "a.py"),
    ]
    assert await glob(pattern="src/*/*.txt", path=str(tree)) == str(tree / "src/deep/c.txt")
    assert await glob(pattern="*.rs", path=str(tree)) == "No files found matching pattern: *.rs"


async def test_glob_pagination_and_bad_input(tree: pathlib.Path) -> None:
    page = await glob(pattern="**/*", path=str(tree), head_limit=2, offset=1)
    lines = page.split("\n")
    assert len(lines[:2]) == 2
    assert page.endswith("[Showing results with pagination = limit: 2, offset: 1]")
    assert (
        await glob(pattern="*", path=str(tree / "nope")) == f"Directory not found: {tree / 'nope'}"
    )
    assert (await Glob().run({"pattern": "*", "offset": -1})).text() == (
        "Error: offset must be non-negative."
    )


async def test_glob_rules_and_suggestions(tree: pathlib.Path) -> None:
    tool = Glob()
    assert await tool.match_rule("/src/**", {"pattern": "*.py", "path": "/src/x"}) is True
    assert await tool.match_rule("*.py", {"pattern": "*.py"}) is True
    assert await tool.match_rule("/etc/**", {"pattern": "*.py", "path": "/src"}) is False
    (rule,) = await tool.generate_suggestions({"pattern": "*", "path": str(tree)})
    assert rule.rule_content == f"{tree}/**"


async def test_grep_files_with_matches(tree: pathlib.Path, backend: str) -> None:
    assert (await grep(backend, pattern="hello", path=str(tree))).split("\n") == [
        str(tree / ".hidden/d.py"),
        str(tree / "a.py"),
        str(tree / "src/deep/c.txt"),
    ]
    assert (await grep(backend, pattern="hello", path=str(tree), i=True)).count("\n") == 3


async def test_grep_content_with_context_and_count(tree: pathlib.Path, backend: str) -> None:
    b = tree / "src/b.py"
    assert await grep(
        backend, pattern="return", path=str(tree), output_mode="content", **{"-B": 1}
    ) == (f"{b}-1-def f():\n{b}:2:    return 'Hello'")
    assert await grep(
        backend, pattern="Hello|x =", path=str(b), output_mode="content", n=False
    ) == ("    return 'Hello'\nx = 1")
    assert await grep(
        backend, pattern="Hello|x =", path=str(b), output_mode="content", context=0
    ) == ("2:    return 'Hello'\n5:x = 1")
    assert await grep(
        backend, pattern="def|x =", path=str(b), output_mode="content", **{"-A": 1}
    ) == ("1:def f():\n2-    return 'Hello'\n--\n5:x = 1")
    assert await grep(backend, pattern="o", path=str(tree / "src"), output_mode="count") == (
        f"{b}:1\n{tree / 'src/deep/c.txt'}:2"
    )


async def test_grep_filters_and_multiline(tree: pathlib.Path, backend: str) -> None:
    assert await grep(backend, pattern="hello", path=str(tree), glob="*.txt") == str(
        tree / "src/deep/c.txt"
    )
    assert await grep(backend, pattern="hello", path=str(tree), glob="*.{py,txt}") == "\n".join(
        str(tree / p) for p in (".hidden/d.py", "a.py", "src/deep/c.txt")
    )
    assert await grep(backend, pattern="hello", path=str(tree), type="py") == "\n".join(
        str(tree / p) for p in (".hidden/d.py", "a.py")
    )
    assert await grep(backend, pattern=r"f\(\):.*Hello", path=str(tree), multiline=True) == str(
        tree / "src/b.py"
    )
    assert await grep(backend, pattern=r"f\(\):.*Hello", path=str(tree)) == (
        "No matches found for pattern: f\\(\\):.*Hello"
    )


async def test_grep_bad_input(tree: pathlib.Path) -> None:
    assert await grep(pattern="(", path=str(tree)) == (
        "Error: missing ), unterminated subpattern at position 0"
    )
    assert await grep(pattern="x", path=str(tree / "nope")) == f"Path not found: {tree / 'nope'}"
    assert (await grep(pattern="x", path=str(tree), type="cobol")).startswith(
        "Unknown file type 'cobol'"
    )
    assert await grep(pattern="x", head_limit=-1) == "Error: head_limit must be non-negative."


async def test_grep_rules() -> None:
    tool = Grep(use_ripgrep=False)
    assert await tool.match_rule("/src/**", {"pattern": "x", "path": "/src/a"}) is True
    assert await tool.match_rule(None, {"pattern": "x"}) is True
    assert await tool.match_rule("/src/**", {"pattern": "x", "path": "/etc"}) is False


async def test_a_ripgrep_error_is_an_error_result(tree: pathlib.Path, backend: str) -> None:
    response = await Grep(use_ripgrep=backend == "ripgrep").run({"pattern": "(", "path": str(tree)})
    assert response.state == "error"
    expected = "ripgrep error (code 2): " if backend == "ripgrep" else "Error: missing )"
    assert response.text().startswith(expected)


def test_ripgrep_is_required_only_when_asked() -> None:
    if shutil.which("rg") is None:
        with pytest.raises(ValueError, match="no 'rg' executable"):
            Grep(use_ripgrep=True)
    else:
        Grep(use_ripgrep=True)

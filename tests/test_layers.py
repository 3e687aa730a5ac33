"""The shape of the code base: imports flow one way, modules stay small, typing stays honest.

The layer order itself is the ``import-linter`` contract in ``pyproject.toml`` (``lint-imports``,
run by CI); these tests check what that contract cannot express: no import cycle between any two
modules (counting imports under ``TYPE_CHECKING`` and inside functions, which a cycle must not
hide behind), no module reading another package's private modules, no module over 600 lines,
explicit ``Any`` kept rare, and no document pointing at files outside the repository.
"""

from __future__ import annotations

import io
import pathlib
import re
import tokenize

import grimp
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "trioagent"
MAX_MODULE_LINES = 600
MAX_ANY_PER_1000_LINES = 15


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("trioagent", include_external_packages=False, cache_dir=None)


def _strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's algorithm over every direct import between trioagent's modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return components


def test_no_import_cycle_between_modules(graph: grimp.ImportGraph) -> None:
    assert _strongly_connected(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    fake = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        fake.add_module(module)
    fake.add_import(importer="pkg.a", imported="pkg.b")
    fake.add_import(importer="pkg.b", imported="pkg.c")
    fake.add_import(importer="pkg.c", imported="pkg.a")
    assert _strongly_connected(fake) == [["pkg.a", "pkg.b", "pkg.c"]]


def _private_reach(importer: str, imported: str) -> bool:
    """Whether ``importer`` reads a private module of a package it is not part of."""
    parts = imported.split(".")
    if len(parts) < 3:  # trioagent.x: a package or a top-level module, public or shared
        return False
    owner = ".".join(parts[:2])
    if importer == owner or importer.startswith(owner + "."):
        return False
    return any(part.startswith("_") for part in parts[2:])


def test_no_module_reads_another_packages_private_modules(graph: grimp.ImportGraph) -> None:
    reaches = sorted(
        f"{importer} -> {imported}"
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if _private_reach(importer, imported)
    )
    assert reaches == []


def test_private_reach_rule() -> None:
    assert _private_reach("trioagent.event._events", "trioagent.message._blocks")
    assert not _private_reach("trioagent.message._msg", "trioagent.message._blocks")
    assert not _private_reach("trioagent.event._events", "trioagent._core.ids")
    assert not _private_reach("trioagent.tool._toolkit", "trioagent._json_repair")


def _modules() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_over_600_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in _modules()
        if (lines := path.read_text().count("\n")) > MAX_MODULE_LINES
    }
    assert long == {}


def count_explicit_any(source: str) -> int:
    """``Any`` used as a name outside import statements."""
    count = 0
    in_import = False
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if (
            token.type == tokenize.NAME
            and token.string in ("import", "from")
            and token.start[1] == 0
        ):
            in_import = True
        elif token.type == tokenize.NEWLINE:
            in_import = False
        elif token.type == tokenize.NAME and token.string == "Any" and not in_import:
            count += 1
    return count


def test_count_explicit_any() -> None:
    source = "from typing import Any\n\ndef f(x: Any) -> dict[str, Any]:\n    '''Any'''\n"
    assert count_explicit_any(source) == 2


def test_explicit_any_is_rare() -> None:
    sources = [path.read_text() for path in _modules()]
    lines = sum(source.count("\n") for source in sources)
    uses = sum(count_explicit_any(source) for source in sources)
    assert uses * 1000 / lines <= MAX_ANY_PER_1000_LINES, f"{uses} Any in {lines} lines"


_OUTSIDE_DOCS = re.compile(
    r"DESIGN\.md|reference/|(?:agent|model|tools_middleware|trio_design|peers)\.md|"
    r"golden_formatters\.md|shared/|\bthe reference\b|\breference(?:'s)? §|/work/(?:shared|tools|main|wt|agentscope)"
)
#: A relative link of a Markdown document: ``[text](path)``, not a URL or an anchor.
_MD_LINK = re.compile(r"\[[^\]]*\]\((?!https?://|mailto:|#)([^)\s]+)\)")
_SKIPPED_DIRS = {
    ".git",
    "__pycache__",
    "build",
    "dist",
    ".mypy_cache",
    ".ruff_cache",
    ".venv-agentscope",  # the git-ignored venv of the peer benchmark
}


def _repository_files() -> list[pathlib.Path]:
    """Every text file of the repository a user gets: sources, tests, docs, examples,
    benchmarks, the build and CI files (not virtual environments or caches)."""
    top = [ROOT / name for name in ("README.md", "CHANGELOG.md", "pyproject.toml", "justfile")]
    top += sorted(ROOT.glob("*.py")) + sorted(ROOT.joinpath(".ci").glob("*"))
    found = [path for path in top if path.is_file()]
    for folder in ("trioagent", "docs", "examples", "benchmarks", "tests"):
        for path in sorted(ROOT.joinpath(folder).rglob("*")):
            text = path.is_file() and path.suffix in {".py", ".md", ".jsonl", ".toml", ".txt"}
            if text and not _SKIPPED_DIRS & set(path.relative_to(ROOT).parts):
                found.append(path)
    return [path for path in found if path.name != "test_layers.py"]


def test_nothing_points_at_files_outside_the_repository() -> None:
    files = _repository_files()
    assert {"CHANGELOG.md", "pyproject.toml", "run", "hatch_build.py", "_common.py"} <= {
        path.name for path in files
    }
    citing = sorted(
        f"{path.relative_to(ROOT)}:{number}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _OUTSIDE_DOCS.search(line)
    )
    assert citing == []


def test_every_relative_link_of_the_documents_resolves_inside_the_repository() -> None:
    broken = []
    for path in (p for p in _repository_files() if p.suffix == ".md"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for target in _MD_LINK.findall(line):
                resolved = (path.parent / target.split("#", 1)[0]).resolve()
                if not resolved.is_relative_to(ROOT) or not resolved.exists():
                    broken.append(f"{path.relative_to(ROOT)}:{number}: {target}")
    assert broken == []


def test_the_link_check_sees_a_broken_link() -> None:
    assert _MD_LINK.findall("see [the design](../shared/DESIGN.md) and [x](https://a.b/c)") == [
        "../shared/DESIGN.md"
    ]
    assert _OUTSIDE_DOCS.search("as the reference says")
    assert _OUTSIDE_DOCS.search("reference §7.2")

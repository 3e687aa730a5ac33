"""No async generators anywhere in ``trioagent/``.

Streaming is done with emit callbacks and trio memory channels; an async generator's
``finally`` may run outside the task and cancel scope that owns it, which breaks the
exactly-once end event under cancellation.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import trioagent

PACKAGE = Path(trioagent.__file__).resolve().parent


def _own_nodes(func: ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The nodes of ``func``'s own body, not descending into nested functions or classes.

    A nested scope's decorators, default values and base classes are evaluated by ``func``
    itself, so they are included; the nested body is not.
    """
    stack: list[ast.AST] = list(func.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            if not isinstance(node, ast.Lambda):
                stack.extend(node.decorator_list)
            stack.extend(node.args.defaults)
            stack.extend(d for d in node.args.kw_defaults if d is not None)
        elif isinstance(node, ast.ClassDef):
            stack.extend(node.decorator_list + node.bases)
        else:
            stack.extend(ast.iter_child_nodes(node))


def async_generators(source: str, filename: str = "<src>") -> list[str]:
    """``file:line name`` of each ``async def`` whose own body has ``yield``/``yield from``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.AsyncFunctionDef) and any(
            isinstance(inner, ast.Yield | ast.YieldFrom) for inner in _own_nodes(node)
        ):
            found.append(f"{filename}:{node.lineno} {node.name}")
    return found


def package_sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_package_has_no_async_generators() -> None:
    files = package_sources()
    assert len(files) >= 5, f"found too few files under {PACKAGE}"
    offenders = [
        hit for path in files for hit in async_generators(path.read_text("utf-8"), str(path))
    ]
    assert offenders == [], "async generators are not allowed in trioagent/"


@pytest.mark.parametrize(
    "source",
    [
        "async def f():\n    yield 1\n",
        "async def f():\n    x = yield\n",
        "async def f():\n    for i in range(3):\n        if i:\n            yield i\n",
        "async def f():\n    try:\n        pass\n    finally:\n        yield\n",
        "class C:\n    async def m(self):\n        async with x:\n            yield self\n",
        "def outer():\n    async def inner():\n        yield 1\n    return inner\n",
        "async def f():\n    def g():\n        pass\n    yield g\n",
        "async def f():\n    @(yield)\n    def g():\n        pass\n",
        "async def f():\n    def g(x=(yield)):\n        pass\n",
    ],
)
def test_checker_catches_async_generators(source: str) -> None:
    assert len(async_generators(source)) == 1


@pytest.mark.parametrize(
    "source",
    [
        "async def f():\n    return 1\n",
        "def f():\n    yield 1\n",
        "async def f():\n    def g():\n        yield 1\n    return g\n",
        "async def f():\n    class C:\n        def it(self):\n            yield from ()\n",
        "async def f():\n    g = lambda: (yield)\n",
        "async def f():\n    def g(x=1):\n        yield x\n    class C(object):\n        pass\n",
        "async def f():\n    await x\n    return [i async for i in y]\n",
    ],
)
def test_checker_ignores_non_generators(source: str) -> None:
    assert async_generators(source) == []


def test_checker_reports_location() -> None:
    hits = async_generators("x = 1\n\nasync def stream():\n    yield 1\n", "mod.py")
    assert hits == ["mod.py:3 stream"]

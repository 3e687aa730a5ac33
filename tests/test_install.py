"""What an install brings: a core that imports without any extra, one HTTP stack, a clear
``MissingExtraError`` for a feature whose extra is missing, and package facades that import
their submodules only when a name is used.

Each check runs in a fresh interpreter in which the optional packages are blocked by a
meta-path finder, as if they were not installed.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import subprocess
import sys
import textwrap

import pytest

#: The packages of the extras (mcp, pdf, redis, espeak), and the HTTP stack trioagent left.
BLOCKED = ("mcp", "pypdf", "coredis", "espeakng_loader", "httpx", "httpcore")

_BLOCKER = f"""
import importlib.abc, sys

class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Blocker())
"""

#: Every public subpackage that needs no extra.
CORE_PACKAGES = [
    "agent",
    "classifier",
    "cli",
    "credential",
    "event",
    "exception",
    "formatter",
    "memory",
    "message",
    "middleware",
    "model",
    "permission",
    "pipeline",
    "rag",
    "serialization",
    "session",
    "skill",
    "testing",
    "tool",
    "tts",
    "types",
]

#: Facades whose names are imported on first use (PEP 562).
LAZY_FACADES = [
    "trioagent",
    "trioagent.model",
    "trioagent.tool",
    "trioagent.formatter",
    "trioagent.middleware",
]


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCKER + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_core_imports_without_any_extra_and_without_httpx() -> None:
    done = run_python(
        f"""
        import importlib, sys
        for name in {CORE_PACKAGES!r}:
            module = importlib.import_module("trioagent." + name)
            for public in getattr(module, "__all__", []):
                getattr(module, public)
        from trioagent import Agent, TrioagentError, UserMsg
        loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({BLOCKED!r}))
        print("loaded:", loaded)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "loaded: []"


@pytest.mark.parametrize(
    ("package", "extra", "missing"),
    [("mcp", "mcp", "mcp"), ("web", "web", "ag_ui")],
)
def test_a_package_without_its_extra_names_the_install_command(
    package: str, extra: str, missing: str
) -> None:
    done = run_python(
        f"""
        import sys
        sys.modules[{missing!r}] = None  # as if the extra were not installed
        from trioagent.exception import MissingExtraError
        try:
            import trioagent.{package}
        except MissingExtraError as exc:
            assert isinstance(exc, ImportError)
            assert (exc.name, exc.extra) == ({missing!r}, {extra!r})
            print(exc)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"trioagent.{package} needs the {extra!r} extra: pip install 'trioagent[{extra}]'"
    )


def test_importing_the_agent_leaves_the_other_subpackages_unloaded() -> None:
    done = run_python(
        """
        import sys
        from trioagent import Agent
        unneeded = ("trioagent.middleware", "trioagent.model._openai", "trioagent.model._anthropic",
                    "trioagent.model._gemini", "trioagent.model._registry", "trioagent.formatter._openai",
                    "trioagent.tool._builtin", "trioagent.rag", "trioagent.tts", "trioagent.classifier",
                    "trioagent.mcp", "trioagent.session", "trioagent.memory", "opentelemetry")
        print(sorted(m for m in sys.modules if m.startswith(unneeded)))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("facade", LAZY_FACADES)
def test_every_lazy_name_resolves_to_its_definition(facade: str) -> None:
    module = importlib.import_module(facade)
    assert set(module.__all__) <= set(dir(module))
    for name in module.__all__:
        value = getattr(module, name)
        assert value is not None
        assert value is getattr(module, name)  # cached after the first read
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
        getattr(module, "NoSuchName")  # noqa: B009


@pytest.mark.parametrize("facade", LAZY_FACADES)
def test_type_checkers_see_imports_not_a_module_getattr(facade: str) -> None:
    """The lazy ``__getattr__`` is defined only under ``if not TYPE_CHECKING:``: a module
    ``__getattr__`` that mypy sees makes every misspelt name of the package an ``Any``."""
    source = importlib.import_module(facade).__file__
    assert source is not None
    tree = ast.parse(pathlib.Path(source).read_text())
    hidden = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "not TYPE_CHECKING"
    ]
    visible = [
        node
        for node in tree.body
        if "__getattr__" in ast.unparse(node) and not isinstance(node, ast.If)
    ]
    assert len(hidden) == 1
    assert "__getattr__" in ast.unparse(hidden[0])
    assert not visible

"""The example suite, end to end: every ``examples/NN_*.py`` runs in a fresh interpreter against
the embedded loopback server and must exit 0 after printing its ``ok:`` lines.

Each example checks its own outcome with ``check(...)`` (a cancelled reply ends cleanly, with
exactly one end event), so a failing example here means the library broke the promise in a real scenario (real sockets, real SSE).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("[0-9][0-9]_*.py"))
ROOT = EXAMPLES_DIR.parent
TIMEOUT = 60.0  # seconds; each example takes about one


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TRIOAGENT_MODEL", None)  # always the embedded server here
    env["PYTHONUNBUFFERED"] = "1"
    return env


def test_the_suite_has_the_numbered_examples() -> None:
    numbers = {p.name[:2] for p in EXAMPLES}
    assert {"01", "02", "03", "04", "05", "06", "08", "09", "11", "12", "14", "17"} <= numbers


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example(path: Path) -> None:
    done = subprocess.run(
        [sys.executable, path.name],
        cwd=EXAMPLES_DIR,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=_env(),
        check=False,
    )
    report = f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, report
    oks = [line for line in done.stdout.splitlines() if line.startswith("ok: ")]
    assert len(oks) >= 3, report
    assert "FAILED" not in done.stdout + done.stderr, report
    assert "Traceback" not in done.stderr, report


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip install .`` would install, built from this checkout."""
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("trioagent-*.whl")
    return built


def test_the_wheel_ships_the_example_suite_and_py_typed(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in [*EXAMPLES, EXAMPLES_DIR / "_common.py"]:
        assert f"trioagent/examples/{path.name}" in names
    assert "trioagent/py.typed" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith(("tests/", "examples/", "benchmarks/"))]


def test_the_wheels_metadata(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    fields = Parser().parsestr(archive.read(metadata).decode())
    assert fields["License-Expression"] == "Apache-2.0"
    classifiers = fields.get_all("Classifier") or []
    assert {"Framework :: Trio", "Typing :: Typed"} <= set(classifiers)
    assert not [c for c in classifiers if c.startswith("License ::")]  # the SPDX field says it
    assert {u.split(",")[0] for u in fields.get_all("Project-URL") or []} >= {
        "Homepage",
        "Documentation",
        "Source",
        "Changelog",
    }
    import trioagent

    assert fields["Version"] == trioagent.__version__


def test_the_installed_wheel_runs_its_own_suite_from_any_directory(
    wheel: Path, tmp_path: Path
) -> None:
    """``pip install .`` then ``trioagent examples`` in a directory without examples/ (the
    wheel's files come first on the path; its dependencies are this environment's)."""
    site = tmp_path / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--quiet",
            "--target",
            str(site),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**_env(), "PYTHONPATH": str(site)}
    env.pop("TRIOAGENT_EXAMPLES", None)

    def python(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )

    listed = python("-m", "trioagent", "examples", "--list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == [p.stem for p in EXAMPLES]
    done = python("-m", "trioagent", "examples", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\[1/1\] ok   02_deadline", done.stdout), done.stdout
    where = python("-c", "import trioagent; print(trioagent.__file__)")
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr

"""The documentation's programs run: every ```python block of README.md and docs/*.md that is
a whole program (it calls ``trio.run(``) is executed in a fresh interpreter and must exit 0.

Blocks that need a real provider (they mention ``OPENAI_API_KEY``) are only compiled.  The
README's two set-up commands are checked verbatim, and the complete example of docs/testing.md
also runs as the pytest-trio tests it says it is.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
TESTING_DOC = ROOT / "docs" / "testing.md"


def _programs() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        for index, code in enumerate(BLOCK.findall(path.read_text())):
            if "trio.run(" in code:
                found.append((f"{path.relative_to(ROOT)}#{index}", code))
    return found


PROGRAMS = _programs()


def test_every_doc_exists() -> None:
    names = {p.name for p in DOCS}
    assert {
        "README.md",
        "middleware.md",
        "providers.md",
        "testing.md",
        "migration.md",
        "sessions.md",
    } <= names
    assert len(PROGRAMS) >= 5


def test_readme_keeps_the_setup_commands_verbatim() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e '.[examples]' && python -m trioagent examples" in readme
    assert "pip install -e '.[dev]' && python -m pytest" in readme


@pytest.mark.parametrize(("where", "code"), PROGRAMS, ids=[w for w, _ in PROGRAMS])
def test_doc_program_runs(where: str, code: str, tmp_path: Path) -> None:
    compile(code, where, "exec")
    if "OPENAI_API_KEY" in code:
        return  # needs a real provider: compiled only
    script = tmp_path / "snippet.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "TRIOAGENT_MODEL"}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, f"{where}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"


def _readme_quickstart() -> str:
    section = (ROOT / "README.md").read_text().split("## Quickstart", 1)[1]
    return BLOCK.findall(section)[0]


def test_the_readme_quickstart_passes_mypy_strict_outside_the_checkout(tmp_path: Path) -> None:
    """After the README's install, an editor or mypy sees the package: the quickstart, saved
    as a file in a directory of its own, type-checks under ``--strict``."""
    script = tmp_path / "quickstart.py"
    script.write_text(_readme_quickstart())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(tmp_path / "cache"),
            "quickstart.py",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k not in {"MYPYPATH", "PYTHONPATH"}},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found in 1 source file" in done.stdout


def _testing_doc_example() -> str:
    text = TESTING_DOC.read_text()
    section = text.split("## A complete example", 1)[1]
    (code,) = BLOCK.findall(section)[:1]
    return code


async def test_the_docs_complete_example_runs_as_pytest_trio_tests(autojump_clock):
    """docs/testing.md: 'the same functions work as pytest-trio tests'."""
    code = _testing_doc_example()
    assert code.rstrip().endswith(
        "trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))"
    )
    namespace: dict[str, Any] = {"__name__": "doc_example"}
    exec(compile(code.rstrip().rsplit("\n", 1)[0], "testing.md", "exec"), namespace)
    start = trio.current_time()
    await namespace["test_answer"]()
    assert trio.current_time() - start == pytest.approx(2.0)  # the tool's sleep, on the clock
    await namespace["test_cancellation_sweep"]()


def test_the_error_table_matches_the_exceptions() -> None:
    """docs/errors.md: each model-failure row's exception exists and reports the
    ``ErrorInfo.type`` the row gives."""
    import trioagent.exception as exc_module

    text = (ROOT / "docs" / "errors.md").read_text()
    rows = re.findall(r"^\| [^|]+ \| `(Model\w+)`[^|]* \| `(\w+)` \|", text, re.M)
    assert len(rows) >= 15
    for name, error_type in rows:
        cls = getattr(exc_module, name)
        assert cls.error_type == error_type, (name, error_type)

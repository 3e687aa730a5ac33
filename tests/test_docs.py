"""The documentation's programs run as written: every ```python block of README.md and
docs/*.md is a whole program — run in a fresh interpreter against the embedded server
(``OPENAI_BASE_URL`` points at it, so a block written for OpenAI runs offline), exiting 0 with
nothing on stderr — unless the line before it marks it ``<!-- fragment -->`` (an excerpt that
cannot run alone).  All the programs pass one ``mypy --strict`` run, outside the checkout as a
user's file would.  The README's set-up commands are checked verbatim, the complete example of
docs/testing.md also runs as the pytest-trio tests it says it is, and docs/logging.md names
every logger the package uses.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trioagent.testing import serve_openai_compatible

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
MARKED_BLOCK = re.compile(r"(<!-- fragment -->\n)?```python\n(.*?)```", re.S)
TESTING_DOC = ROOT / "docs" / "testing.md"
# WARNINGs some programs show on purpose, as docs/logging.md says: a reply parked for the
# caller (those programs then resume it), an MCP server that cannot be reached.
SHOWN_WARNINGS = ("The reply is parked", "listing the tools of MCP server")


def _blocks() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(programs, fragments)``, each ``(where, code)``."""
    programs, fragments = [], []
    for path in DOCS:
        for index, match in enumerate(MARKED_BLOCK.finditer(path.read_text())):
            where = f"{path.relative_to(ROOT)}#{index}"
            (fragments if match.group(1) else programs).append((where, match.group(2)))
    return programs, fragments


PROGRAMS, FRAGMENTS = _blocks()


def _environment() -> dict[str, str]:
    """The user's environment without what would change how a program runs or is checked."""
    dropped = {"TRIOAGENT_MODEL", "MYPYPATH", "PYTHONPATH", "PYTHONWARNINGS"}
    return {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("OTEL_")}


def test_every_doc_exists() -> None:
    names = {p.name for p in DOCS}
    assert {
        "README.md",
        "first-steps.md",
        "logging.md",
        "middleware.md",
        "providers.md",
        "testing.md",
        "migration.md",
        "sessions.md",
        "pipelines.md",
    } <= names
    assert len(PROGRAMS) >= 20


@pytest.mark.parametrize(("where", "code"), FRAGMENTS, ids=[w for w, _ in FRAGMENTS])
def test_a_marked_fragment_is_no_program(where: str, code: str) -> None:
    """A block that could run is never marked away from the test."""
    assert "trio.run(" not in code, f"{where} is a whole program: remove its fragment mark"


def test_readme_keeps_the_setup_commands_verbatim() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e '.[examples]' && python -m trioagent examples" in readme
    assert "pip install -e '.[dev]' && python -m pytest" in readme


@pytest.mark.parametrize(("where", "code"), PROGRAMS, ids=[w for w, _ in PROGRAMS])
async def test_doc_program_runs(
    where: str, code: str, tmp_path: Path, nursery: trio.Nursery
) -> None:
    """Exit 0 and print nothing on stderr: also no unasked log output (the retried 503 of the
    providers.md program is handled, so logged at INFO)."""
    compile(code, where, "exec")
    server = await nursery.start(serve_openai_compatible)  # echoes the last user text
    script = tmp_path / "snippet.py"
    script.write_text(code)
    env = {**_environment(), "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"}
    with trio.fail_after(120):
        done = await trio.run_process(
            [sys.executable, str(script)],
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            cwd=tmp_path,
            check=False,
        )
    output = f"{where}\nstdout:\n{done.stdout.decode()}\nstderr:\n{done.stderr.decode()}"
    assert done.returncode == 0, output
    unasked = [
        line
        for line in done.stderr.decode().splitlines()
        if not any(shown in line for shown in SHOWN_WARNINGS)
    ]
    assert unasked == [], output


async def test_every_doc_program_passes_mypy_strict_outside_the_checkout(tmp_path: Path) -> None:
    """After the README's install, mypy sees the package: every program, saved as a file in a
    directory of its own, type-checks under ``--strict`` (one mypy run for all of them)."""
    names = []
    for where, code in PROGRAMS:
        name = re.sub(r"\W", "_", where.lower().removesuffix(".md")) + ".py"
        (tmp_path / name.replace("_md_", "_")).write_text(code)
        names.append(name.replace("_md_", "_"))
    with trio.fail_after(600):
        done = await trio.run_process(
            [
                sys.executable,
                "-m",
                "mypy",
                "--strict",
                "--cache-dir",
                str(tmp_path / "cache"),
                *names,
            ],
            capture_stdout=True,
            capture_stderr=True,
            cwd=tmp_path,
            env=_environment(),
            check=False,
        )
    stdout = done.stdout.decode()
    assert done.returncode == 0, stdout + done.stderr.decode()
    assert f"Success: no issues found in {len(names)} source files" in stdout


def test_the_logging_doc_names_every_logger() -> None:
    """docs/logging.md's table has a row for each logger name the package uses."""
    used = set()
    for path in (ROOT / "trioagent").rglob("*.py"):
        used.update(re.findall(r'getLogger\("(trioagent[\w.]*)"\)', path.read_text()))
    documented = set(
        re.findall(r"^\| `(trioagent[\w.]*)` \|", (ROOT / "docs" / "logging.md").read_text(), re.M)
    )
    used.discard("trioagent")  # the CLI quietens the root of them all
    assert used <= documented, f"add a row to docs/logging.md for {sorted(used - documented)}"


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

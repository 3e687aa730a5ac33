"""The example suite, end to end: every ``examples/NN_*.py`` runs in a fresh interpreter against
the embedded loopback server and must exit 0 after printing its ``ok:`` lines.

Each example checks its own outcome with ``check(...)`` (a cancelled reply ends cleanly, with
exactly one end event), so a failing example here means the library broke the promise in a real scenario (real sockets, real SSE).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("[0-9][0-9]_*.py"))
TIMEOUT = 60.0  # seconds; each example takes about one


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TRIOAGENT_MODEL", None)  # always the embedded server here
    env["PYTHONUNBUFFERED"] = "1"
    return env


def test_the_suite_has_the_numbered_examples() -> None:
    numbers = {p.name[:2] for p in EXAMPLES}
    assert {"01", "02", "03", "04", "05", "06", "08", "09", "11", "12", "14"} <= numbers


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

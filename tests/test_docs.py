"""The documentation's programs run: every ```python block of README.md and docs/*.md that is
a whole program (it calls ``trio.run(``) is executed in a fresh interpreter and must exit 0.

Blocks that need a real provider (they mention ``OPENAI_API_KEY``) are only compiled.  The
README's two set-up commands are checked verbatim.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


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
    assert "pip install -e . && python -m trioagent examples" in readme
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

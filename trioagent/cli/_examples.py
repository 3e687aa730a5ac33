"""``trioagent examples``: run the numbered example scripts, each in a fresh interpreter.

The suite is the one that ships with the package: ``trioagent/examples/`` of an installed wheel
(package data), or ``examples/`` of the source checkout an editable install points at.  It never
runs scripts from the current directory; ``$TRIOAGENT_EXAMPLES`` names another suite explicitly.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple, TextIO

from ..exception import ModelCredentialError
from ..model import credential_from_spec

__all__ = ["bundled_examples_dir", "example_matches", "list_examples", "run_examples"]

EXAMPLE_TIMEOUT = 120.0
#: The exit code of an example that cannot run without an optional extra; it prints a line
#: ``NEEDS: pip install 'trioagent[<extra>]'`` first (``_common.require_extra``).
EXIT_NEEDS_EXTRA = 3
#: An example script: two digits, an underscore, a name (``01_interrupt_streaming.py``).
EXAMPLE_NAME = re.compile(r"^(\d\d)_\w+\.py$")
#: A line naming an exception: ``ValueError: ...``, also inside an exception group's box.
_EXCEPTION_LINE = re.compile(
    r"^[\s|+]*((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Cancelled|"
    r"Group|Warning|Failure|Timeout)(?::.*)?)$"
)


def bundled_examples_dir() -> Path | None:
    """The suite shipped with this installation: ``trioagent/examples`` (a wheel) or the source
    checkout's ``examples/`` (an editable install); ``None`` when neither is there."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "examples"
    if (installed / "_common.py").is_file():
        return installed
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "examples" / "_common.py").is_file():
        return checkout / "examples"
    return None


def find_examples_dir() -> Path | None:
    """``$TRIOAGENT_EXAMPLES`` when it is set (only that one), else the bundled suite."""
    if chosen := os.environ.get("TRIOAGENT_EXAMPLES"):
        return Path(chosen) if Path(chosen).is_dir() else None
    return bundled_examples_dir()


def list_examples(directory: Path) -> list[Path]:
    """The example scripts of ``directory`` (every ``NN_name.py``), in order."""
    return sorted(p for p in directory.iterdir() if EXAMPLE_NAME.match(p.name) and p.is_file())


def example_matches(path: Path, name: str) -> bool:
    """Whether ``name`` selects the example ``path``: a number selects exactly that example
    (``1`` and ``01`` are ``01_...``, never ``10_...``), anything else a part of its name."""
    if name.isdigit():
        return int(name) == int(path.name[:2])
    return name in path.stem


def _real_model_problem() -> str | None:
    """Why the real model named by ``TRIOAGENT_MODEL`` cannot be used (an unknown provider,
    a missing key), checked once before any example runs; ``None`` when it is unset or fine."""
    spec = os.environ.get("TRIOAGENT_MODEL")
    if not spec:
        return None
    try:
        credential_from_spec(spec).get_api_key()
    except (ValueError, ModelCredentialError) as exc:
        return str(exc)
    return None


class ExampleResult(NamedTuple):
    name: str
    passed: bool
    seconds: float
    checks: int  #: the example's ``ok:`` lines
    last_line: str  #: why it failed: its FAILED line or its last exception line
    needs: str = ""  #: not run: the install command of the extra it needs


def failure_line(output: list[str]) -> str:
    """The line that says why an example failed: its ``FAILED:`` line, else the last line
    naming an exception (not the frame of an exception group's box), else its last line."""
    for line in reversed(output):
        if line.startswith("FAILED"):
            return line
    for line in reversed(output):
        if found := _EXCEPTION_LINE.match(line):
            return found.group(1)
    meaningful = [line for line in output if line.strip(" |+-")]
    return meaningful[-1].strip() if meaningful else "(no output)"


def run_example(path: Path, stream: TextIO | None = None) -> ExampleResult:
    """Run one example in a fresh interpreter and collect its outcome; with ``stream``, its
    output (stdout and stderr) is copied there line by line as it runs."""
    start = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, path.name],
        cwd=path.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        process.kill()

    timer = threading.Timer(EXAMPLE_TIMEOUT, kill)
    timer.start()
    output: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line.rstrip("\n"))
            if stream is not None:
                stream.write(f"      | {line}")
                stream.flush()
        code = process.wait()
    finally:
        timer.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
    elapsed = time.perf_counter() - start
    checks = sum(line.startswith("ok: ") for line in output)
    if timed_out.is_set():
        return ExampleResult(
            path.stem, False, elapsed, checks, f"timed out after {EXAMPLE_TIMEOUT:g}s"
        )
    needs = next((line[len("NEEDS: ") :] for line in output if line.startswith("NEEDS: ")), "")
    if code == EXIT_NEEDS_EXTRA and needs:
        return ExampleResult(path.stem, True, elapsed, 0, "", needs)
    if code == 0 and checks == 0:
        return ExampleResult(path.stem, False, elapsed, 0, "ran no checks (no 'ok:' line)")
    last = "" if code == 0 else failure_line(output)
    return ExampleResult(path.stem, code == 0, elapsed, checks, last)


def _print_table(results: list[ExampleResult]) -> None:
    width = max(len(r.name) for r in results)
    print()
    print(f"{'example':<{width}}  result  checks  seconds")
    for r in results:
        result = "skip" if r.needs else "pass" if r.passed else "FAIL"
        print(f"{r.name:<{width}}  {result:<6}  {r.checks:6d}  {r.seconds:7.1f}")
    failed = sum(not r.passed for r in results)
    skipped = [r for r in results if r.needs]
    total = sum(r.seconds for r in results)
    passed = len(results) - failed - len(skipped)
    line = f"\n{passed} passed, {failed} failed"
    if skipped:
        line += f", {len(skipped)} not run (an extra is missing: {skipped[0].needs})"
    print(f"{line} in {total:.1f}s")


def run_examples(name: str | None, list_only: bool, verbose: bool = False) -> int:
    """The ``examples`` command: list, or run (all or those matching ``name``); the exit code."""
    directory = find_examples_dir()
    if directory is None:
        where = os.environ.get("TRIOAGENT_EXAMPLES")
        problem = (
            f"TRIOAGENT_EXAMPLES={where!r} is not a directory"
            if where
            else ("this installation of trioagent has no example suite (trioagent/examples)")
        )
        print(f"error: {problem}", file=sys.stderr)
        return 2
    examples = list_examples(directory)
    if not examples:
        print(f"error: no numbered example scripts (NN_name.py) in {directory}", file=sys.stderr)
        return 2
    if (model_problem := _real_model_problem()) is not None:
        print(f"error: TRIOAGENT_MODEL: {model_problem}", file=sys.stderr)
        return 2
    if list_only:
        for path in examples:
            print(path.stem)
        return 0
    if name:
        examples = [p for p in examples if example_matches(p, name)]
        if not examples:
            print(f"error: no example matches {name!r} (see --list)", file=sys.stderr)
            return 2
    results: list[ExampleResult] = []
    digits = len(str(len(examples)))
    for index, path in enumerate(examples, 1):
        if verbose:
            print(f"[{index:>{digits}}/{len(examples)}] {path.stem}:", flush=True)
        result = run_example(path, sys.stdout if verbose else None)
        results.append(result)
        status = "skip" if result.needs else "ok  " if result.passed else "FAIL"
        print(
            f"[{index:>{digits}}/{len(examples)}] {status} {result.name} ({result.seconds:.1f}s)",
            flush=True,
        )
        if not result.passed:
            print(f"      {result.last_line}", flush=True)
        elif result.needs:
            print(f"      not run: it needs {result.needs}", flush=True)
    _print_table(results)
    return 1 if any(not r.passed for r in results) else 0

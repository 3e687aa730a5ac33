"""``trioagent examples``: run the numbered example scripts, each in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from ..exception import ModelCredentialError
from ..model import credential_from_spec

__all__ = ["run_examples"]

EXAMPLE_TIMEOUT = 120.0


def find_examples_dir() -> Path | None:
    """The ``examples/`` directory: ``$TRIOAGENT_EXAMPLES`` (only that one when it is set), the
    source checkout, or ``./examples``."""
    if chosen := os.environ.get("TRIOAGENT_EXAMPLES"):
        return Path(chosen) if Path(chosen).is_dir() else None
    candidates = [
        Path(__file__).resolve().parents[2] / "examples",
        Path.cwd() / "examples",
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def list_examples(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("[0-9]*.py"))


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
    last_line: str


def run_example(path: Path) -> ExampleResult:
    """Run one example in a fresh interpreter and collect its outcome."""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, path.name],
            cwd=path.parent,
            capture_output=True,
            text=True,
            timeout=EXAMPLE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        elapsed = time.perf_counter() - start
        return ExampleResult(path.stem, False, elapsed, 0, f"timed out after {EXAMPLE_TIMEOUT:g}s")
    elapsed = time.perf_counter() - start
    checks = sum(line.startswith("ok: ") for line in done.stdout.splitlines())
    output = (done.stdout + done.stderr).strip().splitlines()
    last = output[-1] if output else ""
    return ExampleResult(path.stem, done.returncode == 0, elapsed, checks, last)


def run_examples(name: str | None, list_only: bool) -> int:
    """The ``examples`` command: list, or run (all or those matching ``name``); the exit code."""
    directory = find_examples_dir()
    if directory is None:
        print("error: no examples/ directory found (set TRIOAGENT_EXAMPLES)", file=sys.stderr)
        return 2
    examples = list_examples(directory)
    if not examples:
        print(f"error: no numbered example scripts in {directory}", file=sys.stderr)
        return 2
    if (problem := _real_model_problem()) is not None:
        print(f"error: TRIOAGENT_MODEL: {problem}", file=sys.stderr)
        return 2
    if list_only:
        for path in examples:
            print(path.stem)
        return 0
    if name:
        examples = [p for p in examples if p.stem.startswith(name) or name in p.stem]
        if not examples:
            print(f"error: no example matches {name!r} (see --list)", file=sys.stderr)
            return 2
    results: list[ExampleResult] = []
    digits = len(str(len(examples)))
    for index, path in enumerate(examples, 1):
        result = run_example(path)
        results.append(result)
        status = "ok  " if result.passed else "FAIL"
        print(
            f"[{index:>{digits}}/{len(examples)}] {status} {result.name} ({result.seconds:.1f}s)",
            flush=True,
        )
        if not result.passed:
            print(f"      {result.last_line}", flush=True)
    width = max(len(r.name) for r in results)
    print()
    print(f"{'example':<{width}}  result  checks  seconds")
    for r in results:
        print(
            f"{r.name:<{width}}  {'pass' if r.passed else 'FAIL':<6}  {r.checks:6d}  {r.seconds:7.1f}"
        )
    failed = sum(not r.passed for r in results)
    total = sum(r.seconds for r in results)
    print(f"\n{len(results) - failed} passed, {failed} failed in {total:.1f}s")
    return 1 if failed else 0

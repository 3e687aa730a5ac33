"""``python -m trioagent`` / ``trioagent``: run the example suite.

    trioagent examples            run every example, one progress line each, then a table
    trioagent examples --list     list the examples
    trioagent examples NAME       run one (a number like ``01`` or part of its name)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["main"]

EXAMPLE_TIMEOUT = 120.0


def find_examples_dir() -> Path | None:
    """The ``examples/`` directory: ``$TRIOAGENT_EXAMPLES``, the source checkout, or ``./examples``."""
    candidates = [
        os.environ.get("TRIOAGENT_EXAMPLES"),
        Path(__file__).resolve().parent.parent / "examples",
        Path.cwd() / "examples",
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def list_examples(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("[0-9]*.py"))


def run_example(path: Path) -> tuple[bool, float, str]:
    """Run one example in a fresh interpreter; returns (passed, seconds, last output line)."""
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
        return False, time.perf_counter() - start, f"timed out after {EXAMPLE_TIMEOUT:g}s"
    elapsed = time.perf_counter() - start
    output = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode == 0, elapsed, output[-1] if output else ""


def cmd_examples(args: argparse.Namespace) -> int:
    directory = find_examples_dir()
    if directory is None:
        print("error: no examples/ directory found (set TRIOAGENT_EXAMPLES)", file=sys.stderr)
        return 2
    examples = list_examples(directory)
    if args.list:
        for path in examples:
            print(path.stem)
        return 0
    if args.name:
        examples = [p for p in examples if p.stem.startswith(args.name) or args.name in p.stem]
        if not examples:
            print(f"error: no example matches {args.name!r} (see --list)", file=sys.stderr)
            return 2
    results = []
    for index, path in enumerate(examples, 1):
        passed, elapsed, last = run_example(path)
        results.append((path.stem, passed, elapsed, last))
        status = "ok  " if passed else "FAIL"
        print(f"[{index}/{len(examples)}] {status} {path.stem} ({elapsed:.1f}s)", flush=True)
        if not passed:
            print(f"      {last}", flush=True)
    width = max(len(name) for name, *_ in results)
    print()
    print(f"{'example':<{width}}  result  seconds")
    for name, passed, elapsed, _ in results:
        print(f"{name:<{width}}  {'pass' if passed else 'FAIL':<6}  {elapsed:7.1f}")
    failed = sum(not passed for _, passed, _, _ in results)
    print(f"\n{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="trioagent", description="trioagent: a Trio-native agent core."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    examples = commands.add_parser(
        "examples", help="run the cancellation-focused example suite"
    )
    examples.add_argument("name", nargs="?", help="run only the example matching NAME")
    examples.add_argument("--list", action="store_true", help="list the examples")
    examples.set_defaults(func=cmd_examples)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())

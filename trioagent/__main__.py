"""``python -m trioagent`` / ``trioagent``: the example suite and an interactive chat.

    trioagent examples            run every example, one progress line each, then a table
    trioagent examples --list     list the examples
    trioagent examples NAME       run one (a number like ``01`` or part of its name)
    trioagent chat                chat with the embedded demo model (offline)
    trioagent chat --model openai:gpt-4o-mini    chat with a real provider (OPENAI_API_KEY)

Exit codes: 0 success, 1 an example failed, 2 a usage or set-up error (unknown example,
missing API key, unreachable server), 130 the chat was quit with Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

__all__ = ["main"]

EXAMPLE_TIMEOUT = 120.0


def find_examples_dir() -> Path | None:
    """The ``examples/`` directory: ``$TRIOAGENT_EXAMPLES`` (only that one when it is set), the
    source checkout, or ``./examples``."""
    if chosen := os.environ.get("TRIOAGENT_EXAMPLES"):
        return Path(chosen) if Path(chosen).is_dir() else None
    candidates = [
        Path(__file__).resolve().parent.parent / "examples",
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
    from .exception import ModelCredentialError
    from .model import credential_from_spec

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


def cmd_examples(args: argparse.Namespace) -> int:
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
    if args.list:
        for path in examples:
            print(path.stem)
        return 0
    if args.name:
        examples = [p for p in examples if p.stem.startswith(args.name) or args.name in p.stem]
        if not examples:
            print(f"error: no example matches {args.name!r} (see --list)", file=sys.stderr)
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


def cmd_chat(args: argparse.Namespace) -> int:
    import trio

    from ._chat import ChatOptions, ChatSetupError, run_chat

    if not args.verbose:
        # Retry warnings and the like would garble the conversation; errors still show.
        logging.getLogger("trioagent").setLevel(logging.ERROR)
    options = ChatOptions(model=args.model, base_url=args.base_url)
    if args.system is not None:
        options.system_prompt = args.system
    try:
        code: int = trio.run(run_chat, options)
    except (ChatSetupError, BaseExceptionGroup) as exc:
        # A set-up error may surface from inside a nursery, wrapped in a group.
        found = _find(exc, ChatSetupError)
        if found is None:
            raise
        print(f"error: {found}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    return code


def _find(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first ``kind`` leaf of ``exc`` (itself, or inside exception groups)."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _find(inner, kind)) is not None:
                return found
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trioagent",
        description="trioagent: a Trio-native agent core whose cancelled replies always end "
        "cleanly.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    examples = commands.add_parser(
        "examples",
        help="run the cancellation-focused example suite",
        description="Run the example suite: each example is a script in examples/ that checks "
        "its own outcome (exit code 0 = the promise held).",
    )
    examples.add_argument("name", nargs="?", help="run only the example matching NAME (e.g. 03)")
    examples.add_argument("--list", action="store_true", help="list the examples and exit")
    examples.set_defaults(func=cmd_examples)
    chat = commands.add_parser(
        "chat",
        help="chat with an agent in the terminal",
        description="Chat with an agent.  Answers stream as they arrive and tool calls are "
        "shown.  Ctrl-C interrupts the current reply (the conversation continues); Ctrl-D "
        "quits.  Without --model an embedded demo model answers offline.",
    )
    chat.add_argument(
        "--model",
        default=os.environ.get("TRIOAGENT_MODEL") or "embedded",
        help="'embedded' (default; or $TRIOAGENT_MODEL) or 'openai:<model>' (key from "
        "OPENAI_API_KEY)",
    )
    chat.add_argument(
        "--base-url",
        default=None,
        help="an OpenAI-compatible endpoint (default: $OPENAI_BASE_URL or OpenAI's)",
    )
    chat.add_argument("--system", default=None, help="the system prompt")
    chat.add_argument(
        "--verbose", action="store_true", help="show the library's warnings (retries, ...)"
    )
    chat.set_defaults(func=cmd_chat)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())

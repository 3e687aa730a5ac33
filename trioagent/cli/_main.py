"""``python -m trioagent`` / ``trioagent``: the example suite and an interactive chat.

    trioagent examples            run every example, one progress line each, then a table
    trioagent examples --list     list the examples
    trioagent examples NAME       run one (a number like ``1`` or ``01``, or part of its name)
    trioagent examples -v         ... streaming each example's own output
    trioagent --version           the installed version
    trioagent chat                chat with the embedded demo model (offline)
    trioagent chat --model openai:gpt-4o-mini    chat with a real provider (OPENAI_API_KEY)
    trioagent chat --session NAME  keep the conversation NAME across runs
    trioagent serve               serve the agent to a browser (AG-UI + a chat page)
    trioagent serve --store redis://localhost:6379/0 --port 8001   one of several processes

Exit codes: 0 success, 1 an example failed, 2 a usage or set-up error (unknown example,
missing API key, unreachable server), 130 the chat was quit with Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from .._version import __version__
from ._chat import ChatOptions, ChatSetupError, run_chat
from ._examples import run_examples

__all__ = ["main"]


def cmd_chat(args: argparse.Namespace) -> int:
    options = ChatOptions(model=args.model, base_url=args.base_url, session=args.session)
    if args.system is not None:
        options.system_prompt = args.system
    return _run_command(run_chat, options, verbose=args.verbose)


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import hypercorn  # noqa: F401  # the web extra, imported when asked for

        from ._serve import ServeOptions, run_serve
    except ImportError as exc:
        print(
            f"error: trioagent serve needs the web extra: pip install 'trioagent[web]' "
            f"(no {exc.name})",
            file=sys.stderr,
        )
        return 2
    options = ServeOptions(
        model=args.model,
        base_url=args.base_url,
        host=args.host,
        port=args.port,
        store=args.store,
        access_log=args.verbose,
    )
    if args.system is not None:
        options.system_prompt = args.system
    return _run_command(run_serve, options, verbose=args.verbose)


def _run_command(run: Callable[[Any], Awaitable[int]], options: object, *, verbose: bool) -> int:
    """``trio.run(run, options)``; a set-up error is one line on stderr and exit code 2."""
    if not verbose:
        # Warnings (skipped content and the like) would garble the output; errors show.
        logging.getLogger("trioagent").setLevel(logging.ERROR)
    try:
        code = trio.run(run, options)
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


def cmd_examples(args: argparse.Namespace) -> int:
    return run_examples(args.name, args.list, verbose=args.verbose)


def _model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model`` and ``--base-url``, the same for ``chat`` and ``serve``."""
    parser.add_argument(
        "--model",
        default=os.environ.get("TRIOAGENT_MODEL") or "embedded",
        help="'embedded' (default; or $TRIOAGENT_MODEL) or '<provider>:<model>', e.g. "
        "'openai:gpt-4o-mini' (key from OPENAI_API_KEY), or 'local:<model>' for a server on "
        "your machine (llama.cpp, Ollama, vLLM; with --base-url)",
    )
    parser.add_argument(
        "--base-url",
        default=None,
        help="the provider's endpoint (default: the provider's own, e.g. $OPENAI_BASE_URL or "
        "OpenAI's; for local: $TRIOAGENT_LOCAL_BASE_URL or http://127.0.0.1:8080/v1)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trioagent",
        description="trioagent: a Trio-native agent core whose cancelled replies always end "
        "cleanly.",
    )
    parser.add_argument("--version", action="version", version=f"trioagent {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    examples = commands.add_parser(
        "examples",
        help="run the cancellation-focused example suite",
        description="Run the example suite that ships with trioagent: each example is a script "
        "that checks its own outcome (exit code 0 = the promise held).  A number selects that "
        "example (1 or 01 is 01_...), other text a part of the name.",
    )
    examples.add_argument("name", nargs="?", help="run only the example NAME (e.g. 03 or deadline)")
    examples.add_argument("--list", action="store_true", help="list the examples and exit")
    examples.add_argument(
        "-v", "--verbose", action="store_true", help="stream each example's own output"
    )
    examples.set_defaults(func=cmd_examples)
    chat = commands.add_parser(
        "chat",
        help="chat with an agent in the terminal",
        description="Chat with an agent.  Answers stream as they arrive and tool calls are "
        "shown.  Ctrl-C interrupts the current reply (the conversation continues); Ctrl-D "
        "quits.  Without --model an embedded demo model answers offline.",
    )
    _model_arguments(chat)
    chat.add_argument("--system", default=None, help="the system prompt")
    chat.add_argument(
        "--session",
        default=None,
        metavar="NAME",
        help="keep the conversation NAME across runs (SQLite in $XDG_DATA_HOME/trioagent, "
        "by default ~/.local/share/trioagent)",
    )
    chat.add_argument(
        "--verbose", action="store_true", help="show the library's warnings (skipped content, ...)"
    )
    chat.set_defaults(func=cmd_chat)
    serve = commands.add_parser(
        "serve",
        help="serve the agent to a browser (AG-UI over HTTP, with a chat page)",
        description="Serve the agent over the AG-UI protocol (SSE) with a built-in chat page "
        "at /.  Stop interrupts a reply (its partial answer is kept); tool calls that need "
        "confirmation are asked on the page.  Without --model an embedded demo model answers "
        "offline.  Needs the web extra: pip install 'trioagent[web]'.",
    )
    _model_arguments(serve)
    serve.add_argument("--host", default="127.0.0.1", help="the interface (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="the port (default 8000; 0: any)")
    serve.add_argument(
        "--store",
        default=None,
        help="where the threads live: a SQLite file (default: web-sessions.sqlite3 in "
        "$XDG_DATA_HOME/trioagent) or a redis:// URL (several server processes share it, "
        "Stop requests travel over Redis)",
    )
    serve.add_argument("--system", default=None, help="the system prompt")
    serve.add_argument(
        "--verbose", action="store_true", help="show the access log and the library's warnings"
    )
    serve.set_defaults(func=cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result

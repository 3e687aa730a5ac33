"""``trioagent chat``: an interactive REPL around one agent.

The terminal is read in a worker thread (``trio.to_thread.run_sync``), so the event loop keeps
streaming while the user types.  On a terminal the line is read with GNU readline where Python
has it (line editing, the arrow keys, Up/Down through this chat's history, a long paste taken
whole rather than cut at the terminal's 4095-character line limit); the terminal's settings are
restored when the chat ends.  ``SIGINT`` is taken over with ``trio.open_signal_receiver``:

* Ctrl-C during a reply calls ``agent.interrupt()``: the reply ends with its INTERRUPTED end
  event (shown as ``[interrupted]``) and the conversation continues;
* Ctrl-C at the prompt says how to quit (the line typed so far is kept); a second one in a row
  quits (exit code 130);
* Ctrl-D (end of input) quits with exit code 0.

Without ``--model`` the agent talks to the embedded OpenAI-compatible server on loopback, which
plays a small offline demo (echo, a streamed story, a ``get_time`` tool call), so the command
works without a network.  ``--model <provider>:<name>`` talks to a real provider (e.g.
``openai:gpt-4o-mini``, key from ``OPENAI_API_KEY``, endpoint from ``--base-url`` /
``OPENAI_BASE_URL``).  A bad ``--model`` or ``--base-url``, a missing key or an unreachable
server is a one-line error with exit code 2.

``--session NAME`` keeps the conversation across runs: the agent's state is saved in
``sessions.sqlite3`` of the user's data directory (``$XDG_DATA_HOME/trioagent``, by default
``~/.local/share/trioagent``) after every reply, and the next run with that name continues it.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TextIO

import attrs
import httpx2
import trio

from ..agent import Agent
from ..credential import CredentialBase
from ..event import (
    AgentEvent,
    ReplyEndEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultEndEvent,
    ToolResultTextDeltaEvent,
    UserInterruptEvent,
)
from ..exception import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelCredentialError,
    TrioagentError,
)
from ..message import UserMsg
from ..model import PROVIDERS, ChatModelBase, chat_model_from_spec, credential_from_spec
from ..permission import PermissionDecision
from ..session import SessionMiddleware, SessionStoreError, SQLiteSessionStore
from ..testing import (
    OpenAICompatibleServer,
    RecordedRequest,
    ScriptedReply,
    ScriptedToolCall,
    serve_openai_compatible,
)
from ..tool import Toolkit

__all__ = ["ChatOptions", "ChatSetupError", "run_chat"]

PROMPT = "you> "
ANSWER = "agent> "
EMBEDDED = "embedded"
EXIT_INTERRUPTED = 130
STORY = (
    "Once upon a time, a reply was cancelled halfway through a sentence. Nobody panicked: the "
    "open text block was closed, every tool call got its result, exactly one end event said "
    "INTERRUPTED, the connection was closed, and the conversation simply went on. "
) * 4
#: The demo echoes a longer message by its length and its two ends.
LONG_ECHO = 200
_PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")


class ChatSetupError(TrioagentError):
    """A problem that stops the chat before (or instead of) talking: one line, exit code 2."""


@attrs.define(kw_only=True)
class ChatOptions:
    """What ``trioagent chat`` was asked for."""

    model: str = EMBEDDED
    base_url: str | None = None
    system_prompt: str = "You are a helpful, concise assistant."
    #: Keep the conversation under this name across runs (SQLite in the user's data directory).
    session: str | None = None


# -- the offline demo --------------------------------------------------------------------------


async def get_time() -> str:
    """The current date and time (UTC)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def demo_reply(request: RecordedRequest) -> ScriptedReply:
    """The embedded server's answer: a tool result is summarized, "time" calls ``get_time``,
    "story" streams a long story (slowly enough to press Ctrl-C), anything else is echoed."""
    messages = request.body.get("messages", []) if isinstance(request.body, dict) else []
    if messages and messages[-1].get("role") == "tool":
        return ScriptedReply(
            text=f"The tool says: {_text_of(messages[-1].get('content'))}",
            chunk_size=3,
            chunk_delay=0.01,
        )
    said = ""
    for message in reversed(messages):
        text = _text_of(message.get("content"))
        if message.get("role") == "user" and not text.startswith("<system-"):
            said = text
            break
    lowered = said.lower()
    if "time" in lowered or "clock" in lowered:
        return ScriptedReply(
            text="Let me look at the clock.", tool_calls=[ScriptedToolCall("get_time", "{}")]
        )
    if "story" in lowered:
        return ScriptedReply(text=STORY, chunk_size=4, chunk_delay=0.05)
    if len(said) > LONG_ECHO:
        said = f"({len(said)} characters) {said[:40]} ... {said[-40:]}"
    return ScriptedReply(text=f"Echo: {said}", chunk_size=2, chunk_delay=0.01)


# -- rendering ---------------------------------------------------------------------------------


class Printer:
    """Renders a reply's events as they arrive: text streamed, tool calls on their own lines."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.at_line_start = True
        self._call_names: dict[str, str] = {}
        self._call_args: dict[str, str] = {}
        self._results: dict[str, str] = {}

    def write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        """Write ``text`` on a line of its own."""
        self.write(("" if self.at_line_start else "\n") + text + "\n")

    def show(self, event: AgentEvent) -> None:
        match event:
            case TextBlockDeltaEvent():
                if self.at_line_start:
                    self.write(ANSWER)
                self.write(event.delta)
            case ThinkingBlockStartEvent():
                self.line("  (thinking...)")
            case ToolCallStartEvent():
                self._call_names[event.tool_call_id] = event.tool_call_name
                self._call_args[event.tool_call_id] = ""
            case ToolCallDeltaEvent():
                self._call_args[event.tool_call_id] = (
                    self._call_args.get(event.tool_call_id, "") + event.delta
                )
            case ToolCallEndEvent():
                name = self._call_names.get(event.tool_call_id, "?")
                self.line(f"  [tool call] {name}({self._call_args.get(event.tool_call_id, '')})")
            case ToolResultTextDeltaEvent():
                self._results[event.tool_call_id] = (
                    self._results.get(event.tool_call_id, "") + event.delta
                )
            case ToolResultEndEvent():
                name = self._call_names.get(event.tool_call_id, "?")
                text = " ".join(self._results.get(event.tool_call_id, "").split())
                if len(text) > 200:
                    text = text[:197] + "..."
                self.line(f"  [tool result] {name}: {event.state}: {text}")
            case RequireUserConfirmEvent() | RequireExternalExecutionEvent():
                names = ", ".join(call.name for call in event.tool_calls)
                self.line(f"  [needs confirmation] {names}")
            case ReplyEndEvent():
                if event.finished_reason == "interrupted":
                    self.line("[interrupted]")
                elif event.finished_reason == "exceed_max_iters":
                    self.line("[stopped: too many iterations]")
                elif not self.at_line_start:
                    self.write("\n")
            case _:
                pass


# -- the session -------------------------------------------------------------------------------


class ChatSession:
    """One conversation: the prompt loop, the replies, and the SIGINT router."""

    def __init__(
        self,
        agent: Agent,
        server: OpenAICompatibleServer | None,
        stdin: TextIO,
        out: TextIO,
    ) -> None:
        self.agent = agent
        self.server = server
        self.stdin = stdin
        self.printer = Printer(out)
        self.exit_code = 0
        self._readline = line_editor(stdin, out)
        self._in_reply = False
        self._interrupt_requested = False
        self._prompt_interrupts = 0

    async def run(self) -> int:
        with kept_terminal(self.stdin), trio.open_signal_receiver(signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._route_signals, signals, nursery.cancel_scope)
                await self._loop()
                nursery.cancel_scope.cancel()
        return self.exit_code

    async def _read_line(self) -> str | None:
        if self._readline is not None:
            # input() prints the prompt itself, so readline can redraw the line being edited.
            edited = await trio.to_thread.run_sync(self._readline, abandon_on_cancel=True)
            self.printer.at_line_start = True
            return edited
        self.printer.write(PROMPT)
        # The thread may stay blocked in readline() when we quit on Ctrl-C: abandon it.
        line = await trio.to_thread.run_sync(self.stdin.readline, abandon_on_cancel=True)
        if not line:
            return None
        if _isatty(self.stdin):
            self.printer.at_line_start = True  # the terminal echoed the user's Enter
        else:
            self.printer.write(line if line.endswith("\n") else line + "\n")  # a transcript
        return line

    async def _loop(self) -> None:
        while True:
            line = await self._read_line()
            if line is None:  # Ctrl-D / end of input
                self.printer.write("\n")
                return
            self._prompt_interrupts = 0
            text = line.strip()
            if text:
                await self._reply(text)

    async def _reply(self, text: str) -> None:
        if self.server is not None and len(self.server.script) < 4:
            self.server.push(*[demo_reply] * 8)
        self._in_reply = True
        self._interrupt_requested = False
        try:
            async with self.agent.stream(UserMsg("user", text)) as reply:
                async for event in reply:
                    self.printer.show(event)
                    if self._interrupt_requested:
                        self.agent.interrupt()  # idempotent; covers a Ctrl-C before the start
        except (ModelConnectionError, ModelAuthenticationError, ModelCredentialError) as exc:
            raise ChatSetupError(_first_line(exc)) from exc
        except Exception as exc:
            # The reply ended with its ERROR end event; say so and keep the conversation.
            self.printer.line(f"[error] {type(exc).__name__}: {_first_line(exc)}")
            return
        finally:
            self._in_reply = False
        if self.agent.state.has_awaiting_tool_calls(self.agent.name):
            # The REPL does not ask for confirmations: abort the parked reply.
            self.printer.line("[aborted: this chat cannot confirm tool calls]")
            await self.agent.reply(UserInterruptEvent())

    async def _route_signals(
        self, signals: AsyncIterator[int], everything: trio.CancelScope
    ) -> None:
        async for _ in signals:
            if self._in_reply:
                if self._interrupt_requested:
                    # A second Ctrl-C while the first is still unwinding: give up entirely.
                    self.exit_code = EXIT_INTERRUPTED
                    everything.cancel()
                    return
                self._interrupt_requested = True
                self.agent.interrupt()
                continue
            self._prompt_interrupts += 1
            if self._prompt_interrupts >= 2:
                self.printer.write("\n")
                self.exit_code = EXIT_INTERRUPTED
                everything.cancel()
                return
            # readline keeps the line typed so far: show it again after the note.
            typed = _line_buffer() if self._readline is not None else ""
            self.printer.write("\n(Ctrl-C again or Ctrl-D to quit)\n" + PROMPT + typed)


def line_editor(stdin: TextIO, out: TextIO) -> Callable[[], str | None] | None:
    """A reader of one line with readline's editing and history, when ``stdin`` and ``out``
    are this process's terminal and Python has readline; ``None`` otherwise (a pipe, a file,
    a stream in a test, Windows)."""
    if stdin is not sys.stdin or out is not sys.stdout or not (_isatty(stdin) and _isatty(out)):
        return None
    try:
        import readline
    except ImportError:
        return None
    readline.set_history_length(1000)

    def read() -> str | None:
        try:
            return input(PROMPT) + "\n"
        except EOFError:
            return None

    return read


def _line_buffer() -> str:
    try:
        import readline
    except ImportError:  # pragma: no cover - only called when readline was imported
        return ""
    return readline.get_line_buffer()


@contextlib.contextmanager
def kept_terminal(stdin: TextIO) -> Iterator[None]:
    """Restore the terminal's settings on the way out: a reader thread abandoned inside
    readline (quitting with Ctrl-C) would leave it without echo and line editing."""
    try:
        import termios

        fd = stdin.fileno()
        saved = termios.tcgetattr(fd) if _isatty(stdin) else None
    except (ImportError, OSError, ValueError, AttributeError):
        saved = None
    try:
        yield
    finally:
        if saved is not None:
            with contextlib.suppress(OSError):
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# -- set-up --------------------------------------------------------------------------------------


def model_spec_problem(spec: str) -> str | None:
    """What is wrong with ``--model spec`` in words a user can act on; ``None`` if nothing."""
    provider, colon, name = (part.strip() for part in spec.partition(":"))
    known = ", ".join(sorted(PROVIDERS))
    example = "e.g. 'openai:gpt-4o-mini' or 'anthropic:claude-sonnet-4-5'"
    if not colon:
        if provider in PROVIDERS:
            return f"--model {spec!r} names a provider but no model: give '{provider}:<model>'"
        return (
            f"--model {spec!r} has no provider: give '<provider>:<model>' ({example}; "
            f"providers: {known}) or 'embedded'"
        )
    if provider not in PROVIDERS:
        if provider.lower() in PROVIDERS:
            return (
                f"--model {spec!r}: provider names are lower case, use '{provider.lower()}:{name}'"
            )
        return f"--model {spec!r}: unknown provider {provider!r} (one of {known})"
    if not name:
        return f"--model {spec!r} names no model: give '{provider}:<model>'"
    return None


def base_url_problem(base_url: str) -> str | None:
    """What is wrong with ``--base-url``: not an http(s) URL with a host and a valid port."""
    try:
        url = httpx2.URL(base_url)
        _ = url.port
    except httpx2.InvalidURL as exc:
        return f"invalid base URL {base_url!r}: {exc}"
    if url.scheme not in ("http", "https") or not url.host:
        return (
            f"invalid base URL {base_url!r}: give an http:// or https:// URL with a host, "
            "e.g. http://127.0.0.1:8080/v1"
        )
    return None


def resolve_credential(options: ChatOptions) -> tuple[str, CredentialBase]:
    if (problem := model_spec_problem(options.model)) is not None:
        raise ChatSetupError(problem)
    if options.base_url is not None and (problem := base_url_problem(options.base_url)):
        raise ChatSetupError(problem)
    try:
        credential = credential_from_spec(options.model, base_url=options.base_url)
    except ValueError as exc:
        raise ChatSetupError(f"--model: {exc}") from None
    try:
        credential.get_api_key()
    except ModelCredentialError:
        variables = " or ".join(credential.api_key_env)
        raise ChatSetupError(f"no API key for {options.model}: set {variables}") from None
    return options.model, credential


async def check_reachable(base_url: str) -> None:
    """Fail fast (one line) when nothing listens at ``base_url`` (skipped behind a proxy)."""
    if (problem := base_url_problem(base_url)) is not None:
        raise ChatSetupError(problem)
    if any(os.environ.get(v) for v in _PROXY_VARS):
        return
    url = httpx2.URL(base_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    host = url.host
    failure = "timed out"
    with trio.move_on_after(5):
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            failure = exc.strerror or str(exc)
        else:
            await stream.aclose()
            return
    raise ChatSetupError(f"cannot reach the model server at {base_url}: {failure}")


def _toolkit() -> Toolkit:
    toolkit = Toolkit()
    toolkit.register_function(
        get_time, permission=PermissionDecision(behavior="allow", message="read-only clock")
    )
    return toolkit


def _banner(options: ChatOptions) -> str:
    if options.model == EMBEDDED:
        where = "the embedded demo model (offline; try 'what time is it?' or 'tell me a story')"
    else:
        where = f"{options.model}"
    return f"trioagent chat with {where}\nCtrl-C interrupts a reply, Ctrl-D quits.\n"


def data_dir() -> Path:
    """The user's data directory of trioagent: ``$XDG_DATA_HOME/trioagent`` or
    ``~/.local/share/trioagent``."""
    base = os.environ.get("XDG_DATA_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "share"
    return root / "trioagent"


def session_middleware(name: str) -> SessionMiddleware:
    """The middleware keeping the conversation ``name`` in the user's data directory."""
    try:
        return SessionMiddleware(SQLiteSessionStore(data_dir() / "sessions.sqlite3"), name)
    except ValueError as exc:
        raise ChatSetupError(f"--session: {exc}") from None


async def restore_session(agent: Agent, middleware: SessionMiddleware) -> str:
    """Load the stored conversation into ``agent``; returns a line saying what was found."""
    name = middleware.session_id
    store = middleware.store
    where = store.path if isinstance(store, SQLiteSessionStore) else store
    try:
        found = await middleware.restore(agent)
    except SessionStoreError as exc:
        raise ChatSetupError(f"--session {name!r}: {exc}") from None
    if found:
        return f"session {name!r}: {len(agent.state.context)} messages restored from {where}\n"
    return f"session {name!r}: new, saved in {where}\n"


async def run_chat(
    options: ChatOptions, stdin: TextIO | None = None, out: TextIO | None = None
) -> int:
    """Run the REPL; returns the exit code.  Raises :class:`ChatSetupError` for set-up
    problems (missing key, unreachable server, bad ``--model``)."""
    stdin = stdin if stdin is not None else sys.stdin
    out = out if out is not None else sys.stdout
    real: ChatModelBase | None = None
    session = session_middleware(options.session) if options.session is not None else None
    if options.model == EMBEDDED and options.base_url is not None:
        print(
            f"warning: --base-url {options.base_url} is not used: the embedded demo model "
            "answers from its own loopback server; give --model <provider>:<model> "
            "(e.g. openai:<model> for an OpenAI-compatible server) to talk to it",
            file=sys.stderr,
            flush=True,
        )
    if options.model != EMBEDDED:
        spec, credential = resolve_credential(options)
        await check_reachable(credential.get_base_url())
        real = chat_model_from_spec(spec, credential=credential, max_retries=1, retry_delay=0.5)
    async with trio.open_nursery() as nursery:
        server: OpenAICompatibleServer | None = None
        model: ChatModelBase
        if real is None:
            server = await nursery.start(serve_openai_compatible, [])
            model = server.chat_model("trioagent-demo")
        else:
            model = real
        async with model:
            agent = Agent(
                "assistant",
                options.system_prompt,
                model,
                _toolkit(),
                middlewares=[session] if session is not None else None,
            )
            out.write(_banner(options))
            if session is not None:
                out.write(await restore_session(agent, session))
            out.flush()
            code = await ChatSession(agent, server, stdin, out).run()
        nursery.cancel_scope.cancel()
    return code

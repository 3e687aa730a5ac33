"""``python -m trioagent`` / ``trioagent``: the examples runner and the chat REPL, end to end.

The chat is driven through a real pseudo-terminal (``os.openpty`` + ``subprocess``, the pty made
the child's controlling terminal), so Ctrl-C is a real SIGINT sent by the terminal driver to the
chat's process group, and Ctrl-D a real end of input.  Other runs use piped stdin and short
timeouts: bad ``"provider:model"`` specs, missing keys, unreachable or rejecting servers,
``TRIOAGENT_MODEL``, and secrets that must never be printed.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import socket
import subprocess
import sys
import sysconfig
import termios
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from trioagent.credential import OllamaCredential, OpenAICredential
from trioagent.model import (
    PROVIDERS,
    OllamaChatModel,
    OpenAIChatModel,
    OpenAIResponseModel,
    chat_model_from_spec,
    credential_from_spec,
)

STEP = 15.0  # seconds one expected output may take (a loaded CI machine); typically < 0.5


SECRET = "sk-edge-SECRET-0123456789"
PROVIDER_PREFIXES = {
    "openai",
    "openai-response",
    "anthropic",
    "minimax",
    "gemini",
    "dashscope",
    "deepseek",
    "moonshot",
    "ollama",
    "xai",
    "local",
}
KEY_VARS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "DASHSCOPE_API_KEY",
    "DEEPSEEK_API_KEY",
    "MOONSHOT_API_KEY",
    "XAI_API_KEY",
    "MINIMAX_API_KEY",
)


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"TRIOAGENT_MODEL", "TRIOAGENT_EXAMPLES", "OPENAI_BASE_URL", "OLLAMA_HOST"}
        and k not in KEY_VARS
        and not k.lower().endswith("_proxy")
    }
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class Call:
    """One ``python -m trioagent`` run, started at once; :meth:`done` waits for it."""

    def __init__(self, *args: str, stdin: str = "", cwd: Path | None = None, **env: str) -> None:
        self.stdin = stdin
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trioagent", *args],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(**env),
        )

    def done(self) -> subprocess.CompletedProcess[str]:
        try:
            out, err = self.process.communicate(self.stdin, timeout=60)
        finally:
            if self.process.poll() is None:
                self.process.kill()  # only our own child
                self.process.wait()
        return subprocess.CompletedProcess(self.process.args, self.process.returncode, out, err)


def trioagent(
    *args: str, stdin: str = "", cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return Call(*args, stdin=stdin, cwd=cwd, **env).done()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ")
    return line


# -- help and the examples command -------------------------------------------------------------


@pytest.mark.parametrize(
    "args", [["--help"], ["examples", "--help"], ["chat", "--help"], ["serve", "--help"]]
)
def test_help(args: list[str]) -> None:
    done = trioagent(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: trioagent")


def test_help_names_both_commands() -> None:
    out = trioagent("--help").stdout
    assert "examples" in out
    assert "chat" in out
    assert "Ctrl-C interrupts" in trioagent("chat", "--help").stdout


def test_no_command_is_a_usage_error() -> None:
    done = trioagent()
    assert done.returncode == 2
    assert "usage: trioagent" in done.stderr


def test_examples_list() -> None:
    done = trioagent("examples", "--list")
    assert done.returncode == 0, done.stderr
    names = done.stdout.split()
    assert names[0] == "01_interrupt_streaming"
    assert names == sorted(names)
    assert {"02_deadline", "03_parallel_tools", "12_save_and_resume"} <= set(names)


def test_unknown_example_is_an_error() -> None:
    done = trioagent("examples", "no-such-example")
    assert done.returncode == 2
    assert done.stderr.strip() == "error: no example matches 'no-such-example' (see --list)"


def test_run_one_example_by_number() -> None:
    done = trioagent("examples", "01")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[1/1] ok   01_interrupt_streaming" in done.stdout
    assert "1 passed, 0 failed" in done.stdout


def test_console_script_is_installed() -> None:
    # pip puts console scripts in the interpreter's scripts directory (venv or not).
    script = Path(sysconfig.get_path("scripts")) / "trioagent"
    assert script.exists(), f"`pip install -e .` should have installed {script}"
    done = subprocess.run(
        [str(script), "examples", "--list"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "01_interrupt_streaming" in done.stdout


# -- chat: set-up errors -----------------------------------------------------------------------


def test_chat_without_api_key_is_a_one_line_error() -> None:
    done = trioagent("chat", "--model", "openai:gpt-4o-mini")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: no API key for openai:gpt-4o-mini: set OPENAI_API_KEY"
    ]
    assert done.stdout == ""


def test_chat_with_unreachable_server_is_a_one_line_error() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    done = trioagent(
        "chat", "--model", "openai:gpt-4o-mini", "--base-url", url, OPENAI_API_KEY="sk-test"
    )
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: cannot reach the model server at {url}")


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("anthropic", "names a provider but no model: give 'anthropic:<model>'"),
        ("gpt-4o", "has no provider: give '<provider>:<model>'"),
        ("openai:", "names no model: give 'openai:<model>'"),
        ("OpenAI:gpt-4o", "provider names are lower case, use 'openai:gpt-4o'"),
        ("nosuch:x", "unknown provider 'nosuch' (one of anthropic,"),
    ],
)
def test_chat_with_a_bad_model_spec_says_what_is_wrong(spec: str, said: str) -> None:
    line = one_line_error(trioagent("chat", "--model", spec))
    assert line.startswith(f"error: --model {spec!r}")
    assert said in line


@pytest.mark.parametrize("url", ["not-a-url", "ftp://example.com/v1", "http:///v1"])
def test_chat_with_a_base_url_that_is_no_url_is_an_invalid_url_error(url: str) -> None:
    line = one_line_error(
        trioagent("chat", "--model", "openai:m", "--base-url", url, OPENAI_API_KEY="sk-x")
    )
    assert line.startswith(f"error: invalid base URL {url!r}: give an http:// or https:// URL")
    assert "cannot reach" not in line


def test_chat_with_the_embedded_model_warns_that_base_url_is_not_used() -> None:
    done = trioagent("chat", "--base-url", "http://127.0.0.1:1/v1", stdin="hi\n")
    assert done.returncode == 0, done.stderr
    (warning,) = done.stderr.splitlines()
    assert warning.startswith("warning: --base-url http://127.0.0.1:1/v1 is not used")
    assert "agent> Echo: hi" in done.stdout


def test_version() -> None:
    import trioagent as package

    done = trioagent("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"trioagent {package.__version__}"


def test_chat_shows_an_html_error_page_as_one_summary_line() -> None:
    # http.server's own handler answers a POST with its HTML "501 Unsupported method" page.
    from http.server import SimpleHTTPRequestHandler

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        done = trioagent(
            "chat", "--model", "openai:m", "--base-url", url, stdin="hi\n", OPENAI_API_KEY="sk-x"
        )
    finally:
        server.shutdown()
        server.server_close()
    shown = done.stdout + done.stderr
    assert "<!DOCTYPE" not in shown
    assert "<html" not in shown.lower()
    (line,) = [x for x in shown.splitlines() if "501" in x]
    assert "(HTML page) Error response: Error code: 501" in line
    assert "Unsupported method ('POST')" in line


def test_chat_reads_piped_input() -> None:
    done = trioagent("chat", stdin="hello\nwhat time is it?\n")
    assert done.returncode == 0, done.stderr
    assert "agent> Echo: hello" in done.stdout
    assert "[tool call] get_time({})" in done.stdout
    assert "[tool result] get_time: success:" in done.stdout
    assert "The tool says:" in done.stdout


def test_chat_session_keeps_the_conversation_across_runs(tmp_path: Path) -> None:
    first = trioagent("chat", "--session", "work", stdin="hello\n", XDG_DATA_HOME=str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert "session 'work': new" in first.stdout
    again = trioagent("chat", "--session", "work", stdin="bye\n", XDG_DATA_HOME=str(tmp_path))
    assert again.returncode == 0, again.stderr
    assert "session 'work': 2 messages restored" in again.stdout
    assert (tmp_path / "trioagent" / "sessions.sqlite3").is_file()
    bad = trioagent("chat", "--session", "", stdin="", XDG_DATA_HOME=str(tmp_path))
    assert one_line_error(bad).startswith("error: --session")


# -- chat in a pseudo-terminal -------------------------------------------------------------------


class Terminal:
    """A child process on a pseudo-terminal: type into it, wait for what it prints."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        master, slave = os.openpty()
        self.process = subprocess.Popen(
            [sys.executable, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,  # setsid(): a session without a terminal...
            preexec_fn=_take_terminal,  # ...whose controlling terminal becomes the pty
        )
        os.close(slave)
        self.fd = master
        self.seen = b""  # everything printed so far
        self._pending = b""

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def paste(self, text: str) -> None:
        """Write ``text`` as a terminal paste does: all at once, as fast as the child reads
        it (what it echoes is collected meanwhile, so neither side blocks)."""
        data = text.encode()
        deadline = time.monotonic() + 60
        while data:
            readable, writable, _ = select.select([self.fd], [self.fd], [], 1.0)
            if time.monotonic() > deadline:
                raise AssertionError(f"the paste did not go through; output:\n{self.text}")
            if readable:
                chunk = os.read(self.fd, 65536)
                self.seen += chunk
                self._pending += chunk
            if writable:
                data = data[os.write(self.fd, data[:1024]) :]

    def expect(self, text: str, timeout: float = STEP) -> str:
        """Wait until ``text`` is printed; returns the output up to and including it."""
        wanted = text.encode()
        deadline = time.monotonic() + timeout
        while wanted not in self._pending:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(0.0, left))
            if not ready:
                raise AssertionError(f"timed out waiting for {text!r}; output:\n{self.text}")
            try:
                data = os.read(self.fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                data = b""
            if not data:
                raise AssertionError(f"the program ended before {text!r}; output:\n{self.text}")
            self.seen += data
            self._pending += data
        end = self._pending.index(wanted) + len(wanted)
        chunk, self._pending = self._pending[:end], self._pending[end:]
        return chunk.decode(errors="replace")

    @property
    def text(self) -> str:
        return self.seen.decode(errors="replace")

    def wait(self, timeout: float = STEP) -> int:
        """The exit code, after draining the output."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                return code
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if ready:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:
                    data = b""
                self.seen += data
        raise AssertionError(f"the program did not exit; output:\n{self.text}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()  # only our own child
            self.process.wait()
        os.close(self.fd)


def _take_terminal() -> None:
    """In the child, after ``setsid()``: make stdin (the pty) the controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@pytest.fixture
def chat() -> Iterator[Terminal]:
    terminal = Terminal("-m", "trioagent", "chat", env=_env())
    yield terminal
    terminal.close()


def test_chat_streams_interrupts_and_continues(chat: Terminal) -> None:
    start = time.monotonic()
    chat.expect("Ctrl-C interrupts a reply, Ctrl-D quits.")
    chat.expect("you> ")
    chat.type("hello\r")
    chat.expect("agent> Echo: hello")
    chat.expect("you> ")

    # A long streamed story: Ctrl-C in the middle interrupts the reply, not the program.
    chat.type("tell me a story\r")
    chat.expect("agent> Once upon a time")
    chat.type("\x03")
    shown = chat.expect("[interrupted]")
    assert "conversation simply went on" not in shown  # cut before the story's end
    chat.expect("you> ")

    # The conversation goes on after the interruption.
    chat.type("and now?\r")
    chat.expect("agent> Echo: and now?")
    chat.expect("you> ")

    # Tool calls are shown.
    chat.type("what time is it?\r")
    chat.expect("[tool call] get_time({})")
    chat.expect("[tool result] get_time: success:")
    chat.expect("The tool says:")
    chat.expect("you> ")

    chat.type("\x04")  # Ctrl-D at an empty prompt
    assert chat.wait() == 0
    assert "Traceback" not in chat.text
    assert time.monotonic() - start < 30


def test_chat_ctrl_c_at_the_prompt(chat: Terminal) -> None:
    chat.expect("you> ")
    chat.type("\x03")
    chat.expect("(Ctrl-C again or Ctrl-D to quit)")
    chat.expect("you> ")
    chat.type("still here\r")  # a single Ctrl-C at the prompt does not quit
    chat.expect("agent> Echo: still here")
    chat.expect("you> ")
    chat.type("\x03")
    chat.expect("you> ")
    chat.type("\x03")  # twice in a row: quit
    assert chat.wait() == 130
    assert "Traceback" not in chat.text


def test_chat_edits_the_line_recalls_history_and_takes_a_long_paste_whole(chat: Terminal) -> None:
    chat.expect("you> ")
    chat.type("helo")
    chat.type("\x1b[D")  # Left: the cursor goes back over the "o"...
    chat.type("l\r")  # ...and "l" is inserted before it
    chat.expect("agent> Echo: hello\r\n")
    chat.expect("you> ")
    chat.type("\x1b[A")  # Up: the previous line comes back
    chat.type("!\r")
    chat.expect("agent> Echo: hello!\r\n")
    chat.expect("you> ")
    # A paste longer than the terminal's 4095-character line buffer arrives whole.
    pasted = "start-" + "x" * 9994 + "-end!"
    assert len(pasted) == 10_005
    chat.paste(pasted + "\r")
    chat.expect("agent> Echo: (10005 characters) start-", timeout=60)
    chat.expect("x-end!\r\n")
    chat.expect("you> ")
    chat.type("\x04")
    assert chat.wait() == 0
    assert "^[[" not in chat.text
    assert "Traceback" not in chat.text


def test_chat_restores_the_terminal_when_it_quits_on_ctrl_c(chat: Terminal) -> None:
    before = termios.tcgetattr(chat.fd)
    chat.expect("you> ")
    chat.type("half a line")
    chat.expect("half a line")  # read by readline (a Ctrl-C flushes unread input)
    chat.type("\x03")
    chat.expect("(Ctrl-C again or Ctrl-D to quit)\r\nyou> half a line")
    chat.type("\x03")
    assert chat.wait() == 130
    after = termios.tcgetattr(chat.fd)
    assert after[3] & termios.ECHO  # echo and whole lines again
    assert after[3] & termios.ICANON
    assert after[3] == before[3]


# -- more command-line edge cases ----------------------------------------------------------------


def test_help_texts_and_usage_errors() -> None:
    chat, examples, unknown = (
        Call("chat", "--help"),
        Call("examples", "--help"),
        Call("nosuchcommand"),
    )
    done = chat.done()
    assert done.returncode == 0
    for option in ("--model", "--base-url", "--system", "--verbose", "TRIOAGENT_MODEL"):
        assert option in done.stdout
    done = examples.done()
    assert done.returncode == 0
    assert "--list" in done.stdout
    assert "NAME" in done.stdout
    done = unknown.done()
    assert done.returncode == 2
    assert "invalid choice" in done.stderr
    assert "Traceback" not in done.stderr


def test_chat_with_a_bad_spec_is_one_line() -> None:
    specs = ["nosuch:model", "", "OPENAI:gpt-4o"]
    calls = [Call("chat", "--model", spec) for spec in specs]
    for spec, call in zip(specs, calls, strict=True):
        line = one_line_error(call.done())
        assert line.startswith(f"error: --model {spec!r}")


def test_chat_names_the_missing_key() -> None:
    cases = {
        "gemini:gemini-2.5-flash": "GEMINI_API_KEY or GOOGLE_API_KEY",
        "openai:ft:gpt-4o-mini:org::id": "OPENAI_API_KEY",
    }
    calls = {spec: Call("chat", "--model", spec) for spec in cases}
    # TRIOAGENT_MODEL is the default of --model; --model wins over it.
    from_env = Call("chat", TRIOAGENT_MODEL="deepseek:deepseek-chat")
    overridden = Call("chat", "--model", "moonshot:kimi", TRIOAGENT_MODEL="deepseek:deepseek-chat")
    for spec, variables in cases.items():
        line = one_line_error(calls[spec].done())
        assert line == f"error: no API key for {spec}: set {variables}"
    line = one_line_error(from_env.done())
    assert line == "error: no API key for deepseek:deepseek-chat: set DEEPSEEK_API_KEY"
    line = one_line_error(overridden.done())
    assert line == "error: no API key for moonshot:kimi: set MOONSHOT_API_KEY"


def test_an_empty_trioagent_model_means_the_embedded_demo() -> None:
    done = trioagent("chat", stdin="hello\n", TRIOAGENT_MODEL="")
    assert done.returncode == 0, done.stderr
    assert "the embedded demo model" in done.stdout
    assert "agent> Echo: hello" in done.stdout


def test_unreachable_servers_are_one_line_and_keep_the_key_secret() -> None:
    # An Ollama model name with a colon, no key needed: the server is checked.
    ollama_url = f"http://127.0.0.1:{_closed_port()}"
    ollama = Call("chat", "--model", "ollama:llama3:8b", "--base-url", ollama_url)
    bad_host = "http://no-such-host.invalid/v1"
    unresolvable = Call(
        "chat", "--model", "openai:m", "--base-url", bad_host, OPENAI_API_KEY=SECRET
    )
    line = one_line_error(ollama.done())
    assert line.startswith(f"error: cannot reach the model server at {ollama_url}")
    done = unresolvable.done()
    line = one_line_error(done)
    assert line.startswith(f"error: cannot reach the model server at {bad_host}: ")
    assert SECRET not in done.stdout + done.stderr


class _Rejecting(BaseHTTPRequestHandler):
    """Answers every request with an OpenAI-style 401 that echoes the key it was sent."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        key = (self.headers.get("authorization") or "").removeprefix("Bearer ")
        body = json.dumps(
            {
                "error": {
                    "message": f"Incorrect API key provided: {key}.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            }
        ).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def rejecting_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Rejecting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_rejected_key_is_one_line_and_never_printed(rejecting_server: str) -> None:
    args = ["chat", "--model", "openai:gpt-x", "--base-url", rejecting_server]
    quiet = Call(*args, stdin="hello\nagain\n", OPENAI_API_KEY=SECRET)
    verbose = Call(*args, "--verbose", stdin="hello\nagain\n", OPENAI_API_KEY=SECRET)
    for call in (quiet, verbose):
        done = call.done()
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert SECRET not in done.stdout + done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1
        assert "401" in errors[0]
        assert "***" in errors[0]  # the echoed key is redacted
        if call is quiet:
            assert done.stderr.splitlines() == errors
        assert "trioagent chat with openai:gpt-x" in done.stdout
        assert "again" not in done.stdout  # the chat stopped at the first rejection


def test_examples_by_part_of_a_name(tmp_path: Path) -> None:
    (tmp_path / "01_alpha.py").write_text("print('ok: alpha')\n")
    (tmp_path / "02_beta.py").write_text("import sys\nprint('boom')\nsys.exit(3)\n")
    (tmp_path / "_helper.py").write_text("raise SystemExit('not an example')\n")
    (tmp_path / "notes.txt").write_text("not an example\n")
    env = {"TRIOAGENT_EXAMPLES": str(tmp_path)}

    listed, alpha, everything, unknown = (
        Call("examples", "--list", **env),
        Call("examples", "alpha", **env),
        Call("examples", **env),
        Call("examples", "gamma", **env),
    )

    done = listed.done()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["01_alpha", "02_beta"]

    done = alpha.done()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[1/1] ok   01_alpha" in done.stdout
    assert "1 passed, 0 failed" in done.stdout

    done = everything.done()
    assert done.returncode == 1
    assert "[1/2] ok   01_alpha" in done.stdout
    assert "[2/2] FAIL 02_beta" in done.stdout
    assert "      boom" in done.stdout  # the failing example's last line
    assert "1 passed, 1 failed" in done.stdout

    done = unknown.done()
    assert done.returncode == 2
    assert done.stderr.strip() == "error: no example matches 'gamma' (see --list)"
    assert done.stdout == ""


# -- the specs --model takes, in process --------------------------------------------------------


def test_providers_match_the_documented_prefixes() -> None:
    assert set(PROVIDERS) == PROVIDER_PREFIXES


@pytest.mark.parametrize(
    ("spec", "cls", "name"),
    [
        ("ollama:llama3:8b", OllamaChatModel, "llama3:8b"),
        ("ollama:hf.co/org/repo:Q4_K_M", OllamaChatModel, "hf.co/org/repo:Q4_K_M"),
        # OpenAI fine-tuned model ids contain colons, even an empty segment.
        (
            "openai:ft:gpt-4o-mini-2024-07-18:my-org::abc123",
            OpenAIChatModel,
            "ft:gpt-4o-mini-2024-07-18:my-org::abc123",
        ),
        ("openai-response:ft:gpt-4.1:org::x", OpenAIResponseModel, "ft:gpt-4.1:org::x"),
    ],
)
def test_model_names_keep_their_colons(spec: str, cls: type, name: str) -> None:
    model = chat_model_from_spec(spec)
    assert type(model) is cls
    assert model.model == name


@pytest.mark.parametrize(
    "spec",
    ["", ":", ":gpt-4o", "openai", "OpenAI:gpt-4o", "OLLAMA:llama3", " :gpt-4o", "open ai:x"],
)
def test_bad_specs_are_value_errors_naming_the_providers(spec: str) -> None:
    for build in (chat_model_from_spec, credential_from_spec):
        with pytest.raises(ValueError, match="<provider>:<model>") as info:
            build(spec)
        message = str(info.value)
        assert repr(spec) in message
        assert all(p in message for p in PROVIDER_PREFIXES)


def test_an_explicit_credential_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env.invalid/v1")
    credential = OpenAICredential(api_key="sk-explicit", base_url="http://127.0.0.1:9/v1")
    model = chat_model_from_spec("openai:m", credential=credential)
    assert model.credential is credential
    assert model.credential.get_api_key() == "sk-explicit"
    assert model.credential.get_base_url() == "http://127.0.0.1:9/v1"


def test_credential_from_spec_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:7/v1/")
    assert credential_from_spec("openai:m").get_base_url() == "http://127.0.0.1:7/v1"
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:11434")
    ollama = credential_from_spec("ollama:llama3:8b")
    assert isinstance(ollama, OllamaCredential)
    assert ollama.get_base_url() == "http://127.0.0.1:11434"
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    assert ollama.get_api_key() is None  # Ollama needs no key


def test_a_spec_credential_never_shows_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    model = chat_model_from_spec("anthropic:claude-x")
    credential = credential_from_spec("anthropic:claude-x")
    for text in (repr(credential), str(credential), repr(model.credential)):
        assert SECRET not in text


# -- found by this hunt, fixed ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec", [" openai:gpt-4o", "openai:gpt-4o ", "openai: gpt-4o", "openai:gpt-4o\n"]
)
def test_whitespace_around_a_spec_is_no_part_of_the_names(spec: str) -> None:
    assert chat_model_from_spec(spec, credential=OpenAICredential(api_key="sk-x")).model == "gpt-4o"


def test_examples_with_a_real_model_but_no_key_is_a_one_line_setup_error() -> None:
    line = one_line_error(trioagent("examples", "01", TRIOAGENT_MODEL="openai:gpt-4o-mini"))
    assert "OPENAI_API_KEY" in line


def test_examples_with_an_unknown_provider_is_a_one_line_setup_error() -> None:
    line = one_line_error(trioagent("examples", "01", TRIOAGENT_MODEL="nosuch:model"))
    assert "<provider>:<model>" in line


def test_examples_in_a_directory_without_examples_is_a_one_line_error(tmp_path: Path) -> None:
    line = one_line_error(trioagent("examples", TRIOAGENT_EXAMPLES=str(tmp_path)))
    assert "no numbered example scripts" in line
    missing = one_line_error(trioagent("examples", TRIOAGENT_EXAMPLES=str(tmp_path / "nope")))
    assert "is not a directory" in missing


def test_examples_never_run_scripts_from_the_current_directory(tmp_path: Path) -> None:
    # An unrelated project's examples/ in the working directory: the bundled suite runs instead.
    (tmp_path / "examples").mkdir()
    marker = tmp_path / "ran"
    (tmp_path / "examples" / "01_other.py").write_text(
        f"open({str(marker)!r}, 'w').write('x')\nprint('ok: other')\n"
    )
    done = trioagent("examples", "--list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "01_other" not in done.stdout.split()
    assert "01_interrupt_streaming" in done.stdout.split()
    done = trioagent("examples", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[1/1] ok   01_interrupt_streaming" in done.stdout
    assert not marker.exists()


def test_examples_a_number_selects_exactly_that_example(tmp_path: Path) -> None:
    for name in ("01_one", "10_ten", "11_eleven", "12_twelve"):
        (tmp_path / f"{name}.py").write_text("print('ok: fine')\n")
    env = {"TRIOAGENT_EXAMPLES": str(tmp_path)}
    one, zero_one, ten = (
        Call("examples", "1", **env),
        Call("examples", "01", **env),
        Call("examples", "10", **env),
    )
    for call in (one, zero_one):
        done = call.done()
        assert done.returncode == 0, done.stdout + done.stderr
        assert "[1/1] ok   01_one" in done.stdout
        assert "10_ten" not in done.stdout
    done = ten.done()
    assert "[1/1] ok   10_ten" in done.stdout


def test_examples_that_run_no_check_fail_and_a_failure_shows_its_exception(tmp_path: Path) -> None:
    (tmp_path / "01_silent.py").write_text("print('hello')\n")
    (tmp_path / "02_group.py").write_text(
        "import trio\n"
        "async def boom():\n"
        "    raise KeyError('the real cause')\n"
        "async def main():\n"
        "    async with trio.open_nursery() as n:\n"
        "        n.start_soon(boom)\n"
        "print('ok: started')\n"
        "trio.run(main)\n"
    )
    (tmp_path / "03_chatty.py").write_text("print('ok: one')\nprint('its own output')\n")
    env = {"TRIOAGENT_EXAMPLES": str(tmp_path)}
    everything, verbose = Call("examples", **env), Call("examples", "-v", "03", **env)
    done = everything.done()
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert "[1/3] FAIL 01_silent" in done.stdout
    assert lines[lines.index(next(x for x in lines if "FAIL 01_silent" in x)) + 1].strip() == (
        "ran no checks (no 'ok:' line)"
    )
    failing = next(x for x in lines if "FAIL 02_group" in x)
    assert lines[lines.index(failing) + 1].strip() == "KeyError: 'the real cause'"
    assert "its own output" not in done.stdout  # quiet without -v
    done = verbose.done()
    assert done.returncode == 0, done.stdout
    assert "      | its own output" in done.stdout


def test_an_example_missing_its_extra_is_reported_not_run(tmp_path: Path) -> None:
    (tmp_path / "01_fine.py").write_text("print('ok: fine')\n")
    (tmp_path / "02_web.py").write_text(
        "import os\nprint(\"NEEDS: pip install 'trioagent[web]' (no ag_ui)\", flush=True)\n"
        "os._exit(3)\n"
    )
    (tmp_path / "03_three.py").write_text("import os\nos._exit(3)\n")  # no NEEDS line: failed
    done = Call("examples", TRIOAGENT_EXAMPLES=str(tmp_path)).done()
    assert done.returncode == 1
    assert "[2/3] skip 02_web" in done.stdout
    assert "not run: it needs pip install 'trioagent[web]' (no ag_ui)" in done.stdout
    assert "[3/3] FAIL 03_three" in done.stdout
    assert "1 passed, 1 failed, 1 not run (an extra is missing: pip install" in done.stdout
    (tmp_path / "03_three.py").unlink()
    done = Call("examples", TRIOAGENT_EXAMPLES=str(tmp_path)).done()
    assert done.returncode == 0, done.stdout  # a missing extra is not a failure


def test_chat_with_an_invalid_base_url_port_is_a_one_line_error() -> None:
    done = trioagent(
        "chat",
        "--model",
        "openai:m",
        "--base-url",
        "http://127.0.0.1:notaport/v1",
        OPENAI_API_KEY="sk-x",
    )
    assert "invalid base URL" in one_line_error(done)

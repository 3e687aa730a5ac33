"""``python -m trioagent`` / ``trioagent``: the examples runner and the chat REPL, end to end.

The chat is driven through a real pseudo-terminal (``os.openpty`` + ``subprocess``, the pty made
the child's controlling terminal), so Ctrl-C is a real SIGINT sent by the terminal driver to the
chat's process group, and Ctrl-D a real end of input.
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
import subprocess
import sys
import sysconfig
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

STEP = 15.0  # seconds one expected output may take (a loaded CI machine); typically < 0.5


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"TRIOAGENT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"}
        and not k.lower().endswith("_proxy")
    }
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def trioagent(*args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trioagent", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(**env),
        check=False,
    )


# -- help and the examples command -------------------------------------------------------------


@pytest.mark.parametrize("args", [["--help"], ["examples", "--help"], ["chat", "--help"]])
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


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens there any more


def test_chat_with_unreachable_server_is_a_one_line_error() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    done = trioagent(
        "chat", "--model", "openai:gpt-4o-mini", "--base-url", url, OPENAI_API_KEY="sk-test"
    )
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: cannot reach the model server at {url}")


def test_chat_with_a_bad_model_spec_is_an_error() -> None:
    done = trioagent("chat", "--model", "anthropic")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --model must be")


def test_chat_reads_piped_input() -> None:
    done = trioagent("chat", stdin="hello\nwhat time is it?\n")
    assert done.returncode == 0, done.stderr
    assert "agent> Echo: hello" in done.stdout
    assert "[tool call] get_time({})" in done.stdout
    assert "[tool result] get_time: success:" in done.stdout
    assert "The tool says:" in done.stdout


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

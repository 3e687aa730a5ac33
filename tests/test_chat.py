"""``trioagent.cli._chat`` in-process: the demo script, the event printer, set-up errors, and a whole
session fed from a text stream.  (The terminal behaviour — Ctrl-C, Ctrl-D in a real pty — is
tested end to end in ``test_cli.py``.)"""

from __future__ import annotations

import io
import json
import socket
from typing import Any

import pytest

from trioagent.cli._chat import (
    ChatOptions,
    ChatSetupError,
    Printer,
    check_reachable,
    data_dir,
    demo_reply,
    resolve_credential,
    run_chat,
)
from trioagent.event import (
    ReplyEndEvent,
    TextBlockDeltaEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultEndEvent,
    ToolResultTextDeltaEvent,
)
from trioagent.session import SQLiteSessionStore
from trioagent.testing import RecordedRequest


def request(*messages: dict[str, Any]) -> RecordedRequest:
    body = {"messages": list(messages), "stream": True}
    raw = json.dumps(body).encode()
    return RecordedRequest(
        method="POST",
        path="/v1/chat/completions",
        headers={},
        body=body,
        raw_body=raw,
        connection_id=0,
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_demo_echoes_the_human_not_the_injected_reminder() -> None:
    reply = demo_reply(request(user("hello"), user("<system-reminder>now</system-reminder>")))
    assert reply.text == "Echo: hello"


def test_demo_calls_the_clock_tool_and_summarizes_its_result() -> None:
    call = demo_reply(request(user("What TIME is it?")))
    assert [c.name for c in call.tool_calls] == ["get_time"]
    summary = demo_reply(request(user("time?"), {"role": "tool", "content": "12:00"}))
    assert summary.text == "The tool says: 12:00"


def test_demo_tells_a_slow_story() -> None:
    story = demo_reply(request(user("tell me a story")))
    assert story.text.startswith("Once upon a time")
    assert story.chunk_delay > 0


def ev(cls: type, **kwargs: Any) -> Any:
    return cls(reply_id="r", **kwargs)


def test_printer_renders_text_tools_and_ends() -> None:
    out = io.StringIO()
    printer = Printer(out)
    for event in [
        ev(ThinkingBlockStartEvent, block_id="b0"),
        ev(TextBlockDeltaEvent, block_id="b1", delta="Let me "),
        ev(TextBlockDeltaEvent, block_id="b1", delta="check."),
        ev(ToolCallStartEvent, tool_call_id="c1", tool_call_name="get_time"),
        ev(ToolCallDeltaEvent, tool_call_id="c1", delta="{}"),
        ev(ToolCallEndEvent, tool_call_id="c1"),
        ev(ToolResultTextDeltaEvent, tool_call_id="c1", delta="x" * 300),
        ev(ToolResultEndEvent, tool_call_id="c1", state="success"),
        ev(TextBlockDeltaEvent, block_id="b2", delta="Done"),
        ReplyEndEvent(session_id="s", reply_id="r", finished_reason="interrupted"),
    ]:
        printer.show(event)
    lines = out.getvalue().splitlines()
    assert lines[0] == "  (thinking...)"
    assert lines[1] == "agent> Let me check."
    assert lines[2] == "  [tool call] get_time({})"
    assert lines[3].startswith("  [tool result] get_time: success: xxx")
    assert lines[3].endswith("...")
    assert len(lines[3]) < 250
    assert lines[4:] == ["agent> Done", "[interrupted]"]


def test_printer_ends_a_completed_answer_with_a_newline() -> None:
    out = io.StringIO()
    printer = Printer(out)
    printer.show(ev(TextBlockDeltaEvent, block_id="b", delta="Hi"))
    printer.show(ReplyEndEvent(session_id="s", reply_id="r"))
    printer.show(ReplyEndEvent(session_id="s", reply_id="r", finished_reason="exceed_max_iters"))
    assert out.getvalue() == "agent> Hi\n[stopped: too many iterations]\n"


def test_credential_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ChatSetupError, match="names a provider but no model"):
        resolve_credential(ChatOptions(model="openai"))
    with pytest.raises(ChatSetupError, match="no API key for openai:m: set OPENAI_API_KEY"):
        resolve_credential(ChatOptions(model="openai:m"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    spec, credential = resolve_credential(ChatOptions(model="openai:m", base_url="http://h:1/v1"))
    assert spec == "openai:m"
    assert credential.get_base_url() == "http://h:1/v1"
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ChatSetupError, match="set ANTHROPIC_API_KEY"):
        resolve_credential(ChatOptions(model="anthropic:claude-x"))
    with pytest.raises(ChatSetupError, match="unknown provider 'nosuch'"):
        resolve_credential(ChatOptions(model="nosuch:model"))
    with pytest.raises(ChatSetupError, match="invalid base URL 'h:1'"):
        resolve_credential(ChatOptions(model="openai:m", base_url="h:1"))


def test_the_demo_echoes_a_long_message_by_its_length_and_ends() -> None:
    said = "a" * 300 + "THE END"
    reply = demo_reply(request(user(said)))
    assert reply.text == f"Echo: (307 characters) {'a' * 40} ... {said[-40:]}"


async def test_unreachable_server(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ChatSetupError, match="cannot reach the model server"):
        await check_reachable(f"http://127.0.0.1:{port}/v1")


async def test_a_whole_session_from_a_text_stream() -> None:
    out = io.StringIO()
    stdin = io.StringIO("hello\n\nwhat time is it?\n")
    code = await run_chat(ChatOptions(), stdin=stdin, out=out)
    assert code == 0
    text = out.getvalue()
    assert "trioagent chat with the embedded demo model" in text
    assert "you> hello\nagent> Echo: hello\n" in text
    assert "  [tool call] get_time({})" in text
    assert "agent> The tool says:" in text
    assert text.endswith("you> \n")


async def test_a_named_session_continues_across_runs(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    out = io.StringIO()
    code = await run_chat(ChatOptions(session="demo"), stdin=io.StringIO("hello\n"), out=out)
    assert code == 0
    database = tmp_path / "trioagent" / "sessions.sqlite3"
    assert f"session 'demo': new, saved in {database}" in out.getvalue()
    out = io.StringIO()
    await run_chat(ChatOptions(session="demo"), stdin=io.StringIO("again\n"), out=out)
    assert f"session 'demo': 2 messages restored from {database}" in out.getvalue()
    assert "agent> Echo: again" in out.getvalue()
    stored = await SQLiteSessionStore(database).load("demo")
    assert stored is not None
    said = [m.get_text_content() for m in stored.state.context]
    assert said == ["hello", "Echo: hello", "again", "Echo: again"]
    # Another name is another conversation; a bad name is a set-up error.
    out = io.StringIO()
    await run_chat(ChatOptions(session="other"), stdin=io.StringIO(""), out=out)
    assert "session 'other': new" in out.getvalue()
    with pytest.raises(ChatSetupError, match="--session"):
        await run_chat(ChatOptions(session="bad\nname"), stdin=io.StringIO(""), out=out)


def test_the_data_directory_follows_xdg(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert data_dir() == tmp_path / "trioagent"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home" / ".local" / "share" / "trioagent"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert data_dir() == tmp_path / "home" / ".local" / "share" / "trioagent"

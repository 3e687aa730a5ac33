"""``trioagent serve`` (trioagent.cli._serve): the demo agent served in-process, its
confirmation asked over AG-UI, its shutdown, and the command line's set-up errors."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import httpx2
import trio
from web_kit import check_stream, post_run, run_body, text_of

from trioagent.cli._serve import ServeOptions, run_serve


async def test_serve_the_demo_agent_and_shut_down(tmp_path: Path) -> None:
    out = io.StringIO()
    stop = trio.Event()
    options = ServeOptions(port=0, store=str(tmp_path / "threads.sqlite3"))
    async with trio.open_nursery() as nursery:
        url = await nursery.start(
            lambda task_status: run_serve(
                options, out, shutdown_trigger=stop, task_status=task_status
            )
        )
        async with httpx2.AsyncClient(base_url=url, timeout=30) as client:
            page = await client.get("/")
            echo = await post_run(client, run_body("t1", "hello"))
            asked = await post_run(client, run_body("t1", "what time is it?"))
            (interrupt,) = check_stream(asked)["outcome"]["interrupts"]
            denied = [
                {
                    "interruptId": interrupt["id"],
                    "status": "resolved",
                    "payload": {"approved": False},
                }
            ]
            after = await post_run(client, run_body("t1", resume=denied))
        stop.set()
    assert f"trioagent serve: {url}/ (chat page) with the embedded demo model" in out.getvalue()
    assert page.status_code == 200
    assert text_of(echo) == "Echo: hello"
    assert interrupt["reason"] == "tool_confirmation"
    assert interrupt["metadata"]["toolName"] == "get_time"
    assert check_stream(after)["outcome"] == {"type": "success"}
    (result,) = [e for e in after if e["type"] == "TOOL_CALL_RESULT"]
    assert "is denied by user" in result["content"]  # the clock was never read
    assert text_of(after) == f"The tool says: {result['content']}"


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trioagent", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_serve_help_and_a_bad_model_is_a_one_line_error() -> None:
    done = _serve("--help")
    assert done.returncode == 0
    for option in ("--model", "--host", "--port", "--store", "--base-url"):
        assert option in done.stdout
    done = _serve("--model", "nope", "--port", "0")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --model 'nope' has no provider")
    assert "Traceback" not in done.stderr


def test_an_unusable_store_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    done = _serve("--port", "0", "--store", str(tmp_path / "a-file" / "threads.sqlite3"))
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: --store: ")


def test_without_the_web_extra_serve_says_how_to_install_it() -> None:
    hide = "import sys; sys.modules['ag_ui'] = None\n"  # as if ag-ui-protocol were missing
    run = "from trioagent.cli import main; sys.exit(main(['serve', '--port', '0']))"
    done = subprocess.run(
        [sys.executable, "-c", hide + run], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert done.stderr == (
        "error: trioagent serve needs the web extra: pip install 'trioagent[web]' (no ag_ui)\n"
    )

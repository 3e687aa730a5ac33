"""The chat page in a real headless Chromium (the ``browser`` tier: ``just browser``).

``trioagent serve`` runs as a subprocess on the embedded demo model; Playwright's Python
package drives Debian's ``chromium``.  Steps: type a message and see the answer stream, press
Stop mid-stream and see the interrupted answer kept, send the next message, approve a tool
call, reload and see the whole conversation.  A screenshot of each step is saved in the test's
tmp dir (its path is printed).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_kit import served_processes

pytestmark = pytest.mark.browser

NO_CHROMIUM_ENV = "TRIOAGENT_NO_CHROMIUM"
CHROMIUM_ARGS = [
    "--no-sandbox",  # as root in a container
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get(NO_CHROMIUM_ENV):
            pytest.skip(f"chromium could not be installed ({NO_CHROMIUM_ENV} is set by .ci/run)")
        pytest.fail("chromium is not installed: apt-get install chromium (.ci/run installs it)")
    return path


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """``trioagent serve`` on a free port with a fresh SQLite store; yields its URL."""
    with served_processes(str(tmp_path / "threads.sqlite3")) as [(url, _)]:
        yield url


def test_chat_page_stream_stop_continue_approve_reload(server: str, tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    chromium = _chromium()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"screenshots: {shots}")

    def shot(page: Any, name: str) -> None:
        page.screenshot(path=str(shots / f"{name}.png"), full_page=True)

    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 700})
            page.set_default_timeout(20_000)
            page.goto(server + "/")
            shot(page, "01-empty")

            # 1. Type a message and see the answer stream.
            page.fill("#input", "tell me a story")
            page.press("#input", "Enter")
            answer = page.locator(".msg.assistant").last
            page.wait_for_function(
                "() => { const a = document.querySelectorAll('.msg.assistant');"
                " return a.length && a[a.length - 1].textContent.length > 40; }"
            )
            early = answer.text_content() or ""
            page.wait_for_function(
                f"() => document.querySelector('.msg.assistant:last-of-type')"
                f" && [...document.querySelectorAll('.msg.assistant')].pop()"
                f".textContent.length > {len(early) + 20}"
            )
            assert (answer.text_content() or "").startswith(early)  # it grew: streaming
            thought = page.locator(".thinking").first.text_content() or ""
            assert thought.startswith("A story, then")  # the reasoning streamed first
            shot(page, "02-streaming")

            # 2. Stop mid-stream: the interrupted answer stays on the page.
            page.click("#stop")
            page.wait_for_selector(".msg.assistant .interrupted")
            page.wait_for_function("() => document.body.dataset.running === '0'")
            kept = (answer.text_content() or "").removesuffix("[interrupted]")
            assert kept.startswith("Once upon a time")
            assert len(kept) < 900  # cut off, not the whole story
            shot(page, "03-stopped")

            # 3. The next message continues the conversation.
            page.fill("#input", "hello again")
            page.press("#input", "Enter")
            page.wait_for_selector("text=Echo: hello again")
            page.wait_for_function("() => document.body.dataset.running === '0'")
            shot(page, "04-next-message")

            # 4. A tool call asks for confirmation; approve it.
            page.fill("#input", "what time is it?")
            page.press("#input", "Enter")
            page.wait_for_selector(".confirm button.approve")
            assert "get_time" in (page.locator(".confirm").last.text_content() or "")
            shot(page, "05-confirmation")
            page.click(".confirm button.approve")
            page.wait_for_selector("text=The tool says:")
            page.wait_for_function("() => document.body.dataset.running === '0'")
            assert "UTC" in (page.locator(".tool .result").last.text_content() or "")
            shot(page, "06-approved")

            # 5. Reload: the conversation comes back from the server.
            page.reload()
            page.wait_for_selector("text=The tool says:")
            users = page.locator(".msg.user").all_text_contents()
            assert users == ["tell me a story", "hello again", "what time is it?"]
            assert page.locator(".msg.assistant .interrupted").count() == 1
            first_answer = page.locator(".msg.assistant").first.text_content() or ""
            assert first_answer.removesuffix("[interrupted]") == kept
            assert page.locator(".tool .result").count() == 1
            # The rounds keep their order: the call and its result, then the answer.
            texts = page.locator("#log > div").all_text_contents()
            call = next(i for i, t in enumerate(texts) if t.startswith("\u2699 get_time"))
            assert texts[call - 1] == "Let me look at the clock."
            assert texts[call + 1].startswith("The tool says:")
            assert page.locator(".confirm").count() == 0
            assert page.locator(".thinking").count() == 1
            shot(page, "07-reloaded")
        finally:
            browser.close()
    assert sorted(p.name for p in shots.iterdir()) == [
        "01-empty.png",
        "02-streaming.png",
        "03-stopped.png",
        "04-next-message.png",
        "05-confirmation.png",
        "06-approved.png",
        "07-reloaded.png",
    ]

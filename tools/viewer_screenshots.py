"""Take the README's screenshots of the web viewer (docs/images/viewer-*.png).

    python tools/viewer_screenshots.py

Writes the demo conversation (``convostore demo``) and two more sessions into a temporary
database, serves it with ``convostore.web`` on loopback and photographs each page with Debian's
Chromium through Playwright (needs the ``dev`` extra and ``apt-get install -y chromium``).
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvicorn
from playwright.sync_api import sync_playwright

from convostore import Sessions
from convostore.cli import main
from convostore.cli._serve import bind
from convostore.web import create_app

IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def _write(db: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["demo", db]) == 0
    with Sessions.open(db) as store:
        s = store.session("support-4411")
        s.append_message({"id": "q1", "role": "user", "parts": [
            {"type": "text", "text": "My invoice for March shows two charges for the same seat."}]})
        s.append_message({"id": "r1", "role": "assistant", "parts": [
            {"type": "reasoning", "text": "Check the billing events for the account first."},
            {"type": "tool-billing_events", "toolCallId": "call_7", "state": "output-available",
             "input": {"account": "acme", "month": "2026-03"},
             "output": {"events": [{"seat": "s-19", "charge": 49},
                                   {"seat": "s-19", "charge": 49}]}},
            {"type": "text",
             "text": "Seat s-19 was charged twice on March 1st; I have refunded one charge."}]})
        s.append_message({"id": "r1-retry", "role": "assistant", "parts": [
            {"type": "text", "text": "I see two charges for seat s-19 on March 1st. Shall I refund "
                                     "one of them?"}]}, parent_id="q1")
        s.append_message({"id": "q2", "role": "user", "parts": [
            {"type": "text", "text": "Yes, please."}]})
        s.update_info(title="Double charge in March", owner="acme-admin",
                      metadata={"plan": "pro"})
        t = store.session("onboarding")
        t.append_message({"id": "o1", "role": "user", "parts": [
            {"type": "text", "text": "How do I invite my team?"}]})
        t.update_info(title="Inviting the team", owner="new-user-17", metadata={"plan": "free"})


def main_() -> int:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "viewer.db")
        _write(db)
        sock = bind("127.0.0.1", 0)
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        app = create_app(db)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning",
                                               timeout_graceful_shutdown=5))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                page = browser.new_page(viewport={"width": 1100, "height": 760})
                page.goto(base + "/")
                page.screenshot(path=str(IMAGES / "viewer-sessions.png"), full_page=True)
                page.goto(base + "/?q=lock+timeout")
                page.screenshot(path=str(IMAGES / "viewer-search.png"), full_page=True)
                page.goto(base + "/session?id=demo")
                page.wait_for_selector(".live.on")
                page.click("details.originals > summary")
                page.wait_for_selector(".originals-list .msg")
                page.click(".msg[data-id='u2'] .msg-head")
                page.screenshot(path=str(IMAGES / "viewer-conversation.png"), full_page=True)
                page.goto(base + "/session?id=support-4411")
                page.click(".switcher a.prev")
                page.wait_for_selector(".msg[data-id='r1']")
                page.click("details.tool > summary")
                page.click("details.reasoning > summary")
                page.screenshot(path=str(IMAGES / "viewer-tools.png"), full_page=True)
                browser.close()
        finally:
            app.state.stopping.set()
            server.should_exit = True
            thread.join(10)
    print(f"wrote {', '.join(sorted(p.name for p in IMAGES.glob('viewer-*.png')))} to {IMAGES}")
    return 0


if __name__ == "__main__":
    sys.exit(main_())

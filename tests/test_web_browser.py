"""The web viewer in a real browser: Debian's headless Chromium, driven by Playwright, against
the viewer served by uvicorn on loopback (see ``_viewer.py``).

Without Chromium or Playwright these tests skip, saying why; in CI (``CI=true``) they fail.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _helpers import text
from _viewer import browser, serving

from convostore import Sessions
from convostore.cli import main

pytest.importorskip("starlette", reason="the viewer needs the web extra: pip install -e '.[dev]'")

from convostore.web import create_app  # noqa: E402

pytestmark = pytest.mark.browser  # a tier of its own: python -m pytest -m "slow or browser"

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Dialog, Page

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEklEQVR4nGP4z8DAwMDAxMDAAAAYHgEB"
    "DkUJ5gAAAABJRU5ErkJggg=="
)
HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)"><b onmouseover=alert(2)>'
JS_URL = "javascript:alert(document.domain)"
TIMEOUT = 20_000  # ms a selector may take to appear (the machine may be busy)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with browser() as b:
        yield b


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": 1100, "height": 800})
    context.set_default_timeout(TIMEOUT)
    dialogs: list[str] = []
    p = context.new_page()

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    p.on("dialog", on_dialog)
    yield p
    context.close()
    assert dialogs == [], f"a dialog opened: {dialogs}"


@pytest.fixture
def demo(tmp_path: Path) -> str:
    db = str(tmp_path / "demo.db")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["demo", db]) == 0
    return db


def _ids(page: Page, selector: str) -> list[str]:
    """The message ids of the elements ``selector`` finds, in document order."""
    found = page.locator(selector).evaluate_all("els => els.map(e => e.dataset.id)")
    return [str(x) for x in found]


def _url(base: str, path: str, **params: str) -> str:
    return f"{base}{path}?{urllib.parse.urlencode(params)}"


def test_sessions_page_lists_the_demo_store(page: Page, demo: str) -> None:
    with serving(create_app(demo)) as base:
        page.goto(base + "/")
        assert page.locator("a.session-link").all_inner_texts() == ["demo"]
        page.click("a.session-link")
        page.wait_for_selector(".msg[data-id='a5']")
        assert "/session?id=demo" in page.url


def test_search_finds_a_message_and_the_link_opens_it(page: Page, demo: str) -> None:
    with serving(create_app(demo)) as base:
        page.goto(base + "/")
        page.fill("input[name=q]", "orders index")
        page.press("input[name=q]", "Enter")
        hit = page.locator(".hit-link").first
        assert "orders" in hit.locator("mark").all_inner_texts()[0].lower()
        target = hit.get_attribute("href")
        assert target is not None
        message_id = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)["leaf_id"][0]
        hit.click()
        shown = page.locator(f".msg[data-id='{message_id}']")
        shown.wait_for()
        assert shown.is_visible()
        assert page.evaluate("document.querySelector(':target').dataset.id") == message_id


def test_an_overlay_expands_to_its_originals(page: Page, demo: str) -> None:
    with Sessions.open(demo) as store:
        (record,) = store.session("demo").get_compactions()
        raw = [r.id for r in store.session("demo").get_history_row_stats(record.to_message_id)]
    spanned = raw[raw.index(record.from_message_id):]
    with serving(create_app(demo)) as base:
        page.goto(_url(base, "/session", id="demo"))
        assert page.locator(".originals-list .msg").count() == 0
        page.click("details.originals > summary")
        page.wait_for_selector(".originals-list .msg")
        assert _ids(page, ".originals-list .msg") == spanned


def test_an_image_renders(page: Page, tmp_path: Path) -> None:
    db = str(tmp_path / "image.db")
    with Sessions.open(db) as store:
        store.session("s").append_message({"id": "pic", "role": "user", "parts": [
            {"type": "text", "text": "the chart"},
            {"type": "file", "mediaType": "image/png", "filename": "chart.png",
             "url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
        ]})
    with serving(create_app(db)) as base:
        page.goto(_url(base, "/session", id="s"))
        image = page.locator(".msg[data-id='pic'] figure.image img")
        image.wait_for()
        # decode() waits for the bytes and fails on an image the browser cannot draw
        assert image.evaluate("img => img.decode().then(() => img.naturalWidth)") == 4


def test_the_branch_switcher_changes_the_history(page: Page, tmp_path: Path) -> None:
    db = str(tmp_path / "branches.db")
    with Sessions.open(db) as store:
        s = store.session("s")
        s.append_message(text("q", "which colour?"))
        s.append_message(text("a1", "red", "assistant"))
        s.append_message(text("q1", "why red?"))
        s.append_message(text("a2", "blue", "assistant"), parent_id="q")
    with serving(create_app(db)) as base:
        page.goto(_url(base, "/session", id="s"))
        assert _ids(page, ".msg") == [
            "q", "a2"]
        assert page.inner_text(".msg[data-id='a2'] .switcher .pos") == "2 of 2"
        page.click(".msg[data-id='a2'] .switcher a.prev")
        page.wait_for_selector(".msg[data-id='q1']")
        assert _ids(page, ".msg") == [
            "q", "a1", "q1"]
        assert page.inner_text(".msg[data-id='a1'] .switcher .pos") == "1 of 2"
        assert "leaf_id=q1" in page.url


def test_older_messages_load_on_demand(page: Page, tmp_path: Path) -> None:
    db = str(tmp_path / "long.db")
    with Sessions.open(db) as store:
        for i in range(70):
            store.session("s").append_message(text(f"m{i}", f"message {i}"))
    with serving(create_app(db, page_size=30)) as base:
        page.goto(_url(base, "/session", id="s"))
        assert page.locator(".msg").count() == 30
        page.click("button.load-older")
        page.wait_for_selector(".msg[data-id='m10']")
        page.click("button.load-older")
        page.wait_for_selector(".msg[data-id='m0']")
        ids = _ids(page, ".msg")
        assert ids == [f"m{i}" for i in range(70)]
        assert page.locator("p.start").is_visible()


@pytest.mark.requires("shared_across_processes")
def test_a_message_written_by_another_process_appears(page: Page, backend_spec: Any) -> None:
    with Sessions.open(backend_spec.url, **backend_spec.options) as store:
        store.session("live").append_message(text("first", "before the page opened"))
        with serving(create_app(store, live_interval=0.2)) as base:
            page.goto(_url(base, "/session", id="live"))
            page.wait_for_selector("#live-status.on")
            page.evaluate("window.notReloaded = true")
            writer = ("import json, sys\nfrom convostore import Sessions\n"
                      "with Sessions.open(sys.argv[1], **json.loads(sys.argv[2])) as store:\n"
                      "    store.session('live').append_message({'id': 'elsewhere', "
                      "'role': 'assistant', 'parts': [{'type': 'text', 'text': 'hello from "
                      "another process'}]})\n")
            subprocess.run([sys.executable, "-c", writer, backend_spec.url,
                            json.dumps(backend_spec.options)], check=True, timeout=60)
            page.wait_for_selector(".msg[data-id='elsewhere']")
            assert page.inner_text(".msg[data-id='elsewhere'] .text") == (
                "hello from another process")
            assert page.locator(".msg").count() == 2
            assert page.evaluate("window.notReloaded") is True  # the same page, not reloaded


def _hostile(db: str) -> str:
    sid = f'"><script>alert(3)</script>{JS_URL}'
    html = base64.b64encode(b"<script>alert(4)</script>").decode()
    svg = base64.b64encode(b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(5)"/>').decode()
    with Sessions.open(db) as store:
        s = store.session(sid)
        s.append_message({"id": HOSTILE, "role": "user", "parts": [
            {"type": "text", "text": HOSTILE},
            {"type": "source-url", "url": JS_URL, "title": HOSTILE},
        ]})
        s.append_message({"id": JS_URL, "role": "assistant", "parts": [
            {"type": f"tool-{HOSTILE}", "toolCallId": HOSTILE, "state": "output-available",
             "input": {"q": HOSTILE}, "output": {"html": HOSTILE}},
            {"type": "file", "mediaType": "text/html", "filename": HOSTILE,
             "url": "data:text/html;base64," + html},
            {"type": "file", "mediaType": "image/svg+xml", "filename": "x.svg",
             "url": "data:image/svg+xml;base64," + svg},
            {"type": "file", "mediaType": "image/png", "filename": "js.png", "url": JS_URL},
            {"type": "text", "text": f"see {JS_URL} and search xsscheck"},
        ]})
    return sid


_INJECTED = """() => ({
  inlineScripts: document.querySelectorAll('script:not([src])').length,
  handlers: [...document.querySelectorAll('*')].filter(
      e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
  jsLinks: [...document.querySelectorAll('[href],[src]')].filter(
      e => /^\\s*javascript:/i.test(e.getAttribute('href') || e.getAttribute('src') || '')).length,
  bold: document.querySelectorAll('main b').length,
})"""


def test_hostile_content_renders_as_text(page: Page, tmp_path: Path) -> None:
    db = str(tmp_path / "xss.db")
    sid = _hostile(db)
    clean = {"inlineScripts": 0, "handlers": 0, "jsLinks": 0, "bold": 0}
    with serving(create_app(db)) as base:
        page.goto(base + "/")
        assert page.locator("a.session-link").inner_text() == sid
        assert page.evaluate(_INJECTED) == clean
        page.goto(_url(base, "/", q="xsscheck"))
        assert JS_URL in page.inner_text(".hit-text")
        assert page.evaluate(_INJECTED) == clean
        page.click(".hit-link")
        page.wait_for_selector(".msg .text")
        page.goto(_url(base, "/session", id=sid))
        for summary in page.locator("details > summary").all():
            summary.click()
        texts = page.locator(".msg .text").all_inner_texts()
        assert HOSTILE in texts and f"see {JS_URL} and search xsscheck" in texts
        assert HOSTILE in page.inner_text(".tool-name")
        assert page.evaluate(_INJECTED) == clean
        assert page.locator("figure.image").count() == 0  # no SVG, HTML or js: "image"
        with page.expect_download() as html_download:
            page.click(".file a.download >> nth=0")
        assert "/attachment?" in html_download.value.url
        with page.expect_download() as svg_download:
            page.click(".file a.download >> nth=1")
        assert svg_download.value.suggested_filename == "x.svg"
        assert page.url == _url(base, "/session", id=sid)  # still the page: nothing rendered

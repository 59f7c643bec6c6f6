"""The web viewer's test harness: a real uvicorn server on loopback, and a real Chromium.

- :func:`serving` runs ``convostore.web.create_app`` under uvicorn in a thread, on a port the
  kernel picks, and stops it afterwards.
- :func:`browser` launches Debian's Chromium through Playwright (never a downloaded browser).
  Without Chromium or Playwright the browser tests skip, saying why, except in CI (``CI=true``),
  where a missing browser fails them.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 and a free port; yields the base URL (no trailing slash)."""
    import uvicorn

    from convostore.cli._serve import bind

    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(500):  # until the server has started (or died trying)
            if server.started or not thread.is_alive():
                break
            time.sleep(0.01)
        assert server.started, "the viewer did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        app.state.stopping.set()  # open live streams end within their poll interval
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _missing() -> str | None:
    """Why no browser can run here, or None when one can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install -e '.[dev]')"
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    return None


@contextmanager
def browser() -> Iterator[Any]:
    """A headless Chromium (Playwright ``Browser``), closed afterwards."""
    problem = _missing()
    if problem is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI needs the browser tests: {problem}")
        pytest.skip(problem)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()

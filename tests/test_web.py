"""The web viewer (issue 23) through its HTTP interface: routes, paging, headers, escaping.

Starlette's TestClient drives ``convostore.web.create_app`` over a real store on every backend
(``viewer`` below); nothing is mocked. What a browser does with the pages (scripts, the live
stream, images) is tested in test_web_browser.py.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _helpers import text

from convostore import Sessions
from convostore.cli import main

_DEV = "pip install -e '.[dev]'"
pytest.importorskip("starlette", reason=f"the viewer needs the web extra ({_DEV})")
pytest.importorskip("httpx2", reason=f"Starlette's TestClient needs httpx2 ({_DEV})")

from starlette.testclient import TestClient  # noqa: E402

from convostore.web import create_app  # noqa: E402

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)">'
JS_URL = "javascript:alert(document.domain)"


@pytest.fixture
def viewer_store(backend_spec: Any) -> Iterator[Sessions]:
    """A store on the backend under test (the viewer takes a sync ``Sessions``)."""
    with Sessions.open(backend_spec.url, **backend_spec.options) as store:
        yield store


def client(store: Sessions, **options: Any) -> TestClient:
    return TestClient(create_app(store, **options), base_url="http://127.0.0.1")


def ids_on(html: str) -> list[str]:
    """The message ids a page or fragment shows, in document order."""
    return [json.loads(f'"{m}"') for m in re.findall(r'<li class="msg[^"]*" id="m-[^"]*" '
                                                      r'data-id="([^"]*)"', html)]


def chain(store: Sessions, sid: str, n: int, prefix: str = "m") -> None:
    session = store.session(sid)
    for i in range(n):
        session.append_message(text(f"{prefix}{i}", f"message number {i}",
                                    "user" if i % 2 == 0 else "assistant"))


# --- the sessions page ---------------------------------------------------------------------


def test_sessions_page_lists_sessions_newest_first(viewer_store: Sessions) -> None:
    viewer_store.session("b-newer").import_message(text("x", "hi"), created_at=2_000)
    viewer_store.session("c-older").import_message(text("x", "hi"), created_at=1_000)
    viewer_store.session("a-newest").import_message(text("x", "hi"), created_at=3_000)
    with client(viewer_store) as c:
        page = c.get("/")
    assert page.status_code == 200
    found = re.findall(r'class="session-link" href="/session\?id=([^"]+)"', page.text)
    assert found == ["a-newest", "b-newer", "c-older"]


def test_sessions_page_is_paged(viewer_store: Sessions) -> None:
    for i in range(53):
        viewer_store.session(f"s{i:02}").append_message(text("a", "hi"))
    viewer_store.session("other").update_info(owner="someone else")
    for i in range(53):
        viewer_store.session(f"s{i:02}").update_info(owner="u", metadata={"k": "v", "n": 1})
    with client(viewer_store) as c:
        first = c.get("/", params={"owner": "u", "meta": ["k=v", "n=1"]})
        older = re.search(r'rel="next" href="([^"]+)"', first.text)
        assert older is not None
        assert urllib.parse.parse_qs(urllib.parse.urlsplit(older.group(1)).query.replace(
            "&amp;", "&"))["meta"] == ["k=v", "n=1"]
        second = c.get(older.group(1).replace("&amp;", "&"))
    listed = [re.findall(r'class="session-link" href="/session\?id=([^"]+)"', page.text)
              for page in (first, second)]
    assert [len(names) for names in listed] == [50, 3]
    assert sorted(listed[0] + listed[1]) == [f"s{i:02}" for i in range(53)]
    assert 'rel="next"' not in second.text
    assert 'rel="first" href="/?owner=u&amp;meta=k%3Dv&amp;meta=n%3D1"' in second.text


def test_sessions_page_shows_the_directory_and_filters_it(viewer_store: Sessions) -> None:
    """Owner and metadata ``key=value`` filters (a JSON value or plain text), kept by the
    pager; titles and owners shown; filter values are escaped in the form."""
    described: list[tuple[str, str, dict[str, Any]]] = [
        ("a", "u1", {"plan": "pro", "n": 3}), ("b", "u1", {"plan": "free"}),
        ("c", "u2", {"plan": "pro"}), ("d", HOSTILE, {"plan": HOSTILE})]
    for sid, owner, meta in described:
        session = viewer_store.session(sid)
        session.append_message(text("x", "hi"))
        session.update_info(title=f"chat {sid}", owner=owner, metadata=meta)

    def listed(**params: Any) -> list[str]:
        page = c.get("/", params=params)
        assert page.status_code == 200
        return sorted(re.findall(r'class="session-link" href="/session\?id=([^"]+)"', page.text))

    with client(viewer_store) as c:
        assert listed() == ["a", "b", "c", "d"]
        assert listed(owner="u1") == ["a", "b"]
        assert listed(meta="plan=pro") == ["a", "c"]
        assert listed(owner="u1", meta=["plan=pro", "n=3"]) == ["a"]
        assert listed(meta='n="3"') == []  # the string "3" is not the number 3
        assert listed(owner=HOSTILE, meta=f"plan={HOSTILE}") == ["d"]
        html = c.get("/", params={"owner": HOSTILE, "meta": f"plan={HOSTILE}"}).text
        everything = c.get("/").text
        bad = c.get("/", params={"meta": "no equals sign"})
        assert listed(meta="n=3.0") == ["a"]  # numbers by value, on every engine
        huge = c.get("/", params={"meta": "n=" + "9" * 400})  # no engine binds it
        nul = c.get("/", params={"meta": "plan=a\x00b"})
    assert huge.status_code == 400 and "metadata[&#39;n&#39;]" in huge.text
    assert nul.status_code == 400 and "NUL" in nul.text
    assert '<td class="title">chat a</td>' in everything
    assert '<td class="owner">u1</td>' in everything
    assert "<script>alert" not in html and "<script>alert" not in everything
    assert ('name="owner" value="&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x '
            'onerror=&#34;alert(1)&#34;&gt;"') in html
    assert 'name="meta" value="plan=&lt;script&gt;' in html
    assert bad.status_code == 400 and "key=value" in bad.text


def test_search_highlights_hits_and_links_to_the_message(viewer_store: Sessions) -> None:
    chain(viewer_store, "s", 3)
    viewer_store.session("s").append_message(
        text("hit", "the deploy failed: <b>lock</b> timeout & retry"))
    with client(viewer_store) as c:
        page = c.get("/", params={"q": "lock timeout"})
    assert page.status_code == 200
    assert ("the deploy failed: &lt;b&gt;<mark>lock</mark>&lt;/b&gt; <mark>timeout</mark> "
            "&amp; retry") in page.text
    assert 'href="/session?id=s&amp;leaf_id=hit#m-hit"' in page.text


def test_search_marks_words_without_breaking_escapes(viewer_store: Sessions) -> None:
    """Marks go around escaped text: a query word that is part of an entity name (``lt``,
    ``amp``, ``quot``) never splits an entity."""
    viewer_store.session("s").append_message(text("x", 'lt amp quot < & " lt'))
    with client(viewer_store) as c:
        page = c.get("/", params={"q": "lt amp quot"})
    assert ('<mark>lt</mark> <mark>amp</mark> <mark>quot</mark> &lt; &amp; &#34; <mark>lt</mark>'
            in page.text)


# --- the conversation page -----------------------------------------------------------------


def test_conversation_shows_the_newest_page_and_older_pages_on_demand(
    viewer_store: Sessions,
) -> None:
    chain(viewer_store, "s", 75)
    with client(viewer_store, page_size=30) as c:
        page = c.get("/session", params={"id": "s"})
        assert ids_on(page.text) == [f"m{i}" for i in range(45, 75)]
        older = re.search(r'data-older="([^"]+)"', page.text)
        assert older is not None
        second = c.get(older.group(1).replace("&amp;", "&")).json()
        assert ids_on(second["html"]) == [f"m{i}" for i in range(15, 45)]
        third = c.get(second["older"]).json()
    assert ids_on(third["html"]) == [f"m{i}" for i in range(15)]
    assert third["older"] is None


def test_older_pages_continue_across_a_compaction_summary(viewer_store: Sessions) -> None:
    chain(viewer_store, "s", 20)
    session = viewer_store.session("s")
    record = session.add_compaction("summary of m5..m14", "m5", "m14")
    summary = "compaction_" + record.id
    with client(viewer_store, page_size=4) as c:
        shown: list[str] = []
        url: str | None = "/session/older?" + urllib.parse.urlencode({"id": "s"})
        while url is not None:
            batch = c.get(url).json()
            shown = ids_on(batch["html"]) + shown
            url = batch["older"]
    assert shown == [m["id"] for m in session.get_history()]
    assert summary in shown and "m7" not in shown


def test_a_compaction_summary_expands_to_its_originals(viewer_store: Sessions) -> None:
    chain(viewer_store, "s", 10)
    record = viewer_store.session("s").add_compaction("a summary", "m2", "m6")
    with client(viewer_store, page_size=3) as c:
        page = c.get("/session", params={"id": "s", "leaf_id": "m9"})
        assert ids_on(page.text) == ["compaction_" + record.id, "m7", "m8", "m9"][-3:]
        first = c.get("/session/originals",
                      params={"id": "s", "compaction": "compaction_" + record.id}).json()
        rest = c.get(first["more"]).json()
        unknown = c.get("/session/originals", params={"id": "s", "compaction": "compaction_x"})
    originals = re.findall(r'id="o-([^"]+)"', first["html"] + rest["html"])
    assert originals == ["m2", "m3", "m4", "m5", "m6"]
    assert first["total"] == 5 and rest["more"] is None
    assert unknown.status_code == 404


def test_branch_switcher_at_each_fork(viewer_store: Sessions) -> None:
    session = viewer_store.session("s")
    session.append_message(text("q", "question"))
    session.append_message(text("a1", "first answer", "assistant"))
    session.append_message(text("a1-next", "follow-up"))
    session.append_message(text("a2", "second answer", "assistant"), parent_id="q")
    session.append_message(text("a3", "third answer", "assistant"), parent_id="q")
    with client(viewer_store) as c:
        active = c.get("/session", params={"id": "s"})
        switch = c.get("/session/branch", params={"id": "s", "message": "a1"},
                       follow_redirects=False)
        branch = c.get(switch.headers["location"])
    assert ids_on(active.text) == ["q", "a3"]
    assert '<span class="pos">3 of 3</span>' in active.text
    assert 'href="/session/branch?id=s&amp;message=a2"' in active.text
    assert switch.status_code == 303
    assert switch.headers["location"] == "/session?id=s&leaf_id=a1-next#m-a1"
    assert ids_on(branch.text) == ["q", "a1", "a1-next"]
    assert '<span class="pos">1 of 3</span>' in branch.text


def test_roots_are_siblings_too(viewer_store: Sessions) -> None:
    session = viewer_store.session("s")
    session.append_message(text("r1", "one"))
    session.append_message(text("r2", "two"), parent_id=None)
    with client(viewer_store) as c:
        page = c.get("/session", params={"id": "s"})
    assert ids_on(page.text) == ["r2"]
    assert '<span class="pos">2 of 2</span>' in page.text


def test_parts_render_as_blocks(viewer_store: Sessions) -> None:
    viewer_store.session("s").append_message({"id": "a", "role": "assistant", "parts": [
        {"type": "reasoning", "text": "thinking it over"},
        {"type": "tool-lookup", "toolCallId": "c1", "state": "output-available",
         "input": {"q": "x"}, "output": {"rows": [1, 2]}},
        {"type": "text", "text": "done"},
    ]})
    with client(viewer_store) as c:
        html = c.get("/session", params={"id": "s"}).text
    assert '<details class="reasoning"><summary>Reasoning</summary>' in html
    assert '<span class="tool-name">lookup</span>' in html
    assert '<pre class="json">{\n  &#34;rows&#34;: [\n    1,\n    2\n  ]\n}</pre>' in html
    assert "≈ " in html and "tokens on this path" in html


def test_unknown_session_and_bad_ids(viewer_store: Sessions) -> None:
    with client(viewer_store) as c:
        assert c.get("/session", params={"id": "nobody"}).status_code == 404
        chain(viewer_store, "s", 1)
        assert c.get("/session", params={"id": "s", "leaf_id": "nothing"}).status_code == 404
        assert c.get("/session", params={"id": "x" * 2000}).status_code == 400
        assert c.get("/session/branch", params={"id": "s"}).status_code == 400


def test_each_message_shows_its_stored_time(viewer_store: Sessions) -> None:
    session = viewer_store.session("s")
    session.import_message(text("first", "hidden by a summary"), created_at=1_000)
    session.import_message(text("old", "imported"), created_at=1_700_000_000_000,
                           parent_id="first")
    session.import_message(text("new", "later"), created_at=1_700_000_061_500, parent_id="old")
    record = session.add_compaction("sum", "first", "first")
    with client(viewer_store) as c:
        html = c.get("/session", params={"id": "s"}).text
    assert ids_on(html) == ["compaction_" + record.id, "old", "new"]
    for stamp in ("2023-11-14T22:13:20Z", "2023-11-14T22:14:21Z"):
        assert f'<time class="at" datetime="{stamp}">{stamp}</time>' in html
    summary_time = re.search(r'id="m-compaction_[^"]*".*?<time class="at" datetime="([^"]+)"',
                             html, re.S)
    assert summary_time is not None and summary_time.group(1).endswith("Z")


# --- attachments ---------------------------------------------------------------------------


def _files(store: Sessions) -> None:
    png = "data:image/png;base64," + base64.b64encode(PNG).decode()
    html = "data:text/html;base64," + base64.b64encode(b"<script>alert(1)</script>").decode()
    svg = "data:image/svg+xml;base64," + base64.b64encode(
        b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>').decode()
    store.session("f").append_message({"id": "files", "role": "user", "parts": [
        {"type": "file", "mediaType": "image/png", "filename": "chart.png", "url": png},
        {"type": "file", "mediaType": "text/html", "filename": 'a"b\r\nX-Evil: 1.html',
         "url": html},
        {"type": "file", "mediaType": "image/svg+xml", "filename": "logo.svg", "url": svg},
        {"type": "file", "mediaType": "image/png", "url": JS_URL},
    ]})


def test_an_image_is_served_inline_from_its_payload(viewer_store: Sessions) -> None:
    _files(viewer_store)
    with client(viewer_store) as c:
        html = c.get("/session", params={"id": "f"}).text
        image = c.get("/attachment", params={"id": "f", "message": "files", "part": 0})
    assert '<img src="/attachment?id=f&amp;message=files&amp;part=0"' in html
    assert image.status_code == 200 and image.content == PNG
    assert image.headers["content-type"] == "image/png"
    assert image.headers["x-content-type-options"] == "nosniff"
    assert image.headers["content-disposition"].startswith("inline")


@pytest.mark.parametrize("part", [1, 2])
def test_html_and_svg_files_only_download(viewer_store: Sessions, part: int) -> None:
    _files(viewer_store)
    with client(viewer_store) as c:
        html = c.get("/session", params={"id": "f"}).text
        served = c.get("/attachment", params={"id": "f", "message": "files", "part": part})
    assert f'<img src="/attachment?id=f&amp;message=files&amp;part={part}"' not in html
    assert served.status_code == 200
    assert served.headers["content-type"].split(";")[0] in ("text/html", "image/svg+xml")
    assert served.headers["content-disposition"].startswith("attachment")
    assert "sandbox" in served.headers["content-security-policy"]
    assert served.headers["x-content-type-options"] == "nosniff"
    assert "x-evil" not in served.headers


def test_a_javascript_url_in_a_file_part_is_text(viewer_store: Sessions) -> None:
    _files(viewer_store)
    with client(viewer_store) as c:
        html = c.get("/session", params={"id": "f"}).text
        served = c.get("/attachment", params={"id": "f", "message": "files", "part": 3})
    assert 'href="javascript:' not in html and 'src="javascript:' not in html
    assert '<code class="url">javascript:alert(document.domain)</code>' in html
    assert served.status_code == 404


# --- hostile content -----------------------------------------------------------------------


def _hostile(store: Sessions) -> str:
    sid = f'"><script>alert(1)</script>{HOSTILE}'
    session = store.session(sid)
    session.append_message({"id": HOSTILE, "role": "<b>user</b>", "parts": [
        {"type": "text", "text": HOSTILE},
        {"type": "source-url", "url": JS_URL, "title": HOSTILE},
        {"type": f"tool-{HOSTILE}", "toolCallId": HOSTILE, "state": HOSTILE,
         "input": {HOSTILE: HOSTILE}, "output": HOSTILE},
        {"type": "file", "mediaType": HOSTILE, "filename": HOSTILE,
         "url": "data:text/html," + urllib.parse.quote("<script>alert(1)</script>")},
    ], "metadata": {"note": HOSTILE}})
    session.append_message(text(JS_URL, HOSTILE, "assistant"), parent_id=None)
    return sid


def test_hostile_strings_render_as_text(viewer_store: Sessions) -> None:
    sid = _hostile(viewer_store)
    with client(viewer_store) as c:
        pages = [
            c.get("/").text,
            c.get("/", params={"q": "alert script"}).text,
            c.get("/session", params={"id": sid}).text,
            c.get("/session", params={"id": sid, "leaf_id": HOSTILE}).text,
        ]
    for html in pages:
        assert "<script>alert" not in html and "<img src=x" not in html
        assert 'onerror="' not in html and "<b>user" not in html
        assert 'href="javascript:' not in html
        scripts = re.findall(r"<script[^>]*>", html)
        assert scripts == ['<script src="/static/viewer.js" defer>']
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=" in pages[2]


def test_lone_surrogates_show_as_escapes(viewer_store: Sessions) -> None:
    """Stored text may hold lone surrogates (they round-trip); pages cannot carry them in UTF-8,
    so they show as ``\\udXXX``, in text, tool output and file names alike."""
    viewer_store.session("s").append_message({"id": "x", "role": "user", "parts": [
        {"type": "text", "text": "broken \ud800 pair"},
        {"type": "tool-t", "toolCallId": "c", "state": "output-available", "input": {},
         "output": {"k": "\udfff"}},
        {"type": "file", "mediaType": "text/plain", "filename": "a\ud800.txt",
         "url": "data:text/plain,hello"},
    ]})
    viewer_store.session("s").append_message(text("y", "later \udc00 text"))
    with client(viewer_store) as c:
        page = c.get("/session", params={"id": "s"})
        older = c.get("/session/older", params={"id": "s", "before": "y"})
        served = c.get("/attachment", params={"id": "s", "message": "x", "part": 2})
    assert page.status_code == 200 and "broken \\ud800 pair" in page.text
    assert '"k": "\\udfff"' in page.text.replace("&#34;", '"')
    assert older.status_code == 200 and "\\ud800" in older.json()["html"]
    assert served.status_code == 200 and served.content == b"hello"
    assert "filename*=UTF-8''a%3F.txt" in served.headers["content-disposition"]


def test_pages_carry_a_strict_content_security_policy(viewer_store: Sessions) -> None:
    chain(viewer_store, "s", 1)
    with client(viewer_store) as c:
        for path in ("/", "/session?id=s", "/static/viewer.js"):
            headers = c.get(path).headers
            csp = headers["content-security-policy"]
            assert "script-src 'self'" in csp and "default-src 'none'" in csp
            assert "unsafe-inline" not in csp
            assert headers["x-content-type-options"] == "nosniff"


def test_other_host_names_are_refused(viewer_store: Sessions) -> None:
    """A page on another site cannot reach the viewer through a name it controls (DNS
    rebinding): only loopback names are answered unless the app is told otherwise."""
    chain(viewer_store, "s", 1)
    app = create_app(viewer_store)
    with TestClient(app, base_url="http://attacker.example") as c:
        assert c.get("/").status_code == 400
    with TestClient(app, base_url="http://localhost:8765") as c:
        assert c.get("/").status_code == 200
    with TestClient(create_app(viewer_store, allowed_hosts=None),
                    base_url="http://attacker.example") as c:
        assert c.get("/").status_code == 200


def test_the_viewer_writes_nothing(viewer_store: Sessions) -> None:
    """Every page of a store leaves its messages, compactions and sessions as they were."""
    chain(viewer_store, "s", 12)
    viewer_store.session("s").add_compaction("sum", "m1", "m4")
    viewer_store.build_search_index()
    before = viewer_store.storage_stats()
    with client(viewer_store, page_size=5) as c:
        for path in ("/", "/?q=number", "/session?id=s", "/session/older?id=s&before=m7",
                     "/session/branch?id=s&message=m3"):
            assert c.get(path).status_code in (200, 303)
    assert viewer_store.storage_stats() == before


# --- live ----------------------------------------------------------------------------------


def test_the_event_stream_sends_messages_newer_than_the_page(viewer_store: Sessions) -> None:
    chain(viewer_store, "s", 3)
    viewer_store.session("s").append_message(text("late", "written after the page loaded"))
    with client(viewer_store, live_interval=0.05) as c, c.stream(
        "GET", "/session/events", params={"id": "s", "after": "m2"}
    ) as stream:
        lines: list[str] = []
        for line in stream.iter_lines():
            lines.append(line)
            if line.startswith("data:"):
                break
    assert "event: messages" in lines
    (event_id,) = [json.loads(line[len("id:"):]) for line in lines if line.startswith("id:")]
    assert event_id[1] == "late"  # [change cursor, last message]: where a reconnect resumes
    batch = json.loads(lines[-1][len("data:"):])
    assert ids_on(batch["html"]) == ["late"] and batch["last"] == "late"


def test_the_event_stream_follows_the_change_feed(viewer_store: Sessions) -> None:
    """A stream opened at a change cursor sends a message committed after it (the watch
    wakes on the commit), then ends with ``reset`` when a shown message is edited."""
    chain(viewer_store, "s", 2)
    since = viewer_store.change_cursor()
    session = viewer_store.session("s")
    with client(viewer_store, live_interval=0.05) as c, c.stream(
        "GET", "/session/events", params={"id": "s", "after": "m1", "since": str(since)}
    ) as stream:
        lines = stream.iter_lines()
        caught_up = next(line for line in lines if line.startswith("id:"))  # nothing new yet
        assert json.loads(caught_up[len("id:"):]) == [since, "m1"]
        session.append_message(text("fresh", "written while the page was open"))
        got: list[str] = []
        for line in lines:
            got.append(line)
            if line.startswith("data:"):
                break
        session.update_message(text("fresh", "edited"))
        rest: list[str] = []
        for line in lines:
            rest.append(line)
            if line.startswith("data:"):
                break
    assert "event: messages" in got
    ids = [json.loads(line[len("id:"):]) for line in got if line.startswith("id:")]
    assert ids[-1][1] == "fresh" and ids[-1][0] > since
    assert ids_on(json.loads(got[-1][len("data:"):])["html"]) == ["fresh"]
    assert "event: reset" in rest and "edited" in rest[-1]


def test_an_event_stream_resumes_from_last_event_id(viewer_store: Sessions) -> None:
    chain(viewer_store, "s", 3)
    cursor = viewer_store.change_cursor()
    with client(viewer_store, live_interval=0.05) as c, c.stream(
        "GET", "/session/events", params={"id": "s", "after": "m0"},
        headers={"Last-Event-ID": json.dumps([cursor, "m1"])},
    ) as stream:
        lines: list[str] = []
        for line in stream.iter_lines():
            lines.append(line)
            if line.startswith("data:"):
                break
    assert ids_on(json.loads(lines[-1][len("data:"):])["html"]) == ["m2"]


# --- the command ---------------------------------------------------------------------------


def test_serve_listens_on_loopback_and_says_so(tmp_path: Path) -> None:
    db = str(tmp_path / "demo.db")
    assert main(["demo", db]) == 0
    proc = subprocess.Popen([sys.executable, "-m", "convostore", "serve", db, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        second = proc.stdout.readline()
        url = re.search(r"at (http://127\.0\.0\.1:\d+/) \(read-only", first)
        assert url is not None, first
        assert "only this machine can connect" in second
        with urllib.request.urlopen(url.group(1)) as response:
            assert b'href="/session?id=demo"' in response.read()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_serve_stops_on_ctrl_c_while_a_page_is_live(tmp_path: Path) -> None:
    """Ctrl-C ends the open live streams, so the server stops at once and quietly."""
    db = str(tmp_path / "demo.db")
    assert main(["demo", db]) == 0
    proc = subprocess.Popen([sys.executable, "-m", "convostore", "serve", db, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
    assert found is not None
    conn = http.client.HTTPConnection("127.0.0.1", int(found.group(1)), timeout=30)
    try:
        conn.request("GET", "/session/events?id=demo&after=a5")
        stream = conn.getresponse()
        assert stream.status == 200 and stream.readline().startswith(b"retry:")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        conn.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err  # the command line's exit code for Ctrl-C
    assert "Traceback" not in err and "ERROR" not in err, err


def test_serve_warns_when_told_to_listen_beyond_loopback(tmp_path: Path) -> None:
    db = str(tmp_path / "demo.db")
    assert main(["demo", db]) == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "convostore", "serve", db, "--host", "0.0.0.0", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        warning = proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert warning.startswith("convostore serve: warning: listening on 0.0.0.0: anyone who "
                              "can reach this machine")


def test_serve_refuses_a_path_without_a_store(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nothing.db"
    assert main(["serve", str(missing)]) == 1
    assert capsys.readouterr().err == f"convostore: error: no convostore data at {missing}\n"
    assert not missing.exists()


def test_the_command_line_imports_no_web_stack() -> None:
    code = ("import sys, convostore.cli; "
            "print(sorted({'starlette', 'uvicorn', 'jinja2'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_serve_without_the_web_extra_names_it(tmp_path: Path) -> None:
    """Without the extra (its import made to fail), one error line says what to install."""
    db = str(tmp_path / "demo.db")
    assert main(["demo", db]) == 0
    code = ("import sys; sys.modules['uvicorn'] = None\n"
            "from convostore.cli import main\n"
            "sys.exit(main(['serve', sys.argv[1]]))\n")
    out = subprocess.run([sys.executable, "-c", code, db], capture_output=True, text=True)
    assert out.returncode == 1
    assert out.stderr == ("convostore: error: the web viewer needs uvicorn: "
                          "pip install 'convostore[web]'\n")

"""``store.check()``: each invariant broken on purpose, one at a time, through a raw connection
to the database (sqlite3 on the file, psycopg on the server), found, and repaired when it can
be without losing a message.

Runs on the backends another connection can reach (``reopen``: not ``:memory:``), through the
sync API (the async twin is generated from it).
"""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _helpers import text

from convostore import CompactResult, CursorExpired, Sessions
from convostore.check import CheckReport
from convostore.codec import ROW_BUDGET

pytestmark = pytest.mark.requires("reopen")

Raw = Callable[..., None]

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(200))).decode()
IMAGE = {"id": "img", "role": "user", "parts": [
    {"type": "text", "text": "look at this"},
    {"type": "file", "mediaType": "image/png", "url": f"data:image/png;base64,{PNG}"},
]}
BIG = text("big", "lorem ipsum " * (ROW_BUDGET // 6))  # about two continuation rows


@pytest.fixture
def store(backend_spec: Any) -> Iterator[Sessions]:
    with Sessions.open(backend_spec.url, **backend_spec.options) as opened:
        yield opened


@pytest.fixture
def raw(backend_spec: Any) -> Iterator[Raw]:
    """Run one statement (``?`` placeholders) on a connection of the test's own, committed."""
    if backend_spec.dialect == "sqlite":
        conn = sqlite3.connect(backend_spec.url)

        def run_sqlite(sql: str, *params: Any) -> None:
            with conn:
                conn.execute(sql, params)

        yield run_sqlite
        conn.close()
        return
    import psycopg

    pg = psycopg.connect(backend_spec.url, autocommit=True)
    pg.execute(f'SET search_path TO "{backend_spec.options["schema"]}"')

    def run_pg(sql: str, *params: Any) -> None:
        pg.execute(sql.replace("%", "%%").replace("?", "%s"), params)

    yield run_pg
    pg.close()


def fill(store: Sessions) -> None:
    """A store with a bit of everything: a branch, a compaction, a payload, a large message,
    a built search index."""
    s = store.session("s")
    s.append_messages([text("m1", "hello there"), text("m2", "general kenobi", "assistant"),
                       text("m3", "you are a bold one")])
    s.append_message(text("m2b", "another answer", "assistant"), parent_id="m1")
    s.append_message(text("m4", "the leaf"), parent_id="m3")
    s.on_compaction(lambda msgs: CompactResult("m1", "m2", "a greeting"))
    assert s.compact("m4") is not None
    t = store.session("t")
    t.append_message(IMAGE)
    t.append_message(BIG)
    t.append_message(text("after", "after the big one"))
    store.build_search_index()


def kinds(report: CheckReport) -> set[str]:
    return {p.kind for p in report.problems}


IDS = {"s": ["m1", "m2", "m3", "m2b", "m4"], "t": ["img", "big", "after"]}


def readable(store: Sessions) -> dict[str, list[str]]:
    """The messages of :func:`fill` that read back through the public API."""
    return {sid: [m for m in ids if store.session(sid).get_message(m) is not None]
            for sid, ids in IDS.items()}


def test_a_sound_store_is_clean_and_repair_changes_nothing(store: Sessions) -> None:
    fill(store)
    before = readable(store)
    report = store.check()
    assert report.clean and report.ok, report.problems
    assert report.sessions == 2 and report.messages == 8
    repaired = store.check(repair=True)
    assert repaired.clean and repaired.repair
    assert readable(store) == before == IDS


def test_the_default_session_is_checked(store: Sessions, raw: Raw) -> None:
    store.session("").append_messages([text("a", "one"), text("b", "two")])
    raw("UPDATE convostore_messages SET parent_id = 'ghost' WHERE session_id = '' AND id = 'b'")
    report = store.check()
    assert {(p.session_id, p.subject) for p in report.problems} >= {("", "b")}


def _repaired_clean(store: Sessions, before: dict[str, list[str]] | None = None) -> None:
    """Repair, then check again: clean, every message still readable."""
    report = store.check(repair=True)
    assert report.ok, report.remaining
    assert store.check().clean, store.check().problems
    if before is not None:
        assert readable(store) == before


def test_a_parent_that_does_not_exist(store: Sessions, raw: Raw) -> None:
    fill(store)
    before = readable(store)
    raw("UPDATE convostore_messages SET parent_id = 'ghost', chained = 0 "
        "WHERE session_id = 's' AND id = 'm2b'")
    report = store.check()
    assert not report.ok
    [problem] = report.problems
    assert (problem.kind, problem.session_id, problem.subject) == ("missing_parent", "s", "m2b")
    assert problem.repairable and "ghost" in problem.detail
    _repaired_clean(store, before)
    assert store.session("s").get_history(leaf_id="m2b")[0]["id"] == "m2b"  # now a root


def test_a_chain_that_loops(store: Sessions, raw: Raw) -> None:
    fill(store)
    raw("UPDATE convostore_messages SET parent_id = 'm3' WHERE session_id = 's' AND id = 'm1'")
    report = store.check()
    assert kinds(report) == {"parent_loop"}
    assert [p.subject for p in report.problems] == ["m1"]
    _repaired_clean(store)
    assert [m["id"] for m in store.session("s").get_history(leaf_id="m4")][-1] == "m4"


def test_a_plain_append_mark_that_lies(store: Sessions, raw: Raw) -> None:
    fill(store)
    before = readable(store)
    # m4 follows m2b in write order, but its parent is m3: the mark would make reads miss it
    raw("UPDATE convostore_messages SET chained = 1 WHERE session_id = 's' AND id = 'm4'")
    assert [(p.kind, p.subject) for p in store.check().problems] == [("chain_flag", "m4")]
    _repaired_clean(store, before)


def test_continuation_rows_missing(store: Sessions, raw: Raw) -> None:
    fill(store)
    raw("DELETE FROM convostore_message_chunks WHERE session_id = 't' AND id = 'big' "
        "AND idx = 1")
    report = store.check()
    assert [(p.kind, p.subject) for p in report.problems] == [("missing_continuation", "big")]
    repaired = store.check(repair=True)
    assert not repaired.ok and not repaired.problems[0].repaired  # the text is lost
    assert not repaired.problems[0].repairable


def test_continuation_rows_out_of_order(store: Sessions, raw: Raw) -> None:
    fill(store)
    raw("UPDATE convostore_message_chunks SET idx = 7 WHERE session_id = 't' AND id = 'big' "
        "AND idx = 1")
    report = store.check()
    assert {(p.kind, p.subject) for p in report.problems} == {
        ("missing_continuation", "big"), ("stray_continuation", "big")}


def test_a_stray_continuation_row(store: Sessions, raw: Raw) -> None:
    fill(store)
    before = store.session("t").get_message("big")
    raw("INSERT INTO convostore_message_chunks (session_id, id, idx, content) "
        "VALUES ('t', 'big', 99, 'junk')")
    raw("INSERT INTO convostore_message_chunks (session_id, id, idx, content) "
        "VALUES ('t', 'nobody', 1, 'junk')")
    report = store.check()
    assert {(p.kind, p.subject) for p in report.problems} == {
        ("stray_continuation", "big"), ("stray_continuation", "nobody")}
    _repaired_clean(store)
    assert store.session("t").get_message("big") == before


def test_an_unreadable_message(store: Sessions, raw: Raw) -> None:
    fill(store)
    raw("UPDATE convostore_messages SET content = '{not json' WHERE session_id = 's' "
        "AND id = 'm3'")
    report = store.check(repair=True)
    assert [(p.kind, p.subject, p.repaired) for p in report.problems] == [
        ("unreadable_message", "m3", False)]


def test_a_reference_without_its_payload(store: Sessions, raw: Raw) -> None:
    fill(store)
    raw("DELETE FROM convostore_attachment_chunks")
    raw("DELETE FROM convostore_attachments")
    report = store.check(repair=True)
    assert [(p.kind, p.subject, p.repaired) for p in report.problems] == [
        ("missing_payload", "img", False)]


def test_a_payload_nobody_references(store: Sessions, raw: Raw) -> None:
    fill(store)
    orphan = "f" * 64
    raw("INSERT INTO convostore_attachments (hash, bytes, media_type, chunks) "
        "VALUES (?, 0, 'image/png', 0)", orphan)
    report = store.check()
    assert [(p.kind, p.session_id, p.subject) for p in report.problems] == [
        ("unreferenced_payload", None, orphan)]
    _repaired_clean(store)
    assert store.storage_stats().attachments == 1


def test_a_message_whose_reference_row_is_gone(store: Sessions, raw: Raw) -> None:
    fill(store)
    image = store.session("t").get_message("img")
    raw("DELETE FROM convostore_attachment_refs")
    report = store.check()
    # the payload is kept, not collected: the repair records the reference again
    assert kinds(report) == {"missing_reference", "unreferenced_payload"}
    _repaired_clean(store)
    assert store.session("t").get_message("img") == image
    assert store.storage_stats().attachments == 1


def test_reference_counts_that_disagree(store: Sessions, raw: Raw) -> None:
    fill(store)
    with store.core.backend.read() as ops:
        [digest] = ops.refs_of("t", "img")
    raw("INSERT INTO convostore_attachment_refs (session_id, message_id, hash) "
        "VALUES ('t', 'after', ?)", digest)
    raw("INSERT INTO convostore_attachment_refs (session_id, message_id, hash) "
        "VALUES ('t', 'gone', ?)", digest)
    report = store.check()
    assert {(p.kind, p.subject) for p in report.problems} == {
        ("stray_reference", "after"), ("stray_reference", "gone")}
    _repaired_clean(store)
    assert store.storage_stats().attachments == 1  # still referenced by img


def test_a_compaction_whose_ends_left_the_tree(store: Sessions, raw: Raw) -> None:
    fill(store)
    raw("UPDATE convostore_compactions SET to_message_id = 'ghost' WHERE session_id = 's'")
    report = store.check(repair=True)
    assert [(p.kind, p.repaired) for p in report.problems] == [("compaction_ends", False)]
    assert "ghost" in report.problems[0].detail


def test_a_compaction_across_branches(store: Sessions, raw: Raw) -> None:
    fill(store)
    raw("UPDATE convostore_compactions SET from_message_id = 'm2b' WHERE session_id = 's'")
    assert kinds(store.check()) == {"compaction_ends"}


def test_a_directory_row_that_disagrees(store: Sessions, raw: Raw) -> None:
    fill(store)
    raw("UPDATE convostore_sessions SET message_count = message_count + 5, bytes = 1 "
        "WHERE session_id = 's'")
    raw("INSERT INTO convostore_sessions (session_id, created_at, updated_at, message_count, "
        "bytes) VALUES ('empty', 1, 1, 3, 30)")
    report = store.check()
    assert {(p.kind, p.subject) for p in report.problems} == {
        ("directory_counts", "s"), ("directory_counts", "empty")}
    _repaired_clean(store)
    assert {x.session_id: x.messages for x in store.list_sessions()} == {"s": 5, "t": 3}


def test_a_search_index_missing_entries(store: Sessions, raw: Raw, backend_spec: Any) -> None:
    fill(store)
    if backend_spec.dialect == "sqlite":
        raw("INSERT INTO convostore_fts (convostore_fts) VALUES ('delete-all')")
    else:
        raw("DELETE FROM convostore_fts")
    report = store.check()
    assert {(p.kind, p.session_id) for p in report.problems} == {
        ("search_index_missing", "s"), ("search_index_missing", "t")}
    _repaired_clean(store)
    assert [h.id for h in store.search("kenobi")] == ["m2"]


def test_a_search_index_with_entries_of_deleted_messages(store: Sessions, raw: Raw) -> None:
    fill(store)
    raw("DELETE FROM convostore_messages WHERE session_id = 's' AND id = 'm4'")
    report = store.check()  # the newest row carries the directory's totals: they still agree
    assert kinds(report) == {"search_index_stale"}
    _repaired_clean(store)
    assert [h.id for h in store.search("bold")] == ["m3"]


def test_a_change_log_with_a_gap(store: Sessions, raw: Raw, backend_spec: Any) -> None:
    fill(store)
    head = store.change_cursor()
    raw("DELETE FROM convostore_changes WHERE pos = ?", head - 2)
    report = store.check()
    if backend_spec.dialect == "postgresql":
        # PostgreSQL's positions come from a sequence: a rolled-back write leaves a hole too,
        # so a hole is no damage there, and nothing is reported
        assert report.clean
        return
    assert [(p.kind, p.subject) for p in report.problems] == [
        ("change_log_gap", f"{head - 2}-{head - 2}")]
    store.changes(since=head - 3)  # before the repair, a reader misses the change silently
    _repaired_clean(store)
    with pytest.raises(CursorExpired):
        store.changes(since=head - 3)
    assert len(store.changes(since=head - 2)) == 2


def test_progress_and_the_report_as_json(store: Sessions, raw: Raw) -> None:
    fill(store)
    raw("UPDATE convostore_sessions SET message_count = message_count + 1 "
        "WHERE session_id = 't'")
    seen: list[tuple[int, int]] = []
    report = store.check(progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]
    as_json = report.as_dict()
    assert as_json["ok"] is False and as_json["sessions"] == 2
    assert as_json["problems"] == [{
        "kind": "directory_counts", "session_id": "t", "subject": "t",
        "detail": as_json["problems"][0]["detail"], "repairable": True, "repaired": False}]
    assert report.by_session() == {"t": list(report.problems)}

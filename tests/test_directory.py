"""A conversation's whole life (issue 20): the directory, describing a session, listing and
paging it, the chosen branch, row facts in reads, deleting a conversation and everything of it,
retention, internal sessions, and the migration of a database written before the directory.

Every test runs on every backend and through both APIs (``store`` / ``open_store``).
"""

from __future__ import annotations

import base64
import json
import multiprocessing
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from _helpers import ids, text
from _storage import cells_holding, execute, query_plan, writing

from convostore import (
    ChangeEvent,
    InvalidArgument,
    MessageRecord,
    PruneResult,
    SessionEntry,
    SessionPage,
    Sessions,
    SiblingPosition,
)
from convostore.context import Context
from convostore.manager import SessionManager

# the directory is a session-keyed table: its indexes per partition
pytestmark = pytest.mark.partitions

DAY = 86_400_000
T_OLD = 1_600_000_000_000  # 2020-09-13: long idle
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8).decode()


def sync_of(store: Any) -> Sessions:
    """The sync store behind ``store`` (itself, or the async store's ``sync``)."""
    return store if isinstance(store, Sessions) else store.sync


def image(id: str, data: str = PNG) -> dict[str, Any]:
    return {"id": id, "role": "user", "parts": [
        {"type": "file", "mediaType": "image/png", "url": f"data:image/png;base64,{data}"}]}


def listed(store: Any, **filters: Any) -> list[str]:
    """Every session id the directory lists with ``filters``, following the cursors."""
    out: list[str] = []
    cursor = None
    while True:
        page = store.list_conversations(cursor=cursor, **filters)
        out += [e.session_id for e in page.sessions]
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


# --- the directory ------------------------------------------------------------------------------


def test_writing_a_session_puts_it_in_the_directory(store: Any) -> None:
    s = store.session("a")
    assert s.get_info() is None
    s.import_message(text("m1", "hello"), created_at=T_OLD)
    s.import_message(text("m2", "world" * 100), parent_id="m1", created_at=T_OLD + 5000)
    info = s.get_info()
    assert isinstance(info, SessionEntry)
    stats = s.get_history_row_stats()
    assert (info.session_id, info.message_count, info.bytes) == (
        "a", 2, sum(r.bytes for r in stats))
    assert (info.created_at, info.updated_at) == (T_OLD, T_OLD + 5000)
    assert (info.title, info.owner, info.metadata, info.expires_at, info.active_leaf) == (
        None, None, {}, None, None)
    before = int(time.time() * 1000)
    s.update_message(text("m2", "short"))
    after = s.get_info()
    assert after is not None and after.bytes == sum(r.bytes for r in s.get_history_row_stats())
    assert after.updated_at >= before
    s.delete_messages(["m1"])
    after = s.get_info()
    assert after is not None and (after.message_count, after.bytes) == (
        1, s.get_history_row_stats()[0].bytes)
    s.clear_messages()
    after = s.get_info()
    assert after is not None and (after.message_count, after.bytes) == (0, 0)
    assert [x.session_id for x in store.list_sessions()] == []  # no messages: not in the old list
    assert listed(store) == ["a"]  # still described in the directory


def test_update_info_sets_and_clears_fields(store: Any) -> None:
    s = store.session("chat")
    entry = s.update_info(title="Deploy help", owner="user-42", metadata={"plan": "pro", "n": 2})
    assert (entry.title, entry.owner, entry.metadata, entry.message_count) == (
        "Deploy help", "user-42", {"plan": "pro", "n": 2}, 0)
    assert entry.created_at == entry.updated_at
    s.append_message(text("m1", "hi"))
    entry2 = s.update_info(title=None)
    assert (entry2.title, entry2.owner, entry2.message_count) == (None, "user-42", 1)
    assert s.get_info() == entry2
    when = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert s.update_info(expires_at=when).expires_at == int(when.timestamp() * 1000)
    assert s.update_info(expires_at=when.replace(tzinfo=None)).expires_at == int(
        when.timestamp() * 1000)  # naive: UTC
    assert s.update_info(expires_at=None).expires_at is None
    with pytest.raises(InvalidArgument) as bad:
        s.update_info(ttl=-1)
    assert bad.value.argument == "ttl"
    with pytest.raises(TypeError):
        s.update_info(metadata=["not", "an", "object"])
    with pytest.raises(InvalidArgument):
        s.update_info(owner="x\x00y")
    with pytest.raises(InvalidArgument):
        s.update_info(belongs_to="chat")
    assert s.get_info() == s.update_info()  # nothing passed: nothing changes


def test_ttl_is_refreshed_by_every_message_write(store: Any) -> None:
    s = store.session("t")
    s.import_message(text("m1", "x"), created_at=T_OLD)
    before = int(time.time() * 1000)
    entry = s.update_info(ttl=timedelta(days=1))
    assert entry.ttl == DAY and entry.expires_at is not None
    assert before + DAY <= entry.expires_at <= int(time.time() * 1000) + DAY
    s.import_message(text("m2", "y"), parent_id="m1", created_at=T_OLD + 1000)
    entry = s.get_info()
    assert entry is not None and entry.expires_at == T_OLD + 1000 + DAY  # the write's time + ttl
    assert s.update_info(ttl=None).ttl is None


def test_appends_in_a_burst_keep_the_directory_row_in_step(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An append leaves the directory row alone only when that changes nothing: updated_at
    # moves once a second, and a chosen leaf or a ttl is handled by the very next append.
    import convostore.session._writes as session_module  # where append_message reads the clock

    clock = [T_OLD]
    monkeypatch.setattr(session_module, "now_ms", lambda: clock[0])
    s = store.session("burst")
    s.append_message(text("m1", "one"))
    for mid, at in (("m2", T_OLD + 500), ("m3", T_OLD + 999)):
        clock[0] = at
        s.append_message(text(mid, "in the same second"))
    entry = s.get_info()
    assert entry is not None and entry.updated_at == T_OLD
    clock[0] = T_OLD + 1000
    s.append_message(text("m4", "a second later"))
    entry = s.get_info()
    assert entry is not None and entry.updated_at == T_OLD + 1000
    s.set_active_leaf("m2")
    clock[0] = T_OLD + 1001
    assert s.append_message(text("m5", "under the chosen leaf")).inserted
    entry = s.get_info()
    assert entry is not None and entry.active_leaf is None and entry.updated_at == T_OLD + 1000
    assert s.get_message("m5") is not None and s.get_branches("m2") != []
    assert [m["id"] for m in s.get_history()] == ["m1", "m2", "m5"]
    s.update_info(ttl=timedelta(days=1))
    clock[0] = T_OLD + 1002
    s.append_message(text("m6", "the ttl runs from here"))
    entry = s.get_info()
    assert entry is not None and entry.expires_at == T_OLD + 1002 + DAY
    stored = [s.get_message(f"m{i}") for i in range(1, 7)]
    assert (entry.message_count, entry.bytes) == (6, sum(
        len(json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode()) for m in stored))


def test_listing_is_newest_first_with_filters_and_cursors(store: Any) -> None:
    for i in range(7):
        s = store.session(f"s{i}")
        s.import_message(text("m", f"hello {i}"), created_at=T_OLD + i * 1000)
        s.update_info(owner="u1" if i % 2 == 0 else "u2",
                      metadata={"tier": "pro" if i < 3 else "free", "n": i, "flag": i == 4})
    assert listed(store) == [f"s{i}" for i in reversed(range(7))]
    assert listed(store, owner="u1") == ["s6", "s4", "s2", "s0"]
    assert listed(store, owner="u1", limit=3) == ["s6", "s4", "s2", "s0"]  # pages of 3
    assert listed(store, metadata={"tier": "pro"}) == ["s2", "s1", "s0"]
    assert listed(store, metadata={"tier": "pro", "n": 1}) == ["s1"]
    assert listed(store, metadata={"flag": True}) == ["s4"]
    assert listed(store, metadata={"n": "1"}) == []  # a string is not the number 1
    assert listed(store, owner="u2", metadata={"tier": "free"}) == ["s5", "s3"]
    assert listed(store, updated_after=T_OLD + 2000, updated_before=T_OLD + 5000) == [
        "s4", "s3", "s2"]
    assert listed(store, updated_after=datetime.fromtimestamp((T_OLD + 5000) / 1000,
                                                              tz=timezone.utc)) == ["s6", "s5"]
    page = store.list_conversations(limit=2)
    assert isinstance(page, SessionPage) and [e.session_id for e in page.sessions] == ["s6", "s5"]
    second = store.list_conversations(limit=2, cursor=page.next_cursor)
    assert [e.session_id for e in second.sessions] == ["s4", "s3"]
    assert store.list_conversations(limit=7).next_cursor is None
    assert store.list_conversations(limit=0) == SessionPage([], None)
    with pytest.raises(InvalidArgument):
        store.list_conversations(cursor="garbage!")
    with pytest.raises(InvalidArgument):
        store.list_conversations(metadata={'a"b': 1})


def test_metadata_jsonb_cannot_hold_is_refused_and_breaks_no_listing(store: Any) -> None:
    """Issue 36, 1: a NUL or a surrogate in a key or string of a session's metadata is refused
    naming the place, nothing written; a row stored before (as older versions wrote it) is
    skipped by metadata-filtered listings instead of failing them for every tenant."""
    store.session("a").update_info(metadata={"t": "x"})
    store.session("old1").update_info(metadata={"t": "x"})
    store.session("old2").update_info(metadata={"t": "x"})
    refused = [
        ({"note": "a\x00b"}, "metadata['note']"),
        ({"note": "a\ud800"}, "metadata['note']"),
        ({"e": "\ud83d\ude00"}, "metadata['e']"),  # would read back as one character
        ({"deep": [1, {"k\x00": 1}]}, "metadata['deep'][1]"),
    ]
    for bad, where in refused:
        with pytest.raises(InvalidArgument) as info:
            store.session("b").update_info(metadata=bad)
        assert info.value.argument == where
    assert store.session("b").get_info() is None
    with writing(sync_of(store), None) as ops:  # rows written before the refusal
        for sid, meta in (("old1", '{"t":"x\\u0000"}'), ("old2", '{"t":"\\ud800"}')):
            execute(ops, "UPDATE convostore_sessions SET metadata = ? WHERE session_id = ?",
                    (meta, sid))
    assert listed(store, metadata={"t": "x"}) == ["a"]
    old1 = store.session("old1").get_info()
    assert old1 is not None and old1.metadata == {"t": "x\x00"}
    # an escaped backslash before "u0000" is text, not an escape: that row is read as JSON
    store.session("c").update_info(metadata={"t": "\\u0000"})
    assert listed(store, metadata={"t": "\\u0000"}) == ["c"]


def test_both_engines_give_one_answer_to_any_filter_or_cursor(store: Any) -> None:
    """Issue 36, 5 and 7: numbers compare by value on both engines; what no engine can bind
    (NUL, a lone surrogate, an integer past 64 bits) is refused naming it, never a driver's
    error; the documented largest limit works."""
    store.session("i").update_info(metadata={"n": 3})
    store.session("f").update_info(metadata={"n": 3.0})
    store.session("s").update_info(metadata={"n": "3"})
    store.session("b").update_info(metadata={"n": True})
    assert sorted(listed(store, metadata={"n": 3.0})) == ["f", "i"]
    assert sorted(listed(store, metadata={"n": 3})) == ["f", "i"]
    assert listed(store, metadata={"n": 1}) == []  # true is not 1
    assert listed(store, metadata={"n": True}) == ["b"]
    for value in ("a\x00", "a\ud800", 2**63, -(2**63) - 1, 10**400):
        with pytest.raises(InvalidArgument) as info:
            store.list_conversations(metadata={"n": value})
        assert info.value.argument == "metadata['n']"
    assert listed(store, metadata={"n": 2**63 - 1}) == listed(store, metadata={"n": -(2**63)})
    page = store.list_conversations(limit=2**63 - 1)
    assert len(page.sessions) == 4 and page.next_cursor is None

    def cursor(updated_at: Any, session_id: str) -> str:
        raw = json.dumps([updated_at, session_id], ensure_ascii=False)
        return base64.urlsafe_b64encode(raw.encode("utf-8", "surrogatepass")).decode()

    after = store.list_conversations(cursor=cursor(2**62, "z"))
    assert [e.session_id for e in after.sessions] == listed(store)
    for updated_at, sid in ((1, "a\x00"), (1, "a\ud800"), (2**64, "a"), (-(2**70), "a")):
        with pytest.raises(InvalidArgument, match="not a cursor this store returned"):
            store.list_conversations(cursor=cursor(updated_at, sid))


def test_the_owner_listing_reads_an_index(store: Any) -> None:
    """The SQL a filtered listing sends is answered from the owner index, not a scan."""
    from convostore.directory._sql import ENTRY_COLUMNS

    cols = ", ".join(ENTRY_COLUMNS)
    plan = query_plan(
        sync_of(store),
        f"SELECT {cols} FROM convostore_sessions WHERE internal = 0 AND owner = ? "
        "ORDER BY owner DESC, updated_at DESC, session_id DESC LIMIT ?",
        ("u1", 50),
    )
    # partitioned: each partition's copy of the index (convostore_sessions_p0_owner_...)
    assert re.search(r"convostore_sessions(_p\d+)?_owner", plan), plan


def test_pages_while_writers_write_never_skip_or_repeat(store: Any) -> None:
    """A writer creates sessions and appends to half of the listed ones while pages are read:
    no session repeats, and every session not written meanwhile is listed."""
    sync = sync_of(store)
    for i in range(60):
        sync.session(f"p{i:02}").import_message(text("m", "x"), created_at=T_OLD + i)
    stop = threading.Event()
    touched: set[str] = set()

    def writer() -> None:
        n = 0
        while not stop.is_set() or n < 20:
            sync.session(f"new{n}").append_message(text("m", "y"))
            victim = f"p{(n * 7) % 60:02}"
            if n % 2:
                sync.session(victim).append_message(text(f"w{n}", "z"))
                touched.add(victim)
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    seen: list[str] = []
    cursor = None
    try:
        while True:
            page = store.list_conversations(limit=7, cursor=cursor)
            seen += [e.session_id for e in page.sessions]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
            time.sleep(0.002)  # let the writer in between pages
    finally:
        stop.set()
        thread.join()
    assert len(seen) == len(set(seen)), "a session was listed twice"
    untouched = {f"p{i:02}" for i in range(60)} - touched
    assert untouched <= set(seen), f"skipped: {sorted(untouched - set(seen))}"
    assert touched, "the writer never wrote a listed session"


def test_internal_sessions_are_never_listed_or_searched(store: Any) -> None:
    sync = sync_of(store)
    memory = Context(sync.session("chat")).with_context("memory")
    memory.replace_context_block("memory", "likes tea")
    sync.session("convostore:search:kb").append_message(text("k1", "tea facts"))
    store.session("chat").append_message(text("m1", "tea please"))
    assert [s.session_id for s in store.list_sessions()] == ["chat"]
    assert listed(store) == ["chat"]
    assert {h.session_id for h in store.search("tea")} == {"chat"}
    assert [h.id for h in store.session("convostore:search:kb").search("tea")] == ["k1"]


# --- deleting a conversation ------------------------------------------------------------------


@pytest.mark.async_api
def test_delete_session_leaves_nothing_of_it_in_any_table(store: Any) -> None:
    sync = sync_of(store)
    sid = "doomed-7f3a"
    keep = store.session("kept-1c2d")
    keep.append_message(image("keep-img", PNG))  # shares a payload with the doomed session
    store.search("anything")  # the search index exists, so writes index what they write
    s = store.session(sid)
    s.append_message(text("dm-1", "deployment failed at step three"))
    s.append_message(image("dm-2", PNG))
    s.append_message(image("dm-3", base64.b64encode(b"only-here" * 50).decode()))
    s.append_message(text("dm-4", "z" * (4 * 1024 * 1024)))  # continuation rows
    s.append_message(text("dm-5", "a branch"), parent_id="dm-1")
    s.add_compaction("summary of the start", "dm-1", "dm-2")
    s.set_active_leaf("dm-4")
    s.update_info(title="T", owner="owner-9e8f", metadata={"k": "v"}, ttl=3600)
    ctx = Context(sync.session(sid)).with_context("memory").with_cached_prompt()
    ctx.replace_context_block("memory", "remembers-7f3a")
    ctx.freeze_system_prompt()
    context_ids = [x for x in _every_session(sync) if x.startswith("convostore:context:")]
    assert len(context_ids) == 2, context_ids
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    before = cells_holding(sync, ["kept-1c2d"])

    assert store.delete_session(sid) is True

    gone = [sid, *context_ids, "dm-1", "dm-2", "dm-3", "dm-4", "dm-5", "owner-9e8f"]
    # The change log keeps ids, never content, of what happened, ending with the deletion
    # (so a watcher learns of it); its retention trims them. No other table holds anything.
    assert {k: v for k, v in cells_holding(sync, gone).items()
            if not k.startswith("convostore_changes.")} == {}
    last = store.changes(since=0)[-1]
    assert (last.type, last.session_id, last.cursor) == ("delete_session", sid, events[0].cursor)
    assert cells_holding(sync, ["kept-1c2d"]) == before  # the other session is untouched
    assert keep.get_history() == [image("keep-img", PNG)]  # and its shared payload stays
    assert [(e.type, e.session_id) for e in events] == [("delete_session", sid)]
    assert store.session(sid).get_history() == [] and store.session(sid).get_info() is None
    assert store.delete_session(sid) is False
    assert store.storage_stats().attachments == 1
    assert store.search("deployment") == []


@pytest.mark.async_api
def test_the_manager_delete_is_delete_session(store: Any) -> None:
    manager = SessionManager(sync_of(store))
    info = manager.create("managed")
    manager.append(info.id, text("m1", "hello"))
    assert [e.title for e in store.list_conversations().sessions] == ["managed"]
    manager.delete(info.id)
    assert manager.get(info.id) is None and listed(store) == []


# --- retention ----------------------------------------------------------------------------------


@pytest.mark.async_api
def test_prune_deletes_idle_and_expired_conversations_only(store: Any) -> None:
    now = int(time.time() * 1000)
    for i in range(5):
        store.session(f"idle{i}").import_message(text("m", "old"), created_at=T_OLD + i)
    store.session("idle0").update_info(owner="alice")
    store.session("fresh").append_message(text("m", "new"))
    store.session("expired").append_message(text("m", "new"))
    store.session("expired").update_info(expires_at=now - 1)
    store.session("later").append_message(text("m", "new"))
    store.session("later").update_info(expires_at=now + DAY)
    memory = Context(sync_of(store).session("idle1")).with_context("memory")
    memory.replace_context_block("memory", "m")  # deleted with idle1

    dry = store.prune(older_than=timedelta(days=30), dry_run=True)
    assert isinstance(dry, PruneResult) and dry.dry_run and dry.batches == 0
    assert dry.session_ids == ["idle0", "idle1", "idle2", "idle3", "idle4", "expired"]
    assert len(listed(store)) == 8  # a dry run deletes nothing

    assert store.prune(older_than=30 * 86400, owner="alice").session_ids == ["idle0"]
    assert store.prune(expired=False, dry_run=True).session_ids == []
    first = store.prune(older_than=timedelta(days=30), limit=2, batch_size=1)
    assert (first.session_ids, first.batches) == (["idle1", "idle2"], 2)
    rest = store.prune(older_than=timedelta(days=30))  # resumes with what is left
    assert rest.session_ids == ["idle3", "idle4", "expired"]
    assert sorted(listed(store)) == ["fresh", "later"]
    assert not [x for x in _every_session(sync_of(store)) if x.startswith("convostore:")]


def _every_session(store: Sessions) -> list[str]:
    """Every session id with a directory row, internal ones included (raw SQL)."""
    with writing(store, None) as ops:
        return [r[0] for r in execute(ops, "SELECT session_id FROM convostore_sessions")]


def _append_forever(url: str, options: dict[str, Any], sessions: list[str], out: Any,
                    stop: Any) -> None:
    """Another process: append to ``sessions`` round robin until ``stop``; report the count."""
    count = 0
    with Sessions.open(url, **options) as store:
        while not stop.is_set() or count < 50:
            store.session(sessions[count % len(sessions)]).append_message(text(f"w{count}", "x"))
            count += 1
    out.put(count)


@pytest.mark.slow
@pytest.mark.requires("shared_across_processes")
def test_prune_of_10000_idle_sessions_while_another_process_appends(
    store: Any, backend_spec: Any
) -> None:
    sync = sync_of(store)
    for i in range(10_000):
        sync.session(f"idle{i:05}").import_message(text("m", "old"), created_at=T_OLD + i)
    live = [f"live{i}" for i in range(4)]
    for sid in live:  # idle too when prune starts: the writer's appends must save them
        sync.session(sid).import_message(text("m0", "old"), created_at=T_OLD)
    ctx = multiprocessing.get_context("spawn")
    out, stop = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_append_forever,
                       args=(backend_spec.url, backend_spec.options, live, out, stop))
    proc.start()
    try:
        deadline = time.monotonic() + 60
        while any(sync.session(x).get_info().message_count < 2  # type: ignore[union-attr]
                  for x in live) and time.monotonic() < deadline:
            time.sleep(0.01)  # until the writer has written each live session once
        result = store.prune(older_than=timedelta(days=30), batch_size=500)
    finally:
        stop.set()
        written = out.get(timeout=120)
        proc.join(timeout=60)
    assert sorted(result.session_ids) == [f"idle{i:05}" for i in range(10_000)]
    assert result.batches >= 20  # bounded batches: 10,000 sessions, 500 at most each
    # nothing of a live session was lost: its first message and every append of the writer
    assert sum(len(sync.session(x).get_history()) for x in live) == written + len(live)
    assert sorted(listed(store)) == live


# --- the chosen branch ------------------------------------------------------------------------


def _branchy(store: Any) -> Any:
    """m1 → m2 → m3, and m1 → m4 → m5 (a regenerated answer), m6 a second root."""
    s = store.session("b")
    s.append_message(text("m1", "q"))
    s.append_message(text("m2", "a1"))
    s.append_message(text("m3", "more"))
    s.append_message(text("m4", "a2"), parent_id="m1")
    s.append_message(text("m5", "more2"))
    s.append_message(text("m6", "root2"), parent_id=None)
    return s


@pytest.mark.async_api
def test_set_active_leaf_is_followed_until_the_next_write(store: Any) -> None:
    s = _branchy(store)
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    s.set_active_leaf("m3")
    assert [e.type for e in events] == ["set_active_leaf"] and events[0].message_ids == ["m3"]
    assert s.get_latest_leaf()["id"] == "m3"
    assert ids(s.history()) == ["m1", "m2", "m3"]
    assert ids(s.history(newest_first=True)) == ["m3", "m2", "m1"]
    assert ids(s.get_recent_history(10_000).messages) == ["m1", "m2", "m3"]
    assert [r.id for r in s.get_history_row_stats()] == ["m1", "m2", "m3"]
    assert s.get_info().active_leaf == "m3"
    s.append_message(text("m7", "follows the choice"))
    assert ids(s.get_history()) == ["m1", "m2", "m3", "m7"]
    assert s.get_info().active_leaf is None  # the write moved the leaf to its new row
    s.append_message(text("m8", "and the next"))
    assert ids(s.get_history()) == ["m1", "m2", "m3", "m7", "m8"]
    s.set_active_leaf("m5")
    s.delete_messages(["m5"])  # the chosen leaf moves up, as children do
    assert s.get_latest_leaf()["id"] == "m4"
    with pytest.raises(InvalidArgument) as missing:
        s.set_active_leaf("nope")
    assert missing.value.argument == "message_id"


@pytest.mark.async_api
def test_get_leaves_and_sibling_positions(store: Any) -> None:
    s = _branchy(store)
    assert ids(s.get_leaves()) == ["m3", "m5", "m6"]
    assert s.get_sibling_position("m4") == SiblingPosition(1, 2, ("m2", "m4"))
    assert s.get_sibling_position("m2") == SiblingPosition(0, 2, ("m2", "m4"))
    assert s.get_sibling_position("m3") == SiblingPosition(0, 1, ("m3",))
    assert s.get_sibling_position("m6") == SiblingPosition(1, 2, ("m1", "m6"))
    assert s.get_sibling_position("nope") is None


def _follow(url: str, options: dict[str, Any], out: Any) -> None:
    with Sessions.open(url, **options) as store:
        s = store.session("b")
        s.append_message(text("x1", "from the other process"))
        out.put(ids(s.get_history()))


@pytest.mark.requires("shared_across_processes")
def test_the_chosen_leaf_is_followed_by_another_process(store: Any, backend_spec: Any) -> None:
    s = _branchy(store)
    s.set_active_leaf("m3")
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_follow, args=(backend_spec.url, backend_spec.options, out))
    proc.start()
    history = out.get(timeout=120)
    proc.join(timeout=60)
    assert history == ["m1", "m2", "m3", "x1"]
    assert ids(s.get_history()) == ["m1", "m2", "m3", "x1"]


# --- row facts in reads -----------------------------------------------------------------------


@pytest.mark.async_api
def test_history_records_carry_the_row_facts(store: Any) -> None:
    s = store.session("r")
    for i in range(12):
        s.import_message(text(f"m{i}", f"body {i}"), parent_id=f"m{i - 1}" if i else None,
                         created_at=T_OLD + i * 1000)
    records = list(s.history_records())
    assert all(isinstance(r, MessageRecord) for r in records)
    assert [r.message for r in records] == s.get_history()
    assert [(r.created_at, r.parent_id) for r in records] == [
        (T_OLD + i * 1000, f"m{i - 1}" if i else None) for i in range(12)]
    assert [r.size for r in records] == [x.bytes for x in s.get_history_row_stats()]
    newest = list(s.history_records(newest_first=True))
    assert [r.message["id"] for r in newest] == [f"m{i}" for i in reversed(range(12))]
    page2 = list(s.history_records(leaf_id=newest[4].parent_id, newest_first=True))
    assert [r.message["id"] for r in page2][:2] == ["m6", "m5"]  # paging older
    s.add_compaction("the first half", "m0", "m5")
    summarised = list(s.history_records())
    assert [r.message for r in summarised] == s.get_history()
    assert summarised[0].parent_id is None and summarised[0].created_at >= T_OLD
    assert summarised[1].message["id"] == "m6"


# --- migration ----------------------------------------------------------------------------------


@pytest.mark.requires("reopen")
def test_a_version_6_directory_migrates_to_totals_on_the_newest_row(
    open_store: Callable[..., Any]
) -> None:
    """A database at version 6 (whole counts in the directory, no ``run_bytes``) opens with
    its counts and sizes right, and later appends, deletes and updates keep them right."""
    store = open_store()
    sync = sync_of(store)
    s = sync.session("a")
    for i in range(4):
        s.append_message(text(f"m{i}", "x" * (10 * i + 1)))
    s.delete_messages(["m1"])
    before = s.get_info()
    assert before is not None and before.message_count == 3
    with writing(sync, None) as ops:  # back to version 6, as its code wrote it
        execute(ops, "UPDATE convostore_sessions SET message_count = ?, bytes = ? "
                "WHERE session_id = 'a'", (before.message_count, before.bytes))
        execute(ops, "ALTER TABLE convostore_messages DROP COLUMN run_bytes")
        execute(ops, "UPDATE convostore_meta SET value = '6' WHERE key = 'schema_version'")
    store.close()
    store = open_store()
    s = sync_of(store).session("a")
    info = s.get_info()
    assert info is not None and (info.message_count, info.bytes) == (3, before.bytes)
    s.append_message(text("m4", "after"))
    s.delete_messages(["m4", "m3"])
    s.append_message(text("m5", "y" * 50))
    s.update_message(text("m0", "longer than before"))
    rows = s.get_history_row_stats()
    info = s.get_info()
    assert info is not None
    assert (info.message_count, info.bytes) == (len(rows), sum(r.bytes for r in rows))


@pytest.mark.requires("reopen")
def test_a_database_written_before_the_directory_migrates(
    open_store: Callable[..., Any]
) -> None:
    """A database at the previous schema version (no directory, a registry table of its own)
    opens with every session listed, its counts right, and the registry's rows managed."""
    store = open_store()
    sync = sync_of(store)
    sync.session("a").import_message(text("m1", "hello"), created_at=T_OLD)
    sync.session("a").import_message(text("m2", "again"), parent_id="m1", created_at=T_OLD + 9)
    sync.session("convostore:context:memory_a").append_message(text("content", "x"))
    sync.session("reg-1").append_message(text("r1", "managed"))
    with writing(sync, None) as ops:  # back to the previous version, as its code wrote it
        execute(ops, "DROP TABLE convostore_sessions")
        execute(ops, "CREATE TABLE convostore_registry (id TEXT PRIMARY KEY, name TEXT NOT NULL, "
                "parent_session_id TEXT, model TEXT, source TEXT, input_tokens BIGINT NOT NULL "
                "DEFAULT 0, output_tokens BIGINT NOT NULL DEFAULT 0, estimated_cost DOUBLE "
                "PRECISION NOT NULL DEFAULT 0, end_reason TEXT, created_at BIGINT NOT NULL, "
                "updated_at BIGINT NOT NULL)")
        execute(ops, "INSERT INTO convostore_registry (id, name, model, input_tokens, "
                "created_at, updated_at) VALUES ('reg-1', 'Old name', 'gpt', 7, 5, 6)")
        # version 3, the last before the directory (later steps are idempotent: they rerun)
        execute(ops, "UPDATE convostore_meta SET value = ? WHERE key = 'schema_version'",
                ("3",))
    store.close()
    store = open_store()
    assert [(s.session_id, s.messages, s.last_write) for s in store.list_sessions()] == [
        ("a", 2, T_OLD + 9), ("reg-1", 1, store.list_sessions()[1].last_write)]
    info = store.session("a").get_info()
    assert info is not None and (info.created_at, info.message_count) == (T_OLD, 2)
    manager = SessionManager(sync_of(store))
    managed = manager.get("reg-1")
    assert managed is not None and (managed.name, managed.model, managed.input_tokens) == (
        "Old name", "gpt", 7)
    assert [i.id for i in manager.list()] == ["reg-1"]
    store.session("a").append_message(text("m3", "after"))
    assert ids(store.session("a").get_history()) == ["m1", "m2", "m3"]
    assert store.session("a").get_info().message_count == 3
    assert sorted(listed(store)) == ["a", "reg-1"]

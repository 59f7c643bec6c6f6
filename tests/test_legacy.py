"""Lifting databases written by the reference system.

The fixtures create the legacy tables exactly as the reference system wrote them (its chat
table too), in the database the test's store then opens: the SQLite file, or the test's own
PostgreSQL schema. Which tests run is decided by capability; the DDL each writes is picked by
the database's SQL dialect (``spec.dialect``: ``sqlite`` or ``postgresql``), since these tables
must be the reference system's own, column types and all, in each dialect.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _helpers import ids, text
from _storage import seqs
from conftest import PG_URL, BackendSpec

from convostore import Sessions, StoredCompaction
from convostore.legacy._lift import CHAT_WINDOW_BYTES, to_v5, windows

SQLITE_DDL = [
    """CREATE TABLE IF NOT EXISTS assistant_messages (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL DEFAULT '',
        parent_id TEXT,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at DATETIME DEFAULT CURRENT_TIMESTAMP
    )""",
    "CREATE INDEX IF NOT EXISTS idx_assistant_msg_parent ON assistant_messages(parent_id)",
    "CREATE INDEX IF NOT EXISTS idx_assistant_msg_session ON assistant_messages(session_id)",
    """CREATE TABLE IF NOT EXISTS assistant_compactions (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL DEFAULT '',
        summary TEXT NOT NULL,
        from_message_id TEXT NOT NULL,
        to_message_id TEXT NOT NULL,
        created_at DATETIME DEFAULT CURRENT_TIMESTAMP
    )""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS assistant_fts USING fts5(
        id UNINDEXED, session_id UNINDEXED, role UNINDEXED, content,
        tokenize = 'porter unicode61'
    )""",
    """CREATE TABLE IF NOT EXISTS assistant_config (
        session_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
        PRIMARY KEY (session_id, key)
    )""",
    """CREATE TABLE IF NOT EXISTS assistant_sessions (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        parent_session_id TEXT,
        model TEXT,
        source TEXT,
        input_tokens INTEGER DEFAULT 0,
        output_tokens INTEGER DEFAULT 0,
        estimated_cost REAL DEFAULT 0,
        end_reason TEXT,
        created_at DATETIME DEFAULT CURRENT_TIMESTAMP,
        updated_at DATETIME DEFAULT CURRENT_TIMESTAMP
    )""",
]

POSTGRES_DDL = [
    """CREATE TABLE IF NOT EXISTS assistant_messages (
        id TEXT NOT NULL,
        session_id TEXT NOT NULL DEFAULT '',
        parent_id TEXT,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        text_content TEXT NOT NULL DEFAULT '',
        created_at TIMESTAMPTZ DEFAULT NOW(),
        content_tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text_content)) STORED,
        PRIMARY KEY (session_id, id)
    )""",
    "CREATE INDEX IF NOT EXISTS idx_assistant_msg_parent ON assistant_messages(parent_id)",
    "CREATE INDEX IF NOT EXISTS idx_assistant_msg_session ON assistant_messages(session_id)",
    "CREATE INDEX IF NOT EXISTS idx_assistant_msg_tsv ON assistant_messages USING GIN(content_tsv)",
    """CREATE TABLE IF NOT EXISTS assistant_compactions (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL DEFAULT '',
        summary TEXT NOT NULL,
        from_message_id TEXT NOT NULL,
        to_message_id TEXT NOT NULL,
        created_at TIMESTAMPTZ DEFAULT NOW()
    )""",
]

V017_DDL = {"sqlite": SQLITE_DDL, "postgresql": POSTGRES_DDL}  # by SQL dialect

CHAT_DDL = {  # §1.3: AIChatAgent's table (a TIMESTAMPTZ where PostgreSQL has no DATETIME)
    "sqlite": "CREATE TABLE cf_ai_chat_agent_messages (id TEXT PRIMARY KEY, "
              "message TEXT NOT NULL, created_at DATETIME DEFAULT CURRENT_TIMESTAMP)",
    "postgresql": "CREATE TABLE cf_ai_chat_agent_messages (id TEXT PRIMARY KEY, "
                "message TEXT NOT NULL, created_at TIMESTAMPTZ DEFAULT NOW())",
}

SUMMARY = "summary of the first branch"
T_0300 = 1767322800000  # 2026-01-02 03:00:00 UTC
T_0301 = T_0300 + 60_000


class LegacyDb:
    """SQL against the database the test's store opens, through the dialect's own driver.

    ``dialect`` (the database's SQL dialect, see ``conftest.DIALECTS``) picks the driver, the
    placeholders and the DDL; it never decides whether a test runs (capabilities do).
    """

    def __init__(self, spec: BackendSpec) -> None:
        self.dialect = spec.dialect
        self.conn: Any
        if self.dialect == "sqlite":
            self.conn = sqlite3.connect(spec.url, isolation_level=None)
        else:
            import psycopg

            assert PG_URL is not None
            self.schema = spec.options["schema"]
            self.conn = psycopg.connect(PG_URL, autocommit=True)
            self.conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            self.conn.execute(f'SET search_path TO "{self.schema}"')
            self.conn.execute("SET TIME ZONE 'UTC'")  # v0.17 wrote UTC wall-clock times

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.dialect == "postgresql":
            sql = sql.replace("?", "%s")
        cur = self.conn.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []

    def create_v017_tables(self) -> set[str]:
        """The v0.17 tables of this dialect; returns their names."""
        for statement in V017_DDL[self.dialect]:
            self.run(statement)
        return self.tables()

    def tables(self) -> set[str]:
        if self.dialect == "sqlite":
            rows = self.run("SELECT name FROM sqlite_master WHERE type = 'table'")
        else:
            rows = self.run(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                (self.schema,),
            )
        return {r[0] for r in rows if r[0].startswith(("assistant_", "cf_ai_"))} - {
            # FTS5's shadow tables go with their virtual table
            f"assistant_fts_{s}" for s in ("data", "idx", "content", "docsize", "config")
        }

    def message(self, id: str, session_id: str, parent_id: str | None, role: str, body: str,
                created_at: str) -> None:
        content = json.dumps(text(id, body, role), separators=(",", ":"))
        self.run(
            "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (id, session_id, parent_id, role, content, created_at),
        )

    def compaction(self, id: str, session_id: str, summary: str, from_id: str, to_id: str,
                   created_at: str) -> None:
        self.run(
            "INSERT INTO assistant_compactions (id, session_id, summary, from_message_id, "
            "to_message_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (id, session_id, summary, from_id, to_id, created_at),
        )

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def legacy(backend_spec: BackendSpec) -> Iterator[LegacyDb]:
    db = LegacyDb(backend_spec)
    yield db
    db.close()


@pytest.fixture
def reopen(open_store: Callable[..., Sessions]) -> Callable[[], Sessions]:
    """Open the test's database (again), closing the store opened before."""
    opened: list[Sessions] = []

    def again() -> Sessions:
        if opened:
            opened[-1].close()
        opened.append(open_store())
        return opened[-1]

    return again


def seed_branches(db: LegacyDb) -> None:
    """§11.3: m1 with two answers in the same second (m2 written first), m1..m2 compacted."""
    db.message("m1", "", None, "user", "root question", "2026-01-02 03:00:00")
    db.message("m2", "", "m1", "assistant", "first answer", "2026-01-02 03:01:00")
    db.message("m3", "", "m1", "assistant", "second answer", "2026-01-02 03:01:00")
    db.compaction("c1", "", SUMMARY, "m1", "m2", "2026-01-02 03:05:00")


# --- §11.3 ------------------------------------------------------------------------------------


@pytest.mark.requires("reopen")
def test_lifts_assistant_tables_preserves_branch_order_and_drops_the_sources(
    legacy: LegacyDb, reopen: Callable[[], Sessions]
) -> None:
    created = legacy.create_v017_tables()
    seed_branches(legacy)
    if "assistant_config" in created:
        legacy.run("INSERT INTO assistant_config VALUES ('', 'model', 'gpt')")
    if "assistant_sessions" in created:
        legacy.run("INSERT INTO assistant_sessions (id, name) VALUES ('', 'Main')")
        legacy.run("INSERT INTO assistant_fts (id, session_id, role, content) "
                   "VALUES ('m1', '', 'user', 'root question')")
    for _ in range(2):  # and the same after eviction (a reopen)
        store = reopen()
        s = store.session()
        assert ids(s.get_history()) == ["m1", "m3"]
        assert s.get_history(leaf_id="m2") == [
            {"id": "compaction_c1", "role": "assistant",
             "parts": [{"type": "text", "text": SUMMARY}]}]
        assert s.get_compactions() == [
            StoredCompaction("c1", SUMMARY, "m1", "m2", "2026-01-02T03:05:00.000Z")]
        assert seqs(store, "", ["m1", "m2", "m3"]) == {"m1": 1, "m2": 2, "m3": 3}
        assert s.get_message("m2") == text("m2", "first answer", "assistant")
        stats = s.get_history_row_stats()
        content = json.dumps(text("m1", "root question"), separators=(",", ":"))
        assert (stats[0].id, stats[0].bytes, stats[0].token_estimate) == (
            "m1", len(content), len(content) // 4)
        assert [(x.session_id, x.messages, x.last_write) for x in store.list_sessions()] == [
            ("", 3, T_0301)]
        assert legacy.tables() == created & {"assistant_config"}
    if "assistant_config" in created:
        assert legacy.run("SELECT session_id, key, value FROM assistant_config") == [
            ("", "model", "gpt")]


@pytest.mark.requires("reopen")
def test_hides_a_lifted_overlay_row_and_reparents_its_child(
    legacy: LegacyDb, reopen: Callable[[], Sessions]
) -> None:
    """#1984: a stored echo of compaction c1 (id compaction_c1) is hidden; m4 takes its place."""
    legacy.create_v017_tables()
    legacy.message("m1", "s", None, "user", "question", "2026-01-02 03:00:00")
    legacy.message("m2", "s", "m1", "assistant", "answer", "2026-01-02 03:00:01")
    legacy.message("compaction_c1", "s", "m2", "assistant", SUMMARY, "2026-01-02 03:00:02")
    legacy.message("m4", "s", "compaction_c1", "user", "follow-up", "2026-01-02 03:00:03")
    legacy.compaction("c1", "s", SUMMARY, "m1", "m2", "2026-01-02 03:00:02")
    store = reopen()
    history = store.session("s").get_history()
    assert ids(history) == ["compaction_c1", "m4"]
    assert history[0]["parts"] == [{"type": "text", "text": SUMMARY}]
    assert ids(list(store.session("s").history(newest_first=True))) == ["m4", "compaction_c1"]
    assert "assistant_messages" not in legacy.tables()


@pytest.mark.requires("reopen")
def test_keeps_a_lifted_source_when_a_row_did_not_copy_faithfully(
    legacy: LegacyDb, reopen: Callable[[], Sessions], caplog: pytest.LogCaptureFixture
) -> None:
    squatter = text("m2", "squatter", "assistant")
    reopen().session().import_message(squatter, parent_id=None, created_at=5)
    created = legacy.create_v017_tables()
    seed_branches(legacy)
    for _ in range(2):  # kept, and retried by the next open with the same outcome
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="convostore"):
            store = reopen()
        warnings = [r for r in caplog.records if getattr(r, "table", None)]
        assert [(r.levelno, r.table, r.source, r.copied) for r in warnings] == [  # type: ignore[attr-defined]
            (logging.WARNING, "assistant_messages", 3, 2)]
        assert "assistant_messages" in warnings[0].getMessage()
        s = store.session()
        assert s.get_message("m2") == squatter
        assert s.get_message("m1") == text("m1", "root question")
        assert ids(s.get_history()) == ["m1", "m3"]
        assert store.storage_stats().messages == 3
        assert legacy.tables() == created & {"assistant_messages", "assistant_config"}
    assert legacy.run("SELECT count(*) FROM assistant_messages") == [(3,)]


@pytest.mark.requires("reopen")
def test_rebuilds_the_search_index_from_lifted_rows_on_the_first_search(
    legacy: LegacyDb, reopen: Callable[[], Sessions]
) -> None:
    legacy.create_v017_tables()
    seed_branches(legacy)
    store = reopen()
    assert [h.id for h in store.session().search("root question")] == ["m1"]
    assert "assistant_fts" not in legacy.tables()


@pytest.mark.requires("reopen")
def test_an_index_built_before_the_lift_learns_the_lifted_rows(
    legacy: LegacyDb, reopen: Callable[[], Sessions]
) -> None:
    store = reopen()
    store.session("x").append_message(text("x1", "already here"))
    assert [h.id for h in store.search("already")] == ["x1"]  # builds the index
    legacy.create_v017_tables()
    seed_branches(legacy)
    store = reopen()
    assert [(h.session_id, h.id) for h in store.search("second answer")] == [("", "m3")]


@pytest.mark.requires("reopen")
def test_lifts_many_sessions_after_rows_already_there(
    legacy: LegacyDb, reopen: Callable[[], Sessions]
) -> None:
    store = reopen()
    store.session("b").append_message(text("bx", "written by convostore"))
    legacy.create_v017_tables()
    for sid in ("a", "b"):
        for i in range(3):
            parent = f"{sid}{i - 1}" if i else None
            legacy.message(f"{sid}{i}", sid, parent, "user", f"turn {i}",
                           f"2026-01-02 03:00:0{i}")
    legacy.compaction("ca", "a", "a summary", "a0", "a1", "2026-01-02 03:00:09")
    store = reopen()
    assert ids(store.session("a").get_history()) == ["compaction_ca", "a2"]
    assert seqs(store, "a", ["a0", "a1", "a2"]) == {"a0": 1, "a1": 2, "a2": 3}
    # after the row already there: lifted seqs never collide with it
    assert seqs(store, "b", ["bx", "b0", "b1", "b2"]) == {"bx": 1, "b0": 2, "b1": 3, "b2": 4}
    assert ids(store.session("b").get_history()) == ["b0", "b1", "b2"]
    assert ids(store.session("b").get_history(leaf_id="bx")) == ["bx"]


@pytest.mark.requires("reopen", "dynamic_column_types")
def test_an_unparsable_legacy_date_becomes_zero(
    legacy: LegacyDb, reopen: Callable[[], Sessions]
) -> None:
    legacy.create_v017_tables()
    legacy.message("m1", "", None, "user", "hi", "2026-01-02 03:00:00.250")
    legacy.message("m2", "", "m1", "user", "there", "someday")
    legacy.compaction("c", "", "s", "m1", "m1", "not a date")
    store = reopen()
    assert store.session().get_compactions()[0].created_at == "1970-01-01T00:00:00.000Z"
    assert {h.id: h.created_at for h in store.search("hi")} == {"m1": T_0300 + 250}
    assert {h.id: h.created_at for h in store.search("there")} == {"m2": 0}


@pytest.mark.requires("reopen")
def test_the_lift_is_idempotent(
    legacy: LegacyDb, reopen: Callable[[], Sessions], caplog: pytest.LogCaptureFixture
) -> None:
    legacy.create_v017_tables()
    seed_branches(legacy)
    reopen()
    with caplog.at_level(logging.INFO, logger="convostore"):
        store = reopen()
    assert caplog.records == []
    assert store.storage_stats().messages == 3 and store.storage_stats().compactions == 1
    # the same tables appearing again (a copy restored from a backup) change nothing
    legacy.create_v017_tables()
    seed_branches(legacy)
    store = reopen()
    assert store.storage_stats().messages == 3 and store.storage_stats().compactions == 1
    assert ids(store.session().get_history()) == ["m1", "m3"]
    assert "assistant_messages" not in legacy.tables()


@pytest.mark.requires("reopen")
def test_a_lift_that_fails_is_logged_and_the_store_opens(
    legacy: LegacyDb, reopen: Callable[[], Sessions], caplog: pytest.LogCaptureFixture
) -> None:
    legacy.run("CREATE TABLE assistant_messages (id TEXT PRIMARY KEY, body TEXT)")
    legacy.run("INSERT INTO assistant_messages VALUES ('m1', 'not the v0.17 shape')")
    with caplog.at_level(logging.ERROR, logger="convostore"):
        store = reopen()
    assert "lifting the legacy tables" in caplog.text
    store.session().append_message(text("n1", "the store works"))
    assert ids(store.session().get_history()) == ["n1"]
    assert "assistant_messages" in legacy.tables()


# --- §1.3 / §11.6: AIChatAgent's table ---------------------------------------------------------


def chat_row(db: LegacyDb, id: str, message: Any, created_at: Any = None) -> None:
    body = message if isinstance(message, str) else json.dumps(message)
    if created_at is None:
        db.run("INSERT INTO cf_ai_chat_agent_messages (id, message) VALUES (?, ?)", (id, body))
    else:
        db.run("INSERT INTO cf_ai_chat_agent_messages (id, message, created_at) "
               "VALUES (?, ?, ?)", (id, body, created_at))


@pytest.mark.requires("reopen")
def test_lifts_v4_and_v5_rows_into_one_linear_session_and_drops_the_table(
    legacy: LegacyDb, reopen: Callable[[], Sessions]
) -> None:
    legacy.run(CHAT_DDL[legacy.dialect])
    chat_row(legacy, "legacy-v4", {"id": "legacy-v4", "role": "user", "content": "hello v4"})
    chat_row(legacy, "legacy-v5", {"id": "legacy-v5", "role": "assistant",
                                   "parts": [{"type": "text", "text": "hello v5"}]})
    store = reopen()
    history = store.session().get_history()
    assert ids(history) == ["legacy-v4", "legacy-v5"]
    assert [m["parts"] for m in history] == [
        [{"type": "text", "text": "hello v4"}], [{"type": "text", "text": "hello v5"}]]
    assert ids(store.session().get_branches("legacy-v4")) == ["legacy-v5"]
    assert "cf_ai_chat_agent_messages" not in legacy.tables()


@pytest.mark.requires("reopen")
def test_chat_rows_keep_their_order_and_times_across_windows(
    legacy: LegacyDb, reopen: Callable[[], Sessions]
) -> None:
    legacy.run(CHAT_DDL[legacy.dialect])
    for i in range(60):
        chat_row(legacy, f"r{i:02d}", text(f"r{i:02d}", f"message {i}"),
                 f"2026-01-02 03:{i // 2:02d}:00")
    store = reopen()
    assert ids(store.session().get_history()) == [f"r{i:02d}" for i in range(60)]
    assert store.list_sessions()[0].last_write == T_0300 + 29 * 60_000


@pytest.mark.requires("reopen")
def test_invalid_chat_rows_are_skipped_and_the_table_kept_for_a_retry(
    legacy: LegacyDb, reopen: Callable[[], Sessions], caplog: pytest.LogCaptureFixture
) -> None:
    legacy.run(CHAT_DDL[legacy.dialect])
    chat_row(legacy, "a", text("a", "first"), "2026-01-02 03:00:00")
    chat_row(legacy, "b", "{not json", "2026-01-02 03:00:01")
    chat_row(legacy, "c", {"id": "c", "parts": []}, "2026-01-02 03:00:02")  # no role
    chat_row(legacy, "d", text("d", "last"), "2026-01-02 03:00:03")
    with caplog.at_level(logging.WARNING, logger="convostore"):
        store = reopen()
    text_of = caplog.text
    assert "'b'" in text_of and "'c'" in text_of
    kept = [r for r in caplog.records if getattr(r, "table", None)]
    assert [(r.source, r.copied) for r in kept] == [(4, 2)]  # type: ignore[attr-defined]
    assert "imported 2 of 4 rows (2 skipped)" in kept[0].getMessage()
    assert ids(store.session().get_history()) == ["a", "d"]
    assert "cf_ai_chat_agent_messages" in legacy.tables()
    legacy.run("UPDATE cf_ai_chat_agent_messages SET message = ? WHERE id = ?",
               (json.dumps(text("b", "fixed")), "b"))
    legacy.run("DELETE FROM cf_ai_chat_agent_messages WHERE id = ?", ("c",))
    store = reopen()
    assert ids(store.session().get_history(leaf_id="b")) == ["a", "b"]
    assert store.storage_stats().messages == 3
    assert "cf_ai_chat_agent_messages" not in legacy.tables()


@pytest.mark.requires("reopen", "dynamic_column_types")
def test_chat_created_at_numbers_dates_and_a_counter(
    legacy: LegacyDb, reopen: Callable[[], Sessions]
) -> None:
    legacy.run(CHAT_DDL[legacy.dialect])
    chat_row(legacy, "n", text("n", "numeric"), 1000)
    chat_row(legacy, "g", text("g", "garbage"), "yesterday-ish")
    chat_row(legacy, "i", text("i", "iso"), "2026-01-02T03:00:00.250Z")
    store = reopen()
    # SQLite orders numbers before texts: n, i, g; g's time follows the one before it
    assert ids(store.session().get_history()) == ["n", "i", "g"]
    assert {h.id: h.created_at for h in store.search("numeric")} == {"n": 1000}
    assert {h.id: h.created_at for h in store.search("iso")} == {"i": T_0300 + 250}
    assert {h.id: h.created_at for h in store.search("garbage")} == {"g": T_0300 + 251}


@pytest.mark.requires("reopen", "dynamic_column_types")
def test_chat_times_the_store_cannot_hold_follow_the_row_before(
    legacy: LegacyDb, reopen: Callable[[], Sessions]
) -> None:
    """Microseconds, a negative time and infinity are no times the store accepts: the rows
    are lifted in order (their times following the one before) and the table is dropped, not
    kept and re-read on every open."""
    legacy.run(CHAT_DDL[legacy.dialect])
    chat_row(legacy, "a", text("a", "first"), 1000)
    chat_row(legacy, "b", text("b", "micro"), 1_700_000_000_000_123)
    chat_row(legacy, "c", text("c", "negative"), -5)
    chat_row(legacy, "d", text("d", "infinite"), "inf")
    store = reopen()
    # SQLite orders by created_at: c (-5), a, b, then the text "inf"
    assert ids(store.session().get_history()) == ["c", "a", "b", "d"]
    times = {h.id: h.created_at for w in ("first", "micro", "negative", "infinite")
             for h in store.search(w)}
    assert times == {"c": 0, "a": 1000, "b": 1001, "d": 1002}
    assert "cf_ai_chat_agent_messages" not in legacy.tables()


# --- the v4 → v5 conversion and the windows, pure ------------------------------------------------


def test_v5_messages_pass_unchanged() -> None:
    message = {"id": "x", "role": "assistant", "parts": [{"type": "reasoning", "text": "hm"}],
               "metadata": {"k": 1}}
    assert to_v5(message) is message
    assert to_v5({"role": "user", "parts": []}, "row-id") == {
        "id": "row-id", "role": "user", "parts": []}


def test_v4_content_reasoning_tools_and_attachments() -> None:
    v4 = {
        "id": "a1", "role": "assistant", "content": "It is sunny.", "reasoning": "check weather",
        "createdAt": "2025-01-01T00:00:00.000Z",
        "toolInvocations": [
            {"state": "result", "toolCallId": "t1", "toolName": "weather",
             "args": {"city": "Oslo"}, "result": {"sky": "clear"}},
            {"state": "call", "toolCallId": "t2", "toolName": "news", "args": {}},
            {"state": "partial-call", "toolCallId": "t3", "toolName": "maps", "args": {}},
        ],
    }
    assert to_v5(v4) == {
        "id": "a1", "role": "assistant",
        "parts": [
            {"type": "reasoning", "text": "check weather"},
            {"type": "tool-weather", "toolCallId": "t1", "state": "output-available",
             "input": {"city": "Oslo"}, "output": {"sky": "clear"}},
            {"type": "tool-news", "toolCallId": "t2", "state": "input-available", "input": {}},
            {"type": "tool-maps", "toolCallId": "t3", "state": "input-streaming", "input": {}},
            {"type": "text", "text": "It is sunny."},
        ],
        "metadata": {"createdAt": "2025-01-01T00:00:00.000Z"},
    }
    user = {"id": "u1", "role": "user", "content": "see", "experimental_attachments": [
        {"name": "a.png", "contentType": "image/png", "url": "data:image/png;base64,AAAA"}]}
    assert to_v5(user) == {"id": "u1", "role": "user", "parts": [
        {"type": "text", "text": "see"},
        {"type": "file", "mediaType": "image/png", "filename": "a.png",
         "url": "data:image/png;base64,AAAA"}]}
    assert to_v5({"id": "d", "role": "data", "content": ""}) == {
        "id": "d", "role": "system", "parts": [{"type": "text", "text": ""}]}


def test_v4_parts_are_converted_one_by_one() -> None:
    v4 = {"id": "a", "role": "assistant", "content": "ignored: the parts are complete", "parts": [
        {"type": "step-start"},
        {"type": "reasoning", "reasoning": "think", "details": []},
        {"type": "tool-invocation", "toolInvocation": {
            "state": "result", "toolCallId": "t", "toolName": "calc", "args": {"x": 1},
            "result": 2}},
        {"type": "source", "source": {"sourceType": "url", "id": "s1", "url": "https://x.y",
                                      "title": "X"}},
        {"type": "file", "mimeType": "text/plain", "data": "aGk="},
        {"type": "text", "text": "done"},
    ]}
    assert to_v5(v4) == {"id": "a", "role": "assistant", "parts": [
        {"type": "step-start"},
        {"type": "reasoning", "text": "think"},
        {"type": "tool-calc", "toolCallId": "t", "state": "output-available", "input": {"x": 1},
         "output": 2},
        {"type": "source-url", "sourceId": "s1", "url": "https://x.y", "title": "X"},
        {"type": "file", "mediaType": "text/plain", "url": "data:text/plain;base64,aGk="},
        {"type": "text", "text": "done"},
    ]}


@pytest.mark.parametrize("value", [
    "a string", 7, None, [], {"id": "x", "content": "no role"}, {"id": 5, "role": "user",
                                                                  "parts": []},
    {"id": "", "role": "user", "parts": []},
])
def test_what_cannot_be_a_message(value: Any) -> None:
    assert to_v5(value) is None


def test_windows_hold_at_most_25_rows_and_4_mib() -> None:
    rows = [(f"r{i}", 100, None) for i in range(60)]
    assert [len(w) for w in windows(rows)] == [25, 25, 10]
    big = [("a", CHAT_WINDOW_BYTES - 10, None), ("b", 20, None), ("c", CHAT_WINDOW_BYTES * 2,
                                                                  None), ("d", 1, None)]
    assert [[r[0] for r in w] for w in windows(big)] == [["a"], ["b"], ["c"], ["d"]]
    assert list(windows([])) == []

"""Dump, restore and migrate: a whole store across engines, exactly (convostore.dump)."""

from __future__ import annotations

import base64
import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _helpers import ids, text
from _storage import execute, reading
from conftest import PG_URL, BackendSpec, _drop_schema

from convostore import BadDump, ChangeEvent, DumpTooNew, Sessions
from convostore.context import Context
from convostore.directory._sql import BYTES_SQL, COUNT_SQL
from convostore.dump import VERSION, DumpCounts, dump, dump_lines, migrate, restore
from convostore.manager import SessionManager

# What must come across, table by table: every stored column but the row's seq (a dense
# renumbering is allowed: order is compared instead) and the ``chained`` hint.
TABLES = {
    "convostore_messages": ("session_id, id, parent_id, role, content, content_chunks, "
                            "token_estimate, created_at, bytes", "session_id, seq"),
    "convostore_message_chunks": ("session_id, id, idx, content", "session_id, id, idx"),
    "convostore_compactions": ("session_id, id, summary, from_message_id, to_message_id, "
                               "created_at", "session_id, seq"),
    "convostore_attachments": ("hash, bytes, media_type, chunks", "hash"),
    "convostore_attachment_chunks": ("hash, idx, data", "hash, idx"),
    "convostore_attachment_refs": ("session_id, message_id, hash", "session_id, message_id"),
    # the totals as read (a stored part plus the newest row's), not the stored part alone
    "convostore_sessions d": ("session_id, internal, title, owner, metadata, created_at, "
                            f"updated_at, {COUNT_SQL}, {BYTES_SQL}, expires_at, ttl, active_leaf, "
                            "context_of, managed, parent_session_id, model, source, "
                            "input_tokens, output_tokens, estimated_cost, end_reason",
                            "session_id"),
}


def _tables(store: Sessions) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, in a stable order (Python's, not a collation's)."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with reading(store) as ops:
        for table, (cols, order) in TABLES.items():
            rows = execute(ops, f"SELECT {cols} FROM {table} ORDER BY {order}").fetchall()
            norm = [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows]
            # rows of one session keep their order; sessions (and keys) sort as Python does
            out[table] = sorted(norm, key=lambda r: (str(r[0]),)) if "seq" in order else sorted(
                norm, key=repr)
    return out


def _png(seed: int) -> str:
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes([seed]) * 3000).decode()


def _fill(store: Sessions) -> None:
    """Branches, a splice, compactions, a large message, shared images, a directory row and
    context blocks."""
    image = {"type": "file", "mediaType": "image/png", "url": f"data:image/png;base64,{_png(1)}"}
    other = {"type": "file", "mediaType": "image/jpeg", "filename": "x.jpg",
             "url": f"data:image/jpeg;base64,{_png(2)}"}
    s = store.session("support")
    s.append_messages([text("u1", "the deploy failed"), {"id": "a1", "role": "assistant",
                       "parts": [{"type": "text", "text": "looking"}, image]}])
    s.append_message(text("gone", "deleted later"))
    s.append_message(text("u2", "large: " + "é" * 1_000_000 + "\ud800 lone"))  # continuations
    s.append_message(text("a2", "first answer", "assistant"))
    s.append_message(text("a2b", "second answer", "assistant"), parent_id="u2")  # a branch
    s.delete_messages(["gone"])  # u2 spliced under a1, a seq gap left behind
    s.import_message(text("old", "from another system"), parent_id="u1", created_at=1234)
    s.append_message({"id": "u3", "role": "user", "parts": [other, image],
                      "metadata": {"n": 1.5, "deep": {"k": [None, True]}}})
    s.add_compaction("summary of the start", "u1", "u2")
    s.add_compaction("wider summary", "u1", "a2b")
    store.session("shared").append_message({"id": "x", "role": "user", "parts": [image]})
    store.session("only-compactions").add_compaction("orphan", "p", "q")
    manager = SessionManager(store)
    info = manager.create(name="named session", model="m-1")
    manager.append(info.id, text("via-manager", "hello"))
    manager.add_usage(info.id, input_tokens=10, output_tokens=3, cost=0.25)
    ctx = Context(store.session("chat")).with_context("memory", description="facts",
                                                      max_tokens=500)
    ctx.execute("set_context", {"label": "memory", "content": "prefers tea"})
    s.set_active_leaf("a2")
    store.session("shared").update_info(title="Shared", owner="user-42", ttl=3600,
                                        metadata={"plan": "pro", "n": 1.5, "tags": ["a"]})
    store.session("described").update_info(title="not written yet", expires_at=4_000_000_000_000)


@pytest.fixture
def other_url(backend_spec: BackendSpec, tmp_path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """A store of the other engine: SQLite for PostgreSQL, PostgreSQL for SQLite."""
    if "postgresql_dialect" in backend_spec.capabilities:
        yield str(tmp_path / "other.db"), {}
        return
    assert PG_URL is not None, "a test taking other_url is marked postgres_server"
    schema = f"cs_test_{uuid.uuid4().hex[:12]}"
    yield PG_URL, {"schema": schema, "pool_size": 2}
    _drop_schema(schema)


@pytest.fixture
def source(backend_spec: BackendSpec) -> Iterator[Sessions]:
    with Sessions.open(backend_spec.url, **backend_spec.options) as store:
        yield store


def _dump_text(store: Sessions) -> str:
    out = io.StringIO()
    dump(store, out)
    return out.getvalue()


@pytest.mark.postgres_server  # on SQLite it restores into PostgreSQL
def test_dump_restore_into_the_other_engine_and_dump_again_gives_the_same_bytes(
    source: Sessions, other_url: tuple[str, dict[str, Any]]
) -> None:
    _fill(source)
    first = _dump_text(source)
    with Sessions.open(other_url[0], **other_url[1]) as target:
        counts = restore(target, io.StringIO(first))
        assert counts == DumpCounts(sessions=5, messages=10, compactions=3, attachments=2,
                                    directory=5)
        assert _dump_text(target) == first
        assert _tables(target) == _tables(source)
        # and what the API shows agrees: branches, overlays, media, the directory, context
        for sid in ("support", "shared", "chat"):
            assert target.session(sid).get_history() == source.session(sid).get_history()
        s, t = source.session("support"), target.session("support")
        assert t.get_history(leaf_id="a2") == s.get_history(leaf_id="a2")
        assert ids(t.get_branches("u2")) == ["a2", "a2b"]
        assert t.get_compactions() == s.get_compactions()
        assert t.get_token_estimate() == s.get_token_estimate()
        assert SessionManager(target).list() == SessionManager(source).list()
        memory = Context(target.session("chat")).with_context("memory", description="facts",
                                                               max_tokens=500)
        assert "prefers tea" in memory.freeze_system_prompt()
        assert [h.id for h in target.search("deploy")] == ["u1"]
        assert target.storage_stats() == source.storage_stats()


def test_restore_is_idempotent_and_finishes_a_partial_restore(
    source: Sessions, tmp_path: Path
) -> None:
    _fill(source)
    lines = _dump_text(source).splitlines(keepends=True)
    with Sessions.open(str(tmp_path / "copy.db")) as target:
        # a restore that stopped part way: the first messages, but no end record
        with pytest.raises(BadDump) as info:
            restore(target, lines[:5])
        assert info.value.line == 5 and "truncated" in str(info.value)
        partial = target.storage_stats().messages
        assert 0 < partial < 10
        done = restore(target, lines)
        assert done.messages == 10 - partial and done.present >= partial
        again = restore(target, lines)
        assert (again.messages, again.compactions, again.attachments, again.directory) == (
            0, 0, 0, 0)
        assert again.present == 10 + 3 + 2 + 5
        assert _tables(target) == _tables(source)


def test_a_newer_format_is_refused_with_a_clear_message(
    source: Sessions, tmp_path: Path
) -> None:
    _fill(source)
    lines = _dump_text(source).splitlines(keepends=True)
    lines[0] = json.dumps({"type": "header", "format": "convostore-dump",
                           "version": VERSION + 1}) + "\n"
    with Sessions.open(str(tmp_path / "copy.db")) as target:
        with pytest.raises(DumpTooNew) as info:
            restore(target, lines)
        assert str(info.value) == (f"dump format version {VERSION + 1} is newer than this "
                                   f"convostore reads ({VERSION}); upgrade convostore to "
                                   "restore it")
        assert target.storage_stats().messages == 0
        with pytest.raises(BadDump, match="line 1: not a convostore dump"):
            restore(target, ['{"type": "message"}\n'])
        with pytest.raises(BadDump, match="line 1: empty"):
            restore(target, [])


def _broken(lines: list[str], at: int, record: dict[str, Any] | str) -> list[str]:
    out = list(lines)
    out[at] = (record if isinstance(record, str) else json.dumps(record)) + "\n"
    return out


def test_a_truncated_or_corrupt_dump_names_the_line_and_writes_nothing_of_it(
    source: Sessions, tmp_path: Path
) -> None:
    _fill(source)
    lines = _dump_text(source).splitlines(keepends=True)
    big = next(n for n, line in enumerate(lines) if '"id":"u2"' in line)
    message = json.loads(lines[big])
    attachment = next(n for n, line in enumerate(lines) if '"type":"attachment"' in line)
    end = len(lines) - 1
    cases: list[tuple[list[str], int, str]] = [
        (lines[:big] + [lines[big][: len(lines[big]) // 2]], big + 1, "not valid JSON"),
        (_broken(lines, big, {**message, "tokens": "12"}), big + 1, "'tokens' has the wrong"),
        (_broken(lines, big, {**message, "message": {"id": "u2", "role": "user"}}), big + 1,
         "parts"),
        (_broken(lines, big, {**message, "created_at": -1}), big + 1, "created_at"),
        (_broken(lines, big, {"type": "table", "rows": []}), big + 1, "not a dump record"),
        (_broken(lines, attachment, {**json.loads(lines[attachment]), "data": _png(9)}),
         attachment + 1, "does not match its hash"),
        (lines[:big] + lines[big + 1:], end, "the end record counts 10 messages, the dump "
         "holds 9"),
        (_broken(lines, end, lines[0].strip()), end + 1, "a second header record"),
    ]
    for number, (broken, line, problem) in enumerate(cases):
        with Sessions.open(str(tmp_path / f"copy{number}.db")) as target:
            with pytest.raises(BadDump) as info:
                restore(target, broken)
            assert info.value.line == line, (number, str(info.value))
            assert str(info.value).startswith(f"line {line}: "), (number, str(info.value))
            assert problem in str(info.value), (number, str(info.value))
            if line == big + 1:  # nothing of the broken message
                assert target.session("support").get_message("u2") is None


def test_restore_emits_import_events(source: Sessions, tmp_path: Path) -> None:
    source.session("s").append_messages([text("a", "1"), text("b", "2")])
    source.session("s").add_compaction("sum", "a", "b")
    with Sessions.open(str(tmp_path / "copy.db")) as target:
        seen: list[ChangeEvent] = []
        target.subscribe(seen.append)
        restore(target, dump_lines(source))
        assert [(e.type, e.message["id"] if e.message else None, e.parent_id) for e in seen] == [
            ("import", "a", None), ("import", "b", "a"), ("compaction", None, None)]


@pytest.mark.postgres_server  # on SQLite it restores into PostgreSQL
def test_migrate_copies_a_store_and_resumes_after_an_interruption(
    source: Sessions, other_url: tuple[str, dict[str, Any]]
) -> None:
    _fill(source)
    for i in range(600):  # more than one window, so the interruption lands in the middle
        source.session(f"bulk-{i // 200}").append_message(text(f"m{i}", f"message {i}"))

    def stop(done: int, total: int | None) -> None:
        if done >= 300:
            raise KeyboardInterrupt

    with Sessions.open(other_url[0], **other_url[1]) as target:
        with pytest.raises(KeyboardInterrupt):
            migrate(source, target, progress=stop)
        assert 0 < target.storage_stats().messages < 610
        counts = migrate(source, target)
        assert counts.present > 0
        assert _tables(target) == _tables(source)
        assert _dump_text(target) == _dump_text(source)


@pytest.mark.postgres_server  # on SQLite it restores into PostgreSQL
def test_the_directory_survives_dump_and_restore(
    source: Sessions, other_url: tuple[str, dict[str, Any]]
) -> None:
    """A chosen leaf, owner, title, metadata, expiry and ttl, a context session's link, the
    manager's columns and the times come back as they were; counts and sizes agree."""
    s = source.session("chat")
    s.append_messages([text("u1", "hi"), text("a1", "one", "assistant")])
    s.append_message(text("a1b", "two", "assistant"), parent_id="u1")
    s.set_active_leaf("a1")
    s.update_info(title="Greeting", owner="user-7", metadata={"plan": "pro", "deep": {"k": 1}},
                  ttl=86_400)
    source.session("idle").update_info(owner="user-7", expires_at=2_000_000_000_000)
    Context(s).with_context("memory", description="facts", max_tokens=100).execute(
        "set_context", {"label": "memory", "content": "likes tea"})
    manager = SessionManager(source)
    info = manager.create(name="run", model="m-2", source="cli", parent_session_id="chat")
    manager.add_usage(info.id, input_tokens=7, output_tokens=1, cost=0.125)
    before = {e.session_id: e for e in _entries(source)}
    assert any(e.belongs_to == "chat" for e in before.values())  # the context session's link
    with Sessions.open(other_url[0], **other_url[1]) as target:
        restore(target, dump_lines(source))
        after = {e.session_id: e for e in _entries(target)}
        assert after == before
        chat = target.session("chat")
        entry = chat.get_info()
        assert entry is not None and entry.active_leaf == "a1" and entry.ttl == 86_400_000
        assert (entry.message_count, entry.bytes) == (3, before["chat"].bytes)
        assert ids(chat.get_history()) == ["u1", "a1"]  # the chosen branch, not the newest
        assert SessionManager(target).get(info.id) == manager.get(info.id)
        assert target.list_conversations(owner="user-7") == source.list_conversations(
            owner="user-7")
        target.delete_session("chat")  # its context session goes with it, as in the source
        assert [e.session_id for e in _entries(target)] == sorted(["idle", info.id])


def _entries(store: Sessions) -> list[Any]:
    """Every directory entry, internal sessions' included, by id."""
    with reading(store) as ops:
        rows = execute(ops, "SELECT session_id FROM convostore_sessions").fetchall()
    sids = sorted(r[0] for r in rows)
    return [store.session(sid).get_info() for sid in sids]


def test_a_version_1_dump_restores_its_registry_rows(tmp_path: Path) -> None:
    row = {"id": "r1", "name": "old run", "parent_session_id": None, "model": "m-0",
           "source": None, "input_tokens": 4, "output_tokens": 2, "estimated_cost": 0.5,
           "end_reason": None, "created_at": 1_700_000_000_000, "updated_at": 1_700_000_001_000}
    lines = [json.dumps(r) + "\n" for r in (
        {"type": "header", "format": "convostore-dump", "version": 1},
        {"type": "directory", "row": row},
        {"type": "end", "sessions": 0, "messages": 0, "compactions": 0, "attachments": 0,
         "directory": 1},
    )]
    with Sessions.open(str(tmp_path / "copy.db")) as target:
        assert restore(target, lines).directory == 1
        got = SessionManager(target).get("r1")
        assert got is not None and (got.name, got.model, got.input_tokens) == ("old run", "m-0", 4)


def test_a_restore_cannot_borrow_a_payload_the_dump_does_not_carry(
    source: Sessions, tmp_path: Path
) -> None:
    """Issue 36, 6: a dump's message may point at a payload of the dump (its attachment
    records) or one its session references in the target; a pointer to a payload only another
    session of the target holds, or to none, is a bad dump, and nothing of the message is
    written."""
    image = {"type": "file", "mediaType": "image/png", "url": f"data:image/png;base64,{_png(5)}"}
    source.session("thief").append_message({"id": "m", "role": "user", "parts": [image]})
    lines = _dump_text(source).splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if '"type":"attachment"' in line)
    end = json.loads(lines[-1])
    stripped = lines[:at] + lines[at + 1:-1] + [json.dumps({**end, "attachments": 0}) + "\n"]
    message_line = next(n for n, line in enumerate(stripped) if '"type":"message"' in line) + 1
    for number, victim in enumerate((True, False)):
        with Sessions.open(str(tmp_path / f"copy{number}.db")) as target:
            if victim:
                target.session("victim").append_message(
                    {"id": "secret", "role": "user", "parts": [image]})
            with pytest.raises(BadDump) as info:
                restore(target, stripped)
            assert info.value.line == message_line and "import the media itself" in str(
                info.value)
            assert target.session("thief").get_history() == []
            restore(target, lines)  # the whole dump brings the payload
            assert target.session("thief").get_history() == source.session(
                "thief").get_history()


def _shape(store: Sessions) -> dict[str, Any]:
    """What a restore must reproduce of each session: its active history, every message's
    parent, its leaves and its chosen leaf."""
    out: dict[str, Any] = {}
    for sid in ("support", "shared", "chat", "thread"):
        s = store.session(sid)
        info = s.get_info()
        records = list(s.history_records())
        out[sid] = (s.get_history(), [(r.message["id"], r.parent_id) for r in records],
                    ids(s.get_leaves()), None if info is None else info.active_leaf)
    return out


@pytest.fixture
def same_engine(backend_spec: BackendSpec, tmp_path: Path) -> Iterator[Any]:
    """Opens fresh stores of the engine under test (a schema each on PostgreSQL)."""
    schemas: list[str] = []

    def open_fresh(name: str) -> Sessions:
        if "postgresql_dialect" not in backend_spec.capabilities:
            return Sessions.open(str(tmp_path / f"{name}.db"))
        schemas.append(f"cs_test_{uuid.uuid4().hex[:12]}")
        return Sessions.open(backend_spec.url, **{**backend_spec.options, "schema": schemas[-1]})

    yield open_fresh
    for schema in schemas:
        _drop_schema(schema)


def test_a_restore_after_a_failed_restore_gives_exactly_the_source(
    source: Sessions, same_engine: Any
) -> None:
    """Issue 36, 2: a dump missing a message line fails only at its end record, after the
    later records were written; restoring the complete dump then put the missing message last,
    so the active history differed from the source (a parent written after its children cut
    the path). It must give exactly the source."""
    _fill(source)
    thread = source.session("thread")
    thread.append_messages([text(f"t{i}", f"turn {i}") for i in range(8)])
    lines = _dump_text(source).splitlines(keepends=True)
    for missing in ("u1", "a1", "t0", "t3", "t7"):
        at = next(n for n, line in enumerate(lines)
                  if '"type":"message"' in line and f'"id":"{missing}"' in line)
        with same_engine(f"copy-{missing}") as target:
            with pytest.raises(BadDump, match="records are missing"):
                restore(target, lines[:at] + lines[at + 1:])
            restore(target, lines)
            assert _shape(target) == _shape(source), missing
            again = restore(target, lines)
            assert again.messages == 0 and _shape(target) == _shape(source)


def test_a_binary_stream_restores_as_its_text_does(source: Sessions, tmp_path: Path) -> None:
    """Issue 36 (friction): a dump opened in binary mode was "line 1: not valid JSON:
    truncated or corrupt"; its lines are the UTF-8 text a dump is."""
    _fill(source)
    first = _dump_text(source)
    with Sessions.open(str(tmp_path / "copy.db")) as target:
        counts = restore(target, io.BytesIO(first.encode("utf-8")))  # type: ignore[arg-type]
        assert counts.messages == 10 and _dump_text(target) == first
    with Sessions.open(str(tmp_path / "bad.db")) as target, pytest.raises(
        BadDump, match="line 1: not UTF-8 text"
    ):
        restore(target, io.BytesIO(b"\xff\xfe{}\n"))  # type: ignore[arg-type]

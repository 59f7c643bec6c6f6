"""Opening a store: URLs, durability, schema versions, closing (many processes:
test_store_stress.py)."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import sqlite3
from pathlib import Path

import pytest
from _helpers import ids, text
from _storage import execute, fetch_one, reading, writing

import convostore
from convostore import (
    AsyncSessions,
    BackendError,
    ConvostoreError,
    InvalidMessage,
    InvalidURL,
    SchemaTooNew,
    Sessions,
    StoreClosed,
)
from convostore.backends._schema import SCHEMA_VERSION
from convostore.backends.sqlite._engine import (
    WAL_AUTOCHECKPOINT_PAGES,
    WAL_AUTOCHECKPOINT_PAGES_FULL,
)
from convostore.store import StoreOptions

# opening a store: its connections, their settings, a second process
pytestmark = pytest.mark.connections


def test_public_names_are_listed_once_and_documented() -> None:
    public = sorted(n for n in dir(convostore) if not n.startswith("_") and n[0].isupper()
                    or n in ("create_compact_function", "is_compaction_message"))
    exported = set(convostore.__all__)
    assert set(public) - {"Message"} <= exported
    assert convostore.__all__ == sorted(convostore.__all__)
    for name in convostore.__all__:
        obj = getattr(convostore, name)
        if isinstance(obj, type) or callable(obj):
            assert obj.__doc__, f"{name} has no docstring"
        if isinstance(obj, type):
            assert obj.__module__ == "convostore"


def test_open_takes_exactly_the_declared_options() -> None:
    """The options are declared once (StoreOptions): both opens take exactly them, in order,
    with their types and defaults, and document each with its declared text."""
    fields = dataclasses.fields(StoreOptions)
    assert [f.name for f in fields][:2] == ["reserved_metadata_keys", "durability"]
    for opener in (Sessions.open, AsyncSessions.open):
        params = list(inspect.signature(opener).parameters.values())
        assert params[0].name == "url"
        assert [(p.name, p.default, p.annotation, p.kind) for p in params[1:]] == [
            (f.name, f.default, f.type, inspect.Parameter.KEYWORD_ONLY) for f in fields
        ]
        doc = inspect.getdoc(opener) or ""
        for f in fields:
            assert f":param {f.name}: {f.metadata['doc']}" in doc, f.name
    options = StoreOptions(schema="s", search_tool_output=True)
    assert options.engine_options()["schema"] == "s"
    assert options.store_options()["search_tool_output"] is True
    assert set(options.engine_options()).isdisjoint(options.store_options())


@pytest.mark.parametrize(
    "form", ["{path}", "sqlite:///{rel}", "sqlite:////{abs}", "path"]
)
def test_opens_sqlite_by_path_and_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "chat.db"
    if form == "path":
        url: object = target
    else:
        url = form.format(path=str(target), rel="chat.db", abs=str(target).lstrip("/"))
    with Sessions.open(url) as store:  # type: ignore[arg-type]
        store.session().append_message(text("a", "x"))
    assert target.exists()
    with Sessions.open(str(target)) as store:
        assert ids(store.session().get_history()) == ["a"]


def test_memory_databases_are_private() -> None:
    with Sessions.open(":memory:") as a, Sessions.open(":memory:") as b:
        a.session().append_message(text("a", "x"))
        assert b.session().get_history() == []


@pytest.mark.parametrize("url", ["mysql://x/y", "http://example.com/db", ""])
def test_unknown_urls_raise_invalid_url(url: str) -> None:
    with pytest.raises(InvalidURL):
        Sessions.open(url)


def test_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="does not exist"):
        Sessions.open(str(tmp_path / "no" / "such" / "dir.db"))


def test_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.db"
    bogus.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(BackendError):
        Sessions.open(str(bogus))


def test_durability_modes(tmp_path: Path) -> None:
    for mode in ("normal", "full"):
        with Sessions.open(str(tmp_path / f"{mode}.db"), durability=mode) as store:
            store.session().append_message(text("a", "x"))
            with reading(store) as ops:
                sync = fetch_one(ops, "PRAGMA synchronous")
                journal = fetch_one(ops, "PRAGMA journal_mode")
                interval = fetch_one(ops, "PRAGMA wal_autocheckpoint")
            assert sync == ((1,) if mode == "normal" else (2,))
            assert journal == ("wal",)
            assert interval == ((WAL_AUTOCHECKPOINT_PAGES,) if mode == "normal"
                                else (WAL_AUTOCHECKPOINT_PAGES_FULL,))
    with pytest.raises(ValueError):
        Sessions.open(str(tmp_path / "x.db"), durability="sometimes")  # type: ignore[arg-type]


def test_close_and_context_manager(tmp_path: Path) -> None:
    store = Sessions.open(str(tmp_path / "c.db"))
    s = store.session()
    store.close()
    assert store.closed
    with pytest.raises(StoreClosed):
        s.append_message(text("a", "x"))
    with pytest.raises(StoreClosed):
        store.session("x")
    store.close()  # idempotent


def test_an_older_schema_is_migrated_in_place(tmp_path: Path) -> None:
    from convostore.backends.sqlite import MIGRATIONS

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for sql in MIGRATIONS.steps[0]:
        conn.execute(sql)
    conn.execute("CREATE TABLE convostore_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO convostore_meta VALUES ('schema_version', '1')")
    conn.execute(
        "INSERT INTO convostore_messages (session_id, id, seq, parent_id, role, content_chunks, "
        "token_estimate, created_at, bytes, content) VALUES ('', 'old', 1, NULL, 'user', 0, 5, "
        "1, 60, ?)",
        ('{"id":"old","role":"user","parts":[{"type":"text","text":"kept"}]}',),
    )
    conn.commit()
    conn.close()
    with Sessions.open(str(path)) as store:
        s = store.session()
        assert s.get_history() == [text("old", "kept")]
        s.append_message(text("new", "y"))
        s.update_message(text("old", "changed"))
        assert ids(s.get_history()) == ["old", "new"]
    conn = sqlite3.connect(path)
    version = conn.execute("SELECT value FROM convostore_meta WHERE key='schema_version'")
    assert version.fetchone() == (str(SCHEMA_VERSION),)
    conn.close()


def test_a_newer_schema_refuses_to_open(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    Sessions.open(str(path)).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE convostore_meta SET value = '999' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaTooNew, match="999") as info:
        Sessions.open(str(path))
    assert isinstance(info.value, ConvostoreError)


def test_a_failed_write_rolls_back_and_frees_the_store(tmp_path: Path) -> None:
    """A write scope that raises leaves nothing behind, reports SQLite errors as BackendError,
    and releases the store's lock, so the next write (from another thread too) proceeds."""
    import threading

    store = Sessions.open(str(tmp_path / "c.db"))
    s = store.session()
    with pytest.raises(RuntimeError), writing(store, "") as ops:
        execute(  # a row goes in, then the body fails
            ops,
            "INSERT INTO convostore_messages (session_id, id, seq, role, created_at, "
            "content) VALUES ('', 'ghost', 1, 'user', 1, '{}')"
        )
        raise RuntimeError("boom")
    with pytest.raises(BackendError), writing(store, "") as ops:
        execute(ops, "INSERT INTO no_such_table VALUES (1)")
    assert s.get_message("ghost") is None
    done: list[bool] = []
    # daemon: if the lock were still held the join times out and the test fails, not hangs
    worker = threading.Thread(
        target=lambda: done.append(s.append_message(text("a", "x")).inserted), daemon=True
    )
    worker.start()
    worker.join(10)
    assert done == [True]
    assert ids(s.get_history()) == ["a"]
    store.close()


def test_errors_pickle() -> None:
    for exc in (InvalidMessage("parts[0]", "bad"), SchemaTooNew(3, 2), InvalidURL("x")):
        again = pickle.loads(pickle.dumps(exc))
        assert type(again) is type(exc) and str(again) == str(exc)


def test_settings_changed_after_open_apply_to_later_writes() -> None:
    with Sessions.open(":memory:") as store:
        store.token_counter = lambda text: 1000
        store.reserved_metadata_keys = ["channel"]
        s = store.session()
        s.append_message(text("a", "hi"))
        assert s.get_history_row_stats()[0].token_estimate > 1000
        stored = s.append_message(
            {"id": "b", "role": "user", "parts": [], "metadata": {"channel": 1, "k": 2}},
            source="client",
        ).message
        assert stored["metadata"] == {"k": 2}
        with pytest.raises(TypeError, match="not a string"):
            store.reserved_metadata_keys = "channel"
        assert store.reserved_metadata_keys == ("channel",)


def test_import_convostore_loads_no_database_driver() -> None:
    import subprocess
    import sys

    code = "import sys, convostore; print(sorted({'sqlite3', 'psycopg'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_architecture_doc_names_every_module() -> None:
    """docs/architecture.md and docs/engines.md say where everything lives: a new module must
    be placed there (and a removed one taken out), or a reader searches in vain."""
    root = Path(__file__).resolve().parent.parent
    package = root / "src" / "convostore"
    architecture = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    engines = (root / "docs" / "engines.md").read_text(encoding="utf-8")
    for path in package.glob("*.py"):
        if path.stem not in ("__init__", "__main__"):
            assert f"{path.stem}.py" in architecture, path
    # Every module of every capability folder, by its path (`messages/_writes.py`): a bare
    # `_sql.py` would match any of the folders that have one.
    folders = [p for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    assert len(folders) > 10, folders  # the house has its folders: the loop below checks them
    for folder in folders:
        if folder.name == "backends":  # named in docs/engines.md
            continue
        for path in folder.rglob("*.py"):
            assert path.relative_to(package).as_posix() in architecture, path
    backends = package / "backends"
    for path in backends.rglob("*.py"):
        name = path.relative_to(backends).as_posix()  # e.g. sqlite/_engine.py
        if name != "__init__.py":
            assert name in engines, path


def test_a_sqlite_writer_waits_for_another_process_lock_then_gives_up(tmp_path: Path) -> None:
    """Another connection's write lock is waited for (the write goes through once it is
    released), and a lock held past ``busy_timeout`` fails the write with nothing written."""
    import threading

    path = str(tmp_path / "busy.db")
    with Sessions.open(path, busy_timeout=30) as store:
        s = store.session()
        s.append_message(text("m0", "first"))
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        released = threading.Event()

        def release() -> None:
            released.wait()
            other.execute("COMMIT")

        thread = threading.Thread(target=release)
        thread.start()
        threading.Timer(0.05, released.set).start()
        s.append_message(text("m1", "after the other commit"))
        thread.join()
        assert ids(s.get_history()) == ["m0", "m1"]
        other.close()
    with Sessions.open(path, busy_timeout=0.05) as store:
        s = store.session()
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(BackendError, match="locked"):
            s.append_message(text("m2", "never written"))
        other.execute("ROLLBACK")
        other.close()
        assert ids(s.get_history()) == ["m0", "m1"]

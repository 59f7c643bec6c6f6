"""What only the PostgreSQL engine has: pools, schemas, migrations under concurrency, the DDL file,
roles that may not create tables, driver errors at the boundary, search-table limits.

The conformance suite runs everything else on PostgreSQL; these tests need a server
(``CONVOSTORE_TEST_POSTGRES_URL``) and skip without one, except the missing-driver test.
"""

from __future__ import annotations

import multiprocessing
import sys
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from _helpers import ids, text
from _storage import (
    backend,
    connection_pool,
    execute,
    fetch_one,
    hold_store_lock,
    reading,
    search_probe_sent,
    search_table_known,
    writing,
)
from conftest import PG_URL, _drop_schema

from convostore import (
    BackendError,
    MissingDependency,
    SchemaTooNew,
    Sessions,
    StoreClosed,
)
from convostore.backends._schema import SCHEMA_VERSION
from convostore.manager import SessionManager

if TYPE_CHECKING:
    from conftest import BackendSpec

# Every test here speaks PostgreSQL to the server: through a psycopg connection of its own
# (catalogs, schemas, roles), or by checking psycopg's errors and tsvector's limits. Each also
# names the capability it exercises; the conftest's ``requires`` counts both marks. Pools,
# server locks, schemas and the store's own connections: the connections and partitions slices.
pytestmark = [
    pytest.mark.requires("postgresql_dialect"), pytest.mark.connections, pytest.mark.partitions,
]


def _admin() -> Any:
    import psycopg

    assert PG_URL is not None
    return psycopg.connect(PG_URL, autocommit=True)


def _fresh_schema() -> str:
    return f"cs_test_{uuid.uuid4().hex[:12]}"


def _pooled(spec: BackendSpec) -> dict[str, Any]:
    """``transaction_pooler=True`` when the spec reaches the server through one: a store opened
    with options of the test's own must say so too, or it would leave session state (its
    search_path) on the pooler's server connections for every other client."""
    return {"transaction_pooler": True} if spec.options.get("transaction_pooler") else {}


@pytest.fixture
def spec(backend_spec: BackendSpec) -> BackendSpec:
    """The postgres backend spec (other backends skip through the ``requires`` marker)."""
    return backend_spec


@pytest.fixture
def schemas() -> Iterator[list[str]]:
    """Extra schemas a test creates; dropped afterwards."""
    made: list[str] = []
    yield made
    for schema in made:
        _drop_schema(schema)


def _tables(schema: str) -> set[str]:
    with _admin() as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,),
        ).fetchall()
    return {r[0] for r in rows}


# --- the driver is optional ---------------------------------------------------------------


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "convostore.backends.postgres", raising=False)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # makes `import psycopg` fail
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)
    with pytest.raises(MissingDependency) as info:
        Sessions.open("postgresql://nobody@127.0.0.1:1/none")
    assert "pip install 'convostore[postgres]'" in str(info.value)
    assert isinstance(info.value, ImportError)
    with pytest.raises(MissingDependency):
        Sessions.open(pool=object())


# --- pools ----------------------------------------------------------------------------------


@pytest.mark.requires("connection_pool", "schemas")
def test_a_user_pool_is_used_and_never_closed(spec: BackendSpec) -> None:
    from psycopg.pq import TransactionStatus
    from psycopg_pool import ConnectionPool

    schema = spec.options["schema"]
    # behind a transaction pooler, the user's pool prepares nothing (as the store's own would not)
    kwargs = {"prepare_threshold": None} if _pooled(spec) else {}
    pool: ConnectionPool[Any] = ConnectionPool(spec.url, min_size=1, max_size=2, open=True,
                                               kwargs=kwargs)
    try:
        with pool.connection() as conn:
            path_before = conn.execute("SHOW search_path").fetchone()
        store = Sessions.open(pool=pool, schema=schema, **_pooled(spec))
        s = store.session("u")
        s.append_message(text("a", "hello pool"))
        s.append_message(text("b", "second"))
        assert ids(s.get_history()) == ["a", "b"]
        assert [r.id for r in s.search("pool")] == ["a"]
        store.close()
        with pytest.raises(StoreClosed):
            s.get_history()
        assert not pool.closed
        with pool.connection() as conn:
            # The user's connections come back as they were lent: not autocommit, idle, and
            # with their own search_path (the schema was set per transaction only).
            assert conn.autocommit is False
            assert conn.info.transaction_status == TransactionStatus.IDLE
            assert conn.execute("SHOW search_path").fetchone() == path_before
            count = conn.execute(
                f'SELECT count(*) FROM "{schema}".convostore_messages'
            ).fetchone()
            assert count == (2,)
    finally:
        pool.close()


@pytest.mark.requires("connection_pool")
def test_the_store_closes_the_pool_it_created(spec: BackendSpec) -> None:
    store = Sessions.open(spec.url, **spec.options)
    store.session().append_message(text("a", "x"))
    pool = connection_pool(store)
    store.close()
    assert pool.closed
    store.close()  # idempotent


@pytest.mark.requires("connection_pool")
def test_the_store_s_own_connections_compress_large_values_with_lz4(spec: BackendSpec) -> None:
    # pglz cost a LangGraph step about 180 us of server CPU more (its 10-20 KB messages value)
    store = Sessions.open(spec.url, **spec.options)
    try:
        store.session("big").append_message(text("big", "compressible words " * 2000))
        with reading(store) as ops:
            row = fetch_one(ops, "SELECT reset_val, 'lz4' = ANY(enumvals) FROM pg_settings "
                                 "WHERE name = 'default_toast_compression'")
            stored = fetch_one(ops, "SELECT pg_column_compression(content) FROM "
                                    "convostore_messages WHERE session_id = 'big'")
    finally:
        store.close()
    assert row is not None and stored is not None
    # behind a transaction pooler the server connection is not the store's to set
    expected = "lz4" if row[1] and not _pooled(spec) else row[0]
    assert stored[0] == expected


@pytest.mark.requires("url_password")
def test_a_url_password_never_shows(spec: BackendSpec) -> None:
    assert PG_URL is not None and PG_URL.startswith("postgresql://")
    rest = PG_URL[len("postgresql://") :]
    user, _, host = rest.partition("@")
    url = f"postgresql://{user}:s3cret-pw@{host}"  # trust auth ignores the password
    with Sessions.open(url, **spec.options) as store:
        assert "s3cret-pw" not in repr(store)
        assert "s3cret-pw" not in backend(store).url


def test_an_unreachable_server_is_a_backend_error() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(BackendError) as info:
        Sessions.open("postgresql://postgres@127.0.0.1:1/test", schema="x")
    assert info.value.__cause__ is not None


# --- schemas --------------------------------------------------------------------------------


@pytest.mark.requires("schemas")
def test_schemas_isolate_stores_in_one_database(spec: BackendSpec, schemas: list[str]) -> None:
    public = _tables("public")
    other = _fresh_schema()
    schemas.append(other)
    with Sessions.open(spec.url, **spec.options) as a, \
            Sessions.open(spec.url, **{**spec.options, "schema": other}) as b:
        a.session("s").append_message(text("m1", "alpha words"))
        b.session("s").append_message(text("m1", "beta words"))
        b.session("s").append_message(text("m2", "more beta"))
        assert [m["parts"][0]["text"] for m in a.session("s").get_history()] == ["alpha words"]
        assert ids(b.session("s").get_history()) == ["m1", "m2"]
        assert [r.content for r in a.search("words")] == ["alpha words"]
        assert [r.content for r in b.search("words")] == ["beta words"]
        assert a.storage_stats().messages == 1 and b.storage_stats().messages == 2
    for schema in (spec.options["schema"], other):
        assert {"convostore_messages", "convostore_meta", "convostore_fts"} <= _tables(schema)
    assert _tables("public") <= public  # nothing created outside the stores' schemas


@pytest.mark.requires("schemas")
def test_an_awkward_schema_name_is_quoted(spec: BackendSpec, schemas: list[str]) -> None:
    odd = f"Odd Schema-{uuid.uuid4().hex[:6]}'%?"
    schemas.append(odd)
    with Sessions.open(spec.url, schema=odd, **_pooled(spec)) as store:
        store.session().append_message(text("a", "quoted schema works"))
        assert [r.id for r in store.session().search("quoted schema")] == ["a"]
    assert "convostore_messages" in _tables(odd)


@pytest.mark.parametrize("bad", ["", "x" * 64, "a\x00b"])
def test_a_bad_schema_name_is_refused_before_connecting(bad: str) -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(ValueError):
        Sessions.open("postgresql://nobody@127.0.0.1:1/none", schema=bad)


# --- migrations -----------------------------------------------------------------------------


def _open_and_write(url: str, schema: str, worker: int, start: Any, out: Any,
                    pooled: dict[str, Any]) -> None:
    try:
        start.wait(30)
        with Sessions.open(url, schema=schema, **pooled) as store:
            store.session(f"w{worker}").append_message(text(f"m{worker}", "hi"))
        out.put((worker, None))
    except BaseException as exc:  # reported to the parent, which fails the test
        out.put((worker, repr(exc)))


@pytest.mark.requires("schemas", "shared_across_processes")
def test_processes_opening_a_new_schema_at_once_migrate_it_once(
    spec: BackendSpec, schemas: list[str]
) -> None:
    schema = _fresh_schema()
    schemas.append(schema)
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_open_and_write, args=(spec.url, schema, w, start, out, _pooled(spec)))
        for w in range(6)
    ]
    for p in procs:
        p.start()
    start.set()
    results = sorted(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
    assert results == [(w, None) for w in range(6)]
    with _admin() as conn:
        assert conn.execute(
            f'SELECT key, value FROM "{schema}".convostore_meta'
        ).fetchall() == [("schema_version", str(SCHEMA_VERSION))]
    with Sessions.open(spec.url, schema=schema, **_pooled(spec)) as store:
        assert [x.session_id for x in store.list_sessions()] == [f"w{w}" for w in range(6)]


@pytest.mark.requires("schemas", "reopen")
def test_reopening_is_idempotent_and_a_newer_schema_is_refused(spec: BackendSpec) -> None:
    schema = spec.options["schema"]
    for _ in range(2):
        with Sessions.open(spec.url, **spec.options) as store:
            store.session().append_message(text("a", "once"))
    with Sessions.open(spec.url, **spec.options) as store:
        assert ids(store.session().get_history()) == ["a"]
    with _admin() as conn:
        conn.execute(
            f"UPDATE \"{schema}\".convostore_meta SET value = '{SCHEMA_VERSION + 1}' "
            "WHERE key = 'schema_version'"
        )
    with pytest.raises(SchemaTooNew) as info:
        Sessions.open(spec.url, **spec.options)
    assert (info.value.found, info.value.supported) == (SCHEMA_VERSION + 1, SCHEMA_VERSION)


@pytest.mark.requires("schemas")
def test_a_version_2_schema_migrates_and_its_rows_still_branch(
    spec: BackendSpec, schemas: list[str]
) -> None:
    """Version 3 replaces the full parent index by a partial one (branches only); rows written
    before stay in it and are found as children beside rows written after."""
    from _helpers import V2_TREE_ROWS, check_v2_tree_after_migration

    from convostore.backends.postgres import MIGRATIONS

    schema = _fresh_schema()
    schemas.append(schema)
    with _admin() as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute("SELECT set_config('search_path', quote_ident(%s), false)", (schema,))
        conn.execute(MIGRATIONS.meta)
        for step in MIGRATIONS.steps[:2]:
            for sql in step:
                conn.execute(sql)
        conn.execute("INSERT INTO convostore_meta VALUES ('schema_version', '2')")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO convostore_messages (session_id, id, seq, parent_id, role, "
                "created_at, content) VALUES ('', %s, %s, %s, 'user', 1, %s)",
                V2_TREE_ROWS,
            )
    with Sessions.open(spec.url, schema=schema, **_pooled(spec)) as store:
        check_v2_tree_after_migration(store.session())
    with _admin() as conn:
        indexes = dict(conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s "
            "AND tablename = 'convostore_messages'", (schema,),
        ).fetchall())
        version = conn.execute(f'SELECT value FROM "{schema}".convostore_meta').fetchone()
    assert "convostore_messages_parent" not in indexes
    assert indexes["convostore_messages_branch"].endswith("WHERE (chained = 0)")
    assert version == (str(SCHEMA_VERSION),)


def _catalog(schema: str) -> dict[str, Any]:
    with _admin() as conn:
        columns = conn.execute(
            "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, "
            "column_default, collation_name FROM information_schema.columns "
            "WHERE table_schema = %s ORDER BY table_name, ordinal_position",
            (schema,),
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname, replace(indexdef, %s, 'S') FROM pg_indexes "
            "WHERE schemaname = %s ORDER BY indexname",
            (conn.execute("SELECT quote_ident(%s)", (schema,)).fetchone()[0] + ".", schema),
        ).fetchall()
        meta = conn.execute(f'SELECT * FROM "{schema}".convostore_meta ORDER BY key').fetchall()
        conn.execute("SELECT set_config('search_path', quote_ident(%s), false)", (schema,))
        lexemes = conn.execute(
            "SELECT to_tsvector('convostore_english', 'The cats OR dogs were running')::text"
        ).fetchone()
    return {"columns": columns, "indexes": indexes, "meta": meta, "lexemes": lexemes}


def _run_schema_file(schema: str) -> None:
    from convostore.backends.postgres import SCHEMA_FILE

    with _admin() as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute("SELECT set_config('search_path', quote_ident(%s), false)", (schema,))
        conn.execute(SCHEMA_FILE.read_text(encoding="utf-8"))


@pytest.mark.requires("schema_file", "schemas")
def test_the_schema_file_builds_what_the_migrations_build(
    spec: BackendSpec, schemas: list[str]
) -> None:
    by_file = _fresh_schema()
    schemas.append(by_file)
    _run_schema_file(by_file)
    _run_schema_file(by_file)  # idempotent
    with Sessions.open(spec.url, **spec.options) as store:
        store.search("anything")  # the search table is created by the first search
        SessionManager(store).create("x")  # the registry: rows of the directory
    migrated = _catalog(spec.options["schema"])
    assert {"convostore_fts", "convostore_sessions"} <= {c[0] for c in migrated["columns"]}
    assert "convostore_registry" not in {c[0] for c in migrated["columns"]}
    assert _catalog(by_file) == migrated
    assert migrated["lexemes"] == ("'cat':2 'dog':4 'or':3 'run':6 'the':1 'were':5",)


@pytest.mark.requires("schema_file", "schemas")
def test_a_role_without_create_rights_works_on_the_schema_file(
    spec: BackendSpec, schemas: list[str]
) -> None:
    import psycopg.conninfo

    schema = _fresh_schema()
    schemas.append(schema)
    role = f"cs_app_{uuid.uuid4().hex[:10]}"
    assert PG_URL is not None
    info = psycopg.conninfo.conninfo_to_dict(PG_URL)
    url = (f"postgresql://{role}@{info.get('host', '127.0.0.1')}:{info.get('port', 5432)}"
           f"/{info['dbname']}")
    with _admin() as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
    try:
        with pytest.raises(BackendError):  # may not create the schema itself
            Sessions.open(url, schema=schema)
        _run_schema_file(schema)
        with _admin() as conn:
            conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {role}')
            conn.execute(
                f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" '
                f"TO {role}"
            )
        with Sessions.open(url, schema=schema) as store:
            s = store.session("app")
            s.append_message(text("a", "restricted roles can chat"))
            s.append_message({"id": "b", "role": "user", "parts": [
                {"type": "file", "mediaType": "image/png",
                 "url": "data:image/png;base64,iVBORw0KGgo="}]})
            assert [r.id for r in s.search("restricted roles")] == ["a"]
            s.delete_messages(["b"])
            assert ids(s.get_history()) == ["a"]
            assert store.storage_stats().attachments == 0
            manager = SessionManager(store)
            managed = manager.create("managed")
            manager.append(managed.id, text("m", "registered"))
            assert [i.id for i in manager.list()] == [managed.id]
    finally:
        with _admin() as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


# --- catalog questions inside a write scope -------------------------------------------------


@pytest.mark.requires("server_locks", "connection_pool", "search_table_probe")
def test_a_table_dropped_while_a_writer_waited_for_its_lock_is_gone_for_it(
    spec: BackendSpec,
) -> None:
    """Which tables exist is read with the statement's snapshot: a connection's catalog cache
    may still hold a table another connection dropped while this one waited for its lock."""
    import threading
    import time

    from convostore.legacy._sql import LEGACY_MESSAGES

    schema = spec.options["schema"]
    with Sessions.open(spec.url, schema=schema, pool_size=1, **_pooled(spec)) as store:
        # With the search table known, a write scope sends no catalog query of its own before
        # ours (scanning pg_class would refresh the caches by locking it).
        store.search("anything")
        assert search_table_known(store)
        with _admin() as conn:
            conn.execute(f'CREATE TABLE "{schema}".{LEGACY_MESSAGES} (id TEXT)')
        with reading(store) as ops:  # the pool's one connection caches the table
            assert ops.existing_tables([LEGACY_MESSAGES]) == {LEGACY_MESSAGES}
            row = fetch_one(ops, "SELECT pg_backend_pid()")
            assert row is not None
            pid = row[0]
        seen: list[set[str]] = []

        def writer() -> None:
            with writing(store, "s") as ops:  # waits for the store key held below
                seen.append(ops.existing_tables([LEGACY_MESSAGES]))

        with _admin() as holder:
            holder.execute("BEGIN")
            hold_store_lock(holder, store)
            thread = threading.Thread(target=writer)
            thread.start()
            deadline = time.monotonic() + 10
            while not holder.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted)", (pid,)
            ).fetchone()[0]:
                assert time.monotonic() < deadline, "the writer never waited for the lock"
                time.sleep(0.01)
            holder.execute(f'DROP TABLE "{schema}".{LEGACY_MESSAGES}')
            holder.execute("COMMIT")
            thread.join(10)
        assert seen == [set()]


@pytest.mark.requires("search_table_probe", "reopen")
def test_a_search_table_found_by_a_read_stops_the_probe_of_later_writes(
    spec: BackendSpec,
) -> None:
    """After a reopen, a search learns of the table in a read scope and the store stops asking:
    its write scopes must stop sending their probe too."""
    with Sessions.open(spec.url, **spec.options) as store:
        store.session().append_message(text("a", "indexed words"))
        store.search("indexed")  # creates the search table
    with Sessions.open(spec.url, **spec.options) as store:
        assert [r.id for r in store.search("indexed")] == ["a"]
        s = store.session()
        s.append_message(text("b", "more"))
        s.append_message(text("c", "words"))
        assert search_table_known(store)
        with writing(store, "") as ops:
            assert not search_probe_sent(ops) and ops.fts_exists()
        assert sorted(r.id for r in store.search("words")) == ["a", "c"]


# --- the boundary: driver errors, interrupts, nesting ---------------------------------------


@pytest.mark.requires("connection_pool")
def test_driver_errors_are_backend_errors_and_roll_back(spec: BackendSpec) -> None:
    import psycopg

    with Sessions.open(spec.url, **spec.options) as store:
        s = store.session()
        s.append_message(text("a", "kept"))
        with pytest.raises(BackendError) as info, writing(store, "") as ops:
            execute(ops, "DELETE FROM convostore_messages")
            fetch_one(ops, "SELECT 1 / 0")
        assert isinstance(info.value.__cause__, psycopg.errors.DivisionByZero)
        assert ids(s.get_history()) == ["a"]  # the delete was rolled back
        with pytest.raises(BackendError), reading(store) as ops:
            fetch_one(ops, "SELECT * FROM no_such_table")
        s.append_message(text("b", "the pool still works"))
        assert ids(s.get_history()) == ["a", "b"]


@pytest.mark.requires("connection_pool")
def test_an_interrupt_is_not_wrapped_and_rolls_back(spec: BackendSpec) -> None:
    with Sessions.open(spec.url, **spec.options) as store:
        s = store.session()
        s.append_message(text("a", "kept"))
        with pytest.raises(KeyboardInterrupt), writing(store, "") as ops:
            execute(ops, "DELETE FROM convostore_messages")
            raise KeyboardInterrupt
        assert ids(s.get_history()) == ["a"]
        s.append_message(text("b", "after"))
        assert ids(s.get_history()) == ["a", "b"]


@pytest.mark.requires("connection_pool")
def test_an_append_interrupted_after_its_statements_were_sent_commits_nothing(
    spec: BackendSpec, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plain append may run in the pipeline's implicit transaction (no BEGIN or COMMIT of
    its own): its lock and insert are already on the wire when the interrupt lands, and still
    nothing commits, on every configuration (explicit transaction or not)."""
    from convostore.messages._writes import Writer

    sent = Writer._append_op

    def interrupted(self: Writer, *args: Any, **kwargs: Any) -> Any:
        sent(self, *args, **kwargs)  # the statement is queued in the pipeline
        raise KeyboardInterrupt

    with Sessions.open(spec.url, **spec.options) as store:
        s = store.session()
        s.append_message(text("a", "kept"))
        monkeypatch.setattr(Writer, "_append_op", interrupted)
        with pytest.raises(KeyboardInterrupt):
            s.append_message(text("b", "lost"))
        monkeypatch.undo()
        assert ids(s.get_history()) == ["a"]
        assert store.changes(since=0)[-1].message_id == "a"  # no change logged for "b"
        s.append_message(text("c", "after"))  # the pool replaced the abandoned connection
        assert ids(s.get_history()) == ["a", "c"]


@pytest.mark.requires("connection_pool")
def test_a_nested_write_in_one_thread_fails_instead_of_waiting_forever(
    spec: BackendSpec,
) -> None:
    with Sessions.open(spec.url, **spec.options) as store:
        s = store.session()
        with writing(store, "") as ops:
            assert ops.tail("") is None
            with pytest.raises(BackendError, match="already open"):
                s.append_message(text("a", "x"))
        s.append_message(text("a", "x"))
        assert ids(s.get_history()) == ["a"]


@pytest.mark.requires("server_locks")
def test_two_stores_on_one_schema_share_the_session_lock(spec: BackendSpec) -> None:
    import threading

    with Sessions.open(spec.url, **spec.options) as a, \
            Sessions.open(spec.url, **spec.options) as b:
        def worker(store: Sessions, k: int) -> None:
            for i in range(30):
                store.session("x").append_message(text(f"{k}-{i}", "y"))

        threads = [threading.Thread(target=worker, args=(st, k))
                   for k, st in enumerate([a, b, a, b])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        history = a.session("x").get_history()
        assert len(history) == 120 and len(set(ids(history))) == 120
        assert len(b.session("x").get_history_row_stats()) == 120  # one linear chain


# --- search-table limits --------------------------------------------------------------------


def test_text_too_big_for_one_tsvector_is_indexed_without_failing_the_write(
    spec: BackendSpec,
) -> None:
    with Sessions.open(spec.url, **spec.options) as store:
        s = store.session()
        s.append_message(text("seed", "first"))
        assert s.search("first")[0].id == "seed"  # the index exists from here on
        # ~1.3 MB of distinct words: a single tsvector of all of it exceeds 1 MB.
        body = "opening phrase here " + " ".join(f"w{i}x" for i in range(200_000))
        s.append_message(text("huge", body))
        assert s.get_message("huge") == text("huge", body)
        assert [r.id for r in s.search("opening phrase")] == ["huge"]
        assert [r.id for r in s.search("w15000x")] == ["huge"]


def test_nul_and_lone_surrogates_in_indexed_text_do_not_fail_writes(spec: BackendSpec) -> None:
    with Sessions.open(spec.url, **spec.options) as store:
        s = store.session()
        s.append_message(text("seed", "first"))
        s.search("first")
        odd = "before\x00after \ud800 lonely"
        s.append_message(text("odd", odd))
        assert s.get_message("odd") == text("odd", odd)
        assert [r.id for r in s.search("lonely")] == ["odd"]
        assert s.search("\x00") == [] and s.search("\udfff") == []

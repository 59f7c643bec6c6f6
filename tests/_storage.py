"""Storage seen from underneath: the one place where tests look past the public API.

Almost every test speaks through :class:`~convostore.Sessions` and its sessions. A few must check
what the API cannot show, because it is the point of the test: that media left the message row
(the stored JSON), how many attachment rows exist, the PRAGMAs a SQLite store set, that a failed
write scope rolls back, which statements a read sends, that the store closes the pool it made,
that the search-table probe stops once the table is known. Those tests reach storage only
through the small functions below.

Each function goes through the documented ``store.core.backend`` (see
:class:`convostore._core.StoreCore` and the ``Backend``/``Ops`` protocols in
``convostore.backends.base``). Where the engines offer nothing public (raw SQL inside a scope,
a pool, a connection, the search-table flags), the private attribute is named here and nowhere
else in the suite, so a change of the engines' insides is one edit in this file. Nothing here
mocks the database: every function reads or writes the real one.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from convostore import Sessions
from convostore.backends.base import Backend, Ops


def backend(store: Sessions) -> Backend:
    """The store's backend (``store.core.backend``), for the functions below."""
    return store.core.backend


def is_postgres(store: Sessions) -> bool:
    """Whether the store's engine is PostgreSQL's (its SQL is the test's to choose)."""
    return type(backend(store)).__module__.startswith("convostore.backends.postgres.")


# --- scopes and raw SQL -------------------------------------------------------------------


def reading(store: Sessions) -> AbstractContextManager[Ops]:
    """A read scope on the store's database: the ``Ops`` the store's own reads use."""
    return backend(store).read()


def writing(store: Sessions, session_id: str | None = "") -> AbstractContextManager[Ops]:
    """A write scope (one transaction) serialised with writers of ``session_id`` (all if None)."""
    return backend(store).write(session_id)


def execute(ops: Ops, sql: str, params: Sequence[Any] = ()) -> Any:
    """Run raw SQL (``?`` placeholders, any engine) inside a scope; returns the driver's cursor."""
    raw: Any = ops  # the engines' SQL runner is private to them
    return raw._run(sql, params)


def fetch_one(ops: Ops, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
    """The first row of raw SQL run inside a scope (None if there is none)."""
    raw: Any = ops
    row: tuple[Any, ...] | None = raw._one(sql, params)
    return row


def query_one(store: Sessions, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
    """The first row of raw SQL, in a read scope of its own."""
    with reading(store) as ops:
        return fetch_one(ops, sql, params)


def count_rows(store: Sessions, table: str) -> int:
    """How many rows ``table`` (one of the store's tables) holds."""
    row = query_one(store, f"SELECT count(*) FROM {table}")
    assert row is not None
    return int(row[0])


# --- what the store wrote -------------------------------------------------------------------


def stored_row(store: Sessions, session_id: str, id: str) -> str:
    """The content column of a message's (first) row: the JSON as stored, pointers and all."""
    with reading(store) as ops:
        meta = ops.row_meta(session_id, id)
        assert meta is not None, f"no row for message {id!r}"
        rows = ops.content_rows_by_seq(session_id, [meta.seq])
    return rows[0].content


def seqs(store: Sessions, session_id: str, ids: list[str]) -> dict[str, int]:
    """The stored sequence numbers (the order of writing) of messages ``ids``."""
    with reading(store) as ops:
        return dict(ops.seqs_of(session_id, ids))


def has_search_table(store: Sessions) -> bool:
    """Does the full-text search table exist (it is built by the first search)?"""
    with reading(store) as ops:
        return ops.fts_exists()


def has_registry(store: Sessions) -> bool:
    """Does the session manager's registry table exist?"""
    with reading(store) as ops:
        return bool(ops.registry_exists())


# --- the engines' own machinery (private to them: named here only) --------------------------


def connection_pool(store: Sessions) -> Any:
    """The connection pool a pooled engine draws from (the one it made, or the user's)."""
    raw: Any = backend(store)
    return raw._pool


def single_connection(store: Sessions) -> Any:
    """The DB-API connection of an engine that keeps one connection for the store."""
    raw: Any = backend(store)
    return raw._conn


def search_table_known(store: Sessions) -> bool:
    """Has a scope seen the search table, so that write scopes stop probing for it?"""
    raw: Any = backend(store)
    return bool(raw._fts_seen)


def search_probe_sent(ops: Ops) -> bool:
    """Would this write scope ask whether the search table exists (it does not know yet)?"""
    raw: Any = ops
    return raw._fts is None


def hold_store_lock(conn: Any, store: Sessions) -> None:
    """Take, in ``conn``'s open transaction (another connection, same schema), the lock every
    writer of the store waits for: the messages table's lock that the store-wide scope takes."""
    from convostore.backends.postgres._scope import LOCK_STORE

    raw: Any = backend(store)
    schema = raw.schema
    conn.execute(f'SET LOCAL search_path TO "{schema}"' if schema else "SELECT 1")
    conn.execute(LOCK_STORE)


# --- every table, every column (the directory tests: "nothing of the session is left") ------


def cells_holding(store: Sessions, values: Sequence[str]) -> dict[str, int]:
    """For every table of the store's database (or schema) and every column of it, how many
    rows hold one of ``values`` (compared as text); only the non-zero ``table.column`` counts.

    Engine-neutral in what it checks, engine-specific only in how it lists the catalog."""
    found: dict[str, int] = {}
    marks = ",".join("?" * len(values))
    with reading(store) as ops:
        if is_postgres(store):
            cols = [
                (r[0], r[1])
                for r in execute(
                    ops,
                    "SELECT table_name, column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema()",
                ).fetchall()
            ]
        else:
            tables = [r[0] for r in execute(
                ops, "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]
            cols = [(t, c[1]) for t in tables
                    for c in execute(ops, f"PRAGMA table_info(\"{t}\")").fetchall()]
        for table, column in cols:
            row = fetch_one(
                ops,
                f'SELECT count(*) FROM "{table}" WHERE CAST("{column}" AS TEXT) IN ({marks})',
                list(values),
            )
            if row is not None and int(row[0]):
                found[f"{table}.{column}"] = int(row[0])
    return found


def query_plan(store: Sessions, sql: str, params: Sequence[Any] = ()) -> str:
    """The engine's plan of ``sql`` as one text (SQLite's EXPLAIN QUERY PLAN, PostgreSQL's
    EXPLAIN), to see which index serves a query."""
    with reading(store) as ops:
        prefix = "EXPLAIN " if is_postgres(store) else "EXPLAIN QUERY PLAN "
        rows = execute(ops, prefix + sql, params).fetchall()
    return "\n".join(" ".join(str(v) for v in r) for r in rows)


# --- the search index -----------------------------------------------------------------------


def orphan_index_entries(store: Sessions) -> int:
    """Entries of the search index whose message row is gone (the index must have none)."""
    pg = is_postgres(store)
    sql = (
        "SELECT count(*) FROM convostore_fts f WHERE NOT EXISTS (SELECT 1 FROM "
        "convostore_messages m WHERE m.session_id = f.session_id AND m.id = f.id)"
        if pg else
        "SELECT count(*) FROM convostore_fts_docsize d WHERE NOT EXISTS "
        "(SELECT 1 FROM convostore_messages m WHERE m.rid = d.id)"
    )
    row = query_one(store, sql)
    assert row is not None
    return int(row[0])


def install_v6_search_index(store: Sessions, words: str) -> None:
    """Replace the store's search index by one of schema version 6 (a copy of the text beside
    the index), holding ``words`` for every message, and mark the database version 6."""
    pg = is_postgres(store)
    with writing(store, None) as ops:
        execute(ops, "DROP TABLE IF EXISTS convostore_fts")
        if pg:
            execute(ops, 'CREATE TABLE convostore_fts (session_id TEXT COLLATE "C" NOT NULL, '
                    'id TEXT COLLATE "C" NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, '
                    "tsv TSVECTOR NOT NULL, PRIMARY KEY (session_id, id))")
            execute(ops, "INSERT INTO convostore_fts SELECT session_id, id, role, ?, "
                    "to_tsvector('simple', ?) FROM convostore_messages", (words, words))
        else:
            execute(ops, "CREATE VIRTUAL TABLE convostore_fts USING fts5(session_id UNINDEXED, "
                    "id UNINDEXED, role UNINDEXED, content, tokenize = 'porter unicode61')")
            execute(ops, "INSERT INTO convostore_fts (rowid, session_id, id, role, content) "
                    "SELECT rid, session_id, id, role, ? FROM convostore_messages", (words,))
        execute(ops, "DELETE FROM convostore_meta WHERE key = 'fts_definition'")
        execute(ops, "UPDATE convostore_meta SET value = '6' WHERE key = 'schema_version'")

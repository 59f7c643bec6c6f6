"""The PostgreSQL engine: a psycopg 3 connection pool, advisory-locked writes, tsvector search.

Imported only when a ``postgresql://`` URL (or ``pool=``) is opened; without psycopg the import
fails and :meth:`~convostore.Sessions.open` raises
:class:`~convostore.errors.MissingDependency`.

- Connections come from a ``psycopg_pool.ConnectionPool``: one the store creates from the URL
  (``pool_size`` connections at most, closed by :meth:`PostgresBackend.close`) or one the user
  passes (never closed by the store).
- ``schema=`` puts the tables in that schema (created if missing). The shared SQL stays
  unqualified: the store's own connections get ``search_path`` once, when they are opened; a
  user's connections get it per scope, with ``set_config(..., true)`` inside a transaction.
- A write scope is one ``READ COMMITTED`` transaction that first takes
  ``pg_advisory_xact_lock`` on a key derived from (schema, session id), plus a shared lock on the
  store key, so the next ``seq`` and the active leaf derived inside it are those of the previous
  writer's commit; ``write(None)`` (index creation) takes the store key exclusively. Every writer
  takes the same locks in the same order, so no deadlock. The scope runs in pipeline mode: the
  ``BEGIN``, the locks and the check for the search table travel with its first query, and
  statements nobody reads the result of travel with the ``COMMIT`` (a plain append: two round
  trips).
- Reads run in autocommit (each statement sees the latest commits), or in a read-only
  transaction when a user pool needs ``search_path`` set.
- Migrations are versioned in ``convostore_meta`` (same ``SCHEMA_VERSION`` as SQLite), idempotent
  and serialised by an advisory lock, so several processes may open one database at once. A role
  that may not create tables can run ``postgres_schema.sql`` (shipped next to this module) once;
  opening then performs no DDL.
- Search: ``convostore_fts`` (created by the first search) holds the indexed text of each message
  and a ``tsvector`` under a GIN index; a session search is a phrase (``phraseto_tsquery``), a
  store search needs every word (``plainto_tsquery``), best ``ts_rank`` first. The text search
  configuration is ``english`` without its stop words (see :data:`TS_CONFIG`). Stale index rows
  never surface: hits are joined to the messages table.
- Multi-key lookups and the path walk probe the unique indexes per key (``LATERAL ... LIMIT 1``),
  so their cost never depends on the planner's statistics.
- Payload chunks are ``bytea``. Payload collection locks payload rows ``FOR UPDATE`` and re-use
  locks them ``FOR SHARE``, so a payload is never collected under a concurrent writer re-using it.

Every psycopg error crossing :meth:`PostgresBackend.read` / :meth:`PostgresBackend.write` (or
raised while opening) becomes :class:`~convostore.errors.BackendError` with the driver's
exception as ``__cause__``.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool
from psycopg import sql
from psycopg.rows import tuple_row

from ..errors import BackendError, SchemaTooNew, StoreClosed
from ._legacy_sql import PG_TABLES
from ._sql import AR, SCHEMA_VERSION, M, S, SqlOps, _qualify
from .base import FtsHit, _batches, _marks

logger = logging.getLogger("convostore")

FTS = "convostore_fts"
TS_CONFIG = "convostore_english"
"""The text search configuration of the index and of queries: ``english`` without stop words."""

SCHEMA_FILE = Path(__file__).with_name("postgres_schema.sql")
"""The DDL of the current schema version, for roles that may not create tables."""

# Each step brings a database from the version before it to its own number (index + 1); the
# same steps as SQLite's. Text keys use the "C" collation: byte order, as SQLite compares, and
# cheaper b-tree comparisons.
_MIGRATIONS: list[list[str]] = [
    [
        f"""CREATE TABLE IF NOT EXISTS {M} (
            session_id TEXT COLLATE "C" NOT NULL,
            id TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            parent_id TEXT COLLATE "C",
            role TEXT NOT NULL,
            content_chunks INTEGER NOT NULL DEFAULT 0,
            token_estimate BIGINT NOT NULL DEFAULT 0,
            created_at BIGINT NOT NULL,
            bytes BIGINT NOT NULL DEFAULT 0,
            content TEXT NOT NULL,
            PRIMARY KEY (session_id, id)
        )""",
        f"CREATE UNIQUE INDEX IF NOT EXISTS convostore_messages_seq ON {M} (session_id, seq)",
        f"CREATE INDEX IF NOT EXISTS convostore_messages_parent ON {M} (session_id, parent_id)",
        """CREATE TABLE IF NOT EXISTS convostore_message_chunks (
            session_id TEXT COLLATE "C" NOT NULL,
            id TEXT COLLATE "C" NOT NULL,
            idx INTEGER NOT NULL,
            content TEXT NOT NULL,
            PRIMARY KEY (session_id, id, idx)
        )""",
        """CREATE TABLE IF NOT EXISTS convostore_compactions (
            session_id TEXT COLLATE "C" NOT NULL,
            id TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            summary TEXT NOT NULL,
            from_message_id TEXT COLLATE "C" NOT NULL,
            to_message_id TEXT COLLATE "C" NOT NULL,
            created_at BIGINT NOT NULL,
            PRIMARY KEY (session_id, id)
        )""",
        """CREATE TABLE IF NOT EXISTS convostore_attachments (
            hash TEXT COLLATE "C" PRIMARY KEY,
            bytes BIGINT NOT NULL,
            media_type TEXT NOT NULL,
            chunks INTEGER NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS convostore_attachment_chunks (
            hash TEXT COLLATE "C" NOT NULL,
            idx INTEGER NOT NULL,
            data BYTEA NOT NULL,
            PRIMARY KEY (hash, idx)
        )""",
        """CREATE TABLE IF NOT EXISTS convostore_attachment_refs (
            session_id TEXT COLLATE "C" NOT NULL,
            message_id TEXT COLLATE "C" NOT NULL,
            hash TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (session_id, message_id, hash)
        )""",
    ],
    [
        f"""CREATE TABLE IF NOT EXISTS {S} (
            session_id TEXT COLLATE "C" PRIMARY KEY,
            epoch BIGINT NOT NULL
        )""",
        f"CREATE INDEX IF NOT EXISTS convostore_attachment_refs_hash ON {AR} (hash)",
    ],
    [
        f"ALTER TABLE {M} ADD COLUMN IF NOT EXISTS chained SMALLINT NOT NULL DEFAULT 0",
        "DROP INDEX IF EXISTS convostore_messages_parent",
        f"CREATE INDEX IF NOT EXISTS convostore_messages_branch ON {M} (session_id, parent_id) "
        "WHERE chained = 0",
    ],
]
assert len(_MIGRATIONS) == SCHEMA_VERSION

_META = (
    "CREATE TABLE IF NOT EXISTS convostore_meta ("
    'key TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL)'
)

# The search table, created by the first search (behaviour.md §8.1: not on append). The tsvector
# is computed by the INSERT from a bounded source text (see _index_source), not generated from
# ``content``: a generated column would fail the whole write on a text whose tsvector exceeds
# PostgreSQL's 1 MB limit.
#
# The text search configuration is ``english`` with its stop-word list left out: English
# stemming, as SQLite's porter tokenizer does, but every word is a token, so "cats OR dogs" is a
# three-word phrase and a search for "the" finds "the", as on SQLite. PostgreSQL has no IF NOT
# EXISTS for these, hence the DO block (whose command tag also keeps psycopg from discarding its
# prepared statements in the middle of a pipeline, as an ALTER's would).
_FTS_CONFIG_DDL = f"""DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_ts_config WHERE cfgname = '{TS_CONFIG}'
        AND cfgnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
    ) THEN
        CREATE TEXT SEARCH DICTIONARY {TS_CONFIG}_stem (TEMPLATE = snowball, LANGUAGE = english);
        CREATE TEXT SEARCH CONFIGURATION {TS_CONFIG} (COPY = pg_catalog.english);
        ALTER TEXT SEARCH CONFIGURATION {TS_CONFIG}
            ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part
            WITH {TS_CONFIG}_stem;
    END IF;
END
$$"""
_FTS_DDL = [
    f"""CREATE TABLE IF NOT EXISTS {FTS} (
        session_id TEXT COLLATE "C" NOT NULL,
        id TEXT COLLATE "C" NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tsv TSVECTOR NOT NULL,
        PRIMARY KEY (session_id, id)
    )""",
    f"CREATE INDEX IF NOT EXISTS convostore_fts_tsv ON {FTS} USING GIN (tsv)",
]


# --- small helpers ----------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _pg(statement: str) -> str:
    """The shared SQL's ``?`` placeholders as psycopg's ``%s`` (literal ``%`` doubled)."""
    return statement.replace("%", "%%").replace("?", "%s")


def _key(*parts: str) -> int:
    """A signed 64-bit advisory lock key for ``parts`` (a collision only serialises more)."""
    data = "\x00".join(parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)


_UNSAFE_TEXT = re.compile("[\x00\ud800-\udfff]")
_WORD = re.compile(r"\w")


def _clean(text: str) -> str:
    """Text PostgreSQL can hold: NUL and lone surrogates become spaces."""
    return _UNSAFE_TEXT.sub(" ", text) if _UNSAFE_TEXT.search(text) else text


_VERBATIM_CHARS = 60_000
_SOURCE_CHARS = 150_000


def _index_source(text: str) -> str:
    """The text a message's tsvector is built from, bounded so it fits PostgreSQL's limits.

    A tsvector holds at most 1 MB and positions up to 16383, so a long text is indexed as its
    first 60,000 characters verbatim (phrases match there) followed by each further word once
    (every word stays findable), at most 150,000 characters in all.
    """
    if len(text) <= _VERBATIM_CHARS:
        return text
    cut = text.rfind(" ", 0, _VERBATIM_CHARS)
    cut = _VERBATIM_CHARS if cut <= 0 else cut
    head = text[:cut]
    rest = " ".join(dict.fromkeys(text[cut:].split()))
    source = f"{head} {rest}"
    if len(source) > _SOURCE_CHARS:
        end = source.rfind(" ", 0, _SOURCE_CHARS)
        source = source[: end if end > 0 else _SOURCE_CHARS]
    return source


_PASSWORD_IN_URL = re.compile(r"(://[^:/@?#]*):[^@/?#]*@")
_PASSWORD_PARAM = re.compile(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)")


def _redact(conninfo: str) -> str:
    """A connection string without its password."""
    conninfo = _PASSWORD_IN_URL.sub(r"\1@", conninfo)
    return _PASSWORD_PARAM.sub(r"\1***", conninfo)


def _ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


_JOIN_STEP = f" FROM p JOIN {M} m ON m.session_id = ? AND m.id = p.parent_id AND m.seq < p.seq"
_LATERAL_STEP = (
    " FROM p CROSS JOIN LATERAL (SELECT id, parent_id, seq, role, bytes, token_estimate"
    f" FROM {M} WHERE session_id = ? AND id = p.parent_id AND seq < p.seq LIMIT 1) m"
)


def _pg_walk(walk: str) -> str:
    """The shared path walk with its parent step as a per-row index probe."""
    if _JOIN_STEP not in walk:  # the shared SQL changed: update _JOIN_STEP to match
        raise RuntimeError("convostore: SqlOps._WALK no longer has the expected parent join")
    return walk.replace(_JOIN_STEP, _LATERAL_STEP)


# --- operations -------------------------------------------------------------------------------


class PostgresOps(SqlOps):
    """:class:`~convostore.backends._sql.SqlOps` over one psycopg connection (one scope)."""

    _FOR_SHARE = " FOR SHARE"
    _FOR_UPDATE = " FOR UPDATE"

    def __init__(self, conn: psycopg.Connection[Any], *, writing: bool) -> None:
        self._conn = conn
        self._writing = writing
        # A write scope sends its index probe with the BEGIN; the scope's locks keep the answer
        # valid until it ends (creating the index takes the store lock exclusively).
        self._fts_probe: psycopg.Cursor[tuple[Any, ...]] | None = None
        self._fts: bool | None = None
        self._share_locked: set[str] = set()
        self._active = True  # False once the scope ended (its connection is back in the pool)

    def _run(self, sql: str, params: Sequence[Any] = ()) -> Any:
        # A cursor per statement: in pipeline mode results arrive later, each to its cursor.
        return self._conn.cursor(row_factory=tuple_row).execute(_pg(sql), params)

    def _many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if len(rows) == 1:
            self._run(sql, rows[0])
        elif rows:
            # Pipelined by psycopg: one round trip for the lot.
            self._conn.cursor(row_factory=tuple_row).executemany(_pg(sql), rows)

    # -- access paths --------------------------------------------------------------------------
    # PostgreSQL's planner, given stale statistics (a table that grew since it was analysed, or a
    # big session in a table of small ones), may answer "session_id = ? AND key IN (...)" by
    # scanning the whole session through another index. These forms probe the unique index once
    # per key whatever the statistics say: LIMIT 1 keeps the lateral subquery from being
    # flattened into a join the planner could hash.

    _WALK = _pg_walk(SqlOps._WALK)

    def _by_key(
        self, cols: str, key: str, session_id: str, keys: Sequence[Any]
    ) -> list[tuple[Any, ...]]:
        if len(keys) <= 1:  # a single equality: the planner always takes the unique index
            return super()._by_key(cols, key, session_id, keys)
        array_type = "bigint" if key == "seq" else "text"
        return self._all(
            f"SELECT {_qualify('m', cols)} "
            f"FROM unnest(?::{array_type}[]) AS k(v) CROSS JOIN LATERAL "
            f"(SELECT {cols} FROM {M} WHERE session_id = ? AND {key} = k.v LIMIT 1) m",
            (list(keys), session_id),
        )

    # -- payload locks -------------------------------------------------------------------------

    def store_payload(self, hash: str, data: bytes, media_type: str) -> None:
        super().store_payload(hash, data, media_type)
        self._share_locked.add(hash)  # locked FOR SHARE, or inserted by this transaction

    def add_refs(self, session_id: str, message_id: str, hashes: Iterable[str]) -> None:
        wanted = list(dict.fromkeys(hashes))
        # A message written back with a pointer re-uses a payload without storing it: lock it
        # too, so a concurrent collection in another session waits for this commit and sees
        # the new reference.
        missing = sorted(h for h in wanted if h not in self._share_locked)
        for batch in _batches(missing):
            self._run(
                f"SELECT hash FROM convostore_attachments WHERE hash IN ({_marks(len(batch))}) "
                f"ORDER BY hash{self._FOR_SHARE}",
                tuple(batch),
            )
        self._share_locked.update(missing)
        super().add_refs(session_id, message_id, wanted)

    # -- full-text index -----------------------------------------------------------------------

    def fts_exists(self) -> bool:
        if self._fts is None:
            if self._fts_probe is not None:
                found = self._fts_probe.fetchone() is not None
            else:
                found = self._one(PG_TABLES, ([FTS],)) is not None
            # Once there, the table stays; a "no" holds only under a write scope's locks.
            if found or self._writing:
                self._fts = found
            return found
        return self._fts

    def fts_create(self) -> None:
        self._run(_FTS_CONFIG_DDL)
        for statement in _FTS_DDL:
            self._run(statement)
        if self._writing:
            self._fts = True

    def fts_insert(self, rows: Iterable[tuple[str, str, str, str]]) -> None:
        entries = []
        for sid, mid, role, text in rows:
            text = _clean(text)
            entries.append((sid, mid, role, text, _index_source(text)))
        self._many(
            f"INSERT INTO {FTS} AS f (session_id, id, role, content, tsv) "
            f"VALUES (?, ?, ?, ?, to_tsvector('{TS_CONFIG}', ?)) "
            "ON CONFLICT (session_id, id) DO UPDATE SET role = excluded.role, "
            "content = excluded.content, tsv = excluded.tsv",
            entries,
        )

    def fts_delete(self, session_id: str, ids: Sequence[str]) -> None:
        for batch in _batches(ids):
            self._run(
                f"DELETE FROM {FTS} WHERE session_id = ? AND id IN ({_marks(len(batch))})",
                (session_id, *batch),
            )

    def fts_clear(self, session_id: str) -> None:
        self._run(f"DELETE FROM {FTS} WHERE session_id = ?", (session_id,))

    def fts_search(
        self, query: str, session_id: str | None, limit: int, all_words: bool
    ) -> list[FtsHit]:
        query = _clean(query)
        if not _WORD.search(query) or limit <= 0:
            return []  # nothing a parser would keep: no lexeme, no hit
        parse = "plainto_tsquery" if all_words else "phraseto_tsquery"
        statement = (
            f"SELECT f.session_id, f.id, m.role, f.content, m.created_at "
            f"FROM {parse}('{TS_CONFIG}', ?) q, {FTS} f CROSS JOIN LATERAL "
            f"(SELECT role, created_at, seq FROM {M} "
            f"WHERE session_id = f.session_id AND id = f.id LIMIT 1) m WHERE f.tsv @@ q"
        )
        params: list[Any] = [query]
        if session_id is not None:
            statement += " AND f.session_id = ?"
            params.append(session_id)
        statement += " ORDER BY ts_rank(f.tsv, q, 1) DESC, m.created_at, m.seq LIMIT ?"
        params.append(limit)
        return [FtsHit(*r) for r in self._all(statement, params)]


# --- the backend ------------------------------------------------------------------------------


class PostgresBackend:
    """A PostgreSQL database (or a PostgreSQL-compatible one) as a convostore backend.

    :param url: a ``postgresql://`` or ``postgres://`` URL (or a libpq connection string);
        ``None`` when ``pool`` is given.
    :param pool: an open ``psycopg_pool.ConnectionPool`` to take connections from; the store
        never closes it.
    :param pool_size: most connections of the pool the store creates from ``url``.
    :param schema: the schema holding the tables (created if missing); ``None`` → the first
        schema of the connection's ``search_path`` (usually ``public``).
    """

    def __init__(
        self,
        url: str | None,
        *,
        pool: Any = None,
        pool_size: int = 10,
        schema: str | None = None,
    ) -> None:
        if schema is not None:
            if not isinstance(schema, str):
                raise TypeError(f"schema must be a string, not {type(schema).__name__}")
            if not schema or "\x00" in schema or len(schema.encode("utf-8", "replace")) > 63:
                raise ValueError(f"invalid schema name {schema!r} (1 to 63 bytes, no NUL)")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size must be a positive int, not {pool_size!r}")
        if pool is None and url is None:
            raise ValueError("PostgresBackend needs a URL or pool=")
        self.schema = schema
        self._path = None if schema is None else _ident(schema)
        self._path_literal: str | None = None
        self._own_pool = pool is None
        self._closed = False
        self._fts_seen = False  # once a scope saw the search table, write scopes skip asking
        self._local = threading.local()
        self._pool: psycopg_pool.ConnectionPool[Any]
        if pool is not None:
            if not hasattr(pool, "connection"):
                raise TypeError(
                    f"pool= needs a psycopg_pool.ConnectionPool, not {type(pool).__name__}"
                )
            self._pool = pool
            self.url = _redact(str(getattr(pool, "conninfo", "") or "postgresql://(pool)"))
            try:
                with pool.connection() as conn:
                    switched = self._prepare_conn(conn)
                    try:
                        self._open(conn)
                    finally:
                        self._release_conn(conn, switched)
            except psycopg.Error as exc:
                raise BackendError(f"cannot open PostgreSQL store: {exc}") from exc
        else:
            assert url is not None
            self.url = _redact(url)
            try:
                with psycopg.connect(url, autocommit=True) as conn:
                    self._configure(conn)
                    self._open(conn)
            except psycopg.Error as exc:
                raise BackendError(f"cannot open PostgreSQL database {self.url!r}: {exc}") from exc
            self._pool = psycopg_pool.ConnectionPool(
                url,
                min_size=1,
                max_size=pool_size,
                kwargs={"autocommit": True},
                configure=self._configure,
                open=False,
                name="convostore",
            )
            self._pool.open(wait=False)

    @property
    def capabilities(self) -> frozenset[str]:
        """``shared_across_processes``: any number of processes and machines may share it."""
        return frozenset({"shared_across_processes"})

    # --- connections --------------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Set up a connection of the store's own pool (once, when it is opened)."""
        if self._path is not None:
            conn.execute("SELECT set_config('search_path', %s, false)", (self._path,))

    def _prepare_conn(self, conn: psycopg.Connection[Any]) -> bool:
        """Make a user pool's connection autocommit for the scope; True if it was not."""
        if conn.autocommit:
            return False
        conn.autocommit = True
        return True

    def _release_conn(self, conn: psycopg.Connection[Any], switched: bool) -> None:
        """Give a user pool's connection back as it was lent (``switched``: not autocommit)."""
        if switched and not self._own_pool and not conn.closed:
            try:
                conn.autocommit = False
            except psycopg.Error:
                pass  # the pool resets or discards it

    def _local_path(self, conn: psycopg.Connection[Any]) -> str:
        """``SELECT set_config('search_path', ..., true)`` for a user pool with a schema."""
        if self._path_literal is None:
            assert self._path is not None
            literal = sql.Literal(self._path).as_string(conn)
            self._path_literal = f"SELECT set_config('search_path', {literal}, true)"
        return self._path_literal

    # --- opening and migrating ----------------------------------------------------------------

    def _open(self, conn: psycopg.Connection[Any]) -> None:
        """Migrate (if needed) and derive the lock keys; ``conn`` is in autocommit mode."""
        cur = conn.cursor(row_factory=tuple_row)
        local = not self._own_pool and self._path is not None
        if local:
            cur.execute("BEGIN")
            cur.execute(self._local_path(conn))
        try:
            if self.schema is not None:
                name = self.schema
            else:
                row = cur.execute("SELECT current_schema()").fetchone()
                name = row[0] if row and row[0] else ""
            version = self._version(cur)
        finally:
            if local:
                cur.execute("COMMIT")
        self._store_key = _key("convostore", name, "store")
        self._migrate_key = _key("convostore", name, "migrate")
        self._session_prefix = name
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(version, SCHEMA_VERSION)
        self._migrate(cur, conn)

    def _version(self, cur: psycopg.Cursor[tuple[Any, ...]]) -> int:
        row = cur.execute("SELECT to_regclass('convostore_meta') IS NOT NULL").fetchone()
        if not row or not row[0]:
            return 0
        row = cur.execute(
            "SELECT value FROM convostore_meta WHERE key = 'schema_version'"
        ).fetchone()
        return int(row[0]) if row else 0

    def _migrate(self, cur: psycopg.Cursor[tuple[Any, ...]], conn: psycopg.Connection[Any]) -> None:
        cur.execute("BEGIN")
        try:
            # Serialise every process migrating this schema; the loser finds the work done.
            cur.execute(f"SELECT pg_advisory_xact_lock({self._migrate_key})")
            if self.schema is not None:
                cur.execute(f"CREATE SCHEMA IF NOT EXISTS {_ident(self.schema)}")
            if not self._own_pool and self._path is not None:
                cur.execute(self._local_path(conn))
            cur.execute(_META)
            version = self._version(cur)
            if version > SCHEMA_VERSION:
                raise SchemaTooNew(version, SCHEMA_VERSION)
            for step in _MIGRATIONS[version:]:
                for statement in step:
                    cur.execute(statement)
            if version != SCHEMA_VERSION:
                cur.execute(
                    "INSERT INTO convostore_meta (key, value) VALUES ('schema_version', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(SCHEMA_VERSION),),
                )
                logger.info("migrated PostgreSQL schema %r from version %d to %d",
                            self.schema, version, SCHEMA_VERSION)
            cur.execute("COMMIT")
        except BaseException:
            try:
                cur.execute("ROLLBACK")
            except psycopg.Error:
                pass
            raise

    # --- scopes -------------------------------------------------------------------------------

    def _check(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    def _begin(self, session_id: str | None) -> list[tuple[str, tuple[Any, ...]]]:
        """BEGIN, search_path (user pool) and the locks; sent with the scope's first query."""
        steps: list[tuple[str, tuple[Any, ...]]] = [("BEGIN ISOLATION LEVEL READ COMMITTED", ())]
        if not self._own_pool and self._path is not None:
            steps.append(("SELECT set_config('search_path', %s, true)", (self._path,)))
        if session_id is None:
            steps.append(("SELECT pg_advisory_xact_lock(%s)", (self._store_key,)))
        else:
            # Store key (shared) first, then the session's: one order for every writer.
            key = _key("convostore", self._session_prefix, "session", session_id)
            steps.append((
                "SELECT pg_advisory_xact_lock_shared(%s), pg_advisory_xact_lock(%s)",
                (self._store_key, key),
            ))
        return steps

    def _current(self) -> PostgresOps | None:
        """The scope open in this thread, if any (checks the store is open)."""
        self._check()
        ops: PostgresOps | None = getattr(self._local, "ops", None)
        # A scope left open by an abandoned generator may have ended in another thread.
        return ops if ops is not None and ops._active else None

    @contextmanager
    def read(self) -> Iterator[PostgresOps]:
        """A read scope: a pooled connection in autocommit (a read-only transaction when a
        user pool needs ``search_path`` set). Nested in another scope of the same thread, it
        shares that scope's connection."""
        current = self._current()
        if current is not None:
            yield current
            return
        try:
            with self._pool.connection() as conn:
                switched = self._prepare_conn(conn)
                local = not self._own_pool and self._path is not None
                try:
                    if local:
                        conn.execute(f"BEGIN READ ONLY; {self._local_path(conn)}")
                    ops = PostgresOps(conn, writing=False)
                    self._local.ops = ops
                    try:
                        yield ops
                    finally:
                        ops._active = False
                        self._local.ops = None
                        if local:
                            _end(conn, "COMMIT")
                    if ops._fts:  # the store may never ask a write scope again
                        self._fts_seen = True
                finally:
                    self._release_conn(conn, switched)
        except psycopg.Error as exc:
            raise BackendError(f"PostgreSQL read failed: {exc}") from exc

    @contextmanager
    def write(self, session_id: str | None) -> Iterator[PostgresOps]:
        """One transaction holding the advisory lock of ``session_id`` (of the store if None);
        committed when the body returns, rolled back if it raises.

        The scope runs in pipeline mode: the BEGIN and the locks travel with the first query,
        and statements whose results nobody reads (inserts, the COMMIT) travel together, so a
        plain append costs two round trips (BEGIN, locks and the probe; INSERT and COMMIT).
        """
        current = self._current()
        if current is not None and current._writing:
            # A second connection would wait forever for the lock this thread holds.
            raise BackendError("a write scope is already open in this thread")
        try:
            with self._pool.connection() as conn:
                switched = self._prepare_conn(conn)
                try:
                    with _pipeline(conn):
                        for statement, params in self._begin(session_id):
                            conn.execute(statement, params)
                        ops = PostgresOps(conn, writing=True)
                        if self._fts_seen:
                            ops._fts = True  # a search table, once there, stays
                        else:
                            ops._fts_probe = ops._run(PG_TABLES, ([FTS],))
                        self._local.ops = ops
                        try:
                            yield ops
                        finally:
                            ops._active = False
                            self._local.ops = current
                        conn.execute("COMMIT")
                    if ops._fts:
                        self._fts_seen = True
                finally:
                    _end(conn, "ROLLBACK")
                    self._release_conn(conn, switched)
        except psycopg.Error as exc:
            raise BackendError(f"PostgreSQL write failed: {exc}") from exc

    def close(self) -> None:
        """Close the store's own pool (a pool passed by the user stays open); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._own_pool:
            self._pool.close()


@contextmanager
def _pipeline(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """Pipeline mode for a scope; when the body fails, errors of the final sync are dropped
    (the body's exception is the one that counts, and the transaction is rolled back)."""
    pipeline = conn.pipeline()
    pipeline.__enter__()
    try:
        yield
    except BaseException:
        try:
            pipeline.__exit__(None, None, None)
        except psycopg.Error:
            pass
        raise
    pipeline.__exit__(None, None, None)


def _end(conn: psycopg.Connection[Any], command: str) -> None:
    """End the scope's transaction if one is open; a broken connection is left to the pool."""
    if conn.closed or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    try:
        conn.execute(command)
    except psycopg.Error:
        logger.debug("could not %s a PostgreSQL transaction", command, exc_info=True)

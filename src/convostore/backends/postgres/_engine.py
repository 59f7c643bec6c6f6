"""The PostgreSQL engine's implementation over psycopg 3: its operations and its backend.

Imported by :func:`convostore.backends.postgres.open_postgres` only, after psycopg was found; the
engine's declaration, schema and overview live in :mod:`convostore.backends.postgres`, its search
SQL in :mod:`convostore.backends.postgres._search`.

- Connections come from a ``psycopg_pool.ConnectionPool``: one the store creates from the URL
  (``pool_size`` connections at most, closed by :meth:`PostgresBackend.close`) or one the user
  passes (never closed by the store).
- ``schema=`` puts the tables in that schema (created if missing). The shared SQL stays
  unqualified: the store's own connections get ``search_path`` once, when they are opened; a
  user's connections, and every connection behind a transaction pooler, get it per scope, with
  ``set_config(..., true)`` inside a transaction.
- A write scope is one ``READ COMMITTED`` transaction in pipeline mode that first takes the
  store's table lock and the session's row lock (see the engine's overview); reads run in
  autocommit, each statement in one round trip. When ``search_path`` must be set per
  transaction (a user's pool, or any pool behind a transaction pooler), a read sends each
  statement after ``set_config(..., true)`` in one simple-protocol query: one implicit
  transaction, no BEGIN or COMMIT round trips.
- Multi-key lookups and the path walk probe the unique indexes per key (``LATERAL ... LIMIT 1``),
  so their cost never depends on the planner's statistics.
- Payload collection locks payload rows ``FOR UPDATE`` and re-use locks them ``FOR SHARE``, so a
  payload is never collected under a concurrent writer re-using it.

Every psycopg error crossing :meth:`PostgresBackend.read` / :meth:`PostgresBackend.write` (or
raised while opening) becomes :class:`~convostore.errors.BackendError` with the driver's
exception as ``__cause__``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Literal

import psycopg
import psycopg_pool
from psycopg import sql
from psycopg.rows import tuple_row

from ...directory._sql import METADATA_UNSAFE
from ...errors import BackendError, SchemaTooNew, StoreClosed
from ...legacy._sql import PostgresLegacySql
from .._migrate import Migrations, migrate, stored_version
from .._schema import (
    ATTACHMENTS,
    DIRECTORY,
    FTS,
    MESSAGES,
    META,
    SCHEMA_VERSION,
)
from .._sql import SqlOps, _qualify
from ..base import (
    AppendProbe,
    Engine,
    LeafProbe,
    ScopeRetry,
    _batches,
    _marks,
)
from ._partitions import PARTITION_COUNT, check_partitions, partitioned
from ._reads import PostgresWindowOps
from ._scope import (
    LOCK_SESSION,
    LOCK_SHARED,
    LOCK_STORE,
    SHARED_LOCK_CTE,
    end,
    pipeline,
)
from ._search import PG_TABLES
from ._signal import ListenSignal
from ._writes import LISTENING_LOCK, ChangeKeys, PostgresWriteOps

logger = logging.getLogger("convostore")

# --- small helpers ----------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _pg(statement: str) -> str:
    """The shared SQL's ``?`` placeholders as psycopg's ``%s`` (literal ``%`` doubled)."""
    return statement.replace("%", "%%").replace("?", "%s")


def _key(*parts: str) -> int:
    """A signed 64-bit advisory lock key for ``parts`` (a collision only serialises more)."""
    data = "\x00".join(parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)

# A write scope's append probe (SqlOps.append_probe) with the search index's probe beside it,
# until the scope knows (one statement, one round trip, as on SQLite); the leaf probe's too.
_APPEND_PROBE_FTS = (
    f"SELECT EXISTS (SELECT 1 FROM {MESSAGES} WHERE session_id = ? AND id = ?), "
    f"(SELECT id FROM {MESSAGES} WHERE session_id = ? ORDER BY seq DESC LIMIT 1), "
    f"(SELECT max(seq) FROM {MESSAGES} WHERE session_id = ?), "
    "EXISTS (SELECT 1 FROM pg_class WHERE relname = ? AND relnamespace = "
    "(SELECT oid FROM pg_namespace WHERE nspname = current_schema()))"
)
_LEAF_PROBE_FTS = (
    f"{_APPEND_PROBE_FTS}, (SELECT active_leaf FROM {DIRECTORY} WHERE session_id = ?), "
    f"(SELECT t.run_bytes FROM {MESSAGES} t WHERE t.session_id = ? ORDER BY t.seq DESC LIMIT 1)"
)


# Values the store's connections TOAST (a LangGraph thread's whole message list, every step)
# are compressed with lz4 where the server has it (PostgreSQL 14+ built with lz4): pglz cost
# about 200 us of server CPU more per graph step (benchmarks/langgraph.py, 10-20 KB values).
_LZ4 = ("SELECT set_config('default_toast_compression', 'lz4', false) FROM pg_settings "
        "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)")


def _ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


_JOIN_STEP = (
    f" FROM p JOIN {MESSAGES} m ON m.session_id = ? AND m.id = p.parent_id AND m.seq < p.seq"
)
_LATERAL_STEP = (
    " FROM p CROSS JOIN LATERAL (SELECT id, parent_id, seq, role, bytes, token_estimate"
    f" FROM {MESSAGES} WHERE session_id = ? AND id = p.parent_id AND seq < p.seq LIMIT 1) m"
)


def _pg_walk(walk: str) -> str:
    """The shared path walk with its parent step as a per-row index probe."""
    if _JOIN_STEP not in walk:  # the shared SQL changed: update _JOIN_STEP to match
        raise RuntimeError("convostore: SqlOps._WALK no longer has the expected parent join")
    return walk.replace(_JOIN_STEP, _LATERAL_STEP)



# --- operations -------------------------------------------------------------------------------


class PostgresOps(PostgresWindowOps, PostgresWriteOps):
    """:class:`~convostore.backends._sql.SqlOps` over one psycopg connection (one scope)."""

    _FOR_SHARE = " FOR SHARE"
    _FOR_UPDATE = " FOR UPDATE"
    _LG_EACH = "jsonb_each_text(c.versions::jsonb)"
    _LG_LOCK = SHARED_LOCK_CTE
    _LG_LATERAL = True
    _LG_WRITABLE_CTE = True
    legacy = PostgresLegacySql()

    def __init__(
        self, conn: psycopg.Connection[Any], *, writing: bool,
        changes: ChangeKeys | None = None, partitions: int | None = None,
        path: str | None = None,
    ) -> None:
        self._conn = conn
        # ``path``: the statement that sets search_path, sent with every statement of the
        # scope (a read scope that may not leave it on the server connection).
        self._path_sql = None if path is None else path.replace("%", "%%") + "; "
        self._writing = writing
        self._change_keys = changes  # the change log's lock keys and NOTIFY channel
        self._partitions = partitions  # tables created later (the search index) follow it
        # Whether the search index exists, once asked in this scope. A write scope asks with
        # its append probe (or on its own when something else needs it first): the scope's
        # locks keep the answer valid until it ends (creating the index takes the store lock
        # exclusively). A scope that writes no message never asks.
        self._fts: bool | None = None
        self._share_locked: set[str] = set()
        self._active = True  # False once the scope ended (its connection is back in the pool)

    def _run(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._execute(_pg(sql), params)

    def _execute(self, query: str, params: Any) -> Any:
        if self._path_sql is None:
            # A cursor per statement: in pipeline mode results arrive later, each to its cursor.
            return self._conn.cursor(row_factory=tuple_row).execute(query, params)
        # search_path and the statement in one simple-protocol query: they share its implicit
        # transaction, so the setting needs no BEGIN and no COMMIT round trip (parameters are
        # bound on the client; no statement is prepared behind a pooler anyway).
        cursor = psycopg.ClientCursor(self._conn, row_factory=tuple_row)
        cursor.execute(self._path_sql + query, params)
        cursor.nextset()
        return cursor

    def _many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if len(rows) == 1 or self._path_sql is not None:
            for row in rows:
                self._run(sql, row)
        elif rows:
            # Pipelined by psycopg: one round trip for the lot.
            self._conn.cursor(row_factory=tuple_row).executemany(_pg(sql), rows)

    def existing_tables(self, names: Sequence[str]) -> set[str]:
        return {r[0] for r in self._all(PG_TABLES, (list(names),))}

    def append_probe(self, session_id: str, id: str) -> AppendProbe:
        if not self._writing or self._fts is not None:
            return super().append_probe(session_id, id)
        row = self._one(_APPEND_PROBE_FTS, (session_id, id, session_id, session_id, FTS))
        assert row is not None
        self._fts = bool(row[3])
        return bool(row[0]), row[1], int(row[2] or 0)

    def leaf_probe(self, session_id: str, id: str) -> LeafProbe:
        if not self._writing or self._fts is not None:
            return super().leaf_probe(session_id, id)
        row = self._one(_LEAF_PROBE_FTS, (session_id, id, session_id, session_id, FTS,
                                          session_id, session_id))
        assert row is not None
        self._fts = bool(row[3])
        return LeafProbe(bool(row[0]), row[1], int(row[2] or 0), row[4], int(row[5] or 0))

    def _metadata_match(self, key: str, value: Any) -> tuple[str, list[Any]]:
        # jsonb equality: the same JSON value (1 and 1.0 alike, true never 1). A row written
        # before NUL and lone surrogates were refused is skipped, not cast: jsonb holds
        # neither, and the cast's error would fail every tenant's listing.
        return ("CASE WHEN replace(metadata, ?, '') ~ ? THEN NULL ELSE metadata::jsonb END "
                "-> ? = ?::jsonb", ["\\\\", METADATA_UNSAFE, key, json.dumps(value)])

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
            f"(SELECT {cols} FROM {MESSAGES} WHERE session_id = ? AND {key} = k.v LIMIT 1) m",
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
                f"SELECT hash FROM {ATTACHMENTS} WHERE hash IN ({_marks(len(batch))}) "
                f"ORDER BY hash{self._FOR_SHARE}",
                tuple(batch),
            )
        self._share_locked.update(missing)
        super().add_refs(session_id, message_id, wanted)

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
    :param engine: the engine's declaration (:data:`convostore.backends.postgres.ENGINE`): its
        schema as data and its capabilities.
    :param partitions: create the session-keyed tables hash-partitioned into this many parts
        (2 to 1024); an existing store keeps its own and refuses another count.
    :param transaction_pooler: the URL reaches the server through a transaction-mode pooler: no
        prepared statements, ``search_path`` set inside each transaction.
    :param locks: how writers of one session serialise: ``"row"`` (the session's state row,
        row-locked; the default, right on sharded engines) or ``"advisory"`` (transaction
        advisory locks, node-local; kept for comparison in ``benchmarks/append.py``).
    """

    def __init__(
        self,
        url: str | None,
        *,
        pool: Any = None,
        pool_size: int = 10,
        schema: str | None = None,
        engine: Engine,
        listen_url: str | None = None,
        partitions: int | None = None,
        transaction_pooler: bool = False,
        locks: Literal["row", "advisory"] = "row",
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
        self._engine = engine
        self._listen_url = listen_url
        self._conninfo = url if url is not None else str(getattr(pool, "conninfo", "") or "")
        self._path = None if schema is None else _ident(schema)
        self._path_literal: str | None = None
        self._own_pool = pool is None
        # A user's pool, or any pool behind a transaction pooler: no session state may be left
        # on a server connection, so the schema is set inside each transaction.
        self._per_tx_path = self._path is not None and (pool is not None or transaction_pooler)
        self._pooler = transaction_pooler
        if locks not in ("row", "advisory"):
            raise ValueError(f"locks must be 'row' or 'advisory', not {locks!r}")
        self._locks = locks
        # Scopes may run in the pipeline's implicit transaction: row locks, and connections
        # of the store's own (set to READ COMMITTED; no search_path set per transaction).
        self._implicit = locks == "row" and pool is None and not transaction_pooler
        self._partitions = check_partitions(partitions)
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
            self.url = engine.redact(str(getattr(pool, "conninfo", "") or "postgresql://(pool)"))
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
            self.url = engine.redact(url)
            # Behind a transaction pooler a prepared statement may be run on another server
            # connection than the one that prepared it.
            connect: dict[str, Any] = {"autocommit": True}
            if transaction_pooler:
                connect["prepare_threshold"] = None
            try:
                with psycopg.connect(url, **connect) as conn:
                    self._configure(conn)
                    self._open(conn)
            except psycopg.Error as exc:
                raise BackendError(f"cannot open PostgreSQL database {self.url!r}: {exc}") from exc
            self._pool = psycopg_pool.ConnectionPool(
                url,
                min_size=1,
                max_size=pool_size,
                kwargs=connect,
                configure=self._configure,
                open=False,
                name="convostore",
            )
            self._pool.open(wait=False)

    @property
    def capabilities(self) -> frozenset[str]:
        """As the engine declares: any number of processes and machines may share it."""
        return self._engine.capabilities(None)

    # --- connections --------------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Set up a connection of the store's own pool (once, when it is opened)."""
        if self._implicit:  # write scopes without BEGIN read committed, as the others do
            conn.execute("SELECT set_config('default_transaction_isolation', "
                         "'read committed', false)")
        if self._path is not None and not self._per_tx_path:
            conn.execute("SELECT set_config('search_path', %s, false)", (self._path,))
        if not self._pooler:  # a pooler's server connection is not ours to set
            conn.execute(_LZ4)

    def _prepare_conn(self, conn: psycopg.Connection[Any]) -> bool:
        """Make a user pool's connection autocommit for the scope; True if it was not.

        Behind a transaction pooler it also stops preparing statements (another server
        connection would not have them)."""
        if self._pooler:
            conn.prepare_threshold = None
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
        local = self._per_tx_path
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
        changes_key = _key("convostore", name, "changes")
        self._change_log = ChangeKeys(
            _key("convostore", name, "change positions") & 0x7FFFFFFF,
            _key("convostore", name, "change flags") & 0x7FFFFFFF,
            f"convostore_changes_{changes_key & 0xFFFFFFFFFFFF:012x}",
        )
        self._session_prefix = name
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(version, SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            self._migrate(cur, conn)
        self._read_partitions(cur, conn)

    def _read_partitions(
        self, cur: psycopg.Cursor[tuple[Any, ...]], conn: psycopg.Connection[Any]
    ) -> None:
        """Adopt the partition count the store was created with; refuse another one asked."""
        local = self._per_tx_path
        if local:
            cur.execute("BEGIN")
            cur.execute(self._local_path(conn))
        try:
            row = cur.execute(PARTITION_COUNT, (MESSAGES,)).fetchone()
        finally:
            if local:
                cur.execute("COMMIT")
        found = int(row[0]) if row and row[1] == "h" else 0
        if self._partitions is not None and found != self._partitions:
            have = f"{found} partitions" if found else "plain (unpartitioned) tables"
            raise BackendError(
                f"cannot open the store with partitions={self._partitions}: it was created "
                f"with {have}; a store's partitioning is fixed when it is created"
            )
        self._partitions = found or None

    def _version(self, cur: psycopg.Cursor[tuple[Any, ...]]) -> int:
        row = cur.execute(f"SELECT to_regclass('{META}') IS NOT NULL").fetchone()
        return stored_version(cur.execute) if row and row[0] else 0

    def _migrate(self, cur: psycopg.Cursor[tuple[Any, ...]], conn: psycopg.Connection[Any]) -> None:
        # Serialise every process migrating this schema; the loser finds the work done.
        prepare = [f"SELECT pg_advisory_xact_lock({self._migrate_key})"]
        if self.schema is not None:
            prepare.append(f"CREATE SCHEMA IF NOT EXISTS {_ident(self.schema)}")
        if self._per_tx_path:
            prepare.append(self._local_path(conn))

        def rollback() -> None:
            try:
                cur.execute("ROLLBACK")
            except psycopg.Error:
                pass  # the original error is the one to report

        plan = self._engine.migrations
        if self._partitions is not None:
            steps = [partitioned(step, self._partitions) for step in plan.steps]
            plan = Migrations(plan.meta, steps)
        try:
            version = migrate(cur.execute, rollback, plan, prepare=prepare)
        except psycopg.errors.UniqueViolation:
            # Processes creating one new schema at once: CREATE SCHEMA IF NOT EXISTS can still
            # collide in the catalog (seen through PgBouncer); it is rolled back and the schema
            # now exists, so the step runs again and finds it.
            version = migrate(cur.execute, rollback, plan, prepare=prepare)
        if version != SCHEMA_VERSION:
            logger.info("migrated PostgreSQL schema %r from version %d to %d",
                        self.schema, version, SCHEMA_VERSION)

    # --- scopes -------------------------------------------------------------------------------

    def _check(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    def _begin(self, session_id: str | None, session_lock: bool, alone: bool
               ) -> list[tuple[str, tuple[Any, ...]]]:
        """BEGIN, search_path (user pool) and the locks; sent with the scope's first query.
        ``alone``: no transaction statement (the pipeline's implicit one), the locks only."""
        if alone:
            return [(LOCK_SESSION, (session_id,))] if session_lock else []
        steps: list[tuple[str, tuple[Any, ...]]] = [("BEGIN ISOLATION LEVEL READ COMMITTED", ())]
        if self._per_tx_path:
            steps.append(("SELECT set_config('search_path', %s, true)", (self._path,)))
        if self._locks == "advisory":
            if not session_lock:
                steps.append(("SELECT pg_advisory_xact_lock_shared(%s)", (self._store_key,)))
            elif session_id is None:
                steps.append(("SELECT pg_advisory_xact_lock(%s)", (self._store_key,)))
            else:
                # Store key (shared) first, then the session's: one order for every writer.
                key = _key("convostore", self._session_prefix, "session", session_id)
                steps.append((
                    "SELECT pg_advisory_xact_lock_shared(%s), pg_advisory_xact_lock(%s)",
                    (self._store_key, key),
                ))
            return steps
        # Row locks: the messages table's lock stands for the store's (writers share it; a
        # store-wide scope excludes them and each other), the session's state row for the
        # session's. Both live with the session's data, so a sharded engine keeps them on the
        # session's shard. The state row is created first if missing (nothing else changes:
        # an absent row and epoch 0 read the same). A session's are one statement (_pg_scope).
        if not session_lock:
            steps.append((LOCK_SHARED, ()))
        elif session_id is None:
            steps.append((LOCK_STORE, ()))
        else:
            steps.append((LOCK_SESSION, (session_id,)))
        return steps

    def _current(self) -> PostgresOps | None:
        """The scope open in this thread, if any (checks the store is open)."""
        self._check()
        ops: PostgresOps | None = getattr(self._local, "ops", None)
        # A scope left open by an abandoned generator may have ended in another thread.
        return ops if ops is not None and ops._active else None

    @contextmanager
    def _bound(self, ops: PostgresOps, outer: PostgresOps | None) -> Iterator[None]:
        """``ops`` is this thread's scope while the body runs; then it ends and ``outer`` (the
        scope it was nested in, or None) is this thread's scope again."""
        self._local.ops = ops
        try:
            yield
        finally:
            ops._active = False
            self._local.ops = outer

    @contextmanager
    def read(self) -> Iterator[PostgresOps]:
        """A read scope: a pooled connection in autocommit; when ``search_path`` must be set
        per transaction (a user's pool, or behind a transaction pooler), each statement goes
        with it in one query. Nested in another scope of the same thread, it shares that
        scope's connection."""
        current = self._current()
        if current is not None:
            yield current
            return
        try:
            with self._pool.connection() as conn:
                switched = self._prepare_conn(conn)
                try:
                    path = self._local_path(conn) if self._per_tx_path else None
                    ops = PostgresOps(conn, writing=False, changes=self._change_log,
                                      partitions=self._partitions, path=path)
                    with self._bound(ops, None):
                        yield ops
                    if ops._fts:  # the store may never ask a write scope again
                        self._fts_seen = True
                finally:
                    self._release_conn(conn, switched)
        except psycopg.Error as exc:
            raise BackendError(f"PostgreSQL read failed: {exc}") from exc

    @contextmanager
    def write(self, session_id: str | None, *, session_lock: bool = True,
              locked_statements: bool = False) -> Iterator[PostgresOps]:
        """One transaction holding the lock of ``session_id`` (of the store if None; with
        ``session_lock`` False, only the store's shared lock); committed when the body
        returns, rolled back if it raises. With ``locked_statements`` the store's own pool
        runs the statements in the pipeline's implicit transaction: no BEGIN or COMMIT, and
        no lock statement but the session's.

        The scope runs in pipeline mode: the BEGIN and the locks travel with the first query,
        and statements whose results nobody reads (inserts, the COMMIT) travel together, so a
        plain append costs two round trips (BEGIN, locks and the probe; INSERT and COMMIT) and
        a scope that reads nothing one.
        """
        current = self._current()
        if current is not None and current._writing:
            # A second connection would wait forever for the lock this thread holds.
            raise BackendError("a write scope is already open in this thread")
        ops: PostgresOps | None = None
        try:
            with self._pool.connection() as conn:
                switched = self._prepare_conn(conn)
                try:
                    alone = locked_statements and self._implicit and (
                        session_id is not None or not session_lock)
                    with pipeline(conn, abandon=alone):
                        for statement, params in self._begin(session_id, session_lock, alone):
                            conn.execute(statement, params)
                        ops = PostgresOps(conn, writing=True, changes=self._change_log,
                                          partitions=self._partitions)
                        if self._fts_seen:
                            ops._fts = True  # a search table, once there, stays
                        with self._bound(ops, current):
                            yield ops
                        ops.flush_changes()  # the change log's rows and lock, last
                        if not alone:
                            conn.execute("COMMIT")
                    if ops._fts:
                        self._fts_seen = True
                finally:
                    end(conn, "ROLLBACK")
                    self._release_conn(conn, switched)
        except psycopg.Error as exc:
            # A strict append met the search table (PostgresWriteOps.append_row): index now.
            # The pipeline may report the aborted statements after it, so look down the chain.
            if ops is not None and ops._strict and _divided_by_zero(exc):
                self._fts_seen = True
                raise ScopeRetry("the search table appeared; run the write again") from exc
            raise BackendError(f"PostgreSQL write failed: {exc}") from exc

    def change_signal(self) -> ListenSignal | None:
        """``LISTEN`` on the store's channel over a connection of its own, to ``listen_url``
        when given (a direct URL past a transaction pooler), else to the store's URL (a user
        pool's ``conninfo``)."""
        conninfo = self._listen_url or self._conninfo
        if not conninfo:
            return None  # a user pool without conninfo: watchers fall back to polling
        # Through a transaction pooler a session lock would stay on a server connection.
        direct = self._listen_url is not None or not self._pooler
        return ListenSignal(conninfo, self._change_log.channel, self._engine.redact(conninfo),
                            (LISTENING_LOCK, self._change_log.flags) if direct else None)

    def close(self) -> None:
        """Close the store's own pool (a pool passed by the user stays open); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._own_pool:
            self._pool.close()


def _divided_by_zero(exc: BaseException | None) -> bool:
    """Whether ``exc`` or an exception it was raised while handling is a division by zero."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, psycopg.errors.DivisionByZero):
            return True
        exc, seen = exc.__context__, seen + 1
    return False


def has_store(conninfo: str, redact: Callable[[str], str]) -> bool:
    """Whether the database ``conninfo`` names holds convostore's tables (in its
    ``search_path``): one catalog query on a connection of its own; nothing is created.

    :param redact: the connection string without its password, for the error message.
    :raises BackendError: the server cannot be reached or refuses the login.
    """
    try:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (META,)).fetchone()
    except psycopg.Error as exc:
        raise BackendError(
            f"cannot open PostgreSQL database {redact(conninfo)!r}: {redact(str(exc))}"
        ) from exc
    return bool(row and row[0])

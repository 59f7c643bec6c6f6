"""The PostgreSQL engine's operations over one psycopg connection (one scope's ``SqlOps``).

The backend that owns the pool and opens the scopes is in :mod:`._engine`; this class is what a
scope yields. Statements are the shared SQL with psycopg's placeholders (:func:`_pg`); what
PostgreSQL does its own way is listed in the class, among it:

- Multi-key lookups and the path walk probe the unique indexes per key (``LATERAL ... LIMIT 1``),
  so their cost never depends on the planner's statistics.
- Payload collection locks payload rows ``FOR UPDATE`` and re-use locks them ``FOR SHARE``, so a
  payload is never collected under a concurrent writer re-using it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from ...legacy._sql import PostgresLegacySql
from .._schema import ATTACHMENTS, DIRECTORY, FTS, MESSAGES
from .._sql import SqlOps, _qualify
from ..connection import _batches, _marks
from ..rows import AppendProbe, LeafProbe
from ._reads import PostgresWindowOps
from ._scope import SHARED_LOCK_CTE
from ._search import PG_TABLES
from ._writes import ChangeKeys, PostgresWriteOps


@lru_cache(maxsize=4096)
def _pg(statement: str) -> str:
    """The shared SQL's ``?`` placeholders as psycopg's ``%s`` (literal ``%`` doubled)."""
    return statement.replace("%", "%%").replace("?", "%s")


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
        # jsonb equality: the same JSON value (1 and 1.0 alike, true never 1)
        return "metadata::jsonb -> ? = ?::jsonb", [key, json.dumps(value)]

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

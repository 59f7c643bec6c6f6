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
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from ...directory._sql import METADATA_UNSAFE
from ...legacy._sql import PostgresLegacySql
from ...messages._window_sql import _content_row
from .._schema import FTS
from .._sql import SqlOps
from ..connection import _batches
from ..rows import (
    Appended,
    AppendProbe,
    ChangeRow,
    ContentRow,
    FtsHit,
    LeafProbe,
    Link,
    NewRow,
    OldTexts,
    Position,
    StoredChange,
)
from ._reads import (
    APPEND_PROBE_FTS,
    LEAF_PROBE_FTS,
    by_key,
    newest_cut,
    pg_walk,
    sized_window,
)
from ._scope import SHARED_LOCK_CTE
from ._search import (
    FTS_CLEAR,
    FTS_INSERT,
    PG_TABLES,
    create_statements,
    delete_some,
    has_words,
    insert_arrays,
    search_statements,
    step_end_statements,
)
from ._writes import (
    CHANGE_INSERT_HELD,
    CHANGES_LOCKED,
    LOCK_CHANGES,
    ChangeKeys,
    append_params,
    append_sql,
    appended,
    changes_upto,
    frontier,
    share_payloads,
    unbroken,
)


@lru_cache(maxsize=4096)
def _pg(statement: str) -> str:
    """The shared SQL's ``?`` placeholders as psycopg's ``%s`` (literal ``%`` doubled)."""
    return statement.replace("%", "%%").replace("?", "%s")


class PostgresOps(SqlOps):
    """:class:`~convostore.backends._sql.SqlOps` over one psycopg connection (one scope).

    Every difference from the shared SQL is here, one method each; the statements they send are
    in :mod:`._reads`, :mod:`._writes` and :mod:`._search`.
    """

    # -- dialect attributes of the shared SQL --------------------------------------------------

    _FOR_SHARE = " FOR SHARE"
    _FOR_UPDATE = " FOR UPDATE"
    _LG_EACH = "jsonb_each_text(c.versions::jsonb)"
    _LG_LOCK = SHARED_LOCK_CTE
    _LG_LATERAL = True
    _LG_WRITABLE_CTE = True
    _WALK = pg_walk(SqlOps._WALK)
    legacy = PostgresLegacySql()
    _strict = False
    """Whether the scope sent an append that fails rather than decline (see the backend's
    ``write``, which turns that failure into ``ScopeRetry``)."""

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

    # -- the connection ------------------------------------------------------------------------

    def _run(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._execute(_pg(sql), params)

    def _execute(self, query: str, params: Any) -> Any:
        """Run ``query`` (psycopg's placeholders) in the scope; its cursor."""
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

    # -- reads (_reads.py) ---------------------------------------------------------------------

    def append_probe(self, session_id: str, id: str) -> AppendProbe:
        if not self._writing or self._fts is not None:
            return super().append_probe(session_id, id)
        row = self._one(APPEND_PROBE_FTS, (session_id, id, session_id, session_id, FTS))
        assert row is not None
        self._fts = bool(row[3])
        return bool(row[0]), row[1], int(row[2] or 0)

    def leaf_probe(self, session_id: str, id: str) -> LeafProbe:
        if not self._writing or self._fts is not None:
            return super().leaf_probe(session_id, id)
        row = self._one(LEAF_PROBE_FTS, (session_id, id, session_id, session_id, FTS,
                                         session_id, session_id))
        assert row is not None
        self._fts = bool(row[3])
        return LeafProbe(bool(row[0]), row[1], int(row[2] or 0), row[4], int(row[5] or 0))

    def _by_key(
        self, cols: str, key: str, session_id: str, keys: Sequence[Any]
    ) -> list[tuple[Any, ...]]:
        if len(keys) <= 1:  # a single equality: the planner always takes the unique index
            return super()._by_key(cols, key, session_id, keys)
        return self._all(*by_key(cols, key, session_id, keys))

    def _sized_rows(
        self, session_id: str, seqs: Sequence[int], max_bytes: int
    ) -> list[ContentRow]:
        if len(seqs) < 2:
            return super()._sized_rows(session_id, seqs, max_bytes)
        return list(map(_content_row, self._all(*sized_window(session_id, seqs, max_bytes))))

    def _newest_cut(
        self, sql: str, params: Sequence[Any], max_bytes: int
    ) -> list[tuple[Any, ...]]:
        return self._all(*newest_cut(sql, params, max_bytes))

    def _metadata_match(self, key: str, value: Any) -> tuple[str, list[Any]]:
        # jsonb equality: the same JSON value (1 and 1.0 alike, true never 1). A row written
        # before NUL and lone surrogates were refused is skipped, not cast: jsonb holds
        # neither, and the cast's error would fail every tenant's listing.
        return ("CASE WHEN replace(metadata, ?, '') ~ ? THEN NULL ELSE metadata::jsonb END "
                "-> ? = ?::jsonb", ["\\\\", METADATA_UNSAFE, key, json.dumps(value)])

    # -- the append in one statement (_writes.py) ---------------------------------------------

    def append_row(
        self, row: NewRow, link: Link, index: Callable[[], str], change: ChangeRow | None,
        decline: bool = True,
    ) -> Callable[[], Appended]:
        assert self._writing, "append_row outside a write scope"
        text = index() if self._fts else ""
        params = append_params(row, link, text, change, self._change_keys)
        # The search table: known to exist, index the row (nothing to index: skip); not
        # known, check that it is absent.
        mode = "check" if not self._fts else "index" if text else "skip"
        strict = not decline and mode == "check"
        self._strict = self._strict or strict
        sql = append_sql(link.rule, mode, change is not None, strict)
        return appended(self._conn.cursor().execute(sql, params))

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
            self._run(share_payloads(len(batch)), tuple(batch))
        self._share_locked.update(missing)
        super().add_refs(session_id, message_id, wanted)

    # -- the change log without a store-wide lock (_writes.py) --------------------------------

    def _keys(self) -> ChangeKeys:
        keys = self._change_keys
        assert keys is not None, "a change logged outside a write scope"
        return keys

    def _lock_changes(self) -> None:
        keys = self._keys()
        self._conn.execute(LOCK_CHANGES, {"flags": keys.flags, "chan": keys.channel})

    def _insert_change(self, row: ChangeRow) -> Position:
        # Pipelined with the COMMIT: the position is read once the scope has ended.
        cursor = self._run(CHANGE_INSERT_HELD, (*row, self._keys().positions))
        return lambda: int(cursor.fetchone()[0])

    def flush_changes(self) -> None:
        pending = bool(self._changes)
        super().flush_changes()
        if pending:  # every position drawn is locked: no longer in the draw window
            self._conn.execute(CHANGES_LOCKED, (self._keys().flags,))

    def changes_after(
        self, after: int, limit: int, session_id: str | None
    ) -> list[StoredChange]:
        if session_id is None:
            # Usually the positions after the cursor are all there: an unbroken run from
            # ``after + 1`` is all committed, and is returned as it is.
            rows = super().changes_after(after, limit, None)
            run = unbroken(rows, after)
            if run:
                return rows[:run]
            if not rows:
                return rows
        front = frontier(self._execute, self._one, self._keys(), after)
        if front <= after:
            return []
        return [StoredChange(*r) for r in self._all(*changes_upto(after, front, session_id,
                                                                   limit))]

    def change_head(self) -> int:
        front = frontier(self._execute, self._one, self._keys(), 0)
        return front if front > 0 else self.change_horizon()

    # -- the search index (_search.py) ---------------------------------------------------------

    def fts_exists(self) -> bool:
        if self._fts is None:
            found = self._one(PG_TABLES, ([FTS],)) is not None
            # Once there, the table stays; a "no" holds only under a write scope's locks.
            if found or self._writing:
                self._fts = found
            return found
        return self._fts

    def fts_create(self) -> None:
        for statement in create_statements(self._partitions):
            self._run(statement)
        if self._writing:
            self._fts = True

    def fts_set_cursor(self, cursor: str | None) -> None:
        super().fts_set_cursor(cursor)
        for statement in step_end_statements(cursor, self._partitions):
            self._run(statement)

    def fts_insert(self, rows: Iterable[tuple[str, str, str]]) -> None:
        arrays = insert_arrays(rows)
        if arrays is not None:
            self._run(FTS_INSERT, arrays)

    def fts_delete(self, session_id: str, ids: Sequence[str], old_texts: OldTexts) -> None:
        for batch in _batches(ids):
            self._run(delete_some(len(batch)), (session_id, *batch))

    def fts_clear(self, session_id: str, old_texts: OldTexts) -> None:
        self._run(FTS_CLEAR, (session_id,))

    def fts_search(
        self, query: str, session_id: str | None, limit: int, all_words: bool
    ) -> list[FtsHit]:
        if not has_words(query) or limit <= 0:
            return []  # nothing a parser would keep: no lexeme, no hit
        select, order, hits = search_statements(all_words)
        return self._search(select, query, session_id, "f.session_id", order, limit, hits)

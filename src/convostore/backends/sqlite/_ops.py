"""The SQLite engine's operations over one :mod:`sqlite3` connection (a ``SqlOps``).

What SQLite does its own way: statements that find another process's lock busy retry in short
steps (:func:`_retry_busy`); the append and leaf probes ask for the search index alongside (one
statement); the search index is a contentless FTS5 table keyed by the message row's ``rid``; a
batch of change rows is one ``executemany`` at the positions SQLite would have picked; legacy
tables are ordered by ``rowid``. The backend that owns the connection is in :mod:`._engine`.
"""

from __future__ import annotations

import logging
import random
import re
import sqlite3
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ...directory._sql import NOTE_QUIET
from ...feed._sql import CHANGE_HEAD, CHANGE_INSERT, CHANGE_INSERT_AT
from ...legacy._sql import LegacySql
from .._schema import DIRECTORY, FTS, MESSAGES
from .._sql import SqlOps
from ..connection import _batches, _marks
from ..rows import AppendProbe, ChangeRow, FtsHit, LeafProbe, OldTexts, Position

logger = logging.getLogger("convostore")

_FIRST_WAIT = 0.0001
_LONGEST_WAIT = 0.002
"""How a connection waits for another process's lock (seconds): retries after about 0.1 ms,
then twice as long each time up to 2 ms, until the store's ``busy_timeout``.

SQLite's own busy handler sleeps 1, 2, 5, 10, 15, 20, 25... ms between tries. An append holds
the write lock for a fraction of a millisecond, so with several processes writing, a writer
that found the lock taken slept through several commits of the others, and the lock sat idle
while every waiter slept: four processes into one session ran at ~0.47 of four raw writers.
The connection's own timeout is therefore 0 once the store is open, and these waits retry
instead (a statement that found the lock busy did nothing, so it is simply run again)."""


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY (any extended code): another connection holds the lock."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return int(code) & 0xFF == 5
    return "database is locked" in str(exc)


def _retry_busy(
    conn: sqlite3.Connection, sql: str, params: Sequence[Any], timeout: float,
    first: sqlite3.OperationalError,
) -> Any:
    """Run ``sql`` again until the lock it waits for is free (see :data:`_FIRST_WAIT`); the
    error ``first`` when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    wait = _FIRST_WAIT
    while True:
        if time.monotonic() >= deadline:
            raise first
        time.sleep(wait * (0.5 + random.random()))  # spread: waiters do not retry together
        wait = min(wait * 2, _LONGEST_WAIT)
        try:
            return conn.execute(sql, params)
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise


_APPEND_PROBE_KNOWN = (
    f"SELECT EXISTS (SELECT 1 FROM {MESSAGES} WHERE session_id = ?2 AND id = ?1), "
    f"(SELECT id FROM {MESSAGES} WHERE session_id = ?2 ORDER BY seq DESC LIMIT 1), "
    f"(SELECT max(seq) FROM {MESSAGES} WHERE session_id = ?2)"
)
# Until the search index is seen, its check rides along with the probe (one statement fewer).
_APPEND_PROBE = (
    f"{_APPEND_PROBE_KNOWN}, "
    f"EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{FTS}')"
)
# The search index: a contentless FTS5 table (no copy of the text: a hit's text is read from its
# message row), one indexed column, keyed by the message row's ``rid``. Its docsize table (one
# row per indexed message) tells which messages have an entry. Without ``contentless_delete``
# (SQLite 3.43+, and a file that older SQLite could no longer open), an entry is removed by the
# 'delete' command given the text it was indexed with, recomputed from the stored message.
_FTS_DDL = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING fts5("
    "content, content = '', tokenize = 'porter unicode61')"
)
_FTS_DOCSIZE = f"{FTS}_docsize"
_UNINDEX_BATCH = 50
"""Messages whose stored text is read at once to remove their entries."""
_UNINDEXED_RID = (
    f"SELECT m.rid FROM {MESSAGES} m WHERE m.session_id = ? AND m.id = ? "
    f"AND NOT EXISTS (SELECT 1 FROM {_FTS_DOCSIZE} d WHERE d.id = m.rid)"
)
_INDEXED = (
    f"SELECT m.id, m.rid FROM {MESSAGES} m JOIN {_FTS_DOCSIZE} d ON d.id = m.rid "
    "WHERE m.session_id = ?"
)
# The leaf a session's directory row chose (set_active_leaf) and the newest row's run_bytes,
# riding along too (leaf_probe).
_CHOSEN = (
    f"(SELECT active_leaf FROM {DIRECTORY} WHERE session_id = ?2), "
    f"(SELECT run_bytes FROM {MESSAGES} WHERE session_id = ?2 ORDER BY seq DESC LIMIT 1)"
)
_EMPTY_PROBE = f"{_APPEND_PROBE}, {_CHOSEN}"
# leaf_probe reads the newest row once for its id, seq and run_bytes (three subqueries cost 10k
# instructions more per append); an empty session has no newest row: _EMPTY_PROBE answers then.
# Its sixth column is the time up to which an insert's directory note changes nothing
# (NOTE_QUIET, LeafProbe.quiet).
_NEWEST_PROBE = (
    f"SELECT EXISTS (SELECT 1 FROM {MESSAGES} WHERE session_id = ?2 AND id = ?1), id, seq, "
    f"(SELECT active_leaf FROM {DIRECTORY} WHERE session_id = ?2), run_bytes, "
    f"{NOTE_QUIET.format(sid='?2')}{{}} "
    f"FROM {MESSAGES} WHERE session_id = ?2 ORDER BY seq DESC LIMIT 1"
)
_LEAF_PROBE_KNOWN = _NEWEST_PROBE.format("")
_LEAF_PROBE = _NEWEST_PROBE.format(
    f", EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{FTS}')")


def _position(pos: int) -> Position:
    return lambda: pos


class SqliteLegacySql(LegacySql):
    """SQLite: ``rowid`` order, ``DATETIME`` text read as UTC with its milliseconds."""

    _ORDER = "rowid"

    def _bytes(self, column: str) -> str:
        return f"length(CAST({column} AS BLOB))"

    def _seq(self, ops: Any, table: str, source: str) -> tuple[str, str, tuple[Any, ...]]:
        # A correlated subquery: SQLite computes a SELECT that reads the INSERT's own table
        # to completion before inserting, so the subquery never sees the rows being copied.
        offset = (
            f"coalesce((SELECT max(d.seq) FROM {table} d WHERE d.session_id = a.session_id), 0)"
        )
        return self._numbered(offset), "", ()

    def _ms(self, column: str) -> str:
        # strftime('%f') is "SS.SSS": its last three characters are the milliseconds.
        return (
            f"CASE WHEN typeof({column}) = 'text' THEN coalesce("
            f"CAST(strftime('%s', {column}) AS INTEGER) * 1000 "
            f"+ CAST(substr(strftime('%f', {column}), 4) AS INTEGER), 0) ELSE 0 END"
        )

    def drop(self, ops: Any, table: str) -> None:
        ops._run(f"DROP TABLE IF EXISTS {table}")


class SqliteOps(SqlOps):
    """:class:`~convostore.backends._sql.SqlOps` over a :mod:`sqlite3` connection."""

    legacy = SqliteLegacySql()

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        # Whether the search index exists, as the append probe of the write in progress found
        # it (a write scope clears it on entry and exit): fts_exists() then asks nothing. Once
        # seen it stays (nothing drops it), and appends stop asking (``_fts_seen``).
        self.fts_hint: bool | None = None
        self._fts_seen = False

    busy_timeout = 0.0
    """Seconds a statement outside a transaction retries while another connection holds a lock
    it needs (set by the backend; a write transaction's statements never wait in WAL mode)."""

    def _run(self, sql: str, params: Sequence[Any] = ()) -> Any:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.OperationalError as exc:
            if self._conn.in_transaction or not _is_busy(exc):
                raise
            return _retry_busy(self._conn, sql, params, self.busy_timeout, exc)

    def _many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)  # always inside a write transaction

    def existing_tables(self, names: Sequence[str]) -> set[str]:
        return {
            r[0]
            for r in self._all(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                f"AND name IN ({_marks(len(names))})",
                tuple(names),
            )
        }

    def _insert_change(self, row: ChangeRow) -> Position:
        pos = int(self._conn.execute(CHANGE_INSERT, row).lastrowid or 0)
        return lambda: pos

    def _insert_changes(self, rows: Sequence[ChangeRow]) -> list[Position]:
        # One statement for all: the positions are the ones SQLite would pick row by row
        # (the newest + 1, each in turn), chosen here since executemany reports no row ids.
        # The write lock is held (BEGIN IMMEDIATE), so nobody else takes them meanwhile.
        head = int(self._conn.execute(CHANGE_HEAD).fetchone()[0])
        self._conn.executemany(
            CHANGE_INSERT_AT, [(head + i, *row) for i, row in enumerate(rows, start=1)]
        )
        return [_position(head + i) for i in range(1, len(rows) + 1)]

    # -- full-text index (FTS5; the row id is the message row's ``rid``) ------------------------

    def fts_exists(self) -> bool:
        if self._fts_seen:
            return True
        if self.fts_hint is not None:
            return self.fts_hint
        self._fts_seen = bool(self.existing_tables([FTS]))
        return self._fts_seen

    def append_probe(self, session_id: str, id: str) -> AppendProbe:
        if self._fts_seen:
            exists, tail, top = self._conn.execute(_APPEND_PROBE_KNOWN, (id, session_id)).fetchone()
        else:
            exists, tail, top, fts = self._conn.execute(_APPEND_PROBE, (id, session_id)).fetchone()
            self.fts_hint = self._fts_seen = bool(fts)
        return bool(exists), tail, top or 0

    def leaf_probe(self, session_id: str, id: str) -> LeafProbe:
        # the newest row with the id test and the chosen leaf beside it: one statement
        known = self._fts_seen
        row = self._conn.execute(_LEAF_PROBE_KNOWN if known else _LEAF_PROBE,
                                 (id, session_id)).fetchone()
        if row is not None:
            if not known:
                self.fts_hint = self._fts_seen = bool(row[6])
            return LeafProbe(bool(row[0]), row[1], row[2], row[3], row[4], row[5])
        exists, tail, top, fts, chosen, run = self._conn.execute(
            _EMPTY_PROBE, (id, session_id)).fetchone()
        self.fts_hint = self._fts_seen = self._fts_seen or bool(fts)
        return LeafProbe(bool(exists), tail, top or 0, chosen, run or 0)

    def fts_create(self) -> None:
        self._run(_FTS_DDL)
        self.fts_hint = self._fts_seen = True

    def fts_insert(self, rows: Iterable[tuple[str, str, str]]) -> None:
        # Look the row ids up first: FTS5 fed by INSERT ... SELECT flushes its pending index
        # data on every row, with VALUES it batches them.
        entries = []
        for sid, mid, text in rows:
            found = self._one(_UNINDEXED_RID, (sid, mid))
            if found is not None:
                entries.append((found[0], text))
        self._many(f"INSERT INTO {FTS} (rowid, content) VALUES (?, ?)", entries)

    def fts_delete(self, session_id: str, ids: Sequence[str], old_texts: OldTexts) -> None:
        for batch in _batches(ids):
            self._unindex(self._all(
                f"{_INDEXED} AND m.id IN ({_marks(len(batch))})", (session_id, *batch)
            ), old_texts)

    def fts_clear(self, session_id: str, old_texts: OldTexts) -> None:
        self._unindex(self._all(_INDEXED, (session_id,)), old_texts)

    def _unindex(self, indexed: Sequence[tuple[Any, ...]], old_texts: OldTexts) -> None:
        """Remove the entries of ``(id, rowid)`` pairs (messages of one session): a contentless
        table forgets an entry only when told the words it was indexed with."""
        for first in range(0, len(indexed), _UNINDEX_BATCH):  # bounded memory: texts are read
            self._unindex_some(indexed[first:first + _UNINDEX_BATCH], old_texts)

    def _unindex_some(self, indexed: Sequence[tuple[Any, ...]], old_texts: OldTexts) -> None:
        texts = old_texts([mid for mid, _rid in indexed])
        missing = [mid for mid, _rid in indexed if mid not in texts]
        if missing:  # only if a stored row changed outside convostore since it was indexed
            logger.warning("search index: no text for indexed messages %s; their words may "
                           "stay in the index", missing[:5])
        self._many(
            f"INSERT INTO {FTS} ({FTS}, rowid, content) VALUES ('delete', ?, ?)",
            [(rid, texts.get(mid, "")) for mid, rid in indexed],
        )

    def fts_search(
        self, query: str, session_id: str | None, limit: int, all_words: bool
    ) -> list[FtsHit]:
        if all_words:
            words = [w for w in query.split() if _has_token(w)]
            match = " ".join(_phrase(w) for w in words)
        else:
            match = _phrase(query)
        if not match:
            return []
        try:
            # FTS5 returns the matches sorted by rank itself: the join then reads the content
            # of the rows the limit keeps only.
            return self._search(
                f"SELECT m.session_id, m.id, m.role, m.content, m.content_chunks, m.created_at "
                f"FROM {FTS} f JOIN {MESSAGES} m ON m.rid = f.rowid WHERE {FTS} MATCH ?",
                match, session_id, "m.session_id", "f.rank", limit,
            )
        except sqlite3.OperationalError:
            return []  # a query FTS5 cannot parse finds nothing rather than failing the caller


_TOKEN_RE = re.compile(r"\w")


def _has_token(text: str) -> bool:
    return bool(_TOKEN_RE.search(text))


def _phrase(text: str) -> str:
    """One FTS5 phrase: operators and quotes inside become literal words."""
    return '"' + text.replace('"', '""') + '"' if _has_token(text) else ""

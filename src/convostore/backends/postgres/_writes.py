"""PostgreSQL's write path: the append in one statement, and the change log without a lock.

**The append** (:meth:`PostgresWriteOps.append_row`). The write scope's ``BEGIN`` and locks,
one statement and the ``COMMIT`` travel together in the scope's pipeline: one round trip, and
the session's lock is held only while the server runs that statement and commits. The
statement (data-modifying CTEs) probes the session (the id, the newest row, the chosen leaf,
the parent named), inserts the row under the parent the link names, notes it in the directory,
indexes it when the search table is known to exist, and logs its change; each part reads the
rows the part before it returned, so nothing is written when the id is already stored. Its
snapshot is taken after the scope's locks, so the probe sees the previous writer's commit. While
this process has not seen the search table, the statement also checks that it is absent, and
writes nothing when it is there (the caller then writes the general way, which indexes).

**Change-log positions without a store-wide lock.** Positions come from the log's identity
sequence, so two writers may commit in the other order than they drew. Instead of serialising
commits, a writer marks its positions while they are uncommitted, with transaction-scoped
advisory locks (released when the commit is visible): a shared *draw* lock before it draws,
an exclusive lock per position drawn, a shared *done* lock once every position is locked. A
reader (:meth:`PostgresWriteOps.changes_after`) first finds the frontier: the sequence's last
value, then, in ``pg_locks``, the positions still held. Every position up to the frontier that
is not held is committed (visible to the reader's next statement) or rolled back for good, so
the reader returns rows up to the frontier only: it never moves past a change that may still
commit. (A read of the whole log needs that only at a gap: an unbroken run of positions after
the cursor is all committed, and is returned as it is.) A writer between its draw and its
position locks (holding *draw* but not *done*) is waited out (a few microseconds); should that
last, the frontier stops before the first missing position. Writers of different sessions
share no lock, so their commits (and WAL flushes) overlap.

**NOTIFY only when someone listens.** ``pg_notify`` takes a database-wide lock at commit,
which would serialise every writer again. A watcher's listening connection holds a shared
advisory lock of the store for as long as it listens (:data:`LISTENING_LOCK`), and a writer
notifies only when its momentary exclusive try of that lock fails. A watcher that starts
listening just as a writer commits may miss that one wake-up; it reads the log again within
``RECHECK`` seconds, as after any lost signal, so it never misses the change itself.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from ...directory._sql import _NOTE_INSERT, is_internal
from ...feed._sql import _COLUMNS, CHANGE_INSERT
from .._schema import CHANGES, DIRECTORY, FTS, MESSAGES
from ..rows import Appended, ChangeRow, Link, NewRow, Position, StoredChange
from ._search import TS_CONFIG, PostgresSearchOps, index_source

_MASK = 0x7FFFFFFF
"""A position's advisory lock key is its low 31 bits (two positions that far apart are never
in flight together)."""
_HALF = 1 << 30
_SEQUENCE = f"{CHANGES}_pos_seq"
"""The change log's identity sequence (PostgreSQL's name for it)."""
_WINDOW_TRIES = 20
"""Reads of the frontier while a writer sits between its draw and its position locks."""
_WINDOW_SPAN = 1000
"""How far below the sequence's last value the fallback frontier looks for a missing row."""


class ChangeKeys(NamedTuple):
    """The change log's advisory lock keys and NOTIFY channel of one store."""

    positions: int
    """First key of the per-position locks (the second is the position's low bits)."""
    flags: int
    """First key of the *draw* (second key 0) and *done* (1) locks."""
    channel: str
    """The NOTIFY channel."""


# Someone listens when a listening connection holds its shared lock (flags, 2): the writer's
# exclusive try fails. Taken and released in one expression: never held past it (a pooler's
# connection keeps nothing); two writers trying at the same instant only notify once more.
_LISTENED = ("CASE WHEN pg_try_advisory_lock(%(flags)s, 2) "
             "THEN NOT pg_advisory_unlock(%(flags)s, 2) ELSE true END")
LISTENING_LOCK = "SELECT pg_advisory_lock_shared(%s, 2)"
"""What a listening connection holds (session-scoped, shared) while it listens; the parameter
is :attr:`ChangeKeys.flags`."""
_HOLD = "pg_advisory_xact_lock(%(poskey)s, (pos & 2147483647)::int)"

# The frontier: the sequence's last value first, then the locks (LATERAL: read after it).
_FRONTIER = f"""SELECT s.top, l.held, l.draws > l.dones FROM
    (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END AS top
     FROM {_SEQUENCE}) AS s
    CROSS JOIN LATERAL (
        SELECT array_agg(k.objid) FILTER (WHERE k.classid = %(poskey)s) AS held,
            count(DISTINCT k.vxid) FILTER (WHERE k.classid = %(flags)s AND k.objid = 0) AS draws,
            count(DISTINCT k.vxid) FILTER (WHERE k.classid = %(flags)s AND k.objid = 1) AS dones
        FROM (SELECT classid::bigint AS classid, objid::bigint AS objid,
                     virtualtransaction AS vxid
              FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND s.top IS NOT NULL
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND classid IN (%(poskey)s::bigint::oid, %(flags)s::bigint::oid)) AS k
    ) AS l"""

_FIRST_MISSING = (
    "SELECT min(g) FROM generate_series(%s::bigint + 1, %s::bigint) AS g "
    f"WHERE NOT EXISTS (SELECT 1 FROM {CHANGES} c WHERE c.pos = g)"
)


@lru_cache(maxsize=32)
def _append_sql(rule: str, mode: str, change: bool, strict: bool = False) -> str:
    """The one-statement append for a link rule; ``mode``: ``"index"`` the row (the search
    table is known to exist), ``"check"`` that the search table is absent, or ``"skip"``
    both; ``change``: log the change; ``strict`` (with ``"check"``): fail the statement
    (division by zero) rather than write nothing when the search table is there."""
    parent = {
        "leaf": "coalesce(nullif(p.chosen, ''), p.tail)",
        "given": "%(given)s::text",
        "known": "CASE WHEN p.known THEN %(given)s::text END",
    }[rule]
    # The tail needs no lookup: integrations name it as the parent on every append.
    known = (f", CASE WHEN t.id = %(given)s::text THEN true ELSE EXISTS (SELECT 1 FROM "
             f"{MESSAGES} WHERE session_id = %(sid)s AND id = %(given)s::text) END AS known"
             ) if rule == "known" else ""
    blocked = "false" if mode != "check" else (
        f"EXISTS (SELECT 1 FROM pg_class WHERE relname = '{FTS}' AND relnamespace = "
        "(SELECT oid FROM pg_namespace WHERE nspname = current_schema()))")
    # The directory's stored part: what the new row does not carry (see _directory_sql); the
    # upsert writes the row only when updated_at moves, a chosen leaf is cleared or a ttl runs.
    note = _NOTE_INSERT.replace(
        "VALUES (?, ?, ?, ?, ?, ?)",
        "SELECT %(sid)s, %(internal)s, %(at)s, %(at)s, 1 - ins.seq, "
        "%(bytes)s - ins.run_bytes FROM ins")
    parts = [
        f"""p AS MATERIALIZED (
            SELECT EXISTS (SELECT 1 FROM {MESSAGES} WHERE session_id = %(sid)s AND id = %(id)s)
                AS dup, t.id AS tail, coalesce(t.seq, 0) AS top, coalesce(t.run, 0) AS run,
                (SELECT active_leaf FROM {DIRECTORY} WHERE session_id = %(sid)s) AS chosen,
                {blocked} AS blocked{known}
            FROM (SELECT 1) AS one LEFT JOIN LATERAL (SELECT id, seq, run_bytes AS run
                FROM {MESSAGES}
                WHERE session_id = %(sid)s ORDER BY seq DESC LIMIT 1) AS t ON true)""",
        f"l AS MATERIALIZED (SELECT p.top + 1 AS seq, p.tail, {parent} AS parent, "
        "p.run + %(bytes)s AS run FROM p "
        "WHERE NOT p.dup AND NOT p.blocked)",
        f"""ins AS (INSERT INTO {MESSAGES} (session_id, id, seq, parent_id, role,
                content_chunks, token_estimate, created_at, bytes, chained, content, run_bytes)
            SELECT %(sid)s, %(id)s, l.seq, l.parent, %(role)s, 0, %(estimate)s, %(at)s,
                %(bytes)s, coalesce((l.parent = l.tail)::int, 0), %(content)s, l.run FROM l
            RETURNING parent_id, seq, run_bytes)""",
        f"d AS ({note})",
    ]
    if mode == "index":
        # keys and tsvector only, as fts_insert writes them
        parts.append(
            f"f AS (INSERT INTO {FTS} (session_id, id, tsv) SELECT %(sid)s, %(id)s, "
            f"to_tsvector('{TS_CONFIG}', %(source)s) FROM ins "
            "ON CONFLICT (session_id, id) DO NOTHING)")
    # the divisor is a column, never folded into a constant when the statement is planned
    guard = ", 1 / (NOT p.blocked)::int" if strict and mode == "check" else ""
    select = f"SELECT p.dup, p.blocked, NULL::bigint{guard} FROM p"
    if change:
        parts += [
            "dr AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(%(flags)s, 0) AS x "
            "FROM ins)",
            f"c AS (INSERT INTO {CHANGES} ({_COLUMNS}) SELECT %(sid)s, %(kind)s, %(cmid)s, "
            "ins.parent_id, %(leaf)s, %(data)s, %(cat)s FROM ins, dr RETURNING pos)",
            f"h AS MATERIALIZED (SELECT pos, {_HOLD} AS x FROM c)",
            "dn AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(%(flags)s, 1) AS x "
            "FROM dr, (SELECT count(*) FROM h) AS n)",
        ]
        select = (
            "SELECT p.dup, p.blocked, (SELECT pos FROM h), (SELECT count(*) FROM dn), "
            f"(SELECT count(*) FROM (SELECT pg_notify(%(chan)s, '') FROM dr WHERE {_LISTENED})"
            f" AS n){guard} FROM p"
        )
    return "WITH " + ",\n".join(parts) + "\n" + select


class PostgresWriteOps(PostgresSearchOps):
    """The append in one statement and the lock-free change log (a mixin of
    ``PostgresOps``, which supplies the connection and the scope's state)."""

    _conn: Any
    _change_keys: ChangeKeys | None
    _strict = False
    """Whether the scope sent an append that fails rather than decline (see the backend's
    ``write``, which turns that failure into ``ScopeRetry``)."""

    @abstractmethod
    def _execute(self, query: str, params: Any) -> Any:
        """Run ``query`` (psycopg's placeholders) in the scope; its cursor."""

    # -- the append ----------------------------------------------------------------------------

    def append_row(
        self, row: NewRow, link: Link, index: Callable[[], str], change: ChangeRow | None,
        decline: bool = True,
    ) -> Callable[[], Appended]:
        assert self._writing, "append_row outside a write scope"
        text = index() if self._fts else ""
        params: dict[str, Any] = {
            "sid": row.session_id, "id": row.id, "given": link.parent_id, "role": row.role,
            "estimate": row.token_estimate, "at": row.created_at, "bytes": row.bytes,
            "content": row.content, "internal": int(is_internal(row.session_id)),
        }
        if text:
            params["source"] = index_source(text)
        if change is not None:
            keys = self._change_keys
            assert keys is not None, "a change logged outside a write scope"
            params.update(
                flags=keys.flags, poskey=keys.positions, chan=keys.channel, kind=change.kind,
                cmid=change.message_id, leaf=change.leaf_id, data=change.data,
                cat=change.created_at,
            )
        # The search table: known to exist, index the row (nothing to index: skip); not
        # known, check that it is absent.
        mode = "check" if not self._fts else "index" if text else "skip"
        strict = not decline and mode == "check"
        self._strict = self._strict or strict
        sql = _append_sql(link.rule, mode, change is not None, strict)
        cursor = self._conn.cursor().execute(sql, params)

        def answer() -> Appended:
            dup, blocked, pos = cursor.fetchone()[:3]
            if dup:
                return Appended(False, None)
            if blocked:
                return Appended(None, None)
            return Appended(True, None if pos is None else int(pos))

        return answer

    # -- the change log: the writer's side (see the module docstring) -------------------------

    def _keys(self) -> ChangeKeys:
        keys = self._change_keys
        assert keys is not None, "a change logged outside a write scope"
        return keys

    def _lock_changes(self) -> None:
        keys = self._keys()
        self._conn.execute(
            "SELECT pg_advisory_xact_lock_shared(%(flags)s, 0), (SELECT count(*) FROM "
            f"(SELECT pg_notify(%(chan)s, '') WHERE {_LISTENED}) AS n)",
            {"flags": keys.flags, "chan": keys.channel},
        )

    def _insert_change(self, row: ChangeRow) -> Position:
        # Pipelined with the COMMIT: the position is read once the scope has ended.
        cursor = self._run(CHANGE_INSERT + f" RETURNING pos, {_HOLD.replace('%(poskey)s', '?')}",
                           (*row, self._keys().positions))
        return lambda: int(cursor.fetchone()[0])

    def flush_changes(self) -> None:
        pending = bool(self._changes)
        super().flush_changes()
        if pending:  # every position drawn is locked: no longer in the draw window
            self._conn.execute("SELECT pg_advisory_xact_lock_shared(%s, 1)",
                               (self._keys().flags,))

    # -- the change log: the reader's side ----------------------------------------------------

    def _frontier(self, floor: int) -> int:
        """The highest position up to which every change has committed or never will, as
        far as a statement run after this call sees (``floor``: the caller's cursor, where
        the fallback starts looking)."""
        keys = self._keys()
        params = {"poskey": keys.positions, "flags": keys.flags}
        for attempt in range(_WINDOW_TRIES):
            row = self._execute(_FRONTIER, params).fetchone()
            top, held, drawing = int(row[0]), row[1] or (), bool(row[2])
            front = top
            for key in held:  # a held key is the low bits of a position close to ``top``
                ahead = (int(key) - top) & _MASK
                position = top + ahead if ahead < _HALF else top + ahead - _MASK - 1
                front = min(front, position - 1)
            if not drawing:
                return front
            time.sleep(0.0002 * (attempt + 1))
        # A writer stays between its draw and its locks: stop before the first missing row.
        low = max(floor, top - _WINDOW_SPAN)
        first = self._one(_FIRST_MISSING.replace("%s", "?"), (low, top))
        return front if first is None or first[0] is None else min(front, int(first[0]) - 1)

    def changes_after(
        self, after: int, limit: int, session_id: str | None
    ) -> list[StoredChange]:
        if session_id is None:
            # Usually the positions after the cursor are all there: each row of an unbroken
            # run from ``after + 1`` is committed, and no other change can take its position.
            rows = super().changes_after(after, limit, None)
            run = 0
            while run < len(rows) and rows[run].pos == after + 1 + run:
                run += 1
            if run:
                return rows[:run]
            if not rows:
                return rows
        front = self._frontier(after)
        if front <= after:
            return []
        where = "pos > ? AND pos <= ?" + ("" if session_id is None else " AND session_id = ?")
        params: Sequence[Any] = (after, front) if session_id is None else (
            after, front, session_id)
        found = self._all(
            f"SELECT pos, {_COLUMNS} FROM {CHANGES} WHERE {where} ORDER BY pos LIMIT ?",
            (*params, limit),
        )
        return [StoredChange(*r) for r in found]

    def change_head(self) -> int:
        front = self._frontier(0)
        return front if front > 0 else self.change_horizon()

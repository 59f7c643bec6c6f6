"""PostgreSQL's write path: the append in one statement, and the change log without a lock.

**The append** (:meth:`~._ops.PostgresOps.append_row`). The write scope's ``BEGIN`` and locks,
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
reader (:meth:`~._ops.PostgresOps.changes_after`) first finds the frontier: the sequence's last
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
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from ...directory._sql import _NOTE_INSERT, is_internal
from ...feed._sql import _COLUMNS, CHANGE_INSERT
from .._schema import ATTACHMENTS, CHANGES, DIRECTORY, FTS, MESSAGES
from ..connection import _marks
from ..rows import Appended, ChangeRow, Link, NewRow, StoredChange
from ._search import TS_CONFIG, index_source

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
def append_sql(rule: str, mode: str, change: bool, strict: bool = False) -> str:
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
    # The directory's stored part: what the new row does not carry (see directory/_sql.py); the
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


def append_params(
    row: NewRow, link: Link, text: str, change: ChangeRow | None, keys: ChangeKeys | None
) -> dict[str, Any]:
    """:func:`append_sql`'s parameters: the row under ``link``, its search ``text`` when it is
    indexed, its ``change`` (logged with the store's ``keys``) when one is."""
    params: dict[str, Any] = {
        "sid": row.session_id, "id": row.id, "given": link.parent_id, "role": row.role,
        "estimate": row.token_estimate, "at": row.created_at, "bytes": row.bytes,
        "content": row.content, "internal": int(is_internal(row.session_id)),
    }
    if text:
        params["source"] = index_source(text)
    if change is not None:
        assert keys is not None, "a change logged outside a write scope"
        params.update(
            flags=keys.flags, poskey=keys.positions, chan=keys.channel, kind=change.kind,
            cmid=change.message_id, leaf=change.leaf_id, data=change.data,
            cat=change.created_at,
        )
    return params


def appended(cursor: Any) -> Callable[[], Appended]:
    """How to read the outcome of :func:`append_sql` sent on ``cursor``, once it arrived."""

    def answer() -> Appended:
        dup, blocked, pos = cursor.fetchone()[:3]
        if dup:
            return Appended(False, None)
        if blocked:
            return Appended(None, None)
        return Appended(True, None if pos is None else int(pos))

    return answer


# -- the change log: the writer's side (see the module docstring) -----------------------------

LOCK_CHANGES = (
    "SELECT pg_advisory_xact_lock_shared(%(flags)s, 0), (SELECT count(*) FROM "
    f"(SELECT pg_notify(%(chan)s, '') WHERE {_LISTENED}) AS n)"
)
"""A scope's *draw* lock before its rows are written, and its NOTIFY if someone listens."""
CHANGE_INSERT_HELD = CHANGE_INSERT + f" RETURNING pos, {_HOLD.replace('%(poskey)s', '?')}"
"""The shared change insert, its position returned and locked (parameters: the row, then the
store's :attr:`ChangeKeys.positions`)."""
CHANGES_LOCKED = "SELECT pg_advisory_xact_lock_shared(%s, 1)"
"""The *done* lock: every position the scope drew is locked (parameter: the flags key)."""



def share_payloads(n: int) -> str:
    """Lock ``n`` payload rows that a message re-uses ``FOR SHARE``, in hash order."""
    return f"SELECT hash FROM {ATTACHMENTS} WHERE hash IN ({_marks(n)}) ORDER BY hash FOR SHARE"


# -- the change log: the reader's side ---------------------------------------------------------


def frontier(
    execute: Callable[[str, Any], Any], one: Callable[[str, Sequence[Any]], Any],
    keys: ChangeKeys, floor: int,
) -> int:
    """The highest position up to which every change has committed or never will, as far as a
    statement run after this call sees (``floor``: the caller's cursor, where the fallback
    starts looking); ``execute`` runs psycopg's placeholders, ``one`` the shared ``?`` ones."""
    params = {"poskey": keys.positions, "flags": keys.flags}
    for attempt in range(_WINDOW_TRIES):
        row = execute(_FRONTIER, params).fetchone()
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
    first = one(_FIRST_MISSING.replace("%s", "?"), (low, top))
    return front if first is None or first[0] is None else min(front, int(first[0]) - 1)


def unbroken(rows: Sequence[StoredChange], after: int) -> int:
    """How many of ``rows`` (read after position ``after``) form an unbroken run of positions
    from ``after + 1``: each is committed, and no other change can take its position."""
    run = 0
    while run < len(rows) and rows[run].pos == after + 1 + run:
        run += 1
    return run


def changes_upto(
    after: int, front: int, session_id: str | None, limit: int
) -> tuple[str, tuple[Any, ...]]:
    """The changes after ``after`` up to ``front`` (of ``session_id`` only, when given), at most
    ``limit``: the statement and its parameters."""
    where = "pos > ? AND pos <= ?" + ("" if session_id is None else " AND session_id = ?")
    params: tuple[Any, ...] = (after, front) if session_id is None else (
        after, front, session_id)
    return (
        f"SELECT pos, {_COLUMNS} FROM {CHANGES} WHERE {where} ORDER BY pos LIMIT ?",
        (*params, limit),
    )

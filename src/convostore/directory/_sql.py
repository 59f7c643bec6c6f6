"""The directory of conversations: its SQL, written once for both engines (a mixin of ``SqlOps``).

``convostore_sessions`` (:data:`~._schema.DIRECTORY`) holds one row per session:

- what the application describes: ``title``, ``owner`` (an opaque user id), ``metadata`` (the
  JSON text of an object), ``expires_at`` and ``ttl`` (epoch milliseconds; ``ttl`` moves
  ``expires_at`` to ``updated_at + ttl`` at each message write), ``belongs_to`` (stored as
  ``context_of``: the session this one is deleted with, e.g. a context session's conversation);
- what the writes maintain: ``created_at``, ``updated_at`` (the newest message's time, or the
  last change of the row), ``message_count`` and ``bytes`` (see below), ``internal`` (the id
  starts with ``convostore:``), ``active_leaf`` (a leaf chosen by ``set_active_leaf``; every
  message insert clears it, so the new row is the leaf again);
- the session manager's columns (``managed`` = 1 for a registered session, ``parent_session_id``,
  ``model``, ``source``, usage counters, ``end_reason``; its name is ``title``): the manager's
  registry is this table (:mod:`convostore.manager._sql`).

The message-row operations of ``SqlOps`` call the ``dir_note_*`` methods here, so any write of a
message keeps the row in step, whichever code path writes it.

**Totals carried by the newest row.** A session's message count is ``message_count`` plus its
highest ``seq``, its stored bytes ``bytes`` plus its newest row's ``run_bytes`` (the session's
bytes up to and including that row, set when it is written): every insert takes ``max(seq) + 1``
and adds its bytes to the newest row's ``run_bytes``, so a plain append keeps both sums right
without writing the directory row at all (one page fewer per append on SQLite, one row update
fewer on PostgreSQL). Only writes that break the run (an update, a delete, a clear) rebase the
stored part, in the same statement that notes them; readers add the newest row's values
(:data:`COUNT_SQL`, :data:`BYTES_SQL`: one probe of the ``seq`` index each). An append writes
the row only to move ``updated_at`` (at most once a second), clear a chosen leaf, or refresh a
ttl's expiry. Listings read the partial indexes
on ``(updated_at, session_id)`` and ``(owner, updated_at, session_id)`` of non-internal rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backends._schema import (
    DIRECTORY,
    MESSAGES,
    META,
)
from ..backends.connection import SqlConnection, _batches, _marks
from ..backends.rows import ContentRow, LeafProbe, Tail

INTERNAL_PREFIX = "convostore:"
"""Session ids starting with this hold convostore's own data (context blocks, cached prompts,
search collections): never listed, never in cross-session search."""

DIRECTORY_INDEXES = (
    f"CREATE INDEX IF NOT EXISTS convostore_sessions_updated ON {DIRECTORY} "
    "(updated_at, session_id) WHERE internal = 0",
    f"CREATE INDEX IF NOT EXISTS convostore_sessions_owner ON {DIRECTORY} "
    "(owner, updated_at, session_id) WHERE internal = 0 AND owner IS NOT NULL",
    f"CREATE INDEX IF NOT EXISTS convostore_sessions_expires ON {DIRECTORY} "
    "(expires_at) WHERE expires_at IS NOT NULL",
    f"CREATE INDEX IF NOT EXISTS convostore_sessions_context ON {DIRECTORY} "
    "(context_of) WHERE context_of IS NOT NULL",
)
"""The directory's indexes (the same DDL on both engines)."""

DIRECTORY_BACKFILL = (
    f"INSERT INTO {DIRECTORY} (session_id, internal, created_at, updated_at, message_count, "
    "bytes) SELECT session_id, "
    f"CASE WHEN substr(session_id, 1, {len(INTERNAL_PREFIX)}) = '{INTERNAL_PREFIX}' "
    "THEN 1 ELSE 0 END, min(created_at), max(created_at), count(*), sum(bytes) "
    f"FROM {MESSAGES} WHERE true GROUP BY session_id ON CONFLICT (session_id) DO NOTHING"
)
"""The migration's fill: a row for every session that holds messages."""

_TAIL_SEQ = "(SELECT max(t.seq) FROM " + MESSAGES + " t WHERE t.session_id = {sid})"
_TAIL_RUN = (
    "(SELECT t.run_bytes FROM " + MESSAGES + " t WHERE t.session_id = {sid} "
    "ORDER BY t.seq DESC LIMIT 1)"
)

COUNT_SQL = f"(d.message_count + COALESCE({_TAIL_SEQ.format(sid='d.session_id')}, 0))"
"""A directory row's message count (the row aliased ``d``): its stored part plus the highest
seq."""
BYTES_SQL = f"(d.bytes + COALESCE({_TAIL_RUN.format(sid='d.session_id')}, 0))"
"""A directory row's stored bytes (the row aliased ``d``): its stored part plus the newest
row's ``run_bytes``."""

DIRECTORY_TO_TAIL_TOTALS = (
    f"UPDATE {DIRECTORY} SET message_count = message_count - COALESCE("
    f"{_TAIL_SEQ.format(sid=DIRECTORY + '.session_id')}, 0), "
    f"bytes = bytes - COALESCE({_TAIL_RUN.format(sid=DIRECTORY + '.session_id')}, 0) "
    f"WHERE EXISTS (SELECT 1 FROM {META} WHERE key = 'schema_version' "
    "AND CAST(value AS INTEGER) < 7)"
)
"""Version 7's step: the counts of a directory written before it (whole totals, as the
directory's fill computes them too) become the part the newest row does not carry (rows written
before hold ``run_bytes`` 0). A database already at version 7 is left alone, so the step is
safe to run again (the schema file)."""

DIRECTORY_RECOUNT = (
    f"INSERT INTO {DIRECTORY} AS d (session_id, internal, created_at, updated_at, "
    "message_count, bytes) SELECT session_id, "
    f"CASE WHEN substr(session_id, 1, {len(INTERNAL_PREFIX)}) = '{INTERNAL_PREFIX}' "
    "THEN 1 ELSE 0 END, min(created_at), max(created_at), count(*) - max(seq), "
    f"sum(bytes) - COALESCE({_TAIL_RUN.format(sid=MESSAGES + '.session_id')}, 0) "
    f"FROM {MESSAGES} WHERE true GROUP BY session_id ON CONFLICT (session_id) DO UPDATE SET "
    "message_count = excluded.message_count, bytes = excluded.bytes, "
    "created_at = CASE WHEN excluded.created_at < d.created_at THEN excluded.created_at "
    "ELSE d.created_at END, "
    "updated_at = CASE WHEN excluded.updated_at > d.updated_at THEN excluded.updated_at "
    "ELSE d.updated_at END"
)
"""Counts of every session recomputed from its messages (after rows were copied in bulk)."""

ENTRY_COLUMNS = (
    "session_id", "title", "owner", "metadata", "created_at", "updated_at", "message_count",
    "bytes", "expires_at", "ttl", "active_leaf", "context_of",
)
"""The columns a directory read returns, in this order (a ``SessionEntry`` minus decoding)."""
_ENTRY = ", ".join({"message_count": COUNT_SQL, "bytes": BYTES_SQL}.get(c, c)
                   for c in ENTRY_COLUMNS)  # read from a row aliased ``d``

SETTABLE = frozenset({"title", "owner", "metadata", "expires_at", "ttl", "context_of"})
"""Columns :meth:`DirectoryOps.dir_set` may write."""

UPDATED_GRAIN_MS = 1000
"""A message write moves ``updated_at`` when it is at least this much newer (a burst of appends
to one session then leaves its row alone: the totals ride on the newest message row)."""

_NOTE_INSERT = (
    f"INSERT INTO {DIRECTORY} AS d (session_id, internal, created_at, updated_at, "
    "message_count, bytes) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
    f"updated_at = CASE WHEN excluded.updated_at > d.updated_at + {UPDATED_GRAIN_MS - 1} "
    "THEN excluded.updated_at ELSE d.updated_at END, active_leaf = NULL, "
    "expires_at = CASE WHEN d.ttl IS NULL THEN d.expires_at "
    "ELSE excluded.updated_at + d.ttl END "
    # Nothing to change: no row is written (no page on SQLite, no row version on PostgreSQL).
    f"WHERE excluded.updated_at > d.updated_at + {UPDATED_GRAIN_MS - 1} "
    "OR d.active_leaf IS NOT NULL OR d.ttl IS NOT NULL"
)

NOTE_QUIET = (
    f"(SELECT updated_at + {UPDATED_GRAIN_MS - 1} FROM {DIRECTORY} WHERE session_id = {{sid}} "
    "AND active_leaf IS NULL AND ttl IS NULL)"
)
"""The latest message time a note of inserted rows (:data:`_NOTE_INSERT`) leaves the
session's directory row alone at, or NULL when it would write the row whatever the time (no
row yet, a chosen leaf to clear, a ttl to refresh): an engine that reads this in the writing
transaction may skip a note whose newest time is not later (it would change nothing)."""


METADATA_UNSAFE = r"\\u(0000|[dD][89a-fA-F])"
"""A ``\\u`` escape no ``jsonb`` holds (NUL, a surrogate), as a regular expression: a
metadata filter skips a row whose text holds one once its escaped backslashes (``\\\\``)
are removed (written before they were refused; PostgreSQL's cast of it would fail the query)."""


def is_internal(session_id: str) -> bool:
    """Does ``session_id`` name one of convostore's own sessions?"""
    return session_id.startswith(INTERNAL_PREFIX)


class DirectoryOps(SqlConnection):
    """Directory operations over the scope's connection."""

    def _metadata_match(self, key: str, value: Any) -> tuple[str, list[Any]]:
        """A condition on ``metadata`` holding ``key`` equal to the JSON value ``value``
        (SQLite's JSON1 functions; PostgreSQL overrides with ``jsonb``): numbers by value, as
        ``jsonb`` compares them (``3.0`` matches a stored ``3``), ``true`` never ``1``."""
        path = f'$."{key}"'
        if isinstance(value, bool):
            kinds = "'true'" if value else "'false'"
        elif value is None:
            kinds = "'null'"
        else:
            kinds = "'text'" if isinstance(value, str) else "'integer', 'real'"
        # Rows written before NUL and surrogates were refused are skipped, as PostgreSQL must
        # (METADATA_UNSAFE): JSON1 would cut a string at its NUL and match the cut text.
        return (f"NOT (replace(metadata, ?, '') GLOB ? OR replace(metadata, ?, '') GLOB ?) "
                f"AND json_type(metadata, ?) IN ({kinds}) AND json_extract(metadata, ?) IS ?",
                ["\\\\", "*\\u0000*", "\\\\", "*\\u[dD][89a-fA-F]*", path, path, value])

    # -- kept in step by the message writes (SqlOps calls these) ------------------------------

    def dir_note_insert(
        self, session_id: str, created_at: int, bytes: int, count: int = 1,
        newest: int | None = None, *, top_seq: int, top_run: int,
    ) -> None:
        """``count`` message rows were inserted (``bytes`` in all, written from ``created_at``
        to ``newest``, default the same), the last with seq ``top_seq`` and ``run_bytes``
        ``top_run``: the totals are the new rows' already; move ``updated_at`` (see
        :data:`UPDATED_GRAIN_MS`), clear the chosen leaf, refresh a ttl's expiry, or create the
        row (holding these rows only)."""
        newest = created_at if newest is None else newest
        self._run(_NOTE_INSERT, (session_id, int(is_internal(session_id)), created_at,
                                 newest, count - top_seq, bytes - top_run))

    def dir_note_update(self, session_id: str, id: str, bytes: int, now: int) -> None:
        """Message ``id`` is about to be rewritten to ``bytes`` stored bytes."""
        self._run(
            f"UPDATE {DIRECTORY} SET bytes = bytes + ? - COALESCE((SELECT bytes FROM {MESSAGES} "
            "WHERE session_id = ? AND id = ?), 0), updated_at = ? WHERE session_id = ?",
            (bytes, session_id, id, now, session_id),
        )

    def dir_note_delete(self, session_id: str, ids: Sequence[str], now: int) -> None:
        """Messages ``ids`` (one batch) are about to be deleted: the stored part takes the
        newest row's totals before, less the rows deleted, less the newest kept row's."""
        marks = _marks(len(ids))
        kept = f"t.session_id = ? AND t.id NOT IN ({marks})"
        self._run(
            f"UPDATE {DIRECTORY} SET message_count = message_count "
            f"+ COALESCE({_TAIL_SEQ.format(sid='?')}, 0) "
            f"- (SELECT count(*) FROM {MESSAGES} m WHERE m.session_id = ? AND m.id IN ({marks})) "
            f"- COALESCE((SELECT t.seq FROM {MESSAGES} t WHERE {kept} "
            "ORDER BY t.seq DESC LIMIT 1), 0), "
            f"bytes = bytes + COALESCE({_TAIL_RUN.format(sid='?')}, 0) "
            f"- (SELECT COALESCE(sum(m.bytes), 0) FROM {MESSAGES} m WHERE m.session_id = ? "
            f"AND m.id IN ({marks})) "
            f"- COALESCE((SELECT t.run_bytes FROM {MESSAGES} t WHERE {kept} "
            "ORDER BY t.seq DESC LIMIT 1), 0), "
            "updated_at = ? WHERE session_id = ?",
            (session_id, session_id, *ids, session_id, *ids,
             session_id, session_id, *ids, session_id, *ids, now, session_id),
        )

    def dir_note_clear(self, session_id: str, now: int) -> None:
        """Every message of the session is about to be deleted (the row stays, described)."""
        self._run(
            f"UPDATE {DIRECTORY} SET message_count = 0, bytes = 0, active_leaf = NULL, "
            "updated_at = ? WHERE session_id = ?",
            (now, session_id),
        )

    def dir_recount(self) -> None:
        """Recompute every row's counts from the messages (after a bulk copy of rows)."""
        self._run(DIRECTORY_RECOUNT)

    # -- the chosen leaf ----------------------------------------------------------------------

    def leaf_probe(self, session_id: str, id: str) -> LeafProbe:
        """The append probe of ``SqlOps.append_probe``, the leaf chosen by ``set_active_leaf``
        (None: the newest row) and the newest row's ``run_bytes``, in one statement."""
        row = self._one(
            f"SELECT EXISTS (SELECT 1 FROM {MESSAGES} WHERE session_id = ? AND id = ?), "
            f"(SELECT id FROM {MESSAGES} WHERE session_id = ? ORDER BY seq DESC LIMIT 1), "
            f"(SELECT max(seq) FROM {MESSAGES} WHERE session_id = ?), "
            f"(SELECT active_leaf FROM {DIRECTORY} WHERE session_id = ?), "
            f"{_TAIL_RUN.format(sid='?')}",
            (session_id, id, session_id, session_id, session_id, session_id),
        )
        assert row is not None
        return LeafProbe(bool(row[0]), row[1], int(row[2] or 0), row[3], int(row[4] or 0))

    def chosen_leaf(self, session_id: str) -> str | None:
        """The leaf chosen by ``set_active_leaf`` and not moved since, or None."""
        row = self._one(f"SELECT active_leaf FROM {DIRECTORY} WHERE session_id = ?",
                        (session_id,))
        return None if row is None else row[0]

    def active_leaf(self, session_id: str) -> Tail | None:
        """The active leaf ``(id, seq)``: the chosen one, else the newest row."""
        row = self._one(
            f"SELECT id, seq FROM {MESSAGES} WHERE session_id = ? AND id = COALESCE("
            f"(SELECT active_leaf FROM {DIRECTORY} WHERE session_id = ?), "
            f"(SELECT id FROM {MESSAGES} WHERE session_id = ? ORDER BY seq DESC LIMIT 1))",
            (session_id, session_id, session_id),
        )
        return None if row is None else (row[0], row[1])

    def dir_set_leaf(self, session_id: str, leaf_id: str | None) -> None:
        """Record the chosen leaf (None: follow the newest row again); the row exists, since
        the session holds the leaf."""
        self._run(f"UPDATE {DIRECTORY} SET active_leaf = ? WHERE session_id = ?",
                  (leaf_id, session_id))

    def leaves(self, session_id: str) -> list[ContentRow]:
        """Rows no later row names as its parent, in seq order."""
        return [
            ContentRow(*r)
            for r in self._all(
                "SELECT m.id, m.parent_id, m.seq, m.content, m.content_chunks, m.created_at "
                f"FROM {MESSAGES} m WHERE m.session_id = ? AND NOT EXISTS (SELECT 1 FROM "
                f"{MESSAGES} c WHERE c.session_id = m.session_id AND c.parent_id = m.id "
                "AND c.chained = 0 AND c.seq > m.seq) AND NOT EXISTS (SELECT 1 FROM "
                f"{MESSAGES} c WHERE c.session_id = m.session_id AND c.seq = m.seq + 1 "
                "AND c.parent_id = m.id AND c.chained = 1) ORDER BY m.seq",
                (session_id,),
            )
        ]

    def child_ids(self, session_id: str, parent_id: str) -> list[tuple[str, int]]:
        """``(id, seq)`` of the children of ``parent_id`` (as ``children``), in seq order,
        without content."""
        rows = self._all(
            f"SELECT id, seq FROM {MESSAGES} WHERE session_id = ? AND parent_id = ? "
            "AND chained = 0",
            (session_id, parent_id),
        )
        rows += self._all(
            f"SELECT c.id, c.seq FROM {MESSAGES} p JOIN {MESSAGES} c ON c.session_id = "
            "p.session_id AND c.seq = p.seq + 1 AND c.parent_id = p.id AND c.chained = 1 "
            "WHERE p.session_id = ? AND p.id = ?",
            (session_id, parent_id),
        )
        return sorted(((r[0], int(r[1])) for r in rows), key=lambda r: r[1])

    def root_ids(self, session_id: str) -> list[tuple[str, int]]:
        """``(id, seq)`` of the rows that read as roots, in seq order, without content."""
        return [
            (r[0], int(r[1]))
            for r in self._all(
                f"SELECT m.id, m.seq FROM {MESSAGES} m WHERE m.session_id = ? AND "
                f"(m.parent_id IS NULL OR NOT EXISTS (SELECT 1 FROM {MESSAGES} p WHERE "
                "p.session_id = m.session_id AND p.id = m.parent_id AND p.seq < m.seq)) "
                "ORDER BY m.seq",
                (session_id,),
            )
        ]

    def row_facts(
        self, session_id: str, ids: Sequence[str]
    ) -> dict[str, tuple[str | None, int, int]]:
        """``id -> (parent_id, created_at, bytes)`` of those of ``ids`` that are stored."""
        out: dict[str, tuple[str | None, int, int]] = {}
        for batch in _batches(ids):
            for r in self._all(
                f"SELECT id, parent_id, created_at, bytes FROM {MESSAGES} WHERE session_id = ? "
                f"AND id IN ({_marks(len(batch))})",
                (session_id, *batch),
            ):
                out[r[0]] = (r[1], int(r[2]), int(r[3]))
        return out

    # -- rows ---------------------------------------------------------------------------------

    def dir_get(self, session_id: str) -> tuple[Any, ...] | None:
        """The row of ``session_id`` in :data:`ENTRY_COLUMNS` order, or None."""
        return self._one(f"SELECT {_ENTRY} FROM {DIRECTORY} d WHERE session_id = ?",
                         (session_id,))

    def dir_set(self, session_id: str, values: dict[str, Any], now: int) -> None:
        """Set columns of :data:`SETTABLE` (creating the row, with no messages, if missing)."""
        cols = [c for c in values if c in SETTABLE]
        assert len(cols) == len(values), f"not settable: {set(values) - SETTABLE}"
        names = ", ".join(cols)
        marks = ", ".join("?" * len(cols))
        sets = ", ".join(f"{c} = excluded.{c}" for c in cols) or "session_id = d.session_id"
        self._run(
            f"INSERT INTO {DIRECTORY} AS d (session_id, internal, created_at, updated_at"
            f"{', ' + names if names else ''}) VALUES (?, ?, ?, ?{', ' + marks if marks else ''})"
            f" ON CONFLICT (session_id) DO UPDATE SET {sets}",
            (session_id, int(is_internal(session_id)), now, now, *[values[c] for c in cols]),
        )

    def dir_page(
        self,
        *,
        owner: str | None,
        metadata: Sequence[tuple[str, Any]],
        updated_from: int | None,
        updated_to: int | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[tuple[Any, ...]]:
        """Non-internal rows newest ``updated_at`` first (ties: id descending), strictly after
        the key ``after``, ``updated_from <= updated_at < updated_to``, at most ``limit``."""
        where = ["internal = 0"]
        params: list[Any] = []
        if owner is not None:
            where.append("owner = ?")
            params.append(owner)
        if updated_from is not None:
            where.append("updated_at >= ?")
            params.append(updated_from)
        if updated_to is not None:
            where.append("updated_at < ?")
            params.append(updated_to)
        if after is not None:
            where.append("(updated_at, session_id) < (?, ?)")
            params += [after[0], after[1]]
        for key, value in metadata:
            sql, extra = self._metadata_match(key, value)
            where.append(f"({sql})")
            params += extra
        order = "owner DESC, " if owner is not None else ""  # the index's order: one range
        params.append(limit)
        return self._all(
            f"SELECT {_ENTRY} FROM {DIRECTORY} d WHERE {' AND '.join(where)} "
            f"ORDER BY {order}updated_at DESC, session_id DESC LIMIT ?",
            params,
        )

    def dir_summaries(self) -> list[tuple[str, int, int, int]]:
        """``(session_id, messages, bytes, updated_at)`` of every non-internal session that
        holds messages, by id."""
        return [
            (r[0], int(r[1]), int(r[2]), int(r[3]))
            for r in self._all(
                f"SELECT session_id, {COUNT_SQL} AS n, {BYTES_SQL}, updated_at FROM {DIRECTORY} "
                f"d WHERE internal = 0 AND {COUNT_SQL} > 0 ORDER BY session_id"
            )
        ]

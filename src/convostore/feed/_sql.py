"""The change log's and the compaction leases' SQL, written once for both engines (a mixin).

``convostore_changes`` is the durable change log: one row per logged change, its ``pos``
increasing store-wide, and a reader never moves past a change that may still commit, so a
reader that has seen position ``p`` has been offered every change below it and every change
committed later gets a position above it. How each engine keeps that promise:

- SQLite serialises writers (``BEGIN IMMEDIATE``), so a new row's ``rowid`` (``max + 1``) is
  commit order. Trimming never removes the newest row, so ``max`` never goes back.
- PostgreSQL draws positions from an identity sequence, whose values are handed out before
  commit: two transactions may commit in the other order. Rather than serialise the commits,
  a writer marks each position it drew with an advisory lock held until its commit is
  visible, and a reader stops below the first position still held
  (:mod:`convostore.backends.postgres._writes`).

A write scope collects its rows with :meth:`ChangeLogOps.log_change` and the scope writes them
(:meth:`ChangeLogOps.flush_changes`) just before its ``COMMIT``, after everything else. The
engine supplies :meth:`ChangeLogOps._lock_changes` and :meth:`ChangeLogOps._insert_change`.

Trimming (:meth:`ChangeLogOps.trim_changes`) deletes the oldest rows and records the highest
position deleted in the meta table (``changes_trimmed``), in the same transaction: a cursor
below it has lost changes.

``convostore_compaction_leases`` holds one row per session whose automatic compaction ran:
the holder and its expiry, and the backoff (attempts in a row that left the session above its
threshold, and the time before which no new attempt starts).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from ..backends._schema import CHANGES, COMPACTION_LEASES, META
from ..backends.connection import SqlConnection
from ..backends.rows import ChangeRow, LeaseRow, Position, StoredChange

TRIMMED_KEY = "changes_trimmed"
"""The meta key holding the highest position trimmed from the change log."""

_COLUMNS = "session_id, kind, message_id, parent_id, leaf_id, data, created_at"
CHANGE_INSERT = f"INSERT INTO {CHANGES} ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
"""The statement that logs one change (an engine adds ``RETURNING pos`` if it needs it)."""
CHANGE_INSERT_AT = f"INSERT INTO {CHANGES} (pos, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
"""The same at a position the engine chose (SQLite, several rows at once)."""
CHANGE_HEAD = f"SELECT coalesce(max(pos), 0) FROM {CHANGES}"
"""The newest position written (0 for an empty log)."""


class _Slot:
    """A logged change's position: set when the scope writes the row, read after commit."""

    __slots__ = ("fetch",)

    def __init__(self) -> None:
        self.fetch: Position | None = None

    def __call__(self) -> int:
        if self.fetch is None:
            raise RuntimeError("the change was not written: its write scope did not commit")
        return self.fetch()


class ChangeLogOps(SqlConnection):
    """Change-log and lease operations over the scope's connection; the engine supplies the
    two hooks below."""

    _changes: list[tuple[ChangeRow, _Slot]] | None = None

    # -- engine hooks --------------------------------------------------------------------------

    def _lock_changes(self) -> None:
        """Run once before a scope's rows are written (PostgreSQL: its *draw* lock)."""

    @abstractmethod
    def _insert_change(self, row: ChangeRow) -> Position:
        """Write one row; return how to read its position once the scope committed."""

    def _insert_changes(self, rows: Sequence[ChangeRow]) -> list[Position]:
        """Write several rows, in order (a batch write logs one per message); an engine may
        send them at once."""
        return [self._insert_change(row) for row in rows]

    # -- the write scope's side ----------------------------------------------------------------

    def log_change(self, row: ChangeRow) -> Position:
        """Log ``row`` with this write scope: written by :meth:`flush_changes` before commit.

        Several rows per scope are fine (a batch write logs one per message); their positions
        follow the order they were logged in.
        """
        slot = _Slot()
        if self._changes is None:
            self._changes = []
        self._changes.append((row, slot))
        return slot

    def flush_changes(self) -> None:
        """Write the rows this scope logged, last thing before its ``COMMIT``."""
        pending, self._changes = self._changes, None
        if not pending:
            return
        self._lock_changes()
        if len(pending) == 1:
            row, slot = pending[0]
            slot.fetch = self._insert_change(row)
            return
        for (_, slot), fetch in zip(pending, self._insert_changes([r for r, _ in pending]),
                                    strict=True):
            slot.fetch = fetch

    def discard_changes(self) -> None:
        """Forget rows logged by a scope that did not commit (or before a new scope)."""
        self._changes = None

    # -- reads ---------------------------------------------------------------------------------

    def changes_after(
        self, after: int, limit: int, session_id: str | None
    ) -> list[StoredChange]:
        """The logged changes after position ``after``, oldest first, at most ``limit``."""
        where = "pos > ?" if session_id is None else "pos > ? AND session_id = ?"
        params: tuple[Any, ...] = (after,) if session_id is None else (after, session_id)
        rows = self._all(
            f"SELECT pos, {_COLUMNS} FROM {CHANGES} WHERE {where} ORDER BY pos LIMIT ?",
            (*params, limit),
        )
        return [StoredChange(*r) for r in rows]

    def change_horizon(self) -> int:
        row = self._one(f"SELECT value FROM {META} WHERE key = ?", (TRIMMED_KEY,))
        return int(row[0]) if row else 0

    def change_head(self) -> int:
        """The newest position logged (the trim horizon when the log is empty, else 0)."""
        row = self._one(f"SELECT max(pos) FROM {CHANGES}")
        if row is not None and row[0] is not None:
            return int(row[0])
        return self.change_horizon()

    def change_top(self) -> int:
        """The newest position written and committed (the trim horizon when the log is
        empty): no cursor a reader was given lies beyond it. Unlike :meth:`change_head`, not
        held below a position still committing."""
        row = self._one(f"SELECT max(pos) FROM {CHANGES}")
        if row is not None and row[0] is not None:
            return int(row[0])
        return self.change_horizon()

    # -- trimming ------------------------------------------------------------------------------

    def trim_changes(self, upto: int, limit: int) -> int:
        """Delete the oldest rows with ``pos <= upto``, at most ``limit``; records the highest
        position deleted as the horizon. Returns how many rows went."""
        row = self._one(
            f"SELECT count(*), max(pos) FROM (SELECT pos FROM {CHANGES} WHERE pos <= ? "
            "ORDER BY pos LIMIT ?) t",
            (upto, limit),
        )
        if row is None or not row[0]:
            return 0
        count, top = int(row[0]), int(row[1])
        self._run(f"DELETE FROM {CHANGES} WHERE pos <= ?", (top,))
        self._run(
            f"INSERT INTO {META} (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
            f"value = CASE WHEN CAST({META}.value AS BIGINT) < CAST(excluded.value AS BIGINT) "
            f"THEN excluded.value ELSE {META}.value END",
            (TRIMMED_KEY, str(top)),
        )
        return count

    # -- compaction leases ---------------------------------------------------------------------

    def lease_get(self, session_id: str) -> LeaseRow | None:
        row = self._one(
            f"SELECT holder, expires_at, attempts, retry_at FROM {COMPACTION_LEASES} "
            "WHERE session_id = ?",
            (session_id,),
        )
        return None if row is None else LeaseRow(row[0], int(row[1]), int(row[2]), int(row[3]))

    def lease_put(self, session_id: str, row: LeaseRow) -> None:
        self._run(
            f"INSERT INTO {COMPACTION_LEASES} (session_id, holder, expires_at, attempts, "
            "retry_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
            "holder = excluded.holder, expires_at = excluded.expires_at, "
            "attempts = excluded.attempts, retry_at = excluded.retry_at",
            (session_id, *row),
        )

"""The SQL of a whole-store dump, written once for both engines (a mixin of ``SqlOps``).

A dump (:mod:`convostore.dump`) walks every session in id order and each session's rows in
write order, a bounded window at a time; everything else it reads through the ordinary
operations (``content_rows_by_seq``, ``continuations``, ``compactions``, ``attachment_*``).
Both engines order session ids by their UTF-8 bytes (PostgreSQL's columns are ``COLLATE "C"``),
so a dump lists sessions in the same order on either.

The directory (``convostore_sessions``) is dumped whole, internal rows included, through
``dir_dump_page`` and written back by ``dir_restore``: every column but the session id's
``internal`` flag and the counts (``message_count``, ``bytes``), which the message writes keep.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backends._schema import COMPACTIONS, DIRECTORY, MESSAGES
from ..backends.connection import SqlConnection, _batches, _marks
from ..directory._sql import is_internal

DIR_DUMP_COLUMNS = (
    "title", "owner", "metadata", "created_at", "updated_at", "expires_at", "ttl",
    "active_leaf", "context_of", "managed", "parent_session_id", "model", "source",
    "input_tokens", "output_tokens", "estimated_cost", "end_reason",
)
"""The directory columns a dump carries, in the order ``dir_dump_*`` return them (after the
session id) and ``dir_restore`` takes them."""
_DIR_COLS = ", ".join(DIR_DUMP_COLUMNS)
_DIR_RESTORE = (
    f"INSERT INTO {DIRECTORY} AS d (session_id, internal, {_DIR_COLS}) "
    f"VALUES ({_marks(len(DIR_DUMP_COLUMNS) + 2)}) ON CONFLICT (session_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in DIR_DUMP_COLUMNS)
)


class DumpOps(SqlConnection):
    """Dump reads over the scope's connection."""


    def dump_session_ids(self, after: str | None, limit: int) -> list[str]:
        """Ids of sessions holding messages or compaction records, in byte order, strictly
        after ``after`` (from the first when None), at most ``limit``."""
        where = ""
        params: list[Any] = [limit]
        if after is not None:
            where, params = " WHERE session_id > ?", [after, after, limit]
        sql = (f"SELECT session_id FROM {MESSAGES}{where} UNION "
               f"SELECT session_id FROM {COMPACTIONS}{where} ORDER BY 1 LIMIT ?")
        return [r[0] for r in self._all(sql, params)]

    def dump_row_sizes(
        self, session_id: str, after_seq: int, limit: int
    ) -> list[tuple[int, int, int]]:
        """``(seq, stored bytes, token estimate)`` of the session's rows after ``after_seq``, in
        write order, at most ``limit``; no content is read (a range scan of the seq index)."""
        rows: list[Any] = self._all(
            f"SELECT seq, bytes, token_estimate FROM {MESSAGES} WHERE session_id = ? "
            "AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, after_seq, limit),
        )
        return rows

    def dir_dump_page(self, after: str | None, limit: int) -> list[tuple[Any, ...]]:
        """Directory rows ``(session_id, *DIR_DUMP_COLUMNS)`` in session-id byte order, strictly
        after ``after`` (from the first when None), at most ``limit``; internal rows too."""
        where, params = ("WHERE session_id > ? ", [after, limit]) if after is not None else (
            "", [limit])
        return self._all(f"SELECT session_id, {_DIR_COLS} FROM {DIRECTORY} {where}"
                         "ORDER BY session_id LIMIT ?", params)

    def dir_dump_rows(self, session_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """``session_id -> (*DIR_DUMP_COLUMNS)`` of those of ``session_ids`` with a row."""
        out: dict[str, tuple[Any, ...]] = {}
        for batch in _batches(session_ids):
            for r in self._all(f"SELECT session_id, {_DIR_COLS} FROM {DIRECTORY} WHERE "
                               f"session_id IN ({_marks(len(batch))})", tuple(batch)):
                out[r[0]] = tuple(r[1:])
        return out

    def dir_restore(self, session_id: str, values: Sequence[Any]) -> None:
        """Set the directory row of ``session_id`` to ``values`` (:data:`DIR_DUMP_COLUMNS`
        order), creating it if missing; its counts are left to the message writes."""
        self._run(_DIR_RESTORE, (session_id, int(is_internal(session_id)), *values))

    # -- a restore putting rows back in the dump's order (see Restorer._reorder) ----------------

    def restore_move_to_end(self, session_id: str, id: str) -> None:
        """Make message ``id`` the newest row of its session (unless it is): a restore after
        one that failed puts the rows the dump lists after a missing one back behind it. Its
        ``chained`` is cleared (the row before it is no longer its parent); rebase the totals
        with :meth:`restore_recount` once the rows are in place."""
        top = f"(SELECT max(seq) FROM {MESSAGES} WHERE session_id = ?)"
        self._run(
            f"UPDATE {MESSAGES} SET seq = {top} + 1, chained = 0 "
            f"WHERE session_id = ? AND id = ? AND seq < {top}",
            (session_id, session_id, id, session_id),
        )

    def restore_recount(self, session_id: str) -> None:
        """The directory totals of ``session_id`` rebased on its rows: rows moved by
        :meth:`restore_move_to_end` no longer carry the run of bytes before them."""
        self._run(
            f"UPDATE {DIRECTORY} SET message_count = (SELECT count(*) - COALESCE(max(seq), 0) "
            f"FROM {MESSAGES} WHERE session_id = ?), bytes = (SELECT COALESCE(sum(bytes), 0) "
            f"FROM {MESSAGES} WHERE session_id = ?) - COALESCE((SELECT run_bytes FROM {MESSAGES} "
            "WHERE session_id = ? ORDER BY seq DESC LIMIT 1), 0) WHERE session_id = ?",
            (session_id, session_id, session_id, session_id),
        )

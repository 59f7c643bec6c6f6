"""The SQL of a whole-store dump, written once for both engines (a mixin of ``SqlOps``).

A dump (:mod:`convostore.dump`) walks every session in id order and each session's rows in
write order, a bounded window at a time; everything else it reads through the ordinary
operations (``content_rows_by_seq``, ``continuations``, ``compactions``, ``attachment_*``,
``registry_*``). Both engines order session ids by their UTF-8 bytes (PostgreSQL's columns
are ``COLLATE "C"``), so a dump lists sessions in the same order on either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._schema import COMPACTIONS, MESSAGES


class DumpOps:
    """Dump reads; the engine supplies ``_all`` (see ``SqlOps``)."""

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

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

"""Deleting whole sessions: the directory's deletion and pruning SQL (a mixin of ``SqlOps``).

What :mod:`convostore.directory._life` deletes and prunes: the sessions that belong to others
(``context_of``, recursively), the sessions a prune selects (idle, or past ``expires_at``) and,
inside the deleting transaction, which of them still qualify; then every row of theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backends._schema import (
    ATTACHMENT_REFS,
    COMPACTION_LEASES,
    COMPACTIONS,
    DIRECTORY,
    MESSAGE_CHUNKS,
    MESSAGES,
    SESSION_STATE,
)
from ..backends.connection import SqlConnection, _batches, _marks
from ._sql import COUNT_SQL


class PruneOps(SqlConnection):
    """Session deletion and pruning over the scope's connection."""

    def dir_dependents(self, session_ids: Sequence[str]) -> list[str]:
        """Sessions that belong to any of ``session_ids`` (``context_of``), recursively."""
        found: list[str] = []
        seen = set(session_ids)
        frontier = list(session_ids)
        while frontier:
            nxt: list[str] = []
            for batch in _batches(frontier):
                for (sid,) in self._all(
                    f"SELECT session_id FROM {DIRECTORY} WHERE context_of IN "
                    f"({_marks(len(batch))})",
                    tuple(batch),
                ):
                    if sid not in seen:
                        seen.add(sid)
                        nxt.append(sid)
            found += nxt
            frontier = nxt
        return found

    def dir_sizes(self, session_ids: Sequence[str]) -> dict[str, int]:
        """``message_count`` of those of ``session_ids`` with a directory row."""
        out: dict[str, int] = {}
        for batch in _batches(session_ids):
            out.update(
                (r[0], int(r[1]))
                for r in self._all(
                    f"SELECT session_id, {COUNT_SQL} FROM {DIRECTORY} d WHERE session_id IN "
                    f"({_marks(len(batch))})",
                    tuple(batch),
                )
            )
        return out

    def drop_sessions(self, session_ids: Sequence[str]) -> set[str]:
        """Delete every row of ``session_ids`` from the message, chunk, compaction, reference,
        state and directory tables; returns the payload hashes they referenced (for
        ``collect``). The search index is the caller's (``fts_clear``)."""
        dropped: set[str] = set()
        for batch in _batches(session_ids):
            marks = _marks(len(batch))
            dropped.update(
                r[0]
                for r in self._all(
                    f"SELECT DISTINCT hash FROM {ATTACHMENT_REFS} WHERE session_id IN ({marks})",
                    tuple(batch),
                )
            )
            for table in (ATTACHMENT_REFS, MESSAGE_CHUNKS, MESSAGES, COMPACTIONS, SESSION_STATE,
                          COMPACTION_LEASES, DIRECTORY):
                self._run(f"DELETE FROM {table} WHERE session_id IN ({marks})", tuple(batch))
        return dropped

    def prune_candidates(
        self, *, now: int, idle_before: int | None, owner: str | None, expired: bool,
        after: tuple[int, str] | None, limit: int,
    ) -> list[tuple[str, int, int]]:
        """``(session_id, updated_at, message_count)`` of non-internal sessions to prune, by
        ``(updated_at, session_id)`` ascending after ``after``: idle (``updated_at <
        idle_before``) or, when ``expired``, past their ``expires_at``."""
        cond: list[str] = []
        params: list[Any] = []
        if idle_before is not None:
            cond.append("updated_at < ?")
            params.append(idle_before)
        if expired:
            cond.append("(expires_at IS NOT NULL AND expires_at <= ?)")
            params.append(now)
        if not cond:
            return []
        where = f"internal = 0 AND ({' OR '.join(cond)})"
        if owner is not None:
            where += " AND owner = ?"
            params.append(owner)
        if after is not None:
            where += " AND (updated_at, session_id) > (?, ?)"
            params += [after[0], after[1]]
        params.append(limit)
        return [
            (r[0], int(r[1]), int(r[2]))
            for r in self._all(
                f"SELECT session_id, updated_at, {COUNT_SQL} FROM {DIRECTORY} d WHERE {where} "
                "ORDER BY updated_at, session_id LIMIT ?",
                params,
            )
        ]

    def still_prunable(
        self, session_ids: Sequence[str], *, now: int, idle_before: int | None, expired: bool
    ) -> list[str]:
        """Those of ``session_ids`` that still meet the prune condition (asked again inside
        the deleting transaction: a session written meanwhile is kept)."""
        cond: list[str] = []
        base: list[Any] = []
        if idle_before is not None:
            cond.append("updated_at < ?")
            base.append(idle_before)
        if expired:
            cond.append("(expires_at IS NOT NULL AND expires_at <= ?)")
            base.append(now)
        if not cond:
            return []
        out: list[str] = []
        for batch in _batches(session_ids):
            out += [
                r[0]
                for r in self._all(
                    f"SELECT session_id FROM {DIRECTORY} WHERE session_id IN "
                    f"({_marks(len(batch))}) AND ({' OR '.join(cond)})",
                    (*batch, *base),
                )
            ]
        return out

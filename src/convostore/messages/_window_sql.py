"""The SQL of history reads by seq, written once for both engines (a mixin of ``SqlOps``).

Reads of a session's rows by their write order: the newest rows (newest-first reads, the budgeted
read's sizes), a newest-first read's first window together with its leaf, the unchained rows a
path's runs start at, and windows of rows by seq, cut by their stored bytes. Path walks by parent
links stay in :mod:`._sql`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any, cast

from ..backends._schema import COMPACTIONS, DIRECTORY, MESSAGES
from ..backends.connection import SqlConnection, _batches, _marks
from ..backends.rows import ContentRow, RowSize

_CONTENT = "id, parent_id, seq, content, content_chunks, created_at"  # a ContentRow


def _newest(cols: str, *, bounded: bool) -> str:
    """Columns ``cols`` of a session's rows newest first, ``LIMIT ?``; ``bounded`` adds
    ``seq <= ?``: a range scan of the seq index either way."""
    bound = " AND seq <= ?" if bounded else ""
    return f"SELECT {cols} FROM {MESSAGES} WHERE session_id = ?{bound} ORDER BY seq DESC LIMIT ?"


_RANGE = (
    f"SELECT {_CONTENT} FROM {MESSAGES} WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq"
)
_RANGE_SIZED = (
    f"SELECT {_CONTENT}, bytes FROM {MESSAGES} "
    "WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq"
)
_content_row = partial(tuple.__new__, ContentRow)
"""A ContentRow from a row of the ``_CONTENT`` columns, without a Python call per row."""
# The seq bound of a newest-first read's first window: an explicit leaf's seq (NULL: no such
# leaf, no rows); the active leaf's, i.e. the chosen leaf's when one is chosen (NULL when it is
# gone, as reads of a missing leaf find nothing), else any seq.
_LEAF_SEQ = f"(SELECT seq FROM {MESSAGES} WHERE session_id = ? AND id = ?)"
_ACTIVE_SEQ = (
    f"coalesce((SELECT l.seq FROM {DIRECTORY} d JOIN {MESSAGES} l ON l.session_id = d.session_id "
    "AND l.id = d.active_leaf WHERE d.session_id = ?), "
    f"CASE WHEN EXISTS (SELECT 1 FROM {DIRECTORY} WHERE session_id = ? "
    f"AND active_leaf IS NOT NULL) THEN -1 ELSE {2**62} END)"
)


def _contiguous(seqs: Sequence[int]) -> bool:
    """Are the increasing ``seqs`` consecutive integers (one range scan reads them)?"""
    return len(seqs) > 2 and seqs[-1] - seqs[0] == len(seqs) - 1


class WindowOps(SqlConnection):
    """Reads by seq over the scope's connection."""

    def _by_key(
        self, cols: str, key: str, session_id: str, keys: Sequence[Any]
    ) -> list[tuple[Any, ...]]:
        """Columns ``cols`` of the message rows of ``session_id`` whose ``key`` is in ``keys``.

        An engine may override how the rows are found (PostgreSQL probes the unique index once
        per key, whatever its statistics say), never which rows.
        """
        out: list[tuple[Any, ...]] = []
        for batch in _batches(keys):
            out.extend(
                self._all(
                    f"SELECT {cols} FROM {MESSAGES} WHERE session_id = ? "
                    f"AND {key} IN ({_marks(len(batch))})",
                    (session_id, *batch),
                )
            )
        return out

    def newest_sizes(self, session_id: str, limit: int) -> list[RowSize]:
        """(id, parent_id, seq, stored bytes) of the ``limit`` newest rows, newest first; no
        content is read."""
        rows = self._all(_newest("id, parent_id, seq, bytes", bounded=False), (session_id, limit))
        return cast("list[RowSize]", rows)  # the driver's rows are already these tuples

    def rows_below(
        self, session_id: str, upto: int | None, limit: int, max_bytes: int
    ) -> list[ContentRow]:
        """The ``limit`` rows with the highest seqs at or below ``upto`` (all when None), newest
        first, a range scan of the seq index; only the first rows whose stored bytes add up to
        at most ``max_bytes`` (the first row always)."""
        bounded = upto is not None
        params = (session_id, upto, limit) if bounded else (session_id, limit)
        rows = self._newest_cut(_newest(_CONTENT + ", bytes", bounded=bounded), params, max_bytes)
        return [_content_row(r[:6]) for r in rows]

    def newest_rows(
        self, session_id: str, leaf_id: str | None, limit: int, max_bytes: int
    ) -> tuple[list[ContentRow], bool]:
        """The first window of a newest-first read, in one statement: the ``limit`` rows with
        the highest seqs at or below the leaf (``leaf_id``, else the one ``set_active_leaf``
        chose, else the newest row), newest first, and whether the session has compaction
        records. No rows when the leaf does not exist. Only the first rows whose stored bytes
        add up to at most ``max_bytes`` (the first row always)."""
        if leaf_id:
            bound, params = _LEAF_SEQ, [session_id, leaf_id]
        else:
            bound, params = _ACTIVE_SEQ, [session_id, session_id]
        statement = (
            f"SELECT {_CONTENT}, EXISTS (SELECT 1 FROM {COMPACTIONS} WHERE session_id = ?), "
            f"bytes FROM {MESSAGES} WHERE session_id = ? AND seq <= {bound} "
            "ORDER BY seq DESC LIMIT ?"
        )
        rows = self._newest_cut(statement, (session_id, session_id, *params, limit), max_bytes)
        return [_content_row(r[:6]) for r in rows], bool(rows and rows[0][6])

    def _newest_cut(
        self, sql: str, params: Sequence[Any], max_bytes: int
    ) -> list[tuple[Any, ...]]:
        """The rows of ``sql`` (newest first, stored bytes in a column named ``bytes``, last)
        while their bytes add up to at most ``max_bytes`` (the first row always): cut here, as
        the driver steps through them (an engine whose driver holds whole results in memory
        cuts on the server instead)."""
        out: list[tuple[Any, ...]] = []
        used = 0
        for r in self._run(sql, params):
            used += r[-1]
            if out and used > max_bytes:
                break
            out.append(r)
            if used >= max_bytes:
                break
        return out

    def chain_heads(self, session_id: str, limit: int) -> list[tuple[int, int | None]]:
        """``(seq, the parent's seq)`` of at most ``limit`` of the session's unchained rows (the
        parent's seq None when it has none, or it is not stored), in no order: the rows that
        open the runs of consecutive seqs a path is made of. Found by the partial parent index,
        so a linear session answers with its root alone."""
        return cast("list[tuple[int, int | None]]", self._all(
            f"SELECT m.seq, (SELECT p.seq FROM {MESSAGES} p WHERE p.session_id = m.session_id "
            f"AND p.id = m.parent_id) FROM {MESSAGES} m WHERE m.session_id = ? AND m.chained = 0 "
            "LIMIT ?",
            (session_id, limit),
        ))

    def content_rows_by_seq(
        self, session_id: str, seqs: Sequence[int], max_bytes: int | None = None
    ) -> list[ContentRow]:
        """The rows with these seqs (given strictly increasing, as along a path).

        With ``max_bytes``: in seq order, and only the first rows whose stored bytes add up to
        at most ``max_bytes`` (the first row always), so a read window stays bounded without
        knowing the sizes beforehand; the caller goes on after the last row returned."""
        if max_bytes is None:
            if _contiguous(seqs):
                # A contiguous run (every window of a linear conversation): one range scan.
                return list(map(_content_row, self._all(_RANGE, (session_id, seqs[0], seqs[-1]))))
            return [ContentRow(*r) for r in self._by_key(_CONTENT, "seq", session_id, seqs)]
        return self._sized_rows(session_id, seqs, max_bytes)

    def _sized_rows(
        self, session_id: str, seqs: Sequence[int], max_bytes: int
    ) -> list[ContentRow]:
        """:meth:`content_rows_by_seq` with ``max_bytes``: the cut is made here, row by row,
        as the driver hands them over (an engine whose driver holds whole results in memory
        cuts on the server instead)."""
        rows: Iterable[tuple[Any, ...]]
        if _contiguous(seqs):
            # Stepped one row at a time (a driver that streams fetches nothing past the cut).
            rows = self._run(_RANGE_SIZED, (session_id, seqs[0], seqs[-1]))
        else:
            rows = sorted(self._by_key(_CONTENT + ", bytes", "seq", session_id, seqs),
                          key=lambda r: r[2])
        out: list[ContentRow] = []
        used = 0
        for r in rows:
            used += r[6]
            if out and used > max_bytes:
                break
            out.append(ContentRow(r[0], r[1], r[2], r[3], r[4], r[5]))
            if used >= max_bytes:
                break
        return out

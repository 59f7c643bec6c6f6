"""PostgreSQL's forms of the windowed history reads (a mixin of ``PostgresOps``).

psycopg holds a statement's whole result in memory, so where the shared SQL
(:mod:`convostore.messages._window_sql`) cuts a window by stored bytes while stepping through the
rows, these
statements cut it on the server, over a running total: only the rows kept cross the wire.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...messages._window_sql import _CONTENT, WindowOps, _content_row, _contiguous
from .._schema import MESSAGES
from .._sql import _qualify
from ..rows import ContentRow


class PostgresWindowOps(WindowOps):
    """Window reads cut by bytes on the server (it stands before ``SqlOps`` in the bases of
    ``PostgresOps``, so these forms replace the shared ones)."""

    def _sized_rows(
        self, session_id: str, seqs: Sequence[int], max_bytes: int
    ) -> list[ContentRow]:
        if len(seqs) < 2:
            return super()._sized_rows(session_id, seqs, max_bytes)
        sized = _CONTENT + ", bytes"
        if _contiguous(seqs):
            rows = (f"SELECT {sized} FROM {MESSAGES} WHERE session_id = ? "
                    "AND seq BETWEEN ? AND ?")
            params: tuple[Any, ...] = (session_id, seqs[0], seqs[-1])
        else:
            rows = (f"SELECT {_qualify('m', sized)} FROM unnest(?::bigint[]) AS k(v) CROSS JOIN "
                    f"LATERAL (SELECT {sized} FROM {MESSAGES} WHERE session_id = ? "
                    "AND seq = k.v LIMIT 1) m")
            params = (list(seqs), session_id)
        return list(map(_content_row, self._all(
            f"SELECT {_CONTENT} FROM (SELECT {sized}, sum(bytes) OVER (ORDER BY seq ROWS "
            f"UNBOUNDED PRECEDING) AS total FROM ({rows}) r) w "
            "WHERE total <= ? OR total = bytes ORDER BY seq",
            (*params, max_bytes),
        )))

    def _newest_cut(
        self, sql: str, params: Sequence[Any], max_bytes: int
    ) -> list[tuple[Any, ...]]:
        # The row limit and the
        # byte budget are written into the statement (a few distinct texts): with them as
        # parameters the generic plan of the prepared statement looks costlier than a custom
        # one, and the server would plan the statement again at every execution.
        if not sql.endswith(" LIMIT ?"):
            raise RuntimeError("convostore: a newest-first read no longer ends with LIMIT ?")
        return self._all(
            "SELECT * FROM (SELECT q.*, sum(q.bytes) OVER (ORDER BY q.seq DESC ROWS UNBOUNDED "
            f"PRECEDING) AS total FROM ({sql[:-1]}{int(params[-1])}) q) w "
            f"WHERE total <= {int(max_bytes)} OR total = bytes ORDER BY seq DESC",
            params[:-1],
        )

"""PostgreSQL's forms of the shared reads: statements :class:`~._ops.PostgresOps` sends instead.

- **Index probes per key.** PostgreSQL's planner, given stale statistics (a table that grew since
  it was analysed, or a big session in a table of small ones), may answer ``session_id = ? AND
  key IN (...)`` by scanning the whole session through another index. These forms probe the
  unique index once per key whatever the statistics say: ``LIMIT 1`` keeps the lateral subquery
  from being flattened into a join the planner could hash (:func:`by_key`, :func:`pg_walk`).
- **Windows cut on the server.** psycopg holds a statement's whole result in memory, so where
  the shared SQL (:mod:`convostore.messages._window_sql`) cuts a window by stored bytes while
  stepping through the rows, these statements cut it on the server, over a running total: only
  the rows kept cross the wire (:func:`sized_window`, :func:`newest_cut`).
- **The search table's probe rides along.** A write scope's append and leaf probes also ask
  whether the search table exists until the scope knows (one statement, one round trip, as on
  SQLite): :data:`APPEND_PROBE_FTS`, :data:`LEAF_PROBE_FTS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...messages._window_sql import _CONTENT, _contiguous
from .._schema import DIRECTORY, MESSAGES
from .._sql import _qualify

APPEND_PROBE_FTS = (
    f"SELECT EXISTS (SELECT 1 FROM {MESSAGES} WHERE session_id = ? AND id = ?), "
    f"(SELECT id FROM {MESSAGES} WHERE session_id = ? ORDER BY seq DESC LIMIT 1), "
    f"(SELECT max(seq) FROM {MESSAGES} WHERE session_id = ?), "
    "EXISTS (SELECT 1 FROM pg_class WHERE relname = ? AND relnamespace = "
    "(SELECT oid FROM pg_namespace WHERE nspname = current_schema()))"
)
"""The shared append probe (``SqlOps.append_probe``) with the search table's probe beside it."""
LEAF_PROBE_FTS = (
    f"{APPEND_PROBE_FTS}, (SELECT active_leaf FROM {DIRECTORY} WHERE session_id = ?), "
    f"(SELECT t.run_bytes FROM {MESSAGES} t WHERE t.session_id = ? ORDER BY t.seq DESC LIMIT 1)"
)
"""The same with the leaf probe's chosen leaf and the newest row's ``run_bytes``."""

_JOIN_STEP = (
    f" FROM p JOIN {MESSAGES} m ON m.session_id = ? AND m.id = p.parent_id AND m.seq < p.seq"
)
_LATERAL_STEP = (
    " FROM p CROSS JOIN LATERAL (SELECT id, parent_id, seq, role, bytes, token_estimate"
    f" FROM {MESSAGES} WHERE session_id = ? AND id = p.parent_id AND seq < p.seq LIMIT 1) m"
)


def pg_walk(walk: str) -> str:
    """The shared path walk with its parent step as a per-row index probe."""
    if _JOIN_STEP not in walk:  # the shared SQL changed: update _JOIN_STEP to match
        raise RuntimeError("convostore: SqlOps._WALK no longer has the expected parent join")
    return walk.replace(_JOIN_STEP, _LATERAL_STEP)


def by_key(
    cols: str, key: str, session_id: str, keys: Sequence[Any]
) -> tuple[str, tuple[Any, ...]]:
    """Columns ``cols`` of the session's rows whose ``key`` is in ``keys`` (two or more), one
    unique-index probe per key: the statement and its parameters."""
    array_type = "bigint" if key == "seq" else "text"
    return (
        f"SELECT {_qualify('m', cols)} "
        f"FROM unnest(?::{array_type}[]) AS k(v) CROSS JOIN LATERAL "
        f"(SELECT {cols} FROM {MESSAGES} WHERE session_id = ? AND {key} = k.v LIMIT 1) m",
        (list(keys), session_id),
    )


def sized_window(
    session_id: str, seqs: Sequence[int], max_bytes: int
) -> tuple[str, tuple[Any, ...]]:
    """``content_rows_by_seq`` with ``max_bytes`` (two seqs or more) cut on the server: the
    statement (rows of the ``_CONTENT`` columns, in seq order) and its parameters."""
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
    return (
        f"SELECT {_CONTENT} FROM (SELECT {sized}, sum(bytes) OVER (ORDER BY seq ROWS "
        f"UNBOUNDED PRECEDING) AS total FROM ({rows}) r) w "
        "WHERE total <= ? OR total = bytes ORDER BY seq",
        (*params, max_bytes),
    )


def newest_cut(
    sql: str, params: Sequence[Any], max_bytes: int
) -> tuple[str, Sequence[Any]]:
    """A newest-first read (``sql`` ending in ``LIMIT ?``, ``params`` its parameters) cut to
    ``max_bytes`` on the server: the statement and its parameters."""
    # The row limit and the
    # byte budget are written into the statement (a few distinct texts): with them as
    # parameters the generic plan of the prepared statement looks costlier than a custom
    # one, and the server would plan the statement again at every execution.
    if not sql.endswith(" LIMIT ?"):
        raise RuntimeError("convostore: a newest-first read no longer ends with LIMIT ?")
    return (
        "SELECT * FROM (SELECT q.*, sum(q.bytes) OVER (ORDER BY q.seq DESC ROWS UNBOUNDED "
        f"PRECEDING) AS total FROM ({sql[:-1]}{int(params[-1])}) q) w "
        f"WHERE total <= {int(max_bytes)} OR total = bytes ORDER BY seq DESC",
        params[:-1],
    )

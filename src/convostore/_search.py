"""The full-text index of a store: built on first search by a backfill, then kept by writes.

:class:`SearchIndex` answers whether the index exists (asked until the answer is yes: once it
exists it stays), creates and backfills it on the first search, and runs queries. Writers ask
:meth:`SearchIndex.ready` inside their transaction and index what they write only when it is.
"""

from __future__ import annotations

from typing import Any

from . import _limits, codec
from ._lazy_table import LazyTable
from .backends.base import Backend, Ops
from .model import SearchResult

_BACKFILL_BATCH = 500


class SearchIndex:
    """The search index of one backend: readiness, lazy creation and queries."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._table = LazyTable(backend, lambda ops: ops.fts_exists(), _create)

    def ready(self, ops: Ops) -> bool:
        """Does the index exist? Once it does, it stays: asked until the answer is yes."""
        return self._table.ready(ops)

    def ensure(self) -> None:
        """Create the index and backfill every stored message, unless it exists."""
        self._table.ensure()

    def search(self, query: str, *, limit: int, session_id: str | None) -> list[SearchResult]:
        """Best hits for ``query`` in one session, or across sessions when ``session_id`` is
        None; builds the index first if needed."""
        query = _limits.search_query("query", query)  # NUL, lone surrogates: word separators
        _limits.check_count("limit", limit, negative=True)  # 0 or less: nothing
        self.ensure()
        if limit <= 0 or not query.strip():
            return []
        with self._backend.read() as ops:
            hits = ops.fts_search(query, session_id, limit, session_id is None)
        return [SearchResult(h.id, h.role, h.content, h.created_at, h.session_id) for h in hits]


def _create(ops: Ops) -> None:
    ops.fts_create()
    backfill(ops)


def backfill(ops: Ops) -> None:
    """Index every stored message's text parts, continuation rows included, in bounded batches."""
    after: tuple[str, str] | None = None
    while True:
        batch = ops.scan_rows(after, _BACKFILL_BATCH)
        if not batch:
            return
        by_session: dict[str, list[tuple[Any, str]]] = {}
        for sid, row, role in batch:
            by_session.setdefault(sid, []).append((row, role))
        entries: list[tuple[str, str, str, str]] = []
        for sid, rows in by_session.items():
            texts = {r.id: r.content for r, _ in rows}
            chunked = [r.id for r, _ in rows if r.content_chunks > 0]
            if chunked:
                for mid, _idx, content in ops.continuations(sid, chunked):
                    texts[mid] += content
            for row, role in rows:
                try:
                    value = codec.loads(texts[row.id])
                except ValueError:
                    continue
                if codec.is_valid_stored(value):
                    text = codec.message_text(value)
                    if text:
                        entries.append((sid, row.id, role, text))
        ops.fts_insert(entries)
        last = batch[-1]
        after = (last[0], last[1].id)

"""The full-text index of a store: created in one short step, filled by a resumable backfill.

:class:`SearchIndex` answers whether the index exists (asked until the answer is yes: once it
exists it stays), builds it and runs queries. Building takes bounded steps, so no writer waits
for more than one of them:

1. one short write scope creates the (empty) search table and records a backfill cursor (the
   start) in the engine's meta table. From that commit on, every write indexes the message it
   writes (writers ask :meth:`SearchIndex.ready` inside their transaction);
2. the backfill then indexes the stored messages in key order (session id, message id), a few
   hundred at a time, each step one write scope of the whole store that reads the cursor,
   indexes the next rows as they are *now* and moves the cursor on, in one transaction. Writers
   wait for at most one step; a message written, rewritten or deleted between two steps was
   already indexed (or unindexed) by its own write, and a later step reads its current row, so
   nothing is indexed twice, stale or deleted. A crash loses at most the step in progress: the
   next build resumes from the committed cursor;
3. the last step removes the cursor: the index is complete.

A search before the build is complete finishes the build first (the searcher pays, writers do
not wait); :meth:`SearchIndex.build` does it ahead of time, with progress.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import _limits, codec
from ._lazy_table import LazyTable
from ._rows import reassemble
from .backends.base import Backend, Ops, ScannedRow
from .model import Message, SearchResult

_STEP_ROWS = (10, 100, 1_000)
"""Rows per build step: the fewest, the first, the most. Each step adjusts the next one's size
so that a step takes about :data:`_STEP_SECONDS`."""
_STEP_SECONDS = 0.015
"""The time one build step aims at (writers wait at most about one step)."""
_PAUSE = 1.0
"""After each step the builder pauses for this fraction of the step's time, so writers that
queued behind the step (threads of this process, other processes polling a SQLite lock) get
in before the next one."""

_START = "[]"
"""The cursor of a backfill that has indexed nothing yet."""

Progress = Callable[[int, int], object]
"""``progress(done, total)``: messages indexed so far by this build, and how many it had to
index when it began (messages written during the build are indexed by their writes)."""


class SearchIndex:
    """The search index of one backend: readiness, stepwise creation and queries."""

    def __init__(
        self, backend: Backend, text: Callable[[Message], str] = codec.message_text
    ) -> None:
        """:param text: what the index holds for a message (the store's ``index_text``)."""
        self._backend = backend
        self._text = text
        self._table = LazyTable(backend, lambda ops: ops.fts_exists(), _create)
        self._built = False
        self._lock = threading.RLock()  # a progress callback may search

    def ready(self, ops: Ops) -> bool:
        """Does the index exist (writes must index what they write)? Once it does, it stays:
        asked until the answer is yes."""
        return self._table.ready(ops)

    @property
    def built(self) -> bool:
        """True once this store saw the index complete (no backfill left); no I/O."""
        return self._built

    def steps(self) -> Iterator[tuple[int, int]]:
        """Build the index in bounded steps, yielding ``(done, total)`` after each committed
        one; yields nothing when the index is already complete.

        Each step is one short write scope (see the module docstring); stopping between steps
        is safe: the next build resumes where this one stopped.
        """
        if self._built:
            return
        self._table.ensure()
        with self._backend.read() as ops:
            cursor = ops.fts_cursor()
            if cursor is None:
                self._built = True
                return
            total = ops.fts_backlog(_decode(cursor))
        done, limit = 0, _STEP_ROWS[1]
        while True:
            started = time.perf_counter()
            scanned, finished = self._step(limit)
            elapsed = time.perf_counter() - started
            done += scanned
            if finished:
                self._built = True
                yield done, max(total, done)
                return
            yield done, max(total, done)
            if elapsed < _STEP_SECONDS / 2:
                limit = min(limit * 2, _STEP_ROWS[2])
            elif elapsed > _STEP_SECONDS:
                limit = max(limit // 2, _STEP_ROWS[0])

    def build(self, progress: Progress | None = None) -> int:
        """Build the index unless it is complete (see :meth:`steps`), pausing between steps
        so writers get in; calls ``progress(done, total)`` after each step. Returns how many
        messages this call indexed."""
        done = 0
        with self._lock:  # one builder per store; another caller waits, then finds it built
            last = time.perf_counter()
            for done, total in self.steps():
                if progress is not None:
                    progress(done, total)
                now = time.perf_counter()
                time.sleep((now - last) * _PAUSE)
                last = time.perf_counter()
        return done

    def ensure(self) -> None:
        """Create the index and backfill every stored message, unless it is complete."""
        if not self._built:
            self.build()

    def search(self, query: str, *, limit: int, session_id: str | None) -> list[SearchResult]:
        """Best hits for ``query`` in one session, or across sessions when ``session_id`` is
        None; finishes building the index first if needed."""
        query = _limits.search_query("query", query)  # NUL, lone surrogates: word separators
        _limits.check_count("limit", limit, negative=True)  # 0 or less: nothing
        self.ensure()
        if limit <= 0 or not query.strip():
            return []
        with self._backend.read() as ops:
            hits = ops.fts_search(query, session_id, limit, session_id is None)
        return [SearchResult(h.id, h.role, h.content, h.created_at, h.session_id) for h in hits]

    def _step(self, limit: int) -> tuple[int, bool]:
        """Index the next ``limit`` rows after the cursor in one write scope of the store:
        (rows scanned, whether the backfill is complete)."""
        with self._backend.write(None) as ops:
            cursor = ops.fts_cursor()
            if cursor is None:
                return 0, True  # another builder (thread or process) finished it
            batch = ops.scan_rows(_decode(cursor), limit)
            _index(ops, batch, self._text)
            if len(batch) < limit:
                ops.fts_set_cursor(None)
                return len(batch), True
            last = batch[-1]
            ops.fts_set_cursor(json.dumps([last.session_id, last.row.id]))
            return len(batch), False


def _create(ops: Ops) -> None:
    """Create the empty index and the cursor of its backfill, in one short transaction."""
    ops.fts_create()
    ops.fts_set_cursor(_START)


def _decode(cursor: str) -> tuple[str, str] | None:
    """The (session id, message id) after which the backfill goes on; None: from the start."""
    key = json.loads(cursor)
    return (key[0], key[1]) if key else None


def restart_backfill(ops: Ops) -> None:
    """Have the next build index every stored message again (inside the caller's write
    scope; entries are replaced, never duplicated), e.g. after rows were lifted in bulk."""
    ops.fts_set_cursor(_START)


def _index(ops: Ops, batch: Sequence[ScannedRow], text_of: Callable[[Message], str]) -> None:
    """Index the text of scanned rows (continuation rows joined), replacing entries."""
    by_session: dict[str, list[tuple[Any, str]]] = {}
    for sid, row, role in batch:
        by_session.setdefault(sid, []).append((row, role))
    entries: list[tuple[str, str, str, str]] = []
    for sid, rows in by_session.items():
        texts = reassemble(ops, sid, [r for r, _ in rows])
        for row, role in rows:
            try:
                value = codec.loads(texts[row.id])
            except ValueError:
                continue
            if codec.is_valid_stored(value):
                text = text_of(value)
                if text:
                    entries.append((sid, row.id, role, text))
    if entries:
        ops.fts_insert(entries)

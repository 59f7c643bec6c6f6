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

The index keeps no copy of the text (SQLite: a contentless FTS5 table; PostgreSQL: keys and a
``tsvector``): a hit's text is computed again from its stored message, and an engine that must
name an entry's words to remove it (contentless FTS5) gets them the same way. So what the index
holds for a message is fixed when the index is created, recorded beside it, and followed by
every store that writes to it (:meth:`SearchIndex.text`), whatever its own
``search_tool_output``: a message's entry is always removed with the words it was indexed with.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from .. import codec, limits
from ..backends._lazy_table import LazyTable
from ..backends.base import Backend, Ops
from ..backends.rows import ContentRow, FtsHit, OldTexts, ScannedRow
from ..messages._rows import reassemble
from ..model import Message, SearchResult
from ._text import index_text

logger = logging.getLogger("convostore")

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

_DEFINITIONS = {False: "text", True: "text+tool_output"}
"""What an index holds for a message, as recorded beside it: the text parts, or also the tool
results (``search_tool_output``; see :mod:`convostore.search._text`)."""

Progress = Callable[[int, int], object]
"""``progress(done, total)``: messages indexed so far by this build, and how many it had to
index when it began (messages written during the build are indexed by their writes)."""


class SearchIndex:
    """The search index of one backend: readiness, stepwise creation and queries."""

    def __init__(self, backend: Backend, *, tool_output: bool = False) -> None:
        """:param tool_output: what an index this store creates holds for a message (the
            store's ``search_tool_output``)."""
        self._backend = backend
        self._tool_output = tool_output
        self._held: bool | None = None  # what the existing index holds, once read
        self._table = LazyTable(backend, lambda ops: ops.fts_exists(), self._create)
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
        query = limits.search_query("query", query)  # NUL, lone surrogates: word separators
        limits.check_count("limit", limit, negative=True)  # 0 or less: nothing
        self.ensure()
        if limit <= 0 or not query.strip():
            return []
        with self._backend.read() as ops:
            hits = ops.fts_search(query, session_id, limit, session_id is None)
            texts = self._hit_texts(ops, hits)
        return [
            SearchResult(h.id, h.role, texts[h.session_id, h.id], h.created_at, h.session_id)
            for h in hits if (h.session_id, h.id) in texts
        ]

    # -- keeping the index in step with the writes (inside their write scopes) ----------------

    def text(self, ops: Ops, message: Message) -> str:
        """What the index holds for ``message`` (its stored form): the definition recorded
        when the index was created, read once."""
        if self._held is None:
            recorded = ops.fts_definition()
            held = self._tool_output if recorded is None else recorded == _DEFINITIONS[True]
            if held != self._tool_output:
                logger.warning(
                    "the search index of %s was built with search_tool_output=%s; it keeps "
                    "that definition (this store was opened with %s)",
                    self._backend.url, held, self._tool_output,
                )
            self._held = held
        return index_text(message, tool_output=self._held)

    def add(self, ops: Ops, session_id: str, messages: Sequence[Message]) -> None:
        """Index new messages (their stored forms) if the index exists."""
        if not self.ready(ops):
            return
        entries = []
        for message in messages:
            text = self.text(ops, message)
            if text:
                entries.append((session_id, message["id"], text))
        if entries:
            ops.fts_insert(entries)

    def replace(self, ops: Ops, session_id: str, message: Message, old: str) -> None:
        """Index a rewritten message (its new stored form) in place of its entry for the
        stored text ``old``, if the index exists."""
        if not self.ready(ops):
            return
        mid = message["id"]
        ops.fts_delete(session_id, [mid], lambda ids: self._texts(ops, {mid: old}))
        self.add(ops, session_id, [message])

    def remove(self, ops: Ops, session_id: str, ids: Sequence[str]) -> None:
        """Remove the entries of messages about to be deleted, if the index exists."""
        if self.ready(ops):
            ops.fts_delete(session_id, ids, self._stored_texts(ops, session_id))

    def clear(self, ops: Ops, session_id: str) -> None:
        """Remove the entries of every message of a session about to be emptied, if the index
        exists."""
        if self.ready(ops):
            ops.fts_clear(session_id, self._stored_texts(ops, session_id))

    def _stored_texts(self, ops: Ops, session_id: str) -> OldTexts:
        """The indexed texts of stored messages of ``session_id``, read when asked."""

        def old_texts(ids: Sequence[str]) -> dict[str, str]:
            seqs = sorted(ops.seqs_of(session_id, ids).values())
            rows = ops.content_rows_by_seq(session_id, seqs) if seqs else []
            return self._texts(ops, reassemble(ops, session_id, rows))

        return old_texts

    def _texts(self, ops: Ops, stored: dict[str, str]) -> dict[str, str]:
        """The indexed text of stored message texts by id (unreadable ones left out)."""
        out: dict[str, str] = {}
        for mid, raw in stored.items():
            try:
                value = codec.loads(raw)
            except ValueError:
                continue
            if codec.is_valid_stored(value):
                out[mid] = self.text(ops, value)
        return out

    def _hit_texts(self, ops: Ops, hits: Sequence[FtsHit]) -> dict[tuple[str, str], str]:
        """The text of each hit, computed from its stored message (the index has no copy)."""
        by_session: dict[str, list[ContentRow]] = {}
        for h in hits:
            by_session.setdefault(h.session_id, []).append(
                ContentRow(h.id, None, 0, h.content, h.content_chunks, h.created_at))
        out: dict[tuple[str, str], str] = {}
        for sid, rows in by_session.items():
            for mid, text in self._texts(ops, reassemble(ops, sid, rows)).items():
                out[sid, mid] = text
        return out

    def _step(self, limit: int) -> tuple[int, bool]:
        """Index the next ``limit`` rows after the cursor in one write scope of the store:
        (rows scanned, whether the backfill is complete)."""
        with self._backend.write(None) as ops:
            cursor = ops.fts_cursor()
            if cursor is None:
                return 0, True  # another builder (thread or process) finished it
            batch = ops.scan_rows(_decode(cursor), limit)
            self._index_scanned(ops, batch)
            if len(batch) < limit:
                ops.fts_set_cursor(None)
                return len(batch), True
            last = batch[-1]
            ops.fts_set_cursor(json.dumps([last.session_id, last.row.id]))
            return len(batch), False

    def _index_scanned(self, ops: Ops, batch: Sequence[ScannedRow]) -> None:
        """Index the text of scanned rows (continuation rows joined) that have no entry."""
        by_session: dict[str, list[ContentRow]] = {}
        for sid, row, _role in batch:
            by_session.setdefault(sid, []).append(row)
        entries: list[tuple[str, str, str]] = []
        for sid, rows in by_session.items():
            for mid, text in self._texts(ops, reassemble(ops, sid, rows)).items():
                if text:
                    entries.append((sid, mid, text))
        if entries:
            ops.fts_insert(entries)

    def _create(self, ops: Ops) -> None:
        """Create the empty index, the cursor of its backfill and the record of what it
        holds, in one short transaction."""
        ops.fts_create()
        ops.fts_set_cursor(_START)
        ops.fts_set_definition(_DEFINITIONS[self._tool_output])
        self._held = self._tool_output


def _decode(cursor: str) -> tuple[str, str] | None:
    """The (session id, message id) after which the backfill goes on; None: from the start."""
    key = json.loads(cursor)
    return (key[0], key[1]) if key else None


def restart_backfill(ops: Ops) -> None:
    """Have the next build scan every stored message again (inside the caller's write scope;
    a message that has an entry keeps it), e.g. after rows were lifted in bulk."""
    ops.fts_set_cursor(_START)

"""The read core: every history read of a session, overlays applied, in bounded memory.

Three reads share one shape. A path (root → leaf, as seqs and sizes, no content) is planned
into segments: runs of real rows, and compacted spans that read as one synthetic summary
message. :func:`overlaid` walks the segments (oldest or newest first), emits a summary for each
span and asks the read's own ``run`` for the messages of each row run:

- oldest first (:meth:`History.oldest_first`): runs are read in windows packed by
  :func:`~convostore.messages._windows.pack` (at most :data:`WINDOW_ROWS` rows and
  :data:`WINDOW_BYTES`);
- newest first (:meth:`History.newest_first`): range reads from the leaf down while the chain is
  linear, then, below the newest compacted span, windows of :data:`NEWEST_FIRST_WINDOW` rows;
- budgeted (:meth:`History.recent`): the window's rows are already read; runs come from them.

Batched reads (:meth:`History.batches`) pack the streamed messages with the same ``pack``.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import NamedTuple, TypeVar

from .. import attachments, codec
from ..backends.base import Backend, Ops
from ..backends.rows import CompactionRow, ContentRow, PathArrays, RowMeta
from ..compaction import COMPACTION_PREFIX
from ..model import Message, RecentHistory, RowStat
from ._overlays import Span, plan_overlays, position, synthetic_message
from ._rows import hydrate, hydrate_in_order, in_order, parse
from ._runs import CHAIN_HEADS, Runs, chain_runs
from ._windows import pack

WINDOW_ROWS = 50
"""Most rows one hydration query of an oldest-first read fetches."""
WINDOW_BYTES = 4 * 1024 * 1024
"""Most stored bytes one hydration query fetches (a larger row forms a window alone)."""
NEWEST_FIRST_WINDOW = 8
"""Rows per hydration query once a newest-first read has reached a compacted span."""
FIRST_PAGE_ROWS = 25
"""Rows of a newest-first read's first window: a page of recent messages in one statement
(on a server a round trip costs more than reading a page of rows)."""
FIRST_PAGE_BYTES = 256 * 1024
"""Most stored bytes of that first window (its first row always)."""
LINEAR_PROBE_ROWS = 32
"""Rows a budgeted read sizes by range before it falls back to walking parent links."""

Totals = Callable[[Ops, str], tuple[int, int]]
"""(token estimate, stored bytes) of the path ending at a leaf, given a read scope."""


class Segment(NamedTuple):
    """Path positions ``lo..hi`` (inclusive): a run of rows, or the compacted ``span``."""

    lo: int
    hi: int
    span: Span | None


def segments(length: int, spans: Sequence[Span]) -> list[Segment]:
    """Cut a path of ``length`` rows into row runs and the (sorted, disjoint) ``spans``."""
    out: list[Segment] = []
    i = 0
    for span in spans:
        if span.start > i:
            out.append(Segment(i, span.start - 1, None))
        out.append(Segment(span.start, span.end, span))
        i = span.end + 1
    if i < length:
        out.append(Segment(i, length - 1, None))
    return out


def overlaid(
    parts: Sequence[Segment],
    run: Callable[[int, int], Iterable[Message]],
    *,
    reverse: bool = False,
) -> Iterator[Message]:
    """The one overlay emitter: a summary for each span, ``run(lo, hi)`` for each row run."""
    for segment in reversed(parts) if reverse else parts:
        if segment.span is not None:
            yield synthetic_message(segment.span.record)
        else:
            yield from run(segment.lo, segment.hi)


P = TypeVar("P", PathArrays, Runs)


def plan(
    ops: Ops, session_id: str, path: P, records: Sequence[CompactionRow] | None = None,
) -> tuple[P, list[Span]]:
    """Plan overlays over ``path`` (walked arrays, or runs of seqs), hiding stored copies of
    this session's synthetic summaries (a client may echo one back; it must not show twice).

    :param records: the session's compaction records when the caller read them already."""
    if records is None:
        records = ops.compactions(session_id)
    if not records:
        return path, []
    names = [r.from_message_id for r in records] + [r.to_message_id for r in records]
    echoes = [COMPACTION_PREFIX + r.id for r in records]
    seq_of = ops.seqs_of(session_id, names + echoes)
    hidden = {seq_of[e] for e in echoes if e in seq_of}
    hidden = {s for s in hidden if position(path.seqs, s) >= 0}
    if hidden:
        path = path.without(hidden)
    return path, plan_overlays(path.seqs, records, seq_of)


def _empty_path() -> PathArrays:
    return PathArrays(array("q"), array("q"), array("q"))


class History:
    """The read algorithms of one session over a backend."""

    def __init__(self, backend: Backend, session_id: str, totals: Totals) -> None:
        self._backend = backend
        self._sid = session_id
        self._totals = totals

    def leaf(self, ops: Ops, leaf_id: str | None) -> str | None:
        """``leaf_id`` if it exists (None if not); without one, the active leaf."""
        found = self._leaf(ops, leaf_id)
        return found[0] if found else None

    def _leaf(self, ops: Ops, leaf_id: str | None) -> tuple[str, int] | None:
        """(id, seq) of ``leaf_id`` if it exists; without one, of the active leaf."""
        if leaf_id:
            meta = ops.row_meta(self._sid, leaf_id)
            return None if meta is None else (leaf_id, meta.seq)
        return ops.active_leaf(self._sid)  # the chosen leaf, else the newest row

    def _path(self, ops: Ops, leaf: tuple[str, int]) -> Runs:
        """The path ending at ``leaf`` as runs of seqs: from the unchained rows when they are
        few (no row-by-row walk: a linear conversation is one run), else walked."""
        heads = ops.chain_heads(self._sid, CHAIN_HEADS + 1)
        if len(heads) <= CHAIN_HEADS:
            runs = chain_runs(heads, leaf[1])
            if runs is not None:
                return runs
        return Runs.of(ops.path(self._sid, leaf[0]).seqs)

    def _windows_up(self, path: Runs, lo: int, hi: int) -> Iterator[Message]:
        """Rows ``lo..hi`` oldest first, in windows of at most :data:`WINDOW_ROWS` rows and
        :data:`WINDOW_BYTES` (the read cuts a window where its rows' stored bytes reach it),
        each in its own read scope."""
        sid = self._sid
        while lo <= hi:
            seqs = path[lo : min(hi, lo + WINDOW_ROWS - 1) + 1]
            with self._backend.read() as ops:
                rows = ops.content_rows_by_seq(sid, seqs, WINDOW_BYTES)
                messages = in_order(ops, sid, rows)
            # on after the last row read (rows that vanished since planning are skipped)
            lo += bisect_left(seqs, rows[-1].seq) + 1 if rows else len(seqs)
            del rows
            yield from messages

    def _windows_down(self, path: Runs, lo: int, hi: int) -> Iterator[Message]:
        """Rows ``hi..lo`` newest first, in windows of :data:`NEWEST_FIRST_WINDOW` rows."""
        while hi >= lo:
            low = max(lo, hi - NEWEST_FIRST_WINDOW + 1)
            with self._backend.read() as ops:
                messages = hydrate_in_order(ops, self._sid, path[low : hi + 1])
            yield from reversed(messages)
            hi = low - 1

    # --- streamed reads -----------------------------------------------------------------------

    def oldest_first(self, leaf_id: str | None) -> Iterator[Message]:
        """Root → leaf: the path planned as runs of seqs (content-free), then content in
        windows, each a range read where the path is a run."""
        with self._backend.read() as ops:
            leaf = self._leaf(ops, leaf_id)
            if leaf is None:
                return
            path, spans = plan(ops, self._sid, self._path(ops, leaf))
        yield from overlaid(segments(len(path), spans),
                            partial(self._windows_up, path))

    def newest_first(self, leaf_id: str | None) -> Iterator[Message]:
        """Leaf → root by ranges of seqs: in a linear run each row's parent is the row just
        below it, so one query fetches a whole window; where the chain jumps (a branch), the
        walk looks the parent up and continues from there. The first window is a page
        (:data:`FIRST_PAGE_ROWS` rows, :data:`FIRST_PAGE_BYTES`), read with the leaf in one
        statement; later windows are :data:`WINDOW_ROWS` rows, each cut at
        :data:`WINDOW_BYTES` by the engine: taking k messages beyond the first page reads fewer
        than 3k rows. Below the newest compacted span the rest is planned and emitted like an
        oldest-first read, in reverse."""
        sid = self._sid
        upto: int | None = None
        expect: str | None = None
        records: list[CompactionRow] = []
        ends: set[str] = set()
        echoes: set[str] = set()
        size, limit = FIRST_PAGE_ROWS, FIRST_PAGE_BYTES
        first = True
        while True:
            with self._backend.read() as ops:
                if first:
                    # The leaf (named, chosen or newest) and its first rows in one statement;
                    # the compaction records only when there are some.
                    rows, compacted = ops.newest_rows(sid, leaf_id, size, limit)
                    if compacted:
                        records = ops.compactions(sid)
                        ends = {r.to_message_id for r in records}
                        echoes = {COMPACTION_PREFIX + r.id for r in records}
                    first = False
                else:
                    rows = ops.rows_below(sid, upto, size, limit)
                take: list[ContentRow] = []
                hit: str | None = None
                for row in rows:
                    if expect is not None and row.id != expect:
                        break  # not the parent: the chain jumps here
                    if row.id in ends:
                        hit = row.id
                        break
                    take.append(row)
                    expect = row.parent_id
                    if expect is None:
                        break
                jump: RowMeta | None = None
                if hit is None and expect is not None and (not take or len(take) < len(rows)):
                    jump = ops.row_meta(sid, expect)  # the chain jumps: where does it go on?
                shown = [r for r in take if r.id not in echoes] if echoes else take
                plain = [r.content_chunks == 0 and attachments.POINTER_PREFIX not in r.content
                         for r in shown]  # parsed from its own text: no continuations, no payloads
                # Continuations and payloads are read now, in the snapshot the first slices
                # came from; a later read could see another version of the message.
                assembled = hydrate(ops, sid, [r for r, p in zip(shown, plain, strict=True)
                                               if not p]) if not all(plain) else {}
            for row, is_plain in zip(shown, plain, strict=True):
                if is_plain:
                    message = parse(sid, row.id, row.content)  # when the consumer asks
                else:
                    message = assembled.get(row.id)
                if message is not None:
                    yield message
            if hit is not None:
                # the end of a compacted span: plan overlays over what remains
                with self._backend.read() as ops:
                    path, spans = plan(ops, sid, Runs.of(ops.path(sid, hit).seqs), records)
                yield from overlaid(segments(len(path), spans),
                                    partial(self._windows_down, path),
                                    reverse=True)
                return
            if expect is None:
                return  # reached a root, or an empty session
            if not rows:
                return  # an empty session, or no such leaf
            last_seq = take[-1].seq if take else rows[0].seq
            if jump is not None:
                if jump.seq >= last_seq:
                    return  # a parent written after its child reads as a root, as in walks
                upto = jump.seq
            elif take:
                # Every row read was taken (a short window: cut by bytes, or the session's
                # oldest rows): the parent is the row just below, if it is there at all.
                upto = take[-1].seq - 1
            else:
                return  # the parent does not exist: the row reads as a root
            size, limit = WINDOW_ROWS, WINDOW_BYTES  # past the first page, full windows

    def batches(
        self, batch_size: int, max_batch_bytes: int, leaf_id: str | None, newest_first: bool
    ) -> Iterator[list[Message]]:
        """The streamed read packed into lists by count and by compact-JSON bytes."""
        rows, limit = max(1, int(batch_size)), max(1, int(max_batch_bytes))
        stream = self.newest_first(leaf_id) if newest_first else self.oldest_first(leaf_id)
        yield from pack(stream, codec.stored_size, rows, limit)

    # --- budgeted read ------------------------------------------------------------------------

    def recent(self, budget: int, leaf_id: str | None) -> RecentHistory:
        """The longest suffix of the path whose stored bytes fit ``budget`` (at least one)."""
        sid = self._sid
        with self._backend.read() as ops:
            # One statement walks only the window (content included); the path's total comes
            # from the memoised totals, so nothing older than the window is read.
            if not leaf_id:
                leaf_id = ops.chosen_leaf(sid)  # set_active_leaf's choice, if any
            found = None if leaf_id else self._linear_suffix(ops, budget)
            if found is None:  # a branch or an explicit leaf: walk parent links
                found = ops.suffix(sid, leaf_id or None, budget)
            leaf, window, beyond, rows = found
            if leaf is None:
                return RecentHistory([], False, 0)
            total = self._totals(ops, leaf)[1]
            window, spans = plan(ops, sid, window)
            covered = {i for s in spans for i in range(s.start, s.end + 1)}
            wanted = {window.seqs[i] for i in range(len(window)) if i not in covered}
            kept = [r for r in rows if r.seq in wanted]
            hydrated = hydrate(ops, sid, kept)
        id_at = {r.seq: r.id for r in kept}

        def run(lo: int, hi: int) -> Iterator[Message]:
            for seq in window.seqs[lo : hi + 1]:
                mid = id_at.get(seq)
                if mid is not None and mid in hydrated:
                    yield hydrated[mid]

        messages = list(overlaid(segments(len(window), spans), run))
        return RecentHistory(messages, beyond is not None, total)

    def _linear_suffix(
        self, ops: Ops, budget: int
    ) -> tuple[str | None, PathArrays, str | None, list[ContentRow]] | None:
        """The active leaf's budget window by range reads, when the newest rows form a chain
        (each row's parent the row just below it); None when they do not.

        The sizes come first, without content, so only the window's content is read."""
        sized = ops.newest_sizes(self._sid, LINEAR_PROBE_ROWS)
        if not sized:
            return None, _empty_path(), None, []
        window = _empty_path()
        used = 0
        beyond: str | None = None
        for i, (mid, _parent, seq, size) in enumerate(sized):
            if i and sized[i - 1][1] != mid:
                return None  # the chain jumps: not a linear run
            if i and used + size > budget:
                beyond = mid
                break
            used += size
            window.seqs.append(seq)
            window.bytes.append(size)
            window.tokens.append(0)
        else:
            if sized[-1][1] is not None:
                return None  # the window may go on below what was read: let the walk decide
        window.seqs.reverse()
        window.bytes.reverse()
        rows = ops.content_rows_by_seq(self._sid, list(window.seqs))
        return sized[0][0], window, beyond, rows

    # --- sizes without content ----------------------------------------------------------------

    def row_stats(self, leaf_id: str | None) -> list[RowStat]:
        """Per-row stored bytes and stamped token estimates of the raw path."""
        with self._backend.read() as ops:
            leaf = self.leaf(ops, leaf_id)
            if leaf is None:
                return []
            return [
                RowStat(r.id, r.role, r.bytes, r.token_estimate)
                for r in ops.path_rows(self._sid, leaf)
            ]

"""Session: one conversation's behaviour, written once over any backend.

Everything a reader of behaviour.md §2–§9 looks for lives here: the write pipeline (validate,
sanitise, strip, extract media, slice, one transaction), parent resolution, splicing deletes,
streamed and budgeted reads with compaction overlays, compaction, the token estimate and search.
The backend only runs SQL.
"""

from __future__ import annotations

import asyncio
import bisect
import inspect
import logging
import math
import threading
import time
import uuid
from array import array
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NamedTuple

from . import codec
from ._overlays import Span, plan_overlays, position, synthetic_message
from ._windows import pack
from .backends.base import CompactionRow, ContentRow, NewRow, Ops, PathArrays, RowMeta
from .compaction import COMPACTION_PREFIX, CompactionFunction, coerce_compact_result
from .errors import NoCompactionFunction
from .model import (
    UNSET,
    AppendResult,
    ChangeEvent,
    CompactResult,
    Message,
    RecentHistory,
    RowStat,
    SearchResult,
    StoredCompaction,
)
from .tokens import estimate_row_tokens, estimate_string_tokens

if TYPE_CHECKING:
    from .store import Sessions

logger = logging.getLogger("convostore")

WINDOW_ROWS = 50
"""Most rows one hydration query of an oldest-first read fetches."""
WINDOW_BYTES = 4 * 1024 * 1024
"""Most stored bytes one hydration query fetches (a larger row forms a window alone)."""
NEWEST_FIRST_WINDOW = 8
"""Rows per hydration query once a newest-first read has reached a compacted span."""
_MEMO_WALK_LIMIT = 256
_LINEAR_PROBE_ROWS = 32  # rows a budgeted read fetches by range before walking parent links


def now_ms() -> int:
    """The wall clock in epoch milliseconds."""
    return int(time.time() * 1000)


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds (``2026-01-02T03:05:00.000Z``)."""
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _stored_compaction(row: CompactionRow) -> StoredCompaction:
    return StoredCompaction(
        id=row.id,
        summary=row.summary,
        from_message_id=row.from_message_id,
        to_message_id=row.to_message_id,
        created_at=iso_ms(row.created_at),
    )


class _Prepared(NamedTuple):  # a tuple: built on every write, cheaper than a frozen dataclass
    message: Message  # the prepared message, inline form: what reads return
    slices: list[str]
    content_bytes: int
    payloads: list[codec.Payload]
    hashes: list[str]
    estimate: int


@dataclass(frozen=True)
class _Memo:
    leaf_id: str
    epoch: int
    estimate: int
    total_bytes: int
    watch: frozenset[str]  # ids named by compaction records: a path gaining one needs a replan


class Session:
    """A handle on one conversation of a :class:`~convostore.Sessions` store.

    Get one with ``store.session(session_id)``; handles are cached per id, so configuration set
    with :meth:`on_compaction` and :meth:`compact_after` stays with the id. Every method is safe
    to call from several threads; several processes may write one session at once.
    """

    def __init__(self, store: Sessions, session_id: str) -> None:
        self._store = store
        self.session_id = session_id
        """The session's id (``""`` is the default session)."""
        self._compact_fn: CompactionFunction | None = None
        self._threshold: int | None = None
        self._extra_tokens: Callable[[], int] | None = None
        self._on_error: Callable[[BaseException], object] | None = None
        self._memo: _Memo | None = None
        self._memo_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<Session {self.session_id!r} of {self._store!r}>"

    # --- configuration ------------------------------------------------------------------------

    def on_compaction(self, fn: CompactionFunction) -> Session:
        """Register the function :meth:`compact` calls; returns the handle (chainable).

        ``fn(messages)`` receives the overlaid history and returns a
        :class:`~convostore.CompactResult`, a mapping with ``from_message_id``,
        ``to_message_id`` and ``summary``, or ``None``. It may be async.
        """
        if not callable(fn):
            raise TypeError(f"on_compaction() needs a callable, got {type(fn).__name__}")
        self._compact_fn = fn
        return self

    def compact_after(
        self, threshold: int | None, *, extra_tokens: Callable[[], int] | None = None
    ) -> Session:
        """Compact automatically once the session estimate is strictly above ``threshold`` tokens.

        Checked only after an append that inserted a row; ``None`` turns it off. Chainable.

        :param extra_tokens: called at each check and added to the estimate, for what the model
            sees besides the history (a system prompt and context blocks: see
            :mod:`convostore.context`). It must not do I/O; a non-finite result counts as 0.
        """
        if threshold is not None and (
            isinstance(threshold, bool) or not isinstance(threshold, (int, float))
        ):
            raise TypeError(f"compact_after() needs a number, got {type(threshold).__name__}")
        if threshold is not None and threshold < 0:
            raise ValueError("compact_after() threshold must not be negative")
        self._threshold = None if threshold is None else int(threshold)
        self._extra_tokens = extra_tokens
        return self

    def on_compaction_error(self, handler: Callable[[BaseException], object] | None) -> Session:
        """Call ``handler(exc)`` when a compaction function raises (errors are never re-raised)."""
        self._on_error = handler
        return self

    # --- plumbing -----------------------------------------------------------------------------

    def _emit(self, event: ChangeEvent) -> None:
        self._store._emit(event)

    def _listened(self) -> bool:
        return bool(self._store._listeners)

    def _prepare(self, message: Message, source: str, *, sanitize: bool = True) -> _Prepared:
        if sanitize:
            if source not in ("server", "client"):
                raise ValueError(f"source must be 'server' or 'client', not {source!r}")
            message = codec.sanitize_message(message)
            if source == "client":
                message = codec.strip_reserved_metadata(message, self._store.reserved_metadata_keys)
        text, encoded = codec.dumps_message(message)
        payloads: list[codec.Payload] = []
        hashes: list[str] = []
        if codec.may_carry_media(text):
            stored, payloads, hashes = codec.extract_attachments(message)
            if stored is not message:
                text = codec.dumps(stored)
                encoded = {}  # the estimate counts media inline, not the stored pointers
        slices = codec.split_content(text)
        return _Prepared(
            message=message,
            slices=slices,
            content_bytes=codec.utf8_len(text),
            payloads=payloads,
            hashes=hashes,
            estimate=estimate_row_tokens(message, self._store.token_counter, encoded),
        )

    def _stored_bytes(self, ops: Ops, prep: _Prepared) -> int:
        if not prep.hashes:
            return prep.content_bytes
        sizes = {p.hash: len(p.data) for p in prep.payloads}
        missing = [h for h in prep.hashes if h not in sizes]
        if missing:
            sizes.update({h: size for h, (_t, size) in ops.attachment_meta(missing).items()})
        return prep.content_bytes + sum(
            codec.base64_len(sizes[h]) for h in prep.hashes if h in sizes
        )

    def _index(self, ops: Ops, message: Message, *, replace: bool) -> None:
        """Keep the full-text index (if one exists) in step with a written message."""
        if not self._store._fts_ready(ops):
            return
        mid = message["id"]
        if replace:
            ops.fts_delete(self.session_id, [mid])
        text = codec.message_text(message)
        if text:
            ops.fts_insert([(self.session_id, mid, message["role"], text)])

    def _insert(
        self, prep: _Prepared, parent_id: Any, created_at: int, *, verbatim: bool
    ) -> str | None | bool:
        """Insert a new row; returns its resolved parent, or False if the id already existed."""
        sid, msg = self.session_id, prep.message
        with self._store._backend.write(sid) as ops:
            exists, tail_id, max_seq = ops.append_probe(sid, msg["id"])
            if exists:
                return False
            seq = max_seq + 1
            parent: str | None
            if verbatim:
                parent = parent_id
            elif parent_id is UNSET:
                parent = tail_id
            elif not parent_id:
                parent = None
            else:
                parent = parent_id if ops.row_meta(sid, parent_id) is not None else None
            for p in prep.payloads:
                ops.store_payload(p.hash, p.data, p.media_type)
            ops.insert_message(
                NewRow(  # positional: this runs on every append
                    sid, msg["id"], seq, parent, msg["role"], prep.slices[0],
                    len(prep.slices) - 1, prep.estimate, created_at,
                    self._stored_bytes(ops, prep), parent is not None and parent == tail_id,
                )
            )
            if len(prep.slices) > 1:
                ops.put_continuations(sid, msg["id"], prep.slices[1:])
            if prep.hashes:
                ops.add_refs(sid, msg["id"], prep.hashes)
            self._index(ops, msg, replace=False)
            if verbatim:
                ops.bump_epoch(sid)
            return parent

    # --- writes -------------------------------------------------------------------------------

    def append_message(
        self, message: Message, parent_id: str | None = UNSET, *, source: str = "server"
    ) -> AppendResult:
        """Store a message under ``parent_id``; idempotent on the message id.

        :param message: a UIMessage-shaped dict; a missing ``id`` is generated.
        :param parent_id: omitted → the active leaf; ``None`` → a new root; an id → a branch
            under it (an id unknown in this session also makes a new root).
        :param source: ``"client"`` for untrusted input: reserved metadata keys are removed.
        :returns: ``inserted`` False and the stored message when the id already existed.

        One transaction; no transcript read. The new row becomes the active leaf. A message whose
        id starts with ``compaction_`` (an overlay echoed back by a client) is not stored.
        """
        msg = codec.validate_message(message)
        if msg["id"].startswith(COMPACTION_PREFIX):
            return AppendResult(False, msg)
        prep = self._prepare(msg, source)
        parent = self._insert(prep, parent_id, now_ms(), verbatim=False)
        if parent is False:
            stored = self.get_message(msg["id"])
            result = AppendResult(False, stored if stored is not None else prep.message)
            self._emit(
                ChangeEvent("append", self.session_id, message=result.message,
                            parent_id=None if parent_id is UNSET else parent_id,
                            inserted=False)
            )
            return result
        if self._listened():  # no event object is built when nobody listens
            self._emit(
                ChangeEvent("append", self.session_id, message=prep.message,
                            parent_id=None if parent_id is UNSET else parent_id,
                            inserted=True)
            )
        self._after_insert()
        return AppendResult(True, prep.message)

    def update_message(self, message: Message, *, source: str = "server") -> Message | None:
        """Replace a stored message's content (never its parent, order or timestamp).

        :returns: the stored form, or ``None`` when the id is not in this session (nothing is
            written). A message equal to the stored one writes nothing and emits no event.
        """
        msg = codec.validate_message(message)
        if msg["id"].startswith(COMPACTION_PREFIX):
            return None
        prep = self._prepare(msg, source)
        result = self._rewrite(prep)
        if result is None:
            return None
        if result:
            self._emit(ChangeEvent("update", self.session_id, message=prep.message))
        return prep.message

    def _rewrite(self, prep: _Prepared) -> bool | None:
        """Write ``prep`` over its stored row.

        None if absent, False if unchanged, True if written.
        """
        sid, msg = self.session_id, prep.message
        mid = msg["id"]
        with self._store._backend.write(sid) as ops:
            meta = ops.row_meta(sid, mid)
            if meta is None:
                return None
            rows = ops.content_rows_by_seq(sid, [meta.seq])
            old = self._reassemble(ops, rows).get(mid)
            if old == "".join(prep.slices):
                return False
            for p in prep.payloads:
                ops.store_payload(p.hash, p.data, p.media_type)
            chunks = len(prep.slices) - 1
            new_bytes = self._stored_bytes(ops, prep)
            ops.update_message(
                sid, mid, msg["role"], prep.slices[0], chunks, prep.estimate, new_bytes
            )
            if meta.content_chunks > chunks:
                ops.delete_continuations_from(sid, mid, chunks + 1)
            if chunks:
                ops.put_continuations(sid, mid, prep.slices[1:])
            held = ops.refs_of(sid, mid)
            wanted = set(prep.hashes)
            if wanted - held:
                ops.add_refs(sid, mid, [h for h in prep.hashes if h not in held])
            if held - wanted:
                ops.drop_refs(sid, mid, held - wanted)
                ops.collect(held - wanted)
            self._index(ops, msg, replace=True)
            if meta.token_estimate != prep.estimate or meta.bytes != new_bytes:
                ops.bump_epoch(sid)
            return True

    def upsert_message(
        self, message: Message, parent_id: str | None = UNSET, *, source: str = "server"
    ) -> AppendResult:
        """Append the message if its id is new, else update it in place (never moving it)."""
        msg = codec.validate_message(message)
        if msg["id"].startswith(COMPACTION_PREFIX):
            return AppendResult(False, msg)
        with self._store._backend.read() as ops:
            exists = ops.row_meta(self.session_id, msg["id"]) is not None
        if not exists:
            result = self.append_message(msg, parent_id, source=source)
            if result.inserted:
                return result
        stored = self.update_message(msg, source=source)
        return AppendResult(False, stored if stored is not None else msg)

    def import_message(
        self,
        message: Message,
        *,
        parent_id: str | None = None,
        created_at: int | None = None,
    ) -> AppendResult:
        """Store a historical message verbatim: no sanitising, the given parent and timestamp.

        :param parent_id: stored as given, not checked (an unknown parent reads as a root).
        :param created_at: epoch milliseconds; defaults to now.

        Idempotent on the id (a duplicate writes nothing and emits nothing). Media is still
        moved out of the row and long messages still use continuation rows.
        """
        msg = codec.validate_message(message)
        if parent_id is not None and not isinstance(parent_id, str):
            raise TypeError(f"parent_id must be a string or None, not {type(parent_id).__name__}")
        if created_at is None:
            created_at = now_ms()
        elif isinstance(created_at, bool) or not isinstance(created_at, (int, float)):
            raise TypeError(f"created_at must be epoch milliseconds, not {created_at!r}")
        prep = self._prepare(msg, "server", sanitize=False)
        parent = self._insert(prep, parent_id, int(created_at), verbatim=True)
        if parent is False:
            stored = self.get_message(msg["id"])
            return AppendResult(False, stored if stored is not None else msg)
        self._emit(ChangeEvent("import", self.session_id, message=msg, parent_id=parent_id))
        return AppendResult(True, msg)

    def delete_messages(self, ids: Sequence[str]) -> None:
        """Delete messages; each surviving child is re-attached to its nearest kept ancestor.

        One transaction: rows, continuation rows, attachment references (payloads left
        unreferenced are collected) and index entries. Compaction records are kept.
        """
        if isinstance(ids, str):
            raise TypeError("delete_messages() takes a list of ids, not a single string")
        id_list = list(ids)
        for i in id_list:
            if not isinstance(i, str):
                raise TypeError(f"message ids must be strings, got {type(i).__name__}")
        unique = list(dict.fromkeys(id_list))
        sid = self.session_id
        if unique:
            doomed = set(unique)
            with self._store._backend.write(sid) as ops:
                parents = ops.parents(sid, unique)
                if parents:
                    present = list(parents)
                    for child, parent in ops.children_of(sid, present):
                        if child in doomed:
                            continue
                        new_parent: str | None = parent
                        depth = 0
                        while new_parent in doomed and depth < 10_000:
                            new_parent = parents.get(new_parent)
                            depth += 1
                        ops.set_parent(sid, child, new_parent)
                    if self._store._fts_ready(ops):
                        ops.fts_delete(sid, present)
                    dropped = ops.drop_message_refs(sid, present)
                    ops.delete_messages(sid, present)
                    ops.collect(dropped)
                    ops.bump_epoch(sid)
        self._emit(ChangeEvent("delete", sid, message_ids=id_list))

    def clear_messages(self) -> None:
        """Delete every message, continuation, compaction and reference of this session only."""
        sid = self.session_id
        with self._store._backend.write(sid) as ops:
            if self._store._fts_ready(ops):
                ops.fts_clear(sid)
            dropped = ops.drop_session_refs(sid)
            ops.clear_session(sid)
            ops.collect(dropped)
            ops.bump_epoch(sid)
        self._emit(ChangeEvent("clear", sid))

    # --- reading rows -------------------------------------------------------------------------

    def _reassemble(self, ops: Ops, rows: Sequence[ContentRow]) -> dict[str, str]:
        texts = {r.id: r.content for r in rows}
        chunked = [r.id for r in rows if r.content_chunks > 0]
        if chunked:
            extra: dict[str, list[str]] = {}
            for mid, _idx, content in ops.continuations(self.session_id, chunked):
                extra.setdefault(mid, []).append(content)
            for mid, pieces in extra.items():
                texts[mid] = texts[mid] + "".join(pieces)
        return texts

    def _hydrate(self, ops: Ops, rows: Sequence[ContentRow]) -> dict[str, Message]:
        """Parse rows into messages (payloads put back); unreadable rows are left out."""
        out: dict[str, Message] = {}
        pending: list[tuple[str, Message, list[str]]] = []
        for mid, text in self._reassemble(ops, rows).items():
            value = self._parse(mid, text)
            if value is None:
                continue
            if codec.POINTER_PREFIX in text:
                pending.append((mid, value, codec.pointer_hashes(value)))
            out[mid] = value
        if pending:
            wanted = list(dict.fromkeys(h for _m, _v, hs in pending for h in hs))
            meta = ops.attachment_meta(wanted)
            data = ops.attachment_data([h for h in wanted if h in meta])
            lookup = {h: (meta[h][0], data[h]) for h in meta}
            for mid, value, _hs in pending:
                out[mid] = codec.resolve_attachments(value, lookup)
        return out

    def _parse(self, mid: str, text: str) -> Message | None:
        """A stored text as a message (payload pointers left in); None, logged, if unreadable."""
        try:
            value = codec.loads(text)
        except ValueError:
            logger.warning("skipping unreadable message %r of session %r", mid, self.session_id)
            return None
        return value if codec.is_valid_stored(value) else None

    @staticmethod
    def _self_contained(row: ContentRow) -> bool:
        """Can the row be parsed from its own text (no continuation rows, no payloads)?"""
        return row.content_chunks == 0 and codec.POINTER_PREFIX not in row.content

    def get_message(self, id: str) -> Message | None:
        """One stored message by id (no overlays), payloads inlined.

        None when absent or unreadable.
        """
        with self._store._backend.read() as ops:
            meta = ops.row_meta(self.session_id, id)
            if meta is None:
                return None
            rows = ops.content_rows_by_seq(self.session_id, [meta.seq])
            return self._hydrate(ops, rows).get(id)

    def get_latest_leaf(self) -> Message | None:
        """The active leaf: the most recently written message, or None for an empty session."""
        with self._store._backend.read() as ops:
            tail = ops.tail(self.session_id)
            if tail is None:
                return None
            rows = ops.content_rows_by_seq(self.session_id, [tail[1]])
            return self._hydrate(ops, rows).get(tail[0])

    def get_branches(self, message_id: str) -> list[Message]:
        """The children of ``message_id`` in write order (no overlays)."""
        with self._store._backend.read() as ops:
            rows = ops.children(self.session_id, message_id)
            hydrated = self._hydrate(ops, rows)
        return [hydrated[r.id] for r in rows if r.id in hydrated]

    def get_roots(self) -> list[Message]:
        """The messages that start a tree in this session, in write order (no overlays).

        With :meth:`get_branches`, enough to walk every message of the session.
        """
        with self._store._backend.read() as ops:
            rows = ops.roots(self.session_id)
            hydrated = self._hydrate(ops, rows)
        return [hydrated[r.id] for r in rows if r.id in hydrated]

    # --- paths and overlays -------------------------------------------------------------------

    def _leaf(self, ops: Ops, leaf_id: str | None) -> str | None:
        if leaf_id:
            return leaf_id if ops.row_meta(self.session_id, leaf_id) is not None else None
        tail = ops.tail(self.session_id)
        return tail[0] if tail else None

    def _plan(
        self, ops: Ops, path: PathArrays
    ) -> tuple[PathArrays, list[Span]]:
        """Plan overlays over ``path``, hiding stored copies of this session's overlays (#1984)."""
        records = ops.compactions(self.session_id)
        if not records:
            return path, []
        names = [r.from_message_id for r in records] + [r.to_message_id for r in records]
        echoes = [COMPACTION_PREFIX + r.id for r in records]
        seq_of = ops.seqs_of(self.session_id, names + echoes)
        hidden = {seq_of[e] for e in echoes if e in seq_of}
        hidden = {s for s in hidden if position(path.seqs, s) >= 0}
        if hidden:
            kept = [i for i, s in enumerate(path.seqs) if s not in hidden]
            path = PathArrays(
                type(path.seqs)("q", (path.seqs[i] for i in kept)),
                type(path.bytes)("q", (path.bytes[i] for i in kept)),
                type(path.tokens)("q", (path.tokens[i] for i in kept)),
            )
        return path, plan_overlays(path.seqs, records, seq_of)

    def _stream(
        self, path: PathArrays, spans: list[Span], start: int = 0
    ) -> Iterator[Message]:
        """Yield path[start:] oldest first, spans as synthetic messages, rows in bounded windows."""
        i, n = start, len(path)
        span_at = {s.start: s for s in spans if s.start >= start}
        starts = sorted(span_at)
        while i < n:
            span = span_at.get(i)
            if span is not None:
                yield synthetic_message(span.record)
                i = span.end + 1
                continue
            after = bisect.bisect_right(starts, i)
            stop = starts[after] if after < len(starts) else n  # the rows up to the next span
            for positions in pack(range(i, stop), path.bytes.__getitem__, WINDOW_ROWS,
                                  WINDOW_BYTES):
                window = [path.seqs[k] for k in positions]
                with self._store._backend.read() as ops:
                    rows = ops.content_rows_by_seq(self.session_id, window)
                    by_seq = {r.seq: r.id for r in rows}
                    hydrated = self._hydrate(ops, rows)
                del rows
                for seq in window:
                    mid = by_seq.get(seq)
                    if mid is not None and mid in hydrated:
                        yield hydrated.pop(mid)
            i = stop

    def history(
        self, *, leaf_id: str | None = None, newest_first: bool = False
    ) -> Iterator[Message]:
        """Stream the path root → leaf (or leaf → root), overlays applied, in bounded memory.

        :param leaf_id: the branch to read; ``None`` → the active leaf; an unknown id → nothing.
        :param newest_first: walk from the leaf by ranges of rows that grow 1, 5, 15, 45, 50, so
            taking k messages reads fewer than 3k rows; the output is the exact reverse of the
            oldest-first read.

        Oldest first: one content-free walk of the path (seqs and sizes only), then content in
        windows of at most 50 rows and 4 MiB; earlier windows are not kept.
        """
        if newest_first:
            return self._newest_first(leaf_id)
        return self._oldest_first(leaf_id)

    def _oldest_first(self, leaf_id: str | None) -> Iterator[Message]:
        with self._store._backend.read() as ops:
            leaf = self._leaf(ops, leaf_id)
            if leaf is None:
                return
            path, spans = self._plan(ops, ops.path(self.session_id, leaf))
        yield from self._stream(path, spans)

    def _newest_first(self, leaf_id: str | None) -> Iterator[Message]:
        """Leaf → root by ranges of seqs: in a linear run each row's parent is the row just
        below it, so one query fetches a whole window; where the chain jumps (a branch), the
        walk looks the parent up and continues from there. Windows grow 1, 5, 15, 45, 50 rows
        (fewer when rows are large): the newest 20 messages take three queries, and taking k
        messages reads fewer than 3k rows."""
        sid = self.session_id
        with self._store._backend.read() as ops:
            records = ops.compactions(sid)
            upto: int | None = None
            expect: str | None = None
            if leaf_id:
                meta = ops.row_meta(sid, leaf_id)
                if meta is None:
                    return
                upto, expect = meta.seq, leaf_id
        ends = {r.to_message_id for r in records}
        echoes = {COMPACTION_PREFIX + r.id for r in records}
        size = 1
        while True:
            with self._store._backend.read() as ops:
                rows = ops.rows_below(sid, upto, size)
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
                if hit is None and expect is not None and (not take or len(take) < len(rows)
                                                           or len(rows) < size):
                    jump = ops.row_meta(sid, expect)
                # Continuations and payloads are read now, in the snapshot the first slices
                # came from; a later read could see another version of the message.
                assembled = self._hydrate(
                    ops, [r for r in take if r.id not in echoes and not self._self_contained(r)]
                )
            for row in take:
                if row.id in echoes:
                    continue
                if self._self_contained(row):
                    message = self._parse(row.id, row.content)  # when the consumer asks
                else:
                    message = assembled.get(row.id)
                if message is not None:
                    yield message
            if hit is not None:
                # the end of a compacted span: plan overlays over what remains
                yield from self._newest_first_prefix(hit)
                return
            if expect is None:
                return  # reached a root, or an empty session
            last_seq = take[-1].seq if take else upto
            assert last_seq is not None  # a row was taken, or the walk began at a named leaf
            if jump is not None:
                if jump.seq >= last_seq:
                    return  # a parent written after its child reads as a root, as in walks
                upto = jump.seq
            elif take and len(take) == len(rows) == size:
                upto = take[-1].seq - 1
            else:
                return  # the parent does not exist: the row reads as a root
            used = sum(len(r.content) for r in take) + 1
            grown = 5 if size == 1 else size * 3
            size = max(1, min(grown, WINDOW_ROWS, WINDOW_BYTES * max(1, len(take)) // used))

    def _newest_first_prefix(self, upto: str) -> Iterator[Message]:
        """Root..``upto`` in reverse, overlays planned over that prefix, 8-row windows."""
        with self._store._backend.read() as ops:
            path, spans = self._plan(ops, ops.path(self.session_id, upto))
        segments: list[tuple[int, int, Span | None]] = []
        i = 0
        for span in spans:
            if span.start > i:
                segments.append((i, span.start - 1, None))
            segments.append((span.start, span.end, span))
            i = span.end + 1
        if i < len(path):
            segments.append((i, len(path) - 1, None))
        for start, end, seg_span in reversed(segments):
            if seg_span is not None:
                yield synthetic_message(seg_span.record)
                continue
            hi = end
            while hi >= start:
                lo = max(start, hi - NEWEST_FIRST_WINDOW + 1)
                window = list(path.seqs[lo : hi + 1])
                with self._store._backend.read() as ops:
                    rows = ops.content_rows_by_seq(self.session_id, window)
                    by_seq = {r.seq: r.id for r in rows}
                    hydrated = self._hydrate(ops, rows)
                for seq in reversed(window):
                    mid = by_seq.get(seq)
                    if mid is not None and mid in hydrated:
                        yield hydrated[mid]
                hi = lo - 1

    def history_batches(
        self,
        *,
        batch_size: int = 50,
        max_batch_bytes: int = WINDOW_BYTES,
        leaf_id: str | None = None,
        newest_first: bool = False,
    ) -> Iterator[list[Message]]:
        """Stream the history in lists of at most ``batch_size`` messages and ``max_batch_bytes``.

        A message's size is the UTF-8 length of its compact JSON. A batch is never empty; a
        message larger than the byte limit is yielded alone.
        """
        size_limit = max(1, int(batch_size))
        byte_limit = max(1, int(max_batch_bytes))
        batch: list[Message] = []
        used = 0
        for message in self.history(leaf_id=leaf_id, newest_first=newest_first):
            size = codec.utf8_len(codec.dumps(message))
            if batch and (len(batch) >= size_limit or used + size > byte_limit):
                yield batch
                batch, used = [], 0
            batch.append(message)
            used += size
            if len(batch) >= size_limit or used >= byte_limit:
                yield batch
                batch, used = [], 0
        if batch:
            yield batch

    def get_history(self, leaf_id: str | None = None) -> list[Message]:
        """The whole path root → leaf as a list, overlays applied (prefer :meth:`history`)."""
        return list(self.history(leaf_id=leaf_id))

    def get_recent_history(
        self, max_content_bytes: int, *, leaf_id: str | None = None
    ) -> RecentHistory:
        """The longest suffix of the path whose stored bytes fit ``max_content_bytes``.

        The newest message is always included, even alone over the budget. Sizes count
        continuation rows and referenced payloads, so the budget bounds the memory the read
        takes. Overlays are planned over the window only.
        """
        if isinstance(max_content_bytes, bool) or not isinstance(max_content_bytes, (int, float)):
            raise TypeError("max_content_bytes must be a number")
        with self._store._backend.read() as ops:
            # One statement walks only the window (content included); the path's total comes
            # from the memoised totals, so nothing older than the window is read.
            budget = int(min(max(max_content_bytes, 0), 2**62))
            found = None if leaf_id else self._linear_suffix(ops, budget)
            if found is None:  # a branch or an explicit leaf: walk parent links
                found = ops.suffix(self.session_id, leaf_id or None, budget)
            leaf, window, beyond, rows = found
            if leaf is None:
                return RecentHistory([], False, 0)
            total = self._totals(ops, leaf)[1]
            window, spans = self._plan(ops, window)
            covered = {i for s in spans for i in range(s.start, s.end + 1)}
            wanted = {window.seqs[i] for i in range(len(window)) if i not in covered}
            kept = [r for r in rows if r.seq in wanted]
            hydrated = self._hydrate(ops, kept)
        by_seq = {r.seq: r.id for r in kept}
        span_at = {s.start: s for s in spans}
        messages: list[Message] = []
        i = 0
        while i < len(window):
            span = span_at.get(i)
            if span is not None:
                messages.append(synthetic_message(span.record))
                i = span.end + 1
                continue
            mid = by_seq.get(window.seqs[i])
            if mid is not None and mid in hydrated:
                messages.append(hydrated[mid])
            i += 1
        return RecentHistory(messages, beyond is not None, total)

    def _linear_suffix(
        self, ops: Ops, budget: int
    ) -> tuple[str | None, PathArrays, str | None, list[ContentRow]] | None:
        """The active leaf's budget window by range reads, when the newest rows form a chain
        (each row's parent the row just below it); None when they do not.

        The sizes come first, without content, so only the window's content is read."""
        sized = ops.newest_sizes(self.session_id, _LINEAR_PROBE_ROWS)
        if not sized:
            return None, PathArrays(array("q"), array("q"), array("q")), None, []
        window = PathArrays(array("q"), array("q"), array("q"))
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
        rows = ops.content_rows_by_seq(self.session_id, list(window.seqs))
        return sized[0][0], window, beyond, rows

    def get_history_row_stats(self, leaf_id: str | None = None) -> list[RowStat]:
        """Per-row stored bytes and stamped token estimates of the raw path; no content read."""
        with self._store._backend.read() as ops:
            leaf = self._leaf(ops, leaf_id)
            if leaf is None:
                return []
            return [
                RowStat(r.id, r.role, r.bytes, r.token_estimate)
                for r in ops.path_rows(self.session_id, leaf)
            ]

    # --- token estimate -----------------------------------------------------------------------

    def get_token_estimate(self) -> int:
        """The active path's token estimate: stamped row estimates, compacted spans replaced by
        their summaries. Never reads message content; memoised and extended on tail appends."""
        with self._store._backend.read() as ops:
            tail = ops.tail(self.session_id)
            if tail is None:
                return 0
            return self._totals(ops, tail[0])[0]

    def _totals(self, ops: Ops, leaf: str) -> tuple[int, int]:
        """(token estimate, stored bytes) of the path ending at ``leaf``, without content.

        Memoised per handle by leaf and the session's epoch (bumped by every write but a plain
        append), so after a tail append only the new rows are walked, not the whole path.
        """
        sid = self.session_id
        epoch = ops.epoch(sid)
        with self._memo_lock:
            memo = self._memo
        if memo is not None and memo.epoch == epoch:
            if memo.leaf_id == leaf:
                return memo.estimate, memo.total_bytes
            steps = ops.walk_up(sid, leaf, memo.leaf_id, _MEMO_WALK_LIMIT)
            if (
                steps
                and steps[-1].id == memo.leaf_id
                and not any(s.id in memo.watch for s in steps[:-1])
            ):
                new = steps[:-1]
                extended = _Memo(
                    leaf, epoch,
                    memo.estimate + sum(s.token_estimate for s in new),
                    memo.total_bytes + sum(s.bytes for s in new),
                    memo.watch,
                )
                self._set_memo(extended)
                return extended.estimate, extended.total_bytes
        count = self._store.token_counter or estimate_string_tokens
        raw = ops.path(sid, leaf)
        total_bytes = sum(raw.bytes)
        path, spans = self._plan(ops, raw)
        records = ops.compactions(sid)
        total = sum(path.tokens)
        for span in spans:
            total -= sum(path.tokens[span.start : span.end + 1])
            total += count(span.record.summary)
        watch = frozenset(
            [r.from_message_id for r in records] + [r.to_message_id for r in records]
        )
        fresh = _Memo(leaf, epoch, max(0, int(total)), total_bytes, watch)
        self._set_memo(fresh)
        return fresh.estimate, fresh.total_bytes

    def _set_memo(self, memo: _Memo) -> None:
        with self._memo_lock:
            self._memo = memo

    # --- compaction ---------------------------------------------------------------------------

    def add_compaction(
        self, summary: str, from_message_id: str, to_message_id: str
    ) -> StoredCompaction:
        """Store an overlay: reads show ``summary`` in place of ``from..to`` on any path holding
        both ends. Ids are not checked. Emits a ``compaction`` event."""
        record = self._store_compaction(summary, from_message_id, to_message_id)
        self._emit(ChangeEvent("compaction", self.session_id, compaction=record))
        return record

    def _store_compaction(
        self, summary: str, from_message_id: str, to_message_id: str
    ) -> StoredCompaction:
        for name, value in (("summary", summary), ("from_message_id", from_message_id),
                            ("to_message_id", to_message_id)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a string, not {type(value).__name__}")
            if "\x00" in value:
                raise ValueError(f"{name} must not contain a NUL character")
        codec.dumps(summary)  # rejects text the database cannot hold, before writing
        sid = self.session_id
        with self._store._backend.write(sid) as ops:
            row = CompactionRow(
                id=str(uuid.uuid4()),
                seq=ops.next_compaction_seq(sid),
                summary=summary,
                from_message_id=from_message_id,
                to_message_id=to_message_id,
                created_at=now_ms(),
            )
            ops.insert_compaction(sid, row)
            ops.bump_epoch(sid)
        return _stored_compaction(row)

    def get_compactions(self) -> list[StoredCompaction]:
        """Every overlay record of this session, in write order."""
        with self._store._backend.read() as ops:
            return [_stored_compaction(r) for r in ops.compactions(self.session_id)]

    def compact(self, leaf_id: str | None = None) -> CompactResult | None:
        """Summarise part of the history with the registered function and store the overlay.

        The function gets the overlaid history of ``leaf_id``'s branch (default: active). When an
        overlay is already visible on the branch, the new record starts where the earliest one
        starts, so it supersedes it (iterative compaction). Returns the stored range, or None when
        the function returned None, named an end not in the history, or raised (the error is
        logged, passed to the ``on_compaction_error`` handler and sent as an ``error`` event).
        """
        fn = self._compact_fn
        if fn is None:
            raise NoCompactionFunction()
        history = self.get_history(leaf_id)
        try:
            value = fn(history)
            if inspect.isawaitable(value):
                value = self._store._await(value)
            result = coerce_compact_result(value)
        except Exception as exc:
            self._report_compaction_error(exc)
            return None
        if result is None:
            return None
        ids = {m["id"] for m in history}
        if result.to_message_id not in ids:
            return None
        from_id = result.from_message_id
        for record in self.get_compactions():
            if COMPACTION_PREFIX + record.id in ids or (
                record.from_message_id in ids and record.to_message_id in ids
            ):
                from_id = record.from_message_id
                break
        self._store_compaction(result.summary, from_id, result.to_message_id)
        self._emit(ChangeEvent("compact", self.session_id))
        return CompactResult(from_id, result.to_message_id, result.summary)

    def _report_compaction_error(self, exc: BaseException) -> None:
        logger.warning("compaction of session %r failed: %s", self.session_id, exc,
                       exc_info=exc)
        handler = self._on_error
        if handler is not None:
            try:
                outcome = handler(exc)
                if inspect.isawaitable(outcome):
                    self._store._await(outcome)
            except Exception:
                logger.exception("on_compaction_error handler of session %r failed",
                                 self.session_id)
        self._emit(ChangeEvent("error", self.session_id, error=exc))

    def _after_insert(self) -> None:
        """Auto-compaction: after an inserted append, when the estimate is above the threshold."""
        if self._compact_fn is None or self._threshold is None:
            return
        try:
            estimate = self.get_token_estimate()
            if self._extra_tokens is not None:
                extra = self._extra_tokens()
                if isinstance(extra, (int, float)) and math.isfinite(extra):
                    estimate += max(0, math.ceil(extra))
            if estimate > self._threshold:
                self.compact()
        except Exception as exc:
            self._report_compaction_error(exc)

    # --- search -------------------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Full-text search of this session's text parts; the query is matched as one phrase.

        The index is built by the first search of the store (a one-time backfill) and kept up to
        date by every write after that. Operators and quotes in ``query`` are plain words; an
        empty query finds nothing. Best match first.
        """
        return self._store._search(query, limit=limit, session_id=self.session_id)


def _run_awaitable(value: Awaitable[Any]) -> Any:
    """Default way a sync store resolves an async callback: a private event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise TypeError(
            "an async callback was given to the sync API inside a running event loop; "
            "use convostore.AsyncSessions"
        )

    async def wrap() -> Any:
        return await value

    return asyncio.run(wrap())

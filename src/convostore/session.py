"""Session: one conversation's behaviour, written once over any backend.

A :class:`Session` is the public face of one conversation. It validates arguments, orders the
steps of each operation and emits change events after commit; the work itself lives in the
modules it is built from:

- :mod:`convostore.messages._writes`: the write pipeline (prepare, then one transaction per write);
- :mod:`convostore.messages._history`: every history read, overlays applied, in bounded memory;
- :mod:`convostore.messages._estimate`: the path's token estimate from per-row stamps, memoised;
- :mod:`convostore._core`: what the session shares with its store (backend, events, index).
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import codec, limits
from ._core import StoreCore
from .compaction import COMPACTION_PREFIX, CompactionFunction, coerce_compact_result
from .directory import _life
from .directory._life import Duration, Moment
from .directory._records import MessageRecord, SessionEntry, SiblingPosition
from .errors import (
    InvalidArgument,
    InvalidArgumentType,
    NoCompactionFunction,
    UnreadableMessage,
)
from .messages import _batch
from .messages._estimate import PathTotals
from .messages._history import NEWEST_FIRST_WINDOW, WINDOW_BYTES, WINDOW_ROWS, History
from .messages._rows import hydrate
from .messages._writes import Prepared, Rewrite, Writer, iso_ms, now_ms, stored_compaction
from .model import (
    UNSET,
    AppendResult,
    ChangeEvent,
    CompactResult,
    ImportItem,
    Message,
    RecentHistory,
    RowStat,
    SearchResult,
    Source,
    StoredCompaction,
    Unset,
)

if TYPE_CHECKING:
    from .store import Sessions

__all__ = ["NEWEST_FIRST_WINDOW", "WINDOW_BYTES", "WINDOW_ROWS", "Session", "iso_ms", "now_ms"]

logger = logging.getLogger("convostore")


class Session:
    """A handle on one conversation of a :class:`~convostore.Sessions` store.

    Get one with ``store.session(session_id)``; handles are cached per id, so configuration set
    with :meth:`on_compaction`, :meth:`compact_after` and :meth:`on_compaction_error` stays with
    the id. The store keeps a configured handle for its lifetime and an unconfigured one only
    while the caller holds a reference (then ``store.session(x) is store.session(x)``), so
    read-only lookups of many ids cost no memory afterwards. Every method is safe to call from
    several threads; several processes may write one session at once.
    """

    def __init__(
        self, core: StoreCore, session_id: str, store: Sessions,
        keep: Callable[[Session, bool], None],
    ) -> None:
        """A handle over ``core`` (use ``store.session(session_id)`` instead).

        :param keep: called as ``keep(handle, configured)`` after each configuration call, so the
            store holds a configured handle strongly and lets an unconfigured one go.
        """
        self._core = core
        self._owner = store
        self._keep = keep
        self.session_id = session_id
        """The session's id (``""`` is the default session)."""
        self._writer = Writer(core, session_id)
        self._totals = PathTotals(core, session_id)
        self._history = History(core.backend, session_id, self._totals)
        self._compact_fn: CompactionFunction | None = None
        self._threshold: int | None = None
        self._extra_tokens: Callable[[], int] | None = None
        self._on_error: Callable[[BaseException], object] | None = None

    def __repr__(self) -> str:
        return f"<Session {self.session_id!r} of {self._core.describe()}>"

    @property
    def store(self) -> Sessions:
        """The store this handle belongs to."""
        return self._owner

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
        self._configured()
        return self

    def compact_after(
        self, threshold: int | None, *, extra_tokens: Callable[[], int] | None = None
    ) -> Session:
        """Compact automatically once the session estimate is strictly above ``threshold`` tokens.

        Checked only after an append that inserted a row, and never on the append's time: the
        append returns at once and the store's background worker checks and compacts (one
        compaction at a time per session across processes; after an attempt that leaves the
        session above the threshold, the next waits 1 minute, doubling up to 1 hour).
        :meth:`Sessions.wait_for_compactions` waits for it. ``None`` turns it off. Chainable.

        :param extra_tokens: called at each check and added to the estimate, for what the model
            sees besides the history (a system prompt and context blocks: see
            :mod:`convostore.context`). It must not do I/O; a non-finite result counts as 0.
            It runs on the background worker's thread.
        """
        if threshold is not None and (
            isinstance(threshold, bool) or not isinstance(threshold, (int, float))
        ):
            raise InvalidArgumentType(
                "threshold", f"must be a number or None, not {type(threshold).__name__}"
            )
        if threshold is not None and not math.isfinite(threshold):
            raise InvalidArgument("threshold", f"must be finite, not {threshold!r}")
        if threshold is not None and threshold < 0:
            raise InvalidArgument("threshold", f"must not be negative, not {threshold!r}")
        self._threshold = None if threshold is None else int(threshold)
        self._extra_tokens = extra_tokens
        self._configured()
        return self

    def on_compaction_error(self, handler: Callable[[BaseException], object] | None) -> Session:
        """Call ``handler(exc)`` when an automatic compaction's function raises (it has no caller
        to raise to; :meth:`compact` raises to its caller)."""
        self._on_error = handler
        self._configured()
        return self

    def _configured(self) -> None:
        """Tell the store whether this handle now carries configuration worth keeping."""
        settings = (self._compact_fn, self._threshold, self._extra_tokens, self._on_error)
        self._keep(self, any(v is not None for v in settings))

    # --- writes -------------------------------------------------------------------------------

    def _emit(self, event: ChangeEvent) -> None:
        self._core.events.emit(event)

    def append_message(
        self, message: Message, parent_id: str | None | Unset = UNSET, *,
        source: Source = "server",
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
        if not isinstance(parent_id, Unset):
            limits.check_id("parent_id", parent_id, optional=True)
        if msg["id"].startswith(COMPACTION_PREFIX):
            return AppendResult(False, msg)
        prep = self._writer.prepare(msg, source)
        cursor = self._writer.insert(prep, parent_id, now_ms(), verbatim=False)
        given_parent = None if isinstance(parent_id, Unset) else parent_id
        if cursor is None:
            result = AppendResult(False, self._stored_or(msg["id"], prep.message))
            self._emit(ChangeEvent("append", self.session_id, message=result.message,
                                   parent_id=given_parent, inserted=False))
            return result
        if self._core.events.listened:  # no event object is built when nobody listens
            self._emit(ChangeEvent("append", self.session_id, message=prep.message,
                                   parent_id=given_parent, inserted=True, cursor=cursor))
        self._after_insert()
        return AppendResult(True, prep.message)

    def update_message(self, message: Message, *, source: Source = "server") -> Message | None:
        """Replace a stored message's content (never its parent, order or timestamp).

        :returns: the stored form, or ``None`` when the id is not in this session (nothing is
            written). A message equal to the stored one writes nothing and emits no event.
        """
        msg = codec.validate_message(message)
        if msg["id"].startswith(COMPACTION_PREFIX):
            return None
        prep: Prepared = self._writer.prepare(msg, source)
        outcome, cursor = self._writer.rewrite(prep)
        if outcome is Rewrite.ABSENT:
            return None
        if outcome is Rewrite.WRITTEN:
            self._emit(ChangeEvent("update", self.session_id, message=prep.message,
                                   cursor=cursor))
        return prep.message

    def upsert_message(
        self, message: Message, parent_id: str | None | Unset = UNSET, *,
        source: Source = "server",
    ) -> AppendResult:
        """Append the message if its id is new, else update it in place (never moving it)."""
        msg = codec.validate_message(message)
        if not isinstance(parent_id, Unset):
            limits.check_id("parent_id", parent_id, optional=True)
        if msg["id"].startswith(COMPACTION_PREFIX):
            return AppendResult(False, msg)
        if not self._writer.exists(msg["id"]):
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
        :param created_at: epoch milliseconds from 0 to 253402300799999 (years 1970 to 9999,
            see :data:`convostore.limits.MAX_TIMESTAMP_MS`); defaults to now.

        Idempotent on the id (a duplicate writes nothing and emits nothing). Media is still
        moved out of the row and long messages still use continuation rows.
        """
        msg = codec.validate_message(message)
        limits.check_id("parent_id", parent_id, optional=True)
        when = now_ms() if created_at is None else limits.check_timestamp("created_at", created_at)
        prep = self._writer.prepare(msg, "server", sanitize=False)
        cursor = self._writer.insert(prep, parent_id, when, verbatim=True)
        if cursor is None:
            return AppendResult(False, self._stored_or(msg["id"], msg))
        if self._core.events.listened:  # imports run in bulk: no event nobody receives
            self._emit(ChangeEvent("import", self.session_id, message=msg, parent_id=parent_id,
                                   cursor=cursor))
        return AppendResult(True, msg)

    def append_messages(
        self, messages: Iterable[Message], parent_id: str | None | Unset = UNSET, *,
        source: Source = "server",
    ) -> list[AppendResult]:
        """Store several messages as one chain, in one transaction (an agent turn at once).

        The first message goes under ``parent_id`` (omitted: the active leaf; ``None``: a new
        root; an id: a branch under it, an unknown one making a new root), each next one under
        the message before it. Every rule of :meth:`append_message` holds per message: an id
        already stored is not written again (its result has ``inserted`` False and the stored
        message, and the next message still chains under it), ``source`` sanitises, media moves
        out of line, an echoed ``compaction_`` overlay is skipped.

        All or nothing: every message is checked and prepared before the transaction opens, so
        a bad one (named as ``messages[i]...`` in the error) writes nothing, and a failure
        during the write rolls the whole batch back. One ``append`` event per message, in
        order, after the commit; auto-compaction is checked once.

        :returns: one :class:`AppendResult` per message, in order.
        """
        plan = _batch.plan_append(self._writer, messages, parent_id, source, now_ms())
        cursors = self._writer.insert_batch(plan.rows, verbatim=False) if plan.rows else []
        inserted = [c is not None for c in cursors]
        results = plan.results(inserted, self._stored_or)
        if self._core.events.listened:
            for event in _batch.append_events(self.session_id, plan, results, cursors):
                self._emit(event)
        if any(inserted):
            self._after_insert()
        return results

    def import_messages(
        self,
        messages: Iterable[Message | ImportItem],
        *,
        parent_id: str | None = None,
        created_at: int | None = None,
    ) -> list[AppendResult]:
        """Store historical messages verbatim, in order, in one transaction.

        Each entry is a message, stored under the previous entry's message (the first under
        ``parent_id``), or an :class:`~convostore.ImportItem` that names its own parent (stored
        as given, unchecked) or time. ``created_at`` (epoch milliseconds, default now) applies
        to entries without their own. As :meth:`import_message` does for one: no sanitising,
        idempotent on the id (a duplicate writes nothing), media moved out of the row.

        All or nothing on bad input (the error names ``messages[i]``); one ``import`` event per
        inserted message, in order, after the commit.

        :returns: one :class:`AppendResult` per entry, in order.
        """
        plan = _batch.plan_import(self._writer, messages, parent_id, created_at, now_ms())
        cursors = self._writer.insert_batch(plan.rows, verbatim=True) if plan.rows else []
        if self._core.events.listened:
            for event in _batch.import_events(self.session_id, plan, cursors):
                self._emit(event)
        return plan.results([c is not None for c in cursors], self._stored_or)

    def delete_messages(self, ids: Sequence[str]) -> None:
        """Delete messages; each surviving child is re-attached to its nearest kept ancestor.

        One transaction: rows, continuation rows, attachment references (payloads left
        unreferenced are collected) and index entries. Compaction records are kept.
        """
        if isinstance(ids, str):
            raise TypeError("delete_messages() takes a list of ids, not a single string")
        id_list = list(ids)
        limits.check_ids("ids", id_list)
        unique = list(dict.fromkeys(id_list))
        cursor = self._writer.delete(unique) if unique else None
        self._emit(ChangeEvent("delete", self.session_id, message_ids=id_list, cursor=cursor))

    def clear_messages(self) -> None:
        """Delete every message, continuation, compaction and reference of this session only."""
        cursor = self._writer.clear()
        self._emit(ChangeEvent("clear", self.session_id, cursor=cursor))

    # --- single messages ----------------------------------------------------------------------

    def get_message(self, id: str) -> Message | None:
        """One stored message by id (no overlays), payloads inlined.

        None when absent. :raises UnreadableMessage: the stored row cannot be decoded.
        """
        limits.check_id("id", id)
        sid = self.session_id
        with self._core.backend.read() as ops:
            meta = ops.row_meta(sid, id)
            if meta is None:
                return None
            rows = ops.content_rows_by_seq(sid, [meta.seq])
            return hydrate(ops, sid, rows, strict=True).get(id)

    def _stored_or(self, id: str, fallback: Message) -> Message:
        """The stored message for a write that found its id taken, else ``fallback`` (the
        row vanished, or cannot be decoded: a re-sent message must not fail on that)."""
        try:
            stored = self.get_message(id)
        except UnreadableMessage:
            return fallback
        return stored if stored is not None else fallback

    def get_latest_leaf(self) -> Message | None:
        """The active leaf: the one :meth:`set_active_leaf` chose (until the next message
        write), else the most recently written message; None for an empty session.

        :raises UnreadableMessage: the stored row cannot be decoded.
        """
        sid = self.session_id
        with self._core.backend.read() as ops:
            tail = ops.active_leaf(sid)  # the leaf set_active_leaf chose, else the newest row
            if tail is None:
                return None
            rows = ops.content_rows_by_seq(sid, [tail[1]])
            return hydrate(ops, sid, rows, strict=True).get(tail[0])

    def get_branches(self, message_id: str) -> list[Message]:
        """The children of ``message_id`` in write order (no overlays)."""
        limits.check_id("message_id", message_id)
        with self._core.backend.read() as ops:
            rows = ops.children(self.session_id, message_id)
            hydrated = hydrate(ops, self.session_id, rows)
        return [hydrated[r.id] for r in rows if r.id in hydrated]

    def get_roots(self) -> list[Message]:
        """The messages that start a tree in this session, in write order (no overlays).

        With :meth:`get_branches`, enough to walk every message of the session.
        """
        with self._core.backend.read() as ops:
            rows = ops.roots(self.session_id)
            hydrated = hydrate(ops, self.session_id, rows)
        return [hydrated[r.id] for r in rows if r.id in hydrated]

    # --- the chosen branch ---------------------------------------------------------------------

    def set_active_leaf(self, message_id: str) -> None:
        """Choose the branch that ends at ``message_id``: stored, so every process's reads
        without ``leaf_id`` (``history()``, ``get_latest_leaf()``, ...) and every
        ``append_message`` without ``parent_id`` follow it, until the next message write
        (whose new row is then the active leaf). Emits a ``set_active_leaf`` event.

        :raises InvalidArgument: ``message_id`` is not a message of this session.
        """
        _life.set_active_leaf(self._core, self.session_id, message_id)

    def get_leaves(self) -> list[Message]:
        """Every message without children (each ends a branch), in write order, no overlays."""
        return _life.get_leaves(self._core, self.session_id)

    def get_sibling_position(self, message_id: str) -> SiblingPosition | None:
        """Where ``message_id`` stands among its parent's children (or among the roots), in
        write order, for a branch switcher ("2 of 3" is ``index + 1`` of ``count``); no content
        is read. None when the message is not in this session."""
        return _life.sibling_position(self._core, self.session_id, message_id)

    # --- the directory ------------------------------------------------------------------------

    def get_info(self) -> SessionEntry | None:
        """This session's directory entry (title, owner, metadata, times, counts, expiry), or
        None when it was never written nor described."""
        return _life.get_info(self._core, self.session_id)

    def update_info(
        self,
        *,
        title: str | None | Unset = UNSET,
        owner: str | None | Unset = UNSET,
        metadata: Mapping[str, Any] | None | Unset = UNSET,
        expires_at: Moment | None | Unset = UNSET,
        ttl: Duration | None | Unset = UNSET,
        belongs_to: str | None | Unset = UNSET,
    ) -> SessionEntry:
        """Describe the session in the directory: set what is passed, ``None`` clears it.

        :param title: a display name.
        :param owner: an opaque user id (listings filter on it; a string of at most 1,024
            bytes).
        :param metadata: the application's JSON object, replaced whole.
        :param expires_at: when :meth:`Sessions.prune` may delete the conversation (an aware
            ``datetime``, a naive one read as UTC, or epoch milliseconds).
        :param ttl: a time to live (``timedelta`` or seconds) refreshed by every message write:
            ``expires_at`` becomes the write's time plus ``ttl`` (and now plus ``ttl`` at once,
            unless ``expires_at`` is passed too).
        :param belongs_to: a session this one is deleted with (:meth:`Sessions.delete_session`
            and :meth:`Sessions.prune` of that one delete this one too).
        :returns: the entry as stored. A session never written gets an entry with no messages.

        Describing does not change ``updated_at`` (a new entry starts with now).
        """
        return _life.update_info(
            self._core, self.session_id, title=title, owner=owner, metadata=metadata,
            expires_at=expires_at, ttl=ttl, belongs_to=belongs_to,
        )

    # --- history ------------------------------------------------------------------------------

    def history(
        self, *, leaf_id: str | None = None, newest_first: bool = False
    ) -> Iterator[Message]:
        """Stream the path root → leaf (or leaf → root), overlays applied, in bounded memory.

        :param leaf_id: the branch to read; ``None`` → the active leaf; an unknown id → nothing.
        :param newest_first: walk from the leaf by ranges of rows: a first page of 25 rows
            (at most 256 KiB) read with the leaf in one statement, then 50 rows (at most 4 MiB)
            at a time, so taking k messages beyond the first page reads fewer than 3k rows; the
            output is the exact reverse of the oldest-first read.

        Oldest first: the path is planned without reading content (a linear conversation as
        one range of rows), then read in windows of at most 50 rows and 4 MiB; earlier windows
        are not kept.
        """
        limits.check_id("leaf_id", leaf_id, optional=True)
        if newest_first:
            return self._history.newest_first(leaf_id)
        return self._history.oldest_first(leaf_id)

    def history_records(
        self, *, leaf_id: str | None = None, newest_first: bool = False
    ) -> Iterator[MessageRecord]:
        """Stream :meth:`history` with each message's row facts beside it: a
        :class:`~convostore.MessageRecord` (``message``, ``created_at``, ``parent_id``,
        ``size``). The messages are those :meth:`history` yields, unchanged.

        Facts are read by id, content-free, a few messages at a time (1, 5, 15, 45, then 50),
        so taking k records costs about what taking k messages does. To page older from a
        newest-first read, start the next one at the oldest record's ``parent_id`` as
        ``leaf_id``.
        """
        limits.check_id("leaf_id", leaf_id, optional=True)
        stream = self.history(leaf_id=leaf_id, newest_first=newest_first)
        return _life.history_records(self._core, self.session_id, stream,
                                          newest_first=newest_first)

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
        limits.check_count("batch_size", batch_size, negative=True)  # 0 or less: 1
        limits.check_count("max_batch_bytes", max_batch_bytes, negative=True)
        limits.check_id("leaf_id", leaf_id, optional=True)
        return self._history.batches(batch_size, max_batch_bytes, leaf_id, newest_first)

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
            raise InvalidArgumentType(
                "max_content_bytes", f"must be a number, not {type(max_content_bytes).__name__}"
            )
        if isinstance(max_content_bytes, float) and math.isnan(max_content_bytes):
            raise InvalidArgument("max_content_bytes", "must be a number, not nan")
        limits.check_id("leaf_id", leaf_id, optional=True)
        return self._history.recent(int(min(max(max_content_bytes, 0), 2**62)), leaf_id)

    def get_history_row_stats(self, leaf_id: str | None = None) -> list[RowStat]:
        """Per-row stored bytes and stamped token estimates of the raw path; no content read."""
        limits.check_id("leaf_id", leaf_id, optional=True)
        return self._history.row_stats(leaf_id)

    def get_token_estimate(self) -> int:
        """The active path's token estimate: stamped row estimates, compacted spans replaced by
        their summaries. Never reads message content; memoised and extended on tail appends."""
        with self._core.backend.read() as ops:
            tail = ops.active_leaf(self.session_id)
            if tail is None:
                return 0
            return self._totals(ops, tail[0])[0]

    # --- compaction ---------------------------------------------------------------------------

    def add_compaction(
        self, summary: str, from_message_id: str, to_message_id: str
    ) -> StoredCompaction:
        """Store an overlay: reads show ``summary`` in place of ``from..to`` on any path holding
        both ends. Ids are not checked. Emits a ``compaction`` event."""
        record, cursor = self._writer.add_compaction(summary, from_message_id, to_message_id)
        self._emit(ChangeEvent("compaction", self.session_id, compaction=record, cursor=cursor))
        return record

    def get_compactions(self) -> list[StoredCompaction]:
        """Every overlay record of this session, in write order."""
        with self._core.backend.read() as ops:
            return [stored_compaction(r) for r in ops.compactions(self.session_id)]

    def compact(self, leaf_id: str | None = None) -> CompactResult | None:
        """Summarise part of the history with the registered function and store the overlay.

        The function gets the overlaid history of ``leaf_id``'s branch (default: active). When an
        overlay is already visible on the branch, the new record starts where the earliest one
        starts, so it supersedes it (iterative compaction). Returns the stored range, or None when
        the function returned None or named an end not in the history.

        :raises Exception: what the function raised, to the caller who asked (also logged as an
            ``error`` change and event; ``on_compaction_error`` is automatic compaction's
            handler, which has no caller to tell).
        """
        return self._compact(leaf_id, asked=True)[0]

    def _compact(
        self, leaf_id: str | None = None, *, asked: bool = False
    ) -> tuple[CompactResult | None, bool]:
        """:meth:`compact`, and whether it was an attempt: a record stored, or the function
        raised (False when the function found nothing to compact). A function's error is
        raised when the caller ``asked``, else reported (automatic compaction)."""
        fn = self._compact_fn
        if fn is None:
            raise NoCompactionFunction()
        limits.check_id("leaf_id", leaf_id, optional=True)
        history = self.get_history(leaf_id)
        try:
            value = fn(history)
            if inspect.isawaitable(value):
                value = self._core.run_awaitable(value)
            result = coerce_compact_result(value)
        except Exception as exc:
            if asked:
                self._log_compaction_error(exc)
                raise
            self._report_compaction_error(exc)
            return None, True
        if result is None:
            return None, False
        ids = {m["id"] for m in history}
        if result.to_message_id not in ids:
            return None, False
        from_id = result.from_message_id
        for record in self.get_compactions():
            if COMPACTION_PREFIX + record.id in ids or (
                record.from_message_id in ids and record.to_message_id in ids
            ):
                from_id = record.from_message_id
                break
        _record, cursor = self._writer.add_compaction(
            result.summary, from_id, result.to_message_id, kind="compact"
        )
        self._emit(ChangeEvent("compact", self.session_id, cursor=cursor))
        return CompactResult(from_id, result.to_message_id, result.summary), True

    def _report_compaction_error(self, exc: BaseException) -> None:
        """An automatic compaction failed: to the handler (else the log), the change log and
        the subscribers."""
        handler = self._on_error
        if handler is None:
            logger.warning("compaction of session %r failed: %s", self.session_id, exc,
                           exc_info=exc)
        else:
            try:
                outcome = handler(exc)
                if inspect.isawaitable(outcome):
                    self._core.run_awaitable(outcome)
            except Exception:
                logger.exception("on_compaction_error handler of session %r failed",
                                 self.session_id)
        self._log_compaction_error(exc)

    def _log_compaction_error(self, exc: BaseException) -> None:
        """A compaction failed: an ``error`` change and event (its watchers learn of it)."""
        cursor: int | None = None
        try:
            cursor = self._writer.log_error(exc)
        except Exception:  # the store closed, or the database is what failed
            logger.warning("could not log the compaction error of session %r",
                           self.session_id, exc_info=True)
        self._emit(ChangeEvent("error", self.session_id, error=exc, cursor=cursor))

    def _after_insert(self) -> None:
        """Auto-compaction: after an inserted append, ask the store's background worker to look
        at this session (the append returns at once; see :mod:`convostore.compaction._auto`)."""
        if self._compact_fn is None or self._threshold is None:
            return
        self._core.background.submit("compact " + self.session_id, self._auto_compact)

    def _auto_compact(self) -> None:
        """The background job: compact if above the threshold, unless a lease or the backoff
        of an earlier attempt stops it; an error is reported like a compaction's."""
        threshold = self._threshold
        if self._compact_fn is None or threshold is None or self._core.closed:
            return
        try:
            self._core.auto_compaction.run(
                self.session_id, threshold, self._estimate_with_extra, self._active_leaf_id,
                lambda leaf: self._compact(leaf)[1],
            )
        except Exception as exc:
            self._report_compaction_error(exc)

    def _active_leaf_id(self) -> str | None:
        with self._core.backend.read() as ops:
            tail = ops.active_leaf(self.session_id)
        return None if tail is None else tail[0]

    def _estimate_with_extra(self, leaf: str | None = None) -> int:
        """The token estimate (of ``leaf``'s branch; default the active one) plus
        ``extra_tokens()`` (a non-finite result counts as 0)."""
        if leaf is None:
            estimate = self.get_token_estimate()
        else:
            with self._core.backend.read() as ops:
                estimate = self._totals(ops, leaf)[0]
        if self._extra_tokens is not None:
            extra = self._extra_tokens()
            if isinstance(extra, (int, float)) and math.isfinite(extra):
                estimate += max(0, math.ceil(extra))
        return estimate

    # --- search -------------------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Full-text search of this session's text parts; the query is matched as one phrase.

        The index is built by the first search of the store (a one-time backfill) and kept up to
        date by every write after that. Operators and quotes in ``query`` are plain words; an
        empty query finds nothing. Best match first.
        """
        return self._core.search_index.search(query, limit=limit, session_id=self.session_id)

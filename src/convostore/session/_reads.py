"""A session's reads: single messages, the chosen branch, its directory entry, the history,
search. Part of :class:`~convostore.Session` (the methods are documented there)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from .. import limits
from .._core import StoreCore
from ..directory import _life
from ..directory._life import Duration, Moment
from ..directory._records import MessageRecord, SessionEntry, SiblingPosition
from ..errors import (
    InvalidArgument,
    InvalidArgumentType,
    UnreadableMessage,
)
from ..messages._estimate import PathTotals
from ..messages._history import WINDOW_BYTES, History
from ..messages._rows import hydrate
from ..model import (
    UNSET,
    Message,
    RecentHistory,
    RowStat,
    SearchResult,
    Unset,
)


class SessionReads:
    """The read half of a :class:`~convostore.Session`: every call here only reads (except
    :meth:`set_active_leaf` and :meth:`update_info`, which describe rather than write
    messages)."""

    _core: StoreCore
    session_id: str
    _history: History
    _totals: PathTotals

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

    # --- search -------------------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Full-text search of this session's text parts; the query is matched as one phrase.

        The index is built by the first search of the store (a one-time backfill) and kept up to
        date by every write after that. Operators and quotes in ``query`` are plain words; an
        empty query finds nothing. Best match first.
        """
        return self._core.search_index.search(query, limit=limit, session_id=self.session_id)

"""The durable change log, above the engines: what each write logs, reading it, trimming it.

Every committed write of every process gets one row in ``convostore_changes``, written in the
write's own transaction (so a change is logged if and only if the write commits), at a position
that increases store-wide; readers never move past a change that may still commit, so a change
committed later always gets a higher position than any a reader was given (how each engine
keeps that promise: :mod:`convostore.feed._sql`). A write path logs a change with
one call inside its write scope and reads the position after the scope::

    with core.backend.write(session_id) as ops:
        ...                                   # the write itself
        logged = core.changes.log(ops, "delete_session", session_id)
    cursor = logged.committed()               # the position; wakes this process's watchers

A row holds ids and the kind, never message content: ``message_id``, ``parent_id``,
``leaf_id`` (the session's newest message after the write, read in the same transaction unless
the caller knows it) and a few kind-specific fields as compact JSON (the ids a delete removed,
a compaction's range, an error's text). :class:`~convostore.Change` is what readers get.

Trimming keeps the newest ``change_log_size`` positions; it runs off the write path (the
store's background worker), every so many logged writes of this process, in batches of
:data:`TRIM_BATCH` rows, each its own transaction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import limits
from ..backends.base import Backend, Ops
from ..backends.rows import ChangeRow, Position, StoredChange
from ..errors import CursorExpired, InvalidArgument
from ..model import Change

DEFAULT_LOG_SIZE = 1_000_000
"""``change_log_size`` by default: the newest million changes (about 100 MB of rows)."""

TAIL: Any = object()
"""``leaf_id=TAIL``: the leaf is the session's active leaf (the one ``set_active_leaf`` chose,
else the newest row), read inside the write scope."""

TRIM_BATCH = 10_000
"""Most change-log rows one trimming transaction deletes."""
TRIM_EVERY = 1_000
"""Logged writes of this process between two trims (fewer for a small ``change_log_size``)."""
_TRIM_SCOPE = "convostore:changes"
"""The write scope trims run in: a key in convostore's own namespace (``convostore:`` ids are
its internal sessions; this one never holds messages), so a trim serialises with other trims
only, not with any conversation's writers. It must be a storable id: on PostgreSQL the scope
locks a state row keyed by it."""
_ERROR_TEXT = 1_000
"""Characters of an error's text kept in its change."""


class Logged:
    """A change logged in a write scope; :meth:`committed` once the scope has committed."""

    __slots__ = ("_log", "_position")

    def __init__(self, log: ChangeLog, position: Position) -> None:
        self._log = log
        self._position = position

    def committed(self) -> int:
        """The change's position (its cursor); wakes this process's watchers."""
        pos = self._position()
        self._log.wrote()
        return pos


class LoggedMany:
    """Changes logged together in one write scope (a batch write, one per message)."""

    __slots__ = ("_log", "_positions")

    def __init__(self, log: ChangeLog, positions: list[Position]) -> None:
        self._log = log
        self._positions = positions

    def committed(self) -> list[int]:
        """Each change's position, in the order logged; wakes this process's watchers once."""
        out = [position() for position in self._positions]
        self._log.wrote(len(out))
        return out


class ChangeLog:
    """The store's durable change log: logging inside write scopes, reading, trimming.

    :param backend: the store's engine.
    :param keep: how many of the newest positions trimming keeps (None: all).
    :param wake: called after each logged write commits (wakes this process's watchers).
    :param schedule: hands a job to the store's background worker (for trimming).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        keep: int | None,
        wake: Callable[[], None],
        schedule: Callable[[str, Callable[[], object]], None],
    ) -> None:
        self._backend = backend
        self.keep = keep
        self._wake = wake
        self._schedule = schedule
        self._trim_every = TRIM_EVERY if keep is None else max(1, min(TRIM_EVERY, keep))
        self._since_trim = 0

    # --- writing ------------------------------------------------------------------------------

    def log(
        self,
        ops: Ops,
        kind: str,
        session_id: str,
        *,
        message_id: str | None = None,
        parent_id: str | None = None,
        leaf_id: str | None = TAIL,
        message_ids: Sequence[str] | None = None,
        compaction: tuple[str, str, str] | None = None,
        error: BaseException | None = None,
    ) -> Logged:
        """Log one change with the write scope ``ops`` (written just before its commit).

        :param leaf_id: the session's active leaf after the write; by default read here.
        :param message_ids: ``delete``: the ids deleted.
        :param compaction: ``compaction``/``compact``: (record id, from id, to id).
        :param error: ``error``: the exception (kept as its type and text).
        """
        if leaf_id is TAIL:
            tail = ops.active_leaf(session_id)
            leaf_id = None if tail is None else tail[0]
        row = self.entry(kind, session_id, message_id=message_id, parent_id=parent_id,
                         leaf_id=leaf_id, message_ids=message_ids, compaction=compaction,
                         error=error)
        return Logged(self, ops.log_change(row))

    def entry(
        self,
        kind: str,
        session_id: str,
        *,
        message_id: str | None = None,
        parent_id: str | None = None,
        leaf_id: str | None = None,
        message_ids: Sequence[str] | None = None,
        compaction: tuple[str, str, str] | None = None,
        error: BaseException | None = None,
    ) -> ChangeRow:
        """The row :meth:`log` would log, for an operation that logs it itself
        (``Ops.append_row``); pass its position to :meth:`settled` after the commit."""
        extra: dict[str, Any] = {}
        if message_ids is not None:
            extra["ids"] = list(message_ids)
        if compaction is not None:
            extra["compaction"] = list(compaction)
        if error is not None:
            extra["error"] = f"{type(error).__name__}: {error}"[:_ERROR_TEXT]
        data = json.dumps(extra, separators=(",", ":")) if extra else None
        return ChangeRow(session_id, kind, message_id, parent_id, leaf_id, data, _now_ms())

    def settled(self, position: int | None) -> int:
        """A change logged by an operation (:meth:`entry`) committed at ``position``: wakes
        watchers and returns it, as :meth:`Logged.committed` does."""
        if position is None:
            raise RuntimeError("the change was not written: its write scope did not commit")
        self.wrote()
        return position

    def log_messages(
        self, ops: Ops, kind: str, session_id: str, entries: Sequence[tuple[str, str | None]]
    ) -> LoggedMany:
        """Log one change per new message, in order, with the write scope ``ops``: each entry
        is (message id, parent id), the message being the session's newest after its write
        (a batch write's rows, each chained after the one before)."""
        now = _now_ms()
        log = ops.log_change
        return LoggedMany(self, [
            log(ChangeRow(session_id, kind, mid, parent, mid, None, now))
            for mid, parent in entries
        ])

    def wrote(self, count: int = 1) -> None:
        """``count`` logged changes committed: wake watchers; trim now and then (in the
        background)."""
        self._wake()
        if self.keep is None:
            return
        self._since_trim += count  # a race between threads only shifts when the next trim runs
        if self._since_trim >= self._trim_every:
            self._since_trim = 0
            self._schedule("trim the change log", self.trim)

    # --- reading ------------------------------------------------------------------------------

    def changes(self, since: int, limit: int, session_id: str | None) -> list[Change]:
        """The changes after ``since`` (optionally of one session), oldest first; ``since=0``
        reads from the oldest change the log keeps.

        :raises CursorExpired: ``since`` is positive and older than the log.
        :raises InvalidArgument: ``since`` lies beyond the newest change (:func:`check_reach`).
        """
        since = check_cursor(since)
        limit = limits.check_count("limit", limit, negative=True)
        limits.check_id("session_id", session_id, optional=True)
        with self._backend.read() as ops:
            # Rows first, then the horizon: a trim that committed before the rows were read is
            # seen by the later read of the horizon, so no gap goes unreported.
            rows = ops.changes_after(since, limit, session_id) if limit > 0 else []
            horizon = ops.change_horizon()
            check_reach(ops, since, horizon, found=bool(rows))
        return [to_change(r) for r in rows]

    def scan(
        self, after: int, session_id: str | None, limit: int, *, first: bool = False
    ) -> tuple[list[Change], int]:
        """What a watcher reads per step: up to ``limit`` rows after ``after``, filtered to
        ``session_id`` here (so its position moves past other sessions' rows), and the
        position to read from next. The ``first`` step checks that the client's cursor lies
        within the log (:func:`check_reach`); later ones start where the log put them."""
        with self._backend.read() as ops:
            rows = ops.changes_after(after, limit, None)
            horizon = ops.change_horizon()
            check_reach(ops, after, horizon, found=bool(rows) or not first)
        last = rows[-1].pos if rows else after
        found = [to_change(r) for r in rows if session_id is None or r.session_id == session_id]
        return found, last

    def head(self) -> int:
        """The newest position logged: watch from here to see only what comes next."""
        with self._backend.read() as ops:
            return ops.change_head()

    # --- trimming -----------------------------------------------------------------------------

    def trim(self) -> int:
        """Delete what lies beyond the newest ``keep`` positions, in batches; rows deleted."""
        if self.keep is None:
            return 0
        head = self.head()
        upto = head - self.keep
        total = 0
        while upto > 0:
            with self._backend.write(_TRIM_SCOPE) as ops:
                done = ops.trim_changes(upto, TRIM_BATCH)
            total += done
            if done < TRIM_BATCH:
                break
        return total


def check_reach(ops: Ops, since: int, horizon: int, *, found: bool) -> None:
    """Refuse a cursor outside the log: a positive one below the trim ``horizon`` (changes
    after it are gone) or one beyond the newest change (a cursor of another store, or of this
    one before a restore or a migration: taken as it is, it would skip as many changes as it
    is ahead). ``found``: a change after ``since`` was read, so it is not beyond."""
    if 0 < since < horizon:
        raise CursorExpired(since, horizon)
    if not found and since > horizon:
        top = ops.change_top()
        if since > top:
            raise InvalidArgument(
                "since", f"is {since}, beyond the newest change of this store ({top}): a "
                "cursor of another store, or from before a restore or migration; resync from "
                "change_cursor()",
            )


def check_cursor(value: object, name: str = "since") -> int:
    """A change-log cursor: an int from 0."""
    return limits.check_count(name, value)


def check_log_size(value: object) -> int | None:
    """``change_log_size``: None (keep everything) or an int of at least 1."""
    if value is None:
        return None
    size = limits.check_count("change_log_size", value)
    if size < 1:
        raise InvalidArgument("change_log_size", f"must be at least 1 or None, not {size}")
    return size


def to_change(row: StoredChange) -> Change:
    """A stored row as the public :class:`~convostore.Change`."""
    extra: dict[str, Any] = json.loads(row.data) if row.data else {}
    ids = extra.get("ids")
    compaction = extra.get("compaction") or (None, None, None)
    return Change(
        cursor=int(row.pos),
        type=row.kind,
        session_id=row.session_id,
        message_id=row.message_id,
        parent_id=row.parent_id,
        leaf_id=row.leaf_id,
        message_ids=None if ids is None else tuple(ids),
        compaction_id=compaction[0],
        from_message_id=compaction[1],
        to_message_id=compaction[2],
        error=extra.get("error"),
        created_at=int(row.created_at),
    )


def _now_ms() -> int:
    return int(time.time() * 1000)

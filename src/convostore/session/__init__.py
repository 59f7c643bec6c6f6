"""Session: one conversation's behaviour, written once over any backend.

A :class:`Session` is the public face of one conversation. It validates arguments, orders the
steps of each operation and emits change events after commit; the work itself lives in the
modules it is built from:

- :mod:`convostore.messages._writes`: the write pipeline (prepare, then one transaction per write);
- :mod:`convostore.messages._history`: every history read, overlays applied, in bounded memory;
- :mod:`convostore.messages._estimate`: the path's token estimate from per-row stamps, memoised;
- :mod:`convostore._core`: what the session shares with its store (backend, events, index).

The class is assembled from three parts: ``_reads.py`` (:class:`SessionReads`), ``_writes.py``
(:class:`SessionWrites`) and this module (configuration and compaction).
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import limits
from .._core import StoreCore
from ..compaction import COMPACTION_PREFIX, CompactionFunction, coerce_compact_result
from ..errors import InvalidArgument, InvalidArgumentType, NoCompactionFunction
from ..messages._estimate import PathTotals
from ..messages._history import NEWEST_FIRST_WINDOW, WINDOW_BYTES, WINDOW_ROWS, History
from ..messages._writes import Writer, iso_ms, now_ms, stored_compaction
from ..model import ChangeEvent, CompactResult, StoredCompaction
from ._writes import SessionWrites

if TYPE_CHECKING:
    from ..store import Sessions

__all__ = ["NEWEST_FIRST_WINDOW", "WINDOW_BYTES", "WINDOW_ROWS", "Session", "iso_ms", "now_ms"]

logger = logging.getLogger("convostore")


class Session(SessionWrites):
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

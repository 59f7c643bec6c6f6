"""A session's message writes: append, update, upsert, import (one or a batch), delete, clear.
Part of :class:`~convostore.Session` (the methods are documented there)."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence

from .. import codec, limits
from ..compaction import COMPACTION_PREFIX
from ..messages import _batch
from ..messages._writes import Prepared, Rewrite, Writer, now_ms
from ..model import (
    UNSET,
    AppendResult,
    ChangeEvent,
    ImportItem,
    Message,
    Source,
    Unset,
)
from ._reads import SessionReads


class SessionWrites(SessionReads, abc.ABC):
    """The write half of a :class:`~convostore.Session`: each call is one transaction, its
    change events emitted after the commit."""

    _writer: Writer

    @abc.abstractmethod
    def _after_insert(self) -> None:
        """Called after a write that inserted a row (automatic compaction looks then)."""

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


"""The write pipeline of one session: prepare a message, then one transaction per write.

Preparing (validate, sanitise, strip reserved metadata, move media out of line, cut into
continuation slices, stamp a token estimate) happens before any transaction opens, so bad input
writes nothing. Each write is then one backend write scope: the row, its continuation rows,
payload references, search-index entries and the write's change-log row commit together; each
write returns its change-log position (its cursor). Change events are the caller's
(:class:`~convostore.Session`), after commit.
"""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, NamedTuple

from .. import attachments, codec
from .._core import StoreCore
from ..backends.base import Ops
from ..backends.rows import Appended, CompactionRow, Link, NewRow, link_parent
from ..errors import InvalidArgument, InvalidMessage
from ..limits import check_id, check_text
from ..model import Message, Source, StoredCompaction, Unset
from ..tokens import estimate_row_tokens
from ._borrowed import check_pointers
from ._rows import reassemble
from ._tree import kept_ancestors

if TYPE_CHECKING:
    from ..feed._changes import Logged

_SOURCES: tuple[Source, ...] = ("server", "client")


def now_ms() -> int:
    """The wall clock in epoch milliseconds."""
    return int(time.time() * 1000)


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds (``2026-01-02T03:05:00.000Z``)."""
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def stored_compaction(row: CompactionRow) -> StoredCompaction:
    """A compaction row as the API returns it (ISO timestamp)."""
    return StoredCompaction(
        id=row.id,
        summary=row.summary,
        from_message_id=row.from_message_id,
        to_message_id=row.to_message_id,
        created_at=iso_ms(row.created_at),
    )


_LEAF = Link("leaf")  # the usual link: one tuple for every append


def _link(parent_id: str | None | Unset, *, verbatim: bool) -> Link:
    """Where a new row goes: omitted, the active leaf (the leaf ``set_active_leaf`` chose,
    else the newest row); verbatim, as given; empty or None, a new root; otherwise under the
    given id when it is a row of the session, else a new root."""
    if isinstance(parent_id, Unset):
        return _LEAF
    if verbatim:
        return Link("given", parent_id)
    return Link("known", parent_id) if parent_id else Link("given", None)


class Prepared(NamedTuple):  # a tuple: built on every write, cheaper than a frozen dataclass
    """A message ready to write: what reads return, and what the rows hold."""

    message: Message  # the prepared message, inline form: what reads return
    slices: list[str]
    content_bytes: int
    payloads: list[attachments.Payload]
    hashes: list[str]
    estimate: int


def one_row(prep: Prepared) -> bool:
    """Whether a prepared message is one row without payloads (``Ops.append_row``'s kind)."""
    return len(prep.slices) == 1 and not prep.hashes and not prep.payloads


class BatchRow(NamedTuple):
    """One message of :meth:`Writer.insert_batch`: prepared, with its parent and time."""

    prep: Prepared
    parent_id: str | None | Unset
    """As for :meth:`Writer.insert`: UNSET is the newest row (the previous one of the batch)."""
    created_at: int


class Rewrite(enum.Enum):
    """The outcome of :meth:`Writer.rewrite`."""

    ABSENT = "absent"
    """No message with that id in the session: nothing written."""
    UNCHANGED = "unchanged"
    """The stored text is already the same: nothing written."""
    WRITTEN = "written"
    """The row was replaced."""


class Writer:
    """Prepares and writes the messages of one session."""

    def __init__(self, core: StoreCore, session_id: str) -> None:
        self._core = core
        self._backend = core.backend
        self._sid = session_id

    def prepare(
        self, message: Message, source: Source, *, sanitize: bool = True,
        estimate: int | None = None,
    ) -> Prepared:
        """Everything a write needs, computed before the transaction opens.

        :param estimate: the row's token estimate when it is already known (a restore keeps
            the dumped one); otherwise it is computed here.
        """
        if sanitize:
            if source not in _SOURCES:
                raise InvalidArgument("source", f"must be 'server' or 'client', not {source!r}")
            message = codec.sanitize_message(message)
            if source == "client":
                message = codec.strip_reserved_metadata(message, self._core.reserved_metadata_keys)
        text, encoded = codec.dumps_message(message)
        if source == "client" and attachments.POINTER_PREFIX in text:
            field = attachments.pointer_field(message)
            if field is not None:  # a reference would hand over bytes the client never sent
                raise InvalidMessage(field, "an attachment pointer is not accepted from a "
                                     "client (source='client'); send the media itself")
        payloads: list[attachments.Payload] = []
        hashes: list[str] = []
        if attachments.may_carry_media(text):
            stored, payloads, hashes = attachments.extract_attachments(message)
            if stored is not message:
                text = codec.dumps(stored)
                encoded = {}  # the estimate counts media inline, not the stored pointers
        slices = codec.split_content(text)
        return Prepared(
            message=message,
            slices=slices,
            content_bytes=codec.utf8_len(text),
            payloads=payloads,
            hashes=hashes,
            estimate=estimate_row_tokens(message, self._core.token_counter, encoded)
            if estimate is None else estimate,
        )

    def _stored_bytes(self, ops: Ops, prep: Prepared) -> int:
        if not prep.hashes:
            return prep.content_bytes
        sizes = {p.hash: len(p.data) for p in prep.payloads}
        missing = [h for h in prep.hashes if h not in sizes]
        if missing:
            sizes.update({h: size for h, (_t, size) in ops.attachment_meta(missing).items()})
        return prep.content_bytes + sum(
            attachments.base64_len(sizes[h]) for h in prep.hashes if h in sizes
        )

    def insert(
        self, prep: Prepared, parent_id: str | None | Unset, created_at: int, *, verbatim: bool
    ) -> int | None:
        """Insert a new row under ``parent_id`` (UNSET: the active leaf; ``verbatim``: as
        given, unchecked: an import, whose pointers are checked, see :mod:`._borrowed`); its
        change-log position. None, with nothing written, when the id already exists."""
        if not verbatim and one_row(prep):
            appended = self._append_row(prep, parent_id, created_at)
            if appended.inserted is not None:
                return self._core.changes.settled(appended.position) if appended.inserted \
                    else None
        with self._backend.write(self._sid) as ops:
            if verbatim:
                self._check_pointers(ops, [prep], ())
            logged = self.insert_in(ops, prep, parent_id, created_at, verbatim=verbatim)
        return None if logged is None else logged.committed()

    def _append_row(self, prep: Prepared, parent_id: str | None | Unset,
                    created_at: int) -> Appended:
        """The usual append (one row, no payload) as one engine operation, which an engine
        may send in one round trip (``Ops.append_row``). Its statements go one by one, so the
        engine may run them without transaction statements of their own
        (``locked_statements``): on PostgreSQL the session's lock and the append, committed by
        the pipeline's sync."""
        with self._backend.write(self._sid, locked_statements=True) as ops:
            done = self._append_op(ops, prep, parent_id, created_at, decline=True)
        return done()

    def _append_op(self, ops: Ops, prep: Prepared, parent_id: str | None | Unset,
                   created_at: int, *, decline: bool) -> Callable[[], Appended]:
        sid, msg = self._sid, prep.message
        mid = msg["id"]
        # seq, parent, chained and run_bytes: the engine's (it reads the newest row)
        row = NewRow(sid, mid, 0, None, msg["role"], prep.slices[0], 0, prep.estimate,
                     created_at, prep.content_bytes, False, 0)
        change = self._core.changes.entry("append", sid, message_id=mid, leaf_id=mid)
        index = self._core.search_index
        # the text the index holds for the stored form (no payload: the message itself)
        return ops.append_row(row, _link(parent_id, verbatim=False),
                              lambda: index.text(ops, msg), change, decline)

    def append_in(
        self, ops: Ops, prep: Prepared, parent_id: str | None, created_at: int
    ) -> Callable[[], int | None] | None:
        """:meth:`insert_in` as one engine operation (``Ops.append_row``: an engine may send
        it with the scope's other statements, no round trip of its own) for a message of one
        row without payloads; None, with nothing done, for any other message.

        The engine may not decline here: where it cannot tell whether to index the row, it
        fails the scope with :class:`~.backends.base.ScopeRetry` (run the scope again). The
        result, called once the scope has committed: the change's position (watchers
        woken), or None when the id was already stored."""
        if not one_row(prep):
            return None
        done = self._append_op(ops, prep, parent_id, created_at, decline=False)
        changes = self._core.changes

        def settled() -> int | None:
            appended = done()
            return changes.settled(appended.position) if appended.inserted else None

        return settled

    def insert_in(
        self, ops: Ops, prep: Prepared, parent_id: str | None | Unset, created_at: int, *,
        verbatim: bool,
    ) -> Logged | None:
        """:meth:`insert` inside a write scope the caller holds, which must serialise the
        writers of this session (``backend.write(session_id)``): so another write of the
        caller's commits with the message, or neither does. The change logged, whose
        :meth:`~convostore.feed._changes.Logged.committed` the caller calls once the scope has
        committed; None when the id already exists."""
        entries = self._insert_rows(ops, [BatchRow(prep, parent_id, created_at)],
                                    verbatim=verbatim)[1]
        if not entries:
            return None
        mid, parent = entries[0]
        return self._core.changes.log(
            ops, "import" if verbatim else "append", self._sid, message_id=mid,
            parent_id=parent, leaf_id=mid,  # the new row is the newest
        )

    def _insert_rows(
        self, ops: Ops, rows: Sequence[BatchRow], *, verbatim: bool
    ) -> tuple[list[int | None], list[tuple[str, str | None]]]:
        """The append, written once: new rows in order, inside the caller's write scope. Every
        insert but the engine's one-row fast path (:meth:`_append_row`) comes here: a single
        message, a batch, an import, a restore, the LangGraph mirror.

        Each row's parent follows :meth:`insert`'s rules: UNSET is the active leaf at that
        point (the chosen leaf or the newest row, then the row written before it), ``verbatim``
        takes the parent as given, otherwise an id unknown in the session makes a new root.
        One probe of the leaf (and, for several rows, one of the ids) serves all rows; the
        search index gets one call. Returns, for each row, its index among the rows written
        (None: its id was already stored, or came earlier in ``rows``), and the (id, parent)
        of each row written, for the change log (the caller's)."""
        sid = self._sid
        first = rows[0].prep.message["id"] if rows else ""
        exists, tail_id, seq, chosen, run, _ = ops.leaf_probe(sid, first)
        if len(rows) == 1:  # the probe answered for the one id: no second query
            present = {first} if exists else set()
            batch: list[NewRow] | None = None  # one row: inserted as it is built
        else:
            present = set(ops.seqs_of(sid, list(dict.fromkeys(r.prep.message["id"]
                                                              for r in rows))))
            batch = []  # several rows: sent at once
        leaf = chosen or tail_id
        slots: list[int | None] = []
        entries: list[tuple[str, str | None]] = []
        written: list[Prepared] = []
        write_row = self._write_row
        for prep, parent_id, created_at in rows:
            mid = prep.message["id"]
            if mid in present:
                slots.append(None)
                continue
            # the batch's own rows are known without a lookup
            parent = link_parent(
                _link(parent_id, verbatim=verbatim), tail_id, leaf,
                lambda pid: pid in present or ops.row_meta(sid, pid) is not None)
            seq += 1
            run = write_row(ops, prep, seq, parent, created_at,
                            parent is not None and parent == tail_id, run, batch)
            present.add(mid)
            tail_id = leaf = mid
            slots.append(len(entries))
            entries.append((mid, parent))
            written.append(prep)
        if written:
            if batch:
                ops.insert_messages(batch)
            self._index(ops, written)
            if verbatim:
                ops.bump_epoch(sid)
        return slots, entries

    def _write_row(
        self, ops: Ops, prep: Prepared, seq: int, parent: str | None, created_at: int,
        chained: bool, run_before: int, batch: list[NewRow] | None = None,
    ) -> int:
        """The rows of one new message: payloads, the message row, continuations, references
        (the search index is the caller's); its ``run_bytes`` (``run_before``: the newest
        row's). Shared by :meth:`insert` and :meth:`insert_batch`, which passes ``batch`` to
        collect the message rows and send them at once."""
        sid, msg = self._sid, prep.message
        for p in prep.payloads:
            ops.store_payload(p.hash, p.data, p.media_type)
        size = self._stored_bytes(ops, prep)
        row = NewRow(  # positional: this runs on every append
            sid, msg["id"], seq, parent, msg["role"], prep.slices[0], len(prep.slices) - 1,
            prep.estimate, created_at, size, chained, run_before + size,
        )
        if batch is None:
            ops.insert_message(row)
        else:
            batch.append(row)
        if len(prep.slices) > 1:
            ops.put_continuations(sid, msg["id"], prep.slices[1:])
        if prep.hashes:
            ops.add_refs(sid, msg["id"], prep.hashes)
        return row.run_bytes

    def _check_pointers(self, ops: Ops, preps: Sequence[Prepared],
                        brought: Collection[str]) -> None:
        """An import's pointers name payloads it brings (``brought``, or media of ``preps``)
        or ones the session references (:func:`._borrowed.check_pointers`)."""
        if any(len(p.hashes) > len(p.payloads) for p in preps):  # a pointer it does not carry
            carried = {pl.hash for p in preps for pl in p.payloads}
            check_pointers(ops, self._sid, [(p.message, p.hashes) for p in preps],
                           carried.union(brought))

    def insert_batch(self, rows: Sequence[BatchRow], *, verbatim: bool,
                     brought: Collection[str] = ()) -> list[int | None]:
        """Insert new rows in order, in one transaction (:meth:`_insert_rows`); for each, its
        change-log position when it was inserted, None when it was not (its id was already
        stored, or came earlier in ``rows``). The change log gets one entry per row written
        (an empty batch logs nothing). A ``verbatim`` batch (an import) may point at payloads
        ``brought`` (a dump's) besides its own media and the session's."""
        sid = self._sid
        with self._backend.write(sid) as ops:
            if verbatim:
                self._check_pointers(ops, [r.prep for r in rows], brought)
            slots, entries = self._insert_rows(ops, rows, verbatim=verbatim)
            logged = self._core.changes.log_messages(
                ops, "import" if verbatim else "append", sid, entries)
        cursors = logged.committed() if entries else []
        return [None if slot is None else cursors[slot] for slot in slots]

    def _index(self, ops: Ops, preps: Sequence[Prepared]) -> None:
        """Index new messages, if the full-text index exists."""
        index = self._core.search_index
        if index.ready(ops):
            index.add(ops, self._sid, [_stored_form(p) for p in preps])

    def rewrite(self, prep: Prepared) -> tuple[Rewrite, int | None]:
        """Write ``prep`` over its stored row (content only: parent, order and time stay);
        the outcome, and the change-log position when it wrote."""
        sid, msg = self._sid, prep.message
        mid = msg["id"]
        with self._backend.write(sid) as ops:
            meta = ops.row_meta(sid, mid)
            if meta is None:
                return Rewrite.ABSENT, None
            rows = ops.content_rows_by_seq(sid, [meta.seq])
            old = reassemble(ops, sid, rows).get(mid)
            if old == "".join(prep.slices):
                return Rewrite.UNCHANGED, None
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
            if self._core.search_index.ready(ops):
                self._core.search_index.replace(ops, sid, _stored_form(prep), old or "")
            if meta.token_estimate != prep.estimate or meta.bytes != new_bytes:
                ops.bump_epoch(sid)
            logged = self._core.changes.log(ops, "update", sid, message_id=mid)
        return Rewrite.WRITTEN, logged.committed()

    def exists(self, message_id: str) -> bool:
        """Is there a message with this id in the session? (One read scope.)"""
        with self._backend.read() as ops:
            return ops.row_meta(self._sid, message_id) is not None

    def delete(self, ids: Sequence[str]) -> int | None:
        """Delete rows, splicing each surviving child to its nearest kept ancestor; the
        change-log position, None when no id was there (nothing written)."""
        sid = self._sid
        doomed = set(ids)
        with self._backend.write(sid) as ops:
            parents = ops.parents(sid, list(ids))
            if not parents:
                return None
            present = list(parents)
            kept = kept_ancestors(parents)
            for child, parent in ops.children_of(sid, present):
                if child in doomed:
                    continue
                ops.set_parent(sid, child, kept.get(parent, parent))
            chosen = ops.chosen_leaf(sid)
            if chosen is not None and chosen in parents:  # the chosen leaf moves up, as children do
                ops.dir_set_leaf(sid, kept.get(chosen))
            self._core.search_index.remove(ops, sid, present)
            dropped = ops.drop_message_refs(sid, present)
            ops.delete_messages(sid, present)
            ops.collect(dropped)
            ops.bump_epoch(sid)
            logged = self._core.changes.log(
                ops, "delete", sid, message_ids=[i for i in ids if i in parents]
            )
        return logged.committed()

    def clear(self) -> int:
        """Delete every row, continuation, compaction and reference of the session; the
        change-log position."""
        sid = self._sid
        with self._backend.write(sid) as ops:
            self._core.search_index.clear(ops, sid)
            dropped = ops.drop_session_refs(sid)
            ops.clear_session(sid)
            ops.collect(dropped)
            ops.bump_epoch(sid)
            logged = self._core.changes.log(ops, "clear", sid, leaf_id=None)
        return logged.committed()

    def log_error(self, error: BaseException) -> int:
        """Log a failed compaction as an ``error`` change (a transaction of its own)."""
        with self._backend.write(self._sid) as ops:
            logged = self._core.changes.log(ops, "error", self._sid, error=error)
        return logged.committed()

    def add_compaction(
        self, summary: str, from_message_id: str, to_message_id: str, *,
        kind: str = "compaction",
    ) -> tuple[StoredCompaction, int]:
        """Check and store one overlay record; the session's epoch moves. Logged as ``kind``
        (``compact`` when :meth:`~convostore.Session.compact` stores it); returns the record
        and its change-log position."""
        check_text("summary", summary)  # a column of its own: no NUL, no lone surrogate
        check_id("from_message_id", from_message_id)
        check_id("to_message_id", to_message_id)
        sid = self._sid
        with self._backend.write(sid) as ops:
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
            logged = self._core.changes.log(
                ops, kind, sid, compaction=(row.id, from_message_id, to_message_id)
            )
        return stored_compaction(row), logged.committed()


def _stored_form(prep: Prepared) -> Message:
    """The message as stored (media replaced by references): what the search index reads."""
    return prep.message if not prep.hashes else codec.loads("".join(prep.slices))

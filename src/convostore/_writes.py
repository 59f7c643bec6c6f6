"""The write pipeline of one session: prepare a message, then one transaction per write.

Preparing (validate, sanitise, strip reserved metadata, move media out of line, cut into
continuation slices, stamp a token estimate) happens before any transaction opens, so bad input
writes nothing. Each write is then one backend write scope: the row, its continuation rows,
payload references and search-index entries commit together. Change events are the caller's
(:class:`~convostore.Session`), after commit.
"""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import NamedTuple

from . import codec
from ._core import StoreCore
from ._limits import check_id, check_text
from ._rows import reassemble
from .backends.base import CompactionRow, NewRow, Ops
from .errors import InvalidArgument, InvalidMessage
from .model import Message, Source, StoredCompaction, Unset
from .tokens import estimate_row_tokens

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


def kept_ancestors(parents: Mapping[str, str | None]) -> dict[str, str | None]:
    """For each doomed id (the keys of ``parents``, each mapped to its parent), the nearest
    ancestor that is not doomed: None when every ancestor is doomed.

    Each id is resolved once and remembered, so a run of any length costs one step per id, and
    there is no step limit: a cycle among doomed ids (possible only through verbatim imports)
    is noticed by the walk itself and resolves to None.
    """
    resolved: dict[str, str | None] = {}
    for start in parents:
        trail: list[str] = []
        on_trail: set[str] = set()
        node: str | None = start
        while node is not None and node in parents and node not in resolved:
            if node in on_trail:
                node = None  # a cycle: no kept ancestor
                break
            on_trail.add(node)
            trail.append(node)
            node = parents[node]
        answer = resolved[node] if node is not None and node in resolved else node
        for doomed in trail:
            resolved[doomed] = answer
    return resolved


class Prepared(NamedTuple):  # a tuple: built on every write, cheaper than a frozen dataclass
    """A message ready to write: what reads return, and what the rows hold."""

    message: Message  # the prepared message, inline form: what reads return
    slices: list[str]
    content_bytes: int
    payloads: list[codec.Payload]
    hashes: list[str]
    estimate: int


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

    def prepare(self, message: Message, source: Source, *, sanitize: bool = True) -> Prepared:
        """Everything a write needs, computed before the transaction opens."""
        if sanitize:
            if source not in _SOURCES:
                raise InvalidArgument("source", f"must be 'server' or 'client', not {source!r}")
            message = codec.sanitize_message(message)
            if source == "client":
                message = codec.strip_reserved_metadata(message, self._core.reserved_metadata_keys)
        text, encoded = codec.dumps_message(message)
        if source == "client" and codec.POINTER_PREFIX in text:
            field = codec.pointer_field(message)
            if field is not None:  # a reference would hand over bytes the client never sent
                raise InvalidMessage(field, "an attachment pointer is not accepted from a "
                                     "client (source='client'); send the media itself")
        payloads: list[codec.Payload] = []
        hashes: list[str] = []
        if codec.may_carry_media(text):
            stored, payloads, hashes = codec.extract_attachments(message)
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
            estimate=estimate_row_tokens(message, self._core.token_counter, encoded),
        )

    def _stored_bytes(self, ops: Ops, prep: Prepared) -> int:
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
        if not self._core.search_index.ready(ops):
            return
        mid = message["id"]
        if replace:
            ops.fts_delete(self._sid, [mid])
        text = self._core.index_text(message)
        if text:
            ops.fts_insert([(self._sid, mid, message["role"], text)])

    def insert(
        self, prep: Prepared, parent_id: str | None | Unset, created_at: int, *, verbatim: bool
    ) -> bool:
        """Insert a new row under ``parent_id`` (UNSET: the active leaf; ``verbatim``: as
        given, unchecked). False, with nothing written, when the id already exists."""
        sid, msg = self._sid, prep.message
        with self._backend.write(sid) as ops:
            exists, tail_id, max_seq = ops.append_probe(sid, msg["id"])
            if exists:
                return False
            seq = max_seq + 1
            parent: str | None
            if isinstance(parent_id, Unset):
                parent = tail_id
            elif verbatim:
                parent = parent_id
            elif not parent_id:
                parent = None
            else:
                # the tail is known to exist: integrations name it on every append
                known = parent_id == tail_id or ops.row_meta(sid, parent_id) is not None
                parent = parent_id if known else None
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
            return True

    def rewrite(self, prep: Prepared) -> Rewrite:
        """Write ``prep`` over its stored row (content only: parent, order and time stay)."""
        sid, msg = self._sid, prep.message
        mid = msg["id"]
        with self._backend.write(sid) as ops:
            meta = ops.row_meta(sid, mid)
            if meta is None:
                return Rewrite.ABSENT
            rows = ops.content_rows_by_seq(sid, [meta.seq])
            old = reassemble(ops, sid, rows).get(mid)
            if old == "".join(prep.slices):
                return Rewrite.UNCHANGED
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
            return Rewrite.WRITTEN

    def exists(self, message_id: str) -> bool:
        """Is there a message with this id in the session? (One read scope.)"""
        with self._backend.read() as ops:
            return ops.row_meta(self._sid, message_id) is not None

    def delete(self, ids: Sequence[str]) -> None:
        """Delete rows, splicing each surviving child to its nearest kept ancestor."""
        sid = self._sid
        doomed = set(ids)
        with self._backend.write(sid) as ops:
            parents = ops.parents(sid, list(ids))
            if not parents:
                return
            present = list(parents)
            kept = kept_ancestors(parents)
            for child, parent in ops.children_of(sid, present):
                if child in doomed:
                    continue
                ops.set_parent(sid, child, kept.get(parent, parent))
            if self._core.search_index.ready(ops):
                ops.fts_delete(sid, present)
            dropped = ops.drop_message_refs(sid, present)
            ops.delete_messages(sid, present)
            ops.collect(dropped)
            ops.bump_epoch(sid)

    def clear(self) -> None:
        """Delete every row, continuation, compaction and reference of the session."""
        sid = self._sid
        with self._backend.write(sid) as ops:
            if self._core.search_index.ready(ops):
                ops.fts_clear(sid)
            dropped = ops.drop_session_refs(sid)
            ops.clear_session(sid)
            ops.collect(dropped)
            ops.bump_epoch(sid)

    def add_compaction(
        self, summary: str, from_message_id: str, to_message_id: str
    ) -> StoredCompaction:
        """Check and store one overlay record; the session's epoch moves."""
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
        return stored_compaction(row)

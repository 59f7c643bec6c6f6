"""The rows and results the engine operations exchange with the code above them.

Plain values (named tuples, frozen dataclasses, a few tuple and callable aliases): what
:class:`~convostore.backends.base.Ops` takes and returns, and nothing of a driver. The contract
itself is in :mod:`.base`.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple


@dataclass(frozen=True)
class RowMeta:
    """A message row without its content."""

    id: str
    seq: int
    parent_id: str | None
    role: str
    content_chunks: int
    token_estimate: int
    bytes: int


class PathRow(NamedTuple):
    """One row of a content-free path walk."""

    id: str
    parent_id: str | None
    role: str
    bytes: int
    token_estimate: int
    seq: int


@dataclass(frozen=True)
class PathArrays:
    """A path root → leaf held compactly: three parallel arrays of 8-byte integers.

    A full read of a 100,000-message branch keeps this (2.4 MB) and one window, nothing more.
    """

    seqs: array[int]
    bytes: array[int]
    tokens: array[int]

    def __len__(self) -> int:
        return len(self.seqs)

    def without(self, seqs: Iterable[int]) -> PathArrays:
        """The path less the rows at ``seqs``."""
        drop = set(seqs)
        kept = [i for i, s in enumerate(self.seqs) if s not in drop]
        return PathArrays(
            array("q", (self.seqs[i] for i in kept)),
            array("q", (self.bytes[i] for i in kept)),
            array("q", (self.tokens[i] for i in kept)),
        )


class ContentRow(NamedTuple):
    """A message row's first slice and how many continuation rows follow it."""

    id: str
    parent_id: str | None
    seq: int
    content: str
    content_chunks: int
    created_at: int


Tail = tuple[str, int]
"""A session's newest row, ``(id, seq)``: the active leaf when nothing else is stored. A plain
tuple, as the driver returns it: reads of it run on every append and newest-first read."""


AppendProbe = tuple[bool, "str | None", int]
"""What an append needs to know, read in one statement: ``(exists, tail_id, max_seq)`` — a row
with the new message's id is already stored; the session's newest row (the default parent, None
when empty); the highest seq (0 when empty), the new row taking the next. A plain tuple: it is
built on every append."""


class Suffix(NamedTuple):
    """The newest rows of a path that fit a byte budget (:meth:`Ops.suffix`)."""

    leaf_id: str | None
    """The path's leaf, None when the session is empty."""
    window: PathArrays
    """The rows that fit, root side first."""
    beyond: str | None
    """The first older row that did not fit, None when the window reaches a root."""
    rows: list[ContentRow]
    """The window's rows with their content, in the window's order."""


RowSize = tuple[str, "str | None", int, int]
"""A message row's place and stored size without its content: ``(id, parent_id, seq, bytes)``,
as the driver returns the row (a budgeted read sizes 32 of them per call)."""


class Continuation(NamedTuple):
    """One continuation slice of a message (``idx`` from 1)."""

    id: str
    idx: int
    content: str


class AttachmentMeta(NamedTuple):
    """A stored payload's media type and size in bytes."""

    media_type: str
    bytes: int


class SessionTotals(NamedTuple):
    """One session's message count, stored bytes and newest ``created_at``."""

    session_id: str
    messages: int
    bytes: int
    last_write: int


class ScannedRow(NamedTuple):
    """A message row of any session, as a key-order scan of every session returns it."""

    session_id: str
    row: ContentRow
    role: str


@dataclass(frozen=True)
class CompactionRow:
    """A stored compaction record."""

    id: str
    seq: int
    summary: str
    from_message_id: str
    to_message_id: str
    created_at: int


class NewRow(NamedTuple):
    """Everything a message insert writes into the message row (a tuple: one per write)."""

    session_id: str
    id: str
    seq: int
    parent_id: str | None
    role: str
    content: str
    content_chunks: int
    token_estimate: int
    created_at: int
    bytes: int
    chained: bool
    """The parent is the row written just before this one (``seq - 1``): the usual append.
    Such rows stay out of the parent index; their child relation is found by ``seq``."""
    run_bytes: int
    """The session's stored bytes up to and including this row: the newest row's
    ``run_bytes`` before it plus ``bytes`` (the directory reads its totals from the newest row)."""


class LeafProbe(NamedTuple):
    """What an insert reads first, in one statement (:meth:`Ops.leaf_probe`)."""

    exists: bool
    """A row with the id being inserted is already stored."""
    tail_id: str | None
    """The newest row's id (None: no rows)."""
    max_seq: int
    """The highest seq (0: no rows)."""
    chosen: str | None
    """The leaf ``set_active_leaf`` chose, or None."""
    tail_run: int
    """The newest row's ``run_bytes`` (0: no rows)."""
    quiet: int | None = None
    """The latest message time at which the directory note of an insert would change nothing
    (:data:`convostore.directory._sql.NOTE_QUIET`), or None: note every insert (an engine that does
    not
    read it)."""


class Link(NamedTuple):
    """Where :meth:`Ops.append_row` puts a new row: the rule the caller chose, and its id.

    - ``"leaf"``: under the session's active leaf (the leaf ``set_active_leaf`` chose, else the
      newest row; a new root in an empty session); ``parent_id`` unused;
    - ``"given"``: under ``parent_id`` as it is (None: a new root), unchecked;
    - ``"known"``: under ``parent_id`` when a row of the session has that id, else a new root.
    """

    rule: Literal["leaf", "given", "known"]
    parent_id: str | None = None


def link_parent(
    link: Link, tail: str | None, chosen: str | None, known: Callable[[str], bool]
) -> str | None:
    """The parent ``link`` names, given the session's newest row ``tail``, its chosen leaf
    ``chosen`` and a test that an id is a row of the session (asked only when needed)."""
    if link.rule == "leaf":
        return chosen or tail
    parent = link.parent_id
    if link.rule == "given" or parent is None:
        return parent
    return parent if parent == tail or known(parent) else None


class Appended(NamedTuple):
    """What :meth:`Ops.append_row` did, read once its scope committed."""

    inserted: bool | None
    """True: written; False: the id was already stored, nothing written; None: the engine
    declined (nothing written), the caller writes the row the general way."""
    position: int | None
    """The logged change's position (None when nothing was logged)."""


@dataclass(frozen=True)
class FtsHit:
    """A full-text hit as the engine ranks it (best first): its message row, whose stored
    text (``content``, then ``content_chunks`` continuation rows) the caller reads the hit's
    text from (the index keeps no copy of it)."""

    session_id: str
    id: str
    role: str
    content: str
    content_chunks: int
    created_at: int


OldTexts = Callable[[Sequence[str]], Mapping[str, str]]
"""``old_texts(ids)``: the text each of these messages of the session is indexed with, by id,
computed from its stored row (for an engine that must name an entry's words to remove it)."""


class ChangeRow(NamedTuple):
    """One change a write scope logs (:meth:`Ops.log_change`); written just before its commit."""

    session_id: str
    kind: str
    message_id: str | None
    parent_id: str | None
    leaf_id: str | None
    data: str | None
    """The kind's other fields as compact JSON text, or None."""
    created_at: int


class StoredChange(NamedTuple):
    """A logged change as :meth:`Ops.changes_after` reads it: its position, then the row."""

    pos: int
    session_id: str
    kind: str
    message_id: str | None
    parent_id: str | None
    leaf_id: str | None
    data: str | None
    created_at: int


class LeaseRow(NamedTuple):
    """A session's automatic-compaction lease: who holds it and until when (epoch ms), and the
    backoff (failed attempts in a row, no new attempt before ``retry_at``)."""

    holder: str
    expires_at: int
    attempts: int
    retry_at: int


Position = Callable[[], int]
"""The log position of a change logged in a write scope; call it once the scope committed."""

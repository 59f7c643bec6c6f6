"""What a storage engine must offer: a narrow set of SQL operations, and transactions around them.

A backend knows its engine and SQL, nothing about messages: the behaviour (parent resolution,
splicing, overlays, attachments, budgets) lives in :mod:`convostore.session`, written once.

- :class:`Backend` opens :meth:`~Backend.read` and :meth:`~Backend.write` scopes. A write scope is
  one transaction that also serialises writers of the same session (SQLite: ``BEGIN IMMEDIATE``;
  PostgreSQL: a transaction-scoped advisory lock on the session id), so the next ``seq`` and the
  active leaf can be derived from rows inside it.
- :class:`Ops` is what a scope yields: the operations themselves.
- :class:`Engine` is what an engine module declares about itself for the registry
  (:mod:`._engines`): the URLs it takes, its options, its worker model, its schema as data, how
  it opens a :class:`Backend`. ``docs/engines.md`` walks through adding one.
- ``_marks`` and ``_batches`` split key lists into ``IN (?, ...)`` batches for the shared SQL.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeVar

if TYPE_CHECKING:  # types only: both modules build on this one
    from ..legacy._sql import LegacySql
    from ._migrate import Migrations

_T = TypeVar("_T")

SHARED_ACROSS_PROCESSES = "shared_across_processes"
"""Capability: several processes (or machines) may open the same store at once."""

# Helpers of the shared SQL, here because both _sql and _registry (which _sql imports) use them.

_IN_BATCH = 500
"""Most keys in one ``IN (...)`` list, below every engine's parameter limit."""


def _marks(n: int) -> str:
    """``n`` comma-separated ``?`` placeholders."""
    return ",".join("?" * n)


def _batches(items: Sequence[_T]) -> Iterator[Sequence[_T]]:
    """``items`` in consecutive slices of at most :data:`_IN_BATCH`."""
    for i in range(0, len(items), _IN_BATCH):
        yield items[i : i + _IN_BATCH]


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


class ScopeRetry(Exception):
    """A write scope was rolled back for a reason that running it again resolves: an
    :meth:`Ops.append_row` that may not decline met a schema this process had not seen (the
    search table, made meanwhile by another process). Nothing was written; the engine knows
    now, and the same scope run again succeeds."""


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


class ChangeSignal(Protocol):
    """How an engine tells that another connection (or process) may have committed a change."""

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True when a change may have committed since the
        last call (a spurious True is allowed, a missed change is not, once running)."""
        ...

    def close(self) -> None:
        """Release what the signal holds (a connection); idempotent."""
        ...


class Ops(Protocol):
    """The operations available inside a read or write scope."""

    @property
    def legacy(self) -> LegacySql:
        """The engine's SQL for lifting the reference system's tables
        (:mod:`convostore.legacy._sql`)."""
        ...

    # -- catalog -------------------------------------------------------------------------------
    def existing_tables(self, names: Sequence[str]) -> set[str]:
        """Which of the tables ``names`` exist in the store's database (or schema)."""
        ...

    # -- reads ---------------------------------------------------------------------------------
    def tail(self, session_id: str) -> Tail | None: ...
    def append_probe(self, session_id: str, id: str) -> AppendProbe: ...
    def row_meta(self, session_id: str, id: str) -> RowMeta | None: ...
    def continuations(self, session_id: str, ids: Sequence[str]) -> list[Continuation]: ...
    def children(self, session_id: str, parent_id: str) -> list[ContentRow]: ...
    def roots(self, session_id: str) -> list[ContentRow]: ...
    def path(self, session_id: str, leaf_id: str) -> PathArrays: ...
    def path_rows(self, session_id: str, leaf_id: str) -> list[PathRow]: ...
    def suffix(self, session_id: str, leaf_id: str | None, budget: int) -> Suffix: ...
    def seqs_of(self, session_id: str, ids: Sequence[str]) -> dict[str, int]: ...
    def rows_below(
        self, session_id: str, upto: int | None, limit: int, max_bytes: int
    ) -> list[ContentRow]: ...
    def newest_rows(
        self, session_id: str, leaf_id: str | None, limit: int, max_bytes: int
    ) -> tuple[list[ContentRow], bool]: ...
    def chain_heads(self, session_id: str, limit: int) -> list[tuple[int, int | None]]: ...
    def newest_sizes(self, session_id: str, limit: int) -> list[RowSize]: ...
    def content_rows_by_seq(
        self, session_id: str, seqs: Sequence[int], max_bytes: int | None = None
    ) -> list[ContentRow]: ...
    def session_summaries(self) -> list[SessionTotals]: ...
    def walk_up(
        self, session_id: str, leaf_id: str, stop_id: str, limit: int
    ) -> list[PathRow]: ...
    def compactions(self, session_id: str) -> list[CompactionRow]: ...
    def epoch(self, session_id: str) -> int: ...
    def attachment_meta(self, hashes: Sequence[str]) -> dict[str, AttachmentMeta]: ...
    def attachment_data(self, hashes: Sequence[str]) -> dict[str, bytes]: ...
    def stats(self) -> dict[str, int]: ...
    def scan_rows(self, after: tuple[str, str] | None, limit: int) -> list[ScannedRow]: ...

    # -- full-text index -----------------------------------------------------------------------
    def fts_exists(self) -> bool: ...
    def fts_create(self) -> None: ...
    def fts_insert(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """Index ``(session_id, id, text)`` entries of stored messages; a message that already
        has an entry keeps it (an entry is current: a rewrite removes it first). The text holds
        no NUL and no lone surrogate (the caller replaced them by spaces)."""
        ...

    def fts_delete(self, session_id: str, ids: Sequence[str], old_texts: OldTexts) -> None:
        """Remove the entries of these messages (still stored) of the session, if any."""
        ...

    def fts_clear(self, session_id: str, old_texts: OldTexts) -> None:
        """Remove the entries of every message (still stored) of the session."""
        ...

    def fts_definition(self) -> str | None:
        """What the index holds for a message, as recorded when it was created (text the
        caller chose), None when nothing was recorded."""
        ...

    def fts_set_definition(self, definition: str) -> None:
        """Record what the index holds for a message."""
        ...
    def fts_cursor(self) -> str | None:
        """The backfill cursor of an index being built (text the caller chose), None when no
        backfill is pending (a complete index, or none)."""
        ...
    def fts_set_cursor(self, cursor: str | None) -> None:
        """Record the backfill cursor (None: remove it, the backfill is complete)."""
        ...
    def fts_backlog(self, after: tuple[str, str] | None) -> int:
        """How many message rows :meth:`scan_rows` would still return after ``after``."""
        ...
    def fts_search(
        self, query: str, session_id: str | None, limit: int, all_words: bool
    ) -> list[FtsHit]:
        """Best hits for ``query`` (no NUL, no lone surrogate), in one session or all."""
        ...

    # -- writes --------------------------------------------------------------------------------
    def append_row(
        self, row: NewRow, link: Link, index: Callable[[], str], change: ChangeRow | None,
        decline: bool = True,
    ) -> Callable[[], Appended]:
        """Insert the message ``row`` (one row: no continuation, no payload) unless its id is
        stored in the session. Its ``seq``, ``parent_id``, ``chained`` and ``run_bytes`` are the
        engine's: the next seq, the parent ``link`` names, chained when that parent is the newest
        row, the newest row's ``run_bytes`` plus ``bytes``; the directory is noted as
        ``insert_message`` notes it. With it, in the same scope: its search-index entry when the
        index exists (``index()`` gives the text, as ``fts_insert`` takes it, asked only then;
        empty: none) and the change ``change`` (logged with the parent chosen). The answer is
        read once the scope has committed; an engine may send the whole write at once.

        :param decline: whether the engine may decline (``Appended.inserted`` None); if not,
            where it would have declined it fails the scope with :class:`ScopeRetry` instead,
            so the caller's other writes in the scope never commit without the row.
        """
        ...
    def insert_message(self, row: NewRow, quiet: int | None = None) -> None: ...
    def insert_messages(self, rows: Sequence[NewRow]) -> None: ...
    def update_message(
        self, session_id: str, id: str, role: str, content: str, content_chunks: int,
        token_estimate: int, bytes: int,
    ) -> None: ...
    def put_continuations(self, session_id: str, id: str, slices: Sequence[str]) -> None: ...
    def delete_continuations_from(self, session_id: str, id: str, first_idx: int) -> None: ...
    def set_parent(self, session_id: str, id: str, parent_id: str | None) -> None: ...
    def parents(self, session_id: str, ids: Sequence[str]) -> dict[str, str | None]: ...
    def children_of(self, session_id: str, ids: Sequence[str]) -> list[tuple[str, str]]: ...
    def delete_messages(self, session_id: str, ids: Sequence[str]) -> None: ...
    def clear_session(self, session_id: str) -> None: ...
    def insert_compaction(self, session_id: str, row: CompactionRow) -> None: ...
    def next_compaction_seq(self, session_id: str) -> int: ...
    def bump_epoch(self, session_id: str) -> None: ...
    def store_payload(self, hash: str, data: bytes, media_type: str) -> None: ...
    def refs_of(self, session_id: str, message_id: str) -> set[str]: ...
    def session_refs(self, session_id: str, hashes: Sequence[str]) -> set[str]:
        """Those of ``hashes`` some message of ``session_id`` references."""
        ...
    def add_refs(self, session_id: str, message_id: str, hashes: Iterable[str]) -> None: ...
    def drop_refs(self, session_id: str, message_id: str, hashes: Iterable[str]) -> None: ...
    def drop_message_refs(self, session_id: str, ids: Sequence[str]) -> set[str]: ...
    def drop_session_refs(self, session_id: str) -> set[str]: ...
    def collect(self, hashes: Iterable[str]) -> None: ...

    # -- the directory of conversations (._directory_sql; rows in ENTRY_COLUMNS order) ---------
    def dir_recount(self) -> None: ...
    def leaf_probe(self, session_id: str, id: str) -> LeafProbe: ...
    def chosen_leaf(self, session_id: str) -> str | None: ...
    def active_leaf(self, session_id: str) -> Tail | None: ...
    def dir_set_leaf(self, session_id: str, leaf_id: str | None) -> None: ...
    def leaves(self, session_id: str) -> list[ContentRow]: ...
    def child_ids(self, session_id: str, parent_id: str) -> list[tuple[str, int]]: ...
    def root_ids(self, session_id: str) -> list[tuple[str, int]]: ...
    def row_facts(
        self, session_id: str, ids: Sequence[str]
    ) -> dict[str, tuple[str | None, int, int]]: ...
    def dir_get(self, session_id: str) -> tuple[Any, ...] | None: ...
    def dir_set(self, session_id: str, values: dict[str, Any], now: int) -> None: ...
    def dir_page(
        self, *, owner: str | None, metadata: Sequence[tuple[str, Any]],
        updated_from: int | None, updated_to: int | None, after: tuple[int, str] | None,
        limit: int,
    ) -> list[tuple[Any, ...]]: ...
    def dir_summaries(self) -> list[tuple[str, int, int, int]]: ...
    def dir_dependents(self, session_ids: Sequence[str]) -> list[str]: ...
    def dir_sizes(self, session_ids: Sequence[str]) -> dict[str, int]: ...
    def drop_sessions(self, session_ids: Sequence[str]) -> set[str]: ...
    def prune_candidates(
        self, *, now: int, idle_before: int | None, owner: str | None, expired: bool,
        after: tuple[int, str] | None, limit: int,
    ) -> list[tuple[str, int, int]]: ...
    def still_prunable(
        self, session_ids: Sequence[str], *, now: int, idle_before: int | None, expired: bool
    ) -> list[str]: ...
    # -- change log and compaction leases (:mod:`convostore.feed._sql`)
    # ------------------------------
    def log_change(self, row: ChangeRow) -> Position:
        """Log ``row`` with the write scope; it is written just before the commit."""
        ...
    def changes_after(
        self, after: int, limit: int, session_id: str | None
    ) -> list[StoredChange]: ...
    def change_horizon(self) -> int:
        """The highest position trimmed away (0 when none): a cursor below it lost changes."""
        ...
    def change_head(self) -> int: ...
    def change_top(self) -> int:
        """The newest committed position (the horizon when empty): no cursor lies beyond."""
        ...
    def trim_changes(self, upto: int, limit: int) -> int: ...
    def lease_get(self, session_id: str) -> LeaseRow | None: ...
    def lease_put(self, session_id: str, row: LeaseRow) -> None: ...

    # -- session registry (convostore.manager; rows in REGISTRY_COLUMNS order) ------------------
    def registry_exists(self) -> bool: ...
    def registry_create(self) -> None: ...
    def registry_insert(self, row: Sequence[Any]) -> None: ...
    def registry_get(self, id: str) -> tuple[Any, ...] | None: ...
    def registry_page(
        self, limit: int | None, after: tuple[int, str] | None
    ) -> list[tuple[Any, ...]]: ...
    def registry_known(self, ids: Sequence[str]) -> set[str]: ...
    def registry_count(self) -> int: ...
    def registry_touch(self, id: str, now: int) -> bool: ...
    def registry_set_name(self, id: str, name: str, now: int) -> bool: ...
    def registry_end(self, id: str, reason: str, now: int) -> bool: ...
    def registry_add_usage(
        self, id: str, input_tokens: int, output_tokens: int, cost: float, now: int
    ) -> bool: ...
    def registry_delete(self, id: str) -> bool: ...

    # -- whole-store dump (convostore.dump) -----------------------------------------------------
    def dump_session_ids(self, after: str | None, limit: int) -> list[str]: ...
    def dump_row_sizes(
        self, session_id: str, after_seq: int, limit: int
    ) -> list[tuple[int, int, int]]: ...
    def dir_dump_page(self, after: str | None, limit: int) -> list[tuple[Any, ...]]: ...
    def dir_dump_rows(self, session_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]: ...
    def dir_restore(self, session_id: str, values: Sequence[Any]) -> None: ...
    def restore_move_to_end(self, session_id: str, id: str) -> None: ...
    def restore_recount(self, session_id: str) -> None: ...


class Backend(Protocol):
    """A storage engine: opens scopes over its connection(s)."""

    url: str
    """The URL (or path) the store was opened with, passwords removed."""

    def read(self) -> AbstractContextManager[Ops]:
        """A scope for reads; not necessarily a transaction."""
        ...

    def write(
        self, session_id: str | None, *, session_lock: bool = True,
        locked_statements: bool = False,
    ) -> AbstractContextManager[Ops]:
        """One transaction that serialises writers of ``session_id`` (all sessions if None).

        :param session_lock: False: the scope excludes only the store-wide scopes (those of
            ``None``), for writes whose rows concurrent writers of the session cannot make
            inconsistent (each keyed, written with ``ON CONFLICT``); an engine may still
            serialise more.
        :param locked_statements: the body sends statements one by one (no batch of
            them) and, without ``session_lock``, only statements that take the store's
            shared lock themselves (the checkpointer's ``lg_put``) or need none (its
            ``lg_put_writes`` without payloads: no store-wide scope can tell the order):
            the engine may skip its transaction statements and all lock statements but the
            session's, the whole still all-or-nothing.
        """
        ...

    def close(self) -> None:
        """Release connections; later scopes raise :class:`~convostore.errors.StoreClosed`."""
        ...

    def change_signal(self) -> ChangeSignal | None:
        """A new signal of other connections' commits, for watchers; None when no other
        connection can write (an in-memory database)."""
        ...

    @property
    def capabilities(self) -> frozenset[str]:
        """Names of optional abilities (e.g. ``shared_across_processes``) for tests and users."""
        ...


@dataclass(frozen=True)
class OpenOptions:
    """The options of :meth:`~convostore.Sessions.open` that reach an engine.

    ``pool``, ``schema``, ``listen_url``, ``partitions`` and ``transaction_pooler`` are None
    unless given, and an engine that does not declare one of them refuses it
    (:attr:`Engine.options`); the others have defaults and an engine with no use for one
    ignores it.
    """

    pool: Any = None
    pool_size: int = 10
    schema: str | None = None
    partitions: int | None = None
    transaction_pooler: bool | None = None
    durability: Literal["normal", "full"] = "normal"
    busy_timeout: float = 30.0
    listen_url: str | None = None


@dataclass(frozen=True)
class Engine:
    """What an engine module declares about itself (its ``ENGINE``), read by :mod:`._engines`.

    Declaring must stay cheap: importing the module that holds the declaration must not import
    a driver that may be missing (that import belongs inside :attr:`open`).
    """

    name: str
    """Short name, e.g. ``"sqlite"``."""
    title: str
    """Name in messages, e.g. ``"SQLite"``."""
    forms: tuple[str, ...]
    """How the unknown-scheme error lists the URLs it takes, e.g. ``("postgresql://...",)``."""
    parse: Callable[[str], str | None]
    """The target (a path, a connection string) of a URL this engine takes, or None when the URL
    is not one of its; raises :class:`~convostore.errors.InvalidURL` for one of its malformed."""
    open: Callable[[str | None, OpenOptions], Backend]
    """Open a backend on a target (None: from ``options.pool``)."""
    workers: Callable[[object], int]
    """Worker threads :class:`~convostore.AsyncSessions` should use, given ``pool_size`` as the
    caller passed it (unchecked)."""
    capabilities: Callable[[str | None], frozenset[str]]
    """What a store opened on a target can do beyond the common API."""
    local_file: Callable[[str], str | None]
    """The file a target names on this machine, or None (in memory, a server)."""
    migrations: Migrations
    """Its schema as data (:mod:`._migrate`)."""
    has_store: Callable[[str], bool]
    """Whether a target already holds a convostore store (its schema table exists). Asking
    creates nothing and writes nothing: a missing file stays missing, an empty database stays
    empty (read-only tools ask this before :attr:`open`, which creates the schema). May import
    the driver; raises :class:`~convostore.errors.BackendError` when the target cannot be read."""
    options: frozenset[str] = frozenset()
    """Which of the optional options (``pool``, ``schema``, ``listen_url``, ``partitions``,
    ``transaction_pooler``) it takes."""
    paths: bool = False
    """Bare paths and :class:`os.PathLike` objects open with this engine (one engine: SQLite)."""
    requires: tuple[str, ...] = ()
    """Modules of an optional driver, imported before :attr:`open`; missing →
    :class:`~convostore.errors.MissingDependency` naming the first and :attr:`extra`."""
    extra: str = ""
    """The ``convostore[extra]`` that installs :attr:`requires`."""
    redact: Callable[[str], str] = lambda target: target
    """A target as messages show it: any password removed."""

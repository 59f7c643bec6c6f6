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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .rows import (
    Appended,
    AppendProbe,
    AttachmentMeta,
    ChangeRow,
    CompactionRow,
    ContentRow,
    Continuation,
    FtsHit,
    LeafProbe,
    LeaseRow,
    Link,
    NewRow,
    OldTexts,
    PathArrays,
    PathRow,
    Position,
    RowMeta,
    RowSize,
    ScannedRow,
    SessionTotals,
    StoredChange,
    Suffix,
    Tail,
)

if TYPE_CHECKING:  # types only: both modules build on this one
    from ..legacy._sql import LegacySql
    from ._migrate import Migrations

SHARED_ACROSS_PROCESSES = "shared_across_processes"
"""Capability: several processes (or machines) may open the same store at once."""

class ScopeRetry(Exception):
    """A write scope was rolled back for a reason that running it again resolves: an
    :meth:`Ops.append_row` that may not decline met a schema this process had not seen (the
    search table, made meanwhile by another process). Nothing was written; the engine knows
    now, and the same scope run again succeeds."""


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

    # -- the directory of conversations (directory/_sql.py; rows in ENTRY_COLUMNS order) ---
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

"""Sessions: opening a store from a URL, the per-id handle cache, the change feed, search.

A store owns one backend (one SQLite file, or one PostgreSQL pool) shared by every session in it.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

from ._core import Listener, StoreCore, reserved_keys
from ._options import StoreOptions, document_options
from .backends._engines import open_backend
from .backends.base import Backend
from .check import CheckReport, run_check
from .directory import _life
from .directory._life import Duration, Moment
from .directory._records import PruneResult, SessionPage
from .errors import StoreClosed
from .feed._changes import DEFAULT_LOG_SIZE, check_log_size
from .feed._watch import check_watch, watch
from .legacy._lift import lift
from .limits import check_id
from .model import Change, SearchResult, SessionSummary, StorageStats
from .session import Session
from .tokens import TokenCounter

__all__ = ["Listener", "Sessions", "StoreCore", "StoreOptions"]


class Sessions:
    """A conversation store: every session of one database.

    Open one with :meth:`open`; use it as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        reserved_metadata_keys: Iterable[str] = (),
        token_counter: TokenCounter | None = None,
        change_log_size: int | None = DEFAULT_LOG_SIZE,
        search_tool_output: bool = False,
    ) -> None:
        """Wrap an open backend (use :meth:`open` instead)."""
        self._core = StoreCore(backend, reserved_metadata_keys=reserved_metadata_keys,
                               token_counter=token_counter,
                               change_log_size=check_log_size(change_log_size),
                               search_tool_output=search_tool_output)
        # Handles live while a caller holds them; configured ones also in ``_kept`` (see session).
        self._sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._kept: dict[str, Session] = {}
        self._lock = threading.Lock()
        lift(self._core, self.session)  # tables of the reference system: one catalog query

    @classmethod
    @document_options
    def open(
        cls,
        url: str | os.PathLike[str] | None = None,
        *,
        reserved_metadata_keys: Iterable[str] = (),
        durability: Literal["normal", "full"] = "normal",
        busy_timeout: float = 30.0,
        token_counter: TokenCounter | None = None,
        pool: Any = None,
        pool_size: int = 10,
        schema: str | None = None,
        change_log_size: int | None = DEFAULT_LOG_SIZE,
        listen_url: str | None = None,
        partitions: int | None = None,
        transaction_pooler: bool | None = None,
        search_tool_output: bool = False,
    ) -> Sessions:
        """Open a store.

        :param url: a file path, ``sqlite:///relative.db``, ``sqlite:////absolute.db``,
            ``:memory:``, or ``postgresql://user@host/db`` (needs ``convostore[postgres]``).

        The other options are the fields of :class:`~convostore.store.StoreOptions` (the
        signature is checked against them), documented there and below.
        """
        return open_store(url, StoreOptions(
            reserved_metadata_keys=reserved_metadata_keys, durability=durability,
            busy_timeout=busy_timeout, token_counter=token_counter, pool=pool,
            pool_size=pool_size, schema=schema, change_log_size=change_log_size,
            listen_url=listen_url, partitions=partitions, transaction_pooler=transaction_pooler,
            search_tool_output=search_tool_output,
        ), cls)

    def __repr__(self) -> str:
        return self._core.describe()

    def __enter__(self) -> Sessions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store; later calls on it or its handles raise StoreClosed.

        A background compaction in progress is waited for (queued ones are dropped), watchers
        end (their iterators stop), then the connections close.
        """
        self._core.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._core.closed

    @property
    def capabilities(self) -> frozenset[str]:
        """What the backend can do beyond the common API (e.g. ``shared_across_processes``)."""
        return self._core.backend.capabilities

    @property
    def reserved_metadata_keys(self) -> tuple[str, ...]:
        """Metadata keys removed from ``source="client"`` writes (settable: later writes use
        the new keys)."""
        return self._core.reserved_metadata_keys

    @reserved_metadata_keys.setter
    def reserved_metadata_keys(self, keys: Iterable[str]) -> None:
        self._core.reserved_metadata_keys = reserved_keys(keys)

    @property
    def token_counter(self) -> TokenCounter | None:
        """A custom string token counter used for row stamps and summaries, or None
        (settable: later writes and estimates use the new counter)."""
        return self._core.token_counter

    @token_counter.setter
    def token_counter(self, counter: TokenCounter | None) -> None:
        self._core.token_counter = counter

    @property
    def core(self) -> StoreCore:
        """What every session of this store shares: backend, change feed, search index,
        settings (see :class:`convostore.store.StoreCore`).

        For convostore's own layers (the session manager, the context package, integrations)
        and for tests that look at storage; applications use the store's methods.
        """
        return self._core

    def session(self, session_id: str = "") -> Session:
        """The handle of one session (``""`` is the default); the same object for the same id.

        The cache is bounded: a handle is kept while the caller holds a reference to it, and for
        the store's lifetime once configured (:meth:`Session.on_compaction`,
        :meth:`Session.compact_after`, :meth:`Session.on_compaction_error`), so
        ``store.session("a").on_compaction(fn)`` still applies to later ``store.session("a")``.
        An unconfigured handle nobody holds is dropped; the next call makes a new one.
        """
        check_id("session_id", session_id)  # a string the store can hold (see limits.py)
        if self._core.closed:
            raise StoreClosed("the store is closed")
        with self._lock:
            handle = self._sessions.get(session_id)
            if handle is None:
                handle = Session(self._core, session_id, self, self._keep)
                self._sessions[session_id] = handle
            return handle

    def _keep(self, handle: Session, configured: bool) -> None:
        """Hold a configured handle strongly; release one whose configuration was cleared."""
        with self._lock:
            if configured:
                self._kept[handle.session_id] = handle
            elif self._kept.get(handle.session_id) is handle:
                del self._kept[handle.session_id]

    # --- change feed --------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` after every committed write of any session of this store.

        Listeners run in subscription order on the writing thread, after the commit; one that
        raises is logged and skipped. Returns a function that unsubscribes (idempotent).
        """
        return self._core.events.subscribe(listener)

    def changes(
        self, since: int = 0, *, limit: int = 100, session_id: str | None = None
    ) -> list[Change]:
        """The durable change log after the cursor ``since``: every process's committed
        writes, oldest first, at most ``limit`` (of one session if ``session_id`` is given).

        Resume by passing the last change's ``cursor`` back as ``since``. ``since=0`` reads
        from the start of what the log keeps. One indexed range read (PostgreSQL first reads
        which positions are still committing, and stops below them).

        :raises CursorExpired: ``since`` is older than the log (changes after it were trimmed,
            see ``change_log_size``): resync from :meth:`change_cursor`.
        """
        return self._core.changes.changes(since, limit, session_id)

    def watch(
        self, since: int | None = None, *, session_id: str | None = None,
        timeout: float | None = None,
    ) -> Iterator[Change]:
        """Iterate over the change log as it grows: each committed change of every process,
        in cursor order (never past a change that may still commit), blocking while there
        is none.

        :param since: the cursor to resume after (a :attr:`Change.cursor` the client kept);
            ``None`` starts at the newest change, so only what commits next is yielded.
        :param session_id: only this session's changes.
        :param timeout: end the iteration after this many seconds without a change (default:
            never; the iteration also ends when the store closes).

        Delivery is at least once: a client that saves the cursor of each change it handled
        and resumes from it sees every change once, none skipped or reordered; one that
        resumes from an older cursor sees some again (compare cursors to drop them).

        :raises CursorExpired: the cursor is older than the log (on the first step).
        """
        timeout = check_watch(since, session_id, timeout)
        return watch(self._core.changes, self._core.waker, since, session_id, timeout)

    def change_cursor(self) -> int:
        """The newest position of the change log (0 when nothing was logged): a client that
        takes it, then reads the state it shows, then watches from it misses nothing."""
        return self._core.changes.head()

    def wait_for_compactions(self, timeout: float | None = None) -> bool:
        """Block until the background work queued so far is done: automatic compactions
        (see :meth:`Session.compact_after`) and change-log trimming.

        :returns: False when ``timeout`` seconds passed first.
        """
        if timeout is not None and (isinstance(timeout, bool)
                                    or not isinstance(timeout, (int, float))):
            raise TypeError(f"timeout must be a number or None, not {type(timeout).__name__}")
        return self._core.background.wait(timeout)

    # --- search -------------------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Full-text search across every session; all words of ``query`` must match.

        Results carry their session id; best first. Builds the index on first use.
        """
        return self._core.search_index.search(query, limit=limit, session_id=None)

    def build_search_index(self, progress: Callable[[int, int], object] | None = None) -> int:
        """Build the full-text index now, unless it is complete, instead of on the first search.

        The build runs in short steps (a few hundred messages each, about 15 ms), each its own
        transaction, so writers of any session wait for at most one step; messages written
        during the build are indexed by their own writes. An interrupted build (a crash, a
        ``KeyboardInterrupt`` from ``progress``) resumes where it stopped on the next call or
        search. Several callers, in this process or others, share the work.

        :param progress: called as ``progress(done, total)`` after each step: messages indexed
            so far by this call, and how many it had to index when it began.
        :returns: how many messages this call indexed (0 when the index was complete).
        """
        return self._core.search_index.build(progress)

    # --- whole-store facts --------------------------------------------------------------------

    def storage_stats(self) -> StorageStats:
        """Counts and sizes of everything stored: messages, continuations, compactions, payloads."""
        with self._core.backend.read() as ops:
            return StorageStats(**ops.stats())

    def check(
        self, *, repair: bool = False, progress: Callable[[int, int], object] | None = None
    ) -> CheckReport:
        """Check every invariant of the stored data and report, by session, each one broken:
        a parent that does not exist, a loop of parents, continuation rows missing or out of
        order, a payload missing or referred to by nothing, references that disagree with the
        messages, a compaction whose ends left the tree, a directory row whose counts
        disagree, a search index out of step, a change log with a gap.

        Reads the whole store in bounded windows, a session at a time (writers go on
        meanwhile). See :mod:`convostore.check` for the kinds of problem.

        :param repair: then fix what can be fixed without losing a message (recount the
            directory, re-index, collect what nothing refers to, cut broken parent links);
            the report marks each problem fixed (:attr:`Problem.repaired`).
        :param progress: called as ``progress(done, total)`` after each session.
        :returns: a :class:`~convostore.check.CheckReport`; ``report.ok`` is True when the
            store is sound (nothing found, or everything found repaired).
        """
        return run_check(self._core, repair=repair, progress=progress)

    def list_sessions(self) -> list[SessionSummary]:
        """Every session that holds messages, by id, with its message count, size and last
        write (read from the directory; convostore's own ``convostore:*`` sessions left out).

        For pages, filters and the newest first, use :meth:`list_conversations`."""
        return _life.list_sessions(self._core)

    # --- the directory and a conversation's end -----------------------------------------------

    def list_conversations(
        self,
        *,
        owner: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        updated_after: Moment | None = None,
        updated_before: Moment | None = None,
        limit: int = _life.DEFAULT_PAGE,
        cursor: str | None = None,
    ) -> SessionPage:
        """One page of the directory: sessions newest ``updated_at`` first (ties: id
        descending), served by an index (no message is read).

        :param owner: only this owner's sessions (see :meth:`Session.update_info`).
        :param metadata: only sessions whose metadata holds each ``key: value`` (a string,
            number, bool or None; compared as JSON values).
        :param updated_after: only ``updated_at >= updated_after`` (``datetime`` or epoch ms).
        :param updated_before: only ``updated_at < updated_before``.
        :param limit: sessions per page (50).
        :param cursor: ``next_cursor`` of the previous page (same filters).
        :returns: a :class:`~convostore.SessionPage` (``sessions``, ``next_cursor``).

        Every session with data is listed: written to (no separate call), or described with
        :meth:`Session.update_info`, or registered by the session manager; never the
        ``convostore:*`` sessions that hold context data. Paging is by key: a page never
        repeats a session of an earlier page, and never skips a session that was not written
        while paging (a session written meanwhile moves to the front, where a new listing
        finds it).
        """
        return _life.list_conversations(
            self._core, owner=owner, metadata=metadata, updated_after=updated_after,
            updated_before=updated_before, limit=limit, cursor=cursor,
        )

    def delete_session(self, session_id: str) -> bool:
        """Delete a conversation and everything of it, in one transaction: messages,
        continuation rows, compactions, attachment references (payloads nobody else references
        are collected), search entries, its state and directory row, and every session that
        belongs to it (the context blocks and cached prompts :mod:`convostore.context` stored
        for it). Emits a ``delete_session`` event.

        :returns: True when the session had anything stored.
        """
        return _life.delete_session(self._core, session_id)

    def prune(
        self,
        *,
        older_than: Duration | None = None,
        owner: str | None = None,
        expired: bool = True,
        dry_run: bool = False,
        batch_size: int = _life.PRUNE_BATCH_SESSIONS,
        limit: int | None = None,
    ) -> PruneResult:
        """Delete idle and expired conversations, each as :meth:`delete_session` does.

        :param older_than: delete conversations whose ``updated_at`` is older than this
            (``timedelta`` or seconds); None: idle ones are kept.
        :param owner: only this owner's conversations.
        :param expired: also delete conversations past their ``expires_at`` (see
            :meth:`Session.update_info`).
        :param dry_run: delete nothing; return what would be deleted.
        :param batch_size: most conversations per transaction (also at most 2,000 message
            rows per transaction, unless one conversation alone holds more).
        :param limit: most conversations deleted by this call (None: all).

        Each batch is one short store-wide transaction, followed by a pause as long as it took,
        so other writers wait for at most one batch. Each candidate is checked again inside
        the batch's transaction: a conversation written since it was found is kept. Stopped
        part way (an error, an interrupt), it has deleted whole batches; calling it again
        goes on with what is left.
        """
        return _life.prune(self._core, older_than=older_than, owner=owner, expired=expired,
                                dry_run=dry_run, batch_size=batch_size, limit=limit)


def open_store(
    url: str | os.PathLike[str] | None, options: StoreOptions, cls: type[Sessions] = Sessions
) -> Sessions:
    """Open a store of class ``cls`` from ``url`` and ``options`` (what :meth:`Sessions.open`
    does; the async face and the integrations' shared stores call it with their options)."""
    log_size = check_log_size(options.change_log_size)  # refused before anything opens
    backend = open_backend(url, **options.engine_options())
    return cls(backend, **{**options.store_options(), "change_log_size": log_size})

"""Sessions: opening a store from a URL, the per-id handle cache, the change feed, search.

A store owns one backend (one SQLite file, or one PostgreSQL pool) shared by every session in it.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Literal

from ._core import Listener, StoreCore, reserved_keys
from ._legacy import lift
from ._limits import check_id
from .backends._engines import open_backend
from .backends.base import Backend
from .errors import StoreClosed
from .model import SearchResult, SessionSummary, StorageStats
from .session import Session
from .tokens import TokenCounter


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
        search_tool_output: bool = False,
    ) -> None:
        """Wrap an open backend (use :meth:`open` instead)."""
        self._core = StoreCore(backend, reserved_metadata_keys=reserved_metadata_keys,
                               token_counter=token_counter,
                               search_tool_output=search_tool_output)
        # Handles live while a caller holds them; configured ones also in ``_kept`` (see session).
        self._sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._kept: dict[str, Session] = {}
        self._lock = threading.Lock()
        lift(self._core, self.session)  # tables of the reference system: one catalog query

    @classmethod
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
        search_tool_output: bool = False,
    ) -> Sessions:
        """Open a store.

        :param url: a file path, ``sqlite:///relative.db``, ``sqlite:////absolute.db``,
            ``:memory:``, or ``postgresql://user@host/db`` (needs ``convostore[postgres]``).
        :param reserved_metadata_keys: metadata keys stripped from ``source="client"`` writes.
        :param durability: SQLite only: ``"normal"`` (WAL, synchronous=NORMAL; safe against a
            crash of the process) or ``"full"`` (fsync at every commit).
        :param busy_timeout: seconds a writer waits for another writer's lock.
        :param token_counter: a function counting the tokens of a string (e.g. tiktoken), used
            instead of the heuristic for row estimates and summaries.
        :param pool: PostgreSQL only: an open ``psycopg_pool.ConnectionPool`` to use instead of
            a URL (the store does not close it).
        :param pool_size: PostgreSQL only: most connections of the pool the store creates.
        :param schema: PostgreSQL only: the schema holding the tables (created if missing).
        :param search_tool_output: also index the text of tool results (a tool part's
            ``output``, or ``errorText``), so a search finds what tools returned. Off by
            default: it grows the index, by about the size of the tool outputs' text. It
            applies to what is indexed from then on (messages written, and an index built);
            open every store of one database with the same value.
        """
        backend = open_backend(url, pool=pool, pool_size=pool_size, schema=schema,
                               durability=durability, busy_timeout=busy_timeout)
        return cls(backend, reserved_metadata_keys=reserved_metadata_keys,
                   token_counter=token_counter, search_tool_output=search_tool_output)

    def __repr__(self) -> str:
        return self._core.describe()

    def __enter__(self) -> Sessions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store's connections; later calls on it or its handles raise StoreClosed."""
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
        settings (see :class:`convostore._core.StoreCore`).

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
        check_id("session_id", session_id)  # a string the store can hold (see _limits)
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

    def list_sessions(self) -> list[SessionSummary]:
        """Every session that holds messages, with its message count, size and last write."""
        with self._core.backend.read() as ops:
            return [SessionSummary(*row) for row in ops.session_summaries()]


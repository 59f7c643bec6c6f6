"""AsyncSessions: the store for asyncio applications, a mechanical shell over the sync core.

The behaviour is written once, in :mod:`convostore.session`; this module only moves each call to
a worker thread and awaits it. ``await async_session.get_message(id)`` runs
``Session.get_message(id)`` on the store's worker; :meth:`AsyncSession.history` pulls one message
per step from the sync generator running there, so a streamed read keeps the bounded-memory
property of the sync one. The event loop only waits.

Threads
    One :class:`~concurrent.futures.ThreadPoolExecutor` per store. SQLite gets one thread, which
    opens and owns the store's single connection. PostgreSQL gets one thread per pool connection
    (``pool_size``): each call borrows a connection for one transaction and mostly waits on the
    network, so that many calls can be in flight while the server serialises writers of one
    session. psycopg's async connections would save the threads but need a second copy of every
    backend operation; a thread pool needs none.

Callbacks
    Change listeners, compaction functions and ``on_compaction_error`` handlers may be
    ``async``. The core hands what they return to its awaiter, which for an async store
    submits it to the event loop that opened the store and waits on the worker thread for the
    result, so async callbacks run on your loop (where your model client lives) and the loop
    thread is never blocked. Plain listeners run on the worker thread, as in the sync API. While
    a worker waits for such a callback, new calls go to a few spare threads instead of queueing
    behind it, so a callback that calls the store again (or a slow summariser) cannot deadlock
    the store. A plain (sync) compaction function, by contrast, runs on the worker and holds it
    for as long as it takes when ``compact()`` is awaited: give the async store an async
    summariser. Automatic compaction never runs on the workers: it is a task of the store's
    loop (:class:`~convostore._background.LoopSpawn`) whose sync part runs in a thread of the
    loop's default executor.

Watching
    :meth:`AsyncSessions.watch` reads the change log on the workers one batch per step and
    waits for the next change on the loop (woken from the store's feed thread), so an idle
    watcher holds no thread.

Cancellation
    Each call is shielded: cancelling the awaiting task raises :class:`asyncio.CancelledError`
    in it at once, while the worker finishes the call. Every write is one transaction, so a
    cancelled write is either wholly stored (it had been submitted) or never started; a message
    is never half written.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import os
import weakref
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, Literal, TypeVar

from ._background import LoopSpawn
from ._core import Listener, StoreCore
from ._worker import Worker, WorkerIterator
from .backends._engines import worker_count
from .compaction import CompactFunction, CompactionFunction
from .directory import _life
from .directory._life import Duration, Moment
from .directory._records import (
    MessageRecord,
    PruneResult,
    SessionEntry,
    SessionPage,
    SiblingPosition,
)
from .feed._changes import DEFAULT_LOG_SIZE
from .feed._watch import awatch, check_watch
from .messages._history import WINDOW_BYTES
from .model import (
    UNSET,
    AppendResult,
    Change,
    CompactResult,
    ImportItem,
    Message,
    RecentHistory,
    RowStat,
    SearchResult,
    SessionSummary,
    Source,
    StorageStats,
    StoredCompaction,
    Unset,
)
from .session import Session
from .store import Sessions
from .tokens import TokenCounter

T = TypeVar("T")


class AsyncSessions:
    """Async twin of :class:`~convostore.Sessions`: the same store, its methods awaited.

    Open one with ``await AsyncSessions.open(url)`` or ``async with AsyncSessions.open(url) as
    store:``. The store belongs to the event loop that opened it: use it from that loop only.
    """

    def __init__(
        self,
        sync: Sessions,
        *,
        loop: asyncio.AbstractEventLoop,
        executor: concurrent.futures.ThreadPoolExecutor,
        workers: int,
    ) -> None:
        """Wrap an open sync store (use :meth:`open` instead).

        :param sync: the store every call is delegated to.
        :param loop: the event loop that owns the store; async callbacks run there.
        :param executor: the store's worker threads (the store shuts them down on close).
        :param workers: how many threads ``executor`` has.
        """
        self._sync = sync
        self._worker = Worker(loop, executor, workers)
        # Weak: a wrapper carries no state of its own (configuration lives on the sync handle,
        # which the sync store keeps once configured), so one nobody holds may go.
        self._handles: weakref.WeakValueDictionary[str, AsyncSession] = (
            weakref.WeakValueDictionary()
        )
        self._close_future: asyncio.Future[None] | None = None
        sync.core.awaiter = self._worker.await_on_loop
        self._spawn = LoopSpawn(loop)  # automatic compactions: tasks of this loop
        sync.core.background.spawn = self._spawn

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
        change_log_size: int | None = DEFAULT_LOG_SIZE,
        listen_url: str | None = None,
        partitions: int | None = None,
        transaction_pooler: bool | None = None,
        search_tool_output: bool = False,
    ) -> _Opening:
        """Async twin of :meth:`Sessions.open <convostore.Sessions.open>`, same options.

        The database is opened on the store's worker thread, so the loop is not blocked.
        Returns an awaitable that is also an async context manager (closing the store on exit):
        ``store = await AsyncSessions.open(...)`` or ``async with AsyncSessions.open(...) as
        store:``.
        """
        opener = functools.partial(
            Sessions.open,
            url,
            reserved_metadata_keys=reserved_metadata_keys,
            durability=durability,
            busy_timeout=busy_timeout,
            token_counter=token_counter,
            pool=pool,
            pool_size=pool_size,
            schema=schema,
            change_log_size=change_log_size,
            listen_url=listen_url,
            partitions=partitions,
            transaction_pooler=transaction_pooler,
            search_tool_output=search_tool_output,
        )
        workers = worker_count(url, pool=pool, pool_size=pool_size)
        return _Opening(functools.partial(cls._open, opener, workers))

    @classmethod
    async def _open(cls, opener: Callable[[], Sessions], workers: int) -> AsyncSessions:
        loop = asyncio.get_running_loop()
        executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="convostore-worker"
        )
        future = loop.run_in_executor(executor, opener)
        try:
            sync = await asyncio.shield(future)
        except asyncio.CancelledError:
            # The open still completes on the worker: close what it opens, then the worker.
            def discard(done: asyncio.Future[Sessions]) -> None:
                if not done.cancelled() and done.exception() is None:
                    executor.submit(done.result().close)
                executor.shutdown(wait=False)

            future.add_done_callback(discard)
            raise
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(sync, loop=loop, executor=executor, workers=workers)

    def __repr__(self) -> str:
        return f"<AsyncSessions {self._sync!r}>"

    async def __aenter__(self) -> AsyncSessions:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Async twin of :meth:`Sessions.close`: calls already submitted finish, then it closes.

        Idempotent; later calls on the store or its handles raise :class:`StoreClosed`. (Do not
        await it inside one of the store's own async callbacks: it waits for that callback.)
        """
        if self._close_future is None:
            self._worker.closing = True
            self._close_future = asyncio.get_running_loop().run_in_executor(None, self._shutdown)
        await asyncio.shield(self._close_future)
        await self._spawn.drain()

    def _shutdown(self) -> None:
        # Blocking, off the loop: drain every worker, then close the connections.
        self._worker.shutdown()
        self._sync.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._worker.closing or self._sync.closed

    @property
    def capabilities(self) -> frozenset[str]:
        """What the backend can do beyond the common API (see :attr:`Sessions.capabilities`)."""
        return self._sync.capabilities

    @property
    def core(self) -> StoreCore:
        """The core of the wrapped sync store (see :attr:`Sessions.core`)."""
        return self._sync.core

    @property
    def sync(self) -> Sessions:
        """The sync :class:`~convostore.Sessions` this store wraps. Its calls block: from async
        code, run them with :meth:`run_sync`."""
        return self._sync

    async def run_sync(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run a blocking call (typically of :attr:`sync`) on the store's worker threads.

        How convostore's own async layers (the session manager, integrations) run several sync
        steps as one call. Shielded like every call: a cancelled caller leaves it running to
        completion.
        """
        return await self._worker.run(functools.partial(fn, *args, **kwargs))

    @property
    def reserved_metadata_keys(self) -> tuple[str, ...]:
        """Metadata keys removed from ``source="client"`` writes (settable, as on
        :class:`Sessions`)."""
        return self._sync.reserved_metadata_keys

    @reserved_metadata_keys.setter
    def reserved_metadata_keys(self, keys: Iterable[str]) -> None:
        self._sync.reserved_metadata_keys = keys

    @property
    def token_counter(self) -> TokenCounter | None:
        """The custom string token counter of the store, or None (settable, as on
        :class:`Sessions`)."""
        return self._sync.token_counter

    @token_counter.setter
    def token_counter(self, counter: TokenCounter | None) -> None:
        self._sync.token_counter = counter

    def session(self, session_id: str = "") -> AsyncSession:
        """The handle of one session, the same object for the same id; not awaited.

        Getting a handle does no I/O (as in the sync API), so it is a plain call:
        ``await store.session("support").append_message(...)`` reads naturally. The cache is
        bounded as in :meth:`Sessions.session <convostore.Sessions.session>`: a handle is kept
        while held, and its configuration for the store's lifetime.
        """
        handle = self._sync.session(session_id)
        cached = self._handles.get(session_id)
        if cached is None or cached.sync is not handle:
            cached = self._handles.setdefault(session_id, AsyncSession(self, handle))
        return cached

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Async twin of :meth:`Sessions.subscribe`; ``listener`` may be ``async``.

        An async listener is awaited on the loop that opened the store before the write call
        returns; a plain one runs on the worker thread (hand loop-bound work to
        ``loop.call_soon_threadsafe``). The returned unsubscribe function is plain.
        """
        return self._sync.subscribe(listener)

    async def changes(
        self, since: int = 0, *, limit: int = 100, session_id: str | None = None
    ) -> list[Change]:
        """Async twin of :meth:`Sessions.changes`."""
        return await self._worker.run(
            functools.partial(self._sync.changes, since, limit=limit, session_id=session_id)
        )

    def watch(
        self, since: int | None = None, *, session_id: str | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[Change]:
        """Async twin of :meth:`Sessions.watch`: ``async for change in store.watch(cursor)``.

        Each step reads on the store's workers; waiting for the next change holds no thread
        (the event loop is woken when a change commits). Not awaited: an async iterator.
        """
        timeout = check_watch(since, session_id, timeout)
        core = self._sync.core
        return awatch(self._worker.run, core.changes, core.waker, since, session_id, timeout)

    async def change_cursor(self) -> int:
        """Async twin of :meth:`Sessions.change_cursor`."""
        return await self._worker.run(self._sync.change_cursor)

    async def wait_for_compactions(self, timeout: float | None = None) -> bool:
        """Async twin of :meth:`Sessions.wait_for_compactions` (waits on a spare thread)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, functools.partial(self._sync.wait_for_compactions, timeout)
        )

    async def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Async twin of :meth:`Sessions.search`."""
        await self.build_search_index()
        return await self._worker.run(functools.partial(self._sync.search, query, limit=limit))

    async def build_search_index(
        self, progress: Callable[[int, int], object] | None = None
    ) -> int:
        """Async twin of :meth:`Sessions.build_search_index`: one step per worker call, so
        other calls of this store run between steps; ``progress`` runs on the loop."""
        done = 0
        index = self._sync.core.search_index
        if not index.built:
            async for done, total in WorkerIterator(self._worker, index.steps):
                if progress is not None:
                    progress(done, total)
        return done

    async def storage_stats(self) -> StorageStats:
        """Async twin of :meth:`Sessions.storage_stats`."""
        return await self._worker.run(self._sync.storage_stats)

    async def list_sessions(self) -> list[SessionSummary]:
        """Async twin of :meth:`Sessions.list_sessions`."""
        return await self._worker.run(self._sync.list_sessions)

    async def list_conversations(
        self,
        *,
        owner: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        updated_after: Moment | None = None,
        updated_before: Moment | None = None,
        limit: int = _life.DEFAULT_PAGE,
        cursor: str | None = None,
    ) -> SessionPage:
        """Async twin of :meth:`Sessions.list_conversations`."""
        return await self._worker.run(functools.partial(
            self._sync.list_conversations, owner=owner, metadata=metadata,
            updated_after=updated_after, updated_before=updated_before, limit=limit,
            cursor=cursor,
        ))

    async def delete_session(self, session_id: str) -> bool:
        """Async twin of :meth:`Sessions.delete_session`."""
        return await self._worker.run(functools.partial(self._sync.delete_session, session_id))

    async def prune(
        self,
        *,
        older_than: Duration | None = None,
        owner: str | None = None,
        expired: bool = True,
        dry_run: bool = False,
        batch_size: int = _life.PRUNE_BATCH_SESSIONS,
        limit: int | None = None,
    ) -> PruneResult:
        """Async twin of :meth:`Sessions.prune` (on a worker thread: the loop never waits)."""
        return await self._worker.run(functools.partial(
            self._sync.prune, older_than=older_than, owner=owner, expired=expired,
            dry_run=dry_run, batch_size=batch_size, limit=limit,
        ))

class AsyncSession:
    """Async twin of :class:`~convostore.Session`: every method awaited, same names and options.

    Get one with ``store.session(session_id)`` (cached per id). Configuration methods
    (:meth:`on_compaction`, :meth:`compact_after`, :meth:`on_compaction_error`) are plain and
    chainable; :meth:`history` and :meth:`history_batches` are async iterators.
    """

    def __init__(self, store: AsyncSessions, session: Session) -> None:
        """Wrap a sync handle (use :meth:`AsyncSessions.session` instead).

        :param store: the async store whose workers run the calls.
        :param session: the sync handle every call is delegated to.
        """
        self._store = store
        self._worker = store._worker
        self._session = session

    def __repr__(self) -> str:
        return f"<AsyncSession {self.session_id!r} of {self._store!r}>"

    @property
    def session_id(self) -> str:
        """The session's id (``""`` is the default session)."""
        return self._session.session_id

    @property
    def store(self) -> AsyncSessions:
        """Async twin of :meth:`Session.store`: the async store this handle belongs to."""
        return self._store

    @property
    def sync(self) -> Session:
        """The sync :class:`~convostore.Session` handle this one wraps (its calls block)."""
        return self._session

    async def _call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await self._worker.run(functools.partial(fn, *args, **kwargs))

    # --- configuration (plain, chainable) ------------------------------------------------------

    def on_compaction(self, fn: CompactionFunction) -> AsyncSession:
        """Async twin of :meth:`Session.on_compaction`; ``fn`` may be async (awaited on the loop).

        A :func:`~convostore.create_compact_function` with an async ``summarize`` is registered
        through its ``acall``, so the summariser runs on the loop that opened the store.
        """
        self._session.on_compaction(_on_loop(fn))
        return self

    def compact_after(
        self, threshold: int | None, *, extra_tokens: Callable[[], int] | None = None
    ) -> AsyncSession:
        """Async twin of :meth:`Session.compact_after` (plain, chainable)."""
        self._session.compact_after(threshold, extra_tokens=extra_tokens)
        return self

    def on_compaction_error(
        self, handler: Callable[[BaseException], object] | None
    ) -> AsyncSession:
        """Async twin of :meth:`Session.on_compaction_error`; ``handler`` may be async."""
        self._session.on_compaction_error(handler)
        return self

    # --- writes -------------------------------------------------------------------------------

    async def append_message(
        self, message: Message, parent_id: str | None | Unset = UNSET, *,
        source: Source = "server",
    ) -> AppendResult:
        """Async twin of :meth:`Session.append_message`."""
        return await self._call(self._session.append_message, message, parent_id, source=source)

    async def update_message(
        self, message: Message, *, source: Source = "server"
    ) -> Message | None:
        """Async twin of :meth:`Session.update_message`."""
        return await self._call(self._session.update_message, message, source=source)

    async def upsert_message(
        self, message: Message, parent_id: str | None | Unset = UNSET, *,
        source: Source = "server",
    ) -> AppendResult:
        """Async twin of :meth:`Session.upsert_message`."""
        return await self._call(self._session.upsert_message, message, parent_id, source=source)

    async def import_message(
        self,
        message: Message,
        *,
        parent_id: str | None = None,
        created_at: int | None = None,
    ) -> AppendResult:
        """Async twin of :meth:`Session.import_message`."""
        return await self._call(
            self._session.import_message, message, parent_id=parent_id, created_at=created_at
        )

    async def append_messages(
        self, messages: Iterable[Message], parent_id: str | None | Unset = UNSET, *,
        source: Source = "server",
    ) -> list[AppendResult]:
        """Async twin of :meth:`Session.append_messages`."""
        return await self._call(self._session.append_messages, messages, parent_id,
                                source=source)

    async def import_messages(
        self,
        messages: Iterable[Message | ImportItem],
        *,
        parent_id: str | None = None,
        created_at: int | None = None,
    ) -> list[AppendResult]:
        """Async twin of :meth:`Session.import_messages`."""
        return await self._call(
            self._session.import_messages, messages, parent_id=parent_id, created_at=created_at
        )

    async def delete_messages(self, ids: Sequence[str]) -> None:
        """Async twin of :meth:`Session.delete_messages`."""
        await self._call(self._session.delete_messages, ids)

    async def clear_messages(self) -> None:
        """Async twin of :meth:`Session.clear_messages`."""
        await self._call(self._session.clear_messages)

    # --- reads --------------------------------------------------------------------------------

    async def get_message(self, id: str) -> Message | None:
        """Async twin of :meth:`Session.get_message`."""
        return await self._call(self._session.get_message, id)

    async def get_latest_leaf(self) -> Message | None:
        """Async twin of :meth:`Session.get_latest_leaf`."""
        return await self._call(self._session.get_latest_leaf)

    async def get_branches(self, message_id: str) -> list[Message]:
        """Async twin of :meth:`Session.get_branches`."""
        return await self._call(self._session.get_branches, message_id)

    async def get_roots(self) -> list[Message]:
        """Async twin of :meth:`Session.get_roots`."""
        return await self._call(self._session.get_roots)

    async def set_active_leaf(self, message_id: str) -> None:
        """Async twin of :meth:`Session.set_active_leaf`."""
        await self._call(self._session.set_active_leaf, message_id)

    async def get_leaves(self) -> list[Message]:
        """Async twin of :meth:`Session.get_leaves`."""
        return await self._call(self._session.get_leaves)

    async def get_sibling_position(self, message_id: str) -> SiblingPosition | None:
        """Async twin of :meth:`Session.get_sibling_position`."""
        return await self._call(self._session.get_sibling_position, message_id)

    async def get_info(self) -> SessionEntry | None:
        """Async twin of :meth:`Session.get_info`."""
        return await self._call(self._session.get_info)

    async def update_info(
        self,
        *,
        title: str | None | Unset = UNSET,
        owner: str | None | Unset = UNSET,
        metadata: Mapping[str, Any] | None | Unset = UNSET,
        expires_at: Moment | None | Unset = UNSET,
        ttl: Duration | None | Unset = UNSET,
        belongs_to: str | None | Unset = UNSET,
    ) -> SessionEntry:
        """Async twin of :meth:`Session.update_info`."""
        return await self._call(
            self._session.update_info, title=title, owner=owner, metadata=metadata,
            expires_at=expires_at, ttl=ttl, belongs_to=belongs_to,
        )

    def history_records(
        self, *, leaf_id: str | None = None, newest_first: bool = False
    ) -> AsyncIterator[MessageRecord]:
        """Async twin of :meth:`Session.history_records`: one record per step."""
        return WorkerIterator(
            self._worker,
            functools.partial(self._session.history_records, leaf_id=leaf_id,
                              newest_first=newest_first),
        )

    def history(
        self, *, leaf_id: str | None = None, newest_first: bool = False
    ) -> AsyncIterator[Message]:
        """Async twin of :meth:`Session.history`: ``async for m in session.history(): ...``.

        Each step pulls one message from the sync generator on the worker, so memory stays
        bounded as in the sync read; breaking out early reads nothing more.
        """
        return WorkerIterator(
            self._worker,
            functools.partial(self._session.history, leaf_id=leaf_id, newest_first=newest_first),
        )

    def history_batches(
        self,
        *,
        batch_size: int = 50,
        max_batch_bytes: int = WINDOW_BYTES,
        leaf_id: str | None = None,
        newest_first: bool = False,
    ) -> AsyncIterator[list[Message]]:
        """Async twin of :meth:`Session.history_batches`: one batch per step."""
        return WorkerIterator(
            self._worker,
            functools.partial(
                self._session.history_batches,
                batch_size=batch_size,
                max_batch_bytes=max_batch_bytes,
                leaf_id=leaf_id,
                newest_first=newest_first,
            ),
        )

    async def get_history(self, leaf_id: str | None = None) -> list[Message]:
        """Async twin of :meth:`Session.get_history`."""
        return await self._call(self._session.get_history, leaf_id)

    async def get_recent_history(
        self, max_content_bytes: int, *, leaf_id: str | None = None
    ) -> RecentHistory:
        """Async twin of :meth:`Session.get_recent_history`."""
        return await self._call(
            self._session.get_recent_history, max_content_bytes, leaf_id=leaf_id
        )

    async def get_history_row_stats(self, leaf_id: str | None = None) -> list[RowStat]:
        """Async twin of :meth:`Session.get_history_row_stats`."""
        return await self._call(self._session.get_history_row_stats, leaf_id)

    async def get_token_estimate(self) -> int:
        """Async twin of :meth:`Session.get_token_estimate`."""
        return await self._call(self._session.get_token_estimate)

    # --- compaction ---------------------------------------------------------------------------

    async def add_compaction(
        self, summary: str, from_message_id: str, to_message_id: str
    ) -> StoredCompaction:
        """Async twin of :meth:`Session.add_compaction`."""
        return await self._call(
            self._session.add_compaction, summary, from_message_id, to_message_id
        )

    async def get_compactions(self) -> list[StoredCompaction]:
        """Async twin of :meth:`Session.get_compactions`."""
        return await self._call(self._session.get_compactions)

    async def compact(self, leaf_id: str | None = None) -> CompactResult | None:
        """Async twin of :meth:`Session.compact`; an async compaction function runs on the loop."""
        return await self._call(self._session.compact, leaf_id)

    # --- search -------------------------------------------------------------------------------

    async def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Async twin of :meth:`Session.search`."""
        await self._store.build_search_index()
        return await self._call(self._session.search, query, limit=limit)


class _Opening:
    """What :meth:`AsyncSessions.open` returns: await it, or enter it with ``async with``."""

    def __init__(self, open: Callable[[], Coroutine[Any, Any, AsyncSessions]]) -> None:
        self._open = open
        self._store: AsyncSessions | None = None

    def __await__(self) -> Generator[Any, None, AsyncSessions]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncSessions:
        self._store = await self._open()
        return self._store

    async def __aexit__(self, *exc: object) -> None:
        if self._store is not None:
            await self._store.close()


def _on_loop(fn: CompactionFunction) -> CompactionFunction:
    """The form of a compaction function whose model call runs on the store's loop.

    Calling a :class:`CompactFunction` with an async ``summarize`` runs it on a private loop in
    the calling (worker) thread; its ``acall`` returns an awaitable the core awaits on ours.
    """
    if isinstance(fn, CompactFunction) and _is_async(fn.summarize):
        return fn.acall
    return fn


def _is_async(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    )

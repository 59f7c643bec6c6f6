"""What :class:`~convostore.AsyncSessions` holds beyond the generated methods.

The generated class (``_store.py``) derives its methods from :class:`~convostore.Sessions`;
this base holds what a derivation cannot: opening on a worker thread (:class:`Opening`),
closing after the workers drain, the handle cache, and the calls whose async form differs from
"run the sync one on a worker" (watching, waiting, building the index step by step).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, TypeVar

from .._background import LoopSpawn
from .._options import StoreOptions
from ..backends._engines import worker_count
from ..feed._watch import awatch, check_watch
from ..model import Change
from ..store import Sessions, open_store
from ._session import AsyncSession
from ._worker import Worker, WorkerIterator

if TYPE_CHECKING:
    from ._store import AsyncSessions

T = TypeVar("T")
S = TypeVar("S", bound="AsyncStoreBase")


class AsyncStoreBase:
    """The state of an async store: the sync store it wraps, its workers and its loop."""

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
    def _opening(
        cls, url: str | os.PathLike[str] | None, options: StoreOptions
    ) -> Opening:
        """What ``open`` returns: the sync open of ``url`` with ``options``, run on a worker."""
        opener = functools.partial(open_store, url, options)
        workers = worker_count(url, pool=options.pool, pool_size=options.pool_size)
        return Opening(functools.partial(cls._open, opener, workers))

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
        store = cls(sync, loop=loop, executor=executor, workers=workers)
        return store  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"<AsyncSessions {self._sync!r}>"

    async def __aenter__(self: S) -> S:
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
            store: AsyncSessions = self  # type: ignore[assignment]
            cached = self._handles.setdefault(session_id, AsyncSession(store, handle))
        return cached

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

    async def wait_for_compactions(self, timeout: float | None = None) -> bool:
        """Async twin of :meth:`Sessions.wait_for_compactions` (waits on a spare thread)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, functools.partial(self._sync.wait_for_compactions, timeout)
        )

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

    async def _call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on a worker thread, awaited (shielded)."""
        return await self._worker.run(functools.partial(fn, *args, **kwargs))


class Opening:
    """What :meth:`AsyncSessions.open <convostore.AsyncSessions.open>` returns: await it for
    the open store, or enter it with ``async with`` (the store closes on exit)."""

    def __init__(self, open: Callable[[], Coroutine[Any, Any, AsyncSessions]]) -> None:
        """:param open: makes the coroutine that opens the store (called once per use)."""
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

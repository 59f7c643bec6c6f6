"""The worker threads of an async store: calls run there, the event loop only waits.

:class:`Worker` owns a store's thread pool. :meth:`Worker.run` moves a blocking call of the sync
core onto it (shielded: a cancelled caller leaves the call running to completion, so a write is
never half done); :meth:`Worker.await_on_loop` is the reverse trip, used as the store core's
awaiter: a worker that meets an awaitable returned by a user callback runs it on the loop that
owns the store and waits for it. While every worker waits that way, new calls go to a few spare
threads, so a callback that calls the store again cannot deadlock it. :class:`WorkerIterator`
drives a sync generator on the workers one item per step, keeping streamed reads bounded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Any, Generic, TypeVar, cast

from ..errors import StoreClosed

T = TypeVar("T")

_SPARE_THREADS = 8
"""Threads that serve calls made while every worker waits for a callback on the loop."""
_LOOP_POLL = 0.5
"""Seconds between checks that the owning loop still runs while a worker waits on it."""


class Worker:
    """The thread pool of one async store and the loop that owns the store."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 executor: concurrent.futures.ThreadPoolExecutor, workers: int) -> None:
        """:param loop: the event loop that owns the store; async callbacks run there.
        :param executor: the store's worker threads (shut down by :meth:`shutdown`).
        :param workers: how many threads ``executor`` has.
        """
        self._loop = loop
        self._executor = executor
        self._workers = workers
        self._spare: concurrent.futures.ThreadPoolExecutor | None = None
        self._parked = 0
        self._lock = threading.Lock()
        self.closing = False
        """Set when the store starts closing: new calls raise StoreClosed."""

    def shutdown(self) -> None:
        """Blocking: let every submitted call finish, then stop the threads."""
        self._executor.shutdown(wait=True)
        if self._spare is not None:
            self._spare.shutdown(wait=True)

    def submit(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Start ``fn`` on a worker, in the caller's context; the future is not shielded."""
        if self.closing:
            raise StoreClosed("the store is closed")
        with self._lock:
            parked = self._parked >= self._workers
        executor = self._spare_executor() if parked else self._executor
        context = contextvars.copy_context()
        return asyncio.get_running_loop().run_in_executor(
            executor, functools.partial(context.run, fn)
        )

    async def run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on a worker; a cancelled caller leaves it running to completion."""
        return await asyncio.shield(self.submit(fn))

    def _spare_executor(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._spare is None:
                self._spare = concurrent.futures.ThreadPoolExecutor(
                    max_workers=_SPARE_THREADS, thread_name_prefix="convostore-spare"
                )
            return self._spare

    def await_on_loop(self, awaitable: Awaitable[Any]) -> Any:
        """The store core's awaiter: run an awaitable on the owning loop, wait here (a worker)."""
        loop = self._loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        coroutine = _as_coroutine(awaitable)
        if running is loop or loop.is_closed():
            coroutine.close()
            _discard(awaitable)
            raise RuntimeError(
                "an async callback of an AsyncSessions store cannot run: "
                + ("its event loop is closed" if loop.is_closed() else "called on its loop")
            )
        with self._lock:
            self._parked += 1
        try:
            future = asyncio.run_coroutine_threadsafe(coroutine, loop)
            while True:
                try:
                    return future.result(timeout=_LOOP_POLL)
                except concurrent.futures.TimeoutError:
                    if not loop.is_running():
                        future.cancel()
                        raise RuntimeError(
                            "the event loop of an AsyncSessions store stopped while an async "
                            "callback was pending"
                        ) from None
        finally:
            with self._lock:
                self._parked -= 1


class WorkerIterator(AsyncIterator[T], Generic[T]):
    """Drives a sync iterator on a store's workers, one item per step."""

    def __init__(self, worker: Worker, start: Callable[[], Iterable[T]]) -> None:
        self._worker = worker
        self._start = start
        self._iterator: Iterator[T] | None = None
        self._done = False
        self._step_future: asyncio.Future[tuple[bool, T | None]] | None = None

    def __aiter__(self) -> WorkerIterator[T]:
        return self

    def _step(self) -> tuple[bool, T | None]:
        # Runs on a worker: the sync generator is created there too (its first read is there).
        if self._iterator is None:
            self._iterator = iter(self._start())
        for item in self._iterator:
            return True, item
        return False, None

    async def __anext__(self) -> T:
        if self._done:
            raise StopAsyncIteration
        self._step_future = self._worker.submit(self._step)
        try:
            more, item = await asyncio.shield(self._step_future)
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError):
                self._done = True
            raise
        if not more:
            self._done = True
            raise StopAsyncIteration
        return cast(T, item)

    async def aclose(self) -> None:
        """Stop early: close the sync generator (after a step still running, if any)."""
        self._done = True
        step = self._step_future
        if step is not None and not step.done():
            await asyncio.wait([step])
        iterator = self._iterator
        close = getattr(iterator, "close", None)
        if close is not None:
            await self._worker.run(close)


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _as_coroutine(awaitable: Awaitable[T]) -> Coroutine[Any, Any, T]:
    return awaitable if inspect.iscoroutine(awaitable) else _await(awaitable)


def _discard(awaitable: Awaitable[Any]) -> None:
    """Close an awaitable that will never run (no 'never awaited' warning)."""
    if inspect.iscoroutine(awaitable):
        awaitable.close()

"""Work that runs after a write returns: automatic compaction, trimming the change log.

:class:`Background` keeps an ordered queue of jobs, one per key (a job already queued under a
key is not queued twice: ten appends above a session's threshold ask for one compaction), and
runs them one at a time, in order, on a runner that it starts when work arrives and that ends
when the queue is empty; no thread stays behind while there is nothing to do.

The runner is what :attr:`Background.spawn` makes of it: a thread of its own for a sync store,
an asyncio task of the store's loop for an async one (:class:`LoopSpawn`, which runs the same
sync loop in a thread the task awaits, so the store's workers are never held by a summariser).

:meth:`Background.wait` blocks until the queue is empty and nothing runs
(:meth:`~convostore.Sessions.wait_for_compactions`). :meth:`Background.close` drops what is
queued and waits for the job in progress, so a store closes with no thread of its own left.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

logger = logging.getLogger("convostore")

Job = Callable[[], object]
Spawn = Callable[[Callable[[], None]], None]
"""Starts a runner: calls its argument (the run loop) off the calling thread."""


class Background:
    """One store's background work: a keyed queue and at most one runner at a time."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._cond = threading.Condition()
        self._active = False
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._runner: threading.Thread | None = None
        self.spawn: Spawn = self._spawn_thread
        """How a runner starts (the async store sets a :class:`LoopSpawn`)."""

    def submit(self, key: str, job: Job) -> None:
        """Queue ``job`` under ``key`` unless a job with that key is queued; start a runner."""
        with self._cond:
            if self._closed or key in self._jobs:
                return
            self._jobs[key] = job
            if self._active:
                return
            self._active = True
        try:
            self.spawn(self._run)
        except BaseException:
            with self._cond:
                self._active = False
                self._cond.notify_all()
            raise

    def _run(self) -> None:
        with self._cond:
            self._runner = threading.current_thread()
        while True:
            with self._cond:
                if self._closed or not self._jobs:
                    self._jobs.clear()
                    self._active = False
                    self._runner = None
                    self._cond.notify_all()
                    return
                key = next(iter(self._jobs))
                job = self._jobs.pop(key)
            try:
                job()
            except Exception:
                logger.exception("convostore: background job %r failed", key)

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing running."""
        with self._cond:
            return not self._active and not self._jobs

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the queue is empty and nothing runs; False if ``timeout`` ran out."""
        with self._cond:
            if self._runner is threading.current_thread():
                return not self._jobs  # a job waiting for itself would wait forever
            return self._cond.wait_for(lambda: not self._active and not self._jobs, timeout)

    def close(self) -> None:
        """Drop what is queued, wait for the job in progress, then for the runner's thread."""
        with self._cond:
            self._closed = True
            self._jobs.clear()
            if self._runner is threading.current_thread():
                return  # closed from inside a job (a listener): the runner ends after it
            self._cond.wait_for(lambda: not self._active)
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join()

    def _spawn_thread(self, run: Callable[[], None]) -> None:
        thread = threading.Thread(target=run, name="convostore-background", daemon=True)
        with self._cond:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()


class LoopSpawn:
    """An async store's :data:`Spawn`: each runner is a task of the store's event loop.

    The task awaits the run loop in a thread of the loop's default executor: the sync core
    runs there, async summarisers and listeners come back to the loop through the store's
    awaiter. :meth:`drain` awaits every task still running (the store's ``close``).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, run: Callable[[], None]) -> None:
        if self._loop.is_closed():
            threading.Thread(target=run, name="convostore-background", daemon=True).start()
            return
        self._loop.call_soon_threadsafe(self._start, run)

    def _start(self, run: Callable[[], None]) -> None:
        task = self._loop.create_task(asyncio.to_thread(run), name="convostore-background")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Await the tasks still running."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

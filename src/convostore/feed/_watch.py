"""Watching the change log: waking watchers when a change commits, and the watch loops.

:class:`Waker` counts wake-ups. This process's logged writes call :meth:`Waker.notify` after
they commit; other processes' commits reach it through the engine's signal
(:meth:`~convostore.backends.base.Backend.change_signal`: ``LISTEN`` on PostgreSQL,
``PRAGMA data_version`` polled every few milliseconds on SQLite), waited on by one feed thread
per store, started by the first watcher and stopped when the store closes.

A watcher reads the log after its cursor, hands out what it found, and when nothing is left
waits for the next wake-up (at most :data:`RECHECK` seconds, a safety net should a signal be
lost). It reads the wake-up count *before* each read of the log, so a change that commits
between the read and the wait wakes it at once: none is missed. :func:`watch` is the sync loop;
:func:`awatch` the same loop for asyncio, reading on the store's workers and waiting on the
event loop, so no thread is held while it waits.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from ..backends.base import ChangeSignal
from ..errors import InvalidArgument, InvalidArgumentType, StoreClosed
from ..limits import check_id
from ..model import Change
from ._changes import ChangeLog, check_cursor

logger = logging.getLogger("convostore")

RECHECK = 2.0
"""Most seconds a watcher waits before reading the log again without a wake-up."""
BATCH = 500
"""Changes a watcher reads per step."""
_SIGNAL_WAIT = 0.1
"""Seconds the feed thread waits on the signal before checking that the store is open."""


class Waker:
    """Wake-ups for the watchers of one store (any thread; async watchers by callback)."""

    def __init__(self, signal: Callable[[], ChangeSignal | None]) -> None:
        """:param signal: makes the engine's signal of other connections' commits."""
        self._signal = signal
        self._cond = threading.Condition()
        self._callbacks: tuple[Callable[[], None], ...] = ()
        self._feed: threading.Thread | None = None
        self._closed = False
        self._waiting = 0  # threads inside wait(): notify() takes the lock only for them
        self._count = itertools.count(1)  # next() is atomic: each wake-up a value of its own
        self.generation = 0
        """How many wake-ups so far: a watcher notes it before reading the log."""

    @property
    def closed(self) -> bool:
        """True once the store closed: watchers end."""
        return self._closed

    def notify(self) -> None:
        """A change may have committed: wake every watcher.

        Every logged write calls it, so with no watcher it only counts: a thread about to wait
        registers (under the lock) before it checks the count, so either it sees the new count
        or this call sees it waiting and wakes it.
        """
        self.generation = next(self._count)  # never a value a watcher saw before
        if self._waiting:
            with self._cond:
                self._cond.notify_all()
        callbacks = self._callbacks
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a closed event loop: that watcher is gone
                logger.debug("a watcher's wake-up callback failed", exc_info=True)

    def wait(self, seen: int, timeout: float) -> None:
        """Block until a wake-up after ``seen`` (a :attr:`generation`), or ``timeout``."""
        with self._cond:
            self._waiting += 1
            try:
                self._cond.wait_for(lambda: self.generation != seen or self._closed, timeout)
            finally:
                self._waiting -= 1

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` on every wake-up (from any thread); returns its remover."""
        with self._cond:
            self._callbacks = (*self._callbacks, callback)

        def remove() -> None:
            with self._cond:
                self._callbacks = tuple(c for c in self._callbacks if c is not callback)

        return remove

    def start_feed(self) -> None:
        """Start the thread that turns the engine's signal into wake-ups (once per store)."""
        with self._cond:
            if self._feed is not None or self._closed:
                return
            self._feed = threading.Thread(
                target=self._run_feed, name="convostore-feed", daemon=True
            )
            self._feed.start()

    def _run_feed(self) -> None:
        try:
            signal = self._signal()
        except Exception:
            logger.exception("convostore: cannot watch other processes' commits")
            return
        if signal is None:
            return  # no other connection can write: this process's notify() is enough
        try:
            while not self._closed:
                if signal.wait(_SIGNAL_WAIT) and not self._closed:
                    self.notify()
        except Exception:
            logger.exception("convostore: the change signal failed; watchers re-read the "
                             "log every %s s", RECHECK)
        finally:
            signal.close()

    def close(self) -> None:
        """End every watcher and stop the feed thread (waits for it)."""
        with self._cond:
            self._closed = True
            feed = self._feed
        self.notify()
        if feed is not None and feed is not threading.current_thread():
            feed.join()


def check_watch(since: object, session_id: object, timeout: object) -> float | None:
    """Check :meth:`~convostore.Sessions.watch`'s arguments; the timeout as a float."""
    if since is not None:
        check_cursor(since)
    check_id("session_id", session_id, optional=True)
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise InvalidArgumentType("timeout", f"must be a number or None, not "
                                  f"{type(timeout).__name__}")
    if not timeout >= 0:
        raise InvalidArgument("timeout", f"must be a number from 0, not {timeout!r}")
    return float(timeout)


def watch(
    log: ChangeLog, waker: Waker, since: int | None, session_id: str | None,
    timeout: float | None,
) -> Iterator[Change]:
    """The sync watch loop (see :meth:`~convostore.Sessions.watch`)."""
    try:
        cursor = log.head() if since is None else since
    except StoreClosed:
        return
    waker.start_feed()
    quiet_since = time.monotonic()
    first = since is not None  # the client's cursor: checked against the log once
    while True:
        seen = waker.generation
        try:
            found, cursor = log.scan(cursor, session_id, BATCH, first=first)
        except StoreClosed:
            return
        first = False
        if found:
            yield from found
            quiet_since = time.monotonic()
            continue
        if waker.closed:
            return
        wait = _wait_time(quiet_since, time.monotonic(), timeout)
        if wait <= 0:
            return
        waker.wait(seen, wait)


async def awatch(
    run: Callable[[Callable[[], Any]], Awaitable[Any]],
    log: ChangeLog, waker: Waker, since: int | None, session_id: str | None,
    timeout: float | None,
) -> AsyncIterator[Change]:
    """The async watch loop: reads through ``run`` (the store's workers), waits on the loop."""
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:
        loop.call_soon_threadsafe(woken.set)

    remove = waker.add_callback(wake)
    try:
        try:
            cursor: int = await run(log.head) if since is None else since
        except StoreClosed:
            return
        waker.start_feed()
        quiet_since = loop.time()
        first = since is not None  # the client's cursor: checked against the log once
        while True:
            woken.clear()
            seen = waker.generation
            try:
                step = functools.partial(log.scan, cursor, session_id, BATCH, first=first)
                found: list[Change]
                found, cursor = await run(step)
            except StoreClosed:
                return
            first = False
            if found:
                for change in found:
                    yield change
                quiet_since = loop.time()
                continue
            if waker.closed:
                return
            wait = _wait_time(quiet_since, loop.time(), timeout)
            if wait <= 0:
                return
            if waker.generation == seen:
                try:
                    await asyncio.wait_for(woken.wait(), wait)
                except asyncio.TimeoutError:
                    pass
    finally:
        remove()


def _wait_time(quiet_since: float, now: float, timeout: float | None) -> float:
    """How long to wait for a wake-up: :data:`RECHECK`, or what is left of ``timeout``."""
    if timeout is None:
        return RECHECK
    return min(RECHECK, quiet_since + timeout - now)

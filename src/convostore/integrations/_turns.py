"""The order of an integration object's async calls: one at a time, first called first run.

The Agents SDK promises that a session's calls do not overtake each other: a cancelled
``add_items`` raises :class:`asyncio.CancelledError` only once its write's outcome is known, so
the next turn's items cannot land before it. :class:`Turns` gives every integration object that
promise, whatever event loop or thread its calls come from (``Runner.run_sync`` starts a new
loop per run):

- a call takes a turn when it is made; turns are granted in call order, and the work of a turn
  starts only when the previous turn's work has finished;
- a *mutation* cancelled while its work runs waits for the work's outcome, then raises the
  cancellation (as the SDK's own sessions do, also when the work failed); cancelled before its
  turn came, it raises at once and never runs;
- a *read* cancelled while its work runs raises at once; the next turn still waits for that
  work to finish.

Waiting is done by the event loop (futures), never by a worker thread, so queued calls hold no
thread while they wait.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]


class Turns:
    """A first-come, first-served turn for the async calls of one object (any loop, any
    thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = False
        self._waiting: deque[_Waiter] = deque()

    async def run(self, start: Callable[[], Awaitable[T]], *, mutation: bool) -> T:
        """Wait for this call's turn, then run ``start()`` to completion (see the module
        docstring for cancellation); the turn passes on when the work is done."""
        await self._acquire()
        try:
            task = asyncio.ensure_future(start())
        except BaseException:
            self._release()
            raise
        task.add_done_callback(self._finished)
        if mutation:
            return await outcome(task)
        return await asyncio.shield(task)

    def _finished(self, task: asyncio.Future[Any]) -> None:
        if not task.cancelled():
            task.exception()  # seen: a read whose caller was cancelled logs nothing
        self._release()

    async def wait_idle(self) -> None:
        """Wait until every call made before this one has finished."""

        async def nothing() -> None:
            return None

        await self.run(nothing, mutation=True)

    async def _acquire(self) -> None:
        with self._lock:
            if not self._busy:
                self._busy = True
                return
            loop = asyncio.get_running_loop()
            waiter: _Waiter = (loop, loop.create_future())
            self._waiting.append(waiter)
        try:
            await waiter[1]
        except asyncio.CancelledError:
            with self._lock:
                queued = waiter in self._waiting
                if queued:
                    self._waiting.remove(waiter)
            granted = waiter[1].done() and not waiter[1].cancelled()
            if granted:
                self._release()  # the turn came with the cancellation: pass it on
            # neither queued nor granted: a grant is on its way, and passes the turn on
            raise

    def _release(self) -> None:
        """Hand the turn to the first waiter still waiting, or free it (any thread)."""
        with self._lock:
            while self._waiting:
                loop, future = self._waiting.popleft()
                try:
                    loop.call_soon_threadsafe(self._grant, future)
                except RuntimeError:  # its loop is closed: nobody waits there any more
                    continue
                return
            self._busy = False

    def _grant(self, future: asyncio.Future[None]) -> None:
        if future.done():  # its caller was cancelled meanwhile: the next one's turn
            self._release()
        else:
            future.set_result(None)


async def outcome(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` to its end even when cancelled meanwhile, then raise the
    cancellation: it surfaces only once the outcome is known (the SDK's ``_await_mutation``)."""
    task = asyncio.ensure_future(awaitable)
    cancellation: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            if cancellation is None:
                cancellation = exc
    try:
        result = task.result()
    except BaseException:
        if cancellation is not None:
            raise cancellation from None
        raise
    if cancellation is not None:
        raise cancellation from None
    return result

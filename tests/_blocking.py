"""A blocking adapter over AsyncSessions, so the conformance suite also runs through the async API.

:func:`blocking_open` opens an :class:`~convostore.aio.AsyncSessions` on a private event loop
running in a background thread, and returns an object with the sync API: each method submits the
same-named coroutine to that loop and waits; async iterators become plain iterators pulled one
item per ``next()``; handles are wrapped once per session. Nothing is reimplemented, so a test
written against :class:`~convostore.Sessions` exercises the async layer unchanged.

:func:`blocking_manager` gives the session manager of either kind of store the same way.

Two things pass through to the sync objects, on purpose:

- private attributes, so the adapter never hides what the sync object has (tests look at
  storage through ``store.core`` and ``_storage.py``, which the async store also offers);
- calls made on one of the store's worker threads, i.e. from a plain change listener: the sync
  API runs those on the writing thread, and waiting for the worker from the worker would hang.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

from convostore import Sessions
from convostore.aio import AsyncSession, AsyncSessions
from convostore.manager import AsyncSessionManager, SessionManager

T = TypeVar("T")

_TIMEOUT = 120.0  # seconds: a hang becomes a test failure, not a stuck suite
_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _get_loop() -> asyncio.AbstractEventLoop:
    """The adapter's event loop (one for the test session, in a daemon thread)."""
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(
                target=loop.run_forever, name="blocking-adapter-loop", daemon=True
            ).start()
            _loop = loop
        return _loop


def _wait(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run_coroutine_threadsafe(coroutine, _get_loop()).result(timeout=_TIMEOUT)


def _on_worker() -> bool:
    return threading.current_thread().name.startswith(("convostore-worker", "convostore-spare"))


class _Blocking:
    """The sync face of an async object: ``inner`` is awaited, ``sync`` serves re-entrant calls."""

    def __init__(self, inner: Any, sync: Any) -> None:
        self._inner = inner
        self._sync = sync

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            return getattr(self._sync, name)
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            if _on_worker():
                return getattr(self._sync, name)(*args, **kwargs)
            if inspect.iscoroutinefunction(value):
                result = _wait(value(*args, **kwargs))
                # a coroutine handing back another awaitable forgot an ``await`` inside
                assert not inspect.isawaitable(result), f"{name}() returned {result!r}"
                return self._wrap(result)
            return self._wrap(value(*args, **kwargs))

        return call

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, AsyncSession):
            return BlockingSessions._handle(value)
        if isinstance(value, AsyncIterator):
            return _BlockingIterator(value)
        return value

    def __repr__(self) -> str:
        return f"<blocking {self._inner!r}>"


class BlockingSessions(_Blocking):
    """:class:`~convostore.aio.AsyncSessions` with the sync API of :class:`~convostore.Sessions`."""

    @staticmethod
    def _handle(handle: AsyncSession) -> _Blocking:
        # One wrapper per async handle (kept on it), so `store.session(x) is store.session(x)`.
        wrapped: _Blocking | None = getattr(handle, "_blocking_face", None)
        if wrapped is None:
            wrapped = _Blocking(handle, handle.sync)
            handle._blocking_face = wrapped  # type: ignore[attr-defined]
        return wrapped

    def __enter__(self) -> BlockingSessions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _BlockingIterator:
    """A plain iterator over an async one: each ``next()`` awaits one ``__anext__``."""

    def __init__(self, inner: AsyncIterator[Any]) -> None:
        self._inner = inner

    def __iter__(self) -> _BlockingIterator:
        return self

    def __next__(self) -> Any:
        async def step() -> Any:
            return await self._inner.__anext__()

        try:
            return _wait(step())
        except StopAsyncIteration:
            raise StopIteration from None

    def close(self) -> None:
        _wait(self._inner.aclose())  # type: ignore[attr-defined]


def blocking_open(url: Any = None, **options: Any) -> BlockingSessions:
    """Open an AsyncSessions store on the adapter's loop; the result has the sync API."""

    async def opening() -> AsyncSessions:
        return await AsyncSessions.open(url, **options)

    inner = _wait(opening())
    return BlockingSessions(inner, inner.sync)


def blocking_manager(store: Sessions | BlockingSessions) -> Any:
    """The session manager of a store under test, with the sync API either way.

    A :class:`~convostore.Sessions` gets a plain :class:`~convostore.manager.SessionManager`; a
    store from :func:`blocking_open` gets an :class:`~convostore.manager.AsyncSessionManager`
    made blocking, whose calls from a worker thread go to the sync manager it drives (the one
    place tests reach that private attribute).
    """
    if isinstance(store, Sessions):
        return SessionManager(store)
    inner = AsyncSessionManager(store._inner)
    return _Blocking(inner, inner._sync)

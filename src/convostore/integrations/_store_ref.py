"""A whole store as a many-session integration object uses it (ADK's session service,
LlamaIndex's chat store): where it comes from, and how a call runs off the event loop.

:mod:`._binding` serves objects bound to one conversation; a session service or a keyed chat
store addresses many, so it holds the store itself. The same rules apply:

- a URL or path is not opened by the constructor: the first call leases the process's shared
  store for that URL and options (``_shared.py``), on a worker thread for an async call;
- a :class:`~convostore.Sessions` or :class:`~convostore.aio.AsyncSessions` given as an object
  is the caller's and is never closed here;
- an async call runs ``fn(store, *args)`` on the async store's workers, or with
  ``asyncio.to_thread``, so the event loop never waits on the database.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from ..aio import AsyncSessions
from ..backends._engines import parse_url
from ..errors import StoreClosed
from ..store import Sessions
from ._shared import Lease, acquire

T = TypeVar("T")


class SessionClosed(StoreClosed, RuntimeError):
    """An integration object (``ConvostoreSession``, a LangChain history, a pydantic-ai
    history) was used after ``close()``. A ``RuntimeError``, as the Agents SDK's own sessions
    raise, and a :class:`~convostore.StoreClosed`."""


class StoreRef:
    """The store of a many-session integration object.

    :param store: a URL or path, an open :class:`~convostore.Sessions` or an open
        :class:`~convostore.aio.AsyncSessions`.
    :param open_options: :meth:`Sessions.open` options, only with a URL or path.
    :param kind: the integration's class name, for error messages.
    """

    def __init__(self, store: Any, open_options: dict[str, Any], *, kind: str) -> None:
        self.kind = kind
        self._lock = threading.Lock()
        self._closed = False
        self._url: str | os.PathLike[str] | None = None
        self._options: dict[str, Any] = {}
        self._lease: Lease | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._sync: Sessions | None = None
        self._async: AsyncSessions | None = None
        if isinstance(store, (str, os.PathLike)):
            parse_url(store)  # a URL no engine takes fails here, with no I/O
            self._url, self._options = store, dict(open_options)
            return
        if open_options:
            raise TypeError("open options apply only when the store is given as a URL")
        if isinstance(store, Sessions):
            self._sync = store
        elif isinstance(store, AsyncSessions):
            self._async = store
            self._sync = store.sync
        else:
            raise TypeError(
                "store must be a URL, a path, a Sessions or an AsyncSessions, "
                f"not {type(store).__name__}"
            )

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    @property
    def async_store(self) -> AsyncSessions | None:
        """The async store given as the store, if one was."""
        return self._async

    def sessions(self) -> Sessions:
        """The sync store; leases the shared store on first use (blocking)."""
        with self._lock:
            if self._closed:
                raise SessionClosed(f"{self.kind} is closed")
            if self._sync is None:
                assert self._url is not None
                lease = acquire(self._url, self._options)
                self._lease = lease
                self._finalizer = weakref.finalize(self, lease.release)
                self._sync = lease.store
            return self._sync

    def call_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(store, *args)`` now, on this thread."""
        return fn(self.sessions(), *args)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(store, *args)`` on a worker thread (the async store's, when one was given)."""
        if self._closed:
            raise SessionClosed(f"{self.kind} is closed")
        if self._async is not None:
            return await self._async.run_sync(self.call_sync, fn, *args)
        return await asyncio.to_thread(self.call_sync, fn, *args)

    def close(self) -> None:
        """Give the shared store back (the last user closes it); later calls raise
        :class:`SessionClosed`. Idempotent; a store given as an object stays open."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            lease, finalizer = self._lease, self._finalizer
            self._lease = self._finalizer = None
        if finalizer is not None:
            finalizer.detach()
        if lease is not None:
            lease.release()

    async def aclose(self) -> None:
        """Async twin of :meth:`close` (a last close runs off the event loop)."""
        if not self._closed:
            await asyncio.to_thread(self.close)

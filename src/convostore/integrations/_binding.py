"""One convostore session as an integration object uses it: where the store comes from, how a
call runs off the event loop, in which order, and what happens after ``close()``.

Every integration is written once, as sync functions of a :class:`~convostore.Session`
(``fn(handle, *args)``); :class:`Binding` runs them:

- from sync code, directly (:meth:`Binding.call_sync`);
- from async code, on a worker thread (the async store's workers, or ``asyncio.to_thread``),
  one at a time in call order, a cancelled mutation surfacing only once its outcome is known
  (:meth:`Binding.call`, see :mod:`._turns`).

A store given as a URL or path is not opened by the constructor: the first call leases the
process's shared store for that URL and options (``_shared.py``), on the worker thread for an
async call, so constructing an integration object inside a coroutine does no I/O. ``close()``
gives the lease back (the last one closes the store), and so does garbage collection of an
object nobody closed. A store given as an object is the caller's: it is never closed here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from ..aio import AsyncSession, AsyncSessions
from ..model import SearchResult
from ..session import Session
from ._store_ref import SessionClosed, StoreRef
from ._turns import Turns

T = TypeVar("T")


class Binding:
    """The session an integration object works on, and how its calls run: a
    :class:`~._store_ref.StoreRef` (where the store comes from, its lease, ``close``) and one
    session of it, with the async calls run one at a time in call order.

    :param store: a URL or path (the shared store is leased on first use), an open
        :class:`~convostore.Sessions` or an open :class:`~convostore.aio.AsyncSessions`.
    :param session_id: the convostore session id.
    :param open_options: :meth:`Sessions.open` options, only with a URL or path.
    :param kind: the integration's class name, for error messages.
    """

    def __init__(
        self, store: Any, session_id: str, open_options: dict[str, Any], *, kind: str
    ) -> None:
        if not isinstance(session_id, str):
            raise TypeError(f"session_id must be a string, not {type(session_id).__name__}")
        self.session_id = session_id
        self.kind = kind
        self._ref = StoreRef(store, open_options, kind=kind)
        self._turns = Turns()
        self._handle: Session | None = None
        self.async_store: AsyncSessions | None = self._ref.async_store
        """The async store the calls run on, when one was given."""
        self._async: AsyncSession | None = (
            None if self.async_store is None else self.async_store.session(session_id))

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._ref.closed

    def check(self) -> None:
        """Raise :class:`SessionClosed` after :meth:`close`."""
        if self._ref.closed:
            raise SessionClosed(f"{self.kind} is closed")

    def handle(self) -> Session:
        """The sync session handle; leases the shared store on first use (blocking)."""
        store = self._ref.sessions()  # raises SessionClosed after close()
        if self._handle is None:
            self._handle = store.session(self.session_id)
        return self._handle

    @property
    def public(self) -> Session | AsyncSession:
        """The handle callers see: the ``AsyncSession`` of an async store, else the sync one."""
        if self._async is not None:
            self.check()
            return self._async
        return self.handle()

    def call_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(handle, *args)`` now, on this thread."""
        return fn(self.handle(), *args)

    async def call(self, fn: Callable[..., T], *args: Any, mutation: bool = False) -> T:
        """``fn(handle, *args)`` on a worker thread, after every call made before it.

        :param mutation: a write: if the caller is cancelled, the cancellation surfaces once
            the write's outcome is known (a read's at once).
        """
        self.check()
        return await self._turns.run(lambda: self._offload(fn, args), mutation=mutation)

    async def _offload(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        if self.async_store is not None:
            return await self.async_store.run_sync(self.call_sync, fn, *args)
        return await asyncio.to_thread(self.call_sync, fn, *args)

    def close(self) -> None:
        """Give the shared store back (the last user closes it); later calls raise
        :class:`SessionClosed`. Idempotent; a store given as an object stays open."""
        self._ref.close()

    async def aclose(self) -> None:
        """Async twin of :meth:`close`: waits for calls made before it, and closes the store
        (when this was its last user) off the event loop."""
        if self.closed:
            return
        await self._turns.wait_idle()
        await asyncio.to_thread(self.close)


B = TypeVar("B", bound="Bound")


class Bound:
    """What every integration object shares over its :class:`Binding` (``self._binding``):
    its ``repr``, the underlying session, ``close``/``aclose`` and the ``with``/``async with``
    protocols. Subclasses set ``_binding`` and ``session_id`` in their constructor."""

    _binding: Binding
    session_id: str

    def __repr__(self) -> str:
        state = "closed" if self._binding.closed else "open"
        return f"<{type(self).__name__} {self.session_id!r} {state}>"

    @property
    def session(self) -> Session | AsyncSession:
        """The underlying convostore session (an ``AsyncSession`` for an async store).

        For a store given as a URL, the first use opens the shared store (blocking).
        """
        return self._binding.public

    def close(self) -> None:
        """Stop using the store: a shared store (from a URL) is given back and closed with its
        last user; a store given as an object stays open. Later calls raise
        :class:`SessionClosed` (a ``RuntimeError``). Idempotent."""
        self._binding.close()

    async def aclose(self) -> None:
        """Async twin of :meth:`close`: waits for this object's async calls made before it,
        and closes a store off the event loop."""
        await self._binding.aclose()

    def __enter__(self: B) -> B:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self: B) -> B:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def search_handle(handle: Session, query: str, limit: int) -> list[SearchResult]:
    """``handle.search``, as a function :meth:`Binding.call` runs."""
    return handle.search(query, limit=limit)

"""What :class:`~convostore.AsyncSession` holds beyond the generated methods.

The generated class (``_session.py``) derives every method from :class:`~convostore.Session`;
this base holds what a derivation cannot: the wrapped handle, the store it belongs to, and how
one call or one stream reaches the store's worker threads.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from ..compaction import CompactFunction, CompactionFunction
from ..session import Session
from ._worker import WorkerIterator

if TYPE_CHECKING:
    from ._store import AsyncSessions

T = TypeVar("T")


class AsyncSessionBase:
    """The state of an async session handle and its two ways onto the worker threads."""

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
        """``fn(*args, **kwargs)`` on a worker thread, awaited (shielded)."""
        return await self._worker.run(functools.partial(fn, *args, **kwargs))

    def _iterate(
        self, fn: Callable[..., Iterable[T]], /, *args: Any, **kwargs: Any
    ) -> AsyncIterator[T]:
        """The sync stream ``fn(*args, **kwargs)`` pulled one item per step on the workers, so
        memory stays bounded as in the sync read; breaking out early reads nothing more."""
        return WorkerIterator(self._worker, functools.partial(fn, *args, **kwargs))


def on_loop(fn: CompactionFunction) -> CompactionFunction:
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

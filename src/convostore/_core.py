"""The store's core: what every session of one store shares, handed to each Session explicitly.

A :class:`~convostore.Sessions` store owns one :class:`StoreCore`; each
:class:`~convostore.Session` is given it at creation and touches nothing else of the store. The
core holds the backend, the change-event dispatch, the durable change log and its watchers'
waker, the background worker (automatic compaction, log trimming), the search index, the
settings that shape writes (reserved metadata keys, token counter) and the way async callbacks
are awaited. The async face replaces only that last piece (:attr:`StoreCore.awaiter`: a
callback that returns an awaitable is then run on the event loop that owns the store) and how
background work starts (``background.spawn``: a task of that loop).

Imports point one way: ``store`` and ``session`` import this module; it imports neither.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ._background import Background
from .backends.base import Backend
from .compaction._auto import AutoCompaction
from .feed._changes import ChangeLog
from .feed._watch import Waker
from .messages._estimate import Memos
from .model import ChangeEvent
from .search._index import SearchIndex
from .tokens import TokenCounter

logger = logging.getLogger("convostore")

Listener = Callable[[ChangeEvent], object]
"""A change-feed listener: called with each :class:`~convostore.ChangeEvent` after commit."""

Awaiter = Callable[[Awaitable[Any]], Any]
"""Runs an awaitable that a user callback returned and gives back its result (blocking)."""


def reserved_keys(keys: Iterable[str]) -> tuple[str, ...]:
    """``reserved_metadata_keys`` as stored: a tuple (a lone string is refused, not split)."""
    if isinstance(keys, str):
        raise TypeError("reserved_metadata_keys must be a list of keys, not a string")
    return tuple(keys)


def run_awaitable(value: Awaitable[Any]) -> Any:
    """The sync store's :data:`Awaiter`: run the awaitable on a private event loop.

    Refused inside a running event loop, where blocking would stall it: that code should use
    :class:`~convostore.AsyncSessions`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise TypeError(
            "an async callback was given to the sync API inside a running event loop; "
            "use convostore.AsyncSessions"
        )

    async def wrap() -> Any:
        return await value

    return asyncio.run(wrap())


class ChangeFeed:
    """The in-process change feed: listeners called in order after every committed write."""

    def __init__(self, awaiter: Callable[[], Awaiter]) -> None:
        self._listeners: tuple[Listener, ...] = ()
        self._lock = threading.Lock()
        self._awaiter = awaiter

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add ``listener``; returns a function that removes it (idempotent)."""
        if not callable(listener):
            raise TypeError(f"subscribe() needs a callable, not {type(listener).__name__}")
        with self._lock:
            self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            with self._lock:
                self._listeners = tuple(x for x in self._listeners if x is not listener)

        return unsubscribe

    @property
    def listened(self) -> bool:
        """Is anyone subscribed? (Writers skip building an event nobody receives.)"""
        return bool(self._listeners)

    def emit(self, event: ChangeEvent) -> None:
        """Call every listener with ``event``; one that raises is logged and skipped."""
        for listener in self._listeners:  # a tuple: subscribing meanwhile does not disturb it
            try:
                outcome = listener(event)
                if outcome is not None and hasattr(outcome, "__await__"):
                    self._awaiter()(outcome)
            except Exception:
                logger.exception("change listener failed on a %r event of session %r",
                                 event.type, event.session_id)


class StoreCore:
    """Everything the sessions of one store share: backend, settings, events, search index.

    Created by :class:`~convostore.Sessions` and reachable as ``store.core``; a
    :class:`~convostore.Session` receives it at creation. Extensions that need the backend
    directly (the session manager, the context package, tests that look at storage) use this
    object rather than the store's private attributes.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        reserved_metadata_keys: Iterable[str] = (),
        token_counter: TokenCounter | None = None,
        change_log_size: int | None = None,
        search_tool_output: bool = False,
    ) -> None:
        self.backend = backend
        """The engine: transactional read and write scopes, SQL only."""
        self.reserved_metadata_keys = reserved_keys(reserved_metadata_keys)
        """Metadata keys removed from ``source="client"`` writes."""
        self.token_counter = token_counter
        """A custom string token counter for row stamps and summaries, or None."""
        self.awaiter: Awaiter = run_awaitable
        """How an awaitable returned by a user callback is run (the async face replaces it)."""
        self.events = ChangeFeed(lambda: self.awaiter)
        """The in-process change feed."""
        self.path_memos = Memos()
        """Each session's last path totals (token estimate, bytes), kept across handles."""
        self.search_tool_output = bool(search_tool_output)
        """Whether tool results' text is indexed too (see :mod:`convostore.search._text`)."""
        self.search_index = SearchIndex(backend, tool_output=self.search_tool_output)
        """The full-text index: readiness, lazy creation with backfill, queries."""
        self.background = Background()
        """Work run after writes return: automatic compactions, change-log trimming."""
        self.waker = Waker(backend.change_signal)
        """Wakes this store's watchers when a change commits (here or in another process)."""
        self.changes = ChangeLog(backend, keep=change_log_size, wake=self.waker.notify,
                                 schedule=self.background.submit)
        """The durable change log: a write scope logs with ``changes.log(ops, kind, ...)``."""
        self.auto_compaction = AutoCompaction(backend, holder=uuid.uuid4().hex)
        """Lease and backoff of automatic compactions, shared with every process."""
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def run_awaitable(self, value: Awaitable[Any]) -> Any:
        """Run an awaitable a user callback returned, with the store's :attr:`awaiter`."""
        return self.awaiter(value)

    def describe(self) -> str:
        """The store as its ``repr`` shows it: ``<Sessions 'url' open>``."""
        return f"<Sessions {self.backend.url!r} {'closed' if self.closed else 'open'}>"

    def close(self) -> None:
        """Mark the store closed, wait for the background job in progress (queued ones are
        dropped), end the watchers, then close the backend's connections."""
        self._closed = True
        self.background.close()
        self.waker.close()
        self.backend.close()

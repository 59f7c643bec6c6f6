"""One store per URL and options per process, shared by the integration objects given a URL.

A service that builds a ``ConvostoreSession("user-42", url)`` (or a LangChain history) per
request must not open a connection pool per request. :func:`acquire` hands out a
:class:`Lease` on the one :class:`~convostore.Sessions` open for that URL and those options,
opening it on first need; the store closes when its last lease is released, and every store
still open closes at interpreter exit (``atexit``).

- The key is the engine, its target (a SQLite path made absolute) and the options, frozen;
  an option value that cannot be hashed (rare) is compared by identity.
- Opening happens outside the registry lock, once per key: a second caller for the same key
  waits for the first one's open, then shares its store.
- A release inside a running event loop closes the store on a thread of its own, so the loop
  never waits on the database; a caller that needs the same key meanwhile waits (on its own
  thread) until that close is done, so connections of the old and the new store never add up.
- A forked child (a pre-forking server's worker) starts with no shared store: the parent's
  stay the parent's, and the child opens its own.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Hashable, Mapping
from typing import Any

from .._options import StoreOptions
from ..backends._engines import local_file, parse_url
from ..store import Sessions, open_store

Key = tuple[Hashable, ...]
"""What identifies a shared store: engine, target, options."""


class _Entry:
    """One shared store and how many leases hold it."""

    def __init__(self, key: Key, store: Sessions) -> None:
        self.key = key
        self.store = store
        self.count = 0


_lock = threading.Lock()
_entries: dict[Key, _Entry] = {}
_busy: dict[Key, threading.Event] = {}  # a store of this key is being opened or closed
_closers: set[threading.Thread] = set()


class Lease:
    """A claim on a shared store; :meth:`release` gives it back (idempotent)."""

    def __init__(self, entry: _Entry) -> None:
        self._entry = entry
        self._released = False
        self.store: Sessions = entry.store
        """The shared store (use it until :meth:`release`)."""

    def release(self) -> None:
        """Give the store back; the last lease closes it (on a thread when called inside a
        running event loop, so the loop does not wait)."""
        entry = self._entry
        with _lock:
            if self._released:
                return
            self._released = True
            entry.count -= 1
            if entry.count > 0 or _entries.get(entry.key) is not entry:
                return
            del _entries[entry.key]
            done = threading.Event()
            _busy[entry.key] = done
        if _in_event_loop():
            closer = threading.Thread(target=_close, args=(entry, done),
                                      name="convostore-close")
            with _lock:
                _closers.add(closer)
            closer.start()
        else:
            _close(entry, done)


def acquire(url: str | os.PathLike[str], options: Mapping[str, Any]) -> Lease:
    """A lease on the store for ``url`` and ``options`` (as :meth:`Sessions.open` takes them:
    the fields of :class:`~convostore.store.StoreOptions`), opened here if no lease holds it.
    Blocking: call it off the event loop.

    :raises TypeError: an option that is not one of them (before anything opens).
    """
    settings = StoreOptions(**options)
    key = store_key(url, options)
    while True:
        with _lock:
            entry = _entries.get(key)
            if entry is not None:
                entry.count += 1
                return Lease(entry)
            pending = _busy.get(key)
            if pending is None:
                opening = threading.Event()
                _busy[key] = opening
                break
        pending.wait()
    try:
        store = open_store(url, settings)
    except BaseException:
        with _lock:
            del _busy[key]
        opening.set()
        raise
    entry = _Entry(key, store)
    with _lock:
        entry.count = 1
        _entries[key] = entry
        del _busy[key]
    opening.set()
    return Lease(entry)


def store_key(url: str | os.PathLike[str], options: Mapping[str, Any]) -> Key:
    """The key two integration objects share a store under (raises ``InvalidURL`` for a URL
    no engine takes; opens nothing)."""
    parsed = parse_url(url)
    path = local_file(url)
    target = os.path.abspath(path) if path is not None else parsed.target
    frozen = tuple(sorted((name, _freeze(value)) for name, value in options.items()))
    return (parsed.engine.name, target, frozen)


def _freeze(value: Any) -> Hashable:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return value  # type: ignore[no-any-return]


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _close(entry: _Entry, done: threading.Event) -> None:
    try:
        entry.store.close()
    finally:
        with _lock:
            if _busy.get(entry.key) is done:
                del _busy[entry.key]
            _closers.discard(threading.current_thread())
        done.set()


def _forget_after_fork() -> None:
    """In a forked child, stores opened by the parent are the parent's (their connections
    too): forget them, unclosed, so the child opens its own."""
    global _lock
    _lock = threading.Lock()
    _entries.clear()
    _busy.clear()
    _closers.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def open_count() -> int:
    """How many shared stores are open now (for diagnostics)."""
    with _lock:
        return len(_entries)


@atexit.register
def close_all() -> None:
    """Close every shared store, whoever still holds a lease (also run at interpreter exit);
    wait for closes running on their own threads."""
    with _lock:
        entries = list(_entries.values())
        _entries.clear()
        closers = list(_closers)
    for entry in entries:
        try:
            entry.store.close()
        except Exception:  # pragma: no cover - best effort at exit
            pass
    for closer in closers:
        closer.join()

"""The SQLite engine's backend over the standard library's sqlite3: the connection, its scopes.

The engine's declaration, schema and overview live in :mod:`convostore.backends.sqlite`, its
operations in :mod:`._ops`; this module is imported when a SQLite store is opened, so ``import
convostore`` does not need sqlite3.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from ...errors import BackendError, StoreClosed
from .._migrate import migrate
from .._schema import META
from ..base import Engine
from ._ops import SqliteOps, _is_busy, _retry_busy
from ._signal import DataVersionSignal

WAL_AUTOCHECKPOINT_PAGES = 4000
"""Pages the WAL may hold before a commit copies them back into the database (SQLite: 1000).

Each such checkpoint syncs the database file, and a page written by many commits in between
(the right edge of an index, the newest table page) is copied once: with a message of a few KB
dirtying about five pages, 1,000 pages meant a checkpoint every ~200 appends. With 4,000 (a WAL
of up to ~16 MB, reused once grown) appends ran at 0.71-0.75 of the raw baseline against
0.64-0.65 with 1,000 (``benchmarks/append_breakdown.py --durability normal --autocheckpoint N``,
two runs each); one wal-index table still covers it, so reads cost the same. With
``durability="full"`` see :data:`WAL_AUTOCHECKPOINT_PAGES_FULL`."""

WAL_AUTOCHECKPOINT_PAGES_FULL = 1000
"""The same with ``durability="full"``: SQLite's default.

Every commit then syncs the WAL, and a sync that also grows the file costs more. The WAL is
deleted when a store closes, so a store opened afresh grows it over its first appends: up to
4,000 pages, about 650 appends of a few KB paid that (a fresh store's first 800 appends took
434-445 us each, against 331-339 us with 1,000 pages), while steady appends measured the same
(``benchmarks/append_breakdown.py --autocheckpoint N``: 0.69-0.73 of raw with 1,000 pages, 0.71
with 4,000)."""



class _WriteScope:
    """:meth:`SqliteBackend.write`: a class, not a generator, since it runs on every append."""

    __slots__ = ("_backend",)

    def __init__(self, backend: SqliteBackend) -> None:
        self._backend = backend

    def __enter__(self) -> SqliteOps:
        backend = self._backend
        backend._lock.acquire()
        try:
            backend._check()
            backend._ops.fts_hint = None
            backend._ops.discard_changes()
            try:
                try:
                    backend._conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        raise
                    _retry_busy(backend._conn, "BEGIN IMMEDIATE", (), backend._busy_timeout, exc)
            except sqlite3.Error as exc:
                raise BackendError(f"SQLite could not start a write: {exc}") from exc
        except BaseException:
            backend._lock.release()
            raise
        return backend._ops

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> Literal[False]:
        conn = self._backend._conn
        try:
            if exc is not None:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise BackendError(f"SQLite write failed: {exc}") from exc
                return False
            try:
                self._backend._ops.flush_changes()  # the change log's rows, last
                conn.execute("COMMIT")
            except sqlite3.Error as error:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise BackendError(f"SQLite commit failed: {error}") from error
            return False
        finally:
            self._backend._ops.fts_hint = None
            self._backend._ops.discard_changes()
            self._backend._lock.release()


class SqliteBackend:
    """A SQLite database file (or ``:memory:``) as a convostore backend.

    :param path: the database file, or ``":memory:"``.
    :param durability: ``"normal"`` (WAL, synchronous=NORMAL: a committed write survives a crash
        of the process, the last ones may be lost to a power cut) or ``"full"`` (fsync at every
        commit).
    :param busy_timeout: seconds a writer waits for another process's write lock.
    :param engine: the engine's declaration (:data:`convostore.backends.sqlite.ENGINE`): its
        migrations and capabilities.
    """

    def __init__(
        self,
        path: str,
        *,
        engine: Engine,
        durability: Literal["normal", "full"] = "normal",
        busy_timeout: float = 30.0,
    ) -> None:
        if durability not in ("normal", "full"):
            raise ValueError(f"durability must be 'normal' or 'full', not {durability!r}")
        self._engine = engine
        self.path = path
        self.url = path
        self.memory = path == ":memory:" or path == ""
        if not self.memory:
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                raise BackendError(f"cannot open {path!r}: directory {parent!r} does not exist")
        try:
            self._conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=busy_timeout
            )
        except sqlite3.Error as exc:
            raise BackendError(f"cannot open SQLite database {path!r}: {exc}") from exc
        self._lock = threading.RLock()
        self._closed = False
        self._busy_timeout = busy_timeout
        self._ops = SqliteOps(self._conn)
        self._ops.busy_timeout = busy_timeout
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            if not self.memory:
                self._conn.execute("PRAGMA journal_mode = WAL")
                pages = (WAL_AUTOCHECKPOINT_PAGES_FULL if durability == "full"
                         else WAL_AUTOCHECKPOINT_PAGES)
                self._conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")
            self._conn.execute(
                f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}"
            )
            conn = self._conn
            migrate(conn.execute, lambda: conn.execute("ROLLBACK"), engine.migrations,
                    begin="BEGIN IMMEDIATE")
            # From here on a busy lock is waited for in short steps (_FIRST_WAIT).
            self._conn.execute("PRAGMA busy_timeout = 0")
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise BackendError(f"cannot open SQLite database {path!r}: {exc}") from exc
        except BaseException:
            self._conn.close()
            raise

    @property
    def capabilities(self) -> frozenset[str]:
        """``shared_across_processes`` for a file; nothing extra for ``:memory:``."""
        return self._engine.capabilities(self.path)

    def _check(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    @contextmanager
    def read(self) -> Iterator[SqliteOps]:
        """A read scope (autocommit statements under the store's lock)."""
        with self._lock:
            self._check()
            try:
                yield self._ops
            except sqlite3.Error as exc:
                raise BackendError(f"SQLite read failed: {exc}") from exc

    def write(self, session_id: str | None, *, session_lock: bool = True,
              locked_statements: bool = False) -> _WriteScope:
        """One ``BEGIN IMMEDIATE`` transaction (every writer's, whatever ``session_lock``
        and ``locked_statements`` say); rolled back if the body raises."""
        return _WriteScope(self)

    def change_signal(self) -> DataVersionSignal | None:
        """``PRAGMA data_version`` polled on a connection of its own; None in memory."""
        return None if self.memory else DataVersionSignal(self.path)

    def close(self) -> None:
        """Close the connection; idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()


def has_store(path: str) -> bool:
    """Whether the SQLite file ``path`` holds convostore's tables, asked on a read-only
    connection: nothing is created or written (an empty file stays empty).

    :raises BackendError: the file cannot be read, or is not a SQLite database.
    """
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            row = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (META,)
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise BackendError(f"cannot open SQLite database {path!r}: {exc}") from exc
    return row is not None

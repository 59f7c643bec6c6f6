"""How a SQLite store notices other connections' commits: ``PRAGMA data_version``, polled.

``data_version`` changes, on a connection, whenever another connection (of this process or any
other) commits to the file; asking costs a few microseconds and reads no table (SQLite compares
a counter in the WAL index). A watcher's signal polls it on a connection of its own every
:data:`POLL_INTERVAL` seconds, so a commit is noticed within that time with no query of the
change log in between. An in-memory database has no other connection: watchers there are woken
by the store's own writes only (see :mod:`convostore.feed._watch`).
"""

from __future__ import annotations

import sqlite3
import time

POLL_INTERVAL = 0.005
"""Seconds between two looks at ``data_version`` while a watcher waits (5 ms)."""


class DataVersionSignal:
    """:class:`~convostore.backends.base.ChangeSignal` of a SQLite file."""

    def __init__(self, path: str) -> None:
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False
        )
        self._version = self._read()

    def _read(self) -> int:
        if self._conn is None:
            return -1
        try:
            row = self._conn.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            return -1  # a transient failure: report a possible change, the reader re-asks
        return int(row[0])

    def wait(self, timeout: float) -> bool:
        """Poll until another connection committed, or ``timeout`` seconds went by."""
        deadline = time.monotonic() + timeout
        while True:
            version = self._read()
            if version != self._version or version < 0:
                self._version = version
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(POLL_INTERVAL, remaining))

    def close(self) -> None:
        """Close the polling connection; idempotent."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

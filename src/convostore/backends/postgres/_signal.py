"""How a PostgreSQL store notices commits: ``LISTEN`` on a dedicated connection.

Every write that logs a change sends ``pg_notify(channel, '')`` in its transaction while a
listening connection exists (see :mod:`convostore.backends.postgres._writes`); PostgreSQL delivers
it when, and only if,
the transaction commits. A watcher's signal holds one connection of its own in autocommit
that ``LISTEN`` on the store's channel (one per schema), holds the store's shared "listening"
advisory lock (which is how writers know someone listens) and waits on its socket: no query
runs while nothing commits.

A transaction-mode pooler (PgBouncer's ``pool_mode = transaction``) cannot carry ``LISTEN``:
the notifications go to whichever server connection the pooler picked. Give
``Sessions.open(..., listen_url=...)`` a direct URL to the server for this connection. When
the connection fails, the signal reports a possible change (the watcher reads the log again,
so nothing committed meanwhile is missed) and reconnects on the next wait.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg

logger = logging.getLogger("convostore")

RECONNECT_DELAY = 1.0
"""Seconds between two attempts to reconnect a failed listening connection."""


class ListenSignal:
    """:class:`~convostore.backends.base.ChangeSignal` of a PostgreSQL store."""

    def __init__(
        self, conninfo: str, channel: str, redacted: str, listening: tuple[str, int] | None
    ) -> None:
        """:param listening: the statement and key of the lock a listening connection holds
            (see :mod:`convostore.backends.postgres._writes`); None through a transaction pooler,
            which would leave the
            lock on a server connection (``LISTEN`` cannot work there either)."""
        self._conninfo = conninfo
        self._channel = channel
        self._listening = listening
        self._redacted = redacted
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self._failed_at = 0.0
        self._connect()

    def _connect(self) -> bool:
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True)
            conn.execute(f'LISTEN "{self._channel}"')
            if self._listening is not None:
                # Writers notify only while a connection holds this (released when it closes).
                conn.execute(self._listening[0], (self._listening[1],))
        except psycopg.Error as exc:
            self._failed_at = time.monotonic()
            logger.warning("convostore: cannot LISTEN on %s: %s", self._redacted, exc)
            return False
        self._conn = conn
        return True

    def wait(self, timeout: float) -> bool:
        """Wait for a notification of the store's channel, up to ``timeout`` seconds."""
        if self._closed:
            return False
        if self._conn is None:
            if time.monotonic() - self._failed_at < RECONNECT_DELAY:
                time.sleep(min(timeout, RECONNECT_DELAY))
                return False
            # Changes may have committed while no connection listened: report one.
            return self._connect()
        try:
            # Whatever else arrived with the first notification is taken by the next call.
            for _notify in self._conn.notifies(timeout=timeout, stop_after=1):
                return True
        except psycopg.Error as exc:
            logger.warning("convostore: lost the LISTEN connection to %s: %s",
                           self._redacted, exc)
            self._drop()
            return True
        return False

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._failed_at = time.monotonic()
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    def close(self) -> None:
        """Close the listening connection; idempotent."""
        self._closed = True
        self._drop()

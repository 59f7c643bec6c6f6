"""A PostgreSQL write scope's locks and pipeline (used by
:mod:`convostore.backends.postgres._engine`).

Writers of one session serialise on the session's state row, and every writer holds the
messages table's ``ROW EXCLUSIVE`` lock, which a store-wide scope's ``SHARE ROW EXCLUSIVE``
lock excludes (see :meth:`PostgresBackend._begin
<convostore.backends.postgres._engine.PostgresBackend._begin>`).
A statement takes the table lock itself with :data:`SHARED_LOCK_CTE`: a ``DELETE`` that
deletes nothing still locks its table (from the statement's start, prepared or not, before
anything else it does), so the lock needs no statement of its own, and a scope of statements
that each carry it may even run without a transaction of its own (one implicit transaction,
committed by the pipeline's final sync).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from .._schema import MESSAGES, SESSION_STATE

logger = logging.getLogger("convostore")

LOCK_STORE = f"LOCK TABLE {MESSAGES} IN SHARE ROW EXCLUSIVE MODE"
"""A store-wide scope's lock: excludes every writer (and every other store-wide scope)."""
LOCK_SHARED = f"LOCK TABLE {MESSAGES} IN ROW EXCLUSIVE MODE"
"""A writer's share of the store (the scopes that lock no session)."""
SHARED_LOCK_CTE = f"convostore_lock AS (DELETE FROM {MESSAGES} WHERE false)"
"""A ``WITH`` item that takes :data:`LOCK_SHARED`'s lock within its statement."""
# One statement takes the store's shared lock, creates the state row if missing and locks it
# either way: PostgreSQL locks the conflicting row for ON CONFLICT DO UPDATE even when its
# WHERE updates nothing.
LOCK_SESSION = (
    f"WITH {SHARED_LOCK_CTE} INSERT INTO {SESSION_STATE} AS s (session_id, epoch) "
    "VALUES (%s, 0) ON CONFLICT (session_id) DO UPDATE SET epoch = s.epoch WHERE false"
)
"""A session writer's locks, the store's shared one first, in one statement."""


@contextmanager
def pipeline(conn: psycopg.Connection[Any], *, abandon: bool = False) -> Iterator[None]:
    """Pipeline mode for a scope; when the body fails, errors of the final sync are dropped
    (the body's exception is the one that counts, and the transaction is rolled back).

    :param abandon: the scope has no transaction of its own: when the body fails, the
        connection is closed before the final sync, so the implicit transaction of what it
        sent never commits (the pool replaces the connection).
    """
    pipe = conn.pipeline()
    pipe.__enter__()
    try:
        yield
    except BaseException:
        if abandon:
            conn.close()
        try:
            pipe.__exit__(None, None, None)
        except psycopg.Error:
            pass
        raise
    pipe.__exit__(None, None, None)


def end(conn: psycopg.Connection[Any], command: str) -> None:
    """End the scope's transaction if one is open; a broken connection is left to the pool."""
    if conn.closed or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    try:
        conn.execute(command)
    except psycopg.Error:
        logger.debug("could not %s a PostgreSQL transaction", command, exc_info=True)

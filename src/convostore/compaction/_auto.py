"""Automatic compaction off the write path: one at a time per session, with backoff.

An append that inserted a row into a session configured with ``compact_after`` asks the
store's background worker (:mod:`convostore._background`) to look at that session; the append
returns at once. The worker then, for that session:

1. reads the token estimate (stamped per row: no content read); at or below the threshold,
   nothing more happens;
2. reads the session's lease row: another process holding an unexpired lease is compacting it
   now, and a ``retry_at`` in the future means an earlier attempt left the session above its
   threshold: in both cases it stops there;
3. takes the lease (a write transaction of the session: writers of a session are serialised, so
   two workers never both take it) for :data:`LEASE_MS`;
4. runs :meth:`~convostore.Session.compact` (the summariser), which stores the overlay and logs
   a ``compact`` change, or reports an ``error`` change;
5. reads the estimate again and releases the lease. The summariser is judged on the history
   it was given (the branch up to the leaf read before the call): messages appended while it
   ran are not its failure. Still above the threshold on that history after an attempt (a
   record was stored but the summary did not reduce enough, or the function raised): the
   attempt counts as failed and the next one waits :data:`BACKOFF_MS`, doubling with every
   failure in a row up to :data:`BACKOFF_CAP_MS`. A success clears the backoff, so the next
   append finds the session free to compact again if what arrived meanwhile put it back above
   its threshold. A function that returned None (nothing to compact yet, so no summariser
   call) leaves the backoff as it was: the next append asks again.

So a summariser that cannot bring the session under its threshold is called once, then at most
once per backoff period, however many appends follow (the issue measured 9 calls in 9 appends
before). The lease and backoff live in the database, so every process sharing it obeys them.
A process that dies holding a lease stalls that session's automatic compaction until the lease
expires; ``compact()`` by hand is never blocked by a lease.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from ..backends.base import Backend
from ..backends.rows import LeaseRow

LEASE_MS = 10 * 60 * 1000
"""How long a lease lasts (10 minutes): longer than a summariser call should ever take."""
BACKOFF_MS = 60 * 1000
"""The wait after a first failed attempt (1 minute); doubled with each failure in a row."""
BACKOFF_CAP_MS = 60 * 60 * 1000
"""The longest wait between two attempts (1 hour)."""


def backoff_ms(attempts: int) -> int:
    """The wait after ``attempts`` failed attempts in a row (0 after none)."""
    if attempts <= 0:
        return 0
    return int(min(BACKOFF_MS * 2 ** min(attempts - 1, 30), BACKOFF_CAP_MS))


class Estimate(Protocol):
    """A session's token estimate: of its active branch, or of the branch ending at ``leaf``."""

    def __call__(self, leaf: str | None = None) -> int: ...


class AutoCompaction:
    """The lease-and-backoff protocol of one store (its ``holder`` name is unique to it)."""

    def __init__(self, backend: Backend, holder: str) -> None:
        self._backend = backend
        self.holder = holder

    def run(
        self,
        session_id: str,
        threshold: int,
        estimate: Estimate,
        leaf: Callable[[], str | None],
        compact: Callable[[str | None], bool],
    ) -> bool:
        """Compact ``session_id`` if it is above ``threshold`` and no lease or backoff forbids
        it; True when it was attempted.

        :param leaf: the active leaf now (the end of the history the summariser is given).
        :param compact: runs the compaction of the branch ending at its argument; True when
            it was an attempt (a record stored or an error raised), False when the function
            found nothing to compact.
        """
        if estimate() <= threshold:
            return False
        with self._backend.read() as ops:
            lease = ops.lease_get(session_id)
        if not self._may_take(lease, _now_ms()):
            return False
        with self._backend.write(session_id) as ops:
            lease = ops.lease_get(session_id)
            now = _now_ms()
            if not self._may_take(lease, now):
                return False
            attempts = lease.attempts if lease is not None else 0
            retry_at = lease.retry_at if lease is not None else 0
            ops.lease_put(session_id, LeaseRow(self.holder, now + LEASE_MS, attempts, retry_at))
        attempted, reduced = True, False
        try:
            seen = leaf()
            attempted = compact(seen)
            # What arrived during the call is no failure of the summariser: the history it was
            # given is what it must have brought under the threshold.
            reduced = estimate() <= threshold or (
                attempted and seen is not None and estimate(seen) <= threshold)
        finally:
            if reduced:
                attempts, retry_at = 0, 0
            elif attempted:
                attempts += 1
                retry_at = _now_ms() + backoff_ms(attempts)
            with self._backend.write(session_id) as ops:
                ops.lease_put(session_id, LeaseRow("", 0, attempts, retry_at))
        return attempted

    def _may_take(self, lease: LeaseRow | None, now: int) -> bool:
        if lease is None:
            return True
        if lease.holder and lease.holder != self.holder and lease.expires_at > now:
            return False  # another worker is compacting this session now
        return lease.retry_at <= now


def _now_ms() -> int:
    return int(time.time() * 1000)

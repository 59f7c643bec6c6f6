"""A path's token estimate and stored bytes, from per-row stamps, memoised per session.

Totals never read message content: each row carries the token estimate and byte size stamped
when it was written. The last answer is kept with the leaf it was for and the session's epoch
(bumped by every write but a plain append), so after tail appends only the new rows are walked.
The memos live with the store (:class:`Memos`, bounded, least recently used dropped first), not
with a session handle: ``store.session(id).get_recent_history(...)`` per request drops its handle
each time, and must not walk the whole path again on the next request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..backends.base import Ops
from ..tokens import estimate_string_tokens
from ._history import plan

if TYPE_CHECKING:
    from .._core import StoreCore

_MEMO_WALK_LIMIT = 256
"""Most rows walked up from a new leaf to reach the memoised one before a full recount."""


@dataclass(frozen=True)
class _Memo:
    leaf_id: str
    epoch: int
    estimate: int
    total_bytes: int
    watch: frozenset[str]  # ids named by compaction records: a path gaining one needs a replan


class Memos:
    """The path-total memos of a store's sessions, by session id; at most ``size`` of them."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._memos: OrderedDict[str, _Memo] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str) -> _Memo | None:
        """The session's memo, or None."""
        with self._lock:
            memo = self._memos.get(session_id)
            if memo is not None:
                self._memos.move_to_end(session_id)
            return memo

    def forget(self, session_id: str) -> None:
        """Drop the session's memo (its rows were deleted)."""
        with self._lock:
            self._memos.pop(session_id, None)

    def put(self, session_id: str, memo: _Memo) -> None:
        """Keep ``memo`` for the session, dropping the least recently used beyond the bound."""
        with self._lock:
            self._memos[session_id] = memo
            self._memos.move_to_end(session_id)
            if len(self._memos) > self._size:
                self._memos.popitem(last=False)


class PathTotals:
    """Token estimate and stored bytes of a session's paths, memoised by leaf and epoch."""

    def __init__(self, core: StoreCore, session_id: str) -> None:
        self._core = core
        self._sid = session_id

    def __call__(self, ops: Ops, leaf: str) -> tuple[int, int]:
        """(token estimate, stored bytes) of the path ending at ``leaf``, without content."""
        sid = self._sid
        epoch = ops.epoch(sid)
        memo = self._core.path_memos.get(sid)
        if memo is not None and memo.epoch == epoch:
            if memo.leaf_id == leaf:
                return memo.estimate, memo.total_bytes
            steps = ops.walk_up(sid, leaf, memo.leaf_id, _MEMO_WALK_LIMIT)
            if (
                steps
                and steps[-1].id == memo.leaf_id
                and not any(s.id in memo.watch for s in steps[:-1])
            ):
                new = steps[:-1]
                extended = _Memo(
                    leaf, epoch,
                    memo.estimate + sum(s.token_estimate for s in new),
                    memo.total_bytes + sum(s.bytes for s in new),
                    memo.watch,
                )
                self._keep(extended)
                return extended.estimate, extended.total_bytes
        count = self._core.token_counter or estimate_string_tokens
        raw = ops.path(sid, leaf)
        total_bytes = sum(raw.bytes)
        records = ops.compactions(sid)
        path, spans = plan(ops, sid, raw, records)
        total = sum(path.tokens)
        for span in spans:
            total -= sum(path.tokens[span.start : span.end + 1])
            total += count(span.record.summary)
        watch = frozenset(
            [r.from_message_id for r in records] + [r.to_message_id for r in records]
        )
        fresh = _Memo(leaf, epoch, max(0, int(total)), total_bytes, watch)
        self._keep(fresh)
        return fresh.estimate, fresh.total_bytes

    def _keep(self, memo: _Memo) -> None:
        self._core.path_memos.put(self._sid, memo)

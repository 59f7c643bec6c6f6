"""A path's token estimate and stored bytes, from per-row stamps, memoised per session handle.

Totals never read message content: each row carries the token estimate and byte size stamped
when it was written. The last answer is kept with the leaf it was for and the session's epoch
(bumped by every write but a plain append), so after tail appends only the new rows are walked.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ._core import StoreCore
from ._history import plan
from .backends.base import Ops
from .tokens import estimate_string_tokens

_MEMO_WALK_LIMIT = 256
"""Most rows walked up from a new leaf to reach the memoised one before a full recount."""


@dataclass(frozen=True)
class _Memo:
    leaf_id: str
    epoch: int
    estimate: int
    total_bytes: int
    watch: frozenset[str]  # ids named by compaction records: a path gaining one needs a replan


class PathTotals:
    """Token estimate and stored bytes of a session's paths, memoised by leaf and epoch."""

    def __init__(self, core: StoreCore, session_id: str) -> None:
        self._core = core
        self._sid = session_id
        self._memo: _Memo | None = None
        self._lock = threading.Lock()

    def __call__(self, ops: Ops, leaf: str) -> tuple[int, int]:
        """(token estimate, stored bytes) of the path ending at ``leaf``, without content."""
        sid = self._sid
        epoch = ops.epoch(sid)
        with self._lock:
            memo = self._memo
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
        with self._lock:
            self._memo = memo

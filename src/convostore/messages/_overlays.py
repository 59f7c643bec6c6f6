"""Overlay planning: which compaction records apply to a path, and where.

A path is given as its strictly increasing seqs; records name messages by id, so the caller maps
each record's ids to seqs first (records are few, paths may be long).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..backends.rows import CompactionRow
from ..compaction import COMPACTION_PREFIX
from ..model import Message


@dataclass(frozen=True)
class Span:
    """A planned overlay: path positions ``start..end`` (inclusive) read as ``record``."""

    start: int
    end: int
    record: CompactionRow


def position(seqs: Sequence[int], seq: int | None) -> int:
    """Index of ``seq`` in the increasing ``seqs``, or -1."""
    if seq is None:
        return -1
    i = bisect_left(seqs, seq)
    return i if i < len(seqs) and seqs[i] == seq else -1


def plan_overlays(
    seqs: Sequence[int], records: Sequence[CompactionRow], seq_of: Mapping[str, int]
) -> list[Span]:
    """Plan overlays over a path, root → leaf.

    At each position the candidates are records starting there whose end is on the path at or
    after it; the newest (last in ``records``, which is seq order) wins, the walk resumes after
    its end, and records starting inside a chosen span are ignored (no stacking).
    """
    starts: dict[int, list[tuple[int, CompactionRow]]] = {}
    for rec in records:
        start = position(seqs, seq_of.get(rec.from_message_id))
        end = position(seqs, seq_of.get(rec.to_message_id))
        if start >= 0 and end >= start:
            starts.setdefault(start, []).append((end, rec))
    spans: list[Span] = []
    resume = 0
    for start in sorted(starts):
        if start < resume:
            continue
        end, rec = starts[start][-1]
        spans.append(Span(start, end, rec))
        resume = end + 1
    return spans


def synthetic_message(record: CompactionRow) -> Message:
    """The message a read shows in place of an overlay's span."""
    return {
        "id": COMPACTION_PREFIX + record.id,
        "role": "assistant",
        "parts": [{"type": "text", "text": record.summary}],
    }

"""A path's seqs as runs of consecutive seqs: how a read plans a path without walking it.

Appends write *chained* rows (the parent is the row just before, ``seq - 1``), so the path
ending at a leaf is made of runs of consecutive seqs, each opened by an unchained row (a root, a
branch, a re-parented row). :func:`chain_runs` finds the runs from the unchained rows alone; a
linear conversation of any length is then one run, two integers, read by seq ranges.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

CHAIN_HEADS = 1_000
"""Most unchained rows a read plans runs from; a session with more is walked row by row."""


class Runs(Sequence[int]):
    """Strictly increasing seqs held as runs ``first..last``; position ``i`` ↔ seq by bisection.

    It stands in for a path's ``seqs`` (``path.seqs`` is the object itself), so overlay
    planning finds positions in it as in an array."""

    __slots__ = ("_firsts", "_starts", "_len")

    def __init__(self, runs: Iterable[tuple[int, int]] = ()) -> None:
        self._firsts = array("q")  # the first seq of each run
        self._starts = array("q")  # the position of that seq
        n = 0
        for first, last in runs:
            if last < first:
                continue
            if not (self._firsts and self._firsts[-1] + (n - self._starts[-1]) == first):
                self._firsts.append(first)  # not adjacent to the run before: a new run
                self._starts.append(n)
            n += last - first + 1
        self._len = n

    @classmethod
    def of(cls, seqs: Iterable[int]) -> Runs:
        """Increasing ``seqs`` (a walked path) as runs."""
        return cls((s, s) for s in seqs)

    @property
    def seqs(self) -> Runs:
        """The seqs: the object itself (a path's ``seqs``)."""
        return self

    @property
    def runs(self) -> int:
        """How many runs hold the seqs."""
        return len(self._firsts)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> list[int]: ...

    def __getitem__(self, i: int | slice) -> int | list[int]:
        if isinstance(i, slice):
            lo, hi, step = i.indices(self._len)
            if step != 1:
                return [self[k] for k in range(lo, hi, step)]
            out: list[int] = []
            for first, last in self.ranges(lo, hi - 1):
                out.extend(range(first, last + 1))
            return out
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("position out of range")
        r = bisect_right(self._starts, i) - 1
        return self._firsts[r] + i - self._starts[r]

    def ranges(self, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        """The seqs at positions ``lo..hi`` (inclusive) as ``(first, last)`` ranges."""
        lo, hi = max(lo, 0), min(hi, self._len - 1)
        if lo > hi:
            return
        r = bisect_right(self._starts, lo) - 1
        while r < len(self._firsts) and self._starts[r] <= hi:
            start = self._starts[r]
            end = self._starts[r + 1] - 1 if r + 1 < len(self._starts) else self._len - 1
            a, b = max(lo, start), min(hi, end)
            yield self._firsts[r] + a - start, self._firsts[r] + b - start
            r += 1

    def without(self, seqs: Iterable[int]) -> Runs:
        """The same runs less ``seqs`` (each split where a seq is taken out)."""
        drop = sorted(set(seqs))
        if not drop:
            return self
        out: list[tuple[int, int]] = []
        for first, last in self.ranges(0, self._len - 1):
            for s in drop:
                if first <= s <= last:
                    out.append((first, s - 1))
                    first = s + 1
            out.append((first, last))
        return Runs(out)


def chain_runs(heads: Sequence[tuple[int, int | None]], leaf_seq: int) -> Runs | None:
    """The path ending at ``leaf_seq`` from the session's unchained rows ``(seq, parent's seq
    or None)``: every row between an unchained row and the next one is chained, so the leaf's
    run starts at the highest unchained seq at or below it, and the path goes on at that row's
    parent. None when no unchained row is below a run's top (the rows do not form chains)."""
    parent_of = dict(heads)
    seqs = sorted(parent_of)
    runs: list[tuple[int, int]] = []
    top = leaf_seq
    while True:
        i = bisect_right(seqs, top) - 1
        if i < 0:
            return None
        head = seqs[i]
        runs.append((head, top))
        parent = parent_of[head]
        if parent is None or parent >= head:  # no parent, or one written later: a root
            break
        top = parent
    runs.reverse()
    return Runs(runs)

"""Packing rows into read windows: how many rows one query may fetch, by count and by bytes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def pack(
    items: Iterable[T], size: Callable[[T], int], max_rows: int, max_bytes: int
) -> Iterator[list[T]]:
    """Consecutive windows of ``items``: at most ``max_rows`` items and ``max_bytes`` of
    ``size`` each, never empty (an item larger than ``max_bytes`` goes alone).

    Lazy both ways: a window is made when the one before it has been consumed, and a full
    window is yielded at once, before the next item is asked for (``items`` may be a read
    that fetches more rows on demand)."""
    window: list[T] = []
    used = 0
    for item in items:
        n = size(item)
        if window and used + n > max_bytes:
            yield window
            window, used = [], 0
        window.append(item)
        used += n
        if len(window) >= max_rows or used >= max_bytes:
            yield window
            window, used = [], 0
    if window:
        yield window

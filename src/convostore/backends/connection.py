"""What every SQL class runs its statements with: one connection, four ways to use it.

The shared SQL (:mod:`._sql` and the capability folders' ``_sql`` modules) is written against
:class:`SqlConnection`: an engine's operations class defines :meth:`SqlConnection._run` for its
driver, and may send :meth:`~SqlConnection._many` as one batch. Statements use ``?``
placeholders; :func:`_marks` and :func:`_batches` build and bound their ``IN (?, ...)`` lists.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

_T = TypeVar("_T")

_IN_BATCH = 500
"""Most keys in one ``IN (...)`` list, below every engine's parameter limit."""


def _marks(n: int) -> str:
    """``n`` comma-separated ``?`` placeholders."""
    return ",".join("?" * n)


def _batches(items: Sequence[_T]) -> Iterator[Sequence[_T]]:
    """``items`` in consecutive slices of at most :data:`_IN_BATCH`."""
    for i in range(0, len(items), _IN_BATCH):
        yield items[i : i + _IN_BATCH]


class SqlConnection(ABC):
    """Run one statement, fetch one row, fetch all rows, run one statement over many rows.

    The base of every SQL class: the capability mixins use these four and nothing else of the
    driver, so an engine supplies :meth:`_run` (and, if it can batch, :meth:`_many`) once.
    """

    __slots__ = ()

    @abstractmethod
    def _run(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Execute ``sql`` (``?`` placeholders) and return its cursor: iterable over its rows,
        with ``fetchone()`` and ``fetchall()``."""

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of ``sql``, or None."""
        row = self._run(sql, params).fetchone()
        return None if row is None else tuple(row)

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of ``sql``."""
        return list(self._run(sql, params).fetchall())

    def _many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run ``sql`` once per parameter row (an engine may send them as one batch)."""
        for row in rows:
            self._run(sql, row)

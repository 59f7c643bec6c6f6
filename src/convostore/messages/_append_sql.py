"""The one-row append as the shared operations compose it (a mixin of ``SqlOps``).

:meth:`AppendOps.append_row` is the common case of a message write (one row, no payload) as one
engine operation, so that an engine can send it at once: PostgreSQL overrides it with a single
statement (:mod:`convostore.backends.postgres._writes`). This default runs the steps one by one
with the operations every
engine has, which costs nothing on an engine that runs in process (SQLite).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable

from ..backends.rows import (
    Appended,
    ChangeRow,
    LeafProbe,
    Link,
    NewRow,
    Position,
    RowMeta,
    link_parent,
)


class AppendOps(ABC):
    """:meth:`append_row` over the other operations (see ``Ops.append_row``), which the other
    mixins of ``SqlOps`` and the engine define; each is documented on ``Ops``."""

    @abstractmethod
    def leaf_probe(self, session_id: str, id: str) -> LeafProbe:
        """See ``Ops.leaf_probe`` (the directory's SQL)."""

    @abstractmethod
    def row_meta(self, session_id: str, id: str) -> RowMeta | None:
        """See ``Ops.row_meta`` (the shared SQL)."""

    @abstractmethod
    def insert_message(self, row: NewRow, quiet: int | None = None) -> None:
        """See ``Ops.insert_message`` (the shared SQL)."""

    @abstractmethod
    def fts_exists(self) -> bool:
        """See ``Ops.fts_exists`` (the engine's)."""

    @abstractmethod
    def fts_insert(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """See ``Ops.fts_insert`` (the engine's)."""

    @abstractmethod
    def log_change(self, row: ChangeRow) -> Position:
        """See ``Ops.log_change`` (the change log's SQL)."""

    def append_row(
        self, row: NewRow, link: Link, index: Callable[[], str], change: ChangeRow | None,
        decline: bool = True,
    ) -> Callable[[], Appended]:
        # never declines: the scope asks for the search table itself
        sid = row.session_id
        exists, tail, top, chosen, run, quiet = self.leaf_probe(sid, row.id)
        if exists:
            return _NOT_WRITTEN
        parent = link_parent(link, tail, chosen, lambda pid: self.row_meta(sid, pid) is not None)
        # built whole rather than with _replace(), which costs as much again (every append)
        self.insert_message(NewRow._make((
            *row[:2], top + 1, parent, *row[4:10], parent is not None and parent == tail,
            run + row.bytes)), quiet)
        text = index() if self.fts_exists() else ""
        if text:
            self.fts_insert([(sid, row.id, text)])
        if change is None:
            return _WRITTEN
        position = self.log_change(ChangeRow._make((*change[:3], parent, *change[4:])))
        return lambda: Appended(True, position())


def _NOT_WRITTEN() -> Appended:
    return Appended(False, None)


def _WRITTEN() -> Appended:
    return Appended(True, None)

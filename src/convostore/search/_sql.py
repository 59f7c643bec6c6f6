"""The search index's SQL that both engines share (a mixin of ``SqlOps``).

The index itself is the engine's (SQLite: a contentless FTS5 table; PostgreSQL: a ``tsvector``
table under a GIN index), so the ``fts_*`` operations that touch it are declared here and
defined by each engine's operations. Shared: the backfill's cursor and the index's definition
(rows of the meta table), the backlog count, and :meth:`SearchOps._search`, which wraps an
engine's match query in the session filter, the order and the limit.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any

from ..backends._schema import MESSAGES, META
from ..backends.connection import SqlConnection
from ..backends.rows import FtsHit, OldTexts
from ..directory._sql import INTERNAL_PREFIX

_FTS_CURSOR = "fts_backfill_cursor"
"""The meta key of the search index's backfill cursor (present while a build is pending)."""
_FTS_DEFINITION = "fts_definition"
"""The meta key of what the search index holds for a message (recorded by its creation)."""


class SearchOps(SqlConnection):
    """The search index's operations: the engine defines the index's own (abstract here)."""

    # -- the engine's index (each documented on ``Ops``) --------------------------------------

    @abstractmethod
    def fts_exists(self) -> bool:
        """See ``Ops.fts_exists``."""

    @abstractmethod
    def fts_create(self) -> None:
        """See ``Ops.fts_create``."""

    @abstractmethod
    def fts_insert(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """See ``Ops.fts_insert``."""

    @abstractmethod
    def fts_delete(self, session_id: str, ids: Sequence[str], old_texts: OldTexts) -> None:
        """See ``Ops.fts_delete``."""

    @abstractmethod
    def fts_clear(self, session_id: str, old_texts: OldTexts) -> None:
        """See ``Ops.fts_clear``."""

    @abstractmethod
    def fts_search(
        self, query: str, session_id: str | None, limit: int, all_words: bool
    ) -> list[FtsHit]:
        """See ``Ops.fts_search``."""

    # -- the search index's backfill cursor (a row of the meta table while a build is pending)

    def fts_cursor(self) -> str | None:
        return self._meta_value(_FTS_CURSOR)

    def fts_set_cursor(self, cursor: str | None) -> None:
        self._set_meta_value(_FTS_CURSOR, cursor)

    def fts_definition(self) -> str | None:
        return self._meta_value(_FTS_DEFINITION)

    def fts_set_definition(self, definition: str) -> None:
        self._set_meta_value(_FTS_DEFINITION, definition)

    def _meta_value(self, key: str) -> str | None:
        row = self._one(f"SELECT value FROM {META} WHERE key = ?", (key,))
        return None if row is None else str(row[0])

    def _set_meta_value(self, key: str, value: str | None) -> None:
        if value is None:
            self._run(f"DELETE FROM {META} WHERE key = ?", (key,))
        else:
            self._run(
                f"INSERT INTO {META} (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def fts_backlog(self, after: tuple[str, str] | None) -> int:
        if after is None:
            row = self._one(f"SELECT count(*) FROM {MESSAGES}")
        else:
            row = self._one(
                f"SELECT count(*) FROM {MESSAGES} WHERE (session_id, id) > (?, ?)", after
            )
        return int(row[0]) if row is not None else 0

    def _search(
        self, select: str, match: Any, session_id: str | None, session_column: str,
        order: str, limit: int, hits: str | None = None,
    ) -> list[FtsHit]:
        """Hits of an engine's full-text query.

        ``select`` reads the matching rows (ending in the condition whose one ``?`` is
        ``match``); this adds the session filter on ``session_column`` (``session_id`` only
        when given, else every application session), the order and the limit. When ``select``
        reads keys only, ``hits`` reads the :class:`FtsHit` columns of the rows it keeps from
        the subquery ``{h}``: so message content is read for the hits returned only.
        """
        params: list[Any] = [match]
        if session_id is not None:
            select += f" AND {session_column} = ?"
            params.append(session_id)
        else:  # convostore's own sessions are not the application's conversations
            select += f" AND substr({session_column}, 1, {len(INTERNAL_PREFIX)}) <> ?"
            params.append(INTERNAL_PREFIX)
        params.append(limit)
        sql = f"{select} ORDER BY {order} LIMIT ?"
        if hits is not None:
            sql = hits.format(h=f"({sql}) h")
        return [FtsHit(*r) for r in self._all(sql, params)]

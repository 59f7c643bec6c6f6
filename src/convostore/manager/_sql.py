"""The session registry's SQL, written once for both engines (a mixin of ``SqlOps``).

The registry kept by :class:`convostore.manager.SessionManager` is the directory of
conversations (``convostore_sessions``, :mod:`convostore.directory._sql`): a managed session is a
directory row with ``managed = 1``, its name in ``title``, its lineage, model, source, usage
counters and ``end_reason`` in columns of their own. One directory, so a managed session is
listed, filtered and pruned like any other, and its message writes move its ``updated_at``.

Databases written before the directory kept the registry in a table of its own,
``convostore_registry``; the migration that creates the directory moves its rows there and drops
it (:data:`REGISTRY_LIFT`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from ..backends._schema import (
    DIRECTORY,
    MANAGED_ROWS,
    REGISTRY_INSERT_COLUMNS,
    REGISTRY_ON_CONFLICT,
    REGISTRY_SELECT,
)
from ..backends.connection import SqlConnection, _batches, _marks


class RegistryOps(SqlConnection):
    """Registry operations over the scope's connection; the engine answers
    :meth:`existing_tables` from its catalog."""

    @abstractmethod
    def existing_tables(self, names: Sequence[str]) -> set[str]:
        """Which of the tables ``names`` exist in the store's database (or schema)."""

    def registry_exists(self) -> bool:
        """Whether the registry's table exists: the directory always does."""
        return True

    def registry_create(self) -> None:
        """Nothing to create: the registry is the directory, made by the migrations."""

    def registry_insert(self, row: Sequence[Any]) -> None:
        """Register a session given in :data:`REGISTRY_COLUMNS` order (its directory row is
        created, or marked managed if the session was written already)."""
        values = (*row, 0, 1)
        self._run(
            f"INSERT INTO {DIRECTORY} AS d ({REGISTRY_INSERT_COLUMNS}) "
            f"VALUES ({_marks(len(values))}) "
            + REGISTRY_ON_CONFLICT,
            values,
        )

    def registry_get(self, id: str) -> tuple[Any, ...] | None:
        """The row of ``id`` in :data:`REGISTRY_COLUMNS` order, or None."""
        return self._one(
            f"SELECT {REGISTRY_SELECT} FROM {DIRECTORY} WHERE session_id = ? AND {MANAGED_ROWS}",
            (id,),
        )

    def registry_page(
        self, limit: int | None, after: tuple[int, str] | None
    ) -> list[tuple[Any, ...]]:
        """Rows by ``(updated_at, id)`` descending, strictly after the ``after`` key if given."""
        sql = f"SELECT {REGISTRY_SELECT} FROM {DIRECTORY} WHERE {MANAGED_ROWS}"
        params: list[Any] = []
        if after is not None:
            sql += " AND (updated_at, session_id) < (?, ?)"
            params += [after[0], after[1]]
        sql += " ORDER BY updated_at DESC, session_id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return self._all(sql, params)

    def registry_known(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` have a registry row."""
        found: set[str] = set()
        for batch in _batches(list(dict.fromkeys(ids))):
            found.update(
                r[0]
                for r in self._all(
                    f"SELECT session_id FROM {DIRECTORY} WHERE session_id IN "
                    f"({_marks(len(batch))}) AND {MANAGED_ROWS}",
                    tuple(batch),
                )
            )
        return found

    def registry_count(self) -> int:
        """How many sessions the registry holds."""
        row = self._one(f"SELECT count(*) FROM {DIRECTORY} WHERE {MANAGED_ROWS}")
        return int(row[0]) if row else 0

    def _registry_update(self, id: str, assignments: str, params: Sequence[Any]) -> bool:
        # A probe, then the update: no RETURNING (older SQLite builds lack it) and no rowcount
        # (not known yet inside a PostgreSQL pipeline).
        if self._one(f"SELECT 1 FROM {DIRECTORY} WHERE session_id = ? AND {MANAGED_ROWS}",
                     (id,)) is None:
            return False
        self._run(f"UPDATE {DIRECTORY} SET {assignments} WHERE session_id = ?", (*params, id))
        return True

    def registry_touch(self, id: str, now: int) -> bool:
        """Set ``updated_at``; False when there is no such row."""
        return self._registry_update(id, "updated_at = ?", (now,))

    def registry_set_name(self, id: str, name: str, now: int) -> bool:
        """Rename ``id`` and set ``updated_at``; False when there is no such row."""
        return self._registry_update(id, "title = ?, updated_at = ?", (name, now))

    def registry_end(self, id: str, reason: str, now: int) -> bool:
        """Record why ``id`` ended and set ``updated_at``; False when there is no such row."""
        return self._registry_update(id, "end_reason = ?, updated_at = ?", (reason, now))

    def registry_add_usage(
        self, id: str, input_tokens: int, output_tokens: int, cost: float, now: int
    ) -> bool:
        """Add to the three counters in one statement (concurrent additions all count)."""
        return self._registry_update(
            id,
            "input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
            "estimated_cost = estimated_cost + ?, updated_at = ?",
            (input_tokens, output_tokens, cost, now),
        )

    def registry_delete(self, id: str) -> bool:
        """Delete the row of ``id``; False when there is no such row."""
        if self._one(f"SELECT 1 FROM {DIRECTORY} WHERE session_id = ? AND {MANAGED_ROWS}",
                     (id,)) is None:
            return False
        self._run(f"DELETE FROM {DIRECTORY} WHERE session_id = ?", (id,))
        return True

"""The session registry's SQL, written once for both engines (a mixin of ``SqlOps``).

``convostore_registry`` is the directory kept by :class:`convostore.manager.SessionManager`:
one row per managed session, with its name, lineage, model, source, usage counters and times
(epoch milliseconds). A plain store never creates it: the manager does, with its first write.
The column types below mean the same in SQLite and PostgreSQL, so the DDL is shared too.

The index on ``(updated_at, id)`` serves the listing (most recently updated first) and its
keyset pages without sorting the table.

Whether the table exists is a catalog question each engine answers its own way
(``existing_tables`` of its operations).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import _batches, _marks

REGISTRY = "convostore_registry"
REGISTRY_COLUMNS = (
    "id", "name", "parent_session_id", "model", "source", "input_tokens", "output_tokens",
    "estimated_cost", "end_reason", "created_at", "updated_at",
)
"""The columns of a registry row, in the order the ``registry_*`` reads return them."""

_COLS = ", ".join(REGISTRY_COLUMNS)
_DDL = (
    f"""CREATE TABLE IF NOT EXISTS {REGISTRY} (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        parent_session_id TEXT,
        model TEXT,
        source TEXT,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        estimated_cost DOUBLE PRECISION NOT NULL DEFAULT 0,
        end_reason TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    )""",
    f"CREATE INDEX IF NOT EXISTS convostore_registry_updated ON {REGISTRY} (updated_at, id)",
)


class RegistryOps:
    """Registry operations; the engine supplies ``_run``/``_one``/``_all`` (see ``SqlOps``)."""

    def _run(self, sql: str, params: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        raise NotImplementedError

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def existing_tables(self, names: Sequence[str]) -> set[str]:
        """Which of the tables ``names`` exist in the store's database (or schema)."""
        raise NotImplementedError

    def registry_exists(self) -> bool:
        """True when the registry table exists (one catalog query)."""
        return REGISTRY in self.existing_tables([REGISTRY])

    def registry_create(self) -> None:
        """Create the table and its index if missing (run in a store-wide write scope)."""
        for statement in _DDL:
            self._run(statement)

    def registry_insert(self, row: Sequence[Any]) -> None:
        """Insert a row given in :data:`REGISTRY_COLUMNS` order."""
        self._run(
            f"INSERT INTO {REGISTRY} ({_COLS}) VALUES ({_marks(len(REGISTRY_COLUMNS))})",
            tuple(row),
        )

    def registry_get(self, id: str) -> tuple[Any, ...] | None:
        """The row of ``id`` in :data:`REGISTRY_COLUMNS` order, or None."""
        return self._one(f"SELECT {_COLS} FROM {REGISTRY} WHERE id = ?", (id,))

    def registry_page(
        self, limit: int | None, after: tuple[int, str] | None
    ) -> list[tuple[Any, ...]]:
        """Rows by ``(updated_at, id)`` descending, strictly after the ``after`` key if given."""
        sql = f"SELECT {_COLS} FROM {REGISTRY}"
        params: list[Any] = []
        if after is not None:
            sql += " WHERE (updated_at, id) < (?, ?)"
            params += [after[0], after[1]]
        sql += " ORDER BY updated_at DESC, id DESC"
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
                    f"SELECT id FROM {REGISTRY} WHERE id IN ({_marks(len(batch))})",
                    tuple(batch),
                )
            )
        return found

    def registry_count(self) -> int:
        """How many sessions the registry holds."""
        row = self._one(f"SELECT count(*) FROM {REGISTRY}")
        return int(row[0]) if row else 0

    def _registry_update(self, id: str, assignments: str, params: Sequence[Any]) -> bool:
        # A probe, then the update: no RETURNING (older SQLite builds lack it) and no rowcount
        # (not known yet inside a PostgreSQL pipeline).
        if self._one(f"SELECT 1 FROM {REGISTRY} WHERE id = ?", (id,)) is None:
            return False
        self._run(f"UPDATE {REGISTRY} SET {assignments} WHERE id = ?", (*params, id))
        return True

    def registry_touch(self, id: str, now: int) -> bool:
        """Set ``updated_at``; False when there is no such row."""
        return self._registry_update(id, "updated_at = ?", (now,))

    def registry_set_name(self, id: str, name: str, now: int) -> bool:
        """Rename ``id`` and set ``updated_at``; False when there is no such row."""
        return self._registry_update(id, "name = ?, updated_at = ?", (name, now))

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
        if self._one(f"SELECT 1 FROM {REGISTRY} WHERE id = ?", (id,)) is None:
            return False
        self._run(f"DELETE FROM {REGISTRY} WHERE id = ?", (id,))
        return True

"""One migration runner for every engine; each engine gives its DDL as data (:class:`Migrations`).

The schema is versioned in the ``convostore_meta`` table (key ``schema_version``). Opening a
store runs, in one transaction: create the meta table if missing, read the stored version,
refuse a newer one (:class:`~convostore.errors.SchemaTooNew`), run every step after it, record
:data:`~._schema.SCHEMA_VERSION`. Every statement is idempotent (``IF NOT EXISTS``), so a step
run twice, or by two processes one after the other, does no harm.

An engine supplies how a statement runs and how a failed transaction is rolled back (SQLite
lets a failed ``ROLLBACK`` surface; PostgreSQL keeps the original error), the statement that
opens the transaction, and statements to run first inside it (PostgreSQL: an advisory lock that
serialises every process migrating the schema, and the schema itself).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import SchemaTooNew
from ._schema import META, SCHEMA_VERSION

Execute = Callable[[str], Any]
"""Runs one statement without parameters and returns a cursor (``fetchone()``)."""

_READ_VERSION = f"SELECT value FROM {META} WHERE key = 'schema_version'"
_WRITE_VERSION = (
    f"INSERT INTO {META} (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}') "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


class AddColumn(str):
    """A step's ``ALTER TABLE ... ADD COLUMN`` (the string itself) that runs only when the
    engine's :attr:`Migrations.has_column` query finds no such column: SQLite's has no
    ``IF NOT EXISTS``, and steps must be safe to run again."""

    table: str
    column: str

    def __new__(cls, table: str, column: str, ddl: str) -> AddColumn:
        self = super().__new__(cls, ddl)
        self.table, self.column = table, column
        return self


@dataclass(frozen=True)
class Migrations:
    """An engine's schema as data: the meta table's DDL and the steps between versions.

    ``steps[i]`` brings a database from version ``i`` to ``i + 1``, so there is one step per
    version and a fresh database runs them all.
    """

    meta: str
    """``CREATE TABLE IF NOT EXISTS convostore_meta (...)`` in the engine's dialect."""
    steps: Sequence[Sequence[str]]
    has_column: str = ""
    """A query with ``{table}`` and ``{column}`` holes that returns a row when the column
    exists (for :class:`AddColumn`)."""

    def __post_init__(self) -> None:
        if len(self.steps) != SCHEMA_VERSION:
            raise ValueError(
                f"{len(self.steps)} migration steps for schema version {SCHEMA_VERSION}"
            )


def stored_version(execute: Execute) -> int:
    """The version recorded in the meta table (which must exist); 0 when none is."""
    row = execute(_READ_VERSION).fetchone()
    return int(row[0]) if row else 0


def migrate(
    execute: Execute,
    rollback: Callable[[], object],
    plan: Migrations,
    *,
    begin: str = "BEGIN",
    prepare: Sequence[str] = (),
) -> int:
    """Bring the database to :data:`SCHEMA_VERSION` in one transaction; the version found.

    :param execute: runs a statement on the connection (autocommit outside this transaction).
    :param rollback: ends the transaction after a failure (the failure is re-raised after it).
    :param plan: the engine's DDL.
    :param begin: the statement that opens the transaction.
    :param prepare: statements run first inside the transaction.
    :raises SchemaTooNew: the database was written by a newer convostore (nothing changes).
    """
    execute(begin)
    try:
        for statement in prepare:
            execute(statement)
        execute(plan.meta)
        version = stored_version(execute)
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(version, SCHEMA_VERSION)
        for step in plan.steps[version:]:
            for statement in step:
                if isinstance(statement, AddColumn) and execute(plan.has_column.format(
                        table=statement.table, column=statement.column)).fetchone() is not None:
                    continue
                execute(statement)
        if version != SCHEMA_VERSION:
            execute(_WRITE_VERSION)
        execute("COMMIT")
    except BaseException:
        rollback()
        raise
    return version

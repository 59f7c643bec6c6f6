"""Hash-partitioned tables for PostgreSQL (``Sessions.open(url, partitions=N)``).

The schema is written once, as plain ``CREATE TABLE`` statements (:mod:`.postgres`,
:mod:`convostore.backends.postgres._search`); :func:`partitioned` turns the statements that create
a session-keyed table
into a table ``PARTITION BY HASH`` of its session column plus its ``N`` partitions, and leaves
every other statement as it is. Indexes created on the parent afterwards are created on every
partition by PostgreSQL. Every unique key of a session-keyed table already starts with the
session id, which a partitioned (or sharded) table requires of each unique key. The payload
tables, keyed by content hash and shared by sessions, stay whole: on a sharded engine they are
reference tables (see ``docs/scaling.md``); so does the change log, whose positions are ordered
store-wide.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .._schema import (
    ATTACHMENT_REFS,
    COMPACTION_LEASES,
    COMPACTIONS,
    DIRECTORY,
    FTS,
    LG_BLOBS,
    LG_CHECKPOINTS,
    LG_WRITES,
    MESSAGE_CHUNKS,
    MESSAGES,
    SESSION_STATE,
)

SESSION_KEYED: dict[str, str] = {
    MESSAGES: "session_id",
    MESSAGE_CHUNKS: "session_id",
    COMPACTIONS: "session_id",
    ATTACHMENT_REFS: "session_id",
    SESSION_STATE: "session_id",
    FTS: "session_id",
    DIRECTORY: "session_id",
    COMPACTION_LEASES: "session_id",
    LG_CHECKPOINTS: "session_id",
    LG_BLOBS: "session_id",
    LG_WRITES: "session_id",
}
"""The tables partitioned (and, on a sharded engine, distributed) by session, and the column
that holds the session id in each."""

MAX_PARTITIONS = 1024

_CREATE = re.compile(r"\s*CREATE TABLE IF NOT EXISTS (\w+) \(", re.IGNORECASE)


def check_partitions(partitions: object) -> int | None:
    """``partitions`` as given to ``Sessions.open``: None, or an int from 2 to 1024."""
    if partitions is None:
        return None
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        raise TypeError(f"partitions must be an int, not {type(partitions).__name__}")
    if not 2 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be from 2 to {MAX_PARTITIONS}, not {partitions}")
    return partitions


def partition_name(table: str, index: int) -> str:
    """The name of partition ``index`` of ``table``."""
    return f"{table}_p{index}"


def partitioned(statements: Iterable[str], partitions: int | None) -> list[str]:
    """``statements`` with each session-keyed ``CREATE TABLE`` made hash-partitioned into
    ``partitions`` parts (None: unchanged)."""
    out: list[str] = []
    for statement in statements:
        match = _CREATE.match(statement) if partitions else None
        if match is None or match.group(1) not in SESSION_KEYED:
            out.append(statement)
            continue
        assert partitions is not None
        table = match.group(1)
        out.append(f"{statement.rstrip()} PARTITION BY HASH ({SESSION_KEYED[table]})")
        out.extend(
            f"CREATE TABLE IF NOT EXISTS {partition_name(table, i)} PARTITION OF {table} "
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i})"
            for i in range(partitions)
        )
    return out


PARTITION_COUNT = """SELECT count(i.inhrelid), max(p.partstrat)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
LEFT JOIN pg_partitioned_table p ON p.partrelid = c.oid
LEFT JOIN pg_inherits i ON i.inhparent = c.oid
WHERE c.relname = %s"""
"""How many partitions a table of the store's schema has, and its strategy (``h``: hash):
``(0, None)`` for a plain table, no row for no table."""

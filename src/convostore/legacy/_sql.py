"""The SQL that lifts databases written by the reference system, with holes each engine fills.

The behaviour of the lift (when to run, verification, what to drop, logging, the chat-message
conversion) lives in :mod:`convostore.legacy._lift`; :class:`LegacySql` holds the statements, and an
engine subclass says how it orders rows by insertion, measures UTF-8 bytes, converts a legacy
timestamp to epoch milliseconds and drops a table. A scope's operations carry their engine's
instance as ``ops.legacy`` (PostgreSQL's, :class:`PostgresLegacySql`, is here, beside the
statements, since it imports no driver); which tables exist is a catalog question of the operations
themselves (``ops.existing_tables``).

Legacy tables:

- ``assistant_messages`` (id, session_id, parent_id, role, content, created_at) and
  ``assistant_compactions`` (id, session_id, summary, from_message_id, to_message_id,
  created_at): v0.17 sessions; copied with one ``INSERT ... SELECT`` each.
- ``assistant_sessions``, ``assistant_fts``: the v0.17 registry and search index; dropped.
- ``cf_ai_chat_agent_messages`` (id, message, created_at): AIChatAgent's transcript; read in
  bounded windows and imported message by message.

Insertion order is SQLite's ``rowid`` and PostgreSQL's ``ctid``; a legacy ``created_at`` is a
``DATETIME`` text read as UTC in SQLite (unparsable → 0) and a ``TIMESTAMPTZ`` in PostgreSQL.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from ..backends._schema import COMPACTIONS, MESSAGES, SESSION_STATE

LEGACY_MESSAGES = "assistant_messages"
LEGACY_COMPACTIONS = "assistant_compactions"
LEGACY_REGISTRY = "assistant_sessions"
LEGACY_FTS = "assistant_fts"
CHAT_MESSAGES = "cf_ai_chat_agent_messages"

class LegacySql(ABC):
    """The statements both engines share, with the engine's pieces filled in.

    ``ops`` is always the operations of an open scope (a ``SqlOps``), typed loosely because the
    backend's scopes are typed by the narrower ``Ops`` protocol.
    """

    _ORDER = ""  # the insertion-order column
    _COLLATE = ""  # makes a legacy text comparable with our key columns

    @abstractmethod
    def _bytes(self, column: str) -> str:
        """An expression of the UTF-8 length in bytes of the text ``column``."""

    @abstractmethod
    def _ms(self, column: str) -> str:
        """An expression of the legacy timestamp ``column`` in epoch milliseconds."""

    @abstractmethod
    def drop(self, ops: Any, table: str) -> None:
        """Drop the legacy table ``table`` if it exists."""

    @abstractmethod
    def _seq(self, ops: Any, table: str, source: str) -> tuple[str, str, tuple[Any, ...]]:
        """How a copied row's seq is computed: (seq expression, join clause, parameters).

        A lifted row goes after its session's highest seq in ``table``, so it never collides
        with a row already there (a retry, or a row written before the lift); then
        row_number() in ``created_at``, insertion order.
        """

    def _numbered(self, offset: str) -> str:
        return (
            f"{offset} + row_number() OVER (PARTITION BY a.session_id "
            f"ORDER BY a.created_at, a.{self._ORDER})"
        )

    def copy_messages(self, ops: Any) -> None:
        """Copy every legacy message row: content verbatim, one row, seq in created order."""
        size = self._bytes("a.content")
        seq, join, params = self._seq(ops, MESSAGES, LEGACY_MESSAGES)
        ops._run(
            f"INSERT INTO {MESSAGES} (session_id, id, seq, parent_id, role, content_chunks, "
            "token_estimate, created_at, bytes, content) "
            f"SELECT a.session_id, a.id, {seq}, a.parent_id, a.role, 0, {size} / 4, "
            f"{self._ms('a.created_at')}, {size}, a.content FROM {LEGACY_MESSAGES} a{join} "
            "WHERE true ON CONFLICT DO NOTHING",  # WHERE: SQLite's upsert-after-SELECT rule
            params,
        )

    def copy_compactions(self, ops: Any) -> None:
        """Copy every legacy compaction record, keeping its id."""
        seq, join, params = self._seq(ops, COMPACTIONS, LEGACY_COMPACTIONS)
        ops._run(
            f"INSERT INTO {COMPACTIONS} (session_id, id, seq, summary, from_message_id, "
            f"to_message_id, created_at) SELECT a.session_id, a.id, {seq}, a.summary, "
            f"a.from_message_id, a.to_message_id, {self._ms('a.created_at')} "
            f"FROM {LEGACY_COMPACTIONS} a{join} WHERE true ON CONFLICT DO NOTHING",
            params,
        )

    def verify(self, ops: Any, table: str) -> tuple[int, int]:
        """(source rows, source rows found in the destination with the same session, id and
        identical content or summary)."""
        if table == LEGACY_MESSAGES:
            dest, same = MESSAGES, "d.content = a.content AND d.content_chunks = 0"
        else:
            dest, same = COMPACTIONS, "d.summary = a.summary"
        c = self._COLLATE
        row = ops._one(
            f"SELECT (SELECT count(*) FROM {table}), "
            f"(SELECT count(*) FROM {table} a JOIN {dest} d "
            f"ON d.session_id = a.session_id{c} AND d.id = a.id{c} AND {same})"
        )
        assert row is not None
        return int(row[0]), int(row[1])

    def bump_epochs(self, ops: Any, table: str) -> None:
        """Mark every session named in ``table`` as changed (invalidates memoised estimates)."""
        ops._run(
            f"INSERT INTO {SESSION_STATE} AS s (session_id, epoch) "
            f"SELECT DISTINCT session_id, 1 FROM {table} WHERE true "
            "ON CONFLICT (session_id) DO UPDATE SET epoch = s.epoch + 1"
        )

    def chat_order(self, ops: Any) -> list[tuple[str, int, Any]]:
        """(id, stored bytes, created_at) of every chat row, oldest first; no bodies read."""
        return [
            (r[0], int(r[1] or 0), r[2])
            for r in ops._all(
                f"SELECT id, {self._bytes('message')}, created_at FROM {CHAT_MESSAGES} "
                f"ORDER BY created_at, {self._ORDER}"
            )
        ]

    def chat_bodies(self, ops: Any, ids: Sequence[str]) -> dict[str, str]:
        """The ``message`` text of the chat rows ``ids`` (one window)."""
        if not ids:
            return {}
        return {
            r[0]: r[1]
            for r in ops._all(
                f"SELECT id, message FROM {CHAT_MESSAGES} "
                f"WHERE id IN ({','.join('?' * len(ids))})",
                tuple(ids),
            )
        }


class PostgresLegacySql(LegacySql):
    """PostgreSQL: ``ctid`` order, ``TIMESTAMPTZ`` to epoch milliseconds, tables found in the
    store's schema (the first of its ``search_path``)."""

    _ORDER = "ctid"
    _COLLATE = ' COLLATE "C"'  # our key columns are "C"; the legacy ones use the default

    def _bytes(self, column: str) -> str:
        return f"octet_length({column})"

    def _ms(self, column: str) -> str:
        return f"coalesce(floor(extract(epoch FROM {column}) * 1000)::bigint, 0)"

    def _seq(self, ops: Any, table: str, source: str) -> tuple[str, str, tuple[Any, ...]]:
        # The offsets are read first, by their own query: a subquery evaluated while the
        # INSERT runs would walk the index entries of every row copied so far (quadratic).
        # Usually no legacy session has rows here yet, and the offset is a plain 0.
        tops = ops._all(
            f"SELECT session_id, max(seq) FROM {table} WHERE session_id IN "
            f'(SELECT DISTINCT session_id COLLATE "C" FROM {source}) GROUP BY session_id'
        )
        if not tops:
            return self._numbered("0"), "", ()
        join = (
            " LEFT JOIN unnest(?::text[], ?::bigint[]) AS o(session_id, top) "
            f"ON o.session_id = a.session_id{self._COLLATE}"
        )
        return (
            self._numbered("coalesce(o.top, 0)"), join,
            ([r[0] for r in tops], [int(r[1]) for r in tops]),
        )

    def drop(self, ops: Any, table: str) -> None:
        # Inside DO: a DROP command tag would make psycopg discard its prepared statements in
        # the middle of the write scope's pipeline.
        ops._run(f"DO $$ BEGIN DROP TABLE IF EXISTS {table}; END $$")

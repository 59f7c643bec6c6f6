"""The SQL of the consistency check, written once for both engines (``?`` placeholders).

Each statement reads one session's rows through its keys (``session_id`` first), or pages
through a store-wide table by key, so a check holds at most a window of rows at a time. The
check reaches the database through a store's scopes; a scope's operations run these through
their ``_all`` / ``_run`` (the statements of :mod:`convostore.legacy._sql` run the same way).

Two things differ by engine and are told apart by what the database holds: the search index
(SQLite's FTS5 table keeps a ``_docsize`` row per indexed message row id, PostgreSQL's table is
keyed by session and message id), and whether the change log's positions are dense (SQLite
numbers rows ``max + 1`` under its single writer; PostgreSQL's identity sequence leaves a hole
for every write that rolled back after drawing a position, so a hole there is no damage).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..backends._schema import (
    ATTACHMENT_CHUNKS,
    ATTACHMENT_REFS,
    ATTACHMENTS,
    CHANGES,
    COMPACTIONS,
    DIRECTORY,
    FTS,
    MESSAGE_CHUNKS,
    MESSAGES,
    META,
)
from ..directory._sql import BYTES_SQL, COUNT_SQL


class RawOps(Protocol):
    """What the check needs of a scope's operations: run a statement, read its rows."""

    def _run(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Execute ``sql`` (``?`` placeholders); returns a cursor."""

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Execute ``sql`` and return every row."""


LANGGRAPH_REF = "langgraph"
"""The "message id" under which a LangGraph storage session refers to its large values
(``integrations._checkpoints``): a reference row with no message, on purpose."""
FTS_DOCSIZE = f"{FTS}_docsize"
"""SQLite's FTS5 shadow table with one row per indexed message row id (absent on PostgreSQL)."""

_SESSION_TABLES = (MESSAGES, COMPACTIONS, DIRECTORY, MESSAGE_CHUNKS, ATTACHMENT_REFS)


def session_page(first: bool) -> str:
    """Ids of every session something is stored for, in byte order, after ``?`` (given five
    times; from ``?`` on when ``first``: the default session's id is ``""``), at most ``?``."""
    op = ">=" if first else ">"
    return ("SELECT session_id FROM (" + " UNION ".join(
        f"SELECT session_id FROM {t} WHERE session_id {op} ?" for t in _SESSION_TABLES
    ) + ") s ORDER BY 1 LIMIT ?")


SESSION_COUNT = "SELECT count(*) FROM (" + " UNION ".join(
    f"SELECT session_id FROM {t}" for t in _SESSION_TABLES) + ") s"
"""How many sessions :func:`session_page` lists in all (the progress bar's total)."""

# -- the tree of one session --------------------------------------------------------------

MISSING_PARENTS = (
    f"SELECT m.id, m.parent_id FROM {MESSAGES} m WHERE m.session_id = ? "
    "AND m.parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
    f"{MESSAGES} p WHERE p.session_id = m.session_id AND p.id = m.parent_id) ORDER BY m.seq"
)
"""``(id, parent_id)`` of the session's rows whose parent it does not hold."""
BACK_LINKS = (
    f"SELECT m.id FROM {MESSAGES} m JOIN {MESSAGES} p ON p.session_id = m.session_id "
    "AND p.id = m.parent_id WHERE m.session_id = ? AND p.seq >= m.seq ORDER BY m.seq"
)
"""Ids of rows whose parent was written after them (or is themselves): every loop of parent
links has at least one such link, and a tree written by the store has none."""
IN_LOOP = (
    # UNION (not UNION ALL) keeps each id once, so the walk ends even inside a loop.
    f"WITH RECURSIVE up(id) AS (SELECT parent_id FROM {MESSAGES} WHERE session_id = ? "
    f"AND id = ? UNION SELECT m.parent_id FROM {MESSAGES} m JOIN up ON m.id = up.id "
    "WHERE m.session_id = ? AND m.parent_id IS NOT NULL) "
    "SELECT count(*) FROM up WHERE id = ?"
)
"""1 when following parents from the message ``(session, id)`` comes back to it, else 0
(parameters: session, id, session, id)."""
BAD_CHAIN_FLAGS = (
    f"SELECT m.id FROM {MESSAGES} m WHERE m.session_id = ? AND m.chained = 1 AND NOT EXISTS "
    f"(SELECT 1 FROM {MESSAGES} p WHERE p.session_id = m.session_id AND p.seq = m.seq - 1 "
    "AND p.id = m.parent_id) ORDER BY m.seq"
)
"""Ids of rows marked as plain appends whose parent is not the row just before them."""
SET_ROOT = f"UPDATE {MESSAGES} SET parent_id = NULL, chained = 0 WHERE session_id = ? AND id = ?"
"""Make a row a root (its parent link cut)."""
CLEAR_CHAIN_FLAG = f"UPDATE {MESSAGES} SET chained = 0 WHERE session_id = ? AND id = ?"
"""Clear a row's plain-append mark (it then sits in the parent index like a branch)."""

# -- continuation rows ----------------------------------------------------------------------

MISSING_CHUNKS = (
    f"SELECT m.id, m.content_chunks, count(c.idx) FROM {MESSAGES} m LEFT JOIN {MESSAGE_CHUNKS} "
    "c ON c.session_id = m.session_id AND c.id = m.id AND c.idx >= 1 "
    "AND c.idx <= m.content_chunks WHERE m.session_id = ? AND m.content_chunks > 0 "
    "GROUP BY m.id, m.content_chunks HAVING count(c.idx) <> m.content_chunks ORDER BY m.id"
)
"""``(id, expected, present)`` of rows missing some of their continuation rows ``1..n`` (the
key is unique, so ``n`` rows in that range are exactly ``1..n``, in order)."""
_NOT_OWNED = (
    f"NOT EXISTS (SELECT 1 FROM {MESSAGES} m WHERE m.session_id = {MESSAGE_CHUNKS}.session_id "
    f"AND m.id = {MESSAGE_CHUNKS}.id AND {MESSAGE_CHUNKS}.idx >= 1 "
    f"AND {MESSAGE_CHUNKS}.idx <= m.content_chunks)"
)
STRAY_CHUNKS = (
    f"SELECT id, count(*) FROM {MESSAGE_CHUNKS} WHERE session_id = ? AND {_NOT_OWNED} "
    "GROUP BY id ORDER BY id"
)
"""``(id, rows)`` of continuation rows outside their message's range (or of no message)."""
DELETE_STRAY_CHUNKS = f"DELETE FROM {MESSAGE_CHUNKS} WHERE session_id = ? AND {_NOT_OWNED}"
"""Delete the session's continuation rows that :data:`STRAY_CHUNKS` lists."""


def content_window(indexed: str | None) -> str:
    """The session's rows after a ``seq``, in ``seq`` order, at most ``?`` (parameters:
    session, seq, limit): the columns of a ``ContentRow``, then whether the row has a search
    entry (``indexed``: an engine's :data:`INDEXED_SQLITE` / :data:`INDEXED_PG`; None: 1)."""
    return (
        "SELECT m.id, m.parent_id, m.seq, m.content, m.content_chunks, m.created_at, "
        f"{'1' if indexed is None else indexed} FROM {MESSAGES} m WHERE m.session_id = ? "
        "AND m.seq > ? ORDER BY m.seq LIMIT ?"
    )


REFS_OF_SESSION = (
    f"SELECT message_id, hash FROM {ATTACHMENT_REFS} WHERE session_id = ? AND message_id "
    "IN ({marks})"
)
"""The reference rows of some messages of a session (``{marks}``: one ``?`` per id)."""

# -- attachment references and payloads ------------------------------------------------------

REFS_WITHOUT_MESSAGE = (
    f"SELECT r.message_id, r.hash FROM {ATTACHMENT_REFS} r WHERE r.session_id = ? "
    f"AND r.message_id <> ? AND NOT EXISTS (SELECT 1 FROM {MESSAGES} m "
    "WHERE m.session_id = r.session_id AND m.id = r.message_id) ORDER BY r.message_id, r.hash"
)
"""``(message_id, hash)`` of reference rows of messages that do not exist (parameters: session,
:data:`LANGGRAPH_REF`)."""
REFS_WITHOUT_PAYLOAD = (
    f"SELECT r.message_id, r.hash FROM {ATTACHMENT_REFS} r WHERE r.session_id = ? "
    f"AND NOT EXISTS (SELECT 1 FROM {ATTACHMENTS} a WHERE a.hash = r.hash) "
    "ORDER BY r.message_id, r.hash"
)
"""``(message_id, hash)`` of the session's reference rows whose payload is not stored."""
PAYLOAD_PAGE = (
    f"SELECT a.hash, a.chunks, (SELECT count(*) FROM {ATTACHMENT_CHUNKS} c "
    f"WHERE c.hash = a.hash), (SELECT count(*) FROM {ATTACHMENT_REFS} r WHERE r.hash = a.hash) "
    f"FROM {ATTACHMENTS} a WHERE a.hash > ? ORDER BY a.hash LIMIT ?"
)
"""``(hash, chunks, chunk rows, references)`` of payloads after a hash, at most ``?``."""
ORPHAN_PAYLOAD_CHUNKS = (
    f"SELECT DISTINCT c.hash FROM {ATTACHMENT_CHUNKS} c WHERE NOT EXISTS "
    f"(SELECT 1 FROM {ATTACHMENTS} a WHERE a.hash = c.hash) ORDER BY c.hash"
)
"""Hashes of payload chunk rows without their payload row (never read, never collected)."""
DELETE_ORPHAN_PAYLOAD_CHUNKS = (
    f"DELETE FROM {ATTACHMENT_CHUNKS} WHERE hash = ? AND NOT EXISTS "
    f"(SELECT 1 FROM {ATTACHMENTS} a WHERE a.hash = {ATTACHMENT_CHUNKS}.hash)"
)
"""Delete the chunk rows of a hash that has no payload row."""

# -- compactions ----------------------------------------------------------------------------

COMPACTION_ENDS = (
    "SELECT c.id, c.from_message_id, c.to_message_id, "
    f"(SELECT count(*) FROM {MESSAGES} m WHERE m.session_id = c.session_id "
    "AND m.id = c.from_message_id), "
    f"(SELECT count(*) FROM {MESSAGES} m WHERE m.session_id = c.session_id "
    f"AND m.id = c.to_message_id) FROM {COMPACTIONS} c WHERE c.session_id = ? ORDER BY c.seq"
)
"""``(id, from, to, from stored, to stored)`` of the session's compactions (stored: 0 or 1)."""
IS_ANCESTOR = (
    f"WITH RECURSIVE up(id) AS (SELECT id FROM {MESSAGES} WHERE session_id = ? AND id = ? "
    f"UNION SELECT m.parent_id FROM {MESSAGES} m JOIN up ON m.id = up.id "
    "WHERE m.session_id = ? AND m.parent_id IS NOT NULL) SELECT count(*) FROM up WHERE id = ?"
)
"""1 when the message ``?`` (4th) is the message ``(session, id)`` or one of its ancestors
(parameters: session, id, session, ancestor)."""

# -- the directory --------------------------------------------------------------------------

DIRECTORY_VS_MESSAGES = (
    f"SELECT (SELECT count(*) FROM {MESSAGES} WHERE session_id = ?), "
    f"(SELECT COALESCE(sum(bytes), 0) FROM {MESSAGES} WHERE session_id = ?), "
    f"(SELECT {COUNT_SQL} FROM {DIRECTORY} d WHERE d.session_id = ?), "
    f"(SELECT {BYTES_SQL} FROM {DIRECTORY} d WHERE d.session_id = ?)"
)
"""``(messages, bytes, directory count, directory bytes)`` of a session, in one statement (one
snapshot); the directory's are NULL without a row."""
ZERO_DIRECTORY = (
    f"UPDATE {DIRECTORY} SET message_count = 0, bytes = 0 WHERE session_id = ? AND NOT EXISTS "
    f"(SELECT 1 FROM {MESSAGES} m WHERE m.session_id = {DIRECTORY}.session_id)"
)
"""Zero the counts of a session's directory row when it holds no message (a recount of the
messages leaves such a row alone)."""

# -- the search index -----------------------------------------------------------------------

INDEXED_SQLITE = f"EXISTS (SELECT 1 FROM {FTS_DOCSIZE} d WHERE d.id = m.rid)"
"""Whether the row ``m`` has a search entry (SQLite)."""
INDEXED_PG = (
    f"EXISTS (SELECT 1 FROM {FTS} f WHERE f.session_id = m.session_id AND f.id = m.id)"
)
"""Whether the row ``m`` has a search entry (PostgreSQL)."""
STALE_SQLITE = (
    f"SELECT count(*) FROM {FTS_DOCSIZE} d WHERE NOT EXISTS "
    f"(SELECT 1 FROM {MESSAGES} m WHERE m.rid = d.id)"
)
"""How many search entries belong to no message row (SQLite)."""
STALE_PG = (
    f"SELECT count(*) FROM {FTS} f WHERE NOT EXISTS "
    f"(SELECT 1 FROM {MESSAGES} m WHERE m.session_id = f.session_id AND m.id = f.id)"
)
"""How many search entries belong to no message row (PostgreSQL)."""
CLEAR_SQLITE = f"INSERT INTO {FTS} ({FTS}) VALUES ('delete-all')"
"""Empty the index (a contentless FTS5 table can forget one entry only given its words)."""
CLEAR_PG = f"DELETE FROM {FTS}"
"""Empty the index (PostgreSQL)."""

# -- the change log -------------------------------------------------------------------------

CHANGE_GAPS = (
    f"SELECT c.pos, (SELECT max(p.pos) FROM {CHANGES} p WHERE p.pos < c.pos) FROM {CHANGES} c "
    f"WHERE c.pos > ? AND NOT EXISTS (SELECT 1 FROM {CHANGES} p WHERE p.pos = c.pos - 1) "
    "ORDER BY c.pos"
)
"""``(pos, previous pos or NULL)`` of each row after the horizon + 1 (``?``) whose position
does not follow another row's: the positions between are missing."""
HORIZON = f"SELECT value FROM {META} WHERE key = ?"
"""The change log's trim horizon (parameter: ``feed._sql.TRIMMED_KEY``)."""
SET_HORIZON = (
    f"INSERT INTO {META} (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
"""Record the trim horizon (parameters: ``feed._sql.TRIMMED_KEY``, the position as text)."""

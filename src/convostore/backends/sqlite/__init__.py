"""The SQLite engine: one connection per store, WAL, ``BEGIN IMMEDIATE`` writes, FTS5 search.

One connection is shared by every thread of the store behind a re-entrant lock (a ``:memory:``
database exists only inside its connection, and SQLite serialises writers anyway). Several
processes may open one file: ``BEGIN IMMEDIATE`` takes the write lock before anything is read,
so each write transaction sees the rows every earlier writer committed, and the busy timeout
makes a writer wait its turn instead of failing.

This module holds the schema as data and ends with the engine's declaration (:data:`ENGINE`):
URLs are a file path (or ``os.PathLike``), ``sqlite:///relative.db``, ``sqlite:////absolute.db``,
``file:path`` and ``:memory:``; options ``durability`` and ``busy_timeout``; one worker thread
for the async API, since one connection serves the store. It imports no driver: the operations
and the backend live in :mod:`convostore.backends.sqlite._engine`, imported on open.
"""

from __future__ import annotations

import os

from ...directory._sql import DIRECTORY_BACKFILL, DIRECTORY_INDEXES, DIRECTORY_TO_TAIL_TOTALS
from ...errors import InvalidURL
from .. import _schema as tables
from .._migrate import AddColumn, Migrations
from ..base import SHARED_ACROSS_PROCESSES, Backend, Engine, OpenOptions

# Each step brings a database from the version before it to its own number (index + 1).
_STEPS: list[list[str]] = [
    [
        f"""CREATE TABLE IF NOT EXISTS {tables.MESSAGES} (
            rid INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            parent_id TEXT,
            role TEXT NOT NULL,
            content_chunks INTEGER NOT NULL DEFAULT 0,
            token_estimate INTEGER NOT NULL DEFAULT 0,
            created_at INTEGER NOT NULL,
            bytes INTEGER NOT NULL DEFAULT 0,
            content TEXT NOT NULL,
            UNIQUE (session_id, id)
        )""",
        f"CREATE UNIQUE INDEX IF NOT EXISTS convostore_messages_seq ON {tables.MESSAGES} "
        "(session_id, seq)",
        f"CREATE INDEX IF NOT EXISTS convostore_messages_parent ON {tables.MESSAGES} "
        "(session_id, parent_id)",
        """CREATE TABLE IF NOT EXISTS convostore_message_chunks (
            session_id TEXT NOT NULL, id TEXT NOT NULL, idx INTEGER NOT NULL,
            content TEXT NOT NULL, PRIMARY KEY (session_id, id, idx)
        ) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS convostore_compactions (
            session_id TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL,
            summary TEXT NOT NULL, from_message_id TEXT NOT NULL, to_message_id TEXT NOT NULL,
            created_at INTEGER NOT NULL, PRIMARY KEY (session_id, id)
        ) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS convostore_attachments (
            hash TEXT PRIMARY KEY, bytes INTEGER NOT NULL, media_type TEXT NOT NULL,
            chunks INTEGER NOT NULL
        ) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS convostore_attachment_chunks (
            hash TEXT NOT NULL, idx INTEGER NOT NULL, data BLOB NOT NULL,
            PRIMARY KEY (hash, idx)
        )""",
        """CREATE TABLE IF NOT EXISTS convostore_attachment_refs (
            session_id TEXT NOT NULL, message_id TEXT NOT NULL, hash TEXT NOT NULL,
            PRIMARY KEY (session_id, message_id, hash)
        ) WITHOUT ROWID""",
    ],
    [
        f"""CREATE TABLE IF NOT EXISTS {tables.SESSION_STATE} (
            session_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL
        ) WITHOUT ROWID""",
        f"CREATE INDEX IF NOT EXISTS convostore_attachment_refs_hash ON {tables.ATTACHMENT_REFS} "
        "(hash)",
    ],
    [
        # Plain appends (parent = the row before) leave the parent index alone: one b-tree
        # fewer per append. Rows written before this version stay indexed (chained = 0).
        f"ALTER TABLE {tables.MESSAGES} ADD COLUMN chained INTEGER NOT NULL DEFAULT 0",
        "DROP INDEX IF EXISTS convostore_messages_parent",
        f"CREATE INDEX IF NOT EXISTS convostore_messages_branch ON {tables.MESSAGES} "
        "(session_id, parent_id) WHERE chained = 0",
    ],
    [
        # The directory of conversations (see directory/_sql.py), filled from the stored messages.
        f"""CREATE TABLE IF NOT EXISTS {tables.DIRECTORY} (
            session_id TEXT PRIMARY KEY,
            internal INTEGER NOT NULL DEFAULT 0,
            title TEXT, owner TEXT, metadata TEXT,
            created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
            message_count INTEGER NOT NULL DEFAULT 0, bytes INTEGER NOT NULL DEFAULT 0,
            expires_at INTEGER, ttl INTEGER, active_leaf TEXT, context_of TEXT,
            managed INTEGER NOT NULL DEFAULT 0, parent_session_id TEXT, model TEXT, source TEXT,
            input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
            estimated_cost REAL NOT NULL DEFAULT 0, end_reason TEXT
        ) WITHOUT ROWID""",
        *DIRECTORY_INDEXES,
        DIRECTORY_BACKFILL,
        *tables.REGISTRY_LIFT,  # the session manager's registry: now rows of the directory
    ],
    [
        # The change log: writers are serialised, so rowid order is commit order (see
        # feed/_sql.py). No AUTOINCREMENT: trimming always keeps the newest row.
        f"""CREATE TABLE IF NOT EXISTS {tables.CHANGES} (
            pos INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            message_id TEXT,
            parent_id TEXT,
            leaf_id TEXT,
            data TEXT,
            created_at INTEGER NOT NULL
        )""",
        f"""CREATE TABLE IF NOT EXISTS {tables.COMPACTION_LEASES} (
            session_id TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            expires_at INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            retry_at INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID""",
    ],
    [
        # The LangGraph checkpointer (integrations.langgraph); keys start with the session id.
        # Values and writes may be large: rowid tables, whose key index stays small.
        f"""CREATE TABLE IF NOT EXISTS {tables.LG_CHECKPOINTS} (
            session_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
            parent_checkpoint_id TEXT, run_id TEXT, type TEXT NOT NULL,
            checkpoint BLOB NOT NULL, metadata BLOB NOT NULL, versions TEXT NOT NULL,
            PRIMARY KEY (session_id, checkpoint_ns, checkpoint_id)
        ) WITHOUT ROWID""",
        f"""CREATE TABLE IF NOT EXISTS {tables.LG_BLOBS} (
            session_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, channel TEXT NOT NULL,
            version TEXT NOT NULL, type TEXT NOT NULL, data BLOB, hash TEXT,
            PRIMARY KEY (session_id, checkpoint_ns, channel, version)
        )""",
        f"""CREATE TABLE IF NOT EXISTS {tables.LG_WRITES} (
            session_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
            task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL,
            type TEXT NOT NULL, data BLOB, hash TEXT, task_path TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (session_id, checkpoint_ns, checkpoint_id, task_id, idx)
        )""",
    ],
    [
        # Totals carried by the newest row (see directory/_sql.py): an append leaves the
        # directory row alone. Older rows hold 0, so only the counts' base moves.
        AddColumn(tables.MESSAGES, "run_bytes",
                  f"ALTER TABLE {tables.MESSAGES} ADD COLUMN run_bytes INTEGER NOT NULL DEFAULT 0"),
        DIRECTORY_TO_TAIL_TOTALS,
    ],
    [
        # The search index keeps no copy of the text any more: the old one is dropped, and the
        # next search (or build_search_index) builds the new one from the stored messages.
        f"DROP TABLE IF EXISTS {tables.FTS}",
        f"DELETE FROM {tables.META} WHERE key = 'fts_backfill_cursor'",
    ],
]

MIGRATIONS = Migrations(
    meta=f"CREATE TABLE IF NOT EXISTS {tables.META} (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    steps=_STEPS,
    has_column="SELECT 1 FROM pragma_table_info('{table}') WHERE name = '{column}'",
)
"""The SQLite schema as data for :func:`~._migrate.migrate` (the same steps as PostgreSQL's)."""


# --- the engine's declaration (read by ._engines) ---------------------------------------------

_MEMORY_URLS = (":memory:", "sqlite://", "sqlite:///:memory:", "sqlite://:memory:")


def _parse(url: str) -> str | None:
    """The path of a SQLite URL (``":memory:"`` for an in-memory database), None for another
    engine's URL; a bare path is not parsed here (the registry gives it to this engine)."""
    if url in _MEMORY_URLS:
        return ":memory:"
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not path:
            raise InvalidURL(f"no database path in {url!r}")
        return path  # sqlite:////abs.db keeps its leading slash
    if url.startswith("file:"):
        return url[len("file:") :]
    return None


def _workers(pool_size: object) -> int:
    """One worker thread: it alone uses the store's one connection."""
    return 1


def _capabilities(target: str | None) -> frozenset[str]:
    """``shared_across_processes`` for a file; nothing extra in memory."""
    return frozenset() if target in (":memory:", "") else frozenset({SHARED_ACROSS_PROCESSES})


def _local_file(target: str) -> str | None:
    """The database file of ``target``; None for ``:memory:``."""
    return None if target == ":memory:" else target


def _has_store(target: str) -> bool:
    """Whether the file ``target`` holds a store, asked read-only; False for a missing file
    and for ``:memory:`` (a new in-memory database is always empty)."""
    if target == ":memory:" or not os.path.exists(target):
        return False
    from ._engine import has_store  # sqlite3: imported when asked only

    return has_store(target)


def open_sqlite(target: str | None, options: OpenOptions) -> Backend:
    """A :class:`~convostore.backends.sqlite._engine.SqliteBackend` on the path ``target``."""
    from ._engine import SqliteBackend  # sqlite3: imported when opening only

    assert target is not None  # only an engine that takes pool= is opened without a target
    return SqliteBackend(target, engine=ENGINE, durability=options.durability,
                         busy_timeout=options.busy_timeout)


ENGINE = Engine(
    "sqlite", "SQLite", forms=("a file path", "sqlite:///path", ":memory:"), paths=True,
    parse=_parse, open=open_sqlite, workers=_workers, capabilities=_capabilities,
    local_file=_local_file, migrations=MIGRATIONS, has_store=_has_store,
)
"""The SQLite engine's declaration, listed in :data:`convostore.backends._engines.ENGINES`."""

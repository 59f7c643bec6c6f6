"""The PostgreSQL engine: a psycopg 3 connection pool, row-locked writes, tsvector search.

This module declares the engine (:data:`ENGINE`) and holds its schema as data; it imports no
driver, so a ``postgresql://`` URL is recognised without psycopg. Opening one imports psycopg
and :mod:`convostore.backends.postgres._engine` (the operations and the backend); without psycopg,
:meth:`~convostore.Sessions.open` raises :class:`~convostore.errors.MissingDependency`.

- URLs: ``postgresql://``, ``postgres://``, ``postgresql+psycopg://`` (read as
  ``postgresql://``), a libpq ``key=value`` string (``host=db dbname=chat``), or ``pool=`` an
  open ``psycopg_pool.ConnectionPool``. Options: ``pool``, ``pool_size``, ``schema`` (the
  tables' schema, created if missing), ``partitions``, ``transaction_pooler``.
- A write scope is one ``READ COMMITTED`` transaction that first takes ``ROW EXCLUSIVE`` on the
  messages table (the store's lock, shared by writers) and then the row lock of the session's
  state row (one ``INSERT ... ON CONFLICT DO UPDATE ... WHERE false``: created if missing,
  locked either way; one statement takes both, see :mod:`convostore.backends.postgres._scope`), so
  the next ``seq`` and the
  active leaf derived inside it are those of the previous writer's commit; ``write(None)``
  (index creation, each short backfill step) takes ``SHARE ROW EXCLUSIVE`` on the messages table,
  excluding writers and other such scopes. Every writer takes the same locks in the same order,
  so no deadlock; every lock is on the session's own data, so a sharded engine keeps it on the
  session's shard. Advisory locks serialise only migrations (node-local is right there). The
  scope runs in pipeline mode: the ``BEGIN``, the locks and the check for the search table
  travel with its first query, and statements nobody reads the result of travel with the
  ``COMMIT``. A plain append is one statement (:mod:`convostore.backends.postgres._writes`) sent
  with them: one round
  trip, the session's row lock held only while the server runs it and commits.
- The change log's positions are marked by advisory locks while uncommitted, and readers
  stop below the first one held (:mod:`convostore.backends.postgres._writes`): commits of different
  sessions are not
  serialised; ``NOTIFY`` is sent only while a watcher listens.
- ``transaction_pooler=True`` (behind PgBouncer in transaction mode): no prepared statements, and
  the schema set inside every transaction, never on a connection.
- ``partitions=N`` creates the session-keyed tables hash-partitioned by session id
  (:mod:`convostore.backends.postgres._partitions`); an existing store keeps the partitioning it
  was created with.
- Reads run in autocommit (each statement sees the latest commits, one round trip each);
  when ``search_path`` must be set per transaction, it travels with each read statement.
- Migrations are versioned in ``convostore_meta`` (same ``SCHEMA_VERSION`` as SQLite), idempotent
  and serialised by an advisory lock, so several processes may open one database at once. A role
  that may not create tables can run ``postgres_schema.sql`` (:data:`SCHEMA_FILE`) once;
  opening then performs no DDL.
- Search (:mod:`convostore.backends.postgres._search`): a ``tsvector`` index built by the first
  search.
- Payload chunks are ``bytea``.
- Async API: one worker thread per pool connection (each scope holds one), at most 32.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...directory._sql import DIRECTORY_BACKFILL, DIRECTORY_INDEXES, DIRECTORY_TO_TAIL_TOTALS
from .._migrate import Migrations
from .._schema import (
    ATTACHMENT_REFS,
    CHANGES,
    COMPACTION_LEASES,
    DIRECTORY,
    FTS,
    LG_BLOBS,
    LG_CHECKPOINTS,
    LG_WRITES,
    MESSAGES,
    META,
    REGISTRY_LIFT,
    SESSION_STATE,
)
from ..base import SHARED_ACROSS_PROCESSES, Backend, Engine, OpenOptions

SCHEMA_FILE = Path(__file__).with_name("postgres_schema.sql")
"""The DDL of the current schema version, for roles that may not create tables."""

# Each step brings a database from the version before it to its own number (index + 1); the
# same steps as SQLite's. Text keys use the "C" collation: byte order, as SQLite compares, and
# cheaper b-tree comparisons.
_STEPS: list[list[str]] = [
    [
        f"""CREATE TABLE IF NOT EXISTS {MESSAGES} (
            session_id TEXT COLLATE "C" NOT NULL,
            id TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            parent_id TEXT COLLATE "C",
            role TEXT NOT NULL,
            content_chunks INTEGER NOT NULL DEFAULT 0,
            token_estimate BIGINT NOT NULL DEFAULT 0,
            created_at BIGINT NOT NULL,
            bytes BIGINT NOT NULL DEFAULT 0,
            content TEXT NOT NULL,
            PRIMARY KEY (session_id, id)
        )""",
        f"CREATE UNIQUE INDEX IF NOT EXISTS convostore_messages_seq ON {MESSAGES} "
        "(session_id, seq)",
        f"CREATE INDEX IF NOT EXISTS convostore_messages_parent ON {MESSAGES} "
        "(session_id, parent_id)",
        """CREATE TABLE IF NOT EXISTS convostore_message_chunks (
            session_id TEXT COLLATE "C" NOT NULL,
            id TEXT COLLATE "C" NOT NULL,
            idx INTEGER NOT NULL,
            content TEXT NOT NULL,
            PRIMARY KEY (session_id, id, idx)
        )""",
        """CREATE TABLE IF NOT EXISTS convostore_compactions (
            session_id TEXT COLLATE "C" NOT NULL,
            id TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            summary TEXT NOT NULL,
            from_message_id TEXT COLLATE "C" NOT NULL,
            to_message_id TEXT COLLATE "C" NOT NULL,
            created_at BIGINT NOT NULL,
            PRIMARY KEY (session_id, id)
        )""",
        """CREATE TABLE IF NOT EXISTS convostore_attachments (
            hash TEXT COLLATE "C" PRIMARY KEY,
            bytes BIGINT NOT NULL,
            media_type TEXT NOT NULL,
            chunks INTEGER NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS convostore_attachment_chunks (
            hash TEXT COLLATE "C" NOT NULL,
            idx INTEGER NOT NULL,
            data BYTEA NOT NULL,
            PRIMARY KEY (hash, idx)
        )""",
        """CREATE TABLE IF NOT EXISTS convostore_attachment_refs (
            session_id TEXT COLLATE "C" NOT NULL,
            message_id TEXT COLLATE "C" NOT NULL,
            hash TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (session_id, message_id, hash)
        )""",
    ],
    [
        f"""CREATE TABLE IF NOT EXISTS {SESSION_STATE} (
            session_id TEXT COLLATE "C" PRIMARY KEY,
            epoch BIGINT NOT NULL
        )""",
        f"CREATE INDEX IF NOT EXISTS convostore_attachment_refs_hash ON {ATTACHMENT_REFS} (hash)",
    ],
    [
        f"ALTER TABLE {MESSAGES} ADD COLUMN IF NOT EXISTS chained SMALLINT NOT NULL DEFAULT 0",
        "DROP INDEX IF EXISTS convostore_messages_parent",
        f"CREATE INDEX IF NOT EXISTS convostore_messages_branch ON {MESSAGES} "
        "(session_id, parent_id) WHERE chained = 0",
    ],
    [
        # The directory of conversations (see directory/_sql.py), filled from the stored messages.
        f"""CREATE TABLE IF NOT EXISTS {DIRECTORY} (
            session_id TEXT COLLATE "C" PRIMARY KEY,
            internal SMALLINT NOT NULL DEFAULT 0,
            title TEXT,
            owner TEXT COLLATE "C",
            metadata TEXT,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            message_count BIGINT NOT NULL DEFAULT 0,
            bytes BIGINT NOT NULL DEFAULT 0,
            expires_at BIGINT,
            ttl BIGINT,
            active_leaf TEXT COLLATE "C",
            context_of TEXT COLLATE "C",
            managed SMALLINT NOT NULL DEFAULT 0,
            parent_session_id TEXT,
            model TEXT,
            source TEXT,
            input_tokens BIGINT NOT NULL DEFAULT 0,
            output_tokens BIGINT NOT NULL DEFAULT 0,
            estimated_cost DOUBLE PRECISION NOT NULL DEFAULT 0,
            end_reason TEXT
        )""",
        *DIRECTORY_INDEXES,
        DIRECTORY_BACKFILL,
        *REGISTRY_LIFT,  # the session manager's registry: now rows of the directory
    ],
    [
        # The change log: positions are drawn under the change-log lock, held to commit (see
        # feed/_sql.py), so their order is commit order.
        f"""CREATE TABLE IF NOT EXISTS {CHANGES} (
            pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id TEXT COLLATE "C" NOT NULL,
            kind TEXT NOT NULL,
            message_id TEXT COLLATE "C",
            parent_id TEXT COLLATE "C",
            leaf_id TEXT COLLATE "C",
            data TEXT,
            created_at BIGINT NOT NULL
        )""",
        f"""CREATE TABLE IF NOT EXISTS {COMPACTION_LEASES} (
            session_id TEXT COLLATE "C" PRIMARY KEY,
            holder TEXT NOT NULL,
            expires_at BIGINT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            retry_at BIGINT NOT NULL DEFAULT 0
        )""",
    ],
    [
        # The LangGraph checkpointer (integrations.langgraph); keys start with the session id.
        f"""CREATE TABLE IF NOT EXISTS {LG_CHECKPOINTS} (
            session_id TEXT COLLATE "C" NOT NULL,
            checkpoint_ns TEXT COLLATE "C" NOT NULL,
            checkpoint_id TEXT COLLATE "C" NOT NULL,
            parent_checkpoint_id TEXT COLLATE "C",
            run_id TEXT COLLATE "C",
            type TEXT NOT NULL,
            checkpoint BYTEA NOT NULL,
            metadata BYTEA NOT NULL,
            versions TEXT NOT NULL,
            PRIMARY KEY (session_id, checkpoint_ns, checkpoint_id)
        )""",
        f"""CREATE TABLE IF NOT EXISTS {LG_BLOBS} (
            session_id TEXT COLLATE "C" NOT NULL,
            checkpoint_ns TEXT COLLATE "C" NOT NULL,
            channel TEXT COLLATE "C" NOT NULL,
            version TEXT COLLATE "C" NOT NULL,
            type TEXT NOT NULL,
            data BYTEA,
            hash TEXT COLLATE "C",
            PRIMARY KEY (session_id, checkpoint_ns, channel, version)
        )""",
        f"""CREATE TABLE IF NOT EXISTS {LG_WRITES} (
            session_id TEXT COLLATE "C" NOT NULL,
            checkpoint_ns TEXT COLLATE "C" NOT NULL,
            checkpoint_id TEXT COLLATE "C" NOT NULL,
            task_id TEXT COLLATE "C" NOT NULL,
            idx INTEGER NOT NULL,
            channel TEXT NOT NULL,
            type TEXT NOT NULL,
            data BYTEA,
            hash TEXT COLLATE "C",
            task_path TEXT COLLATE "C" NOT NULL DEFAULT '',
            PRIMARY KEY (session_id, checkpoint_ns, checkpoint_id, task_id, idx)
        )""",
    ],
    [
        # Totals carried by the newest row (see directory/_sql.py): an append leaves the
        # directory row alone. Older rows hold 0, so only the counts' base moves.
        f"ALTER TABLE {MESSAGES} ADD COLUMN IF NOT EXISTS run_bytes BIGINT NOT NULL DEFAULT 0",
        DIRECTORY_TO_TAIL_TOTALS,
    ],
    [
        # The search index keeps no copy of the text any more: the old one is dropped, and the
        # next search (or build_search_index) builds the new one from the stored messages.
        f"DROP TABLE IF EXISTS {FTS}",
        f"DELETE FROM {META} WHERE key = 'fts_backfill_cursor'",
    ],
]

MIGRATIONS = Migrations(
    meta=(
        f"CREATE TABLE IF NOT EXISTS {META} ("
        'key TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL)'
    ),
    steps=_STEPS,
)
"""The PostgreSQL schema as data for :func:`~._migrate.migrate`; ``postgres_schema.sql`` builds
the same catalog (tests/test_backends_postgres.py compares them)."""

_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")

_LIBPQ_KEYWORDS = frozenset({
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "require_auth",
    "channel_binding", "connect_timeout", "client_encoding", "options", "application_name",
    "fallback_application_name", "keepalives", "keepalives_idle", "keepalives_interval",
    "keepalives_count", "tcp_user_timeout", "replication", "gssencmode", "sslmode", "requiressl",
    "sslcompression", "sslcert", "sslkey", "sslpassword", "sslcertmode", "sslrootcert", "sslcrl",
    "sslcrldir", "sslsni", "requirepeer", "ssl_min_protocol_version", "ssl_max_protocol_version",
    "krbsrvname", "gsslib", "gssdelegation", "service", "target_session_attrs",
    "load_balance_hosts",
})
"""The keywords of a libpq ``key=value`` connection string (PostgreSQL 16's list)."""

_CONNINFO_PAIR = re.compile(r"\s*(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s'\\]|\\.)*)\s*")
_PASSWORD_IN_URL = re.compile(r"(://[^:/@?#]*):[^@/?#]*@")
_PASSWORD_PARAM = re.compile(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)")


def _is_conninfo(text: str) -> bool:
    """True when ``text`` is a libpq ``key=value`` string: nothing but pairs, every key one of
    libpq's keywords (``host=db dbname=chat``). ``./host=x.db`` is a path: its key is not."""
    pos, pairs = 0, 0
    while pos < len(text):
        match = _CONNINFO_PAIR.match(text, pos)
        if match is None or match.group(1) not in _LIBPQ_KEYWORDS:
            return False
        pos, pairs = match.end(), pairs + 1
    return pairs > 0


def _parse(url: str) -> str | None:
    """The connection string of a PostgreSQL URL (SQLAlchemy's ``+psycopg`` form dropped) or
    of a libpq ``key=value`` string (taken as it is)."""
    if url.startswith(_SCHEMES):
        return url.replace("postgresql+psycopg://", "postgresql://", 1)
    if _is_conninfo(url):
        return url
    return None


def _redact(conninfo: str) -> str:
    """A connection string (URL or ``key=value``) without its password."""
    conninfo = _PASSWORD_IN_URL.sub(r"\1@", conninfo)
    return _PASSWORD_PARAM.sub(r"\1***", conninfo)


def _has_store(target: str) -> bool:
    """Whether the database (its ``search_path``) holds convostore's tables; one catalog
    query on a connection of its own, nothing created."""
    from ._engine import has_store  # the driver's code: imported when asked only

    return has_store(target, _redact)


def _workers(pool_size: object) -> int:
    """One worker thread per pool connection (each scope holds one), at most 32."""
    size = pool_size if isinstance(pool_size, int) and not isinstance(pool_size, bool) else 1
    return max(1, min(size, 32))


def _capabilities(target: str | None) -> frozenset[str]:
    """Any number of processes and machines may share a PostgreSQL store."""
    return frozenset({SHARED_ACROSS_PROCESSES})


def _no_file(target: str) -> None:
    """A PostgreSQL target is a server, never a local file."""
    return None


def open_postgres(target: str | None, options: OpenOptions) -> Backend:
    """A :class:`~convostore.backends.postgres._engine.PostgresBackend` on ``target`` (None: on
    ``options.pool``)."""
    from ._engine import PostgresBackend  # the driver's code: imported when opening only

    return PostgresBackend(
        target, pool=options.pool, pool_size=options.pool_size, schema=options.schema,
        engine=ENGINE, listen_url=options.listen_url, partitions=options.partitions,
        transaction_pooler=bool(options.transaction_pooler),
    )


ENGINE = Engine(
    "postgres", "PostgreSQL", forms=("postgresql://...", "host=... dbname=..."),
    options=frozenset({"pool", "schema", "listen_url", "partitions", "transaction_pooler"}),
    parse=_parse, open=open_postgres, workers=_workers, capabilities=_capabilities,
    local_file=_no_file, migrations=MIGRATIONS, has_store=_has_store, redact=_redact,
    requires=("psycopg", "psycopg_pool"), extra="postgres",  # the driver, imported on open
)
"""The PostgreSQL engine's declaration, listed in :data:`convostore.backends._engines.ENGINES`."""

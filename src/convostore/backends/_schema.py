"""The tables both engines build, named once, and the schema version.

Every table is keyed by session id first (the payload tables by content hash), so the tables
shard by session:

- :data:`MESSAGES`: one row per message, content last so content-free walks never load it;
  ``bytes`` is the stored size (continuations and referenced payloads' base64 included).
  ``chained`` = 1 marks a row whose parent is the row just before it in ``seq`` (a plain
  append); only the other rows are in the parent index, so an append writes one b-tree less.
  ``run_bytes`` is the session's stored bytes up to and including the row, as written (the
  directory's totals are read from the newest row, so a plain append leaves that row alone).
- :data:`MESSAGE_CHUNKS`: continuation slices of messages above the row budget.
- :data:`COMPACTIONS`: overlay records.
- :data:`ATTACHMENTS` / :data:`ATTACHMENT_CHUNKS` / :data:`ATTACHMENT_REFS`: payloads stored
  once by hash, in chunks, and which message refers to which payload.
- :data:`SESSION_STATE`: a per-session epoch bumped by every write except a plain append, so
  derived values (the token estimate) can be memoised and checked cheaply.
- :data:`DIRECTORY`: one row per session: title, owner, metadata, times, counts, expiry, the
  chosen leaf, and the session manager's columns (:mod:`convostore.directory._sql`).
- :data:`META`: the schema version (see :mod:`._migrate`), and the change log's trim horizon.
- :data:`CHANGES`: the durable change log, one row per logged change, ``pos`` increasing
  store-wide, never read past a change that may still commit (see :mod:`convostore.feed._sql`).
- :data:`COMPACTION_LEASES`: who runs a session's automatic compaction, until when, and the
  backoff after compactions that left the session above its threshold.
- :data:`LG_CHECKPOINTS` / :data:`LG_BLOBS` / :data:`LG_WRITES`: the LangGraph checkpointer's
  storage (:mod:`convostore.integrations._checkpoint_sql`), keyed by the thread's storage session
  id.

Each engine writes its own DDL for these (its types and collations differ) as migration data;
the session registry's table lives in :mod:`convostore.manager._sql`, the search index with each
engine.
"""

from __future__ import annotations

SCHEMA_VERSION = 8
"""The schema this version writes; opening an older database migrates it."""

MESSAGES = "convostore_messages"
MESSAGE_CHUNKS = "convostore_message_chunks"
COMPACTIONS = "convostore_compactions"
ATTACHMENTS = "convostore_attachments"
ATTACHMENT_CHUNKS = "convostore_attachment_chunks"
ATTACHMENT_REFS = "convostore_attachment_refs"
SESSION_STATE = "convostore_session_state"
META = "convostore_meta"
DIRECTORY = "convostore_sessions"
"""The directory of conversations: one row per session (see :mod:`convostore.directory._sql`)."""
CHANGES = "convostore_changes"
COMPACTION_LEASES = "convostore_compaction_leases"
LG_CHECKPOINTS = "convostore_lg_checkpoints"
"""LangGraph checkpoints (``integrations.langgraph``): one row per checkpoint, channel values
apart; keyed by storage session id, namespace and checkpoint id."""
LG_BLOBS = "convostore_lg_blobs"
"""LangGraph channel values, one row per (channel, version): stored once, however many
checkpoints share the version; a large value lives in the attachment tables by hash."""
LG_WRITES = "convostore_lg_writes"
"""LangGraph pending writes, keyed by checkpoint, task and index."""
FTS = "convostore_fts"
"""The full-text index, created by the first search (not on append); each
engine builds it its own way."""

# -- the session manager's columns of the directory, and the lift of its old table ---------

OLD_REGISTRY = "convostore_registry"
"""The registry's own table before the directory held it (lifted by :func:`lift_registry`)."""
REGISTRY_COLUMNS = (
    "id", "name", "parent_session_id", "model", "source", "input_tokens", "output_tokens",
    "estimated_cost", "end_reason", "created_at", "updated_at",
)
"""The columns of a registry row, in the order the ``registry_*`` reads return them."""

MANAGER_COLUMNS = REGISTRY_COLUMNS[2:]
REGISTRY_SELECT = "session_id, COALESCE(title, ''), " + ", ".join(MANAGER_COLUMNS)
MANAGED_ROWS = "internal = 0 AND managed = 1"  # the directory's partial index covers these rows
REGISTRY_INSERT_COLUMNS = "session_id, title, " + ", ".join(MANAGER_COLUMNS) + ", internal, managed"
REGISTRY_ON_CONFLICT = (
    "ON CONFLICT (session_id) DO UPDATE SET managed = 1, title = excluded.title, "
    + ", ".join(f"{c} = excluded.{c}" for c in MANAGER_COLUMNS if c != "updated_at")
    + ", updated_at = CASE WHEN excluded.updated_at > d.updated_at THEN excluded.updated_at "
    "ELSE d.updated_at END"
)


REGISTRY_LIFT = (
    # The old table as old versions created it, so the copy below runs whether or not a
    # manager ever wrote one; then it is copied into the directory and dropped.
    f"""CREATE TABLE IF NOT EXISTS {OLD_REGISTRY} (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, parent_session_id TEXT, model TEXT,
        source TEXT, input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        estimated_cost DOUBLE PRECISION NOT NULL DEFAULT 0, end_reason TEXT,
        created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL
    )""",
    f"INSERT INTO {DIRECTORY} AS d ({REGISTRY_INSERT_COLUMNS}) SELECT id, name, "
    + ", ".join(MANAGER_COLUMNS) + f", 0, 1 FROM {OLD_REGISTRY} WHERE true {REGISTRY_ON_CONFLICT}",
    f"DROP TABLE IF EXISTS {OLD_REGISTRY}",
)
"""The migration step's lift of a pre-directory registry table (the same SQL on both engines)."""

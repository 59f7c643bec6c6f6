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
  chosen leaf, and the session manager's columns (:mod:`._directory_sql`).
- :data:`META`: the schema version (see :mod:`._migrate`), and the change log's trim horizon.
- :data:`CHANGES`: the durable change log, one row per logged change, ``pos`` increasing
  store-wide, never read past a change that may still commit (see :mod:`._changes_sql`).
- :data:`COMPACTION_LEASES`: who runs a session's automatic compaction, until when, and the
  backoff after compactions that left the session above its threshold.
- :data:`LG_CHECKPOINTS` / :data:`LG_BLOBS` / :data:`LG_WRITES`: the LangGraph checkpointer's
  storage (:mod:`._checkpoint_sql`), keyed by the thread's storage session id.

Each engine writes its own DDL for these (its types and collations differ) as migration data;
the session registry's table lives in :mod:`._registry`, the search index with each engine.
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
"""The directory of conversations: one row per session (see :mod:`._directory_sql`)."""
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
"""The full-text index, created by the first search (behaviour.md §8.1: not on append); each
engine builds it its own way."""

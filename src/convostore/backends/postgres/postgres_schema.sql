-- convostore: the PostgreSQL schema, version 7 (the DDL convostore itself runs when it may).
--
-- For databases where the application's role may not create tables or schemas. Run this file
-- once as a role that may, in the schema the application will pass as `schema=` (or in `public`
-- when it passes none), then grant the application's role its data rights. Opening a store
-- finds the version below and runs no DDL; the first search needs none either, because the
-- search table is created here as well (the session manager's registry is the directory).
--
--   psql "$ADMIN_URL" -v ON_ERROR_STOP=1 -c 'CREATE SCHEMA IF NOT EXISTS convostore'
--   PGOPTIONS='-c search_path=convostore' psql "$ADMIN_URL" -v ON_ERROR_STOP=1 \
--       -f postgres_schema.sql
--   psql "$ADMIN_URL" -c 'GRANT USAGE ON SCHEMA convostore TO app' \
--       -c 'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA convostore TO app'
--
-- The application then opens Sessions.open("postgresql://app@host/db", schema="convostore").
--
-- Notes
-- - Every table is keyed by session id first (the payload tables by content hash), so the
--   tables can be distributed by session_id on Citus or another PostgreSQL-compatible engine.
-- - Nothing here uses CREATE INDEX CONCURRENTLY, so the whole file is one transaction. On a
--   large existing table, build an index CONCURRENTLY by hand, outside a transaction, instead.
-- - Text keys use the "C" collation: byte order, as SQLite compares them.
-- - Created on a database that already holds messages, the search table starts empty and those
--   messages are not searchable until rewritten; leave the full-text section out in that case, and
--   let the first search (by a role that may create tables) build and fill it.
-- - Keep this file in step with MIGRATIONS in postgres/__init__.py (with DIRECTORY_* of directory/_sql.py
--   and REGISTRY_LIFT of backends/_schema.py) and _FTS_* in postgres/_search.py (tests/test_backends_postgres.py
--   compares what each builds).

BEGIN;

CREATE TABLE IF NOT EXISTS convostore_meta (
    key TEXT COLLATE "C" PRIMARY KEY,
    value TEXT NOT NULL
);

-- version 1 -------------------------------------------------------------------------------------

-- One row per message; content (the first slice of its JSON) last, so walks never load it.
CREATE TABLE IF NOT EXISTS convostore_messages (
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
);
CREATE UNIQUE INDEX IF NOT EXISTS convostore_messages_seq
    ON convostore_messages (session_id, seq);

-- Continuation slices of messages above the row budget (idx from 1).
CREATE TABLE IF NOT EXISTS convostore_message_chunks (
    session_id TEXT COLLATE "C" NOT NULL,
    id TEXT COLLATE "C" NOT NULL,
    idx INTEGER NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (session_id, id, idx)
);

-- Compaction overlays.
CREATE TABLE IF NOT EXISTS convostore_compactions (
    session_id TEXT COLLATE "C" NOT NULL,
    id TEXT COLLATE "C" NOT NULL,
    seq BIGINT NOT NULL,
    summary TEXT NOT NULL,
    from_message_id TEXT COLLATE "C" NOT NULL,
    to_message_id TEXT COLLATE "C" NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, id)
);

-- Payloads stored once by SHA-256, in bytea chunks (idx from 0), and who refers to them.
CREATE TABLE IF NOT EXISTS convostore_attachments (
    hash TEXT COLLATE "C" PRIMARY KEY,
    bytes BIGINT NOT NULL,
    media_type TEXT NOT NULL,
    chunks INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS convostore_attachment_chunks (
    hash TEXT COLLATE "C" NOT NULL,
    idx INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (hash, idx)
);
CREATE TABLE IF NOT EXISTS convostore_attachment_refs (
    session_id TEXT COLLATE "C" NOT NULL,
    message_id TEXT COLLATE "C" NOT NULL,
    hash TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (session_id, message_id, hash)
);

-- version 2 -------------------------------------------------------------------------------------

-- A per-session epoch, bumped by every write but a plain append.
CREATE TABLE IF NOT EXISTS convostore_session_state (
    session_id TEXT COLLATE "C" PRIMARY KEY,
    epoch BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS convostore_attachment_refs_hash
    ON convostore_attachment_refs (hash);

-- version 3 -------------------------------------------------------------------------------------

-- chained = 1: the parent is the row just before (seq - 1), the usual append; only the other rows
-- are in the parent index.
ALTER TABLE convostore_messages ADD COLUMN IF NOT EXISTS chained SMALLINT NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS convostore_messages_parent;
CREATE INDEX IF NOT EXISTS convostore_messages_branch
    ON convostore_messages (session_id, parent_id) WHERE chained = 0;

-- version 4 -------------------------------------------------------------------------------------

-- The directory of conversations: one row per session (title, owner, metadata, times, counts,
-- expiry, the chosen leaf, the session manager's registry columns), filled from the messages.
CREATE TABLE IF NOT EXISTS convostore_sessions (
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
);
CREATE INDEX IF NOT EXISTS convostore_sessions_updated ON convostore_sessions (updated_at, session_id) WHERE internal = 0;
CREATE INDEX IF NOT EXISTS convostore_sessions_owner ON convostore_sessions (owner, updated_at, session_id) WHERE internal = 0 AND owner IS NOT NULL;
CREATE INDEX IF NOT EXISTS convostore_sessions_expires ON convostore_sessions (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS convostore_sessions_context ON convostore_sessions (context_of) WHERE context_of IS NOT NULL;
INSERT INTO convostore_sessions (session_id, internal, created_at, updated_at, message_count, bytes) SELECT session_id, CASE WHEN substr(session_id, 1, 11) = 'convostore:' THEN 1 ELSE 0 END, min(created_at), max(created_at), count(*), sum(bytes) FROM convostore_messages WHERE true GROUP BY session_id ON CONFLICT (session_id) DO NOTHING;
-- A registry table of its own (versions before the directory): its rows moved in, then dropped.
CREATE TABLE IF NOT EXISTS convostore_registry (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, parent_session_id TEXT, model TEXT,
    source TEXT, input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    estimated_cost DOUBLE PRECISION NOT NULL DEFAULT 0, end_reason TEXT,
    created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL
);
INSERT INTO convostore_sessions AS d (session_id, title, parent_session_id, model, source, input_tokens, output_tokens, estimated_cost, end_reason, created_at, updated_at, internal, managed) SELECT id, name, parent_session_id, model, source, input_tokens, output_tokens, estimated_cost, end_reason, created_at, updated_at, 0, 1 FROM convostore_registry WHERE true ON CONFLICT (session_id) DO UPDATE SET managed = 1, title = excluded.title, parent_session_id = excluded.parent_session_id, model = excluded.model, source = excluded.source, input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, estimated_cost = excluded.estimated_cost, end_reason = excluded.end_reason, created_at = excluded.created_at, updated_at = CASE WHEN excluded.updated_at > d.updated_at THEN excluded.updated_at ELSE d.updated_at END;
DROP TABLE IF EXISTS convostore_registry;

-- version 5 -------------------------------------------------------------------------------------

-- The durable change log: positions drawn under the change-log advisory lock held to commit, so
-- their order is commit order. An identity column needs no grant on its sequence.
CREATE TABLE IF NOT EXISTS convostore_changes (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL,
    kind TEXT NOT NULL,
    message_id TEXT COLLATE "C",
    parent_id TEXT COLLATE "C",
    leaf_id TEXT COLLATE "C",
    data TEXT,
    created_at BIGINT NOT NULL
);
-- Who runs a session's automatic compaction, until when; the backoff after attempts that left
-- the session above its threshold.
CREATE TABLE IF NOT EXISTS convostore_compaction_leases (
    session_id TEXT COLLATE "C" PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    retry_at BIGINT NOT NULL DEFAULT 0
);

-- version 6 -------------------------------------------------------------------------------------

-- The LangGraph checkpointer (convostore.integrations.langgraph): checkpoints, channel values
-- stored once per version (a large one in the attachment tables, by hash), pending writes.
CREATE TABLE IF NOT EXISTS convostore_lg_checkpoints (
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
);
CREATE TABLE IF NOT EXISTS convostore_lg_blobs (
    session_id TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL,
    channel TEXT COLLATE "C" NOT NULL,
    version TEXT COLLATE "C" NOT NULL,
    type TEXT NOT NULL,
    data BYTEA,
    hash TEXT COLLATE "C",
    PRIMARY KEY (session_id, checkpoint_ns, channel, version)
);
CREATE TABLE IF NOT EXISTS convostore_lg_writes (
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
);

-- version 7 -------------------------------------------------------------------------------------

-- run_bytes: the session's stored bytes up to and including the row. The directory's
-- message_count and bytes hold what the newest row does not (count = message_count + the
-- highest seq; bytes = bytes + the newest row's run_bytes), so an append leaves the directory
-- row alone. A database at versions 4 to 6 has its counts rebased once.
ALTER TABLE convostore_messages ADD COLUMN IF NOT EXISTS run_bytes BIGINT NOT NULL DEFAULT 0;
UPDATE convostore_sessions SET
    message_count = message_count - COALESCE((SELECT max(t.seq) FROM convostore_messages t WHERE t.session_id = convostore_sessions.session_id), 0),
    bytes = bytes - COALESCE((SELECT t.run_bytes FROM convostore_messages t WHERE t.session_id = convostore_sessions.session_id ORDER BY t.seq DESC LIMIT 1), 0)
    WHERE EXISTS (SELECT 1 FROM convostore_meta WHERE key = 'schema_version' AND CAST(value AS INTEGER) < 7);

-- version 8 -------------------------------------------------------------------------------------

-- The search table keeps no copy of the text any more: an older one (a database below version
-- 8) is dropped; run again on a version-8 database, this keeps the index. On a database that
-- holds messages, leave the full-text section below out: the first search by a role that may
-- create tables builds the index from the stored messages.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM convostore_meta
               WHERE key = 'schema_version' AND CAST(value AS INTEGER) < 8) THEN
        DROP TABLE IF EXISTS convostore_fts;
        DELETE FROM convostore_meta WHERE key = 'fts_backfill_cursor';
    END IF;
END
$$;

INSERT INTO convostore_meta (key, value) VALUES ('schema_version', '8')
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- full-text search (otherwise created by the first search) -------------------------------------

-- English stemming without the English stop-word list, so every word is searchable and a phrase
-- keeps all its words, as with SQLite's porter tokenizer.
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_ts_config WHERE cfgname = 'convostore_english'
        AND cfgnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
    ) THEN
        CREATE TEXT SEARCH DICTIONARY convostore_english_stem (TEMPLATE = snowball, LANGUAGE = english);
        CREATE TEXT SEARCH CONFIGURATION convostore_english (COPY = pg_catalog.english);
        ALTER TEXT SEARCH CONFIGURATION convostore_english
            ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part
            WITH convostore_english_stem;
    END IF;
END
$$;

-- The key and tsvector of each indexed message (computed by convostore from a bounded form of
-- its indexed text, under the 1 MB tsvector limit; see index_source in postgres/_search.py). No copy
-- of the text: a hit's text is read from its message row.
CREATE TABLE IF NOT EXISTS convostore_fts (
    session_id TEXT COLLATE "C" NOT NULL,
    id TEXT COLLATE "C" NOT NULL,
    tsv TSVECTOR NOT NULL,
    PRIMARY KEY (session_id, id)
);
-- fastupdate off: no pending list, so no insert pays for flushing everyone's entries at once.
CREATE INDEX IF NOT EXISTS convostore_fts_tsv ON convostore_fts USING GIN (tsv)
    WITH (fastupdate = off);
-- What the index holds for a message: the text parts ('text+tool_output' adds tool results; a
-- store opened with search_tool_output=True on this index follows the value recorded here).
INSERT INTO convostore_meta (key, value) VALUES ('fts_definition', 'text')
    ON CONFLICT (key) DO NOTHING;

COMMIT;

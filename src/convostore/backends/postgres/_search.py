"""PostgreSQL full-text search: the index's DDL, its bounded source text, and the ``fts_*`` SQL.

``convostore_fts`` (created by the first search) holds the key and a ``tsvector`` of each
indexed message, under a GIN index (no copy of the text: a hit's text is read from its message
row); a session search is a phrase (``phraseto_tsquery``), a store
search needs every word (``plainto_tsquery``), best ``ts_rank`` first. The text search
configuration is ``english`` without its stop words (see :data:`TS_CONFIG`). Stale index rows
never surface: hits are joined to the messages table.

This module needs no driver: it holds the statements, and
:class:`~convostore.backends.postgres._ops.PostgresOps` the ``fts_*`` operations that send them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .._schema import FTS, MESSAGES
from ..connection import _marks
from ._partitions import partitioned

TS_CONFIG = "convostore_english"
"""The text search configuration of the index and of queries: ``english`` without stop words."""

PG_TABLES = (
    "SELECT relname FROM pg_class WHERE relname = ANY(?::text[]) AND relnamespace = "
    "(SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
)
"""Which of the tables named by the one parameter (a list) exist in the store's schema: the
search table's probe, and the catalog query of the operations. Read from pg_class with the
statement's snapshot, not through ``to_regclass``: inside a transaction the connection's catalog
caches may predate a table created or dropped by a commit made while this writer waited for its
lock."""

# The search table, created by the first search (not on append). The tsvector
# is computed by the INSERT from a bounded source text (see index_source): a text whose tsvector
# would exceed PostgreSQL's 1 MB limit must not fail the whole write.
#
# The text search configuration is ``english`` with its stop-word list left out: English
# stemming, as SQLite's porter tokenizer does, but every word is a token, so "cats OR dogs" is a
# three-word phrase and a search for "the" finds "the", as on SQLite. PostgreSQL has no IF NOT
# EXISTS for these, hence the DO block (whose command tag also keeps psycopg from discarding its
# prepared statements in the middle of a pipeline, as an ALTER's would).
_FTS_CONFIG_DDL = f"""DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_ts_config WHERE cfgname = '{TS_CONFIG}'
        AND cfgnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
    ) THEN
        CREATE TEXT SEARCH DICTIONARY {TS_CONFIG}_stem (TEMPLATE = snowball, LANGUAGE = english);
        CREATE TEXT SEARCH CONFIGURATION {TS_CONFIG} (COPY = pg_catalog.english);
        ALTER TEXT SEARCH CONFIGURATION {TS_CONFIG}
            ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part
            WITH {TS_CONFIG}_stem;
    END IF;
END
$$"""
# Once built, the GIN index has no pending list (fastupdate off): with one, the insert that finds
# the list full merges all of it into the index, and a writer would wait for that. While the
# backfill runs, it has one: inserting each entry's words into the index one by one is most of
# a step's cost, a pending list merged in one sorted pass at the end of each step (by the
# builder, so writers find it nearly empty) costs about half (14.3 s against 8.3 s for 6,667
# messages in steps of 100, measured on the 2-core machine under load). The last step turns it
# off (see _FTS_BUILT).
_FTS_DDL = [
    f"""CREATE TABLE IF NOT EXISTS {FTS} (
        session_id TEXT COLLATE "C" NOT NULL, id TEXT COLLATE "C" NOT NULL,
        tsv TSVECTOR NOT NULL,
        PRIMARY KEY (session_id, id)
    )""",
    f"CREATE INDEX IF NOT EXISTS convostore_fts_tsv ON {FTS} USING GIN (tsv) "
    "WITH (fastupdate = on, gin_pending_list_limit = 1024)",
]
# Where the pending lists are: the GIN index, or on a partitioned store each partition's index
# (a partitioned index has no storage). Looked up by key (pg_inherits' parent index), not by a
# scan of pg_class, which holds every table of the database.
_FTS_GIN = "SELECT 'convostore_fts_tsv'::regclass AS idx"
_FTS_GIN_PARTS = (
    "SELECT inhrelid::regclass AS idx FROM pg_inherits "
    "WHERE inhparent = 'convostore_fts_tsv'::regclass"
)
# The end of the backfill: no pending list from now on (a DO block: see _FTS_CONFIG_DDL).
_FTS_BUILT = """DO $$
DECLARE r record;
BEGIN
    FOR r IN {gin} LOOP
        EXECUTE format('ALTER INDEX %s SET (fastupdate = off)', r.idx);
        EXECUTE format('ALTER INDEX %s RESET (gin_pending_list_limit)', r.idx);
        PERFORM gin_clean_pending_list(r.idx);
    END LOOP;
END
$$"""


_WORD = re.compile(r"\w")


_VERBATIM_CHARS = 60_000
_SOURCE_CHARS = 150_000


def index_source(text: str) -> str:
    """The text a message's tsvector is built from, bounded so it fits PostgreSQL's limits.

    A tsvector holds at most 1 MB and positions up to 16383, so a long text is indexed as its
    first 60,000 characters verbatim (phrases match there) followed by each further word once
    (every word stays findable), at most 150,000 characters in all.
    """
    if len(text) <= _VERBATIM_CHARS:
        return text
    cut = text.rfind(" ", 0, _VERBATIM_CHARS)
    cut = _VERBATIM_CHARS if cut <= 0 else cut
    head = text[:cut]
    rest = " ".join(dict.fromkeys(text[cut:].split()))
    source = f"{head} {rest}"
    if len(source) > _SOURCE_CHARS:
        end = source.rfind(" ", 0, _SOURCE_CHARS)
        source = source[: end if end > 0 else _SOURCE_CHARS]
    return source


def has_words(query: str) -> bool:
    """Whether ``query`` holds anything a parser would keep (no lexeme: no hit)."""
    return bool(_WORD.search(query))


def create_statements(partitions: int | None) -> list[str]:
    """The search table's DDL (its text search configuration first), partitioned like the
    store's other session-keyed tables."""
    return [_FTS_CONFIG_DDL, *partitioned(_FTS_DDL, partitions)]


def step_end_statements(cursor: str | None, partitions: int | None) -> list[str]:
    """What ends a backfill step that moved the cursor to ``cursor`` (None: the last step).

    Each backfill step ends by moving its cursor (its end: merge the pending list into the
    index); the last one removes it (no pending list from then on). Its commit need not wait
    for the WAL to be flushed: a crash may lose the last steps, each whole (its entries with its
    cursor), and the next build redoes them; a later commit that waits for its flush makes them
    durable too (the WAL is flushed in order).
    """
    gin = _FTS_GIN_PARTS if partitions else _FTS_GIN
    end = (_FTS_BUILT.format(gin=gin) if cursor is None
           else f"SELECT gin_clean_pending_list(g.idx) FROM ({gin}) g")
    return ["SET LOCAL synchronous_commit = off", end]


FTS_INSERT = (
    f"INSERT INTO {FTS} (session_id, id, tsv) "
    f"SELECT u.s, u.i, to_tsvector('{TS_CONFIG}', u.t) "
    "FROM unnest(?::text[], ?::text[], ?::text[]) AS u(s, i, t) "
    "ON CONFLICT (session_id, id) DO NOTHING"
)
"""Index entries given as three arrays (session ids, message ids, source texts): one statement
however many entries; the server computes every tsvector (an executemany would cost a statement
per entry)."""


def insert_arrays(
    rows: Iterable[tuple[str, str, str]]
) -> tuple[list[str], list[str], list[str]] | None:
    """:data:`FTS_INSERT`'s parameters for ``(session_id, id, text)`` entries (each text
    bounded by :func:`index_source`); None when there are none."""
    sids: list[str] = []
    mids: list[str] = []
    sources: list[str] = []
    for sid, mid, text in rows:
        sids.append(sid)
        mids.append(mid)
        sources.append(index_source(text))
    return (sids, mids, sources) if sids else None


def delete_some(n: int) -> str:
    """Remove the entries of ``n`` messages of one session, by key (the old text is not
    needed)."""
    return f"DELETE FROM {FTS} WHERE session_id = ? AND id IN ({_marks(n)})"


FTS_CLEAR = f"DELETE FROM {FTS} WHERE session_id = ?"
"""Remove the entries of every message of one session."""


def search_statements(all_words: bool) -> tuple[str, str, str]:
    """``SqlOps._search``'s ``select`` (keys, rank and order columns of the matches; its one
    ``?`` the query text), ``order`` and ``hits`` for a search: every word (``all_words``) or
    the phrase."""
    parse = "plainto_tsquery" if all_words else "phraseto_tsquery"
    return (
        f"SELECT f.session_id, f.id, ts_rank(f.tsv, q, 1) AS score, k.created_at, k.seq "
        f"FROM {parse}('{TS_CONFIG}', ?) q, {FTS} f CROSS JOIN LATERAL "
        f"(SELECT created_at, seq FROM {MESSAGES} "
        f"WHERE session_id = f.session_id AND id = f.id LIMIT 1) k WHERE f.tsv @@ q",
        "score DESC, k.created_at, k.seq",
        "SELECT h.session_id, h.id, m.role, m.content, m.content_chunks, h.created_at "
        f"FROM {{h}} CROSS JOIN LATERAL (SELECT role, content, content_chunks "
        f"FROM {MESSAGES} WHERE session_id = h.session_id AND id = h.id LIMIT 1) m "
        "ORDER BY h.score DESC, h.created_at, h.seq",
    )

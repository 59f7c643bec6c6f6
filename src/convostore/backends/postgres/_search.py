"""PostgreSQL full-text search: the index's DDL, its bounded source text, and the ``fts_*`` SQL.

``convostore_fts`` (created by the first search) holds the key and a ``tsvector`` of each
indexed message, under a GIN index (no copy of the text: a hit's text is read from its message
row); a session search is a phrase (``phraseto_tsquery``), a store
search needs every word (``plainto_tsquery``), best ``ts_rank`` first. The text search
configuration is ``english`` without its stop words (see :data:`TS_CONFIG`). Stale index rows
never surface: hits are joined to the messages table.

This module needs no driver: :class:`PostgresSearchOps` is a mixin of
:class:`~convostore.backends.postgres._engine.PostgresOps`, which supplies the connection and the
scope's state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .._schema import FTS, MESSAGES
from .._sql import SqlOps
from ..connection import _batches, _marks
from ..rows import FtsHit, OldTexts
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

# The search table, created by the first search (behaviour.md §8.1: not on append). The tsvector
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



class PostgresSearchOps(SqlOps):
    """The ``fts_*`` operations over the scope's connection (a mixin of ``PostgresOps``)."""

    # Set by PostgresOps for each scope. A write scope learns the answer with its append probe
    # (or asks here); the scope's locks keep it valid until it ends (creating the index takes
    # the store lock exclusively).
    _writing: bool
    _fts: bool | None
    _partitions: int | None

    def fts_exists(self) -> bool:
        if self._fts is None:
            found = self._one(PG_TABLES, ([FTS],)) is not None
            # Once there, the table stays; a "no" holds only under a write scope's locks.
            if found or self._writing:
                self._fts = found
            return found
        return self._fts

    def fts_create(self) -> None:
        self._run(_FTS_CONFIG_DDL)
        for statement in partitioned(_FTS_DDL, self._partitions):
            self._run(statement)
        if self._writing:
            self._fts = True

    def fts_set_cursor(self, cursor: str | None) -> None:
        super().fts_set_cursor(cursor)
        # Each backfill step ends by moving its cursor (its end: merge the pending list into
        # the index); the last one removes it (no pending list from then on). Its commit need
        # not wait for the WAL to be flushed: a crash may lose the last steps, each whole (its
        # entries with its cursor), and the next build redoes them; a later commit that waits
        # for its flush makes them durable too (the WAL is flushed in order).
        self._run("SET LOCAL synchronous_commit = off")
        gin = _FTS_GIN_PARTS if self._partitions else _FTS_GIN
        if cursor is None:
            self._run(_FTS_BUILT.format(gin=gin))
        else:
            self._run(f"SELECT gin_clean_pending_list(g.idx) FROM ({gin}) g")

    def fts_insert(self, rows: Iterable[tuple[str, str, str]]) -> None:
        sids: list[str] = []
        mids: list[str] = []
        sources: list[str] = []
        for sid, mid, text in rows:
            sids.append(sid)
            mids.append(mid)
            sources.append(index_source(text))
        if not sids:
            return
        # One statement however many entries: the arrays travel as three parameters and the
        # server computes every tsvector (an executemany would cost a statement per entry).
        self._run(
            f"INSERT INTO {FTS} (session_id, id, tsv) "
            f"SELECT u.s, u.i, to_tsvector('{TS_CONFIG}', u.t) "
            "FROM unnest(?::text[], ?::text[], ?::text[]) AS u(s, i, t) "
            "ON CONFLICT (session_id, id) DO NOTHING",
            (sids, mids, sources),
        )

    def fts_delete(self, session_id: str, ids: Sequence[str], old_texts: OldTexts) -> None:
        for batch in _batches(ids):  # by key: the old text is not needed
            self._run(
                f"DELETE FROM {FTS} WHERE session_id = ? AND id IN ({_marks(len(batch))})",
                (session_id, *batch),
            )

    def fts_clear(self, session_id: str, old_texts: OldTexts) -> None:
        self._run(f"DELETE FROM {FTS} WHERE session_id = ?", (session_id,))

    def fts_search(
        self, query: str, session_id: str | None, limit: int, all_words: bool
    ) -> list[FtsHit]:
        if not _WORD.search(query) or limit <= 0:
            return []  # nothing a parser would keep: no lexeme, no hit
        parse = "plainto_tsquery" if all_words else "phraseto_tsquery"
        return self._search(
            f"SELECT f.session_id, f.id, ts_rank(f.tsv, q, 1) AS score, k.created_at, k.seq "
            f"FROM {parse}('{TS_CONFIG}', ?) q, {FTS} f CROSS JOIN LATERAL "
            f"(SELECT created_at, seq FROM {MESSAGES} "
            f"WHERE session_id = f.session_id AND id = f.id LIMIT 1) k WHERE f.tsv @@ q",
            query, session_id, "f.session_id", "score DESC, k.created_at, k.seq", limit,
            "SELECT h.session_id, h.id, m.role, m.content, m.content_chunks, h.created_at "
            f"FROM {{h}} CROSS JOIN LATERAL (SELECT role, content, content_chunks "
            f"FROM {MESSAGES} WHERE session_id = h.session_id AND id = h.id LIMIT 1) m "
            "ORDER BY h.score DESC, h.created_at, h.seq",
        )

"""Full-text search (issue 6): backfill, query latency and the cost an index adds to appends.

Builds a store of 100,000 realistic messages (10 sessions of 10,000 by default; see
``--messages`` and ``--sessions``) without an index, then measures in the same run:

1. append throughput without an index (the index does not exist until the first search);
2. the first search, which builds the index: the one-time backfill of every stored message,
   while two writer threads append to other sessions in a loop (one through the same store, one
   through a second store with its own connection): the median and longest wait of an append;
3. append throughput with the index (every write now also indexes the message's text);
4. search latency over many different queries: ``session.search`` (the query as one phrase,
   inside one session) and ``store.search`` (all words, every session).

Baselines, on the same database in the same run: the very query the backend runs, sent raw
(SQLite: FTS5 ``MATCH`` with the same join, ranking and limit; PostgreSQL: the same ``tsquery``
statement); a raw-SQL backfill into a second full-text table of the same kind, extracting the
text parts in SQL (SQLite ``json_each``; PostgreSQL ``jsonb_array_elements``); and raw appends
into a plain table (plus that second full-text table once it exists).

    python benchmarks/search.py
    python benchmarks/search.py --messages 20000 --queries 50
    python benchmarks/search.py --backend postgres --url postgresql://postgres@127.0.0.1/test
"""

from __future__ import annotations

import random
import re
import statistics
import sys
import threading
import time
from itertools import islice
from typing import Any

from _common import (
    Bench,
    MessageGen,
    Report,
    append_rates,
    bench_parser,
    build_session,
    compact_json,
    fmt_s,
    machine_line,
    open_bench,
    percentile,
    progress,
    timed,
)

_WORD = re.compile(r"[a-z]+")
APPEND_SID = "appends"
APPEND_SALT = 1_000


def pg_config() -> str:
    """The text search configuration the PostgreSQL backend indexes with (for the baselines)."""
    try:
        from convostore.backends.postgres._search import TS_CONFIG
    except ImportError:
        return "english"
    return str(TS_CONFIG)


def text_of(message: dict[str, Any]) -> str:
    """The text parts of a message joined by a space (what the index holds)."""
    return " ".join(p["text"] for p in message["parts"] if p.get("type") == "text")


class Queries:
    """Query words drawn from the stored conversations (so most queries find something).

    The 50 most frequent words of the vocabulary ("the", "of", ...) are skipped: people search
    for the words that tell messages apart.
    """

    def __init__(self, gen: MessageGen, per_session: int, seed: int) -> None:
        self.gen = gen
        self.per_session = per_session
        self.rng = random.Random(seed * 31 + 7)
        self.frequent = set(gen.words[:50])

    def _words(self, salt: int) -> list[str]:
        while True:
            k = self.rng.randrange(self.per_session)
            if k % 3 == 1:
                continue  # a tool step: no text part
            words = _WORD.findall(text_of(self.gen.message(k, salt)))
            if len(words) >= 4:
                return words

    def phrase(self, salt: int) -> str:
        """Two adjacent words of one message of the session ``salt``, not both frequent."""
        while True:
            words = self._words(salt)
            i = self.rng.randrange(len(words) - 1)
            if words[i] not in self.frequent or words[i + 1] not in self.frequent:
                return f"{words[i]} {words[i + 1]}"

    def all_words(self, sessions: int) -> str:
        """Two distinct infrequent words of one message of any session."""
        while True:
            words = [w for w in self._words(self.rng.randrange(sessions))
                     if w not in self.frequent]
            if len(set(words)) >= 2:
                first = self.rng.choice(words)
                second = self.rng.choice([w for w in words if w != first])
                return f"{first} {second}"


def raw_search(bench: Bench, query: str, session_id: str | None, limit: int = 20) -> list[Any]:
    """The statement the backend runs for a search, sent raw (the latency baseline)."""
    if bench.kind == "sqlite":
        if session_id is None:  # every word, each as its own phrase
            match = " ".join('"' + w.replace('"', '""') + '"' for w in query.split())
        else:
            match = '"' + query.replace('"', '""') + '"'
        sql = ("SELECT m.session_id, m.id, m.role, f.content, m.created_at FROM convostore_fts f "
               "JOIN convostore_messages m ON m.rid = f.rowid AND m.session_id = f.session_id "
               "AND m.id = f.id WHERE convostore_fts MATCH ?")
        params: list[Any] = [match]
    else:
        parse = "plainto_tsquery" if session_id is None else "phraseto_tsquery"
        sql = ("SELECT m.session_id, m.id, m.role, f.content, m.created_at FROM convostore_fts f "
               "JOIN convostore_messages m ON m.session_id = f.session_id AND m.id = f.id, "
               f"{parse}('{pg_config()}', ?) q WHERE f.tsv @@ q")
        params = [query]
    if session_id is not None:
        sql += " AND f.session_id = ?"
        params.append(session_id)
    sql += (" ORDER BY f.rank LIMIT ?" if bench.kind == "sqlite"
            else " ORDER BY ts_rank(f.tsv, q, 1) DESC, m.created_at, m.seq LIMIT ?")
    params.append(limit)
    return bench.raw.rows(sql, params)


def raw_backfill(bench: Bench) -> int:
    """Build a second full-text table of the same kind over every message, in SQL alone."""
    raw = bench.raw
    if bench.kind == "sqlite":
        raw.conn.execute("CREATE VIRTUAL TABLE bench_raw_fts USING fts5(content, "
                         "tokenize = 'porter unicode61')")
        raw.conn.execute("BEGIN IMMEDIATE")
        raw.conn.execute(
            "INSERT INTO bench_raw_fts (rowid, content) "
            "SELECT m.rid, group_concat(json_extract(p.value, '$.text'), ' ') "
            "FROM convostore_messages m, json_each(m.content, '$.parts') p "
            "WHERE json_extract(p.value, '$.type') = 'text' GROUP BY m.rid")
        raw.conn.execute("COMMIT")
    else:
        with raw.conn.transaction():
            raw.conn.execute(
                "CREATE TABLE bench_raw_fts (session_id TEXT, id TEXT, content TEXT, "
                "tsv TSVECTOR, PRIMARY KEY (session_id, id))")
            raw.conn.execute(
                "INSERT INTO bench_raw_fts SELECT session_id, id, t, "
                f"to_tsvector('{pg_config()}', t) "
                "FROM (SELECT m.session_id, m.id, string_agg(p->>'text', ' ') AS t "
                "FROM convostore_messages m, jsonb_array_elements(m.content::jsonb->'parts') p "
                "WHERE p->>'type' = 'text' GROUP BY m.session_id, m.id) s")
            raw.conn.execute("CREATE INDEX ON bench_raw_fts USING GIN (tsv)")
    return int(raw.value("SELECT count(*) FROM bench_raw_fts"))


class RawAppender:
    """The append baseline: one transaction inserting the message JSON into a plain table, plus
    its text into the second full-text table once that exists."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.seq = 0
        self.indexed = False
        bench.raw.conn.execute(
            "CREATE TABLE bench_raw_messages (rid INTEGER PRIMARY KEY, id TEXT UNIQUE, "
            "seq INTEGER, content TEXT)" if bench.kind == "sqlite" else
            "CREATE TABLE bench_raw_messages (rid BIGSERIAL PRIMARY KEY, id TEXT UNIQUE, "
            "seq BIGINT, content TEXT)")

    def append(self, message: dict[str, Any]) -> None:
        """Append ``message`` (its id prefixed with ``raw-``) in one transaction."""
        raw = self.bench.raw
        self.seq += 1
        content = compact_json(message)
        text = text_of(message) if self.indexed else ""
        if self.bench.kind == "sqlite":
            raw.conn.execute("BEGIN IMMEDIATE")
            cur = raw.conn.execute(
                "INSERT INTO bench_raw_messages (id, seq, content) VALUES (?, ?, ?)",
                ("raw-" + message["id"], self.seq, content))
            if text:
                raw.conn.execute("INSERT INTO bench_raw_fts (rowid, content) VALUES (?, ?)",
                                 (cur.lastrowid + 10_000_000, text))
            raw.conn.execute("COMMIT")
        else:
            with raw.conn.transaction():
                raw.conn.execute(
                    "INSERT INTO bench_raw_messages (id, seq, content) VALUES (%s, %s, %s)",
                    ("raw-" + message["id"], self.seq, content))
                if text:
                    raw.conn.execute(
                        "INSERT INTO bench_raw_fts VALUES (%s, %s, %s, "
                        f"to_tsvector('{pg_config()}', %s))",
                        ("raw", "raw-" + message["id"], text, text))


class WaitingWriter:
    """A thread appending short messages to its own session in a loop, timing each append:
    how long a writer of another session waits while the index is built."""

    def __init__(self, session: Any, label: str) -> None:
        self.session = session
        self.label = label
        self.waits: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"writer {label}", daemon=True)

    def start(self) -> None:
        """Start appending."""
        self._thread.start()

    def stop(self) -> None:
        """Stop after the append in progress."""
        self._stop.set()
        self._thread.join()

    def split(self) -> list[float]:
        """The waits timed so far (removed: :attr:`waits` starts again)."""
        taken, self.waits = self.waits, []
        return taken

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            message = {"id": f"w{n}", "role": "user",
                       "parts": [{"type": "text", "text": f"writer append number {n}"}]}
            started = time.perf_counter()
            self.session.append_message(message)
            self.waits.append(time.perf_counter() - started)
            n += 1
            time.sleep(0.002)  # a busy writer, not a flood


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000,
                        help="messages in the store (default 100,000)")
    parser.add_argument("--sessions", type=int, default=10,
                        help="sessions they are spread over (default 10)")
    parser.add_argument("--queries", type=int, default=200,
                        help="different queries per kind of search (default 200)")
    parser.add_argument("--rounds", type=int, default=5, help="append rounds per phase (5)")
    parser.add_argument("--round", type=int, default=200, help="appends per round (200)")
    args = parser.parse_args(argv)
    report = Report("convostore search: backfill, latency, append cost of the index")
    per_session = args.messages // args.sessions

    with open_bench(args, name="search") as bench:
        report.header([
            f"backend {bench.kind}: {bench.where}",
            machine_line(),
            f"{args.sessions} sessions x {per_session:,} messages = "
            f"{per_session * args.sessions:,} messages (user text 50-500 chars, tool steps "
            "with 1-20 KB JSON output, assistant text 200-3,000 chars; only text parts are "
            "indexed)",
        ])
        gen = MessageGen(args.seed)
        store = bench.store
        build_time = 0.0
        for s in range(args.sessions):
            progress(f"building session s{s} ({per_session:,} messages)")
            _n, seconds = build_session(store.session(f"s{s}"), gen.conversation(per_session, s),
                                        total=per_session, label=f"s{s}: ")
            build_time += seconds
        total = per_session * args.sessions
        print(f"built {total:,} messages in {fmt_s(build_time)} "
              f"({total / build_time:,.0f} msgs/s, import_message)\n")

        appender = RawAppender(bench)
        fresh = (gen.message(k, APPEND_SALT) for k in range(10**9))
        api_append = store.session(APPEND_SID).append_message

        def append_phase() -> dict[str, float]:
            """Appends/s of the API and the raw baseline, on the next unused messages."""
            batch = list(islice(fresh, args.rounds * args.round))
            return append_rates({"api": (api_append, batch), "raw": (appender.append, batch)},
                                size=args.round)

        progress("appends without an index")
        before = append_phase()

        queries = Queries(gen, per_session, args.seed)
        first_query = queries.phrase(0)
        progress("first search: building the index, writers appending meanwhile")
        other_store = bench.reopen()
        writers = [WaitingWriter(store.session("writer-same-store"), "same store"),
                   WaitingWriter(other_store.session("writer-other-store"),
                                 "another store (own connection)")]
        for writer in writers:
            writer.start()
        time.sleep(3)  # the same writers with no build running: their usual waits
        quiet = [w.split() for w in writers]
        try:
            _hits, backfill = timed(lambda: store.session("s0").search(first_query))
        finally:
            for writer in writers:
                writer.stop()
            other_store.close()
        report.table(
            "writers of other sessions during the one-time build (an append per loop, "
            "timed from call to return)",
            ["writer", "appends", "median wait", "p99", "longest wait",
             "3 s before the build: median", "longest"],
            [[w.label, f"{len(w.waits):,}", fmt_s(statistics.median(w.waits)),
              fmt_s(percentile(w.waits, 99)), fmt_s(max(w.waits)),
              fmt_s(statistics.median(q)), fmt_s(max(q))]
             for w, q in zip(writers, quiet, strict=True)],
        )
        longest = max(max(w.waits) for w in writers)
        written_during = sum(len(w.waits) + len(q) for w, q in zip(writers, quiet, strict=True))
        indexed = int(bench.raw.value("SELECT count(*) FROM convostore_fts"))
        progress("raw SQL backfill into a second full-text table")
        raw_indexed, raw_backfill_time = timed(lambda: raw_backfill(bench))
        appender.indexed = True
        stored = int(bench.raw.value("SELECT count(*) FROM convostore_messages"))
        chunked = int(bench.raw.value(
            "SELECT count(*) FROM convostore_messages WHERE content_chunks > 0"))
        report.table(
            "one-time backfill (the first search)",
            ["build", "time", "messages/s", "entries", "vs raw SQL"],
            [["first search (create + backfill + query)", fmt_s(backfill),
              f"{stored / backfill:,.0f}", f"{indexed:,}",
              f"{backfill / raw_backfill_time:.2f}x"],
             ["raw SQL (text parts extracted in SQL)", fmt_s(raw_backfill_time),
              f"{stored / raw_backfill_time:,.0f}", f"{raw_indexed:,}", "1.00x"]],
        )
        if chunked:
            print(f"note: {chunked} messages span continuation rows; the raw backfill reads "
                  "only their first row\n")

        progress("appends with the index")
        after = append_phase()
        report.table(
            f"append throughput, median of {args.rounds} rounds of {args.round} "
            f"(session {APPEND_SID!r} in the {total:,}-message store)",
            ["append", "no index", "with index", "with/without (speed)", "per append added"],
            [[name, f"{before[name]:,.0f}/s", f"{after[name]:,.0f}/s",
              f"{after[name] / before[name]:.2f}x",
              fmt_s(1 / after[name] - 1 / before[name])] for name in ("api", "raw")]
            + [["api vs raw (speed)", f"{before['api'] / before['raw']:.2f}x",
                f"{after['api'] / after['raw']:.2f}x", "", ""]],
        )

        progress(f"timing {args.queries} queries of each kind")
        # (query, session searched or None for the whole store)
        kinds: dict[str, list[tuple[str, str | None]]] = {
            "session.search (phrase, one session)": [
                (queries.phrase(i % args.sessions), f"s{i % args.sessions}")
                for i in range(args.queries)
            ],
            "store.search (all words, every session)": [
                (queries.all_words(args.sessions), None) for _ in range(args.queries)
            ],
        }

        def api_search(query: str, sid: str | None) -> list[Any]:
            return store.search(query) if sid is None else store.session(sid).search(query)

        rows = []
        mismatched = 0
        for name, qs in kinds.items():
            api_t, raw_t, hits = [], [], []
            for q, sid in qs:
                api_search(q, sid)
                raw_search(bench, q, sid)  # warm both: a term's first page reads are not latency
                a0 = time.perf_counter()
                got = api_search(q, sid)
                a1 = time.perf_counter()
                want = raw_search(bench, q, sid)
                a2 = time.perf_counter()
                api_t.append(a1 - a0)
                raw_t.append(a2 - a1)
                hits.append(len(got))
                if [(r.session_id, r.id) for r in got] != [(w[0], w[1]) for w in want]:
                    mismatched += 1
            rows.append([
                name, fmt_s(statistics.median(api_t)), fmt_s(percentile(api_t, 90)),
                fmt_s(statistics.median(raw_t)), fmt_s(percentile(raw_t, 90)),
                f"{statistics.median(api_t) / statistics.median(raw_t):.2f}x",
                f"{statistics.median(hits):.0f}", f"{sum(h == 0 for h in hits)}",
            ])
        in_store = total + 2 * args.rounds * args.round + written_during
        report.table(
            f"search latency over {in_store:,} messages, {args.queries} different queries of "
            "each kind (limit 20; each query run once unmeasured first)",
            ["search", "median", "p90", "raw SQL median", "raw p90", "api/raw (median)",
             "median hits", "no hit"],
            rows,
        )

        ratio = after["api"] / before["api"]
        print(f"index cost on appends: {ratio:.2f}x the no-index rate "
              f"({before['api']:,.0f}/s -> {after['api']:,.0f}/s)\n")
        report.check("no writer of another session waits 100 ms or more during the build",
                     longest < 0.1, f"longest wait {fmt_s(longest)}")
        report.check("the backfill indexes every message that has text",
                     indexed == raw_indexed, f"{indexed:,} entries (raw SQL: {raw_indexed:,})")
        report.check("every search returns the rows raw SQL returns, in its order",
                     mismatched == 0, f"{mismatched} of {2 * args.queries} queries differ")
        return report.finish()


if __name__ == "__main__":
    sys.exit(main())

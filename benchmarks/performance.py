"""Issue 26: every row of its table, both engines, against raw baselines measured in the same run.

    python benchmarks/performance.py                       # both engines, 100,000 messages
    python benchmarks/performance.py --quick               # 10,000 messages, fewer rounds
    python benchmarks/performance.py --engines sqlite      # one engine
    python benchmarks/performance.py --engines postgres --url postgresql://postgres@host/db

Per engine it prints one table in the order of the issue (workload, raw, convostore, ratio,
target, best peer), a ``PASS``/``FAIL`` line per target of the issue's "Done when", and details
(builds, what the search index is made of, the checks of the concurrent writers, the time each
part took). Progress goes to stderr, figures to stdout; the exit status is 1 when a target is
missed.

Every contender writes and reads the same messages, from :class:`_common.MessageGen` (mean
stored message about 4.4 KB; see benchmarks/README.md, "The data").

SQLite (every store and baseline in its own file of one temporary directory, WAL):

- append one message per call into a fresh session, ``synchronous=NORMAL``: convostore against
  raw ``BEGIN; INSERT; COMMIT`` into ``raw (session_id, id, seq, content)`` keyed by
  ``(session_id, id)`` (the baseline of benchmarks/append.py); with ``durability="full"``
  against the same with ``synchronous=FULL``, and against that table with the unique
  ``(session_id, seq)`` index any ordered read needs. Runs of ``N`` appends, interleaved in an
  order shuffled every round, one untimed warm-up run each, the median (as append.py does).
- 4 processes appending into one session (``synchronous=NORMAL``): total messages/s from the
  first writer's start to the last one's end, each writer connected before a barrier releases
  them (as compare.py does), against 4 raw processes (``BEGIN IMMEDIATE; INSERT; COMMIT``);
  then every session is read back: nothing lost, nothing duplicated, one chain, the
  directory's row count right.
- a 100,000-message session (``--messages``) built with ``import_messages`` in batches of
  1,000; the raw table ``raw_messages`` (the same rows, with the ``(session_id, seq)`` index)
  with ``executemany``; the OpenAI Agents SDK's ``SQLiteSession`` with ``add_items`` (the same
  conversation as Responses items, as compare.py builds it).
- newest 20: ``list(islice(session.history(newest_first=True), 20))`` against
  ``SELECT content ... ORDER BY seq DESC LIMIT 20`` and ``json.loads``; the SDK's
  ``get_items(limit=20)`` beside them.
- full read: ``for m in session.history()`` against raw cursor iteration with ``json.loads``
  and the SDK's ``get_items()`` (one list); peak Python memory of each (tracemalloc, one more
  pass).
- search: ``store.build_search_index()`` (the backfill) timed; the index's size is what the
  build added to the database, object by object (``dbstat``, else the file's pages), against
  the UTF-8 bytes of the text it indexes (the text parts); the raw baseline is a contentless
  FTS5 table (``porter unicode61``) over the raw table, filled by one ``INSERT ... SELECT``.
  Then ``session.search(word)`` (a phrase) for ``--queries`` rare words (in 1 to 3 messages of
  the session), each run once unmeasured, then timed in interleaved rounds against the raw
  ``MATCH`` (the rowid joined to ``raw_messages`` for the id); both must return the same ids.

PostgreSQL (``--url``, else ``$CONVOSTORE_TEST_POSTGRES_URL``; two scratch schemas, one for the
writes and one for the 100,000-message session, dropped afterwards unless ``--keep``):

- append one message per call: convostore against raw psycopg ``INSERT`` and ``commit()``.
- 1 process, 4 processes into one session, 4 processes into 4 sessions: convostore and raw,
  each read back and counted as on SQLite.
- newest 20 and the full read against psycopg with the same columns: raw ``raw_messages``
  filled by ``COPY``; the full read's baseline iterates a plain (client-side) cursor, and a
  server-side cursor (``itersize`` 1,000, bounded memory) is shown beside it. Every table of
  the schema gets ``VACUUM ANALYZE`` after the build, as autovacuum would.
- search: the backfill, the index's size (what the build added to the schema's relations,
  ``pg_total_relation_size``) against the indexed text, the raw baseline a table of
  ``(session_id, id, tsvector)`` with a GIN index (what a search needs, no copy of the text);
  phrase search latency of rare words against the raw ``phraseto_tsquery`` statement, measured
  right after the backfill and again after ``VACUUM ANALYZE`` (the figure; the raw table is
  analysed as it is built).

Every figure is a median of at least 3 runs. Options: ``--engines sqlite,postgres``,
``--messages N``, ``--quick``, ``--url``, ``--keep``, ``--seed``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import sqlite3
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import islice
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (  # noqa: E402
    MessageGen,
    MiB,
    Report,
    compact_json,
    fmt_bytes,
    gc_off,
    interleaved,
    machine_line,
    peak_memory,
    progress,
    rounds,
    scratch_database,
)
from compare import SdkStore  # noqa: E402
from search import pg_config  # noqa: E402

from convostore import ImportItem, Session, Sessions  # noqa: E402

CHUNK = 1_000
APPEND_SALT = 500
PROCESS_SALT = 10_000
BIG = "big"
NEWEST = 20
PROCESSES = 4
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Sizes:
    """How much each workload does (the defaults, or ``--quick``'s)."""

    messages: int
    appends: int
    """appends per timed run, SQLite"""
    pg_appends: int
    """appends per timed run, PostgreSQL"""
    append_repeats: int
    per_process: int
    """appends per writing process, SQLite"""
    pg_per_process: int
    process_rounds: int
    newest_rounds: int
    full_passes: int
    queries: int
    query_rounds: int


FULL = Sizes(messages=100_000, appends=1_000, pg_appends=300, append_repeats=7,
             per_process=2_000, pg_per_process=400, process_rounds=3, newest_rounds=200,
             full_passes=5, queries=20, query_rounds=10)
QUICK = Sizes(messages=10_000, appends=200, pg_appends=100, append_repeats=3, per_process=400,
              pg_per_process=100, process_rounds=3, newest_rounds=50, full_passes=3,
              queries=10, query_rounds=5)


# --- the results of one engine --------------------------------------------------------------------


@dataclass
class Results:
    """The issue's table for one engine, its targets and its details."""

    title: str
    rows: list[list[str]] = field(default_factory=list)
    targets: list[tuple[str, bool, str]] = field(default_factory=list)
    phases: list[tuple[str, float]] = field(default_factory=list)
    details: list[tuple[str, list[str], list[list[str]]]] = field(default_factory=list)

    def row(self, workload: str, raw: str, conv: str, ratio: float | None, target: str = "",
            peer: str = "") -> None:
        """One line of the table."""
        self.rows.append([workload, raw, conv, "" if ratio is None else f"{ratio:.2f}x",
                          target, peer])

    def at_least(self, name: str, ratio: float, floor: float) -> None:
        """A target ``ratio >= floor``."""
        self.targets.append((f"{name} >= {floor:g}x", ratio >= floor, f"{ratio:.2f}x"))

    def at_most(self, name: str, ratio: float, limit: float, shown: str = "") -> None:
        """A target ``ratio <= limit``."""
        self.targets.append((f"{name} <= {limit:g}x", ratio <= limit,
                             shown or f"{ratio:.2f}x"))

    def check(self, name: str, ok: bool, shown: str) -> None:
        """A target that is not a ratio (a count, a limit in bytes or milliseconds)."""
        self.targets.append((name, ok, shown))

    @contextmanager
    def phase(self, label: str) -> Iterator[None]:
        """Time a part of the run (printed at the end: how long each part takes)."""
        progress(f"{self.title}: {label}")
        started = time.perf_counter()
        try:
            yield
        finally:
            self.phases.append((label, time.perf_counter() - started))

    def print(self, report: Report) -> None:
        """The details, the time each part took, the table, then its PASS/FAIL lines."""
        for heading, columns, rows in self.details:
            report.table(heading, columns, rows)
        report.table(f"{self.title}: time spent", ["part", "seconds"],
                     [[label, f"{s:.1f}"] for label, s in self.phases]
                     + [["total", f"{sum(s for _l, s in self.phases):.1f}"]])
        report.table(f"{self.title}: issue 26's table (ratio = convostore / raw)",
                     ["workload", "raw", "convostore", "ratio", "target", "best peer"],
                     self.rows)
        for name, ok, shown in self.targets:
            report.check(f"{self.title}: {name}", ok, shown)
        print()


def per_s(rate: float) -> str:
    return f"{rate:,.0f}"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


# --- appends in this process ----------------------------------------------------------------------


def append_messages(gen: MessageGen, count: int) -> list[dict[str, Any]]:
    """The messages every in-process append contender writes (the same ones, made beforehand)."""
    return [gen.message(k, salt=APPEND_SALT) for k in range(count)]


def conv_runner(session: Session, messages: Sequence[dict[str, Any]],
                n: int) -> Callable[[], None]:
    """A run of ``n`` ``append_message`` calls, each run on the next unused messages."""
    it = iter(messages)

    def run() -> None:
        for _ in range(n):
            session.append_message(next(it))

    return run


RAW_APPEND_DDL = ("CREATE TABLE IF NOT EXISTS raw (session_id TEXT, id TEXT, seq BIGINT, "
                  "content TEXT, PRIMARY KEY (session_id, id))")
RAW_ORDER_DDL = "CREATE UNIQUE INDEX IF NOT EXISTS raw_order ON raw (session_id, seq)"


def sqlite_raw(path: str, synchronous: str, *, ordered: bool = False) -> sqlite3.Connection:
    """A baseline connection: WAL, the given synchronous, the raw append table."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(RAW_APPEND_DDL)
    if ordered:
        conn.execute(RAW_ORDER_DDL)
    return conn


def sqlite_raw_runner(conn: sqlite3.Connection, messages: Sequence[dict[str, Any]], n: int,
                      begin: str = "BEGIN") -> Callable[[], None]:
    """A run of ``n`` raw appends: ``BEGIN; INSERT; COMMIT``, the message as compact JSON."""
    it = iter(messages)
    seq = [0]

    def run() -> None:
        for _ in range(n):
            m = next(it)
            seq[0] += 1
            conn.execute(begin)
            conn.execute("INSERT INTO raw VALUES (?,?,?,?)",
                         ("s", m["id"], seq[0], compact_json(m)))
            conn.execute("COMMIT")

    return run


def pg_raw_runner(conn: Any, messages: Sequence[dict[str, Any]], n: int) -> Callable[[], None]:
    """A run of ``n`` raw psycopg appends: ``INSERT`` then ``commit()``."""
    it = iter(messages)
    seq = [0]

    def run() -> None:
        for _ in range(n):
            m = next(it)
            seq[0] += 1
            conn.execute("INSERT INTO raw VALUES (%s,%s,%s,%s)",
                         ("s", m["id"], seq[0], compact_json(m)))
            conn.commit()

    return run


def append_rates(runs: dict[str, Callable[[], None]], n: int, repeats: int) -> dict[str, float]:
    """Appends/s of each runner: median of ``repeats`` runs after one warm-up run each, in an
    order shuffled every round, the garbage collector running (appends make garbage)."""
    secs = rounds(runs, repeat=repeats, warmup=1, order_seed=len(runs), collect=True)
    return {name: n / statistics.median(times) for name, times in secs.items()}


# --- writers in other processes -------------------------------------------------------------------


def _open(engine: str, target: str, schema: str | None) -> Sessions:
    return Sessions.open(target, schema=schema) if engine == "postgres" else Sessions.open(target)


def _raw_append(engine: str, target: str, schema: str | None,
                session_id: str) -> tuple[Callable[[dict[str, Any]], Any], Callable[[], None]]:
    """A raw writer's connection: (append one message, close)."""
    seq = [0]
    if engine == "postgres":
        import psycopg

        pg = psycopg.connect(target, options=f"-c search_path={schema}")

        def pg_append(m: dict[str, Any]) -> None:
            seq[0] += 1
            pg.execute("INSERT INTO raw VALUES (%s,%s,%s,%s)",
                       (session_id, m["id"], seq[0], compact_json(m)))
            pg.commit()

        return pg_append, pg.close
    conn = sqlite3.connect(target, isolation_level=None, timeout=60.0)
    conn.execute("PRAGMA synchronous=NORMAL")

    def append(m: dict[str, Any]) -> None:
        seq[0] += 1
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO raw VALUES (?,?,?,?)",
                     (session_id, m["id"], seq[0], compact_json(m)))
        conn.execute("COMMIT")

    return append, conn.close


def _write(engine: str, target: str, schema: str | None, gen: MessageGen, task: tuple[Any, ...],
           barrier: Any) -> tuple[Any, ...]:
    """One task of a writing process: connect, wait for the others, append ``count`` messages."""
    kind, session_id, count, salt, parties = task
    messages = [gen.message(k, salt=salt) for k in range(count)]
    if kind == "raw":
        append, close = _raw_append(engine, target, schema, session_id)
    else:
        store = _open(engine, target, schema)
        session = store.session(session_id)
        session.get_latest_leaf()  # connected (and the pool filled) before the clock starts
        append, close = session.append_message, store.close
    acked: list[str] = []
    errors, first_error = 0, ""
    try:
        if parties > 1:
            barrier.wait(timeout=300)
        started = time.monotonic()
        for m in messages:
            try:
                append(m)
            except Exception as exc:  # counted and reported: that is the measure
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"
            else:
                acked.append(m["id"])
        ended = time.monotonic()
    finally:
        close()
    return session_id, started, ended, acked, errors, first_error


def _writer(engine: str, target: str, schema: str | None, seed: int, barrier: Any, tasks: Any,
            results: Any) -> None:
    """A writing process: runs the tasks it is sent until it gets ``None``."""
    gen = MessageGen(seed)
    while (task := tasks.get()) is not None:
        try:
            results.put(_write(engine, target, schema, gen, task, barrier))
        except BaseException as exc:
            results.put(("error", f"{type(exc).__name__}: {exc}"))
            raise


@dataclass
class Written:
    """What one multi-process run wrote: messages/s and each session's acknowledged ids."""

    rate: float
    acked: dict[str, list[str]]
    errors: int
    first_error: str


class Writers:
    """``PROCESSES`` writing processes on one database, started once and given one task per run
    (as compare.py's writers do, each waits at a barrier until all are connected; starting the
    processes once keeps the interpreter's start out of every run)."""

    def __init__(self, engine: str, target: str, schema: str | None, seed: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.barrier = barrier = ctx.Barrier(PROCESSES)  # kept: the processes share it
        self.results: Any = ctx.Queue()
        self.tasks: list[Any] = [ctx.Queue() for _ in range(PROCESSES)]
        self.procs = [ctx.Process(target=_writer, args=(engine, target, schema, seed, barrier,
                                                        q, self.results), daemon=True)
                      for q in self.tasks]
        for p in self.procs:
            p.start()

    def run(self, kind: str, sessions: Sequence[str], count: int, salt: int) -> Written:
        """One process per entry of ``sessions`` (1 or all of them; repeat an id to share a
        session), ``count`` appends each; the rate is every acknowledged append over the first
        start to the last end."""
        if len(sessions) not in (1, PROCESSES):
            raise ValueError(f"a run takes 1 or {PROCESSES} processes, not {len(sessions)}")
        for p, sid in enumerate(sessions):
            self.tasks[p].put((kind, sid, count, salt + p, len(sessions)))
        got = [self.results.get(timeout=900) for _ in sessions]
        failed = [g[1] for g in got if g[0] == "error"]
        if failed:
            raise SystemExit(f"a writing process failed: {failed[0]}")
        acked: dict[str, list[str]] = {}
        for g in got:
            acked.setdefault(g[0], []).extend(g[3])
        total = sum(len(g[3]) for g in got)
        span = max(g[2] for g in got) - min(g[1] for g in got)
        return Written(total / span, acked, sum(g[4] for g in got),
                       next((g[5] for g in got if g[5]), ""))

    def close(self) -> None:
        """Stop the processes."""
        for q in self.tasks:
            q.put(None)
        for p in self.procs:
            p.join(timeout=60)


@dataclass
class Tally:
    """Read back after concurrent writers: lost, duplicated, off the chain, miscounted, errors."""

    lost: int = 0
    dup: int = 0
    miscounted: int = 0
    errors: int = 0
    sessions: int = 0
    first_error: str = ""
    chained: bool = True
    """convostore's tally (one chain per session, the directory's count); False for raw."""

    @property
    def ok(self) -> bool:
        return not (self.lost or self.dup or self.miscounted or self.errors)

    def __str__(self) -> str:
        text = (f"{self.lost} lost{' (or off the one chain)' if self.chained else ''}, "
                f"{self.dup} duplicated, "
                + (f"{self.miscounted} sessions miscounted, " if self.chained else "")
                + f"{self.errors} errors, {self.sessions} sessions")
        return text + (f"; first error: {self.first_error[:160]}" if self.first_error else "")


def tally_convostore(tally: Tally, written: Written, store: Sessions) -> None:
    """Every acknowledged message on the session's one chain once; the directory's count."""
    counts = {s.session_id: s.messages for s in store.list_sessions()}
    for sid, acked in written.acked.items():
        path = [r.id for r in store.session(sid).get_history_row_stats()]
        tally.lost += len(set(acked) - set(path))
        tally.dup += len(path) - len(set(path))
        tally.miscounted += counts.get(sid, 0) != len(acked)
        tally.sessions += 1
    tally.errors += written.errors
    tally.first_error = tally.first_error or written.first_error


def tally_raw(tally: Tally, written: Written, rows: Callable[[str], list[str]]) -> None:
    """Every acknowledged row present once."""
    for sid, acked in written.acked.items():
        present = rows(sid)
        tally.lost += len(set(acked) - set(present))
        tally.dup += len(present) - len(set(present))
        tally.sessions += 1
    tally.errors += written.errors
    tally.first_error = tally.first_error or written.first_error


# --- the big session ------------------------------------------------------------------------------


@dataclass
class Built:
    """What the build of the big session stored and how long each contender took."""

    messages: int = 0
    text_bytes: int = 0
    text_messages: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    doc_freq: Counter[str] = field(default_factory=Counter)

    def rare_words(self, count: int, seed: int) -> list[str]:
        """``count`` of the session's rarest words (4 letters or more): drawn from the ``3 *
        count`` words in the fewest messages."""
        pool = sorted((n, w) for w, n in self.doc_freq.items() if len(w) >= 4)[: 3 * count]
        return sorted(random.Random(seed).sample([w for _n, w in pool], min(count, len(pool))))

    def rarity(self, words: Sequence[str]) -> str:
        """In how many messages the words are (fewest to most)."""
        counts = [self.doc_freq[w] for w in words]
        return f"{len(words)} words in {min(counts)} to {max(counts)} messages" if counts else "-"


def build_big(gen: MessageGen, total: int, contenders: dict[str, Callable[[list[dict[str, Any]]],
                                                                          None]]) -> Built:
    """Feed the same ``total`` messages, oldest first, chunk by chunk, to every contender's bulk
    path; count the text the index will hold and the messages each word is in."""
    built = Built(seconds=dict.fromkeys(contenders, 0.0))
    started = time.perf_counter()
    for first in range(0, total, CHUNK):
        batch = [gen.message(k) for k in range(total - 1 - first,
                                                max(total - first - CHUNK, 0) - 1, -1)]
        for m in batch:
            texts = [p["text"] for p in m["parts"] if p.get("type") == "text"]
            if texts:
                built.text_messages += 1
                built.text_bytes += sum(len(t.encode()) for t in texts)
                built.doc_freq.update(set(_WORD.findall(" ".join(texts).lower())))
        for name, bulk in contenders.items():
            with gc_off():
                t = time.perf_counter()
                bulk(batch)
                built.seconds[name] += time.perf_counter() - t
        built.messages += len(batch)
        if built.messages % 10_000 == 0 or built.messages == total:
            progress(f"build {built.messages:,}/{total:,} "
                     f"({time.perf_counter() - started:,.0f} s): "
                     + ", ".join(f"{k} {v:.1f}s" for k, v in built.seconds.items()))
    return built


def conv_bulk(session: Session) -> Callable[[list[dict[str, Any]]], None]:
    """convostore's bulk path: ``import_messages`` of a chunk, chained to the chunk before."""
    state: dict[str, Any] = {"parent": None, "n": 0}

    def bulk(batch: list[dict[str, Any]]) -> None:
        n = state["n"]
        items = [ImportItem(m, created_at=1_700_000_000_000 + (n + i) * 1000)
                 for i, m in enumerate(batch)]
        session.import_messages(items, parent_id=state["parent"])
        state["parent"] = batch[-1]["id"]
        state["n"] = n + len(batch)

    return bulk


RAW_MESSAGES_DDL = [
    "CREATE TABLE raw_messages (session_id TEXT NOT NULL, id TEXT NOT NULL, seq BIGINT NOT NULL, "
    "parent_id TEXT, role TEXT NOT NULL, created_at BIGINT NOT NULL, content TEXT NOT NULL, "
    "PRIMARY KEY (session_id, id))",
    "CREATE UNIQUE INDEX raw_messages_seq ON raw_messages (session_id, seq)",
]


def raw_rows(batch: list[dict[str, Any]], state: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The raw table's rows of a chunk (the same columns as convostore's message rows)."""
    rows = []
    for m in batch:
        n = state["n"] = state["n"] + 1
        rows.append((BIG, m["id"], n, state["parent"], m["role"],
                     1_700_000_000_000 + n * 1000, compact_json(m)))
        state["parent"] = m["id"]
    return rows


def rows_of(cursor: Any) -> list[str]:
    return [r[0] for r in cursor.fetchall()]


def read_contenders(session: Session, raw_newest: Callable[[], list[Any]],
                    raw_scan: Callable[[], int]) -> dict[str, Callable[[], Any]]:
    """The newest-20 and full-read callables of convostore and raw."""
    def newest() -> list[Any]:
        return list(islice(session.history(newest_first=True), NEWEST))

    def scan() -> int:
        count = 0
        for _m in session.history():
            count += 1
        return count

    return {"newest": newest, "raw newest": raw_newest, "scan": scan, "raw scan": raw_scan}


def check_reads(res: Results, reads: dict[str, Callable[[], Any]], total: int) -> bool:
    """Both newest-20 reads return the same messages; both full reads every message."""
    same = reads["newest"]() == reads["raw newest"]()
    counts = (reads["scan"](), reads["raw scan"]())
    res.check("newest 20 equal to raw SQL's", same, "same 20 messages" if same else "differ")
    res.check(f"full reads return all {total:,}", counts == (total, total), f"{counts}")
    return same and counts == (total, total)


def time_reads(res: Results, reads: dict[str, Callable[[], Any]], sizes: Sizes,
               extra: dict[str, dict[str, Callable[[], Any]]]) -> dict[str, float]:
    """Medians of the newest-20 reads (``sizes.newest_rounds``) and of the full reads
    (``sizes.full_passes``), interleaved; ``extra`` adds contenders to either."""
    newest = interleaved({"newest": reads["newest"], "raw newest": reads["raw newest"],
                          **extra.get("newest", {})}, repeat=sizes.newest_rounds, warmup=3)
    progress(f"{res.title}: {sizes.full_passes} full passes of each reader")
    full = interleaved({"scan": reads["scan"], "raw scan": reads["raw scan"],
                        **extra.get("scan", {})}, repeat=sizes.full_passes, warmup=0)
    return {**newest, **full}


def search_latency(words: Sequence[str], api: Callable[[str], list[str]],
                   raw: Callable[[str], list[str]],
                   repeat: int) -> tuple[float, float, int, float]:
    """Median seconds of each search over every word and round (each word run once first);
    how many words' hits differ from raw's, and the median number of hits."""
    api_t: list[float] = []
    raw_t: list[float] = []
    differ = 0
    hits = []
    for w in words:
        got, want = api(w), raw(w)
        differ += sorted(got) != sorted(want)
        hits.append(len(got))
        times = rounds({"api": partial(api, w), "raw": partial(raw, w)}, repeat=repeat,
                       warmup=0)
        api_t += times["api"]
        raw_t += times["raw"]
    return statistics.median(api_t), statistics.median(raw_t), differ, statistics.median(hits)


def size_rows(before: dict[str, int], after: dict[str, int],
              skip: Callable[[str], bool]) -> tuple[int, list[list[str]]]:
    """What a build added to the database, object by object (largest first), and the total."""
    grown = {name: after.get(name, 0) - before.get(name, 0) for name in after if not skip(name)}
    grown = {k: v for k, v in grown.items() if v}
    rows = [[name, fmt_bytes(v)] for name, v in sorted(grown.items(), key=lambda kv: -kv[1])]
    return sum(grown.values()), rows


# --- SQLite ---------------------------------------------------------------------------------------


def sqlite_sizes(path: str) -> dict[str, int]:
    """Bytes of every table and index of the file (``dbstat``), else ``{'file': bytes}``."""
    conn = sqlite3.connect(path)
    try:
        try:
            return {str(name): int(size) for name, size in conn.execute(
                "SELECT name, sum(pgsize) FROM dbstat GROUP BY name")}
        except sqlite3.OperationalError:  # a build without the dbstat table
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            return {"file": pages * conn.execute("PRAGMA page_size").fetchone()[0]}
    finally:
        conn.close()


def sqlite_ids(path: str, session_id: str) -> list[str]:
    """The ids of a session's rows in a raw append table."""
    conn = sqlite3.connect(path)
    try:
        return rows_of(conn.execute("SELECT id FROM raw WHERE session_id = ?", (session_id,)))
    finally:
        conn.close()


def file_bytes(path: str) -> int:
    """The SQLite file and its WAL."""
    wal = path + "-wal"
    return os.path.getsize(path) + (os.path.getsize(wal) if os.path.exists(wal) else 0)


def run_sqlite(args: argparse.Namespace, sizes: Sizes, gen: MessageGen) -> Results:
    res = Results("SQLite")
    ns = argparse.Namespace(backend="sqlite", url=None, keep=args.keep)
    with scratch_database(ns, name="performance") as scratch:
        here = os.path.dirname(scratch.target)
        print(f"SQLite: files in {here}")
        n, repeats = sizes.appends, sizes.append_repeats
        msgs = append_messages(gen, n * (repeats + 1))
        rates: dict[str, dict[str, float]] = {}
        for durability in ("normal", "full"):
            with res.phase(f"append, {durability}"):
                sync = durability.upper()
                raw = sqlite_raw(os.path.join(here, f"raw-{durability}.db"), sync)
                runs = {"raw": sqlite_raw_runner(raw, msgs, n)}
                ordered = None
                if durability == "full":
                    ordered = sqlite_raw(os.path.join(here, "ordered-full.db"), sync,
                                         ordered=True)
                    runs["ordered"] = sqlite_raw_runner(ordered, msgs, n)
                store = Sessions.open(os.path.join(here, f"append-{durability}.db"),
                                      durability="full" if durability == "full" else "normal")
                runs["convostore"] = conv_runner(store.session("append"), msgs, n)
                os.sync()
                rates[durability] = append_rates(runs, n, repeats)
                store.close()
                raw.close()
                if ordered is not None:
                    ordered.close()
        normal, full = rates["normal"], rates["full"]
        res.row("append, NORMAL, msg/s", per_s(normal["raw"]), per_s(normal["convostore"]),
                normal["convostore"] / normal["raw"], ">= 0.5x")
        res.row("append, FULL, msg/s (raw: bare INSERT)", per_s(full["raw"]),
                per_s(full["convostore"]), full["convostore"] / full["raw"], ">= 0.7x")
        res.row("append, FULL, msg/s (raw: with (session_id, seq) index)",
                per_s(full["ordered"]), per_s(full["convostore"]),
                full["convostore"] / full["ordered"], ">= 0.8x")
        res.at_least("append NORMAL vs raw", normal["convostore"] / normal["raw"], 0.5)
        res.at_least("append FULL vs bare raw", full["convostore"] / full["raw"], 0.7)
        res.at_least("append FULL vs raw with the order index",
                     full["convostore"] / full["ordered"], 0.8)

        with res.phase("4 processes into one session"):
            conv_path = os.path.join(here, "processes-convostore.db")
            raw_path = os.path.join(here, "processes-raw.db")
            Sessions.open(conv_path).close()
            sqlite_raw(raw_path, "NORMAL").close()
            got: dict[str, list[float]] = {"convostore": [], "raw": []}
            tallies = {"convostore": Tally(), "raw": Tally(chained=False)}
            pools = {"raw": Writers("sqlite", raw_path, None, args.seed),
                     "convostore": Writers("sqlite", conv_path, None, args.seed)}
            for r in range(sizes.process_rounds):
                for kind, path in (("raw", raw_path), ("convostore", conv_path)):
                    sid = f"p{r}"
                    w = pools[kind].run(kind, [sid] * PROCESSES, sizes.per_process,
                                        PROCESS_SALT + 100 * r)
                    got[kind].append(w.rate)
                    if kind == "convostore":
                        with Sessions.open(path) as check:
                            tally_convostore(tallies[kind], w, check)
                    else:
                        tally_raw(tallies[kind], w, partial(sqlite_ids, path))
                    progress(f"SQLite processes round {r + 1} {kind}: {w.rate:,.0f}/s")
            for pool in pools.values():
                pool.close()
            procs = {k: statistics.median(v) for k, v in got.items()}
        res.row("4 processes one session, NORMAL, msg/s", per_s(procs["raw"]),
                per_s(procs["convostore"]), procs["convostore"] / procs["raw"], ">= 0.5x")
        res.at_least("4 processes into one session vs 4 raw",
                     procs["convostore"] / procs["raw"], 0.5)
        res.check("4 processes into one session: nothing lost or duplicated, one chain",
                  tallies["convostore"].ok, str(tallies["convostore"]))
        res.check("raw 4 processes: nothing lost or duplicated", tallies["raw"].ok,
                  str(tallies["raw"]))

        with res.phase(f"build {sizes.messages:,} messages (convostore, raw, SDK)"):
            read_path = os.path.join(here, "read.db")
            raw_path = os.path.join(here, "raw-read.db")
            store = Sessions.open(read_path)
            session = store.session(BIG)
            raw = sqlite3.connect(raw_path, isolation_level=None)
            raw.execute("PRAGMA journal_mode=WAL")
            raw.execute("PRAGMA synchronous=NORMAL")
            for ddl in RAW_MESSAGES_DDL:
                raw.execute(ddl)
            sdk = SdkStore(os.path.join(here, "sdk-read.db"), BIG)
            state: dict[str, Any] = {"n": 0, "parent": None}

            def raw_bulk(batch: list[dict[str, Any]]) -> None:
                raw.execute("BEGIN")
                raw.executemany("INSERT INTO raw_messages VALUES (?,?,?,?,?,?,?)",
                                raw_rows(batch, state))
                raw.execute("COMMIT")

            def sdk_bulk(batch: list[dict[str, Any]]) -> None:
                asyncio.run(sdk.bulk([sdk.convert(m) for m in batch]))

            built = build_big(gen, sizes.messages, {"convostore": conv_bulk(session),
                                                    "raw": raw_bulk, "SDK": sdk_bulk})
        try:
            sqlite_reads_and_search(res, sizes, gen, built, store, session, raw, sdk, read_path,
                                    raw_path, args.seed)
        finally:
            sdk.close()
            raw.close()
            store.close()
    return res


def sqlite_reads_and_search(res: Results, sizes: Sizes, gen: MessageGen, built: Built,
                            store: Sessions, session: Session, raw: sqlite3.Connection,
                            sdk: SdkStore, read_path: str, raw_path: str, seed: int) -> None:
    total = sizes.messages

    def raw_newest() -> list[Any]:
        return [json.loads(c) for (c,) in raw.execute(
            "SELECT content FROM raw_messages WHERE session_id = ? ORDER BY seq DESC LIMIT 20",
            (BIG,)).fetchall()]

    def raw_scan() -> int:
        count = 0
        for (content,) in raw.execute(
                "SELECT content FROM raw_messages WHERE session_id = ? ORDER BY seq", (BIG,)):
            json.loads(content)
            count += 1
        return count

    def sdk_newest() -> Any:
        return asyncio.run(sdk.newest(NEWEST))

    def sdk_full() -> Any:
        return asyncio.run(sdk.full_read())

    reads = read_contenders(session, raw_newest, raw_scan)
    with res.phase("newest 20 and full reads"):
        check_reads(res, reads, total)
        t = time_reads(res, reads, sizes, {"newest": {"sdk newest": sdk_newest},
                                           "scan": {"sdk scan": sdk_full}})
    with res.phase("peak memory of the full reads (tracemalloc)"):
        peaks = {name: peak_memory(reads[name])[1] for name in ("scan", "raw scan")}
        peaks["sdk"] = peak_memory(sdk_full)[1]
    res.row(f"newest 20 of {total:,}, ms", ms(t["raw newest"]), ms(t["newest"]),
            t["newest"] / t["raw newest"], "<= 2x", f"SDK {ms(t['sdk newest'])}")
    res.row(f"full read of {total:,}, s", f"{t['raw scan']:.2f}", f"{t['scan']:.2f}",
            t["scan"] / t["raw scan"], "<= 1.5x, < SDK",
            f"SDK {t['sdk scan']:.2f} ({t['sdk scan'] / t['raw scan']:.2f}x)")
    res.row("full read peak Python memory, MiB", f"{peaks['raw scan'] / MiB:.1f}",
            f"{peaks['scan'] / MiB:.1f}", None, "< 16 MiB", f"SDK {peaks['sdk'] / MiB:,.0f}")
    res.at_most("newest 20 vs raw", t["newest"] / t["raw newest"], 2.0)
    res.at_most("full read vs raw scan", t["scan"] / t["raw scan"], 1.5)
    res.check("full read faster than the SDK's get_items()", t["scan"] < t["sdk scan"],
              f"{t['scan']:.2f} s vs {t['sdk scan']:.2f} s")
    res.check("full read peak memory < 16 MiB", peaks["scan"] < 16 * MiB,
              fmt_bytes(peaks["scan"]))

    with res.phase("search: backfill (convostore, then raw)"):
        before = sqlite_sizes(read_path)
        file_before = file_bytes(read_path)
        indexed_n, backfill = _timed(store.build_search_index)
        after = sqlite_sizes(read_path)
        raw_before = sqlite_sizes(raw_path)
        raw.execute("CREATE VIRTUAL TABLE raw_fts USING fts5(content, content='', "
                    "tokenize = 'porter unicode61')")
        _n, raw_backfill = _timed(lambda: _sqlite_raw_backfill(raw))
        raw_after = sqlite_sizes(raw_path)
    index_bytes, objects = size_rows(before, after, lambda name: False)
    raw_bytes, _raw_objects = size_rows(raw_before, raw_after, lambda name: False)
    index_rows(res, total, built, backfill, raw_backfill, index_bytes, raw_bytes,
               "<= 0.6x", "contentless FTS5")
    res.check("search index size <= 0.6x the indexed text",
              index_bytes <= 0.6 * built.text_bytes,
              f"{index_bytes / built.text_bytes:.2f}x ({fmt_bytes(index_bytes)} for "
              f"{fmt_bytes(built.text_bytes)} of text)")

    words = built.rare_words(sizes.queries, seed)
    with res.phase(f"search: {len(words)} rare words"):
        def api(word: str) -> list[str]:
            return [h.id for h in session.search(word)]

        def raw_search(word: str) -> list[str]:
            return rows_of(raw.execute(
                "SELECT m.id FROM raw_fts f JOIN raw_messages m ON m.rowid = f.rowid "
                "WHERE raw_fts MATCH ? AND m.session_id = ? ORDER BY f.rank LIMIT 20",
                ('"' + word + '"', BIG)))

        api_s, raw_s, differ, hits = search_latency(words, api, raw_search, sizes.query_rounds)
    res.row("phrase search of a rare word, median ms", ms(raw_s), ms(api_s), api_s / raw_s,
            "< 1 ms", f"median {hits:.0f} hits")
    res.check("phrase search of a rare word < 1 ms", api_s < 1e-3, f"{ms(api_s)} ms")
    res.check("every search returns the ids raw FTS5 returns", differ == 0,
              f"{differ} of {len(words)} words differ")
    detail_tables(res, built, objects, indexed_n, words, [
        ["file + WAL before the index / after",
         f"{fmt_bytes(file_before)} / {fmt_bytes(file_bytes(read_path))}"],
    ])


def index_rows(res: Results, total: int, built: Built, backfill: float, raw_backfill: float,
               index_bytes: int, raw_bytes: int, target: str, raw_kind: str) -> None:
    """The backfill's row and the index size's (raw: the UTF-8 bytes of the indexed text)."""
    text = built.text_bytes
    res.row(f"search backfill of {total:,}, s (raw: {raw_kind})", f"{raw_backfill:.2f}",
            f"{backfill:.2f}", backfill / raw_backfill, "report")
    res.row("search index size, MiB (raw: the indexed text)", f"{text / MiB:.1f}",
            f"{index_bytes / MiB:.1f}", index_bytes / text, target,
            f"raw {raw_kind} {raw_bytes / MiB:.1f} ({raw_bytes / text:.2f}x)")


def _sqlite_raw_backfill(raw: sqlite3.Connection) -> None:
    raw.execute("BEGIN IMMEDIATE")
    raw.execute(
        "INSERT INTO raw_fts (rowid, content) "
        "SELECT m.rowid, group_concat(json_extract(p.value, '$.text'), ' ') "
        "FROM raw_messages m, json_each(m.content, '$.parts') p "
        "WHERE json_extract(p.value, '$.type') = 'text' GROUP BY m.rowid")
    raw.execute("COMMIT")


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def detail_tables(res: Results, built: Built, objects: list[list[str]], indexed: Any,
                  words: Sequence[str], more: list[list[str]]) -> None:
    """The build's figures and what the search index is made of (printed with the engine)."""
    rows = [["messages", f"{built.messages:,}"],
            ["messages with text / UTF-8 bytes of their text parts",
             f"{built.text_messages:,} / {fmt_bytes(built.text_bytes)}"],
            *[[f"build, {k} (bulk path), s", f"{v:.1f}"] for k, v in built.seconds.items()],
            ["build_search_index() indexed", f"{indexed:,}" if isinstance(indexed, int)
             else str(indexed)],
            ["phrase searches: rare words", built.rarity(words)],
            *more]
    res.details.append((f"{res.title}: the {built.messages:,}-message session",
                        ["figure", "value"], rows))
    res.details.append((f"{res.title}: what the search index build added, by object",
                        ["object", "bytes"], objects or [["(nothing)", "0"]]))


# --- PostgreSQL -----------------------------------------------------------------------------------


def pg_sizes(conn: Any) -> dict[str, int]:
    """Total relation size (heap, indexes, TOAST) of every table of the current schema."""
    return {str(name): int(size) for name, size in conn.execute(
        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm')").fetchall()}


def pg_connect(url: str, schema: str, *, autocommit: bool = True) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=autocommit, options=f"-c search_path={schema}")


def run_postgres(args: argparse.Namespace, sizes: Sizes, gen: MessageGen) -> Results:
    res = Results("PostgreSQL")
    url = args.url
    ns = argparse.Namespace(backend="postgres", url=url, keep=args.keep)
    with scratch_database(ns, name="perfw") as writes, \
            scratch_database(ns, name="perfr") as reads:
        assert writes.schema is not None and reads.schema is not None
        print(f"PostgreSQL: {url}, schemas {writes.schema} (writes), {reads.schema} (reads)")
        wschema = writes.schema
        admin = pg_connect(url, wschema)
        admin.execute(RAW_APPEND_DDL)
        admin.close()
        n, repeats = sizes.pg_appends, sizes.append_repeats
        with res.phase("append, one process"):
            msgs = append_messages(gen, n * (repeats + 1))
            raw = pg_connect(url, wschema, autocommit=False)
            store = Sessions.open(url, schema=wschema)
            rates = append_rates({"raw": pg_raw_runner(raw, msgs, n),
                                  "convostore": conv_runner(store.session("append"), msgs, n)},
                                 n, repeats)
            store.close()
            raw.close()
        res.row("append, msg/s", per_s(rates["raw"]), per_s(rates["convostore"]),
                rates["convostore"] / rates["raw"], ">= 0.6x")
        res.at_least("append vs raw psycopg", rates["convostore"] / rates["raw"], 0.6)

        with res.phase("1 and 4 processes"):
            procs = pg_processes(url, wschema, sizes, args.seed)
        rate = {k: statistics.median(v) for k, v in procs["rates"].items()}
        one, shared, four = rate["convostore 1"], rate["convostore shared"], rate["convostore 4"]
        res.row("1 process, msg/s", per_s(rate["raw 1"]), per_s(one), one / rate["raw 1"],
                "report")
        res.row("4 processes one session, msg/s", per_s(rate["raw shared"]), per_s(shared),
                shared / rate["raw shared"], ">= 1 process",
                f"{shared / one:.2f}x of 1 process")
        res.row("4 processes 4 sessions, msg/s", per_s(rate["raw 4"]), per_s(four),
                four / rate["raw 4"], ">= 0.5x")
        res.check("4 processes into one session at least as fast as 1 process", shared >= one,
                  f"{shared / one:.2f}x ({per_s(shared)} vs {per_s(one)} msg/s)")
        res.at_least("4 processes into 4 sessions vs 4 raw", four / rate["raw 4"], 0.5)
        tallies: dict[str, Tally] = procs["tallies"]
        res.check("concurrent writers: nothing lost or duplicated, one chain",
                  tallies["convostore"].ok, str(tallies["convostore"]))
        res.check("raw writers: nothing lost or duplicated", tallies["raw"].ok,
                  str(tallies["raw"]))

        pg_reads_and_search(res, url, reads.schema, sizes, gen, args.seed)
    return res


def pg_processes(url: str, schema: str, sizes: Sizes, seed: int) -> dict[str, Any]:
    """Rates of 1 process, 4 into one session and 4 into 4 sessions, convostore and raw."""
    rates: dict[str, list[float]] = {}
    tallies = {"convostore": Tally(), "raw": Tally(chained=False)}
    check = Sessions.open(url, schema=schema)
    raw = pg_connect(url, schema)
    writers = Writers("postgres", url, schema, seed)
    try:
        for r in range(sizes.process_rounds):
            for kind in ("raw", "convostore"):
                for label, sessions in (
                        ("1", [f"{kind}-one-{r}"]),
                        ("shared", [f"{kind}-shared-{r}"] * PROCESSES),
                        ("4", [f"{kind}-four-{r}-{p}" for p in range(PROCESSES)])):
                    w = writers.run(kind, sessions, sizes.pg_per_process,
                                    PROCESS_SALT + 100 * r)
                    rates.setdefault(f"{kind} {label}", []).append(w.rate)
                    if kind == "convostore":
                        tally_convostore(tallies[kind], w, check)
                    else:
                        tally_raw(tallies[kind], w, lambda s: rows_of(raw.execute(
                            "SELECT id FROM raw WHERE session_id = %s", (s,))))
                    progress(f"PostgreSQL round {r + 1}: {kind}, {len(sessions)} process(es) "
                             f"into {len(set(sessions))} session(s): {w.rate:,.0f}/s")
    finally:
        writers.close()
        check.close()
        raw.close()
    return {"rates": rates, "tallies": tallies}


def pg_reads_and_search(res: Results, url: str, schema: str, sizes: Sizes, gen: MessageGen,
                        seed: int) -> None:
    total = sizes.messages
    store = Sessions.open(url, schema=schema)
    raw = pg_connect(url, schema)
    try:
        session = store.session(BIG)
        with res.phase(f"build {total:,} messages (convostore import_messages, raw COPY)"):
            for ddl in RAW_MESSAGES_DDL:
                raw.execute(ddl)
            state: dict[str, Any] = {"n": 0, "parent": None}

            def raw_bulk(batch: list[dict[str, Any]]) -> None:
                with raw.transaction(), raw.cursor() as cur, cur.copy(
                        "COPY raw_messages (session_id, id, seq, parent_id, role, created_at, "
                        "content) FROM STDIN") as copy:
                    for row in raw_rows(batch, state):
                        copy.write_row(row)

            built = build_big(gen, total, {"convostore": conv_bulk(session), "raw": raw_bulk})
        with res.phase("VACUUM ANALYZE"):
            pg_settle(raw)

        def raw_newest() -> list[Any]:
            return [json.loads(c) for (c,) in raw.execute(
                "SELECT content FROM raw_messages WHERE session_id = %s "
                "ORDER BY seq DESC LIMIT 20", (BIG,)).fetchall()]

        scan_sql = "SELECT content FROM raw_messages WHERE session_id = %s ORDER BY seq"

        def raw_scan() -> int:
            count = 0
            cur = raw.cursor()
            for (content,) in cur.execute(scan_sql, (BIG,)):
                json.loads(content)
                count += 1
            cur.close()
            return count

        def raw_server_scan() -> int:
            count = 0
            with raw.transaction(), raw.cursor(name="raw_scan") as cur:
                cur.itersize = 1000
                cur.execute(scan_sql, (BIG,))
                for (content,) in cur:
                    json.loads(content)
                    count += 1
            return count

        reads = read_contenders(session, raw_newest, raw_scan)
        with res.phase("newest 20 and full reads"):
            check_reads(res, reads, total)
            t = time_reads(res, reads, sizes, {"scan": {"server scan": raw_server_scan}})
        with res.phase("peak memory of the full reads (tracemalloc)"):
            peaks = {name: peak_memory(reads[name])[1] for name in ("scan", "raw scan")}
        res.row(f"newest 20 of {total:,}, ms", ms(t["raw newest"]), ms(t["newest"]),
                t["newest"] / t["raw newest"], "<= 2x")
        res.row(f"full read of {total:,}, s (raw: client cursor)", f"{t['raw scan']:.2f}",
                f"{t['scan']:.2f}", t["scan"] / t["raw scan"], "<= 1.5x")
        res.row(f"full read of {total:,}, s (raw: server-side cursor)",
                f"{t['server scan']:.2f}", f"{t['scan']:.2f}", t["scan"] / t["server scan"],
                "report")
        res.row("full read peak Python memory, MiB", f"{peaks['raw scan'] / MiB:.1f}",
                f"{peaks['scan'] / MiB:.1f}", None, "report")
        res.at_most("newest 20 vs raw", t["newest"] / t["raw newest"], 2.0)
        res.at_most("full read vs raw psycopg", t["scan"] / t["raw scan"], 1.5)

        with res.phase("search: backfill (convostore, then raw)"):
            before = pg_sizes(raw)
            indexed_n, backfill = _timed(store.build_search_index)
            after = pg_sizes(raw)
            cfg = pg_config()
            _n, raw_backfill = _timed(lambda: _pg_raw_backfill(raw, cfg))
            raw_after = pg_sizes(raw)

        def is_raw(name: str) -> bool:
            return name.startswith("raw_")

        index_bytes, objects = size_rows(before, after, is_raw)
        raw_bytes = sum(v for k, v in raw_after.items() if k.startswith("raw_fts"))
        index_rows(res, total, built, backfill, raw_backfill, index_bytes, raw_bytes,
                   "report", "tsvector + GIN")

        words = built.rare_words(sizes.queries, seed)

        def api(word: str) -> list[str]:
            return [h.id for h in session.search(word)]

        def raw_search(word: str) -> list[str]:
            return rows_of(raw.execute(
                "SELECT f.id FROM raw_fts f, phraseto_tsquery(%s::regconfig, %s) q "
                "WHERE f.session_id = %s AND f.tsv @@ q "
                "ORDER BY ts_rank(f.tsv, q, 1) DESC LIMIT 20", (cfg, word, BIG)))

        with res.phase(f"search: {len(words)} rare words, before and after VACUUM ANALYZE"):
            # Right after the backfill the planner has no statistics of the index table (the
            # raw one was analysed as it was built); autovacuum analyses it soon after.
            fresh_s, _raw_s, _differ, _hits = search_latency(words, api, raw_search,
                                                             sizes.query_rounds)
            pg_settle(raw)
            api_s, raw_s, differ, hits = search_latency(words, api, raw_search,
                                                        sizes.query_rounds)
        res.row("phrase search of a rare word, median ms", ms(raw_s), ms(api_s), api_s / raw_s,
                "report", f"median {hits:.0f} hits")
        res.row("  the same right after the backfill (before ANALYZE)", ms(raw_s), ms(fresh_s),
                fresh_s / raw_s, "report")
        res.check("every search returns the ids raw full-text search returns", differ == 0,
                  f"{differ} of {len(words)} words differ")
        detail_tables(res, built, objects, indexed_n, words, [
            ["text search configuration", cfg],
        ])
    finally:
        raw.close()
        store.close()


def pg_settle(raw: Any) -> None:
    """``VACUUM ANALYZE`` every table of the schema, as autovacuum does after a bulk load."""
    for (table,) in raw.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r'").fetchall():
        raw.execute(f'VACUUM ANALYZE "{table}"')


def _pg_raw_backfill(raw: Any, cfg: str) -> None:
    with raw.transaction():
        raw.execute("CREATE TABLE raw_fts (session_id TEXT, id TEXT, tsv TSVECTOR, "
                    "PRIMARY KEY (session_id, id))")
        raw.execute(
            "INSERT INTO raw_fts SELECT session_id, id, to_tsvector(%s::regconfig, t) "
            "FROM (SELECT m.session_id, m.id, string_agg(p->>'text', ' ') AS t "
            "FROM raw_messages m, jsonb_array_elements(m.content::jsonb->'parts') p "
            "WHERE p->>'type' = 'text' GROUP BY m.session_id, m.id) s", (cfg,))
        raw.execute("CREATE INDEX raw_fts_tsv ON raw_fts USING GIN (tsv)")
    raw.execute("VACUUM ANALYZE raw_fts")


# --- main -----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engines", default="sqlite,postgres",
                        help="comma-separated: sqlite, postgres (default both)")
    parser.add_argument("--messages", type=int,
                        help="messages of the big session (default 100,000; 10,000 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and fewer rounds, for iterating (under 2 minutes)")
    parser.add_argument("--url", default=os.environ.get("CONVOSTORE_TEST_POSTGRES_URL"),
                        help="the PostgreSQL server (default $CONVOSTORE_TEST_POSTGRES_URL); "
                        "scratch schemas are made and dropped")
    parser.add_argument("--keep", action="store_true",
                        help="keep the scratch directory and schemas, and print where they are")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated content")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    sizes = replace(base, messages=args.messages or base.messages)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(engines) - {"sqlite", "postgres"}
    if unknown:
        parser.error(f"unknown engine(s): {', '.join(sorted(unknown))}")
    if "postgres" in engines and not args.url:
        parser.error("postgres needs --url or $CONVOSTORE_TEST_POSTGRES_URL")

    gen = MessageGen(args.seed)
    mean = statistics.mean(len(compact_json(gen.message(k))) for k in range(300))
    report = Report("convostore performance (issue 26): both engines against raw baselines")
    report.header([
        "command: " + " ".join(["python", "benchmarks/performance.py",
                                *(sys.argv[1:] if argv is None else argv)]),
        machine_line(),
        f"big session: {sizes.messages:,} messages (MessageGen seed {args.seed}, mean "
        f"{mean:,.0f} B as compact JSON); appends: "
        f"SQLite {sizes.append_repeats} runs of {sizes.appends}, PostgreSQL "
        f"{sizes.append_repeats} runs of {sizes.pg_appends}; processes: "
        f"{sizes.process_rounds} rounds of {sizes.per_process} (SQLite) / "
        f"{sizes.pg_per_process} (PostgreSQL) appends per process; newest 20: "
        f"{sizes.newest_rounds} rounds; full read: {sizes.full_passes} passes; search: "
        f"{sizes.queries} rare words x {sizes.query_rounds} rounds; every figure a median",
    ])
    for engine in engines:
        res = run_sqlite(args, sizes, gen) if engine == "sqlite" else run_postgres(args, sizes,
                                                                                  gen)
        res.print(report)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())

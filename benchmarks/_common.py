"""Shared helpers of the benchmark scripts: realistic messages, timing, the database under test.

- :class:`MessageGen` makes deterministic conversations of realistic sizes: user text of 50-500
  characters, assistant text of 200-3,000, tool results of 1-20 KB carried by ``tool-<name>``
  parts with JSON output. Words come from a Zipf-distributed vocabulary, so full-text search sees
  common and rare words as in real transcripts.
- :func:`rounds`, :func:`interleaved`, :func:`append_rates`, :func:`timed` and
  :func:`peak_memory` measure (:func:`gc_off` around timed sections, :func:`percentile` of the
  samples); :class:`Report` prints the tables and one PASS/FAIL line per target.
- :func:`bench_parser` and :func:`open_bench` give every script the same options
  (``--backend {sqlite,postgres}``, ``--url``) and a scratch database: a store opened through the
  public API plus a raw connection to the same database (:class:`RawDB`), for the baselines.
  :func:`scratch_database` alone makes and removes the scratch file or schema, for a script that
  opens its stores itself.
- :func:`compact_json` is the message JSON the raw baselines store.
- :func:`build_session` fills a session fast with ``import_message``.

Run the scripts from the repository root (``python benchmarks/reads.py``); see README.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

# Measure the tree this script belongs to, not whatever convostore is installed: a before/after
# comparison runs the same script from two checkouts (append.py does the same).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from convostore import Session, Sessions  # noqa: E402

MiB = 1024 * 1024
KiB = 1024

# --- realistic messages ------------------------------------------------------------------------

_ONSETS = ["", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w",
           "z", "br", "cl", "dr", "gr", "pl", "pr", "st", "str", "th", "tr", "sh", "ch"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
_CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "ng", "x"]
_COMMON = [
    "the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "with", "was", "on",
    "be", "by", "this", "are", "or", "from", "at", "an", "not", "have", "but", "which", "can",
    "we", "you", "they", "all", "if", "will", "one", "has", "more", "when", "there", "been",
    "would", "file", "error", "test", "run", "build", "deploy", "function", "value", "request",
    "response", "server", "client", "database", "query", "table", "index", "message",
    "session", "user", "model", "token", "config", "update",
]
_TOOLS = ["read_file", "run_command", "search_web", "list_directory", "query_database"]


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words = list(dict.fromkeys(_COMMON))
    seen = set(words)
    while len(words) < size:
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
            for _ in range(rng.choice((1, 2, 2, 2, 3)))
        )
        if len(word) > 2 and word not in seen:
            seen.add(word)
            words.append(word)
    return words


class MessageGen:
    """Deterministic UIMessage-shaped messages of realistic sizes.

    A conversation repeats three-message turns: a user question (50-500 characters of text), an
    assistant step carrying one ``tool-<name>`` part whose JSON output is 1-20 KB, and the
    assistant's answer (200-3,000 characters). Message ``k`` is a pure function of ``(seed, k)``,
    where ``k`` counts back from the newest message of a conversation, so two conversations of
    different lengths built with :meth:`conversation` end with the very same messages (same ids,
    same sizes): comparing reads of their newest rows compares scale, not content.

    :param seed: makes the vocabulary and every message reproducible.
    :param vocabulary: distinct words; their frequencies follow Zipf's law (s = 1.1).
    """

    def __init__(self, seed: int = 1, vocabulary: int = 20_000) -> None:
        self.seed = seed
        rng = random.Random(seed)
        self.words = _vocabulary(rng, vocabulary)
        weights = [1.0 / (rank + 1) ** 1.1 for rank in range(len(self.words))]
        # One long text cut at random offsets: slicing is O(1) per message, generation is not.
        pool = rng.choices(self.words, weights=weights, k=700_000)
        for i in range(0, len(pool), rng.randint(8, 20)):
            pool[i] = pool[i] + rng.choice((".", ",", "?", ":", ";", "."))
        self._pool = " ".join(pool)

    def text(self, rng: random.Random, low: int, high: int) -> str:
        """Words from the pool, ``low``-``high`` characters, starting and ending on a word."""
        size = rng.randint(low, high)
        start = self._pool.find(" ", rng.randrange(len(self._pool) - high - 64)) + 1
        end = self._pool.rfind(" ", start, start + size + 1)
        return self._pool[start : end if end > start + low // 2 else start + size].strip()

    def _id(self, rng: random.Random) -> str:
        return f"msg_{rng.getrandbits(96):024x}"

    def user(self, rng: random.Random) -> dict[str, Any]:
        """A user message: one text part of 50-500 characters."""
        return {"id": self._id(rng), "role": "user",
                "parts": [{"type": "text", "text": self.text(rng, 50, 500)}]}

    def assistant(self, rng: random.Random) -> dict[str, Any]:
        """An assistant answer: a step start and one text part of 200-3,000 characters."""
        return {"id": self._id(rng), "role": "assistant",
                "parts": [{"type": "step-start"},
                          {"type": "text", "text": self.text(rng, 200, 3000)}]}

    def tool(self, rng: random.Random, size: int | None = None) -> dict[str, Any]:
        """An assistant step with one ``tool-<name>`` part whose JSON output is 1-20 KB."""
        name = rng.choice(_TOOLS)
        target = size if size is not None else rng.randint(1024, 20 * 1024)
        call_id = f"call_{rng.getrandbits(64):016x}"
        if name == "search_web":
            results, used = [], 2
            while used < target:
                item = {"title": self.text(rng, 20, 80),
                        "url": f"https://example.com/{rng.getrandbits(40):010x}",
                        "snippet": self.text(rng, 100, 600)}
                used += len(json.dumps(item)) + 1
                results.append(item)
            output: dict[str, Any] = {"results": results}
            tool_input: dict[str, Any] = {"query": self.text(rng, 10, 60)}
        elif name == "query_database":
            rows, used = [], 2
            while used < target:
                row = {"id": rng.randint(1, 10**6), "name": self.text(rng, 5, 30),
                       "score": round(rng.random(), 4), "note": self.text(rng, 20, 200)}
                used += len(json.dumps(row)) + 1
                rows.append(row)
            output = {"columns": ["id", "name", "score", "note"], "rows": rows}
            tool_input = {"sql": "SELECT id, name, score, note FROM items LIMIT 100"}
        else:
            body = self.text(rng, max(1, target - 120), target - 40)
            output = {"exitCode": 0, "stdout": body, "stderr": ""} if name == "run_command" else {
                "path": f"/src/{self.words[rng.randrange(500)]}.py", "content": body}
            tool_input = {"path": "/src"} if name != "run_command" else {"cmd": "make test"}
        return {"id": self._id(rng), "role": "assistant",
                "parts": [{"type": "step-start"},
                          {"type": f"tool-{name}", "toolCallId": call_id,
                           "state": "output-available", "input": tool_input,
                           "output": output}]}

    def message(self, k: int, salt: int = 0) -> dict[str, Any]:
        """Message ``k`` counted back from the newest of a conversation (0 = newest).

        ``k % 3 == 0`` is an assistant answer, ``1`` a tool step, ``2`` a user question, so a
        conversation read oldest first goes question, tool step, answer. A different ``salt``
        gives a different conversation over the same vocabulary.
        """
        rng = random.Random((self.seed * 1_000_003 + salt) * 1_000_000_007 + k)
        kind = k % 3
        if kind == 0:
            return self.assistant(rng)
        if kind == 1:
            return self.tool(rng)
        return self.user(rng)

    def conversation(self, n: int, salt: int = 0) -> Iterator[dict[str, Any]]:
        """The ``n`` messages of a conversation, oldest first (its newest is ``message(0)``)."""
        for i in range(n):
            yield self.message(n - 1 - i, salt)


def build_session(
    session: Session,
    messages: Iterator[dict[str, Any]] | Sequence[dict[str, Any]],
    *,
    total: int | None = None,
    start_ms: int = 1_700_000_000_000,
    label: str = "",
) -> tuple[int, float]:
    """Import ``messages`` as one linear branch, one ``import_message`` each; (count, seconds).

    Each message is parented on the one before and timestamped one second later. Progress goes
    to stderr every 10,000 messages.
    """
    parent: str | None = None
    count = 0
    started = time.perf_counter()
    for message in messages:
        session.import_message(message, parent_id=parent, created_at=start_ms + count * 1000)
        parent = message["id"]
        count += 1
        if count % 10_000 == 0:
            elapsed = time.perf_counter() - started
            of = f"/{total:,}" if total else ""
            progress(f"{label}{count:,}{of} messages imported, {count / elapsed:,.0f}/s")
    return count, time.perf_counter() - started


def progress(text: str) -> None:
    """A progress line on stderr (the figures go to stdout)."""
    print(f"  .. {text}", file=sys.stderr, flush=True)


def compact_json(value: Any) -> str:
    """``value`` as compact JSON text (no spaces, UTF-8 kept): what a raw baseline stores."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# --- measuring ---------------------------------------------------------------------------------


@contextmanager
def gc_off() -> Iterator[None]:
    """The garbage collector off inside the block (restored as it was), for timed sections."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def percentile(values: Sequence[float], percent: int) -> float:
    """The nearest-rank ``percent`` percentile of ``values``: the smallest value that at least
    ``percent`` % of them do not exceed (``percentile(v, 100)`` is the maximum)."""
    if not values:
        raise ValueError("percentile() of no values")
    if not 0 < percent <= 100:
        raise ValueError(f"percentile() takes a percent in (0, 100], not {percent}")
    rank = -(-percent * len(values) // 100)  # ceil(percent / 100 * n), in integers
    return sorted(values)[rank - 1]


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Call ``fn`` once; (its result, seconds)."""
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def rounds(
    fns: dict[str, Callable[[], Any]],
    *,
    repeat: int,
    warmup: int = 1,
    order_seed: int | None = None,
    collect: bool = False,
) -> dict[str, list[float]]:
    """Seconds of each call of each function, in ``repeat`` rounds after ``warmup`` untimed ones.

    Every round calls every function once: in the given order, or, with ``order_seed``, in an
    order shuffled every round (so neither a disturbance of the machine nor the function run just
    before favours any one). The garbage collector is off while timing unless ``collect``
    (a workload that makes garbage, such as appends, should pay for collecting it).
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    names = list(fns)
    shuffle = None if order_seed is None else random.Random(order_seed)
    times: dict[str, list[float]] = {name: [] for name in names}
    with nullcontext() if collect else gc_off():
        for _ in range(repeat):
            for name in names if shuffle is None else shuffle.sample(names, len(names)):
                started = time.perf_counter()
                fns[name]()
                times[name].append(time.perf_counter() - started)
    return times


def interleaved(
    fns: dict[str, Callable[[], Any]], *, repeat: int, warmup: int = 1
) -> dict[str, float]:
    """Median seconds of each function, calls interleaved round by round (see :func:`rounds`).

    Interleaving spreads machine noise (another process, the page cache) over every contender
    instead of letting it land on whichever ran during the disturbance.
    """
    times = rounds(fns, repeat=repeat, warmup=warmup)
    return {name: statistics.median(values) for name, values in times.items()}


def append_rates(
    contenders: dict[str, tuple[Callable[[dict[str, Any]], Any], Sequence[dict[str, Any]]]],
    *,
    size: int,
) -> dict[str, float]:
    """Median appends/s of each contender ``(append, messages)``, in interleaved rounds.

    Round ``r`` has every contender in turn append its messages ``[r * size : (r + 1) * size]``
    one call each, timed as a whole; a contender's rate in the round is the messages appended
    over those seconds. The garbage collector is left as it is (an append makes garbage).
    """
    if size < 1:
        raise ValueError(f"append_rates() needs a round size of at least 1, not {size}")
    longest = max((len(messages) for _append, messages in contenders.values()), default=0)
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    for start in range(0, longest, size):
        for name, (append, messages) in contenders.items():
            batch = messages[start : start + size]
            if not batch:
                continue
            began = time.perf_counter()
            for message in batch:
                append(message)
            rates[name].append(len(batch) / (time.perf_counter() - began))
    return {name: statistics.median(values) for name, values in rates.items()}


def peak_memory(fn: Callable[[], Any]) -> tuple[Any, int]:
    """Run ``fn`` under tracemalloc; (its result, peak bytes of Python allocations during it)."""
    gc.collect()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, peak


def fmt_s(seconds: float) -> str:
    """Seconds in a readable unit."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_bytes(n: float) -> str:
    """Bytes in KiB/MiB."""
    if n >= MiB:
        return f"{n / MiB:.2f} MiB"
    if n >= KiB:
        return f"{n / KiB:.1f} KiB"
    return f"{n:.0f} B"


@dataclass
class Report:
    """Prints aligned tables and target lines; remembers whether every target passed."""

    title: str
    failures: list[str] = field(default_factory=list)
    targets: int = 0

    def header(self, lines: Sequence[str] = ()) -> None:
        """The script's title and a few context lines."""
        print(f"== {self.title} ==")
        for line in lines:
            print(line)
        print(flush=True)

    def table(self, heading: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """One aligned table: first column left-aligned, the others right-aligned."""
        cells = [[str(c) for c in columns]] + [[str(c) for c in row] for row in rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]

        def line(row: Sequence[str]) -> str:
            return "  ".join(
                c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)
            ).rstrip()

        print(f"-- {heading}")
        print(line(cells[0]))
        print("  ".join("-" * w for w in widths))
        for row in cells[1:]:
            print(line(row))
        print(flush=True)

    def target(self, name: str, value: float, limit: float, shown: str) -> bool:
        """One ``PASS``/``FAIL`` line: ``value`` must be below ``limit`` (or equal to it)."""
        return self.check(name, value <= limit, shown)

    def check(self, name: str, ok: bool, shown: str) -> bool:
        """A ``PASS``/``FAIL`` line for a condition that is not a ratio."""
        self.targets += 1
        if not ok:
            self.failures.append(name)
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {shown}", flush=True)
        return ok

    def finish(self) -> int:
        """Print the summary line; the exit status (1 if any target failed)."""
        passed = self.targets - len(self.failures)
        print(f"\n{passed}/{self.targets} targets met"
              + (f"; missed: {', '.join(self.failures)}" if self.failures else ""))
        return 1 if self.failures else 0


# --- the database under test -------------------------------------------------------------------


def bench_parser(description: str) -> argparse.ArgumentParser:
    """The options every benchmark takes: ``--backend``, ``--url``, ``--keep``, ``--seed``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite",
                        help="engine under test (default: sqlite)")
    parser.add_argument(
        "--url",
        help="sqlite: a database file to create (kept afterwards; default: a temporary file, "
        "removed). postgres: the server URL (default: $CONVOSTORE_TEST_POSTGRES_URL); the "
        "benchmark works in a scratch schema it drops afterwards",
    )
    parser.add_argument("--keep", action="store_true",
                        help="keep the scratch database (file or schema) and print where it is")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated content")
    return parser


class RawDB:
    """A raw driver connection to the database a benchmark's store uses: the baseline.

    :meth:`rows` takes SQL with ``?`` placeholders on both engines (rewritten to ``%s`` for
    psycopg), so a baseline query is written once.
    """

    def __init__(self, kind: str, conn: Any, path: str | None = None) -> None:
        self.kind = kind
        self.conn: Any = conn
        self.path = path

    def sql(self, text: str) -> str:
        """``text`` with the engine's placeholder."""
        return text if self.kind == "sqlite" else text.replace("%", "%%").replace("?", "%s")

    def cursor(self, text: str, params: Sequence[Any] = ()) -> Any:
        """Execute and return the cursor (iterate it to stream rows)."""
        if self.kind == "sqlite":
            return self.conn.execute(text, params)
        cur = self.conn.cursor()
        cur.execute(self.sql(text), params)
        return cur

    def rows(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """All rows of a query."""
        return [tuple(r) for r in self.cursor(text, params).fetchall()]

    def value(self, text: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row (None when there is no row)."""
        row = self.cursor(text, params).fetchone()
        return None if row is None else row[0]

    @property
    def size_what(self) -> str:
        """What :meth:`size_on_disk` measures, for a table label."""
        return ("file after a WAL checkpoint" if self.kind == "sqlite"
                else "total relation size of the convostore tables")

    def size_on_disk(self) -> int:
        """Bytes the database occupies: the SQLite file after a WAL checkpoint, or PostgreSQL's
        total relation size (tables, indexes, TOAST) of every convostore table."""
        if self.kind == "sqlite":
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            assert self.path is not None
            size = os.path.getsize(self.path)
            wal = self.path + "-wal"
            return size + (os.path.getsize(wal) if os.path.exists(wal) else 0)
        return int(self.value(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
            "AND c.relname LIKE 'convostore%'"
        ))

    def settle(self) -> str:
        """Bring a freshly bulk-loaded database to its steady state; says what it did.

        PostgreSQL: ``VACUUM ANALYZE`` (as autovacuum would do soon after a bulk load), so
        plans are made with table statistics. SQLite: nothing (the store never runs ANALYZE).
        """
        if self.kind == "sqlite":
            return "none"
        self.conn.execute("VACUUM ANALYZE")
        return "VACUUM ANALYZE"

    def close(self) -> None:
        """Close the raw connection."""
        self.conn.close()


@dataclass
class Bench:
    """The database under test: the store (public API) and a raw connection (baseline)."""

    kind: str
    store: Sessions
    raw: RawDB
    where: str
    """A file path or ``url (schema s)``, for the report."""
    reopen: Callable[[], Sessions]
    """Open another store on the same database (a cold start: no handle caches)."""


@dataclass(frozen=True)
class Scratch:
    """Where a benchmark's scratch database lives: a SQLite file, or a schema on a server."""

    kind: str
    """``sqlite`` or ``postgres``."""
    target: str
    """The SQLite file (not created yet), or the PostgreSQL server URL."""
    schema: str | None = None
    """PostgreSQL: the scratch schema, already created (open stores with ``schema=``)."""

    @property
    def where(self) -> str:
        """The file path, or ``url (schema s)``, for the report."""
        return self.target if self.schema is None else f"{self.target} (schema {self.schema})"


@contextmanager
def scratch_database(args: argparse.Namespace, *, name: str = "bench") -> Iterator[Scratch]:
    """Make a scratch database for one run; remove it afterwards unless ``--keep``.

    SQLite: a new file, ``--url`` (it must not exist; it is kept) or ``name.db`` in a new
    temporary directory. PostgreSQL: a fresh schema ``cs_bench_<name>_<random>`` on the server of
    ``--url`` (default ``$CONVOSTORE_TEST_POSTGRES_URL``), dropped afterwards. Close every store
    on it before the block ends.
    """
    if args.backend == "sqlite":
        tmpdir = None
        if args.url:
            path = args.url
            if os.path.exists(path):
                raise SystemExit(f"{path} exists; give a new file (benchmarks build their data)")
        else:
            tmpdir = tempfile.mkdtemp(prefix="convostore-bench-")
            path = os.path.join(tmpdir, f"{name}.db")
        try:
            yield Scratch("sqlite", path)
        finally:
            if args.keep or tmpdir is None:
                print(f"(database kept at {path})")
            else:
                shutil.rmtree(tmpdir, ignore_errors=True)
        return
    url = args.url or os.environ.get("CONVOSTORE_TEST_POSTGRES_URL")
    if not url:
        raise SystemExit("--backend postgres needs --url or $CONVOSTORE_TEST_POSTGRES_URL")
    import psycopg

    schema = f"cs_bench_{name}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            yield Scratch("postgres", url, schema)
        finally:
            if args.keep:
                print(f"(schema {schema} kept)")
            else:
                admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def open_bench(args: argparse.Namespace, *, name: str = "bench") -> Iterator[Bench]:
    """Open a scratch database for one benchmark run (removed afterwards unless ``--keep``).

    SQLite: a new file (``--url`` or a temporary one) opened by the store, plus a second
    :mod:`sqlite3` connection on the same file. PostgreSQL: a fresh schema on the server of
    ``--url``, opened by the store with ``schema=``, plus a psycopg connection whose
    ``search_path`` is that schema. See :func:`scratch_database`.
    """
    with scratch_database(args, name=name) as scratch, ExitStack() as stack:
        target, schema = scratch.target, scratch.schema
        if scratch.kind == "sqlite":
            store = stack.enter_context(Sessions.open(target))
            conn: Any = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
            # The same durability as the store's connection, so raw writes are compared fairly.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA busy_timeout = 30000")
            raw = RawDB("sqlite", conn, target)
        else:
            import psycopg

            store = stack.enter_context(Sessions.open(target, schema=schema))
            conn = psycopg.connect(target, autocommit=True, options=f"-c search_path={schema}")
            raw = RawDB("postgres", conn)
        stack.callback(raw.close)
        yield Bench(scratch.kind, store, raw, scratch.where,
                    lambda: Sessions.open(target, schema=schema))


def machine_line() -> str:
    """One line describing where the figures come from."""
    return (f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, "
            f"{os.cpu_count()} cpus")

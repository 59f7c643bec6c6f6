"""Append throughput: convostore against a raw sqlite3 baseline, measured in the same run.

For each durability mode (synchronous=NORMAL and FULL, both WAL) it measures appends per second
into a session of 10 messages and one of 100,000 (both in one store, as an application holds
them), and the raw baseline (one INSERT and COMMIT per message into a table of its own file,
same journal and synchronous settings, the message JSON-encoded as convostore does). Unless
``--no-compaction``, it also measures appends with auto-compaction configured (a threshold
never reached, so every append pays the estimate check) into sessions of 100 and 100,000.

A fourth figure, in parentheses and outside the targets, is the baseline with the one index a
store that reads sessions in order needs besides it, ``(session_id, seq)``.

Method: every workload appends the same messages (one seed; ids made distinct), made before
any clock starts; the build is synced to disk first; every workload makes one untimed run on
its own (caches warm, the WAL grows to its working size); then the workloads take turns, in an
order shuffled every round, for ``--repeats`` timed runs of ``--appends`` appends each, and each
figure is the median: the steady state of a long-running process. In both durability modes a
run of 1,000 appends (about 5,000 pages written) spans at least one of the store's WAL
checkpoints (every 4,000 pages) and several of the baseline's, so each run pays its share.

With ``--backend postgres`` it measures something else: ``--appends`` appends per process by 1
process into one session, 8 into one session and 8 into 8 sessions (messages seeded
``seed * 1000 + process``), convostore with advisory locks and with row locks against raw psycopg
INSERT and COMMIT, directly and (with ``--pgbouncer``) through PgBouncer in transaction mode;
``--repeats`` runs of each, no warm-up run (each process connects before its clock starts).
Afterwards every session written is counted: nothing lost, nothing duplicated.

    python benchmarks/append.py                # full sizes (about a minute)
    python benchmarks/append.py --big 20000    # quicker
    python benchmarks/append.py --backend postgres --appends 200 --repeats 3 \\
        --pgbouncer postgresql://postgres@127.0.0.1:6432/test

Targets (issues 2 and 4), SQLite: big/small within 1.3x; >= 0.5x raw with NORMAL, >= 0.8x with
FULL; auto-compaction big/small within 1.5x. PostgreSQL: each process count within 2x of raw;
row locks within 10% of advisory locks; nothing lost or duplicated in any configuration.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.dirname(__file__))

from _common import Scratch, bench_parser, compact_json, rounds, scratch_database  # noqa: E402

from convostore import CompactResult, Sessions  # noqa: E402


def realistic_messages(seed: int = 0) -> Iterator[dict[str, Any]]:
    """An endless agent conversation: user text, assistant text, tool results of 1-20 KB."""
    rng = random.Random(seed)
    words = [
        "the", "deploy", "build", "service", "failed", "retry", "config", "token", "cache",
        "request", "user", "agent", "database", "index", "query", "latency", "memory", "error",
        "result", "value", "file", "path",
    ]
    n = 0

    def sentence(chars: int) -> str:
        out: list[str] = []
        size = 0
        while size < chars:
            w = rng.choice(words)
            out.append(w)
            size += len(w) + 1
        return " ".join(out)[:chars]

    while True:
        n += 1
        kind = n % 3
        if kind == 1:
            yield {"id": f"u{seed}-{n}", "role": "user",
                   "parts": [{"type": "text", "text": sentence(rng.randint(50, 500))}]}
        elif kind == 2:
            yield {"id": f"a{seed}-{n}", "role": "assistant",
                   "parts": [{"type": "text", "text": sentence(rng.randint(200, 3000))}]}
        else:
            rows = [{"line": i, "text": sentence(60)} for i in range(rng.randint(12, 250))]
            yield {"id": f"t{seed}-{n}", "role": "assistant", "parts": [{
                "type": "tool-search", "toolCallId": f"call_{n}", "state": "output-available",
                "input": {"query": sentence(30)}, "output": {"rows": rows}}]}


def build(store: Sessions, session_id: str, count: int) -> None:
    """Fill a session quickly through the public import path (one linear chain)."""
    s = store.session(session_id)
    prev = None
    for i, m in zip(range(count), realistic_messages(seed=len(session_id)), strict=False):
        s.import_message(m, parent_id=prev, created_at=i)
        prev = m["id"]


def interleaved(runs: dict[str, Callable[[], None]], n: int, repeats: int) -> dict[str, float]:
    """Appends per second of each workload: the median of ``repeats`` runs of ``n`` appends.

    Each workload first makes one untimed run on its own: files, caches and the WAL grow to
    their working size (one sample of that phase, as a process that has just opened its store
    sees it, says more about the disk than about the store). Then the workloads take turns, in
    an order shuffled every round, so neither a disturbance of the machine (another process, the
    kernel writing back dirty pages) nor the workload run just before (whose pages fill the
    caches) favours any of them: their median is the steady state, which the targets are checked
    against. The garbage collector runs, as in an application.
    """
    secs = rounds(runs, repeat=repeats, order_seed=len(runs), collect=True)
    return {name: n / statistics.median(times) for name, times in secs.items()}


def messages(count: int, tag: str, seed: int = 1) -> list[dict[str, Any]]:
    """The messages every workload appends: the same sizes for all (one seed), ids made unique
    by ``tag``, made before any clock starts."""
    return [{**m, "id": f"{tag}-{m['id']}"} for m in _conversation(count, seed)]


@functools.lru_cache(maxsize=4)
def _conversation(count: int, seed: int) -> list[dict[str, Any]]:
    source = realistic_messages(seed=seed)
    return [next(source) for _ in range(count)]


def convostore_runner(s: Any, n: int, repeats: int, tag: str, seed: int = 1) -> Callable[[], None]:
    """A run of ``n`` appends into session ``s`` (enough messages for a warm-up and ``repeats``)."""
    it = iter(messages(n * (repeats + 1), tag, seed))

    def run() -> None:
        for _ in range(n):
            s.append_message(next(it))

    return run


def raw_runner(
    conn: sqlite3.Connection, n: int, repeats: int, ordered: bool = False, seed: int = 1
) -> Callable[[], None]:
    """A run of ``n`` raw appends: one INSERT and COMMIT per message, JSON-encoded as we do.

    ``ordered`` adds the index reading a session in order needs, ``(session_id, seq)``: not the
    baseline of the targets, a figure that shows what that one more b-tree costs.
    """
    conn.execute("CREATE TABLE IF NOT EXISTS raw (session_id TEXT, id TEXT, seq INTEGER, "
                 "content TEXT, PRIMARY KEY (session_id, id))")
    if ordered:
        conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS raw_order ON raw (session_id, seq)")
    it = iter(messages(n * (repeats + 1), "raw", seed))
    seq = [0]

    def run() -> None:
        for _ in range(n):
            m = next(it)
            seq[0] += 1
            conn.execute("BEGIN")
            conn.execute("INSERT INTO raw VALUES (?,?,?,?)",
                         ("s", m["id"], seq[0], compact_json(m)))
            conn.execute("COMMIT")

    return run


def raw_connection(path: str, durability: str) -> sqlite3.Connection:
    """The baseline's connection: WAL and the same synchronous setting as the store's."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
    return conn


def _open_pg(url: str, schema: str, locks: str, pooled: bool) -> Sessions:
    """A store with the session lock of ``locks`` ("row" or "advisory")."""
    from convostore.backends.postgres import ENGINE
    from convostore.backends.postgres._engine import PostgresBackend

    return Sessions(PostgresBackend(url, schema=schema, pool_size=2, engine=ENGINE,
                                    locks=locks, transaction_pooler=pooled))


def _pg_worker(
    url: str, schema: str, mode: str, worker: int, n: int, ready: Any, prefix: str,
    shared: bool, seed: int, pooled: bool,
) -> None:
    """One writing process: n appends through convostore, or n raw INSERT+COMMIT."""
    import uuid

    source = realistic_messages(seed=seed * 1000 + worker)
    msgs = [{**next(source), "id": f"{worker}-{uuid.uuid4().hex}"} for _ in range(n)]
    if mode == "raw":
        import psycopg

        insert = f'INSERT INTO "{schema}".raw (session_id, id, seq, content) VALUES (%s,%s,%s,%s)'
        with psycopg.connect(url, prepare_threshold=None if pooled else 5) as conn:
            ready.wait()
            for i, m in enumerate(msgs):
                conn.execute(insert, ("s", m["id"], i, compact_json(m)))
                conn.commit()
        return
    with _open_pg(url, schema, mode, pooled) as store:
        s = store.session(prefix if shared else f"{prefix}-w{worker}")
        s.get_latest_leaf()  # the pool's connections are open before the clock starts
        ready.wait()
        for m in msgs:
            s.append_message(m)


def _pg_run(
    url: str, schema: str, mode: str, procs: int, n: int, prefix: str, shared: bool,
    seed: int = 1, pooled: bool = False,
) -> float:
    """Appends per second of ``procs`` processes writing ``n`` messages each."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(procs + 1)
    workers = [
        ctx.Process(target=_pg_worker,
                    args=(url, schema, mode, w, n, ready, prefix, shared, seed, pooled))
        for w in range(procs)
    ]
    for w in workers:
        w.start()
    ready.wait()  # every writer is connected: start the clock
    t0 = time.perf_counter()
    for w in workers:
        w.join()
        if w.exitcode != 0:
            raise SystemExit(f"a writer failed (exit code {w.exitcode})")
    return procs * n / (time.perf_counter() - t0)


def postgres_main(args: argparse.Namespace, scratch: Scratch) -> int:
    """Appends/s on PostgreSQL: 1 and 8 processes into one session and 8 into 8 sessions, with
    advisory and row locks, direct and through PgBouncer, against raw psycopg."""
    import psycopg

    url, schema = scratch.target, scratch.schema
    assert schema is not None
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE TABLE "{schema}".raw (session_id TEXT, id TEXT, seq BIGINT, '
                      "content TEXT, PRIMARY KEY (session_id, id))")
    Sessions.open(url, schema=schema).close()  # migrate once, outside the timings
    routes = [("direct", url, False)]
    bouncer = args.pgbouncer or os.environ.get("CONVOSTORE_TEST_PGBOUNCER_URL")
    if bouncer:
        routes.append(("pgbouncer", bouncer, True))
    else:
        print("(no PgBouncer: pass --pgbouncer URL or set CONVOSTORE_TEST_PGBOUNCER_URL)")
    n, repeats = args.appends, args.repeats
    print(f"PostgreSQL, each figure the median of {repeats} runs; {n} appends per process, "
          "timed once every writer is connected\n")
    print(f"{'route':<10} {'workload':<34} {'raw/s':>8} {'advisory/s':>11} {'row/s':>8} "
          f"{'row/adv':>8} {'row/raw':>8}")
    results: list[tuple[str, bool]] = []
    expected: dict[str, int] = {}
    workloads = [("1 process, 1 session", 1, True), ("8 processes, 1 session", 8, True),
                 ("8 processes, 8 sessions", 8, False)]
    for route, target, pooled in routes:
        for label, procs, shared in workloads:
            figures: dict[str, float] = {}
            for mode in ("raw", "advisory", "row"):
                runs = []
                for r in range(repeats):
                    # sessions of their own per route, lock mode and run: counted afterwards
                    prefix = f"{route}-{mode}-{label}-{r}"
                    runs.append(_pg_run(target, schema, mode, procs, n, prefix, shared,
                                        args.seed, pooled))
                    if mode != "raw":
                        for w in range(1 if shared else procs):
                            expected[prefix if shared else f"{prefix}-w{w}"] = (
                                procs * n if shared else n)
                figures[mode] = statistics.median(runs)
            raw, adv, row = figures["raw"], figures["advisory"], figures["row"]
            print(f"{route:<10} {label:<34} {raw:>8,.0f} {adv:>11,.0f} {row:>8,.0f} "
                  f"{row / adv:>8.2f} {row / raw:>8.2f}")
            results.append((f"{route}, {label}: row locks within 10% of advisory "
                            f"({row / adv:.2f}x)", row / adv >= 0.9))
    with Sessions.open(url, schema=schema) as store:
        lost = dup = 0
        for sid, want in expected.items():
            stats = store.session(sid).get_history_row_stats()
            got = len({r.id for r in stats})
            lost += max(0, want - got)
            dup += len(stats) - got
    results.append((f"nothing lost, nothing duplicated, one chain per session "
                    f"({lost} lost, {dup} duplicated, {len(expected)} sessions)",
                    lost == 0 and dup == 0))
    print()
    for label, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {label}")
    return 0 if all(ok for _, ok in results) else 1


def main() -> int:
    ap = bench_parser(__doc__.splitlines()[0])
    ap.add_argument("--big", type=int, default=100_000, help="size of the big session")
    ap.add_argument("--appends", type=int, default=1000,
                    help="appends per timed run (sqlite: enough that each run spans a WAL "
                    "checkpoint; postgres: per writing process)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-compaction", action="store_true", help="skip the auto-compaction part")
    ap.add_argument("--pgbouncer", help="postgres: the same server through PgBouncer in "
                    "transaction mode (default: $CONVOSTORE_TEST_PGBOUNCER_URL)")
    args = ap.parse_args()
    with scratch_database(args, name="append") as scratch:
        if scratch.kind == "postgres":
            return postgres_main(args, scratch)
        return sqlite_main(args, scratch.target)


def sqlite_main(args: argparse.Namespace, path: str) -> int:
    """Appends/s into sessions of 10 and ``--big`` messages, both durability modes, vs raw."""
    here = os.path.dirname(path)  # the baselines' files go beside the store's
    t0 = time.perf_counter()
    with Sessions.open(path) as store:
        build(store, "small", 10)
        build(store, "hundred", 100)
        build(store, "big", args.big)
    print(f"built sessions of 10, 100 and {args.big:,} messages in "
          f"{time.perf_counter() - t0:.1f} s ({os.path.getsize(path) / 1e6:.0f} MB)")
    print(f"each figure: median of {args.repeats} runs of {args.appends} appends\n")

    results: list[tuple[str, bool]] = []
    print(f"{'durability':<10} {'workload':<34} {'appends/s':>10} {'vs raw':>8}")
    big_label = f"convostore, session of {args.big:,}"
    n = args.appends  # the same in both modes: every run spans a WAL checkpoint (see above)
    for durability in ("normal", "full"):
        os.sync()  # the build's dirty pages are on disk before any clock starts
        raw_conn = raw_connection(os.path.join(here, f"raw-{durability}.db"), durability)
        ordered_conn = raw_connection(os.path.join(here, f"ordered-{durability}.db"), durability)
        store = Sessions.open(path, durability=durability)  # type: ignore[arg-type]
        rates = interleaved({
            "raw sqlite3 INSERT+COMMIT": raw_runner(raw_conn, n, args.repeats, seed=args.seed),
            "(raw + index on (session_id, seq))": raw_runner(ordered_conn, n, args.repeats,
                                                             ordered=True, seed=args.seed),
            "convostore, session of 10": convostore_runner(store.session("small"), n,
                                                           args.repeats, durability, args.seed),
            big_label: convostore_runner(store.session("big"), n, args.repeats, durability,
                                         args.seed),
        }, n, args.repeats)
        store.close()
        raw_conn.close()
        ordered_conn.close()
        raw = rates["raw sqlite3 INSERT+COMMIT"]
        for label, rate in rates.items():
            print(f"{durability:<10} {label:<34} {rate:>10,.0f} {rate / raw:>8.2f}")
        small, big = rates["convostore, session of 10"], rates[big_label]
        floor = 0.5 if durability == "normal" else 0.8
        results.append((f"{durability}: small/big within 1.3x ({small / big:.2f})",
                        small / big <= 1.3))
        results.append((f"{durability}: >= {floor}x raw ({min(small, big) / raw:.2f})",
                        min(small, big) / raw >= floor))

    if not args.no_compaction:
        def configure(s: Any) -> Any:
            s.on_compaction(lambda msgs: CompactResult(msgs[0]["id"], msgs[-1]["id"], "s"))
            s.compact_after(10**12)
            return s

        os.sync()
        with Sessions.open(path) as store:
            rates = interleaved({
                "hundred": convostore_runner(configure(store.session("hundred")), n,
                                             args.repeats, "compaction", args.seed),
                "big": convostore_runner(configure(store.session("big")), n, args.repeats,
                                         "compaction", args.seed),
            }, n, args.repeats)
        hundred, big = rates["hundred"], rates["big"]
        print(f"{'normal':<10} {'auto-compaction on, session of 100':<34} {hundred:>10,.0f}")
        print(f"{'normal':<10} {f'auto-compaction on, {args.big:,}':<34} {big:>10,.0f}")
        results.append((f"auto-compaction: 100/big within 1.5x ({hundred / big:.2f})",
                        hundred / big <= 1.5))

    print()
    for label, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {label}")
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())

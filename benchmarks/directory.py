"""The directory of conversations (issue 20): listing, the append cost of keeping it, prune.

Three measurements, each against a baseline measured in the same run:

1. **Listing.** 100,000 sessions in the directory (100 owners, 1,000 sessions each, updated at
   shuffled times; the rows made by one bulk INSERT, since a listing reads only the directory),
   then the newest 50 of one owner, the newest 50 of all, the next page by cursor, and the newest
   50 of one owner with a metadata filter: medians of ``--listings`` calls of
   ``store.list_conversations``. Baseline: the same owner query as raw SQL on a raw connection.
   PostgreSQL runs ANALYZE first, as autovacuum would on a live table.
2. **Append cost.** Appends per second into a fresh session, this tree against the code before
   the directory (``--baseline-src``, default: ``git archive`` of the merge base of HEAD and
   ``main`` into a temporary directory), each in its own process and its own database, taking
   turns for ``--rounds`` rounds of ``--appends`` appends after a warm-up; medians. The cost
   ratio is the baseline's rate over this tree's.
3. **Prune while a writer appends.** ``--idle`` idle sessions (one message each, written with
   an old ``created_at``) pruned by ``store.prune(older_than=...)`` while another process
   appends to a live session as fast as it can: the prune's time and batches, and the writer's
   appends during it with their latency (p50, p99, max).

    python benchmarks/directory.py
    python benchmarks/directory.py --backend postgres --sessions 20000

Targets (issue 20): the newest 50 of 100,000 filtered by owner under 5 ms (SQLite); append cost
within 10% of the baseline; the writer's p99 wait during prune under 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
T_OLD = 1_600_000_000_000


# --- a worker process: appends with a given source tree --------------------------------------


def _worker(argv: list[str]) -> None:
    """``--worker SRC URL SCHEMA N MODE``: append N messages; print a JSON result.

    MODE ``rate``: one warm-up of N // 5, then N timed appends (appends/s). MODE ``writer``:
    append until the file ``URL.stop`` exists, recording each append's latency."""
    src, url, schema, n, mode = argv[0], argv[1], argv[2], int(argv[3]), argv[4]
    sys.path.insert(0, src)
    import convostore  # noqa: PLC0415 (the tree under test, chosen at run time)

    assert os.path.abspath(convostore.__file__).startswith(os.path.abspath(src)), src
    options: dict[str, Any] = {"schema": schema} if schema != "-" else {}
    rng = random.Random(7)
    words = ["deploy", "error", "table", "index", "query", "model", "token", "session", "file"]

    def message(i: int) -> dict[str, Any]:
        body = " ".join(rng.choice(words) for _ in range(rng.randint(20, 200)))
        return {"id": f"m{i}", "role": "user" if i % 2 else "assistant",
                "parts": [{"type": "text", "text": body}]}

    with convostore.Sessions.open(url, **options) as store:
        session = store.session(f"bench-{os.getpid()}-{time.time_ns()}")
        if mode == "rate":
            for i in range(n // 5):
                session.append_message(message(i))
            msgs = [message(n + i) for i in range(n)]
            start, cpu = time.perf_counter(), time.process_time()
            for m in msgs:
                session.append_message(m)
            print(json.dumps({"rate": n / (time.perf_counter() - start),
                              "cpu_rate": n / (time.process_time() - cpu)}))
            return
        waits: list[float] = []
        stop = url + ".stop" if schema == "-" else os.path.join(tempfile.gettempdir(),
                                                                 schema + ".stop")
        i = 0
        while not os.path.exists(stop):
            m = message(i)
            start = time.perf_counter()
            session.append_message(m)
            waits.append(time.perf_counter() - start)
            i += 1
        print(json.dumps({"waits": waits}))


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--worker":
    _worker(sys.argv[2:])  # before anything imports convostore from this tree
    raise SystemExit(0)

sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, HERE)

from _common import Report, bench_parser, machine_line, scratch_database  # noqa: E402

from convostore import Sessions  # noqa: E402


def _run_worker(src: str, url: str, schema: str | None, n: int, mode: str) -> Any:
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", src, url, schema or "-", str(n),
         mode],
        check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _baseline_src(args: argparse.Namespace, tmp: str) -> tuple[str, str]:
    """A source tree of the code before the directory: ``--baseline-src``, or the merge base
    of HEAD and main exported with ``git archive``."""
    if args.baseline_src:
        return args.baseline_src, args.baseline_src
    root = os.path.join(HERE, "..")
    base = subprocess.run(["git", "-C", root, "merge-base", "HEAD", "main"], check=True,
                          capture_output=True, text=True).stdout.strip()
    archive = subprocess.run(["git", "-C", root, "archive", base, "src"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
    return os.path.join(tmp, "src"), f"git merge-base HEAD main = {base[:12]}"


# --- 1. listing ------------------------------------------------------------------------------


def _fill_directory(store_url: str, schema: str | None, n: int, seed: int) -> None:
    """``n`` directory rows, 100 owners, shuffled update times, by one bulk INSERT."""
    rng = random.Random(seed)
    times = list(range(n))
    rng.shuffle(times)
    rows = [(f"sess-{i:06}", 0, f"Conversation {i}", f"user-{i % 100}",
             json.dumps({"tier": "pro" if i % 3 == 0 else "free"}), T_OLD + times[i] * 1000,
             T_OLD + times[i] * 1000, 10, 5000) for i in range(n)]
    sql = ("INSERT INTO convostore_sessions (session_id, internal, title, owner, metadata, "
           "created_at, updated_at, message_count, bytes) VALUES (?,?,?,?,?,?,?,?,?)")
    if schema is None:
        import sqlite3

        conn = sqlite3.connect(store_url)
        with conn:
            conn.executemany(sql, rows)
        conn.execute("ANALYZE")
        conn.close()
        return
    import psycopg

    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        copy_sql = ("COPY convostore_sessions (session_id, internal, title, owner, metadata, "
                    "created_at, updated_at, message_count, bytes) FROM STDIN")
        with conn.cursor() as cur, cur.copy(copy_sql) as copy:
            for row in rows:
                copy.write_row(row)
        conn.execute("ANALYZE convostore_sessions")


def _median_ms(fn: Any, times: int) -> float:
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _raw_owner_query(url: str, schema: str | None) -> Any:
    cols = ("session_id, title, owner, metadata, created_at, updated_at, message_count, bytes, "
            "expires_at, ttl, active_leaf, context_of")
    sql = (f"SELECT {cols} FROM convostore_sessions WHERE internal = 0 AND owner = ? "
           "ORDER BY owner DESC, updated_at DESC, session_id DESC LIMIT 51")
    if schema is None:
        import sqlite3

        conn = sqlite3.connect(url)
        return lambda: conn.execute(sql, ("user-7",)).fetchall()
    import psycopg

    pg = psycopg.connect(url, autocommit=True)
    pg.execute(f'SET search_path TO "{schema}"')
    pg_sql = sql.replace("?", "%s")
    return lambda: pg.execute(pg_sql, ("user-7",)).fetchall()


def listing(args: argparse.Namespace, report: Report) -> None:
    with scratch_database(args, name="directory") as scratch:
        options = {"schema": scratch.schema} if scratch.schema else {}
        with Sessions.open(scratch.target, **options):
            pass  # the schema, migrated
        print(f"filling {args.sessions:,} directory rows ...", file=sys.stderr, flush=True)
        _fill_directory(scratch.target, scratch.schema, args.sessions, args.seed)
        with Sessions.open(scratch.target, **options) as store:
            first = store.list_conversations(limit=50)
            assert len(first.sessions) == 50
            owner = store.list_conversations(owner="user-7", limit=50)
            assert all(e.owner == "user-7" for e in owner.sessions) and len(owner.sessions) == 50
            ups = [e.updated_at for e in owner.sessions]
            assert ups == sorted(ups, reverse=True)
            raw = _raw_owner_query(scratch.target, scratch.schema)
            n = args.listings
            figures = [
                ("raw SQL: newest 50 of one owner", _median_ms(raw, n)),
                ("newest 50 of one owner", _median_ms(
                    lambda: store.list_conversations(owner="user-7", limit=50), n)),
                ("newest 50 of all", _median_ms(lambda: store.list_conversations(limit=50), n)),
                ("next page of one owner (cursor)", _median_ms(
                    lambda: store.list_conversations(owner="user-7", limit=50,
                                                     cursor=owner.next_cursor), n)),
                ("newest 50 of one owner, metadata tier=pro", _median_ms(
                    lambda: store.list_conversations(owner="user-7", metadata={"tier": "pro"},
                                                     limit=50), n)),
            ]
        base = figures[0][1]
        report.table(
            f"listing, {args.sessions:,} sessions in the directory ({scratch.kind}), "
            f"median of {n}",
            ["query", "ms", "x raw"],
            [(name, f"{ms:.3f}", f"{ms / base:.2f}") for name, ms in figures],
        )
        owner_ms = figures[1][1]
        if scratch.kind == "sqlite":
            report.target("newest 50 of 100,000 by owner (SQLite) < 5 ms", owner_ms, 5.0,
                          f"{owner_ms:.3f} ms")
        else:
            report.check("newest 50 by owner (PostgreSQL), reported", True,
                         f"{owner_ms:.3f} ms ({owner_ms / base:.2f}x raw SQL)")


# --- 2. append cost --------------------------------------------------------------------------


def append_cost(args: argparse.Namespace, report: Report) -> None:
    with tempfile.TemporaryDirectory(prefix="convostore-base-") as tmp:
        base_src, base_name = _baseline_src(args, tmp)
        ours_src = os.path.abspath(os.path.join(HERE, "..", "src"))
        with scratch_database(args, name="app_base") as base_db, \
                scratch_database(args, name="app_ours") as ours_db:
            rates: dict[str, list[float]] = {"baseline": [], "directory": []}
            cpu: dict[str, list[float]] = {"baseline": [], "directory": []}
            runs = [("baseline", base_src, base_db), ("directory", ours_src, ours_db)]
            for r in range(args.rounds):
                order = runs if r % 2 == 0 else list(reversed(runs))
                for name, src, db in order:
                    got = _run_worker(src, db.target, db.schema, args.appends, "rate")
                    rates[name].append(got["rate"])
                    cpu[name].append(got["cpu_rate"])
                    print(f"round {r + 1}: {name} {got['rate']:,.0f}/s "
                          f"(cpu {got['cpu_rate']:,.0f}/s)", file=sys.stderr, flush=True)
    # Each round runs both codes back to back: the ratio within a round is what the load of a
    # shared machine disturbs least; the median of those ratios is the figure.
    paired = statistics.median(b / d for b, d in zip(rates["baseline"], rates["directory"],
                                                     strict=True))
    paired_cpu = statistics.median(b / d for b, d in zip(cpu["baseline"], cpu["directory"],
                                                         strict=True))
    base, ours = statistics.median(rates["baseline"]), statistics.median(rates["directory"])
    base_cpu, ours_cpu = statistics.median(cpu["baseline"]), statistics.median(cpu["directory"])
    report.table(
        f"append cost ({args.rounds} rounds of {args.appends:,} appends, each round both codes "
        f"back to back; baseline: {base_name})",
        ["code", "appends/s", "appends/CPU-s", "cost x baseline (median of rounds)",
         "CPU cost x baseline"],
        [("before the directory", f"{base:,.0f}", f"{base_cpu:,.0f}", "1.00", "1.00"),
         ("with the directory", f"{ours:,.0f}", f"{ours_cpu:,.0f}", f"{paired:.3f}",
          f"{paired_cpu:.3f}")],
    )
    report.target("append cost with the directory within 10%", paired, 1.10,
                  f"{paired:.3f}x (CPU {paired_cpu:.3f}x)")


# --- 3. prune while a writer appends ---------------------------------------------------------


def prune_with_writer(args: argparse.Namespace, report: Report) -> None:
    with scratch_database(args, name="prune") as scratch:
        options = {"schema": scratch.schema} if scratch.schema else {}
        with Sessions.open(scratch.target, **options) as store:
            print(f"writing {args.idle:,} idle sessions ...", file=sys.stderr, flush=True)
            for i in range(args.idle):
                store.session(f"idle{i:06}").import_message(
                    {"id": "m", "role": "user", "parts": [{"type": "text", "text": "old"}]},
                    created_at=T_OLD + i)
            stop = (scratch.target + ".stop" if scratch.schema is None
                    else os.path.join(tempfile.gettempdir(), scratch.schema + ".stop"))
            ours_src = os.path.abspath(os.path.join(HERE, "..", "src"))
            writer = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--worker", ours_src,
                 scratch.target, scratch.schema or "-", "0", "writer"],
                stdout=subprocess.PIPE, text=True,
            )
            try:
                time.sleep(1.0)  # the writer is under way
                start = time.perf_counter()
                result = store.prune(older_than=86_400)
                took = time.perf_counter() - start
                time.sleep(0.2)
            finally:
                open(stop, "w").close()
                out, _ = writer.communicate(timeout=120)
                os.remove(stop)
        waits = sorted(json.loads(out.strip().splitlines()[-1])["waits"])
    assert len(result.session_ids) == args.idle
    ms = [w * 1000 for w in waits]
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    report.table(
        f"prune of {args.idle:,} idle sessions while another process appends ({scratch.kind})",
        ["figure", "value"],
        [("prune time", f"{took:.2f} s"), ("batches", f"{result.batches}"),
         ("writer appends (during the run)", f"{len(ms):,}"),
         ("writer wait p50", f"{statistics.median(ms):.2f} ms"),
         ("writer wait p99", f"{p99:.2f} ms"), ("writer wait max", f"{ms[-1]:.2f} ms")],
    )
    report.target("writer p99 wait during prune < 100 ms", p99, 100.0, f"{p99:.2f} ms "
                  f"(max {ms[-1]:.2f} ms)")


def main() -> int:
    parser = bench_parser(__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000, help="directory rows")
    parser.add_argument("--listings", type=int, default=200, help="timed calls per listing")
    parser.add_argument("--appends", type=int, default=2_000, help="appends per timed run")
    parser.add_argument("--rounds", type=int, default=5, help="turns of each code")
    parser.add_argument("--idle", type=int, default=10_000, help="idle sessions to prune")
    parser.add_argument("--baseline-src", help="the src/ directory of the code to compare with")
    parser.add_argument("--only", choices=("listing", "append", "prune"),
                        help="run one measurement only")
    args = parser.parse_args()
    report = Report("directory: listing, append cost, prune (issue 20)")
    report.header([machine_line(), f"backend: {args.backend}"])
    if args.only in (None, "listing"):
        listing(args, report)
    if args.only in (None, "append"):
        append_cost(args, report)
    if args.only in (None, "prune"):
        prune_with_writer(args, report)
    return report.finish()


if __name__ == "__main__":
    raise SystemExit(main())

"""Where an append's time goes: convostore against the raw baselines of ``append.py``, by step.

``append.py`` says how fast an append is; this script says why. It appends the same messages
(``append.py``'s stream) through three writers, taking turns in a shuffled order, and splits each
one's time per append into the SQL statements it runs (``BEGIN``, convostore's probe,
``INSERT``, ``COMMIT``) and everything else, which is Python: the baselines' ``json.dumps``, and
convostore's validation, encoding, media check, token estimate and glue. It also counts the pages
each writer adds to the WAL per append (checkpoints off for that count).

- raw: one INSERT and COMMIT per message (the baseline of the targets);
- raw + index: the same with the index reading a session in order needs, ``(session_id, seq)``;
- convostore: ``append_message`` into a session of ``--size`` messages.

Statements are timed through a thin wrapper around each connection (about a microsecond per
call, paid by every writer); convostore's connection is reached through private attributes,
which only a diagnostic like this one should do. Each figure is a mean over all runs, so a
run the machine disturbed (a checkpoint stalled behind the disk) shows in it: run it twice.
The targets are checked by ``append.py``, which uses medians.

    python benchmarks/append_breakdown.py                    # FULL, a session of 20,000
    python benchmarks/append_breakdown.py --durability normal --size 100000
    python benchmarks/append_breakdown.py --autocheckpoint 1000   # the store at SQLite's default
"""

from __future__ import annotations

import argparse
import itertools
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))

from _common import compact_json, rounds  # noqa: E402
from append import (  # noqa: E402
    build,
    convostore_runner,
    messages,
    raw_connection,
    raw_runner,
)

from convostore import Sessions  # noqa: E402

_STEPS = ("BEGIN", "probe", "INSERT", "COMMIT")


class TimedConnection:
    """A :class:`sqlite3.Connection` stand-in that adds each statement's time to ``spent``."""

    def __init__(self, conn: sqlite3.Connection, spent: dict[str, float]) -> None:
        self._conn = conn
        self.spent = spent

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        t0 = time.perf_counter()
        cursor = self._conn.execute(sql, params)
        elapsed = time.perf_counter() - t0
        word = sql.split(None, 1)[0].upper()
        step = "probe" if word == "SELECT" else word if word in _STEPS else "other SQL"
        self.spent[step] = self.spent.get(step, 0.0) + elapsed
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def wal_pages_per_append(conn: sqlite3.Connection, append: Callable[[], None], n: int) -> float:
    """Pages written to the WAL per append over ``n`` appends, with checkpoints held off."""
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for _ in range(n):
        append()
    frames = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    return float(frames) / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--durability", choices=("normal", "full"), default="full")
    ap.add_argument("--size", type=int, default=20_000, help="messages in convostore's session")
    ap.add_argument("--appends", type=int, default=1000, help="appends per timed run")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--autocheckpoint", type=int, metavar="PAGES",
                    help="the store's wal_autocheckpoint (default: the store's own, "
                    "convostore.backends.sqlite._engine.WAL_AUTOCHECKPOINT_PAGES)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="convostore-breakdown-") as tmp:
        path = os.path.join(tmp, "store.db")
        with Sessions.open(path) as store:
            build(store, "big", args.size)
        os.sync()

        n, repeats = args.appends, args.repeats
        spent: dict[str, dict[str, float]] = {"raw": {}, "raw + index": {}, "convostore": {}}
        store = Sessions.open(path, durability=args.durability)  # type: ignore[arg-type]
        backend: Any = store.core.backend  # the diagnostic reaches into the engine on purpose
        if args.autocheckpoint is not None:
            backend._conn.execute(f"PRAGMA wal_autocheckpoint = {int(args.autocheckpoint)}")
        backend._conn = backend._ops._conn = TimedConnection(backend._conn, spent["convostore"])
        raw = raw_connection(os.path.join(tmp, "raw.db"), args.durability)
        ordered = raw_connection(os.path.join(tmp, "ordered.db"), args.durability)
        runs = {
            "raw": raw_runner(TimedConnection(raw, spent["raw"]), n, repeats),  # type: ignore[arg-type]
            "raw + index": raw_runner(
                TimedConnection(ordered, spent["raw + index"]), n, repeats, ordered=True  # type: ignore[arg-type]
            ),
            "convostore": convostore_runner(store.session("big"), n, repeats, "breakdown"),
        }
        for run in runs.values():  # warm-up, untimed: caches and the WAL reach their working size
            run()
        for steps in spent.values():  # the statements' times of the timed rounds only
            steps.clear()
        secs = rounds(runs, repeat=repeats, warmup=0, order_seed=3, collect=True)
        total = {name: sum(times) for name, times in secs.items()}

        count = n * repeats
        checkpoint = backend._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        print(f"durability {args.durability}, convostore session of {args.size:,} "
              f"(WAL checkpoint every {checkpoint} pages); {repeats} runs of {n} appends each, "
              "in turns; microseconds per append\n")
        columns = (*_STEPS, "other SQL")
        print(f"{'writer':<12} {'total':>7} {'vs raw':>7} "
              + " ".join(f"{c:>9}" for c in columns) + f" {'Python':>7}")
        base = total["raw"] / count
        for name in runs:
            per = total[name] / count * 1e6
            steps = {c: spent[name].get(c, 0.0) / count * 1e6 for c in columns}
            python = per - sum(steps.values())
            print(f"{name:<12} {per:>7.1f} {base * 1e6 / per:>7.2f} "
                  + " ".join(f"{steps[c]:>9.1f}" for c in columns) + f" {python:>7.1f}")

        pages_n = 300
        fresh = iter(messages(pages_n * 3, "pages"))
        seqs = itertools.count(10**9)  # above every seq the timed runs used

        def raw_append(conn: sqlite3.Connection) -> Callable[[], None]:
            def append() -> None:
                m = next(fresh)
                conn.execute("BEGIN")
                conn.execute("INSERT INTO raw VALUES (?,?,?,?)",
                             ("s", m["id"], next(seqs), compact_json(m)))
                conn.execute("COMMIT")
            return append

        session = store.session("big")
        pages = {
            "raw": wal_pages_per_append(raw, raw_append(raw), pages_n),
            "raw + index": wal_pages_per_append(ordered, raw_append(ordered), pages_n),
            "convostore": wal_pages_per_append(
                backend._conn._conn, lambda: session.append_message(next(fresh)), pages_n
            ),
        }
        print("\nWAL pages per append: "
              + ", ".join(f"{name} {value:.2f}" for name, value in pages.items()))
        store.close()
        raw.close()
        ordered.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Issue 21: the durable change feed, per engine.

For each engine (``--engines sqlite,postgres``; PostgreSQL from ``--url`` or
``$CONVOSTORE_TEST_POSTGRES_URL``) it prints:

1. latency from commit to a watcher in another process: this process appends a small message
   every 10 ms; a watcher process (``store.watch()``) stamps each change as it gets it. The
   latency of a change is its arrival minus the moment the append returned (the commit is
   acknowledged just before; p50 and p99 over ``--samples`` changes), and, as an upper bound,
   minus the moment the append started (which adds the append's own time: the commit's flush
   to disk). Targets: p50 under 5 ms on PostgreSQL, under 50 ms on SQLite.
2. events per second a watcher keeps up with: 4 writer processes append as fast as they can
   into 4 sessions while one watcher process follows; the writers' rate, the watcher's rate and
   how far behind the last commit its last change arrived. And the catch-up rate: a watcher
   reading a backlog of everything written so far.
3. append cost with the log vs without: appends of realistic messages (mean 4.4 KB) through a
   store whose change log is on, and one on the same database whose log calls are replaced by
   no-ops (the log cannot be turned off in the library; this measures what it costs), in
   interleaved rounds; on PostgreSQL also 4 processes into 4 sessions, where the change-log
   lock serialises the commits of different sessions. Target: within 10% (ratio >= 0.90).

Run from the repository root: ``python benchmarks/feed.py`` (add ``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (  # noqa: E402
    MessageGen,
    Report,
    Scratch,
    append_rates,
    machine_line,
    percentile,
    progress,
    scratch_database,
)

from convostore import Sessions  # noqa: E402

HERE = os.path.abspath(__file__)


class _NoLog:
    """Stands in for a store's change log: logs nothing (the 'without' contender)."""

    def log(self, *args: Any, **kwargs: Any) -> _NoLog:
        return self

    def committed(self) -> int:
        return 1  # a truthy position: the write path reads "inserted"

    def entry(self, *args: Any, **kwargs: Any) -> None:
        return None  # an append logs no change

    def settled(self, position: int | None) -> int:
        return 1


def _open(url: str, schema: str | None, *, log: bool = True) -> Sessions:
    store = Sessions.open(url, **({"schema": schema} if schema else {}))
    if not log:
        store.core.changes = _NoLog()  # type: ignore[assignment]
    return store


def _msg(mid: str, body: str = "hello") -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": body}]}


# --- roles run in other processes ---------------------------------------------------------------


def role_watcher(url: str, schema: str | None, since: int, count: int) -> None:
    """Follow the log from ``since``; print ``cursor message_id arrival`` per change."""
    with _open(url, schema) as store:
        it = store.watch(since=since, timeout=120)
        print("ready", flush=True)
        out = []
        for seen, change in enumerate(it, 1):
            out.append(f"{change.cursor} {change.message_id} {time.time():.6f}")
            if seen >= count:
                break
        print("\n".join(out), flush=True)


def role_writer(url: str, schema: str | None, session: str, count: int, log: bool) -> None:
    """Append ``count`` small messages to ``session`` as fast as possible; print start, end."""
    with _open(url, schema, log=log) as store:
        s = store.session(session)
        s.append_message(_msg(f"{session}-warm"))
        print("ready", flush=True)
        sys.stdin.readline()  # go
        began = time.time()
        for i in range(count):
            s.append_message(_msg(f"{session}-{i}", "x" * 200))
        print(f"{began:.6f} {time.time():.6f}", flush=True)


def _spawn(*args: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, HERE, *(str(a) for a in args)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        raise SystemExit(f"a helper process failed to start ({line!r})")


# --- the measurements ---------------------------------------------------------------------------


def latency(scratch: Scratch, samples: int) -> tuple[float, float, float, float]:
    with _open(scratch.target, scratch.schema) as store:
        s = store.session("latency")
        s.append_message(_msg("warm"))
        watcher = _spawn("--role", "watcher", scratch.target, scratch.schema or "",
                         store.change_cursor(), samples)
        _ready(watcher)
        time.sleep(0.3)
        started: dict[str, float] = {}
        returned: dict[str, float] = {}
        for i in range(samples):
            mid = f"l{i}"
            started[mid] = time.time()
            s.append_message(_msg(mid))
            returned[mid] = time.time()
            time.sleep(0.01)
        out, _ = watcher.communicate(timeout=120)
    arrived = {parts[1]: float(parts[2]) for parts in (line.split() for line in out.splitlines())}
    waits = [(arrived[m] - t) * 1000 for m, t in returned.items() if m in arrived]
    if len(waits) != samples:
        raise SystemExit(f"the watcher got {len(waits)} of {samples} changes")
    bound = [(arrived[m] - t) * 1000 for m, t in started.items()]
    return (percentile(waits, 50), percentile(waits, 99), percentile(bound, 50),
            percentile(bound, 99))


def keep_up(scratch: Scratch, per_writer: int) -> dict[str, float]:
    with _open(scratch.target, scratch.schema) as store:
        start = store.change_cursor()
        writers = [_spawn("--role", "writer", scratch.target, scratch.schema or "", f"k{w}",
                          per_writer, "on") for w in range(4)]
        for w in writers:
            _ready(w)
        total = 4 * per_writer
        watcher = _spawn("--role", "watcher", scratch.target, scratch.schema or "",
                         store.change_cursor(), total)
        _ready(watcher)
        time.sleep(0.3)
        for w in writers:
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.flush()
        spans = [tuple(map(float, w.communicate(timeout=600)[0].split())) for w in writers]
        out, _ = watcher.communicate(timeout=600)
        times = [float(line.split()[2]) for line in out.splitlines()]
        began = min(s[0] for s in spans)
        ended = max(s[1] for s in spans)
        # catch-up: a watcher reading the backlog of everything written above
        t0 = time.perf_counter()
        backlog = sum(1 for _ in store.watch(since=start, timeout=0))
        catch_up = backlog / (time.perf_counter() - t0)
    return {
        "written": total / (ended - began),
        "watched": len(times) / (times[-1] - began),
        "lag_ms": (times[-1] - ended) * 1000,
        "catch_up": catch_up,
        "backlog": backlog,
    }


def append_cost(scratch: Scratch, count: int, seed: int) -> tuple[float, float]:
    gen = MessageGen(seed)
    on = _open(scratch.target, scratch.schema)
    off = _open(scratch.target, scratch.schema, log=False)
    try:
        a, b = on.session("cost-on"), off.session("cost-off")
        msgs_a = list(gen.conversation(count, salt=1))
        msgs_b = [dict(m, id=m["id"] + "-off") for m in msgs_a]  # the same sizes
        rates = append_rates({"log on": (a.append_message, msgs_a),
                              "log off": (b.append_message, msgs_b)}, size=max(50, count // 20))
    finally:
        on.close()
        off.close()
    return rates["log on"], rates["log off"]


def processes_cost(scratch: Scratch, per_writer: int, repeat: int) -> tuple[float, float]:
    results: dict[str, list[float]] = {"on": [], "off": []}
    for r in range(repeat):
        for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
            writers = [_spawn("--role", "writer", scratch.target, scratch.schema or "",
                              f"p{mode}{r}-{w}", per_writer, mode) for w in range(4)]
            for w in writers:
                _ready(w)
            for w in writers:
                assert w.stdin is not None
                w.stdin.write("go\n")
                w.stdin.flush()
            spans = [tuple(map(float, w.communicate(timeout=600)[0].split())) for w in writers]
            elapsed = max(s[1] for s in spans) - min(s[0] for s in spans)
            results[mode].append(4 * per_writer / elapsed)
    return statistics.median(results["on"]), statistics.median(results["off"])


def run_engine(engine: str, args: argparse.Namespace, report: Report) -> None:
    ns = argparse.Namespace(backend=engine, url=args.url if engine == "postgres" else None,
                            keep=False)
    quick = args.quick
    with scratch_database(ns, name="feed") as scratch:
        title = "PostgreSQL" if engine == "postgres" else "SQLite"
        progress(f"{title}: latency")
        p50, p99, b50, b99 = latency(scratch, 100 if quick else args.samples)
        progress(f"{title}: keeping up")
        up = keep_up(scratch, 300 if quick else 2000)
        progress(f"{title}: append cost")
        on, off = append_cost(scratch, 400 if quick else 3000, args.seed)
        rows = [
            ["commit to watcher in another process, p50 ms", f"{p50:.2f}"],
            ["commit to watcher in another process, p99 ms", f"{p99:.2f}"],
            ["append call start to watcher (upper bound), p50 ms", f"{b50:.2f}"],
            ["append call start to watcher (upper bound), p99 ms", f"{b99:.2f}"],
            ["4 writer processes, appends/s", f"{up['written']:,.0f}"],
            ["watcher following them, changes/s", f"{up['watched']:,.0f}"],
            ["watcher's last change after the last commit, ms", f"{up['lag_ms']:.1f}"],
            [f"watcher catching up a backlog of {up['backlog']:,}, changes/s",
             f"{up['catch_up']:,.0f}"],
            ["append (4.4 KB mean), log on, msg/s", f"{on:,.0f}"],
            ["append (4.4 KB mean), log replaced by no-ops, msg/s", f"{off:,.0f}"],
            ["ratio on/off", f"{on / off:.3f}"],
        ]
        ratio_mp = None
        if engine == "postgres":
            progress(f"{title}: 4 processes into 4 sessions, log on and off")
            mp_on, mp_off = processes_cost(scratch, 150 if quick else 1000, 2)
            ratio_mp = mp_on / mp_off
            rows += [
                ["4 processes x 4 sessions, log on, msg/s", f"{mp_on:,.0f}"],
                ["4 processes x 4 sessions, log off, msg/s", f"{mp_off:,.0f}"],
                ["ratio on/off (4 processes)", f"{ratio_mp:.3f}"],
            ]
        report.table(f"{title} ({scratch.where})", ["figure", "value"], rows)
        limit = 5.0 if engine == "postgres" else 50.0
        report.target(f"{title} commit-to-watcher p50 < {limit:g} ms", p50, limit,
                      f"{p50:.2f} ms")
        report.check(f"{title} append with the log within 10%", on / off >= 0.90,
                     f"{on / off:.3f} of the rate without it")
        if ratio_mp is not None:
            report.check(f"{title} 4 processes x 4 sessions with the log within 10%",
                         ratio_mp >= 0.90, f"{ratio_mp:.3f} of the rate without it")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("watcher", "writer"), help=argparse.SUPPRESS)
    parser.add_argument("--engines", default="sqlite,postgres",
                        help="comma-separated: sqlite, postgres (default both; postgres "
                        "needs --url or $CONVOSTORE_TEST_POSTGRES_URL)")
    parser.add_argument("--url", default=os.environ.get("CONVOSTORE_TEST_POSTGRES_URL"),
                        help="the PostgreSQL server (a scratch schema is made and dropped)")
    parser.add_argument("--samples", type=int, default=300, help="latency samples per engine")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="fewer samples and messages")
    args, rest = parser.parse_known_args()
    if args.role == "watcher":
        url, schema, since, count = rest
        role_watcher(url, schema or None, int(since), int(count))
        return 0
    if args.role == "writer":
        url, schema, session, count, log = rest
        role_writer(url, schema or None, session, int(count), log == "on")
        return 0
    report = Report("benchmarks/feed.py: the durable change feed (issue 21)")
    report.header([machine_line()])
    for engine in args.engines.split(","):
        if engine == "postgres" and not args.url:
            progress("postgres: no --url and no $CONVOSTORE_TEST_POSTGRES_URL: skipped")
            continue
        run_engine(engine, args, report)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())

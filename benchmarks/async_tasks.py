"""AsyncSessions under load (issue 8): 100 asyncio tasks appending to 100 sessions, one store.

Each run opens nothing new: one :class:`~convostore.AsyncSessions` store serves every run. In a
run, task ``k`` appends ``--per-task`` realistic messages (``_common.MessageGen``: user text,
1-20 KB tool outputs, assistant answers; about 4.4 KB each) to its own session, all tasks at
once. Meanwhile a ticker task sleeps 1 ms in a loop and records the longest gap between two of
its ticks: how long the event loop was kept from running anything (the 1 ms sleep included).

Prints, for ``--runs`` (3) runs: appends/s (median), per-append latency (median, p99) and the
longest loop gap; the same appends made one by one through the sync API in the same run, as the
baseline (the async layer's cost is the ratio).

Target: the longest gap between loop ticks under 50 ms, in every run.

    python benchmarks/async_tasks.py
    python benchmarks/async_tasks.py --backend postgres --url postgresql://postgres@127.0.0.1/test
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from _common import (
    MessageGen,
    Report,
    bench_parser,
    fmt_s,
    machine_line,
    percentile,
    progress,
    scratch_database,
)

from convostore import AsyncSessions, Sessions

GAP_LIMIT = 0.050


@dataclass
class RunResult:
    """One run of the concurrent appends."""

    appends: int
    seconds: float
    latencies: list[float]
    longest_gap: float
    ticks: int

    @property
    def rate(self) -> float:
        """Appends per second over the run."""
        return self.appends / self.seconds


@asynccontextmanager
async def scratch(
    args: argparse.Namespace,
) -> AsyncIterator[tuple[AsyncSessions, Sessions, str]]:
    """The async store under test and a sync store on the same database (the baseline)."""
    with scratch_database(args, name="async") as db:
        if db.kind == "sqlite":
            store = await AsyncSessions.open(db.target)
            sync = Sessions.open(db.target)
            where = db.where
        else:
            store = await AsyncSessions.open(db.target, schema=db.schema,
                                             pool_size=args.pool_size)
            sync = Sessions.open(db.target, schema=db.schema, pool_size=2)
            where = f"{db.target} (schema {db.schema}, pool_size {args.pool_size})"
        try:
            yield store, sync, where
        finally:
            sync.close()
            await store.close()


async def concurrent_run(
    store: AsyncSessions, batches: list[list[dict[str, Any]]], prefix: str
) -> RunResult:
    """Every task appends its batch to its own session at once; a ticker watches the loop."""
    stop = asyncio.Event()
    gaps = [0.0]
    ticks = [0]

    async def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps[0] = max(gaps[0], now - last)
            ticks[0] += 1
            last = now

    latencies: list[float] = []

    async def task(k: int, batch: list[dict[str, Any]]) -> None:
        session = store.session(f"{prefix}-{k}")
        for message in batch:
            started = time.perf_counter()
            await session.append_message(message)
            latencies.append(time.perf_counter() - started)

    watcher = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)  # the ticker is running before the load starts
    started = time.perf_counter()
    await asyncio.gather(*(task(k, batch) for k, batch in enumerate(batches)))
    seconds = time.perf_counter() - started
    stop.set()
    await watcher
    return RunResult(sum(len(b) for b in batches), seconds, latencies, gaps[0], ticks[0])


def sync_run(sync: Sessions, batches: list[list[dict[str, Any]]], prefix: str) -> float:
    """The baseline: the same appends through the sync API, one by one; seconds."""
    started = time.perf_counter()
    for k, batch in enumerate(batches):
        session = sync.session(f"{prefix}-{k}")
        for message in batch:
            session.append_message(message)
    return time.perf_counter() - started


def make_batches(gen: MessageGen, tasks: int, per_task: int, salt: int) -> list[list[Any]]:
    """One conversation of ``per_task`` messages per task, different for each task and salt."""
    return [list(gen.conversation(per_task, salt=salt * 10_000 + k)) for k in range(tasks)]


async def main(args: argparse.Namespace) -> int:
    report = Report("async_tasks: concurrent asyncio appends through one AsyncSessions store")
    gen = MessageGen(args.seed)
    async with scratch(args) as (store, sync, where):
        report.header(
            [
                machine_line(),
                f"backend: {args.backend} at {where}",
                f"{args.tasks} tasks x {args.per_task} appends, each task to its own session; "
                f"{args.runs} runs",
            ]
        )
        results: list[RunResult] = []
        baseline: list[float] = []
        for run in range(args.runs):
            batches = make_batches(gen, args.tasks, args.per_task, salt=2 * run)
            progress(f"run {run + 1}/{args.runs}: async")
            results.append(await concurrent_run(store, batches, f"async{run}"))
            batches = make_batches(gen, args.tasks, args.per_task, salt=2 * run + 1)
            progress(f"run {run + 1}/{args.runs}: sync baseline")
            baseline.append(sync_run(sync, batches, f"sync{run}"))
        appends = results[0].appends
        rows = []
        for i, (r, b) in enumerate(zip(results, baseline, strict=True)):
            rows.append(
                [
                    f"run {i + 1}",
                    f"{r.rate:,.0f}",
                    fmt_s(statistics.median(r.latencies)),
                    fmt_s(percentile(r.latencies, 99)),
                    fmt_s(r.longest_gap),
                    f"{r.ticks:,}",
                    f"{appends / b:,.0f}",
                ]
            )
        report.table(
            f"{appends:,} appends per run",
            [
                "",
                "async appends/s",
                "latency p50",
                "latency p99",
                "longest loop gap",
                "ticks",
                "sync appends/s",
            ],
            rows,
        )
        rate = statistics.median(r.rate for r in results)
        sync_rate = statistics.median(appends / b for b in baseline)
        print(
            f"median: {rate:,.0f} appends/s async ({args.tasks} tasks), "
            f"{sync_rate:,.0f} appends/s sync (one thread); ratio {rate / sync_rate:.2f}"
        )
        stats = await store.storage_stats()
        expected = 2 * args.runs * appends
        report.check(
            "every append stored",
            stats.messages == expected,
            f"{stats.messages:,} messages (expected {expected:,})",
        )
        worst = max(r.longest_gap for r in results)
        report.target(
            "event loop never blocked 50 ms",
            worst,
            GAP_LIMIT,
            f"longest gap between 1 ms ticks {fmt_s(worst)} (limit 50 ms)",
        )
    return report.finish()


if __name__ == "__main__":
    parser = bench_parser(__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--tasks", type=int, default=100, help="concurrent tasks and sessions")
    parser.add_argument("--per-task", type=int, default=20, help="appends per task and run")
    parser.add_argument("--runs", type=int, default=3, help="runs (the median is reported)")
    parser.add_argument(
        "--pool-size",
        type=int,
        default=10,
        help="postgres: pool connections, and worker threads (default 10)",
    )
    sys.exit(asyncio.run(main(parser.parse_args())))

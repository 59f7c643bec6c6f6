"""Bounded reads (issue 3): the newest 20 messages, and a full streamed pass, against raw SQL.

Builds two sessions of realistic messages in one scratch database (1,000 and 100,000 messages by
default; see ``--messages``) whose newest messages are identical, then measures in the same run:

- the newest 20 messages with ``history(newest_first=True)`` and with
  ``get_recent_history(budget)``, where ``budget`` is the stored size of exactly those 20 rows,
  against the raw query ``SELECT content ... ORDER BY seq DESC LIMIT 20`` plus ``json.loads``;
- a full ``history()`` pass over the large session: its time against a raw scan of the same rows
  (continuation rows joined), and its peak Python memory under tracemalloc.

Targets: newest-20 at the large size within 1.3x of the small size and within 2x of raw SQL;
the full pass under 16 MiB peak and within 2x of the raw scan.

    python benchmarks/reads.py                      # full size, SQLite (a few minutes)
    python benchmarks/reads.py --messages 20000     # quicker
    python benchmarks/reads.py --backend postgres --url postgresql://postgres@127.0.0.1/test
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from itertools import islice
from typing import Any

from _common import (
    Bench,
    MessageGen,
    MiB,
    Report,
    bench_parser,
    build_session,
    fmt_bytes,
    fmt_s,
    interleaved,
    machine_line,
    open_bench,
    peak_memory,
    progress,
    timed,
)

from convostore import Session

NEWEST = 20
SMALL_ID = "small"
LARGE_ID = "large"


def raw_newest(bench: Bench, sid: str) -> list[Any]:
    """The baseline for a newest-20 read: one query, then ``json.loads`` of each row."""
    cur = bench.raw.cursor(
        "SELECT content FROM convostore_messages WHERE session_id = ? "
        "ORDER BY seq DESC LIMIT 20",
        (sid,),
    )
    return [json.loads(content) for (content,) in cur.fetchall()]


def take_newest(session: Session) -> list[Any]:
    """The newest 20 messages through ``history(newest_first=True)``."""
    return list(islice(session.history(newest_first=True), NEWEST))


def raw_scan(bench: Bench, sid: str) -> int:
    """The baseline for a full pass: stream every row oldest first, continuations joined."""
    count = 0
    cur = bench.raw.cursor(
        "SELECT id, content, content_chunks FROM convostore_messages WHERE session_id = ? "
        "ORDER BY seq",
        (sid,),
    )
    for mid, content, chunks in cur:
        if chunks:
            content += "".join(
                r[0]
                for r in bench.raw.rows(
                    "SELECT content FROM convostore_message_chunks "
                    "WHERE session_id = ? AND id = ? ORDER BY idx",
                    (sid, mid),
                )
            )
        json.loads(content)
        count += 1
    return count


def api_scan(bench: Bench, sid: str) -> int:
    """A full ``history()`` pass, oldest first, keeping nothing."""
    count = 0
    for _message in bench.store.session(sid).history():
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000,
                        help="messages of the large session (default 100,000)")
    parser.add_argument("--small", type=int, default=1_000,
                        help="messages of the small session (default 1,000)")
    parser.add_argument("--repeat", type=int, default=50,
                        help="timed rounds of each newest-20 read (default 50)")
    parser.add_argument("--full-repeat", type=int, default=3,
                        help="timed rounds of each full pass (default 3)")
    args = parser.parse_args(argv)
    report = Report("convostore reads: newest 20 and a full streamed pass")

    with open_bench(args, name="reads") as bench:
        report.header([
            f"backend {bench.kind}: {bench.where}",
            machine_line(),
            f"sessions: {args.small:,} and {args.messages:,} messages, one linear branch each; "
            "turns of user text (50-500 chars), a tool-<name> step (JSON output 1-20 KB) and "
            "assistant text (200-3,000 chars)",
        ])
        gen = MessageGen(args.seed)
        store = bench.store
        builds = []
        for sid, n in ((SMALL_ID, args.small), (LARGE_ID, args.messages)):
            progress(f"building session {sid!r} ({n:,} messages)")
            count, seconds = build_session(store.session(sid), gen.conversation(n), total=n,
                                           label=f"{sid}: ")
            stored = bench.raw.value(
                "SELECT sum(bytes) FROM convostore_messages WHERE session_id = ?", (sid,))
            builds.append((sid, f"{count:,}", fmt_s(seconds), f"{count / seconds:,.0f}",
                           fmt_bytes(stored)))
        report.table(
            "build (import_message, one transaction per message)",
            ["session", "messages", "build time", "msgs/s", "stored bytes"],
            builds,
        )
        settled = bench.raw.settle()
        report.table("database", ["", "value"], [
            [f"size ({bench.raw.size_what})", fmt_bytes(bench.raw.size_on_disk())],
            ["maintenance after the build", settled],
        ])

        # The two sessions end with the same messages, so one budget fits exactly 20 in both.
        tails = {
            sid: [r[0] for r in bench.raw.rows(
                "SELECT bytes FROM convostore_messages WHERE session_id = ? "
                "ORDER BY seq DESC LIMIT 20", (sid,))]
            for sid in (SMALL_ID, LARGE_ID)
        }
        budget = sum(tails[LARGE_ID])
        if sum(tails[SMALL_ID]) != budget:
            print(f"note: the newest 20 rows differ in size ({sum(tails[SMALL_ID])} vs {budget})")

        def newest_first(sid: str) -> list[Any]:
            return take_newest(store.session(sid))

        def recent(sid: str) -> list[Any]:
            return store.session(sid).get_recent_history(budget).messages

        for sid in (SMALL_ID, LARGE_ID):  # the three reads must return the same 20 messages
            want = raw_newest(bench, sid)
            got_nf = newest_first(sid)
            got_recent = recent(sid)
            if got_nf != want or got_recent != want[::-1]:
                print(f"error: session {sid!r}: the API's newest 20 differ from raw SQL's "
                      f"({len(got_nf)} newest-first, {len(got_recent)} recent)")
                return 2

        progress(f"timing newest-20 reads ({args.repeat} rounds)")
        contenders: dict[str, Callable[[], Any]] = {}
        for sid in (SMALL_ID, LARGE_ID):
            contenders[f"{sid}/newest_first"] = partial(newest_first, sid)
            contenders[f"{sid}/recent"] = partial(recent, sid)
            contenders[f"{sid}/raw"] = partial(raw_newest, bench, sid)
        medians = interleaved(contenders, repeat=args.repeat, warmup=3)
        times = {
            sid: {kind: medians[f"{sid}/{kind}"] for kind in ("newest_first", "recent", "raw")}
            for sid in (SMALL_ID, LARGE_ID)
        }
        rows = []
        for sid, n in ((SMALL_ID, args.small), (LARGE_ID, args.messages)):
            t = times[sid]
            rows.append([f"{n:,} messages", fmt_s(t["newest_first"]), fmt_s(t["recent"]),
                         fmt_s(t["raw"]), f"{t['newest_first'] / t['raw']:.2f}x",
                         f"{t['recent'] / t['raw']:.2f}x"])
        report.table(
            f"newest {NEWEST} messages, median of {args.repeat} rounds "
            f"(get_recent_history budget = {budget:,} bytes = the stored size of the newest "
            f"{NEWEST} rows, identical in both sessions)",
            ["session", "history(newest_first)", "get_recent_history", "raw SQL",
             "newest_first/raw", "recent/raw"],
            rows,
        )

        cold_rows = []
        for sid, n in ((SMALL_ID, args.small), (LARGE_ID, args.messages)):
            with bench.reopen() as fresh:
                _r, nf_cold = timed(partial(take_newest, fresh.session(sid)))
            with bench.reopen() as fresh:
                _r, recent_cold = timed(partial(fresh.session(sid).get_recent_history, budget))
            cold_rows.append([f"{n:,} messages", fmt_s(nf_cold), fmt_s(recent_cold)])
        report.table(
            "the same reads as the first call on a newly opened store (one sample each; "
            "nothing memoised yet)",
            ["session", "history(newest_first)", "get_recent_history"],
            cold_rows,
        )

        small, large = times[SMALL_ID], times[LARGE_ID]
        scale_nf = large["newest_first"] / small["newest_first"]
        scale_recent = large["recent"] / small["recent"]
        scale_raw = large["raw"] / small["raw"]
        report.table(
            f"scaling: time at {args.messages:,} / time at {args.small:,}",
            ["read", "ratio"],
            [["history(newest_first=True)", f"{scale_nf:.2f}x"],
             ["get_recent_history", f"{scale_recent:.2f}x"],
             ["raw SQL", f"{scale_raw:.2f}x"]],
        )

        progress(f"timing full passes over {args.messages:,} messages ({args.full_repeat} rounds)")
        counts = {"api": api_scan(bench, LARGE_ID), "raw": raw_scan(bench, LARGE_ID)}
        if counts["api"] != args.messages or counts["raw"] != args.messages:
            print(f"error: full pass read {counts} messages, expected {args.messages:,}")
            return 2
        full = interleaved(
            {"api": lambda: api_scan(bench, LARGE_ID), "raw": lambda: raw_scan(bench, LARGE_ID)},
            repeat=args.full_repeat,
            warmup=0,
        )
        progress("measuring peak memory (tracemalloc)")
        _n, api_peak = peak_memory(lambda: api_scan(bench, LARGE_ID))
        _n, raw_peak = peak_memory(lambda: raw_scan(bench, LARGE_ID))
        report.table(
            f"full oldest-first pass over {args.messages:,} messages "
            f"(time: median of {args.full_repeat}; peak: tracemalloc, one pass)",
            ["read", "time", "msgs/s", "peak Python memory", "time vs raw"],
            [["history()", fmt_s(full["api"]), f"{args.messages / full['api']:,.0f}",
              fmt_bytes(api_peak), f"{full['api'] / full['raw']:.2f}x"],
             ["raw SQL scan + json.loads", fmt_s(full["raw"]),
              f"{args.messages / full['raw']:,.0f}", fmt_bytes(raw_peak), "1.00x"]],
        )

        report.target(f"newest_first 20: {args.messages:,} vs {args.small:,} <= 1.3x", scale_nf,
                      1.3, f"{scale_nf:.2f}x")
        report.target(f"get_recent_history 20: {args.messages:,} vs {args.small:,} <= 1.3x",
                      scale_recent, 1.3, f"{scale_recent:.2f}x")
        ratio = large["newest_first"] / large["raw"]
        report.target(f"newest_first 20 at {args.messages:,} vs raw SQL <= 2x", ratio, 2.0,
                      f"{ratio:.2f}x ({fmt_s(large['newest_first'])} vs {fmt_s(large['raw'])})")
        ratio = large["recent"] / large["raw"]
        report.target(f"get_recent_history 20 at {args.messages:,} vs raw SQL <= 2x", ratio, 2.0,
                      f"{ratio:.2f}x ({fmt_s(large['recent'])} vs {fmt_s(large['raw'])})")
        report.target("full history() pass peak memory < 16 MiB", api_peak, 16 * MiB - 1,
                      fmt_bytes(api_peak))
        ratio = full["api"] / full["raw"]
        report.target("full history() pass vs raw scan <= 2x", ratio, 2.0,
                      f"{ratio:.2f}x ({fmt_s(full['api'])} vs {fmt_s(full['raw'])})")
        return report.finish()


if __name__ == "__main__":
    sys.exit(main())

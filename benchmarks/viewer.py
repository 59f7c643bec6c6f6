"""The web viewer (issue 23): time to first byte and size of a conversation page, 10 messages
against 100,000, and the memory the server holds while serving the large one.

Builds two sessions of realistic messages in one scratch database (10 and 100,000 messages by
default; see ``--messages``) whose newest messages are identical. The viewer runs in a child
process (``convostore.web.create_app`` under uvicorn, as ``convostore serve`` runs it), and
this script requests its pages over loopback, each on a new connection as a browser's first
visit would, in interleaved rounds:

- the conversation page of each session: time to first byte (request sent → status line and
  headers read), the whole response, and its size;
- for the large session, one "load older" page from the middle of the conversation;
- the server's resident memory (VmRSS) at start, after the pages, and its peak (VmHWM).

It runs twice: with pages of 10 messages (the small session's length, so both pages hold the
same 10 messages and the ratio shows what the session's length costs), then with the default
30 (the large page then holds three times the content of the small one).

Targets: with equal pages, time to first byte of the large page within 1.5x of the small
page's; the server's peak resident memory under 200 MiB.

    python benchmarks/viewer.py                     # SQLite, 100,000 messages (a few minutes)
    python benchmarks/viewer.py --messages 20000    # quicker
    python benchmarks/viewer.py --backend postgres --url postgresql://postgres@127.0.0.1/test
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from _common import (
    MessageGen,
    MiB,
    Report,
    bench_parser,
    build_session,
    fmt_bytes,
    fmt_s,
    machine_line,
    progress,
    rounds,
    scratch_database,
)

from convostore import Sessions

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
DEFAULT_PAGE = 30
"""Messages per page of the viewer (``create_app``'s default)."""
SMALL_ID = "small"
LARGE_ID = "large"

_CHILD = """
import json, sys
import uvicorn
from convostore import Sessions
from convostore.cli._serve import bind
from convostore.web import create_app
url, options, page_size = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
with Sessions.open(url, **options) as store:
    sock = bind("127.0.0.1", 0)
    print(sock.getsockname()[1], flush=True)
    app = create_app(store, page_size=page_size)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
"""


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in bytes (Linux ``/proc``)."""
    found = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024
    return found


def fetch(port: int, path: str) -> tuple[float, float, int]:
    """GET ``path`` on a new connection: (time to first byte, total time, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        started = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()  # returns once the status line and headers are read
        first = time.perf_counter() - started
        body = response.read()
        total = time.perf_counter() - started
        if response.status != 200:
            raise SystemExit(f"error: GET {path} answered {response.status}")
        return first, total, len(body)
    finally:
        conn.close()


Samples = dict[str, list[tuple[float, float, int]]]


def serve_and_time(
    target: str, options: dict[str, Any], page_size: int, pages: dict[str, str],
    args: argparse.Namespace,
) -> tuple[Samples, dict[str, int], dict[str, int]]:
    """Start the viewer in a child process with ``page_size``, time each page in interleaved
    rounds; (samples of the timed rounds, memory at start, memory after)."""
    # the child imports the same tree as this script (_common put its src/ first)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [SRC, *filter(None, [os.environ.get("PYTHONPATH")])])}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, target, json.dumps(options),
                              str(page_size)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        at_start = memory(child.pid)
        samples: Samples = {name: [] for name in pages}

        def getter(name: str) -> Callable[[], None]:
            return lambda: samples[name].append(fetch(port, pages[name]))

        progress(f"timing pages of {page_size} messages ({args.repeat} rounds)")
        warmup = 2
        rounds({name: getter(name) for name in pages}, repeat=args.repeat, warmup=warmup,
               order_seed=args.seed)
        after = memory(child.pid)
    finally:
        child.terminate()
        child.wait(timeout=30)
    return {k: v[warmup:] for k, v in samples.items()}, at_start, after


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000,
                        help="messages of the large session (default 100,000)")
    parser.add_argument("--small", type=int, default=10,
                        help="messages of the small session (default 10)")
    parser.add_argument("--repeat", type=int, default=30,
                        help="timed rounds of each page (default 30)")
    args = parser.parse_args(argv)
    report = Report("convostore viewer: the conversation page at 10 and 100,000 messages")
    runs_ratio: dict[int, float] = {}
    peaks: dict[int, int] = {}

    with scratch_database(args, name="viewer") as scratch:
        options: dict[str, Any] = {} if scratch.schema is None else {"schema": scratch.schema}
        report.header([
            f"backend {scratch.kind}: {scratch.where}",
            machine_line(),
            f"sessions: {args.small:,} and {args.messages:,} messages, one linear branch each, "
            "ending with the same messages (turns of user text, a tool step with 1-20 KB of "
            "JSON output, assistant text)",
        ])
        gen = MessageGen(args.seed)
        with Sessions.open(scratch.target, **options) as store:
            builds = []
            for sid, n in ((SMALL_ID, args.small), (LARGE_ID, args.messages)):
                progress(f"building session {sid!r} ({n:,} messages)")
                count, seconds = build_session(store.session(sid), gen.conversation(n),
                                               total=n, label=f"{sid}: ")
                builds.append((sid, f"{count:,}", fmt_s(seconds)))
            middle = ""
            for i, message in enumerate(store.session(LARGE_ID).history(newest_first=True)):
                middle = message["id"]
                if i == args.messages // 2:
                    break
        report.table("build (import_message, one transaction per message)",
                     ["session", "messages", "build time"], builds)

        pages: dict[str, str] = {
            SMALL_ID: "/session?" + urllib.parse.urlencode({"id": SMALL_ID}),
            LARGE_ID: "/session?" + urllib.parse.urlencode({"id": LARGE_ID}),
            "older": "/session/older?" + urllib.parse.urlencode(
                {"id": LARGE_ID, "before": middle}),
        }
        runs = {size: serve_and_time(scratch.target, options, size, pages, args)
                for size in (args.small, DEFAULT_PAGE)}

    for size, (samples, at_start, after) in runs.items():
        def median(name: str, i: int, samples: Samples = samples) -> float:
            return statistics.median(s[i] for s in samples[name])

        rows = []
        for name, label in ((SMALL_ID, f"{args.small:,} messages"),
                            (LARGE_ID, f"{args.messages:,} messages"),
                            ("older", f"{args.messages:,}: older page from the middle")):
            rows.append([label, fmt_s(median(name, 0)), fmt_s(median(name, 1)),
                         fmt_bytes(samples[name][-1][2])])
        ratio = median(LARGE_ID, 0) / median(SMALL_ID, 0)
        size_ratio = samples[LARGE_ID][-1][2] / samples[SMALL_ID][-1][2]
        rows.append(["large / small", f"{ratio:.2f}x",
                     f"{median(LARGE_ID, 1) / median(SMALL_ID, 1):.2f}x", f"{size_ratio:.2f}x"])
        note = (" (both pages hold the same messages)" if size == args.small else
                f" (the default; the small session has only {args.small})")
        report.table(f"pages of {size} messages{note}: over HTTP, a new connection each, "
                     f"median of {args.repeat}",
                     ["page", "time to first byte", "whole response", "size"], rows)
        report.table(f"server memory (child process, pages of {size})",
                     ["when", "resident (VmRSS)", "peak (VmHWM)"], [
            ["started, store open", fmt_bytes(at_start["VmRSS"]), fmt_bytes(at_start["VmHWM"])],
            [f"after {3 * (args.repeat + 2)} pages", fmt_bytes(after["VmRSS"]),
             fmt_bytes(after["VmHWM"])],
        ])
        runs_ratio[size] = ratio
        peaks[size] = after["VmHWM"]
    ttfb_ratio = runs_ratio[args.small]
    peak = max(peaks.values())
    report.target("time to first byte, large within 1.5x of small (same page)", ttfb_ratio,
                  1.5, f"{ttfb_ratio:.2f}x")
    report.target("server peak memory under 200 MiB", peak / MiB, 200, fmt_bytes(peak))
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())

"""Batch writes, dump and restore: ratios measured in one run (issue 22).

    python benchmarks/batch.py            # 100,000 messages (~5 min on 2 busy cores)
    python benchmarks/batch.py --quick    # 10,000 messages

Three workloads, each on fresh SQLite files in a scratch directory:

(a) An agent turn of 6 items written at once with ``durability="full"`` (fsync at every
    commit, as the OpenAI Agents SDK's ``SQLiteSession`` gets from SQLite's default): a user
    message, two tool calls, their results (``MessageGen``: 1-20 KB of JSON each) and the
    answer, as Responses items. The SDK's own ``SQLiteSession.add_items(items)`` (one
    transaction) beside convostore's SDK session, ``ConvostoreSession.add_items(items)`` (the
    items converted, each result paired with its call, then one ``append_messages``), and
    the store calls alone on the 6 messages it writes: ``session.append_messages(turn)`` (one
    transaction) and, for scale, six ``append_message`` calls (six transactions). Turns of
    one conversation, contenders interleaved in chunks; the median time per turn. Targets:
    ``ConvostoreSession.add_items`` and ``append_messages`` at least as fast as the SDK
    (ratio <= 1).
(b) Importing N messages (``MessageGen``: ~4.4 KB each) into a new session: one
    ``import_message`` per message beside ``import_messages`` in batches of 1,000. Only the
    store calls are timed, not generating the messages. Target: >= 5x faster. For scale, the
    floor of any batch import in the same run: raw sqlite3 encoding each message
    (``json.dumps``) and inserting the texts with ``executemany``, 1,000 per transaction, into
    a table with the two indexes a session needs (``(session_id, id)`` unique and
    ``(session_id, seq)``), WAL and the store's checkpoint interval; the line under the table
    says what ratio that floor would allow, and the line under it the same two calls with
    ``durability="full"`` (where each ``import_message`` pays an fsync), for scale.
(c) ``convostore.dump.dump`` of the store (b) built, to a file, and ``restore`` of that file
    into a new store, each under tracemalloc: time and peak Python memory. Target: peak
    < 32 MiB for 100,000 messages. The restored store's dump is compared with the first,
    byte for byte.

The figures go to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Any

from _common import (
    MessageGen,
    MiB,
    Report,
    compact_json,
    fmt_bytes,
    gc_off,
    machine_line,
    peak_memory,
    progress,
)

from convostore import ImportItem, Sessions
from convostore.dump import dump, restore
from convostore.formats import to_openai_responses

T0 = 1_700_000_000_000
IMPORT_BATCH = 1_000


def _turn_items(gen: MessageGen, turn: int) -> list[dict[str, Any]]:
    """The Responses items of one agent turn: a question, two tool calls with their results,
    the answer."""
    rng = random.Random(f"turn-{turn}")
    return to_openai_responses(
        [gen.user(rng), gen.tool(rng), gen.tool(rng), gen.assistant(rng)])


def _stored_turns(items: list[list[dict[str, Any]]]) -> list[list[Any]]:
    """The messages ``ConvostoreSession.add_items`` writes for each turn (read back from a
    scratch store): what the store calls are given, so every contender writes the same."""
    from convostore.integrations.openai_agents import ConvostoreSession

    async def write(session: Any) -> None:
        for turn in items:
            await session.add_items(turn)

    with Sessions.open(":memory:") as scratch:
        ours = ConvostoreSession("turns", scratch)
        asyncio.run(write(ours))
        ours.close()
        history = scratch.session("turns").get_history()
    sizes = [len(turn) for turn in items]
    out, at = [], 0
    for size in sizes:
        out.append(history[at:at + size])
        at += size
    return out


def turns_workload(root: str, report: Report, turns: int, chunk: int) -> None:
    from agents.memory import SQLiteSession

    from convostore.integrations.openai_agents import ConvostoreSession

    gen = MessageGen(seed=7)
    items = [_turn_items(gen, t) for t in range(turns)]
    batches = _stored_turns(items)
    batch_store = Sessions.open(os.path.join(root, "turn-batch.db"), durability="full")
    single_store = Sessions.open(os.path.join(root, "turn-single.db"), durability="full")
    agents_store = Sessions.open(os.path.join(root, "turn-agents.db"), durability="full")
    sdk = SQLiteSession("turns", os.path.join(root, "turn-sdk.db"))
    ours = ConvostoreSession("turns", agents_store)
    batch_session, single_session = batch_store.session("turns"), single_store.session("turns")
    times: dict[str, list[float]] = {"append_messages": [], "SDK add_items": [],
                                     "ConvostoreSession.add_items": [],
                                     "6 x append_message": []}

    async def sdk_chunk(session: Any, todo: list[list[dict[str, Any]]]) -> list[float]:
        out = []
        for turn in todo:
            started = time.perf_counter()
            await session.add_items(turn)
            out.append(time.perf_counter() - started)
        return out

    for start in range(0, turns, chunk):
        with gc_off():
            for turn in batches[start:start + chunk]:
                started = time.perf_counter()
                batch_session.append_messages(turn)
                times["append_messages"].append(time.perf_counter() - started)
            times["SDK add_items"] += asyncio.run(sdk_chunk(sdk, items[start:start + chunk]))
            times["ConvostoreSession.add_items"] += asyncio.run(
                sdk_chunk(ours, items[start:start + chunk]))
            for turn in batches[start:start + chunk]:
                started = time.perf_counter()
                for message in turn:
                    single_session.append_message(message)
                times["6 x append_message"].append(time.perf_counter() - started)
        progress(f"turns: {min(start + chunk, turns)}/{turns}")
    sdk.close()
    ours.close()
    batch_store.close()
    single_store.close()
    agents_store.close()
    medians = {k: statistics.median(v) for k, v in times.items()}
    base = medians["SDK add_items"]
    report.table(f"(a) a 6-item turn, durability=full, median of {turns} turns",
                 ["contender", "per turn", "vs SDK"],
                 [[k, f"{v * 1e3:.2f} ms", f"{v / base:.2f}x"] for k, v in medians.items()])
    ratio = medians["append_messages"] / base
    report.target("append_messages of a 6-item turn at least as fast as the SDK's add_items",
                  ratio, 1.0, f"{ratio:.2f}x the SDK's time per turn")
    ratio = medians["ConvostoreSession.add_items"] / base
    report.target("ConvostoreSession.add_items of a 6-item turn at least as fast as the SDK's",
                  ratio, 1.0, f"{ratio:.2f}x the SDK's time per turn")


def _raw_store(path: str) -> sqlite3.Connection:
    """The floor's table: what any store of ordered sessions indexes, nothing more."""
    from convostore.backends.sqlite._engine import WAL_AUTOCHECKPOINT_PAGES

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
    conn.execute("CREATE TABLE m (rid INTEGER PRIMARY KEY, session_id TEXT NOT NULL, "
                 "id TEXT NOT NULL, seq INTEGER NOT NULL, created_at INTEGER NOT NULL, "
                 "content TEXT NOT NULL, UNIQUE (session_id, id))")
    conn.execute("CREATE UNIQUE INDEX m_seq ON m (session_id, seq)")
    return conn


def import_workload(root: str, report: Report, n: int) -> str:
    gen = MessageGen(seed=3)
    single = Sessions.open(os.path.join(root, "import-single.db")).session("s")
    path = os.path.join(root, "import-batch.db")
    batch_store = Sessions.open(path)
    batch = batch_store.session("s")
    raw = _raw_store(os.path.join(root, "import-raw.db"))
    spent = {"import_message": 0.0, "import_messages": 0.0, "raw floor": 0.0}
    parent: str | None = None
    for start in range(0, n, IMPORT_BATCH):
        chunk = [gen.message(n - 1 - i) for i in range(start, min(start + IMPORT_BATCH, n))]
        with gc_off():
            started = time.perf_counter()
            p = parent
            for i, message in enumerate(chunk):
                single.import_message(message, parent_id=p, created_at=T0 + start + i)
                p = message["id"]
            spent["import_message"] += time.perf_counter() - started
            entries = [ImportItem(m, created_at=T0 + start + i) for i, m in enumerate(chunk)]
            started = time.perf_counter()
            batch.import_messages(entries, parent_id=parent)
            spent["import_messages"] += time.perf_counter() - started
            started = time.perf_counter()
            raw.execute("BEGIN IMMEDIATE")
            raw.executemany(
                "INSERT INTO m (session_id, id, seq, created_at, content) VALUES (?,?,?,?,?)",
                [("s", m["id"], start + i, T0 + start + i, compact_json(m))
                 for i, m in enumerate(chunk)])
            raw.execute("COMMIT")
            spent["raw floor"] += time.perf_counter() - started
        parent = chunk[-1]["id"]
        if (start + IMPORT_BATCH) % 10_000 == 0:
            progress(f"import: {start + IMPORT_BATCH:,}/{n:,}")
    single.store.close()
    batch_store.close()
    raw.close()
    ratio = spent["import_message"] / spent["import_messages"]
    report.table(f"(b) importing {n:,} messages (~4.4 KB each)",
                 ["call", "total", "per message", "messages/s"],
                 [[k, f"{v:.2f} s", f"{v / n * 1e6:.0f} us", f"{n / v:,.0f}"]
                  for k, v in spent.items()])
    report.check("import_messages at least 5x faster than import_message per message",
                 ratio >= 5, f"{ratio:.2f}x")
    floor = spent["raw floor"]
    print(f"      for scale: the raw floor is {spent['import_message'] / floor:.2f}x faster than "
          f"import_message, import_messages takes {spent['import_messages'] / floor:.2f}x "
          "the floor's time", flush=True)
    _import_full(root, min(n, 2 * IMPORT_BATCH))
    return path


def _import_full(root: str, n: int) -> None:
    """For scale, not a target: the same two calls with ``durability="full"``, where each
    ``import_message`` pays an fsync and a batch of 1,000 pays one."""
    gen = MessageGen(seed=5)
    messages = [gen.message(n - 1 - i) for i in range(n)]
    spent = {}
    for name in ("import_message", "import_messages"):
        with Sessions.open(os.path.join(root, f"full-{name}.db"), durability="full") as store:
            session = store.session("s")
            with gc_off():
                started = time.perf_counter()
                if name == "import_message":
                    parent = None
                    for i, message in enumerate(messages):
                        session.import_message(message, parent_id=parent, created_at=T0 + i)
                        parent = message["id"]
                else:
                    for start in range(0, n, IMPORT_BATCH):
                        session.import_messages(
                            [ImportItem(m, created_at=T0 + start + i)
                             for i, m in enumerate(messages[start:start + IMPORT_BATCH])],
                            parent_id=messages[start - 1]["id"] if start else None)
                spent[name] = time.perf_counter() - started
    one, many = (spent[k] / n * 1e6 for k in ("import_message", "import_messages"))
    print(f"      with durability=\"full\" ({n:,} messages): import_message {one:.0f} us, "
          f"import_messages {many:.0f} us per message: {one / many:.2f}x\n", flush=True)


def dump_workload(root: str, report: Report, path: str, n: int) -> None:
    out = os.path.join(root, "dump.jsonl")
    with Sessions.open(path) as store:
        def run_dump() -> Any:
            with open(out, "w", encoding="utf-8") as f:
                return dump(store, f)

        started = time.perf_counter()
        counts, dump_peak = peak_memory(run_dump)
        dump_time = time.perf_counter() - started
    copy = os.path.join(root, "restored.db")
    with Sessions.open(copy) as target:
        def run_restore() -> Any:
            with open(out, encoding="utf-8") as f:
                return restore(target, f)

        started = time.perf_counter()
        restored, restore_peak = peak_memory(run_restore)
        restore_time = time.perf_counter() - started
        again = os.path.join(root, "dump2.jsonl")
        with open(again, "w", encoding="utf-8") as f:
            dump(target, f)
    same = open(out, "rb").read() == open(again, "rb").read()  # noqa: SIM115
    size = os.path.getsize(out)
    report.table(f"(c) dump and restore of {counts.messages:,} messages ({fmt_bytes(size)} "
                 "of JSON Lines), under tracemalloc",
                 ["step", "time", "peak Python memory"],
                 [["dump", f"{dump_time:.2f} s", fmt_bytes(dump_peak)],
                  ["restore", f"{restore_time:.2f} s", fmt_bytes(restore_peak)]])
    report.check("restore of the dump dumps the same bytes", same and restored.messages == n,
                 f"{restored.messages:,} messages restored, dumps {'equal' if same else 'differ'}")
    limit = 32 * MiB
    report.target("dump peak Python memory < 32 MiB", dump_peak, limit, fmt_bytes(dump_peak))
    report.target("restore peak Python memory < 32 MiB", restore_peak, limit,
                  fmt_bytes(restore_peak))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 messages, fewer turns")
    parser.add_argument("--messages", type=int, help="messages to import and dump")
    args = parser.parse_args()
    n = args.messages or (10_000 if args.quick else 100_000)
    report = Report("batch writes, dump and restore")
    report.header([machine_line(), f"{n:,} messages; SQLite in a scratch directory"])
    root = tempfile.mkdtemp(prefix="convostore-batch-")
    try:
        turns_workload(root, report, 60 if args.quick else 300, 20)
        path = import_workload(root, report, n)
        dump_workload(root, report, path, n)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())

"""ConvostoreSaver beside LangGraph's own checkpointers, on the same workloads, in one run.

    python benchmarks/langgraph.py                       # SQLite: ConvostoreSaver vs SqliteSaver
    python benchmarks/langgraph.py --backend postgres    # PostgreSQL: vs PostgresSaver
    python benchmarks/langgraph.py --quick               # fewer steps and rounds

Needs the ``bench`` extra (langgraph-checkpoint-sqlite, langgraph-checkpoint-postgres).

Contenders, each on its own SQLite file (``--backend sqlite``) or in one scratch schema
(``--backend postgres``):

- ``ConvostoreSaver``: ``convostore.integrations.langgraph.ConvostoreSaver(store)``, with the
  ``messages`` channel mirrored into a convostore session (its default; the peers do no such
  work). SQLite in its default durability (WAL, synchronous=NORMAL).
- ``ConvostoreSaver no mirror``: the same with ``messages_channel=None`` (checkpoints only, the
  work the peers do).
- ``ConvostoreSaver full`` (SQLite): the same store opened with ``durability="full"`` (an fsync
  at every commit, as SqliteSaver gets from SQLite's default synchronous=FULL).
- ``SqliteSaver``: ``langgraph.checkpoint.sqlite.SqliteSaver(sqlite3.connect(file,
  check_same_thread=False))``, as its documentation opens it.
- ``PostgresSaver``: ``langgraph.checkpoint.postgres.PostgresSaver`` on a psycopg connection
  (autocommit, ``prepare_threshold=0``, ``dict_row``), as its documentation opens it.

Workloads (every saver through the same ``BaseCheckpointSaver`` calls):

(a) graph steps: what a chat agent's super-step writes: ``put_writes`` of the task (one new
    message and a trigger) and ``put`` of the next checkpoint (the ``messages`` channel, grown by
    one message of 200-1,500 characters, and the trigger channel). Threads of 20 steps; steps/s,
    median of interleaved rounds.
(b) ``get_tuple`` on a thread of 10,000 checkpoints (a 20-message conversation, then a counter
    channel bumped at each checkpoint): the latest (no ``checkpoint_id``) and one named at
    random; median and p95 microseconds, calls interleaved.
(c) 4 processes run graph steps on one thread (read the latest checkpoint, write the task's
    writes and the next checkpoint), started together; then every acknowledged checkpoint and
    write is looked for: ``lost`` = acknowledged but not there, ``duplicated`` = there more
    than once, ``errors`` = calls that raised (not acknowledged).

Targets: ConvostoreSaver faster than each peer on (a) and on (b) (both reads), and nothing lost
or duplicated in (c).
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import random
import sqlite3
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

# This file's name is the framework's (a namespace package, which any langgraph.py on the path
# would shadow): its directory leaves the path, and _common is loaded from its file.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
if "_common" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("_common", os.path.join(_HERE, "_common.py"))
    assert _spec is not None and _spec.loader is not None
    sys.modules["_common"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["_common"])

from _common import (  # noqa: E402  (loaded above; it puts this tree's src/ first)
    MessageGen,
    Report,
    bench_parser,
    machine_line,
    percentile,
    rounds,
    scratch_database,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint  # noqa: E402
from langgraph.checkpoint.base.id import uuid6  # noqa: E402

from convostore import Sessions  # noqa: E402
from convostore.integrations.langgraph import ConvostoreSaver  # noqa: E402

STEPS_PER_THREAD = 20
TRIGGER = "branch:to:agent"


# --- the savers --------------------------------------------------------------------------------


@contextmanager
def open_saver(kind: str, target: str, schema: str | None) -> Iterator[BaseCheckpointSaver[Any]]:
    """Open one contender on its database (``target``: a file, or a server URL)."""
    if kind.startswith("ConvostoreSaver"):
        if schema is not None:
            store = Sessions.open(target, schema=schema)
        else:
            durability = "full" if kind.endswith("full") else "normal"
            store = Sessions.open(target + (".full" if durability == "full" else ""),
                                  durability=durability)
        try:
            yield ConvostoreSaver(store, messages_channel=None if "no mirror" in kind
                                  else "messages")
        finally:
            store.close()
    elif kind == "SqliteSaver":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(target + ".sqlitesaver", check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            yield saver
        finally:
            conn.close()
    else:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        with psycopg.connect(target, autocommit=True, prepare_threshold=0,
                             row_factory=dict_row, options=f"-c search_path={schema}") as conn:
            saver = PostgresSaver(conn)  # type: ignore[arg-type]
            saver.setup()
            yield saver


def contenders(backend: str) -> list[str]:
    """The savers measured on one engine."""
    if backend == "sqlite":
        return ["ConvostoreSaver", "ConvostoreSaver no mirror", "ConvostoreSaver full",
                "SqliteSaver"]
    return ["ConvostoreSaver", "ConvostoreSaver no mirror", "PostgresSaver"]


# --- a graph step ------------------------------------------------------------------------------


class Thread:
    """One thread's state as a graph keeps it between steps."""

    def __init__(self, saver: BaseCheckpointSaver[Any], thread_id: str) -> None:
        self.saver = saver
        self.config: dict[str, Any] = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.messages: list[BaseMessage] = []
        self.versions: dict[str, Any] = {}
        self.step = 0

    def load(self) -> None:
        """Start from the thread's latest checkpoint (another process may have written it)."""
        latest = self.saver.get_tuple(self.config)
        if latest is None:
            return
        self.config = dict(latest.config)
        self.messages = list(latest.checkpoint["channel_values"].get("messages", []))
        self.versions = dict(latest.checkpoint["channel_versions"])
        self.step = int(latest.metadata.get("step", 0)) + 1

    def advance(self, message: BaseMessage, changed: tuple[str, ...] = ("messages", TRIGGER),
                task_id: str | None = None) -> str:
        """Write a step: the task's writes, then the next checkpoint; its id."""
        if "checkpoint_id" in self.config["configurable"]:
            self.saver.put_writes(self.config, [("messages", [message]), (TRIGGER, None)],
                                  task_id or str(uuid.uuid4()), "~__pregel_pull, agent")
        if "messages" in changed:
            self.messages = [*self.messages, message]
        new = {ch: self.saver.get_next_version(self.versions.get(ch), None) for ch in changed}
        self.versions.update(new)
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=self.step))
        cp["channel_values"] = {"messages": self.messages, TRIGGER: None,
                                "counter": self.step}
        cp["channel_versions"] = dict(self.versions)
        cp["versions_seen"] = {"agent": {TRIGGER: self.versions.get(TRIGGER, 0)}}
        cp["updated_channels"] = list(changed)
        self.config = self.saver.put(
            self.config, cp, {"source": "loop", "step": self.step, "parents": {}}, new)
        self.step += 1
        return str(self.config["configurable"]["checkpoint_id"])


def message(gen: MessageGen, rng: random.Random, i: int) -> BaseMessage:
    """A user or assistant message of 200-1,500 characters."""
    text = gen.text(rng, 200, 1500)
    mid = f"m{rng.getrandbits(64):016x}"
    return HumanMessage(text, id=mid) if i % 2 == 0 else AIMessage(text, id=mid)


# --- (a) graph steps ---------------------------------------------------------------------------


def graph_steps(savers: dict[str, BaseCheckpointSaver[Any]], repeat: int,
                threads_per_round: int) -> dict[str, float]:
    """Median graph steps per second of each saver."""
    gen = MessageGen(seed=1)
    counter = iter(range(10**9))

    def run(saver: BaseCheckpointSaver[Any]) -> Callable[[], None]:
        def once() -> None:
            rng = random.Random(7)
            for _ in range(threads_per_round):
                thread = Thread(saver, f"steps-{next(counter)}")
                for i in range(STEPS_PER_THREAD):
                    thread.advance(message(gen, rng, i))
        return once

    times = rounds({name: run(s) for name, s in savers.items()}, repeat=repeat,
                   order_seed=3, collect=True)
    steps = threads_per_round * STEPS_PER_THREAD
    return {name: steps / statistics.median(t) for name, t in times.items()}


# --- (b) get_tuple on 10,000 checkpoints -------------------------------------------------------


def build_long_thread(saver: BaseCheckpointSaver[Any], n: int, thread_id: str
                      ) -> list[dict[str, Any]]:
    """A thread of ``n`` checkpoints: 20 messages, then a counter bumped each time."""
    gen, rng = MessageGen(seed=2), random.Random(5)
    thread = Thread(saver, thread_id)
    configs = []
    for i in range(n):
        if i < 20:
            thread.advance(message(gen, rng, i))
        else:
            thread.advance(message(gen, rng, i), changed=("counter",))
        configs.append(dict(thread.config))
    return configs


def get_tuple_latency(savers: dict[str, BaseCheckpointSaver[Any]],
                      configs: dict[str, list[dict[str, Any]]], calls: int
                      ) -> dict[str, tuple[list[float], list[float]]]:
    """Seconds per ``get_tuple`` call: (latest, a checkpoint named at random)."""
    latest: dict[str, list[float]] = {name: [] for name in savers}
    named: dict[str, list[float]] = {name: [] for name in savers}
    rng = random.Random(11)
    for _ in range(calls):
        pick = rng.randrange(10_000)
        for name, saver in rng.sample(list(savers.items()), len(savers)):
            head = {"configurable": {"thread_id": f"long {name}", "checkpoint_ns": ""}}
            started = time.perf_counter()
            got = saver.get_tuple(head)  # type: ignore[arg-type]
            latest[name].append(time.perf_counter() - started)
            assert got is not None and len(got.checkpoint["channel_values"]["messages"]) == 20
            config = configs[name][pick % len(configs[name])]
            started = time.perf_counter()
            got = saver.get_tuple(config)  # type: ignore[arg-type]
            named[name].append(time.perf_counter() - started)
            assert got is not None
    return {name: (latest[name], named[name]) for name in savers}


# --- (c) 4 processes, one thread ---------------------------------------------------------------


def _process(kind: str, target: str, schema: str | None, worker: int, steps: int,
             start: Any, out: Any) -> None:
    acked: list[str] = []
    writes: list[str] = []
    errors = 0
    try:
        with open_saver(kind, target, schema) as saver:
            start.wait(60)
            thread = Thread(saver, "shared")
            gen, rng = MessageGen(seed=worker), random.Random(worker)
            for i in range(steps):
                try:
                    thread = Thread(saver, "shared")
                    thread.load()
                    task = f"w{worker}-{i}"
                    has_parent = "checkpoint_id" in thread.config["configurable"]
                    thread.advance(message(gen, rng, i), task_id=task)
                    acked.append(str(thread.config["configurable"]["checkpoint_id"]))
                    if has_parent:  # the task's writes went to the parent checkpoint
                        writes.append(task)
                except Exception:
                    errors += 1
        out.put((worker, acked, writes, errors, None))
    except BaseException as exc:
        out.put((worker, acked, writes, errors, repr(exc)))


def processes(kind: str, target: str, schema: str | None, steps: int) -> dict[str, Any]:
    """Run 4 writers on one thread; acknowledged, lost and duplicated checkpoints and writes."""
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_process, args=(kind, target, schema, w, steps, start, out))
             for w in range(4)]
    for p in procs:
        p.start()
    time.sleep(2)  # every process has opened its saver (errors at open are reported too)
    started = time.perf_counter()
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    elapsed = time.perf_counter() - started
    for p in procs:
        p.join(60)
    acked = [cid for r in results for cid in r[1]]
    acked_writes = [t for r in results for t in r[2]]
    errors = sum(r[3] for r in results) + sum(1 for r in results if r[4])
    with open_saver(kind, target, schema) as saver:
        config = {"configurable": {"thread_id": "shared", "checkpoint_ns": ""}}
        tuples = list(saver.list(config))  # type: ignore[arg-type]
    listed = [t.config["configurable"]["checkpoint_id"] for t in tuples]
    write_tasks = [w[0] for t in tuples for w in t.pending_writes or [] if w[1] == "messages"]
    lost = len(set(acked) - set(listed)) + len(set(acked_writes) - set(write_tasks))
    duplicated = (len(listed) - len(set(listed))) + (len(write_tasks) - len(set(write_tasks)))
    return {"acked": len(acked) + len(acked_writes), "lost": lost, "duplicated": duplicated,
            "errors": errors, "seconds": elapsed}


# --- the run -----------------------------------------------------------------------------------


def main() -> int:
    parser = bench_parser(__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and rounds")
    parser.add_argument("--checkpoints", type=int, default=10_000,
                        help="checkpoints of the long thread for (b) (default 10,000)")
    args = parser.parse_args()
    report = Report("LangGraph checkpointers")
    report.header([machine_line(), f"backend: {args.backend}"])
    names = contenders(args.backend)
    repeat, threads, calls, steps = (3, 3, 200, 50) if args.quick else (7, 5, 1000, 150)
    with scratch_database(args, name="langgraph") as scratch, ExitStack() as stack:
        savers = {name: stack.enter_context(open_saver(name, scratch.target, scratch.schema))
                  for name in names}
        rates = graph_steps(savers, repeat, threads)
        report.table(
            f"(a) graph steps (put_writes + put), threads of {STEPS_PER_THREAD} steps",
            ["saver", "steps/s", "vs convostore"],
            [[n, f"{rates[n]:,.0f}", f"{rates['ConvostoreSaver'] / rates[n]:.2f}x"]
             for n in names],
        )
        configs = {}
        for name, saver in savers.items():
            started = time.perf_counter()
            configs[name] = build_long_thread(saver, args.checkpoints, f"long {name}")
            print(f"  built {args.checkpoints:,} checkpoints with {name} in "
                  f"{time.perf_counter() - started:.1f} s", flush=True)
        latency = get_tuple_latency(savers, configs, calls)
        rows = []
        for name in names:
            latest, named = latency[name]
            rows.append([name, f"{statistics.median(latest) * 1e6:,.0f}",
                         f"{percentile(latest, 95) * 1e6:,.0f}",
                         f"{statistics.median(named) * 1e6:,.0f}",
                         f"{percentile(named, 95) * 1e6:,.0f}"])
        report.table(f"(b) get_tuple on a thread of {args.checkpoints:,} checkpoints, us",
                     ["saver", "latest p50", "latest p95", "by id p50", "by id p95"], rows)
        stack.close()
        races = {name: processes(name, scratch.target, scratch.schema, steps)
                 for name in names if name in ("ConvostoreSaver", "SqliteSaver", "PostgresSaver")}
        report.table(
            f"(c) 4 processes x {steps} graph steps on one thread",
            ["saver", "acknowledged", "lost", "duplicated", "errors", "seconds"],
            [[n, r["acked"], r["lost"], r["duplicated"], r["errors"], f"{r['seconds']:.1f}"]
             for n, r in races.items()],
        )
    ours = "ConvostoreSaver"
    for peer in (n for n in names if not n.startswith(ours)):
        report.check(f"graph steps faster than {peer}", rates[ours] > rates[peer],
                     f"{rates[ours]:,.0f} vs {rates[peer]:,.0f} steps/s")
        for i, what in enumerate(("latest", "by id")):
            mine = statistics.median(latency[ours][i])
            theirs = statistics.median(latency[peer][i])
            report.check(f"get_tuple ({what}) faster than {peer}", mine < theirs,
                         f"{mine * 1e6:,.0f} vs {theirs * 1e6:,.0f} us")
    mine_race = races[ours]
    report.check("4 processes: nothing lost or duplicated",
                 mine_race["lost"] == 0 and mine_race["duplicated"] == 0
                 and mine_race["errors"] == 0,
                 f"lost {mine_race['lost']}, duplicated {mine_race['duplicated']}, "
                 f"errors {mine_race['errors']} of {mine_race['acked']}")
    return report.finish()


if __name__ == "__main__":
    raise SystemExit(main())

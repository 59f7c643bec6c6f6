"""Server connections and cost per object when a service builds an integration object per request.

For each integration (the Agents SDK session, the LangChain history, the pydantic-ai history),
1,000 objects are built from one PostgreSQL URL in a loop, as a request handler would, each one
used for one read: a third closed, a third dropped without closing, a third kept open until
the end. The script prints the server's connections of the run (``pg_stat_activity``, by an
``application_name`` of its own) after every 100 objects and once all are closed, and the time
per object against the baseline measured in the same run: objects built on one store opened
once and passed to them.

    python benchmarks/integration_connections.py [--url postgresql://...] [--pool-size 4]

Before issue 19 each object opened a pool of its own and nothing closed it: 30 objects left 60
connections open, and PostgreSQL refused the 60th request with "too many clients".
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import _common  # noqa: F401  (puts this checkout's src first on sys.path)
from _common import bench_parser, scratch_database

from convostore import Sessions
from convostore.integrations.langchain import ConvostoreChatMessageHistory
from convostore.integrations.openai_agents import ConvostoreSession
from convostore.integrations.pydantic_ai import ConvostoreMessageHistory

KINDS: dict[str, Callable[..., Any]] = {
    "openai_agents.ConvostoreSession": ConvostoreSession,
    "langchain.ConvostoreChatMessageHistory": ConvostoreChatMessageHistory,
    "pydantic_ai.ConvostoreMessageHistory": ConvostoreMessageHistory,
}
OBJECTS = 1000


async def read(obj: Any) -> None:
    if isinstance(obj, ConvostoreSession):
        await obj.get_items(limit=1)
    elif isinstance(obj, ConvostoreChatMessageHistory):
        await obj.aget_messages()
    else:
        await obj.aload_messages()


def connections(server: str, app: str) -> int:
    import psycopg

    with psycopg.connect(server) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                           (app,)).fetchone()
    return int(row[0]) if row else 0


def settled(server: str, app: str) -> int:
    deadline = time.monotonic() + 30
    count = connections(server, app)
    while count and time.monotonic() < deadline:
        time.sleep(0.05)
        count = connections(server, app)
    return count


async def per_request(make: Callable[..., Any], store: Any, options: dict[str, Any],
                      server: str, app: str) -> tuple[list[int], float]:
    counts: list[int] = []
    kept: list[Any] = []
    started = time.perf_counter()
    for i in range(OBJECTS):
        obj = make(f"user-{i % 10}", store, **options)
        await read(obj)
        if i % 3 == 0:
            await obj.aclose()
        elif i % 3 == 2:
            kept.append(obj)
        del obj
        if i % 100 == 99:
            counts.append(await asyncio.to_thread(connections, server, app))
    elapsed = time.perf_counter() - started
    for obj in kept:
        await obj.aclose()
    return counts, elapsed / OBJECTS


def main() -> int:
    parser = bench_parser(__doc__ or "")
    parser.add_argument("--pool-size", type=int, default=4)
    args = parser.parse_args()
    args.backend = "postgres"
    with scratch_database(args, name="connections") as scratch:
        assert scratch.schema is not None
        server = scratch.target
        options = {"schema": scratch.schema, "pool_size": args.pool_size}
        print(f"{OBJECTS} objects per integration, pool_size={args.pool_size}, "
              f"on {scratch.where}\n")
        print(f"{'integration':40} {'peak':>5} {'after close':>12} {'ms/object':>10} "
              f"{'baseline ms':>12} {'ratio':>6}")
        failed = False
        for name, make in KINDS.items():
            app = f"cs_bench_{uuid.uuid4().hex[:8]}"
            url = f"{server}?application_name={app}"
            counts, cost = asyncio.run(per_request(make, url, options, server, app))
            after = settled(server, app)
            with Sessions.open(url, **options) as store:
                _, base = asyncio.run(per_request(make, store, {}, server, app))
            peak = max(counts)
            failed |= peak > args.pool_size or after != 0
            print(f"{name:40} {peak:>5} {after:>12} {cost * 1000:>10.2f} {base * 1000:>12.2f} "
                  f"{cost / base:>6.2f}")
            print(f"{'':40} counts every 100: {counts}")
        verdict = "FAIL" if failed else "PASS"
        print(f"\n{verdict}: connections stay within one pool ({args.pool_size}) and are all "
              "closed with the last object")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

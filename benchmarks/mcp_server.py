"""The MCP server (issue 38): a search and a conversation page through the MCP client, against
the same calls in-process.

Builds 100,000 realistic messages (10 conversations of 10,000; ``--messages``,
``--sessions``), builds the search index, then times in interleaved rounds:

1. a search across every conversation (10 hits): ``store.search`` in-process, against the
   ``search_conversations`` tool through the SDK's client connected in-process (no transport:
   the server's own work), and over stdio to a server subprocess (what a desktop client sees);
2. a page of a 10,000-message conversation (limit 50, at most 64 KiB: with tool results of up
   to 20 KB, about 20 messages fit): the newest page and a page from the middle (``before=`` a
   message 5,000 back). In-process: the same records read with
   ``Session.history_records(newest_first=True)`` (as many as the page shows, and the one that
   tells more remain), and the server's page function itself (records plus the quoted text the
   model reads); then the ``read_conversation`` tool in-process and over stdio.

The stdio server is ``create_server(store).run()`` in a subprocess on the same database (the
command takes a URL, not the scratch schema a PostgreSQL run uses; the server is the same).

    python benchmarks/mcp_server.py
    python benchmarks/mcp_server.py --messages 20000 --rounds 10
    python benchmarks/mcp_server.py --backend postgres --url postgresql://postgres@127.0.0.1/test
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from itertools import islice
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

from convostore import ImportItem, Sessions

SERVER = """\
import sys
from convostore import ImportItem, Sessions
from convostore.mcp import create_server
url, schema = sys.argv[1], sys.argv[2] or None
with Sessions.open(url, schema=schema) as store:
    create_server(store).run()
"""


def fill(session: Any, messages: Iterator[dict[str, Any]], batch: int = 500) -> None:
    """Import ``messages`` as one branch, ``batch`` per transaction (``import_messages``), a
    second apart (what ``build_session`` does one transaction a message, faster)."""
    parent: str | None = None
    chunk: list[ImportItem] = []
    for count, message in enumerate(messages):
        chunk.append(ImportItem(message, created_at=1_700_000_000_000 + count * 1000))
        if len(chunk) == batch:
            session.import_messages(chunk, parent_id=parent)
            parent, chunk = chunk[-1].message["id"], []
    if chunk:
        session.import_messages(chunk, parent_id=parent)


def queries(gen: MessageGen, sessions: int, per_session: int, count: int,
            seed: int) -> list[str]:
    """Two-word queries drawn from the stored messages (so most find something)."""
    import re

    rng = random.Random(seed)
    frequent = set(gen.words[:50])
    found: list[str] = []
    while len(found) < count:
        message = gen.message(rng.randrange(per_session), rng.randrange(sessions))
        words = [w for p in message["parts"] if p.get("type") == "text"
                 for w in re.findall(r"[a-z]+", p["text"]) if w not in frequent]
        if len(set(words)) >= 2:
            first = rng.choice(words)
            found.append(f"{first} {rng.choice([w for w in words if w != first])}")
    return found


async def timed_rounds(calls: dict[str, Callable[[int], Awaitable[Any] | Any]],
                       repeat: int) -> dict[str, list[float]]:
    """Seconds of each call in ``repeat`` rounds, the order shuffled each round; call ``i`` of
    a round gets ``i`` (one warm-up round first)."""
    import inspect

    times: dict[str, list[float]] = {name: [] for name in calls}
    shuffle = random.Random(7)
    for i in range(-1, repeat):
        for name in shuffle.sample(list(calls), len(calls)):
            started = time.perf_counter()
            result = calls[name](max(i, 0))
            if inspect.isawaitable(result):
                await result
            if i >= 0:
                times[name].append(time.perf_counter() - started)
    return times


def rows(times: dict[str, list[float]], base: str) -> list[list[str]]:
    """One table row per contender: median, p95, and the median against ``base``'s."""
    middle = statistics.median(times[base])
    return [[name, fmt_s(statistics.median(v)), fmt_s(percentile(v, 95)),
             f"{statistics.median(v) / middle:.1f}x"] for name, v in times.items()]


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)
    import anyio
    from mcp import Client, StdioServerParameters

    from convostore.mcp import create_server
    from convostore.mcp._paging import conversation_page

    report = Report("MCP server: search and a page through the MCP client vs in-process")
    report.header([machine_line(), f"backend {args.backend}, {args.messages:,} messages in "
                   f"{args.sessions} conversations, {args.rounds} rounds"])
    per_session = args.messages // args.sessions
    gen = MessageGen(seed=args.seed)
    with scratch_database(args, name="mcp") as scratch, \
            Sessions.open(scratch.target, schema=scratch.schema) as store:
        for s in range(args.sessions):
            fill(store.session(f"s{s}"), gen.conversation(per_session, s))
            progress(f"s{s}: {per_session:,} messages imported")
        progress("building the search index")
        store.build_search_index()
        ids = [r.message["id"] for r in islice(
            store.session("s0").history_records(newest_first=True), per_session // 2 + 1)]
        middle = ids[-1]
        words = queries(gen, args.sessions, per_session, args.rounds, args.seed)
        env = dict(os.environ)
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
        stdio = StdioServerParameters(
            command=sys.executable, args=["-c", SERVER, scratch.target, scratch.schema or ""],
            env=env)
        session = store.session("s0")

        async def measure() -> tuple[dict[str, list[float]], ...]:
            async with Client(create_server(store)) as local, Client(stdio) as remote:
                def tool(client: Client, name: str,
                         make: Callable[[int], dict[str, Any]]) -> Callable[[int], Any]:
                    async def call(i: int) -> None:
                        result = await client.call_tool(name, make(i))
                        assert not result.is_error, result.content
                    return call

                search = await timed_rounds({
                    "in-process store.search": lambda i: store.search(words[i], limit=10),
                    "MCP client, in-process server": tool(
                        local, "search_conversations", lambda i: {"query": words[i]}),
                    "MCP client, stdio server": tool(
                        remote, "search_conversations", lambda i: {"query": words[i]}),
                }, args.rounds)
                pages = []
                for before in (None, middle):
                    page_args = {"session_id": "s0", "limit": 50}
                    if before is not None:
                        page_args["before"] = before
                    shown = len(conversation_page(session, before, 50).ids) + 1
                    pages.append(await timed_rounds({
                        "in-process history_records": lambda i, b=before, n=shown: list(islice(
                            session.history_records(leaf_id=b, newest_first=True), n)),
                        "in-process page (records + text)": lambda i, b=before:
                            conversation_page(session, b, 50),
                        "MCP client, in-process server": tool(
                            local, "read_conversation", lambda i, a=page_args: a),
                        "MCP client, stdio server": tool(
                            remote, "read_conversation", lambda i, a=page_args: a),
                    }, args.rounds))
                return (search, *pages)

        search, newest, deep = anyio.run(measure)
        page = conversation_page(session, None, 50)
        deep_page = conversation_page(session, middle, 50)
    cols = ["call", "median", "p95", "vs in-process"]
    report.table(f"search across {args.messages:,} messages (10 hits)", cols,
                 rows(search, "in-process store.search"))
    report.table(f"newest page of a {per_session:,}-message conversation (limit 50: "
                 f"{len(page.ids)} messages fit in {page.size():,} bytes)", cols,
                 rows(newest, "in-process history_records"))
    report.table(f"a page {per_session // 2:,} messages back ({len(deep_page.ids)} messages fit "
                 f"in {deep_page.size():,} bytes)", cols,
                 rows(deep, "in-process history_records"))
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())

"""ConvostoreSessionService beside ADK's DatabaseSessionService on the same PostgreSQL.

    python benchmarks/adk.py --url postgresql://postgres@127.0.0.1:5432/test
    python benchmarks/adk.py --url ... --sessions 1000 --events 300     # a quicker run

Needs the ``adk`` and ``postgres`` extras. Each contender gets a scratch database created on
the server of ``--url`` (``adk_bench_<pid>``), dropped at the end: DatabaseSessionService writes
its tables to the default schema, so it cannot share one database with a test run.

- ``DatabaseSessionService``: ADK's own, on ``postgresql+psycopg://`` (psycopg 3, async).
- ``ConvostoreSessionService``: ``convostore.integrations.adk`` on the same server.

Workloads, every contender through the same ``BaseSessionService`` calls:

(a) ``list_sessions(app_name, user_id)`` of one user holding 1,000 and then 10,000 sessions
    (created with ``create_session``, one ``state`` key each); median of 5 calls.
(b) ``get_session`` of a session holding ``--events`` events (3,000; each with 200 characters
    of text and a one-key state delta): whole, and with ``GetSessionConfig(num_recent_events=
    20)``; median of 5 calls.
(c) ``append_event`` of a 200-character event to a session that already holds them: mean of
    200 calls, one after another on the session object the previous call updated.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types

from convostore.integrations.adk import ConvostoreSessionService

TEXT = "The weather in Paris is mild today, with a light breeze from the west. " * 3


def event(n: int) -> Event:
    return Event(invocation_id=f"inv{n}", author="user" if n % 2 else "agent",
                 content=types.Content(role="user", parts=[types.Part(text=TEXT[:200])]),
                 actions=EventActions(state_delta={"turn": n}))


async def median(call: Callable[[], Awaitable[Any]], rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        await call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


async def measure(name: str, service: BaseSessionService, sizes: list[int],
                  events: int) -> dict[str, float]:
    out: dict[str, float] = {}
    created = 0
    for size in sizes:
        while created < size:
            await service.create_session(app_name="bench", user_id="u", session_id=f"s{created}",
                                         state={"n": created})
            created += 1
        out[f"list_sessions {size}"] = await median(
            lambda: service.list_sessions(app_name="bench", user_id="u"))
        print(f"{name}: list_sessions {size}: {out[f'list_sessions {size}']:.2f} ms", flush=True)
    session = await service.create_session(app_name="bench", user_id="long")
    for n in range(events):
        await service.append_event(session, event(n))
    out[f"get_session {events} events"] = await median(
        lambda: service.get_session(app_name="bench", user_id="long", session_id=session.id))
    out[f"get_session {events} events, num_recent_events=20"] = await median(
        lambda: service.get_session(app_name="bench", user_id="long", session_id=session.id,
                                    config=GetSessionConfig(num_recent_events=20)))
    started = time.perf_counter()
    for n in range(200):
        await service.append_event(session, event(events + n))
    out["append_event"] = (time.perf_counter() - started) / 200 * 1000
    for workload, ms in out.items():
        print(f"{name}: {workload}: {ms:.2f} ms", flush=True)
    return out


def scratch(url: str, name: str, create: bool) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        if create:
            conn.execute(f'CREATE DATABASE "{name}"')


def with_database(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="a PostgreSQL URL (a superuser's)")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--only", choices=["adk", "convostore"],
                        help="measure one contender (the other's column is left out)")
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    adk_db, cs_db = f"adk_bench_{os.getpid()}", f"cs_bench_{os.getpid()}"
    scratch(args.url, adk_db, True)
    scratch(args.url, cs_db, True)
    try:
        adk_url = with_database(args.url, adk_db).replace("postgresql://", "postgresql+psycopg://")
        if args.only in (None, "adk"):
            async with DatabaseSessionService(adk_url) as adk:
                results["DatabaseSessionService"] = await measure("adk", adk, args.sessions,
                                                                  args.events)
        if args.only in (None, "convostore"):
            async with ConvostoreSessionService(with_database(args.url, cs_db)) as ours:
                results["ConvostoreSessionService"] = await measure("convostore", ours,
                                                                    args.sessions, args.events)
    finally:
        scratch(args.url, adk_db, False)
        scratch(args.url, cs_db, False)
    names = list(results)
    print("\n| workload (ms) | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    for workload in results[names[0]]:
        cells = " | ".join(f"{results[n][workload]:.2f}" for n in names)
        print(f"| {workload} | {cells} |")


if __name__ == "__main__":
    asyncio.run(main())

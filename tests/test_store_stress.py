"""Many processes, one database: 8 processes x 250 appends into one session, and 8 processes each
writing its own session. Nothing lost, nothing duplicated, one linear chain, no error.

Runs on every backend several processes can share (a SQLite file, PostgreSQL).
"""

from __future__ import annotations

import multiprocessing
from typing import TYPE_CHECKING, Any

import pytest
from _helpers import ids, text

from convostore import Sessions

if TYPE_CHECKING:
    from conftest import BackendSpec

PROCESSES = 8
APPENDS = 250

# several processes writing: connections and locks under contention
pytestmark = [
    pytest.mark.requires("shared_across_processes"),
    pytest.mark.connections, pytest.mark.partitions,
]


def _appender(
    url: str, options: dict[str, Any], session_id: str, worker: int, ready: Any, start: Any,
    out: Any,
) -> None:
    """Append APPENDS messages as fast as possible, each after the active leaf."""
    try:
        with Sessions.open(url, **options) as store:
            s = store.session(session_id)
            ready.put(worker)
            start.wait(60)
            for i in range(APPENDS):
                result = s.append_message(text(f"p{worker}-{i}", f"process {worker} says {i}"))
                if not result.inserted:
                    raise AssertionError(f"p{worker}-{i} was not inserted")
            out.put((worker, None))
    except BaseException as exc:  # reported to the parent, which fails the test
        out.put((worker, repr(exc)))


def _run(spec: BackendSpec, session_of: Any) -> None:
    """Start PROCESSES appenders, release them together, fail if any of them failed."""
    ctx = multiprocessing.get_context("spawn")
    ready, out, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(
            target=_appender,
            args=(spec.url, spec.options, session_of(w), w, ready, start, out),
        )
        for w in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=120)  # every process has opened the store
        start.set()
        results = sorted(out.get(timeout=300) for _ in procs)
    finally:
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
    assert results == [(w, None) for w in range(PROCESSES)]
    assert all(p.exitcode == 0 for p in procs)


def test_eight_processes_append_to_one_session(backend_spec: BackendSpec) -> None:
    with Sessions.open(backend_spec.url, **backend_spec.options):
        pass  # create the schema before the race, as a deployment would
    _run(backend_spec, lambda w: "shared")
    with Sessions.open(backend_spec.url, **backend_spec.options) as store:
        s = store.session("shared")
        history = s.get_history()
        got = ids(history)
        # Every message exactly once, all on the active path: one linear chain.
        assert len(got) == PROCESSES * APPENDS
        assert sorted(got) == sorted(
            f"p{w}-{i}" for w in range(PROCESSES) for i in range(APPENDS)
        )
        assert len(s.get_history_row_stats()) == PROCESSES * APPENDS
        # Each process's messages appear in the order it wrote them.
        for w in range(PROCESSES):
            mine = [m for m in got if m.startswith(f"p{w}-")]
            assert mine == [f"p{w}-{i}" for i in range(APPENDS)]
        # The path above already links every stored message to the one before it; the root's
        # only child is the second message and the leaf has none.
        assert s.get_branches(got[0]) == [history[1]]
        assert s.get_branches(got[-1]) == []
        assert store.storage_stats().messages == PROCESSES * APPENDS


def test_eight_processes_each_write_their_own_session(backend_spec: BackendSpec) -> None:
    with Sessions.open(backend_spec.url, **backend_spec.options):
        pass
    _run(backend_spec, lambda w: f"own-{w}")
    with Sessions.open(backend_spec.url, **backend_spec.options) as store:
        for w in range(PROCESSES):
            assert ids(store.session(f"own-{w}").get_history()) == [
                f"p{w}-{i}" for i in range(APPENDS)
            ]
        summaries = store.list_sessions()
        assert [(x.session_id, x.messages) for x in summaries] == [
            (f"own-{w}", APPENDS) for w in range(PROCESSES)
        ]
        assert store.storage_stats().messages == PROCESSES * APPENDS

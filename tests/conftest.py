"""The conformance suite's fixtures: every test runs against every backend (and both APIs).

- ``backend_spec``: ``sqlite-file``, ``sqlite-memory`` and ``postgres``. PostgreSQL reads its
  server from ``CONVOSTORE_TEST_POSTGRES_URL``; each test gets its own schema, dropped afterwards.
  Without the variable those cases skip, saying why; with it, an unreachable server fails.
- ``open_store(**options)``: opens a store on the backend under test (closed at teardown).
- ``store``: ``open_store()`` with default options.
- ``@pytest.mark.requires("capability")``: skips a test the backend cannot run, by capability,
  never by backend name (see ``CAPABILITIES``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from convostore import Sessions

PG_URL = os.environ.get("CONVOSTORE_TEST_POSTGRES_URL")

# What each backend can do beyond the common API; tests ask by capability.
CAPABILITIES: dict[str, set[str]] = {
    "sqlite-file": {"shared_across_processes", "reopen", "sqlite"},
    "sqlite-memory": set(),
    "postgres": {"shared_across_processes", "reopen", "postgres"},
}


@dataclass
class BackendSpec:
    """How to open (and reopen) the database a test uses."""

    name: str
    url: str
    options: dict[str, Any] = field(default_factory=dict)


def _drop_schema(schema: str) -> None:
    import psycopg

    assert PG_URL is not None
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite-file", "sqlite-memory", "postgres"])
def backend_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendSpec]:
    name = request.param
    marker = request.node.get_closest_marker("requires")
    if marker is not None:
        missing = [c for c in marker.args if c not in CAPABILITIES[name]]
        if missing:
            pytest.skip(f"backend lacks {', '.join(missing)}")
    if name == "sqlite-file":
        yield BackendSpec(name, str(tmp_path / "test.db"))
    elif name == "sqlite-memory":
        yield BackendSpec(name, ":memory:")
    else:
        if not PG_URL:
            pytest.skip("CONVOSTORE_TEST_POSTGRES_URL is not set: no PostgreSQL server to test")
        schema = f"cs_test_{uuid.uuid4().hex[:12]}"
        yield BackendSpec(name, PG_URL, {"schema": schema, "pool_size": 4})
        _drop_schema(schema)


# --- both APIs (issue 8): "async" drives AsyncSessions through a blocking adapter ----------


@pytest.fixture(params=["sync", "async"])
def api(request: pytest.FixtureRequest) -> str:
    """Which API ``open_store`` goes through: ``Sessions`` or ``AsyncSessions`` made blocking.

    Tests marked ``slow`` (scale tests) run through the sync API only: the adapter adds about
    0.2 ms per call, which a 100,000-call test turns into half a minute.
    """
    if request.param == "async" and request.node.get_closest_marker("slow") is not None:
        pytest.skip("slow tests run through the sync API only")
    return str(request.param)


# ------------------------------------------------------------------------------------------


@pytest.fixture
def open_store(backend_spec: BackendSpec, api: str) -> Iterator[Callable[..., Sessions]]:
    """Open stores on the backend under test; every one is closed at teardown."""
    opened: list[Sessions] = []
    from _blocking import blocking_open

    open_: Callable[..., Any] = Sessions.open if api == "sync" else blocking_open

    def opener(**options: Any) -> Sessions:
        store: Sessions = open_(backend_spec.url, **{**backend_spec.options, **options})
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[..., Sessions]) -> Sessions:
    return open_store()


@pytest.fixture
def rows_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts message rows whose content the range reads fetch (``content_rows_by_seq``,
    ``rows_below``: what windowed, newest-first and budgeted reads of a chain use), on any
    backend. Walks that carry content (``suffix``, ``children``, ``roots``) are not counted."""
    from convostore.backends._sql import SqlOps

    counter = [0]
    for name in ("content_rows_by_seq", "rows_below"):
        original = getattr(SqlOps, name)

        def counting(self: SqlOps, *args: Any, _original: Any = original) -> Any:
            rows = _original(self, *args)
            counter[0] += len(rows)
            return rows

        monkeypatch.setattr(SqlOps, name, counting)
    yield counter

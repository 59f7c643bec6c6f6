"""The conformance suite's fixtures: every test runs against every backend (and both APIs).

- ``backend_spec``: ``sqlite-file``, ``sqlite-memory`` and ``postgres``. PostgreSQL reads its
  server from ``CONVOSTORE_TEST_POSTGRES_URL``; each test gets its own schema, dropped afterwards.
  Without the variable those cases skip, saying why; with it, an unreachable server fails.
- ``open_store(**options)``: opens a store on the backend under test (closed at teardown).
- ``store``: ``open_store()`` with default options.
- ``@pytest.mark.requires("capability")``: skips a test the backend cannot run, by capability,
  never by backend name (see ``CAPABILITIES``).

Tests speak through the public API; the few that must look at storage underneath (stored
rows, raw SQL in a scope, a pool, a connection) do it through ``_storage.py`` only.
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
PGBOUNCER_URL = os.environ.get("CONVOSTORE_TEST_PGBOUNCER_URL")
"""The same server through PgBouncer in transaction pooling mode (``.ci/run`` starts one)."""

# What each backend can do beyond the common API. Tests ask by capability, never by backend
# name (STYLE §7): ``@pytest.mark.requires("schemas")`` skips where the backend lacks it.
#
# - shared_across_processes: several processes (and stores) may open the database at once.
# - reopen: the database outlives the store: a store opened on it again (or a plain driver
#   connection of the test's own) sees what the last one wrote. Not ``:memory:``.
# - dynamic_column_types: a column keeps a value of any type (SQLite's manifest typing), as the
#   reference system relied on for its dates (``'someday'`` in a DATETIME column).
# - connection_pool: the store draws connections from a pool: its own (``pool_size=``), which
#   it closes, or the user's (``pool=``), which it leaves open.
# - schemas: a store lives in a named schema (``schema=``); one database holds many stores.
# - schema_file: the engine ships its DDL as a file an administrator runs, so that a role
#   without rights to create tables can use the store.
# - url_password: the URL carries a login whose password must never show.
# - direct_connections: the store's connections are the server's (no pooler between), so
#   pg_stat_activity counts a pool's connections.
# - server_locks: writers serialise on server-side locks (a table lock for the store, a row
#   lock for the session) that another connection (the test's own) can hold.
# - search_table_probe: write scopes ask whether the search table exists until a scope of the
#   store has seen it.
# - postgresql_dialect: the database speaks PostgreSQL's SQL; for tests whose own SQL or
#   driver checks are PostgreSQL's (catalogs, pg_locks, psycopg's error classes).
#
# Names an engine declares itself (``store.capabilities``, see ``ENGINE_DECLARED``) are checked
# against this table each time a test opens a store, so the table cannot drift from the engines.
CAPABILITIES: dict[str, frozenset[str]] = {
    "sqlite-file": frozenset({"shared_across_processes", "reopen", "dynamic_column_types"}),
    "sqlite-memory": frozenset({"dynamic_column_types"}),
    "postgres": frozenset({
        "shared_across_processes", "reopen", "connection_pool", "schemas", "schema_file",
        "url_password", "server_locks", "search_table_probe", "postgresql_dialect",
    }),
}
# The same server through a transaction pooler, and with hash-partitioned tables: the whole
# suite runs on both (a pooler keeps no session state; partitions change only the DDL).
# Through a pooler the server sees the pooler's connections, not the client's: a test that
# counts a pool's connections in pg_stat_activity needs "direct_connections".
CAPABILITIES["postgres"] = CAPABILITIES["postgres"] | {"direct_connections"}
CAPABILITIES["postgres-pgbouncer"] = CAPABILITIES["postgres"] - {"direct_connections"}
CAPABILITIES["postgres-partitioned"] = CAPABILITIES["postgres"] - {"schema_file"}

# Capability names the engines declare through ``Sessions.capabilities`` today. An engine that
# declares more names this table knows is checked on those too (see ``_check_declared``).
ENGINE_DECLARED = frozenset({"shared_across_processes"})

@dataclass
class BackendSpec:
    """How to open (and reopen) the database a test uses."""

    name: str
    url: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def capabilities(self) -> frozenset[str]:
        """What the backend can do beyond the common API (see ``CAPABILITIES``)."""
        return CAPABILITIES[self.name]

    @property
    def dialect(self) -> str:
        """The SQL dialect of the database, ``"postgresql"`` or ``"sqlite"``, read from the
        ``postgresql_dialect`` capability: for the few tests that write tables of their own
        (test_legacy.py creates the reference system's); it picks what they write, never
        whether they run."""
        return "postgresql" if "postgresql_dialect" in self.capabilities else "sqlite"


def _check_declared(spec: BackendSpec, declared: frozenset[str]) -> None:
    """Fail when the table and the engine disagree on a capability the engine declares.

    Compared: the names in ``ENGINE_DECLARED``, and any other name the engine declares that
    the table knows (an engine declaring more is checked on it without a change here).
    """
    known = frozenset().union(*CAPABILITIES.values()) | ENGINE_DECLARED
    compared = (ENGINE_DECLARED | declared) & known
    table = spec.capabilities & compared
    assert declared & compared == table, (
        f"conftest.CAPABILITIES[{spec.name!r}] says {sorted(table)}, the engine declares "
        f"{sorted(declared & compared)}"
    )


def _drop_schema(schema: str) -> None:
    import psycopg

    assert PG_URL is not None
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


BACKENDS = [
    "sqlite-file", "sqlite-memory", "postgres", "postgres-pgbouncer", "postgres-partitioned",
]


@pytest.fixture(params=BACKENDS)
def backend_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendSpec]:
    name = request.param
    # every ``requires`` mark counts: a module's ``pytestmark`` and the test's own
    needed = [c for marker in request.node.iter_markers("requires") for c in marker.args]
    missing = sorted({c for c in needed if c not in CAPABILITIES[name]})
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
        options: dict[str, Any] = {"schema": schema, "pool_size": 4}
        url = PG_URL
        if name == "postgres-pgbouncer":
            if not PGBOUNCER_URL:
                pytest.skip("CONVOSTORE_TEST_PGBOUNCER_URL is not set: no PgBouncer to test")
            url, options["transaction_pooler"] = PGBOUNCER_URL, True
        elif name == "postgres-partitioned":
            options["partitions"] = 4
        yield BackendSpec(name, url, options)
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
        _check_declared(backend_spec, store.capabilities)
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
    ``newest_rows``, ``rows_below``: what windowed, newest-first and budgeted reads of a chain
    use), on any backend. Walks that carry content (``suffix``, ``children``, ``roots``) are not
    counted."""
    from convostore.backends._sql import SqlOps

    counter = [0]
    for name in ("content_rows_by_seq", "newest_rows", "rows_below"):
        original = getattr(SqlOps, name)

        def counting(self: SqlOps, *args: Any, _original: Any = original) -> Any:
            rows = _original(self, *args)
            counter[0] += len(rows[0] if isinstance(rows, tuple) else rows)
            return rows

        monkeypatch.setattr(SqlOps, name, counting)
    yield counter

"""The conformance suite's fixtures, and its matrix: each test runs where it can differ.

Store configurations (``backend_spec``) and APIs (``api``), chosen per test at collection:

- ``sqlite-file`` and ``postgres``, through the sync API: every test that takes a store (the
  behaviour suite runs in full on both engines).
- ``@pytest.mark.async_api``: also through the async API (``AsyncSessions`` behind the blocking
  adapter of ``_blocking.py``), on each configuration the test runs on. A representative slice:
  every method of the async faces the suite calls is called by at least two of its tests
  (chosen by a greedy cover of the calls made when the whole suite ran through both APIs);
  ``test_aio_parity.py`` and ``test_aio.py`` cover the async faces as a whole.
- ``@pytest.mark.connections``: also on ``sqlite-memory`` (one connection shared by every
  thread) and ``postgres-pgbouncer`` (a transaction pooler: no prepared statements, no session
  state kept on a server connection).
- ``@pytest.mark.partitions``: also on ``postgres-partitioned`` (hash-partitioned tables: other
  keys, indexes and locks).
- ``@pytest.mark.requires("capability")``: only on the configurations that have it (see
  ``CAPABILITIES``), never by name. A test no configuration can run skips, saying which
  capability is missing.

PostgreSQL reads its server from ``CONVOSTORE_TEST_POSTGRES_URL`` and PgBouncer from
``CONVOSTORE_TEST_PGBOUNCER_URL``; each test gets its own schema, dropped afterwards. Without a
variable, the configurations (and tests marked ``postgres_server``) that need it are not
collected, and the run's header says which variable to set; nothing skips for an absent server.
With ``CI=true`` both variables must be set, and an unreachable server fails its tests.

- ``open_store(**options)``: opens a store on the configuration under test (closed at teardown).
- ``store``: ``open_store()`` with default options.

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
# The same server through a transaction pooler, and with hash-partitioned tables: the slices
# marked ``connections`` and ``partitions`` run there (a pooler keeps no session state;
# partitions change only the DDL). Through a pooler the server sees the pooler's connections,
# not the client's: a test that counts a pool's connections in pg_stat_activity needs
# "direct_connections". "transaction_pooler" and "partitioned_tables" name the configurations'
# own subject, for the tests that check what is particular to each.
CAPABILITIES["postgres"] = CAPABILITIES["postgres"] | {"direct_connections"}
CAPABILITIES["postgres-pgbouncer"] = (
    CAPABILITIES["postgres"] - {"direct_connections"} | {"transaction_pooler"}
)
CAPABILITIES["postgres-partitioned"] = (
    CAPABILITIES["postgres"] - {"schema_file"} | {"partitioned_tables"}
)

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


# --- the matrix -----------------------------------------------------------------------------

BACKENDS = [
    "sqlite-file", "sqlite-memory", "postgres", "postgres-pgbouncer", "postgres-partitioned",
]
EVERY_TEST = frozenset({"sqlite-file", "postgres"})
SLICES = {"sqlite-memory": "connections", "postgres-pgbouncer": "connections",
          "postgres-partitioned": "partitions"}
"""The configurations beyond ``EVERY_TEST``, and the marker that brings a test to each."""


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def available(name: str) -> bool:
    """Whether this run has the server the configuration ``name`` needs."""
    if name.startswith("sqlite"):
        return True
    return bool(PG_URL) and (name != "postgres-pgbouncer" or bool(PGBOUNCER_URL))


def configurations(node: Any) -> tuple[list[str], str | None]:
    """The configurations a test (a collected function's definition) runs on, and when there
    is none, why: the capabilities its ``requires`` marks name that none of them has."""
    marks = {marker.name for marker in node.iter_markers()}
    needed = {c for marker in node.iter_markers("requires") for c in marker.args}
    wanted = [n for n in BACKENDS if n in EVERY_TEST or SLICES.get(n) in marks]
    able = [n for n in wanted if needed <= CAPABILITIES[n]]
    if able:
        return able, None
    return [], "no store configuration has " + ", ".join(sorted(needed))


def apis(node: Any) -> list[str]:
    """``sync``, and ``async`` for the slice marked ``async_api``. Tests marked ``slow`` (scale
    tests) run through the sync API only: the adapter adds about 0.2 ms per call, which a
    100,000-call test turns into half a minute."""
    if node.get_closest_marker("async_api") and not node.get_closest_marker("slow"):
        return ["sync", "async"]
    return ["sync"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    if "backend_spec" not in names:
        if "api" in names:
            metafunc.parametrize("api", apis(metafunc.definition), indirect=True)
        return
    found, gap = configurations(metafunc.definition)
    marks = []
    if gap is not None:  # a real capability gap: one skip with its reason, not a silent nothing
        found, marks = ["sqlite-file"], [pytest.mark.skip(reason=gap)]
    if "api" in names:
        metafunc.parametrize(("backend_spec", "api"), [
            pytest.param(n, a, id=f"{n}-{a}", marks=marks)
            for n in found for a in apis(metafunc.definition)
        ], indirect=True)
    else:
        metafunc.parametrize("backend_spec", [
            pytest.param(n, id=n, marks=marks) for n in found
        ], indirect=True)


def _server_absent(item: pytest.Item) -> bool:
    """Whether ``item`` needs a server this run has none of (it is then not collected)."""
    callspec = getattr(item, "callspec", None)
    # only a test parametrized by configuration needs its server (other parameters need none)
    if callspec is not None and "backend_spec" in callspec.params \
            and not available(str(callspec.params["backend_spec"])):
        return True
    return item.get_closest_marker("postgres_server") is not None and not PG_URL


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    absent = [item for item in items if _server_absent(item)]
    if absent:
        items[:] = [item for item in items if not _server_absent(item)]
        config.hook.pytest_deselected(items=absent)


def pytest_configure(config: pytest.Config) -> None:
    if _in_ci() and not (PG_URL and PGBOUNCER_URL):
        raise pytest.UsageError(
            "CI=true runs every configuration: set CONVOSTORE_TEST_POSTGRES_URL and "
            "CONVOSTORE_TEST_PGBOUNCER_URL (.ci/run does)"
        )


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not PG_URL:
        return ["PostgreSQL: not collected; set CONVOSTORE_TEST_POSTGRES_URL to a server's URL "
                "to run its tests (PgBouncer's too: CONVOSTORE_TEST_PGBOUNCER_URL)"]
    if not PGBOUNCER_URL:
        return ["PgBouncer: not collected; set CONVOSTORE_TEST_PGBOUNCER_URL to a transaction "
                "pooler in front of the same server to run the connections slice through it"]
    return []


@pytest.fixture
def backend_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendSpec]:
    """The configuration under test (parametrized by ``pytest_generate_tests``)."""
    name = request.param
    if name == "sqlite-file":
        yield BackendSpec(name, str(tmp_path / "test.db"))
    elif name == "sqlite-memory":
        yield BackendSpec(name, ":memory:")
    else:
        assert PG_URL is not None
        schema = f"cs_test_{uuid.uuid4().hex[:12]}"
        options: dict[str, Any] = {"schema": schema, "pool_size": 4}
        url = PG_URL
        if name == "postgres-pgbouncer":
            assert PGBOUNCER_URL is not None
            url, options["transaction_pooler"] = PGBOUNCER_URL, True
        elif name == "postgres-partitioned":
            options["partitions"] = 4
        yield BackendSpec(name, url, options)
        _drop_schema(schema)


@pytest.fixture
def api(request: pytest.FixtureRequest) -> str:
    """Which API ``open_store`` goes through: ``Sessions`` or ``AsyncSessions`` made blocking
    (``async`` only for the slice marked ``async_api``, see ``apis``)."""
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

"""Beyond one server: row locks for per-session order, a transaction pooler, partitioned tables.

The conformance suite's ``connections`` and ``partitions`` slices also run through PgBouncer
and on partitioned tables (the ``postgres-pgbouncer`` and ``postgres-partitioned``
configurations of ``conftest.py``); these tests check what is particular to each: the
options' errors, the catalog a partitioned store builds, which locks a writer takes and waits
for.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from _helpers import ids, text
from conftest import PG_URL, _drop_schema

from convostore import BackendError, InvalidURL, Sessions

if TYPE_CHECKING:
    from conftest import BackendSpec

pytestmark = pytest.mark.requires("postgresql_dialect")


def _admin() -> Any:
    import psycopg

    assert PG_URL is not None
    return psycopg.connect(PG_URL, autocommit=True)


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"cs_test_{uuid.uuid4().hex[:12]}"
    yield name
    _drop_schema(name)


def _partitions(schema: str, table: str) -> list[str]:
    with _admin() as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace "
            "WHERE n.nspname = %s AND p.relname = %s ORDER BY c.relname",
            (schema, table),
        ).fetchall()
    return [r[0] for r in rows]


# --- options --------------------------------------------------------------------------------


@pytest.mark.parametrize("option", [{"partitions": 4}, {"transaction_pooler": True}])
def test_postgres_only_options_are_refused_by_sqlite(tmp_path: Any, option: dict[str, Any]
                                                      ) -> None:
    name = next(iter(option))
    with pytest.raises(InvalidURL, match=f"{name}= applies to PostgreSQL only"):
        Sessions.open(str(tmp_path / "x.db"), **option)
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(
    ("partitions", "error", "match"),
    [(1, ValueError, "from 2 to 1024"), (1025, ValueError, "from 2 to 1024"),
     (True, TypeError, "must be an int"), ("4", TypeError, "must be an int")],
)
def test_bad_partition_counts_are_refused_before_anything_is_created(
    spec_url: str, schema: str, partitions: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        Sessions.open(spec_url, schema=schema, partitions=partitions)
    with _admin() as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    assert found is None


@pytest.fixture
def spec_url(backend_spec: BackendSpec) -> str:
    """The direct server URL (these tests build their own stores; unmarked, they run on the
    ``postgres`` configuration only)."""
    assert PG_URL is not None
    return PG_URL


# --- partitions -----------------------------------------------------------------------------


def test_a_partitioned_store_partitions_every_session_keyed_table(spec_url: str, schema: str
                                                                  ) -> None:
    with Sessions.open(spec_url, schema=schema, partitions=3) as store:
        s = store.session("a")
        s.append_message(text("m1", "partitioned words"))
        assert [r.id for r in s.search("partitioned")] == ["m1"]  # creates the search table
    for table in ("convostore_messages", "convostore_message_chunks", "convostore_compactions",
                  "convostore_attachment_refs", "convostore_session_state", "convostore_fts"):
        assert _partitions(schema, table) == [f"{table}_p{i}" for i in range(3)], table
    # the payload tables, keyed by hash and shared by sessions, stay whole
    assert _partitions(schema, "convostore_attachments") == []
    with _admin() as conn:
        where = conn.execute(
            f'SELECT tableoid::regclass::text FROM "{schema}".convostore_messages'
        ).fetchall()
    assert len(where) == 1 and where[0][0].split(".")[-1].startswith("convostore_messages_p")


def test_reopening_keeps_the_partitioning_and_refuses_another(spec_url: str, schema: str
                                                               ) -> None:
    with Sessions.open(spec_url, schema=schema, partitions=4) as store:
        store.session("a").append_message(text("m1", "x"))
    with Sessions.open(spec_url, schema=schema) as store:  # adopts what the store has
        s = store.session("b")
        s.append_message(text("m2", "words here"))
        assert [r.id for r in store.search("words")] == ["m2"]
    assert len(_partitions(schema, "convostore_fts")) == 4  # created later, still partitioned
    with pytest.raises(BackendError, match="created with 4 partitions"):
        Sessions.open(spec_url, schema=schema, partitions=8)


def test_partitions_cannot_be_added_to_a_plain_store(spec_url: str, schema: str) -> None:
    Sessions.open(spec_url, schema=schema).close()
    with pytest.raises(BackendError, match="plain \\(unpartitioned\\) tables"):
        Sessions.open(spec_url, schema=schema, partitions=4)


# --- locks ----------------------------------------------------------------------------------


@pytest.mark.partitions
@pytest.mark.requires("server_locks")
def test_a_writer_waits_for_the_sessions_row_lock_and_takes_no_advisory_lock(
    backend_spec: BackendSpec,
) -> None:
    """The session's order is a row lock on its state row: a writer of that session waits while
    another connection holds the row, a writer of another session does not, and no writer
    takes an advisory lock."""
    schema = backend_spec.options["schema"]
    with Sessions.open(backend_spec.url, **backend_spec.options) as store:
        a, b = store.session("a"), store.session("b")
        a.append_message(text("a1", "x"))  # the state row exists from here
        done: list[str] = []

        def write(session: Any, mid: str) -> None:
            session.append_message(text(mid, "y"))
            done.append(mid)

        with _admin() as holder:
            holder.execute("BEGIN")
            holder.execute(
                f'SELECT 1 FROM "{schema}".convostore_session_state WHERE session_id = %s '
                "FOR UPDATE", ("a",),
            )
            waiting = threading.Thread(target=write, args=(a, "a2"))
            waiting.start()
            write(b, "b1")  # another session's writer passes
            deadline = time.monotonic() + 10
            blocked: list[int] = []
            while not blocked:  # the writer of 'a', waiting for this connection
                blocked = [r[0] for r in holder.execute(
                    "SELECT pid FROM pg_stat_activity "
                    "WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))"
                ).fetchall()]
                assert time.monotonic() < deadline, "the writer of 'a' never waited"
                time.sleep(0.01)
            assert done == ["b1"]
            advisory = holder.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = ANY(%s)",
                (blocked,),
            ).fetchone()[0]
            holder.execute("COMMIT")
        waiting.join(10)
        assert done == ["b1", "a2"]
        assert ids(a.get_history()) == ["a1", "a2"]
    assert advisory == 0


@pytest.mark.partitions
@pytest.mark.requires("server_locks")
def test_a_change_still_committing_holds_readers_back_but_no_other_sessions_writer(
    backend_spec: BackendSpec,
) -> None:
    """Writers of different sessions commit in parallel, so a change may get its cursor before
    one drawn later commits: no reader moves past it while it may still commit, and a writer
    of another session never waits for it."""
    schema = backend_spec.options["schema"]
    with Sessions.open(backend_spec.url, **backend_spec.options) as store:
        a, b = store.session("a"), store.session("b")
        a.append_message(text("a1", "x"))
        b.append_message(text("b1", "x"))
        start = store.change_cursor()
        with _admin() as holder:
            holder.execute("BEGIN")
            # The append of a2 waits on its directory row, which it writes after its change.
            holder.execute(
                f'SELECT 1 FROM "{schema}".convostore_sessions WHERE session_id = %s '
                "FOR UPDATE", ("a",),
            )
            waiting = threading.Thread(target=a.append_message, args=(text("a2", "y"),))
            waiting.start()
            deadline = time.monotonic() + 10
            while not holder.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity "
                "WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid)))"
            ).fetchone()[0]:
                assert time.monotonic() < deadline, "the writer of 'a' never waited"
                time.sleep(0.01)
            b.append_message(text("b2", "y"))  # commits while a2 is in flight
            early = [c.message_id for c in store.changes(since=start)]
            head = store.change_cursor()
            holder.execute("COMMIT")
            waiting.join(10)
        late = store.changes(since=start)
        assert early == []  # b2 committed, but a2 (a lower cursor) might still have
        assert head == start
        assert [c.message_id for c in late] == ["a2", "b2"]
        assert [c.message_id for c in store.changes(since=late[0].cursor)] == ["b2"]


@pytest.mark.connections
@pytest.mark.partitions
@pytest.mark.requires("server_locks", "shared_across_processes")
def test_writers_of_one_session_through_two_stores_form_one_chain(backend_spec: BackendSpec
                                                                  ) -> None:
    with Sessions.open(backend_spec.url, **backend_spec.options) as one, \
            Sessions.open(backend_spec.url, **backend_spec.options) as two:
        def worker(store: Sessions, k: int) -> None:
            for i in range(25):
                store.session("new").append_message(text(f"{k}-{i}", "y"))

        # a session with no state row yet: the first writers race to create it
        threads = [threading.Thread(target=worker, args=(st, k))
                   for k, st in enumerate([one, two, one, two])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stats = two.session("new").get_history_row_stats()
        assert len(stats) == 100 and len({r.id for r in stats}) == 100


# --- a transaction pooler -------------------------------------------------------------------


@pytest.mark.connections
@pytest.mark.requires("transaction_pooler")
def test_through_a_transaction_pooler_no_schema_is_left_on_server_connections(
    backend_spec: BackendSpec,
) -> None:
    """Other clients of the pooler's server connections never inherit the store's schema."""
    import psycopg

    with Sessions.open(backend_spec.url, **backend_spec.options) as store:
        for i in range(20):
            store.session(f"s{i}").append_message(text(f"m{i}", "x"))
            assert store.session(f"s{i}").get_message(f"m{i}") is not None
        paths = set()
        with psycopg.connect(backend_spec.url, prepare_threshold=None) as other:
            for _ in range(40):
                paths.add(other.execute("SHOW search_path").fetchone()[0])  # type: ignore[index]
                other.commit()
    # Other tests' stores may pass (a pooler shares its server connections); never this one's.
    assert not [p for p in paths if backend_spec.options["schema"] in p]

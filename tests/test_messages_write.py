"""The write path: append, update, upsert, delete, clear, import."""

from __future__ import annotations

import gc
import json
import math
import weakref
from collections.abc import Callable
from typing import Any

import pytest
from _helpers import ids, text
from _storage import single_connection, stored_row

from convostore import (
    ChangeEvent,
    InvalidMessage,
    InvalidMessageType,
    Message,
    Sessions,
)
from convostore.messages._tree import kept_ancestors

# write scopes: transactions, locks, concurrent writers
pytestmark = [pytest.mark.connections, pytest.mark.partitions]


def test_appends_a_chain_follows_the_latest_leaf_and_round_trips(store: Sessions) -> None:
    s = store.session()
    msgs = [text("m1", "one"), text("m2", "two", "assistant"), text("m3", "three")]
    for m in msgs:
        r = s.append_message(m)
        assert r.inserted and r.message == m
    assert s.get_history() == msgs
    assert s.get_latest_leaf() == msgs[2]
    assert [r.id for r in s.get_history_row_stats()] == ["m1", "m2", "m3"]
    assert list(s.history()) == msgs


def test_is_idempotent_on_ids_and_returns_the_stored_row(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("dup", "first"))
    r = s.append_message(text("dup", "second"))
    assert not r.inserted
    assert r.message == text("dup", "first")
    assert s.get_history() == [text("dup", "first")]


def test_branches_with_an_explicit_parent_and_lists_siblings(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("a", "root"))
    s.append_message(text("b1", "first answer", "assistant"))
    s.append_message(text("b2", "second answer", "assistant"), parent_id="a")
    assert ids(s.get_branches("a")) == ["b1", "b2"]
    assert ids(s.get_history()) == ["a", "b2"]
    assert ids(s.get_history(leaf_id="b1")) == ["a", "b1"]
    assert s.get_latest_leaf() == text("b2", "second answer", "assistant")


def test_null_parent_is_a_root_and_unknown_parents_fall_back_to_root(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("r1", "x"))
    s.append_message(text("r2", "y"), parent_id=None)
    assert ids(s.get_history()) == ["r2"]
    s.append_message(text("r3", "z"), parent_id="nope")
    assert ids(s.get_history()) == ["r3"]
    s.append_message(text("r4", "w"), parent_id="")
    assert ids(s.get_history()) == ["r4"]


def test_a_parent_from_another_session_is_a_root(store: Sessions) -> None:
    store.session("other").append_message(text("foreign", "x"))
    s = store.session("mine")
    s.append_message(text("a", "x"))
    s.append_message(text("b", "y"), parent_id="foreign")
    assert ids(s.get_history()) == ["b"]


def test_update_replaces_content_in_place_and_returns_none_for_unknown(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("u1", "before"))
    s.append_message(text("u2", "after it"))
    stored = s.update_message(text("u1", "after"))
    assert stored == text("u1", "after")
    assert s.get_history() == [text("u1", "after"), text("u2", "after it")]
    assert s.update_message(text("ghost", "x")) is None
    assert s.get_message("ghost") is None
    assert store.storage_stats().messages == 2


def test_update_never_moves_a_message(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("a", "1"))
    s.append_message(text("b", "2"))
    s.append_message(text("c", "3"))
    s.update_message(text("a", "changed"))
    assert ids(s.get_history()) == ["a", "b", "c"]
    assert s.get_latest_leaf() is not None and s.get_latest_leaf()["id"] == "c"  # type: ignore[index]


def test_unchanged_update_writes_nothing_and_emits_nothing(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("n", "same"))
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    assert s.update_message(text("n", "same")) == text("n", "same")
    assert events == []


def test_upsert_appends_new_and_updates_existing_without_moving(store: Sessions) -> None:
    s = store.session()
    r = s.upsert_message(text("x", "1"))
    assert r.inserted
    s.append_message(text("y", "2"))
    r = s.upsert_message(text("x", "1b"), parent_id=None)
    assert not r.inserted and r.message == text("x", "1b")
    assert s.get_history() == [text("x", "1b"), text("y", "2")]


def test_splices_children_to_the_grandparent_on_mid_chain_delete(store: Sessions) -> None:
    s = store.session()
    for i in (1, 2, 3):
        s.append_message(text(f"s{i}", str(i)))
    s.delete_messages(["s2"])
    assert ids(s.get_history()) == ["s1", "s3"]
    s.delete_messages(["s3"])
    assert ids(s.get_history()) == ["s1"]
    assert s.get_latest_leaf() == text("s1", "1")


@pytest.mark.slow
def test_deleting_a_run_longer_than_10000_keeps_older_history(store: Sessions) -> None:
    """Issue 18.3: the splice walk had a 10,000-step cap, so the survivor of a longer deleted
    run pointed at a deleted row and the history lost everything older."""
    s = store.session()
    n = 10_050
    for i in range(n):
        s.append_message(text(f"d{i}", "x"))
    s.delete_messages([f"d{i}" for i in range(1, n - 1)])
    assert ids(s.get_history()) == ["d0", f"d{n - 1}"]
    assert [m["id"] for m in s.get_branches("d0")] == [f"d{n - 1}"]


def test_splice_resolves_each_deleted_run_once_and_survives_cycles() -> None:
    """Issue 18.3: the nearest kept ancestor of every doomed id, with no step limit, and a
    cycle among doomed ids (only verbatim imports can make one) ends the walk."""
    chain: dict[str, str | None] = {f"c{i}": (f"c{i - 1}" if i else "keep") for i in range(30_000)}
    kept = kept_ancestors(chain)
    assert set(kept.values()) == {"keep"} and len(kept) == 30_000
    assert kept_ancestors({"a": "b", "b": "a", "c": "a"}) == {"a": None, "b": None, "c": None}
    assert kept_ancestors({"a": None, "b": "a"}) == {"a": None, "b": None}


@pytest.mark.async_api
def test_delete_splices_a_child_out_of_an_imported_parent_cycle(store: Sessions) -> None:
    s = store.session()
    s.import_message(text("a", "a"), parent_id="b")  # verbatim parents may form a cycle
    s.import_message(text("b", "b"), parent_id="a")
    s.import_message(text("k", "k"), parent_id="a")
    s.delete_messages(["a", "b"])
    assert ids(s.get_history(leaf_id="k")) == ["k"]
    assert ids(s.get_roots()) == ["k"]


def test_bulk_deletes_spans_and_rewires_branch_boundaries(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("root", "r"))
    s.append_message(text("l1", "l1"))
    s.append_message(text("l2", "l2"))
    s.append_message(text("leftLeaf", "ll"))
    s.append_message(text("right", "rr"), parent_id="root")
    s.delete_messages(["l1", "l2"])
    assert ids(s.get_history(leaf_id="leftLeaf")) == ["root", "leftLeaf"]
    s.delete_messages(["root", "leftLeaf"])
    assert ids(s.get_history(leaf_id="right")) == ["right"]
    assert ids(s.get_history()) == ["right"]


def test_branches_and_splices_match_a_model_on_random_trees(store: Sessions) -> None:
    """Plain appends (kept out of the parent index) and branches (in it) mix with deletes,
    re-appends of deleted ids and verbatim imports; children and paths always match a model."""
    import random

    rng = random.Random(11)
    s = store.session("model")
    parent: dict[str, str | None] = {}  # the model: id -> parent, in write order
    next_id = 0

    def check() -> None:
        for mid in list(parent)[-12:] + ["never-written"]:
            expected = [c for c in parent if parent[c] == mid]
            assert ids(s.get_branches(mid)) == expected, mid
        leaf = next(reversed(parent), None)
        path: list[str] = []
        while leaf is not None and leaf in parent and leaf not in path:
            path.append(leaf)
            leaf = parent[leaf]
        assert ids(s.get_history()) == path[::-1]

    for step in range(120):
        op = rng.random()
        live = list(parent)
        if op < 0.45 or not live:  # plain append: the parent is the newest row
            mid = f"m{next_id}"
            next_id += 1
            s.append_message(text(mid, "x"))
            parent[mid] = live[-1] if live else None
        elif op < 0.65:  # a branch under any row, or a new root
            mid = f"m{next_id}"
            next_id += 1
            under = rng.choice([*live, None])
            s.append_message(text(mid, "x"), parent_id=under)
            parent[mid] = under
        elif op < 0.72:  # verbatim import naming the newest row, an older one or a future id
            mid = f"m{next_id}"
            next_id += 1
            under = rng.choice([live[-1], rng.choice(live), f"m{next_id + 1}"])
            s.import_message(text(mid, "x"), parent_id=under, created_at=step)
            parent[mid] = under
        elif op < 0.80:  # re-append a deleted id: it comes back as the newest row
            gone = [f"m{i}" for i in range(next_id) if f"m{i}" not in parent]
            if not gone:
                continue
            mid = rng.choice(gone)
            s.append_message(text(mid, "x"))
            parent[mid] = live[-1]
        else:  # delete one to three rows; their children move up to the nearest survivor
            doomed = set(rng.sample(live, min(len(live), rng.randint(1, 3))))
            s.delete_messages(sorted(doomed))
            before = dict(parent)
            for mid in doomed:
                del parent[mid]
            for child, up in parent.items():
                while up in doomed:
                    up = before[up]
                parent[child] = up
        check()


def test_an_old_parent_index_is_replaced_and_old_rows_still_branch(tmp_path: Any) -> None:
    """A version-2 database (every row in a full parent index) migrates to the partial one;
    rows written before and after the migration are found as children alike."""
    import sqlite3

    from _helpers import V2_TREE_ROWS, check_v2_tree_after_migration

    from convostore.backends.sqlite import MIGRATIONS

    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path)
    for step in MIGRATIONS.steps[:2]:
        for sql in step:
            conn.execute(sql)
    conn.execute("CREATE TABLE convostore_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO convostore_meta VALUES ('schema_version', '2')")
    conn.executemany(
        "INSERT INTO convostore_messages (session_id, id, seq, parent_id, role, created_at, "
        "content) VALUES ('', ?, ?, ?, 'user', 1, ?)",
        V2_TREE_ROWS,
    )
    conn.commit()
    conn.close()
    with Sessions.open(str(path)) as store:
        check_v2_tree_after_migration(store.session())
    conn = sqlite3.connect(path)
    indexes = dict(conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = "
        "'convostore_messages' AND sql IS NOT NULL"
    ).fetchall())
    conn.close()
    assert "convostore_messages_parent" not in indexes
    assert indexes["convostore_messages_branch"].endswith("WHERE chained = 0")


def test_child_lookups_search_indexes_never_scan_the_session(tmp_path: Any) -> None:
    """get_branches and the splice of a delete find children through indexes only."""
    store = Sessions.open(str(tmp_path / "plan.db"))
    s = store.session()
    for i in range(30):
        s.append_message(text(f"m{i}", "x"))
    s.append_message(text("fork", "x"), parent_id="m3")
    conn = single_connection(store)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    s.get_branches("m3")
    s.delete_messages(["m5", "m6"])
    conn.set_trace_callback(None)
    selects = [q for q in statements if q.lstrip().upper().startswith(("SELECT", "WITH"))]
    assert selects
    # The session's active leaf (the leaf its change-log entry names: the chosen one, else the
    # newest row, read from the end of the seq index) has "(session_id=?)" in its plan, but
    # ORDER BY seq DESC LIMIT 1 reads one row.
    selects = [q for q in selects if "ORDER BY seq DESC LIMIT 1)" not in q
               and not q.rstrip().endswith("ORDER BY seq DESC LIMIT 1")]
    for q in selects:
        plan = " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + q))
        if plan == "SEARCH convostore_sessions USING PRIMARY KEY (session_id=?)":
            continue  # the session's directory row (its chosen leaf): one row by its key
        # A full scan, or a "search" on the session id alone, reads the whole session.
        assert "SCAN convostore_messages" not in plan, (q, plan)
        assert "SCAN p" not in plan and "SCAN c" not in plan, (q, plan)
        assert "(session_id=?)" not in plan, (q, plan)
    assert ids(s.get_branches("m3")) == ["m4", "fork"]
    assert ids(s.get_branches("m4")) == ["m7"]
    store.close()


def test_deleting_the_leaf_makes_the_newest_remaining_row_the_leaf(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("a", "a"))
    s.append_message(text("b", "b"))
    s.append_message(text("c", "c"), parent_id="a")
    s.delete_messages(["c"])
    assert ids(s.get_history()) == ["a", "b"]


def test_delete_of_nothing_writes_nothing_but_reports(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("a", "a"))
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    s.delete_messages([])
    s.delete_messages(["missing", "missing"])
    assert [e.message_ids for e in events] == [[], ["missing", "missing"]]
    assert ids(s.get_history()) == ["a"]


def test_clears_messages_and_compactions_of_one_session_only(store: Sessions) -> None:
    s, other = store.session("a"), store.session("b")
    s.append_message(text("m1", "x"))
    s.append_message(text("m2", "y"))
    s.add_compaction("sum", "m1", "m2")
    other.append_message(text("m1", "kept"))
    s.clear_messages()
    assert s.get_history() == []
    assert s.get_compactions() == []
    assert s.get_latest_leaf() is None
    assert other.get_history() == [text("m1", "kept")]
    s.append_message(text("again", "z"))
    assert ids(s.get_history()) == ["again"]


def test_ids_repeat_across_sessions_independently(store: Sessions) -> None:
    left, right = store.session("left"), store.session("right")
    left.append_message(text("same", "L"))
    right.append_message(text("same", "R"))
    assert left.get_message("same") == text("same", "L")
    right.update_message(text("same", "R2"))
    assert left.get_message("same") == text("same", "L")
    left.delete_messages(["same"])
    assert right.get_message("same") == text("same", "R2")
    assert left.get_message("same") is None


def test_handles_are_cached_per_id(store: Sessions) -> None:
    assert store.session("x") is store.session("x")
    assert store.session() is store.session("")
    assert store.session("x") is not store.session("y")


def test_the_handle_cache_keeps_held_and_configured_handles_only(store: Sessions) -> None:
    # Issue 18 item 12: every looked-up handle used to be kept for the store's lifetime.
    held = store.session("held")
    dropped = weakref.ref(store.session("dropped"))
    calls: list[str] = []
    store.session("configured").on_compaction(lambda m: calls.append("fn")).compact_after(0)
    store.session("errors").on_compaction_error(lambda exc: calls.append("handler"))
    gc.collect()
    assert dropped() is None  # an unconfigured handle nobody holds is let go
    assert store.session("held") is held
    store.session("configured").append_message(text("a", "hello"))
    assert store.wait_for_compactions()  # automatic compaction runs after the append
    assert calls == ["fn"]  # configuration set on a dropped handle still applies

    def failing(messages: list[Message]) -> None:
        raise RuntimeError("summariser down")

    store.session("errors").on_compaction(failing).compact_after(0)
    store.session("errors").append_message(text("a", "hello"))
    assert store.wait_for_compactions()
    assert calls == ["fn", "handler"]
    cleared = store.session("cleared").compact_after(5)
    cleared.compact_after(None)
    cleared_ref = weakref.ref(cleared)
    del cleared
    gc.collect()
    assert cleared_ref() is None  # configuration cleared again: nothing left to keep


# --- import -------------------------------------------------------------------------------


def test_imports_with_explicit_parent_and_timestamp(store: Sessions) -> None:
    s = store.session()
    s.import_message(text("i1", "first"), parent_id=None, created_at=1_700_000_000_000)
    s.import_message(text("i2", "second"), parent_id="i1", created_at=1_700_000_001_000)
    assert ids(s.get_history()) == ["i1", "i2"]
    assert s.get_latest_leaf() == text("i2", "second")
    hits = s.search("second")
    assert [(h.id, h.created_at) for h in hits] == [("i2", 1_700_000_001_000)]


def test_import_is_idempotent_and_reports_only_what_it_wrote(store: Sessions) -> None:
    s = store.session()
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    assert s.import_message(text("d", "first"), parent_id=None, created_at=1).inserted
    assert not s.import_message(text("d", "second"), parent_id=None, created_at=2).inserted
    assert s.get_message("d") == text("d", "first")
    assert [(e.type, e.message, e.parent_id) for e in events] == [
        ("import", text("d", "first"), None)
    ]


def test_import_is_verbatim(store: Sessions) -> None:
    msg = {
        "id": "v",
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "text": "  "},
            {"type": "text", "text": "x", "providerMetadata": {"openai": {"itemId": "i"}}},
        ],
        "metadata": {"channel": "kept"},
    }
    store2 = store
    s = store2.session()
    s.import_message(msg, parent_id=None, created_at=5)
    assert s.get_message("v") == msg


def test_import_with_an_unknown_parent_reads_as_a_root(store: Sessions) -> None:
    s = store.session()
    s.import_message(text("a", "a"), parent_id=None, created_at=1)
    s.import_message(text("b", "b"), parent_id="not-yet", created_at=2)
    assert ids(s.get_history()) == ["b"]
    # a parent imported later does not create a cycle or reattach the earlier row
    s.import_message(text("not-yet", "late"), parent_id="b", created_at=3)
    assert ids(s.get_history()) == ["b", "not-yet"]


# --- sanitising and reserved keys ----------------------------------------------------------


def test_sanitises_openai_item_ids_and_blank_reasoning(store: Sessions) -> None:
    s = store.session()
    msg = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "text": "   "},
            {"type": "reasoning", "text": "", "providerMetadata": {"anthropic": {"sig": "x"}}},
            {
                "type": "text",
                "text": "hi",
                "providerMetadata": {"openai": {"itemId": "msg_1"}},
                "callProviderMetadata": {
                    "openai": {"itemId": "x", "reasoningEncryptedContent": "e", "keep": 1},
                    "other": {"itemId": "stays"},
                },
            },
        ],
    }
    stored = s.append_message(msg).message
    expected = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "text": "", "providerMetadata": {"anthropic": {"sig": "x"}}},
            {
                "type": "text",
                "text": "hi",
                "callProviderMetadata": {
                    "openai": {"keep": 1},
                    "other": {"itemId": "stays"},
                },
            },
        ],
    }
    assert stored == expected
    assert s.get_message("a") == expected
    assert msg["parts"][0] == {"type": "reasoning", "text": "   "}  # input untouched


def test_strips_reserved_metadata_only_from_client_writes(
    open_store: Callable[..., Sessions],
) -> None:
    store = open_store(reserved_metadata_keys=["channel", "turnMetadata"])
    s = store.session()
    m = {**text("c1", "x"), "metadata": {"channel": "forged", "other": 2}}
    assert s.append_message(m, source="client").message["metadata"] == {"other": 2}
    assert s.get_message("c1") == {**text("c1", "x"), "metadata": {"other": 2}}
    upd = {**text("c1", "y"), "metadata": {"turnMetadata": {"admin": True}, "other": 3}}
    s.update_message(upd, source="client")
    assert s.get_message("c1") == {**text("c1", "y"), "metadata": {"other": 3}}
    s.append_message({**text("s1", "x"), "metadata": {"channel": "server"}})
    assert s.get_message("s1") == {**text("s1", "x"), "metadata": {"channel": "server"}}
    only = {**text("c2", "x"), "metadata": {"channel": "forged"}}
    assert s.append_message(only, source="client").message == text("c2", "x")


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "error", "field"),
    [
        ("not a message", InvalidMessageType, "message"),
        ({"id": 5, "role": "user", "parts": []}, InvalidMessageType, "id"),
        ({"id": "x", "role": None, "parts": []}, InvalidMessageType, "role"),
        ({"id": "x", "role": "user", "parts": "text"}, InvalidMessageType, "parts"),
        ({"id": "x", "role": "user"}, InvalidMessageType, "parts"),
        (
            {"id": "x", "role": "user", "parts": [{"type": "text", "text": math.nan}]},
            InvalidMessage,
            "parts[0].text",
        ),
        (
            {"id": "x", "role": "user", "parts": [{"type": "data-x", "data": b"raw"}]},
            InvalidMessage,
            "parts[0].data",
        ),
        (
            {"id": "x", "role": "assistant", "parts": [
                {"type": "tool-t", "toolCallId": "c", "input": {}, "output": {"v": math.inf}}
            ]},
            InvalidMessage,
            "parts[0].output.v",
        ),
        (
            {"id": "x", "role": "user", "parts": [], "metadata": {"tags": {1, 2}}},
            InvalidMessage,
            "metadata.tags",
        ),
        (
            {"id": "x", "role": "user", "parts": [], "metadata": {"o": object()}},
            InvalidMessage,
            "metadata.o",
        ),
        (
            {"id": "x", "role": "user", "parts": [], "metadata": {"k": {(1, 2): "pair"}}},
            InvalidMessage,
            "metadata.k",
        ),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(
    store: Sessions, message: Any, error: type[Exception], field: str
) -> None:
    s = store.session()
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    for write in (s.append_message, s.upsert_message):
        with pytest.raises(error) as info:
            write(message)
        assert getattr(info.value, "field", None) == field
        assert field in str(info.value)
    with pytest.raises(error):
        s.import_message(message)
    assert issubclass(error, (TypeError, ValueError))
    assert s.get_history() == []
    assert store.storage_stats().messages == 0
    assert events == []


def test_a_message_that_holds_itself_or_nests_too_deep_is_refused(store: Sessions) -> None:
    """Cycles and runaway nesting fail as InvalidMessage naming the field, never as a
    RecursionError, and write nothing."""
    from convostore.codec import MAX_JSON_DEPTH

    s = store.session()
    looped: dict[str, Any] = {"id": "x", "role": "user", "parts": [{"type": "data-x", "data": {}}]}
    looped["parts"][0]["data"]["again"] = looped["parts"][0]
    with pytest.raises(InvalidMessage) as info:
        s.append_message(looped)
    assert info.value.field == "parts[0].data.again"
    assert "holds itself" in str(info.value)

    deep: Any = "bottom"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(InvalidMessage) as info:
        s.append_message({"id": "y", "role": "user", "parts": [{"type": "data-x", "data": deep}]})
    assert info.value.field.startswith("parts[0].data[0][0]")
    assert len(info.value.field) < 60  # issue 18.7: not the 5,000-step path
    assert f"more than {MAX_JSON_DEPTH} levels" in str(info.value)
    assert s.get_history() == [] and store.storage_stats().messages == 0

    shallow: Any = "bottom"
    for _ in range(100):  # deep, but well inside the limit: stored and read back equal
        shallow = {"d": shallow}
    m = {"id": "z", "role": "user", "parts": [{"type": "data-x", "data": shallow}]}
    s.append_message(m)
    assert s.get_message("z") == m


def test_nul_characters_are_refused_where_text_columns_hold_them(store: Sessions) -> None:
    s = store.session()
    with pytest.raises(InvalidMessage, match="field 'id'"):
        s.append_message(text("a\x00b", "x"))
    with pytest.raises(InvalidMessage, match="field 'role'"):
        s.append_message(text("a", "x", role="us\x00er"))
    with pytest.raises(ValueError):
        store.session("bad\x00id")
    with pytest.raises(ValueError):
        s.add_compaction("sum\x00mary", "a", "b")
    body = text("ok", "NUL inside content is fine: \x00")
    s.append_message(body)
    assert s.get_message("ok") == body
    assert store.storage_stats().messages == 1


def test_tool_messages_stamp_the_same_estimate_as_the_formula(store: Sessions) -> None:
    from convostore.tokens import estimate_row_tokens

    s = store.session()
    msg = {"id": "t", "role": "assistant", "parts": [
        {"type": "tool-search", "toolCallId": "c1", "state": "output-available",
         "input": {"query": "deploy logs"}, "output": {"rows": [{"line": i} for i in range(50)]}},
        {"type": "text", "text": "found fifty lines"},
    ]}
    s.append_message(msg)
    assert s.get_history_row_stats()[0].token_estimate == estimate_row_tokens(msg)
    assert s.get_message("t") == msg


def test_a_missing_id_is_generated(store: Sessions) -> None:
    s = store.session()
    r = s.append_message({"role": "user", "parts": [{"type": "text", "text": "hi"}]})
    assert r.inserted and isinstance(r.message["id"], str) and r.message["id"]
    assert s.get_message(r.message["id"]) == r.message


def test_bad_update_input_writes_nothing(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("a", "keep"))
    with pytest.raises(InvalidMessage):
        s.update_message({"id": "a", "role": "user", "parts": [{"t": math.inf}]})
    assert s.get_message("a") == text("a", "keep")


# --- lossless content ---------------------------------------------------------------------


def test_round_trips_key_order_unicode_and_lone_surrogates(store: Sessions) -> None:
    s = store.session()
    msg = {
        "role": "assistant",
        "id": "k",
        "parts": [
            {"text": "z first", "type": "text"},
            {"type": "text", "text": "lone \ud800 and \udfff, pair 😀, é, 漢, nul \x00 end"},
            {"type": "data-x", "data": {"b": 1, "a": [1.5, -0.0, 10**20, None, True, "\u2028"]}},
        ],
        "metadata": {"z": 1, "a": 2},
    }
    s.append_message(msg)
    got = s.get_message("k")
    assert got == msg
    assert got is not None and list(got) == ["role", "id", "parts", "metadata"]
    assert list(got["parts"][0]) == ["text", "type"]
    assert list(got["metadata"]) == ["z", "a"]


@pytest.mark.parametrize("odd", ["é", "😀", "\x7f", "\x1f", "\\u00e9", "\u2028", "\ud800"])
def test_the_stored_text_is_compact_json_whatever_the_characters(
    store: Sessions, odd: str
) -> None:
    """The stored form keeps non-ASCII text as it is (DEL too) and escapes only what JSON
    must (control characters) and what UTF-8 cannot hold (lone surrogates), wherever the
    character sits: in a text part, or only deep in a tool's output."""
    s = store.session()
    deep: dict[str, Any] = {"id": "deep", "role": "assistant", "parts": [
        {"type": "text", "text": "plain"},
        {"type": "tool-x", "toolCallId": "c", "state": "output-available",
         "input": {"q": "a"}, "output": {"rows": [{"note": f"a{odd}b"}]}}]}
    shallow = text("shallow", f"a{odd}b")
    s.append_messages([deep, shallow])
    for msg in (deep, shallow):
        want = json.dumps(msg, separators=(",", ":"), ensure_ascii=False)
        if odd == "\ud800":
            want = want.replace("\ud800", "\\ud800")
        assert stored_row(store, "", msg["id"]) == want
        assert s.get_message(msg["id"]) == msg


def test_what_json_coerces_is_stored_as_json_stores_it(store: Sessions) -> None:
    """The documented exception to round-tripping: keys JSON writes as strings, tuples as lists."""
    s = store.session()
    s.append_message({"id": "c", "role": "user", "parts": [],
                      "metadata": {2: "int", 1.5: "float", True: "bool", None: "none",
                                   "t": (1, "two")}})
    got = s.get_message("c")
    assert got is not None
    assert got["metadata"] == {"2": "int", "1.5": "float", "true": "bool", "null": "none",
                               "t": [1, "two"]}


def test_concurrent_threads_append_one_linear_chain(store: Sessions) -> None:
    import threading

    s = store.session("t")
    n_threads, per = 4, 25
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(per):
                s.append_message(text(f"t{k}-{i}", f"message {i} of {k}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    history = s.get_history()
    assert len(history) == n_threads * per
    assert len(set(ids(history))) == n_threads * per


def test_nested_tuples_count_toward_the_depth_limit(store: Sessions) -> None:
    """A tuple is written as a list: 200 nested tuples are 200 levels, refused as lists are."""
    deep: object = "x"
    for _ in range(200):
        deep = (deep,)
    for message in (
        {"id": "a", "role": "user", "parts": [{"type": "text", "text": "hi", "extra": deep}]},
        {"id": "b", "role": "user", "parts": [], "metadata": {"k": deep}},
    ):
        with pytest.raises(InvalidMessage, match="levels deep"):
            store.session().append_message(message)
    assert store.session().get_history() == []


def test_naming_the_tail_as_parent_costs_no_lookup(
    store: Sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Integrations pass the tail as parent_id on every append: the append probe already
    found it, so no row lookup is made; another parent is still checked."""
    from convostore.backends._sql import SqlOps

    looked_up: list[str] = []
    original = SqlOps.row_meta

    def counting(self: SqlOps, session_id: str, id: str) -> Any:
        looked_up.append(id)
        return original(self, session_id, id)

    monkeypatch.setattr(SqlOps, "row_meta", counting)
    s = store.session()
    s.append_message(text("m0", "a"))
    s.append_message(text("m1", "b"), parent_id="m0")
    assert looked_up == []
    s.append_message(text("m2", "c"), parent_id="m0")  # a branch: m0 is no longer the tail
    # Checked by a lookup, or inside the engine's one-statement append (none from Python).
    assert looked_up in (["m0"], [])
    assert ids(s.get_history()) == ["m0", "m2"]
    s.append_message(text("m3", "d"), parent_id="nowhere")  # unknown: a new root
    assert ids(s.get_history()) == ["m3"]

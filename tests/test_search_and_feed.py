"""Full-text search and the change feed."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from _helpers import ids, text
from _storage import has_search_table

from convostore import ChangeEvent, Sessions

# listeners that read the store inside the write, and other stores' indexes
pytestmark = pytest.mark.connections

# --- search ---------------------------------------------------------------------------------


@pytest.mark.requires("shared_across_processes")
def test_an_index_built_by_another_store_is_kept_up_to_date_by_this_one(
    open_store: Any,
) -> None:
    """Each write asks whether the index exists until it does: a store that appended before
    another store built the index indexes its next writes."""
    early, searcher = open_store(), open_store()
    s = early.session("a")
    s.append_message(text("m1", "before the index"))  # asked: no index yet
    assert [h.id for h in searcher.session("a").search("before")] == ["m1"]  # builds it
    s.append_message(text("m2", "written after the index"))
    s.update_message(text("m1", "changed after the index"))
    assert sorted(h.id for h in searcher.search("after the index")) == ["m1", "m2"]
    assert searcher.search("before") == []


@pytest.mark.requires("shared_across_processes")
def test_a_store_that_appended_often_without_an_index_notices_one_built_elsewhere(
    open_store: Any,
) -> None:
    """Appends remember that the index was absent (until the schema changes): after several
    of them, an index another store builds is still seen, by single and batch appends."""
    early, searcher = open_store(), open_store()
    s = early.session("a")
    for i in range(3):
        s.append_message(text(f"m{i}", f"early message {i}"))
    s.append_messages([text("b0", "early batch")])
    assert [h.id for h in searcher.session("a").search("early batch")] == ["b0"]  # builds it
    s.append_message(text("late1", "a later single append"))
    s.append_messages([text("late2", "a later batch append")])
    assert sorted(h.id for h in searcher.search("later")) == ["late1", "late2"]


def test_builds_the_index_on_the_first_search_never_on_append(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("m1", "the deployment failed at noon"))
    assert not has_search_table(store)
    hits = s.search("deployment failed")
    assert [(h.id, h.role, h.content, h.session_id) for h in hits] == [
        ("m1", "user", "the deployment failed at noon", "")
    ]
    assert has_search_table(store)


def test_maintains_the_index_once_it_exists(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("a", "alpha words"))
    assert ids_of(s.search("alpha")) == ["a"]
    s.append_message(text("b", "bravo words"))
    assert ids_of(s.search("bravo")) == ["b"]
    s.update_message(text("b", "charlie words"))
    assert s.search("bravo") == []
    assert ids_of(s.search("charlie")) == ["b"]
    s.delete_messages(["b"])
    assert s.search("charlie") == []
    s.import_message(text("c", "delta import"), parent_id=None, created_at=7)
    assert ids_of(s.search("delta")) == ["c"]
    s.clear_messages()
    assert s.search("delta") == [] and s.search("alpha") == []


def ids_of(hits: list[Any]) -> list[str]:
    return [h.id for h in hits]


def test_session_search_is_a_phrase_and_store_search_is_all_words(store: Sessions) -> None:
    a, b = store.session("a"), store.session("b")
    a.append_message(text("1", "deployment of the service failed"))
    b.append_message(text("2", "the service deployment failed"))
    assert ids_of(a.search("deployment failed")) == []
    assert ids_of(b.search("deployment failed")) == ["2"]
    hits = store.search("failed deployment")
    assert sorted((h.session_id, h.id) for h in hits) == [("a", "1"), ("b", "2")]


def test_search_is_scoped_to_the_session(store: Sessions) -> None:
    store.session("x").append_message(text("m", "shared word"))
    store.session("y").append_message(text("m", "shared word"))
    assert [h.session_id for h in store.session("x").search("shared")] == ["x"]


def test_only_text_parts_are_indexed(store: Sessions) -> None:
    s = store.session()
    s.append_message({"id": "r", "role": "assistant", "parts": [
        {"type": "reasoning", "text": "secretthought"},
        {"type": "tool-x", "toolCallId": "c", "state": "output-available",
         "input": {"q": "toolinput"}, "output": "tooloutput"},
        {"type": "text", "text": "visible answer"},
    ], "metadata": {"note": "metaword"}})
    for word in ("secretthought", "toolinput", "tooloutput", "metaword"):
        assert s.search(word) == []
    assert ids_of(s.search("visible")) == ["r"]


def test_stemming_and_ranking(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("once", "a note mentioning running once among many other words here"))
    s.append_message(text("many", "running running running"))
    hits = s.search("run")
    assert ids_of(hits) == ["many", "once"]


def test_limit(store: Sessions) -> None:
    s = store.session()
    for i in range(30):
        s.append_message(text(f"m{i}", "common term"))
    assert len(s.search("common")) == 20
    assert len(s.search("common", limit=5)) == 5
    assert s.search("common", limit=0) == []


def test_backfill_covers_messages_with_continuation_rows(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("big", "needle " + "hay " * 600_000))
    s.append_message(text("small", "needle small"))
    other = store.session("other")
    other.append_message(text("o", "needle elsewhere"))
    assert sorted(ids_of(s.search("needle"))) == ["big", "small"]
    assert len(store.search("needle")) == 3


@pytest.mark.parametrize(
    "query",
    ['"', '""', "*", "NEAR(", "a OR b", "-x", "AND", "col:val", "(", "^", "':", "  ",
     "", "...", "日本語", "émigré", "x" * 10_000, "word " * 2000],
)
def test_adversarial_queries_never_raise(store: Sessions, query: str) -> None:
    s = store.session()
    s.append_message(text("m", 'plain words with "quotes" OR operators NEAR( things 日本語 émigré'))
    assert isinstance(s.search(query), list)
    assert isinstance(store.search(query), list)


def test_operators_are_matched_as_words(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("m", "cats OR dogs"))
    s.append_message(text("n", "cats and dogs"))
    assert ids_of(s.search("cats OR dogs")) == ["m"]
    assert s.search("") == []


# --- change feed ----------------------------------------------------------------------------


def test_dispatches_the_feed_in_order_with_stored_messages(store: Sessions) -> None:
    s = store.session("feed")
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    s.append_message(text("a", "one"))
    s.append_message(text("a", "changed"))
    s.update_message(text("a", "two"))
    s.delete_messages(["a"])
    s.clear_messages()
    assert [(e.type, e.inserted) for e in events] == [
        ("append", True), ("append", False), ("update", None), ("delete", None), ("clear", None)
    ]
    assert events[0].message == text("a", "one")
    assert events[1].message == text("a", "one")  # the stored row, not the input
    assert events[2].message == text("a", "two")
    assert events[3].message_ids == ["a"]
    assert all(e.session_id == "feed" for e in events)


def test_reports_imports_and_direct_compactions(store: Sessions) -> None:
    s = store.session()
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    s.append_message(text("a", "1"))
    s.append_message(text("b", "2"), parent_id="a")
    s.import_message(text("c", "3"), parent_id="b", created_at=5)
    rec = s.add_compaction("summary", "a", "b")
    assert [e.type for e in events] == ["append", "append", "import", "compaction"]
    assert events[1].parent_id == "a"
    assert events[2].message == text("c", "3") and events[2].parent_id == "b"
    assert events[3].compaction == rec and events[3].compaction is not None
    assert events[3].compaction.summary == "summary"


def test_parent_id_is_reported_as_passed(store: Sessions) -> None:
    s = store.session()
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    s.append_message(text("a", "1"))
    s.append_message(text("a2", "1"))  # omitted: stored under "a", reported as None
    s.append_message(text("b", "1"), parent_id=None)
    s.append_message(text("c", "1"), parent_id="unknown")
    assert ids(s.get_history(leaf_id="a2")) == ["a", "a2"]
    assert [e.parent_id for e in events] == [None, None, None, "unknown"]


def test_a_raising_listener_is_logged_and_does_not_stop_others(
    store: Sessions, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def bad(event: ChangeEvent) -> None:
        raise RuntimeError("listener broke")

    store.subscribe(lambda e: seen.append("first:" + e.type))
    store.subscribe(bad)
    store.subscribe(lambda e: seen.append("last:" + e.type))
    with caplog.at_level(logging.ERROR, logger="convostore"):
        r = store.session().append_message(text("a", "x"))
    assert r.inserted
    assert seen == ["first:append", "last:append"]
    assert "listener broke" in caplog.text
    assert store.session().get_message("a") == text("a", "x")


def test_listeners_may_read_the_store_inside_the_callback(store: Sessions) -> None:
    s = store.session()
    seen: list[Any] = []

    def reader(event: ChangeEvent) -> None:
        seen.append((event.type, ids(s.get_history()), s.get_token_estimate() > 0))

    store.subscribe(reader)
    s.append_message(text("a", "hello"))
    s.append_message(text("b", "world"))
    assert seen == [("append", ["a"], True), ("append", ["a", "b"], True)]


def test_unsubscribe(store: Sessions) -> None:
    events: list[ChangeEvent] = []
    unsubscribe = store.subscribe(events.append)
    store.session().append_message(text("a", "1"))
    unsubscribe()
    unsubscribe()
    store.session().append_message(text("b", "1"))
    assert [e.message["id"] for e in events if e.message] == ["a"]


def test_events_fire_after_commit(store: Sessions) -> None:
    s = store.session()
    observed: list[Any] = []
    store.subscribe(lambda e: observed.append(s.get_message("a")))
    s.append_message(text("a", "committed"))
    assert observed == [text("a", "committed")]


@pytest.mark.parametrize("odd", ["\udc80", "\ud800", "\x00"])
def test_text_no_index_can_hold_is_searchable_around_it(store: Sessions, odd: str) -> None:
    """A lone surrogate or NUL in text (which the store keeps) is a word separator in the
    index, on every engine: before, SQLite's index build failed on it and every search after."""
    s = store.session()
    written = f"deploy{odd}lock failed"
    s.append_message(text("before", written))
    assert [h.id for h in store.search("lock")] == ["before"]  # builds the index
    s.append_message(text("after", f"rollback{odd}done"))  # indexed by its write
    assert [h.id for h in store.search("rollback")] == ["after"]
    assert [h.content for h in s.search("deploy")] == ["deploy lock failed"]
    stored = s.get_message("before")
    assert stored is not None and stored["parts"][0]["text"] == written

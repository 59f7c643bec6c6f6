"""The lean search index (issue 26): it keeps no copy of the text, every write keeps it in step.

A hit's text is computed from its stored message. On SQLite the index is a contentless FTS5
table, whose entries are removed by naming the words they were indexed with (recomputed from the
stored message): a wrong word list would leave words behind, and the row that later takes the
deleted row's place would match them. These tests delete the newest row, so the next append may
reuse its place, then look for the deleted words.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from _helpers import text
from _storage import cells_holding, install_v6_search_index, orphan_index_entries
from test_search_tool_output import tool_message

from convostore import Sessions

pytestmark = pytest.mark.partitions  # the search table is partitioned by session

SENTENCE = "the quixotic lighthouse keeper counted waves"


def sync_of(store: Any) -> Sessions:
    """The sync store behind ``store`` (itself, or the async store's ``sync``)."""
    return store if isinstance(store, Sessions) else store.sync


def found(store: Sessions, query: str) -> list[str]:
    return [h.id for h in store.search(query)]


def test_the_index_keeps_no_copy_of_the_text(store: Sessions) -> None:
    s = store.session("a")
    s.append_message(text("m1", SENTENCE))
    store.build_search_index()
    s.append_message(text("m2", SENTENCE + " again"))
    hits = s.search("quixotic lighthouse")
    assert [(h.id, h.content, h.role) for h in hits] == [
        ("m1", SENTENCE, "user"), ("m2", SENTENCE + " again", "user")]
    assert cells_holding(sync_of(store), [SENTENCE, SENTENCE + " again"]) == {}


def test_a_long_message_hit_reads_its_text_from_every_row(store: Sessions) -> None:
    body = "needle " + "hay " * 500_000  # 2 MB: stored over continuation rows
    store.session("a").append_message(text("big", body))
    [hit] = store.search("needle")
    assert hit.content == body


@pytest.mark.async_api
def test_deletes_remove_the_words_before_the_row_is_reused(store: Sessions) -> None:
    s = store.session("a")
    store.build_search_index()
    s.append_message(text("m1", "ordinary words"))
    s.append_message(text("m2", "zebra crossing"))
    s.delete_messages(["m2"])
    s.append_message(text("m3", "plain"))
    assert found(store, "zebra") == [] and s.search("zebra") == []
    s.append_message(text("m4", "zebra again"))
    s.clear_messages()
    s.append_message(text("m5", "nothing here"))
    assert found(store, "zebra") == []
    store.session("b").append_message(text("b1", "zebra three"))
    store.delete_session("b")
    store.session("c").append_message(text("c1", "calm"))
    assert found(store, "zebra") == []
    s.append_message(text("m6", "zebra four"))
    s.update_message(text("m6", "horse"))
    assert found(store, "zebra") == [] and found(store, "horse") == ["m6"]
    assert found(store, "nothing") == ["m5"] and found(store, "calm") == ["c1"]
    assert orphan_index_entries(sync_of(store)) == 0


def test_writes_during_the_backfill_are_indexed_once(store: Sessions) -> None:
    s = store.session("a")
    s.append_messages([text(f"m{i:03}", f"walrus {i}") for i in range(300)])
    steps = sync_of(store).core.search_index.steps()
    assert next(steps)[0] < 300  # the index exists, part of the backlog is indexed
    s.update_message(text("m299", "narwhal"))  # not reached by the backfill yet
    s.update_message(text("m001", "orca"))  # already indexed
    s.delete_messages(["m000"])  # already indexed
    s.append_message(text("m300", "walrus late"))
    for _ in steps:
        pass
    assert found(store, "narwhal") == ["m299"] and found(store, "orca") == ["m001"]
    assert sorted(h.id for h in store.search("walrus", limit=1000)) == [
        f"m{i:03}" for i in range(2, 299)] + ["m300"]
    assert orphan_index_entries(sync_of(store)) == 0


def test_media_stays_out_of_the_index(store: Sessions) -> None:
    png = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kg"
           "AAAABJRU5ErkJggg==")
    message = {"id": "p1", "role": "user", "parts": [
        {"type": "text", "text": "a picture of a pelican"},
        {"type": "file", "mediaType": "image/png", "url": f"data:image/png;base64,{png}"}]}
    s = store.session("a")
    store.build_search_index()
    s.append_message(message)
    assert [h.content for h in s.search("pelican")] == ["a picture of a pelican"]
    s.delete_messages(["p1"])
    s.append_message(text("p2", "a heron"))
    assert s.search("pelican") == []


@pytest.mark.requires("reopen")
def test_the_index_keeps_the_definition_it_was_built_with(
    open_store: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A store opened with another ``search_tool_output`` follows the index's definition, so
    the entries it removes lose exactly their words."""
    store = open_store(search_tool_output=True)
    sync_of(store).session("t").append_message(tool_message("m1", "compiler segfaulted"))
    assert found(store, "segfaulted") == ["m1"]
    store.close()
    other = open_store()
    s = other.session("t")
    with caplog.at_level(logging.WARNING, logger="convostore"):
        s.append_message(tool_message("m2", "linker exploded"))
    assert "search_tool_output=True" in caplog.text
    assert found(other, "exploded") == ["m2"]
    [hit] = other.search("segfaulted")
    assert hit.content == "Fetching the log. compiler segfaulted"
    s.delete_messages(["m2"])
    s.update_message(tool_message("m1", "all green"))
    s.append_message(text("m3", "quiet"))
    assert found(other, "exploded") == [] and found(other, "segfaulted") == []
    assert found(other, "green") == ["m1"]


@pytest.mark.requires("reopen")
def test_a_version_6_index_is_replaced_on_open(open_store: Callable[..., Any]) -> None:
    """A database of schema version 6 has an index that keeps a copy of every text: opening it
    drops that index, and the next search builds the lean one from the stored messages."""
    store = open_store()
    sync = sync_of(store)
    sync.session("a").append_message(text("m1", SENTENCE))
    sync.session("b").append_message(text("m2", "a second conversation"))
    sync.build_search_index()  # what an index needs besides its table (a text search config)
    install_v6_search_index(sync, "stale copied words")
    assert sorted(found(store, "stale")) == ["m1", "m2"]
    store.close()
    store = open_store()
    assert found(store, "stale") == []
    assert [(h.session_id, h.id, h.content) for h in store.search("quixotic")] == [
        ("a", "m1", SENTENCE)]
    store.session("b").delete_messages(["m2"])
    assert found(store, "conversation") == []
    assert cells_holding(sync_of(store), ["stale copied words", SENTENCE]) == {}
    assert orphan_index_entries(sync_of(store)) == 0


@pytest.mark.async_api
def test_clearing_a_long_session_removes_every_entry(store: Sessions) -> None:
    s = store.session("long")
    store.build_search_index()
    s.append_messages([text(f"k{i:03}", f"kiwi {i}") for i in range(120)])
    s.delete_messages([f"k{i:03}" for i in range(60, 120)])
    s.clear_messages()
    s.append_messages([text(f"n{i:03}", f"plain {i}") for i in range(120)])
    assert found(store, "kiwi") == []
    assert len(store.search("plain", limit=500)) == 120
    assert orphan_index_entries(sync_of(store)) == 0

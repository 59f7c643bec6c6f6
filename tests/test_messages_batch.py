"""Batch writes: append_messages and import_messages, one transaction for many messages."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from _helpers import ids, text
from _storage import count_rows, execute, writing
from conftest import BackendSpec

from convostore import (
    ChangeEvent,
    ImportItem,
    InvalidArgument,
    InvalidArgumentType,
    InvalidMessage,
    InvalidMessageType,
    Sessions,
)
from convostore.errors import BackendError

pytestmark = pytest.mark.connections  # one transaction per batch, rolled back whole


def _turn(prefix: str = "") -> list[dict[str, Any]]:
    """An agent turn: a question, a tool call with its result, the answer."""
    return [
        text(prefix + "u", "what is the weather?"),
        {"id": prefix + "c", "role": "assistant", "parts": [
            {"type": "tool-weather", "toolCallId": "t1", "state": "output-available",
             "input": {"city": "Oslo"}, "output": {"temp": -3}}]},
        text(prefix + "a", "It is -3 in Oslo.", "assistant"),
    ]


def test_append_messages_chains_in_order_under_the_active_leaf(store: Sessions) -> None:
    s = store.session("t")
    s.append_message(text("m0", "hello"))
    results = s.append_messages(_turn())
    assert [r.inserted for r in results] == [True, True, True]
    assert [r.message for r in results] == _turn()
    assert ids(s.get_history()) == ["m0", "u", "c", "a"]
    assert s.get_latest_leaf() == _turn()[2]
    # the next single append continues after the batch, as after three single appends
    s.append_message(text("m4", "next"))
    assert ids(s.get_history()) == ["m0", "u", "c", "a", "m4"]


def test_append_messages_with_a_parent_branches_and_none_starts_a_root(store: Sessions) -> None:
    s = store.session()
    s.append_messages([text("a", "1"), text("b", "2")])
    s.append_messages([text("b2", "2'"), text("c2", "3'")], parent_id="a")
    assert ids(s.get_branches("a")) == ["b", "b2"]
    assert ids(s.get_history()) == ["a", "b2", "c2"]
    s.append_messages([text("r", "root"), text("r2", "under root")], parent_id=None)
    assert ids(s.get_history()) == ["r", "r2"]
    s.append_messages([text("x", "x")], parent_id="unknown")  # unknown parent: a new root
    assert ids(s.get_history()) == ["x"]


def test_append_messages_is_idempotent_per_id_and_chains_under_a_stored_one(
    store: Sessions,
) -> None:
    s = store.session()
    s.append_messages([text("a", "1"), text("b", "2")])
    results = s.append_messages([text("b", "changed"), text("c", "3"), text("c", "again")])
    assert [r.inserted for r in results] == [False, True, False]
    assert results[0].message == text("b", "2")  # the stored form, as append_message answers
    assert results[2].message == text("c", "3")
    assert ids(s.get_history()) == ["a", "b", "c"]
    assert s.get_message("c") is not None
    assert [r.inserted for r in s.append_messages(_turn("t"))] == [True] * 3
    assert [r.inserted for r in s.append_messages(_turn("t"))] == [False] * 3  # a retried turn
    assert ids(s.get_history()) == ["a", "b", "c", "tu", "tc", "ta"]
    assert store.storage_stats().messages == 6


def test_append_messages_applies_the_single_message_rules(open_store: Any) -> None:
    """The batch stores what the same single appends store: sanitised, reserved keys
    stripped, overlays skipped, media out of line."""
    store: Sessions = open_store(reserved_metadata_keys=["role_override"])
    png = base64.b64encode(b"\x89PNG fake image bytes" * 10).decode()
    image = {"type": "file", "mediaType": "image/png", "url": f"data:image/png;base64,{png}"}
    batch: list[dict[str, Any]] = [
        {"id": "u0", "role": "user", "parts": [image],
         "metadata": {"role_override": "admin", "k": 1}},
        {"id": "r1", "role": "assistant", "parts": [
            {"type": "reasoning", "text": ""},
            {"type": "text", "text": "an image", "providerMetadata": {
                "openai": {"itemId": "msg_1"}}}]},
        {"id": "compaction_x", "role": "assistant", "parts": []},  # an echoed overlay
        {"id": "r2", "role": "user", "parts": [image]},
    ]
    one = store.session("one")
    singles = [one.append_message(m, source="client") for m in batch]
    s = store.session("batch")
    results = s.append_messages(batch, source="client")
    assert results == singles
    assert results[0].message["metadata"] == {"k": 1}  # reserved key stripped
    assert results[1].message != batch[1]  # sanitised
    assert not results[2].inserted
    assert s.get_history() == one.get_history()
    assert ids(s.get_history()) == ["u0", "r1", "r2"]  # the overlay was skipped
    assert s.get_message("r2") == {"id": "r2", "role": "user", "parts": [image]}
    assert store.storage_stats().attachments == 1  # the image once, for every message
    generated = s.append_messages([{"role": "user", "parts": []}])[0].message["id"]
    assert isinstance(generated, str) and generated and s.get_message(generated) is not None


def test_append_messages_validates_everything_before_writing(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("m0", "kept"))
    with pytest.raises(InvalidMessageType) as info:
        s.append_messages([text("a", "fine"), {"id": "b", "role": 7, "parts": []}])
    assert info.value.field == "messages[1].role"
    with pytest.raises(InvalidMessage) as bad:
        s.append_messages([text("a", "fine"), text("b", "ok"),
                           {"id": "c", "role": "user", "parts": [{"x": float("nan")}]}])
    assert bad.value.field.startswith("messages[2].parts[0]")
    with pytest.raises(InvalidArgument) as arg:
        s.append_messages([text("a", "fine")], parent_id="bad\x00id")
    assert arg.value.argument == "parent_id"
    with pytest.raises(InvalidArgumentType):
        s.append_messages(text("a", "a single message"))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentType):
        s.append_messages("ab")  # type: ignore[arg-type]
    assert ids(s.get_history()) == ["m0"]
    assert store.storage_stats().messages == 1
    assert s.append_messages([]) == []


def test_a_failure_inside_the_transaction_rolls_the_whole_batch_back(
    store: Sessions, backend_spec: BackendSpec
) -> None:
    """A database error on the third row (a trigger of the test's own) leaves nothing."""
    s = store.session()
    s.append_message(text("m0", "kept"))
    with writing(store, None) as ops:
        if backend_spec.dialect == "sqlite":
            execute(ops, "CREATE TRIGGER boom BEFORE INSERT ON convostore_messages "
                         "WHEN NEW.id = 'bad' BEGIN SELECT RAISE(ABORT, 'refused'); END")
        else:
            execute(ops, "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                         "IF NEW.id = 'bad' THEN RAISE EXCEPTION 'refused'; END IF; "
                         "RETURN NEW; END $$")
            execute(ops, "CREATE TRIGGER boom BEFORE INSERT ON convostore_messages "
                         "FOR EACH ROW EXECUTE FUNCTION boom()")
    seen: list[ChangeEvent] = []
    store.subscribe(seen.append)
    big = "x" * (2 * 1024 * 1024)  # continuation rows too
    with pytest.raises(BackendError):
        s.append_messages([text("a", big), text("b", "2"), text("bad", "3"), text("c", "4")])
    with pytest.raises(BackendError):
        s.import_messages([text("a", big), text("bad", "3")])
    assert seen == []
    assert ids(s.get_history()) == ["m0"]
    assert count_rows(store, "convostore_message_chunks") == 0
    assert [r.inserted for r in s.append_messages([text("a", big), text("b", "2")])] == [
        True, True]


def test_append_messages_emits_one_event_per_message_in_order_after_commit(
    store: Sessions,
) -> None:
    s = store.session("ev")
    s.append_message(text("m0", "first"))
    seen: list[tuple[str, str, str | None, bool | None, int]] = []

    def listener(event: ChangeEvent) -> None:
        assert event.message is not None
        # after commit: the message is readable when its event arrives, and so are the others
        count = store.storage_stats().messages
        seen.append((event.type, event.message["id"], event.parent_id, event.inserted, count))

    store.subscribe(listener)
    s.append_messages([text("m1", "a"), text("m0", "dup"), text("m2", "b")])
    assert seen == [("append", "m1", None, True, 3), ("append", "m0", "m1", False, 3),
                    ("append", "m2", "m0", True, 3)]
    seen.clear()
    s.import_messages([text("i1", "x"), text("m2", "dup"), text("i2", "y")])
    assert seen == [("import", "i1", None, None, 5), ("import", "i2", "m2", None, 5)]


def test_a_batch_logs_one_change_per_written_message_in_order(store: Sessions) -> None:
    s = store.session("log")
    first = store.change_cursor()
    cursors: list[int | None] = []
    store.subscribe(lambda event: cursors.append(event.cursor))
    s.append_message(text("m0", "first"))
    s.append_messages([text("m1", "a"), text("m0", "dup"), text("m2", "b")])
    s.import_messages([text("i1", "x"), text("m2", "dup"), text("i2", "y")])
    s.append_message(text("m3", "last"))
    changes = store.changes(since=first)
    assert [(c.type, c.message_id, c.parent_id, c.leaf_id) for c in changes] == [
        ("append", "m0", None, "m0"),
        ("append", "m1", "m0", "m1"), ("append", "m2", "m0", "m2"),
        ("import", "i1", None, "i1"), ("import", "i2", "m2", "i2"),
        ("append", "m3", "i2", "m3"),
    ]
    positions = [c.cursor for c in changes]
    assert positions == sorted(set(positions))  # increasing, each once
    # each event carries its own change's position (the duplicate's carries none)
    assert [c for c in cursors if c is not None] == positions


def test_import_messages_keeps_parents_and_times_verbatim(store: Sessions) -> None:
    s = store.session()
    results = s.import_messages(
        [text("a", "1"), text("b", "2"),
         ImportItem(text("b2", "2'"), parent_id="a", created_at=1_700_000_000_000),
         text("c2", "3'"),
         ImportItem(text("orphan", "?"), parent_id="not-stored")],
        created_at=1_600_000_000_000,
    )
    assert [r.inserted for r in results] == [True] * 5
    assert ids(s.get_branches("a")) == ["b", "b2"]
    assert ids(s.get_branches("b2")) == ["c2"]
    assert ids(s.get_history(leaf_id="c2")) == ["a", "b2", "c2"]
    assert ids(s.get_history()) == ["orphan"]  # an unknown parent reads as a root
    stamps = {h.id: h.created_at for h in s.search("2", limit=10)}
    assert stamps == {"b": 1_600_000_000_000, "b2": 1_700_000_000_000}
    again = s.import_messages([text("a", "changed"), text("d", "new")])
    assert [r.inserted for r in again] == [False, True]
    assert again[0].message == text("a", "1")
    assert ids(s.get_history()) == ["a", "d"]  # d chains under the stored a


def test_import_messages_refuses_bad_entries_naming_them(store: Sessions) -> None:
    s = store.session()
    with pytest.raises(InvalidArgument) as info:
        s.import_messages([text("a", "1"), ImportItem(text("b", "2"), created_at=-5)])
    assert info.value.argument == "messages[1].created_at"
    with pytest.raises(InvalidArgument) as parent:
        s.import_messages([ImportItem(text("b", "2"), parent_id="x\x00")])
    assert parent.value.argument == "messages[0].parent_id"
    with pytest.raises(InvalidMessageType) as shape:
        s.import_messages([text("a", "1"), {"id": "b", "role": "user", "parts": "no"}])
    assert shape.value.field == "messages[1].parts"
    with pytest.raises(InvalidArgument):
        s.import_messages([text("a", "1")], created_at=10**20)
    assert store.storage_stats().messages == 0


@pytest.mark.async_api
def test_a_batch_is_searchable_once_the_index_exists(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("m0", "zero"))
    assert s.search("zero")  # builds the index: later writes index themselves
    s.append_messages([text("m1", "alpha words"), text("m2", "beta words")])
    s.import_messages([text("m3", "gamma words")])
    assert {h.id for h in s.search("words")} == {"m1", "m2", "m3"}


def test_append_messages_triggers_auto_compaction_once(store: Sessions) -> None:
    s = store.session()
    calls: list[int] = []

    def fn(history: list[dict[str, Any]]) -> None:
        calls.append(len(history))

    s.on_compaction(fn).compact_after(0)
    s.append_messages(_turn())
    assert store.wait_for_compactions()  # it runs in the background, after the batch
    assert calls == [3]
    s.append_messages(_turn())  # nothing inserted: no check
    assert store.wait_for_compactions()
    assert calls == [3]

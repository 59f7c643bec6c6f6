"""Large messages: continuation rows on code-point boundaries."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import pytest
from _helpers import ids, text
from _storage import execute, writing

from convostore import ChangeEvent, InvalidMessage, Session, Sessions, UnreadableMessage
from convostore.backends._schema import MESSAGES
from convostore.codec import MAX_JSON_DEPTH, ROW_BUDGET, split_content

T = TypeVar("T")

# --- slice boundaries (pure, budget 16) ----------------------------------------------------

SAMPLES = ["", "small", "a" * 40, "é" * 30, "漢字" * 20, "😀" * 17, '{"k":"v😀é漢"}' * 5]


@pytest.mark.parametrize("sample", SAMPLES)
def test_slices_rejoin_to_the_original_exactly(sample: str) -> None:
    assert "".join(split_content(sample, 16)) == sample


@pytest.mark.parametrize("sample", SAMPLES)
def test_every_slice_fits_the_byte_budget(sample: str) -> None:
    for piece in split_content(sample, 16):
        assert len(piece.encode("utf-8")) <= 16


def test_never_splits_a_code_point() -> None:
    pieces = split_content("😀" * 50, 16)
    assert [len(p) for p in pieces] == [4] * 12 + [2]
    assert all(set(p) == {"😀"} for p in pieces)


def test_content_that_fits_is_one_slice() -> None:
    assert split_content("small", 16) == ["small"]
    assert split_content("", 16) == [""]


# --- through the store ---------------------------------------------------------------------


def _chunks(store: Sessions) -> int:
    return store.storage_stats().continuation_rows


def test_round_trips_a_5_mb_text_part(store: Sessions) -> None:
    s = store.session()
    big = text("big", "x" * 5_000_000)
    s.append_message(big)
    assert _chunks(store) == 3
    assert s.get_message("big") == big
    assert s.get_history() == [big]


def test_round_trips_a_3_mb_tool_output(store: Sessions) -> None:
    s = store.session()
    msg = {
        "id": "tool",
        "role": "assistant",
        "parts": [
            {
                "type": "tool-search",
                "toolCallId": "call_1",
                "state": "output-available",
                "input": {"q": "x"},
                "output": {"rows": [f"row {i} {'y' * 50}" for i in range(50_000)]},
            }
        ],
    }
    s.append_message(msg)
    assert _chunks(store) > 0
    assert s.get_message("tool") == msg


def test_round_trips_multi_byte_content_across_boundaries(store: Sessions) -> None:
    s = store.session()
    body = "😀" * 350_000 + "é漢" + "😀" * 350_000
    msg = text("emoji", body)
    s.append_message(msg)
    got = s.get_message("emoji")
    assert got == msg
    assert got is not None and len(got["parts"][0]["text"]) == len(body)


def test_deletes_surplus_continuations_when_a_message_shrinks(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("m", "x" * 5_000_000))
    assert _chunks(store) == 3
    s.update_message(text("m", "y" * 2_000_000))
    assert _chunks(store) == 1
    assert s.get_message("m") == text("m", "y" * 2_000_000)
    s.update_message(text("m", "tiny"))
    assert _chunks(store) == 0
    assert s.get_message("m") == text("m", "tiny")


def test_no_op_guard_compares_the_full_reassembled_content(store: Sessions) -> None:
    s = store.session()
    body = "z" * 3_000_000
    s.append_message(text("big", body))
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    s.update_message(text("big", body))
    assert events == []
    s.update_message(text("big", body[:-1] + "!"))
    assert [e.type for e in events] == ["update"]
    assert s.get_message("big") == text("big", body[:-1] + "!")


def test_removes_continuations_on_delete_and_on_clear(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("d1", "a" * 2_000_000))
    s.append_message(text("d2", "b" * 2_000_000))
    assert _chunks(store) == 2
    s.delete_messages(["d1"])
    assert _chunks(store) == 1
    assert s.get_message("d2") == text("d2", "b" * 2_000_000)
    s.clear_messages()
    assert _chunks(store) == 0


def test_imports_an_over_budget_message_across_continuations(store: Sessions) -> None:
    s = store.session()
    msg = text("imp", "q" * (ROW_BUDGET * 2))
    s.import_message(msg, parent_id=None, created_at=1)
    assert _chunks(store) > 0
    assert s.get_message("imp") == msg


def test_counts_continuation_bytes_in_stats_and_the_read_budget(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("h1", "x" * 2_000_000))
    s.append_message(text("h2", "small"))
    stats = {r.id: r.bytes for r in s.get_history_row_stats()}
    assert stats["h1"] > ROW_BUDGET
    generous = s.get_recent_history(stats["h1"] + stats["h2"])
    assert ids(generous.messages) == ["h1", "h2"] and not generous.truncated
    slice_only = s.get_recent_history(ROW_BUDGET + stats["h2"])
    assert ids(slice_only.messages) == ["h2"] and slice_only.truncated
    assert slice_only.total_content_bytes == stats["h1"] + stats["h2"]


def test_a_newest_first_read_never_mixes_two_versions_of_a_large_message(
    store: Sessions,
) -> None:
    """The continuation rows are read in the snapshot the first slice came from: an update
    between two steps of the generator cannot leave a message half old, half new."""
    s = store.session()
    old = text("b", "B" * 3_000_000)
    # x (300 KB) ends the first page (256 KiB) after d and c; the next window holds x, b, a.
    for m in (text("a", "a"), old, text("x", "X" * 300_000), text("c", "c"), text("d", "d")):
        s.append_message(m)
    reading = s.history(newest_first=True)
    assert [next(reading)["id"] for _ in range(3)] == ["d", "c", "x"]
    s.update_message(text("b", "Z" * 3_000_000))
    got = next(reading)
    assert got["id"] == "b"
    assert set(got["parts"][0]["text"]) in ({"B"}, {"Z"})  # one version, whichever it is
    assert got == old  # read with the window that held it
    assert next(reading)["id"] == "a"


# --- deep nesting (issue 18.4, 18.7): what is accepted reads back from any call depth -------


def _nested(levels: int) -> dict[str, Any]:
    """A message nested ``levels`` levels deep in all (the message object is level 1)."""
    data: Any = "bottom"
    for _ in range(levels - 3):  # the message, its parts list and the part are three levels
        data = [data]
    return {"id": f"deep{levels}", "role": "user", "parts": [{"type": "data-x", "data": data}]}


def _from_deep_stack(frames: int, read: Callable[[], T]) -> T:
    """``read()`` called from inside a recursion ``frames`` frames deep."""
    if frames <= 0:
        return read()
    return _from_deep_stack(frames - 1, read)


READS: dict[str, Callable[[Session, str], object]] = {
    "get_message": lambda s, mid: s.get_message(mid),
    "get_history": lambda s, mid: s.get_history(),
    "history": lambda s, mid: list(s.history()),
    "newest_first": lambda s, mid: list(s.history(newest_first=True)),
    "history_batches": lambda s, mid: [m for b in s.history_batches() for m in b],
    "get_recent_history": lambda s, mid: s.get_recent_history(10**9).messages,
    "get_latest_leaf": lambda s, mid: s.get_latest_leaf(),
}


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH, 500, 990])
def test_a_message_is_refused_or_reads_back_from_a_deep_call_stack(
    store: Sessions, levels: int
) -> None:
    """Issue 18.4: a message nested ~980 levels deep was accepted, then every read of its
    session raised RecursionError when called from a moderately deep stack."""
    s = store.session()
    s.append_message(text("before", "kept"))
    message = _nested(levels)
    try:
        s.append_message(message)
    except InvalidMessage as exc:
        assert levels > MAX_JSON_DEPTH and f"more than {MAX_JSON_DEPTH} levels" in str(exc)
        assert ids(s.get_history()) == ["before"]
        return
    assert levels <= MAX_JSON_DEPTH
    for name, read in READS.items():
        got = _from_deep_stack(700, partial(read, s, message["id"]))
        expected: object = message
        if name in ("get_history", "history", "history_batches", "get_recent_history"):
            expected = [text("before", "kept"), message]
        elif name == "newest_first":
            expected = [message, text("before", "kept")]
        assert got == expected, name


def test_a_row_stored_deeper_than_the_limit_still_reads_back(store: Sessions) -> None:
    """Rows written before the bound (or by another writer) decode without recursion, so the
    session stays readable from a deep stack, and a row that cannot be decoded at all is left
    out while the others read on."""
    s = store.session()
    for mid in ("a", "b", "c"):
        s.append_message(text(mid, mid))
    deep = "[" * 5000 + "]" * 5000
    with writing(store) as ops:
        execute(ops, f"UPDATE {MESSAGES} SET content = ? WHERE session_id = ? AND id = ?",
                ('{"id":"b","role":"user","parts":[{"type":"data-x","data":' + deep + "}]}",
                 "", "b"))
        execute(ops, f"UPDATE {MESSAGES} SET content = ? WHERE session_id = ? AND id = ?",
                ('{"id":"c","role":', "", "c"))
    got = _from_deep_stack(700, s.get_history)
    assert ids(got) == ["a", "b"]
    value = got[1]["parts"][0]["data"]
    for _ in range(4999):
        value = value[0]
    assert value == []
    batches = _from_deep_stack(700, lambda: list(s.history_batches(max_batch_bytes=100)))
    assert [ids(b) for b in batches] == [["a"], ["b"]]  # measured without recursion too
    with pytest.raises(UnreadableMessage, match="'c'"):
        _from_deep_stack(700, lambda: s.get_message("c"))
    with pytest.raises(UnreadableMessage, match="'c'"):
        s.get_latest_leaf()


def test_refusals_name_a_short_path_and_the_real_problem(store: Sessions) -> None:
    """Issue 18.7: a huge integer was refused as "nested too deeply", and a deep-nesting error
    carried a 1,500-character field path."""
    s = store.session()
    big = {"id": "n", "role": "user", "parts": [{"type": "data-x", "data": [1, 10**5000]}]}
    with pytest.raises(InvalidMessage) as info:
        s.append_message(big)
    assert info.value.field == "parts[0].data[1]"
    assert "digits" in info.value.problem and "nested" not in info.value.problem
    with pytest.raises(InvalidMessage) as info:
        s.append_message(_nested(600))
    assert info.value.field.startswith("parts[0].data[0][0]") and len(info.value.field) < 60
    assert len(str(info.value)) < 120
    with pytest.raises(InvalidMessage) as info:
        s.append_message(_nested(MAX_JSON_DEPTH + 1))
    assert f"more than {MAX_JSON_DEPTH} levels" in info.value.problem
    assert s.get_history() == [] and store.storage_stats().messages == 0

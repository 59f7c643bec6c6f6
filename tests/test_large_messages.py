"""Large messages: continuation rows on code-point boundaries (behaviour.md §3, §11.1)."""

from __future__ import annotations

import pytest
from _helpers import ids, text

from convostore import ChangeEvent, Sessions
from convostore.codec import ROW_BUDGET, split_content

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
    for m in (text("a", "a"), old, text("c", "c"), text("d", "d")):
        s.append_message(m)
    reading = s.history(newest_first=True)
    assert [next(reading)["id"], next(reading)["id"]] == ["d", "c"]
    s.update_message(text("b", "Z" * 3_000_000))
    got = next(reading)
    assert got["id"] == "b"
    assert set(got["parts"][0]["text"]) in ({"B"}, {"Z"})  # one version, whichever it is
    assert got == old  # read with the window that held it
    assert next(reading)["id"] == "a"

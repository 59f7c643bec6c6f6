"""Reads: streamed, newest-first, batched and budgeted history; overlays."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from _helpers import ids, text
from _storage import execute, writing

from convostore import COMPACTION_PREFIX, ConvostoreError, Sessions, UnreadableMessage
from convostore.backends._sql import SqlOps

# reads: through a pooler each statement carries its search_path
pytestmark = pytest.mark.connections


def chain(store: Sessions, n: int, prefix: str = "m", session: str = "") -> list[dict[str, Any]]:
    s = store.session(session)
    out = []
    for i in range(n):
        m = text(f"{prefix}{i}", f"message number {i}", "user" if i % 2 == 0 else "assistant")
        s.append_message(m)
        out.append(m)
    return out


# --- whole-path reads -----------------------------------------------------------------------


def test_unknown_leaf_reads_empty(store: Sessions) -> None:
    chain(store, 3)
    s = store.session()
    assert s.get_history(leaf_id="nope") == []
    assert list(s.history(leaf_id="nope", newest_first=True)) == []
    assert s.get_history_row_stats("nope") == []
    recent = s.get_recent_history(1000, leaf_id="nope")
    assert (recent.messages, recent.truncated, recent.total_content_bytes) == ([], False, 0)


@pytest.mark.async_api
def test_empty_session_reads(store: Sessions) -> None:
    s = store.session()
    assert s.get_history() == []
    assert list(s.history(newest_first=True)) == []
    assert list(s.history_batches()) == []
    assert s.get_latest_leaf() is None
    assert s.get_token_estimate() == 0


@pytest.mark.parametrize("n", [50, 51, 120])
def test_hydrates_across_window_boundaries_in_order(store: Sessions, n: int) -> None:
    msgs = chain(store, n)
    assert store.session().get_history() == msgs
    assert list(store.session().history(newest_first=True)) == msgs[::-1]


def test_history_hydrates_in_windows_of_at_most_50_rows(
    store: Sessions, rows_read: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    chain(store, 120)
    windows: list[int] = []
    original = SqlOps.content_rows_by_seq

    def spy(self: SqlOps, session_id: str, *args: Any) -> Any:
        rows = original(self, session_id, *args)
        windows.append(len(rows))  # the rows one window read brought
        return rows

    monkeypatch.setattr(SqlOps, "content_rows_by_seq", spy)
    it = store.session().history()
    first = next(it)
    assert first["id"] == "m0"
    assert windows == [50]  # nothing beyond the first window is read yet
    rest = list(it)
    assert len(rest) == 119
    assert windows == [50, 50, 20]


def test_windows_are_bounded_by_bytes_too(store: Sessions, monkeypatch: pytest.MonkeyPatch) -> None:
    s = store.session()
    for i in range(6):
        s.append_message(text(f"b{i}", "x" * 1_500_000))
    windows: list[int] = []
    original = SqlOps.content_rows_by_seq

    def spy(self: SqlOps, session_id: str, *args: Any) -> Any:
        rows = original(self, session_id, *args)
        windows.append(len(rows))  # the rows one window read brought
        return rows

    monkeypatch.setattr(SqlOps, "content_rows_by_seq", spy)
    assert ids(s.get_history()) == [f"b{i}" for i in range(6)]
    assert windows == [2, 2, 2]


def test_a_row_larger_than_a_window_reads_alone(
    store: Sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = store.session()
    s.append_message(text("small1", "a"))
    s.append_message(text("huge", "x" * 5_000_000))
    s.append_message(text("small2", "b"))
    windows: list[int] = []
    original = SqlOps.content_rows_by_seq

    def spy(self: SqlOps, session_id: str, *args: Any) -> Any:
        rows = original(self, session_id, *args)
        windows.append(len(rows))  # the rows one window read brought
        return rows

    monkeypatch.setattr(SqlOps, "content_rows_by_seq", spy)
    assert ids(s.get_history()) == ["small1", "huge", "small2"]
    assert windows == [1, 1, 1]


@pytest.mark.slow  # 10,001 single-row imports: 80 s on a busy server
def test_reads_a_branch_longer_than_the_reference_cap_whole(store: Sessions) -> None:
    s = store.session()
    n = 10_002
    prev = None
    for i in range(n):
        s.import_message(text(f"i{i}", "x"), parent_id=prev, created_at=i)
        prev = f"i{i}"
    got = ids(s.get_history())
    assert len(got) == n and got[0] == "i0" and got[-1] == f"i{n - 1}"
    recent = s.get_recent_history(10**12)
    assert len(recent.messages) == n and not recent.truncated


@pytest.mark.slow
def test_reads_a_50000_message_branch(store: Sessions) -> None:
    s = store.session()
    n = 50_000
    prev = None
    for i in range(n):
        s.import_message(text(f"m{i}", f"body {i}"), parent_id=prev, created_at=i)
        prev = f"m{i}"
    count = 0
    for i, m in enumerate(s.history()):
        assert m["id"] == f"m{i}"
        count += 1
    assert count == n
    newest = []
    for m in s.history(newest_first=True):
        newest.append(m["id"])
        if len(newest) == 3:
            break
    assert newest == [f"m{n - 1}", f"m{n - 2}", f"m{n - 3}"]


def damage(store: Sessions, message_id: str) -> None:
    """Overwrite a stored row of the default session with text that is not JSON."""
    with writing(store, None) as ops:
        execute(
            ops,
            "UPDATE convostore_messages SET content = ? WHERE session_id = ? AND id = ?",
            ("{not json", "", message_id),
        )


def test_skips_a_corrupted_row_without_dropping_others(store: Sessions) -> None:
    chain(store, 60)
    s = store.session()
    damage(store, "m30")
    got = ids(s.get_history())
    assert len(got) == 59 and "m30" not in got
    with pytest.raises(UnreadableMessage, match="'m30' of session ''") as info:
        s.get_message("m30")  # issue 18.4: a read of that one message says which and why
    assert info.value.message_id == "m30" and isinstance(info.value, ConvostoreError)


# --- newest first ---------------------------------------------------------------------------


def test_newest_first_reads_only_what_is_consumed(store: Sessions, rows_read: list[int]) -> None:
    chain(store, 200)
    rows_read[0] = 0
    for m in store.session().history(newest_first=True):
        assert m["id"] == "m199"
        break
    assert rows_read[0] == 25  # one page: a round trip costs more than a page of rows
    rows_read[0] = 0
    taken = []
    for m in store.session().history(newest_first=True):
        taken.append(m["id"])
        if len(taken) == 60:
            break
    assert taken == [f"m{i}" for i in range(199, 139, -1)]
    assert rows_read[0] < 3 * 60  # then windows of 50: fewer than three times what is taken


def test_newest_first_cuts_its_first_page_by_bytes(store: Sessions, rows_read: list[int]) -> None:
    s = store.session()
    for i in range(30):
        s.append_message(text(f"m{i}", "x" * 40_000))
    rows_read[0] = 0
    assert next(s.history(newest_first=True))["id"] == "m29"
    assert rows_read[0] == 6  # 256 KiB of 40 KB rows, not a page of 25
    assert ids(s.history(newest_first=True)) == [f"m{i}" for i in range(29, -1, -1)]


def test_newest_first_is_the_exact_reverse_including_overlays(store: Sessions) -> None:
    s = store.session()
    for i in range(6):
        s.append_message(text(f"n{i}", f"t{i}"))
    s.add_compaction("summary of n1..n3", "n1", "n3")
    forward = s.get_history()
    backward = list(s.history(newest_first=True))
    assert backward == forward[::-1]
    assert ids(forward)[0] == "n0" and ids(forward)[1].startswith(COMPACTION_PREFIX)
    assert backward[0]["id"] == "n5"


def test_newest_first_follows_a_branch_leaf(store: Sessions) -> None:
    s = store.session()
    for i in range(4):
        s.append_message(text(f"n{i}", "x"))
    s.append_message(text("branch", "b"), parent_id="n1")
    s.append_message(text("n4", "x"), parent_id="n3")
    got = ids(s.history(leaf_id="branch", newest_first=True))
    assert got == ["branch", "n1", "n0"]


def test_newest_first_stays_lazy_until_it_reaches_a_span(
    store: Sessions, rows_read: list[int]
) -> None:
    chain(store, 200)
    s = store.session()
    s.add_compaction("old stuff", "m0", "m149")
    rows_read[0] = 0
    taken = []
    for m in s.history(newest_first=True):
        taken.append(m["id"])
        if len(taken) == 5:
            break
    assert taken == ["m199", "m198", "m197", "m196", "m195"]
    assert rows_read[0] == 25  # the first page, not the span's rows
    full = list(s.history(newest_first=True))
    assert len(full) == 51
    assert full[-1]["parts"][0]["text"] == "old stuff"


# --- batches --------------------------------------------------------------------------------


def test_streams_history_in_bounded_batches(store: Sessions) -> None:
    msgs = chain(store, 5)
    s = store.session()
    assert [len(b) for b in s.history_batches(batch_size=2)] == [2, 2, 1]
    size = len(json.dumps(msgs[0], separators=(",", ":")).encode())
    batches = list(s.history_batches(batch_size=50, max_batch_bytes=size + 10))
    assert [len(b) for b in batches] == [1] * 5
    assert [m for b in batches for m in b] == msgs
    newest = list(s.history_batches(batch_size=3, newest_first=True))
    assert [ids(b) for b in newest] == [["m4", "m3", "m2"], ["m1", "m0"]]


def test_a_full_batch_is_handed_over_before_more_is_read(
    store: Sessions, rows_read: list[int]
) -> None:
    chain(store, 200)
    s = store.session()
    rows_read[0] = 0
    first = next(iter(s.history_batches(batch_size=1, newest_first=True)))
    assert ids(first) == ["m199"]
    assert rows_read[0] == 25  # the first page, not the next range of the newest-first walk
    rows_read[0] = 0
    first = next(iter(s.history_batches(batch_size=50)))
    assert ids(first) == [f"m{i}" for i in range(50)]
    assert rows_read[0] == 50  # one window, not the next one


def test_batch_options_that_are_not_counts_are_refused_naming_them(store: Sessions) -> None:
    chain(store, 3)
    s: Any = store.session()  # the wrong types are the point
    for name, bad in (("batch_size", None), ("batch_size", "10"), ("max_batch_bytes", 2.5)):
        with pytest.raises(TypeError, match=name):
            next(iter(s.history_batches(**{name: bad})))
    with pytest.raises(ValueError, match="max_content_bytes"):
        s.get_recent_history(float("nan"))


def test_batch_options_are_floored_to_one(store: Sessions) -> None:
    chain(store, 3)
    assert [len(b) for b in store.session().history_batches(batch_size=0)] == [1, 1, 1]
    got = [len(b) for b in store.session().history_batches(max_batch_bytes=0)]
    assert got == [1, 1, 1]


# --- recent history -------------------------------------------------------------------------


def test_budgets_recent_history_with_honest_truncation(store: Sessions) -> None:
    s = store.session()
    for i in range(6):
        s.append_message(text(f"m{i}", "y" * 200))
    stats = s.get_history_row_stats()
    budget = stats[-1].bytes + stats[-2].bytes + 10
    recent = s.get_recent_history(budget)
    assert ids(recent.messages) == ["m4", "m5"]
    assert recent.truncated
    assert recent.total_content_bytes == sum(r.bytes for r in stats)
    one = s.get_recent_history(1)
    assert ids(one.messages) == ["m5"] and one.truncated
    everything = s.get_recent_history(10**9)
    assert len(everything.messages) == 6 and not everything.truncated
    exact = s.get_recent_history(sum(r.bytes for r in stats))
    assert len(exact.messages) == 6 and not exact.truncated


def test_recent_history_reads_the_content_of_the_window_only(
    store: Sessions, rows_read: list[int]
) -> None:
    """The budget bounds what is read: sizes are probed without content, so a budget that
    holds one large message reads one row's content, not the probe's 32."""
    s = store.session()
    for i in range(40):
        s.append_message(text(f"big{i}", str(i % 10) * 100_000))
    rows_read[0] = 0
    got = s.get_recent_history(150_000)
    assert ids(got.messages) == ["big39"] and got.truncated
    assert rows_read[0] == 1


def test_recent_history_plans_overlays_over_the_window_only(store: Sessions) -> None:
    s = store.session()
    for i in range(6):
        s.append_message(text(f"m{i}", "z" * 100))
    s.add_compaction("inside", "m1", "m3")
    full = ids(s.get_recent_history(10**9).messages)
    assert full[0] == "m0" and full[1].startswith(COMPACTION_PREFIX) and full[2:] == ["m4", "m5"]
    stats = s.get_history_row_stats()
    budget = sum(r.bytes for r in stats[2:])  # window m2..m5: the overlay's start is outside
    window = s.get_recent_history(budget)
    assert ids(window.messages) == ["m2", "m3", "m4", "m5"]


def test_recent_history_of_a_branch(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("a", "a"))
    s.append_message(text("b", "b"))
    s.append_message(text("c", "c"), parent_id="a")
    assert ids(s.get_recent_history(10**6, leaf_id="b").messages) == ["a", "b"]


# --- overlays -------------------------------------------------------------------------------


def test_renders_overlays_and_extends_them_iteratively(store: Sessions) -> None:
    s = store.session()
    for i in range(1, 5):
        s.append_message(text(f"m{i}", f"turn {i}"))
    rec = s.add_compaction("first summary", "m1", "m2")
    hist = s.get_history()
    assert hist[0] == {
        "id": COMPACTION_PREFIX + rec.id,
        "role": "assistant",
        "parts": [{"type": "text", "text": "first summary"}],
    }
    assert ids(hist[1:]) == ["m3", "m4"]

    def fn(messages: list[dict[str, Any]]) -> dict[str, str]:
        return {"from_message_id": messages[0]["id"], "to_message_id": "m3", "summary": "wider"}

    s.on_compaction(fn)
    result = s.compact()
    assert result is not None
    assert (result.from_message_id, result.to_message_id) == ("m1", "m3")
    hist = s.get_history()
    assert hist[0]["parts"][0]["text"] == "wider" and ids(hist[1:]) == ["m4"]
    assert [c.summary for c in s.get_compactions()] == ["first summary", "wider"]


def test_overlays_are_branch_local(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("m1", "root"))
    s.append_message(text("m2", "left"))
    s.append_message(text("m3", "right"), parent_id="m1")
    s.add_compaction("summary", "m1", "m2")
    assert ids(s.get_history()) == ["m1", "m3"]
    branch = s.get_history(leaf_id="m2")
    assert len(branch) == 1 and branch[0]["parts"][0]["text"] == "summary"


def test_a_sibling_branch_record_does_not_block_an_older_valid_one(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("a", "a"))
    s.append_message(text("b", "b"))
    s.append_message(text("c", "c"))
    s.append_message(text("x", "x"), parent_id="a")
    s.add_compaction("valid", "a", "b")
    s.add_compaction("other branch", "a", "x")
    hist = s.get_history(leaf_id="c")
    assert hist[0]["parts"][0]["text"] == "valid" and ids(hist[1:]) == ["c"]


def test_newest_record_wins_and_overlays_never_stack(store: Sessions) -> None:
    s = store.session()
    for i in range(6):
        s.append_message(text(f"m{i}", str(i)))
    s.add_compaction("inner", "m2", "m3")
    s.add_compaction("old", "m1", "m4")
    s.add_compaction("new", "m1", "m3")
    hist = s.get_history()
    assert hist[0]["id"] == "m0"
    assert hist[1]["parts"][0]["text"] == "new"
    assert ids(hist[2:]) == ["m4", "m5"]


def test_overlay_across_window_boundaries(store: Sessions) -> None:
    chain(store, 120)
    s = store.session()
    s.add_compaction("middle", "m40", "m70")
    got = ids(s.get_history())
    assert got[:40] == [f"m{i}" for i in range(40)]
    assert got[40].startswith(COMPACTION_PREFIX)
    assert got[41:] == [f"m{i}" for i in range(71, 120)]


def test_get_message_branches_and_stats_ignore_overlays(store: Sessions) -> None:
    s = store.session()
    for i in range(3):
        s.append_message(text(f"m{i}", str(i)))
    rec = s.add_compaction("s", "m0", "m1")
    assert s.get_message("m0") == text("m0", "0")
    assert s.get_message(COMPACTION_PREFIX + rec.id) is None
    assert ids(s.get_branches("m0")) == ["m1"]
    assert [r.id for r in s.get_history_row_stats()] == ["m0", "m1", "m2"]


def test_an_echoed_overlay_is_not_stored(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("m0", "0"))
    s.append_message(text("m1", "1"))
    rec = s.add_compaction("s", "m0", "m1")
    echo = s.get_history()[0]
    r = s.append_message(echo)
    assert not r.inserted
    assert s.update_message(echo) is None
    assert not s.upsert_message(echo).inserted
    assert store.storage_stats().messages == 2
    assert s.get_history()[0]["id"] == COMPACTION_PREFIX + rec.id
    assert len(s.get_history()) == 1


def test_a_stored_copy_of_an_overlay_is_hidden_on_read(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("m0", "0"))
    s.append_message(text("m1", "1"))
    rec = s.add_compaction("s", "m0", "m1")
    echo = s.get_history()[0]
    s.import_message(echo, parent_id="m1", created_at=1)
    s.import_message(text("m2", "2"), parent_id=echo["id"], created_at=2)
    hist = s.get_history()
    assert ids(hist) == [COMPACTION_PREFIX + rec.id, "m2"]
    assert list(s.history(newest_first=True)) == hist[::-1]


def test_compaction_records_are_stored_and_listed_in_order(store: Sessions) -> None:
    s = store.session()
    a = s.add_compaction("one", "x", "y")
    b = s.add_compaction("two", "x", "z")
    assert [c.id for c in s.get_compactions()] == [a.id, b.id]
    assert a.created_at.endswith("Z") and "T" in a.created_at
    assert store.session("other").get_compactions() == []


def test_recent_history_truncation_edges(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("only", "x" * 500))
    alone = s.get_recent_history(10)
    assert ids(alone.messages) == ["only"] and not alone.truncated
    s.append_message(text("child", "y" * 500))
    over = s.get_recent_history(10)
    assert ids(over.messages) == ["child"] and over.truncated
    s.append_message(text("root2", "z"), parent_id=None)
    root = s.get_recent_history(10)
    assert ids(root.messages) == ["root2"] and not root.truncated
    assert root.total_content_bytes == s.get_history_row_stats()[0].bytes
    # The same edges by an explicit leaf: the parent-link walk, not the linear shortcut.
    named = s.get_recent_history(10, leaf_id="child")
    assert ids(named.messages) == ["child"] and named.truncated
    named_root = s.get_recent_history(10, leaf_id="only")
    assert ids(named_root.messages) == ["only"] and not named_root.truncated


def test_recent_history_total_follows_writes(store: Sessions) -> None:
    s = store.session()
    for i in range(5):
        s.append_message(text(f"m{i}", "a" * 100))

    def total() -> int:
        return sum(r.bytes for r in s.get_history_row_stats())

    assert s.get_recent_history(1).total_content_bytes == total()
    s.append_message(text("m5", "b" * 300))
    assert s.get_recent_history(1).total_content_bytes == total()
    s.update_message(text("m2", "c" * 5000))
    assert s.get_recent_history(1).total_content_bytes == total()
    s.delete_messages(["m3"])
    assert s.get_recent_history(1).total_content_bytes == total()
    s.append_message(text("side", "d"), parent_id="m1")
    assert s.get_recent_history(1).total_content_bytes == total()
    assert s.get_recent_history(10**6, leaf_id="m5").total_content_bytes == sum(
        r.bytes for r in s.get_history_row_stats("m5")
    )


@pytest.mark.parametrize("seed", range(6))
def test_newest_first_matches_reversed_forward_on_random_trees(
    open_store: Any, seed: int
) -> None:
    import random

    rng = random.Random(seed)
    store = open_store()
    s = store.session(f"r{seed}")
    made: list[str] = []
    for i in range(60):
        mid = f"n{i}"
        roll = rng.random()
        if made and roll < 0.2:
            s.append_message(text(mid, "x" * rng.randint(1, 300)), parent_id=rng.choice(made))
        elif roll < 0.23:
            s.append_message(text(mid, "root"), parent_id=None)
        else:
            s.append_message(text(mid, "y" * rng.randint(1, 300)))
        made.append(mid)
    s.delete_messages(rng.sample(made, 6))
    alive = [m for m in made if s.get_message(m) is not None]
    for _ in range(4):
        a, b = rng.sample(alive, 2)
        s.add_compaction(f"summary {a}..{b}", a, b)
    for leaf in [None, *rng.sample(alive, 8)]:
        forward = s.get_history(leaf_id=leaf)
        backward = list(s.history(leaf_id=leaf, newest_first=True))
        assert backward == forward[::-1], leaf
        if forward:
            head = []
            for m in s.history(leaf_id=leaf, newest_first=True):
                head.append(m)
                if len(head) == 3:
                    break
            assert head == forward[::-1][:3]


@pytest.mark.async_api
def test_get_roots_lists_every_tree_in_write_order(store: Sessions) -> None:
    s = store.session()
    assert s.get_roots() == []
    s.append_message(text("a", "1"))
    s.append_message(text("b", "2"))
    s.append_message(text("c", "3"), parent_id=None)
    s.append_message(text("d", "4"), parent_id="unknown")
    s.import_message(text("e", "5"), parent_id="f", created_at=1)
    s.import_message(text("f", "6"), parent_id="e", created_at=2)
    assert ids(s.get_roots()) == ["a", "c", "d", "e"]
    s.delete_messages(["a"])
    assert ids(s.get_roots()) == ["b", "c", "d", "e"]
    assert store.session("other").get_roots() == []


@pytest.mark.parametrize("seed", range(4))
def test_recent_history_matches_a_reference_on_random_sessions(
    open_store: Any, seed: int
) -> None:
    """Window, truncation, total and overlays against the rule of §5.6 computed from stats."""
    import random

    rng = random.Random(seed)
    store = open_store()
    s = store.session(f"w{seed}")
    made: list[str] = []
    for i in range(80):
        mid = f"n{i}"
        if made and seed and rng.random() < 0.1:  # seed 0 stays linear
            s.append_message(text(mid, "b" * rng.randint(1, 400)), parent_id=rng.choice(made))
        else:
            s.append_message(text(mid, "a" * rng.randint(1, 400)))
        made.append(mid)
    # The overlay's ends come from the active path so that the whole-path window holds both.
    path = [r.id for r in s.get_history_row_stats()]
    assert len(path) >= 8, path
    first, last = path[-8], path[-4]
    record = s.add_compaction("sum", first, last)
    overlaid = False
    for leaf in (None, rng.choice(made)):
        stats = s.get_history_row_stats(leaf)
        for budget in (0, 500, 3_000, 12_000, 40_000, 10**9):
            got = s.get_recent_history(budget, leaf_id=leaf)
            start, used = len(stats) - 1, stats[-1].bytes
            while start > 0 and used + stats[start - 1].bytes <= budget:
                start -= 1
                used += stats[start].bytes
            assert got.truncated == (start > 0), (leaf, budget)
            assert got.total_content_bytes == sum(r.bytes for r in stats)
            expected = [r.id for r in stats[start:]]
            if first in expected and last in expected:
                a, b = expected.index(first), expected.index(last)
                if a <= b:  # the overlay applies only when both ends are in the window
                    expected[a : b + 1] = [COMPACTION_PREFIX + record.id]
                    overlaid = True
            assert ids(got.messages) == expected, (leaf, budget)
    assert overlaid, "no window held both ends of the overlay"


def test_resending_a_message_whose_row_is_damaged_does_not_fail(store: Sessions) -> None:
    """Integrations re-send a conversation's messages every turn: one damaged row must not
    make every later write of the session raise."""
    chain(store, 3)
    s = store.session()
    damage(store, "m1")
    again = text("m1", "resent")
    assert s.append_message(again) == s.append_message(again)
    assert s.append_message(again).inserted is False
    assert s.import_message(again).inserted is False
    assert ids(s.get_history()) == ["m0", "m2"]


def test_totals_are_remembered_by_the_store_not_the_handle(
    store: Sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``store.session(id).get_recent_history(...)`` per request drops its handle each time:
    the next request must not walk the whole path again."""
    chain(store, 50)
    walks: list[int] = []
    original = SqlOps.path

    def counting(self: SqlOps, *args: Any) -> Any:
        walks.append(1)
        return original(self, *args)

    monkeypatch.setattr(SqlOps, "path", counting)
    for _ in range(3):
        assert len(store.session().get_recent_history(10**9).messages) == 50
        assert store.session().get_token_estimate() > 0
        gc.collect()  # no handle survives between requests
    assert len(walks) == 1

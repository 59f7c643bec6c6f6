"""Reads planned as runs of consecutive seqs: a linear path is not walked, branches, splices,
the chosen leaf and overlays still read right, and a newest-first read starts in one statement."""

from __future__ import annotations

import random
from typing import Any

import pytest
from _helpers import ids, text

from convostore import COMPACTION_PREFIX, ImportItem, Sessions
from convostore.backends._sql import SqlOps
from convostore.messages._runs import CHAIN_HEADS, Runs, chain_runs

# --- Runs and chain_runs, pure ---------------------------------------------------------------


def test_runs_map_positions_to_seqs_and_back() -> None:
    seqs = [1, 2, 3, 7, 8, 10, 20, 21, 22, 23]
    runs = Runs.of(seqs)
    assert runs.runs == 4 and len(runs) == len(seqs)
    assert list(runs) == seqs and [runs[i] for i in range(-len(seqs), 0)] == seqs
    assert runs[2:7] == seqs[2:7] and runs[::3] == seqs[::3] and runs[5:2] == []
    assert list(runs.ranges(2, 7)) == [(3, 3), (7, 8), (10, 10), (20, 21)]
    assert list(runs.ranges(5, 100)) == [(10, 10), (20, 23)]
    assert list(runs.without({2, 8, 99})) == [s for s in seqs if s not in (2, 8)]
    assert Runs([(5, 9), (10, 12), (14, 13)]).runs == 1  # adjacent runs merge, empty ones drop
    with pytest.raises(IndexError):
        runs[len(seqs)]


def test_runs_hold_any_increasing_seqs() -> None:
    rng = random.Random(7)
    for _ in range(200):
        seqs = sorted(rng.sample(range(1, 120), rng.randint(0, 60)))
        runs = Runs.of(seqs)
        assert list(runs) == seqs and runs[:] == seqs
        drop = set(rng.sample(range(1, 120), 10))
        assert list(runs.without(drop)) == [s for s in seqs if s not in drop]
        if seqs:
            lo, hi = sorted(rng.sample(range(len(seqs)), 2)) if len(seqs) > 1 else (0, 0)
            got = [s for a, b in runs.ranges(lo, hi) for s in range(a, b + 1)]
            assert got == seqs[lo : hi + 1]


def test_chain_runs_follow_the_unchained_rows_to_a_root() -> None:
    # rows 1..10 a chain from root 1; 11 branches off 4; 12..15 chained after it
    heads = [(1, None), (11, 4)]
    assert list(chain_runs(heads, 15) or []) == [1, 2, 3, 4, 11, 12, 13, 14, 15]
    assert list(chain_runs(heads, 10) or []) == list(range(1, 11))
    assert list(chain_runs(heads, 3) or []) == [1, 2, 3]
    assert list(chain_runs([(5, 9)], 6) or []) == [5, 6]  # a parent written later: a root
    assert chain_runs([(5, None)], 3) is None  # nothing opens the run below 5: walk instead


# --- reads through the store -------------------------------------------------------------------


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The leaves the content-free path walk (``SqlOps.path``) was asked for."""
    asked: list[str] = []
    original = SqlOps.path

    def spy(self: SqlOps, session_id: str, leaf_id: str) -> Any:
        asked.append(leaf_id)
        return original(self, session_id, leaf_id)

    monkeypatch.setattr(SqlOps, "path", spy)
    return asked


def test_a_linear_read_is_not_walked(store: Sessions, walks: list[str]) -> None:
    s = store.session()
    msgs = [text(f"m{i}", f"body {i}") for i in range(130)]
    s.append_messages(msgs[:60])
    for m in msgs[60:]:
        s.append_message(m)
    assert s.get_history() == msgs
    assert list(s.history(newest_first=True)) == msgs[::-1]
    assert walks == []


def test_branches_splices_and_the_chosen_leaf_read_as_walked(
    store: Sessions, walks: list[str]
) -> None:
    s = store.session()
    for i in range(8):
        s.append_message(text(f"a{i}", "x"))
    s.append_message(text("b0", "x"), parent_id="a3")  # a branch
    for i in range(1, 5):
        s.append_message(text(f"b{i}", "x"))
    s.append_message(text("c0", "x"), parent_id="b2")  # a branch of the branch
    s.append_message(text("c1", "x"))
    assert ids(s.get_history()) == ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "c0", "c1"]
    assert ids(s.get_history(leaf_id="b4")) == ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3",
                                               "b4"]
    assert ids(s.get_history(leaf_id="a7")) == [f"a{i}" for i in range(8)]
    s.set_active_leaf("a5")
    assert ids(s.get_history()) == [f"a{i}" for i in range(6)]
    assert ids(s.history(newest_first=True)) == [f"a{i}" for i in range(5, -1, -1)]
    s.set_active_leaf("c1")
    s.delete_messages(["b1", "a2"])  # their children are spliced to the nearest kept ancestor
    assert ids(s.get_history()) == ["a0", "a1", "a3", "b0", "b2", "c0", "c1"]
    assert ids(s.history(newest_first=True)) == ["c1", "c0", "b2", "b0", "a3", "a1", "a0"]
    assert ids(s.get_history(leaf_id="a7")) == ["a0", "a1", "a3", "a4", "a5", "a6", "a7"]
    assert walks == []


def test_overlays_and_echoes_over_runs(store: Sessions) -> None:
    s = store.session()
    for i in range(120):
        s.append_message(text(f"m{i}", f"t{i}"))
    record = s.add_compaction("summary", "m10", "m69")
    assert record is not None
    echo = {"id": COMPACTION_PREFIX + record.id, "role": "assistant",
            "parts": [{"type": "text", "text": "summary"}]}
    s.append_message(echo)  # a client echoes the synthetic summary back: it must not show twice
    for i in range(120, 130):
        s.append_message(text(f"m{i}", f"t{i}"))
    got = s.get_history()
    assert ids(got) == [f"m{i}" for i in range(10)] + [echo["id"]] + [
        f"m{i}" for i in range(70, 130)]
    assert got[10] == echo
    assert list(s.history(newest_first=True)) == got[::-1]


@pytest.mark.async_api
def test_a_session_of_many_unchained_rows_is_walked(store: Sessions, walks: list[str]) -> None:
    s = store.session()
    n = CHAIN_HEADS + 5
    s.import_messages([ImportItem(text(f"u{i}", "x"), parent_id=None) for i in range(n)])
    s.append_message(text("last", "y"), parent_id="u0")  # under the first root: not chained
    assert ids(s.get_history()) == ["u0", "last"]
    assert ids(s.history(newest_first=True)) == ["last", "u0"]
    assert walks == ["last"]


def test_a_newest_first_read_starts_in_one_statement(
    store: Sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = store.session()
    for i in range(10):
        s.append_message(text(f"m{i}", "x"))
    calls: list[str] = []
    for name in ("compactions", "chosen_leaf", "row_meta", "active_leaf"):
        original = getattr(SqlOps, name)

        def spy(self: SqlOps, *args: Any, _name: str = name, _original: Any = original) -> Any:
            calls.append(_name)
            return _original(self, *args)

        monkeypatch.setattr(SqlOps, name, spy)
    assert next(s.history(newest_first=True))["id"] == "m9"
    assert next(s.history(leaf_id="m4", newest_first=True))["id"] == "m4"
    assert calls == []
    s.set_active_leaf("m6")
    calls.clear()  # the choice is checked when it is made
    assert next(s.history(newest_first=True))["id"] == "m6"
    assert calls == []
    assert list(s.history(leaf_id="nope", newest_first=True)) == []

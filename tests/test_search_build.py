"""The one-time search-index build (issue 18 item 11): bounded steps, resumable, writes indexed.

The build creates the empty index in one short transaction, then backfills in small steps of
their own, each moving a durable cursor; writers get in between steps, and a message written,
rewritten or deleted during the build ends up indexed exactly as it is stored.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _helpers import text

from convostore import Sessions
from convostore.cli import main


class _Stop(Exception):
    """Raised by a progress callback to interrupt a build after its first step."""


def _fill(store: Sessions, per_session: int = 250) -> list[str]:
    """``alpha`` messages in sessions ``a`` and ``b``, ids in key order; their keys."""
    keys = []
    for sid in ("a", "b"):
        s = store.session(sid)
        for i in range(per_session):
            s.append_message(text(f"{sid}{i:04}", f"alpha number {i}"))
            keys.append(f"{sid}{i:04}")
    return keys


def _stop_after_first_step(done: int, total: int) -> None:
    raise _Stop


def _interrupted_build(store: Sessions) -> None:
    with pytest.raises(_Stop):
        store.build_search_index(_stop_after_first_step)


def _hits(store: Sessions, query: str) -> Counter[str]:
    return Counter(h.id for h in store.search(query, limit=10_000))


def test_the_build_runs_in_steps_with_progress(store: Sessions) -> None:
    keys = _fill(store)
    seen: list[tuple[int, int]] = []
    assert store.build_search_index(lambda done, total: seen.append((done, total))) == len(keys)
    assert len(seen) > 1  # several transactions, not one
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert seen[-1] == (len(keys), len(keys))
    assert _hits(store, "alpha") == Counter(keys)
    assert store.build_search_index() == 0  # complete: nothing left to do


def test_writes_during_the_build_are_indexed_once_and_deletes_stay_deleted(
    store: Sessions,
) -> None:
    """Between two steps the index exists and writers index their own messages; the rest of
    the backfill neither duplicates nor resurrects what they wrote or deleted."""
    keys = _fill(store)
    _interrupted_build(store)  # a0000.. indexed by the first step, b0249 not yet
    a, b = store.session("a"), store.session("b")
    a.update_message(text("a0000", "omega scanned then rewritten"))
    b.update_message(text("b0249", "omega rewritten before its scan"))
    a.delete_messages(["a0001"])
    b.delete_messages(["b0248"])
    b.append_message(text("b9999", "alpha written during the build"))
    store.session("0").append_message(text("z", "alpha in a session before the cursor"))
    store.session("c").append_message(text("c", "alpha in a session after the cursor"))
    indexed_now = store.build_search_index()
    assert 0 < indexed_now < len(keys)  # resumed from the cursor, not from the start
    expected = Counter(k for k in keys if k not in ("a0000", "a0001", "b0248", "b0249"))
    expected.update(["b9999", "z", "c"])
    assert _hits(store, "alpha") == expected
    assert _hits(store, "omega") == Counter(["a0000", "b0249"])
    assert [h.content for h in b.search("omega")] == ["omega rewritten before its scan"]


def test_a_search_during_an_unfinished_build_finishes_it(store: Sessions) -> None:
    keys = _fill(store)
    _interrupted_build(store)
    assert _hits(store, "alpha") == Counter(keys)
    assert [h.id for h in store.session("b").search("alpha number 249")] == ["b0249"]
    assert store.build_search_index() == 0


@pytest.mark.requires("reopen")
def test_an_interrupted_build_resumes_in_another_store(open_store: Any) -> None:
    """The cursor is durable: a store opened later (another process, after a crash) goes on
    where the first stopped and indexes each message once."""
    first = open_store()
    keys = _fill(first)
    _interrupted_build(first)
    first.close()
    second = open_store()
    seen: list[tuple[int, int]] = []
    indexed = second.build_search_index(lambda done, total: seen.append((done, total)))
    assert 0 < indexed < len(keys)
    assert seen[-1] == (indexed, indexed)  # the total counts what was left, not everything
    assert _hits(second, "alpha") == Counter(keys)


def test_building_an_empty_store_and_then_writing(store: Sessions) -> None:
    assert store.build_search_index() == 0
    store.session().append_message(text("m", "alpha after the build"))
    assert _hits(store, "alpha") == Counter(["m"])


def test_cli_index_builds_and_is_quiet_off_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "chat.db")
    with Sessions.open(path) as store:
        keys = _fill(store, per_session=50)
    assert main(["index", path]) == 0
    out, err = capsys.readouterr()
    assert out == "search index complete (100 messages indexed now)\n"
    assert err == ""  # a progress bar is drawn on a terminal only (test_cli_data.py)
    assert main(["index", path]) == 0
    assert capsys.readouterr().out == "search index complete (0 messages indexed now)\n"
    with Sessions.open(path) as store:
        assert _hits(store, "alpha") == Counter(keys)


def test_cli_index_of_a_missing_file_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", str(tmp_path / "none.db")]) == 1
    assert capsys.readouterr().err.startswith("convostore: error: no ")
    assert not (tmp_path / "none.db").exists()


def test_a_progress_callback_may_search(tmp_path: Path) -> None:
    """The callback runs between steps, holding nothing: a search in it finishes the build."""
    with Sessions.open(str(tmp_path / "chat.db")) as store:
        keys = _fill(store, per_session=150)
        found: list[int] = []
        store.build_search_index(lambda done, total: found.append(len(_hits(store, "alpha"))))
        assert found and set(found) == {len(keys)}

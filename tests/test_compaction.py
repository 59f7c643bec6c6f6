"""compact(), auto-compaction and the token estimate."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from _helpers import ids, text

from convostore import (
    COMPACTION_PREFIX,
    ChangeEvent,
    CompactResult,
    NoCompactionFunction,
    Sessions,
    create_compact_function,
)
from convostore.tokens import estimate_row_tokens, estimate_string_tokens

pytestmark = pytest.mark.partitions  # compactions and their leases are session-keyed tables


def test_compact_without_a_function_raises_a_clear_error(store: Sessions) -> None:
    with pytest.raises(NoCompactionFunction, match="on_compaction"):
        store.session().compact()


def test_stores_the_overlay_the_function_returns(store: Sessions) -> None:
    s = store.session()
    for i in range(1, 5):
        s.append_message(text(f"m{i}", f"t{i}"))
    s.on_compaction(lambda msgs: CompactResult("m1", "m3", "summary"))
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    assert s.compact() == CompactResult("m1", "m3", "summary")
    (rec,) = s.get_compactions()
    assert (rec.from_message_id, rec.to_message_id, rec.summary) == ("m1", "m3", "summary")
    assert [(e.type, e.session_id) for e in events] == [("compact", "")]
    assert ids(s.get_history()) == [COMPACTION_PREFIX + rec.id, "m4"]


def test_returns_none_when_the_function_does(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("a", "x"))
    s.on_compaction(lambda msgs: None)
    assert s.compact() is None
    assert s.get_compactions() == []


def test_an_end_not_in_the_history_stores_nothing(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("a", "x"))
    s.append_message(text("b", "y"))
    s.append_message(text("side", "z"), parent_id="a")
    s.on_compaction(lambda msgs: {"from_message_id": "a", "to_message_id": "b", "summary": "s"})
    assert s.compact() is None  # b is on another branch
    assert s.compact(leaf_id="b") == CompactResult("a", "b", "s")


def test_iterative_compaction_extends_from_the_earliest_visible_overlay(store: Sessions) -> None:
    s = store.session()
    for i in range(1, 9):
        s.append_message(text(f"m{i}", f"t{i}"))
    s.add_compaction("first", "m1", "m5")
    s.on_compaction(lambda msgs: CompactResult("m6", "m8", "second"))
    result = s.compact()
    assert result == CompactResult("m1", "m8", "second")
    hist = s.get_history()
    assert len(hist) == 1 and hist[0]["parts"][0]["text"] == "second"


def test_compaction_is_branch_local_on_a_two_branch_tree(store: Sessions) -> None:
    s = store.session()
    for i in range(6):
        s.append_message(text(f"a{i}", "x" * 50))
    for i in range(3):
        s.append_message(text(f"b{i}", "y" * 50), parent_id="a2" if i == 0 else f"b{i - 1}")
    s.add_compaction("left only", "a0", "a4")
    assert ids(s.get_history(leaf_id="b2")) == ["a0", "a1", "a2", "b0", "b1", "b2"]
    s.on_compaction(lambda msgs: CompactResult("a0", "b0", "right"))
    assert s.compact(leaf_id="b2") == CompactResult("a0", "b0", "right")
    right = s.get_history(leaf_id="b2")
    assert right[0]["parts"][0]["text"] == "right" and ids(right[1:]) == ["b1", "b2"]
    left = s.get_history(leaf_id="a5")
    assert left[0]["parts"][0]["text"] == "left only" and ids(left[1:]) == ["a5"]


@pytest.mark.async_api
def test_a_raising_function_raises_to_the_caller_who_asked(
    store: Sessions, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 36, 10: compact() by hand returned None, as for "nothing to compact", and logged a
    traceback even with a handler set. The caller gets the function's error; watchers get the
    error change; the handler (automatic compaction's) and the log stay quiet."""
    s = store.session()
    s.append_message(text("a", "x"))
    errors: list[BaseException] = []
    events: list[ChangeEvent] = []
    store.subscribe(events.append)

    def broken(msgs: list[dict[str, Any]]) -> None:
        raise RuntimeError("model down")

    s.on_compaction(broken)
    with caplog.at_level(logging.WARNING, logger="convostore"):
        with pytest.raises(RuntimeError, match="model down"):
            s.compact()
        s.on_compaction_error(errors.append)
        with pytest.raises(RuntimeError, match="model down"):
            s.compact()
    assert errors == [] and "model down" not in caplog.text
    assert [e.type for e in events] == ["error", "error"]
    logged = [c for c in store.changes(0) if c.type == "error"]
    assert [c.error for c in logged] == ["RuntimeError: model down"] * 2
    assert s.get_compactions() == []


def test_the_function_gets_the_overlaid_history(store: Sessions) -> None:
    s = store.session()
    for i in range(1, 6):
        s.append_message(text(f"m{i}", str(i)))
    s.add_compaction("old", "m1", "m2")
    seen: list[list[str]] = []

    def fn(msgs: list[dict[str, Any]]) -> None:
        seen.append(ids(msgs))

    s.on_compaction(fn).compact()
    assert seen[0][0].startswith(COMPACTION_PREFIX) and seen[0][1:] == ["m3", "m4", "m5"]


# --- auto-compaction ------------------------------------------------------------------------


def test_auto_compacts_past_the_threshold_using_the_derived_estimate(store: Sessions) -> None:
    s = store.session()
    calls: list[int] = []

    def fn(msgs: list[dict[str, Any]]) -> CompactResult:
        calls.append(len(msgs))
        return CompactResult(msgs[0]["id"], msgs[-1]["id"], "compacted")

    s.on_compaction(fn).compact_after(100)
    s.append_message(text("short", "short"))
    assert store.wait_for_compactions()
    assert calls == []
    s.append_message(text("long", "y" * 600))
    assert store.wait_for_compactions()  # it runs in the background, after the append
    assert calls == [2]
    assert s.get_history()[0]["parts"][0]["text"] == "compacted"


def test_auto_compaction_needs_both_function_and_threshold(store: Sessions) -> None:
    s = store.session()
    calls: list[int] = []
    s.on_compaction(lambda m: calls.append(1))
    s.append_message(text("a", "y" * 2000))
    s.compact_after(10).compact_after(None)
    s.append_message(text("b", "y" * 2000))
    assert store.wait_for_compactions()
    assert calls == []
    other = store.session("o").compact_after(10)
    other.append_message(text("a", "y" * 2000))  # no function: nothing happens
    assert store.wait_for_compactions()


def test_auto_compaction_runs_only_after_inserting_appends(store: Sessions) -> None:
    s = store.session()
    calls: list[str] = []
    s.on_compaction(lambda m: calls.append("call")).compact_after(50)
    s.import_message(text("i", "y" * 1000), parent_id=None, created_at=1)
    s.append_message(text("i", "dup"))
    s.update_message(text("i", "z" * 2000))
    assert store.wait_for_compactions()
    assert calls == []
    s.append_message(text("new", "x"))
    assert store.wait_for_compactions()
    assert calls == ["call"]


@pytest.mark.async_api
def test_strictly_greater_than_the_threshold(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("a", "x"))
    exact = s.get_token_estimate()
    calls: list[int] = []
    s.on_compaction(lambda m: calls.append(1))
    s.compact_after(exact + estimate_row_tokens(text("b", "x")))
    s.append_message(text("b", "x"))
    assert store.wait_for_compactions()
    assert calls == []
    s.append_message(text("c", "x"))
    assert store.wait_for_compactions()
    assert calls == [1]


@pytest.mark.async_api
def test_auto_compaction_failure_never_fails_the_append(
    store: Sessions, caplog: pytest.LogCaptureFixture
) -> None:
    # Two sessions: a failed attempt backs its session off (see test_feed.py), so the second
    # failure comes from a second session.
    s, t = store.session(), store.session("t")
    got: list[BaseException] = []
    events: list[ChangeEvent] = []
    store.subscribe(events.append)

    def boom(msgs: list[dict[str, Any]]) -> None:
        raise ValueError("nope")

    def bad_handler(exc: BaseException) -> None:
        got.append(exc)
        raise RuntimeError("handler broke too")

    for handle in (s, t):
        handle.on_compaction(boom).compact_after(1).on_compaction_error(bad_handler)
    with caplog.at_level(logging.WARNING, logger="convostore"):
        r = s.append_message(text("a", "hello there"))
        assert r.inserted
        assert store.wait_for_compactions()
        t.append_message(text("b", "again"))
        assert store.wait_for_compactions()
    assert len(got) == 2
    assert [e.type for e in events] == ["append", "error", "append", "error"]
    # The handler took the error: only its own failure is logged.
    logged = [r.getMessage() for r in caplog.records]
    assert logged and all(m.startswith("on_compaction_error handler") for m in logged), logged
    assert ids(s.get_history()) == ["a"] and ids(t.get_history()) == ["b"]


def test_token_estimate_uses_stamps_and_summaries(store: Sessions) -> None:
    s = store.session()
    msgs = [text(f"m{i}", "word " * (10 * (i + 1))) for i in range(5)]
    for m in msgs:
        s.append_message(m)
    stamps = [estimate_row_tokens(m) for m in msgs]
    assert [r.token_estimate for r in s.get_history_row_stats()] == stamps
    assert s.get_token_estimate() == sum(stamps)
    s.add_compaction("a short summary", "m1", "m3")
    expected = stamps[0] + stamps[4] + estimate_string_tokens("a short summary")
    assert s.get_token_estimate() == expected
    s.append_message(text("m5", "more words"))
    assert s.get_token_estimate() == expected + estimate_row_tokens(text("m5", "more words"))
    s.update_message(text("m0", "x"))
    assert s.get_token_estimate() == (
        estimate_row_tokens(text("m0", "x")) + stamps[4]
        + estimate_string_tokens("a short summary")
        + estimate_row_tokens(text("m5", "more words"))
    )
    s.append_message(text("branch", "b"), parent_id="m0")
    assert s.get_token_estimate() == (
        estimate_row_tokens(text("m0", "x")) + estimate_row_tokens(text("branch", "b"))
    )


@pytest.mark.requires("shared_across_processes")  # two stores on one database at once
def test_estimate_sees_another_stores_writes(open_store: Callable[..., Sessions]) -> None:
    a = open_store()
    b = open_store()
    sa, sb = a.session(), b.session()
    sa.append_message(text("m1", "short"))
    sa.append_message(text("m2", "short"))
    before = sa.get_token_estimate()
    sb.update_message(text("m1", "long " * 400))
    assert sa.get_token_estimate() > before + 300
    sb.append_message(text("m3", "tail " * 100))
    sa.append_message(text("m4", "x"))
    assert sa.get_token_estimate() == sum(r.token_estimate for r in sa.get_history_row_stats())
    sb.add_compaction("s", "m1", "m3")
    stats = sa.get_history_row_stats()
    assert sa.get_token_estimate() == stats[-1].token_estimate + estimate_string_tokens("s")


def test_an_overlay_whose_end_arrives_later_is_counted(store: Sessions) -> None:
    s = store.session()
    s.append_message(text("a", "word " * 100))
    s.add_compaction("s", "a", "b")
    first = s.get_token_estimate()
    s.append_message(text("b", "word " * 100))
    assert first > 100
    assert s.get_token_estimate() == estimate_string_tokens("s")


# --- the reference compact function through the store ----------------------------------------


def test_create_compact_function_over_three_rounds(store: Sessions) -> None:
    s = store.session()
    prompts: list[str] = []

    def summarize(prompt: str) -> str:
        prompts.append(prompt)
        return f"summary round {len(prompts)}"

    s.on_compaction(create_compact_function(summarize, keep_recent_tokens=40))
    for round_ in range(3):
        for i in range(8):
            s.append_message(text(f"r{round_}-{i}", f"round {round_} turn {i} " + "w " * 20,
                                  "user" if i % 2 == 0 else "assistant"))
        assert s.compact() is not None
    assert [c.summary for c in s.get_compactions()] == [
        "summary round 1", "summary round 2", "summary round 3"
    ]
    first_from = s.get_compactions()[0].from_message_id
    assert all(c.from_message_id == first_from for c in s.get_compactions())
    assert "summary round 1" in prompts[1] and "summary round 2" in prompts[2]
    hist = s.get_history()
    assert ids(hist)[:3] == ["r0-0", "r0-1", "r0-2"]
    assert sum(1 for m in hist if m["id"].startswith(COMPACTION_PREFIX)) == 1
    assert hist[3]["parts"][0]["text"] == "summary round 3"


def test_async_summariser_through_the_sync_api(store: Sessions) -> None:
    s = store.session()

    async def summarize(prompt: str) -> str:
        return "async summary"

    s.on_compaction(create_compact_function(summarize, keep_recent_tokens=1))
    for i in range(8):
        s.append_message(text(f"m{i}", f"turn {i}"))
    result = s.compact()
    assert result is not None and result.summary == "async summary"

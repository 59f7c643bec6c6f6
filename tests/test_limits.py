"""The store's limits, enforced the same way at every entry point (issue 18, items 5 and 6).

Ids without NUL or lone surrogates and of at most ``MAX_ID_BYTES`` UTF-8 bytes, timestamps of
years 1970 to 9999, counts and limits within 64 bits, and a search query's NUL and lone
surrogates read as word separators. Each bad value is refused with ``InvalidArgument`` (a
``ValueError``) or ``InvalidArgumentType`` (a ``TypeError``) naming the argument, or
``InvalidMessage``/``InvalidMessageType`` naming the message field; nothing is written, and
both engines answer alike (before, one stored what the other refused, and the errors were the
drivers' own).
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from _blocking import blocking_manager
from _helpers import ids, text

from convostore import (
    ConvostoreError,
    InvalidArgument,
    InvalidArgumentType,
    InvalidMessage,
    InvalidMessageType,
    Sessions,
)
from convostore.limits import MAX_COUNT, MAX_ID_BYTES, MAX_TIMESTAMP_MS

BAD_IDS = {
    "nul": "a\x00b",
    "lone surrogate": "a\ud800b",
    "low surrogate": "\udfff",
    "too long": "x" * (MAX_ID_BYTES + 1),
    "too long in bytes": "é" * (MAX_ID_BYTES // 2 + 1),  # fewer characters than the limit
    "a megabyte": "y" * 1_000_000,
}

Call = Callable[[Any, str], object]


_manager = blocking_manager


def _sid(store: Any) -> str:
    """The id of the managed session :func:`_seed` registered."""
    (info,) = _manager(store).list()
    return str(info.id)


def _fn(messages: list[Any]) -> None:
    return None


# (argument named by the error, the call with the bad value in that argument)
ID_ARGUMENTS: list[tuple[str, Call]] = [
    ("'id'", lambda s, v: s.session("s").append_message(text(v, "hi"))),
    ("'id'", lambda s, v: s.session("s").update_message(text(v, "hi"))),
    ("'id'", lambda s, v: s.session("s").upsert_message(text(v, "hi"))),
    ("'id'", lambda s, v: s.session("s").import_message(text(v, "hi"))),
    ("parent_id", lambda s, v: s.session("s").append_message(text("n", "hi"), v)),
    ("parent_id", lambda s, v: s.session("s").upsert_message(text("n", "hi"), v)),
    ("parent_id", lambda s, v: s.session("s").import_message(text("n", "hi"), parent_id=v)),
    ("session_id", lambda s, v: s.session(v)),
    ("id", lambda s, v: s.session("s").get_message(v)),
    ("message_id", lambda s, v: s.session("s").get_branches(v)),
    ("ids[1]", lambda s, v: s.session("s").delete_messages(["a", v])),
    ("leaf_id", lambda s, v: s.session("s").get_history(v)),
    ("leaf_id", lambda s, v: s.session("s").history(leaf_id=v)),
    ("leaf_id", lambda s, v: s.session("s").history(leaf_id=v, newest_first=True)),
    ("leaf_id", lambda s, v: s.session("s").history_batches(leaf_id=v)),
    ("leaf_id", lambda s, v: s.session("s").get_recent_history(1000, leaf_id=v)),
    ("leaf_id", lambda s, v: s.session("s").get_history_row_stats(v)),
    ("leaf_id", lambda s, v: s.session("s").on_compaction(_fn).compact(v)),
    ("from_message_id", lambda s, v: s.session("s").add_compaction("sum", v, "a")),
    ("to_message_id", lambda s, v: s.session("s").add_compaction("sum", "a", v)),
    ("session_id", lambda s, v: _manager(s).get(v)),
    ("session_id", lambda s, v: _manager(s).append(v, text("n", "hi"))),
    ("session_id", lambda s, v: _manager(s).get_history(v)),
    ("parent_session_id", lambda s, v: _manager(s).create("x", parent_session_id=v)),
    ("before", lambda s, v: _manager(s).list(before=v)),
    ("parent_id", lambda s, v: _manager(s).append_all(_sid(s), [], v)),
    ("at_message_id", lambda s, v: _manager(s).fork(_sid(s), v, "copy")),
    ("leaf_id", lambda s, v: _manager(s).get_history(_sid(s), v)),
    ("message_id", lambda s, v: _manager(s).get_branches(_sid(s), v)),
    ("ids[0]", lambda s, v: _manager(s).delete_messages(_sid(s), [v])),
    ("from_message_id", lambda s, v: _manager(s).add_compaction(_sid(s), "s", v, "a")),
]

# Short texts stored in a column of their own: no NUL, no lone surrogate, any length.
TEXT_ARGUMENTS: list[tuple[str, Call]] = [
    ("'role'", lambda s, v: s.session("s").append_message(text("n", "hi", role=v))),
    ("'role'", lambda s, v: s.session("s").import_message(text("n", "hi", role=v))),
    ("summary", lambda s, v: s.session("s").add_compaction(v, "a", "a")),
    ("name", lambda s, v: _manager(s).create(v)),
    ("model", lambda s, v: _manager(s).create("x", model=v)),
    ("source", lambda s, v: _manager(s).create("x", source=v)),
    ("name", lambda s, v: _manager(s).rename(_sid(s), v)),
]


def _seed(store: Sessions) -> Any:
    """One message in session "s" and one managed session (made once per store); returns
    what a refused call must leave unchanged."""
    if not _manager(store).list():
        store.session("s").append_message(text("a", "deploy lock"))
        _manager(store).create("managed", model="m", source="src")
    return _snapshot(store)


def _snapshot(store: Sessions) -> Any:
    """The stored data a refused call could touch, the manager's registry included."""
    return (store.storage_stats(), store.list_sessions(), store.session("s").get_history(),
            _manager(store).list())


def _refused(store: Sessions, call: Call, values: list[Any], name: str, error: type) -> None:
    before = _seed(store)
    for value in values:
        with pytest.raises(error) as caught:
            result = call(store, value)
            if hasattr(result, "__next__"):
                next(result)
        exc = caught.value
        assert isinstance(exc, ConvostoreError), exc  # the CLI reports these in one line
        assert name in str(exc), value
        if isinstance(exc, (InvalidMessage, InvalidMessageType)):
            assert repr(exc.field) == name
        else:
            assert isinstance(exc, (InvalidArgument, InvalidArgumentType))
            assert exc.argument == name and str(exc).startswith(name)
        again = pickle.loads(pickle.dumps(exc))  # errors cross processes
        assert type(again) is type(exc) and str(again) == str(exc)
        assert _snapshot(store) == before


@pytest.mark.parametrize(("name", "call"), ID_ARGUMENTS)
@pytest.mark.async_api
def test_a_bad_id_is_refused_naming_the_argument(store: Sessions, name: str, call: Call) -> None:
    _refused(store, call, list(BAD_IDS.values()), name, ValueError)


@pytest.mark.parametrize(("name", "call"), ID_ARGUMENTS + TEXT_ARGUMENTS)
@pytest.mark.async_api
def test_a_non_string_id_or_text_is_a_type_error_naming_the_argument(
    store: Sessions, name: str, call: Call
) -> None:
    _refused(store, call, [7, b"id"], name, TypeError)


@pytest.mark.parametrize(("name", "call"), TEXT_ARGUMENTS)
def test_a_text_column_refuses_nul_and_lone_surrogates(
    store: Sessions, name: str, call: Call
) -> None:
    _refused(store, call, ["us\x00er", "us\ud800er", "\udc00"], name, ValueError)


def test_ids_up_to_the_limit_are_stored_by_every_engine(store: Sessions) -> None:
    longest = "é" * (MAX_ID_BYTES // 2)  # exactly MAX_ID_BYTES bytes
    session = store.session("s" * MAX_ID_BYTES)
    png = "data:image/png;base64," + "iVBORw0KGgo=" * 100  # an attachment reference too
    first = {"id": longest, "role": "r" * 5000,
             "parts": [{"type": "file", "mediaType": "image/png", "url": png}]}
    session.append_message(first)
    second = text("x" * MAX_ID_BYTES, "reply")
    session.append_message(second, parent_id=longest)
    assert session.get_history(second["id"]) == [first, second]
    assert ids(session.get_branches(longest)) == [second["id"]]
    session.add_compaction("sum", longest, second["id"])
    assert [c.from_message_id for c in session.get_compactions()] == [longest]
    session.delete_messages([longest])
    assert session.get_history() == [second]


BAD_TIMES: list[tuple[object, type]] = [
    (2**63, ValueError), (MAX_TIMESTAMP_MS + 1, ValueError), (-1, ValueError),
    (float("nan"), ValueError), (float("inf"), ValueError), (float("-inf"), ValueError),
    (1e300, ValueError), ("today", TypeError), (True, TypeError),
]


def test_created_at_outside_the_range_is_refused(store: Sessions) -> None:
    for bad, error in BAD_TIMES:
        _refused(store, lambda s, v: s.session("s").import_message(text("n", "hi"),
                                                                    created_at=v),
                 [bad], "created_at", error)


def test_created_at_at_both_ends_of_the_range_reads_back(store: Sessions) -> None:
    s = store.session()
    s.import_message(text("old", "boundary first"), created_at=0)
    s.import_message(text("new", "boundary last"), created_at=MAX_TIMESTAMP_MS)
    found = {h.id: h.created_at for h in s.search("boundary")}
    assert found == {"old": 0, "new": MAX_TIMESTAMP_MS}


LIMIT_CALLS: list[tuple[str, Call]] = [
    ("limit", lambda s, v: s.search("deploy", limit=v)),
    ("limit", lambda s, v: s.session("s").search("deploy", limit=v)),
    ("limit", lambda s, v: _manager(s).search("deploy", limit=v)),
    ("limit", lambda s, v: _manager(s).list(limit=v)),
    ("input_tokens", lambda s, v: _manager(s).add_usage(_sid(s), v, 0, 0.0)),
    ("output_tokens", lambda s, v: _manager(s).add_usage(_sid(s), 0, v, 0.0)),
]


# Arguments checked only for their type: they take any value of it.
TYPE_ARGUMENTS: list[tuple[str, Call]] = [
    ("summary", lambda s, v: _manager(s).compact_and_split(_sid(s), v)),
    ("messages", lambda s, v: _manager(s).append_all(_sid(s), v)),
]


@pytest.mark.parametrize(("name", "call"), TYPE_ARGUMENTS)
def test_an_argument_of_the_wrong_type_is_refused_naming_it(
    store: Sessions, name: str, call: Call
) -> None:
    _refused(store, call, [7, None, b"x", {"id": "m"}], name, TypeError)


def test_a_cost_that_is_not_a_finite_number_is_refused(store: Sessions) -> None:
    def call(s: Any, v: Any) -> object:
        return _manager(s).add_usage(_sid(s), 1, 1, v)

    _refused(store, call, [math.nan, math.inf, -math.inf], "cost", ValueError)
    _refused(store, call, ["1.5", True, None], "cost", TypeError)


@pytest.mark.parametrize(("name", "call"), LIMIT_CALLS)
def test_counts_beyond_64_bits_or_not_ints_are_refused(
    store: Sessions, name: str, call: Call
) -> None:
    _refused(store, call, [2**63, 10**30, -(2**63) - 1], name, ValueError)
    _refused(store, call, [2.5, "10"], name, TypeError)


@pytest.mark.async_api
def test_the_largest_limit_works_on_every_engine(store: Sessions) -> None:
    manager = _manager(store)
    sid = manager.create("managed").id
    manager.append(sid, text("m", "deploy lock"))
    assert ids(store.session(sid).get_history()) == ["m"]
    assert [h.id for h in store.search("deploy", limit=MAX_COUNT)] == ["m"]
    assert [h.id for h in store.session(sid).search("deploy", limit=MAX_COUNT)] == ["m"]
    assert [h.id for h in manager.search("deploy", limit=MAX_COUNT)] == ["m"]
    assert [i.id for i in manager.list(limit=MAX_COUNT)] == [sid]
    manager.add_usage(sid, MAX_COUNT, 0, 0.0)
    assert manager.get(sid).input_tokens == MAX_COUNT


@pytest.mark.parametrize("query", ["deploy\x00lock", "deploy\ud800lock", "deploy\udfff lock"])
def test_nul_and_lone_surrogates_in_a_query_separate_words(store: Sessions, query: str) -> None:
    s = store.session("s")
    s.append_message(text("a", "deploy lock"))
    s.append_message(text("b", "deploy\x00lock"))
    s.append_message(text("c", "deploy the other lock"))
    manager = _manager(store)
    sid = manager.create("managed").id
    manager.append(sid, text("m", "deploy lock"))
    assert sorted(h.id for h in s.search(query)) == ["a", "b"]
    assert sorted(h.id for h in s.search("deploy lock")) == ["a", "b"]
    assert sorted(h.id for h in store.search(query)) == ["a", "b", "c", "m"]
    assert [h.id for h in manager.search(query)] == ["m"]
    assert s.search("\x00") == [] and store.search("\ud800 \x00") == []


def test_compact_after_refuses_a_threshold_that_is_not_finite(store: Sessions) -> None:
    s = store.session()
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="threshold"):
            s.compact_after(bad)  # type: ignore[arg-type]


def test_an_id_of_four_byte_characters_is_measured_in_bytes(store: Sessions) -> None:
    long_id = "\U0001f600" * (MAX_ID_BYTES // 4 + 1)  # few characters, over the byte limit
    with pytest.raises(InvalidMessage, match="UTF-8 bytes"):
        store.session().append_message(text(long_id, "x"))
    with pytest.raises(InvalidArgument, match="UTF-8 bytes"):
        store.session(long_id)
    assert store.session().get_history() == []

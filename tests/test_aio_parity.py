"""Parity of the two faces: AsyncSessions/AsyncSession mirror Sessions/Session.

Our ``--check``: every public method and attribute of the sync classes exists on the async twin,
with ``inspect.signature(...).parameters`` equal, as a coroutine (or an async iterator for the
streamed reads, or a plain chainable method for configuration).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from typing import Any

import pytest

from convostore import AsyncSession, AsyncSessions, Session, Sessions

ASYNC_ITERATORS = {"history", "history_batches", "history_records"}
"""Session methods returning an iterator: async iterators on the async side."""
CHAINABLE = {"on_compaction", "compact_after", "on_compaction_error"}
"""Configuration: plain methods returning the handle on both sides."""
PLAIN_STORE_METHODS = {"open", "session", "subscribe", "watch"}
"""Sessions methods that stay plain: no I/O (``open`` returns an awaitable opener), or an
iterator (``watch`` returns an async iterator)."""


def public(cls: type) -> list[str]:
    return sorted(n for n in dir(cls) if not n.startswith("_"))


def params(fn: Any) -> list[inspect.Parameter]:
    return list(inspect.signature(fn).parameters.values())


def test_session_methods_are_listed() -> None:
    # Guards the tables above against a rename on the sync side.
    names = set(public(Session))
    assert names >= ASYNC_ITERATORS | CHAINABLE
    assert {"append_message", "get_history", "compact", "search"} <= names


@pytest.mark.parametrize("name", public(Session))
def test_every_session_member_has_an_async_twin(name: str) -> None:
    sync = inspect.getattr_static(Session, name)
    assert hasattr(AsyncSession, name), f"AsyncSession lacks {name}"
    twin = inspect.getattr_static(AsyncSession, name)
    if isinstance(sync, property):
        assert isinstance(twin, property)
        return
    assert callable(sync) and callable(twin)
    assert params(twin) == params(sync)
    if name in ASYNC_ITERATORS or name in CHAINABLE:
        assert not inspect.iscoroutinefunction(twin)
    else:
        assert inspect.iscoroutinefunction(twin), f"AsyncSession.{name} is not a coroutine"


@pytest.mark.parametrize("name", public(Sessions))
def test_every_sessions_member_has_an_async_twin(name: str) -> None:
    sync = inspect.getattr_static(Sessions, name)
    assert hasattr(AsyncSessions, name), f"AsyncSessions lacks {name}"
    twin = inspect.getattr_static(AsyncSessions, name)
    if isinstance(sync, property):
        assert isinstance(twin, property)
        return
    sync_fn, twin_fn = getattr(Sessions, name), getattr(AsyncSessions, name)
    assert params(twin_fn) == params(sync_fn)
    if name in PLAIN_STORE_METHODS:
        assert not inspect.iscoroutinefunction(twin_fn)
    else:
        assert inspect.iscoroutinefunction(twin_fn), f"AsyncSessions.{name} is not a coroutine"


def test_open_takes_exactly_the_options_of_sessions_open() -> None:
    assert params(AsyncSessions.open) == params(Sessions.open)
    assert [p.name for p in params(AsyncSessions.open)][:2] == ["url", "reserved_metadata_keys"]


def test_instance_attributes_and_results_match() -> None:
    """Attributes set in ``__init__`` (not visible on the class) exist on the twins too."""

    async def main() -> None:
        sync = Sessions.open(":memory:", reserved_metadata_keys=["channel"])
        async with AsyncSessions.open(":memory:", reserved_metadata_keys=["channel"]) as store:
            for name in (n for n in vars(sync) if not n.startswith("_")):
                assert getattr(store, name) == getattr(sync, name), name
            handle = store.session("s")
            sync_handle = sync.session("s")
            for name in (n for n in vars(sync_handle) if not n.startswith("_")):
                assert getattr(handle, name) == getattr(sync_handle, name), name
            assert handle.session_id == "s"
            assert store.capabilities == sync.capabilities
            assert store.closed is False
            for name in ASYNC_ITERATORS:
                iterator = getattr(handle, name)()
                assert isinstance(iterator, AsyncIterator)
                assert [x async for x in iterator] == list(getattr(sync_handle, name)())
            for name in CHAINABLE:
                arg: Any = None if name != "on_compaction" else (lambda messages: None)
                assert getattr(handle, name)(arg) is handle
        sync.close()

    asyncio.run(main())


def test_async_docstrings_point_at_the_sync_twin() -> None:
    for name in public(Session):
        doc = inspect.getdoc(getattr(AsyncSession, name)) or ""
        assert doc.startswith("Async twin of :meth:`Session." + name), name

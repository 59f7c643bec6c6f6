"""Integration objects given a URL share one store per URL and options in the process.

A service builds a ``ConvostoreSession`` (or a LangChain history, or a pydantic-ai history) per
request: the objects of one URL share one store, which closes with its last user, so the
server's connections stay within one pool however many objects were built, closed or not. The
PostgreSQL tests count the server's connections of the test (``pg_stat_activity``, by an
``application_name`` of their own).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import PG_URL, BackendSpec

from convostore import MissingDependency, Sessions

pytest.importorskip("agents")
pytest.importorskip("langchain_core")
pytest.importorskip("pydantic_ai")

from langchain_core.messages import HumanMessage  # noqa: E402

from convostore.integrations import SessionClosed  # noqa: E402
from convostore.integrations.langchain import ConvostoreChatMessageHistory  # noqa: E402
from convostore.integrations.openai_agents import ConvostoreSession  # noqa: E402
from convostore.integrations.pydantic_ai import ConvostoreMessageHistory  # noqa: E402

pytestmark = pytest.mark.connections  # the integrations' pools and stores

KINDS: dict[str, Callable[..., Any]] = {
    "openai_agents": ConvostoreSession,
    "langchain": ConvostoreChatMessageHistory,
    "pydantic_ai": ConvostoreMessageHistory,
}


async def write(obj: Any, text: str) -> None:
    """One write through the object's async surface."""
    if isinstance(obj, ConvostoreSession):
        await obj.add_items([{"role": "user", "content": text}])
    elif isinstance(obj, ConvostoreChatMessageHistory):
        await obj.aadd_messages([HumanMessage(text)])
    else:
        from pydantic_ai.messages import ModelRequest, UserPromptPart

        await obj.asave_messages([ModelRequest(parts=[UserPromptPart(text)])])


async def read(obj: Any) -> int:
    """One read through the object's async surface: how many messages it sees."""
    if isinstance(obj, ConvostoreSession):
        return len(await obj.get_items())
    if isinstance(obj, ConvostoreChatMessageHistory):
        return len(await obj.aget_messages())
    return len(await obj.aload_messages())


def sync_store(obj: Any) -> Sessions:
    """The store an object works on (its convostore session's store)."""
    store: Sessions = obj.session.store
    return store


# --- sharing, on every engine -----------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_objects_of_one_url_share_a_store_closed_with_its_last_user(
    backend_spec: BackendSpec, kind: str
) -> None:
    make = KINDS[kind]
    url, options = backend_spec.url, backend_spec.options
    first, second = make("a", url, **options), make("b", url, **options)
    store = sync_store(first)
    assert sync_store(second) is store
    asyncio.run(write(first, "hello"))
    assert asyncio.run(read(second)) == 0  # sessions stay apart
    first.close()
    assert not store.closed  # the second object still uses it
    asyncio.run(write(second, "more"))
    second.close()
    assert store.closed  # closed with its last user
    with pytest.raises(SessionClosed):
        asyncio.run(read(second))


@pytest.mark.requires("reopen")
def test_an_object_nobody_closed_gives_its_store_back_when_collected(
    backend_spec: BackendSpec,
) -> None:
    session = ConvostoreSession("a", backend_spec.url, **backend_spec.options)
    asyncio.run(write(session, "hello"))
    store = sync_store(session)
    del session
    gc.collect()
    assert store.closed
    again = ConvostoreSession("a", backend_spec.url, **backend_spec.options)
    assert asyncio.run(read(again)) == 1  # a new store, the same data
    assert sync_store(again) is not store
    again.close()


def test_other_options_other_store(tmp_path: Path) -> None:
    path = str(tmp_path / "o.db")
    plain = ConvostoreSession("a", path)
    searching = ConvostoreSession("a", path, search_tool_output=True)
    same = ConvostoreSession("a", Path(path))  # a Path names the same file
    assert sync_store(plain) is sync_store(same)
    assert sync_store(plain) is not sync_store(searching)
    for obj in (plain, searching, same):
        obj.close()


def test_an_option_open_does_not_take_is_refused_before_anything_opens(tmp_path: Path) -> None:
    from convostore.integrations import _shared

    path = tmp_path / "bad.db"
    obj = ConvostoreSession("a", str(path), page_size=4096)
    before = _shared.open_count()
    with pytest.raises(TypeError, match="page_size"):
        asyncio.run(read(obj))
    assert _shared.open_count() == before
    assert not path.exists()
    obj.close()


def test_a_store_given_as_an_object_is_never_closed(tmp_path: Path) -> None:
    with Sessions.open(tmp_path / "given.db") as store:
        for make in KINDS.values():
            with make("a", store) as obj:
                asyncio.run(write(obj, "hello"))
            assert not store.closed
        assert len(store.session("a").get_history()) == 3


def test_construction_opens_nothing(tmp_path: Path) -> None:
    path = tmp_path / "lazy.db"
    for make in KINDS.values():
        obj = make("a", str(path))
        assert not path.exists()  # the first call opens the store, not the constructor
        obj.close()
    with pytest.raises(ValueError, match="unknown scheme"):
        ConvostoreSession("a", "mysql://nowhere/db")  # a URL no engine takes: at once


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_opens_its_own_store(tmp_path: Path) -> None:
    path = str(tmp_path / "fork.db")
    parent = ConvostoreSession("a", path)
    asyncio.run(write(parent, "from the parent"))
    parent_store = sync_store(parent)
    pid = os.fork()
    if pid == 0:  # the child: a new object of the same URL gets a store of its own
        code = 1
        try:
            child = ConvostoreSession("a", path)
            if sync_store(child) is not parent_store and asyncio.run(read(child)) == 1:
                asyncio.run(write(child, "from the child"))
                child.close()
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not parent_store.closed  # the child did not close the parent's store
    assert asyncio.run(read(parent)) == 2
    parent.close()


def test_open_options_need_a_url(tmp_path: Path) -> None:
    with Sessions.open(tmp_path / "o.db") as store, pytest.raises(
        TypeError, match="open options apply only when the store is given as a URL"
    ):
        ConvostoreSession("a", store, pool_size=3)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_use_after_close_and_context_managers(tmp_path: Path, kind: str) -> None:
    make = KINDS[kind]
    url = str(tmp_path / "c.db")
    with make("a", url) as obj:
        asyncio.run(write(obj, "one"))
    with pytest.raises(SessionClosed) as info:
        asyncio.run(read(obj))
    assert isinstance(info.value, RuntimeError)

    async def main() -> Any:
        async with make("a", url) as inner:
            assert await read(inner) == 1
        return inner

    closed = asyncio.run(main())
    with pytest.raises(SessionClosed, match=f"{type(closed).__name__} is closed"):
        asyncio.run(read(closed))
    closed.close()  # idempotent


# --- the server's connections: 1,000 objects per integration ----------------------------------


def _connections(app: str) -> int:
    import psycopg

    assert PG_URL is not None
    with psycopg.connect(PG_URL) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def _settle(app: str) -> int:
    """The count once the server has noticed closed connections (it notices in a moment)."""
    deadline = time.monotonic() + 30
    count = _connections(app)
    while count and time.monotonic() < deadline:
        time.sleep(0.05)
        count = _connections(app)
    return count


async def _loop(make: Callable[..., Any], url: str, options: dict[str, Any], app: str,
                count: int, check: Callable[[], Awaitable[None]]) -> None:
    """Build ``count`` objects in a loop: a third closed, a third dropped without closing, a
    third kept open; ``check()`` every 100."""
    kept: list[Any] = []
    for i in range(count):
        obj = make(f"user-{i % 10}", url, **options)
        if i < 10:
            await write(obj, f"hello {i}")
        await read(obj)
        if i % 3 == 0:
            await obj.aclose()
        elif i % 3 == 2:
            kept.append(obj)
        del obj  # the i % 3 == 1 ones: never closed, collected
        if i % 100 == 99:
            await check()
    for obj in kept:
        obj.close()


@pytest.mark.requires("connection_pool", "direct_connections")
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_thousand_objects_stay_within_one_pool(backend_spec: BackendSpec, kind: str) -> None:
    app = f"cs_share_{uuid.uuid4().hex[:10]}"
    url = f"{backend_spec.url}?application_name={app}"
    pool_size = backend_spec.options["pool_size"]
    peaks: list[int] = []

    async def check() -> None:
        peaks.append(await asyncio.to_thread(_connections, app))

    asyncio.run(_loop(KINDS[kind], url, backend_spec.options, app, 1000, check))
    assert len(peaks) == 10
    assert 1 <= max(peaks) <= pool_size, peaks
    assert _settle(app) == 0  # the last user closed the pool


@pytest.mark.requires("connection_pool", "direct_connections")
def test_reopening_never_adds_up_pools(backend_spec: BackendSpec) -> None:
    """With no object left between two, each one opens the store anew: the old pool is closed
    (on a thread, from the loop) before the new one opens."""
    app = f"cs_reopen_{uuid.uuid4().hex[:10]}"
    url = f"{backend_spec.url}?application_name={app}"
    seen: list[int] = []

    async def main() -> None:
        for i in range(20):
            session = ConvostoreSession("u", url, **backend_spec.options)
            await read(session)
            if i % 2:
                session.close()  # sync close inside the loop
            del session
            seen.append(await asyncio.to_thread(_connections, app))

    asyncio.run(main())
    assert max(seen) <= backend_spec.options["pool_size"], seen
    assert _settle(app) == 0


# --- the missing-extra errors -----------------------------------------------------------------


@pytest.mark.parametrize(("module", "blocked", "message"), [
    ("openai_agents", "agents.items",
     "convostore.integrations.openai_agents needs the OpenAI Agents SDK (the openai-agents "
     "package), which is not installed: pip install 'convostore[openai-agents]'"),
    ("langchain", "langchain_core.chat_history",
     "convostore.integrations.langchain needs LangChain (the langchain-core package), which "
     "is not installed: pip install 'convostore[langchain]'"),
    ("pydantic_ai", "pydantic_ai.messages",
     "convostore.integrations.pydantic_ai needs pydantic-ai (the pydantic-ai-slim package), "
     "which is not installed: pip install 'convostore[pydantic-ai]'"),
])
def test_a_missing_framework_is_named_with_its_package(
    monkeypatch: pytest.MonkeyPatch, module: str, blocked: str, message: str
) -> None:
    monkeypatch.setitem(sys.modules, blocked, None)
    monkeypatch.delitem(sys.modules, f"convostore.integrations.{module}")
    with pytest.raises(MissingDependency) as info:
        importlib.import_module(f"convostore.integrations.{module}")
    assert str(info.value) == message
    assert isinstance(info.value.__cause__, ImportError)

"""The session manager.

Every test that touches a store runs on every backend and through both APIs: the ``manager``
fixture is a :class:`SessionManager` over the sync store, or an :class:`AsyncSessionManager`
driven through the blocking adapter of ``_blocking.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

import pytest
from _blocking import _wait, blocking_manager
from _helpers import ids, text
from _storage import has_registry, has_search_table

import convostore.manager as manager_module
import convostore.manager._sync as manager_impl
from convostore import AsyncSessions, Sessions
from convostore.context import AsyncContext, Context, ToolDefinition
from convostore.manager import (
    CONTINUATION_PREFIX,
    AsyncSessionManager,
    SessionInfo,
    SessionManager,
    UnknownMessage,
    UnknownSession,
)


@pytest.fixture
def manager(store: Any) -> Any:
    """A SessionManager, or an AsyncSessionManager made blocking (same calls, same results)."""
    return blocking_manager(store)


def resolve(value: Any) -> Any:
    """The value of a provider call, awaited on the adapter's loop when it is a coroutine."""
    return _wait(value) if inspect.iscoroutine(value) else value


def tick() -> None:
    """Let the millisecond clock move, so updated_at orders the next write after the last."""
    time.sleep(0.003)


def session_ids(infos: list[SessionInfo]) -> list[str]:
    return [i.id for i in infos]


# --- the registry (§10.6, §11.7 "create and get session", "list", "rename", "delete") ----------


def test_searching_without_managed_sessions_builds_no_index(store: Any, manager: Any) -> None:
    store.session("s").append_message(text("m1", "hello"))
    assert manager.search("hello") == []
    assert not has_search_table(store)
    with pytest.raises(ValueError, match="limit"):
        manager.search("hello", limit=-(2**70))


def test_a_plain_store_registers_nothing(store: Any) -> None:
    store.session("s").append_message(text("m1", "hi"))
    store.search("hi")
    plain = SessionManager(store if isinstance(store, Sessions) else store.sync)
    assert plain.list() == [] and plain.get("s") is None
    with pytest.raises(UnknownSession):
        plain.append("s", text("m2", "x"))
    assert plain.list() == [] and store.session("s").get_history()[0]["id"] == "m1"


def test_create_and_get_session(manager: Any, store: Any) -> None:
    before = int(time.time() * 1000)
    info = manager.create("My Chat", parent_session_id="p-1", model="claude", source="web")
    assert isinstance(info, SessionInfo)
    assert (info.name, info.parent_session_id, info.model, info.source) == (
        "My Chat", "p-1", "claude", "web")
    assert (info.input_tokens, info.output_tokens, info.estimated_cost, info.end_reason) == (
        0, 0, 0.0, None)
    assert before <= info.created_at == info.updated_at <= int(time.time() * 1000)
    assert len(info.id) == 36 and info.id.count("-") == 4
    assert manager.get(info.id) == info
    assert manager.get("nope") is None
    plain = manager.create("Plain")
    assert (plain.parent_session_id, plain.model, plain.source) == (None, None, None)
    assert has_registry(store)


def test_list_sessions_most_recently_updated_first_in_pages(manager: Any) -> None:
    a = manager.create("a")
    tick()
    b = manager.create("b")
    tick()
    c = manager.create("c")
    assert session_ids(manager.list()) == [c.id, b.id, a.id]
    tick()
    manager.append(a.id, text("m1", "hello"))
    assert session_ids(manager.list()) == [a.id, c.id, b.id]
    first = manager.list(limit=2)
    assert session_ids(first) == [a.id, c.id]
    assert session_ids(manager.list(limit=2, before=first[-1].id)) == [b.id]
    assert manager.list(before=b.id) == []
    assert manager.list(limit=0) == []
    with pytest.raises(UnknownSession):
        manager.list(before="nope")


def test_list_breaks_ties_by_id_and_pages_through_them(
    manager: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A frozen clock makes every updated_at equal, so only the id tie-break orders the list.
    monkeypatch.setattr(manager_impl, "now_ms", lambda: 1_000)
    made = [manager.create(f"s{i}") for i in range(7)]
    listed = manager.list()
    assert {i.updated_at for i in listed} == {1_000}
    assert session_ids(listed) == sorted(session_ids(made), reverse=True)
    pages: list[str] = []
    cursor = None
    while True:
        page = manager.list(limit=3, before=cursor)
        if not page:
            break
        pages += session_ids(page)
        cursor = page[-1].id
    assert pages == session_ids(listed)


def test_rename_session(manager: Any) -> None:
    info = manager.create("Old")
    tick()
    assert manager.rename(info.id, "New") is None
    renamed = manager.get(info.id)
    assert renamed.name == "New" and renamed.updated_at > info.updated_at
    assert renamed.created_at == info.created_at


@pytest.mark.async_api
def test_delete_session_and_its_messages(manager: Any, store: Any) -> None:
    keep = manager.create("keep")
    gone = manager.create("gone")
    png = "data:image/png;base64," + "iVBORw0KGgo" * 40
    for sid in (keep.id, gone.id):
        manager.append_all(sid, [text("m1", "first words"), text("m2", "second words"),
                                 {"id": "f", "role": "user",
                                  "parts": [{"type": "file", "mediaType": "image/png",
                                             "url": png}]}])
        manager.add_compaction(sid, "summary", "m1", "m2")
    assert len(store.search("words")) == 4
    manager.delete(gone.id)
    assert manager.get(gone.id) is None
    assert session_ids(manager.list()) == [keep.id]
    assert store.session(gone.id).get_history() == []
    assert store.session(gone.id).get_compactions() == []
    assert {h.session_id for h in store.search("words")} == {keep.id}
    assert manager.get_message_count(keep.id) == 3
    assert manager.get_history(keep.id)[-1]["parts"][0]["url"] == png
    assert store.storage_stats().attachments == 1
    with pytest.raises(UnknownSession):
        manager.delete(gone.id)


# --- messages through the manager ------------------------------------------------------------


def test_append_upsert_count_and_branches(manager: Any) -> None:
    sid = manager.create("chat").id
    assert manager.append(sid, text("m1", "hi")) == "m1"
    assert manager.append(sid, text("m2", "hello", "assistant")) == "m2"
    assert manager.append(sid, text("m3", "hey", "assistant"), "m1") == "m3"
    assert manager.append(sid, {"role": "user", "parts": []}, None) != ""
    assert manager.get_message_count(sid) == 1  # the new root is the active leaf
    assert ids(manager.get_history(sid, "m3")) == ["m1", "m3"]
    assert ids(manager.get_branches(sid, "m1")) == ["m2", "m3"]
    assert manager.upsert(sid, text("m2", "hello again", "assistant")) == "m2"
    assert manager.get_history(sid, "m2")[1]["parts"][0]["text"] == "hello again"
    assert manager.upsert(sid, text("m4", "new"), "m3") == "m4"
    assert ids(manager.get_history(sid)) == ["m1", "m3", "m4"]
    assert manager.get_message_count(sid) == 3


def test_append_all_chains_from_a_root_unless_given_a_parent(manager: Any) -> None:
    sid = manager.create("chat").id
    manager.append(sid, text("a", "existing"))
    last = manager.append_all(sid, [text("b", "one"), text("c", "two")])
    assert last == "c"
    assert ids(manager.get_history(sid)) == ["b", "c"]  # a new root, not under "a"
    assert manager.append_all(sid, [text("d", "three")], "a") == "d"
    assert ids(manager.get_history(sid)) == ["a", "d"]
    assert manager.append_all(sid, [], "a") == "a"
    assert manager.append_all(sid, []) is None
    with pytest.raises(TypeError, match="iterable of messages, not a dict"):
        manager.append_all(sid, text("e", "not a list"))


def test_delete_messages_targets_a_specific_session(manager: Any) -> None:
    one, two = manager.create("one").id, manager.create("two").id
    for sid in (one, two):
        manager.append_all(sid, [text("m1", "a"), text("m2", "b"), text("m3", "c")])
    manager.delete_messages(one, ["m2"])
    assert ids(manager.get_history(one)) == ["m1", "m3"]
    assert ids(manager.get_history(two)) == ["m1", "m2", "m3"]
    manager.clear_messages(two)
    assert manager.get_history(two) == [] and manager.get_message_count(two) == 0
    assert manager.get(two) is not None


@pytest.mark.async_api
def test_every_message_write_touches_updated_at(manager: Any) -> None:
    sid = manager.create("chat").id
    writes: list[Callable[[], object]] = [
        lambda: manager.append(sid, text("m1", "a")),
        lambda: manager.upsert(sid, text("m1", "b")),
        lambda: manager.append_all(sid, [text("m2", "c")]),
        lambda: manager.add_compaction(sid, "s", "m1", "m2"),
        lambda: manager.delete_messages(sid, ["m2"]),
        lambda: manager.clear_messages(sid),
        lambda: manager.rename(sid, "renamed"),
        lambda: manager.add_usage(sid, 1, 1, 0.1),
    ]
    last = manager.get(sid).updated_at
    for write in writes:
        tick()
        write()
        now = manager.get(sid).updated_at
        assert now > last
        last = now
    tick()
    manager.get_history(sid)
    manager.get_compactions(sid)
    manager.get_message_count(sid)
    manager.get_session(sid)
    assert manager.get(sid).updated_at == last  # reads do not touch


def test_compactions_through_the_manager(manager: Any) -> None:
    sid = manager.create("chat").id
    manager.append_all(sid, [text(f"m{i}", f"turn {i}") for i in range(5)])
    record = manager.add_compaction(sid, "early turns", "m1", "m3")
    assert manager.get_compactions(sid) == [record]
    assert ids(manager.get_history(sid)) == ["m0", f"compaction_{record.id}", "m4"]


def test_iterative_compaction_filters_synthetic_compaction_ids(manager: Any) -> None:
    """§11.7: 10 messages, overlay cm-1..cm-7, 5 more, overlay cm-1..cm-12."""
    sid = manager.create("chat").id
    manager.append_all(sid, [text(f"cm-{i}", f"message {i}") for i in range(10)])
    seen: list[list[str]] = []

    def compact(messages: list[dict[str, Any]]) -> dict[str, str]:
        seen.append(ids(messages))
        real = [m for m in messages[1:] if not m["id"].startswith("compaction_")]
        return {"from_message_id": real[0]["id"], "to_message_id": real[-3]["id"],
                "summary": f"summary{len(seen)}"}

    session = manager.get_session(sid)
    session.on_compaction(compact)
    session.compact()
    first = manager.get_compactions(sid)[0]
    assert (first.from_message_id, first.to_message_id) == ("cm-1", "cm-7")
    last = manager.get_history(sid)[-1]["id"]
    manager.append_all(sid, [text(f"cm-{i}", f"message {i}") for i in range(10, 15)], last)
    session.compact()
    assert seen[1][:2] == ["cm-0", f"compaction_{first.id}"]
    records = manager.get_compactions(sid)
    assert [(r.from_message_id, r.to_message_id) for r in records] == [
        ("cm-1", "cm-7"), ("cm-1", "cm-12")]
    history = manager.get_history(sid)
    assert ids(history) == ["cm-0", f"compaction_{records[1].id}", "cm-13", "cm-14"]
    assert history[1]["parts"] == [{"type": "text", "text": "summary2"}]


# --- lineage: fork and compact_and_split ------------------------------------------------------


def test_fork_copies_a_linear_history_with_new_ids_and_sorts_first(manager: Any) -> None:
    """§11.7: fork at m2 → 2 messages, parent id set, the fork lists first."""
    source = manager.create("source", model="m", source="web")
    manager.append_all(source.id, [text("m1", "one"), text("m2", "two", "assistant"),
                                   text("m3", "three")])
    other = manager.create("other")
    manager.append(other.id, text("x", "later"))
    tick()
    forked = manager.fork(source.id, "m2", "Forked Chat")
    assert (forked.name, forked.parent_session_id) == ("Forked Chat", source.id)
    assert (forked.model, forked.source) == (None, None)
    assert manager.list()[0].id == forked.id
    assert forked.updated_at >= forked.created_at
    history = manager.get_history(forked.id)
    assert [m["parts"] for m in history] == [
        [{"type": "text", "text": "one"}], [{"type": "text", "text": "two"}]]
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert not {"m1", "m2"} & set(ids(history))
    assert manager.get_message_count(forked.id) == 2
    assert ids(manager.get_history(source.id)) == ["m1", "m2", "m3"]  # the source is unchanged


def test_fork_copies_an_overlay_as_an_ordinary_message(manager: Any) -> None:
    sid = manager.create("source").id
    manager.append_all(sid, [text(f"m{i}", f"turn {i}") for i in range(5)])
    manager.add_compaction(sid, "turns one to three", "m1", "m3")
    forked = manager.fork(sid, "m4", "fork")
    history = manager.get_history(forked.id)
    assert [m["parts"][0]["text"] for m in history] == ["turn 0", "turns one to three", "turn 4"]
    assert history[1]["role"] == "assistant"
    assert not any(m["id"].startswith("compaction_") for m in history)
    assert manager.get_compactions(forked.id) == []


def test_fork_of_an_unknown_message_creates_nothing(manager: Any) -> None:
    sid = manager.create("source").id
    manager.append(sid, text("m1", "one"))
    with pytest.raises(UnknownMessage) as caught:
        manager.fork(sid, "nope", "fork")
    assert isinstance(caught.value, KeyError)
    assert str(caught.value) == f"no message 'nope' in session {sid!r}"
    assert session_ids(manager.list()) == [sid]


@pytest.mark.async_api
def test_compact_and_split(manager: Any) -> None:
    old = manager.create("Long Chat", model="claude", source="web")
    manager.append_all(old.id, [text("m1", "a"), text("m2", "b")])
    tick()
    new = manager.compact_and_split(old.id, "We discussed a and b.", "Continued Chat")
    ended = manager.get(old.id)
    assert ended.end_reason == "compaction" and ended.updated_at > old.updated_at
    assert (new.name, new.parent_session_id, new.model, new.source, new.end_reason) == (
        "Continued Chat", old.id, "claude", "web", None)
    history = manager.get_history(new.id)
    assert len(history) == 1 and history[0]["role"] == "assistant"
    assert history[0]["parts"] == [
        {"type": "text", "text": "[Context from previous session]\n\nWe discussed a and b."}]
    assert CONTINUATION_PREFIX == "[Context from previous session]\n\n"
    assert ids(manager.get_history(old.id)) == ["m1", "m2"]
    assert new.updated_at >= ended.updated_at and new.created_at >= ended.updated_at
    again = manager.compact_and_split(new.id, "more")
    assert again.name == "Continued Chat" and again.parent_session_id == new.id


def test_add_usage_accumulates(manager: Any) -> None:
    sid = manager.create("chat").id
    manager.add_usage(sid, 100, 20, 0.25)
    manager.add_usage(sid, 5, 7, 1)
    info = manager.get(sid)
    assert (info.input_tokens, info.output_tokens, info.estimated_cost) == (105, 27, 1.25)
    with pytest.raises(TypeError):
        manager.add_usage(sid, True, 0, 0.0)
    with pytest.raises(TypeError):
        manager.add_usage(sid, 1, 1, "free")
    with pytest.raises(ValueError):
        manager.add_usage(sid, 1, 1, float("nan"))
    assert manager.get(sid).input_tokens == 105


# --- unknown ids ------------------------------------------------------------------------------

CALLS: dict[str, tuple[Any, ...]] = {
    "rename": ("x",),
    "delete": (),
    "add_usage": (1, 1, 0.1),
    "get_session": (),
    "append": (text("m1", "a"),),
    "upsert": (text("m1", "a"),),
    "append_all": ([text("m1", "a")],),
    "get_history": (),
    "get_message_count": (),
    "get_branches": ("m1",),
    "clear_messages": (),
    "delete_messages": (["m1"],),
    "add_compaction": ("s", "m1", "m1"),
    "get_compactions": (),
    "fork": ("m1", "fork"),
    "compact_and_split": ("summary",),
}


def test_every_session_method_is_covered_by_the_unknown_id_table() -> None:
    takes_id = {
        name for name, fn in inspect.getmembers(SessionManager, inspect.isfunction)
        if not name.startswith("_") and list(inspect.signature(fn).parameters)[1:2] == [
            "session_id"]
    }
    assert takes_id == set(CALLS) | {"get"}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.async_api
def test_unknown_ids_raise_and_write_nothing(manager: Any, store: Any, name: str) -> None:
    with pytest.raises(UnknownSession) as before_registry:
        getattr(manager, name)("ghost", *CALLS[name])
    assert str(before_registry.value) == "no session 'ghost' in the registry"
    manager.create("real")
    with pytest.raises(UnknownSession) as caught:
        getattr(manager, name)("ghost", *CALLS[name])
    assert isinstance(caught.value, KeyError) and caught.value.session_id == "ghost"
    assert store.session("ghost").get_history() == []
    assert len(manager.list()) == 1


# --- search and the model's tool (§8.2, §10.5, §11.7 "cross-session search") -----------------


def test_cross_session_search_needs_every_word_and_stays_in_managed_sessions(
    manager: Any, store: Any
) -> None:
    one, two = manager.create("one").id, manager.create("two").id
    manager.append(one, text("a", "the deployment failed on friday"))
    manager.append(two, text("b", "friday lunch plans"))
    manager.append(two, text("c", "deployment checklist", "assistant"))
    store.session("unmanaged").append_message(text("u", "deployment failed friday"))
    hits = manager.search("friday deployment")
    assert [(h.session_id, h.id, h.role, h.content) for h in hits] == [
        (one, "a", "user", "the deployment failed on friday")]
    assert {(h.session_id, h.id) for h in manager.search("deployment")} == {
        (one, "a"), (two, "c")}
    assert manager.search("deployment", limit=1)[0].id in {"a", "c"}
    assert manager.search("   ") == [] and manager.search("friday", limit=0) == []
    assert manager.search('"friday" OR NOT') == []  # operators are words


def test_search_finds_managed_hits_behind_many_unmanaged_ones(manager: Any, store: Any) -> None:
    for i in range(30):
        store.session(f"noise-{i}").append_message(text("n", "needle needle needle"))
    sid = manager.create("mine").id
    manager.append(sid, text("m", "a needle"))
    assert [(h.session_id, h.id) for h in manager.search("needle", limit=5)] == [(sid, "m")]


@pytest.mark.async_api
def test_session_search_tool(manager: Any) -> None:
    (tool,) = manager.tools()
    assert isinstance(tool, ToolDefinition)
    assert tool.name == "session_search"
    assert tool.parameters["required"] == ["query"]
    assert manager.execute("session_search", {"query": "anything"}) == "No results found."
    sid = manager.create("chat").id
    manager.append(sid, text("m1", "the deploy is broken"))
    manager.append(sid, text("m2", "deploy again", "assistant"))
    answer = manager.execute("session_search", '{"query": "deploy"}')
    assert sorted(answer.split("\n---\n")) == ["[assistant] deploy again",
                                              "[user] the deploy is broken"]
    assert manager.execute("session_search", {"query": "broken deploy"}) == (
        "[user] the deploy is broken")
    assert manager.execute("session_search", {}) == 'Error: missing argument "query"'
    assert manager.execute("session_search", {"query": 3}) == (
        'Error: argument "query" must be a string')
    assert manager.execute("session_search", "{not json").startswith(
        "Error: arguments are not valid JSON")
    assert manager.execute("set_context", {}) == 'Error: unknown tool "set_context"'


@pytest.mark.async_api
def test_session_search_tool_shows_at_most_ten_hits(manager: Any) -> None:
    sid = manager.create("chat").id
    manager.append_all(sid, [text(f"m{i}", f"report number {i}") for i in range(12)])
    assert len(manager.execute("session_search", {"query": "report"}).split("\n---\n")) == 10
    assert len(manager.search("report")) == 12


@pytest.mark.async_api
def test_searchable_history_provider(manager: Any) -> None:
    provider = manager.with_searchable_history("history")
    assert provider.label == "history"
    assert resolve(provider.get()) is None
    sid = manager.create("one").id
    assert resolve(provider.get()) == "1 session available for search."
    manager.create("two")
    assert resolve(provider.get()) == "2 sessions available for search."
    assert resolve(provider.search("pineapple")) is None
    manager.append(sid, text("m1", "pineapple pizza", "assistant"))
    assert resolve(provider.search("pineapple")) == "[assistant] pineapple pizza"
    assert not hasattr(provider, "set")
    with pytest.raises(TypeError, match="label must be a non-empty string, not ''"):
        manager.with_searchable_history("")


def test_searchable_history_in_a_context(backend_spec: Any) -> None:
    with Sessions.open(backend_spec.url, **backend_spec.options) as store:
        manager = SessionManager(store)
        sid = manager.create("chat").id
        manager.append(sid, text("m1", "we chose postgres for the queue", "assistant"))
        history = manager.with_searchable_history("history")
        context = Context(manager.get_session(sid)).with_context(history.label,
                                                                 provider=history)
        prompt = context.freeze_system_prompt()
        assert "HISTORY [searchable]\n" in prompt
        assert prompt.endswith("1 session available for search.")
        assert "search_context" in [t.name for t in context.tools()]
        assert "set_context" not in [t.name for t in context.tools()]
        assert context.execute("search_context", {"label": "history", "query": "queue"}) == (
            "[assistant] we chose postgres for the queue")
        assert context.execute("search_context", {"label": "history", "query": "zebra"}) == (
            "No results found.")


def test_searchable_history_in_an_async_context() -> None:
    async def main() -> None:
        async with AsyncSessions.open(":memory:") as store:
            manager = AsyncSessionManager(store)
            sid = (await manager.create("chat")).id
            await manager.append(sid, text("m1", "the queue runs on postgres", "assistant"))
            history = manager.with_searchable_history("history")
            context = AsyncContext(await manager.get_session(sid)).with_context(
                "history", provider=history)
            prompt = await context.freeze_system_prompt()
            assert prompt.endswith("1 session available for search.")
            assert await context.execute(
                "search_context", {"label": "history", "query": "queue"}
            ) == "[assistant] the queue runs on postgres"

    asyncio.run(main())


# --- the two faces ----------------------------------------------------------------------------


PLAIN = {"tools", "with_searchable_history"}
"""Methods that do no I/O and stay plain on the async side."""


def public(cls: type) -> list[str]:
    return sorted(n for n in dir(cls) if not n.startswith("_"))


def test_the_async_manager_mirrors_the_sync_one() -> None:
    assert public(SessionManager) == public(AsyncSessionManager)
    for name in public(SessionManager):
        sync = inspect.getattr_static(SessionManager, name)
        twin = inspect.getattr_static(AsyncSessionManager, name)
        if isinstance(sync, property):
            assert isinstance(twin, property)
            continue
        assert list(inspect.signature(twin).parameters) == list(
            inspect.signature(sync).parameters), name
        assert [p.default for p in inspect.signature(twin).parameters.values()] == [
            p.default for p in inspect.signature(sync).parameters.values()], name
        assert inspect.iscoroutinefunction(twin) is (name not in PLAIN), name
        doc = inspect.getdoc(twin) or ""
        assert doc.startswith(f"Async twin of :meth:`SessionManager.{name}`"), name


def test_async_manager_returns_async_handles() -> None:
    async def main() -> None:
        async with AsyncSessions.open(":memory:") as store:
            manager = AsyncSessionManager(store)
            sid = (await manager.create("chat")).id
            handle = await manager.get_session(sid)
            assert handle is store.session(sid)
            await handle.append_message(text("m1", "hi"))
            assert await manager.get_message_count(sid) == 1
            with pytest.raises(TypeError):
                SessionManager(store)  # type: ignore[arg-type]
            with pytest.raises(TypeError):
                AsyncSessionManager(store.sync)  # type: ignore[arg-type]

    asyncio.run(main())


def test_exported_names() -> None:
    assert len(set(manager_module.__all__)) == len(manager_module.__all__)
    for name in manager_module.__all__:
        obj = getattr(manager_module, name)
        if isinstance(obj, type):
            assert obj.__module__ == "convostore.manager"
            assert obj.__doc__, name


def test_unknown_session_pickles() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(UnknownSession("s")))
    assert isinstance(error, UnknownSession) and error.session_id == "s"
    missing = pickle.loads(pickle.dumps(UnknownMessage("s", "m")))
    assert (missing.session_id, missing.message_id) == ("s", "m")


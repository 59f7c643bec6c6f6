"""The LangGraph checkpointer (issue 24): LangGraph's conformance suite on every backend, a real
compiled graph with a tool through turns, an interrupt and a fork, the mirrored conversation of
each branch, large values, and four processes writing one thread.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from convostore import Sessions
from convostore.aio import AsyncSessions
from convostore.codec import ROW_BUDGET
from convostore.integrations.langchain import ConvostoreChatMessageHistory
from convostore.integrations.langgraph import (
    STORAGE_PREFIX,
    AsyncConvostoreSaver,
    ConvostoreSaver,
    mirror_session_id,
)

# the checkpointer's tables partition by session: keys and conflicts
pytestmark = pytest.mark.partitions

if TYPE_CHECKING:
    from conftest import BackendSpec


@pytest.fixture
def store(backend_spec: BackendSpec) -> Iterator[Sessions]:
    """A sync store on the backend under test (the saver runs sync code over it either way)."""
    with Sessions.open(backend_spec.url, **backend_spec.options) as opened:
        yield opened


def _cfg(thread_id: str, checkpoint_id: str | None = None, ns: str = "") -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


# --- LangGraph's conformance suite -----------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync-store", "async-store"])
def test_conformance_suite_passes_every_capability(backend_spec: BackendSpec, kind: str) -> None:
    """Base and every extended capability (delete_for_runs, copy_thread, prune), as LangGraph's
    own suite checks them, through the async methods LangGraph calls."""

    @checkpointer_test(name=f"convostore-{kind}")
    async def factory() -> AsyncIterator[ConvostoreSaver]:
        if kind == "sync-store":
            store = Sessions.open(backend_spec.url, **backend_spec.options)
            yield ConvostoreSaver(store)
            store.close()
        else:
            astore = await AsyncSessions.open(backend_spec.url, **backend_spec.options)
            yield AsyncConvostoreSaver(astore)
            await astore.close()

    report = asyncio.run(validate(factory))
    failures = {name: r.failures for name, r in report.results.items() if not r.passed}
    assert failures == {}
    assert report.passed_all_base()
    for name in ("delete_for_runs", "copy_thread", "prune"):
        assert report.results[name].detected and report.results[name].passed, name


# --- a compiled graph: tool, interrupt, fork, the mirror --------------------------------------


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}."


def _call(city: str, call_id: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": "get_weather", "args": {"city": city}, "id": call_id}]
    )


def _graph(saver: ConvostoreSaver, replies: list[AIMessage]) -> Any:
    model = GenericFakeChatModel(messages=iter(replies))

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([get_weather]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver, interrupt_before=["tools"])


def _texts(history: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in history:
        text = "".join(p.get("text", "") for p in m["parts"] if p.get("type") == "text")
        out.append(f"{m['role']}:{text}")
    return out


def test_a_graph_with_a_tool_interrupts_resumes_forks_and_mirrors_each_branch(
    backend_spec: BackendSpec,
) -> None:
    replies = [
        _call("Paris", "c1"), AIMessage("It is sunny in Paris."),
        AIMessage("You're welcome."),
        _call("Rome", "c2"), AIMessage("It is sunny in Rome too."),
    ]
    with Sessions.open(backend_spec.url, **backend_spec.options) as store:
        saver = ConvostoreSaver(store)
        graph = _graph(saver, replies)
        config: RunnableConfig = {"configurable": {"thread_id": "chat-1"}}

        # turn 1: the model calls the tool; the graph stops before running it
        graph.invoke({"messages": [HumanMessage("Weather in Paris?")]}, config)
        assert graph.get_state(config).next == ("tools",)
        mirror = store.session(mirror_session_id("chat-1"))
        assert _texts(mirror.get_history()) == ["user:Weather in Paris?", "assistant:"]

        # resume: the tool runs, the model answers
        graph.invoke(None, config)
        assert graph.get_state(config).next == ()
        # turn 2
        graph.invoke({"messages": [HumanMessage("Thanks!")]}, config)
        first_branch = [
            "user:Weather in Paris?", "assistant:", "tool:Sunny in Paris.",
            "assistant:It is sunny in Paris.", "user:Thanks!", "assistant:You're welcome.",
        ]
        assert _texts(mirror.get_history()) == first_branch
        first_leaf = mirror.get_latest_leaf()
        assert first_leaf is not None

        # fork: back to the checkpoint after turn 1, ask something else
        after_turn_1 = next(
            s for s in graph.get_state_history(config)
            if s.next == () and len(s.values["messages"]) == 4
        )
        graph.invoke({"messages": [HumanMessage("And in Rome?")]}, after_turn_1.config)
        assert graph.get_state(config).next == ("tools",)
        graph.invoke(None, config)
        second_branch = [*first_branch[:4], "user:And in Rome?", "assistant:",
                         "tool:Sunny in Rome.", "assistant:It is sunny in Rome too."]
        # the mirror follows the branch the thread is on...
        assert _texts(mirror.get_history()) == second_branch
        # ...and keeps the other one, sharing the four messages before the fork
        assert _texts(mirror.get_history(first_leaf["id"])) == first_branch
        fork_point = mirror.get_history()[3]["id"]
        assert len(mirror.get_branches(fork_point)) == 2
        # the graph's own state agrees with the mirror
        state_texts = [m.content for m in graph.get_state(config).values["messages"]]
        assert state_texts[-1] == "It is sunny in Rome too."
        assert len(state_texts) == len(second_branch)

        # other readers: search, and LangChain's history over the same session
        hits = mirror.search("Rome")
        assert "It is sunny in Rome too." in [h.content for h in hits]
        history = ConvostoreChatMessageHistory(mirror_session_id("chat-1"), store)
        assert [m.content for m in history.messages][-1] == "It is sunny in Rome too."
        assert history.messages[1].tool_calls[0]["args"] == {"city": "Paris"}  # type: ignore[attr-defined]

        # deleting the thread deletes its checkpoints and clears its mirror
        saver.delete_thread("chat-1")
        assert saver.get_tuple(config) is None
        assert mirror.get_history() == []


def test_async_graph_on_an_async_store(backend_spec: BackendSpec) -> None:
    async def main() -> list[str]:
        async with AsyncSessions.open(backend_spec.url, **backend_spec.options) as astore:
            saver = AsyncConvostoreSaver(astore)
            graph = _graph(saver, [_call("Oslo", "c1"), AIMessage("Snowy in Oslo.")])
            config: RunnableConfig = {"configurable": {"thread_id": "a"}}
            await graph.ainvoke({"messages": [HumanMessage("Oslo?")]}, config)
            await graph.ainvoke(None, config)
            assert [t async for t in saver.alist(config, limit=2)][0].metadata["step"] >= 3
            return _texts(await astore.session("a").get_history())

    assert asyncio.run(main())[-1] == "assistant:Snowy in Oslo."


def test_subgraph_namespaces_mirror_apart(store: Sessions) -> None:
    saver = ConvostoreSaver(store)
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": [HumanMessage("inner", id="i1")]}
    cp["channel_versions"] = {"messages": saver.get_next_version(None, None)}
    saver.put(_cfg("t", ns="sub:1"), cp, {"step": 0}, dict(cp["channel_versions"]))
    assert _texts(store.session(mirror_session_id("t", "sub:1")).get_history()) == ["user:inner"]
    assert store.session("t").get_history() == []
    assert mirror_session_id("t", "sub:1") == "t#sub:1"


def test_a_saver_without_memory_of_a_thread_updates_a_message_edited_in_place(
    store: Sessions,
) -> None:
    """A saver that did not mirror the thread before (another process, a restart) finds what
    is stored: lists of one message by writing (nothing, when its id is stored) then comparing
    it, longer ones by probing first; either way an edited message is updated, and nothing is
    written twice."""
    for thread, before in (("one", []), ("two", [AIMessage("earlier", id="a0")])):
        for text_ in ("draft", "final"):
            saver = ConvostoreSaver(store)  # a fresh saver: no memory of the thread
            cp = empty_checkpoint()
            cp["channel_values"] = {"messages": [*before, HumanMessage(text_, id="h1")]}
            cp["channel_versions"] = {"messages": saver.get_next_version(None, None)}
            saver.put(_cfg(thread), cp, {"step": 0}, dict(cp["channel_versions"]))
        expected = ["assistant:earlier"] * len(before) + ["user:final"]
        assert _texts(store.session(thread).get_history()) == expected


def test_a_message_object_changed_in_place_is_mirrored_as_it_now_is(store: Sessions) -> None:
    """The saver remembers the message objects it mirrored last; a put of the same objects is
    still read as they are now: an id-less message edited in place (its id derives from its
    content) and an id set in place are mirrored as the full comparison mirrors them."""
    saver = ConvostoreSaver(store)
    version = None

    def put(thread: str, messages: list[Any]) -> None:
        nonlocal version
        version = saver.get_next_version(version, None)
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": list(messages)}
        cp["channel_versions"] = {"messages": version}
        saver.put(_cfg(thread), cp, {"step": 0}, dict(cp["channel_versions"]))

    draft = HumanMessage("draft")
    put("edited", [draft])
    draft.content = "final"
    put("edited", [draft, AIMessage("reply", id="r1")])
    assert _texts(store.session("edited").get_history()) == ["user:final", "assistant:reply"]

    late = HumanMessage("hi")
    put("named", [late])
    late.id = "real-id"
    put("named", [late, AIMessage("reply", id="r2")])
    assert [m["id"] for m in store.session("named").get_history()] == ["real-id", "r2"]


class _Recording(JsonPlusSerializer):
    """Records which serializer object serialised something."""

    used: list[int] = []  # a class attribute on purpose: the clones append here too

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self.used.append(id(self))
        return super().dumps_typed(obj)


def test_a_clone_with_an_allowlist_uses_its_own_serializer(store: Sessions) -> None:
    """LangGraph's compile() may swap the saver for ``with_allowlist(...)``'s clone, whose
    serializer enforces the allowlist: the clone must write with it."""
    saver = ConvostoreSaver(store, serde=_Recording(allowed_msgpack_modules=None))
    clone = saver.with_allowlist([("mymodule", "MyType")])
    assert clone is not saver and clone.serde is not saver.serde
    cp = empty_checkpoint()
    cp["channel_values"] = {"x": {"a": 1}}
    cp["channel_versions"] = {"x": "1"}
    _Recording.used.clear()
    stored = clone.put(_cfg("allow"), cp, {"step": 0}, {"x": "1"})
    assert set(_Recording.used) == {id(clone.serde)}
    got = saver.get_tuple(stored)
    assert got is not None and got.checkpoint["channel_values"] == {"x": {"a": 1}}


def test_large_values_round_trip_and_are_stored_once(store: Sessions) -> None:
    saver = ConvostoreSaver(store, messages_channel=None)
    big = "x" * (ROW_BUDGET + 10) + "\U0001f600"  # above what one row holds
    ids = []
    for thread in ("t1", "t2"):
        cp = empty_checkpoint()
        cp["channel_values"] = {"doc": big, "small": 1}
        cp["channel_versions"] = {"doc": "1", "small": "1"}
        stored = saver.put(_cfg(thread), cp, {"step": 1}, {"doc": "1", "small": "1"})
        saver.put_writes(stored, [("doc", big)], "task-1")
        ids.append(stored)
    got = saver.get_tuple(ids[0])
    assert got is not None
    assert got.checkpoint["channel_values"] == {"doc": big, "small": 1}
    assert got.pending_writes == [("task-1", "doc", big)]
    assert store.storage_stats().attachments == 1  # one payload for four references
    saver.delete_thread("t1")
    assert store.storage_stats().attachments == 1  # t2 still refers to it
    saver.prune(["t2"], strategy="delete")
    assert store.storage_stats().attachments == 0


def test_scalars_in_the_checkpoint_row_keep_their_types_and_versions(store: Sessions) -> None:
    """Small scalars ride in the checkpoint row, other values in value rows: each checkpoint
    reads back the values it was given, types kept, whichever way a channel went."""
    saver = ConvostoreSaver(store, messages_channel=None)
    long_text = "y" * 300  # above the inline limit: a value row
    steps: list[dict[str, Any]] = [
        {"none": None, "flag": True, "n": 3, "x": 2.5, "s": "short", "long": long_text,
         "list": [1, 2]},
        {"none": None, "flag": False, "n": [3], "x": 2.5, "s": "short", "long": "now short",
         "list": 7},
        {"flag": 1, "n": 4, "x": 2.5, "long": long_text},  # some channels gone
    ]
    configs: list[RunnableConfig] = []
    config = _cfg("scalars")
    versions: dict[str, str] = {}
    for i, values in enumerate(steps):
        cp = empty_checkpoint()
        prev = steps[i - 1] if i else {}
        new = {ch: f"{i + 1}" for ch, v in values.items()
               if ch not in prev or (type(prev[ch]), prev[ch]) != (type(v), v)}
        new.update({ch: f"{i + 1}" for ch in versions if ch not in values})
        versions.update(new)
        cp["channel_values"] = dict(values)
        cp["channel_versions"] = dict(versions)
        config = saver.put(config, cp, {"step": i}, dict(new))
        configs.append(config)
    for values, stored in zip(steps, configs, strict=True):
        got = saver.get_tuple(stored)
        assert got is not None
        assert got.checkpoint["channel_values"] == values
        assert {k: type(v) for k, v in got.checkpoint["channel_values"].items()} == {
            k: type(v) for k, v in values.items()}


def test_a_special_write_repeated_in_one_call_keeps_the_last(store: Sessions) -> None:
    """Writes to a special channel replace each other: within one call the last one stays."""
    saver = ConvostoreSaver(store, messages_channel=None)
    stored = saver.put(_cfg("special"), empty_checkpoint(), {"step": 0}, {})
    saver.put_writes(stored, [("__error__", "first"), ("__error__", "second")], "task")
    saver.put_writes(stored, [("a", 1), ("b", 2)], "task-2")
    got = saver.get_tuple(stored)
    assert got is not None
    assert got.pending_writes == [("task", "__error__", "second"), ("task-2", "a", 1),
                                  ("task-2", "b", 2)]


def test_ids_are_checked_at_the_savers_door(store: Sessions) -> None:
    """Issue 36, 4: a task id of another type made every later read of the thread raise
    TypeError; a NUL or a lone surrogate in an id was stored by one engine, a driver's error on
    the other. Every id is refused naming it, nothing written; the thread stays readable."""
    saver = ConvostoreSaver(store, messages_channel=None)
    stored = saver.put(_cfg("door"), empty_checkpoint(), {"step": 0}, {})
    saver.put_writes(stored, [("a", 1)], "x")
    bad_writes: list[tuple[str, Any, Any, type[Exception]]] = [
        ("task_id", stored, b"x", TypeError),
        ("task_id", stored, "x\x00", ValueError),
        ("task_id", stored, "x\ud800", ValueError),
        ("thread_id", _cfg("t\x00", "c"), "x", ValueError),
        ("thread_id", _cfg("t\udc00", "c"), "x", ValueError),
        ("checkpoint_ns", _cfg("door", "c", ns="n\x00"), "x", ValueError),
        ("checkpoint_id", _cfg("door", "c\ud800"), "x", ValueError),
    ]
    for name, config, task_id, error in bad_writes:
        with pytest.raises(error, match=name):
            saver.put_writes(config, [("b", 2)], task_id)
    with pytest.raises(ValueError, match="channel"):
        saver.put_writes(stored, [("b\x00", 2)], "y")
    with pytest.raises(ValueError, match="task_path"):
        saver.put_writes(stored, [("b", 2)], "y", "p\x00")
    for thread in ("t\x00", "t\ud800"):
        with pytest.raises(ValueError, match="thread_id"):
            saver.put(_cfg(thread), empty_checkpoint(), {"step": 0}, {})
        with pytest.raises(ValueError, match="thread_id"):
            saver.get_tuple(_cfg(thread))
        with pytest.raises(ValueError, match="thread_id"):
            list(saver.list(_cfg(thread)))
        with pytest.raises(ValueError, match="thread_id"):
            saver.delete_thread(thread)
    got = saver.get_tuple(stored)
    assert got is not None and got.pending_writes == [("x", "a", 1)]
    assert [t.checkpoint["id"] for t in saver.list(_cfg("door"))] == [got.checkpoint["id"]]


def test_list_filters_before_limit_and_all_threads(store: Sessions) -> None:
    saver = ConvostoreSaver(store)
    parent = None
    stored: list[RunnableConfig] = []
    for step in range(250):  # more than a page
        cp = empty_checkpoint()
        config = _cfg("many", parent)
        got = saver.put(config, cp, {"step": step, "source": "loop" if step % 2 else "input"}, {})
        parent = got["configurable"]["checkpoint_id"]
        stored.append(got)
    listed = list(saver.list(_cfg("many")))
    assert [t.config for t in listed] == [
        {"configurable": {**c["configurable"]}} for c in reversed(stored)
    ]
    inputs = list(saver.list(_cfg("many"), filter={"source": "input"}, limit=120))
    assert [t.metadata["step"] for t in inputs] == list(range(248, 8, -2))
    before = list(saver.list(_cfg("many"), before=stored[10], limit=3))
    assert [t.metadata["step"] for t in before] == [9, 8, 7]
    saver.put(_cfg("other"), empty_checkpoint(), {"step": -1}, {})
    assert len(list(saver.list(None))) == 251
    # storage sessions are internal; the mirror is a plain session
    assert STORAGE_PREFIX == "convostore:langgraph:"


# --- many processes, one thread ----------------------------------------------------------------

PROCESSES = 4
STEPS = 40


def _writer(url: str, options: dict[str, Any], worker: int, ready: Any, start: Any,
            out: Any) -> None:
    """Run STEPS graph steps on one thread: read the latest checkpoint, write a task's writes,
    write the next checkpoint with one more message."""
    try:
        with ConvostoreSaver(url, **options) as saver:
            ready.put(worker)
            start.wait(60)
            acked = []
            for i in range(STEPS):
                latest = saver.get_tuple(_cfg("shared"))
                messages = list(latest.checkpoint["channel_values"]["messages"]) if latest else []
                label = f"p{worker}-{i}"
                messages.append(HumanMessage(label, id=label))
                config = latest.config if latest else _cfg("shared")
                if latest is not None:
                    saver.put_writes(config, [("messages", label)], f"task-{label}")
                cp = empty_checkpoint()
                previous = latest.checkpoint["channel_versions"]["messages"] if latest else None
                version = saver.get_next_version(None if previous is None else str(previous), None)
                cp["channel_values"] = {"messages": messages}
                cp["channel_versions"] = {"messages": version}
                metadata: Any = {"step": i, "writer": label}
                got = saver.put(config, cp, metadata, {"messages": version})
                acked.append(got["configurable"]["checkpoint_id"])
            out.put((worker, acked))
    except BaseException as exc:  # reported to the parent, which fails the test
        out.put((worker, repr(exc)))


@pytest.mark.requires("shared_across_processes")
def test_four_processes_writing_one_thread_lose_and_duplicate_nothing(
    backend_spec: BackendSpec,
) -> None:
    with Sessions.open(backend_spec.url, **backend_spec.options):
        pass  # the schema exists before the race, as in a deployment
    ctx = multiprocessing.get_context("spawn")
    ready, out, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_writer, args=(backend_spec.url, backend_spec.options, w,
                                               ready, start, out))
             for w in range(PROCESSES)]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=120)
        start.set()
        results = dict(out.get(timeout=300) for _ in procs)
    finally:
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
    errors = {w: r for w, r in results.items() if isinstance(r, str)}
    assert errors == {}
    acked = [cid for w in range(PROCESSES) for cid in results[w]]
    with Sessions.open(backend_spec.url, **backend_spec.options) as store:
        saver = ConvostoreSaver(store)
        listed = [t.config["configurable"]["checkpoint_id"] for t in saver.list(_cfg("shared"))]
        assert sorted(listed) == sorted(acked)  # every acknowledged checkpoint, once
        assert len(set(listed)) == PROCESSES * STEPS
        writes = [w for t in saver.list(_cfg("shared")) for w in t.pending_writes or []]
        labels = sorted(w[2] for w in writes)
        assert len(labels) == len(set(labels))  # no write twice
        # the mirror holds every message exactly once (branches where writers raced)
        summaries = {s.session_id: s.messages for s in store.list_sessions()}
        assert summaries["shared"] == PROCESSES * STEPS
        latest = saver.get_tuple(_cfg("shared"))
        assert latest is not None
        wanted = [m.id for m in latest.checkpoint["channel_values"]["messages"]]
        path = store.session("shared").get_history(wanted[-1])
        assert [m["id"] for m in path] == wanted  # the latest checkpoint's conversation


@pytest.mark.requires("shared_across_processes")
def test_a_search_index_built_by_another_store_indexes_the_next_mirrored_messages(
    backend_spec: BackendSpec,
) -> None:
    """A saver whose store never saw the search index, built meanwhile by another store (as
    by another process), still indexes the messages it mirrors next, with their checkpoint."""
    with Sessions.open(backend_spec.url, **backend_spec.options) as mine, \
            Sessions.open(backend_spec.url, **backend_spec.options) as other:
        saver = ConvostoreSaver(mine)
        messages: list[Any] = [HumanMessage("the first words", id="a1")]
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": list(messages)}
        cp["channel_versions"] = {"messages": saver.get_next_version(None, None)}
        config = saver.put(_cfg("idx"), cp, {"step": 0}, dict(cp["channel_versions"]))
        assert other.session("idx").search("zebra") == []  # builds the index
        for i, text in enumerate(["a zebra crossing", "another zebra"], start=1):
            messages.append(AIMessage(text, id=f"a{i + 1}"))
            cp = empty_checkpoint()
            cp["channel_values"] = {"messages": list(messages)}
            version = saver.get_next_version(str(i), None)
            cp["channel_versions"] = {"messages": version}
            config = saver.put(config, cp, {"step": i}, {"messages": version})
        hits = other.session("idx").search("zebra")
        assert sorted(h.id for h in hits) == ["a2", "a3"]
        assert [m["id"] for m in mine.session("idx").get_history()] == ["a1", "a2", "a3"]

"""AsyncSessions under a real event loop: callbacks on the loop, cancellation, concurrency, streams.

Plain test functions each run one ``asyncio.run(...)`` (no pytest-asyncio). The conformance suite
already runs through the async API via the blocking adapter (``api`` fixture in conftest.py);
these tests cover what only an event loop shows.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _helpers import ids, text

from convostore import (
    AsyncSession,
    AsyncSessions,
    Change,
    ChangeEvent,
    StoreClosed,
    create_compact_function,
    is_compaction_message,
)

# the async store's worker threads share the store's connections
pytestmark = pytest.mark.connections

if TYPE_CHECKING:
    from conftest import BackendSpec

Opener = Callable[..., Awaitable[AsyncSessions]]
SRC = str(Path(__file__).resolve().parent.parent / "src")


@pytest.fixture
def aopen(backend_spec: BackendSpec) -> Opener:
    """``await aopen(**options)``: an AsyncSessions on the backend under test."""

    async def opener(**options: Any) -> AsyncSessions:
        return await AsyncSessions.open(backend_spec.url, **{**backend_spec.options, **options})

    return opener


def run(coroutine: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await coroutine

    return asyncio.run(main())


# --- opening, handles, closing --------------------------------------------------------------


def test_open_as_awaitable_and_as_context_manager(backend_spec: BackendSpec) -> None:
    async def main() -> None:
        opts = backend_spec.options
        store = await AsyncSessions.open(backend_spec.url, reserved_metadata_keys=["k"], **opts)
        assert store.reserved_metadata_keys == ("k",)
        await store.session().append_message(text("a", "one"))
        await store.close()
        await store.close()  # idempotent
        assert store.closed
        async with AsyncSessions.open(backend_spec.url, **opts) as again:
            assert not again.closed
            await again.session().append_message(text("b", "two"))
        assert again.closed

    run(main())


def test_handles_are_plain_cached_and_refuse_after_close(aopen: Opener) -> None:
    async def main() -> None:
        store = await aopen()
        support = store.session("support")  # not awaited
        assert isinstance(support, AsyncSession)
        assert store.session("support") is support
        assert support.session_id == "support"
        assert store.session() is not support and store.session().session_id == ""
        with pytest.raises(TypeError):
            store.session(5)  # type: ignore[arg-type]
        await store.close()
        with pytest.raises(StoreClosed):
            await support.get_message("a")
        with pytest.raises(StoreClosed):
            store.session("other")
        with pytest.raises(StoreClosed):
            await store.storage_stats()

    run(main())


def test_store_level_coroutines(aopen: Opener) -> None:
    async def main() -> None:
        async with await aopen() as store:
            await store.session("a").append_message(text("a1", "deployment failed at noon"))
            await store.session("b").append_message(text("b1", "all good"))
            hits = await store.search("deployment")
            assert [(h.session_id, h.id) for h in hits] == [("a", "a1")]
            assert [s.session_id for s in await store.list_sessions()] == ["a", "b"]
            stats = await store.storage_stats()
            assert (stats.sessions, stats.messages) == (2, 2)

    run(main())


# --- callbacks on the caller's loop -----------------------------------------------------------


def test_async_listeners_are_awaited_on_the_callers_loop(aopen: Opener) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        main_thread = threading.current_thread()
        seen: list[tuple[str, str, bool, bool]] = []
        plain: list[tuple[str, bool]] = []

        async def listener(event: ChangeEvent) -> None:
            await asyncio.sleep(0.001)  # really suspends, on this loop
            on_loop = asyncio.get_running_loop() is loop
            seen.append(
                (event.type, event.session_id, on_loop, threading.current_thread() is main_thread)
            )

        def sync_listener(event: ChangeEvent) -> None:
            plain.append((event.type, threading.current_thread().name.startswith("convostore")))

        async with await aopen() as store:
            unsubscribe = store.subscribe(listener)
            store.subscribe(sync_listener)
            s = store.session("s")
            await s.append_message(text("a", "hi"))
            assert seen == [("append", "s", True, True)]  # awaited before the append returned
            await s.update_message(text("a", "hi there"))
            await s.delete_messages(["a"])
            unsubscribe()
            await s.append_message(text("b", "unheard"))
        assert [e[0] for e in seen] == ["append", "update", "delete"]
        assert plain == [("append", True), ("update", True), ("delete", True), ("append", True)]

    run(main())


def test_a_failing_async_listener_is_logged_and_skipped(
    aopen: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> list[str]:
        order: list[str] = []

        async def bad(event: ChangeEvent) -> None:
            order.append("bad")
            raise RuntimeError("listener broke")

        async def good(event: ChangeEvent) -> None:
            order.append("good")

        async with await aopen() as store:
            store.subscribe(bad)
            store.subscribe(good)
            result = await store.session().append_message(text("a", "x"))
            assert result.inserted
            assert await store.session().get_message("a") == text("a", "x")
        return order

    assert run(main()) == ["bad", "good"]
    assert "listener broke" in caplog.text


def test_a_listener_may_call_the_store_again(aopen: Opener) -> None:
    """An async listener that writes elsewhere does not deadlock the single SQLite worker."""

    async def main() -> None:
        async with await aopen() as store:
            mirror = store.session("mirror")

            async def copy(event: ChangeEvent) -> None:
                if event.type == "append" and event.session_id == "main":
                    assert event.message is not None
                    await mirror.append_message(event.message)
                    assert await mirror.get_message(event.message["id"]) == event.message

            store.subscribe(copy)
            main_session = store.session("main")
            for i in range(3):
                await main_session.append_message(text(f"m{i}", f"body {i}"))
            assert ids(await mirror.get_history()) == ["m0", "m1", "m2"]

    asyncio.run(asyncio.wait_for(main(), timeout=30))


def test_caller_context_reaches_callbacks(aopen: Opener) -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")

    async def main() -> list[str]:
        seen: list[str] = []

        async def listener(event: ChangeEvent) -> None:
            seen.append("async:" + request_id.get())

        async with await aopen() as store:
            store.subscribe(listener)
            store.subscribe(lambda event: seen.append("sync:" + request_id.get()))
            request_id.set("r-42")
            await store.session().append_message(text("a", "x"))
        return seen

    assert run(main()) == ["async:r-42", "sync:r-42"]


# --- async summarisers --------------------------------------------------------------------------


def test_an_async_summariser_drives_auto_compaction_on_the_loop(aopen: Opener) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        prompts: list[str] = []

        async def summarize(prompt: str) -> str:
            assert asyncio.get_running_loop() is loop  # the caller's loop, not a private one
            await asyncio.sleep(0.001)
            prompts.append(prompt)
            return f"summary #{len(prompts)}"

        async with await aopen() as store:
            s = store.session()
            assert s.on_compaction(create_compact_function(summarize, 40)) is s
            assert s.compact_after(60) is s
            for i in range(8):
                await s.append_message(text(f"m{i}", "word " * 30))
            assert await store.wait_for_compactions()  # they run after the appends return
            records = await s.get_compactions()
            assert len(prompts) >= 1 and len(records) == len(prompts)
            assert records[0].summary == "summary #1"
            assert records[0].from_message_id == "m3"
            history = await s.get_history()
            assert ids(history)[:3] == ["m0", "m1", "m2"]
            assert is_compaction_message(history[3])
            assert ids(history)[-1] == "m7"

    run(main())


def test_an_async_compaction_function_and_error_handler(aopen: Opener) -> None:
    async def main() -> None:
        errors: list[str] = []
        calls: list[list[str]] = []

        async def fn(messages: list[dict[str, Any]]) -> dict[str, str]:
            await asyncio.sleep(0)
            calls.append(ids(messages))
            return {"from_message_id": "a", "to_message_id": "b", "summary": "a and b"}

        async def failing(messages: list[dict[str, Any]]) -> None:
            raise ValueError("model unavailable")

        async def on_error(exc: BaseException) -> None:
            await asyncio.sleep(0)
            errors.append(str(exc))

        async with await aopen() as store:
            s = store.session()
            for i in "abc":
                await s.append_message(text(i, i))
            result = await s.on_compaction(fn).compact()
            assert result is not None
            assert (result.from_message_id, result.to_message_id) == ("a", "b")
            assert calls == [["a", "b", "c"]]
            assert s.on_compaction(failing).on_compaction_error(on_error) is s
            with pytest.raises(ValueError, match="model unavailable"):
                await s.compact()  # the caller who asked learns why (issue 36, 10)
            assert errors == []  # the handler is automatic compaction's

    run(main())


def test_a_slow_summariser_does_not_stall_other_calls(aopen: Opener) -> None:
    """While the worker waits for the summariser on the loop, other tasks still get answers."""

    async def main() -> None:
        release = asyncio.Event()
        started = asyncio.Event()

        async def fn(messages: list[dict[str, Any]]) -> None:
            started.set()
            await release.wait()

        async with await aopen() as store:
            s = store.session()
            await s.append_message(text("a", "x"))
            compaction = asyncio.create_task(s.on_compaction(fn).compact())
            await asyncio.wait_for(started.wait(), 10)
            other = store.session("other")
            await asyncio.wait_for(other.append_message(text("o", "y")), 10)
            assert await asyncio.wait_for(s.get_message("a"), 10) == text("a", "x")
            release.set()
            assert await compaction is None

    run(main())


# --- cancellation -----------------------------------------------------------------------------


def big(id: str) -> dict[str, Any]:
    """A message large enough to need continuation rows (several statements to write)."""
    return text(id, "".join(f"{i:07d} " for i in range(400_000)))  # 3.2 MB


def test_cancelling_before_the_call_is_submitted_writes_nothing(aopen: Opener) -> None:
    async def main() -> None:
        async with await aopen(pool_size=1) as store:
            s = store.session()
            task = asyncio.create_task(s.append_message(big("x")))
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await s.get_message("x") is None
            stats = await store.storage_stats()
            assert (stats.messages, stats.continuation_rows) == (0, 0)

    run(main())


def test_cancelling_mid_append_leaves_the_whole_message_or_nothing(aopen: Opener) -> None:
    async def main() -> None:
        # pool_size=1: one worker on every backend, so calls run in submission order.
        async with await aopen(pool_size=1) as store:
            s = store.session()
            committed: list[str] = []
            store.subscribe(lambda e: committed.append(e.message["id"]) if e.message else None)
            messages = [big(f"m{i}") for i in range(6)]
            for i, message in enumerate(messages):
                task = asyncio.create_task(s.append_message(message))
                await asyncio.sleep(0.002 * i)
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
            # A call submitted after them runs after them: every write is finished now.
            present = [m for m in messages if await s.get_message(m["id"]) is not None]
            for m in present:
                assert await s.get_message(m["id"]) == m
            assert ids(present) == committed
            # Submitted before the cancel, so the shielded write completed.
            assert len(present) == len(messages)
            stats = await store.storage_stats()
            per_message = stats.continuation_rows // len(present)
            assert per_message > 0
            assert stats.messages == len(present)
            assert stats.continuation_rows == per_message * len(present)
            assert ids(await s.get_history()) == ids(present)

    run(main())


# --- concurrency ------------------------------------------------------------------------------


def test_concurrent_tasks_append_one_linear_chain(aopen: Opener) -> None:
    async def main() -> None:
        async with await aopen() as store:
            s = store.session("shared")

            async def writer(k: int) -> None:
                for i in range(15):
                    await s.append_message(text(f"t{k}-{i}", f"message {i} of {k}"))

            await asyncio.gather(*(writer(k) for k in range(8)))
            history = ids(await s.get_history())
            assert len(history) == 120 and len(set(history)) == 120
            for k in range(8):  # each task's own messages keep their order
                mine = [x for x in history if x.startswith(f"t{k}-")]
                assert mine == [f"t{k}-{i}" for i in range(15)]
            for mid in history[:-1]:  # linear: every message has exactly one child
                assert len(await s.get_branches(mid)) == 1

    run(main())


# --- streamed reads ---------------------------------------------------------------------------


def test_history_async_iteration_with_early_break(aopen: Opener, rows_read: list[int]) -> None:
    async def main() -> None:
        async with await aopen() as store:
            s = store.session()
            for i in range(120):
                await s.append_message(text(f"m{i}", f"body {i}"))
            rows_read[0] = 0
            taken = []
            async for m in s.history():
                taken.append(m["id"])
                if len(taken) == 3:
                    break
            assert taken == ["m0", "m1", "m2"]
            assert rows_read[0] == 50  # one window, nothing beyond it
            rows_read[0] = 0
            newest = s.history(newest_first=True)
            assert (await newest.__anext__())["id"] == "m119"
            await newest.aclose()  # type: ignore[attr-defined]
            with pytest.raises(StopAsyncIteration):
                await newest.__anext__()
            assert rows_read[0] == 25  # the first page, nothing beyond it
            everything = [m["id"] async for m in s.history()]
            assert everything == [f"m{i}" for i in range(120)]
            sizes = [len(b) async for b in s.history_batches(batch_size=50)]
            assert sizes == [50, 50, 20]
            newest_batches = [
                ids(b) async for b in s.history_batches(batch_size=7, newest_first=True)
            ]
            assert newest_batches[0] == [f"m{i}" for i in range(119, 112, -1)]
            assert [x async for x in s.history(leaf_id="nope")] == []

    run(main())


def test_history_errors_surface_on_the_first_step(aopen: Opener) -> None:
    async def main() -> None:
        async with await aopen() as store:
            s = store.session()
            await s.append_message(text("a", "x"))
            iterator = s.history()
            await store.close()
            with pytest.raises(StoreClosed):
                await iterator.__anext__()

    run(main())


# --- the change feed ------------------------------------------------------------------------


@pytest.mark.requires("shared_across_processes")
def test_async_watch_follows_another_process_and_resumes_from_a_kept_cursor(
    aopen: Opener, backend_spec: BackendSpec
) -> None:
    """``async for`` over ``watch`` wakes on another process's commits, in cursor order,
    while the loop stays free; a second watch from the last cursor kept goes on after it."""
    writer = (
        "import sys, json\n"
        "from convostore import Sessions\n"
        "with Sessions.open(sys.argv[1], **json.loads(sys.argv[2])) as store:\n"
        "    s = store.session('w')\n"
        "    for i in range(6):\n"
        "        s.append_message({'id': f'w{i}', 'role': 'user',"
        " 'parts': [{'type': 'text', 'text': str(i)}]})\n"
    )

    async def main() -> None:
        async with await aopen() as store:
            start = await store.change_cursor()
            ticks = 0

            async def tick() -> None:  # proves the loop is not blocked while watching
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticker = asyncio.create_task(tick())
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", writer, backend_spec.url, json.dumps(backend_spec.options),
                env={**os.environ, "PYTHONPATH": SRC},
            )
            first: list[Change] = []
            before = ticks
            async for change in store.watch(since=start, timeout=60):
                if not first:
                    # the writer process started meanwhile (over 100 ms): the loop ticked
                    assert ticks > before
                first.append(change)
                if len(first) == 4:
                    break  # as if the client went down here
            assert await proc.wait() == 0
            rest = [c async for c in store.watch(since=first[-1].cursor, timeout=0)]
            ticker.cancel()
            seen = first + rest
            assert [c.message_id for c in seen] == [f"w{i}" for i in range(6)]
            assert [c.cursor for c in seen] == sorted({c.cursor for c in seen})
            logged = await store.changes(start, limit=100)
            assert [c.cursor for c in logged] == [c.cursor for c in seen]

    run(main())

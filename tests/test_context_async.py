"""AsyncContext over AsyncSessions, async providers, and the parity of the two faces.

The behaviour is shared (one core driven two ways), so these tests check the async driving:
coroutine providers, async session reads and streamed history, on every backend.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
from _context_helpers import Skills, record_compactions

from convostore import Sessions
from convostore.aio import AsyncSessions
from convostore.context import (
    SEPARATOR,
    AsyncContext,
    AsyncStoreContextProvider,
    AsyncStoreSearchProvider,
    Context,
    ContextError,
    DirectorySkillProvider,
    StoreContextProvider,
)
from convostore.tokens import estimate_string_tokens

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


class AsyncMemory:
    """A writable provider whose methods are coroutines."""

    def __init__(self, content: str | None = None) -> None:
        self.content = content
        self.labels: list[str] = []

    async def init(self, label: str) -> None:
        self.labels.append(label)

    async def get(self) -> str | None:
        await asyncio.sleep(0)
        return self.content

    async def set(self, content: str) -> None:
        await asyncio.sleep(0)
        self.content = content


def test_the_faces_have_the_same_methods() -> None:
    public = [n for n in dir(Context) if not n.startswith("_")]
    assert public == [n for n in dir(AsyncContext) if not n.startswith("_")]
    plain = {"with_context", "with_cached_prompt", "on_skill_unload", "remove_context",
             "clear_skill_state", "session"}
    for name in public:
        sync, other = getattr(Context, name), getattr(AsyncContext, name)
        if name in plain:
            assert not inspect.iscoroutinefunction(other), name
            continue
        assert inspect.iscoroutinefunction(other), name
        assert inspect.signature(sync).parameters == inspect.signature(other).parameters, name


def test_async_context_end_to_end(backend_spec: Any, tmp_path: Path) -> None:
    skills = DirectorySkillProvider(tmp_path)
    skills.set("pirate", "Arr!", "Talk like a pirate")

    async def main() -> None:
        async with AsyncSessions.open(backend_spec.url, **backend_spec.options) as store:
            session = store.session("chat")
            identity = AsyncMemory("You are terse.")

            def build() -> AsyncContext:
                return (
                    AsyncContext(session)
                    .with_context("soul", provider=identity)
                    .with_context("memory", description="Learned facts", max_tokens=100)
                    .with_context("skills", provider=skills)
                    .with_context("kb", provider=AsyncStoreSearchProvider(store))
                    .with_cached_prompt()
                )

            context = build()
            frozen = await context.freeze_system_prompt()
            assert identity.labels == ["soul"]
            assert frozen.startswith(f"{SEPARATOR}\nSOUL [writable]\n{SEPARATOR}\nYou are terse.")
            tools = [t.name for t in await context.tools()]
            assert tools == ["set_context", "load_context", "unload_context", "search_context"]
            execute = context.execute
            assert await execute("set_context", {"label": "memory", "content": "likes tea"}) == (
                "Written to memory. Usage: 3% (3/100 tokens)"
            )
            assert await execute("set_context", json.dumps(
                {"label": "kb", "content": "Paris is in France", "metadata": {"title": "paris"}}
            )) == 'Indexed "paris" in kb.'
            assert await execute("search_context", {"label": "kb", "query": "france"}) == (
                "[paris]\nParis is in France"
            )
            document = await execute("load_context", {"label": "skills", "key": "pirate"})
            assert document == "Arr!"
            await session.append_message({"id": "a1", "role": "assistant", "parts": [
                {"type": "tool-load_context", "toolCallId": "c1", "state": "output-available",
                 "input": {"label": "skills", "key": "pirate"}, "output": document}]})
            assert await context.get_system_prompt() == frozen
            with pytest.raises(ContextError, match="exceeds maxTokens"):
                await context.replace_context_block("memory", "word " * 200)
            block = await context.append_context_block("memory", "and coffee")
            assert block.content == "likes tea\nand coffee"

            # A restart: a new context restores the loaded skill from the history.
            again = build()
            assert await again.freeze_system_prompt() == frozen
            assert await again.get_loaded_skill_keys() == {"skills:pirate"}
            assert await again.unload_skill("skills", "pirate") is True
            stored = await session.get_message("a1")
            assert stored is not None
            assert stored["parts"][0]["output"] == "[skill unloaded: pirate]"
            refreshed = await again.refresh_system_prompt()
            assert "likes tea\nand coffee" in refreshed and "1 entries indexed." in refreshed
            assert await AsyncStoreContextProvider(store, "_system_prompt_chat").get() == refreshed
            estimate = await again.token_estimate()
            assert estimate == (
                await session.get_token_estimate() + estimate_string_tokens(refreshed)
            )

    run(main())


def test_sync_context_accepts_async_providers(store: Sessions) -> None:
    memory = AsyncMemory("from a coroutine")
    context = Context(store.session()).with_context("memory", provider=memory)
    assert context.get_context_block("memory").content == "from a coroutine"  # type: ignore[union-attr]
    assert context.execute("set_context", {"label": "memory", "content": "new"}) == (
        "Written to memory. Usage: 2 tokens"
    )
    assert memory.content == "new"
    assert memory.labels == ["memory"]


def test_sync_context_inside_an_event_loop_says_to_use_async(store: Sessions) -> None:
    context = Context(store.session()).with_context("memory", provider=AsyncMemory("x"))

    async def main() -> str:
        return context.execute("set_context", {"label": "memory", "content": "y"})

    assert run(main()).startswith("Error: an async provider or session was given to the sync")
    assert StoreContextProvider(store, "memory").get() is None


def test_sync_context_names_an_async_history_it_cannot_stream() -> None:
    class AsyncHistorySession:
        session_id = ""

        async def history(self, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
            yield {"id": "a1", "role": "assistant", "parts": []}

    context = Context(AsyncHistorySession()).with_context(  # type: ignore[arg-type]
        "skills", provider=Skills({"pirate": "Arr!"})
    )
    with pytest.raises(TypeError, match=r"AsyncHistorySession\.history\(\) returned an async "):
        context.get_loaded_skill_keys()


def test_async_context_auto_compaction_counts_the_prompt(backend_spec: Any) -> None:
    async def main() -> list[int]:
        async with AsyncSessions.open(backend_spec.url, **backend_spec.options) as store:
            session = store.session()
            calls = record_compactions(session)
            context = AsyncContext(session).with_context(
                "memory", provider=AsyncMemory(" ".join(["fact"] * 400))
            )
            assert await context.compact_after(300) is context
            await session.append_message(
                {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
            )
            assert await store.wait_for_compactions()  # it runs after the append returns
            return calls

    assert run(main()) == [1]

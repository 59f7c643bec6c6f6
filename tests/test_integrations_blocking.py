"""Nothing an integration does from async code blocks the event loop.

Each integration's async surface runs under BlockBuster (the blocking-call detector that
langchain-core's own suite uses): any blocking call on the loop's thread (file or socket I/O,
sqlite3, a contended lock, ``time.sleep``) raises ``BlockingError``. Every object is built
from a URL inside the coroutine, as ``RunnableWithMessageHistory.ainvoke`` builds a history with
the user's factory, so opening the shared store is checked too; and on a store given as an open
``AsyncSessions``. On SQLite (a file) and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest
from conftest import BackendSpec

pytest.importorskip("blockbuster", reason="BlockBuster is not installed (the dev extra has it)")
pytest.importorskip("agents")
pytest.importorskip("langchain_core")
pytest.importorskip("pydantic_ai")

from agents import Agent, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402
from blockbuster import BlockBuster, BlockingError  # noqa: E402
from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    FakeMessagesListChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.runnables.history import RunnableWithMessageHistory  # noqa: E402
from pydantic_ai import Agent as PydanticAgent  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402

from convostore.aio import AsyncSessions  # noqa: E402
from convostore.integrations.langchain import ConvostoreChatMessageHistory  # noqa: E402
from convostore.integrations.openai_agents import ConvostoreSession  # noqa: E402
from convostore.integrations.pydantic_ai import (  # noqa: E402
    ConvostoreMessageHistory,
    aload_messages,
    asave_messages,
)

pytestmark = pytest.mark.requires("reopen")  # a file or a server: SQLite and PostgreSQL


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    set_tracing_disabled(True)
    yield


@function_tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def guarded(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``main()`` on a new loop with BlockBuster active for the whole run."""

    async def checked() -> None:
        blockbuster = BlockBuster()
        blockbuster.activate()
        try:
            await main()
        finally:
            blockbuster.deactivate()

    asyncio.run(checked())


def test_the_detector_is_live() -> None:
    """The guard catches what it should: a test that cannot fail is not a test."""
    import sqlite3

    async def blocking() -> None:
        sqlite3.connect(":memory:").execute("SELECT 1")

    with pytest.raises(BlockingError):
        guarded(blocking)


def test_openai_agents_session(backend_spec: BackendSpec) -> None:
    url, options = backend_spec.url, backend_spec.options

    async def main() -> None:
        async with ConvostoreSession("agents", url, **options) as session:
            await session.add_items([{"role": "user", "content": "hi"}])
            await session.add_items([
                {"type": "function_call", "call_id": "c1", "name": "lookup",
                 "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "found"},
            ])
            assert len(await session.get_items()) == 3
            assert len(await session.get_items(limit=1)) == 1
            assert await session.branch_from(0) is not None
            assert await session.pop_item() == {"role": "user", "content": "hi"}
            assert [h.role for h in await session.search("hi")] == ["user"]
            await session.clear_session()
            assert await session.get_items() == []
        # Runner.run over two turns, a tool call included, on a session built in the loop
        model = ScriptedModel([
            [function_call("lookup", {"q": "x"}, call_id="c2")],
            [assistant_message("Found it.", item_id="m1")],
            [assistant_message("Bye.", item_id="m2")],
        ])
        agent = Agent(name="a", model=model, tools=[lookup])
        session = ConvostoreSession("runner", url, **options)
        for prompt in ("find x", "thanks"):
            await Runner.run(agent, prompt, session=session)
        assert len(await session.get_items()) == 6
        session.close()  # the sync close inside the loop: the store closes on a thread

    guarded(main)


def test_openai_agents_session_on_an_async_store(backend_spec: BackendSpec) -> None:
    async def main() -> None:
        async with AsyncSessions.open(backend_spec.url, **backend_spec.options) as store:
            session = ConvostoreSession("agents", store)
            async with session:
                await session.add_items([{"role": "user", "content": "hi"}])
                assert await session.get_items() == [{"role": "user", "content": "hi"}]
                assert await session.pop_item() == {"role": "user", "content": "hi"}

    guarded(main)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_langchain_history(backend_spec: BackendSpec) -> None:
    url, options = backend_spec.url, backend_spec.options
    model = FakeMessagesListChatModel(responses=[AIMessage("Hello Ann."),
                                                 AIMessage("Your name is Ann.")])

    def factory(session_id: str) -> ConvostoreChatMessageHistory:
        return ConvostoreChatMessageHistory(session_id, url, **options)  # built on the loop

    chain = RunnableWithMessageHistory(model, factory)
    config: Any = {"configurable": {"session_id": "ann"}}

    async def main() -> None:
        first = await chain.ainvoke([HumanMessage("I am Ann.")], config=config)
        second = await chain.ainvoke([HumanMessage("Who am I?")], config=config)
        assert (first.content, second.content) == ("Hello Ann.", "Your name is Ann.")
        async with ConvostoreChatMessageHistory("ann", url, **options) as history:
            assert len(await history.aget_messages()) == 4
            await history.aadd_messages([HumanMessage("bye")])
            assert [h.role for h in await history.asearch("bye")] == ["user"]
            await history.aclear()
            assert await history.aget_messages() == []

    guarded(main)


def test_pydantic_ai(backend_spec: BackendSpec) -> None:
    url, options = backend_spec.url, backend_spec.options
    agent: PydanticAgent[None, str] = PydanticAgent(TestModel())

    async def main() -> None:
        async with ConvostoreMessageHistory("pai", url, **options) as history:
            for prompt in ("one", "two"):
                result = await agent.run(prompt,
                                         message_history=await history.aload_messages())
                await history.asave_messages(result.new_messages())
            assert len(await history.aload_messages()) == 4
            assert [h.role for h in await history.asearch("two")] == ["user"]
        async with AsyncSessions.open(url, **options) as store:
            session = store.session("pai-async")
            result = await agent.run("hi", message_history=await aload_messages(session))
            assert await asave_messages(session, result.new_messages()) == 2
            assert await aload_messages(session) == result.all_messages()

    guarded(main)

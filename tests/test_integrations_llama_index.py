"""ConvostoreChatStore: LlamaIndex's BaseChatStore over every backend.

The first cases are LlamaIndex's own tests of its in-memory ``SimpleChatStore``, pointed at this
store; the rest cover what a durable store adds (the stored shape, async, sharing a URL).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from conftest import BackendSpec

from convostore import Sessions

pytest.importorskip("llama_index.core",
                    reason="LlamaIndex is not installed: pip install 'convostore[llama-index]'")

from llama_index.core.base.llms.types import ImageBlock, TextBlock  # noqa: E402
from llama_index.core.llms import ChatMessage  # noqa: E402
from llama_index.core.memory import ChatMemoryBuffer  # noqa: E402
from llama_index.core.storage.chat_store.base import BaseChatStore  # noqa: E402

from convostore.integrations import SessionClosed  # noqa: E402
from convostore.integrations.llama_index import (  # noqa: E402
    DATA_PART_TYPE,
    ConvostoreChatStore,
)


def backing(store: Any) -> Any:
    """The Sessions, or the AsyncSessions under the test suite's blocking adapter."""
    return getattr(store, "_inner", store)


def msg(content: str, role: str = "user") -> ChatMessage:
    return ChatMessage(role=role, content=content)


# --- LlamaIndex's SimpleChatStore tests --------------------------------------------------------


def test_add_messages(store: Sessions) -> None:
    chat_store = ConvostoreChatStore(backing(store))
    assert isinstance(chat_store, BaseChatStore)
    for key in ("user1", "user2"):
        chat_store.add_message(key, msg("hello"))
        chat_store.add_message(key, msg("world"))
    assert chat_store.get_messages("user1") == [msg("hello"), msg("world")]
    assert chat_store.get_messages("user2") == [msg("hello"), msg("world")]
    assert chat_store.get_keys() == ["user1", "user2"]
    chat_store.add_message("user1", msg("hello"), idx=0)
    assert chat_store.get_messages("user1") == [msg("hello"), msg("hello"), msg("world")]


def test_delete_chat_messages(store: Sessions) -> None:
    chat_store = ConvostoreChatStore(backing(store))
    for key in ("user1", "user2"):
        chat_store.add_message(key, msg("hello"))
        chat_store.add_message(key, msg("world"))
    assert chat_store.delete_messages("user1") == [msg("hello"), msg("world")]
    assert chat_store.get_messages("user1") == []
    assert chat_store.get_messages("user2") == [msg("hello"), msg("world")]
    assert chat_store.get_keys() == ["user2"]
    assert chat_store.delete_messages("nobody") is None


def test_delete_chat_message(store: Sessions) -> None:
    chat_store = ConvostoreChatStore(backing(store))
    chat_store.add_message("user1", msg("hello"))
    chat_store.add_message("user1", msg("world"))
    assert chat_store.delete_last_message("user1") == msg("world")
    assert chat_store.get_messages("user1") == [msg("hello")]


def test_delete_chat_message_idx(store: Sessions) -> None:
    chat_store = ConvostoreChatStore(backing(store))
    chat_store.add_message("user1", msg("hello"))
    chat_store.add_message("user1", msg("world"))
    assert chat_store.delete_message("user1", 0) == msg("hello")
    assert chat_store.get_messages("user1") == [msg("world")]


def test_delete_chat_message_out_of_bounds(store: Sessions) -> None:
    chat_store = ConvostoreChatStore(backing(store))
    chat_store.add_message("user1", msg("hello"))
    assert chat_store.delete_message("user1", -2) is None
    assert chat_store.delete_message("user1", 1) is None
    assert chat_store.get_messages("user1") == [msg("hello")]


def test_delete_last_chat_message_from_empty_history(store: Sessions) -> None:
    chat_store = ConvostoreChatStore(backing(store))
    chat_store.add_message("user1", msg("hello"))
    assert chat_store.delete_last_message("user1") == msg("hello")
    assert chat_store.delete_last_message("user1") is None
    assert chat_store.delete_last_message("nobody") is None


def test_non_ascii_is_kept(store: Sessions) -> None:
    chat_store = ConvostoreChatStore(backing(store))
    chat_store.add_message("user1", msg("ハロー héllo"))
    assert ConvostoreChatStore(backing(store)).get_messages("user1") == [msg("ハロー héllo")]


# --- what a durable store adds ---------------------------------------------------------------


def test_messages_round_trip_losslessly_and_searchable(store: Sessions) -> None:
    chat_store = ConvostoreChatStore(backing(store))
    messages = [
        msg("You are terse.", "system"),
        ChatMessage(role="user", blocks=[TextBlock(text="what is in this picture"),
                                         ImageBlock(url="https://example.com/cat.png")]),
        ChatMessage(role="assistant", content="A cat.", additional_kwargs={"tool_calls": []}),
        ChatMessage(role="tool", content="42", additional_kwargs={"tool_call_id": "c1"}),
    ]
    chat_store.set_messages("k", messages)
    assert chat_store.get_messages("k") == messages
    stored = store.session("k").get_history()
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool"]
    assert stored[1]["parts"][0] == {"type": "text", "text": "what is in this picture"}
    assert stored[1]["parts"][-1]["type"] == DATA_PART_TYPE
    assert [r.session_id for r in store.search("picture")] == ["k"]
    chat_store.set_messages("k", messages[:1])
    assert chat_store.get_messages("k") == messages[:1]


def test_async_methods(store: Sessions) -> None:
    chat_store = ConvostoreChatStore(backing(store))

    async def main() -> None:
        await chat_store.aset_messages("a", [msg("one")])
        await chat_store.async_add_message("a", msg("two"))
        await chat_store.async_add_message("a", msg("zero"), idx=0)
        assert await chat_store.aget_messages("a") == [msg("zero"), msg("one"), msg("two")]
        assert await chat_store.aget_keys() == ["a"]
        assert await chat_store.adelete_message("a", 1) == msg("one")
        assert await chat_store.adelete_last_message("a") == msg("two")
        assert await chat_store.adelete_messages("a") == [msg("zero")]
        assert await chat_store.aget_keys() == []

    asyncio.run(main())


def test_chat_memory_buffer(store: Sessions) -> None:
    chat_store = ConvostoreChatStore(backing(store))
    memory = ChatMemoryBuffer.from_defaults(chat_store=chat_store, chat_store_key="ann",
                                            token_limit=1000)
    memory.put(msg("I am Ann."))
    memory.put(msg("Hello Ann.", "assistant"))
    again = ChatMemoryBuffer.from_defaults(chat_store=ConvostoreChatStore(backing(store)),
                                           chat_store_key="ann")
    assert [m.content for m in again.get()] == ["I am Ann.", "Hello Ann."]


def test_given_a_url_the_store_is_shared_and_closed(tmp_path: Path) -> None:
    url = str(tmp_path / "chat.db")
    one, two = ConvostoreChatStore(url), ConvostoreChatStore(url)
    one.add_message("k", msg("hi"))
    assert two.get_messages("k") == [msg("hi")]
    one.close()
    two.close()
    with pytest.raises(SessionClosed):
        one.get_messages("k")
    with Sessions.open(url) as store:
        assert len(store.session("k").get_history()) == 1


@pytest.mark.requires("reopen")  # a file or a server: SQLite and PostgreSQL
def test_the_event_loop_never_waits(backend_spec: BackendSpec) -> None:
    """Every async method, from a URL (the store opened and closed inside the loop), under
    BlockBuster: a blocking call on the event loop fails the test."""
    blockbuster = pytest.importorskip("blockbuster")

    async def main() -> None:
        chat_store = ConvostoreChatStore(backend_spec.url, **backend_spec.options)
        await chat_store.aset_messages("k", [msg("one")])
        await chat_store.async_add_message("k", msg("two"))
        await chat_store.async_add_message("k", msg("zero"), idx=0)
        assert len(await chat_store.aget_messages("k")) == 3
        assert await chat_store.aget_keys() == ["k"]
        assert await chat_store.adelete_message("k", 0) == msg("zero")
        assert await chat_store.adelete_last_message("k") == msg("two")
        assert await chat_store.adelete_messages("k") == [msg("one")]
        await chat_store.aclose()

    async def checked() -> None:
        guard = blockbuster.BlockBuster()
        guard.activate()
        try:
            await main()
        finally:
            guard.deactivate()

    asyncio.run(checked())

"""ConvostoreChatMessageHistory: LangChain's BaseChatMessageHistory over every backend."""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from convostore import MissingDependency, Sessions

pytest.importorskip(
    "langchain_core", reason="LangChain is not installed: pip install 'convostore[langchain]'"
)

from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    FakeMessagesListChatModel,
)
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables.history import RunnableWithMessageHistory  # noqa: E402

from convostore.integrations.langchain import (  # noqa: E402
    DATA_PART_TYPE,
    ConvostoreChatMessageHistory,
)

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)


def backing(store: Any) -> Any:
    """The Sessions, or the AsyncSessions under the test suite's blocking adapter."""
    return getattr(store, "_inner", store)


def conversation() -> list[BaseMessage]:
    return [
        SystemMessage("You are a weather bot."),
        HumanMessage(content=[
            {"type": "text", "text": "What is the weather here?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ], id="h1"),
        AIMessage(
            content="",
            tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"}],
            usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
            response_metadata={"model_name": "gpt-test", "finish_reason": "tool_calls"},
            id="run-1",
        ),
        ToolMessage(content="15°C", tool_call_id="call_1", name="get_weather",
                    artifact={"raw": [1, 2]}),
        AIMessage("It is 15°C in Paris.", additional_kwargs={"refusal": None}),
        HumanMessage("Thanks!", name="alice"),
    ]


def test_messages_round_trip_losslessly(store: Sessions) -> None:
    history = ConvostoreChatMessageHistory("lc", backing(store))
    assert isinstance(history, BaseChatMessageHistory)
    messages = conversation()
    history.add_messages(messages)
    assert history.messages == messages
    assert [type(m).__name__ for m in history.messages] == [
        "SystemMessage", "HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "HumanMessage"]
    ai = history.messages[2]
    assert isinstance(ai, AIMessage)
    assert ai.tool_calls == [{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1",
                              "type": "tool_call"}]


def test_stored_shape_keeps_text_searchable_and_once(store: Sessions) -> None:
    history = ConvostoreChatMessageHistory("shape", backing(store))
    history.add_messages(conversation())
    stored = store.session("shape").get_history()
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant",
                                           "user"]
    last = stored[4]
    assert last["parts"][0] == {"type": "text", "text": "It is 15°C in Paris."}
    assert last["parts"][1]["type"] == DATA_PART_TYPE
    assert "content" not in last["parts"][1]["data"]["data"]
    assert [h.role for h in history.search("15°C in Paris")] == ["assistant"]
    assert store.storage_stats().attachments == 1  # the image left the row


def test_add_message_and_clear(store: Sessions) -> None:
    history = ConvostoreChatMessageHistory("clear", backing(store))
    history.add_user_message("hi")
    history.add_ai_message("hello")
    history.add_message(HumanMessage("bye"))
    assert history.messages == [HumanMessage("hi"), AIMessage("hello"), HumanMessage("bye")]
    history.clear()
    assert history.messages == []
    assert store.session("clear").get_history() == []


def test_async_methods(store: Sessions) -> None:
    history = ConvostoreChatMessageHistory("async", backing(store))
    messages = conversation()

    async def main() -> None:
        await history.aadd_messages(messages[:3])
        await history.aadd_messages(messages[3:])
        assert await history.aget_messages() == messages
        await history.aclear()
        assert await history.aget_messages() == []

    asyncio.run(main())


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_runnable_with_message_history(store: Sessions) -> None:
    model = FakeMessagesListChatModel(responses=[AIMessage("Hello Ann."),
                                                 AIMessage("Your name is Ann.")])
    histories: dict[str, ConvostoreChatMessageHistory] = {}

    def get_history(session_id: str) -> ConvostoreChatMessageHistory:
        return histories.setdefault(
            session_id, ConvostoreChatMessageHistory(session_id, backing(store)))

    chain = RunnableWithMessageHistory(model, get_history)
    config: Any = {"configurable": {"session_id": "ann"}}
    assert chain.invoke([HumanMessage("I am Ann.")], config=config).content == "Hello Ann."
    assert chain.invoke([HumanMessage("Who am I?")], config=config).content == \
        "Your name is Ann."
    contents = [m.content for m in histories["ann"].messages]
    assert contents == ["I am Ann.", "Hello Ann.", "Who am I?", "Your name is Ann."]


def test_messages_written_by_other_means_are_read_as_text(store: Sessions) -> None:
    store.session("ui").append_message(
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "from a UI"}]})
    store.session("ui").append_message(
        {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}]})
    history = ConvostoreChatMessageHistory("ui", backing(store))
    assert history.messages == [HumanMessage("from a UI")]


def test_open_from_a_path(tmp_path: Path) -> None:
    path = tmp_path / "lc.db"
    history = ConvostoreChatMessageHistory("u", str(path))
    history.add_messages(conversation())
    history.close()
    again = ConvostoreChatMessageHistory("u", path)
    assert again.messages == conversation()
    again.close()


def test_missing_langchain_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core.chat_history", None)
    monkeypatch.delitem(sys.modules, "convostore.integrations.langchain")
    with pytest.raises(MissingDependency, match=r"pip install 'convostore\[langchain\]'"):
        importlib.import_module("convostore.integrations.langchain")

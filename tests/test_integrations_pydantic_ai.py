"""pydantic-ai: save_messages / load_messages round trips of real runs, on every backend.

Runs use pydantic-ai's own ``TestModel`` and ``FunctionModel`` (no network).
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from convostore import MissingDependency, Sessions

pytest.importorskip(
    "pydantic_ai", reason="pydantic-ai is not installed: pip install 'convostore[pydantic-ai]'"
)

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402

from convostore.integrations import SessionClosed  # noqa: E402
from convostore.integrations.pydantic_ai import (  # noqa: E402
    ConvostoreMessageHistory,
    aload_messages,
    asave_messages,
    load_messages,
    save_messages,
    to_stored,
)

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")


def weather_agent(model: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, system_prompt="Be brief.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    return agent


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A FunctionModel script: think and call the tool, then answer from its result."""
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(p.part_kind == "tool-return" for p in last.parts):
        return ModelResponse(parts=[TextPart("It is sunny.")])
    return ModelResponse(parts=[
        ThinkingPart("Need the weather.", signature="c2ln", provider_name="anthropic"),
        ToolCallPart("get_weather", '{"city": "Paris"}', tool_call_id="call_1"),
    ])


def test_test_model_runs_round_trip(store: Sessions) -> None:
    session = store.session("pai")
    agent = weather_agent(TestModel())
    first = agent.run_sync("Weather in Paris?", message_history=load_messages(session))
    assert save_messages(session, first.all_messages()) == 4
    assert load_messages(session) == first.all_messages()
    second = agent.run_sync("And tomorrow?", message_history=load_messages(session))
    new = len(second.new_messages())
    assert new >= 2
    assert save_messages(session, second.all_messages()) == new  # only the new run's messages
    assert load_messages(session) == second.all_messages()
    assert len(store.session("pai").get_history()) == 4 + new
    assert save_messages(session, second.all_messages()) == 0  # idempotent


def test_function_model_with_thinking_and_tool_calls(store: Sessions) -> None:
    session = store.session("fn")
    agent = weather_agent(FunctionModel(scripted))
    result = agent.run_sync("Weather?")
    assert result.output == "It is sunny."
    save_messages(session, result.all_messages())
    loaded = load_messages(session)
    assert loaded == result.all_messages()
    # the stored form pairs the call with its return and keeps the thinking verbatim
    stored = store.session("fn").get_history()
    kinds = [[p["type"] for p in m["parts"]] for m in stored]
    assert kinds[1] == ["step-start", "reasoning", "tool-get_weather"]
    assert stored[1]["parts"][1]["providerMetadata"]["convostore"]["item"]["signature"] == "c2ln"
    assert stored[1]["parts"][2]["input"] == {"city": "Paris"}
    assert [h.role for h in store.session("fn").search("sunny")] == ["assistant"]


def test_binary_content_leaves_the_row(store: Sessions) -> None:
    session = store.session("media")
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(content=[
            "What is this?", BinaryContent(data=PNG, media_type="image/png")])]),
        ModelResponse(parts=[TextPart("A PNG header.")]),
    ]
    save_messages(session, history)
    loaded = load_messages(session)
    request = loaded[0]
    assert isinstance(request, ModelRequest)
    part = request.parts[0]
    assert isinstance(part, UserPromptPart)
    assert isinstance(part.content, list)
    assert part.content[1].data == PNG
    assert loaded[1] == history[1]
    assert store.storage_stats().attachments == 1


def test_a_diverging_history_grows_a_branch(store: Sessions) -> None:
    session = store.session("branch")
    agent = weather_agent(TestModel())
    base = agent.run_sync("One.")
    save_messages(session, base.all_messages())
    a = agent.run_sync("Two A.", message_history=base.all_messages())
    b = agent.run_sync("Two B.", message_history=base.all_messages())
    save_messages(session, a.all_messages())
    save_messages(session, b.all_messages())
    assert load_messages(session) == b.all_messages()  # the active branch is b's
    leaf_a = to_stored(a.all_messages())[-1]["id"]
    assert load_messages(session, leaf_id=leaf_a) == a.all_messages()  # a's branch is kept
    fork = store.session("branch").get_history()[len(base.all_messages()) - 1]["id"]
    assert len(store.session("branch").get_branches(fork)) == 2


def test_async_helpers(tmp_path: Path) -> None:
    from convostore.aio import AsyncSessions

    agent = weather_agent(TestModel())

    async def main() -> None:
        async with AsyncSessions.open(str(tmp_path / "a.db")) as store:
            session = store.session("u")
            result = await agent.run("Hi", message_history=await aload_messages(session))
            assert await asave_messages(session, result.all_messages()) == 4
            assert await aload_messages(session) == result.all_messages()

    asyncio.run(main())


def test_missing_pydantic_ai_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_ai.messages", None)
    monkeypatch.delitem(sys.modules, "convostore.integrations.pydantic_ai")
    with pytest.raises(MissingDependency, match=r"pip install 'convostore\[pydantic-ai\]'"):
        importlib.import_module("convostore.integrations.pydantic_ai")


# --- the pattern of pydantic-ai's docs: new_messages() after each run (issue 19) ------------


def test_new_messages_saved_after_each_run_chain_onto_the_conversation(store: Sessions) -> None:
    session = store.session("docs")
    agent = weather_agent(TestModel())
    history: list[ModelMessage] = []
    for prompt in ("One.", "Two.", "Three."):
        result = agent.run_sync(prompt, message_history=load_messages(session))
        assert save_messages(session, result.new_messages()) == len(result.new_messages())
        history = result.all_messages()
    assert load_messages(session) == history  # all three turns, in order
    assert len(store.session("docs").get_roots()) == 1
    # saving the whole history now (or a turn again) stores nothing twice
    assert save_messages(session, history) == 0
    assert save_messages(session, result.new_messages()) == 0
    assert len(store.session("docs").get_history()) == len(history)


def test_all_messages_and_new_messages_mix(store: Sessions) -> None:
    session = store.session("mix")
    agent = weather_agent(TestModel())
    first = agent.run_sync("One.")
    assert save_messages(session, first.all_messages()) == 4
    second = agent.run_sync("Two.", message_history=load_messages(session))
    assert save_messages(session, second.new_messages()) == len(second.new_messages())
    third = agent.run_sync("Three.", message_history=load_messages(session))
    assert save_messages(session, third.all_messages()) == len(third.new_messages())
    assert load_messages(session) == third.all_messages()


def test_a_tool_return_is_paired_with_its_call(store: Sessions) -> None:
    session = store.session("pair")
    agent = weather_agent(TestModel())
    result = agent.run_sync("Weather?")
    save_messages(session, result.all_messages())
    assert load_messages(session) == result.all_messages()
    stored = store.session("pair").get_history()
    returns = [p for m in stored for p in m["parts"] if p.get("state") == "output-available"]
    assert len(returns) == 1
    (part,) = returns
    assert part["toolName"] == "get_weather"
    assert part["input"] == {"city": "a"}  # TestModel's made-up argument
    assert part["callProviderMetadata"]["convostore"]["callMessage"] == stored[1]["id"]


def test_plain_dicts_are_converted_or_refused(store: Sessions) -> None:
    session = store.session("dicts")
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Hi")]),
        ModelResponse(parts=[TextPart("Hello.")]),
    ]
    dumped = ModelMessagesTypeAdapter.dump_python(history, mode="json")
    assert save_messages(session, dumped) == 2
    assert load_messages(session) == history
    assert save_messages(session, history) == 0  # the same messages, as objects
    with pytest.raises(TypeError, match=r"messages\[0\] is a dict but not a pydantic-ai "
                                        r"message in JSON form"):
        save_messages(session, [{"role": "user", "content": "hi"}])
    with pytest.raises(TypeError, match=r"messages\[1\] must be a pydantic-ai ModelMessage"):
        save_messages(session, [history[0], "hello"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="messages must be a list"):
        save_messages(session, history[0])  # type: ignore[arg-type]
    assert len(store.session("dicts").get_history()) == 2  # nothing more written


def test_the_sync_helpers_refuse_an_async_session(tmp_path: Path) -> None:
    from convostore.aio import AsyncSessions

    async def main() -> None:
        async with AsyncSessions.open(str(tmp_path / "a.db")) as store:
            session = store.session("u")
            with pytest.raises(TypeError, match=r"await aload_messages\(session\)"):
                load_messages(session)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match=r"await asave_messages\(session\)"):
                save_messages(session, [])  # type: ignore[arg-type]

    asyncio.run(main())
    with pytest.raises(TypeError, match="needs a convostore Session, not str"):
        load_messages("u")  # type: ignore[arg-type]


def test_async_helpers_take_a_sync_session_too(store: Sessions) -> None:
    session = store.session("either")
    agent = weather_agent(TestModel())

    async def main() -> None:
        result = await agent.run("Hi", message_history=await aload_messages(session))
        assert await asave_messages(session, result.new_messages()) == 4
        assert await aload_messages(session) == result.all_messages()

    asyncio.run(main())


def test_message_history_object(tmp_path: Path) -> None:
    path = str(tmp_path / "h.db")
    agent = weather_agent(TestModel())
    with ConvostoreMessageHistory("u", path) as history:
        result = agent.run_sync("Hi", message_history=history.load_messages())
        assert history.save_messages(result.new_messages()) == 4
        assert [h.role for h in history.search("Hi")] == ["user"]

    async def main() -> None:
        async with ConvostoreMessageHistory("u", path) as again:
            second = await agent.run("More", message_history=await again.aload_messages())
            await again.asave_messages(second.new_messages())
            assert await again.aload_messages() == second.all_messages()

    asyncio.run(main())
    with pytest.raises(SessionClosed, match="ConvostoreMessageHistory is closed"):
        history.load_messages()

"""ConvostoreSession: the OpenAI Agents SDK's Session protocol over every backend.

Runs real ``Runner.run`` / ``run_sync`` / ``run_streamed`` loops with the SDK's own
``agents.testing.ScriptedModel`` (no network: a dummy key, tracing off), and checks every turn
against the SDK's ``SQLiteSession`` fed the same script: the same items come back, and the model
sees the same input.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from convostore import MissingDependency, Sessions

agents = pytest.importorskip(
    "agents",
    reason="the OpenAI Agents SDK is not installed: pip install 'convostore[openai-agents]'",
)

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from convostore.integrations.openai_agents import ConvostoreSession  # noqa: E402

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)
REASONING = {"id": "rs_1", "type": "reasoning",
             "summary": [{"type": "summary_text", "text": "Thinking about Paris."}],
             "encrypted_content": "gAAAAAB" + "z" * 300}


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    set_tracing_disabled(True)
    yield


@function_tool
def get_weather(city: str) -> str:
    """Return the weather of a city."""
    return f"sunny in {city}"


@function_tool
def get_time(tz: str) -> str:
    """Return the time in a time zone."""
    return f"12:00 {tz}"


def script() -> ScriptedModel:
    """Three turns: two parallel tool calls, one call, then plain text."""
    return ScriptedModel([
        [function_call("get_weather", {"city": "Paris"}, call_id="call_1"),
         function_call("get_time", {"tz": "CET"}, call_id="call_2")],
        [assistant_message("Sunny in Paris, noon.", item_id="msg_1")],
        [function_call("get_weather", {"city": "Rome"}, call_id="call_3")],
        [assistant_message("Rome is sunny too.", item_id="msg_2")],
        [assistant_message("Bye!", item_id="msg_3")],
    ])


PROMPTS = ["Weather and time in Paris?", "And Rome?", "Thanks."]


def backing(store: Any) -> Any:
    """What ConvostoreSession is given: the Sessions, or the AsyncSessions under the adapter."""
    return getattr(store, "_inner", store)


def sync_handle(store: Any, session_id: str) -> Any:
    """The sync convostore Session that the ConvostoreSession works on."""
    handle = backing(store).session(session_id)
    return getattr(handle, "_session", handle)


def agent_for(model: ScriptedModel) -> Agent[Any]:
    return Agent(name="weather", instructions="Be brief.", model=model,
                 tools=[get_weather, get_time])


async def run_async(session: Any) -> tuple[ScriptedModel, list[str]]:
    model = script()
    agent = agent_for(model)
    outputs = []
    for prompt in PROMPTS:
        result = await Runner.run(agent, prompt, session=session)
        outputs.append(result.final_output)
    return model, outputs


def run_sync(session: Any) -> tuple[ScriptedModel, list[str]]:
    model = script()
    agent = agent_for(model)
    outputs = [Runner.run_sync(agent, p, session=session).final_output for p in PROMPTS]
    return model, outputs


async def run_streamed(session: Any) -> tuple[ScriptedModel, list[str]]:
    model = script()
    agent = agent_for(model)
    outputs = []
    for prompt in PROMPTS:
        result = Runner.run_streamed(agent, prompt, session=session)
        async for _event in result.stream_events():
            pass
        outputs.append(result.final_output)
    return model, outputs


def reference(kind: str) -> tuple[ScriptedModel, list[str], list[Any]]:
    """The same script run over the SDK's own SQLiteSession."""
    theirs = SQLiteSession("reference")
    try:
        if kind == "sync":
            model, outputs = run_sync(theirs)
        else:
            model, outputs = asyncio.run(run_async(theirs) if kind == "async"
                                         else run_streamed(theirs))
        return model, outputs, asyncio.run(theirs.get_items())
    finally:
        theirs.close()


def assert_same_run(ours: tuple[ScriptedModel, list[str]], session: ConvostoreSession,
                    kind: str) -> None:
    model, outputs = ours
    ref_model, ref_outputs, ref_items = reference(kind)
    assert outputs == ref_outputs == ["Sunny in Paris, noon.", "Rome is sunny too.", "Bye!"]
    items = asyncio.run(session.get_items())
    assert items == ref_items
    assert len(items) == 12
    assert [c.input for c in model.calls] == [c.input for c in ref_model.calls]


def test_runner_run_over_several_turns(store: Sessions) -> None:
    session = ConvostoreSession("user-42", backing(store))
    ours = asyncio.run(run_async(session))
    assert_same_run(ours, session, "async")
    # one stored message per item, tool calls and outputs included
    assert len(store.session("user-42").get_history()) == 12


def test_runner_run_sync_over_several_turns(store: Sessions) -> None:
    session = ConvostoreSession("user-42", backing(store))
    ours = run_sync(session)
    assert_same_run(ours, session, "sync")


def test_runner_run_streamed_over_several_turns(store: Sessions) -> None:
    session = ConvostoreSession("user-42", backing(store))
    ours = asyncio.run(run_streamed(session))
    assert_same_run(ours, session, "streamed")


def test_items_come_back_exactly(store: Sessions) -> None:
    session = ConvostoreSession("exact", backing(store))
    items: list[Any] = [
        {"role": "user", "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}",
             "detail": "high"}]},
        REASONING,
        {"type": "function_call", "call_id": "c9", "name": "lookup", "id": "fc_9",
         "arguments": "{\"q\": \"pixel\"}", "status": "completed"},
        {"type": "function_call_output", "call_id": "c9", "output": "a pixel"},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAAC" + "y" * 100},
        {"type": "item_reference", "id": "msg_0"},
    ]
    asyncio.run(session.add_items(items))
    assert asyncio.run(session.get_items()) == items
    assert store.storage_stats().attachments == 1  # the image left the row
    assert asyncio.run(session.get_items(limit=2)) == items[-2:]


def test_get_items_limit_reads_only_the_newest_messages(
    store: Sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = ConvostoreSession("limit", backing(store), session_settings={"limit": 3})
    items: list[Any] = [{"role": "user", "content": f"message {i}"} for i in range(40)]
    asyncio.run(session.add_items(items))
    handle = sync_handle(store, "limit")
    consumed: list[tuple[bool, int]] = []
    history = handle.history

    def counting(**kwargs: Any) -> Iterator[Any]:
        for count, message in enumerate(history(**kwargs), 1):
            consumed.append((kwargs.get("newest_first", False), count))
            yield message

    monkeypatch.setattr(handle, "history", counting)
    assert asyncio.run(session.get_items(limit=2)) == items[-2:]
    assert consumed == [(True, 1), (True, 2)]
    consumed.clear()
    assert asyncio.run(session.get_items()) == items[-3:]  # session_settings.limit
    assert consumed == [(True, 1), (True, 2), (True, 3)]
    assert asyncio.run(session.get_items(limit=0)) == []


def test_pop_item_and_clear_session(store: Sessions) -> None:
    session = ConvostoreSession("pop", backing(store))
    items: list[Any] = [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    asyncio.run(session.add_items(items))
    assert asyncio.run(session.pop_item()) == items[1]
    assert asyncio.run(session.get_items()) == items[:1]
    assert asyncio.run(session.pop_item()) == items[0]
    assert asyncio.run(session.pop_item()) is None
    asyncio.run(session.add_items(items))
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == []
    assert store.session("pop").get_history() == []


def test_branch_from_an_earlier_item(store: Sessions) -> None:
    session = ConvostoreSession("branch", backing(store))
    first: list[Any] = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
             {"role": "user", "content": "c"}]
    asyncio.run(session.add_items(first))
    branch_point = asyncio.run(session.branch_from(1))
    assert asyncio.run(session.get_items()) == first[:2]
    assert asyncio.run(session.get_items(limit=1)) == first[1:2]
    asyncio.run(session.add_items([{"role": "user", "content": "c2"}]))
    assert asyncio.run(session.get_items()) == first[:2] + [{"role": "user", "content": "c2"}]
    handle = store.session("branch")
    assert branch_point is not None
    assert [m["parts"][0]["text"] for m in handle.get_branches(branch_point)] == ["c", "c2"]
    # the old branch is still there, by id
    asyncio.run(session.branch_from(-2))
    assert asyncio.run(session.get_items()) == first[:2]
    # popping in a branch view hides the item without deleting the shared message
    assert asyncio.run(session.pop_item()) == first[1]
    assert asyncio.run(session.get_items()) == first[:1]
    assert len(handle.get_branches(branch_point)) == 2
    asyncio.run(session.branch_from(None))
    assert asyncio.run(session.get_items()) == []
    asyncio.run(session.add_items([{"role": "user", "content": "fresh"}]))
    assert asyncio.run(session.get_items()) == [{"role": "user", "content": "fresh"}]
    with pytest.raises(IndexError):
        asyncio.run(session.branch_from(5))
    with pytest.raises(KeyError):
        asyncio.run(session.branch_from("no-such-id"))
    asyncio.run(session.branch_from(None))
    with pytest.raises(IndexError, match="the history is empty"):
        asyncio.run(session.branch_from(0))


def test_a_bad_item_is_rejected_before_anything_is_written(store: Sessions) -> None:
    session = ConvostoreSession("bad", backing(store))
    items: list[Any] = [{"role": "user", "content": "fine"}, "not an item"]
    with pytest.raises(TypeError, match=r"items\[1\] must be a dict, not str"):
        asyncio.run(session.add_items(items))
    assert store.session("bad").get_history() == []


def test_branch_then_run_continues_the_branch(store: Sessions) -> None:
    session = ConvostoreSession("rerun", backing(store))
    asyncio.run(run_async(session))
    asyncio.run(session.branch_from(0))  # keep only the first user message
    model = ScriptedModel([[assistant_message("Paris is sunny.", item_id="msg_b")]])
    result = Runner.run_sync(agent_for(model), "Just Paris.", session=session)
    assert result.final_output == "Paris is sunny."
    assert model.calls[0].input == [
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "user", "content": "Just Paris."},
    ]
    assert len(asyncio.run(session.get_items())) == 3


def test_search_and_underlying_session(store: Sessions) -> None:
    session = ConvostoreSession("search", backing(store))
    asyncio.run(run_async(session))
    hits = asyncio.run(session.search("Rome"))
    assert sorted(h.role for h in hits) == ["assistant", "user"]
    assert session.session is backing(store).session("search")
    assert sync_handle(store, "search").get_token_estimate() > 0


def test_open_from_a_path_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    session = ConvostoreSession("u", str(path))
    asyncio.run(run_async(session))
    items = asyncio.run(session.get_items())
    session.close()
    again = ConvostoreSession("u", path)
    assert asyncio.run(again.get_items()) == items
    again.close()


def test_works_on_an_async_store(tmp_path: Path) -> None:
    from convostore.aio import AsyncSessions

    async def main() -> list[Any]:
        async with AsyncSessions.open(str(tmp_path / "a.db")) as store:
            session = ConvostoreSession("u", store)
            await run_async(session)
            assert session.session is store.session("u")
            return await session.get_items()

    ref_items = reference("async")[2]
    assert asyncio.run(main()) == ref_items


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.setitem(sys.modules, "agents.items", None)
    monkeypatch.delitem(sys.modules, "convostore.integrations.openai_agents")
    with pytest.raises(MissingDependency, match=r"pip install 'convostore\[openai-agents\]'"):
        importlib.import_module("convostore.integrations.openai_agents")


@pytest.mark.requires("reopen")
def test_branch_from_survives_a_restart(open_store: Any) -> None:
    """The branch chosen is stored: a new process (here: a new store and session object) reads
    it and adds the next turn under it, not under the newest message."""
    first: list[Any] = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                        {"role": "user", "content": "c"}]
    store = open_store()
    session = ConvostoreSession("restart", backing(store))
    asyncio.run(session.add_items(first))
    point = asyncio.run(session.branch_from(1))
    store.close()

    again = ConvostoreSession("restart", backing(open_store()))
    assert asyncio.run(again.get_items()) == first[:2]
    asyncio.run(again.add_items([{"role": "user", "content": "edited"}]))
    assert asyncio.run(again.get_items()) == first[:2] + [{"role": "user", "content": "edited"}]
    handle = open_store().session("restart")
    assert point is not None
    assert [m["parts"][0]["text"] for m in handle.get_branches(point)] == ["c", "edited"]

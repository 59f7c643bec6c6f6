"""ConvostoreSession keeps the Agents SDK's generic session behaviour, as the SDK's own session
tests check it on ``SQLiteSession``: reads with and without a limit, order across concurrent
tasks, pop, clear, isolation, ``Runner.run`` over several turns, settings, cancellation, close,
and the error types. On every backend, through both convostore APIs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import _storage
import pytest

from convostore import Sessions, StoreClosed
from convostore.cli import main as cli

pytest.importorskip("agents")

from agents import (  # noqa: E402
    Agent,
    Runner,
    SessionSettings,
    function_tool,
    set_tracing_disabled,  # noqa: E402
)
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from convostore.formats import to_openai_chat  # noqa: E402
from convostore.integrations import SessionClosed  # noqa: E402
from convostore.integrations.openai_agents import ConvostoreSession  # noqa: E402


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    set_tracing_disabled(True)
    yield


def backing(store: Any) -> Any:
    """What ConvostoreSession is given: the Sessions, or the AsyncSessions under the adapter."""
    return getattr(store, "_inner", store)


def user(text: str) -> Any:
    return {"role": "user", "content": text}


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


@function_tool
def get_weather(city: str) -> str:
    """Return the weather of a city."""
    return f"sunny in {city}"


# --- reads ------------------------------------------------------------------------------------


def test_get_items_with_and_without_limit(store: Sessions) -> None:
    session = ConvostoreSession("read", backing(store))
    items: list[Any] = [user(f"message {i}") for i in range(5)]
    run(session.add_items(items))
    assert run(session.get_items()) == items
    assert run(session.get_items(limit=2)) == items[-2:]  # newest two, oldest first
    assert run(session.get_items(limit=1)) == items[-1:]
    assert run(session.get_items(limit=10)) == items
    assert run(session.get_items(limit=0)) == []
    limited = ConvostoreSession("read", backing(store), session_settings={"limit": 3})
    assert run(limited.get_items()) == items[-3:]  # the settings' default
    assert run(limited.get_items(limit=4)) == items[-4:]  # an explicit limit wins
    assert run(ConvostoreSession("empty", backing(store)).get_items(limit=3)) == []


def test_add_items_keeps_call_order_across_concurrent_tasks(store: Sessions) -> None:
    session = ConvostoreSession("order", backing(store))

    async def main() -> list[Any]:
        tasks = [asyncio.create_task(session.add_items([user(f"{i}-a"), user(f"{i}-b")]))
                 for i in range(12)]
        await asyncio.gather(*tasks)
        return await session.get_items()

    expected = [user(f"{i}-{half}") for i in range(12) for half in "ab"]
    assert run(main()) == expected  # each call's items together, calls in the order made


def test_reads_wait_for_writes_made_before_them(store: Sessions) -> None:
    session = ConvostoreSession("rw", backing(store))

    async def main() -> tuple[list[Any], list[Any]]:
        write = asyncio.create_task(session.add_items([user("one")]))
        read = asyncio.create_task(session.get_items())
        second = asyncio.create_task(session.add_items([user("two")]))
        await asyncio.gather(write, second)
        return await read, await session.get_items()

    seen, final = run(main())
    assert seen == [user("one")]
    assert final == [user("one"), user("two")]


# --- pop, clear, isolation --------------------------------------------------------------------


def test_pop_item(store: Sessions) -> None:
    session = ConvostoreSession("pop", backing(store))
    assert run(session.pop_item()) is None
    items: list[Any] = [user("one"), {"type": "function_call", "call_id": "c1", "name": "f",
                           "arguments": "{}"}, user("three")]
    run(session.add_items(items))
    assert run(session.pop_item()) == items[2]
    assert run(session.get_items()) == items[:2]
    assert run(session.pop_item()) == items[1]
    assert run(session.pop_item()) == items[0]
    assert run(session.pop_item()) is None
    assert store.session("pop").get_history() == []


def test_clear_session(store: Sessions) -> None:
    session = ConvostoreSession("clear", backing(store))
    run(session.add_items([user("one"), user("two")]))
    run(session.clear_session())
    assert run(session.get_items()) == []
    run(session.add_items([user("again")]))
    assert run(session.get_items()) == [user("again")]


def test_sessions_are_isolated(store: Sessions) -> None:
    a = ConvostoreSession("a", backing(store))
    b = ConvostoreSession("b", backing(store))
    run(a.add_items([user("for a")]))
    run(b.add_items([user("for b"), user("more b")]))
    assert run(a.get_items()) == [user("for a")]
    assert run(b.get_items()) == [user("for b"), user("more b")]
    assert run(a.pop_item()) == user("for a")
    run(b.clear_session())
    assert run(a.get_items()) == []
    assert run(b.get_items()) == []
    run(a.add_items([user("a again")]))
    assert run(b.get_items()) == []


# --- Runner -----------------------------------------------------------------------------------


def test_runner_run_with_session_over_several_turns(store: Sessions) -> None:
    model = ScriptedModel([
        [function_call("get_weather", {"city": "Paris"}, call_id="call_1")],
        [assistant_message("Sunny in Paris.", item_id="msg_1")],
        [assistant_message("You asked about Paris.", item_id="msg_2")],
    ])
    agent = Agent(name="weather", model=model, tools=[get_weather])

    async def main() -> list[str]:
        async with ConvostoreSession("runner", backing(store)) as session:
            first = await Runner.run(agent, "Weather in Paris?", session=session)
            second = await Runner.run(agent, "What did I ask?", session=session)
            assert len(await session.get_items()) == 6
            return [first.final_output, second.final_output]

    assert run(main()) == ["Sunny in Paris.", "You asked about Paris."]
    # the second turn's model call saw the whole first turn, from the session
    assert [i.get("type", "message") for i in model.calls[2].input] == [
        "message", "function_call", "function_call_output", "message", "message"]


# --- settings ---------------------------------------------------------------------------------


def test_session_settings_are_checked_as_the_sdk_checks_them(store: Sessions) -> None:
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        ConvostoreSession("s", backing(store), session_settings={"limitt": 1})
    with pytest.raises(TypeError, match="must be a SessionSettings instance or a dict"):
        ConvostoreSession("s", backing(store), session_settings=3)  # type: ignore[arg-type]
    typed = ConvostoreSession("s", backing(store), session_settings=SessionSettings(limit=1))
    assert typed.session_settings == SessionSettings(limit=1)
    assert ConvostoreSession("s", backing(store)).session_settings == SessionSettings()
    run(typed.add_items([user("one"), user("two")]))
    assert run(typed.get_items()) == [user("two")]


# --- errors -----------------------------------------------------------------------------------


def test_an_item_json_cannot_hold_is_a_type_error(store: Sessions) -> None:
    session = ConvostoreSession("json", backing(store))
    for bad in ({"role": "user", "content": object()}, {"role": "user", "content": b"raw"}):
        with pytest.raises(TypeError, match=r"items\[1\] is not JSON serializable"):
            run(session.add_items([user("fine"), bad]))  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"items\[0\] must be a dict, not str"):
        run(session.add_items(["text"]))  # type: ignore[list-item]
    assert store.session("json").get_history() == []  # nothing written


def test_use_after_close_raises_a_runtime_error(store: Sessions) -> None:
    session = ConvostoreSession("closed", backing(store))
    run(session.add_items([user("one")]))
    session.close()
    session.close()  # idempotent
    for call in (session.get_items(), session.add_items([user("x")]), session.add_items([]),
                 session.pop_item(), session.clear_session(), session.search("one")):
        with pytest.raises(SessionClosed, match="ConvostoreSession is closed") as info:
            run(call)
        assert isinstance(info.value, RuntimeError)
        assert isinstance(info.value, StoreClosed)
    with pytest.raises(RuntimeError):
        session.session  # noqa: B018
    # a store given as an object stays open: another session of it works
    again = ConvostoreSession("closed", backing(store))
    assert run(again.get_items()) == [user("one")]


def test_context_managers_close(store: Sessions) -> None:
    with ConvostoreSession("cm", backing(store)) as session:
        run(session.add_items([user("one")]))
    with pytest.raises(RuntimeError):
        run(session.get_items())

    async def main() -> ConvostoreSession:
        async with ConvostoreSession("cm", backing(store)) as inner:
            assert await inner.get_items() == [user("one")]
        return inner

    closed = run(main())
    with pytest.raises(SessionClosed):
        run(closed.get_items())
    assert store.session("cm").get_history()[0]["role"] == "user"  # the store is open


# --- cancellation -----------------------------------------------------------------------------


def test_a_cancelled_add_items_is_not_overtaken(store: Sessions) -> None:
    """The write of a cancelled add_items waits behind another writer's transaction; the
    cancellation surfaces only once that write is stored, and the next call's items land
    after it (the SDK's SQLiteSession behaves so)."""
    session = ConvostoreSession("cancel", backing(store))
    held, release = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        with _storage.writing(store, "cancel"):
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    held.wait(60)

    async def main() -> list[Any]:
        first = asyncio.create_task(session.add_items([user("A")]))
        for _ in range(5):
            await asyncio.sleep(0)  # let it take its turn and start its write
        first.cancel()
        second = asyncio.create_task(session.add_items([user("B")]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not first.done()  # its write cannot have finished: the lock is held
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await first
        stored_when_cancelled = [m["parts"][0]["text"] for m in
                                 await asyncio.to_thread(store.session("cancel").get_history)]
        await second
        assert stored_when_cancelled in (["A"], ["A", "B"])
        return await session.get_items()

    try:
        assert run(main()) == [user("A"), user("B")]
    finally:
        release.set()
        holder.join()


def test_a_call_cancelled_before_its_turn_never_runs(store: Sessions) -> None:
    session = ConvostoreSession("queued", backing(store))

    async def main() -> list[Any]:
        first = asyncio.create_task(session.add_items([user("A")]))
        queued = asyncio.create_task(session.add_items([user("never")]))
        third = asyncio.create_task(session.add_items([user("C")]))
        await asyncio.sleep(0)  # all three started; the second waits for its turn
        queued.cancel()
        await first
        with pytest.raises(asyncio.CancelledError):
            await queued
        await third
        return await session.get_items()

    assert run(main()) == [user("A"), user("C")]


# --- tool outputs -----------------------------------------------------------------------------


def test_tool_outputs_are_paired_with_their_call(store: Sessions) -> None:
    session = ConvostoreSession("tools", backing(store))
    call: Any = {"type": "function_call", "call_id": "call_9", "name": "get_weather",
            "arguments": "{\"city\":\"Paris\"}"}
    output: Any = {"type": "function_call_output", "call_id": "call_9", "output": "sunny in Paris"}
    run(session.add_items([user("Weather?")]))
    run(session.add_items([call]))
    run(session.add_items([output]))  # alone: its call is found among the stored messages
    run(session.add_items([call | {"call_id": "call_10"}, output | {"call_id": "call_10"}]))
    assert run(session.get_items()) == [user("Weather?"), call, output,
                                        call | {"call_id": "call_10"},
                                        output | {"call_id": "call_10"}]
    stored = store.session("tools").get_history()
    for message in (stored[2], stored[4]):
        (part,) = [p for p in message["parts"] if p["type"] != "step-start"]
        assert part["toolName"] == "get_weather"
        assert part["input"] == {"city": "Paris"}
        assert part["output"] == "sunny in Paris"
        assert part["callProviderMetadata"]["convostore"]["callMessage"] == \
            stored[stored.index(message) - 1]["id"]
    # other formats render the output as the call's result, the call once
    assert to_openai_chat(stored) == [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_9", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_9", "content": "sunny in Paris"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_10", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_10", "content": "sunny in Paris"},
    ]


def test_show_prints_the_tool_of_an_output(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "tools.db")
    model = ScriptedModel([
        [function_call("get_weather", {"city": "Paris"}, call_id="call_1")],
        [assistant_message("Sunny.", item_id="msg_1")],
    ])
    agent = Agent(name="weather", model=model, tools=[get_weather])
    with ConvostoreSession("tools", path) as session:
        assert Runner.run_sync(agent, "Weather?", session=session).final_output == "Sunny."
    assert cli(["show", path, "tools"]) == 0
    lines = capsys.readouterr().out.splitlines()
    outputs = [line for line in lines if "output-available" in line]
    assert len(outputs) == 1
    assert 'tool get_weather output-available input {"city":"Paris"} output' in outputs[0]
    assert not any("tool unknown" in line for line in lines)

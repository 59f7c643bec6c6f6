"""``Sessions.open(..., search_tool_output=True)``: what tools returned becomes searchable.

Off by default (it grows the index). On, the index holds each tool part's ``output`` (its text,
or the strings and numbers of a JSON output) and ``errorText`` besides the text parts, for
messages written after the index exists and for those the backfill indexes; on every engine,
through both APIs, and for what every integration writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from convostore import Sessions


def tool_message(id: str, output: Any, *, state: str = "output-available") -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool-fetch_log", "toolCallId": f"call_{id}", "state": state,
                            "input": {"build": 42}}
    if state == "output-error":
        part["errorText"] = output
    else:
        part["output"] = output
    return {"id": id, "role": "assistant",
            "parts": [{"type": "text", "text": "Fetching the log."}, part]}


def fill(store: Sessions) -> None:
    session = store.session("tools")
    session.append_message(tool_message("m1", "compiler segfaulted in linker"))
    session.append_message(tool_message("m2", {"type": "syslog", "lines": [
        {"text": "flaky network timeout", "code": 504}], "ok": False}))
    session.append_message(tool_message("m3", "permission denied on artifact",
                                         state="output-error"))


def test_off_by_default(store: Sessions) -> None:
    fill(store)
    assert store.session("tools").search("segfaulted") == []
    assert store.search("timeout") == []
    assert sorted(h.id for h in store.search("Fetching")) == ["m1", "m2", "m3"]


def test_tool_outputs_are_found_when_asked_for(open_store: Callable[..., Sessions]) -> None:
    store = open_store(search_tool_output=True)
    store.build_search_index()  # the index exists: each write indexes what it writes
    fill(store)
    session = store.session("tools")
    assert [h.id for h in session.search("segfaulted")] == ["m1"]
    assert [h.id for h in store.search("flaky network timeout")] == ["m2"]
    assert [h.id for h in session.search("504")] == ["m2"]  # numbers of a JSON output
    assert [h.id for h in session.search("permission denied")] == ["m3"]  # an error's text
    assert session.search("syslog") == []  # a "type" value is structure, not content
    hit = session.search("segfaulted")[0]
    assert hit.content == "Fetching the log. compiler segfaulted in linker"


def test_the_backfill_indexes_tool_outputs_too(open_store: Callable[..., Sessions]) -> None:
    store = open_store(search_tool_output=True)
    fill(store)  # before any index exists
    assert [h.id for h in store.session("tools").search("segfaulted")] == ["m1"]
    assert [h.id for h in store.search("timeout")] == ["m2"]


def test_an_update_reindexes_the_output(open_store: Callable[..., Sessions]) -> None:
    store = open_store(search_tool_output=True)
    fill(store)
    session = store.session("tools")
    assert [h.id for h in session.search("segfaulted")] == ["m1"]
    session.update_message(tool_message("m1", "all green now"))
    assert session.search("segfaulted") == []
    assert [h.id for h in session.search("green")] == ["m1"]


def backing(store: Any) -> Any:
    return getattr(store, "_inner", store)


def test_every_integration_writes_searchable_tool_output(
    open_store: Callable[..., Sessions],
) -> None:
    pytest.importorskip("agents")
    pytest.importorskip("langchain_core")
    pytest.importorskip("pydantic_ai")
    from langchain_core.messages import AIMessage, ToolMessage
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    from convostore.integrations.langchain import ConvostoreChatMessageHistory
    from convostore.integrations.openai_agents import ConvostoreSession
    from convostore.integrations.pydantic_ai import save_messages

    store = open_store(search_tool_output=True)
    agents = ConvostoreSession("agents", backing(store))
    asyncio.run(agents.add_items([
        {"role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather",
         "arguments": "{\"city\":\"Oslo\"}"},
    ]))
    asyncio.run(agents.add_items([
        {"type": "function_call_output", "call_id": "c1", "output": "blizzard warning"}]))
    save_messages(store.session("pydantic"), [
        ModelRequest(parts=[UserPromptPart("weather?")]),
        ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Lima"}, tool_call_id="c2")]),
        ModelRequest(parts=[ToolReturnPart("get_weather", "drizzle expected",
                                           tool_call_id="c2")]),
    ])
    ConvostoreChatMessageHistory("langchain", backing(store)).add_messages([
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Rome"},
                                   "id": "c3"}]),
        ToolMessage("heatwave continues", tool_call_id="c3"),
    ])
    assert [h.session_id for h in store.search("blizzard")] == ["agents"]
    assert [h.session_id for h in store.search("drizzle")] == ["pydantic"]
    assert [h.session_id for h in store.search("heatwave")] == ["langchain"]
    assert [h.role for h in asyncio.run(agents.search("blizzard"))] == ["assistant"]

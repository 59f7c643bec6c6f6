"""convostore.formats: every format to UIMessages and back, exactly, through the store too.

Payloads follow the shapes of each SDK's types: ``openai.types.chat.ChatCompletion*Param``,
``openai.types.responses.ResponseInputItemParam`` (what ``Response.output[i].model_dump()``
gives), Anthropic's ``MessageParam`` content blocks and pydantic-ai's
``ModelMessagesTypeAdapter.dump_python(..., mode="json")``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from convostore import Sessions, formats
from convostore.formats import (
    RAW_PART_TYPE,
    from_anthropic,
    from_openai_chat,
    from_openai_responses,
    from_pydantic_ai,
    to_anthropic,
    to_anthropic_system,
    to_openai_chat,
    to_openai_responses,
    to_pydantic_ai,
)

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)
PDF = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK"
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="
ENCRYPTED = "gAAAAABoK3f1" + "x" * 200

# --- OpenAI Chat Completions -----------------------------------------------------------------

CHAT_SYSTEM = {"role": "system", "content": "You are terse."}
CHAT_DEVELOPER = {"role": "developer", "content": [{"type": "text", "text": "Use metric."}],
                  "name": "ops"}
CHAT_USER_TEXT = {"role": "user", "content": "What's the weather in Paris?"}
CHAT_USER_IMAGE = {"role": "user", "content": [
    {"type": "text", "text": "What is in this image?"},
    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "high"}},
]}
CHAT_USER_REMOTE_IMAGE = {"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
]}
CHAT_USER_AUDIO = {"role": "user", "content": [
    {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
]}
CHAT_USER_FILE = {"role": "user", "content": [
    {"type": "file", "file": {"filename": "report.pdf",
                              "file_data": f"data:application/pdf;base64,{PDF}"}},
    {"type": "file", "file": {"file_id": "file-abc123"}},
]}
CHAT_ASSISTANT_CALLS = {
    "role": "assistant",
    "content": None,
    "refusal": None,
    "tool_calls": [
        {"id": "call_Xy1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\n  \"city\": \"Paris\"\n}"}},
        {"id": "call_Xy2", "type": "function",
         "function": {"name": "get_time", "arguments": "{\"tz\":\"Europe/Paris\"}"}},
    ],
}
CHAT_TOOL_2 = {"role": "tool", "tool_call_id": "call_Xy2", "content": "12:00"}
CHAT_TOOL_1 = {"role": "tool", "tool_call_id": "call_Xy1",
               "content": [{"type": "text", "text": "15°C, cloudy"}]}
CHAT_ASSISTANT_TEXT = {"role": "assistant", "content": "15°C and cloudy at noon."}
CHAT_ASSISTANT_CUSTOM = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_c1", "type": "custom", "custom": {"name": "run_sql", "input": "SELECT 1"}},
]}
CHAT_TOOL_CUSTOM = {"role": "tool", "tool_call_id": "call_c1", "content": "1"}
CHAT_ASSISTANT_REFUSAL = {"role": "assistant", "content": [
    {"type": "refusal", "refusal": "I can't help with that."}], "name": "bot"}
CHAT_ORPHAN_TOOL = {"role": "tool", "tool_call_id": "call_gone", "content": "late result"}

CHAT_CASES: dict[str, list[dict[str, Any]]] = {
    "system": [CHAT_SYSTEM],
    "developer": [CHAT_DEVELOPER],
    "user text": [CHAT_USER_TEXT],
    "user image": [CHAT_USER_IMAGE],
    "user remote image": [CHAT_USER_REMOTE_IMAGE],
    "user audio": [CHAT_USER_AUDIO],
    "user file": [CHAT_USER_FILE],
    "tool calls and results": [CHAT_ASSISTANT_CALLS, CHAT_TOOL_2, CHAT_TOOL_1,
                               CHAT_ASSISTANT_TEXT],
    "custom tool": [CHAT_ASSISTANT_CUSTOM, CHAT_TOOL_CUSTOM],
    "refusal": [CHAT_ASSISTANT_REFUSAL],
    "orphan tool result": [CHAT_ORPHAN_TOOL],
}

# --- OpenAI Responses ------------------------------------------------------------------------

RESP_EASY_USER = {"role": "user", "content": "Weather in Paris and Rome?"}
RESP_USER_MESSAGE = {"type": "message", "role": "user", "content": [
    {"type": "input_text", "text": "Describe both."},
    {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
    {"type": "input_image", "file_id": "file-img1", "detail": "low"},
    {"type": "input_file", "filename": "a.pdf", "file_data": f"data:application/pdf;base64,{PDF}"},
    {"type": "input_file", "file_url": "https://example.com/b.pdf"},
]}
RESP_DEVELOPER = {"type": "message", "role": "developer",
                  "content": [{"type": "input_text", "text": "Answer in French."}]}
RESP_REASONING = {
    "id": "rs_68a1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "**Checking weather**\n\nNeed two calls."}],
    "encrypted_content": ENCRYPTED,
}
RESP_CALL_1 = {"arguments": "{\"city\":\"Paris\"}", "call_id": "call_P", "name": "get_weather",
               "type": "function_call", "id": "fc_68a2", "status": "completed"}
RESP_CALL_2 = {"arguments": "{\"city\": \"Rome\"}", "call_id": "call_R", "name": "get_weather",
               "type": "function_call", "id": "fc_68a3", "status": "completed"}
RESP_OUT_1 = {"call_id": "call_P", "output": "18°C", "type": "function_call_output"}
RESP_OUT_2 = {"call_id": "call_R", "output": [{"type": "input_text", "text": "24°C"}],
              "type": "function_call_output"}
RESP_ASSISTANT = {
    "id": "msg_68a4",
    "content": [{"annotations": [], "text": "Paris 18°C, Rome 24°C.", "type": "output_text",
                 "logprobs": []}],
    "role": "assistant",
    "status": "completed",
    "type": "message",
    "phase": "final_answer",
}
RESP_COMPACTION = {"type": "compaction", "id": "cmp_01", "encrypted_content": ENCRYPTED}
RESP_WEB_SEARCH = {"id": "ws_1", "status": "completed", "type": "web_search_call",
                   "action": {"type": "search", "query": "paris weather"}}
RESP_CUSTOM_CALL = {"type": "custom_tool_call", "call_id": "call_C", "name": "apply_patch",
                    "input": "*** Begin Patch", "id": "ctc_1"}
RESP_CUSTOM_OUT = {"type": "custom_tool_call_output", "call_id": "call_C", "output": "ok"}
RESP_ORPHAN_OUT = {"type": "function_call_output", "call_id": "call_zz", "output": "x"}
RESP_REFUSAL = {"id": "msg_r", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "refusal", "refusal": "No."}]}

RESPONSES_CASES: dict[str, list[dict[str, Any]]] = {
    "easy user message": [RESP_EASY_USER],
    "user message with media": [RESP_USER_MESSAGE],
    "developer message": [RESP_DEVELOPER],
    "reasoning with encrypted content": [RESP_REASONING],
    "function calls and outputs": [RESP_REASONING, RESP_CALL_1, RESP_CALL_2, RESP_OUT_1,
                                   RESP_OUT_2, RESP_ASSISTANT],
    "assistant output message": [RESP_ASSISTANT],
    "compaction item": [RESP_COMPACTION],
    "web search call": [RESP_WEB_SEARCH],
    "custom tool call": [RESP_CUSTOM_CALL, RESP_CUSTOM_OUT],
    "orphan output": [RESP_ORPHAN_OUT],
    "refusal": [RESP_REFUSAL],
}

# --- Anthropic Messages ----------------------------------------------------------------------

ANT_USER_TEXT = {"role": "user", "content": "Weather in Paris?"}
ANT_USER_MEDIA = {"role": "user", "content": [
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                    "data": PDF}, "title": "report.pdf",
     "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "Compare these."},
]}
ANT_ASSISTANT_TOOL = {"role": "assistant", "content": [
    {"type": "thinking", "thinking": "I should call get_weather.",
     "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlx"},
    {"type": "text", "text": "Let me check."},
    {"type": "tool_use", "id": "toolu_01A", "name": "get_weather",
     "input": {"city": "Paris", "unit": "celsius"}},
    {"type": "tool_use", "id": "toolu_01B", "name": "get_time", "input": {}},
]}
ANT_RESULTS = {"role": "user", "content": [
    {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "15°C"},
    {"type": "tool_result", "tool_use_id": "toolu_01B", "is_error": True,
     "content": [{"type": "text", "text": "clock unavailable"}]},
]}
ANT_ASSISTANT_TEXT = {"role": "assistant", "content": [
    {"type": "text", "text": "It is 15°C.", "citations": None}]}
ANT_SERVER_TOOL = {"role": "assistant", "content": [
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
     "input": {"query": "paris"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
]}
ANT_ORPHAN_RESULT = {"role": "user", "content": [
    {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "late"}]}

ANTHROPIC_CASES: dict[str, list[dict[str, Any]]] = {
    "user text": [ANT_USER_TEXT],
    "user media": [ANT_USER_MEDIA],
    "thinking, tool use and results": [ANT_USER_TEXT, ANT_ASSISTANT_TOOL, ANT_RESULTS,
                                       ANT_ASSISTANT_TEXT],
    "server tool blocks": [ANT_SERVER_TOOL],
    "orphan result": [ANT_ORPHAN_RESULT],
}

# --- pydantic-ai -----------------------------------------------------------------------------

TS = "2026-01-02T03:04:05.123456Z"
PAI_REQUEST = {
    "parts": [
        {"content": "Be brief.", "timestamp": TS, "dynamic_ref": None, "context_id": None,
         "scope": "conversation", "metadata": None, "part_kind": "system-prompt"},
        {"content": "Weather in Paris?", "timestamp": TS, "part_kind": "user-prompt"},
    ],
    "timestamp": TS, "instructions": None, "kind": "request", "run_id": "run-1",
    "conversation_id": "conv-1", "metadata": None, "state": "complete",
}
PAI_MEDIA_REQUEST = {
    "parts": [{"content": [
        "look",
        {"data": PNG, "media_type": "image/png", "vendor_metadata": None, "kind": "binary",
         "identifier": "8181b0"},
        {"url": "https://x.example/y.png", "force_download": False, "vendor_metadata": None,
         "kind": "image-url", "media_type": "image/png", "identifier": "cd2bea"},
    ], "timestamp": TS, "part_kind": "user-prompt"}],
    "timestamp": None, "instructions": "be brief", "kind": "request", "run_id": None,
    "conversation_id": None, "metadata": None, "state": "complete",
}
USAGE = {"input_tokens": 53, "cache_write_tokens": 0, "cache_read_tokens": 0,
         "output_tokens": 5, "details": {}}
PAI_RESPONSE_CALL = {
    "parts": [
        {"content": "Need the weather.", "id": "rs_1", "signature": "c2lnbmF0dXJl",
         "provider_name": "openai", "provider_details": None, "part_kind": "thinking"},
        {"tool_name": "get_weather", "args": {"city": "Paris"}, "tool_call_id": "call_1",
         "tool_kind": None, "id": None, "provider_name": None, "provider_details": None,
         "part_kind": "tool-call"},
        {"tool_name": "get_time", "args": "{\"tz\": \"CET\"}", "tool_call_id": "call_2",
         "tool_kind": None, "id": None, "provider_name": None, "provider_details": None,
         "part_kind": "tool-call"},
    ],
    "usage": USAGE, "model_name": "gpt-5", "timestamp": TS, "kind": "response",
    "provider_name": "openai", "provider_details": None, "provider_response_id": "resp_1",
    "finish_reason": "tool_call", "run_id": "run-1", "metadata": None, "state": "complete",
}
PAI_RETURNS = {
    "parts": [
        {"tool_name": "get_weather", "content": {"temp": 15, "unit": "C"},
         "tool_call_id": "call_1", "tool_kind": None, "metadata": None, "timestamp": TS,
         "outcome": "success", "retry": None, "part_kind": "tool-return"},
        {"content": [{"type": "value_error", "loc": ["tz"], "msg": "bad tz"}],
         "tool_name": "get_time", "tool_call_id": "call_2", "timestamp": TS,
         "part_kind": "retry-prompt"},
    ],
    "timestamp": TS, "instructions": None, "kind": "request", "run_id": "run-1",
    "metadata": None, "state": "complete",
}
PAI_RESPONSE_TEXT = {
    "parts": [{"content": "15°C.", "id": None, "provider_name": None, "provider_details": None,
               "citations": None, "part_kind": "text"}],
    "usage": USAGE, "model_name": "gpt-5", "timestamp": TS, "kind": "response",
    "provider_name": "openai", "finish_reason": "stop", "run_id": "run-1", "metadata": None,
    "state": "complete",
}
PAI_SYSTEM_ONLY = {"parts": [{"content": "sys", "timestamp": TS, "part_kind": "system-prompt"}],
                   "kind": "request", "instructions": None}

PYDANTIC_CASES: dict[str, list[dict[str, Any]]] = {
    "system and user prompt": [PAI_REQUEST],
    "system only": [PAI_SYSTEM_ONLY],
    "media user prompt": [PAI_MEDIA_REQUEST],
    "thinking, calls, returns and retry": [PAI_REQUEST, PAI_RESPONSE_CALL, PAI_RETURNS,
                                           PAI_RESPONSE_TEXT],
    "orphan return": [PAI_RETURNS],
}

Converter = tuple[Callable[[Any], list[dict[str, Any]]], Callable[[Any], list[dict[str, Any]]]]
CONVERTERS: dict[str, Converter] = {
    "openai-chat": (from_openai_chat, to_openai_chat),
    "openai-responses": (from_openai_responses, to_openai_responses),
    "anthropic": (from_anthropic, to_anthropic),
    "pydantic-ai": (from_pydantic_ai, to_pydantic_ai),
}
ALL_CASES = [
    pytest.param(fmt, payload, id=f"{fmt}: {name}")
    for fmt, cases in (("openai-chat", CHAT_CASES), ("openai-responses", RESPONSES_CASES),
                       ("anthropic", ANTHROPIC_CASES), ("pydantic-ai", PYDANTIC_CASES))
    for name, payload in cases.items()
]


def by_type(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == kind]


# --- exact round trips -----------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "payload"), ALL_CASES)
def test_round_trip_is_exact(fmt: str, payload: list[dict[str, Any]]) -> None:
    original = copy.deepcopy(payload)
    from_fmt, to_fmt = CONVERTERS[fmt]
    ui = from_fmt(payload)
    assert to_fmt(ui) == original
    assert payload == original  # the input is not changed
    json.dumps(ui, allow_nan=False)  # UIMessages are plain JSON


@pytest.mark.parametrize(("fmt", "payload"), ALL_CASES)
def test_round_trip_through_the_store_is_exact(
    store: Sessions, fmt: str, payload: list[dict[str, Any]]
) -> None:
    from_fmt, to_fmt = CONVERTERS[fmt]
    session = store.session("formats")
    for message in from_fmt(payload):
        session.append_message(message)
    assert to_fmt(session.get_history()) == payload


def test_anthropic_system_round_trip() -> None:
    system = [{"type": "text", "text": "You are a weather bot.",
               "cache_control": {"type": "ephemeral"}}]
    ui = from_anthropic([ANT_USER_TEXT], system=system)
    assert ui[0]["role"] == "system"
    assert ui[0]["parts"] == [{"type": "text", "text": "You are a weather bot."}]
    assert to_anthropic(ui) == [ANT_USER_TEXT]
    assert to_anthropic_system(ui) == system
    ui = from_anthropic([ANT_USER_TEXT], system="plain")
    assert to_anthropic_system(ui) == "plain"
    assert to_anthropic_system(from_anthropic([ANT_USER_TEXT])) is None


def test_whole_conversations_round_trip_in_one_call() -> None:
    chat: list[dict[str, Any]] = [
        CHAT_SYSTEM, CHAT_DEVELOPER, CHAT_USER_IMAGE, CHAT_ASSISTANT_CALLS, CHAT_TOOL_2,
        CHAT_TOOL_1, CHAT_ASSISTANT_TEXT, CHAT_USER_TEXT, CHAT_ASSISTANT_REFUSAL]
    assert to_openai_chat(from_openai_chat(chat)) == chat
    items: list[dict[str, Any]] = [
        RESP_DEVELOPER, RESP_EASY_USER, RESP_REASONING, RESP_CALL_1, RESP_CALL_2, RESP_OUT_1,
        RESP_OUT_2, RESP_ASSISTANT, RESP_COMPACTION, RESP_USER_MESSAGE, RESP_WEB_SEARCH,
        RESP_ASSISTANT]
    assert to_openai_responses(from_openai_responses(items)) == items
    ant: list[dict[str, Any]] = [
        ANT_USER_MEDIA, ANT_ASSISTANT_TOOL, ANT_RESULTS, ANT_ASSISTANT_TEXT, ANT_USER_TEXT,
        ANT_SERVER_TOOL]
    assert to_anthropic(from_anthropic(ant)) == ant
    pai: list[dict[str, Any]] = [
        PAI_REQUEST, PAI_RESPONSE_CALL, PAI_RETURNS, PAI_RESPONSE_TEXT, PAI_MEDIA_REQUEST]
    assert to_pydantic_ai(from_pydantic_ai(pai)) == pai


# --- what the UIMessages hold ----------------------------------------------------------------


def test_chat_tool_calls_pair_with_results_by_call_id() -> None:
    ui = from_openai_chat([CHAT_USER_TEXT, CHAT_ASSISTANT_CALLS, CHAT_TOOL_2, CHAT_TOOL_1,
                           CHAT_ASSISTANT_TEXT])
    assert [m["role"] for m in ui] == ["user", "assistant"]
    turn = ui[1]
    assert [p["type"] for p in turn["parts"]] == [
        "step-start", "tool-get_weather", "tool-get_time", "step-start", "text"]
    weather, clock = turn["parts"][1], turn["parts"][2]
    assert weather["toolCallId"] == "call_Xy1"
    assert weather["state"] == "output-available"
    assert weather["input"] == {"city": "Paris"}
    assert weather["output"] == [{"type": "text", "text": "15°C, cloudy"}]
    # the original argument text is kept because re-serialising would not give it back
    assert weather["callProviderMetadata"] == {
        "convostore": {"arguments": "{\n  \"city\": \"Paris\"\n}"}}
    assert clock["output"] == "12:00"
    assert "callProviderMetadata" not in clock  # compact JSON: input gives it back
    assert turn["parts"][4] == {"type": "text", "text": "15°C and cloudy at noon."}


def test_a_typed_tool_part_is_named_by_its_type_as_the_ai_sdk_does() -> None:
    part = {"type": "tool-get_weather", "toolCallId": "c1", "toolName": "other",
            "state": "input-available", "input": {"city": "Paris"}}
    chat = to_openai_chat([{"id": "a", "role": "assistant", "parts": [part]}])
    assert chat[0]["tool_calls"][0]["function"]["name"] == "get_weather"
    dynamic = {**part, "type": "dynamic-tool", "toolName": "lookup"}
    chat = to_openai_chat([{"id": "a", "role": "assistant", "parts": [dynamic]}])
    assert chat[0]["tool_calls"][0]["function"]["name"] == "lookup"


def test_responses_pairing_and_reasoning_kept_verbatim() -> None:
    ui = from_openai_responses([RESP_EASY_USER, RESP_REASONING, RESP_CALL_1, RESP_CALL_2,
                                RESP_OUT_1, RESP_OUT_2, RESP_ASSISTANT])
    assert [m["role"] for m in ui] == ["user", "assistant"]
    parts = ui[1]["parts"]
    assert [p["type"] for p in parts] == [
        "step-start", "reasoning", "tool-get_weather", "tool-get_weather", "step-start", "text"]
    assert parts[1]["text"] == "**Checking weather**\n\nNeed two calls."
    assert parts[1]["providerMetadata"] == {"convostore": {
        "provider": "openai", "format": "openai-responses", "item": RESP_REASONING}}
    assert (parts[2]["toolCallId"], parts[2]["output"]) == ("call_P", "18°C")
    assert (parts[3]["toolCallId"], parts[3]["input"]) == ("call_R", {"city": "Rome"})
    assert parts[3]["output"] == [{"type": "input_text", "text": "24°C"}]


def test_anthropic_thinking_signature_and_error_results() -> None:
    ui = from_anthropic([ANT_ASSISTANT_TOOL, ANT_RESULTS])
    assert len(ui) == 1
    reasoning = by_type(ui[0], "reasoning")
    assert [r["text"] for r in reasoning] == ["I should call get_weather.", ""]
    assert reasoning[0]["providerMetadata"]["convostore"]["item"] == ANT_ASSISTANT_TOOL[
        "content"][0]
    assert reasoning[1]["providerMetadata"]["convostore"]["provider"] == "anthropic"
    clock = by_type(ui[0], "tool-get_time")[0]
    assert clock["state"] == "output-error"
    assert clock["errorText"] == '[{"type":"text","text":"clock unavailable"}]'


def test_compaction_and_unknown_items_become_raw_parts() -> None:
    ui = from_openai_responses([RESP_COMPACTION, RESP_WEB_SEARCH])
    assert ui[0]["parts"] == [{"type": RAW_PART_TYPE, "data": {
        "provider": "openai", "format": "openai-responses", "value": RESP_COMPACTION}}]
    assert by_type(ui[1], RAW_PART_TYPE)[0]["data"]["value"] == RESP_WEB_SEARCH


def test_media_become_file_parts_with_data_urls() -> None:
    ui = from_openai_chat([CHAT_USER_IMAGE, CHAT_USER_AUDIO, CHAT_USER_FILE])
    assert by_type(ui[0], "file") == [
        {"type": "file", "mediaType": "image/png", "url": f"data:image/png;base64,{PNG}"}]
    assert by_type(ui[1], "file") == [
        {"type": "file", "mediaType": "audio/wav", "url": f"data:audio/wav;base64,{WAV}"}]
    assert by_type(ui[2], "file") == [{"type": "file", "mediaType": "application/pdf",
                                       "filename": "report.pdf",
                                       "url": f"data:application/pdf;base64,{PDF}"}]
    ant = from_anthropic([ANT_USER_MEDIA])
    assert [p.get("mediaType") for p in by_type(ant[0], "file")] == [
        "image/png", "image/jpeg", "application/pdf"]
    assert by_type(ant[0], "file")[1]["url"] == "https://example.com/cat.jpg"


def test_media_leave_the_row_as_attachments(store: Sessions) -> None:
    session = store.session("media")
    sources: list[tuple[Any, Any, list[dict[str, Any]]]] = [
        (from_openai_chat, to_openai_chat, [CHAT_USER_IMAGE]),
        (from_openai_responses, to_openai_responses, [RESP_USER_MESSAGE]),
        (from_anthropic, to_anthropic, [ANT_USER_MEDIA]),
        (from_pydantic_ai, to_pydantic_ai, [PAI_MEDIA_REQUEST]),
    ]
    for from_fmt, to_fmt, payload in sources:
        for message in from_fmt(payload):
            session.append_message(message)
            stored = session.get_message(message["id"])
            assert stored == message
            assert to_fmt([stored]) == payload
    stats = store.storage_stats()
    assert stats.attachments == 2  # the PNG and the PDF, each stored once for all four
    assert stats.content_bytes < 6000  # the rows hold pointers, not the base64


def test_opaque_payloads_survive_the_sanitiser(store: Sessions) -> None:
    session = store.session("opaque")
    for message in from_openai_responses([RESP_REASONING, RESP_COMPACTION]):
        session.append_message(message)  # source="server": the sanitiser runs
    assert to_openai_responses(session.get_history()) == [RESP_REASONING, RESP_COMPACTION]
    assert ENCRYPTED in json.dumps(session.get_history())


def test_text_is_searchable(store: Sessions) -> None:
    session = store.session("search")
    for message in from_anthropic([ANT_USER_TEXT, ANT_ASSISTANT_TOOL, ANT_RESULTS,
                                   ANT_ASSISTANT_TEXT]):
        session.append_message(message)
    hits = session.search("Let me check")
    assert len(hits) == 1
    assert hits[0].role == "assistant"


# --- rendering for another format ------------------------------------------------------------


def test_reasoning_is_dropped_for_another_provider() -> None:
    ui = from_openai_responses([RESP_EASY_USER, RESP_REASONING, RESP_ASSISTANT])
    assert to_anthropic(ui) == [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Paris 18°C, Rome 24°C."}]},
    ]
    assert to_openai_chat(ui) == [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "Paris 18°C, Rome 24°C."},
    ]
    ui = from_anthropic([ANT_ASSISTANT_TOOL])
    rendered = to_openai_responses(ui)
    assert [i.get("type") for i in rendered] == [None, "function_call", "function_call"]
    assert rendered[0] == {"role": "assistant", "content": "Let me check."}
    assert rendered[1] == {"type": "function_call", "call_id": "toolu_01A", "name": "get_weather",
                           "arguments": "{\"city\":\"Paris\",\"unit\":\"celsius\"}"}


def test_raw_items_are_dropped_for_another_format() -> None:
    ui = from_openai_responses([RESP_COMPACTION, RESP_EASY_USER])
    assert to_openai_chat(ui) == [{"role": "user", "content": "Weather in Paris and Rome?"}]
    assert to_pydantic_ai(from_anthropic([ANT_SERVER_TOOL])) == []


def test_chat_to_anthropic_puts_results_in_a_user_message() -> None:
    ui = from_openai_chat([CHAT_USER_TEXT, CHAT_ASSISTANT_CALLS, CHAT_TOOL_2, CHAT_TOOL_1,
                           CHAT_ASSISTANT_TEXT])
    assert to_anthropic(ui) == [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_Xy1", "name": "get_weather",
             "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "call_Xy2", "name": "get_time",
             "input": {"tz": "Europe/Paris"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_Xy1",
             "content": [{"type": "text", "text": "15°C, cloudy"}]},
            {"type": "tool_result", "tool_use_id": "call_Xy2", "content": "12:00"},
        ]},
        {"role": "assistant", "content": [{"type": "text", "text": "15°C and cloudy at noon."}]},
    ]


def test_pydantic_ai_thinking_renders_for_its_own_format_only() -> None:
    ui = from_pydantic_ai([PAI_RESPONSE_CALL])
    assert to_openai_chat(ui)[0]["content"] is None  # thinking dropped
    assert to_pydantic_ai(ui) == [PAI_RESPONSE_CALL]


# --- UIMessages from elsewhere, and edited ones ----------------------------------------------

NATIVE: list[dict[str, Any]] = [
    {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be terse."}]},
    {"id": "u", "role": "user", "parts": [
        {"type": "text", "text": "What is this?"},
        {"type": "file", "mediaType": "image/png", "url": f"data:image/png;base64,{PNG}"},
    ]},
    {"id": "a", "role": "assistant", "parts": [
        {"type": "step-start"},
        {"type": "reasoning", "text": "Let me look."},
        {"type": "tool-lookup", "toolCallId": "t1", "state": "output-available",
         "input": {"q": "pixel"}, "output": {"kind": "png"}},
        {"type": "step-start"},
        {"type": "text", "text": "A 1x1 PNG."},
    ]},
]


def test_native_ui_messages_render_to_openai_chat() -> None:
    assert to_openai_chat(NATIVE) == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t1", "type": "function",
             "function": {"name": "lookup", "arguments": "{\"q\":\"pixel\"}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "{\"kind\":\"png\"}"},
        {"role": "assistant", "content": "A 1x1 PNG."},
    ]


def test_native_ui_messages_render_to_openai_responses() -> None:
    assert to_openai_responses(NATIVE) == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}",
             "detail": "auto"},
        ]},
        {"type": "function_call", "call_id": "t1", "name": "lookup",
         "arguments": "{\"q\":\"pixel\"}"},
        {"type": "function_call_output", "call_id": "t1", "output": "{\"kind\":\"png\"}"},
        {"role": "assistant", "content": "A 1x1 PNG."},
    ]


def test_native_ui_messages_render_to_anthropic() -> None:
    assert to_anthropic_system(NATIVE) == "Be terse."
    assert to_anthropic(NATIVE) == [
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PNG}},
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": "pixel"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "{\"kind\":\"png\"}"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A 1x1 PNG."}]},
    ]


def test_native_ui_messages_render_to_pydantic_ai() -> None:
    assert to_pydantic_ai(NATIVE) == [
        {"kind": "request", "parts": [{"part_kind": "system-prompt", "content": "Be terse."}]},
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": [
            "What is this?", {"kind": "binary", "data": PNG, "media_type": "image/png"}]}]},
        {"kind": "response", "parts": [
            {"part_kind": "thinking", "content": "Let me look."},
            {"part_kind": "tool-call", "tool_name": "lookup", "args": {"q": "pixel"},
             "tool_call_id": "t1"}]},
        {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "lookup",
                                       "content": {"kind": "png"}, "tool_call_id": "t1"}]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "A 1x1 PNG."}]},
    ]


def test_an_edited_part_shows_in_the_exact_rendering() -> None:
    ui = from_openai_chat([CHAT_USER_IMAGE])
    ui[0]["parts"][0]["text"] = "What is in this picture?"
    assert to_openai_chat(ui) == [{"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"},
        CHAT_USER_IMAGE["content"][1],  # detail "high" kept
    ]}]


def test_an_added_part_falls_back_to_rendering_from_parts() -> None:
    ui = from_openai_chat([CHAT_USER_IMAGE])
    ui[0]["parts"].append({"type": "text", "text": "Also: hi."})
    assert to_openai_chat(ui) == [{"role": "user", "content": [
        {"type": "text", "text": "What is in this image?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "text", "text": "Also: hi."},
    ]}]


def test_bad_input_is_rejected() -> None:
    with pytest.raises(TypeError, match="messages must be a list"):
        from_openai_chat("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"items\[1\] must be a dict"):
        from_openai_responses([RESP_EASY_USER, "x"])  # type: ignore[list-item]


def test_public_names() -> None:
    assert sorted(formats.__all__) == formats.__all__
    for name in formats.__all__:
        obj = getattr(formats, name)
        if callable(obj):
            assert obj.__doc__, f"{name} has no docstring"
    for fmt in formats.FORMATS:  # each format name has its pair of converters
        suffix = fmt.replace("-", "_")
        assert {f"from_{suffix}", f"to_{suffix}"} <= set(formats.__all__), fmt


def test_importing_convostore_imports_no_framework() -> None:
    import subprocess
    import sys

    code = (
        "import sys, convostore, convostore.formats, convostore.integrations, convostore.aio\n"
        "print([m for m in ('agents', 'openai', 'langchain_core', 'pydantic_ai', 'anthropic')"
        " if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"

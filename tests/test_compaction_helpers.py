"""Pure compaction helpers, and the reference compact function's cases."""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from convostore.compaction import (
    COMPACTION_PREFIX,
    STUB_RESULT_NOTE,
    CompactFunction,
    align_boundary_backward,
    align_boundary_forward,
    build_summary_prompt,
    coerce_compact_result,
    compute_summary_budget,
    create_compact_function,
    find_tail_cut_by_tokens,
    get_tool_call_ids,
    has_tool_calls,
    is_compaction_message,
    is_tool_part,
    is_tool_result_for,
    sanitize_tool_pairs,
    truncate_older_messages,
)
from convostore.model import CompactResult
from convostore.tokens import estimate_message_tokens

Message = dict[str, Any]


def text(id: str, body: str, role: str = "user") -> Message:
    return {"id": id, "role": role, "parts": [{"type": "text", "text": body}]}


def turns(n: int) -> list[Message]:
    """m0..m{n-1} with text "turn N", alternating user/assistant."""
    return [text(f"m{i}", f"turn {i}", "user" if i % 2 == 0 else "assistant") for i in range(n)]


def call(id: str, *call_ids: str, tool: str = "search") -> Message:
    """An assistant message whose tool parts are calls still waiting for their result."""
    parts = [
        {"type": f"tool-{tool}", "toolCallId": c, "state": "input-available", "input": {"q": c}}
        for c in call_ids
    ]
    return {"id": id, "role": "assistant", "parts": parts}


def result(id: str, call_id: str, role: str = "tool") -> Message:
    """A message carrying the result of a call made in an earlier message."""
    part = {"type": "tool-search", "toolCallId": call_id, "state": "output-available"}
    return {"id": id, "role": role, "parts": [{**part, "output": f"result of {call_id}"}]}


def overlay(summary: str, id: str = "c1") -> Message:
    return text(COMPACTION_PREFIX + id, summary, "assistant")


class Recorder:
    """A summarize callable that records its prompts and returns a fixed answer."""

    def __init__(self, answer: object = "SUMMARY") -> None:
        self.answer = answer
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> Any:
        self.prompts.append(prompt)
        return self.answer


# ── compaction messages and tool parts ──────────────────────────────────────────────────────


def test_compaction_messages() -> None:
    assert COMPACTION_PREFIX == "compaction_"
    assert is_compaction_message(overlay("s"))
    assert not is_compaction_message(text("m1", "x"))
    assert not is_compaction_message(text("compaction", "x"))
    assert not is_compaction_message({"role": "user", "parts": []})


def test_tool_part_detection() -> None:
    assert is_tool_part({"type": "tool-search"})
    assert is_tool_part({"type": "dynamic-tool", "toolName": "x"})
    assert not is_tool_part({"type": "tool"})
    assert not is_tool_part({"type": "text", "text": "tool-x"})
    assert not is_tool_part({"type": 5})
    assert not is_tool_part("tool-search")
    assert not is_tool_part(None)


def test_tool_call_helpers() -> None:
    calling = call("a", "c1", "c2")
    assert has_tool_calls(calling)
    assert not has_tool_calls(text("u", "hi"))
    assert not has_tool_calls({"id": "x", "role": "user"})
    assert get_tool_call_ids(calling) == {"c1", "c2"}
    no_id = {"id": "a", "role": "assistant", "parts": [{"type": "tool-x", "input": {}}]}
    assert has_tool_calls(no_id)
    assert get_tool_call_ids(no_id) == set()
    assert is_tool_result_for(result("r", "c1"), {"c1"})
    assert is_tool_result_for(result("r", "c1"), ["c9", "c1"])
    assert not is_tool_result_for(result("r", "c1"), {"c2"})
    assert not is_tool_result_for(text("u", "c1"), {"c1"})


# ── boundary alignment with split calls and results ─────────────────────────────────────────


def split_history() -> list[Message]:
    # 0 u, 1 u, 2 call(c1, c2), 3 result c1, 4 result c2, 5 u, 6 a, 7 u
    return [
        text("m0", "hi"),
        text("m1", "more"),
        call("m2", "c1", "c2"),
        result("m3", "c1"),
        result("m4", "c2"),
        text("m5", "thanks"),
        text("m6", "ok", "assistant"),
        text("m7", "bye"),
    ]


def test_align_forward_skips_the_results_of_a_preceding_call() -> None:
    messages = split_history()
    assert align_boundary_forward(messages, 3) == 5
    assert align_boundary_forward(messages, 4) == 4  # m3 is not a calling assistant
    assert align_boundary_forward(messages, 2) == 2
    assert align_boundary_forward(messages, 5) == 5
    assert align_boundary_forward(messages, 0) == 0
    assert align_boundary_forward(messages, 8) == 8
    assert align_boundary_forward(messages, 12) == 12
    assert align_boundary_forward(messages, -1) == -1


def test_align_forward_needs_an_assistant_caller() -> None:
    messages = split_history()
    messages[2] = {**messages[2], "role": "user"}
    assert align_boundary_forward(messages, 3) == 3


def test_align_forward_stops_at_the_end() -> None:
    messages = [text("m0", "x"), call("m1", "c1"), result("m2", "c1")]
    assert align_boundary_forward(messages, 2) == 3


def test_align_backward_keeps_a_call_with_its_result() -> None:
    messages = split_history()
    assert align_boundary_backward(messages, 3) == 2
    # Only the message right after the call is recognised (as in the reference).
    assert align_boundary_backward(messages, 4) == 4
    assert align_boundary_backward(messages, 2) == 2  # a calling assistant stays in the tail
    assert align_boundary_backward(messages, 5) == 5
    assert align_boundary_backward(messages, 0) == 0
    assert align_boundary_backward(messages, 8) == 8


def test_align_backward_walks_a_chain_of_calls() -> None:
    # call c1, result c1 that is itself an assistant calling c2... stops at a calling assistant.
    chained = {
        "id": "m2",
        "role": "user",
        "parts": [{"type": "tool-search", "toolCallId": "c1", "output": "r"}],
    }
    messages = [text("m0", "x"), call("m1", "c1"), chained, text("m3", "y")]
    assert align_boundary_backward(messages, 2) == 1


# ── tail cut ────────────────────────────────────────────────────────────────────────────────


def test_tail_cut_by_tokens() -> None:
    messages = turns(12)  # each message: 4 + ceil(max(6/4, 2 * 1.3)) = 7 tokens
    assert estimate_message_tokens(messages[:1]) == 7
    assert find_tail_cut_by_tokens(messages, 3, 1) == 10  # min tail of 2
    assert find_tail_cut_by_tokens(messages, 3, 20) == 10  # 14 fits, 21 does not
    assert find_tail_cut_by_tokens(messages, 3, 21) == 9
    assert find_tail_cut_by_tokens(messages, 3, 35) == 7
    assert find_tail_cut_by_tokens(messages, 3, 10**9) == 3
    assert find_tail_cut_by_tokens(messages, 3) == 3  # default budget 20,000
    assert find_tail_cut_by_tokens(messages, 3, 1, min_tail=5) == 7
    assert find_tail_cut_by_tokens(messages, 3, 1, min_tail=1) == 11


def test_tail_cut_when_the_minimum_tail_would_reach_into_the_head() -> None:
    messages = turns(5)
    # min cut 3 < head end 4: the token cut (the newest message) is used.
    assert find_tail_cut_by_tokens(messages, 4, 1) == 4
    assert find_tail_cut_by_tokens(messages, 5, 1) == 5  # nothing to walk


def test_tail_cut_is_aligned_backward() -> None:
    messages = [*turns(7), call("m7", "c1"), result("m8", "c1"), text("m9", "done")]
    # token cut 9, min cut 8 -> 8, which is the result of m7's call -> 7
    assert find_tail_cut_by_tokens(messages, 3, 1) == 7


def test_tail_cut_with_a_token_counter() -> None:
    messages = turns(12)  # with len: 4 + 6 = 10 tokens each
    assert find_tail_cut_by_tokens(messages, 3, 25) == 9  # 7 + 7 + 7 <= 25
    assert find_tail_cut_by_tokens(messages, 3, 25, token_counter=len) == 10  # 10 + 10 + 10 > 25


# ── summary budget and prompt ───────────────────────────────────────────────────────────────


def test_summary_budget() -> None:
    assert compute_summary_budget([]) == 100
    assert compute_summary_budget(turns(10)) == 100
    long = text("m", "a" * 4000)  # 4 + 1000
    assert compute_summary_budget([long]) == 200  # floor(200.8)
    assert compute_summary_budget([long] * 5) == 1004
    assert compute_summary_budget([text("m", "a" * 1000)] * 2) == 101  # floor(2 * 254 * 0.2)
    assert compute_summary_budget([text("m", "a" * 400)] * 2) == 100  # 2 * 104 * 0.2 < 100
    assert compute_summary_budget([text("m", "a" * 400)] * 2, len) == 161  # 2 * 404 * 0.2


def test_prompt_renders_messages_as_blocks() -> None:
    messages = [
        {
            "id": "a",
            "role": "user",
            "parts": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
        },
        text("b", "hi there", "assistant"),
    ]
    prompt = build_summary_prompt(messages, None, 123)
    assert "[user]\nfirst\nsecond\n\n---\n\n[assistant]\nhi there" in prompt
    for section in ("## Topic", "## Key Points", "## Current State", "## Open Items"):
        assert prompt.count(section) == 1
    assert prompt.index("## Topic") < prompt.index("## Key Points")
    assert prompt.index("## Key Points") < prompt.index("## Current State")
    assert prompt.index("## Current State") < prompt.index("## Open Items")
    assert prompt.index("[assistant]\nhi there") < prompt.index("## Topic")
    assert "about 123 tokens" in prompt
    assert "previous summary" not in prompt.lower()


def test_prompt_renders_tool_parts_as_json() -> None:
    lookup = {
        "type": "tool-lookup",
        "toolCallId": "tc-1",
        "toolName": "lookup",
        "state": "output-available",
        "input": {"id": 7},
        "output": {"customer": "ACME", "amount": 1200},
    }
    message = {"id": "m1", "role": "assistant", "parts": [{"type": "text", "text": "x"}, lookup]}
    prompt = build_summary_prompt([message], None, 100)
    expected = (
        '[assistant]\nx\n[Tool: lookup]\nInput: {"id":7}\nOutput: {"customer":"ACME","amount":1200}'
    )
    assert expected in prompt


def test_prompt_tool_names_and_empty_values() -> None:
    parts = [
        {"type": "tool-weather", "toolCallId": "a", "input": {}, "output": "sunny"},
        {"type": "dynamic-tool", "toolCallId": "b", "input": "", "output": None},
        {"type": "tool-count", "toolCallId": "c", "input": {"n": 1}, "output": 0},
        {"type": "tool-list", "toolCallId": "d", "output": []},
    ]
    prompt = build_summary_prompt([{"id": "m", "role": "assistant", "parts": parts}], None, 100)
    block = (
        "[assistant]\n\n"
        '[Tool: weather]\nInput: {}\nOutput: "sunny"\n'
        "[Tool: unknown]\n"
        '[Tool: count]\nInput: {"n":1}\n'
        "[Tool: list]\nOutput: []"
    )
    assert block in prompt


def test_prompt_names_a_tool_by_its_tool_name_field_first() -> None:
    # the stubs sanitize_tool_pairs writes are typed tool-result and carry the real name
    parts = [
        {"type": "tool-result", "toolCallId": "a", "toolName": "search", "output": "x"},
        {"type": "tool-weather", "toolCallId": "b", "toolName": "", "output": "y"},
        {"type": "tool-", "toolCallId": "c", "output": "z"},
    ]
    prompt = build_summary_prompt([{"id": "m", "role": "assistant", "parts": parts}], None, 100)
    assert '[Tool: search]\nOutput: "x"\n[Tool: weather]\nOutput: "y"\n' in prompt
    assert '[Tool: unknown]\nOutput: "z"' in prompt


def test_prompt_cuts_tool_json_to_500_characters() -> None:
    part = {
        "type": "tool-read",
        "toolName": "read",
        "input": {"q": "x" * 1000},
        "output": "y" * 900,
    }
    prompt = build_summary_prompt([{"id": "m", "role": "assistant", "parts": [part]}], None, 100)
    assert '\nInput: {"q":"' + "x" * 494 + "\nOutput: " in prompt
    assert '\nOutput: "' + "y" * 499 + "\n" in prompt


def test_update_prompt_includes_the_previous_summary() -> None:
    prompt = build_summary_prompt(turns(2), "OLD SUMMARY TEXT", 250)
    assert "OLD SUMMARY TEXT" in prompt
    assert prompt.index("OLD SUMMARY TEXT") < prompt.index("[user]\nturn 0")
    assert "previous summary" in prompt.lower()
    for section in ("## Topic", "## Key Points", "## Current State", "## Open Items"):
        assert prompt.count(section) == 1
    assert "about 250 tokens" in prompt
    # An empty previous summary counts as none.
    assert build_summary_prompt(turns(2), "", 250) == build_summary_prompt(turns(2), None, 250)
    assert build_summary_prompt(turns(2), "OLD", 250) != build_summary_prompt(turns(2), None, 250)


# ── create_compact_function ─────────────────────────────────────────────────────────────────


def test_no_compressible_middle_returns_none_without_calling_summarize() -> None:
    summarize = Recorder()
    compact = create_compact_function(summarize)
    assert compact(turns(5)) is None
    assert compact(turns(0)) is None
    assert summarize.prompts == []


def test_summarizes_the_middle_and_protects_head_and_tail() -> None:
    summarize = Recorder()
    compact = create_compact_function(summarize, keep_recent_tokens=1)
    assert compact(turns(12)) == CompactResult("m3", "m9", "SUMMARY")
    [prompt] = summarize.prompts
    for i in range(3, 10):
        assert f"turn {i}\n" in prompt
    for i in (0, 1, 2, 10, 11):
        assert f"turn {i}\n" not in prompt
    assert "turn 11" not in prompt


def test_previous_overlay_is_fed_back_and_never_in_the_range() -> None:
    messages = turns(12)
    messages.insert(4, overlay("EARLIER SUMMARY OF THINGS"))
    summarize = Recorder()
    compact = create_compact_function(summarize, keep_recent_tokens=1)
    got = compact(messages)
    assert got == CompactResult("m3", "m9", "SUMMARY")
    assert not got.from_message_id.startswith(COMPACTION_PREFIX)
    assert not got.to_message_id.startswith(COMPACTION_PREFIX)
    [prompt] = summarize.prompts
    assert prompt.count("EARLIER SUMMARY OF THINGS") == 1  # as the previous summary only
    assert prompt.index("EARLIER SUMMARY OF THINGS") < prompt.index("[assistant]\nturn 3")
    assert "previous summary" in prompt.lower()


@pytest.mark.parametrize("answer", ["", "   ", " \n\t "])
def test_blank_summary_returns_none(answer: str) -> None:
    summarize = Recorder(answer)
    assert create_compact_function(summarize, 1)(turns(12)) is None
    assert len(summarize.prompts) == 1


def test_none_summary_returns_none_and_other_types_raise() -> None:
    assert create_compact_function(Recorder(None), 1)(turns(12)) is None
    with pytest.raises(TypeError, match="must return a str, got int"):
        create_compact_function(Recorder(42), 1)(turns(12))


def test_summary_is_returned_verbatim() -> None:
    got = create_compact_function(Recorder("  S \n"), 1)(turns(12))
    assert got == CompactResult("m3", "m9", "  S \n")


def test_previous_summary_comes_from_the_first_compaction_message() -> None:
    first = {
        "id": "compaction_a",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "FIRST A"},
            {"type": "step-start"},
            {"type": "text", "text": "FIRST B"},
        ],
    }
    messages = [first, *turns(12)]
    messages.insert(6, overlay("SECOND", "b"))
    summarize = Recorder()
    got = create_compact_function(summarize, 1)(messages)
    # head: compaction_a, m0, m1; tail: m10, m11; the middle drops compaction_b
    assert got == CompactResult("m2", "m9", "SUMMARY")
    [prompt] = summarize.prompts
    assert "FIRST A\nFIRST B" in prompt
    assert "SECOND" not in prompt


def test_middle_of_only_compaction_messages_returns_none() -> None:
    messages = [*turns(3), overlay("S"), *turns(2)]
    messages[-2]["id"], messages[-1]["id"] = "m3", "m4"
    summarize = Recorder()
    assert create_compact_function(summarize, 1)(messages) is None
    assert summarize.prompts == []


def test_six_messages_with_a_large_budget_return_none() -> None:
    summarize = Recorder()
    assert create_compact_function(summarize)(turns(6)) is None
    assert create_compact_function(summarize)(turns(50)) is None  # 350 tokens < 20,000
    assert summarize.prompts == []
    assert create_compact_function(summarize, 1)(turns(6)) == CompactResult("m3", "m3", "SUMMARY")


def test_range_start_skips_results_of_a_call_in_the_head() -> None:
    messages = [
        text("m0", "hi"),
        text("m1", "sure", "assistant"),
        call("m2", "c1"),
        result("m3", "c1"),
        result("m4", "c1"),
        *turns(12)[5:],
    ]
    summarize = Recorder()
    assert create_compact_function(summarize, 1)(messages) == CompactResult("m5", "m9", "SUMMARY")


def test_range_end_keeps_a_call_with_its_result() -> None:
    messages = [*turns(7), call("m7", "c1"), result("m8", "c1"), text("m9", "done")]
    got = create_compact_function(Recorder(), 1)(messages)
    assert got == CompactResult("m3", "m6", "SUMMARY")


def test_prompt_budget_is_computed_from_the_middle() -> None:
    messages = [*turns(3), *(text(f"b{i}", "a" * 4000) for i in range(5)), *turns(2)]
    summarize = Recorder()
    got = create_compact_function(summarize, 1)(messages)
    assert got == CompactResult("b0", "b4", "SUMMARY")
    assert "about 1004 tokens" in summarize.prompts[0]


# ── create_compact_function: tail budgets, sync and async summarisers, settings ────────────


def test_returns_a_result_when_enough_messages_exist() -> None:
    messages = [
        text(
            f"m{i}", f"message {i} with enough content to have tokens", ("user", "assistant")[i % 2]
        )
        for i in range(20)
    ]
    got = create_compact_function(Recorder("summary"), keep_recent_tokens=10)(messages)
    assert got == CompactResult("m3", "m17", "summary")


def tool_heavy_history() -> list[Message]:
    head = [text("h0", "start"), text("h1", "ok", "assistant"), text("h2", "read everything")]
    tools = [
        {
            "id": f"tool-{i}",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-read_many",
                    "toolCallId": f"call-{i}",
                    "toolName": "read_many",
                    "state": "output-available",
                    "input": {"glob": "**/*.ts"},
                    "output": "x" * 25_000,
                }
            ],
        }
        for i in range(8)
    ]
    return head + tools


def test_tail_budgeting_skips_tool_heavy_histories_when_the_heuristic_under_counts() -> None:
    messages = tool_heavy_history()
    heuristic_tail = estimate_message_tokens(messages[3:])
    assert heuristic_tail == 8 * (4 + 5 + 6_250)
    summarize = Recorder()
    compact = create_compact_function(summarize, keep_recent_tokens=heuristic_tail + 1)
    assert compact(messages) is None
    assert summarize.prompts == []


def test_supplied_token_counter_drives_tail_budgeting_of_tool_heavy_histories() -> None:
    messages = tool_heavy_history()
    budget = estimate_message_tokens(messages[3:]) + 1
    summarize = Recorder()
    compact = create_compact_function(summarize, budget, token_counter=len)
    # With len, each tool message costs 4 + 18 + 25,000: two fit in the budget.
    assert compact(messages) == CompactResult("tool-0", "tool-5", "SUMMARY")
    assert len(summarize.prompts) == 1
    assert "about 30026 tokens" in summarize.prompts[0]  # floor(6 * 25,022 * 0.2)


# ── sync and async summarizers ──────────────────────────────────────────────────────────────


def test_acall_awaits_an_async_summarize() -> None:
    prompts: list[str] = []

    async def summarize(prompt: str) -> str:
        await asyncio.sleep(0)
        prompts.append(prompt)
        return "ASYNC"

    compact = create_compact_function(summarize, 1)
    got = asyncio.run(compact.acall(turns(12)))
    assert got == CompactResult("m3", "m9", "ASYNC")
    assert len(prompts) == 1
    assert asyncio.run(compact.acall(turns(5))) is None
    assert len(prompts) == 1


def test_acall_calls_a_sync_summarize() -> None:
    summarize = Recorder("SYNC")
    got = asyncio.run(create_compact_function(summarize, 1).acall(turns(12)))
    assert got == CompactResult("m3", "m9", "SYNC")
    assert len(summarize.prompts) == 1


def test_sync_call_runs_an_async_summarize_when_no_loop_is_running() -> None:
    async def summarize(prompt: str) -> str:
        await asyncio.sleep(0)
        return "RAN"

    assert create_compact_function(summarize, 1)(turns(12)) == CompactResult("m3", "m9", "RAN")


def test_sync_call_runs_an_awaitable_returned_by_a_plain_function() -> None:
    async def answer() -> str:
        return "LATE"

    compact = create_compact_function(lambda prompt: answer(), 1)
    assert compact(turns(12)) == CompactResult("m3", "m9", "LATE")


def run_in_loop(compact: CompactFunction, messages: list[Message]) -> None:
    async def main() -> None:
        compact(messages)

    asyncio.run(main())


def assert_no_unawaited_coroutine(action: Callable[[], None]) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action()
        gc.collect()
    assert [w for w in caught if "never awaited" in str(w.message)] == []


def test_sync_call_of_an_async_summarize_inside_a_running_loop_raises() -> None:
    ran: list[str] = []

    async def summarize(prompt: str) -> str:
        ran.append(prompt)
        return "x"

    compact = create_compact_function(summarize, 1)

    def action() -> None:
        with pytest.raises(TypeError, match=r"acall"):
            run_in_loop(compact, turns(12))

    assert_no_unawaited_coroutine(action)
    assert ran == []


def test_sync_call_of_a_returned_awaitable_inside_a_running_loop_raises() -> None:
    ran: list[str] = []

    async def answer() -> str:
        ran.append("yes")
        return "x"

    compact = create_compact_function(lambda prompt: answer(), 1)

    def action() -> None:
        with pytest.raises(TypeError, match=r"acall"):
            run_in_loop(compact, turns(12))

    assert_no_unawaited_coroutine(action)
    assert ran == []


def test_sync_summarize_works_inside_a_running_loop() -> None:
    compact = create_compact_function(Recorder(), 1)
    got: list[CompactResult | None] = []

    async def main() -> None:
        got.append(compact(turns(12)))

    asyncio.run(main())
    assert got == [CompactResult("m3", "m9", "SUMMARY")]


def test_plan_builds_the_prompt_without_calling_the_model() -> None:
    summarize = Recorder()
    compact = create_compact_function(summarize, 1)
    planned = compact.plan(turns(12))
    assert planned is not None
    middle, prompt = planned
    assert [m["id"] for m in middle] == [f"m{i}" for i in range(3, 10)]
    assert "turn 3" in prompt
    assert summarize.prompts == []
    assert compact.plan(turns(5)) is None


def test_factory_settings_and_validation() -> None:
    summarize = Recorder()
    compact = create_compact_function(summarize)
    assert isinstance(compact, CompactFunction)
    assert compact.summarize is summarize
    assert compact.keep_recent_tokens == 20_000
    assert compact.token_counter is None
    assert create_compact_function(summarize, 5, token_counter=len).token_counter is len
    with pytest.raises(TypeError, match="summarize must be callable"):
        create_compact_function("not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep_recent_tokens"):
        create_compact_function(summarize, -1)
    with pytest.raises(TypeError, match="keep_recent_tokens"):
        create_compact_function(summarize, "1000")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="token_counter"):
        create_compact_function(summarize, token_counter=3)  # type: ignore[arg-type]


def test_input_messages_are_not_modified() -> None:
    messages = turns(12)
    messages.insert(4, overlay("S"))
    before = copy.deepcopy(messages)
    create_compact_function(Recorder(), 1)(messages)
    assert messages == before


# ── coerce_compact_result ───────────────────────────────────────────────────────────────────


def test_coerce_accepts_results_and_mappings() -> None:
    assert coerce_compact_result(None) is None
    r = CompactResult("a", "b", "s")
    assert coerce_compact_result(r) is r
    snake = {"from_message_id": "a", "to_message_id": "b", "summary": "s"}
    assert coerce_compact_result(snake) == r
    camel = {"fromMessageId": "a", "toMessageId": "b", "summary": "s", "extra": 1}
    assert coerce_compact_result(camel) == r
    both = {"from_message_id": "a", "fromMessageId": "z", "toMessageId": "b", "summary": "s"}
    assert coerce_compact_result(both) == r


def test_coerce_rejects_anything_else() -> None:
    with pytest.raises(ValueError, match="'summary'"):
        coerce_compact_result({"from_message_id": "a", "to_message_id": "b"})
    with pytest.raises(ValueError, match="'from_message_id'"):
        coerce_compact_result({"to_message_id": "b", "summary": "s"})
    with pytest.raises(TypeError, match="'to_message_id' must be a str, got int"):
        coerce_compact_result({"from_message_id": "a", "to_message_id": 2, "summary": "s"})
    with pytest.raises(TypeError, match="got list"):
        coerce_compact_result(["a", "b", "s"])
    with pytest.raises(TypeError, match="got tuple"):
        coerce_compact_result(("a", "b", "s"))


def test_coerce_rejects_an_awaitable() -> None:
    async def fn() -> CompactResult:
        return CompactResult("a", "b", "s")

    def action() -> None:
        with pytest.raises(TypeError, match="awaitable"):
            coerce_compact_result(fn())

    assert_no_unawaited_coroutine(action)


# ── sanitize_tool_pairs (§10.9) ─────────────────────────────────────────────────────────────


def test_sanitize_adds_a_stub_for_a_call_without_result() -> None:
    messages = [text("u0", "find it"), call("a1", "c1"), text("u2", "well?")]
    before = copy.deepcopy(messages)
    fixed = sanitize_tool_pairs(messages)
    assert [m["id"] for m in fixed] == ["u0", "a1", "stub-c1", "u2"]
    assert fixed[2] == {
        "id": "stub-c1",
        "role": "assistant",
        "parts": [
            {
                "type": "tool-result",
                "toolCallId": "c1",
                "toolName": "unknown",
                "result": STUB_RESULT_NOTE,
            }
        ],
    }
    assert fixed[1] is messages[1]
    assert messages == before


def test_sanitize_stub_uses_the_tool_name_of_the_call() -> None:
    calling = call("a1", "c1", "c2")
    calling["parts"][1]["toolName"] = "search"
    fixed = sanitize_tool_pairs([calling])
    assert [m["id"] for m in fixed] == ["a1", "stub-c1", "stub-c2"]
    assert fixed[1]["parts"][0]["toolName"] == "unknown"
    assert fixed[2]["parts"][0]["toolName"] == "search"


def test_sanitize_removes_orphaned_results() -> None:
    orphan = result("r1", "gone")
    mixed = {
        "id": "r2",
        "role": "tool",
        "parts": [{"type": "text", "text": "note"}, *result("x", "gone")["parts"]],
    }
    messages = [text("u0", "hi"), orphan, mixed, text("u3", "ok")]
    before = copy.deepcopy(messages)
    fixed = sanitize_tool_pairs(messages)
    assert fixed == [
        text("u0", "hi"),
        {"id": "r2", "role": "tool", "parts": [{"type": "text", "text": "note"}]},
        text("u3", "ok"),
    ]
    assert messages == before


def test_sanitize_keeps_complete_pairs() -> None:
    one_part = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "tool-search", "toolCallId": "c1", "input": {}, "output": {"hits": 2}},
        ],
    }
    split = [call("a2", "c2"), result("r3", "c2")]
    messages = [text("u0", "go"), one_part, *split]
    fixed = sanitize_tool_pairs(messages)
    assert fixed == messages
    assert all(a is b for a, b in zip(fixed, messages, strict=True))
    assert fixed is not messages


def test_sanitize_ignores_calls_outside_assistant_messages_and_drops_empty_messages() -> None:
    user_call = {**call("u1", "c9"), "role": "user"}
    empty = {"id": "e", "role": "assistant", "parts": []}
    fixed = sanitize_tool_pairs([text("u0", "x"), user_call, empty])
    assert [m["id"] for m in fixed] == ["u0", "u1"]


def test_sanitize_adds_one_stub_per_call_id() -> None:
    fixed = sanitize_tool_pairs([call("a1", "c1"), call("a2", "c1")])
    assert [m["id"] for m in fixed] == ["a1", "stub-c1", "a2"]


# ── truncate_older_messages (§10.9) ─────────────────────────────────────────────────────────


def tool_message(id: str, output: object) -> Message:
    return {
        "id": id,
        "role": "assistant",
        "parts": [
            {
                "type": "tool-read",
                "toolCallId": f"tc-{id}",
                "toolName": "read",
                "state": "output-available",
                "input": {"path": "/large.txt"},
                "output": output,
            }
        ],
    }


def first_output(message: Message) -> Any:
    return message["parts"][0]["output"]


def test_truncate_keeps_object_output_shape() -> None:
    output = {"path": "/large.txt", "content": "x" * 1000, "totalLines": 1}
    messages = [
        tool_message("old-tool", output),
        text("old-user", "next"),
        text("recent-1", "recent one"),
        text("recent-2", "recent two"),
    ]
    before = copy.deepcopy(messages)
    out = truncate_older_messages(messages, keep_recent=2, max_tool_output_chars=100)
    assert first_output(out[0]) == {
        "path": "/large.txt",
        "content": "x" * 64 + "... [truncated 1000 chars]",
        "totalLines": 1,
    }
    assert out[0]["parts"][0]["input"] == {"path": "/large.txt"}
    assert out[1] is messages[1]
    assert messages == before
    assert first_output(messages[0])["content"] == "x" * 1000


def test_truncate_keeps_context_in_nested_arrays() -> None:
    numbers = list(range(1000))
    full_length = len(json.dumps(numbers, separators=(",", ":")))
    output = {key: list(numbers) for key in "abcdefg"}
    messages = [tool_message("old", output), text("r1", "one"), text("r2", "two")]
    out = first_output(truncate_older_messages(messages, keep_recent=2)[0])
    assert list(out) == list("abcdefg")
    for value in out.values():
        *kept, marker = value
        assert kept == numbers[: len(kept)]
        assert 1 <= len(kept) < 1000
        assert marker == f"... [{1000 - len(kept)} more items, truncated {full_length} chars]"
    assert len(json.dumps(out, separators=(",", ":"))) < 600


def test_truncate_bounds_deep_nesting() -> None:
    value: object = "y" * 1000
    for _ in range(12):
        value = {"k": value}
    messages = [tool_message("old", value), text("r", "recent")]
    out = first_output(
        truncate_older_messages(messages, keep_recent=1, max_tool_output_chars=100)[0]
    )
    for _ in range(8):
        out = out["k"]
    assert isinstance(out, str)
    assert out.startswith("[nested output omitted... [truncated ")


def test_truncate_leaves_recent_outputs_intact() -> None:
    recent_output = {"path": "/recent.txt", "content": "y" * 1000, "totalLines": 1}
    messages = [text("old-1", "old"), text("old-2", "old"), tool_message("recent", recent_output)]
    out = truncate_older_messages(messages, keep_recent=2, max_tool_output_chars=100)
    assert first_output(out[2]) is recent_output
    assert out[1] is messages[1] and out[2] is messages[2]


def test_truncate_keeps_string_outputs_as_strings() -> None:
    messages = [tool_message("old", "z" * 1000), text("r1", "one"), text("r2", "two")]
    out = truncate_older_messages(messages, keep_recent=2, max_tool_output_chars=100)
    assert first_output(out[0]) == "z" * 100 + "... [truncated 1000 chars]"


def test_truncate_leaves_short_and_missing_outputs() -> None:
    short = tool_message("a", {"ok": True})
    exact = tool_message("b", "q" * 500)
    missing = tool_message("c", None)
    messages = [short, exact, missing, text("r", "recent")]
    out = truncate_older_messages(messages, keep_recent=1)
    assert all(a is b for a, b in zip(out, messages, strict=True))


def test_truncate_cuts_long_text_parts() -> None:
    old: Message = {
        "id": "old",
        "role": "user",
        "parts": [
            {"type": "text", "text": "t" * 20},
            {"type": "text", "text": "s" * 10},
            {"type": "reasoning", "text": "r" * 50},
        ],
    }
    out = truncate_older_messages([old, text("r", "recent")], keep_recent=1, max_text_chars=10)
    assert out[0]["parts"] == [
        {"type": "text", "text": "t" * 10 + "... [truncated 20 chars]"},
        {"type": "text", "text": "s" * 10},
        {"type": "reasoning", "text": "r" * 50},
    ]
    assert out[0]["parts"][1] is old["parts"][1]
    assert old["parts"][0]["text"] == "t" * 20


def test_truncate_defaults_and_short_histories() -> None:
    long_text = text("old", "w" * 10_001)
    messages = [long_text, *turns(4)]
    out = truncate_older_messages(messages)
    assert out[0]["parts"][0]["text"] == "w" * 10_000 + "... [truncated 10001 chars]"
    assert out[1:] == messages[1:]
    few = turns(4)
    same = truncate_older_messages(few)
    assert same == few and same is not few
    all_old = truncate_older_messages([tool_message("a", "z" * 600)], keep_recent=0)
    assert first_output(all_old[0]) == "z" * 500 + "... [truncated 600 chars]"

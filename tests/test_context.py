"""Context blocks, the frozen system prompt and block writes.

Every test that touches the store runs on every backend and through both APIs (the ``store``
fixture); the pure rendering tests run once.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import pytest
from _context_helpers import SOUL, Memory, Skills, Static, WritableSkills, record_compactions
from _helpers import text

from convostore import Session, Sessions
from convostore.context import (
    CONTEXT_PREFIX,
    SEPARATOR,
    Context,
    ContextBlock,
    ContextBlockConfig,
    ContextError,
    StoreContextProvider,
    render_system_prompt,
)
from convostore.tokens import estimate_string_tokens


def block(label: str, content: str, **kw: Any) -> ContextBlock:
    fields: dict[str, Any] = dict(
        label=label, description=None, content=content, tokens=estimate_string_tokens(content),
        max_tokens=None, writable=False, is_skill=False, is_searchable=False,
    )
    fields.update(kw)
    return ContextBlock(**fields)


# --- rendering (§10.3), pure ------------------------------------------------------------------


def test_renders_the_reference_layout_exactly() -> None:
    blocks = [
        block("soul", SOUL, description="Identity"),
        block("memory", "User likes coffee.", description="Learned facts", tokens=495,
              max_tokens=1100, writable=True),
        block("skills", "- pirate-style: Talk like a pirate", is_skill=True),
        block("knowledge", "", is_searchable=True, writable=True),
    ]
    assert SEPARATOR == "═" * 46
    assert render_system_prompt(blocks) == (
        f"{SEPARATOR}\nSOUL (Identity) [readonly]\n{SEPARATOR}\n{SOUL}\n\n"
        f"{SEPARATOR}\nMEMORY (Learned facts) [45% — 495/1100 tokens] [writable]\n{SEPARATOR}\n"
        "User likes coffee.\n\n"
        f"{SEPARATOR}\nSKILLS [loadable]\n{SEPARATOR}\n- pirate-style: Talk like a pirate\n\n"
        f"{SEPARATOR}\nKNOWLEDGE [searchable]\n{SEPARATOR}\n"
    )


def test_skips_empty_readonly_blocks_and_rounds_usage_half_up() -> None:
    blocks = [
        block("empty", ""),
        block("notes", "x", tokens=1, max_tokens=8, writable=True),  # 12.5% -> 13
        block("half", "y", tokens=5, max_tokens=200, writable=True),  # 2.5% -> 3
    ]
    assert render_system_prompt(blocks) == (
        f"{SEPARATOR}\nNOTES [13% — 1/8 tokens] [writable]\n{SEPARATOR}\nx\n\n"
        f"{SEPARATOR}\nHALF [3% — 5/200 tokens] [writable]\n{SEPARATOR}\ny"
    )
    assert render_system_prompt([]) == ""


def test_block_config_checks_its_fields() -> None:
    with pytest.raises(TypeError, match="label must be a non-empty string, not ''"):
        ContextBlockConfig("")
    with pytest.raises(TypeError, match="max_tokens of block 'memory' must be an int, not str"):
        ContextBlockConfig("memory", max_tokens="10")  # type: ignore[arg-type]


# --- frozen system prompt (§11.7 "ContextBlocks — frozen system prompt") ----------------------


def soul_and_memory(session: Session, memory: Memory | None = None) -> Context:
    return (
        Context(session)
        .with_context("soul", provider=Static(SOUL))
        .with_context("memory", description="Learned facts", max_tokens=1100,
                      provider=memory if memory is not None else Memory("likes tea"))
    )


def test_the_prompt_is_the_same_on_repeated_calls(store: Sessions) -> None:
    context = soul_and_memory(store.session())
    first = context.get_system_prompt()
    assert first == context.get_system_prompt() == context.freeze_system_prompt()
    assert SOUL in first and "likes tea" in first
    assert first == (
        f"{SEPARATOR}\nSOUL [readonly]\n{SEPARATOR}\n{SOUL}\n\n"
        f"{SEPARATOR}\nMEMORY (Learned facts) [0% — 3/1100 tokens] [writable]\n{SEPARATOR}\n"
        "likes tea"
    )


def test_block_writes_do_not_change_the_frozen_prompt(store: Sessions) -> None:
    memory = Memory("v1")
    context = soul_and_memory(store.session(), memory)
    frozen = context.freeze_system_prompt()
    context.replace_context_block("memory", "v2")
    assert memory.content == "v2"
    assert context.get_system_prompt() == frozen
    assert context.freeze_system_prompt() == frozen
    assert "v1" in frozen and "v2" not in frozen


def test_refresh_picks_up_changes_and_is_then_stable(store: Sessions) -> None:
    memory = Memory("v1")
    context = soul_and_memory(store.session(), memory)
    context.freeze_system_prompt()
    memory.content = "v2"  # changed behind the context's back: only a refresh re-reads it
    refreshed = context.refresh_system_prompt()
    assert "v2" in refreshed and "v1" not in refreshed
    assert context.get_system_prompt() == refreshed == context.freeze_system_prompt()


def test_readonly_blocks_reject_writes(store: Sessions) -> None:
    context = soul_and_memory(store.session())
    with pytest.raises(ContextError, match="readonly") as info:
        context.replace_context_block("soul", "something else")
    assert str(info.value) == 'Block "soul" is readonly'
    assert info.value.label == "soul"
    with pytest.raises(ContextError) as unknown:
        context.replace_context_block("nothing", "x")
    assert str(unknown.value) == 'Block "nothing" is readonly'


def test_max_tokens_is_enforced_on_writes(store: Sessions) -> None:
    memory = Memory("")
    context = (
        Context(store.session()).with_context("memory", max_tokens=10, provider=memory)
    )
    with pytest.raises(ContextError) as info:
        context.replace_context_block("memory", " ".join(["word"] * 50))
    assert str(info.value) == 'Block "memory" exceeds maxTokens: 65 > 10'
    assert memory.writes == []
    context.replace_context_block("memory", "four words fit here")
    with pytest.raises(ContextError, match=r"exceeds maxTokens: 11 > 10"):
        context.append_context_block("memory", "and four more words")  # combined text counts
    assert memory.content == "four words fit here"


def test_uses_plain_text_not_xml(store: Sessions) -> None:
    prompt = soul_and_memory(store.session()).freeze_system_prompt()
    assert "═" in prompt and "SOUL" in prompt and "MEMORY" in prompt
    assert "<context_block" not in prompt


def test_renders_empty_skill_blocks_so_load_context_stays_discoverable(store: Sessions) -> None:
    context = Context(store.session()).with_context("skills", provider=Skills())
    prompt = context.freeze_system_prompt()
    assert prompt == f"{SEPARATOR}\nSKILLS [loadable]\n{SEPARATOR}\n"


# --- builder and default providers (§11.7 "Session.create() builder") -------------------------


def test_a_block_without_provider_is_stored_under_its_label(store: Sessions) -> None:
    context = Context(store.session()).with_context("memory", description="Learned facts")
    assert context.get_context_block("memory") == ContextBlock(
        "memory", "Learned facts", "", 0, None, True, False, False
    )
    assert "MEMORY (Learned facts) [writable]" in context.freeze_system_prompt()
    context.replace_context_block("memory", "User likes coffee.")
    assert StoreContextProvider(store, "memory").get() == "User likes coffee."
    kept = store.session(CONTEXT_PREFIX + "memory").get_history()
    assert len(kept) == 1
    # A new context (a restart of the process) reads it back.
    again = Context(store.session()).with_context("memory")
    assert again.get_context_block("memory").content == "User likes coffee."  # type: ignore[union-attr]


def test_named_sessions_namespace_their_keys(store: Sessions) -> None:
    context = Context(store.session("chat-123")).with_context("memory").with_cached_prompt()
    context.replace_context_block("memory", "scoped fact")
    prompt = context.freeze_system_prompt()
    assert StoreContextProvider(store, "memory_chat-123").get() == "scoped fact"
    assert StoreContextProvider(store, "_system_prompt_chat-123").get() == prompt
    assert StoreContextProvider(store, "memory").get() is None
    assert StoreContextProvider(store, "_system_prompt").get() is None


def test_with_cached_prompt_stores_the_frozen_prompt(store: Sessions) -> None:
    context = soul_and_memory(store.session()).with_cached_prompt()
    frozen = context.freeze_system_prompt()
    assert StoreContextProvider(store, "_system_prompt").get() == frozen
    assert context.freeze_system_prompt() == frozen


def test_readonly_providers_give_no_tools(store: Sessions) -> None:
    context = Context(store.session()).with_context("soul", provider=Static(SOUL))
    assert context.tools() == []
    assert SOUL in context.freeze_system_prompt()


def test_a_provider_returning_none_is_an_empty_block(store: Sessions) -> None:
    context = Context(store.session()).with_context("memory", provider=Memory(None))
    assert context.get_context_block("memory").content == ""  # type: ignore[union-attr]
    assert context.freeze_system_prompt() == (
        f"{SEPARATOR}\nMEMORY [writable]\n{SEPARATOR}\n"
    )


def test_the_direct_constructor(store: Sessions) -> None:
    memory = Memory("noted")
    context = Context(
        store.session(),
        [
            ContextBlockConfig("memory", "Notes", 500, memory),
            ContextBlockConfig("soul", provider=Static(SOUL)),
        ],
        prompt_cache=True,
    )
    prompt = context.freeze_system_prompt()
    assert prompt.startswith(f"{SEPARATOR}\nMEMORY (Notes) [0% — 2/500 tokens] [writable]")
    assert StoreContextProvider(store, "_system_prompt").get() == prompt
    custom = Memory()
    assert Context(store.session("x"), prompt_cache=custom).freeze_system_prompt() == ""
    assert custom.writes == [""]


def test_builder_rejects_duplicates_and_late_blocks(store: Sessions) -> None:
    context = Context(store.session()).with_context("memory")
    with pytest.raises(ContextError) as info:
        context.with_context("memory")
    assert str(info.value) == 'Block "memory" already exists'
    context.get_context_blocks()
    with pytest.raises(RuntimeError, match="add_context"):
        context.with_context("late")
    with pytest.raises(TypeError, match="get"):
        Context(store.session()).with_context("bad", provider=object()).get_context_blocks()


# --- edge cases (§11.7 "ContextBlocks — edge cases") -----------------------------------------


def test_freeze_persists_an_empty_prompt(store: Sessions) -> None:
    source = Static(None)
    context = Context(store.session()).with_context("soul", provider=source).with_cached_prompt()
    assert context.freeze_system_prompt() == ""
    assert StoreContextProvider(store, "_system_prompt").get() == ""
    source.content = "now with content"
    again = Context(store.session()).with_context("soul", provider=source).with_cached_prompt()
    assert again.freeze_system_prompt() == ""  # "" is a stored value, not a miss


def test_freeze_distinguishes_none_from_the_empty_string(store: Sessions) -> None:
    cache = Memory("")
    context = Context(store.session(), prompt_cache=cache).with_context(
        "soul", provider=Static(SOUL)
    )
    assert context.freeze_system_prompt() == ""
    assert cache.writes == []
    cache.content = None
    fresh = Context(store.session(), prompt_cache=cache).with_context(
        "soul", provider=Static(SOUL)
    )
    assert SOUL in fresh.freeze_system_prompt()
    assert cache.content is not None and SOUL in cache.content


@pytest.mark.requires("reopen")
def test_the_frozen_prompt_survives_a_restart(open_store: Callable[..., Sessions]) -> None:
    first = open_store()
    memory = Memory("before")
    frozen = soul_and_memory(first.session("s"), memory).with_cached_prompt()
    prompt = frozen.freeze_system_prompt()
    first.close()
    memory.content = "after"
    second = open_store()
    context = soul_and_memory(second.session("s"), memory).with_cached_prompt()
    assert context.freeze_system_prompt() == prompt
    assert "after" in context.refresh_system_prompt()
    assert StoreContextProvider(second, "_system_prompt_s").get() == context.get_system_prompt()


# --- multi-session isolation (§11.7) ----------------------------------------------------------


def test_sessions_keep_separate_blocks_and_prompts(store: Sessions) -> None:
    a = Context(store.session("a")).with_context("memory").with_cached_prompt()
    b = Context(store.session("b")).with_context("memory").with_cached_prompt()
    a.replace_context_block("memory", "fact of a")
    assert b.get_context_block("memory").content == ""  # type: ignore[union-attr]
    prompt_a, prompt_b = a.freeze_system_prompt(), b.freeze_system_prompt()
    assert "fact of a" in prompt_a and "fact of a" not in prompt_b
    b.replace_context_block("memory", "fact of b")
    assert b.refresh_system_prompt() != prompt_b
    assert StoreContextProvider(store, "_system_prompt_b").get() == b.get_system_prompt()
    assert StoreContextProvider(store, "_system_prompt_a").get() == prompt_a
    store.session("a").append_message(text("m1", "hello"))
    store.session("b").clear_messages()
    assert len(store.session("a").get_history()) == 1


# --- block reads and writes (§10.4, §11.7 "Session tools and context") ------------------------


def test_get_replace_and_append(store: Sessions) -> None:
    context = Context(store.session()).with_context("memory", max_tokens=100)
    assert context.append_context_block("memory", "fact1").content == "fact1"
    view = context.append_context_block("memory", "fact2")
    assert view == ContextBlock("memory", None, "fact1\nfact2", 3, 100, True, False, False)
    assert context.append_context_block("memory", "\nfact3").content == "fact1\nfact2\nfact3"
    assert context.replace_context_block("memory", "only").content == "only"
    assert context.get_context_block("memory").content == "only"  # type: ignore[union-attr]
    assert context.get_context_block("missing") is None
    assert [b.label for b in context.get_context_blocks()] == ["memory"]
    with pytest.raises(ContextError) as info:
        context.append_context_block("missing", "x")
    assert str(info.value) == 'Block "missing" not found'


def test_keyed_blocks_cannot_be_written_whole(store: Sessions) -> None:
    context = Context(store.session()).with_context("skills", provider=WritableSkills())
    with pytest.raises(ContextError) as info:
        context.replace_context_block("skills", "x")
    assert str(info.value) == (
        'Block "skills" is a keyed provider. Use set_skill() or set_search_entry() instead.'
    )
    context.set_skill("skills", "guide", "How to do it")
    assert context.get_context_block("skills").content == "- guide"  # type: ignore[union-attr]


def test_add_and_remove_context_at_run_time(store: Sessions) -> None:
    context = soul_and_memory(store.session())
    frozen = context.freeze_system_prompt()
    added = context.add_context("notes", description="From extension X", max_tokens=500)
    assert added == ContextBlock("notes", "From extension X", "", 0, 500, True, False, False)
    with pytest.raises(ContextError) as info:
        context.add_context("notes")
    assert str(info.value) == 'Block "notes" already exists'
    assert context.get_system_prompt() == frozen  # not refreshed automatically
    assert "NOTES (From extension X)" in context.refresh_system_prompt()
    assert context.remove_context("notes") is True
    assert context.remove_context("notes") is False
    assert context.get_context_block("notes") is None
    assert "NOTES" in context.get_system_prompt()
    assert "NOTES" not in context.refresh_system_prompt()


# --- auto-compaction counts the system prompt (§6.4 v0.17) ------------------------------------


def big_block(session: Session) -> Context:
    """A context whose one block is 400 words (about 520 tokens of prompt)."""
    return Context(session).with_context("memory", provider=Memory(" ".join(["fact"] * 400)))


def test_token_estimate_adds_the_prompt(store: Sessions) -> None:
    session = store.session()
    session.append_message(text("m1", "hello there"))
    context = big_block(session)
    prompt = big_block(session).freeze_system_prompt()  # another context: this one stays unfrozen
    assert context.token_estimate() == session.get_token_estimate() + estimate_string_tokens(prompt)


def test_token_estimate_does_not_cache_a_prompt(store: Sessions) -> None:
    session = store.session()
    context = Context(session).with_context("soul", provider=Static(SOUL)).with_cached_prompt()
    assert context.token_estimate() > 0
    assert StoreContextProvider(store, "_system_prompt").get() is None
    assert context.freeze_system_prompt() == StoreContextProvider(store, "_system_prompt").get()


def test_token_estimate_reuses_the_frozen_snapshot(store: Sessions) -> None:
    memory = Memory("short")
    context = Context(store.session()).with_context("memory", provider=memory)
    frozen = context.freeze_system_prompt()
    context.replace_context_block("memory", " ".join(["much longer now"] * 50))
    assert context.token_estimate() == estimate_string_tokens(frozen)


def test_token_estimate_uses_the_cached_prompt_after_a_restart(store: Sessions) -> None:
    session = store.session()
    cached = Context(session).with_context("soul", provider=Static(SOUL)).with_cached_prompt()
    prompt = cached.freeze_system_prompt()
    later = Context(session).with_context("soul", provider=Static("x " * 500)).with_cached_prompt()
    assert later.token_estimate() == estimate_string_tokens(prompt)


def test_a_large_block_alone_triggers_auto_compaction(store: Sessions) -> None:
    session = store.session()
    calls = record_compactions(session)
    context = big_block(session)
    context.compact_after(300)
    session.append_message(text("m1", "short"))
    assert store.wait_for_compactions()
    assert calls == [1]
    assert StoreContextProvider(store, "_system_prompt").get() is None


def test_auto_compaction_without_the_prompt_stays_below(store: Sessions) -> None:
    session = store.session()
    calls = record_compactions(session)
    context = Context(session).with_context("soul", provider=Static(SOUL))
    context.compact_after(300)
    session.append_message(text("m1", "short"))
    assert store.wait_for_compactions()
    assert calls == []
    context.compact_after(None)
    session.append_message(text("m2", " ".join(["word"] * 400)))
    assert store.wait_for_compactions()
    assert calls == []


def test_auto_compaction_counts_the_frozen_snapshot(store: Sessions) -> None:
    session = store.session()
    calls = record_compactions(session)
    memory = Memory("short")
    context = Context(session).with_context("memory", provider=memory)
    context.freeze_system_prompt()
    context.compact_after(300)
    context.replace_context_block("memory", " ".join(["fact"] * 400))  # not in the snapshot
    session.append_message(text("m1", "short"))
    assert store.wait_for_compactions()
    assert calls == []
    context.refresh_system_prompt()
    session.append_message(text("m2", "short"))
    assert store.wait_for_compactions()
    assert calls == [2]


def test_context_needs_a_session_handle() -> None:
    with pytest.raises(TypeError, match=r"session handle \(store.session\(id\)\), not object"):
        Context(object())  # type: ignore[arg-type]


def test_bad_callbacks_and_caches_are_named(store: Sessions) -> None:
    with pytest.raises(TypeError, match="needs a callable, not str"):
        Context(store.session()).on_skill_unload("print")  # type: ignore[arg-type]
    context = Context(store.session(), prompt_cache=Static("no set()"))
    with pytest.raises(TypeError, match=r"get\(\) and set\(\) methods; Static lacks one"):
        context.freeze_system_prompt()


def test_execute_accepts_json_text(store: Sessions) -> None:
    context = Context(store.session()).with_context("memory")
    assert context.execute("set_context", json.dumps({"label": "memory", "content": "a"})) == (
        "Written to memory. Usage: 2 tokens"
    )


def test_the_public_names() -> None:
    import convostore.context as module

    public = {
        name for name, value in vars(module).items()
        if not name.startswith("_") and not inspect.ismodule(value) and name != "annotations"
    }
    assert set(module.__all__) == public
    assert Context.__module__ == "convostore.context"

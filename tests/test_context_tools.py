"""The model's memory tools, skills, search and the provider init lifecycle (§10.2, §10.5, §11.7,
§11.9), driven by a scripted fake model on every backend and through both APIs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _context_helpers import SOUL, Memory, Skills, Static, WritableSkills
from _helpers import text

from convostore import Session, Sessions
from convostore.context import (
    SEARCH_PREFIX,
    SEPARATOR,
    Context,
    DirectorySkillProvider,
    StoreSearchProvider,
    ToolDefinition,
    entry_key,
    to_anthropic_tools,
    to_openai_tools,
)
from convostore.context._tools import short_hash, slugify


class ReadonlySearch:
    def get(self) -> str | None:
        return "42 entries indexed."

    def search(self, query: str) -> str | None:
        return f"[hit]\nabout {query}" if query == "cats" else None


def names(tools: list[ToolDefinition]) -> list[str]:
    return [t.name for t in tools]


def tool(tools: list[ToolDefinition], name: str) -> ToolDefinition:
    return next(t for t in tools if t.name == name)


# --- a scripted fake model ---------------------------------------------------------------------


class ScriptedModel:
    """Plays back tool calls, one list per turn, recording what it was shown."""

    def __init__(self, turns: list[list[tuple[str, dict[str, Any]]]]) -> None:
        self.turns = list(turns)
        self.prompts: list[str] = []
        self.tool_names: list[list[str]] = []

    def respond(
        self, system: str, history: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> list[tuple[str, dict[str, Any]]]:
        self.prompts.append(system)
        self.tool_names.append([t["function"]["name"] for t in tools])
        return self.turns.pop(0)


def agent_turn(
    session: Session, context: Context, model: ScriptedModel, n: int, user: str,
    *, typed: bool = True,
) -> list[str]:
    """One turn of an agent loop; tool results are stored as UIMessage tool parts."""
    session.append_message(text(f"u{n}", user))
    calls = model.respond(
        context.freeze_system_prompt(), session.get_history(), to_openai_tools(context.tools())
    )
    parts: list[dict[str, Any]] = [{"type": "step-start"}]
    for i, (name, args) in enumerate(calls):
        output = context.execute(name, json.dumps(args))
        part: dict[str, Any] = {
            "type": f"tool-{name}" if typed else "dynamic-tool",
            "toolCallId": f"call-{n}-{i}",
            "state": "output-available",
            "input": args,
            "output": output,
        }
        if not typed:
            part["toolName"] = name
        parts.append(part)
    parts.append({"type": "text", "text": "done"})
    session.append_message({"id": f"a{n}", "role": "assistant", "parts": parts})
    return [p["output"] for p in parts if "output" in p]


def full_context(session: Session, store: Sessions, skills: Any) -> Context:
    return (
        Context(session)
        .with_context("soul", provider=Static(SOUL))
        .with_context("memory", description="Learned facts", max_tokens=1100)
        .with_context("skills", provider=skills)
        .with_context("knowledge", description="Searchable knowledge base",
                      provider=StoreSearchProvider(store))
    )


def test_an_agent_loop_writes_memory_loads_a_skill_and_searches(
    store: Sessions, tmp_path: Path
) -> None:
    skills = DirectorySkillProvider(tmp_path / "skills")
    skills.set("pirate-style", "Arr! Answer like a pirate.", "Talk like a pirate")
    session = store.session("agent")
    context = full_context(session, store, skills).with_cached_prompt()
    model = ScriptedModel([
        [("set_context", {"label": "memory", "content": "User likes coffee."}),
         ("set_context", {"label": "knowledge", "content": "Deploys run on Tuesdays.",
                          "metadata": {"title": "Deploy schedule"}})],
        [("load_context", {"label": "skills", "key": "pirate-style"}),
         ("search_context", {"label": "knowledge", "query": "tuesdays deploys"})],
        [("set_context", {"label": "memory", "content": "User prefers dark roast.",
                          "action": "append"}),
         ("unload_context", {"label": "skills", "key": "pirate-style"})],
    ])
    first = context.freeze_system_prompt()
    assert agent_turn(session, context, model, 1, "remember: I like coffee") == [
        "Written to memory. Usage: 0% (5/1100 tokens)",
        'Indexed "deploy-schedule" in knowledge.',
    ]
    assert agent_turn(session, context, model, 2, "talk like a pirate; when do we deploy?") == [
        "Arr! Answer like a pirate.",
        "[deploy-schedule]\nDeploys run on Tuesdays.",
    ]
    assert context.get_loaded_skill_keys() == {"skills:pirate-style"}
    assert agent_turn(session, context, model, 3, "and dark roast; stop the pirate talk") == [
        "Written to memory. Usage: 1% (11/1100 tokens)",
        'Unloaded "pirate-style" from skills. Context reclaimed.',
    ]
    # The model saw one frozen prompt all along; block writes wait for a refresh.
    assert model.prompts == [first, first, first]
    assert model.tool_names[0] == ["set_context", "load_context", "unload_context",
                                   "search_context"]
    assert context.get_loaded_skill_keys() == set()
    loaded = session.get_message("a2")
    assert loaded is not None and loaded["parts"][1]["output"] == "[skill unloaded: pirate-style]"
    refreshed = context.refresh_system_prompt()
    assert refreshed == (
        f"{SEPARATOR}\nSOUL [readonly]\n{SEPARATOR}\n{SOUL}\n\n"
        f"{SEPARATOR}\nMEMORY (Learned facts) [1% — 11/1100 tokens] [writable]\n{SEPARATOR}\n"
        "User likes coffee.\nUser prefers dark roast.\n\n"
        f"{SEPARATOR}\nSKILLS [loadable]\n{SEPARATOR}\n- pirate-style: Talk like a pirate\n\n"
        f"{SEPARATOR}\nKNOWLEDGE (Searchable knowledge base) [searchable]\n{SEPARATOR}\n"
        "1 entries indexed."
    )
    # A restart: a new context over the same session reads everything back.
    again = full_context(session, store, skills).with_cached_prompt()
    assert again.freeze_system_prompt() == refreshed
    assert again.get_loaded_skill_keys() == set()


# --- tool definitions (§10.5, §11.7 "tools() without load") -----------------------------------


def test_set_context_lists_writable_blocks_only(store: Sessions) -> None:
    context = (
        Context(store.session())
        .with_context("soul", provider=Static(SOUL))
        .with_context("memory", description="Learned facts", provider=Memory())
    )
    tools = context.tools()
    assert names(tools) == ["set_context"]
    params = tools[0].parameters
    assert params["properties"]["label"]["enum"] == ["memory"]
    assert params["properties"]["action"]["enum"] == ["replace", "append"]
    assert "metadata" not in params["properties"]
    assert params["required"] == ["label", "content"]
    assert '- "memory" (writable): Learned facts' in tools[0].description
    assert "metadata" not in tools[0].description


def test_set_context_labels_keyed_blocks(store: Sessions) -> None:
    context = (
        Context(store.session())
        .with_context("memory", description="Learned facts", provider=Memory())
        .with_context("skills", provider=WritableSkills())
        .with_context("knowledge", description="Docs", provider=StoreSearchProvider(store))
    )
    set_context = tool(context.tools(), "set_context")
    lines = set_context.description.split("\n")
    assert '- "memory" (writable): Learned facts' in lines
    assert '- "skills" (skill collection, keyed entries): no description' in lines
    assert '- "knowledge" (searchable, keyed entries): Docs' in lines
    assert "metadata: { title, description }" in set_context.description
    meta = set_context.parameters["properties"]["metadata"]
    assert meta["type"] == "object"
    assert set(meta["properties"]) == {"title", "description"}


def test_tool_formats_for_openai_and_anthropic() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    definition = ToolDefinition("search_context", "Search.", schema)
    assert to_openai_tools([definition]) == [
        {"type": "function",
         "function": {"name": "search_context", "description": "Search.", "parameters": schema}}
    ]
    assert to_anthropic_tools([definition]) == [
        {"name": "search_context", "description": "Search.", "input_schema": schema}
    ]


def test_execute_loads_lazily_and_writes(store: Sessions) -> None:
    memory = Memory()
    context = Context(store.session()).with_context("memory", provider=memory)
    assert context.execute("set_context", {"label": "memory", "content": "User likes coffee."}) \
        == "Written to memory. Usage: 5 tokens"
    assert memory.content == "User likes coffee."


def test_execute_appends(store: Sessions) -> None:
    memory = Memory()
    context = Context(store.session()).with_context("memory", provider=memory)
    context.execute("set_context", {"label": "memory", "content": "fact1"})
    context.execute("set_context", {"label": "memory", "content": "fact2", "action": "append"})
    assert memory.content == "fact1\nfact2"


def test_execute_never_raises(store: Sessions) -> None:
    context = (
        Context(store.session())
        .with_context("soul", provider=Static(SOUL))
        .with_context("memory", max_tokens=5, provider=Memory())
    )
    run = context.execute
    assert run("set_context", {"label": "soul", "content": "x"}) == (
        'Error: Block "soul" is readonly'
    )
    assert run("set_context", {"label": "ghost", "content": "x"}) == (
        'Error: block "ghost" not found'
    )
    assert run("set_context", {"label": "memory", "content": "one two three four five"}) == (
        'Error: Block "memory" exceeds maxTokens: 7 > 5'
    )
    assert run("set_context", {"label": "memory"}) == 'Error: missing argument "content"'
    assert run("set_context", {"label": "memory", "content": 3}) == (
        'Error: argument "content" must be a string'
    )
    assert run("set_context", {"label": "memory", "content": "x", "action": "merge"}) == (
        'Error: argument "action" must be "replace" or "append"'
    )
    assert run("set_context", "{not json").startswith("Error: arguments are not valid JSON")
    assert run("set_context", "[1]") == "Error: arguments must be a JSON object"
    assert run("load_context", {"label": "soul", "key": "x"}) == (
        'Error: unknown tool "load_context"'
    )

    class Broken(Memory):
        def set(self, content: str) -> None:
            raise OSError("disk full")

    broken = Context(store.session()).with_context("memory", provider=Broken())
    assert broken.execute("set_context", {"label": "memory", "content": "x"}) == (
        "Error: disk full"
    )


def test_no_tools_without_writable_blocks(store: Sessions) -> None:
    assert Context(store.session()).with_context("soul", provider=Static(SOUL)).tools() == []
    assert Context(store.session()).tools() == []


# --- search (§11.9 search.test.ts, §11.7 AgentSearchProvider) ---------------------------------


def test_search_blocks_get_search_and_set_tools(store: Sessions) -> None:
    context = Context(store.session()).with_context(
        "knowledge", description="Docs", provider=StoreSearchProvider(store)
    )
    tools = context.tools()
    assert names(tools) == ["set_context", "search_context"]
    assert tool(tools, "search_context").parameters["properties"]["label"]["enum"] == [
        "knowledge"
    ]
    assert context.freeze_system_prompt() == (
        f"{SEPARATOR}\nKNOWLEDGE (Docs) [searchable]\n{SEPARATOR}\n"
    )
    readonly = Context(store.session()).with_context("kb", provider=ReadonlySearch())
    assert names(readonly.tools()) == ["search_context"]
    assert readonly.execute("search_context", {"label": "kb", "query": "cats"}) == (
        "[hit]\nabout cats"
    )
    assert readonly.execute("search_context", {"label": "kb", "query": "dogs"}) == (
        "No results found."
    )
    assert "SEARCH" not in " ".join(names(Context(store.session()).with_context(
        "memory", provider=Memory()).tools())).upper()


def test_search_context_finds_indexed_entries(store: Sessions) -> None:
    context = (
        Context(store.session())
        .with_context("soul", provider=Static(SOUL))
        .with_context("knowledge", provider=StoreSearchProvider(store))
    )
    run = context.execute
    assert run("set_context", {"label": "knowledge", "content": "Cats purr when content.",
                               "metadata": {"title": "Cats"}}) == 'Indexed "cats" in knowledge.'
    assert context.get_context_block("knowledge").content == "1 entries indexed."  # type: ignore[union-attr]
    auto = run("set_context", {"label": "knowledge", "content": "Dogs bark at the mail carrier."})
    key = entry_key("Dogs bark at the mail carrier.")
    assert auto == f'Indexed "{key}" in knowledge.'
    assert key == f"dogs-bark-at-the-mail-carrier-{short_hash('Dogs bark at the mail carrier.')}"
    assert context.get_context_block("knowledge").content == "2 entries indexed."  # type: ignore[union-attr]
    assert run("search_context", {"label": "knowledge", "query": "purr"}) == (
        "[cats]\nCats purr when content."
    )
    assert run("search_context", {"label": "knowledge", "query": "carrier dogs"}) == (
        f"[{key}]\nDogs bark at the mail carrier."
    )
    assert run("search_context", {"label": "knowledge", "query": "elephants"}) == (
        "No results found."
    )
    assert run("search_context", {"label": "knowledge", "query": "  "}) == "No results found."
    assert run("search_context", {"label": "soul", "query": "x"}) == (
        'Error: "soul" is not searchable. Searchable blocks: knowledge'
    )


def test_updating_an_entry_replaces_it_in_the_index(store: Sessions) -> None:
    provider = StoreSearchProvider(store, "kb")
    provider.set("k1", "alpha bravo")
    provider.set("k2", "charlie")
    assert provider.search("alpha") == "[k1]\nalpha bravo"
    provider.set("k1", "delta echo")
    assert provider.search("alpha") is None
    assert provider.search("echo") == "[k1]\ndelta echo"
    assert provider.get() == "2 entries indexed."
    assert StoreSearchProvider(store, "other").get() is None
    assert StoreSearchProvider(store, "other").search("echo") is None
    with pytest.raises(ValueError, match="reserved"):
        provider.set("compaction_x", "y")


def test_search_matches_all_words_in_any_order(store: Sessions) -> None:
    provider = StoreSearchProvider(store, "kb", limit=3)
    provider.set("a", "the quick brown fox")
    provider.set("b", "brown bears are quick")
    provider.set("c", "a quick test")
    provider.set("d", "brown paper")
    assert provider.search("quick brown") == (
        "[a]\nthe quick brown fox\n\n[b]\nbrown bears are quick"
    )
    assert (provider.search("quick") or "").count("[") == 3  # limit=3 of 3 hits
    assert provider.search("brown quick") == provider.search("quick brown")


def test_entries_do_not_appear_in_the_conversation(store: Sessions) -> None:
    context = Context(store.session()).with_context(
        "knowledge", provider=StoreSearchProvider(store)
    ).with_context("memory")
    context.execute("set_context", {"label": "knowledge", "content": "zebra facts"})
    context.execute("set_context", {"label": "memory", "content": "zebra memory"})
    assert store.session().get_history() == []
    assert store.session().search("zebra") == []
    # Block text is not in the message index; search entries are, in their reserved session,
    # which cross-session search leaves out (convostore's own sessions are not conversations).
    assert store.search("zebra") == []
    assert [h.content for h in store.session(SEARCH_PREFIX + "knowledge").search("zebra")] == [
        "zebra facts"]


# --- skills (§11.9 skills.test.ts) -----------------------------------------------------------


def write_skill(root: Path, key: str, body: str, description: str | None = None) -> None:
    file = root.joinpath(*key.split("/")).with_suffix(".md")
    file.parent.mkdir(parents=True, exist_ok=True)
    head = f"---\ndescription: {description}\n---\n" if description else ""
    file.write_text(head + body, encoding="utf-8")


class CountingDirectory(DirectorySkillProvider):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads: list[str] = []

    def _read(self, file: Path) -> str:
        self.reads.append(file.name)
        return super()._read(file)


def test_directory_skills_list_load_and_allow_list(tmp_path: Path) -> None:
    write_skill(tmp_path, "pirate", "Arr!", "Talk like a pirate")
    write_skill(tmp_path, "tools/git", "Use git.", "Git help")
    write_skill(tmp_path, "secret", "Do not show")
    (tmp_path / "notes.txt").write_text("not a skill")
    every = DirectorySkillProvider(tmp_path)
    assert every.get() == "- pirate: Talk like a pirate\n- secret\n- tools/git: Git help"
    assert DirectorySkillProvider(tmp_path, keys=[]).get() == every.get()
    assert every.load("tools/git") == "Use git."
    assert every.load("missing") is None
    assert every.load("../etc/passwd") is None
    allowed = CountingDirectory(tmp_path, keys=["pirate", "tools/git"])
    assert allowed.get() == "- pirate: Talk like a pirate\n- tools/git: Git help"
    allowed.reads.clear()
    assert allowed.load("secret") is None
    assert allowed.reads == []  # a disallowed key is never read
    allowed.set("secret2", "written anyway", "desc")  # set ignores the allow-list
    assert every.load("secret2") == "written anyway"
    assert DirectorySkillProvider(tmp_path / "absent").get() is None
    with pytest.raises(ValueError, match="invalid skill key"):
        every.set("../escape", "x")


def test_directory_skills_round_trip_front_matter_lookalikes(tmp_path: Path) -> None:
    skills = DirectorySkillProvider(tmp_path)
    skills.set("doc", "---\ntitle: mine\n---\nbody")
    assert skills.load("doc") == "---\ntitle: mine\n---\nbody"
    skills.set("multi", "text", "line one\nline two")
    assert skills.get() == "- doc\n- multi: line one line two"


def test_directory_skills_read_only_valid_keys_inside_the_directory(
    store: Sessions, tmp_path: Path
) -> None:
    # Issue 18 item 13: a long key raised OSError, hidden keys loaded, the reply showed the path.
    root = tmp_path / "skills"
    write_skill(root, "pirate", "Arr!", "Talk like a pirate")
    write_skill(root, ".secret", "hidden file")
    write_skill(root, "tools/.hidden", "hidden too")
    write_skill(root, ".dir/inner", "in a hidden directory")
    write_skill(tmp_path, "outside", "not a skill")
    write_skill(tmp_path, "elsewhere/inner", "not a skill either")
    (root / "link.md").symlink_to(tmp_path / "outside.md")
    (root / "linked").symlink_to(tmp_path / "elsewhere")
    skills = DirectorySkillProvider(root)
    assert skills.get() == "- pirate: Talk like a pirate"
    context = Context(store.session()).with_context("skills", provider=skills)
    outside = str(tmp_path / "outside")
    for key in ["x" * 300, "/".join(["d" * 200] * 30), ".secret", "tools/.hidden",
                ".dir/inner", "link", "linked/inner", "../outside", outside, outside[1:] + "/..",
                "pirate\x00", "pirate\n", "\udc80", "."]:
        assert skills.load(key) is None, key
        reply = context.execute("load_context", {"label": "skills", "key": key})
        assert reply == f"Not found: {key}"
    assert context.execute("load_context", {"label": "skills", "key": "pirate"}) == "Arr!"
    for key in [".secret", "x" * 300, "a\nb", "../x", "/abs", "linked/new", "a/./b", "\udc80"]:
        with pytest.raises(ValueError, match="invalid skill key"):
            skills.set(key, "x")
    with pytest.raises(TypeError, match="skill key must be a string"):
        skills.set(3, "x")  # type: ignore[arg-type]
    assert not (tmp_path / "elsewhere" / "new.md").exists()


def test_directory_skill_errors_name_the_key_not_the_path(store: Sessions, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    (root / "pirate-style.md").mkdir(parents=True)  # a directory where the file would go
    skills = DirectorySkillProvider(root)
    context = Context(store.session()).with_context("skills", provider=skills)
    reply = context.execute("set_context", {"label": "skills", "content": "Arr!",
                                            "metadata": {"title": "Pirate Style"}})
    assert reply.startswith("Error: ") and "skill 'pirate-style' cannot be written" in reply
    assert str(tmp_path) not in reply
    with pytest.raises(OSError, match="skill 'pirate-style' cannot be written") as caught:
        skills.set("pirate-style", "Arr!")
    assert str(tmp_path) not in str(caught.value)
    (root / "latin.md").write_bytes(b"\xff\xfe not UTF-8")
    reply = context.execute("load_context", {"label": "skills", "key": "latin"})
    assert reply == "Error: skill 'latin' is not UTF-8 text"
    with pytest.raises(ValueError, match="must not hold"):
        DirectorySkillProvider(root, suffix="/../x.md")


def test_skill_tools_follow_the_providers(store: Sessions) -> None:
    readonly = Context(store.session()).with_context("skills", provider=Skills({"a": "A"}))
    assert names(readonly.tools()) == ["load_context", "unload_context"]
    assert "SKILLS [loadable]" in readonly.freeze_system_prompt()
    writable = Context(store.session()).with_context("skills", provider=WritableSkills())
    assert names(writable.tools()) == ["set_context", "load_context", "unload_context"]
    plain = Context(store.session()).with_context("soul", provider=Static(SOUL))
    assert "SOUL [readonly]" in plain.freeze_system_prompt()
    assert "load_context" not in names(plain.tools())


def test_load_context_by_key(store: Sessions) -> None:
    skills = Skills({"api-ref": "The API.", "guide": "The guide."})
    context = (
        Context(store.session())
        .with_context("soul", provider=Static(SOUL))
        .with_context("skills", provider=skills)
    )
    assert context.execute("load_context", {"label": "skills", "key": "api-ref"}) == "The API."
    assert context.execute("load_context", {"label": "skills", "key": "nope"}) == "Not found: nope"
    assert context.execute("load_context", {"label": "soul", "key": "x"}) == (
        'Error: "soul" is not a skill block. Skill blocks: skills'
    )
    assert context.get_loaded_skill_keys() == {"skills:api-ref"}
    assert context.load_skill("skills", "guide") == "The guide."
    assert context.get_loaded_skill_keys() == {"skills:api-ref", "skills:guide"}


def test_set_context_writes_skills_with_keys(store: Sessions, tmp_path: Path) -> None:
    skills = DirectorySkillProvider(tmp_path)
    context = (
        Context(store.session())
        .with_context("memory", provider=Memory())
        .with_context("skills", provider=skills)
        .with_context("fixed", provider=Skills({"x": "y"}))
    )
    run = context.execute
    assert run("set_context", {"label": "memory", "content": "regular"}).startswith(
        "Written to memory."
    )
    assert run("set_context", {"label": "skills", "content": "Arr!", "metadata": {
        "title": "Pirate Style", "description": "Talk like a pirate"}}) == (
        'Indexed "pirate-style" in skills.'
    )
    assert run("set_context", {"label": "skills", "content": "No key given!"}) == (
        f'Indexed "no-key-given-{short_hash("No key given!")}" in skills.'
    )
    assert run("set_context", {"label": "skills", "content": "Just content no desc"}) == (
        'Indexed "just-content-no-desc-tcqrs2" in skills.'
    )
    assert run("set_context", {"label": "skills", "content": "日本語のテキスト"}) == (
        'Indexed "entry-18pykd8" in skills.'
    )
    assert run("set_context", {"label": "skills", "content": "x", "metadata": {"title": "日本"}}) \
        == f'Indexed "entry-{short_hash("日本")}" in skills.'
    assert run("set_context", {"label": "skills", "content": "Titled",
                               "metadata": {"title": "Just Title"}}) == (
        'Indexed "just-title" in skills.'
    )
    assert run("set_context", {"label": "fixed", "content": "z"}) == (
        'Error: Block "fixed" is readonly'
    )
    listing = context.get_context_block("skills").content  # type: ignore[union-attr]
    assert listing.split("\n") == [
        "- entry-18pykd8",
        "- entry-qmsg4k: 日本",
        "- just-content-no-desc-tcqrs2",
        "- just-title: Just Title",
        f"- no-key-given-{short_hash('No key given!')}",
        "- pirate-style: Talk like a pirate",
    ]
    assert skills.load("pirate-style") == "Arr!"


def test_entry_keys() -> None:
    shared = "The same first sixty characters of a long document about one thing"
    a, b = entry_key(shared + " ending A"), entry_key(shared + " ending B")
    assert a != b and a.rsplit("-", 1)[0] == b.rsplit("-", 1)[0] == slugify(shared)
    assert len(slugify(shared)) <= 60
    assert entry_key("anything", "  ") == entry_key("anything")
    assert entry_key("", None) == f"entry-{short_hash('')}" == "entry-ztntfp"
    assert short_hash("hello") == "m3bicr"  # the reference's FNV-1a/base36, checked in node
    assert slugify("a😀b") == "a-b" and short_hash("a😀b") == "13waept"


def test_unload_tracking_and_history_rewrite(store: Sessions) -> None:
    session = store.session()
    skills = Skills({"pirate": "Arr!", "guide": "The guide."})
    unloads: list[tuple[str, str]] = []
    context = (
        Context(session)
        .with_context("skills", provider=skills)
        .on_skill_unload(lambda label, key: unloads.append((label, key)))
    )
    model = ScriptedModel([
        [("load_context", {"label": "skills", "key": "pirate"})],
        [("load_context", {"label": "skills", "key": "pirate"}),
         ("load_context", {"label": "skills", "key": "guide"})],
    ])
    agent_turn(session, context, model, 1, "load it")
    agent_turn(session, context, model, 2, "again", typed=False)
    unload = tool(context.tools(), "unload_context").description
    assert unload.endswith(" Currently loaded: skills:pirate, skills:guide.")
    assert context.execute("unload_context", {"label": "skills", "key": "pirate"}) == (
        'Unloaded "pirate" from skills. Context reclaimed.'
    )
    assert unloads == [("skills", "pirate")]
    newest, older = session.get_message("a2"), session.get_message("a1")
    assert newest is not None and older is not None
    assert [p.get("output") for p in newest["parts"]] == [
        None, "[skill unloaded: pirate]", "The guide.", None
    ]
    assert older["parts"][1]["output"] == "Arr!"  # only the newest load is rewritten
    assert context.execute("unload_context", {"label": "skills", "key": "pirate"}) == (
        'Skill "pirate" is not currently loaded in "skills".'
    )
    assert context.unload_skill("skills", "pirate") is False
    assert unloads == [("skills", "pirate")]
    assert tool(context.tools(), "unload_context").description.endswith(
        " Currently loaded: skills:guide."
    )
    assert context.execute("load_context", {"label": "skills", "key": "pirate"}) == "Arr!"
    assert context.get_loaded_skill_keys() == {"skills:guide", "skills:pirate"}
    context.clear_skill_state()
    assert context.get_loaded_skill_keys() == set()
    assert tool(context.tools(), "unload_context").description.endswith(
        " No skills currently loaded."
    )
    assert context.execute("unload_context", {"label": "memory", "key": "x"}) == (
        'Error: "memory" is not a skill block. Skill blocks: skills'
    )


class CountingSession:
    """Delegates to a real session handle, counting the reads the context makes."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if callable(value) and not name.startswith("_"):
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls[name] = self.calls.get(name, 0) + 1
                return value(*args, **kwargs)
            return counted
        return value


def test_loaded_skills_are_restored_from_history(store: Sessions) -> None:
    session = store.session("restore")
    skills = Skills({"pirate": "Arr!", "guide": "The guide.", "gone": "x"})
    context = Context(session).with_context("skills", provider=skills)
    model = ScriptedModel([
        [("load_context", {"label": "skills", "key": "pirate"}),
         ("load_context", {"label": "skills", "key": "missing"})],
        [("load_context", {"label": "skills", "key": "guide"}),
         ("load_context", {"label": "skills", "key": "gone"})],
        [("unload_context", {"label": "skills", "key": "gone"})],
    ])
    agent_turn(session, context, model, 1, "one")
    agent_turn(session, context, model, 2, "two", typed=False)
    context.unload_skill("skills", "guide")  # rewrites the output in a2
    agent_turn(session, context, model, 3, "three")
    assert context.get_loaded_skill_keys() == {"skills:pirate"}
    counting = CountingSession(session)
    restarted = Context(counting).with_context("skills", provider=skills)  # type: ignore[arg-type]
    assert restarted.get_loaded_skill_keys() == {"skills:pirate"}
    assert counting.calls == {"history": 1}
    assert restarted.execute("unload_context", {"label": "skills", "key": "pirate"}) == (
        'Unloaded "pirate" from skills. Context reclaimed.'
    )


def test_restore_scan_only_with_skill_blocks(store: Sessions) -> None:
    session = store.session()
    session.append_message({"id": "a1", "role": "assistant", "parts": [
        {"type": "tool-load_context", "toolCallId": "c1", "state": "output-available",
         "input": {"label": "skills", "key": "pirate"}, "output": "Arr!"}]})
    counting = CountingSession(session)
    context = Context(counting).with_context("memory", provider=Memory())  # type: ignore[arg-type]
    context.freeze_system_prompt()
    assert context.get_loaded_skill_keys() == set()
    assert "history" not in counting.calls
    context.add_context("skills", provider=Skills({"pirate": "Arr!"}))  # first skill block
    assert counting.calls.get("history") == 1
    assert context.get_loaded_skill_keys() == {"skills:pirate"}
    context.add_context("more", provider=Skills())
    assert counting.calls.get("history") == 1
    assert context.remove_context("skills") is True
    assert context.get_loaded_skill_keys() == set()
    assert session.get_message("a1")["parts"][0]["output"] == "Arr!"  # type: ignore[index]


# --- init lifecycle (§11.9 init-lifecycle.test.ts) --------------------------------------------


class Recorder:
    """Records init/get calls of every kind of provider."""

    def __init__(self, log: list[str], kind: str) -> None:
        self.log, self.kind, self.label = log, kind, "?"

    def init(self, label: str) -> None:
        self.label = label
        self.log.append(f"init:{label}")

    def get(self) -> str | None:
        self.log.append(f"get:{self.label}")
        return f"content of {self.label}"


class RecordingWritable(Recorder):
    def set(self, content: str) -> None:
        self.log.append(f"set:{self.label}")


class RecordingSkill(Recorder):
    def load(self, key: str) -> str | None:
        return f"{self.label}/{key}"


class RecordingSearch(Recorder):
    def search(self, query: str) -> str | None:
        return f"{self.label}?{query}"


def test_init_gets_the_label_before_get_once_per_load(store: Sessions) -> None:
    log: list[str] = []
    context = (
        Context(store.session())
        .with_context("soul", provider=Recorder(log, "readonly"))
        .with_context("memory", provider=RecordingWritable(log, "writable"))
        .with_context("skills", provider=RecordingSkill(log, "skill"))
        .with_context("kb", provider=RecordingSearch(log, "search"))
        .with_context("plain", provider=Static("no init"))
    )
    context.tools()
    context.execute("set_context", {"label": "memory", "content": "x"})
    context.execute("load_context", {"label": "skills", "key": "k"})
    assert context.execute("search_context", {"label": "kb", "query": "q"}) == "kb?q"
    assert log == [
        "init:soul", "get:soul", "init:memory", "get:memory", "init:skills", "get:skills",
        "init:kb", "get:kb", "set:memory",
    ]
    assert "content of skills" in context.freeze_system_prompt()
    log.clear()
    context.refresh_system_prompt()
    assert log == ["init:soul", "get:soul", "init:memory", "get:memory", "init:skills",
                   "get:skills", "init:kb", "get:kb"]


def test_search_provider_indexes_under_its_init_label(store: Sessions) -> None:
    shared = StoreSearchProvider(store)
    context = Context(store.session()).with_context("facts", provider=shared)
    context.execute("set_context", {"label": "facts", "content": "water boils at 100C",
                                    "metadata": {"title": "boiling"}})
    assert shared.label == "facts"
    assert StoreSearchProvider(store, "facts").search("boils") == "[boiling]\nwater boils at 100C"
    assert store.session(SEARCH_PREFIX + "facts").get_message("boiling") is not None
    with pytest.raises(ValueError, match="needs a label"):
        StoreSearchProvider(store).get()

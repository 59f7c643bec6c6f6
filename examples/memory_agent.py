"""An agent that edits its own memory through tools, with a scripted model, fully offline.

The "model" is a script of tool calls. Each turn the loop gives it the frozen system prompt, the
history and the tool definitions (OpenAI format), runs the calls it makes with
``context.execute`` and stores the assistant message with its tool parts. Over three turns the
model writes a memory, adds and searches knowledge, and loads a skill; then the loop refreshes
the prompt and prints it, reopens the database as a restarted process would, and shows that the
prompt and the loaded skill come back.

Run: ``python examples/memory_agent.py``
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from convostore import Session, Sessions
from convostore.context import (
    Context,
    DirectorySkillProvider,
    StoreSearchProvider,
    to_openai_tools,
)

ToolCall = tuple[str, dict[str, Any]]


class Soul:
    """A read-only block: the agent's identity."""

    def get(self) -> str:
        return "You are Quill, a concise assistant for a small software team."


class ScriptedModel:
    """Stands in for an LLM: returns the next scripted list of tool calls."""

    def __init__(self, turns: list[list[ToolCall]]) -> None:
        self.turns = list(turns)

    def complete(
        self, system: str, history: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> list[ToolCall]:
        offered = {t["function"]["name"] for t in tools}
        calls = self.turns.pop(0)
        assert all(name in offered for name, _ in calls), "the script used an absent tool"
        return calls


SCRIPT: list[list[ToolCall]] = [
    [
        ("set_context", {"label": "memory", "content": "The user is Ada; she deploys on Fridays."}),
        ("set_context", {
            "label": "knowledge",
            "content": "Rollbacks: run `make rollback ENV=prod`, then post in #ops.",
            "metadata": {"title": "Rollback procedure"},
        }),
    ],
    [
        ("search_context", {"label": "knowledge", "query": "rollback prod"}),
        ("load_context", {"label": "skills", "key": "release-notes"}),
    ],
    [
        ("set_context", {
            "label": "memory", "content": "Ada prefers bullet points.", "action": "append",
        }),
    ],
]

USER_TURNS = [
    "Hi, I'm Ada. I deploy on Fridays. Remember how we roll back: make rollback ENV=prod.",
    "Prod is broken, how do I roll back? Also draft release notes.",
    "Keep it to bullet points from now on.",
]


def build_context(store: Sessions, session: Session, skills_dir: Path) -> Context:
    return (
        Context(session)
        .with_context("soul", provider=Soul())
        .with_context("memory", description="Learned facts about the user", max_tokens=1100)
        .with_context("skills", provider=DirectorySkillProvider(skills_dir))
        .with_context("knowledge", description="Team runbooks",
                      provider=StoreSearchProvider(store))
        .with_cached_prompt()
    )


def turn(session: Session, context: Context, model: ScriptedModel, n: int, user: str) -> None:
    session.append_message({"id": f"u{n}", "role": "user",
                            "parts": [{"type": "text", "text": user}]})
    calls = model.complete(
        context.freeze_system_prompt(),
        session.get_recent_history(1024 * 1024).messages,
        to_openai_tools(context.tools()),
    )
    parts: list[dict[str, Any]] = [{"type": "step-start"}]
    print(f"\n--- turn {n}: {user}")
    for i, (name, arguments) in enumerate(calls):
        output = context.execute(name, json.dumps(arguments))
        print(f"{name}({json.dumps(arguments)})\n  -> {output}")
        parts.append({"type": f"tool-{name}", "toolCallId": f"call_{n}_{i}",
                      "state": "output-available", "input": arguments, "output": output})
    session.append_message({"id": f"a{n}", "role": "assistant", "parts": parts})


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        skills_dir = root / "skills"
        DirectorySkillProvider(skills_dir).set(
            "release-notes",
            "Write release notes as: Highlights, Fixes, Upgrade steps. One line per item.",
            "How to write release notes",
        )
        db = root / "agent.db"

        with Sessions.open(db) as store:
            session = store.session("ada")
            context = build_context(store, session, skills_dir)
            model = ScriptedModel(SCRIPT)
            for n, user in enumerate(USER_TURNS, start=1):
                turn(session, context, model, n, user)
            print("\nloaded skills:", sorted(context.get_loaded_skill_keys()))
            prompt = context.refresh_system_prompt()
            print("\n=== system prompt after refresh ===")
            print(prompt)

        # A restarted process: the cached prompt and the loaded skill come back from the file.
        with Sessions.open(db) as store:
            session = store.session("ada")
            context = build_context(store, session, skills_dir)
            assert context.freeze_system_prompt() == prompt
            print("\nafter restart: same prompt; loaded skills:",
                  sorted(context.get_loaded_skill_keys()))
            print("estimate (history + prompt):", context.token_estimate(), "tokens")


if __name__ == "__main__":
    main()

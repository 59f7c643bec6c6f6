"""Fake providers and a compaction recorder shared by the ``convostore.context`` test modules."""

from __future__ import annotations

from typing import Any

SOUL = "You are a helpful assistant."


class Static:
    """A read-only provider."""

    def __init__(self, content: str | None) -> None:
        self.content = content

    def get(self) -> str | None:
        return self.content


class Memory:
    """A writable provider kept in a Python attribute; ``writes`` records each ``set``."""

    def __init__(self, content: str | None = None) -> None:
        self.content = content
        self.writes: list[str] = []

    def get(self) -> str | None:
        return self.content

    def set(self, content: str) -> None:
        self.content = content
        self.writes.append(content)


class Skills:
    """A read-only skill provider kept in a dict (see WritableSkills)."""

    def __init__(self, docs: dict[str, str] | None = None) -> None:
        self.docs = dict(docs or {})
        self.descriptions: dict[str, str] = {}

    def get(self) -> str | None:
        lines = [
            f"- {k}: {self.descriptions[k]}" if k in self.descriptions else f"- {k}"
            for k in self.docs
        ]
        return "\n".join(lines) or None

    def load(self, key: str) -> str | None:
        return self.docs.get(key)


class WritableSkills(Skills):
    """A skill provider the model may add documents to."""

    def set(self, key: str, content: str, description: str | None = None) -> None:
        self.docs[key] = content
        if description:
            self.descriptions[key] = description


def record_compactions(session: Any) -> list[int]:
    """Register a compaction function on ``session`` (sync or async handle) that summarises the
    whole span it is given; returns the list each call appends its message count to.
    """
    calls: list[int] = []

    def compact(messages: list[dict[str, Any]]) -> dict[str, str]:
        calls.append(len(messages))
        return {
            "from_message_id": messages[0]["id"],
            "to_message_id": messages[-1]["id"],
            "summary": "summary",
        }

    session.on_compaction(compact)
    return calls

"""Small builders shared by the test modules."""

from __future__ import annotations

from typing import Any


def text(id: str, body: str, role: str = "user") -> dict[str, Any]:
    """A message with one text part."""
    return {"id": id, "role": role, "parts": [{"type": "text", "text": body}]}


def ids(messages: list[dict[str, Any]]) -> list[str]:
    """The ids of ``messages``, in order."""
    return [m["id"] for m in messages]

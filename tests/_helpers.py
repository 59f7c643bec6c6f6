"""Small builders shared by the test modules."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def text(id: str, body: str, role: str = "user") -> dict[str, Any]:
    """A message with one text part."""
    return {"id": id, "role": role, "parts": [{"type": "text", "text": body}]}


def ids(messages: Iterable[dict[str, Any]]) -> list[str]:
    """The ids of ``messages``, in order."""
    return [m["id"] for m in messages]


# A tree as schema version 2 stored it (every row in the full parent index): a, its children
# b and b2, and c under b. Rows are (id, seq, parent_id, content).
V2_TREE_ROWS = [
    (mid, seq, up, json.dumps({"id": mid, "role": "user", "parts": []}))
    for seq, (mid, up) in enumerate([("a", None), ("b", "a"), ("c", "b"), ("b2", "a")], 1)
]


def check_v2_tree_after_migration(s: Any) -> None:
    """Rows written before the migration and after it are found as children alike, through
    appends (chained), branches and the splices of deletes."""
    assert ids(s.get_branches("a")) == ["b", "b2"]
    s.append_message(text("d", "after"))  # a plain append under b2
    s.append_message(text("e", "after"), parent_id="b")
    assert ids(s.get_branches("b2")) == ["d"]
    assert ids(s.get_branches("b")) == ["c", "e"]
    s.delete_messages(["b"])
    assert ids(s.get_branches("a")) == ["c", "b2", "e"]
    s.delete_messages(["b2"])
    assert ids(s.get_branches("a")) == ["c", "d", "e"]
    assert ids(s.get_history()) == ["a", "e"]

"""The text the full-text index holds for a message, computed above the engines.

Always the message's ``text`` parts (:func:`convostore.codec.message_text`). With the store
option ``search_tool_output=True``, also its tool results: the ``output`` of each tool part
whose call returned (its text, or the strings and numbers of a JSON output) and the
``errorText`` of one that failed. Both engines index what this module returns, for messages
written through any API or integration, and the backfill uses it too.

The index keeps no copy of this text: a hit's text is computed again from the stored message,
and SQLite's contentless index removes an entry by naming the words it was indexed with,
computed here again from the stored message. So what this returns for a stored message must
not change while an index exists: a change needs a schema step that drops the index (as
version 8 does), so that the next search builds it again.
"""

from __future__ import annotations

from typing import Any

from .. import codec
from ..limits import unsafe_to_spaces
from ..model import Message, is_tool_type

_SKIPPED_KEYS = frozenset({"type"})
"""Keys whose values are the output's structure, not its content (``"type": "input_text"``)."""
_SKIPPED_PREFIXES = ("data:", "attachment:")
"""Strings that are payloads or references, not words."""


def index_text(message: Message, *, tool_output: bool) -> str:
    """The searchable text of a message: its text parts, then (``tool_output``) its tool
    results, joined by one space."""
    text = codec.message_text(message)
    if not tool_output:
        return text
    results = tool_output_text(message)
    if not results:
        return text
    return f"{text} {results}" if text else results


def tool_output_text(message: Message) -> str:
    """The text of a message's tool results: outputs and error texts, in part order."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return ""
    texts: list[str] = []
    for part in parts:
        if not isinstance(part, dict) or not is_tool_type(part.get("type")):
            continue
        state = part.get("state")
        if state == "output-available" and "output" in part:
            _words(part["output"], texts)
        elif state == "output-error" and isinstance(part.get("errorText"), str):
            texts.append(part["errorText"])
    return unsafe_to_spaces(" ".join(t for t in texts if t))


def _words(value: Any, out: list[str]) -> None:
    """Append the strings and numbers of a JSON value, depth first, without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.startswith(_SKIPPED_PREFIXES):
                out.append(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, (int, float)):
            out.append(str(item))
        elif isinstance(item, dict):
            stack.extend(v for k, v in reversed(item.items()) if k not in _SKIPPED_KEYS)
        elif isinstance(item, list):
            stack.extend(reversed(item))

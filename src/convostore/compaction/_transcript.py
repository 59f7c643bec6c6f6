"""Transcript fixers for what you send to a model: tool calls and results a cut separated
(:func:`sanitize_tool_pairs`), and long outputs and texts of older messages shortened
(:func:`truncate_older_messages`). Stored messages are never changed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import _parts
from ..model import Message
from ._boundaries import get_tool_call_ids, is_tool_part
from ._prompt import json_text

STUB_RESULT_NOTE = "[Result omitted: this call belongs to the summarised part of the conversation]"
"""The ``result`` of a stub added by :func:`sanitize_tool_pairs` for a call that lost its result."""

_TRUNCATED_MARKER = "... [truncated {} chars]"
_MAX_DEPTH = 8
_MIN_CHILD_CHARS = 64
_MAX_CHILD_SHARES = 10


def _result_call_id(part: object) -> str | None:
    # The call id of a tool part that carries a result (has an "output" key), else None.
    if is_tool_part(part) and "output" in part:
        call_id = part.get("toolCallId")
        if isinstance(call_id, str):
            return call_id
    return None


def sanitize_tool_pairs(messages: Sequence[Message]) -> list[Message]:
    """Repair tool calls and results that a cut (or a compaction) separated.

    A call is a tool part with a ``toolCallId`` in an assistant message; a result is a tool part
    with both a ``toolCallId`` and an ``output`` key, in any message. Results whose call is gone
    are removed. For each call without a result, a stub assistant message is inserted right after
    the calling message (once per call id)::

        {"id": "stub-<callId>", "role": "assistant", "parts": [{"type": "tool-result",
         "toolCallId": "<callId>", "toolName": "<the call's toolName or 'unknown'>",
         "result": STUB_RESULT_NOTE}]}

    Finally messages left without parts are dropped. The input is not modified: the list is new,
    a message that changes is a new dict, and untouched messages are the same objects.

    :param messages: the messages, oldest first.
    :return: the repaired messages.
    """
    call_ids: set[str] = set()
    result_ids: set[str] = set()
    for message in messages:
        if message.get("role") == "assistant":
            call_ids |= get_tool_call_ids(message)
        for part in _parts.parts(message):
            call_id = _result_call_id(part)
            if call_id is not None:
                result_ids.add(call_id)
    orphaned = result_ids - call_ids
    missing = call_ids - result_ids

    repaired: list[Message] = []
    for message in messages:
        if orphaned:
            parts = _parts.parts(message)
            kept = [part for part in parts if _result_call_id(part) not in orphaned]
            if len(kept) != len(parts):
                message = {**message, "parts": kept}
        repaired.append(message)
        if missing and message.get("role") == "assistant":
            for part in _parts.parts(message):
                if not is_tool_part(part):
                    continue
                call_id = part.get("toolCallId")
                if not isinstance(call_id, str) or call_id not in missing:
                    continue
                missing.discard(call_id)
                name = part.get("toolName")
                repaired.append(
                    {
                        "id": f"stub-{call_id}",
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool-result",
                                "toolCallId": call_id,
                                "toolName": name if isinstance(name, str) else "unknown",
                                "result": STUB_RESULT_NOTE,
                            }
                        ],
                    }
                )
    return [message for message in repaired if _parts.parts(message)]


def _measure(value: object) -> int:
    return len(value) if isinstance(value, str) else len(json_text(value))


def _cut_string(text: str, limit: int) -> str:
    return text[: max(limit, 0)] + _TRUNCATED_MARKER.format(len(text))


def _list_marker(dropped: int, size: int) -> str:
    return f"... [{dropped} more items, truncated {size} chars]"


def _shrink(value: object, limit: int, depth: int) -> object:
    # Shape-preserving truncation: strings are cut, lists lose their tail (a marker string says
    # how much went), dicts keep every key with smaller values. Values already within the limit
    # are returned as they are (never copied, never modified).
    if isinstance(value, str):
        return value if len(value) <= limit else _cut_string(value, limit)
    if not isinstance(value, (dict, list)):
        return value
    size = _measure(value)
    if size <= limit:
        return value
    if depth >= _MAX_DEPTH:
        return "[nested output omitted" + _TRUNCATED_MARKER.format(size) + "]"
    count = len(value)
    share = limit if count <= 1 else max(_MIN_CHILD_CHARS, limit // min(count, _MAX_CHILD_SHARES))
    if isinstance(value, dict):
        return {key: _shrink(item, share, depth + 1) for key, item in value.items()}
    kept: list[object] = []
    used = 2  # the brackets
    reserve = len(_list_marker(count, size)) + 3  # room for the marker: quotes and a comma
    for index, item in enumerate(value):
        small = _shrink(item, share, depth + 1)
        cost = _measure(small) + (1 if kept else 0)
        if kept and used + cost + (reserve if index < count - 1 else 0) > limit:
            break
        kept.append(small)
        used += cost
    dropped = count - len(kept)
    if dropped:
        kept.append(_list_marker(dropped, size))
    return kept


def truncate_older_messages(
    messages: Sequence[Message],
    *,
    keep_recent: int = 4,
    max_tool_output_chars: int = 500,
    max_text_chars: int = 10_000,
) -> list[Message]:
    """Shorten long tool outputs and texts in all but the most recent messages.

    Meant for what you send to a model; stored messages are not affected. The last
    ``keep_recent`` messages are left alone. In older messages:

    - a ``text`` part longer than ``max_text_chars`` is cut to that many characters followed by
      ``... [truncated <original length> chars]``;
    - a tool part's ``output`` whose text (the string itself, or its compact JSON) is longer
      than ``max_tool_output_chars`` is truncated without changing its shape: a string stays a
      string (cut like a text part), a dict keeps all its keys with shortened values, a list
      keeps its first items plus a marker string giving the number of dropped items. The
      limit is shared among children (never less than 64 characters each), so a large
      structure may end up slightly over it.

    Lengths are counted in characters (code points). The input is not modified: the list is
    new, a message that changes is a new dict with new parts, untouched messages and parts are
    the same objects.

    :param messages: the messages, oldest first.
    :param keep_recent: how many of the newest messages stay intact.
    :param max_tool_output_chars: the length limit of an older tool output.
    :param max_text_chars: the length limit of an older text part.
    :return: the shortened messages.
    """
    keep_recent = max(keep_recent, 0)
    if len(messages) <= keep_recent:
        return list(messages)
    cutoff = len(messages) - keep_recent
    result: list[Message] = []
    for index, message in enumerate(messages):
        if index >= cutoff:
            result.append(message)
            continue
        changed = False
        new_parts: list[Any] = []
        for part in _parts.parts(message):
            if is_tool_part(part) and part.get("output") is not None:
                output = part["output"]
                if _measure(output) > max_tool_output_chars:
                    part = {**part, "output": _shrink(output, max_tool_output_chars, 0)}
                    changed = True
            elif isinstance(part, dict) and part.get("type") == "text":
                text = part.get("text")
                if isinstance(text, str) and len(text) > max_text_chars:
                    part = {**part, "text": _cut_string(text, max_text_chars)}
                    changed = True
            new_parts.append(part)
        result.append({**message, "parts": new_parts} if changed else message)
    return result

"""Which skills a conversation has loaded, as its history records them: the ``load_context``
and ``unload_context`` tool parts of assistant messages, folded into a set, and the rewrite of a
load's output when the skill is unloaded (so the document leaves the model's context)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..messages._parts import tool_name
from ._tools import LOAD_CONTEXT, UNLOAD_CONTEXT, UNLOADED_MARKER

_UNLOADED_PREFIX = "[skill unloaded:"


def _skill_input(part: Mapping[str, Any]) -> tuple[str, str] | None:
    value = part.get("input")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, dict):
        label, key = value.get("label"), value.get("key")
        if isinstance(label, str) and isinstance(key, str):
            return label, key
    return None


def fold_skill_events(message: Any, loaded: dict[str, None]) -> None:
    """Apply one history message's skill loads and unloads to ``loaded`` (``label:key`` keys).

    Looks at assistant messages' tool parts in state ``output-available`` named
    ``load_context`` or ``unload_context`` by a ``toolName`` field or a ``tool-<name>`` type. A
    load counts unless its output says it failed (``Not found: <key>``, ``Error: ...``) or was
    rewritten by an unload (``[skill unloaded: <key>]``, which removes it).
    """
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return
    parts = message.get("parts")
    if not isinstance(parts, list):
        return
    for part in parts:
        if not isinstance(part, dict) or part.get("state") != "output-available":
            continue
        name = tool_name(part, field_first=True)
        if name not in (LOAD_CONTEXT, UNLOAD_CONTEXT):
            continue
        target = _skill_input(part)
        if target is None:
            continue
        item = f"{target[0]}:{target[1]}"
        output = part.get("output")
        if name == UNLOAD_CONTEXT or (
            isinstance(output, str) and output.startswith(_UNLOADED_PREFIX)
        ):
            loaded.pop(item, None)
        elif isinstance(output, str) and (
            output == f"Not found: {target[1]}" or output.startswith("Error: ")
        ):
            continue
        else:
            loaded[item] = None


def unloaded_copy(message: Any, label: str, key: str) -> dict[str, Any] | None:
    """``message`` with its matching ``load_context`` outputs replaced by the unload marker.

    None when the message is not an assistant message holding such a part (one that is already
    unloaded does not count).
    """
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return None
    parts = message.get("parts")
    if not isinstance(parts, list):
        return None
    changed = False
    new_parts: list[Any] = []
    for part in parts:
        if (
            isinstance(part, dict)
            and part.get("state") == "output-available"
            and tool_name(part, field_first=True) == LOAD_CONTEXT
            and _skill_input(part) == (label, key)
            and not (
                isinstance(part.get("output"), str)
                and part["output"].startswith(_UNLOADED_PREFIX)
            )
        ):
            part = {**part, "output": UNLOADED_MARKER.format(key=key)}
            changed = True
        new_parts.append(part)
    if not changed:
        return None
    return {**message, "parts": new_parts}

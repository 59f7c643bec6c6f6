"""Rendering a recorded layout back: every hole filled with its part's current value.

:data:`RESOLVERS` gives, per hole kind, the function that reads a hole's value from its part;
a part that no longer fits raises :class:`~._parts.Mismatch`, and the message is then rendered
from its parts alone.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from ._layout import HOLE
from ._parts import JSON, Mismatch, Part, arguments, is_tool, name_of, split_data_url, tag


def _text(spec: dict[str, Any], part: Part) -> JSON:
    value = part["text"]
    if not isinstance(value, str):
        raise Mismatch
    return value


def _url(spec: dict[str, Any], part: Part) -> JSON:
    value = part["url"]
    if part.get("type") != "file" or not isinstance(value, str):
        raise Mismatch
    return value


def _b64(spec: dict[str, Any], part: Part) -> JSON:
    url = part.get("url")
    split = split_data_url(url) if isinstance(url, str) else None
    if split is None:
        raise Mismatch
    return split[1]


def _call_id(spec: dict[str, Any], part: Part) -> JSON:
    if not is_tool(part) or not isinstance(part.get("toolCallId"), str):
        raise Mismatch
    return part["toolCallId"]


def _input(spec: dict[str, Any], part: Part) -> JSON:
    if not is_tool(part):
        raise Mismatch
    return copy.deepcopy(part["input"])


def _output(spec: dict[str, Any], part: Part) -> JSON:
    if part.get("state") != "output-available":
        raise Mismatch
    return copy.deepcopy(part.get("output"))


def _error(spec: dict[str, Any], part: Part) -> JSON:
    text = part.get("errorText")
    if part.get("state") != "output-error" or not isinstance(text, str):
        raise Mismatch
    return json.loads(text) if spec.get("json") else text


def _tagged(key: str) -> Callable[[dict[str, Any], Part], JSON]:
    def resolve(spec: dict[str, Any], part: Part) -> JSON:
        found = tag(part)
        if found is None:
            raise Mismatch
        return copy.deepcopy(found[key])

    return resolve


RESOLVERS: dict[str, Callable[[dict[str, Any], Part], JSON]] = {
    "text": _text,
    "url": _url,
    "b64": _b64,
    "call_id": _call_id,
    "tool_name": lambda spec, part: name_of(part),
    "args": lambda spec, part: arguments(part),
    "input": _input,
    "output": _output,
    "error": _error,
    "item": _tagged("item"),  # a reasoning part's original item
    "raw": _tagged("value"),  # a raw part's original value
}
"""Hole kind -> the function giving a hole's value from its part (raising :class:`Mismatch`)."""


def _resolve(spec: dict[str, Any], part: Part) -> JSON:
    kind = spec[HOLE]
    resolver = RESOLVERS.get(kind) if isinstance(kind, str) else None
    if resolver is None:
        raise Mismatch
    try:
        return resolver(spec, part)
    except (KeyError, TypeError, ValueError) as exc:
        raise Mismatch from exc


def fill(template: JSON, parts: list[Part]) -> JSON:
    """The source layout with every hole replaced by its part's current value."""
    used: set[int] = set()

    def walk(value: JSON) -> JSON:
        if isinstance(value, dict):
            if HOLE in value:
                index = value.get("part")
                if not isinstance(index, int) or not 0 <= index < len(parts):
                    raise Mismatch
                used.add(index)
                return _resolve(value, parts[index])
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    out = walk(template)
    for i, part in enumerate(parts):
        if i not in used and part.get("type") != "step-start":
            raise Mismatch  # a part the layout does not know: render from the parts
    return out

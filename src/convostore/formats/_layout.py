"""Recording a source's layout while parsing it into UIMessages.

A :class:`Builder` groups source messages into UIMessages; each group records the source's
layout with *holes* (``{"$convostore": kind, "part": i}``) where a part's value goes, so that
rendering back (``_fill.py``) gives the source as it was while the parts still fit.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..messages._parts import DEFAULT_MEDIA_TYPE, compact_json
from ..model import Message
from ._parts import (
    JSON,
    KEY,
    Part,
    file_from_base64,
    file_from_url,
    guess_type,
    is_tool,
    text_part,
)

HOLE = "$convostore"
"""The key that marks a hole in a layout; its value is the hole's kind."""


def hole(kind: str, index: int, **options: Any) -> dict[str, Any]:
    """The layout placeholder for a value that part ``index`` holds (see :data:`RESOLVERS`)."""
    return {HOLE: kind, "part": index, **options}


def _pair_result(part: Part, output: JSON, *, error: bool = False) -> None:
    """Put a tool result into the call's part."""
    if error:
        part["state"] = "output-error"
        part["errorText"] = output if isinstance(output, str) else compact_json(output)
    else:
        part["state"] = "output-available"
        part["output"] = output


def _orphan_result(name: Any, call_id: Any, output: JSON, *, error: bool = False) -> Part:
    part: Part = {
        "type": "dynamic-tool",
        "toolName": name if isinstance(name, str) else "unknown",
        "toolCallId": call_id if isinstance(call_id, str) else "",
        "state": "input-available",
        "input": None,
    }
    _pair_result(part, output, error=error)
    return part


def file_data_hole(group: Group, data: str, filename: Any) -> dict[str, Any]:
    """A file part for a ``file_data`` value (a data URL, or bare base64 whose type the file
    name suggests); return the value's layout (a hole)."""
    if data.startswith("data:"):
        return hole("url", group.add(file_from_url(data, filename=filename)))
    mt = guess_type(filename, DEFAULT_MEDIA_TYPE)
    return hole("b64", group.add(file_from_base64(data, mt, filename)))


@dataclass
class Group:
    """The parts and source layout of one UIMessage being built."""

    role: str
    parts: list[Part] = field(default_factory=list)
    source: list[Any] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    last: str = ""  # "model" after a model turn, "results" after tool results

    def add(self, part: Part) -> int:
        """Append a part; return its index."""
        self.parts.append(part)
        if is_tool(part) and isinstance(part.get("toolCallId"), str):
            self.calls.setdefault(part["toolCallId"], len(self.parts) - 1)
        return len(self.parts) - 1


class Builder:
    """Groups source messages into UIMessages (one per input message, one per assistant turn)."""

    def __init__(self, format_name: str) -> None:
        self.format_name = format_name
        self.groups: list[Group] = []
        self.turn: Group | None = None  # the assistant turn results may still join

    def standalone(self, role: str) -> Group:
        """A new UIMessage of ``role`` that closes the open turn."""
        group = Group(role)
        self.groups.append(group)
        self.turn = None
        return group

    def model(self, *, new_message: bool) -> Group:
        """The group a model-side message joins: the open turn after results, else a new one.

        ``new_message``: the item opens a new model message (chat, Anthropic and pydantic-ai
        messages always do; Responses items continue the turn they follow).
        """
        turn = self.turn
        if turn is not None and (turn.last == "results" or not new_message):
            if turn.last == "results":
                turn.add({"type": "step-start"})
            turn.last = "model"
            return turn
        group = Group("assistant")
        group.add({"type": "step-start"})
        group.last = "model"
        self.groups.append(group)
        self.turn = group
        return group

    def call_index(self, call_id: Any) -> int | None:
        """Index of the open turn's part for a call, or None (results then stand alone)."""
        if self.turn is None or not isinstance(call_id, str):
            return None
        index = self.turn.calls.get(call_id)
        if index is None or self.turn.parts[index].get("type") == "dynamic-tool":
            return None
        return index

    def results(self) -> Group:
        """The group a message of tool results joins (the open turn, or a new assistant one)."""
        if self.turn is None:
            group = Group("assistant")
            self.groups.append(group)
            self.turn = group
        self.turn.last = "results"
        return self.turn

    def messages(self, extra: dict[str, Any] | None = None) -> list[Message]:
        """The UIMessages built, each with its layout under ``metadata.convostore``."""
        out: list[Message] = []
        for group in self.groups:
            layout: dict[str, Any] = {"format": self.format_name, "source": group.source}
            if extra:
                layout.update(extra)
            out.append({
                "id": uuid.uuid4().hex,
                "role": group.role,
                "parts": group.parts,
                "metadata": {KEY: layout},
            })
        return out


def content_layout(group: Group, content: Any, block: Callable[[Any], JSON]) -> JSON:
    """The layout of a message's ``content``: a string is one text part, a list is parsed by
    ``block`` one block at a time, anything else is kept as it is."""
    if isinstance(content, str):
        return hole("text", group.add(text_part(content)))
    if isinstance(content, list):
        return [block(item) for item in content]
    return content


def result_layout(
    b: Builder,
    group: Group,
    item: dict[str, Any],
    *,
    id_key: str,
    output_key: str,
    name: Any = None,
    error: bool = False,
) -> dict[str, Any]:
    """Put a tool result into its call's part in the open turn, or into a ``dynamic-tool`` part
    of ``group`` when the call is not there; return the item's layout.

    :param item: the source result: its call id is ``item[id_key]``, its output
        ``item[output_key]`` (an error text when ``error``).
    :param name: the tool name the source gives, for a result without its call.
    """
    call_id, output = item.get(id_key), item.get(output_key)
    index = b.call_index(call_id)
    if index is not None:
        _pair_result(group.parts[index], output, error=error)
    else:
        index = group.add(_orphan_result(name, call_id, output, error=error))
    layout = {**item, id_key: hole("call_id", index)}
    if output_key in item:
        layout[output_key] = (
            hole("error", index, json=not isinstance(output, str)) if error
            else hole("output", index)
        )
    return layout

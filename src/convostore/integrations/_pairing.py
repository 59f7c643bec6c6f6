"""Tool results paired with their call when the call was stored in an earlier message.

The Agents SDK adds a ``function_call_output`` item on its own, and pydantic-ai a tool return in
a request of its own; converted alone, such a result is a ``dynamic-tool`` part that knows its
call id and output, but not the call's ``input`` (nor, for the SDK, the tool's name), so
``convostore show`` printed ``tool unknown ... input null``. :func:`pair_results` finds the call
among the messages written with it, else in the newest stored messages of the branch, and copies
its name and input into the result part, naming the call's message under
``callProviderMetadata.convostore.callMessage``. The converters then render the part as that
call's result only (the call itself is rendered from its own message), and the part reads as a
complete tool invocation: name, input and output.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..formats import CALL_MESSAGE_KEY
from ..messages._parts import parts as parts_of
from ..messages._parts import tool_name
from ..model import Message, is_tool_type

LOOKBACK = 64
"""How many of the newest stored messages are searched for a call (a result follows its call
within a turn or two)."""


def _is_lone_result(part: Any) -> bool:
    return (
        isinstance(part, dict)
        and part.get("type") == "dynamic-tool"
        and part.get("input") is None
        and isinstance(part.get("toolCallId"), str)
        and part.get("state") in ("output-available", "output-error")
    )


def _is_call(part: Any) -> bool:
    return (
        isinstance(part, dict)
        and is_tool_type(part.get("type"))
        and isinstance(part.get("toolCallId"), str)
        and part.get("input") is not None
        and tool_name(part) is not None
    )


def pair_results(
    messages: Sequence[Message], stored: Callable[[], Iterable[Message]]
) -> None:
    """Give each lone result part of ``messages`` its call's name and input, in place.

    :param messages: the messages about to be written, oldest first.
    :param stored: the branch they extend, newest first (read only when a call is not among
        ``messages``; at most :data:`LOOKBACK` messages of it).
    """
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    waiting: list[dict[str, Any]] = []
    for message in messages:
        for part in parts_of(message):
            if _is_lone_result(part):
                found = calls.get(part["toolCallId"])
                if found is not None:
                    _pair(part, *found)
                else:
                    waiting.append(part)
            elif _is_call(part):
                calls.setdefault(part["toolCallId"], (str(message.get("id")), part))
    if not waiting:
        return
    earlier: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in itertools.islice(stored(), LOOKBACK):
        for part in parts_of(message):
            if _is_call(part) and not isinstance(_call_message(part), str):
                earlier.setdefault(part["toolCallId"], (str(message.get("id")), part))
        if all(p["toolCallId"] in earlier for p in waiting):
            break
    for part in waiting:
        found = earlier.get(part["toolCallId"])
        if found is not None:
            _pair(part, *found)


def _call_message(part: dict[str, Any]) -> Any:
    meta = part.get("callProviderMetadata")
    inner = meta.get("convostore") if isinstance(meta, dict) else None
    return inner.get(CALL_MESSAGE_KEY) if isinstance(inner, dict) else None


def _pair(part: dict[str, Any], message_id: str, call: dict[str, Any]) -> None:
    name = tool_name(call)
    if part.get("toolName") in (None, "", "unknown") and name is not None:
        part["toolName"] = name
    part["input"] = copy.deepcopy(call["input"])
    meta = part.get("callProviderMetadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    inner = meta.get("convostore")
    meta["convostore"] = {**(inner if isinstance(inner, dict) else {}),
                          CALL_MESSAGE_KEY: message_id}
    part["callProviderMetadata"] = meta

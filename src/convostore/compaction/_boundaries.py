"""Boundaries of a compaction range: which messages are calls, results and summaries, and where
a range may start and end without separating a tool call from its results.

Pure functions over an overlaid history (root to leaf); :mod:`convostore.compaction` re-exports
every public name here, which is where users import them from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeGuard

from ..messages import _parts
from ..model import Message, is_tool_type
from ..tokens import TokenCounter, estimate_message_tokens

COMPACTION_PREFIX = "compaction_"
"""Id prefix of the synthetic message that stands for a compaction overlay on read."""

MIN_TAIL_MESSAGES = 2
"""Messages at the end of the history that the reference function always keeps."""

DEFAULT_KEEP_RECENT_TOKENS = 20_000
"""Default token budget of the kept tail."""


# ── Compaction messages and tool parts ────────────────────────────────────────────────────────


def is_compaction_message(message: Message) -> bool:
    """Tell whether a message is the synthetic stand-in of a compaction overlay.

    :param message: a message of an overlaid history.
    :return: True when its id starts with :data:`COMPACTION_PREFIX`.
    """
    message_id = message.get("id")
    return isinstance(message_id, str) and message_id.startswith(COMPACTION_PREFIX)


def is_tool_part(part: object) -> TypeGuard[dict[str, Any]]:
    """Tell whether a message part is a tool invocation (``tool-<name>`` or ``dynamic-tool``).

    :param part: one element of a message's ``parts``.
    :return: True for a tool part.
    """
    return isinstance(part, dict) and is_tool_type(part.get("type"))


def has_tool_calls(message: Message) -> bool:
    """Tell whether any part of a message is a tool part.

    :param message: the message to inspect.
    :return: True when it has at least one tool part.
    """
    return any(is_tool_part(part) for part in _parts.parts(message))


def get_tool_call_ids(message: Message) -> set[str]:
    """Collect the ``toolCallId`` of every tool part of a message that has one.

    :param message: the message to inspect.
    :return: the call ids (string ids only).
    """
    ids: set[str] = set()
    for part in _parts.parts(message):
        if is_tool_part(part):
            call_id = part.get("toolCallId")
            if isinstance(call_id, str):
                ids.add(call_id)
    return ids


def is_tool_result_for(message: Message, call_ids: Iterable[str]) -> bool:
    """Tell whether a message carries a tool part answering one of the given calls.

    :param message: the message to inspect.
    :param call_ids: the call ids to look for.
    :return: True when one of its tool parts has a ``toolCallId`` in ``call_ids``.
    """
    wanted = call_ids if isinstance(call_ids, (set, frozenset)) else set(call_ids)
    for part in _parts.parts(message):
        if is_tool_part(part):
            call_id = part.get("toolCallId")
            if isinstance(call_id, str) and call_id in wanted:
                return True
    return False


def _is_calling_assistant(message: Message) -> bool:
    return message.get("role") == "assistant" and has_tool_calls(message)


# ── Boundaries ────────────────────────────────────────────────────────────────────────────────


def align_boundary_forward(messages: Sequence[Message], idx: int) -> int:
    """Move the start of a range forward past the results of a call made just before it.

    When ``messages[idx - 1]`` is an assistant message with tool calls, ``idx`` advances while
    ``messages[idx]`` carries results for those calls. An index at or outside the ends is
    returned as it is.

    :param messages: the history.
    :param idx: the candidate boundary (first index of the range).
    :return: the aligned boundary.
    """
    if idx <= 0 or idx >= len(messages):
        return idx
    previous = messages[idx - 1]
    if _is_calling_assistant(previous):
        call_ids = get_tool_call_ids(previous)
        while idx < len(messages) and is_tool_result_for(messages[idx], call_ids):
            idx += 1
    return idx


def align_boundary_backward(messages: Sequence[Message], idx: int) -> int:
    """Move the end of a range backward so a call stays with its results in the kept tail.

    While ``messages[idx]`` is not itself an assistant message with tool calls but answers the
    calls of ``messages[idx - 1]``, ``idx`` moves back by one. An index at or outside the ends is
    returned as it is.

    :param messages: the history.
    :param idx: the candidate boundary (first index of the kept tail).
    :return: the aligned boundary.
    """
    if idx <= 0 or idx >= len(messages):
        return idx
    while idx > 0:
        current = messages[idx]
        if _is_calling_assistant(current):
            break
        previous = messages[idx - 1]
        if _is_calling_assistant(previous) and is_tool_result_for(
            current, get_tool_call_ids(previous)
        ):
            idx -= 1
            continue
        break
    return idx


def find_tail_cut_by_tokens(
    messages: Sequence[Message],
    head_end: int,
    budget: float = DEFAULT_KEEP_RECENT_TOKENS,
    min_tail: int = MIN_TAIL_MESSAGES,
    token_counter: TokenCounter | None = None,
) -> int:
    """Find where the kept tail starts: a token budget walked back from the newest message.

    Messages are taken from the newest down to ``head_end`` while their estimates fit in
    ``budget``; the newest message is always taken. The tail is then widened to at least
    ``min_tail`` messages when that stays clear of the head, and aligned with
    :func:`align_boundary_backward`.

    :param messages: the history.
    :param head_end: index of the first message that may be summarised.
    :param budget: token budget of the tail.
    :param min_tail: the tail keeps at least this many messages (when the head allows).
    :param token_counter: counts strings instead of the built-in heuristic.
    :return: index of the first kept message; everything before it (from ``head_end``) may be
        summarised.
    """
    n = len(messages)
    accumulated = 0
    token_cut = n
    for i in range(n - 1, head_end - 1, -1):
        tokens = estimate_message_tokens((messages[i],), token_counter)
        if accumulated + tokens > budget and token_cut < n:
            break
        accumulated += tokens
        token_cut = i
    min_cut = n - min_tail
    cut = min(token_cut, min_cut) if min_cut >= head_end else token_cut
    return align_boundary_backward(messages, cut)

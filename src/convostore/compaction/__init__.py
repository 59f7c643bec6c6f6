"""Compaction helpers: the reference compact function and the pure pieces it is built from.

Nothing here touches storage. A *compaction function* receives the overlaid history of a branch
(root to leaf, earlier summaries shown as synthetic ``compaction_<id>`` messages) and returns the
range to summarise, as a :class:`~convostore.model.CompactResult`, or ``None`` to leave the
history alone; :meth:`Session.compact` stores it as a non-destructive overlay.

:func:`create_compact_function` builds the reference one (behaviour.md §6.5): it keeps the first
three messages and a token-budgeted tail (at least two messages), never splits a tool call from
its result, asks your ``summarize`` callable for a structured summary of the middle, and feeds
the previous summary back in so that repeated compactions refine one growing summary (§6.6).

Two names for two things: :data:`CompactionFunction` is the type of any compaction function
(what ``on_compaction`` accepts); :class:`CompactFunction` is the class of the reference one.

The building blocks are public for custom compaction functions: boundary alignment
(:func:`align_boundary_forward`, :func:`align_boundary_backward`; they live in
``_compaction_boundaries`` and are imported from here), the tail cut
(:func:`find_tail_cut_by_tokens`), the summary budget and prompt (:func:`compute_summary_budget`,
:func:`build_summary_prompt`), and two transcript fixers for what you send to a model
(:func:`sanitize_tool_pairs`, :func:`truncate_older_messages`; behaviour.md §10.9).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from ..messages import _parts
from ..model import CompactResult, Message
from ..tokens import TokenCounter, estimate_message_tokens
from . import _boundaries

__all__ = [
    "COMPACTION_PREFIX",
    "DEFAULT_KEEP_RECENT_TOKENS",
    "HEAD_MESSAGES",
    "MIN_TAIL_MESSAGES",
    "STUB_RESULT_NOTE",
    "CompactFunction",
    "CompactionFunction",
    "Summarize",
    "align_boundary_backward",
    "align_boundary_forward",
    "build_summary_prompt",
    "coerce_compact_result",
    "compute_summary_budget",
    "create_compact_function",
    "find_tail_cut_by_tokens",
    "get_tool_call_ids",
    "has_tool_calls",
    "is_compaction_message",
    "is_tool_part",
    "is_tool_result_for",
    "sanitize_tool_pairs",
    "truncate_older_messages",
]

# Public here, defined with the boundary functions that use them.
COMPACTION_PREFIX = _boundaries.COMPACTION_PREFIX
MIN_TAIL_MESSAGES = _boundaries.MIN_TAIL_MESSAGES
DEFAULT_KEEP_RECENT_TOKENS = _boundaries.DEFAULT_KEEP_RECENT_TOKENS
is_compaction_message = _boundaries.is_compaction_message
is_tool_part = _boundaries.is_tool_part
has_tool_calls = _boundaries.has_tool_calls
get_tool_call_ids = _boundaries.get_tool_call_ids
is_tool_result_for = _boundaries.is_tool_result_for
align_boundary_forward = _boundaries.align_boundary_forward
align_boundary_backward = _boundaries.align_boundary_backward
find_tail_cut_by_tokens = _boundaries.find_tail_cut_by_tokens

HEAD_MESSAGES = 3
"""Messages at the start of the history that the reference function never summarises."""

STUB_RESULT_NOTE = "[Result omitted: this call belongs to the summarised part of the conversation]"
"""The ``result`` of a stub added by :func:`sanitize_tool_pairs` for a call that lost its result."""

CompactionFunction = Callable[
    [list[Message]],
    CompactResult | Mapping[str, str] | None | Awaitable[CompactResult | Mapping[str, str] | None],
]
"""The type of any compaction function: what :meth:`Session.on_compaction` accepts.

Any callable will do (a plain function, a lambda, a :class:`CompactFunction`): it is called
with the overlaid history of a branch and returns the range to summarise and its summary, as a
:class:`~convostore.model.CompactResult` or a mapping (see :func:`coerce_compact_result`), or
``None`` to do nothing. An async store awaits an awaitable result.

Not to be confused with :class:`CompactFunction`, the one concrete compaction function this
module ships.
"""

Summarize = Callable[[str], str | Awaitable[str]]
"""A summariser: takes the prompt, returns the model's text (plain or async function)."""

_TRUNCATED_MARKER = "... [truncated {} chars]"
_PROMPT_JSON_CHARS = 500
_MAX_DEPTH = 8
_MIN_CHILD_CHARS = 64
_MAX_CHILD_SHARES = 10


# ── Summary prompt ────────────────────────────────────────────────────────────────────────────


def compute_summary_budget(
    messages: Iterable[Message], token_counter: TokenCounter | None = None
) -> int:
    """Size the summary: a fifth of the estimated tokens of what it replaces, at least 100.

    :param messages: the messages to be summarised.
    :param token_counter: counts strings instead of the built-in heuristic.
    :return: ``max(100, floor(0.2 * estimate_message_tokens(messages)))``.
    """
    return max(100, math.floor(estimate_message_tokens(messages, token_counter) * 0.2))


def _json_text(value: object) -> str:
    # Shown to a model or measured, never parsed back: NaN is written, and a value that is not
    # JSON is shown as Python prints it.
    try:
        return _parts.compact_json(value, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _truthy(value: object) -> bool:
    # JavaScript truthiness, so that an empty object or list input is still shown.
    if value is None or value is False:
        return False
    if isinstance(value, str):
        return value != ""
    if isinstance(value, (int, float)):
        return value == value and value != 0
    return True


def _render_message(message: Message) -> str:
    texts: list[str] = []
    tools: list[str] = []
    for part in _parts.parts(message):
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            text = part.get("text")
            texts.append(text if isinstance(text, str) else "")
        elif is_tool_part(part):
            lines = [f"[Tool: {_parts.tool_name(part, field_first=True) or 'unknown'}]"]
            tool_input = part.get("input")
            if _truthy(tool_input):
                lines.append(f"Input: {_json_text(tool_input)[:_PROMPT_JSON_CHARS]}")
            output = part.get("output")
            if _truthy(output):
                lines.append(f"Output: {_json_text(output)[:_PROMPT_JSON_CHARS]}")
            tools.append("\n".join(lines))
    block = f"[{message.get('role')}]\n" + "\n".join(texts)
    if tools:
        block += "\n" + "\n".join(tools)
    return block


_SECTIONS = """\
## Topic
[What the conversation is about, in a sentence or two]

## Key Points
[Facts established, decisions made and conclusions reached]

## Current State
[What has been done so far and what is still in progress]

## Open Items
[Unanswered questions, pending tasks and agreed next steps]"""

_CLOSING = """\
Aim for about {budget} tokens. Stick to the facts: include only what the conversation actually \
says, and never make up file paths, commands, names or other details. Reply with the summary \
body only, without any preamble or closing remarks."""

_FIRST_TEMPLATE = """\
Summarise the conversation below concisely, keeping everything a later reader would need to \
carry on from where it stopped.

=== Conversation ===
{content}

Organise the summary under these four Markdown sections:

{sections}

{closing}"""

_UPDATE_TEMPLATE = """\
An earlier summary of this conversation exists, and the conversation has continued since it \
was written. Update the summary so that it also covers the new turns.

=== Previous summary ===
{previous}

=== New turns ===
{content}

Keep whatever in the previous summary is still relevant, add what the new turns bring, and \
remove an item only when it is clearly obsolete. Organise the updated summary under these four \
Markdown sections:

{sections}

{closing}"""


def build_summary_prompt(
    messages: Iterable[Message], previous_summary: str | None, budget: int
) -> str:
    """Build the prompt that asks a model to summarise messages (or to update a summary).

    Each message becomes a block: a ``[role]`` line, its text parts joined by newlines, then for
    each tool part a ``[Tool: name]`` line followed, when they are set, by ``Input:`` and
    ``Output:`` lines holding the JSON of the input and output cut to 500 characters. Blocks are
    separated by a ``---`` line between blank lines. The name is ``toolName``, else what follows
    ``tool-`` in the part type, else ``unknown``.

    Without a previous summary the prompt asks for a new summary; with one (a non-empty string)
    it shows both and asks for an update that keeps what still matters. Either way the answer
    must use four Markdown sections (Topic, Key Points, Current State, Open Items), aim for about
    ``budget`` tokens, stick to facts and contain only the summary body.

    :param messages: the messages to summarise.
    :param previous_summary: the text of the summary these messages follow, or None.
    :param budget: the target length of the summary, in tokens.
    :return: the prompt.
    """
    content = "\n\n---\n\n".join(_render_message(message) for message in messages)
    closing = _CLOSING.format(budget=budget)
    if previous_summary:
        return _UPDATE_TEMPLATE.format(
            previous=previous_summary, content=content, sections=_SECTIONS, closing=closing
        )
    return _FIRST_TEMPLATE.format(content=content, sections=_SECTIONS, closing=closing)


# ── Transcript fixers (§10.9) ─────────────────────────────────────────────────────────────────


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
    return len(value) if isinstance(value, str) else len(_json_text(value))


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


# ── The reference compact function ────────────────────────────────────────────────────────────


def _previous_summary(messages: Iterable[Message]) -> str | None:
    for message in messages:
        if is_compaction_message(message):
            return "\n".join(
                part["text"]
                for part in _parts.parts(message)
                if isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            )
    return None


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _discard(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)
    if inspect.iscoroutine(awaitable) and close is not None:
        close()


def _running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class CompactFunction:
    """The reference compaction function: the class of what :func:`create_compact_function` returns.

    One :data:`CompactionFunction` among others (that alias is the type of any callable
    :meth:`Session.on_compaction` accepts); this one summarises the middle of a history with your
    ``summarize`` callable. :meth:`plan` picks the range and builds the prompt without calling
    the model.

    Call it with the overlaid history (``fn(messages)``) to get a
    :class:`~convostore.model.CompactResult` or ``None``; in async code, ``await
    fn.acall(messages)``. The calling convention of ``summarize`` does not matter: ``fn(...)``
    runs an async ``summarize`` to completion with :func:`asyncio.run` when no event loop is
    running in the thread (and raises :class:`TypeError` when one is), ``fn.acall(...)`` awaits
    an async ``summarize`` and calls a plain one directly (blocking the loop while it runs).
    """

    __slots__ = ("keep_recent_tokens", "summarize", "token_counter")

    def __init__(
        self,
        summarize: Summarize,
        keep_recent_tokens: float = DEFAULT_KEEP_RECENT_TOKENS,
        token_counter: TokenCounter | None = None,
    ) -> None:
        """Store the settings; see :func:`create_compact_function`.

        :param summarize: the summariser, ``str -> str`` or ``str -> Awaitable[str]``.
        :param keep_recent_tokens: token budget of the kept tail.
        :param token_counter: counts strings instead of the built-in heuristic.
        """
        if not callable(summarize):
            raise TypeError(f"summarize must be callable, got {type(summarize).__name__}")
        if isinstance(keep_recent_tokens, bool) or not isinstance(keep_recent_tokens, (int, float)):
            raise TypeError(
                f"keep_recent_tokens must be a number, got {type(keep_recent_tokens).__name__}"
            )
        if not keep_recent_tokens >= 0:
            raise ValueError(f"keep_recent_tokens must be >= 0, got {keep_recent_tokens!r}")
        if token_counter is not None and not callable(token_counter):
            raise TypeError(f"token_counter must be callable, got {type(token_counter).__name__}")
        self.summarize = summarize
        self.keep_recent_tokens = keep_recent_tokens
        self.token_counter = token_counter

    def __repr__(self) -> str:
        return (
            f"CompactFunction(summarize={self.summarize!r}, "
            f"keep_recent_tokens={self.keep_recent_tokens!r})"
        )

    def plan(self, messages: Sequence[Message]) -> tuple[list[Message], str] | None:
        """Choose the messages to summarise and build the prompt, without calling the model.

        :param messages: the overlaid history, root to leaf.
        :return: ``(middle, prompt)``, or None when there is nothing worth summarising.
        """
        if len(messages) <= HEAD_MESSAGES + MIN_TAIL_MESSAGES:
            return None
        start = align_boundary_forward(messages, HEAD_MESSAGES)
        end = find_tail_cut_by_tokens(
            messages, start, self.keep_recent_tokens, MIN_TAIL_MESSAGES, self.token_counter
        )
        if end <= start:
            return None
        middle = [m for m in messages[start:end] if not is_compaction_message(m)]
        if not middle:
            return None
        budget = compute_summary_budget(middle, self.token_counter)
        prompt = build_summary_prompt(middle, _previous_summary(messages), budget)
        return middle, prompt

    @staticmethod
    def _result(middle: list[Message], summary: object) -> CompactResult | None:
        if summary is None:
            return None
        if not isinstance(summary, str):
            raise TypeError(f"summarize must return a str, got {type(summary).__name__}")
        if not summary.strip():
            return None
        return CompactResult(
            from_message_id=middle[0]["id"], to_message_id=middle[-1]["id"], summary=summary
        )

    def __call__(self, messages: Sequence[Message]) -> CompactResult | None:
        """Summarise the middle of a history (synchronously).

        :param messages: the overlaid history, root to leaf.
        :return: the range and its summary, or None.
        :raises TypeError: ``summarize`` is async and an event loop is running in this thread
            (use :meth:`acall`), or it returned something other than a string.
        """
        planned = self.plan(messages)
        if planned is None:
            return None
        middle, prompt = planned
        if inspect.iscoroutinefunction(self.summarize) and _running_loop():
            raise TypeError(_ASYNC_IN_LOOP)
        summary: object = self.summarize(prompt)
        if inspect.isawaitable(summary):
            if _running_loop():
                _discard(summary)
                raise TypeError(_ASYNC_IN_LOOP)
            summary = asyncio.run(_await(summary))
        return self._result(middle, summary)

    async def acall(self, messages: Sequence[Message]) -> CompactResult | None:
        """Summarise the middle of a history, awaiting an async ``summarize``.

        :param messages: the overlaid history, root to leaf.
        :return: the range and its summary, or None.
        :raises TypeError: ``summarize`` returned something other than a string.
        """
        planned = self.plan(messages)
        if planned is None:
            return None
        middle, prompt = planned
        summary: object = self.summarize(prompt)
        if inspect.isawaitable(summary):
            summary = await summary
        return self._result(middle, summary)


_ASYNC_IN_LOOP = (
    "summarize is asynchronous and an event loop is running in this thread; "
    "use 'await compact_function.acall(messages)' (the async API does) instead of calling it"
)


def create_compact_function(
    summarize: Summarize,
    keep_recent_tokens: float = DEFAULT_KEEP_RECENT_TOKENS,
    *,
    token_counter: TokenCounter | None = None,
) -> CompactFunction:
    """Build the reference compaction function around your summariser (behaviour.md §6.5).

    Given the overlaid history of ``n`` messages, the function:

    1. returns None when ``n <= 5`` (three head messages plus two tail messages), without
       calling ``summarize``;
    2. starts the range after the first three messages, moved forward past the results of a
       tool call made just before (:func:`align_boundary_forward`);
    3. ends it where the tail begins: newest messages fitting in ``keep_recent_tokens``, at
       least two, aligned so a call stays with its results (:func:`find_tail_cut_by_tokens`);
       an empty range gives None;
    4. drops synthetic ``compaction_`` messages from the range (None if nothing is left);
    5. asks ``summarize`` for a summary of about a fifth of the range's tokens
       (:func:`compute_summary_budget`, :func:`build_summary_prompt`), handing it the text of
       the first compaction message of the history as the previous summary to update;
    6. returns ``CompactResult(first id, last id, summary)``, or None when the summary is blank
       (or ``summarize`` returned None).

    :meth:`Session.compact` then widens the start to the earliest overlay visible on the branch,
    so repeated compactions grow one summary.

    :param summarize: calls your model: takes the prompt, returns the summary text; a plain
        function or an ``async def`` (see :class:`CompactFunction` for how each is run).
    :param keep_recent_tokens: token budget of the newest messages kept verbatim.
    :param token_counter: a ``str -> int`` tokenizer used instead of the heuristic for the tail
        budget and the summary budget, e.g. when tool-heavy histories are under-counted.
    :return: a callable :class:`CompactFunction`, with an awaitable :meth:`~CompactFunction.acall`.
    """
    return CompactFunction(summarize, keep_recent_tokens, token_counter)


# ── Results ───────────────────────────────────────────────────────────────────────────────────

_RESULT_FIELDS = (
    ("from_message_id", "fromMessageId"),
    ("to_message_id", "toMessageId"),
    ("summary", "summary"),
)


def coerce_compact_result(value: object) -> CompactResult | None:
    """Turn what a compaction function returned into a :class:`~convostore.model.CompactResult`.

    Accepts None, a ``CompactResult``, or a mapping with the keys ``from_message_id``,
    ``to_message_id`` and ``summary`` (the reference's ``fromMessageId`` and ``toMessageId``
    also work; snake_case wins when both are present), all strings.

    :param value: the compaction function's return value (already awaited).
    :return: the result, or None.
    :raises TypeError: an awaitable, a value of another type, or a field that is not a string.
    :raises ValueError: a mapping without one of the fields.
    """
    if value is None or isinstance(value, CompactResult):
        return value
    if inspect.isawaitable(value):
        _discard(value)
        raise TypeError(
            "the compaction function returned an awaitable; an async compaction function "
            "needs the async API (AsyncSessions), which awaits it"
        )
    if not isinstance(value, Mapping):
        raise TypeError(
            "a compaction function must return None, a CompactResult or a mapping with "
            f"from_message_id, to_message_id and summary; got {type(value).__name__}"
        )
    fields: list[str] = []
    for snake, camel in _RESULT_FIELDS:
        if snake in value:
            field = value[snake]
        elif camel in value:
            field = value[camel]
        else:
            raise ValueError(f"the compaction result has no {snake!r}")
        if not isinstance(field, str):
            raise TypeError(
                f"the compaction result's {snake!r} must be a str, got {type(field).__name__}"
            )
        fields.append(field)
    return CompactResult(from_message_id=fields[0], to_message_id=fields[1], summary=fields[2])

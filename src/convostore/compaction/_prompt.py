"""The summary prompt: what the reference compact function asks a model, and how long an
answer it asks for. Pure text building, no model call."""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..messages import _parts
from ..model import Message
from ..tokens import TokenCounter, estimate_message_tokens
from ._boundaries import is_tool_part

_PROMPT_JSON_CHARS = 500


def compute_summary_budget(
    messages: Iterable[Message], token_counter: TokenCounter | None = None
) -> int:
    """Size the summary: a fifth of the estimated tokens of what it replaces, at least 100.

    :param messages: the messages to be summarised.
    :param token_counter: counts strings instead of the built-in heuristic.
    :return: ``max(100, floor(0.2 * estimate_message_tokens(messages)))``.
    """
    return max(100, math.floor(estimate_message_tokens(messages, token_counter) * 0.2))


def json_text(value: object) -> str:
    """The JSON text a model is shown for a value (also what truncation measures).

    Never parsed back: NaN is written, and a value that is not JSON is shown as Python prints
    it."""
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
                lines.append(f"Input: {json_text(tool_input)[:_PROMPT_JSON_CHARS]}")
            output = part.get("output")
            if _truthy(output):
                lines.append(f"Output: {json_text(output)[:_PROMPT_JSON_CHARS]}")
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

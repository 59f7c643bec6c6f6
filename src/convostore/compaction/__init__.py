"""Compaction helpers: the reference compact function and the pure pieces it is built from.

Nothing here touches storage. A *compaction function* receives the overlaid history of a branch
(root to leaf, earlier summaries shown as synthetic ``compaction_<id>`` messages) and returns the
range to summarise, as a :class:`~convostore.model.CompactResult`, or ``None`` to leave the
history alone; :meth:`Session.compact` stores it as a non-destructive overlay.

:func:`create_compact_function` builds the reference one: it keeps the first three messages and
a token-budgeted tail (at least two messages), never splits a tool call from its result, asks
your ``summarize`` callable for a structured summary of the middle, and feeds the previous
summary back in so that repeated compactions refine one growing summary.

Two names for two things: :data:`CompactionFunction` is the type of any compaction function
(what ``on_compaction`` accepts); :class:`CompactFunction` is the class of the reference one.

The building blocks are public for custom compaction functions: boundary alignment
(:func:`align_boundary_forward`, :func:`align_boundary_backward`), the tail cut
(:func:`find_tail_cut_by_tokens`), the summary budget and prompt (:func:`compute_summary_budget`,
:func:`build_summary_prompt`), and two transcript fixers for what you send to a model
(:func:`sanitize_tool_pairs`, :func:`truncate_older_messages`).

Every name is imported from here; the bodies live in private modules named for what they hold:
``_boundaries`` (where a range may start and end), ``_prompt`` (the summary prompt and budget),
``_transcript`` (the transcript fixers), ``_reference`` (the reference function), ``_result``
(what a compaction function may return), and ``_auto`` (automatic compaction off the write path).
"""

from __future__ import annotations

from ._boundaries import (
    COMPACTION_PREFIX,
    DEFAULT_KEEP_RECENT_TOKENS,
    MIN_TAIL_MESSAGES,
    align_boundary_backward,
    align_boundary_forward,
    find_tail_cut_by_tokens,
    get_tool_call_ids,
    has_tool_calls,
    is_compaction_message,
    is_tool_part,
    is_tool_result_for,
)
from ._prompt import build_summary_prompt, compute_summary_budget
from ._reference import HEAD_MESSAGES, CompactFunction, Summarize, create_compact_function
from ._result import CompactionFunction, coerce_compact_result
from ._transcript import STUB_RESULT_NOTE, sanitize_tool_pairs, truncate_older_messages

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

# The classes' home is this public module, as before their bodies moved to private ones.
CompactFunction.__module__ = __name__

"""The reference compaction function: :class:`CompactFunction` and
:func:`create_compact_function`, which keep the head and a token-budgeted tail and summarise
the middle with your ``summarize`` callable."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from ..messages import _parts
from ..model import CompactResult, Message
from ..tokens import TokenCounter
from ._boundaries import (
    DEFAULT_KEEP_RECENT_TOKENS,
    MIN_TAIL_MESSAGES,
    align_boundary_forward,
    find_tail_cut_by_tokens,
    is_compaction_message,
)
from ._prompt import build_summary_prompt, compute_summary_budget
from ._result import discard

HEAD_MESSAGES = 3
"""Messages at the start of the history that the reference function never summarises."""

Summarize = Callable[[str], str | Awaitable[str]]
"""A summariser: takes the prompt, returns the model's text (plain or async function)."""


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
                discard(summary)
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
    """Build the reference compaction function around your summariser.

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

"""What a compaction function is and what it may return: :data:`CompactionFunction`, and
:func:`coerce_compact_result`, which turns its return value into a
:class:`~convostore.model.CompactResult`."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping

from ..model import CompactResult, Message

CompactionFunction = Callable[
    [list[Message]],
    CompactResult | Mapping[str, str] | None | Awaitable[CompactResult | Mapping[str, str] | None],
]
"""The type of any compaction function: what :meth:`Session.on_compaction` accepts.

Any callable will do (a plain function, a lambda, a :class:`CompactFunction`): it is called
with the overlaid history of a branch and returns the range to summarise and its summary, as a
:class:`~convostore.model.CompactResult` or a mapping (see :func:`coerce_compact_result`), or
``None`` to do nothing. An async store awaits an awaitable result.

Not to be confused with :class:`CompactFunction`, the one concrete compaction function
:mod:`convostore.compaction` ships.
"""


def discard(awaitable: object) -> None:
    """Close a coroutine that will never be awaited (so Python does not warn it was not)."""
    close = getattr(awaitable, "close", None)
    if inspect.iscoroutine(awaitable) and close is not None:
        close()


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
        discard(value)
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

"""Batch writes: several messages prepared up front, then written in one transaction.

:meth:`Session.append_messages <convostore.Session.append_messages>` and
:meth:`Session.import_messages <convostore.Session.import_messages>` plan here: every message is
validated and prepared (the same :meth:`~convostore.messages._writes.Writer.prepare` the
single-message
calls use) before the transaction opens, so bad input anywhere in the batch writes nothing, and
an error names the message by its place (``messages[3].parts[0].text``). The rows are then
written by :meth:`~convostore.messages._writes.Writer.insert_batch`, chained in order, and the
session
emits one change event per message, in order, after the commit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from .. import codec, limits
from ..compaction import COMPACTION_PREFIX
from ..errors import (
    InvalidArgument,
    InvalidArgumentType,
    InvalidMessage,
    InvalidMessageType,
)
from ..model import AppendResult, ChangeEvent, ImportItem, Message, Source, Unset
from ._writes import BatchRow, Writer


def listed(name: str, value: object) -> list[object]:
    """``value`` as a list of items; a string, a mapping (one message) or a non-iterable is
    refused naming ``name``, nothing written."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidArgumentType(
            name, f"must be a list of messages, not a {type(value).__name__}"
        )
    return list(value)


def placed(name: str, index: int, exc: Exception) -> Exception:
    """An argument or message error of item ``index`` renamed with its place in the batch
    (``messages[3].role``), so the caller knows which message was refused; any other error
    as it is."""
    where = f"{name}[{index}]"
    if isinstance(exc, (InvalidMessage, InvalidMessageType)):
        return type(exc)(f"{where}.{exc.field}", exc.problem)
    if isinstance(exc, (InvalidArgument, InvalidArgumentType)):
        return type(exc)(f"{where}.{exc.argument}", exc.problem)
    return exc


_NAMED = (InvalidMessage, InvalidMessageType, InvalidArgument, InvalidArgumentType)


_PLACE = re.compile(r"messages\[(\d+)\]\.(.+)\Z", re.DOTALL)


def located(exc: BaseException) -> tuple[int, Exception] | None:
    """Undo :func:`placed`: (the item's index, the error as the single-message call raises it),
    or None for an error that names no item of a batch."""
    if isinstance(exc, (InvalidMessage, InvalidMessageType)):
        name = exc.field
    elif isinstance(exc, (InvalidArgument, InvalidArgumentType)):
        name = exc.argument
    else:
        return None
    match = _PLACE.match(name)
    if match is None:
        return None
    return int(match.group(1)), type(exc)(match.group(2), exc.problem)


@dataclass
class Plan:
    """A prepared batch: the rows to insert and, per input message, what to answer."""

    rows: list[BatchRow]
    messages: list[Message]
    """Each input message, validated (prepared form for the rows)."""
    slots: list[int | None]
    """Per input message, the index of its row in :attr:`rows`, None when it is not written
    (an echoed ``compaction_`` overlay)."""
    parents: list[str | None]
    """Per input message, the parent it was written under as the caller sees it (the events'
    ``parent_id``): the given parent for the first, the previous message for the others."""

    def results(
        self, inserted: list[bool], stored: Callable[[str, Message], Message]
    ) -> list[AppendResult]:
        """One :class:`AppendResult` per input message; a duplicate reads its stored form."""
        out: list[AppendResult] = []
        for message, slot in zip(self.messages, self.slots, strict=True):
            if slot is not None and inserted[slot]:
                out.append(AppendResult(True, message))
            elif slot is not None:
                out.append(AppendResult(False, stored(message["id"], message)))
            else:
                out.append(AppendResult(False, message))
        return out


def plan_append(
    writer: Writer, messages: object, parent_id: str | None | Unset, source: Source,
    created_at: int,
) -> Plan:
    """Validate and prepare an :meth:`append_messages` batch (nothing written).

    The first message goes under ``parent_id`` (UNSET: the active leaf), each next one under
    the one before it, whether that one is new or already stored.
    """
    items = listed("messages", messages)
    if not isinstance(parent_id, Unset):
        limits.check_id("parent_id", parent_id, optional=True)
    plan = Plan([], [], [], [])
    parent: str | None | Unset = parent_id
    prepare = writer.prepare
    # One try around the loop, not a context manager per message: it runs on every batch.
    i = 0
    try:
        for i, item in enumerate(items):  # noqa: B007 - i names the item that failed
            msg = codec.validate_message(item)
            given = None if isinstance(parent, Unset) else parent
            if msg["id"].startswith(COMPACTION_PREFIX):  # an overlay echoed back: not stored
                plan.messages.append(msg)
                plan.slots.append(None)
                plan.parents.append(given)
                continue
            prep = prepare(msg, source)
            plan.slots.append(len(plan.rows))
            plan.rows.append(BatchRow(prep, parent, created_at))
            plan.messages.append(prep.message)
            plan.parents.append(given)
            parent = msg["id"]
    except _NAMED as exc:
        raise placed("messages", i, exc) from exc
    return plan


def plan_import(
    writer: Writer, items: object, parent_id: str | None, created_at: int | None, now: int,
) -> Plan:
    """Validate and prepare an :meth:`import_messages` batch (nothing written).

    A plain message goes under the previous item's message (the first under ``parent_id``); an
    :class:`~convostore.ImportItem` may name its own parent and time.
    """
    entries = listed("messages", items)
    limits.check_id("parent_id", parent_id, optional=True)
    default_time = now if created_at is None else limits.check_timestamp(
        "created_at", created_at)
    plan = Plan([], [], [], [])
    parent: str | None = parent_id
    prepare = writer.prepare
    i = 0
    try:
        for i, entry in enumerate(entries):  # noqa: B007 - i names the item that failed
            when = default_time
            if isinstance(entry, ImportItem):
                if not isinstance(entry.parent_id, Unset):
                    limits.check_id("parent_id", entry.parent_id, optional=True)
                    parent = entry.parent_id
                if entry.created_at is not None:
                    when = limits.check_timestamp("created_at", entry.created_at)
                entry = entry.message
            msg = codec.validate_message(entry)
            prep = prepare(msg, "server", sanitize=False)
            plan.slots.append(len(plan.rows))
            plan.rows.append(BatchRow(prep, parent, when))
            plan.messages.append(msg)
            plan.parents.append(parent)
            parent = msg["id"]
    except _NAMED as exc:
        raise placed("messages", i, exc) from exc
    return plan


def append_events(
    session_id: str, plan: Plan, results: list[AppendResult], cursors: list[int | None]
) -> Iterator[ChangeEvent]:
    """The ``append`` events of a batch, in order (as each single append would emit them),
    each with its change-log position (``cursors``, by row of the batch)."""
    for slot, parent, result in zip(plan.slots, plan.parents, results, strict=True):
        if slot is not None:
            yield ChangeEvent("append", session_id, message=result.message, parent_id=parent,
                              inserted=result.inserted, cursor=cursors[slot])


def import_events(
    session_id: str, plan: Plan, cursors: list[int | None]
) -> Iterator[ChangeEvent]:
    """The ``import`` events of a batch: one per inserted message, in order, each with its
    change-log position (``cursors``: by row of the batch, None for a row not inserted)."""
    for message, slot, parent in zip(plan.messages, plan.slots, plan.parents, strict=True):
        if slot is not None and cursors[slot] is not None:
            yield ChangeEvent("import", session_id, message=message, parent_id=parent,
                              cursor=cursors[slot])


__all__ = ["Plan", "append_events", "import_events", "listed", "located",
           "placed", "plan_append", "plan_import"]

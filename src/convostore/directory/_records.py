"""Result types of a conversation's life: directory entries and pages, prune results, a
message with its row facts, a message's place among its siblings.

Published by :mod:`convostore` (``from convostore import SessionEntry, ...``); the sync and
async faces return the same types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model import Message


@dataclass(frozen=True)
class SessionEntry:
    """One session of the directory (:meth:`Sessions.list_conversations`,
    :meth:`Session.get_info`). Times are epoch milliseconds."""

    session_id: str
    title: str | None
    owner: str | None
    """An opaque user id the application chose (filter listings with ``owner=``)."""
    metadata: dict[str, Any] = field(hash=False)
    """The application's JSON object (``{}`` when none was set)."""
    created_at: int
    """The first write: the oldest message's time, or when the session was described."""
    updated_at: int
    """The newest message's time to within a second (a write moves it when it is at least a
    second newer), or the time of the last rewrite or deletion of a message; a session only
    described has the time it was described."""
    message_count: int
    bytes: int
    """Stored bytes of its messages (continuations and referenced payloads included)."""
    expires_at: int | None
    """When :meth:`Sessions.prune` may delete it (None: never, by expiry)."""
    ttl: int | None
    """Milliseconds: each message write sets ``expires_at`` to its time plus this."""
    active_leaf: str | None
    """The leaf :meth:`Session.set_active_leaf` chose, None while the newest message is it."""
    belongs_to: str | None
    """The session this one is deleted with (context data names its conversation)."""


@dataclass(frozen=True)
class SessionPage:
    """One page of :meth:`Sessions.list_conversations`."""

    sessions: list[SessionEntry]
    next_cursor: str | None
    """Pass as ``cursor=`` for the next page; None on the last page."""


@dataclass(frozen=True)
class PruneResult:
    """What :meth:`Sessions.prune` deleted, or with ``dry_run`` would delete."""

    session_ids: list[str]
    """The conversations, oldest update first (their context sessions go with them)."""
    dry_run: bool
    batches: int
    """Transactions it took (0 for a dry run)."""


@dataclass(frozen=True)
class MessageRecord:
    """A message as :meth:`Session.history_records` yields it, with its row's facts.

    ``message`` is what :meth:`Session.history` yields at that place (a compaction summary
    included: then ``created_at`` is the record's, ``parent_id`` None).
    """

    message: Message
    created_at: int
    """Epoch milliseconds stored with the row (the write's time, or ``import_message``'s)."""
    parent_id: str | None
    """The stored parent id (None for a root)."""
    size: int
    """Stored bytes: the row, its continuations and referenced payloads' base64."""


@dataclass(frozen=True)
class SiblingPosition:
    """A message's place among the children of its parent (or among the roots), in write
    order: a branch switcher's "2 of 3" is ``index + 1`` of ``count``."""

    index: int
    """0-based position of the message in :attr:`sibling_ids`."""
    count: int
    sibling_ids: tuple[str, ...]
    """Every sibling, the message included, in write order."""

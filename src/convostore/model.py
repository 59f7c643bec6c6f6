"""Result and event types shared by every backend and by the sync and async APIs.

Messages themselves stay plain ``dict`` objects (the store promises that what goes in comes
back equal, key order included); :data:`Message` is only an alias for them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Message = dict[str, Any]
"""A UIMessage-shaped JSON object: ``id``, ``role``, ``parts`` and optional ``metadata``."""

Source = Literal["server", "client"]
"""Who produced a write: ``"client"`` input is untrusted and loses reserved metadata keys."""


def is_tool_type(part_type: object) -> bool:
    """Is a part ``type`` a tool invocation's: ``tool-<name>`` or ``dynamic-tool``?"""
    return isinstance(part_type, str) and (
        part_type.startswith("tool-") or part_type == "dynamic-tool"
    )


@dataclass(frozen=True)
class AppendResult:
    """What :meth:`Session.append_message` and :meth:`Session.upsert_message` return.

    ``inserted`` is False when a message with that id already existed; ``message`` is then the
    stored message (the incoming content is ignored), otherwise the prepared stored form.
    """

    inserted: bool
    message: Message


@dataclass(frozen=True)
class RowStat:
    """One stored row of a path, measured without reading its content.

    ``bytes`` counts the row, its continuation rows and the base64 length of every attachment
    the message references; ``token_estimate`` is the estimate stamped when it was written.
    """

    id: str
    role: str
    bytes: int
    token_estimate: int


@dataclass(frozen=True)
class RecentHistory:
    """The result of :meth:`Session.get_recent_history`."""

    messages: list[Message]
    truncated: bool
    total_content_bytes: int


@dataclass(frozen=True)
class StoredCompaction:
    """A compaction overlay: reads show ``summary`` in place of ``from..to`` (inclusive)."""

    id: str
    summary: str
    from_message_id: str
    to_message_id: str
    created_at: str
    """ISO 8601 UTC timestamp with milliseconds, e.g. ``2026-01-02T03:05:00.000Z``."""


@dataclass(frozen=True)
class CompactResult:
    """The range :meth:`Session.compact` stored, after widening to the earliest visible overlay."""

    from_message_id: str
    to_message_id: str
    summary: str


@dataclass(frozen=True)
class SearchResult:
    """One full-text hit: the message id, role, the indexed text and where it lives."""

    id: str
    role: str
    content: str
    created_at: int
    """Epoch milliseconds of the message row."""
    session_id: str


@dataclass(frozen=True)
class StorageStats:
    """Whole-store figures from :meth:`Sessions.storage_stats`."""

    sessions: int
    messages: int
    continuation_rows: int
    compactions: int
    attachments: int
    attachment_bytes: int
    content_bytes: int
    """What reads of every message are charged: the UTF-8 bytes of the stored JSON
    (continuation rows included) plus the base64 length of each payload a message references."""


EventType = Literal[
    "append", "update", "delete", "clear", "compact", "compaction", "import", "error",
    "delete_session", "set_active_leaf",
]


@dataclass(frozen=True)
class ChangeEvent:
    """One change-feed event, dispatched after the write it describes has committed.

    Which fields are set depends on ``type``:

    - ``append``: ``message``, ``parent_id`` (the option as passed; ``None`` when omitted),
      ``inserted``
    - ``update``: ``message``
    - ``delete``: ``message_ids`` (as passed)
    - ``clear``, ``compact``: nothing more
    - ``compaction``: ``compaction``
    - ``import``: ``message``, ``parent_id``
    - ``error``: ``error`` (auto-compaction failed)
    - ``delete_session``: nothing more (the conversation and everything of it were deleted)
    - ``set_active_leaf``: ``message_ids`` (the chosen leaf)

    ``cursor`` is the write's position in the durable change log (the :attr:`Change.cursor`
    that :meth:`Sessions.changes` and :meth:`Sessions.watch` report for it), or None when the
    write logged nothing (a duplicate append, an update that changed nothing, a delete of ids
    that were not there). It does not take part in ``==``.
    """

    type: EventType
    session_id: str
    message: Message | None = None
    parent_id: str | None = None
    inserted: bool | None = None
    message_ids: list[str] | None = None
    compaction: StoredCompaction | None = None
    error: BaseException | None = field(default=None, compare=False)
    cursor: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Change:
    """One entry of the durable change log, as :meth:`Sessions.changes` and
    :meth:`Sessions.watch` return it: ids and kind, never message content.

    ``cursor`` is the entry's position: store-wide, increasing; every change committed after a
    reader was handed one gets a higher cursor. Keep the cursor of the last change handled and
    pass it back as ``since`` to resume after it.

    Which fields are set depends on ``type``:

    - ``append``, ``import``: ``message_id``, ``parent_id`` (the parent it was stored under)
    - ``update``: ``message_id``
    - ``delete``: ``message_ids`` (the ids that were deleted)
    - ``clear``: nothing more
    - ``compaction`` (:meth:`Session.add_compaction`), ``compact`` (:meth:`Session.compact`,
      by hand or automatic): ``compaction_id``, ``from_message_id``, ``to_message_id``
    - ``error`` (an automatic or manual compaction failed): ``error``, the exception as text
    - ``delete_session`` (:meth:`Sessions.delete_session`, :meth:`Sessions.prune`): nothing
      more; the session and everything of it are gone (its earlier entries stay in the log,
      ids only, until the log's retention trims them)
    - ``set_active_leaf``: ``message_id``, the chosen leaf (also ``leaf_id``)

    ``leaf_id`` is the session's active leaf once the write committed: the message
    :meth:`Session.set_active_leaf` chose, else the newest (None when the
    session is empty); ``created_at`` the writer's clock, epoch milliseconds.
    """

    cursor: int
    type: str
    session_id: str
    message_id: str | None = None
    parent_id: str | None = None
    leaf_id: str | None = None
    message_ids: tuple[str, ...] | None = None
    compaction_id: str | None = None
    from_message_id: str | None = None
    to_message_id: str | None = None
    error: str | None = None
    created_at: int = 0


@dataclass(frozen=True)
class SessionSummary:
    """One line of :meth:`Sessions.list_sessions`: what the store knows of a session from its
    messages alone (a :class:`~convostore.manager.SessionInfo` is the session manager's
    registry row: name, lineage and usage)."""

    session_id: str
    messages: int
    bytes: int
    """Stored bytes of its messages (continuations and referenced payloads included)."""
    last_write: int
    """Epoch milliseconds of its newest message."""


class Unset(enum.Enum):
    """The type of :data:`UNSET`: an option that was not passed (distinct from ``None``).

    An enum with one member, so type checkers can tell "not passed" from every real value
    (``parent_id: str | None | Unset = UNSET``) and ``is UNSET`` narrows it away.
    """

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = Unset.UNSET
"""Default of ``parent_id``: attach to the active leaf. ``None`` means a new root."""


@dataclass(frozen=True)
class ImportItem:
    """One entry of :meth:`Session.import_messages <convostore.Session.import_messages>` that
    names its own parent or time (a plain message takes the previous one's id and the call's
    ``created_at``)."""

    message: Message
    parent_id: str | None | Unset = UNSET
    """The stored parent, as given (None: a root); UNSET: the previous entry's message."""
    created_at: int | None = None
    """Epoch milliseconds; None: the call's ``created_at`` (default: now)."""

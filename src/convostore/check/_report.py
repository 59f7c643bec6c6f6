"""What a consistency check reports: one :class:`Problem` per broken invariant, and the
:class:`CheckReport` that holds them, by session."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

# -- the kinds of problem (stable names: scripts match on them) -------------------------------

MISSING_PARENT = "missing_parent"
"""A message names a parent the session does not hold. Repair: it becomes a root (reads
already treat it as one)."""
PARENT_LOOP = "parent_loop"
"""Following parents from a message comes back to it. Repair: the link that goes back to a
later message is cut (the message becomes a root, as reads already treat it)."""
CHAIN_FLAG = "chain_flag"
"""A row marked as a plain append (``chained``) whose parent is not the row written just before
it, so branch reads would miss it. Repair: the mark is cleared."""
MISSING_CONTINUATION = "missing_continuation"
"""A large message's continuation rows are missing or numbered out of order: its text is
incomplete. Not repairable (the text is lost)."""
STRAY_CONTINUATION = "stray_continuation"
"""Continuation rows beyond their message's count, or of a message that does not exist (a read
would append them to the text). Repair: deleted."""
UNREADABLE_MESSAGE = "unreadable_message"
"""A message whose stored text is not a message (bad JSON). Not repairable."""
MISSING_PAYLOAD = "missing_payload"
"""A message refers to an attachment payload that is not stored. Not repairable."""
INCOMPLETE_PAYLOAD = "incomplete_payload"
"""A payload whose chunk rows disagree with its chunk count. Not repairable."""
UNREFERENCED_PAYLOAD = "unreferenced_payload"
"""A payload (or chunk rows) nothing refers to. Repair: collected."""
MISSING_REFERENCE = "missing_reference"
"""A message points to a payload without the reference row that keeps the payload alive (a
later collection would delete it). Repair: the reference is recorded."""
STRAY_REFERENCE = "stray_reference"
"""A reference row whose message does not exist or does not point to the payload (the payload
is kept alive for nothing). Repair: dropped, the payload collected if nothing else refers to
it."""
COMPACTION_ENDS = "compaction_ends"
"""A compaction whose first or last message is gone, or whose first message is not an ancestor
of its last. Not repairable (the summary is kept; reads ignore the record)."""
DIRECTORY_COUNTS = "directory_counts"
"""A session's directory row (message count, stored bytes) disagrees with its messages, or is
missing. Repair: recounted."""
SEARCH_INDEX_MISSING = "search_index_missing"
"""Messages of a complete search index that have no entry (searches miss them). Repair:
indexed."""
SEARCH_INDEX_STALE = "search_index_stale"
"""Search index entries of messages that no longer exist. Repair: the index is cleared and
rebuilt."""
CHANGE_LOG_GAP = "change_log_gap"
"""Positions missing inside the change log (SQLite, whose positions are dense): a reader
resuming below them would miss changes without being told. Repair: the log's horizon moves
past the gap, so such a reader gets ``CursorExpired`` and resyncs."""

KINDS = (
    MISSING_PARENT, PARENT_LOOP, CHAIN_FLAG, MISSING_CONTINUATION, STRAY_CONTINUATION,
    UNREADABLE_MESSAGE, MISSING_PAYLOAD, INCOMPLETE_PAYLOAD, UNREFERENCED_PAYLOAD,
    MISSING_REFERENCE, STRAY_REFERENCE, COMPACTION_ENDS, DIRECTORY_COUNTS, SEARCH_INDEX_MISSING,
    SEARCH_INDEX_STALE, CHANGE_LOG_GAP,
)
"""Every kind of problem a check reports."""

REPAIRABLE = frozenset({
    MISSING_PARENT, PARENT_LOOP, CHAIN_FLAG, STRAY_CONTINUATION, UNREFERENCED_PAYLOAD,
    MISSING_REFERENCE, STRAY_REFERENCE, DIRECTORY_COUNTS, SEARCH_INDEX_MISSING,
    SEARCH_INDEX_STALE, CHANGE_LOG_GAP,
})
"""The kinds ``repair=True`` fixes; none of their repairs deletes or changes a message's
content."""


@dataclass(frozen=True)
class Problem:
    """One broken invariant.

    :ivar kind: what is broken, one of :data:`KINDS` (e.g. ``"missing_parent"``).
    :ivar session_id: the session it belongs to; None for what belongs to the whole store (a
        payload, the change log, the search index's stale entries).
    :ivar subject: what it is about: a message id, a compaction id, a payload hash, a range of
        change-log positions, or a count.
    :ivar detail: one line for people.
    :ivar repaired: True once ``repair=True`` fixed it.
    """

    kind: str
    session_id: str | None
    subject: str
    detail: str
    repaired: bool = False

    @property
    def repairable(self) -> bool:
        """Whether ``repair=True`` can fix it without losing a message."""
        return self.kind in REPAIRABLE

    def as_dict(self) -> dict[str, Any]:
        """The problem as a JSON object."""
        return {"kind": self.kind, "session_id": self.session_id, "subject": self.subject,
                "detail": self.detail, "repairable": self.repairable, "repaired": self.repaired}


@dataclass(frozen=True)
class CheckReport:
    """What :meth:`Sessions.check <convostore.Sessions.check>` found (and repaired).

    :ivar problems: every problem found, session by session (in session id order), then the
        store-wide ones (``session_id`` None).
    :ivar sessions: how many sessions were checked.
    :ivar messages: how many message rows were checked.
    :ivar repair: whether repairs were asked for.
    """

    problems: tuple[Problem, ...] = ()
    sessions: int = 0
    messages: int = 0
    repair: bool = False

    @property
    def clean(self) -> bool:
        """True when nothing was found."""
        return not self.problems

    @property
    def remaining(self) -> tuple[Problem, ...]:
        """The problems not repaired (all of them without ``repair``)."""
        return tuple(p for p in self.problems if not p.repaired)

    @property
    def ok(self) -> bool:
        """True when the store is sound now: nothing found, or everything found repaired."""
        return not self.remaining

    def by_session(self) -> dict[str | None, list[Problem]]:
        """The problems grouped by session id (None: the whole store's)."""
        out: dict[str | None, list[Problem]] = {}
        for p in self.problems:
            out.setdefault(p.session_id, []).append(p)
        return out

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON object (``convostore check --json`` prints it)."""
        return {"ok": self.ok, "sessions": self.sessions, "messages": self.messages,
                "repair": self.repair, "problems": [p.as_dict() for p in self.problems]}


@dataclass
class Found:
    """The problems of a check in progress, and the counts (mutable; frozen into a report)."""

    problems: list[Problem] = field(default_factory=list)
    sessions: int = 0
    messages: int = 0

    def add(self, kind: str, session_id: str | None, subject: str, detail: str) -> None:
        self.problems.append(Problem(kind, session_id, subject, detail))

    def report(self, repair: bool, fixed: set[int]) -> CheckReport:
        """The report, the problems at the indexes in ``fixed`` marked repaired."""
        problems = tuple(replace(p, repaired=True) if i in fixed else p
                         for i, p in enumerate(self.problems))
        return CheckReport(problems, self.sessions, self.messages, repair)

"""What the viewer reads from a store: every store call of the web package is made here.

The routes and templates see only the small types below (:class:`Entry`, :class:`Page`, ...),
so a better store call replaces one function here and nothing else. Four are written with what
the store offers today, and say what would replace them:

- :func:`directory` pages :meth:`Sessions.list_sessions` in memory (a cursor-paged, filtered
  directory would page in SQL);
- :func:`entries` learns each message's parent from its neighbour in the newest-first stream and
  its siblings from :meth:`Session.get_branches` (one query per parent; a sibling-position call
  would answer both at once);
- :func:`branch_leaf` walks down from a message by :meth:`Session.get_branches` to the newest
  leaf under it (a list of the session's leaves would make it one query);
- :attr:`Entry.created_at` is None: no public read gives a message row's time yet (a history
  read that yields records with ``created_at`` fills it in).

Reads of a conversation touch only the rows they show: a page is the first ``limit`` messages
of ``Session.history(newest_first=True)``, so a 100,000-message session opens as fast as a
10-message one.
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from .. import codec
from .._parts import DEFAULT_MEDIA_TYPE, parse_data_url
from ..compaction import COMPACTION_PREFIX
from ..manager import SessionManager
from ..model import Message, SearchResult, SessionSummary, StoredCompaction
from ..session import Session
from ..store import Sessions

__all__ = [
    "BRANCH_WALK_LIMIT",
    "DirectoryPage",
    "DirectoryRow",
    "Entry",
    "Page",
    "Payload",
    "Siblings",
    "attachment",
    "branch_leaf",
    "directory",
    "entries",
    "has_payload",
    "newer",
    "older_page",
    "originals",
    "path_tokens",
    "search",
]

BRANCH_WALK_LIMIT = 10_000
"""Most steps :func:`branch_leaf` takes down a branch before it stops at the message reached."""


# --- the sessions page ------------------------------------------------------------------------


@dataclass(frozen=True)
class DirectoryRow:
    """One session of the directory: what the store knows of it, and its managed name."""

    summary: SessionSummary
    name: str | None


@dataclass(frozen=True)
class DirectoryPage:
    """One page of the directory, newest first."""

    rows: list[DirectoryRow]
    page: int
    """The page number, from 1."""
    has_next: bool
    total: int


def directory(store: Sessions, page: int, per_page: int) -> DirectoryPage:
    """Sessions newest first (by last write, then id), page ``page`` of ``per_page`` each."""
    everything = sorted(store.list_sessions(), key=lambda s: (s.last_write, s.session_id),
                        reverse=True)
    page = max(1, page)
    start = (page - 1) * per_page
    chosen = everything[start : start + per_page]
    manager = SessionManager(store)
    rows = []
    for summary in chosen:
        info = manager.get(summary.session_id)
        rows.append(DirectoryRow(summary, None if info is None else info.name))
    return DirectoryPage(rows, page, start + per_page < len(everything), len(everything))


def search(store: Sessions, query: str, limit: int) -> list[SearchResult]:
    """Full-text hits across every session, best first (the first search builds the index)."""
    if not query.strip():
        return []
    return store.search(query, limit=limit)


# --- the conversation page --------------------------------------------------------------------


@dataclass(frozen=True)
class Siblings:
    """The alternatives at a fork: the ids of a parent's children (or of the session's roots),
    in write order, and which of them this message is."""

    ids: tuple[str, ...]
    index: int

    @property
    def previous(self) -> str | None:
        """The sibling before this one, or None for the first."""
        return self.ids[self.index - 1] if self.index > 0 else None

    @property
    def next(self) -> str | None:
        """The sibling after this one, or None for the last."""
        return self.ids[self.index + 1] if self.index + 1 < len(self.ids) else None


@dataclass(frozen=True)
class Entry:
    """One message as the viewer shows it."""

    message: Message
    size: int
    """UTF-8 bytes of its stored JSON (media put back in counts as its data URL)."""
    created_at: int | None
    """Epoch milliseconds of its row, when a read gives it (see the module docstring)."""
    compaction: StoredCompaction | None
    """For the synthetic message a read shows in place of a compacted span: its record."""
    siblings: Siblings | None
    """Set at a fork (more than one child under its parent, or several roots)."""

    @property
    def id(self) -> str:
        """The message id."""
        return str(self.message.get("id"))


@dataclass(frozen=True)
class Page:
    """Consecutive messages of a path, oldest first, and whether older ones remain."""

    entries: list[Entry]
    has_older: bool

    @property
    def oldest_id(self) -> str | None:
        """Where the next older page starts (exclusive), or None for an empty page."""
        return self.entries[0].id if self.entries else None

    @property
    def newest_id(self) -> str | None:
        """The last message shown, or None for an empty page."""
        return self.entries[-1].id if self.entries else None


class _Forks:
    """Sibling lists of the parents asked about, each read once per request."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._children: dict[str | None, tuple[str, ...]] = {}

    def of(self, message_id: str, parent_id: str | None) -> Siblings | None:
        if parent_id not in self._children:
            found = (self._session.get_roots() if parent_id is None
                     else self._session.get_branches(parent_id))
            self._children[parent_id] = tuple(str(m.get("id")) for m in found)
        ids = self._children[parent_id]
        if len(ids) < 2 or message_id not in ids:
            return None
        return Siblings(ids, ids.index(message_id))


def _records(session: Session) -> dict[str, StoredCompaction]:
    """The session's compaction records by the id of the synthetic message each shows as."""
    return {COMPACTION_PREFIX + r.id: r for r in session.get_compactions()}


def entries(
    session: Session, newest_first: list[Message], older: Message | None,
    records: dict[str, StoredCompaction],
) -> list[Entry]:
    """Entries of consecutive path messages, oldest first.

    :param newest_first: the messages, as ``history(newest_first=True)`` yields them.
    :param older: the message just below the oldest of them on the path, None at a root.

    A real message's parent is the next older message of the path, or, when that is a
    compaction summary, the last message of its span.
    """
    if not newest_first:
        return []
    forks = _Forks(session)
    out: list[Entry] = []
    below = [*newest_first[1:], older]
    for message, parent in zip(newest_first, below, strict=True):
        record = records.get(str(message.get("id")))
        siblings = None
        if record is None:
            if parent is None:
                parent_id = None
            else:
                parent_record = records.get(str(parent.get("id")))
                parent_id = (str(parent.get("id")) if parent_record is None
                             else parent_record.to_message_id)
            siblings = forks.of(str(message.get("id")), parent_id)
        out.append(Entry(message, codec.stored_size(message), None, record, siblings))
    out.reverse()
    return out


def _stream(session: Session, leaf_id: str | None, before: str | None,
            records: dict[str, StoredCompaction]) -> Iterator[Message]:
    """The path newest first, starting below ``before`` when given (a message shown, or a
    compaction summary shown), else at ``leaf_id`` (None: the active leaf).

    The path ending at a message shown is a prefix of the shown path, and overlays plan the
    same on it, so the page continues the one shown.
    """
    if before is None:
        yield from session.history(leaf_id=leaf_id, newest_first=True)
        return
    record = records.get(before)
    anchor = before if record is None else record.from_message_id
    stream = session.history(leaf_id=anchor, newest_first=True)
    first = next(stream, None)
    if first is None:
        return
    if first.get("id") != anchor:  # the store changed under the page: show what it holds
        yield first
    yield from stream


def older_page(session: Session, *, leaf_id: str | None, before: str | None,
               limit: int) -> Page:
    """Up to ``limit`` messages of the path, the newest first read: the newest ones of the
    branch (``before`` None), or those just older than the message ``before``.

    Reads ``limit + 1`` messages newest first (the extra one tells the parent of the oldest
    and whether older ones remain); rows further back are not touched.
    """
    records = _records(session)
    taken = list(islice(_stream(session, leaf_id, before, records), limit + 1))
    older = taken[limit] if len(taken) > limit else None
    shown = taken[:limit]
    return Page(entries(session, shown, older, records), older is not None)


def newer(session: Session, after: str | None, limit: int) -> list[Entry] | None:
    """Messages of the active path newer than ``after`` (a message shown), oldest first.

    None when ``after`` is no longer on the active path within the newest ``limit`` messages
    (the active branch moved elsewhere, a compaction hid it, or many messages came): the page
    should be reloaded. Reads the newest messages until ``after``: one row when nothing is new.
    """
    records = _records(session)
    taken: list[Message] = []
    stream = session.history(newest_first=True)
    for message in stream:
        if after is not None and message.get("id") == after:
            return entries(session, taken, message, records)
        taken.append(message)
        if len(taken) > limit:
            return None
    return None if after is not None else entries(session, taken, None, records)


def branch_leaf(session: Session, message_id: str) -> str:
    """The newest leaf below ``message_id`` (newest child at each step), for a branch switch.

    One :meth:`Session.get_branches` per step, at most :data:`BRANCH_WALK_LIMIT` steps.
    """
    current = message_id
    for _ in range(BRANCH_WALK_LIMIT):
        children = session.get_branches(current)
        if not children:
            break
        current = str(children[-1].get("id"))
    return current


def path_tokens(session: Session, leaf_id: str | None) -> tuple[int, bool]:
    """The token estimate of the path shown, and whether overlays are applied to it.

    The active path: :meth:`Session.get_token_estimate` (memoised; no content read). Another
    branch: the sum of its rows' stamped estimates, before overlays (a walk of its path).
    """
    if leaf_id is None:
        return session.get_token_estimate(), True
    return sum(r.token_estimate for r in session.get_history_row_stats(leaf_id)), False


def originals(
    session: Session, compaction_message_id: str, offset: int, limit: int
) -> tuple[list[Entry], int] | None:
    """The stored messages a compaction summary stands for, from ``offset`` (at most
    ``limit``), and how many there are; None when the summary is not of this session.

    Reads the span's path without content (:meth:`Session.get_history_row_stats`), then only
    the messages returned (:meth:`Session.get_message`).
    """
    record = _records(session).get(compaction_message_id)
    if record is None:
        return None
    ids = [r.id for r in session.get_history_row_stats(record.to_message_id)]
    if record.from_message_id not in ids:
        return [], 0
    span = ids[ids.index(record.from_message_id):]
    chosen = span[max(0, offset) : max(0, offset) + limit]
    out = []
    for mid in chosen:
        message = session.get_message(mid)
        if message is not None:
            out.append(Entry(message, codec.stored_size(message), None, None, None))
    return out, len(span)


# --- attachments ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Payload:
    """The bytes of a file part, with the media type its message gives them."""

    data: bytes
    media_type: str
    filename: str | None


def _decoded(url: str) -> tuple[bytes, str] | None:
    """(bytes, media type) of a ``data:`` URL, base64 or percent-encoded; None otherwise."""
    header = parse_data_url(url)
    if header is None:
        return None
    payload = url[header.comma + 1 :]
    media_type = header.media_type.split(";", 1)[0].strip() or DEFAULT_MEDIA_TYPE
    if header.base64:
        try:
            return base64.b64decode(payload, validate=False), media_type
        except (binascii.Error, ValueError):
            return None
    return urllib.parse.unquote_to_bytes(payload), media_type


def _text_field(part: dict[str, object], key: str) -> str | None:
    value = part.get(key)
    return value if isinstance(value, str) else None


def attachment(session: Session, message_id: str, part_index: int) -> Payload | None:
    """The file of part ``part_index`` of a stored message (payloads are put back on read):
    a ``data:`` URL in ``url``, or base64 ``data`` with a ``mediaType``; None when there is
    none. The media type is the part's ``mediaType``, else the data URL's."""
    message = session.get_message(message_id)
    parts = message.get("parts") if message is not None else None
    if not isinstance(parts, list) or not 0 <= part_index < len(parts):
        return None
    part = parts[part_index]
    if not isinstance(part, dict):
        return None
    declared = _text_field(part, "mediaType")
    filename = _text_field(part, "filename") or _text_field(part, "name")
    url = _text_field(part, "url")
    found = _decoded(url) if url is not None else None
    if found is None:
        data = _text_field(part, "data")
        if data is None:
            return None
        try:
            found = base64.b64decode(data, validate=False), DEFAULT_MEDIA_TYPE
        except (binascii.Error, ValueError):
            return None
    body, url_type = found
    return Payload(body, (declared or url_type).strip().lower(), filename)


def has_payload(part: object) -> bool:
    """Does a part carry a file the viewer serves (:func:`attachment` finds it)?"""
    if not isinstance(part, dict):
        return False
    url = part.get("url")
    if isinstance(url, str) and parse_data_url(url) is not None:
        return True
    return isinstance(part.get("data"), str) and isinstance(part.get("mediaType"), str)

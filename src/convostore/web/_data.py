"""What the viewer reads from a store: every store call of the web package is made here.

The routes and templates see only the small types below (:class:`Entry`, :class:`Page`, ...)
and the store's own records (:class:`~convostore.SessionEntry`), so a better store call
replaces one function here and nothing else.

- :func:`directory` is one page of :meth:`Sessions.list_conversations` (newest first, keyed by
  its cursor, filtered by owner and metadata in SQL);
- a conversation page is the first ``limit`` records of
  ``Session.history_records(newest_first=True)``: each message with its stored time, parent and
  size, and rows further back are not touched, so a 100,000-message session opens as fast as a
  10-message one; a fork's switcher is :meth:`Session.get_sibling_position` (no content read);
- :func:`branch_leaf` picks, among :meth:`Session.get_leaves` (the chosen leaf first), the
  newest leaf below a message;
- :func:`wait_for_changes` blocks on :meth:`Sessions.watch` for the live stream.
"""

from __future__ import annotations

import base64
import binascii
import json
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from ..compaction import COMPACTION_PREFIX
from ..directory._records import MessageRecord, SessionEntry
from ..errors import CursorExpired, InvalidArgument, StoreClosed
from ..messages._parts import DEFAULT_MEDIA_TYPE, parse_data_url
from ..model import Change, Message, SearchResult, StoredCompaction
from ..session import Session
from ..store import Sessions

__all__ = [
    "DirectoryPage",
    "Entry",
    "Page",
    "Payload",
    "Siblings",
    "Wake",
    "attachment",
    "branch_leaf",
    "directory",
    "entries",
    "has_payload",
    "metadata_filter",
    "newer",
    "older_page",
    "originals",
    "path_tokens",
    "search",
    "start_cursor",
    "wait_for_changes",
]


# --- the sessions page ------------------------------------------------------------------------


@dataclass(frozen=True)
class DirectoryPage:
    """One page of the directory, newest ``updated_at`` first."""

    rows: list[SessionEntry]
    next_cursor: str | None
    """The cursor of the next (older) page, None on the last."""


def metadata_filter(pairs: Iterable[str]) -> dict[str, Any]:
    """The ``metadata=`` filter of ``key=value`` texts (empty ones skipped).

    A value that reads as a JSON number, ``true``, ``false``, ``null`` or a quoted string is
    that value (``n=3`` is the number, ``n="3"`` the string); any other text is itself.

    :raises InvalidArgument: a text without ``=``, or with an empty key.
    """
    found: dict[str, Any] = {}
    for pair in pairs:
        if not pair.strip():
            continue
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidArgument("meta", f"a metadata filter is key=value, not {pair!r}")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        if isinstance(value, (dict, list)):
            value = raw
        found[key.strip()] = value
    return found


def directory(
    store: Sessions, *, owner: str | None, metadata: dict[str, Any], cursor: str | None,
    per_page: int,
) -> DirectoryPage:
    """One page of :meth:`Sessions.list_conversations` (an index read; no message read)."""
    page = store.list_conversations(owner=owner, metadata=metadata or None, limit=per_page,
                                    cursor=cursor)
    return DirectoryPage(page.sessions, page.next_cursor)


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
    """Stored bytes: the row, its continuations and referenced payloads' base64."""
    created_at: int | None
    """Epoch milliseconds stored with its row (a compaction summary: its record's time);
    None for an original message shown under its summary."""
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


def _records(session: Session) -> dict[str, StoredCompaction]:
    """The session's compaction records by the id of the synthetic message each shows as."""
    return {COMPACTION_PREFIX + r.id: r for r in session.get_compactions()}


def _siblings(session: Session, message_id: str) -> Siblings | None:
    """The fork ``message_id`` stands at (one content-free read), None when it has none."""
    position = session.get_sibling_position(message_id)
    if position is None or position.count < 2:
        return None
    return Siblings(position.sibling_ids, position.index)


def entries(
    session: Session, newest_first: list[MessageRecord], records: dict[str, StoredCompaction],
) -> list[Entry]:
    """Entries of consecutive path records (as ``history_records(newest_first=True)`` yields
    them), oldest first; each real message's fork from :meth:`Session.get_sibling_position`."""
    out: list[Entry] = []
    for record in reversed(newest_first):
        mid = str(record.message.get("id"))
        compaction = records.get(mid)
        siblings = _siblings(session, mid) if compaction is None else None
        out.append(Entry(record.message, record.size, record.created_at, compaction, siblings))
    return out


def _stream(session: Session, leaf_id: str | None, before: str | None,
            records: dict[str, StoredCompaction]) -> Iterator[MessageRecord]:
    """The path newest first, starting below ``before`` when given (a message shown, or a
    compaction summary shown), else at ``leaf_id`` (None: the active leaf).

    The path ending at a message shown is a prefix of the shown path, and overlays plan the
    same on it, so the page continues the one shown.
    """
    if before is None:
        yield from session.history_records(leaf_id=leaf_id, newest_first=True)
        return
    record = records.get(before)
    anchor = before if record is None else record.from_message_id
    stream = session.history_records(leaf_id=anchor, newest_first=True)
    first = next(stream, None)
    if first is None:
        return
    if first.message.get("id") != anchor:  # the store changed under the page: show it
        yield first
    yield from stream


def older_page(session: Session, *, leaf_id: str | None, before: str | None,
               limit: int) -> Page:
    """Up to ``limit`` messages of the path, the newest first read: the newest ones of the
    branch (``before`` None), or those just older than the message ``before``.

    Reads ``limit + 1`` records newest first (the extra one tells whether older ones remain);
    rows further back are not touched.
    """
    records = _records(session)
    taken = list(islice(_stream(session, leaf_id, before, records), limit + 1))
    return Page(entries(session, taken[:limit], records), len(taken) > limit)


def newer(session: Session, after: str | None, limit: int) -> list[Entry] | None:
    """Messages of the active path newer than ``after`` (a message shown), oldest first.

    None when ``after`` is no longer on the active path within the newest ``limit`` messages
    (the active branch moved elsewhere, a compaction hid it, or many messages came): the page
    should be reloaded. Reads the newest messages until ``after``: one row when nothing is new.
    """
    records = _records(session)
    taken: list[MessageRecord] = []
    for record in session.history_records(newest_first=True):
        if after is not None and record.message.get("id") == after:
            return entries(session, taken, records)
        taken.append(record)
        if len(taken) > limit:
            return None
    return None if after is not None else entries(session, taken, records)


def branch_leaf(session: Session, message_id: str) -> str:
    """The leaf a branch switch to ``message_id`` shows: the session's chosen leaf when it is
    below ``message_id``, else the newest leaf below it (``message_id`` itself when it has
    no children, or is not stored).

    One content-free path read (:meth:`Session.get_history_row_stats`) per leaf tried, newest
    first, after one read of :meth:`Session.get_leaves`.
    """
    leaves = [str(m.get("id")) for m in session.get_leaves()]
    if message_id in leaves or not leaves:
        return message_id
    info = session.get_info()
    chosen = info.active_leaf if info is not None else None
    candidates = ([chosen] if chosen is not None else []) + [
        leaf for leaf in reversed(leaves) if leaf != chosen]
    for leaf in candidates:
        if any(row.id == message_id for row in session.get_history_row_stats(leaf)):
            return leaf
    return message_id


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
    stats = session.get_history_row_stats(record.to_message_id)
    ids = [r.id for r in stats]
    if record.from_message_id not in ids:
        return [], 0
    span = stats[ids.index(record.from_message_id):]
    out = []
    for row in span[max(0, offset) : max(0, offset) + limit]:
        message = session.get_message(row.id)
        if message is not None:
            out.append(Entry(message, row.bytes, None, None, None))
    return out, len(span)


# --- live -------------------------------------------------------------------------------------


def start_cursor(store: Sessions) -> int:
    """Where the change log is now: taken before a page is read, the page's live stream
    follows from it and misses nothing written after the read."""
    return store.change_cursor()


@dataclass(frozen=True)
class Wake:
    """What :func:`wait_for_changes` found."""

    changes: list[Change]
    """The session's changes after the cursor (empty: none came in time)."""
    cursor: int
    """The cursor to wait from next."""
    expired: bool = False
    """The cursor was older than the change log: the page should be reloaded."""
    closed: bool = False
    """The store closed: there is nothing more to wait for."""


def wait_for_changes(store: Sessions, session_id: str, since: int, timeout: float) -> Wake:
    """Block until the session has changes after ``since`` (every change already there, up
    to a few hundred), or ``timeout`` seconds pass; a :meth:`Sessions.watch` that ends with
    the wait (and at once when the store closes).
    """
    try:
        stream = store.watch(since=since, session_id=session_id, timeout=timeout)
        try:
            first = next(stream, None)
        finally:
            close = getattr(stream, "close", None)  # a generator: end its wait now
            if close is not None:
                close()
        if first is None:
            return Wake([], since, closed=store.closed)
        found = [first, *store.changes(first.cursor, limit=500, session_id=session_id)]
    except CursorExpired:
        return Wake([], since, expired=True)
    except StoreClosed:
        return Wake([], since, closed=True)
    return Wake(found, found[-1].cursor)


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

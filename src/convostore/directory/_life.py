"""A conversation's whole life, written once for both engines and both faces.

- **The directory** (table ``convostore_sessions``): one row per session, kept in step by every
  message write in the same transaction (count, bytes, times), described by the application
  (:func:`update_info`: title, owner, metadata, expiry, ``belongs_to``), listed newest-updated
  first with keyset cursors (:func:`list_conversations`). The session manager's registry is the
  same table (its rows are marked managed).
- **Deletion** of a conversation and everything of it, context data included
  (:func:`delete_session`), and **retention** in bounded batches (:func:`prune`).
- **The chosen branch**: :func:`set_active_leaf` stores the leaf reads and appends follow;
  :func:`get_leaves`, :func:`sibling_position`.
- **Row facts in reads**: :func:`history_records` pairs the messages ``history()`` yields with
  their stored ``created_at``, parent id and size.

:class:`~convostore.Session` and :class:`~convostore.Sessions` call these with their
:class:`~convostore._core.StoreCore`; the async face runs those methods on its worker.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from .. import codec, limits
from .._core import StoreCore
from ..backends.base import Ops
from ..compaction import COMPACTION_PREFIX
from ..errors import InvalidArgument, InvalidArgumentType
from ..messages._rows import hydrate
from ..messages._writes import now_ms
from ..model import UNSET, ChangeEvent, Message, SessionSummary, Unset
from ._records import MessageRecord, PruneResult, SessionEntry, SessionPage, SiblingPosition
from ._sql import ENTRY_COLUMNS, is_internal

DEFAULT_PAGE = 50
"""Sessions per page of :func:`list_conversations` unless ``limit`` says otherwise."""
PRUNE_BATCH_SESSIONS = 100
"""Most sessions one prune transaction deletes (``batch_size``)."""
PRUNE_BATCH_ROWS = 2_000
"""Most message rows one prune transaction deletes, unless one session alone holds more."""
_RECORD_BATCHES = (1, 5, 15, 45, 50)
"""Messages whose row facts one query reads: growing, so taking k records reads little more."""

Moment = datetime | int | float
"""A point in time: an aware ``datetime`` (a naive one is read as UTC) or epoch milliseconds.
Public as ``convostore.Moment`` (``Session.update_info``, ``Sessions.list_conversations``)."""
Duration = timedelta | int | float
"""A length of time: a ``timedelta`` or seconds. Public as ``convostore.Duration``
(``Session.update_info``, ``Sessions.prune``)."""


# --- conversions -------------------------------------------------------------------------------


def moment_ms(name: str, value: Moment) -> int:
    """``value`` as epoch milliseconds; an error naming ``name`` otherwise."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)  # a naive datetime is read as UTC
        return limits.check_timestamp(name, round(value.timestamp() * 1000))
    return limits.check_timestamp(name, value)


def duration_ms(name: str, value: Duration) -> int:
    """``value`` (a ``timedelta`` or seconds) as milliseconds, at least 0."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentType(name, f"must be a timedelta or seconds, not {value!r}")
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidArgument(name, f"must be a finite, non-negative duration, not {value!r}")
    return min(round(seconds * 1000), limits.MAX_TIMESTAMP_MS)


def encode_cursor(updated_at: int, session_id: str) -> str:
    """The opaque cursor of a listing position (URL-safe text)."""
    raw = json.dumps([updated_at, session_id], ensure_ascii=False).encode("utf-8", "surrogatepass")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """A cursor back as ``(updated_at, session_id)``; :class:`InvalidArgument` if malformed."""
    if not isinstance(cursor, str):
        raise InvalidArgumentType("cursor", f"must be a string, not {type(cursor).__name__}")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw.decode("utf-8", "surrogatepass"))
        updated_at, session_id = value
        if isinstance(updated_at, bool) or not isinstance(updated_at, int):
            raise ValueError
        if not isinstance(session_id, str):
            raise ValueError
        # Bound as query parameters: what no engine can take is no cursor it returned.
        limits.check_id("cursor", session_id)
        limits.check_json_scalar("cursor", updated_at)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise InvalidArgument("cursor", "is not a cursor this store returned") from None
    return updated_at, session_id


def entry(row: Sequence[Any]) -> SessionEntry:
    """A directory row (``ENTRY_COLUMNS`` order) as the API returns it."""
    values = dict(zip(ENTRY_COLUMNS, row, strict=True))
    metadata = values["metadata"]
    return SessionEntry(
        session_id=values["session_id"], title=values["title"], owner=values["owner"],
        metadata=codec.loads(metadata) if metadata else {},
        created_at=int(values["created_at"]), updated_at=int(values["updated_at"]),
        message_count=int(values["message_count"]), bytes=int(values["bytes"]),
        expires_at=None if values["expires_at"] is None else int(values["expires_at"]),
        ttl=None if values["ttl"] is None else int(values["ttl"]),
        active_leaf=values["active_leaf"], belongs_to=values["context_of"],
    )


def _metadata_filter(metadata: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    if metadata is None:
        return []
    if not isinstance(metadata, Mapping):
        raise InvalidArgumentType("metadata", f"must be a mapping, not {type(metadata).__name__}")
    out: list[tuple[str, Any]] = []
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or '"' in key or "\\" in key:
            raise InvalidArgument("metadata", f"key {key!r}: a non-empty string without quotes "
                                  "or backslashes")
        limits.check_text("metadata", key)
        # What both engines can bind and compare: never a driver's error, the same answer.
        limits.check_json_scalar(f"metadata[{key!r}]", value)
        out.append((key, value))
    return out


# --- the directory -----------------------------------------------------------------------------


def get_info(core: StoreCore, session_id: str) -> SessionEntry | None:
    """The directory row of ``session_id``, or None (never written, never described)."""
    with core.backend.read() as ops:
        row = ops.dir_get(session_id)
    return None if row is None else entry(row)


def update_info(
    core: StoreCore,
    session_id: str,
    *,
    title: str | None | Unset = UNSET,
    owner: str | None | Unset = UNSET,
    metadata: Mapping[str, Any] | None | Unset = UNSET,
    expires_at: Moment | None | Unset = UNSET,
    ttl: Duration | None | Unset = UNSET,
    belongs_to: str | None | Unset = UNSET,
) -> SessionEntry:
    """Set what was passed (None clears a field); creates the row of a session never written."""
    values: dict[str, Any] = {}
    now = now_ms()
    if not isinstance(title, Unset):
        limits.check_text("title", title, optional=True)
        values["title"] = title
    if not isinstance(owner, Unset):
        limits.check_id("owner", owner, optional=True)
        values["owner"] = owner
    if not isinstance(metadata, Unset):
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidArgumentType(
                "metadata", f"must be a JSON object (a dict) or None, not {type(metadata).__name__}"
            )
        text = None if metadata is None else codec.dumps(dict(metadata))
        if text is not None and "\\u" in text:  # how a NUL or a lone surrogate is written
            limits.check_json_text("metadata", metadata)
        values["metadata"] = text
    if not isinstance(ttl, Unset):
        values["ttl"] = None if ttl is None else duration_ms("ttl", ttl)
        if ttl is not None and isinstance(expires_at, Unset):
            values["expires_at"] = now + values["ttl"]
    if not isinstance(expires_at, Unset):
        values["expires_at"] = None if expires_at is None else moment_ms("expires_at", expires_at)
    if not isinstance(belongs_to, Unset):
        limits.check_id("belongs_to", belongs_to, optional=True)
        if belongs_to == session_id:
            raise InvalidArgument("belongs_to", "a session cannot belong to itself")
        values["context_of"] = belongs_to
    with core.backend.write(session_id) as ops:
        ops.dir_set(session_id, values, now)
        row = ops.dir_get(session_id)
    assert row is not None
    return entry(row)


def list_conversations(
    core: StoreCore,
    *,
    owner: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    updated_after: Moment | None = None,
    updated_before: Moment | None = None,
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
) -> SessionPage:
    """One page of the directory, newest ``updated_at`` first (ties: id descending)."""
    limits.check_id("owner", owner, optional=True)
    filters = _metadata_filter(metadata)
    lo = None if updated_after is None else moment_ms("updated_after", updated_after)
    hi = None if updated_before is None else moment_ms("updated_before", updated_before)
    count = limits.check_count("limit", limit, negative=True)
    after = None if cursor is None else decode_cursor(cursor)
    if count <= 0:
        return SessionPage([], None)
    with core.backend.read() as ops:
        # One row more than the page tells whether another follows; no engine binds more
        # than MAX_COUNT (nor holds that many rows).
        rows = ops.dir_page(owner=owner, metadata=filters, updated_from=lo, updated_to=hi,
                            after=after, limit=min(count + 1, limits.MAX_COUNT))
    entries = [entry(r) for r in rows[:count]]
    more = len(rows) > count
    last = entries[-1] if entries else None
    return SessionPage(
        entries, encode_cursor(last.updated_at, last.session_id) if more and last else None
    )


def list_sessions(core: StoreCore) -> list[SessionSummary]:
    """Every application session holding messages, by id (``Sessions.list_sessions``)."""
    with core.backend.read() as ops:
        return [SessionSummary(*row) for row in ops.dir_summaries()]


# --- deletion and retention --------------------------------------------------------------------


def _drop(core: StoreCore, ops: Ops, session_ids: Sequence[str]) -> list[str]:
    """Delete ``session_ids`` and the sessions that belong to them, in the caller's scope;
    returns every id deleted."""
    doomed = list(session_ids) + ops.dir_dependents(session_ids)
    for sid in doomed:
        core.search_index.clear(ops, sid)
    dropped = ops.drop_sessions(doomed)
    ops.collect(dropped)
    for sid in doomed:
        core.path_memos.forget(sid)
    return doomed


def delete_session(core: StoreCore, session_id: str) -> bool:
    """Delete a conversation and all of it in one transaction; True when anything existed."""
    limits.check_id("session_id", session_id)
    with core.backend.write(None) as ops:  # it and its context sessions: every writer waits
        existed = bool(ops.dir_sizes([session_id])) or ops.tail(session_id) is not None
        _drop(core, ops, [session_id])
        logged = core.changes.log(ops, "delete_session", session_id, leaf_id=None)
    core.events.emit(ChangeEvent("delete_session", session_id, cursor=logged.committed()))
    return existed


def prune(
    core: StoreCore,
    *,
    older_than: Duration | None = None,
    owner: str | None = None,
    expired: bool = True,
    dry_run: bool = False,
    batch_size: int = PRUNE_BATCH_SESSIONS,
    limit: int | None = None,
) -> PruneResult:
    """Delete idle and expired conversations in short transactions (see ``Sessions.prune``)."""
    idle_ms = None if older_than is None else duration_ms("older_than", older_than)
    limits.check_id("owner", owner, optional=True)
    if not isinstance(expired, bool):
        raise InvalidArgumentType("expired", f"must be a bool, not {expired!r}")
    size = max(1, limits.check_count("batch_size", batch_size))
    most = None if limit is None else limits.check_count("limit", limit)
    now = now_ms()
    idle_before = None if idle_ms is None else now - idle_ms
    found: list[str] = []
    after: tuple[int, str] | None = None
    batches = 0
    while most is None or len(found) < most:
        want = size if most is None else min(size, most - len(found))
        with core.backend.read() as ops:
            candidates = ops.prune_candidates(now=now, idle_before=idle_before, owner=owner,
                                              expired=expired, after=after, limit=want)
        if not candidates:
            break
        if dry_run:
            found += [c[0] for c in candidates]
            after = (candidates[-1][1], candidates[-1][0])
            continue
        chosen: list[str] = []
        rows = 0
        for sid, updated_at, count in candidates:
            if chosen and rows + count > PRUNE_BATCH_ROWS:
                break
            chosen.append(sid)
            rows += count
            after = (updated_at, sid)
        started = time.perf_counter()
        with core.backend.write(None) as ops:
            # Asked again under the lock: a conversation written meanwhile is live, and kept.
            still = set(ops.still_prunable(chosen, now=now, idle_before=idle_before,
                                           expired=expired))
            doomed = [sid for sid in chosen if sid in still]
            if doomed:
                _drop(core, ops, doomed)
            logged = [core.changes.log(ops, "delete_session", sid, leaf_id=None)
                      for sid in doomed]
        batches += 1
        found += doomed
        for sid, entry in zip(doomed, logged, strict=True):
            core.events.emit(ChangeEvent("delete_session", sid, cursor=entry.committed()))
        # Let writers that queued behind this batch in before the next one takes the lock.
        time.sleep(min(0.05, time.perf_counter() - started))
    return PruneResult(found, dry_run, batches)


# --- the chosen branch -------------------------------------------------------------------------


def set_active_leaf(core: StoreCore, session_id: str, message_id: str) -> None:
    """Store ``message_id`` as the leaf reads and appends without ``parent_id`` follow."""
    limits.check_id("message_id", message_id)
    with core.backend.write(session_id) as ops:
        if ops.row_meta(session_id, message_id) is None:
            raise InvalidArgument(
                "message_id", f"no message {message_id!r} in session {session_id!r}"
            )
        ops.dir_set_leaf(session_id, message_id)
        logged = core.changes.log(ops, "set_active_leaf", session_id, message_id=message_id,
                                  leaf_id=message_id)
    core.events.emit(ChangeEvent("set_active_leaf", session_id, message_ids=[message_id],
                                 cursor=logged.committed()))


def get_leaves(core: StoreCore, session_id: str) -> list[Message]:
    """Every message without children, in write order (no overlays)."""
    with core.backend.read() as ops:
        rows = ops.leaves(session_id)
        hydrated = hydrate(ops, session_id, rows)
    return [hydrated[r.id] for r in rows if r.id in hydrated]


def sibling_position(
    core: StoreCore, session_id: str, message_id: str
) -> SiblingPosition | None:
    """``message_id``'s place among its parent's children (or the roots); no content read."""
    limits.check_id("message_id", message_id)
    with core.backend.read() as ops:
        meta = ops.row_meta(session_id, message_id)
        if meta is None:
            return None
        parent = None if meta.parent_id is None else ops.row_meta(session_id, meta.parent_id)
        if parent is not None and parent.seq < meta.seq:
            siblings = ops.child_ids(session_id, parent.id)
        else:
            siblings = ops.root_ids(session_id)
    ids = tuple(i for i, _seq in siblings)
    if message_id not in ids:  # a parent written after its child: it reads as a root
        ids = (message_id,)
    return SiblingPosition(ids.index(message_id), len(ids), ids)


# --- history with row facts --------------------------------------------------------------------


def history_records(
    core: StoreCore, session_id: str, messages: Iterator[Message], *, newest_first: bool
) -> Iterator[MessageRecord]:
    """The messages of a ``history()`` stream with their rows' facts, read a few at a time
    (1, 5, 15, 45, then 50 per content-free query) in step with the stream."""
    sizes = iter(_RECORD_BATCHES if newest_first else _RECORD_BATCHES[-1:])
    want = next(sizes)
    pending: list[Message] = []
    records: dict[str, int] | None = None  # compaction id -> created_at, read when needed
    for message in messages:
        pending.append(message)
        if len(pending) < want:
            continue
        records = yield from _flush(core, session_id, pending, records)
        pending = []
        want = next(sizes, want)
    if pending:
        yield from _flush(core, session_id, pending, records)


def _flush(
    core: StoreCore, session_id: str, pending: list[Message], records: dict[str, int] | None
) -> Generator[MessageRecord, None, dict[str, int] | None]:
    ids = [m["id"] for m in pending]
    with core.backend.read() as ops:
        facts = ops.row_facts(session_id, ids)
        missing = [i for i in ids if i not in facts and i.startswith(COMPACTION_PREFIX)]
        if missing and records is None:
            records = {r.id: r.created_at for r in ops.compactions(session_id)}
    for message in pending:
        fact = facts.get(message["id"])
        if fact is not None:
            yield MessageRecord(message, fact[1], fact[0], fact[2])
        else:  # a compaction summary (or a row deleted since it was read)
            made = (records or {}).get(message["id"][len(COMPACTION_PREFIX):], 0)
            yield MessageRecord(message, made, None, codec.stored_size(message))
    return records


__all__ = [
    "Duration", "Moment", "delete_session", "get_info", "get_leaves", "history_records",
    "is_internal", "list_conversations", "list_sessions", "prune", "set_active_leaf",
    "sibling_position", "update_info",
]

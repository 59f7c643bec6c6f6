"""Reading a dump back into a store: every line checked, records written in batches.

Each line is parsed and checked as it is read; records of one kind (and one session) gather
into a batch of at most :data:`~convostore.dump._format.WINDOW_ROWS` records or
:data:`~convostore.dump._format.WINDOW_BYTES` of text, written in one transaction. A broken line
raises
:class:`~convostore.errors.BadDump` naming it before anything of it is written. Messages go
through the write pipeline (:meth:`Writer.prepare`, :meth:`Writer.insert_batch`), verbatim,
keeping the dumped parent, time and token estimate; what the store already holds is skipped,
which makes a restore idempotent and resumable. Directory records come after every message, so
the rows are set as dumped once the message writes (which touch them) are done; the counts in
them are the message writes' own.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from .. import codec, limits
from ..backends._schema import REGISTRY_COLUMNS
from ..backends.rows import CompactionRow
from ..errors import (
    BadDump,
    ConvostoreError,
    DumpTooNew,
    InvalidArgumentType,
    InvalidMessageType,
)
from ..messages._borrowed import check_pointers
from ..messages._writes import BatchRow, Writer, stored_compaction
from ..model import ChangeEvent, Message
from ._format import (
    ATTACHMENT,
    COMPACTION,
    DIRECTORY,
    END,
    FORMAT,
    HEADER,
    MESSAGE,
    VERSION,
    WINDOW_BYTES,
    WINDOW_ROWS,
    DumpCounts,
)
from ._sql import DIR_DUMP_COLUMNS

if TYPE_CHECKING:
    from ..store import Sessions

logger = logging.getLogger("convostore")

_HASH = re.compile(r"[0-9a-f]{64}\Z")
_COUNTED = ("sessions", "messages", "compactions", "attachments", "directory")
_PLURAL = {MESSAGE: "messages", COMPACTION: "compactions", ATTACHMENT: "attachments",
           DIRECTORY: "directory"}
_REQUIRED = {"id": str, "name": str, "created_at": int, "updated_at": int}
"""Version 1 directory (registry) fields without which a row cannot be stored."""
_DEFAULTS: dict[str, Any] = {"input_tokens": 0, "output_tokens": 0, "estimated_cost": 0.0,
                             "managed": 0}
_TEXT = (str, type(None))
_DIR_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(DIR_DUMP_COLUMNS, _TEXT),
    "metadata": (dict, type(None)),
    **dict.fromkeys(("created_at", "updated_at", "managed", "input_tokens", "output_tokens"),
                    (int,)),
    **dict.fromkeys(("expires_at", "ttl"), (int, type(None))),
    "estimated_cost": (float, int),
}
"""The type of each directory field of a version 2 record (an int is never a bool)."""


def _field(record: dict[str, Any], name: str, kind: type | tuple[type, ...],
           optional: bool = False) -> Any:
    """``record[name]``, checked to be of ``kind`` (an int is never a bool)."""
    if name not in record:
        if optional:
            return None
        raise ValueError(f"{record.get('type')} record lacks {name!r}")
    value = record[name]
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ValueError(f"{record.get('type')} record: {name!r} has the wrong type")
    return value


class Restorer:
    """One restore of a dump into a store."""

    def __init__(self, store: Sessions, progress: Callable[[int, int | None], object] | None
                 ) -> None:
        self._core = store.core
        self._backend = store.core.backend
        self._progress = progress
        self._counts = dict.fromkeys((*_COUNTED, "present"), 0)  # written (and skipped)
        self._seen = dict.fromkeys(_COUNTED, 0)  # records read, checked against the end's
        self._last_session: str | None = None
        self._kind: str | None = None
        self._sid: str | None = None
        self._pending: list[Any] = []
        self._bytes = 0
        self._records = 0
        self._ignored: set[str] = set()
        self._version = VERSION
        self._written: set[str] = set()  # sessions this restore wrote messages into
        self._brought: set[str] = set()  # the dump's payloads: its messages may point at them
        self._at: dict[str, int] = {}  # per session, the newest row's seq this restore passed
        self._reorder: set[str] = set()  # sessions whose rows go back in the dump's order

    def run(self, source: Iterable[str]) -> DumpCounts:
        """Restore every record of ``source``; the counts of what was written."""
        number = 0
        header = end = False
        for number, line in enumerate(source, 1):
            if not line.strip():
                continue
            record = self._parse(number, line)
            kind = record["type"]
            if not header:
                self._header(number, record)
                header = True
                continue
            if end:
                raise BadDump(number, "a record after the end record")
            try:
                if kind == END:
                    self._flush(number)
                    self._end(number, record)
                    end = True
                else:
                    self._record(number, kind, record, len(line))
            except BadDump:
                raise
            except (ValueError, InvalidMessageType, InvalidArgumentType) as exc:
                # our own checks, and the library's (InvalidMessage, InvalidArgument...)
                raise BadDump(number, str(exc)) from exc
        if not header:
            raise BadDump(max(number, 1), "empty: not a convostore dump")
        if not end:  # the records read are whole: keep them, a second run finishes
            self._flush(number)
            raise BadDump(number, "the dump ends before its end record (truncated?)")
        return DumpCounts(**self._counts)

    # --- lines ----------------------------------------------------------------------------

    def _parse(self, number: int, line: str | bytes) -> dict[str, Any]:
        if isinstance(line, (bytes, bytearray)):  # a file opened in binary mode: its lines
            try:
                line = bytes(line).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise BadDump(number, "not UTF-8 text: a dump is the UTF-8 text dump() "
                              "writes") from exc
        try:
            record = codec.loads(line)
        except ValueError as exc:
            raise BadDump(number, f"not valid JSON ({exc}): truncated or corrupt") from exc
        if not isinstance(record, dict) or record.get("type") not in (
            HEADER, ATTACHMENT, DIRECTORY, MESSAGE, COMPACTION, END
        ):
            found = record.get("type") if isinstance(record, dict) else None
            raise BadDump(number, f"not a dump record (type {found!r})")
        return record

    def _header(self, number: int, record: dict[str, Any]) -> None:
        if record["type"] != HEADER or record.get("format") != FORMAT:
            raise BadDump(number, "not a convostore dump (the first line is not its header)")
        version = record.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise BadDump(number, f"bad format version {version!r}")
        if version > VERSION:
            raise DumpTooNew(version, VERSION)
        self._version = version

    def _end(self, number: int, record: dict[str, Any]) -> None:
        for name in _COUNTED:
            expected, got = _field(record, name, int), self._seen[name]
            if expected != got:
                raise BadDump(number, f"the end record counts {expected} {name}, the dump "
                              f"holds {got}: records are missing")

    def _record(self, number: int, kind: str, record: dict[str, Any], size: int) -> None:
        if kind == HEADER:
            raise ValueError("a second header record")
        sid: str | None = None
        if kind in (MESSAGE, COMPACTION):
            sid = _field(record, "session", str)
            limits.check_id("session", sid)
        if kind != self._kind or sid != self._sid or len(self._pending) >= WINDOW_ROWS or (
            self._bytes + size > WINDOW_BYTES
        ):
            self._flush(number)
        self._kind, self._sid = kind, sid
        checked = self._checked(kind, record)
        if sid is not None and sid != self._last_session:
            self._last_session = sid
            self._seen["sessions"] += 1
            self._counts["sessions"] += 1
        self._seen[_PLURAL[kind]] += 1
        self._pending.append((number, checked))
        self._bytes += size

    def _checked(self, kind: str, record: dict[str, Any]) -> Any:
        """A record's fields, checked (before anything of it is written)."""
        if kind == ATTACHMENT:
            h = _field(record, "hash", str)
            if not _HASH.match(h):
                raise ValueError(f"attachment hash {h!r} is not a SHA-256 in hex")
            try:
                data = base64.b64decode(_field(record, "data", str), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ValueError(f"attachment {h[:12]}...: data is not base64") from exc
            if hashlib.sha256(data).hexdigest() != h:
                raise ValueError(f"attachment {h[:12]}...: data does not match its hash")
            return h, data, _field(record, "media_type", str)
        if kind == DIRECTORY and self._version == 1:
            return self._registry_row(_field(record, "row", dict))
        if kind == DIRECTORY:
            return self._directory_row(_field(record, "session", str),
                                       _field(record, "row", dict))
        if kind == COMPACTION:
            row = CompactionRow(
                id=_field(record, "id", str), seq=0, summary=_field(record, "summary", str),
                from_message_id=_field(record, "from_message_id", str),
                to_message_id=_field(record, "to_message_id", str),
                created_at=limits.check_timestamp(
                    "created_at", _field(record, "created_at", int)),
            )
            limits.check_id("id", row.id)
            limits.check_text("summary", row.summary)
            return row
        parent = _field(record, "parent_id", str, optional=True)
        limits.check_id("parent_id", parent, optional=True)
        created = limits.check_timestamp("created_at", _field(record, "created_at", int))
        tokens = _field(record, "tokens", int)
        if tokens < 0:
            raise ValueError("message record: 'tokens' is negative")
        message = codec.validate_message(_field(record, "message", dict))
        return message, parent, created, tokens

    def _registry_row(self, row: dict[str, Any]) -> tuple[Any, ...]:
        """A version 1 directory record: a row of the session manager's registry."""
        for name, kind in _REQUIRED.items():
            if not isinstance(row.get(name), kind) or isinstance(row.get(name), bool):
                raise ValueError(f"directory row lacks {name!r}, or it has the wrong type")
        self._unknown(set(row) - set(REGISTRY_COLUMNS))
        return tuple(row.get(c, _DEFAULTS.get(c)) for c in REGISTRY_COLUMNS)

    def _directory_row(self, sid: str, row: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
        """A directory record: the session and its values in ``DIR_DUMP_COLUMNS`` order."""
        limits.check_id("session", sid)
        values: list[Any] = []
        for name in DIR_DUMP_COLUMNS:
            value: Any = row.get(name, _DEFAULTS.get(name))
            if name in ("created_at", "updated_at") and name not in row:
                raise ValueError(f"directory row lacks {name!r}")
            if not isinstance(value, _DIR_TYPES[name]) or isinstance(value, bool):
                raise ValueError(f"directory row: {name!r} has the wrong type")
            if name in ("created_at", "updated_at", "expires_at") and value is not None:
                limits.check_timestamp(name, value)
            elif name in ("ttl", "input_tokens", "output_tokens") and value is not None:
                limits.check_count(name, value)
            elif name == "managed" and value not in (0, 1):
                raise ValueError("directory row: 'managed' is neither 0 nor 1")
            elif name in ("active_leaf", "context_of", "owner"):
                limits.check_id(name, value, optional=True)
            elif name == "title":
                limits.check_text(name, value, optional=True)
            elif name == "metadata" and value is not None:
                value = codec.dumps(value)  # stored as the store writes it
            elif name == "estimated_cost":
                value = float(cast(float, value))
            values.append(value)
        self._unknown(set(row) - set(DIR_DUMP_COLUMNS))
        return sid, tuple(values)

    def _unknown(self, fields: set[str]) -> None:
        unknown = sorted(fields - self._ignored)
        if unknown:  # fields of a newer minor version: kept by it, dropped here
            logger.warning("restore: directory fields this convostore does not store: %s",
                           ", ".join(unknown))
            self._ignored.update(unknown)

    # --- writing --------------------------------------------------------------------------

    def _flush(self, number: int) -> None:
        pending, kind = self._pending, self._kind
        if not pending:
            return
        self._pending, self._bytes = [], 0
        if kind == ATTACHMENT:
            self._attachments([p[1] for p in pending])
        elif kind == DIRECTORY and self._version == 1:
            self._registry([p[1] for p in pending])
        elif kind == DIRECTORY:
            self._directory([p[1] for p in pending])
        elif kind == COMPACTION:
            assert self._sid is not None
            self._compactions(self._sid, [p[1] for p in pending])
        else:
            assert self._sid is not None
            self._messages(self._sid, pending)
        self._records += len(pending)
        if self._progress is not None:
            self._progress(self._records, None)

    def _attachments(self, payloads: list[tuple[str, bytes, str]]) -> None:
        with self._backend.write(None) as ops:
            stored = ops.attachment_meta([h for h, _d, _t in payloads])
            for h, data, media_type in payloads:
                self._brought.add(h)
                if h in stored:
                    self._counts["present"] += 1
                    continue
                ops.store_payload(h, data, media_type)
                self._counts["attachments"] += 1

    def _directory(self, rows: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Set each row as dumped (after its session's messages, whose writes touched it);
        ``present`` when it already was, and no message of it came in with this restore."""
        with self._backend.write(None) as ops:
            stored = ops.dir_dump_rows([sid for sid, _v in rows])
            for sid, values in rows:
                if stored.get(sid) == values and sid not in self._written:
                    self._counts["present"] += 1
                    continue
                ops.dir_restore(sid, values)
                self._counts["directory"] += 1

    def _registry(self, rows: list[tuple[Any, ...]]) -> None:
        with self._backend.write(None) as ops:
            if not ops.registry_exists():
                ops.registry_create()
            for row in rows:
                if ops.registry_get(row[0]) is not None:
                    self._counts["present"] += 1
                    continue
                ops.registry_insert(row)
                self._counts["directory"] += 1

    def _compactions(self, sid: str, rows: list[CompactionRow]) -> None:
        written: list[CompactionRow] = []
        with self._backend.write(sid) as ops:
            known = {c.id for c in ops.compactions(sid)}
            seq = ops.next_compaction_seq(sid)
            for row in rows:
                if row.id in known:
                    self._counts["present"] += 1
                    continue
                row = CompactionRow(row.id, seq, row.summary, row.from_message_id,
                                    row.to_message_id, row.created_at)
                ops.insert_compaction(sid, row)
                known.add(row.id)
                written.append(row)
                seq += 1
            if written:
                ops.bump_epoch(sid)
        self._counts["compactions"] += len(written)
        if self._core.events.listened:
            for row in written:
                self._core.events.emit(
                    ChangeEvent("compaction", sid, compaction=stored_compaction(row)))

    def _reorder_write(
        self, writer: Writer, sid: str, records: list[tuple[str, BatchRow | None]]
    ) -> list[int | None]:
        """Write ``records`` in the dump's order, in one transaction: a missing message is
        appended, a present one moved behind it (its place in the order the failed restore
        got wrong), so every row the dump lists comes after the ones it lists before it, as in
        the source (a parent before its children, the newest row the source's). The positions
        of the messages written, in order."""
        logged = []
        with self._backend.write(sid) as ops:
            for mid, row in records:
                if row is None:
                    ops.restore_move_to_end(sid, mid)
                else:
                    logged.append(writer.insert_in(ops, row.prep, row.parent_id,
                                                   row.created_at, verbatim=True))
            ops.restore_recount(sid)
            ops.bump_epoch(sid)
        self._core.path_memos.forget(sid)
        return [None if entry is None else entry.committed() for entry in logged]

    def _check_pointers(self, sid: str, rows: list[BatchRow], numbers: list[int]) -> None:
        """A message pointing at a payload neither the dump carries nor ``sid`` references is
        a bad dump, named at its own line (the write checks again, in its transaction)."""
        if all(len(r.prep.hashes) == len(r.prep.payloads) for r in rows):
            return
        carried = set(self._brought)
        with self._backend.read() as ops:
            for number, row in zip(numbers, rows, strict=True):
                carried.update(p.hash for p in row.prep.payloads)
                try:
                    check_pointers(ops, sid, [(row.prep.message, row.prep.hashes)], carried)
                except ConvostoreError as exc:
                    raise BadDump(number, str(exc)) from exc

    def _messages(self, sid: str, pending: list[tuple[int, Any]]) -> None:
        writer = Writer(self._core, sid)
        with self._backend.read() as ops:
            present = ops.seqs_of(sid, [p[1][0]["id"] for p in pending])
            tail = ops.tail(sid)
        top = 0 if tail is None else tail[1]
        at = self._at.get(sid, 0)  # the newest row of the session this restore has passed
        reorder = sid in self._reorder
        start = 0  # the first record written in the dump's order (see _reorder_write)
        order: list[tuple[str, BatchRow | None]] = []  # each record's id, its row if absent
        rows: list[BatchRow] = []
        messages: list[tuple[Message, str | None]] = []
        numbers: list[int] = []  # each row's line
        for number, (message, parent, created, tokens) in pending:
            mid = message["id"]
            if mid in present:
                self._counts["present"] += 1
                order.append((mid, None))
                at = max(at, present[mid])
                continue
            if not reorder and top > at:
                # Rows of the session lie beyond this record's place: a restore that failed
                # (a line missing, reported at the end) wrote records the dump lists later.
                # Appended, this one would come after them: from here on, rows go in the
                # dump's order.
                reorder, start = True, len(order)
                self._reorder.add(sid)
            try:  # the dumped estimate: the source's counter, and media it counted inline
                prep = writer.prepare(message, "server", sanitize=False, estimate=tokens)
            except ConvostoreError as exc:
                raise BadDump(number, str(exc)) from exc
            row = BatchRow(prep, parent, created)
            rows.append(row)
            order.append((mid, row))
            messages.append((message, parent))
            numbers.append(number)
        if rows:
            self._check_pointers(sid, rows, numbers)
        if reorder:
            cursors = self._reorder_write(writer, sid, order[start:])
        elif rows:
            cursors = writer.insert_batch(rows, verbatim=True, brought=self._brought)
        else:
            self._at[sid] = at
            return
        written = sum(c is not None for c in cursors)
        self._at[sid] = max(at, top + written)
        if written:
            self._written.add(sid)
        self._counts["messages"] += written
        self._counts["present"] += len(cursors) - written
        if self._core.events.listened:
            for (message, parent), cursor in zip(messages, cursors, strict=True):
                if cursor is not None:
                    self._core.events.emit(ChangeEvent(
                        "import", sid, message=message, parent_id=parent, cursor=cursor))

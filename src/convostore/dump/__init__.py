"""Dump, restore and migrate a whole store, in a versioned JSON Lines format, streamed.

::

    from convostore import Sessions
    from convostore.dump import dump, migrate, restore

    with Sessions.open("chat.db") as store, open("backup.jsonl", "w", encoding="utf-8") as f:
        dump(store, f)                                   # every session, branch and payload
    with Sessions.open("postgresql://app@db/chat") as store, open("backup.jsonl") as f:
        restore(store, f)                                # idempotent: run it again to resume
    migrate("chat.db", "postgresql://app@db/chat")       # the two at once, resumable

A dump holds everything a store keeps: every message of every session (every branch,
compacted originals included) as stored, with its parent, time and token estimate; compaction
records; each attachment payload once; every row of the session directory (title, owner,
metadata, times, expiry, the chosen leaf, the session manager's columns), internal sessions'
included; context blocks, which live in sessions of their own (``convostore:context:*``). The search
index is not dumped: a store rebuilds it. Reads go window by window (a few hundred rows or
2 MiB) through the store's own read paths, never through ``history()``, so memory stays
bounded whatever the store's size. The format is documented in ``docs/dump.md``.

The functions are sync; from an :class:`~convostore.AsyncSessions`, run them on its workers:
``await store.run_sync(dump, store.sync, f)``.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Callable, Iterator
from typing import IO, Any

from .. import attachments, codec
from ..backends.base import Ops
from ..messages._rows import reassemble
from ..store import Sessions
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
from ._restore import Restorer
from ._sql import DIR_DUMP_COLUMNS

__all__ = ["VERSION", "DumpCounts", "dump", "dump_lines", "migrate", "restore"]

logger = logging.getLogger("convostore")

Progress = Callable[[int, "int | None"], object]
"""``progress(done, total)``: messages written so far and how many the store held when the
dump began (a restore passes records read and None: a stream's length is not known)."""

_SESSIONS_PAGE = 100
_DIRECTORY_PAGE = 500


class _Dumper:
    """One dump of a store: yields lines, keeps the counts and the payloads already written."""

    def __init__(self, store: Sessions, progress: Progress | None) -> None:
        self._backend = store.core.backend
        self._progress = progress
        self._seen: set[bytes] = set()  # digests of payloads written: 32 bytes each
        self._counts = {"sessions": 0, "messages": 0, "compactions": 0, "attachments": 0,
                        "directory": 0, "unreadable": 0}
        self._total = 0

    @property
    def counts(self) -> DumpCounts:
        return DumpCounts(**self._counts)

    def lines(self) -> Iterator[str]:
        with self._backend.read() as ops:
            self._total = int(ops.stats()["messages"])
        yield codec.dumps({"type": HEADER, "format": FORMAT, "version": VERSION}) + "\n"
        after: str | None = None
        while True:
            with self._backend.read() as ops:
                sids = ops.dump_session_ids(after, _SESSIONS_PAGE)
            for sid in sids:
                yield from self._session(sid)
            if len(sids) < _SESSIONS_PAGE:
                break
            after = sids[-1]
        # after every message: a restore sets the rows as dumped once the message writes
        # (which move updated_at, clear the chosen leaf, refresh a ttl's expiry) are done
        yield from self._directory()
        end = {"type": END, **{k: v for k, v in self._counts.items() if k != "unreadable"}}
        yield codec.dumps(end) + "\n"

    def _directory(self) -> Iterator[str]:
        """Every directory row, internal sessions' too, in session-id byte order."""
        after: str | None = None
        while True:
            with self._backend.read() as ops:
                rows = ops.dir_dump_page(after, _DIRECTORY_PAGE)
            for sid, *values in rows:
                row = dict(zip(DIR_DUMP_COLUMNS, values, strict=True))
                row["metadata"] = _metadata(sid, row["metadata"])
                self._counts["directory"] += 1
                yield codec.dumps({"type": DIRECTORY, "session": sid, "row": row}) + "\n"
            if len(rows) < _DIRECTORY_PAGE:
                return
            after = rows[-1][0]

    def _session(self, sid: str) -> Iterator[str]:
        self._counts["sessions"] += 1
        prefix = f'{{"type":"{MESSAGE}","session":{codec.dumps(sid)},"parent_id":'
        after = 0
        while True:
            with self._backend.read() as ops:
                sizes = ops.dump_row_sizes(sid, after, WINDOW_ROWS)
                if not sizes:
                    break
                window = _window(sizes)
                rows = sorted(ops.content_rows_by_seq(sid, [s[0] for s in window]),
                              key=lambda r: r.seq)
                texts = reassemble(ops, sid, rows)
            tokens = {s[0]: s[2] for s in window}
            for row in rows:
                text = texts.pop(row.id)
                value = _decoded(sid, row.id, text)
                if value is None:
                    self._counts["unreadable"] += 1
                    continue
                if attachments.POINTER_PREFIX in text:
                    yield from self._payloads(attachments.pointer_hashes(value))
                del value
                self._counts["messages"] += 1
                yield (f'{prefix}{codec.dumps(row.parent_id)},"created_at":{row.created_at},'
                       f'"tokens":{tokens[row.seq]},"message":{text}}}\n')
            after = window[-1][0]
            if self._progress is not None:
                self._progress(self._counts["messages"], self._total)
        with self._backend.read() as ops:
            compactions = ops.compactions(sid)
        for c in compactions:
            self._counts["compactions"] += 1
            yield codec.dumps({"type": COMPACTION, "session": sid, "id": c.id,
                               "summary": c.summary, "from_message_id": c.from_message_id,
                               "to_message_id": c.to_message_id,
                               "created_at": c.created_at}) + "\n"

    def _payloads(self, hashes: list[str]) -> Iterator[str]:
        """An attachment record for each payload not written yet (read one at a time)."""
        for h in hashes:
            digest = bytes.fromhex(h)
            if digest in self._seen:
                continue
            with self._backend.read() as ops:
                line = _attachment_line(ops, h)
            if line is None:  # the message points to nothing stored: nothing to carry
                continue
            self._seen.add(digest)
            self._counts["attachments"] += 1
            yield line


def _attachment_line(ops: Ops, h: str) -> str | None:
    meta = ops.attachment_meta([h]).get(h)
    if meta is None:
        return None
    data = ops.attachment_data([h])[h]
    return codec.dumps({"type": ATTACHMENT, "hash": h, "media_type": meta.media_type,
                        "data": base64.b64encode(data).decode("ascii")}) + "\n"


def _window(sizes: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The first rows of ``sizes`` within :data:`WINDOW_BYTES` (at least one)."""
    total = 0
    for i, (_seq, size, _tokens) in enumerate(sizes):
        total += size
        if total > WINDOW_BYTES and i > 0:
            return sizes[:i]
    return sizes


def _metadata(sid: str, text: str | None) -> Any:
    """A directory row's stored metadata as the object it holds (None when unset or, logged,
    when it cannot be read)."""
    if text is None:
        return None
    try:
        value = codec.loads(text)
    except (ValueError, RecursionError) as exc:
        value = exc
    if isinstance(value, dict):
        return value
    logger.warning("dump: the metadata of session %r cannot be read, left out: %s", sid, value)
    return None


def _decoded(sid: str, mid: str, text: str) -> Any:
    """The stored text parsed (to check it before it is spliced into a line), or None for
    a row that cannot be decoded (logged)."""
    try:
        value = codec.loads(text)
    except (ValueError, RecursionError) as exc:
        logger.warning("dump: message %r of session %r cannot be read, left out: %s",
                       mid, sid, exc)
        return None
    if not codec.is_valid_stored(value):
        logger.warning("dump: message %r of session %r is not a message, left out", mid, sid)
        return None
    return value


def dump_lines(store: Sessions, *, progress: Progress | None = None) -> Iterator[str]:
    """The dump of ``store`` as lines of text (each ending in ``\\n``), produced as they are
    consumed: bounded memory whatever the store holds.

    :param progress: called as ``progress(done, total)`` after each window of messages.
    """
    return _Dumper(store, progress).lines()


def dump(store: Sessions, fileobj: IO[str], *, progress: Progress | None = None) -> DumpCounts:
    """Write the whole store to ``fileobj`` (a text stream, UTF-8) in the dump format.

    Every session, branch, compaction record, timestamp and token estimate, each attachment
    payload once, every directory row and context blocks. Streamed: memory stays bounded
    (one window of rows, plus 32 bytes per distinct payload written). A store written to
    meanwhile is dumped consistently message by message, not as one snapshot: stop writers
    for an exact copy.

    :param progress: called as ``progress(done, total)`` with messages written so far.
    :returns: what was written (also the dump's last record).
    """
    dumper = _Dumper(store, progress)
    for line in dumper.lines():
        fileobj.write(line)
    return dumper.counts


def restore(
    store: Sessions, source: IO[str] | Iterator[str] | list[str], *,
    progress: Progress | None = None,
) -> DumpCounts:
    """Read a dump into ``store``: everything it holds, stored exactly as it was dumped.

    Idempotent: what the store already holds (a message id in its session, a payload, a
    compaction record) is left as it is and a directory row is set as dumped, so a restore
    that stopped part way is finished by running it again, and restoring twice changes
    nothing. Records are written
    in batches of one transaction each, as they are read (bounded memory).

    :param source: a text stream or an iterable of lines (a binary stream's lines are read
        as the UTF-8 text a dump is).
    :param progress: called as ``progress(records, None)`` after each batch.
    :raises DumpTooNew: the dump's format version is newer than this convostore reads.
    :raises BadDump: a line is not a record of the format (truncated, corrupt, out of
        place); ``line`` names it. Nothing of that record is written; batches before it may
        have been (restore again once the file is whole).
    """
    return Restorer(store, progress).run(source)


def migrate(
    src: Sessions | str | os.PathLike[str], dst: Sessions | str | os.PathLike[str], *,
    progress: Progress | None = None,
) -> DumpCounts:
    """Copy every session of ``src`` into ``dst`` (another engine, say) with a dump's fidelity.

    Stores given as URLs are opened and closed here. The dump is streamed into the restore
    without a file. Resumable: run it again after an interruption and what ``dst`` already
    holds is skipped.

    :param progress: called as ``progress(done, total)`` with messages read from ``src``.
    :returns: what the restore wrote (``present``: what ``dst`` already held).
    """
    opened: list[Sessions] = []
    try:
        source = src if isinstance(src, Sessions) else _opened(src, opened)
        target = dst if isinstance(dst, Sessions) else _opened(dst, opened)
        return Restorer(target, None).run(dump_lines(source, progress=progress))
    finally:
        for store in opened:
            store.close()


def _opened(url: str | os.PathLike[str], opened: list[Sessions]) -> Sessions:
    store = Sessions.open(url)
    opened.append(store)
    return store

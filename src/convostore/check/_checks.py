"""The reads of a consistency check: each finds one kind of broken invariant and, when the
kind is repairable, plans its fix (a function run later in a write scope, see :mod:`._repair`).

A session is read a few statements at a time (each returns only what is broken), its content
a window of rows at a time; the store-wide tables are paged by key. Memory is bounded by the
window, plus what the report itself holds.
"""

from __future__ import annotations

from typing import Any

from .. import attachments
from .._core import StoreCore
from ..backends._engines import parse_url
from ..backends.connection import _marks
from ..backends.rows import ContentRow
from ..errors import ConvostoreError, UnreadableMessage
from ..feed._sql import TRIMMED_KEY
from ..messages._rows import decode, reassemble
from ..model import Message
from . import _report as k
from . import _sql as q
from ._repair import Fix, Plan

CONTENT_WINDOW = 64
"""Rows whose content one read of a session's content holds (each with its continuations)."""
PAYLOAD_PAGE = 500
"""Payload rows per read of the store-wide payload scan."""

class SessionCheck:
    """The checks of one session, run in read scopes of the store; problems go to ``found``,
    fixes to ``plan``."""

    def __init__(self, core: StoreCore, sid: str, found: k.Found, plan: Plan,
                 indexed: str | None) -> None:
        self._core = core
        self._sid = sid
        self._found = found
        self._plan = plan
        self._indexed = indexed  # the engine's "has a search entry" test; None: do not check
        self._broken_text: set[str] = set()  # ids whose continuation rows are reported

    def _add(self, kind: str, subject: str, detail: str, fix: Fix | None = None) -> int:
        """Record a problem (and its fix, run in a write scope of the session); returns its
        index."""
        index = len(self._found.problems)
        if fix is not None:
            self._plan.session(self._sid, index, fix)
        self._found.add(kind, self._sid, subject, detail)
        return index

    def run(self) -> None:
        """Every check of the session."""
        with self._core.backend.read() as raw:
            ops: Any = raw
            self._tree(ops)
            self._continuations(ops)
            self._references(ops)
            self._compactions(ops)
            self._directory(ops)
        self._content()

    def _tree(self, ops: q.RawOps) -> None:
        sid = self._sid
        for mid, parent in ops._all(q.MISSING_PARENTS, (sid,)):
            self._add(k.MISSING_PARENT, mid, f"parent {parent!r} does not exist",
                      _setter(q.SET_ROOT, sid, mid))
        for (mid,) in ops._all(q.BACK_LINKS, (sid,)):
            if ops._all(q.IN_LOOP, (sid, mid, sid, mid))[0][0]:
                self._add(k.PARENT_LOOP, mid, "following its parents comes back to it",
                          _setter(q.SET_ROOT, sid, mid))
        for (mid,) in ops._all(q.BAD_CHAIN_FLAGS, (sid,)):
            self._add(k.CHAIN_FLAG, mid, "marked as appended to the row before it, which is "
                      "not its parent", _setter(q.CLEAR_CHAIN_FLAG, sid, mid))

    def _continuations(self, ops: q.RawOps) -> None:
        sid = self._sid
        for mid, expected, present in ops._all(q.MISSING_CHUNKS, (sid,)):
            self._broken_text.add(mid)
            self._add(k.MISSING_CONTINUATION, mid,
                      f"{int(present)} of its {int(expected)} continuation rows are in place")
        for mid, n in ops._all(q.STRAY_CHUNKS, (sid,)):
            self._broken_text.add(mid)  # a read appends them: its text is not what was written
            self._add(k.STRAY_CONTINUATION, mid, f"{int(n)} continuation rows beyond its "
                      "count or of no message", _setter(q.DELETE_STRAY_CHUNKS, sid))

    def _references(self, ops: q.RawOps) -> None:
        sid = self._sid
        for mid, h in ops._all(q.REFS_WITHOUT_MESSAGE, (sid, q.LANGGRAPH_REF)):
            self._add(k.STRAY_REFERENCE, mid, f"refers to payload {h} but the message does "
                      "not exist", _drop_ref(sid, mid, h))
        for mid, h in ops._all(q.REFS_WITHOUT_PAYLOAD, (sid,)):
            self._add(k.MISSING_PAYLOAD, mid, f"payload {h} is not stored")

    def _compactions(self, ops: q.RawOps) -> None:
        sid = self._sid
        for cid, first, last, has_first, has_last in ops._all(q.COMPACTION_ENDS, (sid,)):
            if not has_first or not has_last:
                gone = [m for m, there in ((first, has_first), (last, has_last)) if not there]
                self._add(k.COMPACTION_ENDS, cid, "its end "
                          + " and ".join(repr(m) for m in gone) + " does not exist")
            elif not ops._all(q.IS_ANCESTOR, (sid, last, sid, first))[0][0]:
                self._add(k.COMPACTION_ENDS, cid,
                          f"{first!r} is not an ancestor of {last!r}")

    def _directory(self, ops: q.RawOps) -> None:
        sid = self._sid
        n, size, listed, listed_size = ops._all(q.DIRECTORY_VS_MESSAGES, (sid,) * 4)[0]
        n, size = int(n), int(size)
        self._found.messages += n
        if listed is None:
            if n:
                self._plan.recount(self._add(
                    k.DIRECTORY_COUNTS, sid, f"no directory row for its {n} messages"))
        elif (int(listed), int(listed_size)) != (n, size):
            detail = (f"the directory says {int(listed)} messages, {int(listed_size)} bytes; "
                      f"stored: {n} messages, {size} bytes")
            if n:
                self._plan.recount(self._add(k.DIRECTORY_COUNTS, sid, detail))
            else:  # a recount of the messages does not reach a row without any
                self._add(k.DIRECTORY_COUNTS, sid, detail, _setter(q.ZERO_DIRECTORY, sid))

    def _content(self) -> None:
        """Read every row's text (continuation rows joined), a window at a time: is it a
        message, do its reference rows match the payloads it points to, has it the search
        entry it should have."""
        sid, after = self._sid, 0
        window = q.content_window(self._indexed)
        unindexed, first = 0, ""  # a count: a session may hold millions of rows
        while True:
            with self._core.backend.read() as raw:
                ops: Any = raw
                rows = ops._all(window, (sid, after, CONTENT_WINDOW))
                if not rows:
                    break
                texts = reassemble(ops, sid, [ContentRow(*r[:6]) for r in rows])
                held: dict[str, set[str]] = {}
                ids = [r[0] for r in rows]
                for mid, h in ops._all(q.REFS_OF_SESSION.format(marks=_marks(len(ids))),
                                       (sid, *ids)):
                    held.setdefault(mid, set()).add(h)
                for r in rows:
                    message = self._message(r[0], texts[r[0]])
                    if message is None:
                        continue
                    self._pointers(ops, r[0], texts[r[0]], message, held.get(r[0], set()))
                    if not r[6] and self._core.search_index.text(ops, message):
                        unindexed, first = unindexed + 1, first or r[0]
            after = rows[-1][2]
        if unindexed:
            self._plan.reindex(self._add(k.SEARCH_INDEX_MISSING, first,
                                         f"{unindexed} messages have no search entry "
                                         f"(the first: {first!r})"))

    def _message(self, mid: str, text: str) -> Message | None:
        try:
            return decode(self._sid, mid, text)
        except UnreadableMessage as exc:
            if mid not in self._broken_text:  # already reported: its continuation rows
                self._add(k.UNREADABLE_MESSAGE, mid, exc.problem)
            return None

    def _pointers(self, ops: Any, mid: str, text: str, message: Message,
                  held: set[str]) -> None:
        """Compare the payloads a message points to with its reference rows."""
        sid = self._sid
        points = set(attachments.pointer_hashes(message)) if (
            attachments.POINTER_PREFIX in text) else set()
        stored = ops.attachment_meta(sorted(points - held)) if points - held else {}
        for h in sorted(points - held):
            if h in stored:
                self._add(k.MISSING_REFERENCE, mid, f"points to payload {h} without a "
                          "reference row", _add_ref(sid, mid, h))
            else:
                self._add(k.MISSING_PAYLOAD, mid, f"payload {h} is not stored")
        for h in sorted(held - points):
            self._add(k.STRAY_REFERENCE, mid, f"has a reference row to payload {h} it does "
                      "not point to", _drop_ref(sid, mid, h))


def check_store(core: StoreCore, found: k.Found, plan: Plan) -> None:
    """The store-wide checks: payloads, the change log, the search index's stale entries."""
    after = ""
    while True:
        with core.backend.read() as raw:
            ops: Any = raw
            page = ops._all(q.PAYLOAD_PAGE, (after, PAYLOAD_PAGE))
        for h, chunks, present, refs in page:
            if int(present) != int(chunks):
                found.add(k.INCOMPLETE_PAYLOAD, None, h,
                          f"{int(present)} of its {int(chunks)} chunk rows are stored")
            if not int(refs):
                plan.store(len(found.problems), _collect(h))
                found.add(k.UNREFERENCED_PAYLOAD, None, h, "no message refers to it")
        if len(page) < PAYLOAD_PAGE:
            break
        after = page[-1][0]
    with core.backend.read() as raw:
        ops = raw
        for (h,) in ops._all(q.ORPHAN_PAYLOAD_CHUNKS):
            plan.store(len(found.problems), _setter(q.DELETE_ORPHAN_PAYLOAD_CHUNKS, h))
            found.add(k.UNREFERENCED_PAYLOAD, None, h, "chunk rows without their payload row")
        if dense_positions(core):
            _change_log(ops, found, plan)
        stale = stale_entries(ops)
    if stale:
        plan.clear_index(len(found.problems))
        found.add(k.SEARCH_INDEX_STALE, None, str(stale),
                  f"{stale} search entries of messages that no longer exist")


def _change_log(ops: Any, found: k.Found, plan: Plan) -> None:
    row = ops._all(q.HORIZON, (TRIMMED_KEY,))
    horizon = int(row[0][0]) if row else 0
    for pos, before in ops._all(q.CHANGE_GAPS, (horizon + 1,)):
        first = (horizon if before is None else int(before)) + 1
        last = int(pos) - 1
        plan.store(len(found.problems), _set_horizon(last))
        found.add(k.CHANGE_LOG_GAP, None, f"{first}-{last}",
                  f"positions {first} to {last} are missing (the horizon is {horizon})")


def dense_positions(core: StoreCore) -> bool:
    """Whether the store's change-log positions have no holes by construction (SQLite)."""
    try:
        return parse_url(core.backend.url).engine.name == "sqlite"
    except ConvostoreError:
        return False


def index_flavor(ops: Any) -> str | None:
    """The test of a search entry for a row ``m`` of this engine's index, or None when there
    is no complete index to check (none yet, or a build in progress)."""
    if not ops.fts_exists() or ops.fts_cursor() is not None:
        return None
    return q.INDEXED_SQLITE if ops.existing_tables([q.FTS_DOCSIZE]) else q.INDEXED_PG


def stale_entries(ops: Any) -> int:
    """How many search entries belong to no message (0 without an index)."""
    if not ops.fts_exists():
        return 0
    sql = q.STALE_SQLITE if ops.existing_tables([q.FTS_DOCSIZE]) else q.STALE_PG
    return int(ops._all(sql)[0][0])


# -- fixes (run by _repair in a write scope) -------------------------------------------------

def _setter(sql: str, *params: Any) -> Fix:
    return lambda ops: ops._run(sql, params)


def _drop_ref(sid: str, mid: str, h: str) -> Fix:
    def fix(ops: Any) -> None:
        ops.drop_refs(sid, mid, [h])
        ops.collect([h])
    return fix


def _add_ref(sid: str, mid: str, h: str) -> Fix:
    return lambda ops: ops.add_refs(sid, mid, [h])


def _collect(h: str) -> Fix:
    return lambda ops: ops.collect([h])


def _set_horizon(pos: int) -> Fix:
    def fix(ops: Any) -> None:
        row = ops._all(q.HORIZON, (TRIMMED_KEY,))
        if not row or int(row[0][0]) < pos:
            ops._run(q.SET_HORIZON, (TRIMMED_KEY, str(pos)))
    return fix

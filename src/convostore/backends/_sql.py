"""The SQL both engines share.

SQLite and PostgreSQL agree on almost all of it (recursive CTEs, ``ON CONFLICT``, ``INSERT ...
AS alias``), so it is written once here with ``?`` placeholders; an engine subclass supplies how
a statement runs (:meth:`SqlOps._run`) and the parts that truly differ: full-text search, the
catalog, DDL and locking. The tables are described in :mod:`._schema`.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from ..codec import ROW_BUDGET
from ..directory._sql import INTERNAL_PREFIX, DirectoryOps
from ..dump._sql import DumpOps
from ..feed._sql import ChangeLogOps
from ..integrations._checkpoint_sql import CheckpointSql
from ..legacy._sql import LegacySql
from ..manager._sql import RegistryOps
from ..messages._append_sql import AppendOps
from ..messages._window_sql import _CONTENT, WindowOps
from ._schema import (
    ATTACHMENT_CHUNKS,
    ATTACHMENT_REFS,
    ATTACHMENTS,
    COMPACTIONS,
    MESSAGE_CHUNKS,
    MESSAGES,
    META,
    SESSION_STATE,
)
from .base import (
    AppendProbe,
    AttachmentMeta,
    CompactionRow,
    ContentRow,
    Continuation,
    FtsHit,
    NewRow,
    PathArrays,
    PathRow,
    RowMeta,
    ScannedRow,
    SessionTotals,
    Suffix,
    Tail,
    _batches,
    _marks,
)


def _qualify(alias: str, cols: str) -> str:
    """The comma-separated columns ``cols`` prefixed with ``alias.``."""
    return ", ".join(f"{alias}.{c}" for c in cols.split(", "))


def _now() -> int:
    """The wall clock in epoch milliseconds (the directory's ``updated_at`` of a rewrite)."""
    return int(time.time() * 1000)


def _params(row: NewRow) -> tuple[Any, ...]:
    """A :class:`NewRow` as :attr:`SqlOps._INSERT`'s parameters (its fields, in order; the
    ``chained`` flag as the integer both engines store)."""
    return (*row[:10], int(row.chained), row.run_bytes)


_FTS_CURSOR = "fts_backfill_cursor"
"""The meta key of the search index's backfill cursor (present while a build is pending)."""
_FTS_DEFINITION = "fts_definition"
"""The meta key of what the search index holds for a message (recorded by its creation)."""


class SqlOps(
    RegistryOps, DirectoryOps, ChangeLogOps, DumpOps, CheckpointSql, WindowOps, AppendOps
):
    """Operations over one connection; subclasses define :meth:`_run` and the FTS methods."""

    # Row locks that make payload collection safe against a concurrent writer re-using the
    # payload (PostgreSQL); SQLite serialises all writers, so it needs none.
    _FOR_SHARE = ""
    _FOR_UPDATE = ""

    legacy: LegacySql
    """The engine's legacy-lift SQL (a class attribute of each engine's subclass)."""

    def _run(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Execute ``sql`` (``?`` placeholders) and return a cursor."""
        raise NotImplementedError

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._run(sql, params).fetchall())

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row = self._run(sql, params).fetchone()
        return None if row is None else tuple(row)

    def _many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        for row in rows:
            self._run(sql, row)

    # -- reads ---------------------------------------------------------------------------------

    def tail(self, session_id: str) -> Tail | None:
        row = self._one(
            f"SELECT id, seq FROM {MESSAGES} WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
            (session_id,),
        )
        return None if row is None else (row[0], row[1])

    def append_probe(self, session_id: str, id: str) -> AppendProbe:
        """(does ``id`` exist, the newest row's id, the highest seq) in one statement."""
        row = self._one(
            f"SELECT EXISTS (SELECT 1 FROM {MESSAGES} WHERE session_id = ? AND id = ?), "
            f"(SELECT id FROM {MESSAGES} WHERE session_id = ? ORDER BY seq DESC LIMIT 1), "
            f"(SELECT max(seq) FROM {MESSAGES} WHERE session_id = ?)",
            (session_id, id, session_id, session_id),
        )
        assert row is not None
        return bool(row[0]), row[1], int(row[2] or 0)

    def row_meta(self, session_id: str, id: str) -> RowMeta | None:
        row = self._one(
            "SELECT id, seq, parent_id, role, content_chunks, token_estimate, bytes "
            f"FROM {MESSAGES} "
            "WHERE session_id = ? AND id = ?",
            (session_id, id),
        )
        return None if row is None else RowMeta(*row)

    def _by_key(
        self, cols: str, key: str, session_id: str, keys: Sequence[Any]
    ) -> list[tuple[Any, ...]]:
        """Columns ``cols`` of the message rows of ``session_id`` whose ``key`` is in ``keys``.

        An engine may override how the rows are found (PostgreSQL probes the unique index once
        per key, whatever its statistics say), never which rows.
        """
        out: list[tuple[Any, ...]] = []
        for batch in _batches(keys):
            out.extend(
                self._all(
                    f"SELECT {cols} FROM {MESSAGES} WHERE session_id = ? "
                    f"AND {key} IN ({_marks(len(batch))})",
                    (session_id, *batch),
                )
            )
        return out

    def continuations(self, session_id: str, ids: Sequence[str]) -> list[Continuation]:
        out: list[Continuation] = []
        for batch in _batches(ids):
            out.extend(
                Continuation(r[0], r[1], r[2])
                for r in self._all(
                    f"SELECT id, idx, content FROM {MESSAGE_CHUNKS} "
                    f"WHERE session_id = ? AND id IN ({_marks(len(batch))}) ORDER BY id, idx",
                    (session_id, *batch),
                )
            )
        return out

    def roots(self, session_id: str) -> list[ContentRow]:
        """Rows that read as roots: no parent, or a parent absent or written after them."""
        return [
            ContentRow(*r)
            for r in self._all(
                f"SELECT {_qualify('m', _CONTENT)} FROM {MESSAGES} m "
                "WHERE m.session_id = ? AND (m.parent_id IS NULL OR NOT EXISTS ("
                f"SELECT 1 FROM {MESSAGES} p WHERE p.session_id = m.session_id "
                "AND p.id = m.parent_id AND p.seq < m.seq)) ORDER BY m.seq",
                (session_id,),
            )
        ]

    def _child_rows(
        self, cols: str, session_id: str, parent_ids: Sequence[str]
    ) -> list[tuple[Any, ...]]:
        """Columns ``cols`` of the children of ``parent_ids`` (one batch), in no order.

        Branches come from the partial parent index; the chained child, if any, is the row
        right after its parent (a chained row's seq is its parent's + 1, see insert_message).
        Two statements, each probing one index; callers sort: with an ORDER BY seq a planner
        may walk the whole session in seq order instead.
        """
        match = "= ?" if len(parent_ids) == 1 else f"IN ({_marks(len(parent_ids))})"
        rows = self._all(
            f"SELECT {cols} FROM {MESSAGES} "
            f"WHERE session_id = ? AND parent_id {match} AND chained = 0",
            (session_id, *parent_ids),
        )
        rows += self._all(
            f"SELECT {_qualify('c', cols)} FROM {MESSAGES} p "
            f"JOIN {MESSAGES} c ON c.session_id = p.session_id AND c.seq = p.seq + 1 "
            f"AND c.parent_id = p.id AND c.chained = 1 WHERE p.session_id = ? AND p.id {match}",
            (session_id, *parent_ids),
        )
        return rows

    def children(self, session_id: str, parent_id: str) -> list[ContentRow]:
        """The rows whose parent is ``parent_id``, in seq order."""
        rows = self._child_rows(_CONTENT, session_id, [parent_id])
        return sorted((ContentRow(*r) for r in rows), key=lambda r: r.seq)

    # A parent always has a lower seq than its child (it existed when the child was written,
    # and a splice only moves a child up to an ancestor). Requiring it in the walk makes a
    # cycle impossible even when imports name parents verbatim.
    _WALK = (
        "WITH RECURSIVE p(id, parent_id, seq, role, bytes, token_estimate, depth, total) AS ("
        f" SELECT id, parent_id, seq, role, bytes, token_estimate, 0, bytes FROM {MESSAGES}"
        "{start}"
        " UNION ALL"
        " SELECT m.id, m.parent_id, m.seq, m.role, m.bytes, m.token_estimate, p.depth + 1,"
        " p.total + m.bytes"
        f" FROM p JOIN {MESSAGES} m ON m.session_id = ? AND m.id = p.parent_id AND m.seq < p.seq"
        "{stop})"
        " SELECT {cols} FROM p{join}{order}"
    )
    _FROM_ID = " WHERE session_id = ? AND id = ?"  # the walk's start: a row by id...
    _FROM_TAIL = (  # ...or the session's newest row (its active leaf)
        f" WHERE session_id = ? AND id = (SELECT id FROM {MESSAGES} WHERE session_id = ? "
        "ORDER BY seq DESC LIMIT 1)"
    )

    def path(self, session_id: str, leaf_id: str) -> PathArrays:
        """The path root → leaf as compact arrays (seq, bytes, token estimate); no ids, no content.

        Seqs strictly increase along a path, so a position can be found by bisection.
        """
        # No ORDER BY: a walk up a chain produces its rows leaf first, one per step, so
        # reversing them is cheaper than having the engine sort the whole path.
        sql = self._WALK.format(
            start=self._FROM_ID, stop="", order="", join="",
            cols="seq, bytes, token_estimate, depth",
        )
        rows = self._run(sql, (session_id, leaf_id, session_id))
        out = PathArrays(array("q"), array("q"), array("q"))
        last_depth = -1
        in_order = True
        for seq, size, tokens, depth in rows:
            in_order = in_order and depth == last_depth + 1
            last_depth = depth
            out.seqs.append(seq)
            out.bytes.append(size)
            out.tokens.append(tokens)
        if not in_order:  # an engine that emitted the walk out of order: sort by seq instead
            order = sorted(range(len(out.seqs)), key=out.seqs.__getitem__, reverse=True)
            out = PathArrays(
                array("q", (out.seqs[i] for i in order)),
                array("q", (out.bytes[i] for i in order)),
                array("q", (out.tokens[i] for i in order)),
            )
        out.seqs.reverse()
        out.bytes.reverse()
        out.tokens.reverse()
        return out

    def path_rows(self, session_id: str, leaf_id: str) -> list[PathRow]:
        """The path root → leaf with ids and roles (for row stats)."""
        sql = self._WALK.format(
            start=self._FROM_ID, stop="", order=" ORDER BY depth DESC", join="",
            cols="id, parent_id, role, bytes, token_estimate, seq",
        )
        return [PathRow(*r) for r in self._all(sql, (session_id, leaf_id, session_id))]

    def walk_up(self, session_id: str, leaf_id: str, stop_id: str, limit: int) -> list[PathRow]:
        """Rows from ``leaf_id`` up to and including ``stop_id`` (leaf first), at most ``limit``."""
        sql = self._WALK.format(
            start=self._FROM_ID, stop=" WHERE p.id <> ? AND p.depth < ?",
            order=" ORDER BY depth", join="",
            cols="id, parent_id, role, bytes, token_estimate, seq",
        )
        return [
            PathRow(*r)
            for r in self._all(sql, (session_id, leaf_id, session_id, stop_id, limit - 1))
        ]

    def suffix(
        self, session_id: str, leaf_id: str | None, budget: int
    ) -> Suffix:
        """The newest rows of a path whose bytes sum to at most ``budget``, with their content.

        ``leaf_id`` None means the active leaf. Returns (the leaf's id, the window root → leaf,
        the id of the first older row that did not fit or None when the window reaches a root,
        the window's rows). The leaf is always included. One statement: the walk goes on from
        every row that fits, and from the leaf even when it alone does not, so the first row
        that does not fit comes out too, as ``beyond``.
        """
        walk = self._WALK.format(
            start=self._FROM_ID if leaf_id else self._FROM_TAIL,
            stop=" WHERE (p.total <= ? OR p.depth = 0)", order=" ORDER BY p.depth",
            cols="p.seq, p.bytes, p.token_estimate, p.total, " + _qualify("m", _CONTENT),
            join=f" JOIN {MESSAGES} m ON m.session_id = ? AND m.id = p.id",
        )
        params = (session_id, leaf_id or session_id, session_id, budget, session_id)
        out = PathArrays(array("q"), array("q"), array("q"))
        rows: list[ContentRow] = []
        beyond: str | None = None
        leaf: str | None = None
        for r in self._all(walk, params):
            seq, size, tokens, total = r[0], r[1], r[2], r[3]
            row = ContentRow(*r[4:])
            if leaf is None:
                leaf = row.id
            elif total > budget:
                beyond = row.id  # the first row that did not fit: older rows exist
                break
            out.seqs.append(seq)
            out.bytes.append(size)
            out.tokens.append(tokens)
            rows.append(row)
        out.seqs.reverse()
        out.bytes.reverse()
        out.tokens.reverse()
        rows.reverse()
        return Suffix(leaf, out, beyond, rows)

    def seqs_of(self, session_id: str, ids: Sequence[str]) -> dict[str, int]:
        return {r[0]: r[1] for r in self._by_key("id, seq", "id", session_id, list(ids))}

    def compactions(self, session_id: str) -> list[CompactionRow]:
        return [
            CompactionRow(*r)
            for r in self._all(
                "SELECT id, seq, summary, from_message_id, to_message_id, created_at "
                f"FROM {COMPACTIONS} "
                "WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
        ]

    def epoch(self, session_id: str) -> int:
        row = self._one(f"SELECT epoch FROM {SESSION_STATE} WHERE session_id = ?", (session_id,))
        return 0 if row is None else int(row[0])

    def attachment_meta(self, hashes: Sequence[str]) -> dict[str, AttachmentMeta]:
        out: dict[str, AttachmentMeta] = {}
        for batch in _batches(list(hashes)):
            for h, media_type, size in self._all(
                f"SELECT hash, media_type, bytes FROM {ATTACHMENTS} "
                f"WHERE hash IN ({_marks(len(batch))})",
                tuple(batch),
            ):
                out[h] = AttachmentMeta(media_type, size)
        return out

    def attachment_data(self, hashes: Sequence[str]) -> dict[str, bytes]:
        parts: dict[str, list[bytes]] = {h: [] for h in hashes}
        for batch in _batches(list(hashes)):
            for h, _idx, data in self._all(
                f"SELECT hash, idx, data FROM {ATTACHMENT_CHUNKS} "
                f"WHERE hash IN ({_marks(len(batch))}) "
                "ORDER BY hash, idx",
                tuple(batch),
            ):
                parts[h].append(bytes(data))
        return {h: b"".join(chunks) for h, chunks in parts.items()}

    def session_summaries(self) -> list[SessionTotals]:
        """(session id, messages, stored bytes, newest created_at) for every session."""
        return [
            SessionTotals(r[0], int(r[1]), int(r[2] or 0), int(r[3] or 0))
            for r in self._all(
                f"SELECT session_id, count(*), sum(bytes), max(created_at) FROM {MESSAGES} "
                "GROUP BY session_id ORDER BY session_id"
            )
        ]

    def stats(self) -> dict[str, int]:
        def count(sql: str) -> int:
            row = self._one(sql)
            return int(row[0] or 0) if row else 0

        return {
            "sessions": count(f"SELECT count(DISTINCT session_id) FROM {MESSAGES}"),
            "messages": count(f"SELECT count(*) FROM {MESSAGES}"),
            "continuation_rows": count(f"SELECT count(*) FROM {MESSAGE_CHUNKS}"),
            "compactions": count(f"SELECT count(*) FROM {COMPACTIONS}"),
            "attachments": count(f"SELECT count(*) FROM {ATTACHMENTS}"),
            "attachment_bytes": count(f"SELECT sum(bytes) FROM {ATTACHMENTS}"),
            "content_bytes": count(
                f"SELECT sum(bytes) FROM {MESSAGES}"
            ),
        }

    def scan_rows(
        self, after: tuple[str, str] | None, limit: int
    ) -> list[ScannedRow]:
        """Message rows of every session in key order, after ``after``: (session, row, role)."""
        if after is None:
            rows = self._all(
                f"SELECT session_id, id, parent_id, seq, content, content_chunks, created_at, "
                f"role FROM {MESSAGES} ORDER BY session_id, id LIMIT ?",
                (limit,),
            )
        else:
            rows = self._all(
                f"SELECT session_id, id, parent_id, seq, content, content_chunks, created_at, "
                # A row value, so both engines seek the primary key instead of filtering it.
                f"role FROM {MESSAGES} WHERE (session_id, id) > (?, ?) "
                "ORDER BY session_id, id LIMIT ?",
                (after[0], after[1], limit),
            )
        return [ScannedRow(r[0], ContentRow(*r[1:7]), r[7]) for r in rows]

    # -- the search index's backfill cursor (a row of the meta table while a build is pending)

    def fts_cursor(self) -> str | None:
        return self._meta_value(_FTS_CURSOR)

    def fts_set_cursor(self, cursor: str | None) -> None:
        self._set_meta_value(_FTS_CURSOR, cursor)

    def fts_definition(self) -> str | None:
        return self._meta_value(_FTS_DEFINITION)

    def fts_set_definition(self, definition: str) -> None:
        self._set_meta_value(_FTS_DEFINITION, definition)

    def _meta_value(self, key: str) -> str | None:
        row = self._one(f"SELECT value FROM {META} WHERE key = ?", (key,))
        return None if row is None else str(row[0])

    def _set_meta_value(self, key: str, value: str | None) -> None:
        if value is None:
            self._run(f"DELETE FROM {META} WHERE key = ?", (key,))
        else:
            self._run(
                f"INSERT INTO {META} (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def fts_backlog(self, after: tuple[str, str] | None) -> int:
        if after is None:
            row = self._one(f"SELECT count(*) FROM {MESSAGES}")
        else:
            row = self._one(
                f"SELECT count(*) FROM {MESSAGES} WHERE (session_id, id) > (?, ?)", after
            )
        return int(row[0]) if row is not None else 0

    def _search(
        self, select: str, match: Any, session_id: str | None, session_column: str,
        order: str, limit: int, hits: str | None = None,
    ) -> list[FtsHit]:
        """Hits of an engine's full-text query.

        ``select`` reads the matching rows (ending in the condition whose one ``?`` is
        ``match``); this adds the session filter on ``session_column`` (``session_id`` only
        when given, else every application session), the order and the limit. When ``select``
        reads keys only, ``hits`` reads the :class:`FtsHit` columns of the rows it keeps from
        the subquery ``{h}``: so message content is read for the hits returned only.
        """
        params: list[Any] = [match]
        if session_id is not None:
            select += f" AND {session_column} = ?"
            params.append(session_id)
        else:  # convostore's own sessions are not the application's conversations
            select += f" AND substr({session_column}, 1, {len(INTERNAL_PREFIX)}) <> ?"
            params.append(INTERNAL_PREFIX)
        params.append(limit)
        sql = f"{select} ORDER BY {order} LIMIT ?"
        if hits is not None:
            sql = hits.format(h=f"({sql}) h")
        return [FtsHit(*r) for r in self._all(sql, params)]

    # -- writes --------------------------------------------------------------------------------

    _INSERT = (
        f"INSERT INTO {MESSAGES} (session_id, id, seq, parent_id, role, content, "
        "content_chunks, token_estimate, created_at, bytes, chained, run_bytes) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
    )

    def insert_message(self, row: NewRow, quiet: int | None = None) -> None:
        # ``chained`` holds only while the parent keeps ``seq - 1``: seqs never change and a
        # re-parented row is unchained (set_parent), so the pair stays adjacent for good.
        self._run(self._INSERT, _params(row))
        if quiet is None or row.created_at > quiet:  # else the note would change nothing
            self.dir_note_insert(row.session_id, row.created_at, row.bytes,
                                 top_seq=row.seq, top_run=row.run_bytes)

    def insert_messages(self, rows: Sequence[NewRow]) -> None:
        """:meth:`insert_message` of several rows, sent as one batch (a batch write)."""
        self._many(self._INSERT, [_params(r) for r in rows])
        by_session: dict[str, list[NewRow]] = {}
        for r in rows:
            by_session.setdefault(r.session_id, []).append(r)
        for sid, group in by_session.items():  # one directory note per session, not per row
            times = [r.created_at for r in group]
            top = max(group, key=lambda r: r.seq)
            self.dir_note_insert(sid, min(times), sum(r.bytes for r in group), len(group),
                                 max(times), top_seq=top.seq, top_run=top.run_bytes)

    def update_message(
        self, session_id: str, id: str, role: str, content: str, content_chunks: int,
        token_estimate: int, bytes: int,
    ) -> None:
        self.dir_note_update(session_id, id, bytes, _now())
        self._run(
            f"UPDATE {MESSAGES} SET role = ?, content = ?, content_chunks = ?, token_estimate = ?, "
            "bytes = ? WHERE session_id = ? AND id = ?",
            (role, content, content_chunks, token_estimate, bytes, session_id, id),
        )

    def put_continuations(self, session_id: str, id: str, slices: Sequence[str]) -> None:
        self._many(
            f"INSERT INTO {MESSAGE_CHUNKS} (session_id, id, idx, content) VALUES (?,?,?,?) "
            "ON CONFLICT (session_id, id, idx) DO UPDATE SET content = excluded.content",
            ((session_id, id, i, s) for i, s in enumerate(slices, start=1)),
        )

    def delete_continuations_from(self, session_id: str, id: str, first_idx: int) -> None:
        self._run(
            f"DELETE FROM {MESSAGE_CHUNKS} WHERE session_id = ? AND id = ? AND idx >= ?",
            (session_id, id, first_idx),
        )

    def set_parent(self, session_id: str, id: str, parent_id: str | None) -> None:
        self._run(
            f"UPDATE {MESSAGES} SET parent_id = ?, chained = 0 WHERE session_id = ? AND id = ?",
            (parent_id, session_id, id),
        )

    def parents(self, session_id: str, ids: Sequence[str]) -> dict[str, str | None]:
        return {r[0]: r[1] for r in self._by_key("id, parent_id", "id", session_id, ids)}

    def children_of(self, session_id: str, ids: Sequence[str]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for batch in _batches(ids):
            out.extend((r[0], r[1]) for r in self._child_rows("id, parent_id", session_id, batch))
        return out

    def delete_messages(self, session_id: str, ids: Sequence[str]) -> None:
        for batch in _batches(ids):
            marks = _marks(len(batch))
            self.dir_note_delete(session_id, batch, _now())
            self._run(
                f"DELETE FROM {MESSAGE_CHUNKS} WHERE session_id = ? AND id IN ({marks})",
                (session_id, *batch),
            )
            self._run(
                f"DELETE FROM {MESSAGES} WHERE session_id = ? AND id IN ({marks})",
                (session_id, *batch),
            )

    def clear_session(self, session_id: str) -> None:
        self.dir_note_clear(session_id, _now())
        for table in (MESSAGE_CHUNKS, MESSAGES, COMPACTIONS):
            self._run(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))

    def insert_compaction(self, session_id: str, row: CompactionRow) -> None:
        self._run(
            f"INSERT INTO {COMPACTIONS} (session_id, id, seq, summary, from_message_id, "
            "to_message_id, "
            "created_at) VALUES (?,?,?,?,?,?,?)",
            (
                session_id, row.id, row.seq, row.summary, row.from_message_id,
                row.to_message_id, row.created_at,
            ),
        )

    def next_compaction_seq(self, session_id: str) -> int:
        row = self._one(f"SELECT max(seq) FROM {COMPACTIONS} WHERE session_id = ?", (session_id,))
        return int(row[0] or 0) + 1 if row else 1

    def bump_epoch(self, session_id: str) -> None:
        self._run(
            f"INSERT INTO {SESSION_STATE} AS s (session_id, epoch) VALUES (?, 1) "
            "ON CONFLICT (session_id) DO UPDATE SET epoch = s.epoch + 1",
            (session_id,),
        )

    def store_payload(self, hash: str, data: bytes, media_type: str) -> None:
        stored = f"SELECT 1 FROM {ATTACHMENTS} WHERE hash = ?{self._FOR_SHARE}"
        if self._one(stored, (hash,)) is not None:
            return  # stored once; the first writer's media type stays
        chunks = [data[i : i + ROW_BUDGET] for i in range(0, len(data), ROW_BUDGET)]
        self._many(
            f"INSERT INTO {ATTACHMENT_CHUNKS} (hash, idx, data) VALUES (?,?,?) "
            "ON CONFLICT DO NOTHING",
            ((hash, i, self._blob(c)) for i, c in enumerate(chunks)),
        )
        self._run(
            f"INSERT INTO {ATTACHMENTS} (hash, bytes, media_type, chunks) VALUES (?,?,?,?) "
            "ON CONFLICT DO NOTHING",
            (hash, len(data), media_type, len(chunks)),
        )

    def _blob(self, data: bytes) -> Any:
        return data

    def refs_of(self, session_id: str, message_id: str) -> set[str]:
        return {
            r[0]
            for r in self._all(
                f"SELECT hash FROM {ATTACHMENT_REFS} WHERE session_id = ? AND message_id = ?",
                (session_id, message_id),
            )
        }

    def session_refs(self, session_id: str, hashes: Sequence[str]) -> set[str]:
        """Those of ``hashes`` some message of ``session_id`` references."""
        found: set[str] = set()
        for batch in _batches(hashes):
            found.update(r[0] for r in self._all(
                f"SELECT DISTINCT hash FROM {ATTACHMENT_REFS} WHERE session_id = ? "
                f"AND hash IN ({_marks(len(batch))})",
                (session_id, *batch),
            ))
        return found

    def add_refs(self, session_id: str, message_id: str, hashes: Iterable[str]) -> None:
        self._many(
            f"INSERT INTO {ATTACHMENT_REFS} (session_id, message_id, hash) VALUES (?,?,?) "
            "ON CONFLICT DO NOTHING",
            ((session_id, message_id, h) for h in hashes),
        )

    def drop_refs(self, session_id: str, message_id: str, hashes: Iterable[str]) -> None:
        self._many(
            f"DELETE FROM {ATTACHMENT_REFS} WHERE session_id = ? AND message_id = ? AND hash = ?",
            ((session_id, message_id, h) for h in hashes),
        )

    def drop_message_refs(self, session_id: str, ids: Sequence[str]) -> set[str]:
        dropped: set[str] = set()
        for batch in _batches(ids):
            marks = _marks(len(batch))
            dropped.update(
                r[0]
                for r in self._all(
                    f"SELECT hash FROM {ATTACHMENT_REFS} "
                    f"WHERE session_id = ? AND message_id IN ({marks})",
                    (session_id, *batch),
                )
            )
            self._run(
                f"DELETE FROM {ATTACHMENT_REFS} WHERE session_id = ? AND message_id IN ({marks})",
                (session_id, *batch),
            )
        return dropped

    def drop_session_refs(self, session_id: str) -> set[str]:
        dropped = {
            r[0]
            for r in self._all(
                f"SELECT DISTINCT hash FROM {ATTACHMENT_REFS} WHERE session_id = ?", (session_id,)
            )
        }
        self._run(f"DELETE FROM {ATTACHMENT_REFS} WHERE session_id = ?", (session_id,))
        return dropped

    def collect(self, hashes: Iterable[str]) -> None:
        """Delete payloads that no reference anywhere still points to."""
        for h in sorted(hashes):
            locked = f"SELECT 1 FROM {ATTACHMENTS} WHERE hash = ?{self._FOR_UPDATE}"
            if self._one(locked, (h,)) is None:
                continue
            if self._one(f"SELECT 1 FROM {ATTACHMENT_REFS} WHERE hash = ? LIMIT 1", (h,)) is None:
                self._run(f"DELETE FROM {ATTACHMENT_CHUNKS} WHERE hash = ?", (h,))
                self._run(f"DELETE FROM {ATTACHMENTS} WHERE hash = ?", (h,))

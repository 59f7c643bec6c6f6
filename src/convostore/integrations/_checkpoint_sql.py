"""The LangGraph checkpointer's SQL, written once for both engines (a mixin of ``SqlOps``).

Three tables (:data:`~._schema.LG_CHECKPOINTS`, :data:`~._schema.LG_BLOBS`,
:data:`~._schema.LG_WRITES`), each keyed by the storage session id first, then the checkpoint
namespace. A checkpoint row holds the serialised checkpoint without its channel values; each
channel value is one blob row per (channel, version), written once (``ON CONFLICT DO
NOTHING``) however many checkpoints share that version. A value too large for a row has no
``data``: its bytes are an attachment payload (``hash``), stored once by content.

What the bytes mean is the caller's business (``convostore.integrations.langgraph``): this
module stores and returns them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..backends._schema import ATTACHMENT_REFS, LG_BLOBS, LG_CHECKPOINTS, LG_WRITES
from ..backends.connection import _IN_BATCH, SqlConnection, _batches, _marks


class CheckpointRow(NamedTuple):
    """One stored checkpoint (channel values apart)."""

    session_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    type: str
    checkpoint: bytes
    metadata: bytes
    versions: str
    """The checkpoint's channel versions as a JSON object of strings (channel → version)."""


class ValueRow(NamedTuple):
    """A stored value: a channel version's blob or a pending write.

    ``key`` is the channel (blobs) or the task id (writes); ``data`` is None when the bytes
    are the attachment payload ``hash``.
    """

    key: str
    channel: str
    version_or_path: str
    idx: int
    type: str
    data: bytes | None
    hash: str | None


_CP_COLS = (
    "session_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata, "
    "versions"
)
_PUT_CHECKPOINT = (
    f"INSERT INTO {LG_CHECKPOINTS} ({_CP_COLS}, run_id) VALUES (?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (session_id, checkpoint_ns, checkpoint_id) DO UPDATE SET "
    "parent_checkpoint_id = excluded.parent_checkpoint_id, type = excluded.type, "
    "checkpoint = excluded.checkpoint, metadata = excluded.metadata, "
    "versions = excluded.versions, run_id = excluded.run_id"
)
_PUT_BLOBS = (
    f"INSERT INTO {LG_BLOBS} (session_id, checkpoint_ns, channel, version, type, data, hash) "
    "VALUES {rows} ON CONFLICT DO NOTHING"
)
_BLOB_ROW = "(?,?,?,?,?,?,?)"
_WRITE_COLS = (
    "session_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, data, hash, task_path"
)
_WRITE_ROW = "(?,?,?,?,?,?,?,?,?,?)"
_PUT_WRITES = f"INSERT INTO {LG_WRITES} ({_WRITE_COLS}) VALUES {{rows}} "
_KEEP_WRITES = _PUT_WRITES + "ON CONFLICT DO NOTHING"
_REPLACE_WRITES = _PUT_WRITES + (
    "ON CONFLICT (session_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET "
    "channel = excluded.channel, type = excluded.type, data = excluded.data, "
    "hash = excluded.hash, task_path = excluded.task_path"
)


def _rows(template: str, row: str, n: int) -> str:
    """``template`` inserting ``n`` rows of placeholders ``row`` (one statement)."""
    return template.replace("{rows}", ",".join([row] * n))


def _flat(*head_and_rows: Any) -> list[Any]:
    """The parameters of a multi-row insert: the leading values, then each row, per row."""
    *head, rows = head_and_rows
    params: list[Any] = []
    for row in rows:
        params.extend(head)
        params.extend(row)
    return params


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _checkpoint(row: Sequence[Any]) -> CheckpointRow:
    return CheckpointRow(
        row[0], row[1], row[2], row[3], row[4], bytes(row[5]), bytes(row[6]), row[7]
    )


class Loaded(NamedTuple):
    """A checkpoint with its channel values and pending writes, as one read returns them."""

    checkpoint: CheckpointRow
    values: list[ValueRow]
    writes: list[ValueRow]


class CheckpointSql(SqlConnection):
    """LangGraph checkpoint operations over the scope's connection; an engine whose SQL differs
    sets the ``_LG_*`` attributes."""

    _LG_EACH = "json_each(c.versions)"
    """A table function of the rows ``(key, value)`` of the JSON object ``c.versions``
    (SQLite's ``json_each``; PostgreSQL says ``jsonb_each_text(c.versions::jsonb)``)."""
    _LG_LOCK: str | None = None
    """A ``WITH`` item that takes the store's shared write lock (PostgreSQL's): every write
    of :meth:`lg_put` carries it, so a scope of those statements alone needs no lock
    statement (``Backend.write(locked_statements=True)``). A prune reads a thread's values
    after its checkpoints: a checkpoint committed in between would lose its new values."""
    _LG_LATERAL = False
    _LG_WRITABLE_CTE = False
    """True where a ``WITH`` clause may hold an ``INSERT`` (PostgreSQL): a checkpoint and its
    new values are then one statement."""
    """True where the engine has ``LATERAL``: each version is then looked up by a subquery with
    ``LIMIT 1``, which a planner cannot turn into a hash join over every stored version (SQLite
    has no ``LATERAL``, and keeps ``CROSS JOIN`` order: a key probe per version anyway)."""

    def _lg_locked(self, statement: str) -> str:
        lock = self._LG_LOCK
        if lock is None:
            return statement
        if statement.startswith("WITH "):
            return f"WITH {lock}, {statement[5:]}"
        return f"WITH {lock} {statement}"

    # -- writes --------------------------------------------------------------------------------

    def lg_put(
        self,
        checkpoint: CheckpointRow,
        run_id: str | None,
        blobs: Sequence[tuple[str, str, str, bytes | None, str | None]],
    ) -> None:
        """Store a checkpoint and its new channel versions ``(channel, version, type, data,
        hash)``; a version already stored is left as it is."""
        session_id, ns = checkpoint.session_id, checkpoint.checkpoint_ns
        if self._LG_WRITABLE_CTE and 0 < len(blobs) <= _IN_BATCH:
            # One statement: the values' INSERT runs whether or not the outer one reads it.
            self._run(
                self._lg_locked(
                    f"WITH b AS ({_rows(_PUT_BLOBS, _BLOB_ROW, len(blobs))}) {_PUT_CHECKPOINT}"),
                (*_flat(session_id, ns, blobs), *checkpoint, run_id),
            )
            return
        for batch in _batches(blobs):
            self._run(self._lg_locked(_rows(_PUT_BLOBS, _BLOB_ROW, len(batch))),
                      _flat(session_id, ns, batch))
        self._run(self._lg_locked(_PUT_CHECKPOINT), (*checkpoint, run_id))

    def lg_put_writes(
        self,
        session_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        rows: Sequence[tuple[str, int, str, str, bytes | None, str | None, str]],
        replace: bool,
    ) -> None:
        """Store pending writes ``(task_id, idx, channel, type, data, hash, task_path)``: kept
        if present, or replaced when ``replace`` (the special channels' writes)."""
        if replace:
            # One statement may not update a row twice: the last write of a key wins, as if
            # the rows were written one by one.
            rows = list({(row[0], row[1]): row for row in rows}.values())
        template = _REPLACE_WRITES if replace else _KEEP_WRITES
        for batch in _batches(rows):  # one statement per batch of rows
            # No lock of its own: writes without payloads race no store-wide scope (each
            # outcome is one a serial order gives); with payloads the scope locks.
            self._run(_rows(template, _WRITE_ROW, len(batch)),
                      _flat(session_id, checkpoint_ns, checkpoint_id, batch))

    def lg_delete_thread(self, session_id: str) -> None:
        """Delete every checkpoint, value and write of a storage session."""
        for table in (LG_WRITES, LG_BLOBS, LG_CHECKPOINTS):
            self._run(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))

    def lg_delete_runs(self, run_ids: Sequence[str]) -> set[str]:
        """Delete the checkpoints written by ``run_ids`` and their writes; the storage sessions
        they belonged to."""
        touched: set[str] = set()
        for batch in _batches(list(run_ids)):
            marks = _marks(len(batch))
            keys = self._all(
                f"SELECT session_id, checkpoint_ns, checkpoint_id FROM {LG_CHECKPOINTS} "
                f"WHERE run_id IN ({marks})",
                tuple(batch),
            )
            if not keys:
                continue
            touched.update(k[0] for k in keys)
            self._many(
                f"DELETE FROM {LG_WRITES} WHERE session_id = ? AND checkpoint_ns = ? "
                "AND checkpoint_id = ?",
                keys,
            )
            self._run(f"DELETE FROM {LG_CHECKPOINTS} WHERE run_id IN ({marks})", tuple(batch))
        return touched

    def lg_copy_thread(self, source: str, target: str) -> None:
        """Copy every row of storage session ``source`` to ``target`` (payload refs too)."""
        self._run(
            f"INSERT INTO {LG_CHECKPOINTS} ({_CP_COLS}, run_id) SELECT ?, checkpoint_ns, "
            "checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata, versions, run_id "
            f"FROM {LG_CHECKPOINTS} WHERE session_id = ? ON CONFLICT DO NOTHING",
            (target, source),
        )
        self._run(
            f"INSERT INTO {LG_BLOBS} (session_id, checkpoint_ns, channel, version, type, data, "
            "hash) SELECT ?, checkpoint_ns, channel, version, type, data, hash "
            f"FROM {LG_BLOBS} WHERE session_id = ? ON CONFLICT DO NOTHING",
            (target, source),
        )
        self._run(
            f"INSERT INTO {LG_WRITES} ({_WRITE_COLS}) SELECT ?, checkpoint_ns, checkpoint_id, "
            "task_id, idx, channel, type, data, hash, task_path "
            f"FROM {LG_WRITES} WHERE session_id = ? ON CONFLICT DO NOTHING",
            (target, source),
        )
        self._run(
            f"INSERT INTO {ATTACHMENT_REFS} (session_id, message_id, hash) "
            f"SELECT ?, message_id, hash FROM {ATTACHMENT_REFS} WHERE session_id = ? "
            "ON CONFLICT DO NOTHING",
            (target, source),
        )

    def lg_prune(
        self,
        session_id: str,
        keep: Sequence[tuple[str, str]],
        keep_values: Sequence[tuple[str, str, str]],
    ) -> None:
        """Delete a storage session's checkpoints but ``keep`` ``(namespace, checkpoint id)``,
        the writes of the deleted ones, and every value but ``keep_values`` ``(namespace,
        channel, version)``."""
        kept = {tuple(k) for k in keep}
        kept_values = {tuple(k) for k in keep_values}
        doomed = [
            r for r in self._all(
                f"SELECT checkpoint_ns, checkpoint_id FROM {LG_CHECKPOINTS} WHERE session_id = ?",
                (session_id,),
            ) if (r[0], r[1]) not in kept
        ]
        self._many(
            f"DELETE FROM {LG_WRITES} WHERE session_id = ? AND checkpoint_ns = ? "
            "AND checkpoint_id = ?",
            [(session_id, *r) for r in doomed],
        )
        self._many(
            f"DELETE FROM {LG_CHECKPOINTS} WHERE session_id = ? AND checkpoint_ns = ? "
            "AND checkpoint_id = ?",
            [(session_id, *r) for r in doomed],
        )
        values = [
            r for r in self._all(
                f"SELECT checkpoint_ns, channel, version FROM {LG_BLOBS} WHERE session_id = ?",
                (session_id,),
            ) if (r[0], r[1], r[2]) not in kept_values
        ]
        self._many(
            f"DELETE FROM {LG_BLOBS} WHERE session_id = ? AND checkpoint_ns = ? AND channel = ? "
            "AND version = ?",
            [(session_id, *r) for r in values],
        )

    def lg_unused_hashes(self, session_id: str, hashes: Sequence[str]) -> set[str]:
        """Which of ``hashes`` no value or write of the storage session refers to any more."""
        used: set[str] = set()
        for batch in _batches(list(hashes)):
            marks = _marks(len(batch))
            for table in (LG_BLOBS, LG_WRITES):
                used.update(
                    r[0] for r in self._all(
                        f"SELECT DISTINCT hash FROM {table} WHERE session_id = ? "
                        f"AND hash IN ({marks})",
                        (session_id, *batch),
                    )
                )
        return set(hashes) - used

    # -- reads ---------------------------------------------------------------------------------

    def _lg_value_of_key(self) -> str:
        """The value row ``b`` of version ``j`` of checkpoint ``c``, as a FROM item."""
        probe = (
            "b.session_id = c.session_id AND b.checkpoint_ns = c.checkpoint_ns "
            "AND b.channel = j.key AND b.version = j.value"
        )
        if self._LG_LATERAL:
            return (
                f"LATERAL (SELECT b.channel, b.version, b.type, b.data, b.hash FROM {LG_BLOBS} b "
                f"WHERE {probe} LIMIT 1) AS b"
            )
        return f"{LG_BLOBS} b WHERE {probe}"

    def lg_get(
        self, session_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> Loaded | None:
        """The checkpoint ``checkpoint_id`` (the namespace's latest when None) with the values
        of its channel versions and its pending writes, in one statement; None if absent."""
        if checkpoint_id is None:
            pick = "ORDER BY checkpoint_id DESC LIMIT 1"
            params: tuple[Any, ...] = (session_id, checkpoint_ns)
        else:
            pick = "AND checkpoint_id = ?"
            params = (session_id, checkpoint_ns, checkpoint_id)
        rows = self._all(
            f"WITH c AS (SELECT {_CP_COLS} FROM {LG_CHECKPOINTS} WHERE session_id = ? "
            f"AND checkpoint_ns = ? {pick}) "
            "SELECT 0, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint, "
            "c.metadata, c.versions, NULL, 0 FROM c "
            "UNION ALL SELECT 1, b.channel, b.version, b.type, b.data, NULL, b.hash, NULL, 0 "
            f"FROM c CROSS JOIN {self._LG_EACH} AS j CROSS JOIN {self._lg_value_of_key()} "
            "UNION ALL SELECT 2, w.task_id, w.channel, w.type, w.data, NULL, w.hash, "
            f"w.task_path, w.idx FROM c, {LG_WRITES} w WHERE w.session_id = c.session_id "
            "AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id",
            params,
        )
        head = next((r for r in rows if r[0] == 0), None)
        if head is None:
            return None
        checkpoint = CheckpointRow(
            session_id, checkpoint_ns, head[1], head[2], head[3], bytes(head[4]), bytes(head[5]),
            head[6],
        )
        values = [ValueRow(r[1], r[1], r[2], 0, r[3], _bytes(r[4]), r[6])
                  for r in rows if r[0] == 1]
        writes = sorted(
            (ValueRow(r[1], r[2], r[7], int(r[8]), r[3], _bytes(r[4]), r[6])
             for r in rows if r[0] == 2),
            key=lambda w: (w.version_or_path, w.key, w.idx),
        )
        return Loaded(checkpoint, values, writes)

    def lg_checkpoints(
        self,
        session_id: str | None,
        checkpoint_ns: str | None,
        before: str | None,
        after: tuple[str, str, str] | None,
        limit: int,
    ) -> list[tuple[str, str, str]]:
        """The keys ``(checkpoint_id, session_id, namespace)`` of at most ``limit`` checkpoints,
        newest first (by id, then session and namespace).

        :param session_id: one storage session's, or every one's when None.
        :param checkpoint_ns: one namespace's, or every one's when None.
        :param before: only ids below this one.
        :param after: the key ``(checkpoint_id, session_id, namespace)`` of the previous
            page's last row: this page starts after it.
        """
        where: list[str] = []
        params: list[Any] = []
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        if checkpoint_ns is not None:
            where.append("checkpoint_ns = ?")
            params.append(checkpoint_ns)
        if before is not None:
            where.append("checkpoint_id < ?")
            params.append(before)
        if after is not None:
            where.append(
                "(checkpoint_id < ? OR (checkpoint_id = ? AND (session_id < ? OR "
                "(session_id = ? AND checkpoint_ns < ?))))"
            )
            params.extend((after[0], after[0], after[1], after[1], after[2]))
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._all(
            f"SELECT checkpoint_id, session_id, checkpoint_ns FROM {LG_CHECKPOINTS}{clause} "
            "ORDER BY checkpoint_id DESC, session_id DESC, checkpoint_ns DESC LIMIT ?",
            (*params, limit),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def lg_latest(self, session_id: str) -> list[CheckpointRow]:
        """The latest checkpoint of each namespace of a storage session."""
        rows = self._all(
            f"SELECT {_CP_COLS} FROM {LG_CHECKPOINTS} c WHERE session_id = ? AND checkpoint_id = "
            f"(SELECT max(checkpoint_id) FROM {LG_CHECKPOINTS} m WHERE m.session_id = c.session_id "
            "AND m.checkpoint_ns = c.checkpoint_ns)",
            (session_id,),
        )
        return [_checkpoint(r) for r in rows]

"""The attachments' SQL, written once for both engines (a mixin of ``SqlOps``).

A payload is stored once per hash (``convostore_attachments``, its bytes in
``convostore_attachment_chunks`` slices of the codec's row budget) and referenced by the
messages that carry it (``convostore_attachment_refs``); :meth:`AttachmentOps.collect` deletes
the payloads no reference points to any more. Which message carries what is decided above the
engines (:mod:`convostore.messages._writes`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..backends._schema import ATTACHMENT_CHUNKS, ATTACHMENT_REFS, ATTACHMENTS
from ..backends.connection import SqlConnection, _batches, _marks
from ..backends.rows import AttachmentMeta
from ..codec import ROW_BUDGET


class AttachmentOps(SqlConnection):
    """Payloads and their references over the scope's connection."""

    # Row locks that make payload collection safe against a concurrent writer re-using the
    # payload (PostgreSQL); SQLite serialises all writers, so it needs none.
    _FOR_SHARE = ""
    _FOR_UPDATE = ""

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

    def store_payload(self, hash: str, data: bytes, media_type: str) -> None:
        stored = f"SELECT 1 FROM {ATTACHMENTS} WHERE hash = ?{self._FOR_SHARE}"
        if self._one(stored, (hash,)) is not None:
            return  # stored once; the first writer's media type stays
        chunks = [data[i : i + ROW_BUDGET] for i in range(0, len(data), ROW_BUDGET)]
        self._many(
            f"INSERT INTO {ATTACHMENT_CHUNKS} (hash, idx, data) VALUES (?,?,?) "
            "ON CONFLICT DO NOTHING",
            ((hash, i, c) for i, c in enumerate(chunks)),
        )
        self._run(
            f"INSERT INTO {ATTACHMENTS} (hash, bytes, media_type, chunks) VALUES (?,?,?,?) "
            "ON CONFLICT DO NOTHING",
            (hash, len(data), media_type, len(chunks)),
        )

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

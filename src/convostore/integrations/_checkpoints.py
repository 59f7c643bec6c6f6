"""LangGraph checkpoints over a convostore store: the behaviour, written once as sync code.

:class:`Checkpoints` turns LangGraph's calls into the engine operations of
:mod:`convostore.integrations._checkpoint_sql` (one write scope per logical write) and back, and
keeps each thread's conversation mirrored (:mod:`._langgraph_mirror`). The public savers in
:mod:`.langgraph` call it directly (sync) or on a worker thread (async).

Storage: a thread's checkpoints live under the storage session ``convostore:langgraph:<thread
id>`` (an internal session: no messages, hidden from listings), namespaces inside it. Values
are serialised with the saver's ``serde``; one too large for a row (above
:data:`~convostore.codec.ROW_BUDGET`) is stored as an attachment payload, once per content
hash, and referenced from the storage session.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from .. import limits
from ..codec import ROW_BUDGET
from ._checkpoint_sql import CheckpointRow, CheckpointSql, Loaded, ValueRow
from ._langgraph_mirror import Mirror, mirror_session_id, retried

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from ..store import Sessions

STORAGE_PREFIX = "convostore:langgraph:"
"""The prefix of the internal sessions that hold checkpoints (one per thread)."""

_REF = "langgraph"
"""The "message id" under which a storage session refers to its large payloads."""
_MEDIA_TYPE = "application/x-langgraph-value"
_PAGE = 100


def storage_id(thread_id: Any) -> str:
    """The internal session id holding a thread's checkpoints."""
    return STORAGE_PREFIX + str(thread_id)


# The saver's door: every id a call brings is checked before any transaction opens, the same
# on both engines (an id neither engine holds, a NUL or a lone surrogate, would be a driver's
# error on one and stored on the other; a task id of another type sorted against a str one
# made every later read of the thread raise TypeError).


def _thread(value: Any, name: str = "thread_id") -> str:
    """A thread id as LangGraph's savers take it (any value's ``str``), checked."""
    thread_id = str(value)
    limits.check_id(name, thread_id)
    return thread_id


def _namespace(conf: Any) -> str:
    """A config's ``checkpoint_ns`` (``""`` when absent), checked."""
    ns = str(conf.get("checkpoint_ns", ""))
    limits.check_id("checkpoint_ns", ns)
    return ns


def _text_key(name: str, value: Any, *, optional: bool = False) -> Any:
    """An id stored as it is (a checkpoint id, a task id): a storable string."""
    limits.check_id(name, value, optional=optional)
    return value


_INLINE_TYPES = (type(None), bool, int, float)
_INLINE_CHARS = 256


def _inline(value: Any) -> bool:
    """Whether a channel value is kept in its checkpoint's row: None, a bool, an int, a float or
    a short str (exact types: a subclass may mean more to the serializer)."""
    kind = type(value)
    return kind in _INLINE_TYPES or (kind is str and len(value) <= _INLINE_CHARS)


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                             "checkpoint_id": checkpoint_id}}


class Checkpoints:
    """A saver's storage: LangGraph's operations as transactions of a convostore store.

    :param store: the sync store (an ``AsyncSessions``' ``.sync``).
    :param serde: how values become bytes (the saver's).
    :param messages_channel: the channel mirrored as a conversation; None mirrors nothing.
    """

    def __init__(
        self, store: Sessions, serde: SerializerProtocol, messages_channel: str | None
    ) -> None:
        self.store = store
        self.serde = serde
        self.messages_channel = messages_channel
        self.mirror = Mirror(store)

    def with_serde(self, serde: SerializerProtocol) -> Checkpoints:
        """The same storage (and mirror) read and written with another serializer."""
        other = Checkpoints(self.store, serde, self.messages_channel)
        other.mirror = self.mirror
        return other

    # -- the engine ------------------------------------------------------------------------------

    def _write(self, session_id: str | None, *, session_lock: bool = True,
               locked_statements: bool = False) -> Any:
        return self.store.core.backend.write(session_id, session_lock=session_lock,
                                             locked_statements=locked_statements)

    def _read(self) -> Any:
        return self.store.core.backend.read()

    @staticmethod
    def _ops(ops: Any) -> CheckpointSql:
        return cast(CheckpointSql, ops)

    def _dump(self, value: Any, payloads: dict[str, bytes]) -> tuple[str, bytes | None, str | None]:
        type_, data = self.serde.dumps_typed(value)
        if len(data) <= ROW_BUDGET:
            return type_, data, None
        digest = hashlib.sha256(data).hexdigest()
        payloads[digest] = data
        return type_, None, digest

    def _store_payloads(self, ops: Any, session_id: str, payloads: dict[str, bytes]) -> None:
        for digest, data in payloads.items():
            ops.store_payload(digest, data, _MEDIA_TYPE)
        ops.add_refs(session_id, _REF, payloads)

    def _gc(self, ops: Any, session_id: str) -> None:
        """Drop the payloads no value or write of the session refers to any more."""
        held = ops.refs_of(session_id, _REF)
        if held:
            unused = self._ops(ops).lg_unused_hashes(session_id, sorted(held))
            if unused:
                ops.drop_refs(session_id, _REF, unused)
                ops.collect(unused)

    # -- writes --------------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint, the channel versions it introduces and the new messages of its
        mirrored conversation (one transaction)."""
        conf = config["configurable"]
        thread_id = _thread(conf["thread_id"])
        ns = _namespace(conf)
        sid = storage_id(thread_id)
        _text_key("checkpoint['id']", checkpoint["id"])
        _text_key("checkpoint_id", conf.get("checkpoint_id"), optional=True)
        for name in new_versions:
            limits.check_text("channel", name)
        body: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = body.pop("channel_values", None) or {}
        # Small scalars ride in the checkpoint row (as PostgresSaver keeps them): no value row
        # to write, none to look up when the checkpoint is read.
        inline = {ch: v for ch, v in values.items() if _inline(v)}
        if inline:
            body["channel_values"] = inline
        payloads: dict[str, bytes] = {}
        blobs = [
            (channel, str(version), *(
                self._dump(values[channel], payloads) if channel in values
                else ("empty", b"", None)
            ))
            for channel, version in new_versions.items() if channel not in inline
        ]
        ctype, cbytes = self.serde.dumps_typed(body)
        meta = get_serializable_checkpoint_metadata(config, metadata)
        mtype, mbytes = self.serde.dumps_typed(meta)
        # The versions whose values are value rows (what a read looks up).
        versions = json.dumps(
            {ch: str(v) for ch, v in checkpoint["channel_versions"].items() if ch not in inline},
            separators=(",", ":"), ensure_ascii=False,
        )
        row = CheckpointRow(
            sid, ns, checkpoint["id"], conf.get("checkpoint_id"), ctype, cbytes,
            mtype.encode() + b":" + mbytes, versions,
        )
        run_id = meta.get("run_id")
        if run_id is not None:
            limits.check_id("metadata['run_id']", str(run_id))
        channel = self.messages_channel
        plan = None
        if channel is not None and channel in new_versions and channel in values:
            plan = self.mirror.plan(mirror_session_id(thread_id, ns), values[channel])
        # With new messages, the scope serialises the mirror session's writers; the checkpoint
        # rows need no lock of their own (each is written once, by id): without new messages
        # the scope excludes only the store-wide ones (prune, delete_thread).
        mirrored = plan is not None and bool(plan.new)

        def write() -> None:
            # lg_put (no payload) carries its own lock; after the session's lock, each
            # message of one row is one statement
            with self._write(plan.session_id if plan and mirrored else sid,
                             session_lock=mirrored,
                             locked_statements=not payloads and (
                                 plan is None or plan.one_row_each)) as ops:
                if payloads:
                    self._store_payloads(ops, sid, payloads)
                self._ops(ops).lg_put(row, None if run_id is None else str(run_id), blobs)
                if plan is not None:
                    self.mirror.write_in(ops, plan)

        retried(write)
        if plan is not None:
            self.mirror.committed(plan)
        return _config(thread_id, ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes (one transaction); a regular write already stored is
        kept, a special channel's (error, interrupt, ...) replaced."""
        conf = config["configurable"]
        sid = storage_id(_thread(conf["thread_id"]))
        ns = _namespace(conf)
        checkpoint_id = _text_key("checkpoint_id", str(conf["checkpoint_id"]))
        _text_key("task_id", task_id)
        limits.check_text("task_path", task_path)
        for channel, _value in writes:
            limits.check_text("channel", channel)
        payloads: dict[str, bytes] = {}
        rows = [
            (task_id, WRITES_IDX_MAP.get(channel, idx), channel,
             *self._dump(value, payloads), task_path)
            for idx, (channel, value) in enumerate(writes)
        ]
        replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        # Each write is keyed (ON CONFLICT keeps or replaces it): no session lock needed, and
        # without payloads (nothing a prune collects) no lock at all: lg_put_writes alone.
        with self._write(sid, session_lock=False, locked_statements=not payloads) as ops:
            if payloads:
                self._store_payloads(ops, sid, payloads)
            self._ops(ops).lg_put_writes(sid, ns, checkpoint_id, rows, replace)

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, values, writes and mirrored conversations."""
        sid = storage_id(_thread(thread_id))
        # Store-wide, as prune: a put holds its mirror session's lock, not the thread's.
        with self._write(None) as ops:
            namespaces = {r.checkpoint_ns for r in self._ops(ops).lg_latest(sid)}
            self._ops(ops).lg_delete_thread(sid)
            ops.collect(ops.drop_session_refs(sid))
        for ns in sorted(namespaces | {""}):
            session_id = mirror_session_id(str(thread_id), ns)
            self.store.session(session_id).clear_messages()
            self.mirror.forget(session_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata names one of ``run_ids``;
        the mirrored conversations stay."""
        if not run_ids:
            return
        runs = [str(r) for r in run_ids]
        limits.check_ids("run_ids", runs)
        with self._write(None) as ops:
            for sid in sorted(self._ops(ops).lg_delete_runs(runs)):
                self._gc(ops, sid)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and write of a thread to another; the target's mirror
        then follows its latest checkpoints."""
        source = storage_id(_thread(source_thread_id, "source_thread_id"))
        target = storage_id(_thread(target_thread_id, "target_thread_id"))
        with self._write(None) as ops:
            self._ops(ops).lg_copy_thread(source, target)
        if self.messages_channel is not None:
            with self._read() as ops:
                latest = self._ops(ops).lg_latest(target)
            for row in latest:
                found = self.get_tuple(_config(str(target_thread_id), row.checkpoint_ns,
                                               row.checkpoint_id))
                if found is not None:
                    value = found.checkpoint["channel_values"].get(self.messages_channel)
                    self.mirror.mirror(
                        mirror_session_id(str(target_thread_id), row.checkpoint_ns), value)

    def prune(self, thread_ids: Sequence[str], strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: keep each namespace's latest checkpoint, its writes and the
        values it uses; ``"delete"``: delete every checkpoint. Mirrors stay either way."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"strategy must be 'keep_latest' or 'delete', not {strategy!r}")
        for i, thread_id in enumerate(thread_ids):
            sid = storage_id(_thread(thread_id, f"thread_ids[{i}]"))
            # Store-wide: no put of the thread (which may hold only its mirror session's lock)
            # can add a checkpoint whose values this deletes.
            with self._write(None) as ops:
                cops = self._ops(ops)
                keep: list[tuple[str, str]] = []
                keep_values: list[tuple[str, str, str]] = []
                if strategy == "keep_latest":
                    for row in cops.lg_latest(sid):
                        keep.append((row.checkpoint_ns, row.checkpoint_id))
                        body = self.serde.loads_typed((row.type, row.checkpoint))
                        keep_values.extend(
                            (row.checkpoint_ns, ch, str(v))
                            for ch, v in body.get("channel_versions", {}).items()
                        )
                cops.lg_prune(sid, keep, keep_values)
                self._gc(ops, sid)

    # -- reads ---------------------------------------------------------------------------------

    def _loads(self, row: ValueRow, payloads: dict[str, bytes]) -> Any:
        data = row.data if row.data is not None else payloads[row.hash or ""]
        return self.serde.loads_typed((row.type, data))

    def _tuple(self, ops: Any, loaded: Loaded, config: RunnableConfig | None) -> CheckpointTuple:
        row, values, writes = loaded
        hashes = {r.hash for r in (*values, *writes) if r.data is None and r.hash}
        payloads = ops.attachment_data(sorted(hashes)) if hashes else {}
        body = self.serde.loads_typed((row.type, row.checkpoint))
        channel_values = body.get("channel_values") or {}  # the inline ones
        for r in values:
            if r.type != "empty":
                channel_values[r.key] = self._loads(r, payloads)
        body["channel_values"] = channel_values
        thread_id = row.session_id[len(STORAGE_PREFIX):]
        return CheckpointTuple(
            config=config or _config(thread_id, row.checkpoint_ns, row.checkpoint_id),
            checkpoint=cast(Checkpoint, body),
            metadata=self._metadata(row),
            parent_config=(
                _config(thread_id, row.checkpoint_ns, row.parent_checkpoint_id)
                if row.parent_checkpoint_id else None
            ),
            pending_writes=[(w.key, w.channel, self._loads(w, payloads)) for w in writes],
        )

    def _metadata(self, row: CheckpointRow) -> Any:
        mtype, _, mbytes = row.metadata.partition(b":")
        return self.serde.loads_typed((mtype.decode(), mbytes))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or its namespace's latest (one statement)."""
        conf = config["configurable"]
        sid = storage_id(_thread(conf["thread_id"]))
        ns = _namespace(conf)
        checkpoint_id = _text_key("checkpoint_id", get_checkpoint_id(config), optional=True)
        with self._read() as ops:
            loaded = self._ops(ops).lg_get(sid, ns, checkpoint_id)
            if loaded is None:
                return None
            return self._tuple(ops, loaded, config if checkpoint_id else None)

    def listing(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Listing:
        """A ``list`` call's state; :meth:`next_page` reads its pages."""
        conf = config["configurable"] if config else {}
        ns = conf.get("checkpoint_ns")
        return Listing(
            session_id=storage_id(_thread(conf["thread_id"])) if conf.get("thread_id")
            is not None else None,
            checkpoint_ns=None if ns is None else _namespace(conf),
            checkpoint_id=_text_key("checkpoint_id", conf.get("checkpoint_id"), optional=True),
            before=_text_key("before", get_checkpoint_id(before), optional=True) if before
            else None,
            filter=dict(filter or {}),
            left=limit,
            done=limit is not None and limit <= 0,
        )

    def next_page(self, listing: Listing) -> list[CheckpointTuple] | None:
        """The next page of matching checkpoints, newest first, read in one scope (None when
        the listing is done). Metadata filters are applied to decoded metadata."""
        while not listing.done:
            size = _PAGE
            if listing.left is not None and not listing.filter and listing.checkpoint_id is None:
                size = min(size, listing.left)
            found: list[CheckpointTuple] = []
            with self._read() as ops:
                cops = self._ops(ops)
                keys = cops.lg_checkpoints(
                    listing.session_id, listing.checkpoint_ns, listing.before, listing.after,
                    size)
                wanted_id = listing.checkpoint_id
                for checkpoint_id, session_id, ns in keys:
                    if wanted_id is not None and checkpoint_id != wanted_id:
                        continue
                    loaded = cops.lg_get(session_id, ns, checkpoint_id)
                    if loaded is None:  # deleted since the page was read
                        continue
                    if listing.filter:
                        metadata = self._metadata(loaded.checkpoint)
                        if not all(metadata.get(k) == v for k, v in listing.filter.items()):
                            continue
                    found.append(self._tuple(ops, loaded, None))
                    if listing.left is not None:
                        listing.left -= 1
                        if listing.left <= 0:
                            listing.done = True
                            break
            if len(keys) < size:
                listing.done = True
            elif keys:
                listing.after = keys[-1]
            if found:
                return found
        return None


@dataclass
class Listing:
    """A ``list`` call in progress: its filters and where the next page starts."""

    session_id: str | None
    checkpoint_ns: str | None
    checkpoint_id: str | None
    before: str | None
    filter: dict[str, Any]
    left: int | None
    done: bool
    after: tuple[str, str, str] | None = None

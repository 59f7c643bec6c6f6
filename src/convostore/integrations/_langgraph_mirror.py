"""The visible conversation of a LangGraph thread: its ``messages`` channel as UIMessages.

Each LangChain message of a checkpoint's ``messages`` value becomes one stored message
(converted as :mod:`convostore.integrations.langchain` converts them, so that integration reads
the mirror back), with the LangChain message's id as its id, under the message before it. A
fork (a checkpoint written from an earlier one) therefore becomes a branch of the mirror's
tree, sharing the messages before the fork point, and the newest branch written is the
session's latest leaf. A message without an id gets one derived from its parent's id and its
content, so writing the same list twice adds nothing.

The new messages are appended in the checkpoint's own transaction (:meth:`Mirror.write_in`),
so a checkpoint and its conversation commit together; a message of one row is appended as one
engine operation (on PostgreSQL one statement, sent with the checkpoint's: the whole put is
one round trip). Which messages are new is known without a read when this saver
mirrored the list's previous state (a per-saver memory of the last list mirrored per session:
the same message objects, or equal ones); otherwise the session is probed from the newest
message back until a stored one is found (usually one or two reads), except for a list of one
message (a new thread's first checkpoint), whose write tells whether it was stored (and only
then is it read, after the commit, to see whether it was edited).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, is_
from threading import Lock
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.messages import BaseMessage, message_to_dict

from ..backends.base import ScopeRetry
from ..messages._writes import Prepared, Writer, now_ms, one_row
from ..model import ChangeEvent
from .langchain import to_stored

if TYPE_CHECKING:
    from ..backends.base import Ops
    from ..store import Sessions

_REMEMBERED = 256
"""How many sessions' last mirrored lists a saver remembers."""

T = TypeVar("T")


def retried(write: Callable[[], T]) -> T:
    """Run ``write`` (a write scope holding :meth:`Mirror.write_in`) and, if the engine rolled
    it back to be run again (:class:`~convostore.backends.base.ScopeRetry`: nothing was
    written), run it once more."""
    try:
        return write()
    except ScopeRetry:
        return write()


def mirror_session_id(thread_id: str, checkpoint_ns: str = "") -> str:
    """The convostore session that mirrors a thread's conversation.

    The thread id itself for the root namespace; ``"<thread_id>#<checkpoint_ns>"`` for a
    subgraph's namespace.
    """
    return thread_id if not checkpoint_ns else f"{thread_id}#{checkpoint_ns}"


_MESSAGE_ID = attrgetter("id")


def _ids(messages: Sequence[BaseMessage], parent: str = "") -> list[str]:
    """The mirror's id of each message (``parent``: the id of the message before the first)."""
    ids: list[str] = []
    for message in messages:
        mid = message.id
        if not isinstance(mid, str) or not mid:
            dumped = json.dumps(message_to_dict(message), sort_keys=True, default=str)
            mid = "lg-" + hashlib.sha256(f"{parent}\x00{dumped}".encode()).hexdigest()[:32]
        ids.append(mid)
        parent = mid
    return ids


def _stored(message: BaseMessage, id: str) -> dict[str, Any]:
    return {**to_stored(message), "id": id}


@dataclass
class Plan:
    """The messages one checkpoint adds to a mirror session, prepared before its transaction."""

    session_id: str
    messages: list[BaseMessage]
    ids: list[str]
    writer: Writer
    new: list[tuple[Prepared, str | None]] = field(default_factory=list)
    """Each new message, prepared, with the id of its parent (None: a root)."""
    inserted: list[tuple[Prepared, str | None, Callable[[], int | None]]] = field(
        default_factory=list)
    """Each message written, with its parent and, to call after the commit, its change's
    position (None: the id was stored already)."""
    unprobed: bool = False
    """The session was not probed (:meth:`Mirror.plan`): a message found stored by the write
    is compared (and updated if edited) after the commit, as the probe would have."""
    found_stored: bool = False
    """A message of :attr:`new` was found stored by its write (set by the write and its
    commit): with :attr:`unprobed`, the session is compared after the commit."""

    @property
    def one_row_each(self) -> bool:
        """Whether each new message is one row without payloads: :meth:`Mirror.write_in`
        then sends one statement per message (``Ops.append_row``), no batch."""
        return all(one_row(prep) for prep, _ in self.new)


class Mirror:
    """Mirrors ``messages`` channel values into sessions of ``store``."""

    def __init__(self, store: Sessions) -> None:
        self.store = store
        self._lock = Lock()
        self._last: OrderedDict[str, tuple[list[str], list[BaseMessage]]] = OrderedDict()

    def _remembered(self, session_id: str, messages: list[BaseMessage]
                    ) -> tuple[list[str], int]:
        """The messages' ids, and how many leading ones are known to be mirrored already
        (-1: unknown)."""
        with self._lock:
            last = self._last.get(session_id)
        if last is None:
            return _ids(messages), -1
        last_ids, last_messages = last
        n = len(last_ids)
        # The very objects mirrored last (LangGraph's reducer keeps them), their ids too: only
        # the new messages are looked at, and the rest costs an identity check at C speed. Each
        # must still carry the id it was mirrored under: an id set or changed in place, or an
        # id-less message (its id derives from its content, which may have changed), takes the
        # full path below.
        if (n <= len(messages) and all(map(is_, last_messages, messages))
                and list(map(_MESSAGE_ID, last_messages)) == last_ids):
            return last_ids + _ids(messages[n:], last_ids[-1] if n else ""), n
        ids = _ids(messages)
        if n > len(ids) or ids[:n] != last_ids:
            return ids, -1
        for old, new in zip(last_messages, messages, strict=False):
            if old is not new and old != new:
                return ids, -1  # a message was edited in place: look at the session instead
        return ids, n

    def _probe(self, session_id: str, ids: list[str], messages: list[BaseMessage]) -> int:
        """Find the newest stored message, from the end (one read each); update it if its
        content changed. How many leading messages are mirrored."""
        session = self.store.session(session_id)
        for i in range(len(messages) - 1, -1, -1):
            stored = session.get_message(ids[i])
            if stored is not None:
                fresh = _stored(messages[i], ids[i])
                if stored.get("parts") != fresh["parts"] or stored.get("role") != fresh["role"]:
                    session.update_message(fresh)  # edited in place (same id, new content)
                return i + 1
        return 0

    def plan(self, session_id: str, value: Any) -> Plan | None:
        """What mirroring ``value`` adds to ``session_id`` (None: not a list of messages).

        :param value: the channel's value; anything but a list of LangChain messages is ignored.
        """
        if not isinstance(value, list) or not value:
            return None
        messages = [m for m in value if isinstance(m, BaseMessage)]
        if not messages:
            return None
        ids, known = self._remembered(session_id, messages)
        # A single message (a new thread's first checkpoint, usually) is not probed: its write
        # says whether its id is stored (writing nothing then), one read fewer.
        unprobed = known < 0 and len(messages) == 1
        if unprobed:
            known = 0
        elif known < 0:
            known = self._probe(session_id, ids, messages)
        writer = Writer(self.store.core, session_id)
        plan = Plan(session_id, messages, ids, writer, unprobed=unprobed)
        parent = ids[known - 1] if known > 0 else None
        for i in range(known, len(messages)):
            prep = writer.prepare(_stored(messages[i], ids[i]), "server")
            plan.new.append((prep, parent))
            parent = ids[i]
        return plan

    def write_in(self, ops: Ops, plan: Plan) -> None:
        """Append the plan's new messages in the caller's write scope (which must serialise
        the writers of ``plan.session_id``); one already stored is left as it is."""
        created = now_ms()
        writer = plan.writer
        plan.inserted.clear()  # a scope run again starts over
        plan.found_stored = False
        for prep, parent in plan.new:
            settled = writer.append_in(ops, prep, parent, created)
            if settled is None:  # continuation rows or payloads: the general way
                logged = writer.insert_in(ops, prep, parent, created, verbatim=False)
                if logged is None:
                    plan.found_stored = True
                    continue
                settled = logged.committed
            plan.inserted.append((prep, parent, settled))

    def committed(self, plan: Plan) -> None:
        """After the transaction committed: remember the list, tell the listeners."""
        with self._lock:
            self._last[plan.session_id] = (plan.ids, plan.messages)
            self._last.move_to_end(plan.session_id)
            while len(self._last) > _REMEMBERED:
                self._last.popitem(last=False)
        events = self.store.core.events
        for prep, parent, settled in plan.inserted:
            cursor = settled()  # wakes this process's watchers too
            if cursor is None:
                plan.found_stored = True
            elif events.listened:
                events.emit(ChangeEvent("append", plan.session_id, message=prep.message,
                                        parent_id=parent, inserted=True, cursor=cursor))
        if plan.unprobed and plan.found_stored:
            self._probe(plan.session_id, plan.ids, plan.messages)  # edited in place?

    def forget(self, session_id: str) -> None:
        """Drop what is remembered of a session (it was cleared)."""
        with self._lock:
            self._last.pop(session_id, None)

    def mirror(self, session_id: str, value: Any) -> None:
        """Mirror ``value`` into ``session_id`` in a transaction of its own."""
        plan = self.plan(session_id, value)
        if plan is None or not plan.new:
            return
        def write() -> None:
            with self.store.core.backend.write(session_id) as ops:
                self.write_in(ops, plan)

        retried(write)
        self.committed(plan)

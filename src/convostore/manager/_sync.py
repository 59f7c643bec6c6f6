"""The session manager's sync side: registry rows, their errors, :class:`SessionManager`.

Everything here is published by :mod:`convostore.manager`, whose docstring is the user's guide
and states the rules every method follows; its rows and errors are in ``_records.py``, its
search provider in ``_provider.py``. The async twins (``_async.py``, generated) only drive the
methods defined here.
"""

from __future__ import annotations

import builtins
import logging
import math
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..backends._lazy_table import LazyTable
from ..backends.base import Ops
from ..context._execute import parse_arguments
from ..context._tools import ToolDefinition
from ..errors import InvalidArgument, InvalidArgumentType
from ..limits import MAX_COUNT, check_count, check_id, check_ids, check_text, search_query
from ..messages._writes import now_ms
from ..model import UNSET, Message, SearchResult, StoredCompaction, Unset
from ..session import Session
from ..store import Sessions
from ._provider import HistorySearchProvider
from ._records import SessionInfo, UnknownMessage, UnknownSession, info_of

logger = logging.getLogger("convostore")

SESSION_SEARCH = "session_search"
"""The name of the cross-session search tool."""
CONTINUATION_PREFIX = "[Context from previous session]\n\n"
"""What opens the summary message of a session made by :meth:`SessionManager.compact_and_split`."""
_TOOL_LIMIT = 10  # hits the tool and the search provider show, as the reference
_SEARCH_GROWTH = 4



class SessionManager:
    """The registry of a store's managed sessions, and helpers that keep it up to date.

    :param store: an open :class:`~convostore.Sessions`.

    Safe to use from several threads; several processes may manage one database. See the
    :mod:`convostore.manager` documentation for the rules on unknown ids, ``updated_at`` and
    paging.
    """

    def __init__(self, store: Sessions) -> None:
        if not isinstance(store, Sessions):
            raise TypeError(
                f"SessionManager needs a convostore.Sessions store, not {type(store).__name__} "
                "(use AsyncSessionManager for an AsyncSessions)"
            )
        self._store = store
        self._registry = LazyTable(store.core.backend, lambda ops: ops.registry_exists(),
                                   lambda ops: ops.registry_create())

    def __repr__(self) -> str:
        return f"<SessionManager of {self._store!r}>"

    @property
    def store(self) -> Sessions:
        """The store whose sessions this manager registers."""
        return self._store

    # --- plumbing -----------------------------------------------------------------------------

    def _exists(self, ops: Ops) -> bool:
        """Whether the registry table exists (a catalog query until it is seen once)."""
        return self._registry.ready(ops)

    def _ensure(self) -> None:
        """Create the registry table if missing (the manager's first write does)."""
        self._registry.ensure()

    def _require(self, session_id: str) -> SessionInfo:
        """The registry row of ``session_id``; :class:`UnknownSession` when there is none."""
        info = self.get(session_id)
        if info is None:
            raise UnknownSession(session_id)
        return info

    def _update(self, session_id: str, change: Callable[[Ops, int], bool]) -> None:
        """Run one registry update in the session's write scope; UnknownSession if no row."""
        check_id("session_id", session_id)
        with self._store.core.backend.write(session_id) as ops:
            if not self._exists(ops) or not change(ops, now_ms()):
                raise UnknownSession(session_id)

    def _touch(self, session_id: str) -> Session:
        """Set ``updated_at`` (UnknownSession if unregistered) and return the session handle."""
        self._update(session_id, lambda ops, now: ops.registry_touch(session_id, now))
        return self._store.session(session_id)

    def _handle(self, session_id: str) -> Session:
        """The session handle of a managed session (UnknownSession if unregistered); no write."""
        self._require(session_id)
        return self._store.session(session_id)

    # --- the registry -------------------------------------------------------------------------

    def create(
        self,
        name: str,
        *,
        parent_session_id: str | None = None,
        model: str | None = None,
        source: str | None = None,
    ) -> SessionInfo:
        """Register a new session under a fresh UUID; creates the registry table if missing.

        :param name: a display name (any string).
        :param parent_session_id: the session this one continues (not checked).
        :param model: an optional model identifier.
        :param source: an optional source identifier (``"web"``, ``"cli"``...).
        :returns: the stored row (no usage yet, ``created_at == updated_at``).
        """
        check_text("name", name)
        check_id("parent_session_id", parent_session_id, optional=True)
        check_text("model", model, optional=True)
        check_text("source", source, optional=True)
        self._ensure()
        now = now_ms()
        info = SessionInfo(
            id=str(uuid.uuid4()), name=name, parent_session_id=parent_session_id, model=model,
            source=source, input_tokens=0, output_tokens=0, estimated_cost=0.0,
            end_reason=None, created_at=now, updated_at=now,
        )
        with self._store.core.backend.write(info.id) as ops:
            ops.registry_insert(
                (info.id, info.name, info.parent_session_id, info.model, info.source,
                 info.input_tokens, info.output_tokens, info.estimated_cost, info.end_reason,
                 info.created_at, info.updated_at)
            )
        return info

    def get(self, session_id: str) -> SessionInfo | None:
        """The registry row of ``session_id``, or None when it is not managed."""
        check_id("session_id", session_id)
        with self._store.core.backend.read() as ops:
            row = ops.registry_get(session_id) if self._exists(ops) else None
        return None if row is None else info_of(row)

    def list(
        self, *, limit: int | None = None, before: str | None = None
    ) -> builtins.list[SessionInfo]:
        """Managed sessions, most recently updated first (ties: id descending).

        :param limit: at most this many; None for all.
        :param before: the id of the last session of the previous page: the page starts just
            after it in this order (:class:`UnknownSession` if it has no row). A session
            updated between two pages moves to the front and may be seen twice or skipped.
        """
        if limit is not None:
            check_count("limit", limit, negative=True)
        check_id("before", before, optional=True)
        if limit is not None and limit <= 0:
            if before is not None:
                self._require(before)
            return []
        with self._store.core.backend.read() as ops:
            if not self._exists(ops):
                if before is not None:
                    raise UnknownSession(before)
                return []
            after: tuple[int, str] | None = None
            if before is not None:
                row = ops.registry_get(before)
                if row is None:
                    raise UnknownSession(before)
                found = info_of(row)
                after = (found.updated_at, found.id)
            rows = ops.registry_page(limit, after)
        return [info_of(r) for r in rows]

    def rename(self, session_id: str, name: str) -> None:
        """Set a session's name (and ``updated_at``)."""
        check_text("name", name)
        self._update(session_id, lambda ops, now: ops.registry_set_name(session_id, name, now))

    def delete(self, session_id: str) -> None:
        """Delete a session and everything of it, registry row included, in one transaction
        (see :meth:`Sessions.delete_session`)."""
        self._require(session_id)
        self._store.delete_session(session_id)

    def add_usage(
        self, session_id: str, input_tokens: int, output_tokens: int, cost: float
    ) -> None:
        """Add to a session's token and cost counters (and set ``updated_at``).

        One statement, so concurrent additions from several processes all count.
        """
        check_count("input_tokens", input_tokens, negative=True)
        check_count("output_tokens", output_tokens, negative=True)
        if isinstance(cost, bool) or not isinstance(cost, (int, float)):
            raise InvalidArgumentType("cost", f"must be a number, not {type(cost).__name__}")
        if not math.isfinite(cost):
            raise InvalidArgument("cost", f"must be finite, not {cost!r}")
        self._update(
            session_id,
            lambda ops, now: ops.registry_add_usage(
                session_id, input_tokens, output_tokens, float(cost), now
            ),
        )

    # --- sessions and messages ----------------------------------------------------------------

    def get_session(self, session_id: str) -> Session:
        """The store's cached handle of a managed session (``store.session(session_id)``).

        Every message write moves ``updated_at`` (the registry is the store's directory);
        the helpers below also move it before they write.
        """
        return self._handle(session_id)

    def append(
        self, session_id: str, message: Message, parent_id: str | None | Unset = UNSET
    ) -> str:
        """Append a message (see :meth:`Session.append_message`); returns its id.

        :param parent_id: omitted → the active leaf; None → a new root; an id → a branch.
        """
        mid: str = self._touch(session_id).append_message(message, parent_id).message["id"]
        return mid

    def upsert(
        self, session_id: str, message: Message, parent_id: str | None | Unset = UNSET
    ) -> str:
        """Append the message if its id is new, else update it in place; returns its id."""
        mid: str = self._touch(session_id).upsert_message(message, parent_id).message["id"]
        return mid

    def append_all(
        self, session_id: str, messages: Iterable[Message], parent_id: str | None = None
    ) -> str | None:
        """Append messages as one chain: the first under ``parent_id`` (a new root when
        omitted, unlike :meth:`append`), each next one under the previous.

        :returns: the id of the last message (``parent_id`` when there were none).
        """
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
            raise InvalidArgumentType(
                "messages", f"must be an iterable of messages, not a {type(messages).__name__}"
            )
        check_id("parent_id", parent_id, optional=True)
        session = self._touch(session_id)
        last = parent_id
        for message in messages:
            last = session.append_message(message, last).message["id"]
        return last

    def get_history(self, session_id: str, leaf_id: str | None = None) -> builtins.list[Message]:
        """The path root → leaf, overlays applied (see :meth:`Session.get_history`)."""
        return self._handle(session_id).get_history(leaf_id)

    def get_message_count(self, session_id: str) -> int:
        """The number of stored messages on the active path (overlays not applied)."""
        return len(self._handle(session_id).get_history_row_stats())

    def get_branches(self, session_id: str, message_id: str) -> builtins.list[Message]:
        """The children of ``message_id`` in write order (see :meth:`Session.get_branches`)."""
        return self._handle(session_id).get_branches(message_id)

    def clear_messages(self, session_id: str) -> None:
        """Delete every message and compaction of the session; it stays registered."""
        self._touch(session_id).clear_messages()

    def delete_messages(self, session_id: str, ids: Sequence[str]) -> None:
        """Delete messages, splicing their children (see :meth:`Session.delete_messages`)."""
        if not isinstance(ids, str):  # the session refuses a string; checked before the touch
            ids = builtins.list(ids)  # an iterator is read once
            check_ids("ids", ids)
        self._touch(session_id).delete_messages(ids)

    def add_compaction(
        self, session_id: str, summary: str, from_message_id: str, to_message_id: str
    ) -> StoredCompaction:
        """Store an overlay (see :meth:`Session.add_compaction`)."""
        check_text("summary", summary)  # checked before the touch: a refusal writes nothing
        check_id("from_message_id", from_message_id)
        check_id("to_message_id", to_message_id)
        return self._touch(session_id).add_compaction(summary, from_message_id, to_message_id)

    def get_compactions(self, session_id: str) -> builtins.list[StoredCompaction]:
        """Every overlay record of the session, in write order."""
        return self._handle(session_id).get_compactions()

    # --- lineage ------------------------------------------------------------------------------

    def fork(self, session_id: str, at_message_id: str, name: str) -> SessionInfo:
        """A new session holding a copy of the history that ends at ``at_message_id``.

        The copy is linear (root → ``at_message_id``), read with overlays applied (a summary
        is copied as an ordinary assistant message), streamed in bounded memory, and every
        message gets a fresh id. The new session names ``session_id`` as its parent (model and
        source are not copied) and is touched last, so it lists first.

        :raises UnknownMessage: ``at_message_id`` is not in the session (nothing is created).
        """
        check_text("name", name)
        check_id("at_message_id", at_message_id)
        source = self._handle(session_id)
        if source.get_message(at_message_id) is None:
            raise UnknownMessage(session_id, at_message_id)
        info = self.create(name, parent_session_id=session_id)
        target = self._store.session(info.id)
        parent: str | None = None
        for message in source.history(leaf_id=at_message_id):
            copy = {**message, "id": str(uuid.uuid4())}
            target.import_message(copy, parent_id=parent)
            parent = copy["id"]
        self._touch(info.id)
        return self._require(info.id)

    def compact_and_split(
        self, session_id: str, summary: str, name: str | None = None
    ) -> SessionInfo:
        """End a session and continue it in a new one that starts from a summary.

        The old row gets ``end_reason="compaction"``. The new session is named ``name`` (else
        the old name), names the old one as its parent, copies its model and source, and holds
        one assistant message whose only text part is :data:`CONTINUATION_PREFIX` + ``summary``.
        """
        if not isinstance(summary, str):  # message text: any string round-trips
            raise InvalidArgumentType("summary", f"must be a string, not {type(summary).__name__}")
        check_text("name", name, optional=True)
        found: builtins.list[SessionInfo] = []

        def end(ops: Ops, now: int) -> bool:
            row = ops.registry_get(session_id)
            if row is None:
                return False
            found.append(info_of(row))
            return ops.registry_end(session_id, "compaction", now)

        self._update(session_id, end)
        old = found[0]
        new_name = name if name is not None else old.name
        info = self.create(
            new_name, parent_session_id=old.id, model=old.model, source=old.source
        )
        self.append(info.id, {
            "id": str(uuid.uuid4()),
            "role": "assistant",
            "parts": [{"type": "text", "text": CONTINUATION_PREFIX + summary}],
        })
        return self._require(info.id)

    # --- search and the model's tool ----------------------------------------------------------

    def search(self, query: str, *, limit: int = 20) -> builtins.list[SearchResult]:
        """Full-text search of the managed sessions: every word of ``query`` must match.

        Uses the store's search (index built on first use; operators are plain words; best
        first) and keeps the hits of registered sessions, asking for more when others crowd
        them out. An empty query, or one with no word, finds nothing.
        """
        search_query("query", query)  # bad arguments are refused, registry or not
        check_count("limit", limit, negative=True)
        with self._store.core.backend.read() as ops:
            if not self._exists(ops) or not ops.registry_page(1, None):
                return []  # no managed session: nothing to search, no index to build
        want = limit
        while True:
            hits = self._store.search(query, limit=want)
            if not hits:
                return []
            with self._store.core.backend.read() as ops:
                known = ops.registry_known([h.session_id for h in hits])
            kept = [h for h in hits if h.session_id in known]
            if len(kept) >= limit or len(hits) < want:
                return kept[:limit]
            want = min(want * _SEARCH_GROWTH, MAX_COUNT)

    def _search_text(self, query: str) -> str | None:
        """The best 10 hits as ``[role] content`` blocks joined by ``\\n---\\n``, or None."""
        hits = self.search(query, limit=_TOOL_LIMIT)
        if not hits:
            return None
        return "\n---\n".join(f"[{h.role}] {h.content}" for h in hits)

    def _history_summary(self) -> str | None:
        """``"<n> session(s) available for search."``, or None when there are none."""
        with self._store.core.backend.read() as ops:
            count = ops.registry_count() if self._exists(ops) else 0
        if count == 0:
            return None
        return f"{count} session{'' if count == 1 else 's'} available for search."

    def tools(self) -> builtins.list[ToolDefinition]:
        """The model's tool over this manager: ``session_search`` (run it with :meth:`execute`)."""
        return [
            ToolDefinition(
                SESSION_SEARCH,
                "Search past conversations across all sessions. Returns up to 10 matching "
                "messages, best first, each as [role] text.",
                {
                    "type": "object",
                    "properties": {
                        "query": {
                            "type": "string",
                            "description": "Words to look for; every word must match.",
                        }
                    },
                    "required": ["query"],
                },
            )
        ]

    def execute(self, name: str, arguments: object = None) -> str:
        """Run a tool call; never raises to the model (a failure is an ``Error: ...`` string).

        :param name: ``session_search``.
        :param arguments: a dict, or the JSON text of one: ``{"query": "..."}``.
        :returns: the hits as ``[role] content`` joined by ``\\n---\\n``, or
            ``No results found.``
        """
        try:
            if name != SESSION_SEARCH:
                return f'Error: unknown tool "{name}"'
            args = parse_arguments(arguments)
            query = args.get("query")
            if query is None:
                raise ValueError('missing argument "query"')
            if not isinstance(query, str):
                raise ValueError('argument "query" must be a string')
            return self._search_text(query) or "No results found."
        except Exception as exc:
            logger.debug("manager tool %s failed", name, exc_info=True)
            return f"Error: {exc}"

    def with_searchable_history(self, label: str) -> HistorySearchProvider:
        """A read-only search provider over the managed sessions, for a context block.

        ::

            history = manager.with_searchable_history("history")
            context = Context(session).with_context(history.label, provider=history)

        :param label: the block's label (kept as the provider's ``label``).
        """
        return HistorySearchProvider(self, label)

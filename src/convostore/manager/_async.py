"""The session manager's async side: :class:`AsyncSessionManager` and its search provider.

A mechanical shell (STYLE.md §1): each method runs the same-named method of a
:class:`SessionManager` over ``store.sync`` on the store's worker, through
:meth:`~convostore.AsyncSessions.run_sync`; nothing here reads or writes the registry itself.
Published by :mod:`convostore.manager`.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence

from ..aio import AsyncSession, AsyncSessions
from ..context._tools import ToolDefinition
from ..model import UNSET, Message, SearchResult, StoredCompaction, Unset
from ._sync import HistorySearchProvider, SessionInfo, SessionManager


class AsyncSessionManager:
    """Async twin of :class:`SessionManager`, over an :class:`~convostore.AsyncSessions`.

    Each method runs the same-named :class:`SessionManager` method on the store's worker.
    """

    def __init__(self, store: AsyncSessions) -> None:
        if not isinstance(store, AsyncSessions):
            raise TypeError(
                "AsyncSessionManager needs a convostore.AsyncSessions store, "
                f"not {type(store).__name__}"
            )
        self._store = store
        self._sync = SessionManager(store.sync)

    def __repr__(self) -> str:
        return f"<AsyncSessionManager of {self._store!r}>"

    @property
    def store(self) -> AsyncSessions:
        """The store whose sessions this manager registers."""
        return self._store

    async def create(
        self,
        name: str,
        *,
        parent_session_id: str | None = None,
        model: str | None = None,
        source: str | None = None,
    ) -> SessionInfo:
        """Async twin of :meth:`SessionManager.create`."""
        return await self._store.run_sync(
            self._sync.create, name, parent_session_id=parent_session_id, model=model,
            source=source,
        )

    async def get(self, session_id: str) -> SessionInfo | None:
        """Async twin of :meth:`SessionManager.get`."""
        return await self._store.run_sync(self._sync.get, session_id)

    async def list(
        self, *, limit: int | None = None, before: str | None = None
    ) -> builtins.list[SessionInfo]:
        """Async twin of :meth:`SessionManager.list`."""
        return await self._store.run_sync(self._sync.list, limit=limit, before=before)

    async def rename(self, session_id: str, name: str) -> None:
        """Async twin of :meth:`SessionManager.rename`."""
        await self._store.run_sync(self._sync.rename, session_id, name)

    async def delete(self, session_id: str) -> None:
        """Async twin of :meth:`SessionManager.delete`."""
        await self._store.run_sync(self._sync.delete, session_id)

    async def add_usage(
        self, session_id: str, input_tokens: int, output_tokens: int, cost: float
    ) -> None:
        """Async twin of :meth:`SessionManager.add_usage`."""
        await self._store.run_sync(
            self._sync.add_usage, session_id, input_tokens, output_tokens, cost
        )

    async def get_session(self, session_id: str) -> AsyncSession:
        """Async twin of :meth:`SessionManager.get_session`: the store's async handle."""
        handle = await self._store.run_sync(self._sync.get_session, session_id)
        return self._store.session(handle.session_id)

    async def append(
        self, session_id: str, message: Message, parent_id: str | None | Unset = UNSET
    ) -> str:
        """Async twin of :meth:`SessionManager.append`."""
        return await self._store.run_sync(self._sync.append, session_id, message, parent_id)

    async def upsert(
        self, session_id: str, message: Message, parent_id: str | None | Unset = UNSET
    ) -> str:
        """Async twin of :meth:`SessionManager.upsert`."""
        return await self._store.run_sync(self._sync.upsert, session_id, message, parent_id)

    async def append_all(
        self, session_id: str, messages: Iterable[Message], parent_id: str | None = None
    ) -> str | None:
        """Async twin of :meth:`SessionManager.append_all`."""
        return await self._store.run_sync(self._sync.append_all, session_id, messages, parent_id)

    async def get_history(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[Message]:
        """Async twin of :meth:`SessionManager.get_history`."""
        return await self._store.run_sync(self._sync.get_history, session_id, leaf_id)

    async def get_message_count(self, session_id: str) -> int:
        """Async twin of :meth:`SessionManager.get_message_count`."""
        return await self._store.run_sync(self._sync.get_message_count, session_id)

    async def get_branches(self, session_id: str, message_id: str) -> builtins.list[Message]:
        """Async twin of :meth:`SessionManager.get_branches`."""
        return await self._store.run_sync(self._sync.get_branches, session_id, message_id)

    async def clear_messages(self, session_id: str) -> None:
        """Async twin of :meth:`SessionManager.clear_messages`."""
        await self._store.run_sync(self._sync.clear_messages, session_id)

    async def delete_messages(self, session_id: str, ids: Sequence[str]) -> None:
        """Async twin of :meth:`SessionManager.delete_messages`."""
        await self._store.run_sync(self._sync.delete_messages, session_id, ids)

    async def add_compaction(
        self, session_id: str, summary: str, from_message_id: str, to_message_id: str
    ) -> StoredCompaction:
        """Async twin of :meth:`SessionManager.add_compaction`."""
        return await self._store.run_sync(
            self._sync.add_compaction, session_id, summary, from_message_id, to_message_id
        )

    async def get_compactions(self, session_id: str) -> builtins.list[StoredCompaction]:
        """Async twin of :meth:`SessionManager.get_compactions`."""
        return await self._store.run_sync(self._sync.get_compactions, session_id)

    async def fork(self, session_id: str, at_message_id: str, name: str) -> SessionInfo:
        """Async twin of :meth:`SessionManager.fork`."""
        return await self._store.run_sync(self._sync.fork, session_id, at_message_id, name)

    async def compact_and_split(
        self, session_id: str, summary: str, name: str | None = None
    ) -> SessionInfo:
        """Async twin of :meth:`SessionManager.compact_and_split`."""
        return await self._store.run_sync(self._sync.compact_and_split, session_id, summary, name)

    async def search(self, query: str, *, limit: int = 20) -> builtins.list[SearchResult]:
        """Async twin of :meth:`SessionManager.search`."""
        return await self._store.run_sync(self._sync.search, query, limit=limit)

    def tools(self) -> builtins.list[ToolDefinition]:
        """Async twin of :meth:`SessionManager.tools` (plain: no I/O)."""
        return self._sync.tools()

    async def execute(self, name: str, arguments: object = None) -> str:
        """Async twin of :meth:`SessionManager.execute`."""
        return await self._store.run_sync(self._sync.execute, name, arguments)

    def with_searchable_history(self, label: str) -> AsyncHistorySearchProvider:
        """Async twin of :meth:`SessionManager.with_searchable_history` (plain: no I/O), for an
        :class:`~convostore.context.AsyncContext`."""
        return AsyncHistorySearchProvider(self._store, self._sync.with_searchable_history(label))


class AsyncHistorySearchProvider:
    """Async twin of :class:`HistorySearchProvider`: its methods run on the store's worker.

    :param store: the async store whose worker runs ``provider``'s methods.
    :param provider: the sync provider, over the manager of ``store.sync``.
    """

    def __init__(self, store: AsyncSessions, provider: HistorySearchProvider) -> None:
        self._store = store
        self._provider = provider

    def __repr__(self) -> str:
        return f"<AsyncHistorySearchProvider label={self.label!r}>"

    @property
    def label(self) -> str:
        """The label of the block this provider is meant for."""
        return self._provider.label

    async def get(self) -> str | None:
        """Async twin of :meth:`HistorySearchProvider.get`."""
        return await self._store.run_sync(self._provider.get)

    async def search(self, query: str) -> str | None:
        """Async twin of :meth:`HistorySearchProvider.search`."""
        return await self._store.run_sync(self._provider.search, query)

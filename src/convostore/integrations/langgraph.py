"""LangGraph checkpointers on convostore's engines (SQLite and PostgreSQL).

:class:`ConvostoreSaver` and :class:`AsyncConvostoreSaver` are ``BaseCheckpointSaver``\\ s::

    from convostore.integrations.langgraph import ConvostoreSaver

    saver = ConvostoreSaver("chat.db")             # or postgresql://..., or an open store
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})

Both have every method of the interface, sync and async (``put``/``aput``, ``put_writes``,
``get_tuple``, ``list`` with ``filter``, ``before`` and ``limit``, ``delete_thread``,
``delete_for_runs``, ``copy_thread``, ``prune``); :class:`AsyncConvostoreSaver` is the one to
give an open :class:`~convostore.aio.AsyncSessions`, whose worker threads then run the calls.

Every write is one transaction that serialises the writers of its thread, so several processes
writing one thread lose and duplicate nothing. Channel values are stored once per version; a
value larger than a row is stored as a payload once per content hash.

**The conversation is visible.** After each checkpoint whose ``messages`` channel changed, the
thread's messages are mirrored into the convostore session named by :func:`mirror_session_id`
(the thread id, for the root namespace) as UIMessages, one per LangChain message, converted as
:mod:`convostore.integrations.langchain` converts them. A fork from an earlier checkpoint becomes
a branch of that session's tree, so ``convostore show``, search and the other integrations read
the conversation the thread is on.

Needs ``pip install 'convostore[langgraph]'``.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..store import Sessions
from . import missing

try:
    from langgraph.checkpoint.base import (
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol

    from ._checkpoints import STORAGE_PREFIX, Checkpoints
    from ._langgraph_mirror import mirror_session_id
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("langgraph", "LangGraph", "langgraph", "langgraph") from exc

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from ..aio import AsyncSessions

__all__ = ["STORAGE_PREFIX", "AsyncConvostoreSaver", "ConvostoreSaver", "mirror_session_id"]

T = TypeVar("T")


class ConvostoreSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer over a convostore store.

    :param store: a URL or path (opened here; :meth:`close` closes it), an open
        :class:`~convostore.Sessions` or an open :class:`~convostore.aio.AsyncSessions`.
    :param serde: the serializer for checkpoints and values (LangGraph's default if None).
    :param messages_channel: the channel mirrored as a conversation (``"messages"``); None
        mirrors nothing.
    :param open_options: passed to :meth:`Sessions.open` when ``store`` is a URL.

    Sync methods run on the calling thread; async ones on a worker thread (the store's own for
    an ``AsyncSessions``).
    """

    def __init__(
        self,
        store: str | os.PathLike[str] | Sessions | AsyncSessions,
        *,
        serde: SerializerProtocol | None = None,
        messages_channel: str | None = "messages",
        **open_options: Any,
    ) -> None:
        super().__init__(serde=serde)
        self._owned: Sessions | None = None
        self._async_store: AsyncSessions | None = None
        if isinstance(store, (str, os.PathLike)):
            self._owned = sync = Sessions.open(store, **open_options)
        elif open_options:
            raise TypeError("open options apply only when the store is given as a URL")
        elif isinstance(store, Sessions):
            sync = store
        else:
            from ..aio import AsyncSessions

            if not isinstance(store, AsyncSessions):
                raise TypeError(
                    "store must be a URL, a path, a Sessions or an AsyncSessions, "
                    f"not {type(store).__name__}"
                )
            self._async_store = store
            sync = store.sync
        self.store = sync
        """The sync store the checkpoints live in (an ``AsyncSessions``' ``.sync``)."""
        self._storage = Checkpoints(sync, self.serde, messages_channel)

    @property
    def _checkpoints(self) -> Checkpoints:
        # A clone made by with_allowlist() has another serde: it gets its own view.
        if self._storage.serde is not self.serde:
            self._storage = self._storage.with_serde(self.serde)
        return self._storage

    def __repr__(self) -> str:
        return f"<{type(self).__name__} on {self.store!r}>"

    def __enter__(self) -> ConvostoreSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ConvostoreSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store if this saver opened it (from a URL); otherwise do nothing."""
        if self._owned is not None:
            self._owned.close()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._async_store is not None:
            return await self._async_store.run_sync(fn, *args)
        return await asyncio.to_thread(fn, *args)

    # -- sync ------------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (``checkpoint_id``), or the latest of its thread and
        namespace; None if there is none. One read scope."""
        return self._checkpoints.get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of ``config``'s thread (every thread if None) and
        namespace (every namespace if it names none), whose metadata has every key and value of
        ``filter``, older than ``before``'s checkpoint, at most ``limit``. Read a page (100) at
        a time."""
        listing = self._checkpoints.listing(config, filter=filter, before=before, limit=limit)
        while (page := self._checkpoints.next_page(listing)) is not None:
            yield from page

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint (one transaction: the checkpoint and its new channel versions),
        then mirror the ``messages`` channel if it changed; the stored checkpoint's config."""
        return self._checkpoints.put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for ``config``'s checkpoint (one transaction)."""
        self._checkpoints.put_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, value and write of a thread, and clear its mirrors."""
        self._checkpoints.delete_thread(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose metadata ``run_id`` is one of ``run_ids``, with their
        writes (one transaction). Mirrored conversations stay."""
        self._checkpoints.delete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and write of one thread to another (one transaction);
        the target's mirror then shows its latest checkpoint's conversation."""
        self._checkpoints.copy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"`` keeps each namespace's latest checkpoint (its writes and values);
        ``"delete"`` deletes every checkpoint. One transaction per thread; mirrors stay."""
        self._checkpoints.prune(thread_ids, strategy)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The next channel version: a zero-padded counter and a random fraction, so that
        concurrent branches never produce the same version of a channel."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # -- async -----------------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async twin of :meth:`get_tuple`."""
        return await self._run(self._checkpoints.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async twin of :meth:`list` (a page per worker call)."""
        listing = self._checkpoints.listing(config, filter=filter, before=before, limit=limit)
        while (page := await self._run(self._checkpoints.next_page, listing)) is not None:
            for item in page:
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async twin of :meth:`put`."""
        return await self._run(self._checkpoints.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of :meth:`put_writes`."""
        await self._run(self._checkpoints.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async twin of :meth:`delete_thread`."""
        await self._run(self._checkpoints.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async twin of :meth:`delete_for_runs`."""
        await self._run(self._checkpoints.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async twin of :meth:`copy_thread`."""
        await self._run(self._checkpoints.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async twin of :meth:`prune`."""
        await self._run(self._checkpoints.prune, thread_ids, strategy)


class AsyncConvostoreSaver(ConvostoreSaver):
    """:class:`ConvostoreSaver` for async graphs: give it an open
    :class:`~convostore.aio.AsyncSessions` (or a URL) and use ``ainvoke``/``astream``.

    The async methods run on the store's worker threads; the sync ones stay available (for a
    sync ``invoke`` or tooling) and run on the calling thread.
    """

"""A convostore session for the OpenAI Agents SDK: ``Runner.run(agent, input, session=...)``.

:class:`ConvostoreSession` implements the SDK's ``Session`` protocol (``session_id``,
``session_settings``, ``get_items``, ``add_items``, ``pop_item``, ``clear_session``) over a
convostore store, so a conversation gets what the SDK's own stores lack: branches, newest-first
reads that touch only the rows they return, full-text search, media stored once out of line,
compaction overlays and PostgreSQL::

    from agents import Agent, Runner
    from convostore.integrations.openai_agents import ConvostoreSession

    session = ConvostoreSession("user-42", "chat.db")
    result = await Runner.run(agent, "hi", session=session)

Each input item is one stored message, converted with
:func:`convostore.formats.from_openai_responses`: text is searchable, images and files leave the
row, reasoning items keep their ``encrypted_content``, and :meth:`~ConvostoreSession.get_items`
gives every item back exactly as it was added (``==``). Messages written to the same convostore
session by other means (a UI, a compaction overlay) are rendered into items from their parts.

Needs ``pip install 'convostore[openai-agents]'``.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .. import formats
from ..model import Message, SearchResult
from . import _Binding, missing

try:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("the OpenAI Agents SDK", "openai-agents", exc) from exc

if TYPE_CHECKING:
    from ..aio import AsyncSession, AsyncSessions
    from ..session import Session
    from ..store import Sessions

__all__ = ["ConvostoreSession"]

T = TypeVar("T")


class _Root:
    """Marker: the next item starts a new root (the view is empty)."""


_ROOT = _Root()


class ConvostoreSession:
    """The OpenAI Agents SDK ``Session`` protocol over a convostore session.

    :param session_id: the conversation's id (also the convostore session id).
    :param store: a URL or path (the session opens a store and :meth:`close` closes it), an open
        :class:`~convostore.Sessions`, or an open :class:`~convostore.aio.AsyncSessions` (then
        use this object from the event loop that opened that store).
    :param session_settings: the SDK's ``SessionSettings`` (or a dict); its ``limit`` is the
        default of :meth:`get_items`.
    :param open_options: passed to :meth:`Sessions.open` when ``store`` is a URL.

    Calls run on a worker thread (``asyncio.to_thread``, or the async store's workers), so the
    event loop never waits on the database, and one object works under ``Runner.run``,
    ``Runner.run_sync`` and ``Runner.run_streamed`` alike.
    """

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        store: str | os.PathLike[str] | Sessions | AsyncSessions,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        **open_options: Any,
    ) -> None:
        self._binding = _Binding(store, session_id, open_options)
        self._handle = self._binding.handle
        self.session_id = session_id
        """The conversation's id."""
        if session_settings is None:
            self.session_settings = SessionSettings()
        elif isinstance(session_settings, dict):
            self.session_settings = SessionSettings(**session_settings)
        else:
            self.session_settings = session_settings
        # Where the next item goes and what get_items() shows after branch_from():
        # None = the active leaf; _ROOT = an empty view; a message id = that message.
        self._view: str | _Root | None = None

    def __repr__(self) -> str:
        return f"<ConvostoreSession {self.session_id!r} on {self._handle!r}>"

    @property
    def session(self) -> Session | AsyncSession:
        """The underlying convostore session (an ``AsyncSession`` for an async store)."""
        return self._binding.public

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._binding.run(fn, *args)

    # --- the Session protocol -----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The conversation's items, oldest first; with ``limit``, only the newest ``limit``.

        :param limit: how many of the newest items; ``None`` uses ``session_settings.limit``
            (``None`` there too: all). A limited read walks back from the newest message and
            reads only the rows it returns.
        """
        return await self._run(self._get_items, resolve_session_limit(limit,
                                                                      self.session_settings))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items in order, one stored message each (one transaction per item)."""
        if not items:
            return
        await self._run(self._add_items, list(items))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item, or None when there is none.

        After :meth:`branch_from`, the item is only taken out of this branch's view: the
        message stays for the branch it was shared with.
        """
        return await self._run(self._pop_item)

    async def clear_session(self) -> None:
        """Delete every item of this session (every branch)."""
        await self._run(self._clear)

    # --- beyond the protocol ------------------------------------------------------------------

    async def branch_from(self, item: int | str | None) -> str | None:
        """Continue the conversation from an earlier item, keeping the later ones on their branch.

        :param item: an index into :meth:`get_items` (negative counts from the end), a
            convostore message id, or ``None`` to start over from an empty history.
        :returns: the id of the message the branch grows from (None for an empty start).

        Until the next :meth:`add_items`, :meth:`get_items` shows the history up to that item;
        the first item added becomes its child, and the branch is then the active one.
        """
        return await self._run(self._branch_from, item)

    async def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Full-text search of this conversation's text (every branch), best match first."""
        return await self._run(functools.partial(self._handle.search, limit=limit), query)

    def close(self) -> None:
        """Close the store if this object opened it (from a URL); otherwise do nothing."""
        self._binding.close()

    # --- the work, on a worker thread ---------------------------------------------------------

    def _leaf_id(self) -> str | None:
        return self._view if isinstance(self._view, str) else None

    def _get_items(self, limit: int | None) -> list[TResponseInputItem]:
        if self._view is _ROOT:
            return []
        leaf = self._leaf_id()
        if limit is None or limit < 0:
            messages = list(self._handle.history(leaf_id=leaf))
        elif limit == 0:
            return []
        else:
            messages = list(
                itertools.islice(self._handle.history(leaf_id=leaf, newest_first=True), limit)
            )
            messages.reverse()
        items: list[TResponseInputItem] = []
        for message in messages:
            items.extend(_items(message))
        if limit is not None and limit > 0 and len(items) > limit:
            items = items[-limit:]
        return items

    def _add_items(self, items: list[TResponseInputItem]) -> None:
        messages: list[Message] = []  # all converted before anything is written
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise TypeError(f"items[{i}] must be a dict, not {type(item).__name__}")
            (message,) = formats.from_openai_responses([cast("dict[str, Any]", item)])
            messages.append(message)
        for message in messages:
            if self._view is None:
                self._handle.append_message(message)
            else:
                parent = self._view if isinstance(self._view, str) else None
                self._handle.append_message(message, parent_id=parent)
                self._view = None  # the new message is the active leaf now

    def _pop_item(self) -> TResponseInputItem | None:
        if self._view is _ROOT:
            return None
        if isinstance(self._view, str):
            path = list(itertools.islice(
                self._handle.history(leaf_id=self._view, newest_first=True), 2))
            if not path:
                self._view = _ROOT
                return None
            self._view = path[1]["id"] if len(path) > 1 else _ROOT
            items = _items(path[0])
            return items[-1] if items else None
        leaf = self._handle.get_latest_leaf()
        if leaf is None:
            return None
        self._handle.delete_messages([leaf["id"]])
        items = _items(leaf)
        return items[-1] if items else None

    def _clear(self) -> None:
        self._handle.clear_messages()
        self._view = None

    def _branch_from(self, item: int | str | None) -> str | None:
        if item is None:
            self._view = _ROOT
            return None
        if isinstance(item, str):
            if self._handle.get_message(item) is None:
                raise KeyError(f"no message {item!r} in session {self.session_id!r}")
            self._view = item
            return item
        if isinstance(item, bool) or not isinstance(item, int):
            raise TypeError(f"branch_from() takes an index, an id or None, not {item!r}")
        if self._view is _ROOT:
            raise IndexError(f"no item at index {item}: the history is empty")
        leaf = self._leaf_id()
        if item >= 0:
            found = next(itertools.islice(self._handle.history(leaf_id=leaf), item, None), None)
        else:
            found = next(itertools.islice(
                self._handle.history(leaf_id=leaf, newest_first=True), -item - 1, None), None)
        if found is None:
            raise IndexError(f"no item at index {item}")
        self._view = found["id"]
        return str(found["id"])


def _items(message: Message) -> list[TResponseInputItem]:
    """The items a stored message stands for (exactly one for what add_items wrote)."""
    return cast("list[TResponseInputItem]", formats.to_openai_responses([message]))

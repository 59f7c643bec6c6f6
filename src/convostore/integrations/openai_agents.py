"""A convostore session for the OpenAI Agents SDK: ``Runner.run(agent, input, session=...)``.

:class:`ConvostoreSession` implements the SDK's ``Session`` protocol (``session_id``,
``session_settings``, ``get_items``, ``add_items``, ``pop_item``, ``clear_session``) over a
convostore store, so a conversation gets what the SDK's own stores lack: branches, newest-first
reads that touch only the rows they return, full-text search, media stored once out of line,
compaction overlays and PostgreSQL::

    from agents import Agent, Runner
    from convostore.integrations.openai_agents import ConvostoreSession

    async with ConvostoreSession("user-42", "chat.db") as session:
        result = await Runner.run(agent, "hi", session=session)

Given a URL, sessions of one process share one store per URL and options (opened on the first
call, off the event loop; closed with its last user), so a request handler may build one per
request; a service may also open the store once and pass it. The semantics are the SDK's own
``SQLiteSession``'s: ``session_settings`` checked as the SDK checks them (an unknown key is a
``TypeError``), calls of one session never overtake each other (a cancelled ``add_items``
raises only once its write's outcome is known), an item JSON cannot hold is a ``TypeError``,
and use after ``close()`` raises :class:`~convostore.integrations.SessionClosed`, a
``RuntimeError``.

Each input item is one stored message, converted with
:func:`convostore.formats.from_openai_responses`: text is searchable, images and files leave the
row, reasoning items keep their ``encrypted_content``, and :meth:`~ConvostoreSession.get_items`
gives every item back exactly as it was added (``==``). A ``function_call_output`` is paired
with its call (found among the items added with it, or the newest stored ones): its part carries
the tool's name and input, so ``convostore show`` and the other formats read it as that call's
result. Messages written to the same convostore session by other means (a UI, a compaction
overlay) are rendered into items from their parts.

Needs ``pip install 'convostore[openai-agents]'``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from .. import formats
from ..messages._parts import compact_json
from ..model import UNSET, Message, SearchResult, Unset
from . import missing
from ._binding import Binding, Bound, search_handle
from ._pairing import pair_results

try:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import (
        SessionSettings,
        coerce_session_settings,
        resolve_session_limit,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("openai_agents", "the OpenAI Agents SDK", "openai-agents",
                  "openai-agents") from exc

if TYPE_CHECKING:
    from ..aio import AsyncSessions
    from ..session import Session
    from ..store import Sessions

__all__ = ["ConvostoreSession"]


class _Root:
    """Marker: the next item starts a new root (the view is empty)."""


_ROOT = _Root()


class ConvostoreSession(Bound):
    """The OpenAI Agents SDK ``Session`` protocol over a convostore session.

    :param session_id: the conversation's id (also the convostore session id).
    :param store: a URL or path (the process's shared store for it is used from the first
        call; :meth:`close` gives it back), an open :class:`~convostore.Sessions`, or an open
        :class:`~convostore.aio.AsyncSessions` (then use this object from the event loop that
        opened that store). A store given as an object is never closed here.
    :param session_settings: the SDK's ``SessionSettings`` or a dict of its fields (an unknown
        key raises ``TypeError: Unknown session settings``); its ``limit`` is the default of
        :meth:`get_items`.
    :param open_options: passed to :meth:`Sessions.open` when ``store`` is a URL (part of what
        makes two sessions share a store).

    Calls run on a worker thread (``asyncio.to_thread``, or the async store's workers), one at
    a time in call order, so the event loop never waits on the database, and one object works
    under ``Runner.run``, ``Runner.run_sync`` and ``Runner.run_streamed`` alike. Use it as a
    context manager (``with`` or ``async with``) or call :meth:`close`.
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
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self._binding = Binding(store, session_id, open_options, kind="ConvostoreSession")
        self.session_id = session_id
        """The conversation's id."""
        # What get_items() shows and where the next item goes: None = the stored active leaf
        # (branch_from() stores its choice); _ROOT = an empty view after branch_from(None),
        # which has no message to store and lasts until the next add_items.
        self._view: _Root | None = None


    # --- the Session protocol -----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The conversation's items, oldest first; with ``limit``, only the newest ``limit``.

        :param limit: how many of the newest items; ``None`` uses ``session_settings.limit``
            (``None`` there too: all). A limited read walks back from the newest message and
            reads only the rows it returns.
        """
        resolved = resolve_session_limit(limit, self.session_settings)
        return await self._binding.call(self._get_items, resolved)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items in order, one stored message each.

        Every item is checked and converted before anything is written: one that is not a
        dict, or holds a value JSON cannot (an object, bytes), raises ``TypeError``. Cancelled,
        the call raises ``CancelledError`` once the write's outcome is known, so a later call
        never overtakes it.
        """
        self._binding.check()  # before the empty-list shortcut, as the SDK does
        if not items:
            return
        await self._binding.call(self._add_items, list(items), mutation=True)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item, or None when there is none.

        A message that other branches continue below (a leaf chosen by :meth:`branch_from`)
        is only taken out of this branch, by choosing its parent as the active leaf: it stays
        for the branches it is shared with.
        """
        return await self._binding.call(self._pop_item, mutation=True)

    async def clear_session(self) -> None:
        """Delete every item of this session (every branch)."""
        await self._binding.call(self._clear, mutation=True)

    # --- beyond the protocol ------------------------------------------------------------------

    async def branch_from(self, item: int | str | None) -> str | None:
        """Continue the conversation from an earlier item, keeping the later ones on their branch.

        :param item: an index into :meth:`get_items` (negative counts from the end), a
            convostore message id, or ``None`` to start over from an empty history.
        :returns: the id of the message the branch grows from (None for an empty start).

        The choice is stored (:meth:`convostore.Session.set_active_leaf`): :meth:`get_items`
        shows the history up to that item, in this process, in others and after a restart,
        and the first item added becomes its child. ``None`` (an empty start) is kept by this
        object only, until the next :meth:`add_items`.
        """
        return await self._binding.call(self._branch_from, item, mutation=True)

    async def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Full-text search of this conversation's text (every branch), best match first.

        Tool outputs are found when the store was opened with ``search_tool_output=True``.
        """
        return await self._binding.call(search_handle, query, limit)


    # --- the work, on a worker thread ---------------------------------------------------------

    def _get_items(self, handle: Session, limit: int | None) -> list[TResponseInputItem]:
        if self._view is _ROOT:
            return []
        if limit is None or limit < 0:
            messages = list(handle.history())
        elif limit == 0:
            return []
        else:
            messages = list(
                itertools.islice(handle.history(newest_first=True), limit)
            )
            messages.reverse()
        items: list[TResponseInputItem] = []
        for message in messages:
            items.extend(_items(message))
        if limit is not None and limit > 0 and len(items) > limit:
            items = items[-limit:]
        return items

    def _add_items(self, handle: Session, items: list[TResponseInputItem]) -> None:
        # Every item is checked before anything is written, by the write itself (it prepares
        # the whole batch first): an item JSON cannot hold is found there, and named by
        # _json_error as the SDK names it, without encoding every item once more up front.
        try:
            messages = [_message(i, item) for i, item in enumerate(items)]
            if self._view is not _ROOT:
                pair_results(messages, lambda: handle.history(newest_first=True))
            else:
                pair_results(messages, lambda: iter(()))
            parent: str | None | Unset = UNSET if self._view is None else None
            _write(handle, messages, parent)
        except (TypeError, ValueError) as exc:
            error = _json_error(items)
            if error is not None:
                raise error from exc
            raise
        self._view = None  # the new messages end the active branch now

    def _pop_item(self, handle: Session) -> TResponseInputItem | None:
        if self._view is _ROOT:
            return None
        leaf = handle.get_latest_leaf()
        if leaf is None:
            return None
        if handle.get_branches(leaf["id"]):
            # A chosen leaf in the middle of the tree: other branches go on below it, so it is
            # taken out of this branch by choosing its parent, never deleted.
            path = list(itertools.islice(
                handle.history(leaf_id=leaf["id"], newest_first=True), 2))
            if len(path) > 1:
                handle.set_active_leaf(path[1]["id"])
            else:
                self._view = _ROOT
        else:
            handle.delete_messages([leaf["id"]])
        items = _items(leaf)
        return items[-1] if items else None

    def _clear(self, handle: Session) -> None:
        handle.clear_messages()
        self._view = None

    def _branch_from(self, handle: Session, item: int | str | None) -> str | None:
        if item is None:
            self._view = _ROOT
            return None
        if isinstance(item, str):
            if handle.get_message(item) is None:
                raise KeyError(f"no message {item!r} in session {self.session_id!r}")
            handle.set_active_leaf(item)  # stored: every process, and a restart, follow it
            self._view = None
            return item
        if isinstance(item, bool) or not isinstance(item, int):
            raise TypeError(f"branch_from() takes an index, an id or None, not {item!r}")
        if self._view is _ROOT:
            raise IndexError(f"no item at index {item}: the history is empty")
        found = _nth(handle, item)
        if found is None:
            raise IndexError(f"no item at index {item}")
        handle.set_active_leaf(found["id"])  # stored: every process, and a restart, follow it
        self._view = None
        return str(found["id"])


def _nth(handle: Session, index: int) -> Message | None:
    """The message at ``index`` of the active branch (negative: from the end)."""
    if index >= 0:
        messages: Iterator[Message] = iter(handle.history())
        return next(itertools.islice(messages, index, None), None)
    newest = iter(handle.history(newest_first=True))
    return next(itertools.islice(newest, -index - 1, None), None)


def _message(index: int, item: Any) -> Message:
    """The stored message of one item; ``TypeError`` for an item that is not a dict."""
    if not isinstance(item, dict):
        raise TypeError(f"items[{index}] must be a dict, not {type(item).__name__}")
    (message,) = formats.from_openai_responses([cast("dict[str, Any]", item)])
    return message


def _json_error(items: list[TResponseInputItem]) -> TypeError | None:
    """The SDK's error for the first item JSON cannot hold (as ``json.dumps`` would refuse
    it: NaN passes), or None when every item is JSON."""
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            return TypeError(f"items[{index}] must be a dict, not {type(item).__name__}")
        try:
            compact_json(item, allow_nan=True)
        except (TypeError, ValueError, RecursionError) as exc:
            return TypeError(f"items[{index}] is not JSON serializable: {exc}")
    return None


def _write(handle: Session, messages: list[Message], parent: str | None | Unset) -> None:
    """The one place ``add_items`` writes: the messages in order, in one transaction, the
    first under ``parent`` (UNSET: the active leaf), each next one under the one before."""
    handle.append_messages(messages, parent_id=parent)


def _items(message: Message) -> list[TResponseInputItem]:
    """The items a stored message stands for (exactly one for what add_items wrote)."""
    return cast("list[TResponseInputItem]", formats.to_openai_responses([message]))

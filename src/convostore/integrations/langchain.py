"""A LangChain chat message history backed by a convostore session.

:class:`ConvostoreChatMessageHistory` is a ``BaseChatMessageHistory`` (sync and async methods),
usable with ``RunnableWithMessageHistory`` or directly::

    from convostore.integrations.langchain import ConvostoreChatMessageHistory

    with ConvostoreChatMessageHistory("user-42", "chat.db") as history:
        history.add_messages([HumanMessage("hi"), AIMessage("hello")])
        history.messages  # -> [HumanMessage('hi'), AIMessage('hello')]

Given a URL, histories of one process share one store per URL and options, opened on first use
(off the event loop for the async methods) and closed with its last user, so the factory that
``RunnableWithMessageHistory`` calls per request may build a new history each time, even inside
``ainvoke``. Use it as a context manager or call :meth:`~ConvostoreChatMessageHistory.close`;
after that, calls raise :class:`~convostore.integrations.SessionClosed`.

Each LangChain message is one stored message: its ``messages_to_dict`` form goes in a
``data-langchain`` part (lossless: tool calls, ids, metadata, usage), and a string ``content``
goes in a ``text`` part instead, so it is searchable and not stored twice.

Needs ``pip install 'convostore[langchain]'``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..codec import new_message_id
from ..model import Message, SearchResult
from . import missing
from ._binding import Binding, Bound, search_handle

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("langchain", "LangChain", "langchain-core", "langchain") from exc

if TYPE_CHECKING:
    from ..aio import AsyncSessions
    from ..session import Session
    from ..store import Sessions

__all__ = ["DATA_PART_TYPE", "ConvostoreChatMessageHistory"]

DATA_PART_TYPE = "data-langchain"
"""The part holding a message's ``message_to_dict`` form (``content`` moved to a text part)."""

_ROLES = {"human": "user", "ai": "assistant", "AIMessageChunk": "assistant",
          "HumanMessageChunk": "user", "system": "system", "tool": "tool", "function": "tool"}


def to_stored(message: BaseMessage) -> Message:
    """The stored UIMessage of a LangChain message.

    :param message: any ``BaseMessage``.
    """
    dumped = message_to_dict(message)
    data = dict(dumped["data"])
    parts: list[dict[str, Any]] = []
    if isinstance(data.get("content"), str):
        parts.append({"type": "text", "text": data.pop("content")})
    parts.append({"type": DATA_PART_TYPE, "data": {"type": dumped["type"], "data": data}})
    role = _ROLES.get(dumped["type"])
    if role is None:
        role = str(data.get("role") or dumped["type"])
    return {"id": new_message_id(), "role": role, "parts": parts}


def from_stored(message: Message) -> BaseMessage | None:
    """The LangChain message a stored UIMessage holds, or None if it holds none.

    Messages written by other means (a UI, a compaction overlay) become ``HumanMessage``,
    ``AIMessage`` or ``SystemMessage`` with their text.
    """
    parts = message.get("parts")
    parts = parts if isinstance(parts, list) else []
    texts = [p["text"] for p in parts
             if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)]
    for part in parts:
        if isinstance(part, dict) and part.get("type") == DATA_PART_TYPE:
            dumped = part.get("data")
            if isinstance(dumped, dict) and isinstance(dumped.get("data"), dict):
                data = dict(dumped["data"])
                if "content" not in data:
                    data = {"content": "".join(texts), **data}
                result: BaseMessage = messages_from_dict([{**dumped, "data": data}])[0]
                return result
    if not texts:
        return None
    kind = {"user": "human", "assistant": "ai", "system": "system"}.get(
        str(message.get("role")), "human")
    fallback: BaseMessage = messages_from_dict(
        [{"type": kind, "data": {"content": "\n\n".join(texts)}}])[0]
    return fallback


class ConvostoreChatMessageHistory(Bound, BaseChatMessageHistory):
    """LangChain's chat message history over a convostore session.

    :param session_id: the conversation's id (also the convostore session id).
    :param store: a URL or path (the process's shared store for it is used from the first
        call; :meth:`close` gives it back), an open :class:`~convostore.Sessions` or an open
        :class:`~convostore.aio.AsyncSessions`. A store given as an object is never closed here.
    :param open_options: passed to :meth:`Sessions.open` when ``store`` is a URL.

    ``messages`` reads the active branch, oldest first. The async methods run the same work on
    a worker thread, one call at a time in call order. Use it as a context manager (``with`` or
    ``async with``) or call :meth:`close`.
    """

    def __init__(
        self,
        session_id: str,
        store: str | os.PathLike[str] | Sessions | AsyncSessions,
        **open_options: Any,
    ) -> None:
        self._binding = Binding(store, session_id, open_options,
                                kind="ConvostoreChatMessageHistory")
        self.session_id = session_id
        """The conversation's id."""


    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message of the active branch, oldest first."""
        return self._binding.call_sync(_read)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages in order, in one transaction (all converted before the first is
        written)."""
        self._binding.call_sync(_write, list(messages))

    def add_message(self, message: BaseMessage) -> None:
        """Append one message."""
        self._binding.call_sync(_write, [message])

    def clear(self) -> None:
        """Delete every message of this session."""
        self._binding.call_sync(_clear)

    async def aget_messages(self) -> list[BaseMessage]:
        """Async twin of :attr:`messages`."""
        return await self._binding.call(_read)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async twin of :meth:`add_messages`; cancelled, it raises once the write's outcome is
        known."""
        await self._binding.call(_write, list(messages), mutation=True)

    async def aclear(self) -> None:
        """Async twin of :meth:`clear`."""
        await self._binding.call(_clear, mutation=True)

    def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Full-text search of this conversation's text, best match first."""
        return self._binding.call_sync(search_handle, query, limit)

    async def asearch(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Async twin of :meth:`search`."""
        return await self._binding.call(search_handle, query, limit)


def _read(handle: Session) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for message in handle.history():
        converted = from_stored(message)
        if converted is not None:
            out.append(converted)
    return out


def _write(handle: Session, messages: Sequence[BaseMessage]) -> None:
    stored = [to_stored(m) for m in messages]  # all converted before anything is written
    handle.append_messages(stored)  # one transaction, chained in order


def _clear(handle: Session) -> None:
    handle.clear_messages()



"""LlamaIndex's chat store on convostore.

:class:`ConvostoreChatStore` is a LlamaIndex ``BaseChatStore`` (sync and async methods): give it
to a ``ChatMemoryBuffer`` in place of ``SimpleChatStore``::

    from llama_index.core.memory import ChatMemoryBuffer
    from convostore.integrations.llama_index import ConvostoreChatStore

    chat_store = ConvostoreChatStore("chat.db")
    memory = ChatMemoryBuffer.from_defaults(chat_store=chat_store, chat_store_key="user-42")

Each key is one convostore session (its id is the key), each chat message one stored message:
its text in ``text`` parts (searchable) and the whole ``ChatMessage`` as JSON in a
``data-llama-index`` part (lossless: blocks, ``additional_kwargs``). Adding a message appends
one row; nothing rewrites the conversation but ``set_messages`` and an insert at an index.
The methods behave as ``SimpleChatStore``'s: an unknown key reads as ``[]``, ``get_keys`` lists
keys in the order they were first written, deleting from a key that holds nothing returns None.

Given a URL, chat stores of one process share one store per URL and options, opened on first
use (off the event loop for the async methods) and closed with its last user. The async
methods run on a worker thread: the event loop never waits on the database.

Needs ``pip install 'convostore[llama-index]'``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..codec import new_message_id
from ..model import Message
from . import missing
from ._store_ref import StoreRef

try:
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.llms import ChatMessage
    from llama_index.core.storage.chat_store.base import BaseChatStore
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("llama_index", "LlamaIndex", "llama-index-core", "llama-index") from exc

if TYPE_CHECKING:
    from ..aio import AsyncSessions
    from ..store import Sessions

__all__ = ["DATA_PART_TYPE", "ConvostoreChatStore"]

DATA_PART_TYPE = "data-llama-index"
"""The part holding a ``ChatMessage``'s JSON form."""

_MARK = "llama_index_chat_store"
"""The directory metadata key that marks a session as a key of a chat store."""
_ROLES = {"chatbot": "assistant", "model": "assistant", "function": "tool",
          "developer": "system"}
_PAGE = 500


def to_stored(message: ChatMessage) -> Message:
    """The stored message of a ``ChatMessage``."""
    data = message.model_dump(mode="json")
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": block["text"]}
        for block in data.get("blocks") or () if block.get("block_type") == "text"
        and isinstance(block.get("text"), str) and block["text"]
    ]
    parts.append({"type": DATA_PART_TYPE, "data": data})
    role = str(data.get("role") or "user")
    return {"id": new_message_id(), "role": _ROLES.get(role, role), "parts": parts}


def from_stored(message: Message) -> ChatMessage | None:
    """The ``ChatMessage`` a stored message holds; a message written by other means becomes
    one with its text; None when it has no text."""
    parts = [p for p in message.get("parts") or () if isinstance(p, dict)]
    for part in parts:
        if part.get("type") == DATA_PART_TYPE and isinstance(part.get("data"), dict):
            return ChatMessage.model_validate(part["data"])
    texts = [p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)]
    if not texts:
        return None
    role = str(message.get("role"))
    role = role if role in ("user", "assistant", "system", "tool") else "user"
    return ChatMessage(role=role, content="\n\n".join(texts))


class ConvostoreChatStore(BaseChatStore):
    """LlamaIndex's chat store over a convostore store, one session per key.

    :param store: a URL or path (the process's shared store for it is used from the first
        call; :meth:`close` gives it back), an open :class:`~convostore.Sessions` or an open
        :class:`~convostore.aio.AsyncSessions`. A store given as an object is never closed here.
    :param open_options: passed to :meth:`Sessions.open` when ``store`` is a URL.
    """

    _ref: StoreRef = PrivateAttr()

    def __init__(
        self,
        store: str | os.PathLike[str] | Sessions | AsyncSessions,
        **open_options: Any,
    ) -> None:
        super().__init__()
        self._ref = StoreRef(store, open_options, kind="ConvostoreChatStore")

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name for this component."""
        return "ConvostoreChatStore"

    # --- sync ----------------------------------------------------------------------------------

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Replace the key's messages: the new list commits in one transaction, then the old one
        is deleted (a reader sees one list or the other, never a mix)."""
        self._ref.call_sync(_set, key, list(messages))

    def get_messages(self, key: str) -> list[ChatMessage]:
        """The key's messages, oldest first (``[]`` for an unknown key)."""
        return self._ref.call_sync(_get, key)

    def add_message(self, key: str, message: ChatMessage, idx: int | None = None) -> None:
        """Append a message (one row), or insert it at ``idx`` (the list is rewritten)."""
        self._ref.call_sync(_add, key, message, idx)

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        """Delete the key and return its messages (None for an unknown key)."""
        return self._ref.call_sync(_delete_all, key)

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Delete and return the message at ``idx`` (None when out of range)."""
        return self._ref.call_sync(_delete_at, key, idx)

    def delete_last_message(self, key: str) -> ChatMessage | None:
        """Delete and return the newest message (None when there is none)."""
        return self._ref.call_sync(_delete_last, key)

    def get_keys(self) -> list[str]:
        """Every key holding messages, in the order they were first written."""
        return self._ref.call_sync(_keys)

    # --- async: the same work on a worker thread --------------------------------------------

    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Async twin of :meth:`set_messages`."""
        await self._ref.call(_set, key, list(messages))

    async def aget_messages(self, key: str) -> list[ChatMessage]:
        """Async twin of :meth:`get_messages`."""
        return await self._ref.call(_get, key)

    async def async_add_message(
        self, key: str, message: ChatMessage, idx: int | None = None
    ) -> None:
        """Async twin of :meth:`add_message`."""
        await self._ref.call(_add, key, message, idx)

    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        """Async twin of :meth:`delete_messages`."""
        return await self._ref.call(_delete_all, key)

    async def adelete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Async twin of :meth:`delete_message`."""
        return await self._ref.call(_delete_at, key, idx)

    async def adelete_last_message(self, key: str) -> ChatMessage | None:
        """Async twin of :meth:`delete_last_message`."""
        return await self._ref.call(_delete_last, key)

    async def aget_keys(self) -> list[str]:
        """Async twin of :meth:`get_keys`."""
        return await self._ref.call(_keys)

    # --- lifetime ------------------------------------------------------------------------------

    def close(self) -> None:
        """Give a shared store back (closed with its last user); a store given as an object
        stays open. Later calls raise :class:`~convostore.integrations.SessionClosed`."""
        self._ref.close()

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        await self._ref.aclose()


# --- the work, as sync functions of the store --------------------------------------------------


def _mark(store: Sessions, key: str) -> None:
    # the directory mark is what get_keys lists by; written once per key
    handle = store.session(key)
    entry = handle.get_info()
    metadata = dict(entry.metadata) if entry is not None else {}
    if metadata.get(_MARK) is not True:
        handle.update_info(metadata={**metadata, _MARK: True})


def _stored(store: Sessions, key: str) -> list[tuple[str, ChatMessage]]:
    out: list[tuple[str, ChatMessage]] = []
    for message in store.session(key).history():
        converted = from_stored(message)
        if converted is not None:
            out.append((message["id"], converted))
    return out


def _get(store: Sessions, key: str) -> list[ChatMessage]:
    return [message for _, message in _stored(store, key)]


def _set(store: Sessions, key: str, messages: list[ChatMessage]) -> None:
    stored = [to_stored(m) for m in messages]  # all converted before anything is written
    handle = store.session(key)
    _mark(store, key)  # first: a key that holds messages is always listed
    if not stored:
        handle.clear_messages()
        return
    old = [m["id"] for m in handle.history()]
    # The new list is a new branch, written in one transaction: it is the active path from its
    # commit on, so a reader sees the old list or the new one, never a mix and never nothing.
    handle.append_messages(stored, parent_id=None)
    if old:  # the superseded branch (if this fails, it stays behind, off the path read)
        handle.delete_messages(old)


def _add(store: Sessions, key: str, message: ChatMessage, idx: int | None) -> None:
    if idx is None:
        store.session(key).append_message(to_stored(message))
        _mark(store, key)
        return
    messages = _get(store, key)
    messages.insert(idx, message)
    _set(store, key, messages)


def _delete_all(store: Sessions, key: str) -> list[ChatMessage] | None:
    entry = store.session(key).get_info()
    if entry is None or entry.metadata.get(_MARK) is not True:
        return None
    messages = _get(store, key)
    store.delete_session(key)
    return messages


def _delete_at(store: Sessions, key: str, idx: int) -> ChatMessage | None:
    stored = _stored(store, key)
    if not -len(stored) <= idx < len(stored):
        return None
    message_id, message = stored[idx]
    store.session(key).delete_messages([message_id])
    return message


def _delete_last(store: Sessions, key: str) -> ChatMessage | None:
    handle = store.session(key)
    for message in handle.history(newest_first=True):
        converted = from_stored(message)
        if converted is not None:
            handle.delete_messages([message["id"]])
            return converted
    return None


def _keys(store: Sessions) -> list[str]:
    entries = []
    cursor: str | None = None
    while True:
        page = store.list_conversations(metadata={_MARK: True}, limit=_PAGE, cursor=cursor)
        entries.extend(page.sessions)
        cursor = page.next_cursor
        if cursor is None:
            break
    entries.sort(key=lambda e: (e.created_at, e.session_id))
    return [e.session_id for e in entries]

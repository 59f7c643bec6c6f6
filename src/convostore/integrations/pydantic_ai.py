"""Save and load pydantic-ai message histories in a convostore session.

The pattern of pydantic-ai's own docs works unchanged: save what each run added, load the
history for the next run::

    from convostore.integrations.pydantic_ai import load_messages, save_messages

    session = store.session("user-42")
    result = agent.run_sync("hi", message_history=load_messages(session))
    save_messages(session, result.new_messages())      # or result.all_messages()

For a service, :class:`ConvostoreMessageHistory` does the same from a URL, sharing one store
per URL and options in the process (opened on first use, off the event loop for the async
methods; closed with its last user)::

    async with ConvostoreMessageHistory("user-42", url) as history:
        result = await agent.run("hi", message_history=await history.aload_messages())
        await history.asave_messages(result.new_messages())

Each ``ModelMessage`` is one stored message, converted with
:func:`convostore.formats.from_pydantic_ai` (text searchable, binary content moved out of the
row, thinking kept verbatim, a tool return paired with its call), and :func:`load_messages`
gives back what ``ModelMessagesTypeAdapter`` gives for the saved JSON: for the messages of a
run, the messages themselves (``==``).

A message's id is derived from its content and the id of the message before it, so saving is
idempotent and never stores a message twice:

- ``result.new_messages()`` (a history that does not start at a stored root) is appended after
  the conversation's active leaf: turn after turn, the conversation grows;
- ``result.all_messages()`` (a history from its first message) is recognised up to where it
  differs from the stored one (one key look-up per message, nothing rewritten); the rest is
  appended there, growing a branch if the stored conversation went on differently.

Messages may be ``ModelMessage`` objects or their JSON form (dicts as
``ModelMessagesTypeAdapter.dump_python(messages, mode="json")`` gives them); anything else is
refused with a ``TypeError`` saying which item is wrong, before anything is written.

Needs ``pip install 'convostore[pydantic-ai]'``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from .. import formats
from ..aio import AsyncSession
from ..codec import dumps
from ..model import Message, SearchResult
from . import missing
from ._binding import Binding, Bound, search_handle
from ._pairing import pair_results

try:
    import pydantic
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("pydantic_ai", "pydantic-ai", "pydantic-ai-slim", "pydantic-ai") from exc

if TYPE_CHECKING:
    from ..aio import AsyncSessions
    from ..session import Session
    from ..store import Sessions

__all__ = [
    "ConvostoreMessageHistory",
    "aload_messages",
    "asave_messages",
    "load_messages",
    "save_messages",
    "to_stored",
]


def to_stored(
    messages: Sequence[ModelMessage | dict[str, Any]], *, after: str = ""
) -> list[Message]:
    """The stored UIMessages of a pydantic-ai history, ids chained from ``after``.

    :param messages: ``result.all_messages()``, ``result.new_messages()`` or any list of
        ``ModelMessage`` (or their JSON form).
    :param after: the id of the stored message the first one follows (``""``: a root).
    :raises TypeError: an item that is not a pydantic-ai message.
    """
    return _chained(_dump(messages), after)


def _dump(messages: Any) -> list[dict[str, Any]]:
    dumped: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(
        _coerce(messages), mode="json")
    return dumped


def _chain_id(previous: str, item: dict[str, Any]) -> str:
    """A message's id: from its JSON and the id of the message before it."""
    digest = hashlib.sha256(f"{previous}\n{dumps(item)}".encode("utf-8", "surrogatepass"))
    return "pai-" + digest.hexdigest()[:32]


def _chained(dumped: list[dict[str, Any]], after: str) -> list[Message]:
    out: list[Message] = []
    previous = after
    for item in dumped:
        (message,) = formats.from_pydantic_ai([item])
        message["id"] = previous = _chain_id(previous, item)
        out.append(message)
    return out


def _coerce(messages: Any) -> list[ModelMessage]:
    """``messages`` as ModelMessage objects; a clear TypeError for anything else."""
    if isinstance(messages, (str, bytes, dict, ModelRequest, ModelResponse)) or not isinstance(
        messages, Sequence
    ):
        raise TypeError(
            "messages must be a list of pydantic-ai messages (e.g. result.new_messages()), "
            f"not {type(messages).__name__}"
        )
    out: list[ModelMessage] = []
    for i, item in enumerate(messages):
        if isinstance(item, (ModelRequest, ModelResponse)):
            out.append(item)
        elif isinstance(item, dict):
            try:
                out.extend(ModelMessagesTypeAdapter.validate_python([item]))
            except pydantic.ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"][1:])
                raise TypeError(
                    f"messages[{i}] is a dict but not a pydantic-ai message in JSON form "
                    f"(at {where or 'the top'}: {first['msg']}); pass ModelMessage objects or "
                    "ModelMessagesTypeAdapter.dump_python(messages, mode='json')"
                ) from None
        else:
            raise TypeError(
                f"messages[{i}] must be a pydantic-ai ModelMessage (ModelRequest or "
                f"ModelResponse), not {type(item).__name__}"
            )
    return out


def _from_stored(messages: Sequence[Message]) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_python(formats.to_pydantic_ai(messages))


def _save(handle: Session, messages: Sequence[ModelMessage | dict[str, Any]]) -> int:
    """Store a history (whole or the new part of it); see the module docstring."""
    dumped = _dump(messages)
    if not dumped:
        return 0
    parent: str | None = None
    if handle.get_message(_chain_id("", dumped[0])) is None:  # not from a stored root
        parent = _attach_point(handle, dumped)
    chain = _chained(dumped, parent or "")
    start = parent

    def stored() -> Iterator[Message]:
        if start is None:
            return iter(())
        return iter(handle.history(leaf_id=start, newest_first=True))

    pair_results(chain, stored)
    inserted = 0
    for message in chain:
        inserted += handle.append_message(message, parent_id=parent).inserted
        parent = message["id"]
    return inserted


def _attach_point(handle: Session, dumped: list[dict[str, Any]]) -> str | None:
    """Where messages that do not start at a root go: after the stored message they were
    saved after before (a repeated save, recognised among the newest ``len + 1`` messages of
    the active branch), else after the active leaf (None: the session is empty)."""
    recent = list(itertools.islice(handle.history(newest_first=True), len(dumped) + 1))
    for child, before in zip(recent, recent[1:], strict=False):
        if _chain_id(str(before["id"]), dumped[0]) == child["id"]:
            return str(before["id"])
    return str(recent[0]["id"]) if recent else None


def _load(handle: Session, leaf_id: str | None) -> list[ModelMessage]:
    return _from_stored(list(handle.history(leaf_id=leaf_id)))


def _sync_handle(session: Any, name: str) -> Session:
    """``session`` itself, refused with a clear error when it is an ``AsyncSession`` (whose
    methods are coroutines) or no session at all."""
    if isinstance(session, AsyncSession):
        raise TypeError(f"{name}() needs a Session; for an AsyncSession use "
                        f"`await a{name}(session)`")
    if not callable(getattr(session, "append_message", None)):
        raise TypeError(f"{name}() needs a convostore Session, not {type(session).__name__}")
    return cast("Session", session)


def save_messages(session: Session, messages: Sequence[ModelMessage | dict[str, Any]]) -> int:
    """Store a pydantic-ai history: ``result.new_messages()`` after each run, or
    ``result.all_messages()``; what is already stored is recognised and skipped.

    :param session: a convostore session handle (for an ``AsyncSession``, use
        :func:`asave_messages`).
    :param messages: the run's new messages (appended after the active leaf) or the whole
        history (recognised from its first message).
    :returns: how many messages were newly stored.
    :raises TypeError: an item that is not a pydantic-ai message (nothing is written).
    """
    return _save(_sync_handle(session, "save_messages"), messages)


def load_messages(session: Session, *, leaf_id: str | None = None) -> list[ModelMessage]:
    """The stored history (active branch, or the one ending at ``leaf_id``) as ModelMessages.

    :param session: a convostore session handle (for an ``AsyncSession``, use
        :func:`aload_messages`).
    :param leaf_id: the branch to read; ``None`` reads the active branch.

    Pass it as ``message_history=``. Messages written by other means are rendered from their
    parts (see :func:`convostore.formats.to_pydantic_ai`).
    """
    return _load(_sync_handle(session, "load_messages"), leaf_id)


async def asave_messages(
    session: AsyncSession | Session, messages: Sequence[ModelMessage | dict[str, Any]]
) -> int:
    """Async twin of :func:`save_messages`: the work runs on the store's worker (an
    ``AsyncSession``) or a thread (a ``Session``), never on the event loop."""
    if isinstance(session, AsyncSession):
        return await session.store.run_sync(_save, session.sync, list(messages))
    return await asyncio.to_thread(_save, _sync_handle(session, "save_messages"),
                                   list(messages))


async def aload_messages(
    session: AsyncSession | Session, *, leaf_id: str | None = None
) -> list[ModelMessage]:
    """Async twin of :func:`load_messages` (off the event loop, as :func:`asave_messages`)."""
    if isinstance(session, AsyncSession):
        return await session.store.run_sync(_load, session.sync, leaf_id)
    return await asyncio.to_thread(_load, _sync_handle(session, "load_messages"), leaf_id)


class ConvostoreMessageHistory(Bound):
    """One conversation's pydantic-ai history, from a URL or a store.

    :param session_id: the conversation's id (also the convostore session id).
    :param store: a URL or path (the process's shared store for it is used from the first
        call; :meth:`close` gives it back), an open :class:`~convostore.Sessions` or an open
        :class:`~convostore.aio.AsyncSessions`. A store given as an object is never closed here.
    :param open_options: passed to :meth:`Sessions.open` when ``store`` is a URL.

    Its methods are the module's functions bound to the session; the async ones run one at a
    time in call order, off the event loop. Use it as a context manager (``with`` or ``async
    with``) or call :meth:`close`; after that, calls raise
    :class:`~convostore.integrations.SessionClosed`.
    """

    def __init__(
        self,
        session_id: str,
        store: str | os.PathLike[str] | Sessions | AsyncSessions,
        **open_options: Any,
    ) -> None:
        self._binding = Binding(store, session_id, open_options,
                                kind="ConvostoreMessageHistory")
        self.session_id = session_id
        """The conversation's id."""


    def load_messages(self, *, leaf_id: str | None = None) -> list[ModelMessage]:
        """:func:`load_messages` of this conversation."""
        return self._binding.call_sync(_load, leaf_id)

    def save_messages(self, messages: Sequence[ModelMessage | dict[str, Any]]) -> int:
        """:func:`save_messages` into this conversation."""
        return self._binding.call_sync(_save, list(messages))

    async def aload_messages(self, *, leaf_id: str | None = None) -> list[ModelMessage]:
        """Async twin of :meth:`load_messages`."""
        return await self._binding.call(_load, leaf_id)

    async def asave_messages(self, messages: Sequence[ModelMessage | dict[str, Any]]) -> int:
        """Async twin of :meth:`save_messages`; cancelled, it raises once the write's outcome
        is known."""
        return await self._binding.call(_save, list(messages), mutation=True)

    def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Full-text search of this conversation, best match first (tool outputs too when
        the store was opened with ``search_tool_output=True``)."""
        return self._binding.call_sync(search_handle, query, limit)

    async def asearch(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Async twin of :meth:`search`."""
        return await self._binding.call(search_handle, query, limit)



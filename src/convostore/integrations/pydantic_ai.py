"""Save and load pydantic-ai message histories in a convostore session.

::

    from convostore.integrations.pydantic_ai import load_messages, save_messages

    session = store.session("user-42")
    result = agent.run_sync("hi", message_history=load_messages(session))
    save_messages(session, result.all_messages())

Each ``ModelMessage`` is one stored message, converted with
:func:`convostore.formats.from_pydantic_ai` (text searchable, binary content moved out of the
row, thinking kept verbatim), and :func:`load_messages` gives back what
``ModelMessagesTypeAdapter`` gives for the saved JSON: for the messages of a run, the messages
themselves (``==``).

:func:`save_messages` takes the whole history (``result.all_messages()``): a message's id is
derived from its content and the id of the message before it, so the part already stored is
recognised (one key look-up per message, nothing rewritten) and only the new messages are
appended. A history that differs from the stored one after some message grows a branch there.

Needs ``pip install 'convostore[pydantic-ai]'``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import formats
from ..codec import dumps
from ..model import Message
from . import missing

try:
    from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("pydantic-ai", "pydantic-ai", exc) from exc

if TYPE_CHECKING:
    from ..aio import AsyncSession
    from ..session import Session

__all__ = ["aload_messages", "asave_messages", "load_messages", "save_messages", "to_stored"]


def to_stored(messages: Sequence[ModelMessage]) -> list[Message]:
    """The stored UIMessages of a pydantic-ai history, ids chained from the first message.

    :param messages: ``result.all_messages()`` or any list of ``ModelMessage``.
    """
    dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    out: list[Message] = []
    previous = ""
    for item in dumped:
        (message,) = formats.from_pydantic_ai([item])
        digest = hashlib.sha256(f"{previous}\n{dumps(item)}".encode("utf-8", "surrogatepass"))
        message["id"] = "pai-" + digest.hexdigest()[:32]
        previous = message["id"]
        out.append(message)
    return out


def _from_stored(messages: Sequence[Message]) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_python(formats.to_pydantic_ai(messages))


def save_messages(session: Session, messages: Sequence[ModelMessage]) -> int:
    """Store a pydantic-ai history; the part already stored is recognised and skipped.

    :param session: a convostore session handle.
    :param messages: the whole history, e.g. ``result.all_messages()``.
    :returns: how many messages were newly stored.
    """
    inserted = 0
    parent: str | None = None
    for message in to_stored(messages):
        result = session.append_message(message, parent_id=parent)
        inserted += result.inserted
        parent = message["id"]
    return inserted


def load_messages(session: Session, *, leaf_id: str | None = None) -> list[ModelMessage]:
    """The stored history (active branch, or the one ending at ``leaf_id``) as ModelMessages.

    :param session: a convostore session handle.
    :param leaf_id: the branch to read; ``None`` reads the active branch.

    Pass it as ``message_history=``. Messages written by other means are rendered from their
    parts (see :func:`convostore.formats.to_pydantic_ai`).
    """
    return _from_stored(list(session.history(leaf_id=leaf_id)))


async def asave_messages(session: AsyncSession, messages: Sequence[ModelMessage]) -> int:
    """Async twin of :func:`save_messages` for an :class:`~convostore.aio.AsyncSession`."""
    inserted = 0
    parent: str | None = None
    for message in to_stored(messages):
        result = await session.append_message(message, parent_id=parent)
        inserted += result.inserted
        parent = message["id"]
    return inserted


async def aload_messages(
    session: AsyncSession, *, leaf_id: str | None = None
) -> list[ModelMessage]:
    """Async twin of :func:`load_messages` for an :class:`~convostore.aio.AsyncSession`."""
    stored = [m async for m in session.history(leaf_id=leaf_id)]
    return _from_stored(stored)

"""The visible conversation of a LangGraph thread: its ``messages`` channel as UIMessages.

Each LangChain message of a checkpoint's ``messages`` value becomes one stored message
(converted as :mod:`convostore.integrations.langchain` converts them, so that integration reads
the mirror back), with the LangChain message's id as its id, under the message before it. A
fork (a checkpoint written from an earlier one) therefore becomes a branch of the mirror's
tree, sharing the messages before the fork point, and the newest branch written is the
session's latest leaf.

Cost per checkpoint: one ``get_message`` per message from the end until a stored one is found
(usually one or two), then one append per new message. A message without an id gets one derived
from its parent's id and its content, so writing the same list twice adds nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, message_to_dict

from .langchain import to_stored

if TYPE_CHECKING:
    from ..session import Session


def mirror_session_id(thread_id: str, checkpoint_ns: str = "") -> str:
    """The convostore session that mirrors a thread's conversation.

    The thread id itself for the root namespace; ``"<thread_id>#<checkpoint_ns>"`` for a
    subgraph's namespace.
    """
    return thread_id if not checkpoint_ns else f"{thread_id}#{checkpoint_ns}"


def _ids(messages: Sequence[BaseMessage]) -> list[str]:
    ids: list[str] = []
    parent = ""
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


def mirror(session: Session, value: Any) -> int:
    """Bring ``session`` in step with a ``messages`` channel value; the number appended.

    :param session: the mirror session (see :func:`mirror_session_id`).
    :param value: the channel's value; anything but a list of LangChain messages is ignored.
    """
    if not isinstance(value, list) or not value:
        return 0
    messages = [m for m in value if isinstance(m, BaseMessage)]
    if not messages:
        return 0
    ids = _ids(messages)
    known = -1
    for i in range(len(messages) - 1, -1, -1):
        stored = session.get_message(ids[i])
        if stored is not None:
            known = i
            fresh = _stored(messages[i], ids[i])
            if stored.get("parts") != fresh["parts"] or stored.get("role") != fresh["role"]:
                session.update_message(fresh)  # edited in place (same id, new content)
            break
    appended = 0
    parent = ids[known] if known >= 0 else None
    for i in range(known + 1, len(messages)):
        result = session.append_message(_stored(messages[i], ids[i]), parent_id=parent)
        appended += int(result.inserted)
        parent = ids[i]
    return appended

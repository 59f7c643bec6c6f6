"""What payloads an import may point at.

A stored message refers to a payload by the pointer ``attachment:sha256:<hash>``, and reads it
back with the payload's bytes. An import (``import_message``, ``import_messages``, ``restore``,
``convostore import``) takes a message as given, pointers included, so it could name a payload
it never sent: one that only another session references (its bytes would then be read through
this session, and kept alive by it after the owner's deletion), or none at all (the pointer
would read back as itself). An import may point at a payload it brings along (inline media
the same call extracts, a dump's attachment records) or one the same session already
references; any other pointer refuses the whole write, naming the field, with nothing written.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from .. import codec
from ..backends.base import Ops
from ..errors import InvalidMessage
from ..model import Message


def check_pointers(
    ops: Ops,
    session_id: str,
    messages: Sequence[tuple[Message, Sequence[str]]],
    brought: Collection[str],
) -> None:
    """Refuse, inside the write scope, a message of ``messages`` (each with the hashes its
    stored form points to) that points at a payload neither in ``brought`` nor referenced by
    ``session_id``.

    :raises InvalidMessage: naming the field that holds the first such pointer.
    """
    foreign = {h for _m, hashes in messages for h in hashes if h not in brought}
    if not foreign:
        return
    held = ops.session_refs(session_id, sorted(foreign))
    for message, hashes in messages:
        for h in hashes:
            if h in foreign and h not in held:
                raise InvalidMessage(
                    _field(message, codec.pointer_for(h)),
                    f"points at attachment {h[:12]}..., which this import does not bring and "
                    f"session {session_id!r} does not reference: import the media itself",
                )


def _field(message: Message, pointer: str) -> str:
    """The path (``parts[1].url``) of the first string of ``message`` holding ``pointer``."""
    stack: list[tuple[str, Any]] = [("parts", message.get("parts"))]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if pointer in value:
                return path
            continue
        items: Iterable[tuple[str, Any]]
        if isinstance(value, dict):
            items = ((f"{path}.{k}", v) for k, v in value.items())
        elif isinstance(value, list):
            items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
        else:
            continue
        stack += reversed(list(items))
    return "parts"

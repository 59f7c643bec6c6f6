"""``--json`` output of ``show``, ``search`` and ``stats``: one JSON document on stdout.

Machine output is written exactly as stored (no escaping for terminals; a lone surrogate is
its ``\\uXXXX`` escape, as in the store's own JSON), streamed where it can be long: ``show``
writes one message at a time. The shapes are documented in ``docs/cli.md`` (each command's
``--help``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import IO, Any

from .. import codec
from ..model import Message, SearchResult, StorageStats
from ..session import Session


def _array(stream: IO[str], items: Iterable[Any]) -> None:
    """Write ``items`` as a JSON array, one item per line, without holding them all."""
    stream.write("[")
    first = True
    for item in items:
        stream.write(("\n" if first else ",\n") + codec.dumps(item))
        first = False
    stream.write("]" if first else "\n]")


def show(stream: IO[str], session: Session, leaf_id: str | None, tree: bool) -> None:
    """``show --json``: ``{"session", "leaf_id", "messages": [...]}``, the history as a model
    reads it (overlays applied); with ``--tree``, every message as ``{"parent_id",
    "message"}`` (depth first, branches in write order) plus ``"compactions"``."""
    head: dict[str, Any] = {"session": session.session_id}
    if tree:
        leaf = session.get_latest_leaf()
        head["active_leaf"] = None if leaf is None else leaf["id"]
        head["compactions"] = [dataclasses.asdict(c) for c in session.get_compactions()]
        items: Iterable[Any] = _tree(session)
    else:
        head["leaf_id"] = leaf_id
        items = session.history(leaf_id=leaf_id)
    stream.write(codec.dumps(head)[:-1] + ',"messages":')
    _array(stream, items)
    stream.write("}\n")


def _tree(session: Session) -> Iterator[dict[str, Any]]:
    stack: list[tuple[Message, str | None]] = [(r, None) for r in reversed(session.get_roots())]
    while stack:
        message, parent = stack.pop()
        yield {"parent_id": parent, "message": message}
        children = session.get_branches(message["id"])
        stack.extend((c, message["id"]) for c in reversed(children))


def search(stream: IO[str], hits: list[SearchResult]) -> None:
    """``search --json``: an array of hits, best first (``session_id``, ``id``, ``role``,
    ``content``, ``created_at``)."""
    _array(stream, (dataclasses.asdict(h) for h in hits))
    stream.write("\n")


def stats(stream: IO[str], figures: StorageStats) -> None:
    """``stats --json``: one object, the fields of :class:`~convostore.StorageStats`."""
    stream.write(codec.dumps(dataclasses.asdict(figures)) + "\n")

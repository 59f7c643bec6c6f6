"""Stored rows back into messages: continuation rows joined, JSON parsed, payloads put back.

Every read of message content goes through :func:`hydrate` (or :func:`parse` for a row that is
self-contained), inside the read scope the rows came from, so a message is assembled from one
snapshot even when an update lands between two reads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .. import attachments, codec
from ..backends.base import Ops
from ..backends.rows import ContentRow
from ..errors import UnreadableMessage
from ..model import Message

logger = logging.getLogger("convostore")


def reassemble(ops: Ops, session_id: str, rows: Sequence[ContentRow]) -> dict[str, str]:
    """The stored text of each row by id, its continuation rows appended in order."""
    texts = {r.id: r.content for r in rows}
    chunked = [r.id for r in rows if r.content_chunks > 0]
    if chunked:
        extra: dict[str, list[str]] = {}
        for mid, _idx, content in ops.continuations(session_id, chunked):
            extra.setdefault(mid, []).append(content)
        for mid, pieces in extra.items():
            texts[mid] = texts[mid] + "".join(pieces)
    return texts


def hydrate(
    ops: Ops, session_id: str, rows: Sequence[ContentRow], *, strict: bool = False
) -> dict[str, Message]:
    """Parse rows into messages by id (payloads put back); unreadable rows are left out, or
    with ``strict`` raise :class:`UnreadableMessage`."""
    out: dict[str, Message] = {}
    pending: list[tuple[str, Message, list[str]]] = []
    for mid, text in reassemble(ops, session_id, rows).items():
        value = decode(session_id, mid, text) if strict else parse(session_id, mid, text)
        if value is None:
            continue
        if attachments.POINTER_PREFIX in text:
            pending.append((mid, value, attachments.pointer_hashes(value)))
        out[mid] = value
    if pending:
        wanted = list(dict.fromkeys(h for _m, _v, hs in pending for h in hs))
        meta = ops.attachment_meta(wanted)
        data = ops.attachment_data([h for h in wanted if h in meta])
        lookup = {h: (meta[h][0], data[h]) for h in meta}
        for mid, value, _hs in pending:
            out[mid] = attachments.resolve_attachments(value, lookup)
    return out


def hydrate_in_order(ops: Ops, session_id: str, seqs: Sequence[int]) -> list[Message]:
    """The readable messages at ``seqs``, in the order of ``seqs`` (one content query)."""
    rows = sorted(ops.content_rows_by_seq(session_id, seqs), key=lambda r: r.seq)
    return in_order(ops, session_id, rows)


def in_order(ops: Ops, session_id: str, rows: Sequence[ContentRow]) -> list[Message]:
    """The readable messages of ``rows``, in their order: a self-contained row is parsed as
    it is, the others are hydrated together (one query for their continuations, one for
    their payloads)."""
    out: list[Message | None] = []
    slow: list[ContentRow] = []
    pointer = attachments.POINTER_PREFIX
    for row in rows:
        text = row.content
        if row.content_chunks or pointer in text:
            slow.append(row)
            out.append(None)
        else:
            out.append(parse(session_id, row.id, text))
    if slow:
        hydrated = hydrate(ops, session_id, slow)
        for i, row in enumerate(rows):
            if out[i] is None:
                out[i] = hydrated.get(row.id)
    return [m for m in out if m is not None]


def decode(session_id: str, mid: str, text: str) -> Message:
    """A stored text as a message (payload pointers left in), from any call depth.

    :raises UnreadableMessage: the text is not JSON, or not a message (id, role, parts).
    """
    try:
        value = codec.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UnreadableMessage(session_id, mid, f"{type(exc).__name__}: {exc}") from exc
    if not codec.is_valid_stored(value):
        raise UnreadableMessage(session_id, mid, "not an object with id, role and parts")
    return value  # type: ignore[no-any-return]


def parse(session_id: str, mid: str, text: str) -> Message | None:
    """:func:`decode`, except that an unreadable row is logged and None: a read of many
    messages leaves it out and goes on with the others."""
    try:
        value = codec.loads(text)
    except (ValueError, RecursionError):
        value = None
    if codec.is_valid_stored(value):  # the common case, checked once
        return value  # type: ignore[no-any-return]
    try:
        return decode(session_id, mid, text)  # says why
    except UnreadableMessage as exc:
        logger.warning("skipping %s", exc)
        return None

"""Bounded reads: a conversation in newest-first pages, a message in pieces, a conversation
as one Markdown document.

An agent's context is small, so nothing here returns more than its budget, whatever is stored:

- a page of :func:`conversation_page` is at most :data:`PAGE_BYTES` (its text and its
  structured part together), each message in it at most :data:`MESSAGE_BYTES` (a longer one is
  cut, with a note pointing at ``read_message``); the next page starts below the oldest message
  shown, so pages never repeat or skip a message of the branch;
- a piece of :func:`message_piece` is at most :data:`PIECE_BYTES`, cut between quoted lines
  (offsets count lines of the rendering), so every piece keeps the quoting;
- :func:`conversation_markdown` is at most :data:`PIECE_BYTES`: the newest messages that fit.

Reads are :meth:`Session.history_records` newest first from the page's anchor: rows older than
the page are not touched, so the last page of a 100,000-message conversation costs what the
first does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..compaction import COMPACTION_PREFIX
from ..directory._records import MessageRecord
from ..model import Message, StoredCompaction
from ..session import Session
from ._render import NOTICE, body, header, label, utf8_len

PAGE_BYTES = 64 * 1024
"""Most UTF-8 bytes of one ``read_conversation`` page."""
MESSAGE_BYTES = 16 * 1024
"""Most UTF-8 bytes of one message within a page (``read_message`` reads it whole)."""
PIECE_BYTES = 256 * 1024
"""Most UTF-8 bytes of one ``read_message`` piece, and of a conversation resource."""
_RESERVE = 4 * 1024  # the page's own lines: notice, the "more" line
_CUT_NOTE = 1024  # room kept in a message for the note saying it was cut


class BadCursor(ValueError):
    """A ``before`` or ``offset`` that names nothing of the conversation."""


@dataclass
class Page:
    """One page of a conversation: its text and what a program needs to go on."""

    session_id: str
    text: str = ""
    ids: list[str] = field(default_factory=list)
    """The messages shown, newest first."""
    before: str | None = None
    """Pass as ``before`` for the next (older) page; None when the page reached the start."""

    @property
    def structured(self) -> dict[str, Any]:
        """The page for programs: ``session_id``, ``message_ids``, ``before``."""
        return {"session_id": self.session_id, "message_ids": self.ids, "before": self.before}

    def size(self) -> int:
        """UTF-8 bytes of the text and of the structured part as JSON."""
        return utf8_len(self.text) + len(
            json.dumps(self.structured, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def compactions(session: Session) -> dict[str, StoredCompaction]:
    """The session's compaction records by the id of the summary message each shows as."""
    return {COMPACTION_PREFIX + r.id: r for r in session.get_compactions()}


def _records(session: Session, before: str | None,
             records: dict[str, StoredCompaction]) -> Iterator[MessageRecord]:
    """The active branch newest first, or the branch below ``before`` (a message shown, or a
    compaction summary shown: the page goes on below the span it stands for)."""
    if before is None:
        yield from session.history_records(newest_first=True)
        return
    record = records.get(before)
    if record is None and before.startswith(COMPACTION_PREFIX):
        raise BadCursor(f"no message {label(before)} in conversation {label(session.session_id)}")
    anchor = before if record is None else record.from_message_id
    stream = session.history_records(leaf_id=anchor, newest_first=True)
    first = next(stream, None)
    if first is None:
        if session.get_message(anchor) is None:
            raise BadCursor(
                f"no message {label(before)} in conversation {label(session.session_id)}")
        return
    if first.message.get("id") != anchor:
        yield first
    yield from stream


def _clipped(message: Message, created_at: int | None, budget: int) -> str:
    """A message's header and quoted body, cut to ``budget`` bytes between lines."""
    lines = [header(message, created_at)]
    used = utf8_len(lines[0]) + 1 + _CUT_NOTE
    left_out = 0
    for line in body(message):
        size = utf8_len(line) + 1
        if left_out or used + size > budget:
            left_out += 1  # counted, so the note can say how much is left out
            continue
        lines.append(line)
        used += size
    if left_out:
        lines.append(f"[cut: {left_out} more lines; read_message with message_id="
                     f"{label(message.get('id'))} shows the whole message]")
    return "\n".join(lines)


def conversation_page(session: Session, before: str | None, limit: int) -> Page:
    """Up to ``limit`` messages of the branch, newest first, within :data:`PAGE_BYTES`.

    :param before: None for the newest messages of the active branch; else the id of a
        message (or compaction summary) of the conversation: the page starts just older.
    :raises BadCursor: ``before`` names no message of the conversation.
    """
    records = compactions(session)
    shown: list[tuple[str, str]] = []  # (id, text), newest first
    used = utf8_len(NOTICE) + _RESERVE
    more = False
    for record in _records(session, before, records):
        mid = str(record.message.get("id"))
        text = _clipped(record.message, record.created_at, MESSAGE_BYTES)
        cost = utf8_len(text) + 2 + utf8_len(json.dumps(mid, ensure_ascii=False)) + 2
        if len(shown) >= limit or (used + cost > PAGE_BYTES and shown):
            more = True
            break
        shown.append((mid, text))
        used += cost
    page = _page(session.session_id, shown, more, before)
    while page.size() > PAGE_BYTES and len(shown) > 1:  # long ids: the estimate fell short
        shown.pop()
        page = _page(session.session_id, shown, True, before)
    return page


def _page(session_id: str, shown: list[tuple[str, str]], more: bool,
          before: str | None) -> Page:
    page = Page(session_id, ids=[mid for mid, _ in shown])
    chunks = [NOTICE] + [text for _, text in shown]
    if more:
        page.before = page.ids[-1]
        chunks.append(f"More: older messages remain; call read_conversation with session_id="
                      f"{label(session_id)} and before={label(page.before, limit=2048)}.")
    elif shown:
        chunks.append("This is the start of the conversation.")
    else:
        chunks.append("No messages." if before is None else
                      "No older messages: this is the start of the conversation.")
    page.text = "\n\n".join(chunks)
    return page


@dataclass
class Piece:
    """One piece of a message's rendering."""

    text: str
    next_offset: int | None
    """The ``offset`` of the next piece; None for the last."""
    lines: int
    """How many lines the whole rendering has."""


def message_piece(message: Message, created_at: int | None, offset: int) -> Piece:
    """The lines of a message's rendering from line ``offset``, within :data:`PIECE_BYTES`.

    :raises BadCursor: ``offset`` is past the end of the rendering.
    """
    lines = [header(message, created_at), *body(message)]
    if offset >= len(lines) and offset > 0:
        raise BadCursor(f"offset {offset} is past the end of the message ({len(lines)} lines)")
    shown: list[str] = []
    used = _RESERVE + (utf8_len(NOTICE) if offset == 0 else 0)
    end = offset
    while end < len(lines):
        size = utf8_len(lines[end]) + 1
        if used + size > PIECE_BYTES and shown:
            break
        shown.append(lines[end])
        used += size
        end += 1
    more = end if end < len(lines) else None
    if more is not None:
        shown.append(f"[lines {offset}..{end - 1} of {len(lines)}; call read_message again with "
                     f"offset={end} to read on]")
    text = "\n".join(([NOTICE, ""] if offset == 0 else []) + shown)
    return Piece(text, more, len(lines))


def conversation_markdown(session: Session, title: str | None) -> str:
    """The active branch as Markdown, oldest first: the newest messages within
    :data:`PIECE_BYTES`, each cut to :data:`MESSAGE_BYTES`."""
    head = f"# Conversation {label(session.session_id)}"
    if title:
        head += f": {label(title)}"
    taken: list[str] = []
    used = utf8_len(head) + utf8_len(NOTICE) + _RESERVE
    older = False
    for record in session.history_records(newest_first=True):
        text = _clipped(record.message, record.created_at, MESSAGE_BYTES)
        if used + utf8_len(text) + 2 > PIECE_BYTES:
            older = True
            break
        taken.append(text)
        used += utf8_len(text) + 2
    note = ("Older messages are left out; the read_conversation tool pages through them."
            if older else "")
    chunks: list[Any] = [head, NOTICE] + ([note] if note else []) + list(reversed(taken))
    return "\n\n".join(chunks) + "\n"

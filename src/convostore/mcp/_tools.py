"""What each MCP tool does: the store calls, the owner scope, the answer's text.

:class:`Tools` holds the store, the owner the server is confined to (None: every owner) and
whether writes are allowed; each public method is one tool, registered by
:mod:`convostore.mcp._server` under its own name, with its docstring as the description the
model reads. A tool answers with a :class:`~mcp.types.CallToolResult`: plain text for the model
(stored content quoted, see :mod:`._render`) and a small structured part (ids, cursors) for
programs. A failure the caller can fix (a missing conversation, a bad cursor, a value the store
refuses) raises :class:`ToolError`, which the SDK returns as a tool error carrying the message.

Scope: a conversation is visible when it has a directory entry (written to or described), is
not one of the ``convostore:*`` sessions that hold context data, and, on a server confined to
an owner, belongs to that owner. Any other id answers "no conversation", exactly as a missing
one does, so a confined agent cannot tell another owner's conversations exist.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ImageContent, TextContent

from ..context import RESERVED_PREFIX, SEARCH_PREFIX, Context, StoreSearchProvider
from ..context._core import scoped_key
from ..directory._records import SessionPage
from ..errors import ConvostoreError
from ..model import UNSET, Message, SearchResult
from ..session import Session
from ..store import Sessions
from ._paging import (
    PAGE_BYTES,
    PIECE_BYTES,
    BadCursor,
    compactions,
    conversation_page,
    message_piece,
)
from ._render import NOTICE, file_size, iso, label, media_type, utf8_len, visible

__all__ = ["MAX_IMAGE_BYTES", "Tools", "answer", "guarded"]

MAX_IMAGE_BYTES = 4 * 1024 * 1024
"""The largest image ``read_message(include_images=True)`` inlines; larger ones are described."""
SNIPPET_CHARS = 300
_SEARCH_CAP = 2000  # most hits read to fill a page of an owner's hits

T = TypeVar("T")


def answer(text: str, structured: dict[str, Any] | None = None,
           extra: list[ImageContent] | None = None) -> CallToolResult:
    """A tool's result: ``text`` for the model, ``structured`` for programs."""
    content: list[Any] = [TextContent(type="text", text=text), *(extra or [])]
    return CallToolResult(content=content, structured_content=structured)


def guarded(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` with the store's refusals (and bad cursors) raised as :class:`ToolError`, so
    the model reads what was wrong; anything else stays a crash the SDK hides and logs."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except (ConvostoreError, ValueError) as exc:  # bad input the store (or a driver) refused
            raise ToolError(visible(" ".join(str(exc).split()) or type(exc).__name__)) from exc

    return call


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def snippet(text: str, query: str, width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` around the first word of ``query`` found in it."""
    flat = " ".join(text.split())
    lowered = flat.lower()
    at = min((i for i in (lowered.find(w.lower()) for w in query.split() if w) if i >= 0),
             default=0)
    start = max(0, min(at - width // 3, len(flat) - width))
    cut = flat[start : start + width]
    return ("..." if start > 0 else "") + cut + ("..." if start + width < len(flat) else "")


class Tools:
    """The tools of one server: ``store`` seen through ``owner``'s scope."""

    def __init__(self, store: Sessions, *, owner: str | None, writable: bool) -> None:
        self.store = store
        self.owner = owner
        self.writable = writable

    # --- scope ---------------------------------------------------------------------------

    def _missing(self, session_id: str) -> ToolError:
        return ToolError(f"no conversation {label(session_id)}")

    def visible(self, session_id: str) -> Session:
        """The handle of a conversation the scope shows; ToolError "no conversation" else."""
        if session_id.startswith(RESERVED_PREFIX):
            raise self._missing(session_id)
        session = self.store.session(session_id)
        info = session.get_info()
        if info is None or (self.owner is not None and info.owner != self.owner):
            raise self._missing(session_id)
        return session

    def _writable(self, session_id: str) -> Session:
        """A conversation to write to: a visible one, or a new one (given the scope's owner)."""
        if not self.writable:  # the write tools are not registered then; never write anyway
            raise ToolError("this server is read-only")
        if session_id.startswith(RESERVED_PREFIX):
            raise self._missing(session_id)
        session = self.store.session(session_id)
        info = session.get_info()
        if info is None:  # described first, so it is visible (and owned) from the first write
            session.update_info(owner=UNSET if self.owner is None else self.owner)
            return session
        if self.owner is not None and info.owner != self.owner:
            raise self._missing(session_id)
        return session

    def _owners(self, hits: list[SearchResult]) -> list[SearchResult]:
        if self.owner is None:
            return hits
        seen: dict[str, bool] = {}
        kept = []
        for hit in hits:
            if hit.session_id not in seen:
                info = self.store.session(hit.session_id).get_info()
                seen[hit.session_id] = info is not None and info.owner == self.owner
            if seen[hit.session_id]:
                kept.append(hit)
        return kept

    # --- read tools ----------------------------------------------------------------------

    def list_conversations(
        self, owner: str | None, metadata: dict[str, Any] | None, cursor: str | None, limit: int,
    ) -> CallToolResult:
        """See the registered tool's description (``_server.py``)."""
        if self.owner is not None and owner is not None and owner != self.owner:
            return answer("No conversations.", {"conversations": [], "next_cursor": None})
        scope = self.owner if self.owner is not None else owner
        while True:
            try:
                page = self.store.list_conversations(owner=scope, metadata=metadata or None,
                                                     limit=limit, cursor=cursor)
            except ConvostoreError as exc:
                problem = visible(" ".join(str(exc).split()))
                raise ToolError(f"bad cursor or filter: {problem}" if cursor else problem) \
                    from exc
            result = _directory(page)
            if _size(result) <= PAGE_BYTES or limit == 1:
                return result
            limit = max(1, limit // 2)  # long titles or ids: a shorter page, and its cursor

    def search_conversations(self, query: str, session_id: str | None,
                             limit: int) -> CallToolResult:
        """See the registered tool's description (``_server.py``)."""
        if not query.strip():
            raise ToolError("query is empty: give the words to look for")
        if session_id is not None:
            hits = self.visible(session_id).search(query, limit=limit)
        else:
            asked = limit
            while True:
                found = self.store.search(query, limit=asked)
                hits = self._owners(found)
                if len(hits) >= limit or len(found) < asked or asked >= _SEARCH_CAP:
                    break
                asked = min(asked * 4, _SEARCH_CAP)
            hits = hits[:limit]
        result = _hits(hits, query)
        while _size(result) > PAGE_BYTES and len(hits) > 1:  # the best that fit
            hits = hits[: len(hits) // 2]
            result = _hits(hits, query)
        return result

    def read_conversation(self, session_id: str, before: str | None,
                          limit: int) -> CallToolResult:
        """See the registered tool's description (``_server.py``)."""
        session = self.visible(session_id)
        try:
            page = conversation_page(session, before, limit)
        except BadCursor as exc:
            raise ToolError(f"bad cursor: {exc}") from exc
        return answer(page.text, page.structured)

    def stored(self, session: Session, message_id: str) -> Message:
        """A message of ``session`` as stored (a compaction summary by its id too)."""
        message = session.get_message(message_id)
        if message is None:
            record = compactions(session).get(message_id)
            if record is None:
                raise ToolError(f"no message {label(message_id)} in conversation "
                                f"{label(session.session_id)}")
            message = {"id": message_id, "role": "system",
                       "parts": [{"type": "text", "text": record.summary}]}
        return message

    def read_message(self, session_id: str, message_id: str, offset: int,
                     include_images: bool) -> CallToolResult:
        """See the registered tool's description (``_server.py``)."""
        message = self.stored(self.visible(session_id), message_id)
        try:
            piece = message_piece(message, None, offset)
        except BadCursor as exc:
            raise ToolError(f"bad cursor: {exc}") from exc
        images = _images(message) if include_images and offset == 0 else []
        return answer(piece.text, {"session_id": session_id, "message_id": message_id,
                                   "offset": offset, "next_offset": piece.next_offset,
                                   "lines": piece.lines}, images)

    # --- write tools (writable servers only) ---------------------------------------------

    def append_message(self, session_id: str, role: str, text: str) -> CallToolResult:
        """See the registered tool's description (``_server.py``)."""
        session = self._writable(session_id)
        message_id = f"mcp-{uuid.uuid4().hex}"
        session.append_message({"id": message_id, "role": role,
                                "parts": [{"type": "text", "text": text}]})
        return answer(f"Appended message {label(message_id)} to conversation "
                      f"{label(session_id)}.", {"session_id": session_id,
                                                "message_id": message_id})

    def _context(self, session: Session, label_: str, keyed: bool) -> Context:
        context = Context(session)
        if keyed:  # the session's own collection, deleted with it
            name = scoped_key(label_, session.session_id)
            return context.with_context(label_, provider=StoreSearchProvider(self.store, name))
        return context.with_context(label_)

    def _ran(self, result: str) -> str:
        if result.startswith("Error: "):
            raise ToolError(visible(result[len("Error: "):]))
        return result

    def set_context(self, session_id: str, label_: str, content: str,
                    action: Literal["replace", "append"], title: str | None) -> CallToolResult:
        """See the registered tool's description (``_server.py``)."""
        session = self._writable(session_id)
        keyed = title is not None
        arguments: dict[str, Any] = {"label": label_, "content": content, "action": action}
        if keyed:
            arguments["metadata"] = {"title": title}
        result = self._ran(self._context(session, label_, keyed).execute("set_context",
                                                                           arguments))
        if keyed and session_id:  # deleted with the conversation, as its blocks are
            collection = SEARCH_PREFIX + scoped_key(label_, session_id)
            self.store.session(collection).update_info(belongs_to=session_id)
        return answer(visible(result), {"session_id": session_id, "label": label_})

    def load_context(self, session_id: str, label_: str) -> CallToolResult:
        """See the registered tool's description (``_server.py``)."""
        session = self.visible(session_id)
        block = self._context(session, label_, False).get_context_block(label_)
        content = block.content if block is not None else None
        if not content:
            return answer(f"Block {label(label_)} of conversation {label(session_id)} is empty.",
                          {"session_id": session_id, "label": label_, "empty": True})
        return answer(f"Block {label(label_)} of conversation {label(session_id)}. {NOTICE}\n\n"
                      + _quoted(content), {"session_id": session_id, "label": label_,
                                          "empty": False})

    def search_context(self, session_id: str, label_: str, query: str) -> CallToolResult:
        """See the registered tool's description (``_server.py``)."""
        session = self.visible(session_id)
        result = self._ran(self._context(session, label_, True).execute(
            "search_context", {"label": label_, "query": query}))
        return answer(f"{NOTICE}\n\n{_quoted(result, PAGE_BYTES)}",
                      {"session_id": session_id, "label": label_})


def _size(result: CallToolResult) -> int:
    """UTF-8 bytes of a result's text and structured part."""
    text = sum(utf8_len(c.text) for c in result.content if isinstance(c, TextContent))
    return text + len(json.dumps(result.structured_content, ensure_ascii=False).encode())


def _directory(page: SessionPage) -> CallToolResult:
    lines = [f"{_count(len(page.sessions), 'conversation')}, the most recently updated first."]
    rows = []
    for entry in page.sessions:
        title = f" {label(entry.title, limit=100)}" if entry.title else ""
        who = f", owner {label(entry.owner)}" if entry.owner is not None else ""
        count = _count(entry.message_count, "message")
        lines.append(f"- {label(entry.session_id)}{title}: {count}, "
                     f"updated {iso(entry.updated_at)}{who}")
        rows.append({"session_id": entry.session_id, "title": entry.title,
                     "owner": entry.owner, "messages": entry.message_count,
                     "updated_at": entry.updated_at})
    if page.next_cursor is not None:
        lines.append(f"More: call list_conversations with cursor={label(page.next_cursor)}.")
    return answer("\n".join(lines), {"conversations": rows, "next_cursor": page.next_cursor})


def _hits(hits: list[SearchResult], query: str) -> CallToolResult:
    lines = [f"{_count(len(hits), 'hit')} for {label(query)}, best first. " + NOTICE]
    rows = []
    for hit in hits:
        lines.append(f"- conversation {label(hit.session_id)}, message {label(hit.id)}, "
                     f"{label(hit.role)}, {iso(hit.created_at)}:\n"
                     f"  > {visible(snippet(hit.content, query))}")
        rows.append({"session_id": hit.session_id, "message_id": hit.id, "role": hit.role,
                     "created_at": hit.created_at})
    if hits:
        lines.append("read_conversation with before=<message id> shows what led to a hit.")
    return answer("\n".join(lines), {"hits": rows})


def _quoted(text: str, budget: int = PIECE_BYTES) -> str:
    """Stored text as quoted lines, at most about ``budget`` bytes (a note says what is cut)."""
    lines = []
    used = 0
    all_lines = visible(text).split("\n")
    for i, line in enumerate(all_lines):
        quoted = "> " + line
        used += utf8_len(quoted) + 1
        if used > budget - 1024:
            lines.append(f"[cut: {len(all_lines) - i} more lines]")
            break
        lines.append(quoted)
    return "\n".join(lines)


def _images(message: Message) -> list[ImageContent]:
    """The message's images as image content, each up to :data:`MAX_IMAGE_BYTES`."""
    out = []
    for part in message.get("parts") or ():
        if not isinstance(part, dict) or part.get("type") != "file":
            continue
        kind = media_type(part)
        url = part.get("url")
        size = file_size(part)
        if not kind.startswith("image/") or size is None or size > MAX_IMAGE_BYTES:
            continue
        if isinstance(url, str) and ";base64," in url[: url.find(",") + 1]:
            data = url[url.find(",") + 1 :]
        elif isinstance(part.get("data"), str):
            data = part["data"]
        else:
            continue
        out.append(ImageContent(type="image", data=data, mime_type=kind))
    return out

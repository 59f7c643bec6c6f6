"""The reading commands ``show``, ``search``, ``stats`` and ``export``, and the printers of
history, trees, storage figures and search hits they share with the demo."""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from .. import codec
from ..compaction import is_compaction_message
from ..model import Message, SearchResult
from ..session import Session
from ..store import Sessions
from . import _json
from ._base import CliError, arg, check_leaf, find_session, open_store
from ._text import Output, clip, label, part_preview, sid, size

MAX_LIMIT = 10_000
"""The most hits ``search --limit`` asks for."""


# --- output ---------------------------------------------------------------------------------


def print_history(out: Output, messages: Iterable[Message]) -> int:
    """Numbered messages, each with a one-line preview per part; returns how many."""
    count = 0
    for count, message in enumerate(messages, 1):
        note = "  (summary of compacted messages)" if is_compaction_message(message) else ""
        out.line(f"{count:>3}  {message['role']}  {message['id']}{note}", style="bold")
        parts = message.get("parts") or []
        for part in parts:
            out.line("       " + part_preview(part))
        if not parts:
            out.line("       (no parts)")
    return count


def print_tree(out: Output, session: Session, total: int, leaf_id: str | None) -> None:
    """Every message of the session, tree by tree, branches drawn.

    A chain continues in the same column; a message with several children draws one branch per
    child, in write order. One ``get_branches`` call per message.
    """
    path = session.get_history_row_stats(leaf_id)  # ids of the raw path; no content read
    if not path:
        return
    leaf = path[-1].id
    notes: dict[str, list[str]] = {}
    for record in session.get_compactions():
        notes.setdefault(record.from_message_id, []).append("compaction starts")
        notes.setdefault(record.to_message_id, []).append("compaction ends")
    notes.setdefault(leaf, []).append("← leaf" if leaf_id else "← active leaf")
    stack: list[tuple[Message, str, str]] = [(r, "", "") for r in reversed(session.get_roots())]
    shown = 0
    while stack:
        message, first, rest = stack.pop()
        shown += 1
        note = notes.get(message["id"])
        out.line(first + label(message) + (f"  [{', '.join(note)}]" if note else ""))
        children = session.get_branches(message["id"])
        if len(children) == 1:
            stack.append((children[0], rest, rest))
            continue
        for i in reversed(range(len(children))):
            last = i == len(children) - 1
            stack.append((children[i], rest + ("└─ " if last else "├─ "),
                          rest + ("   " if last else "│  ")))
    if shown < total:  # a row that cannot be read (corrupt JSON) hides its subtree
        hidden = total - shown
        out.line(f"({hidden} message{'s' if hidden != 1 else ''} not shown: unreadable, "
                 "or under an unreadable message)")


def print_stats(out: Output, store: Sessions) -> None:
    stats = store.storage_stats()
    listed = len(store.list_sessions())  # what `ls` lists; convostore's own sessions apart
    own = [["internal sessions", str(stats.sessions - listed)]] if stats.sessions > listed else []
    out.table(
        None,
        [
            ["sessions", str(listed)],
            *own,
            ["messages", str(stats.messages)],
            ["continuation rows", str(stats.continuation_rows)],
            ["compactions", str(stats.compactions)],
            ["attachments", str(stats.attachments)],
            ["attachment bytes", f"{stats.attachment_bytes} ({size(stats.attachment_bytes)})"],
            ["content bytes", f"{stats.content_bytes} ({size(stats.content_bytes)})"],
        ],
    )


def print_hits(out: Output, hits: list[SearchResult]) -> None:
    if not hits:
        out.line("no matches")
        return
    out.table(
        ["SESSION", "MESSAGE", "ROLE", "TEXT"],
        [[sid(h.session_id), h.id, h.role, clip(h.content)] for h in hits],
    )


# --- commands -------------------------------------------------------------------------------


def cmd_show(args: argparse.Namespace, out: Output) -> None:
    """``convostore show``: a session's active history, or its whole tree with ``--tree``."""
    with open_store(args.db) as store:
        session, total = find_session(store, args.db, args.session)
        check_leaf(session, args.leaf)
        if args.json:
            _json.show(out.stream, session, args.leaf, args.tree)
        elif args.tree:
            print_tree(out, session, total, args.leaf)
        else:
            print_history(out, session.history(leaf_id=args.leaf))


def cmd_search(args: argparse.Namespace, out: Output) -> None:
    """``convostore search``: full-text hits across the store, or in one session."""
    if not 1 <= args.limit <= MAX_LIMIT:
        raise CliError(f"--limit must be from 1 to {MAX_LIMIT}, not {args.limit}")
    arg(args.query, "QUERY")
    with open_store(args.db) as store:
        if args.session is None:
            hits = store.search(args.query, limit=args.limit)
        else:
            session, _ = find_session(store, args.db, args.session)
            hits = session.search(args.query, limit=args.limit)
    if args.json:
        _json.search(out.stream, hits)
    else:
        print_hits(out, hits)


def cmd_stats(args: argparse.Namespace, out: Output) -> None:
    """``convostore stats``: counts and sizes of what the store holds."""
    with open_store(args.db) as store:
        if args.json:
            _json.stats(out.stream, store.storage_stats())
        else:
            print_stats(out, store)


def cmd_export(args: argparse.Namespace, out: Output) -> None:
    """``convostore export``: a session's messages as JSON Lines, exactly as stored."""
    with open_store(args.db) as store:
        session, _ = find_session(store, args.db, args.session)
        check_leaf(session, args.leaf)
        parent: str | None = None
        for message in session.history(leaf_id=args.leaf):
            out.stream.write(codec.dumps({"parent_id": parent, "message": message}) + "\n")
            parent = message["id"]

"""The command line's directory commands: ``ls``, ``rm`` and ``prune``.

:mod:`convostore.cli` registers them with :func:`add_ls` and :func:`add_retention`, handing
over how it opens a store; they speak only through the public API
(:meth:`Sessions.list_conversations`, :meth:`Sessions.delete_session`, :meth:`Sessions.prune`).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from ..directory._records import SessionEntry
from ..store import Sessions
from ._text import Output, sid, size, visible, when

Opener = Callable[[str], Sessions]
"""Opens the store a command names (refusing a database that holds none)."""
Register = Callable[..., argparse.ArgumentParser]
"""The parser's ``command(name, run, summary, description, parents, epilog=None)``."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_PAGE = 500


def duration(text: str) -> float:
    """``90d``, ``12h``, ``30m``, ``45s``, ``2w`` or plain seconds, as seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"not a duration: {text!r} (use e.g. 90d, 12h, 30m, 45s or seconds)"
        )
    return float(match.group(1)) * _UNITS[match.group(2)]


def _meta_pair(text: str) -> tuple[str, Any]:
    """``KEY=VALUE``: the value read as JSON when it is a JSON scalar, else as a string."""
    key, eq, raw = text.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"not KEY=VALUE: {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    if isinstance(value, (dict, list)):
        value = raw
    return key, value


def _entries(store: Sessions, args: argparse.Namespace) -> Iterator[SessionEntry]:
    """Every listed session, newest update first, up to ``--limit``, page by page."""
    cursor: str | None = None
    left = args.limit
    metadata = dict(args.meta or [])
    while left is None or left > 0:
        want = _PAGE if left is None else min(_PAGE, left)
        page = store.list_conversations(owner=args.owner, metadata=metadata or None,
                                        limit=want, cursor=cursor)
        yield from page.sessions
        if left is not None:
            left -= len(page.sessions)
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _as_json(entry: SessionEntry) -> dict[str, Any]:
    return {
        "session_id": entry.session_id, "title": entry.title, "owner": entry.owner,
        "metadata": entry.metadata, "created_at": entry.created_at,
        "updated_at": entry.updated_at, "message_count": entry.message_count,
        "bytes": entry.bytes, "expires_at": entry.expires_at,
    }


def _ls(opener: Opener) -> Callable[[argparse.Namespace, Output], None]:
    def run(args: argparse.Namespace, out: Output) -> None:
        if args.limit is not None and args.limit < 1:
            raise ValueError(f"--limit must be at least 1, not {args.limit}")
        with opener(args.db) as store:
            entries = list(_entries(store, args))
        if args.json:
            out.line(json.dumps([_as_json(e) for e in entries], ensure_ascii=True))
            return
        if not entries:
            out.line("no sessions")
            return
        titled = any(e.title for e in entries)
        owned = any(e.owner for e in entries)
        out.table(
            ["SESSION", *(["TITLE"] if titled else []), *(["OWNER"] if owned else []),
             "MESSAGES", "SIZE", "LAST WRITE"],
            [[sid(e.session_id), *([visible(e.title or "")] if titled else []),
              *([visible(e.owner or "")] if owned else []),
              str(e.message_count), size(e.bytes), when(e.updated_at)]
             for e in entries],
        )

    return run


def _rm(opener: Opener) -> Callable[[argparse.Namespace, Output], None]:
    def run(args: argparse.Namespace, out: Output) -> None:
        with opener(args.db) as store:
            missing = [s for s in args.session if not store.delete_session(s)]
        for session_id in args.session:
            if session_id not in missing:
                out.line(f"deleted {sid(session_id)}")
        if missing:
            raise ValueError(f"no session {', '.join(sid(s) for s in missing)}")

    return run


def _prune(opener: Opener) -> Callable[[argparse.Namespace, Output], None]:
    def run(args: argparse.Namespace, out: Output) -> None:
        if args.older_than is None and args.no_expired:
            raise ValueError("nothing to prune: give --older-than, or drop --no-expired")
        with opener(args.db) as store:
            result = store.prune(older_than=args.older_than, owner=args.owner,
                                 expired=not args.no_expired, dry_run=args.dry_run,
                                 batch_size=args.batch_size, limit=args.limit)
        count = len(result.session_ids)
        noun = "session" if count == 1 else "sessions"
        if args.dry_run:
            out.line(f"would delete {count} {noun}" + (":" if count else ""))
            for session_id in result.session_ids:
                out.line(f"  {sid(session_id)}")
        else:
            out.line(f"deleted {count} {noun} in {result.batches} "
                     f"batch{'' if result.batches == 1 else 'es'}")

    return run


def add_ls(command: Register, db: argparse.ArgumentParser, opener: Opener) -> None:
    """Register ``ls`` with the parser's ``command`` helper."""
    ls = command("ls", _ls(opener), "list sessions, newest write first",
                 "List the sessions of the database, most recently written first: messages,\n"
                 "stored bytes, last write, and title and owner when some session has them\n"
                 "(Session.update_info, or a session manager's name). convostore's own\n"
                 "sessions (context data) are not listed.", [db])
    ls.add_argument("--owner", metavar="ID", help="only sessions of this owner")
    ls.add_argument("--meta", metavar="KEY=VALUE", action="append", type=_meta_pair,
                    help="only sessions whose metadata has KEY equal to VALUE (read as JSON "
                         "when it is a number, true, false or null; repeatable)")
    ls.add_argument("--limit", metavar="N", type=int, help="list at most N sessions")
    ls.add_argument("--json", action="store_true",
                    help="print a JSON array of objects (session_id, title, owner, metadata, "
                         "created_at, updated_at, message_count, bytes, expires_at; times in "
                         "epoch milliseconds)")


def add_retention(command: Register, db: argparse.ArgumentParser, opener: Opener) -> None:
    """Register ``rm`` and ``prune`` with the parser's ``command`` helper."""
    rm = command("rm", _rm(opener), "delete sessions and everything of them",
                 "Delete each SESSION in one transaction: messages, compactions, attachment\n"
                 "references (payloads nobody else uses), search entries, its directory\n"
                 "entry, and the context data stored for it.", [db])
    rm.add_argument("session", metavar="SESSION", nargs="+", help="session id")
    prune = command("prune", _prune(opener), "delete idle and expired sessions",
                    "Delete sessions idle for longer than --older-than, and those past their\n"
                    "expiry (Session.update_info), in short batches that let other writers\n"
                    "in; an interrupted prune is finished by running it again.", [db])
    prune.add_argument("--older-than", metavar="AGE", type=duration,
                       help="delete sessions not written for AGE (90d, 12h, 30m, 45s, or "
                            "seconds)")
    prune.add_argument("--owner", metavar="ID", help="only sessions of this owner")
    prune.add_argument("--no-expired", action="store_true",
                       help="keep sessions past their expiry (only --older-than counts)")
    prune.add_argument("--dry-run", action="store_true",
                       help="delete nothing; list what would be deleted")
    prune.add_argument("--batch-size", metavar="N", type=int, default=100,
                       help="most sessions per transaction (default: 100)")
    prune.add_argument("--limit", metavar="N", type=int, help="delete at most N sessions")

"""The ``convostore`` command line: a demo, and a look inside any store.

Each command opens the store with :meth:`Sessions.open`, calls public methods and formats what
they return. Output is plain text, styled with ``rich`` only when it is installed and stdout is a
terminal. Every failure the user can cause (a missing database, an unknown session, a bad URL, a
library error, a value the store cannot hold) is one line on stderr, ``convostore: error: ...``,
and exit code 1, never a traceback; argparse usage errors exit with 2. The read-only commands
(``ls``, ``show``, ``search``, ``export``, ``stats``, ``serve``) first ask the engine whether
the URL holds a store, and create nothing when it does not. What people read shows stored
control characters as escapes (:mod:`convostore.cli._text`); ``export`` writes data exactly.
The reference in ``docs/cli.md`` is generated from ``--help`` by ``tools/gen_cli_docs.py``.
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import shlex
import struct
import sys
import zlib
from collections.abc import Callable, Iterable
from typing import Any

from .. import __version__, codec
from ..backends._engines import display_url, local_file
from ..compaction import create_compact_function, is_compaction_message
from ..errors import ConvostoreError
from ..limits import MAX_TIMESTAMP_MS
from ..model import Message, SearchResult
from ..session import Session
from ..store import Sessions
from . import _data, _json, _serve
from ._base import CliError as _CliError
from ._base import arg as _arg
from ._base import check_leaf as _check_leaf
from ._base import find_session as _session
from ._base import open_store as _open
from ._life import add_ls, add_retention
from ._text import Output as _Output
from ._text import clip as _clip
from ._text import label as _label
from ._text import part_preview as _part_preview
from ._text import sid as _sid
from ._text import size as _size
from ._text import visible as _visible

PROG = "convostore"
DEMO_PATH = "convostore-demo.db"
DEMO_SESSION = "demo"
MAX_LIMIT = 10_000
"""The most hits ``search --limit`` asks for."""


# --- output ---------------------------------------------------------------------------------


def _print_history(out: _Output, messages: Iterable[Message]) -> int:
    """Numbered messages, each with a one-line preview per part; returns how many."""
    count = 0
    for count, message in enumerate(messages, 1):
        note = "  (summary of compacted messages)" if is_compaction_message(message) else ""
        out.line(f"{count:>3}  {message['role']}  {message['id']}{note}", style="bold")
        parts = message.get("parts") or []
        for part in parts:
            out.line("       " + _part_preview(part))
        if not parts:
            out.line("       (no parts)")
    return count


def _print_tree(out: _Output, session: Session, total: int, leaf_id: str | None) -> None:
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
        out.line(first + _label(message) + (f"  [{', '.join(note)}]" if note else ""))
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


def _print_stats(out: _Output, store: Sessions) -> None:
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
            ["attachment bytes", f"{stats.attachment_bytes} ({_size(stats.attachment_bytes)})"],
            ["content bytes", f"{stats.content_bytes} ({_size(stats.content_bytes)})"],
        ],
    )


def _print_hits(out: _Output, hits: list[SearchResult]) -> None:
    if not hits:
        out.line("no matches")
        return
    out.table(
        ["SESSION", "MESSAGE", "ROLE", "TEXT"],
        [[_sid(h.session_id), h.id, h.role, _clip(h.content)] for h in hits],
    )


# --- commands -------------------------------------------------------------------------------


def _cmd_show(args: argparse.Namespace, out: _Output) -> None:
    with _open(args.db) as store:
        session, total = _session(store, args.db, args.session)
        _check_leaf(session, args.leaf)
        if args.json:
            _json.show(out.stream, session, args.leaf, args.tree)
        elif args.tree:
            _print_tree(out, session, total, args.leaf)
        else:
            _print_history(out, session.history(leaf_id=args.leaf))


def _cmd_search(args: argparse.Namespace, out: _Output) -> None:
    if not 1 <= args.limit <= MAX_LIMIT:
        raise _CliError(f"--limit must be from 1 to {MAX_LIMIT}, not {args.limit}")
    _arg(args.query, "QUERY")
    with _open(args.db) as store:
        if args.session is None:
            hits = store.search(args.query, limit=args.limit)
        else:
            session, _ = _session(store, args.db, args.session)
            hits = session.search(args.query, limit=args.limit)
    if args.json:
        _json.search(out.stream, hits)
    else:
        _print_hits(out, hits)


def _cmd_stats(args: argparse.Namespace, out: _Output) -> None:
    with _open(args.db) as store:
        if args.json:
            _json.stats(out.stream, store.storage_stats())
        else:
            _print_stats(out, store)


def _cmd_export(args: argparse.Namespace, out: _Output) -> None:
    with _open(args.db) as store:
        session, _ = _session(store, args.db, args.session)
        _check_leaf(session, args.leaf)
        parent: str | None = None
        for message in session.history(leaf_id=args.leaf):
            out.stream.write(codec.dumps({"parent_id": parent, "message": message}) + "\n")
            parent = message["id"]


# --- the demo -------------------------------------------------------------------------------


def _demo_png() -> bytes:
    """A real 48x24 PNG: a bar chart of an error rate with a spike (made here, no files)."""
    heights = [3, 4, 3, 5, 4, 3, 19, 22, 6, 4, 3, 3]
    width, height, bar = 48, 24, 4
    raw = bytearray()
    for y in range(height):
        raw.append(0)  # filter type of the scanline: none
        for x in range(width):
            h = heights[x // bar]
            lit = height - y <= h and x % bar != bar - 1
            raw += bytes((220, 50, 47) if lit and h > 10 else (38, 139, 210) if lit
                         else (250, 250, 250))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))


def _demo_log() -> dict[str, Any]:
    """A CI job log as a tool would return it: about 200 KB of JSON."""
    steps = ["checkout", "install", "lint", "unit-tests", "build-image", "push-image", "migrate"]
    lines: list[dict[str, Any]] = []
    n = 1450
    for i in range(n):
        step = steps[i * len(steps) // n]
        minutes, seconds = divmod(i, 60)
        lines.append({
            "ts": f"2025-03-14T01:{10 + minutes:02d}:{seconds:02d}Z",
            "step": step,
            "level": "info",
            "msg": f"{step}: task {i % 97:02d} finished in {(i * 37) % 900 + 12} ms "
                   f"(worker ci-runner-{i % 4}, cache {'hit' if i % 3 else 'miss'})",
        })
    lines += [
        {"ts": "2025-03-14T02:00:02Z", "step": "migrate", "level": "info",
         "msg": "applying 0042_add_orders_index"},
        {"ts": "2025-03-14T02:00:32Z", "step": "migrate", "level": "error",
         "msg": "0042_add_orders_index: lock timeout on table orders after 30s "
                "(held by pid 8812: nightly_report)"},
        {"ts": "2025-03-14T02:00:32Z", "step": "deploy", "level": "error",
         "msg": "deploy aborted: migration failed; release 2025.03.14-1 not rolled out"},
    ]
    return {"job": "deploy-nightly", "run": 4812, "status": "failed", "exit_code": 1,
            "lines": lines}


def _demo_summarise(prompt: str) -> str:
    """A deterministic stand-in for a model: one line per summarised message (no network)."""
    body = prompt.split("=== Conversation ===", 1)[-1].split("Organise the summary", 1)[0]
    points = []
    for block in body.split("\n\n---\n\n"):
        role, _, text = block.strip().partition("\n")
        first = text.split("\n[Tool:", 1)[0]
        points.append(f"- {role.strip('[]')}: {_clip(first, 100)}")
    return "## Summary (written by the demo's local summariser)\n" + "\n".join(points)


def _text(id: str, role: str, body: str) -> Message:
    return {"id": id, "role": role, "parts": [{"type": "text", "text": body}]}


def _demo_fresh_file(target: str, out: _Output) -> None:
    """Delete an earlier demo database at ``target`` (only if it is a SQLite file)."""
    if os.path.isdir(target):
        raise _CliError(f"{target} is a directory")
    if not os.path.exists(target):
        return
    with open(target, "rb") as f:
        head = f.read(16)
    if head and head != b"SQLite format 3\x00":
        raise _CliError(f"{target} exists and is not a SQLite database; not deleting it")
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(target + suffix):
            os.remove(target + suffix)
    out.line(f"removed the existing {target} to start fresh")


def _cmd_demo(args: argparse.Namespace, out: _Output) -> None:
    path = local_file(args.path)
    shown = os.path.abspath(path) if path is not None else display_url(args.path)
    out.line(f"convostore demo: writing a conversation to {shown}")
    if path is not None:
        _demo_fresh_file(path, out)
    with _open(args.path, create=True) as store:
        session = store.session(DEMO_SESSION)
        if session.get_latest_leaf() is not None:
            session.clear_messages()
            out.line(f"cleared the existing session {DEMO_SESSION!r} to start fresh")
        compacted = _write_demo(session, out)
        total = {s.session_id: s.messages for s in store.list_sessions()}[DEMO_SESSION]
        out.heading(f"Tree of session {DEMO_SESSION!r} (every message; branches drawn)")
        _print_tree(out, session, total, None)
        out.heading(f"Active history (what a model is sent; a summary replaces {compacted})")
        _print_history(out, session.history())
        out.heading("Storage")
        _print_stats(out, store)
        out.heading('Search "lock timeout" (compacted messages are still found)')
        _print_hits(out, session.search("lock timeout"))
    out.heading("Look inside")
    path = shlex.quote(display_url(args.path))  # a password is left out here too
    for command in (f"ls {path}", f"show {path} {DEMO_SESSION} --tree",
                    f"search {path} 'orders index'",
                    f"export {path} {DEMO_SESSION} > demo.jsonl"):
        out.line(f"  {PROG} {command}")


def _write_demo(session: Session, out: _Output) -> str:
    """Append the demo conversation, compact it; returns the compacted range ``from..to``."""
    log = _demo_log()
    png = _demo_png()
    say = out.line
    session.append_message(_text(
        "u1", "user", "The nightly deploy failed around 02:00 UTC. Can you check the build log "
        "and tell me what broke?"))
    say("  u1        user: a question")
    session.append_message({"id": "a1", "role": "assistant", "parts": [
        {"type": "step-start"},
        {"type": "text", "text": "Let me pull the log of last night's run."},
        {"type": "tool-fetch_build_log", "toolCallId": "call_fetch_1",
         "state": "output-available", "input": {"job": "deploy-nightly", "run": 4812},
         "output": log},
    ]})
    say(f"  a1        assistant: a tool call, fetch_build_log, with a "
        f"{_size(codec.utf8_len(codec.dumps(log)))} JSON result")
    session.append_message(_text(
        "a2", "assistant", "Build and tests passed; the deploy failed in the migrate step. "
        "Migration 0042_add_orders_index hit a lock timeout on the orders table after 30 s, "
        "because the nightly_report job held a long transaction on it. Nothing was rolled out: "
        "production still runs the previous release."))
    say("  a2        assistant: the diagnosis")
    session.append_message({"id": "u2", "role": "user", "parts": [
        {"type": "text", "text": "Here is the error-rate graph from the dashboard. Is the "
                                 "spike related?"},
        {"type": "file", "mediaType": "image/png", "filename": "error-rate.png",
         "url": "data:image/png;base64," + base64.b64encode(png).decode("ascii")},
    ]})
    say(f"  u2        user: an image ({len(png)} byte PNG, stored once as an attachment)")
    session.append_message(_text(
        "a3", "assistant", "Probably: the spike is at about the same time as the failure."))
    say("  a3        assistant: a first answer")
    session.append_message(_text(
        "a3-retry", "assistant", "Yes. Writes to orders queued behind the migration while it "
        "waited for the lock, and timed out: the error rate rose at 02:00 and fell at 02:00:30 "
        "when the migration gave up. It is the same lock, not a second problem."), parent_id="u2")
    say("  a3-retry  assistant: a regenerated answer, a branch under u2 (now the active one)")
    session.append_message(_text("u3", "user", "How do we keep this from happening again?"))
    session.append_message(_text(
        "a4", "assistant", "Build the index with CREATE INDEX CONCURRENTLY, set lock_timeout "
        "to 5s in migrations so they fail fast, and move the nightly report to 03:00 so it "
        "never overlaps the deploy window."))
    session.append_message(_text(
        "u4", "user", "Good. Open a ticket for that and re-run the deploy tonight."))
    session.append_message(_text(
        "a5", "assistant", "Done: ticket OPS-1287 covers the migration change and the report "
        "schedule; the deploy is queued for 22:00 UTC."))
    say("  u3 a4 u4 a5: two more turns")
    # A tiny budget keeps only the last turn (u4, a5) verbatim, so the compaction is visible.
    session.on_compaction(create_compact_function(_demo_summarise, keep_recent_tokens=50))
    result = session.compact()
    if result is None:  # the function above always returns a summary for this history
        raise _CliError("the demo compaction did not happen")
    compacted = f"{result.from_message_id}..{result.to_message_id}"
    say(f"  compacted {compacted} into a summary (local summariser, no network); "
        "the rows stay, reads show the summary")
    return compacted


# --- the parser -----------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Help at a fixed width, so docs/cli.md does not depend on the terminal."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=88, max_help_position=30)


_DB_HELP = ("a SQLite file path (or sqlite:///path), a postgresql:// URL or a libpq "
            "'host=... dbname=...' string")

_EXPORT_FORMAT = """\
format: JSON Lines, UTF-8, one message per line, root to leaf, streamed:
  {"parent_id": null, "message": {"id": "u1", "role": "user", "parts": [...]}}
  {"parent_id": "u1", "message": {"id": "a1", "role": "assistant", "parts": [...]}}
parent_id is the previous line's message id (null on the first line). The
history is read as a model sees it: a compacted span is one summary message
(id compaction_...), and other branches are left out. `convostore import`
reads this format back: the imported session's history equals the exported
one."""

_IMPORT_FORMAT = f"""\
Each non-blank line is {{"parent_id": ..., "message": {{...}}}} as `convostore
export` writes it. Without a "parent_id" key the parent is the previous
line's message; an optional "created_at" (epoch milliseconds, from 0 to
{MAX_TIMESTAMP_MS}, the end of year 9999) keeps the original time. Messages
are stored verbatim (import_messages), a few hundred lines per transaction:
a bad line stops the import naming it, and nothing of its batch is stored.
Ids already in the session are skipped, so an interrupted import can be run
again. A progress bar shows on stderr when it is a terminal."""


def build_parser() -> argparse.ArgumentParser:
    """The ``convostore`` argument parser (also used to generate docs/cli.md)."""
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=_Formatter,
        description="Durable conversation storage for LLM agents: a demo, and a look inside "
                    "any store.",
        epilog=f"Run `{PROG} demo` to write an example database, then `{PROG} COMMAND -h`.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument("db", metavar="DB", help=_DB_HELP)
    leaf = argparse.ArgumentParser(add_help=False)
    leaf.add_argument("--leaf", metavar="ID",
                      help="read the branch ending at this message (default: the active leaf)")

    def command(name: str, run: Callable[[argparse.Namespace, _Output], None], summary: str,
                description: str, parents: list[argparse.ArgumentParser],
                epilog: str | None = None) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=summary, description=description, epilog=epilog,
                                  parents=parents, formatter_class=_Formatter)
        sub.set_defaults(run=run)
        return sub

    demo = command("demo", _cmd_demo, "write an example conversation and show what was stored",
                   "Write a realistic agent conversation into a new database: a question, a tool\n"
                   "call with a ~200 KB result, an image, a regenerated answer (a branch), a\n"
                   "compaction by a local summariser and a search; then print the tree, the\n"
                   "active history, storage figures and the search hits. An existing SQLite\n"
                   "file at PATH is deleted first.", [])
    demo.add_argument("path", metavar="PATH", nargs="?", default=DEMO_PATH,
                      help=f"where to write it (default: ./{DEMO_PATH})")
    add_ls(command, db, _open)  # ls: _cli_life.py
    show = command("show", _cmd_show, "print a session's active history, or its whole tree",
                   "Print the active history of a session (or the branch ending at --leaf),\n"
                   "one line per part; with --tree, every message with branches drawn.",
                   [db, leaf])
    show.add_argument("session", metavar="SESSION", nargs="?",
                      help='session id (default: the default session "", or the only one)')
    show.add_argument("--tree", action="store_true", help="draw the whole tree of the session")
    show.add_argument("--json", action="store_true",
                      help='print {"session", "leaf_id", "messages": [...]} (the history as '
                           'read); with --tree, {"session", "active_leaf", "compactions", '
                           '"messages": [{"parent_id", "message"}, ...]}, every message')
    search = command("search", _cmd_search, "full-text search of message text",
                     "Full-text search of text parts, best match first (the index is built on\n"
                     "first use).", [db])
    search.add_argument("query", metavar="QUERY", help="words to find")
    search.add_argument("--session", metavar="ID", help="search this session only")
    search.add_argument("--limit", metavar="N", type=int, default=20,
                        help="most hits to print (default: 20)")
    search.add_argument("--json", action="store_true",
                        help="print a JSON array of hits, best first: session_id, id, role, "
                             "content, created_at")
    export = command("export", _cmd_export, "write a session as JSON Lines to stdout",
                     "Write a session's history to stdout, one message per line.", [db, leaf],
                     epilog=_EXPORT_FORMAT)
    export.add_argument("session", metavar="SESSION", help="session id")
    imp = command("import", _data.cmd_import, "read JSON Lines into a session",
                  "Import messages written by `convostore export` into a session (the\n"
                  "database is created if missing).", [db], epilog=_IMPORT_FORMAT)
    imp.add_argument("session", metavar="SESSION", help="session id to import into")
    imp.add_argument("file", metavar="FILE", help="JSON Lines file, or - for stdin")
    command("index", _data.cmd_index, "build the full-text index ahead of the first search",
            "Build the search index now, in short steps that let writers in, with a\n"
            "progress bar on stderr when it is a terminal; an interrupted build resumes\n"
            "where it stopped.", [db])
    command("stats", _cmd_stats, "print storage figures",
            "Print counts and sizes of everything stored: sessions, messages, continuation\n"
            "rows, compactions, attachments.", [db]).add_argument(
                "--json", action="store_true",
                help="print one JSON object: the figures by name (sessions, messages, ...)")
    add_retention(command, db, _open)  # rm, prune: _cli_life.py
    _data.register(command, db)  # dump, restore, migrate: _data.py
    _serve.add_arguments(command(
        "serve", lambda args, out: _serve.run(args, out, _open), _serve.SERVE_SUMMARY,
        _serve.SERVE_DESCRIPTION, [db]))
    return parser


def _utf8(stream: Any) -> None:
    """Read and write UTF-8 whatever the locale (exports must round-trip any text)."""
    if isinstance(stream, io.TextIOWrapper) and stream.encoding.lower() not in ("utf-8", "utf8"):
        stream.reconfigure(encoding="utf-8")


def _problem(exc: BaseException) -> str:
    """A library or driver error as one line of text (what the error said, else its kind)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Run the ``convostore`` command; returns the exit code.

    :param argv: the arguments after the program name (default: ``sys.argv[1:]``).
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    _utf8(sys.stdout)
    _utf8(sys.stdin)
    try:
        args.run(args, _Output(sys.stdout))
        sys.stdout.flush()
    except (ConvostoreError, _CliError, ValueError, OverflowError) as exc:
        # ValueError and the others: bad input that reached the library or the driver (a
        # value it cannot store); reported as one line like the library's own errors.
        # The one place that escapes control characters and lone surrogates in an error.
        print(f"{PROG}: error: {_visible(_problem(exc))}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`export ... | head`): stop quietly, as other tools do.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
        return 1
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        print(f"{PROG}: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0

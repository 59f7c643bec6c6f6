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
import io
import os
import sys
from collections.abc import Callable
from typing import Any

from .. import __version__
from ..errors import ConvostoreError
from ..limits import MAX_TIMESTAMP_MS
from . import _check, _data, _mcp, _serve
from ._base import PROG as PROG
from ._base import CliError as _CliError
from ._base import open_store as _open
from ._demo import DEMO_PATH as DEMO_PATH
from ._demo import DEMO_SESSION as DEMO_SESSION
from ._demo import cmd_demo
from ._life import add_ls, add_retention
from ._read import MAX_LIMIT as MAX_LIMIT
from ._read import cmd_export, cmd_search, cmd_show, cmd_stats
from ._text import Output as _Output
from ._text import visible as _visible


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

    def command(name: str, run: Callable[[argparse.Namespace, _Output], int | None], summary: str,
                description: str, parents: list[argparse.ArgumentParser],
                epilog: str | None = None) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=summary, description=description, epilog=epilog,
                                  parents=parents, formatter_class=_Formatter)
        sub.set_defaults(run=run)
        return sub

    demo = command("demo", cmd_demo, "write an example conversation and show what was stored",
                   "Write a realistic agent conversation into a new database: a question, a tool\n"
                   "call with a ~200 KB result, an image, a regenerated answer (a branch), a\n"
                   "compaction by a local summariser and a search; then print the tree, the\n"
                   "active history, storage figures and the search hits. An existing SQLite\n"
                   "file at PATH is deleted first.", [])
    demo.add_argument("path", metavar="PATH", nargs="?", default=DEMO_PATH,
                      help=f"where to write it (default: ./{DEMO_PATH})")
    add_ls(command, db, _open)  # ls: _life.py
    show = command("show", cmd_show, "print a session's active history, or its whole tree",
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
    search = command("search", cmd_search, "full-text search of message text",
                     "Full-text search of text parts, best match first (the index is built on\n"
                     "first use).", [db])
    search.add_argument("query", metavar="QUERY", help="words to find")
    search.add_argument("--session", metavar="ID", help="search this session only")
    search.add_argument("--limit", metavar="N", type=int, default=20,
                        help="most hits to print (default: 20)")
    search.add_argument("--json", action="store_true",
                        help="print a JSON array of hits, best first: session_id, id, role, "
                             "content, created_at")
    export = command("export", cmd_export, "write a session as JSON Lines to stdout",
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
    command("stats", cmd_stats, "print storage figures",
            "Print counts and sizes of everything stored: sessions, messages, continuation\n"
            "rows, compactions, attachments.", [db]).add_argument(
                "--json", action="store_true",
                help="print one JSON object: the figures by name (sessions, messages, ...)")
    add_retention(command, db, _open)  # rm, prune: _life.py
    _data.register(command, db)  # dump, restore, migrate: _data.py
    _check.register(command, db)  # check: _check.py
    _serve.add_arguments(command(
        "serve", lambda args, out: _serve.run(args, out, _open), _serve.SERVE_SUMMARY,
        _serve.SERVE_DESCRIPTION, [db]))
    _mcp.register(command, db, _open)  # mcp: _mcp.py
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
        code = args.run(args, _Output(sys.stdout))  # None, or a command's own exit status
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
    return code if isinstance(code, int) else 0

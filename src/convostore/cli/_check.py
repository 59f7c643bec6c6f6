"""``convostore check DB [--repair] [--json]``: the store's consistency check.

Prints what :meth:`Sessions.check` found, by session, and a summary line; with ``--repair``,
what it fixed and what it could not. The exit status tells scripts the outcome:
:data:`EXIT_OK` when the store is sound (nothing found, or everything found repaired),
:data:`EXIT_PROBLEMS` when problems remain; an error (no store at DB, a bad URL) exits with 1,
as every command does.
"""

from __future__ import annotations

import argparse
from typing import Any

from .. import codec
from ..check import CheckReport, Problem
from ._base import open_store
from ._progress import bar
from ._text import Output
from ._text import sid as _sid

EXIT_OK = 0
"""The store is sound: nothing was found, or everything found was repaired."""
EXIT_PROBLEMS = 3
"""Problems remain (found without ``--repair``, or not repairable)."""

SUMMARY = "check every invariant of the stored data; --repair fixes what it can"
DESCRIPTION = (
    "Read the whole store, session by session in bounded memory, and report every\n"
    "broken invariant: a parent that does not exist, a loop of parents, continuation\n"
    "rows missing or out of order, a payload missing or referred to by nothing,\n"
    "references that disagree with the messages, a compaction whose ends left the\n"
    "tree, a directory row whose counts disagree, a search index out of step, a\n"
    "change log with a gap. A progress bar shows on stderr when it is a terminal.\n"
    "With --repair, fix what can be fixed without losing a message (recount the\n"
    "directory, re-index, collect what nothing refers to, cut broken parent links)\n"
    "and say what could not be."
)
EPILOG = (
    f"exit status: {EXIT_OK} when the store is sound (nothing found, or everything found\n"
    f"repaired), {EXIT_PROBLEMS} when problems remain, 1 on an error."
)


def register(command: Any, db: argparse.ArgumentParser) -> None:
    """Add ``check`` to the parser, through ``cli.build_parser``'s ``command(name, run,
    summary, description, parents, epilog)``."""
    checked = command("check", cmd_check, SUMMARY, DESCRIPTION, [db], epilog=EPILOG)
    checked.add_argument("--repair", action="store_true",
                         help="fix what can be fixed without losing a message")
    checked.add_argument("--json", action="store_true",
                         help='print one JSON object: {"ok", "sessions", "messages", "repair", '
                              '"problems": [{"kind", "session_id", "subject", "detail", '
                              '"repairable", "repaired"}, ...]}')


def cmd_check(args: argparse.Namespace, out: Output) -> int:
    """``convostore check DB``; returns the exit status."""
    with open_store(args.db) as store, bar("check", "sessions") as update:
        report = store.check(repair=args.repair, progress=update)
    if args.json:
        out.stream.write(codec.dumps(report.as_dict()) + "\n")
    else:
        print_report(out, report)
    return EXIT_OK if report.ok else EXIT_PROBLEMS


def print_report(out: Output, report: CheckReport) -> None:
    """The problems by session (the store's own last), then one summary line."""
    for session_id, problems in report.by_session().items():
        out.heading("the whole store" if session_id is None else f"session {_sid(session_id)}")
        for p in problems:
            out.line(f"{p.kind} {p.subject}: {p.detail} ({_state(p, report.repair)})")
    out.line()
    checked = f"checked {report.sessions:,} sessions, {report.messages:,} messages"
    if report.clean:
        out.line(f"{checked}: no problems")
        return
    left = len(report.remaining)
    fixed = len(report.problems) - left
    line = f"{checked}: {len(report.problems):,} problems"
    if report.repair:
        line += f", {fixed:,} repaired, {left:,} left"
    elif any(p.repairable for p in report.problems):
        line += f" ({sum(p.repairable for p in report.problems):,} repairable with --repair)"
    out.line(line)


def _state(problem: Problem, repair: bool) -> str:
    if problem.repaired:
        return "repaired"
    if not problem.repairable:
        return "cannot be repaired"
    return "not repaired" if repair else "repairable"

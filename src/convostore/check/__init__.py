"""A store's consistency check, and the repair of what can be fixed without losing a message.

::

    report = store.check()                  # reads everything, changes nothing
    for problem in report.remaining:
        print(problem.session_id, problem.kind, problem.subject, problem.detail)
    report = store.check(repair=True)       # the same, then the repairable problems fixed

The check reads every session (message rows, continuation rows, attachment references,
compactions, the directory row) and the store-wide tables (payloads, the change log, the search
index) in bounded windows, and reports each broken invariant as a :class:`Problem` of a kind in
:data:`KINDS`, by session. ``repair=True`` then fixes the kinds in :data:`REPAIRABLE`
(recount the directory, index what the search index misses, collect payloads and rows nothing
refers to, cut links that make a message unreachable or a loop) and says which problems it
could not fix (:attr:`CheckReport.remaining`): a lost continuation row or payload, an
unreadable message, a compaction whose messages are gone. Run on a damaged store, it is the
tool for "is my data sound after this incident"; on a store written only by convostore, it
finds nothing. ``convostore check DB [--repair] [--json]`` runs it from the command line.

A check reads a session at a time, each statement one snapshot: writers may go on meanwhile.
The repairs are planned from what the reads saw and run after them, each fix re-checking only
what the store's own operations check (a payload is collected only if nothing refers to it
then): run ``repair=True`` on a store nobody is writing, as after an incident. The report
holds one :class:`Problem` per finding (a count for the search index's), so its size follows
the damage, not the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._core import StoreCore
from ._checks import SessionCheck, check_store, index_flavor
from ._repair import Plan
from ._report import (
    CHAIN_FLAG,
    CHANGE_LOG_GAP,
    COMPACTION_ENDS,
    DIRECTORY_COUNTS,
    INCOMPLETE_PAYLOAD,
    KINDS,
    MISSING_CONTINUATION,
    MISSING_PARENT,
    MISSING_PAYLOAD,
    MISSING_REFERENCE,
    PARENT_LOOP,
    REPAIRABLE,
    SEARCH_INDEX_MISSING,
    SEARCH_INDEX_STALE,
    STRAY_CONTINUATION,
    STRAY_REFERENCE,
    UNREADABLE_MESSAGE,
    UNREFERENCED_PAYLOAD,
    CheckReport,
    Found,
    Problem,
)
from ._sql import SESSION_COUNT, session_page

__all__ = [
    "CHAIN_FLAG", "CHANGE_LOG_GAP", "COMPACTION_ENDS", "DIRECTORY_COUNTS", "INCOMPLETE_PAYLOAD",
    "KINDS", "MISSING_CONTINUATION", "MISSING_PARENT", "MISSING_PAYLOAD", "MISSING_REFERENCE",
    "PARENT_LOOP", "REPAIRABLE", "SEARCH_INDEX_MISSING", "SEARCH_INDEX_STALE",
    "STRAY_CONTINUATION", "STRAY_REFERENCE", "UNREADABLE_MESSAGE", "UNREFERENCED_PAYLOAD",
    "CheckReport", "Problem", "run_check",
]

Progress = Callable[[int, int], object]
"""``progress(done, total)``: sessions checked so far, and how many the store held when the
check began."""

_SESSIONS_PAGE = 200


def run_check(
    core: StoreCore, *, repair: bool = False, progress: Progress | None = None
) -> CheckReport:
    """Check a store (see the module docstring); what :meth:`Sessions.check` runs.

    :param repair: fix the repairable problems after the reads.
    :param progress: called after each session.
    """
    found, plan = Found(), Plan()
    with core.backend.read() as raw:
        ops: Any = raw  # the statements run through the scope's own runner (see _sql)
        total = int(ops._all(SESSION_COUNT)[0][0])
        indexed = index_flavor(ops)
    after: str | None = None
    while True:
        with core.backend.read() as raw:
            ops = raw
            page = [r[0] for r in ops._all(session_page(after is None),
                                           (after or "",) * 5 + (_SESSIONS_PAGE,))]
        for sid in page:
            SessionCheck(core, sid, found, plan, indexed).run()
            found.sessions += 1
            if progress is not None:
                progress(found.sessions, max(total, found.sessions))
        if len(page) < _SESSIONS_PAGE:
            break
        after = page[-1]
    check_store(core, found, plan)
    return found.report(repair, plan.run(core) if repair else set())

"""The repairs a check planned, run in write scopes of the store after the reads.

Each session's fixes run in one write scope of that session (its epoch bumped, so memoised
derived values are recomputed); the store-wide ones (payload collection, the change log's
horizon, the directory recount) in one store-wide scope; the search index last: emptied if it
holds stale entries, its backfill restarted, then built again in the short steps of
:meth:`Sessions.build_search_index <convostore.Sessions.build_search_index>` (a message that
has an entry keeps it). No fix deletes a message or changes its content.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._core import StoreCore
from ..search._index import SearchIndex, restart_backfill
from . import _sql as q

Fix = Callable[[Any], object]
"""A repair: called with the operations of a write scope."""


class Plan:
    """The fixes of the problems found so far, by the index of the problem they fix."""

    def __init__(self) -> None:
        self._sessions: dict[str, list[tuple[int, Fix]]] = {}
        self._store: list[tuple[int, Fix]] = []
        self._recount: list[int] = []
        self._reindex: list[int] = []
        self._clear: list[int] = []

    def session(self, session_id: str, index: int, fix: Fix) -> None:
        """Fix problem ``index`` in a write scope of ``session_id``."""
        self._sessions.setdefault(session_id, []).append((index, fix))

    def store(self, index: int, fix: Fix) -> None:
        """Fix problem ``index`` in the store-wide write scope."""
        self._store.append((index, fix))

    def recount(self, index: int) -> None:
        """Problem ``index`` is fixed by recounting the directory (once for all)."""
        self._recount.append(index)

    def reindex(self, index: int) -> None:
        """Problem ``index`` is fixed by indexing what has no search entry."""
        self._reindex.append(index)

    def clear_index(self, index: int) -> None:
        """Problem ``index`` is fixed by emptying the search index and building it again."""
        self._clear.append(index)

    def run(self, core: StoreCore) -> set[int]:
        """Run every fix; returns the indexes of the problems fixed."""
        fixed: set[int] = set()
        for sid, fixes in self._sessions.items():
            with core.backend.write(sid) as ops:
                for _i, fix in fixes:
                    fix(ops)
                ops.bump_epoch(sid)
            fixed.update(i for i, _fix in fixes)
        if self._store or self._recount:
            with core.backend.write(None) as ops:
                for _i, fix in self._store:
                    fix(ops)
                if self._recount:
                    ops.dir_recount()
            fixed.update(i for i, _fix in self._store)
            fixed.update(self._recount)
        if self._reindex or self._clear:
            with core.backend.write(None) as raw:
                scope: Any = raw
                if self._clear:
                    flavor = scope.existing_tables([q.FTS_DOCSIZE])
                    scope._run(q.CLEAR_SQLITE if flavor else q.CLEAR_PG)
                restart_backfill(raw)
            # A fresh builder: the store's own has seen the index complete and would not look.
            SearchIndex(core.backend, tool_output=core.search_tool_output).build()
            fixed.update(self._reindex + self._clear)
        return fixed

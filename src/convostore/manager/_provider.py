"""The manager's search provider for a context block: :class:`HistorySearchProvider`.
Published by :mod:`convostore.manager`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._sync import SessionManager


class HistorySearchProvider:
    """A read-only searchable block over a :class:`SessionManager`'s sessions.

    ``get()`` is ``"<n> session(s) available for search."`` (None when there are none);
    ``search(query)`` is what ``session_search`` answers, or None when nothing matches.
    """

    def __init__(self, manager: SessionManager, label: str) -> None:
        if not isinstance(label, str) or not label:
            raise TypeError(f"label must be a non-empty string, not {label!r}")
        self._manager = manager
        self.label = label
        """The label of the block this provider is meant for."""

    def __repr__(self) -> str:
        return f"<HistorySearchProvider label={self.label!r}>"

    def get(self) -> str | None:
        """How many sessions can be searched."""
        return self._manager._history_summary()

    def search(self, query: str) -> str | None:
        """The best 10 hits across the managed sessions, or None."""
        return self._manager._search_text(query)

"""What the async manager and its search provider hold beyond their generated methods.

The generated classes (``_async.py``) derive every method from :class:`SessionManager` and
:class:`HistorySearchProvider`; these bases hold the wrapped sync object, the async store whose
worker runs it, and the members that are state rather than calls.
"""

from __future__ import annotations

from ..aio import AsyncSessions
from ._provider import HistorySearchProvider
from ._sync import SessionManager


class AsyncManagerBase:
    """The async store and the sync manager over its ``sync`` store."""

    def __init__(self, store: AsyncSessions) -> None:
        """:param store: the async store whose sessions the manager registers."""
        if not isinstance(store, AsyncSessions):
            raise TypeError(
                "AsyncSessionManager needs a convostore.AsyncSessions store, "
                f"not {type(store).__name__}"
            )
        self._store = store
        self._sync = SessionManager(store.sync)

    def __repr__(self) -> str:
        return f"<AsyncSessionManager of {self._store!r}>"

    @property
    def store(self) -> AsyncSessions:
        """The store whose sessions this manager registers."""
        return self._store


class AsyncProviderBase:
    """The async store and the sync provider its worker runs."""

    def __init__(self, store: AsyncSessions, provider: HistorySearchProvider) -> None:
        """:param store: the async store whose worker runs ``provider``'s methods.
        :param provider: the sync provider, over the manager of ``store.sync``.
        """
        self._store = store
        self._provider = provider

    def __repr__(self) -> str:
        return f"<AsyncHistorySearchProvider label={self.label!r}>"

    @property
    def label(self) -> str:
        """The label of the block this provider is meant for."""
        return self._provider.label

"""A directory of conversations: names, lineage, usage, cross-session search.

A :class:`SessionManager` keeps one registry row per managed session (table
``convostore_registry``, created by the manager's first write; a plain store never creates it)
beside the sessions themselves, which stay ordinary sessions of the store::

    from convostore import Sessions
    from convostore.manager import SessionManager

    store = Sessions.open("agent.db")
    manager = SessionManager(store)
    info = manager.create("Deploy help", model="gpt-5", source="web")
    manager.append(info.id, {"role": "user", "parts": [{"type": "text", "text": "hi"}]})
    manager.add_usage(info.id, input_tokens=12, output_tokens=40, cost=0.0004)
    for info in manager.list(limit=20): ...              # most recently updated first
    forked = manager.fork(info.id, at_message_id, "Try another way")
    manager.search("deploy failed")                       # every word, all managed sessions

Rules the whole API follows:

- **Unknown ids.** :meth:`SessionManager.get` returns None for an id without a registry row;
  every other method that takes a session id raises :class:`UnknownSession` (a ``KeyError``)
  and writes nothing. Sessions written without the manager (or lifted from the reference's
  database, whose registry is not kept) are not managed: reach them with ``store.session(id)``.
- **updated_at.** Every registry write sets ``updated_at``; so does every message write made
  through the manager (the row is touched first, in its own transaction, then the message is
  written). Times are epoch milliseconds.
- **Listing.** :meth:`SessionManager.list` orders by ``updated_at`` descending, then id
  descending for rows updated in the same millisecond. Pages are keyset pages: pass the id of
  the last session of a page as ``before`` to get the next one.
- **Costs.** A registry read is one indexed point query; a message helper adds one registry
  transaction (writes) or one point read (reads) to the session call it wraps. ``fork`` and
  ``compact_and_split`` are several transactions: a failure part way leaves the new session
  partly written, never the source changed (except its ``end_reason``).

The model-facing side: :meth:`SessionManager.tools` defines ``session_search`` and
:meth:`SessionManager.execute` runs it (a string, never an exception);
:meth:`SessionManager.with_searchable_history` gives a read-only search provider for a
:class:`convostore.context.Context` block. :class:`AsyncSessionManager` is the same over an
:class:`~convostore.AsyncSessions`, each call run on the store's worker.
"""

from __future__ import annotations

from ._async import AsyncHistorySearchProvider, AsyncSessionManager
from ._provider import HistorySearchProvider
from ._records import SessionInfo, UnknownMessage, UnknownSession
from ._sync import CONTINUATION_PREFIX, SESSION_SEARCH, SessionManager

__all__ = [
    "CONTINUATION_PREFIX",
    "SESSION_SEARCH",
    "AsyncHistorySearchProvider",
    "AsyncSessionManager",
    "HistorySearchProvider",
    "SessionInfo",
    "SessionManager",
    "UnknownMessage",
    "UnknownSession",
]

# Tracebacks, reprs and pickles name this module, not the private ones that define the classes
# (test_exported_names fails if a class of __all__ is missing here).
for _cls in (
    AsyncHistorySearchProvider, AsyncSessionManager, HistorySearchProvider, SessionInfo,
    SessionManager, UnknownMessage, UnknownSession,
):
    _cls.__module__ = __name__
del _cls

"""AsyncSessions: the store for asyncio applications, a generated shell over the sync core.

The behaviour is written once, in :mod:`convostore.session`; this module only moves each call to
a worker thread and awaits it. ``await async_session.get_message(id)`` runs
``Session.get_message(id)`` on the store's worker; :meth:`AsyncSession.history` pulls one message
per step from the sync generator running there, so a streamed read keeps the bounded-memory
property of the sync one. The event loop only waits.

The methods are generated from the sync classes by ``tools/gen_async.py`` (``_store.py``,
``_session.py``); what is not a derivation is written by hand in their bases (``_base.py``:
opening, closing, watching; ``_handle.py``) and the worker threads in ``_worker.py``.

Threads
    One :class:`~concurrent.futures.ThreadPoolExecutor` per store. SQLite gets one thread, which
    opens and owns the store's single connection. PostgreSQL gets one thread per pool connection
    (``pool_size``): each call borrows a connection for one transaction and mostly waits on the
    network, so that many calls can be in flight while the server serialises writers of one
    session. psycopg's async connections would save the threads but need a second copy of every
    backend operation; a thread pool needs none.

Callbacks
    Change listeners, compaction functions and ``on_compaction_error`` handlers may be
    ``async``. The core hands what they return to its awaiter, which for an async store
    submits it to the event loop that opened the store and waits on the worker thread for the
    result, so async callbacks run on your loop (where your model client lives) and the loop
    thread is never blocked. Plain listeners run on the worker thread, as in the sync API. While
    a worker waits for such a callback, new calls go to a few spare threads instead of queueing
    behind it, so a callback that calls the store again (or a slow summariser) cannot deadlock
    the store. A plain (sync) compaction function, by contrast, runs on the worker and holds it
    for as long as it takes when ``compact()`` is awaited: give the async store an async
    summariser. Automatic compaction never runs on the workers: it is a task of the store's
    loop (a task of the loop) whose sync part runs in a thread of the
    loop's default executor.

Watching
    :meth:`AsyncSessions.watch` reads the change log on the workers one batch per step and
    waits for the next change on the loop (woken from the store's feed thread), so an idle
    watcher holds no thread.

Cancellation
    Each call is shielded: cancelling the awaiting task raises :class:`asyncio.CancelledError`
    in it at once, while the worker finishes the call. Every write is one transaction, so a
    cancelled write is either wholly stored (it had been submitted) or never started; a message
    is never half written.
"""

from __future__ import annotations

from ._base import Opening
from ._session import AsyncSession
from ._store import AsyncSessions

__all__ = ["AsyncSession", "AsyncSessions", "Opening"]

Opening.__module__ = __name__  # documented and named here, its public module

"""Google ADK's session service on convostore.

:class:`ConvostoreSessionService` is a ``google.adk.sessions.BaseSessionService``: give it to a
``Runner`` in place of ADK's ``DatabaseSessionService``::

    from google.adk.runners import Runner
    from convostore.integrations.adk import ConvostoreSessionService

    service = ConvostoreSessionService("postgresql://localhost/app")
    runner = Runner(agent=agent, app_name="weather", session_service=service)

It follows ADK's own services: ``app:`` state is shared by every user of the app, ``user:``
state by every session of the user, ``temp:`` state lives only in the session object of the
current invocation and is never stored; a session loaded before another writer appended to it
is refused (``StaleSessionError``, a ``ValueError``), and appends to one session in this
process run one at a time. ``get_session`` reads events newest first and stops at
``num_recent_events`` or ``after_timestamp``; ``list_sessions`` reads the directory, never an
event.

Every event is one message of the session (its text searchable, the whole event kept as JSON),
so search, the viewer, dumps and the change feed see ADK conversations like any other; see
:mod:`._adk_store` for the layout.

Given a URL, services of one process share one store per URL and options, opened on first use
(off the event loop) and closed with its last user. Every method runs its I/O on a worker
thread: the event loop never waits on the database.

Needs ``pip install 'convostore[adk]'``.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from . import missing
from ._store_ref import StoreRef

try:
    from google.adk.events.event import Event
    from google.adk.platform import time as platform_time
    from google.adk.platform import uuid as platform_uuid
    from google.adk.sessions.base_session_service import (
        BaseSessionService,
        GetSessionConfig,
        ListSessionsResponse,
    )
    from google.adk.sessions.session import Session
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing("adk", "Google ADK", "google-adk", "adk") from exc

from . import _adk_store as _ops

if TYPE_CHECKING:
    from ..aio import AsyncSessions
    from ..store import Sessions

__all__ = ["EVENT_PART_TYPE", "ConvostoreSessionService"]

EVENT_PART_TYPE = _ops.EVENT_PART_TYPE
"""The message part that holds an ADK event's JSON form."""


def _clean(session_id: str) -> str:
    # ADK's in-memory and SQLite services strip a padded id; so does this one
    return session_id.strip() if session_id else session_id


class ConvostoreSessionService(BaseSessionService):
    """ADK's session service over a convostore store.

    :param store: a URL or path (the process's shared store for it is used from the first
        call; :meth:`close` gives it back), an open :class:`~convostore.Sessions` or an open
        :class:`~convostore.aio.AsyncSessions`. A store given as an object is never closed here.
    :param open_options: passed to :meth:`Sessions.open` when ``store`` is a URL.
    """

    def __init__(
        self,
        store: str | os.PathLike[str] | Sessions | AsyncSessions,
        **open_options: Any,
    ) -> None:
        self._ref = StoreRef(store, open_options, kind="ConvostoreSessionService")
        self._locks = _ops.Locks()
        self._appending: dict[tuple[str, str, str], tuple[asyncio.Lock, int]] = {}

    @property
    def store(self) -> Sessions:
        """The underlying sync store (for a URL, the first use opens it: blocking)."""
        return self._ref.sessions()

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session; ``app:`` and ``user:`` keys of ``state`` go to the shared state.

        :raises AlreadyExistsError: ``session_id`` is taken for this app and user.
        """
        sid = _clean(session_id) if session_id else None
        sid = sid or platform_uuid.new_uuid()
        return await self._ref.call(_ops.create, self._locks, app_name, user_id, state, sid,
                                    platform_time.get_time())

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its events, oldest first, and its merged state; None if absent.

        ``config.num_recent_events`` and ``config.after_timestamp`` bound a newest-first read:
        older events are never loaded.
        """
        return await self._ref.call(_ops.get, app_name, user_id, _clean(session_id), config)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's sessions (one user's, or every user's), without events, oldest update
        first; read from the directory page by page."""
        sessions = await self._ref.call(_ops.list_all, app_name, user_id)
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete a session and its events (the app's and user's state stay)."""
        await self._ref.call(_ops.delete, self._locks, app_name, user_id, _clean(session_id))

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's ``user:`` state, keys without the prefix (empty when none)."""
        return await self._ref.call(_ops.user_state, app_name, user_id)

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store a (non-partial) event and apply its state delta, then add it to ``session``.

        :raises StaleSessionError: another writer appended since ``session`` was loaded.
        :raises SessionNotFoundError: the session is not stored.
        """
        if event.partial:
            return event
        # temp: state reaches the in-memory session (the rest of this invocation reads it)
        # and is trimmed from the event before anything is stored
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        key = (session.app_name, session.user_id, session.id)
        lock, count = self._appending.get(key, (asyncio.Lock(), 0))
        self._appending[key] = (lock, count + 1)
        try:
            # one append of a session at a time, its in-memory session updated before the
            # next starts: the next one's revision check reads the marker this one set
            async with lock:
                updated, marker = await self._ref.call(_ops.append, self._locks, session, event)
                session.last_update_time = updated
                session._storage_update_marker = marker
                return self._commit_event_to_session(session, event)
        finally:
            lock, count = self._appending[key]
            if count == 1:
                del self._appending[key]
            else:
                self._appending[key] = (lock, count - 1)

    def close(self) -> None:
        """Give a shared store back (closed with its last user); a store given as an object
        stays open. Idempotent."""
        self._ref.close()

    async def aclose(self) -> None:
        """Async twin of :meth:`close` (a last close runs off the event loop)."""
        await self._ref.aclose()

    async def __aenter__(self) -> ConvostoreSessionService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

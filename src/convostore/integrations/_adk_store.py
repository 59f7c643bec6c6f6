"""Google ADK sessions stored in convostore: the behaviour, written once as sync functions of a
:class:`~convostore.Sessions` store (``convostore.integrations.adk`` runs them off the loop).

Layout:

- an ADK session ``(app, user, id)`` is the convostore session ``adk/<app>/<user>/<id>`` (each
  part percent-encoded, so no two triples share an id); its directory entry has the owner
  ``adk/<app>/<user>`` (listings by app and user are served by the owner index) and the
  metadata ``adk_app``, ``adk_user``, ``adk_session``, ``adk_state`` (the session-scoped
  state), ``adk_updated`` (ADK's ``last_update_time``, the last event's timestamp) and
  ``adk_rev`` (the revision the stale-session check compares), ``adk_last_event`` (the last
  event's id, for a session object built by hand);
- an append is one write scope of that session: the stale-session check, the event's message
  and every state change commit together;
- each event is one message of that session: its text parts as ``text`` parts (searchable), and
  the whole event, ``model_dump(mode="json", exclude_none=True)`` as ADK's own database
  service stores it, in a ``data-adk-event`` part (lossless);
- ``app:`` state lives in the metadata of the internal session ``convostore:adk:app/<app>``
  and ``user:`` state in ``convostore:adk:user/<app>/<user>`` (hidden from listings, kept when
  a session is deleted, as ADK keeps them); ``temp:`` state is never stored.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar
from urllib.parse import quote

from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions import _session_util
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session
from google.adk.sessions.state import State

from .. import codec, limits
from ..backends.base import Ops, ScopeRetry
from ..codec import new_message_id
from ..directory._life import entry
from ..directory._records import SessionEntry
from ..messages._writes import Writer, now_ms
from ..model import UNSET, ChangeEvent, Message
from ..session import Session as StoredSession
from ..store import Sessions

EVENT_PART_TYPE = "data-adk-event"
"""The part holding an event's JSON form (``Event.model_dump(mode="json")``)."""

T = TypeVar("T")
_PAGE = 500
_STALE = ("The session has been modified in storage since it was loaded. "
          "Please reload the session before appending more events.")


def session_key(app_name: str, user_id: str, session_id: str) -> str:
    """The convostore session id of an ADK session."""
    return f"{owner_key(app_name, user_id)}/{quote(session_id, safe='')}"


def owner_key(app_name: str, user_id: str) -> str:
    """The directory owner of an app's user's ADK sessions."""
    return f"adk/{quote(app_name, safe='')}/{quote(user_id, safe='')}"


def _app_state_key(app_name: str) -> str:
    return f"convostore:adk:app/{quote(app_name, safe='')}"


def _user_state_key(app_name: str, user_id: str) -> str:
    return f"convostore:adk:user/{quote(app_name, safe='')}/{quote(user_id, safe='')}"


class Locks:
    """In-process locks: one per ADK session (appends), one for the shared state rows."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._by_key: dict[str, tuple[threading.Lock, int]] = {}
        self.state = threading.Lock()
        """Held for a read-modify-write of ``app:`` or ``user:`` state."""

    def shared(self, needed: bool) -> AbstractContextManager[object]:
        """The state lock when ``needed`` (the write changes ``app:`` or ``user:`` state)."""
        return self.state if needed else nullcontext()

    def hold(self, key: str) -> _Held:
        """A context manager holding the lock of ``key`` (forgotten when nobody holds it)."""
        return _Held(self, key)


class _Held:
    def __init__(self, locks: Locks, key: str) -> None:
        self._locks, self._key = locks, key

    def __enter__(self) -> None:
        locks = self._locks
        with locks._guard:
            lock, count = locks._by_key.get(self._key, (threading.Lock(), 0))
            locks._by_key[self._key] = (lock, count + 1)
        lock.acquire()

    def __exit__(self, *exc: object) -> None:
        locks = self._locks
        with locks._guard:
            lock, count = locks._by_key[self._key]
            lock.release()
            if count == 1:
                del locks._by_key[self._key]
            else:
                locks._by_key[self._key] = (lock, count - 1)


# --- events as messages ---------------------------------------------------------------------


def to_message(event: Event) -> Message:
    """The stored message of an ADK event (its text parts, then the whole event)."""
    parts: list[dict[str, Any]] = []
    if event.content is not None and event.content.parts:
        for part in event.content.parts:
            if part.text and not part.thought:
                parts.append({"type": "text", "text": part.text})
    parts.append({"type": EVENT_PART_TYPE,
                  "data": event.model_dump(mode="json", exclude_none=True)})
    role = "user" if event.author == "user" else "assistant"
    return {"id": new_message_id(), "role": role, "parts": parts}


def from_message(message: Message) -> Event | None:
    """The ADK event a stored message holds, or None (a message written by other means)."""
    for part in message.get("parts") or ():
        if isinstance(part, dict) and part.get("type") == EVENT_PART_TYPE:
            data = part.get("data")
            if isinstance(data, dict):
                return Event.model_validate(data)
    return None


def _events_newest_first(conv: StoredSession) -> Iterator[Event]:
    for message in conv.history(newest_first=True):
        event = from_message(message)
        if event is not None:
            yield event


# --- state ------------------------------------------------------------------------------------


def _adk_meta(entry: SessionEntry | None, app_name: str, user_id: str) -> dict[str, Any] | None:
    if entry is None:
        return None
    meta = entry.metadata
    if meta.get("adk_app") != app_name or meta.get("adk_user") != user_id:
        return None
    return meta


def _scoped(store: Sessions, key: str) -> dict[str, Any]:
    entry = store.session(key).get_info()
    state = entry.metadata.get("state") if entry is not None else None
    return dict(state) if isinstance(state, dict) else {}


def merged_state(store: Sessions, app_name: str, user_id: str,
                 session_state: dict[str, Any],
                 app_state: dict[str, Any] | None = None) -> dict[str, Any]:
    """The session's state with ``app:`` and ``user:`` state merged in, as ADK returns it."""
    merged = dict(session_state)
    if app_state is None:
        app_state = _scoped(store, _app_state_key(app_name))
    for key, value in app_state.items():
        merged[State.APP_PREFIX + key] = value
    for key, value in _scoped(store, _user_state_key(app_name, user_id)).items():
        merged[State.USER_PREFIX + key] = value
    return merged


def user_state(store: Sessions, app_name: str, user_id: str) -> dict[str, Any]:
    """The ``user:`` state of an app's user, keys without their prefix."""
    return _scoped(store, _user_state_key(app_name, user_id))


def _to_session(meta: dict[str, Any], state: dict[str, Any],
                events: list[Event] | None = None) -> Session:
    session = Session(id=meta["adk_session"], app_name=meta["adk_app"],
                      user_id=meta["adk_user"], state=state, events=events or [],
                      last_update_time=float(meta["adk_updated"]))
    session._storage_update_marker = str(meta["adk_rev"])
    return session


# --- the service's operations ---------------------------------------------------------------


def create(store: Sessions, locks: Locks, app_name: str, user_id: str,
           state: dict[str, Any] | None, session_id: str, now: float) -> Session:
    """Store a new session (AlreadyExistsError when the id is taken) and its scoped state, in
    one write scope of the session (two processes creating one id: one of them raises)."""
    key = session_key(app_name, user_id, session_id)
    owner = owner_key(app_name, user_id)
    limits.check_id("owner", owner)
    deltas = _session_util.extract_json_safe_state_delta(state or {})
    meta = {"adk_app": app_name, "adk_user": user_id, "adk_session": session_id,
            "adk_state": deltas["session"], "adk_updated": now, "adk_rev": 0}
    values = {"owner": owner, "title": session_id, "metadata": codec.dumps(meta)}

    def write() -> None:
        with store.core.backend.write(key) as ops:
            row = ops.dir_get(key)
            if _adk_meta(None if row is None else entry(row), app_name, user_id) is not None:
                raise AlreadyExistsError(f"Session with id {session_id} already exists.")
            stamp = now_ms()
            if deltas["app"]:
                _merge_in(ops, _app_state_key(app_name), deltas["app"], stamp)
            if deltas["user"]:
                _merge_in(ops, _user_state_key(app_name, user_id), deltas["user"], stamp)
            ops.dir_set(key, values, stamp)

    with locks.hold(key), locks.shared(bool(deltas["app"] or deltas["user"])):
        retried(write)
    return _to_session(meta, merged_state(store, app_name, user_id, deltas["session"]))


def get(store: Sessions, app_name: str, user_id: str, session_id: str,
        config: GetSessionConfig | None) -> Session | None:
    """The session with its events (newest-first reads stop at ``config``'s bounds)."""
    conv = store.session(session_key(app_name, user_id, session_id))
    meta = _adk_meta(conv.get_info(), app_name, user_id)
    if meta is None:
        return None
    limit = config.num_recent_events if config is not None else None
    after = config.after_timestamp if config is not None else None
    events: list[Event] = []
    if limit != 0:
        for event in _events_newest_first(conv):
            if after is not None and event.timestamp < after:
                break
            events.append(event)
            if limit is not None and len(events) >= limit:
                break
        events.reverse()
    state = merged_state(store, app_name, user_id, dict(meta["adk_state"]))
    return _to_session(meta, state, events)


def list_all(store: Sessions, app_name: str, user_id: str | None) -> list[Session]:
    """Every session of the app (of one user, or of all), without events, oldest update
    first (ties: user id, then session id), as the base class documents."""
    app_state = _scoped(store, _app_state_key(app_name))
    found: list[Session] = []
    user_states: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    while True:
        if user_id is not None:
            page = store.list_conversations(owner=owner_key(app_name, user_id),
                                            limit=_PAGE, cursor=cursor)
        else:
            page = store.list_conversations(metadata={"adk_app": app_name},
                                            limit=_PAGE, cursor=cursor)
        for listed in page.sessions:
            meta = listed.metadata
            uid = meta.get("adk_user")
            if meta.get("adk_app") != app_name or not isinstance(uid, str):
                continue
            if uid not in user_states:
                user_states[uid] = _scoped(store, _user_state_key(app_name, uid))
            state = dict(meta["adk_state"])
            for key, value in app_state.items():
                state[State.APP_PREFIX + key] = value
            for key, value in user_states[uid].items():
                state[State.USER_PREFIX + key] = value
            found.append(_to_session(meta, state))
        cursor = page.next_cursor
        if cursor is None:
            break
    found.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
    return found


def delete(store: Sessions, locks: Locks, app_name: str, user_id: str, session_id: str) -> None:
    """Delete the session and its events (its app's and user's state stay)."""
    key = session_key(app_name, user_id, session_id)
    with locks.hold(key):
        if _adk_meta(store.session(key).get_info(), app_name, user_id) is not None:
            store.delete_session(key)


def append(store: Sessions, locks: Locks, session: Session, event: Event) -> tuple[float, str]:
    """Store ``event`` (temp state already trimmed) after the stale-session check, and apply
    its state delta, in one transaction; returns the session's new ``last_update_time`` and
    revision marker.

    The transaction is a write scope of the session (PostgreSQL: a lock on the session id, so
    two processes appending to one session take turns; SQLite: the database's write lock): the
    revision is checked, the event appended to the one chain and every state changed, or
    nothing is. ``app:``/``user:`` state rows are shared by sessions, so their read-modify-write
    also holds this process's state lock.
    """
    app_name, user_id = session.app_name, session.user_id
    key = session_key(app_name, user_id, session.id)
    deltas = _session_util.extract_json_safe_state_delta(
        event.actions.state_delta if event.actions else {})
    core = store.core
    writer = Writer(core, key)
    prep = writer.prepare(to_message(event), "server")  # converted before the scope opens

    def write() -> tuple[int, Callable[[], int | None] | None]:
        with core.backend.write(key) as ops:
            row = ops.dir_get(key)
            meta = _adk_meta(None if row is None else entry(row), app_name, user_id)
            if meta is None:
                raise SessionNotFoundError(f"Session {session.id} not found.")
            _check_fresh(meta, session)
            logged = writer.insert_in(ops, prep, UNSET, now_ms(), verbatim=False)
            now = now_ms()
            if deltas["app"]:
                _merge_in(ops, _app_state_key(app_name), deltas["app"], now)
            if deltas["user"]:
                _merge_in(ops, _user_state_key(app_name, user_id), deltas["user"], now)
            rev = int(meta["adk_rev"]) + 1
            meta = {**meta, "adk_state": {**meta["adk_state"], **deltas["session"]},
                    "adk_updated": event.timestamp, "adk_rev": rev, "adk_last_event": event.id}
            ops.dir_set(key, {"metadata": codec.dumps(meta)}, now)
        return rev, None if logged is None else logged.committed

    with locks.hold(key), locks.shared(bool(deltas["app"] or deltas["user"])):
        rev, committed = retried(write)
    cursor = committed() if committed is not None else None  # wakes this process's watchers
    if cursor is not None and core.events.listened:
        core.events.emit(ChangeEvent("append", key, message=prep.message, parent_id=None,
                                     inserted=True, cursor=cursor))
    return event.timestamp, str(rev)


def retried(write: Callable[[], T]) -> T:
    """Run a write scope; run it once more if the engine rolled it back to be run again
    (:class:`~convostore.backends.base.ScopeRetry`: nothing was written)."""
    try:
        return write()
    except ScopeRetry:
        return write()


def _merge_in(ops: Ops, key: str, delta: dict[str, Any], now: int) -> None:
    row = ops.dir_get(key)
    state = entry(row).metadata.get("state") if row is not None else None
    merged = {**(state if isinstance(state, dict) else {}), **delta}
    ops.dir_set(key, {"metadata": codec.dumps({"state": merged})}, now)


def _check_fresh(meta: dict[str, Any], session: Session) -> None:
    """ADK's stale-session check: a session loaded here carries the revision it was loaded
    at; a session built by hand is stale only when storage moved past its last event."""
    marker = session._storage_update_marker
    if marker is not None:
        if marker != str(meta["adk_rev"]):
            raise StaleSessionError(_STALE)
        return
    if float(meta["adk_updated"]) <= session.last_update_time:
        return
    last = session.events[-1].id if session.events else None
    if meta.get("adk_last_event") != last:
        raise StaleSessionError(_STALE)

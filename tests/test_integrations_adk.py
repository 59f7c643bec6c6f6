"""ConvostoreSessionService: Google ADK's BaseSessionService over every backend.

The cases follow ADK's own session-service tests (state scopes, the stale-session check,
``GetSessionConfig``, listing), run against this service on each backend and API.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from conftest import BackendSpec

from convostore import Sessions

pytest.importorskip("google.adk",
                    reason="Google ADK is not installed: pip install 'convostore[adk]'")

from google.adk.errors.already_exists_error import AlreadyExistsError  # noqa: E402
from google.adk.errors.session_not_found_error import SessionNotFoundError  # noqa: E402
from google.adk.events.event import Event  # noqa: E402
from google.adk.events.event_actions import EventActions  # noqa: E402
from google.adk.sessions.base_session_service import (  # noqa: E402
    BaseSessionService,
    GetSessionConfig,
)
from google.adk.sessions.session import Session  # noqa: E402
from google.genai import types  # noqa: E402

from convostore.integrations._adk_store import Locks, create  # noqa: E402
from convostore.integrations.adk import (  # noqa: E402
    EVENT_PART_TYPE,
    ConvostoreSessionService,
)

Main = Callable[[ConvostoreSessionService], Awaitable[None]]


def backing(store: Any) -> Any:
    """The Sessions, or the AsyncSessions under the test suite's blocking adapter."""
    return getattr(store, "_inner", store)


def backing_sync(store: Any) -> Sessions:
    """The sync Sessions under either API."""
    inner = backing(store)
    sync: Sessions = inner if isinstance(inner, Sessions) else inner.sync
    return sync


def run(store: Sessions, main: Main) -> None:
    async def wrapped() -> None:
        async with ConvostoreSessionService(backing(store)) as service:
            await main(service)

    asyncio.run(wrapped())


def delta(**state: Any) -> EventActions:
    return EventActions(state_delta=state)


def with_prefix(prefix: str, **state: Any) -> dict[str, Any]:
    return {f"{prefix}:{key}": value for key, value in state.items()}


def test_create_get_delete(store: Sessions) -> None:
    async def main(service: ConvostoreSessionService) -> None:
        assert isinstance(service, BaseSessionService)
        assert await service.get_session(app_name="app", user_id="u", session_id="x") is None
        session = await service.create_session(app_name="app", user_id="u",
                                               state={"key": "value"})
        assert session.id and session.state == {"key": "value"}
        assert session.last_update_time <= time.time()
        got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert got == session  # the revision marker too
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name="app", user_id="u", session_id=session.id)
        await service.delete_session(app_name="app", user_id="u", session_id=session.id)
        assert await service.get_session(app_name="app", user_id="u",
                                         session_id=session.id) is None

    run(store, main)


def test_app_user_session_and_temp_state(store: Sessions) -> None:
    async def main(service: ConvostoreSessionService) -> None:
        s1 = await service.create_session(app_name="app", user_id="u1", session_id="s1",
                                          state={**with_prefix("app", k1="v1"), "sk1": "v1",
                                                 **with_prefix("user", k1="v1")})
        await service.append_event(s1, Event(invocation_id="i", author="user", actions=delta(
            **{"app:k2": "v2", "user:k2": "v2", "sk2": "v2", "temp:t": "v"})))
        assert s1.state["temp:t"] == "v"  # this invocation still reads it
        assert "temp:t" not in s1.events[0].actions.state_delta  # never stored
        s1b = await service.create_session(app_name="app", user_id="u1", session_id="s1b")
        assert s1b.state == {**with_prefix("app", k1="v1", k2="v2"),
                             **with_prefix("user", k1="v1", k2="v2")}
        s2 = await service.create_session(app_name="app", user_id="u2", session_id="s2")
        assert s2.state == with_prefix("app", k1="v1", k2="v2")
        other = await service.create_session(app_name="other", user_id="u1", session_id="s")
        assert other.state == {}
        got = await service.get_session(app_name="app", user_id="u1", session_id="s1")
        assert got is not None
        assert got.state == {"sk1": "v1", "sk2": "v2", **with_prefix("app", k1="v1", k2="v2"),
                             **with_prefix("user", k1="v1", k2="v2")}
        assert await service.get_user_state(app_name="app", user_id="u1") == \
            {"k1": "v1", "k2": "v2"}
        assert await service.get_user_state(app_name="app", user_id="nobody") == {}

    run(store, main)


def test_events_round_trip_losslessly_and_searchable(store: Sessions) -> None:
    content = types.Content(role="user", parts=[
        types.Part(text="what is the weather in Paris"),
        types.Part.from_bytes(data=b"\x89PNG", mime_type="image/png")])

    async def main(service: ConvostoreSessionService) -> None:
        session = await service.create_session(app_name="app", user_id="u")
        event = Event(
            invocation_id="inv", author="user", content=content, turn_complete=True,
            actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent",
                                 escalate=True),
            long_running_tool_ids={"tool1"}, error_code="code", interrupted=True,
            grounding_metadata=types.GroundingMetadata(web_search_queries=["q"]),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=1, candidates_token_count=1, total_token_count=2),
            custom_metadata={"custom": "value"}, timestamp=1700000000.123,
        )
        await service.append_event(session, event)
        got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert got == session
        assert got is not None and got.events[0].content == content

    run(store, main)
    [entry] = store.list_conversations().sessions
    [message] = store.session(entry.session_id).get_history()
    assert message["role"] == "user"
    assert message["parts"][0] == {"type": "text", "text": "what is the weather in Paris"}
    assert message["parts"][1]["type"] == EVENT_PART_TYPE
    assert [r.session_id for r in store.search("weather Paris")] == [entry.session_id]


def test_get_session_config_reads_the_newest_events(store: Sessions) -> None:
    async def main(service: ConvostoreSessionService) -> None:
        session = await service.create_session(app_name="app", user_id="u")
        for i in range(1, 6):
            await service.append_event(session, Event(author="user", timestamp=i))

        async def read(**config: Any) -> list[float]:
            got = await service.get_session(app_name="app", user_id="u", session_id=session.id,
                                            config=GetSessionConfig(**config))
            assert got is not None
            return [e.timestamp for e in got.events]

        assert await read() == [1, 2, 3, 4, 5]
        assert await read(num_recent_events=0) == []
        assert await read(num_recent_events=3) == [3, 4, 5]
        assert await read(after_timestamp=4.0) == [4, 5]
        assert await read(after_timestamp=50) == []
        assert await read(after_timestamp=4.0, num_recent_events=3) == [4, 5]
        assert await read(num_recent_events=99) == [1, 2, 3, 4, 5]

    run(store, main)


def test_last_update_time_follows_the_event(store: Sessions) -> None:
    async def main(service: ConvostoreSessionService) -> None:
        session = await service.create_session(app_name="app", user_id="u")
        stamp = session.last_update_time + 10
        await service.append_event(session, Event(invocation_id="i", author="user",
                                                  timestamp=stamp))
        assert session.last_update_time == stamp
        got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert got is not None and got.last_update_time == stamp

    run(store, main)


def test_stale_session_is_refused(store: Sessions) -> None:
    async def main(service: ConvostoreSessionService) -> None:
        now = time.time()
        original = await service.create_session(app_name="app", user_id="u")
        await service.append_event(original, Event(invocation_id="inv1", author="user",
                                                    timestamp=now + 1, actions=delta(sk1="v1")))
        updated = await service.get_session(app_name="app", user_id="u", session_id=original.id)
        assert updated is not None
        await service.append_event(updated, Event(invocation_id="inv2", author="user",
                                                  timestamp=now + 2, actions=delta(sk2="v2")))
        with pytest.raises(ValueError, match="modified in storage"):
            await service.append_event(original, Event(invocation_id="inv3", author="user",
                                                       timestamp=now + 3,
                                                       actions=delta(sk3="v3")))
        final = await service.get_session(app_name="app", user_id="u", session_id=original.id)
        assert final is not None
        assert [e.invocation_id for e in final.events] == ["inv1", "inv2"]
        assert final.state == {"sk1": "v1", "sk2": "v2"}

    run(store, main)


def test_two_stale_copies_racing_one_wins(store: Sessions) -> None:
    async def main(service: ConvostoreSessionService) -> None:
        session = await service.create_session(app_name="app", user_id="u")
        for i in range(4):
            latest = await service.get_session(app_name="app", user_id="u",
                                               session_id=session.id)
            assert latest is not None
            copies = [latest.model_copy(deep=True) for _ in range(2)]
            results = await asyncio.gather(*(
                service.append_event(copy, Event(invocation_id=f"inv{i}-{n}", author="user",
                                                 actions=delta(**{f"sk{i}": n})))
                for n, copy in enumerate(copies)), return_exceptions=True)
            errors = [r for r in results if isinstance(r, Exception)]
            assert len(errors) == 1 and "modified in storage" in str(errors[0])
        final = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert final is not None and len(final.events) == 4

    run(store, main)


def test_a_session_built_by_hand_is_checked_against_the_last_event(store: Sessions) -> None:
    async def main(service: ConvostoreSessionService) -> None:
        session = await service.create_session(app_name="app", user_id="u", session_id="s")
        first = Event(invocation_id="inv1", author="user", timestamp=session.last_update_time + 1)
        await service.append_event(session, first)
        session._storage_update_marker = None
        session.last_update_time -= 0.0001  # a float round trip, not a new revision
        await service.append_event(session, Event(invocation_id="inv2", author="user",
                                                  timestamp=first.timestamp + 1))
        by_hand = Session(id="s", app_name="app", user_id="u", events=[first],
                          last_update_time=first.timestamp - 5)
        with pytest.raises(ValueError, match="modified in storage"):
            await service.append_event(by_hand, Event(invocation_id="inv3", author="user"))

    run(store, main)


def test_eight_concurrent_appends_keep_every_event_in_order(store: Sessions) -> None:
    async def main(service: ConvostoreSessionService) -> None:
        session = await service.create_session(app_name="app", user_id="u")
        events = [Event(invocation_id=f"inv{n}", author="user", actions=delta(**{f"k{n}": n}))
                  for n in range(8)]
        await asyncio.gather(*(service.append_event(session, e) for e in events))
        got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert got is not None
        # one chain: the stored order is the order the in-memory session saw
        assert [e.id for e in got.events] == [e.id for e in session.events]
        assert sorted(e.invocation_id for e in got.events) == sorted(f"inv{n}" for n in range(8))
        assert got.state == {f"k{n}": n for n in range(8)}

    run(store, main)
    [entry] = store.list_conversations().sessions
    assert len(store.session(entry.session_id).get_leaves()) == 1


def test_partial_events_and_missing_sessions(store: Sessions) -> None:
    async def main(service: ConvostoreSessionService) -> None:
        session = await service.create_session(app_name="app", user_id="u")
        await service.append_event(session, Event(author="user", partial=True))
        assert session.events == []
        got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert got is not None and got.events == []
        ghost = Session(id="ghost", app_name="app", user_id="u")
        with pytest.raises(SessionNotFoundError):
            await service.append_event(ghost, Event(author="user"))

    run(store, main)


def test_list_sessions_by_user_and_app(store: Sessions) -> None:
    async def main(service: ConvostoreSessionService) -> None:
        for user, sid in [("u1", "s1a"), ("u1", "s1b"), ("u2", "s2a")]:
            await service.create_session(app_name="app", user_id=user, session_id=sid,
                                         state={"key": sid, "user:who": user})
        await service.create_session(app_name="other", user_id="u1", session_id="x")
        first = await service.get_session(app_name="app", user_id="u1", session_id="s1a")
        assert first is not None
        await service.append_event(first, Event(author="user",
                                                timestamp=first.last_update_time + 100))
        mine = (await service.list_sessions(app_name="app", user_id="u1")).sessions
        assert [s.id for s in mine] == ["s1b", "s1a"]  # oldest update first
        assert all(s.events == [] for s in mine)
        assert mine[0].state == {"key": "s1b", "user:who": "u1"}
        every = (await service.list_sessions(app_name="app")).sessions
        assert {s.id for s in every} == {"s1a", "s1b", "s2a"}
        assert {s.id: s.state["user:who"] for s in every} == \
            {"s1a": "u1", "s1b": "u1", "s2a": "u2"}
        assert (await service.list_sessions(app_name="app", user_id="nobody")).sessions == []

    run(store, main)


def test_ids_are_kept_apart_and_padded_ids_stripped(store: Sessions) -> None:
    async def main(service: ConvostoreSessionService) -> None:
        await service.create_session(app_name="a/b", user_id="c", session_id="d")
        await service.create_session(app_name="a", user_id="b/c", session_id="d")
        await service.create_session(app_name="app", user_id="u", session_id="  padded ")
        assert await service.get_session(app_name="app", user_id="u", session_id="padded")
        assert len((await service.list_sessions(app_name="a/b")).sessions) == 1
        assert len((await service.list_sessions(app_name="a")).sessions) == 1
        await service.delete_session(app_name="app", user_id="u", session_id=" padded")
        assert await service.get_session(app_name="app", user_id="u",
                                         session_id="padded") is None

    run(store, main)


def test_given_a_url_the_store_is_shared_and_closed(tmp_path: Any) -> None:
    url = str(tmp_path / "adk.db")

    async def main() -> None:
        one, two = ConvostoreSessionService(url), ConvostoreSessionService(url)
        session = await one.create_session(app_name="app", user_id="u", session_id="s")
        assert await two.get_session(app_name="app", user_id="u", session_id="s") == session
        assert one.store is two.store
        await one.aclose()
        await two.aclose()
        with pytest.raises(RuntimeError):
            await one.get_session(app_name="app", user_id="u", session_id="s")

    asyncio.run(main())
    with Sessions.open(url) as store:
        assert len(store.list_conversations().sessions) == 1


@pytest.mark.slow
def test_list_sessions_at_ten_thousand_sessions(store: Sessions) -> None:
    users, per_user = 100, 100
    locks = Locks()
    sync = backing_sync(store)

    # created with the service's own sync step, four at a time (a server store has a pool)
    def make(n: int) -> Session:
        return create(sync, locks, "app", f"u{n % users}", {"n": n}, f"s{n}", 1000.0 + n)

    with ThreadPoolExecutor(4) as pool:
        assert len(list(pool.map(make, range(users * per_user)))) == users * per_user

    async def main(service: ConvostoreSessionService) -> None:
        started = time.perf_counter()
        mine = (await service.list_sessions(app_name="app", user_id="u7")).sessions
        one_user = time.perf_counter() - started
        assert [s.id for s in mine] == [f"s{n}" for n in range(7, users * per_user, users)]
        assert [s.state["n"] for s in mine] == list(range(7, users * per_user, users))
        every = (await service.list_sessions(app_name="app")).sessions
        assert len(every) == users * per_user
        assert [s.last_update_time for s in every] == sorted(s.last_update_time for s in every)
        # one user's listing reads that user's entries (the owner index), not all 10,000
        assert one_user < 5.0

    run(store, main)


@pytest.mark.requires("reopen")  # a file or a server: SQLite and PostgreSQL
def test_the_event_loop_never_waits(backend_spec: BackendSpec) -> None:
    """Every method, from a URL (the store opened and closed inside the loop), under
    BlockBuster: a blocking call on the event loop fails the test."""
    blockbuster = pytest.importorskip("blockbuster")

    async def main() -> None:
        service = ConvostoreSessionService(backend_spec.url, **backend_spec.options)
        session = await service.create_session(app_name="app", user_id="u",
                                               state={"app:a": 1, "user:b": 2})
        await service.append_event(session, Event(author="user", actions=delta(k=1)))
        got = await service.get_session(app_name="app", user_id="u", session_id=session.id,
                                        config=GetSessionConfig(num_recent_events=1))
        assert got is not None and len(got.events) == 1
        assert len((await service.list_sessions(app_name="app")).sessions) == 1
        assert await service.get_user_state(app_name="app", user_id="u") == {"b": 2}
        await service.delete_session(app_name="app", user_id="u", session_id=session.id)
        service.close()  # the sync close inside the loop: the store closes on a thread

    async def checked() -> None:
        guard = blockbuster.BlockBuster()
        guard.activate()
        try:
            await main()
        finally:
            guard.deactivate()

    asyncio.run(checked())


@pytest.mark.requires("shared_across_processes")
def test_two_stores_on_one_database_take_turns(open_store: Callable[..., Sessions]) -> None:
    """Two services on two stores (as two processes would be): the session's write scope, not
    an in-process lock, decides which of two creates of one id succeeds and which of two
    copies of one revision may append."""
    first, second = backing(open_store()), backing(open_store())

    async def main() -> None:
        async with ConvostoreSessionService(first) as one, \
                ConvostoreSessionService(second) as two:
            session = await one.create_session(app_name="app", user_id="u", session_id="s")
            created = await asyncio.gather(*(
                service.create_session(app_name="app", user_id="u", session_id="t",
                                       state={"user:by": n})
                for n, service in enumerate((one, two))), return_exceptions=True)
            assert sum(isinstance(r, AlreadyExistsError) for r in created) == 1
            for i in range(4):
                copies = [await service.get_session(app_name="app", user_id="u",
                                                    session_id="s") for service in (one, two)]
                results = await asyncio.gather(*(
                    service.append_event(copy, Event(invocation_id=f"inv{i}", author="user",
                                                     actions=delta(**{f"k{i}": n})))
                    for n, (service, copy) in enumerate(zip((one, two), copies, strict=True))
                    if copy is not None), return_exceptions=True)
                assert sum(isinstance(r, ValueError) for r in results) == 1
            final = await two.get_session(app_name="app", user_id="u", session_id=session.id)
            assert final is not None and len(final.events) == 4
            # the user state is one create's, never a mix
            assert final.state.pop("user:by") in (0, 1)
            assert sorted(final.state) == ["k0", "k1", "k2", "k3"]

    asyncio.run(main())

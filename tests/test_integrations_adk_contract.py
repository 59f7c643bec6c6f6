# mypy: ignore-errors
"""ADK's own session-service tests, run against :class:`ConvostoreSessionService`.

The cases are google-adk's ``tests/unittests/sessions/test_session_service.py`` (Apache-2.0,
google/adk-python at the pinned 2.13.0): its contract tests (those taking the ``session_service``
fixture) and its ``DatabaseSessionService`` stale-session and timestamp-drift tests, with the
service under test swapped for ours, on a SQLite file and, where a server is set, PostgreSQL.
Left out, being tests of another service's internals: ``DatabaseSessionService``'s SQLAlchemy
engine, pre-ping and read-only factory mocks, its rollback and commit spies, ``prepare_tables``,
``_get_or_create_state`` and row locking, the two "app/user state row missing" tests (they
delete its ORM rows), the timezone-dialect checks, ``SqliteSessionService``'s URL parsing,
``InMemorySessionService``'s same-object test and Vertex AI. Kept as ADK wrote them (hence no
type annotations); each ``async def`` test runs under ``asyncio.run``.
"""

import asyncio
import functools
import inspect
import os
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytest.importorskip("google.adk", reason="google-adk is not installed (extra: adk)")

from google.adk.errors.already_exists_error import AlreadyExistsError  # noqa: E402
from google.adk.events.event import Event  # noqa: E402
from google.adk.events.event_actions import EventActions  # noqa: E402
from google.adk.sessions.base_session_service import GetSessionConfig  # noqa: E402
from google.genai import types  # noqa: E402

from convostore import Sessions  # noqa: E402
from convostore.integrations.adk import ConvostoreSessionService  # noqa: E402

PG_URL = os.environ.get("CONVOSTORE_TEST_POSTGRES_URL")


@pytest.fixture(params=["sqlite", "postgres"] if PG_URL else ["sqlite"])
def session_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    if request.param == "sqlite":
        with Sessions.open(str(tmp_path / "adk.db")) as store:
            yield ConvostoreSessionService(store)
        return
    import psycopg

    schema = f"adk_contract_{uuid.uuid4().hex[:12]}"
    try:
        with Sessions.open(PG_URL, schema=schema) as store:
            yield ConvostoreSessionService(store)
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def test_get_empty_session(session_service):
    assert not await session_service.get_session(
        app_name="my_app", user_id="test_user", session_id="123"
    )


async def test_create_get_session(session_service):
    app_name = "my_app"
    user_id = "test_user"
    state = {"key": "value"}
    session = await session_service.create_session(app_name=app_name, user_id=user_id, state=state)
    assert session.app_name == app_name
    assert session.user_id == user_id
    assert session.id
    assert session.state == state
    assert session.last_update_time <= datetime.now().astimezone(timezone.utc).timestamp()
    got_session = await session_service.get_session(
        app_name=app_name, user_id=user_id, session_id=session.id
    )
    assert got_session == session
    assert got_session.last_update_time <= datetime.now().astimezone(timezone.utc).timestamp()
    await session_service.delete_session(app_name=app_name, user_id=user_id, session_id=session.id)
    assert (
        await session_service.get_session(app_name=app_name, user_id=user_id, session_id=session.id)
        is None
    )


async def test_create_and_list_sessions(session_service):
    session_ids = ["session" + str(i) for i in range(5)]
    for session_id in session_ids:
        await session_service.create_session(
            app_name="my_app",
            user_id="test_user",
            session_id=session_id,
            state={"key": "value" + session_id},
        )
    sessions = (
        await session_service.list_sessions(app_name="my_app", user_id="test_user")
    ).sessions
    assert len(sessions) == len(session_ids)
    assert {s.id for s in sessions} == set(session_ids)
    for session in sessions:
        assert session.state == {"key": "value" + session.id}


async def test_list_sessions_all_users(session_service):
    for u, s in [("user1", "session1a"), ("user1", "session1b"), ("user2", "session2a")]:
        await session_service.create_session(
            app_name="my_app", user_id=u, session_id=s, state={"key": "value" + s[7:]}
        )
    s1 = (await session_service.list_sessions(app_name="my_app", user_id="user1")).sessions
    assert len(s1) == 2
    m = {s.id: s for s in s1}
    assert m["session1a"].state == {"key": "value1a"}
    assert m["session1b"].state == {"key": "value1b"}
    s2 = (await session_service.list_sessions(app_name="my_app", user_id="user2")).sessions
    assert len(s2) == 1 and s2[0].id == "session2a" and s2[0].state == {"key": "value2a"}
    every = (await session_service.list_sessions(app_name="my_app", user_id=None)).sessions
    assert len(every) == 3
    m = {s.id: s for s in every}
    assert m["session1a"].state == {"key": "value1a"}
    assert m["session1b"].state == {"key": "value1b"}
    assert m["session2a"].state == {"key": "value2a"}


async def test_app_state_is_shared_by_all_users_of_app(session_service):
    session1 = await session_service.create_session(
        app_name="my_app", user_id="u1", session_id="s1", state={"app:k1": "v1"}
    )
    await session_service.append_event(
        session=session1,
        event=Event(
            invocation_id="inv1", author="user", actions=EventActions(state_delta={"app:k2": "v2"})
        ),
    )
    session2 = await session_service.create_session(
        app_name="my_app", user_id="u2", session_id="s2"
    )
    assert session2.state == {"app:k1": "v1", "app:k2": "v2"}
    got = await session_service.get_session(app_name="my_app", user_id="u1", session_id="s1")
    assert got.state.get("app:k1") == "v1"
    assert got.state.get("app:k2") == "v2"


async def test_user_state_is_shared_only_by_user_sessions(session_service):
    session1 = await session_service.create_session(
        app_name="my_app", user_id="u1", session_id="s1", state={"user:k1": "v1"}
    )
    await session_service.append_event(
        session=session1,
        event=Event(
            invocation_id="inv1", author="user", actions=EventActions(state_delta={"user:k2": "v2"})
        ),
    )
    session1b = await session_service.create_session(
        app_name="my_app", user_id="u1", session_id="s1b"
    )
    assert session1b.state == {"user:k1": "v1", "user:k2": "v2"}
    session2 = await session_service.create_session(
        app_name="my_app", user_id="u2", session_id="s2"
    )
    assert session2.state == {}


async def test_session_state_is_not_shared(session_service):
    session1 = await session_service.create_session(
        app_name="my_app", user_id="u1", session_id="s1", state={"sk1": "v1"}
    )
    await session_service.append_event(
        session=session1,
        event=Event(
            invocation_id="inv1", author="user", actions=EventActions(state_delta={"sk2": "v2"})
        ),
    )
    got = await session_service.get_session(app_name="my_app", user_id="u1", session_id="s1")
    assert got.state.get("sk1") == "v1"
    assert got.state.get("sk2") == "v2"
    session1b = await session_service.create_session(
        app_name="my_app", user_id="u1", session_id="s1b"
    )
    assert session1b.state == {}


async def test_temp_state_is_not_persisted_in_state_or_events(session_service):
    session = await session_service.create_session(app_name="my_app", user_id="u1", session_id="s1")
    event = Event(
        invocation_id="inv1",
        author="user",
        actions=EventActions(state_delta={"temp:k1": "v1", "sk": "v2"}),
    )
    await session_service.append_event(session=session, event=event)
    assert session.state.get("temp:k1") == "v1"
    assert session.state.get("sk") == "v2"
    assert "temp:k1" not in event.actions.state_delta
    assert event.actions.state_delta.get("sk") == "v2"


async def test_temp_state_visible_across_sequential_events(session_service):
    session = await session_service.create_session(
        app_name="my_app", user_id="u1", session_id="s_seq"
    )
    event1 = Event(
        invocation_id="inv1",
        author="agent1",
        actions=EventActions(state_delta={"temp:output": "result_from_a1"}),
    )
    await session_service.append_event(session=session, event=event1)
    assert session.state.get("temp:output") == "result_from_a1"
    assert "temp:output" not in event1.actions.state_delta


async def test_get_session_respects_user_id(session_service):
    session1 = await session_service.create_session(
        app_name="my_app", user_id="u1", session_id="s1"
    )
    await session_service.append_event(session1, Event(invocation_id="inv1", author="user"))
    await session_service.create_session(app_name="my_app", user_id="u2", session_id="s1")
    got = await session_service.get_session(app_name="my_app", user_id="u2", session_id="s1")
    assert got.user_id == "u2"
    assert len(got.events) == 0


async def test_create_session_with_existing_id_raises_error(session_service):
    await session_service.create_session(
        app_name="my_app", user_id="test_user", session_id="existing_session"
    )
    with pytest.raises(AlreadyExistsError):
        await session_service.create_session(
            app_name="my_app", user_id="test_user", session_id="existing_session"
        )


async def test_append_event_bytes(session_service):
    session = await session_service.create_session(app_name="my_app", user_id="user")
    test_content = types.Content(
        role="user", parts=[types.Part.from_bytes(data=b"test_image_data", mime_type="image/png")]
    )
    test_grounding_metadata = types.GroundingMetadata(
        search_entry_point=types.SearchEntryPoint(sdk_blob=b"test_sdk_blob")
    )
    event = Event(
        invocation_id="invocation",
        author="user",
        content=test_content,
        grounding_metadata=test_grounding_metadata,
    )
    await session_service.append_event(session=session, event=event)
    assert session.events[0].content == test_content
    session = await session_service.get_session(
        app_name="my_app", user_id="user", session_id=session.id
    )
    events = session.events
    assert len(events) == 1
    assert events[0].content == test_content
    assert events[0].grounding_metadata == test_grounding_metadata


async def test_append_event_complete(session_service):
    session = await session_service.create_session(app_name="my_app", user_id="user")
    event = Event(
        invocation_id="invocation",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="test_text")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["query1"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"custom_key": "custom_value"},
        timestamp=1700000000.123,
        input_transcription=types.Transcription(text="input transcription", finished=True),
        output_transcription=types.Transcription(text="output transcription", finished=True),
    )
    await session_service.append_event(session=session, event=event)
    assert (
        await session_service.get_session(app_name="my_app", user_id="user", session_id=session.id)
        == session
    )


async def test_session_last_update_time_updates_on_event(session_service):
    session = await session_service.create_session(app_name="my_app", user_id="user")
    original_update_time = session.last_update_time
    event_timestamp = original_update_time + 10
    await session_service.append_event(
        session=session,
        event=Event(invocation_id="invocation", author="user", timestamp=event_timestamp),
    )
    assert session.last_update_time == pytest.approx(event_timestamp, abs=1e-6)
    refreshed = await session_service.get_session(
        app_name="my_app", user_id="user", session_id=session.id
    )
    assert refreshed is not None
    assert refreshed.last_update_time == pytest.approx(event_timestamp, abs=1e-6)
    assert refreshed.last_update_time > original_update_time


async def test_get_session_with_config(session_service):
    n = 5
    session = await session_service.create_session(app_name="my_app", user_id="user")
    for i in range(1, n + 1):
        await session_service.append_event(session, Event(author="user", timestamp=i))
    s = await session_service.get_session(app_name="my_app", user_id="user", session_id=session.id)
    assert len(s.events) == n
    s = await session_service.get_session(
        app_name="my_app",
        user_id="user",
        session_id=session.id,
        config=GetSessionConfig(num_recent_events=0),
    )
    assert not s.events
    s = await session_service.get_session(
        app_name="my_app",
        user_id="user",
        session_id=session.id,
        config=GetSessionConfig(num_recent_events=3),
    )
    assert len(s.events) == 3 and s.events[0].timestamp == n - 3 + 1
    s = await session_service.get_session(
        app_name="my_app",
        user_id="user",
        session_id=session.id,
        config=GetSessionConfig(after_timestamp=4.0),
    )
    assert len(s.events) == n - 4.0 + 1 and s.events[0].timestamp == 4.0
    s = await session_service.get_session(
        app_name="my_app",
        user_id="user",
        session_id=session.id,
        config=GetSessionConfig(after_timestamp=n * 10),
    )
    assert not s.events
    s = await session_service.get_session(
        app_name="my_app",
        user_id="user",
        session_id=session.id,
        config=GetSessionConfig(after_timestamp=4.0, num_recent_events=3),
    )
    assert len(s.events) == n - 4.0 + 1


async def test_partial_events_are_not_persisted(session_service):
    session = await session_service.create_session(app_name="my_app", user_id="user")
    await session_service.append_event(session, Event(author="user", partial=True))
    assert len(session.events) == 0
    got = await session_service.get_session(
        app_name="my_app", user_id="user", session_id=session.id
    )
    assert len(got.events) == 0


async def test_append_event_to_stale_session(session_service):
    current_time = datetime.now().astimezone(timezone.utc).timestamp()
    original = await session_service.create_session(app_name="my_app", user_id="user")
    await session_service.append_event(
        original,
        Event(
            invocation_id="inv1",
            author="user",
            timestamp=current_time + 1,
            actions=EventActions(state_delta={"sk1": "v1"}),
        ),
    )
    updated = await session_service.get_session(
        app_name="my_app", user_id="user", session_id=original.id
    )
    await session_service.append_event(
        updated,
        Event(
            invocation_id="inv2",
            author="user",
            timestamp=current_time + 2,
            actions=EventActions(state_delta={"sk2": "v2"}),
        ),
    )
    assert original.last_update_time < updated.last_update_time
    assert len(original.events) == 1
    assert "sk2" not in original.state
    with pytest.raises(ValueError, match="modified in storage"):
        await session_service.append_event(
            original,
            Event(
                invocation_id="inv3",
                author="user",
                timestamp=current_time + 3,
                actions=EventActions(state_delta={"sk3": "v3"}),
            ),
        )
    final = await session_service.get_session(
        app_name="my_app", user_id="user", session_id=original.id
    )
    assert len(final.events) == 2
    assert final.state.get("sk1") == "v1"
    assert final.state.get("sk2") == "v2"
    assert final.state.get("sk3") is None
    assert [e.invocation_id for e in final.events] == ["inv1", "inv2"]


async def test_append_event_concurrent_stale_sessions_reject_stale_writer(session_service):
    session = await session_service.create_session(app_name="my_app", user_id="user")
    for i in range(8):
        latest = await session_service.get_session(
            app_name="my_app", user_id="user", session_id=session.id
        )
        s1 = latest.model_copy(deep=True)
        s2 = latest.model_copy(deep=True)
        base = latest.last_update_time + 10.0
        e1 = Event(
            invocation_id=f"inv{i}-1",
            author="user",
            timestamp=base + 1.0,
            actions=EventActions(state_delta={f"sk{i}-1": f"v{i}-1"}),
        )
        e2 = Event(
            invocation_id=f"inv{i}-2",
            author="user",
            timestamp=base + 2.0,
            actions=EventActions(state_delta={f"sk{i}-2": f"v{i}-2"}),
        )
        results = await asyncio.gather(
            session_service.append_event(s1, e1),
            session_service.append_event(s2, e2),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, Exception)]
        successes = [r for r in results if not isinstance(r, Exception)]
        assert len(successes) == 1 and len(errors) == 1
        assert isinstance(errors[0], ValueError) and "modified in storage" in str(errors[0])
    final = await session_service.get_session(
        app_name="my_app", user_id="user", session_id=session.id
    )
    for i in range(8):
        values = {final.state.get(f"sk{i}-1"), final.state.get(f"sk{i}-2")}
        assert values & {f"v{i}-1", f"v{i}-2"}
        assert None in values
    assert len(final.events) == 8


async def test_append_event_allows_timestamp_drift_for_current_session(session_service):
    session = await session_service.create_session(
        app_name="my_app", user_id="user", session_id="s1"
    )
    e1 = Event(invocation_id="inv1", author="user", timestamp=session.last_update_time + 10)
    await session_service.append_event(session, e1)
    session.last_update_time -= 0.0001
    await session_service.append_event(
        session, Event(invocation_id="inv2", author="user", timestamp=e1.timestamp + 10)
    )
    r = await session_service.get_session(app_name="my_app", user_id="user", session_id=session.id)
    assert [e.invocation_id for e in r.events] == ["inv1", "inv2"]


async def test_append_event_allows_markerless_current_session(session_service):
    session = await session_service.create_session(
        app_name="my_app", user_id="user", session_id="s1"
    )
    e1 = Event(invocation_id="inv1", author="user", timestamp=session.last_update_time + 10)
    await session_service.append_event(session, e1)
    session._storage_update_marker = None
    session.last_update_time -= 0.0001
    await session_service.append_event(
        session, Event(invocation_id="inv2", author="user", timestamp=e1.timestamp + 10)
    )
    r = await session_service.get_session(app_name="my_app", user_id="user", session_id=session.id)
    assert [e.invocation_id for e in r.events] == ["inv1", "inv2"]


async def test_get_user_state_returns_empty_dict_when_no_state_exists(session_service):
    assert not await session_service.get_user_state(app_name="my_app", user_id="u1")


async def test_get_user_state_returns_state_written_via_append_event(session_service):
    session = await session_service.create_session(app_name="my_app", user_id="u1")
    await session_service.append_event(
        session,
        Event(
            author="system",
            actions=EventActions(state_delta={"user:profile": {"name": "Alice"}, "session_key": 1}),
        ),
    )
    state = await session_service.get_user_state(app_name="my_app", user_id="u1")
    assert state == {"profile": {"name": "Alice"}}
    assert "session_key" not in state


async def test_get_user_state_is_not_visible_across_users(session_service):
    session = await session_service.create_session(app_name="my_app", user_id="u1")
    await session_service.append_event(
        session,
        Event(author="system", actions=EventActions(state_delta={"user:secret": "only-for-u1"})),
    )
    assert not await session_service.get_user_state(app_name="my_app", user_id="u2")


async def test_get_user_state_is_not_visible_across_apps(session_service):
    session = await session_service.create_session(app_name="my_app", user_id="u1")
    await session_service.append_event(
        session,
        Event(author="system", actions=EventActions(state_delta={"user:data": "only-app-a"})),
    )
    assert not await session_service.get_user_state(app_name="other_app", user_id="u1")


async def test_get_user_state_available_before_session_is_created(session_service):
    first = await session_service.create_session(app_name="my_app", user_id="u1")
    await session_service.append_event(
        first, Event(author="system", actions=EventActions(state_delta={"user:ctx": {"v": 1}}))
    )
    assert await session_service.get_user_state(app_name="my_app", user_id="u1") == {
        "ctx": {"v": 1}
    }


async def test_get_user_state_reflects_latest_write(session_service):
    session = await session_service.create_session(app_name="my_app", user_id="u1")
    await session_service.append_event(
        session, Event(author="system", actions=EventActions(state_delta={"user:counter": 1}))
    )
    await session_service.append_event(
        session, Event(author="system", actions=EventActions(state_delta={"user:counter": 2}))
    )
    assert (await session_service.get_user_state(app_name="my_app", user_id="u1"))["counter"] == 2


async def test_padded_session_id_reads_and_deletes(session_service):
    # the conformance registry's name for the padded-id contract (in-memory and sqlite strip)
    created = await session_service.create_session(
        app_name="my_app", user_id="u", session_id=" padded "
    )
    assert created.id == "padded"
    assert await session_service.get_session(app_name="my_app", user_id="u", session_id="padded ")
    await session_service.delete_session(app_name="my_app", user_id="u", session_id=" padded")
    assert (
        await session_service.get_session(app_name="my_app", user_id="u", session_id="padded")
        is None
    )


def _run(test):
    @functools.wraps(test)
    def run(*args, **kwargs):
        asyncio.run(test(*args, **kwargs))

    return run


for _name, _test in list(globals().items()):
    if _name.startswith("test_") and inspect.iscoroutinefunction(_test):
        globals()[_name] = _run(_test)

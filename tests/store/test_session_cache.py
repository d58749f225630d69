"""``SessionCache`` on the real stores (docs/adr/0070): a chat's history read once, then only
what is new; another instance's writes seen at the next read (two services on one SQLite file,
two on one PostgreSQL database); ADK's stale-session check still in force; deletes and
``forget`` drop what was cached; the memory bound evicts the least recently used chat."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from google.adk.errors import StaleSessionError
from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from adk_stream_protocol.store.session_cache import SessionCache
from adk_stream_protocol.store.sessions import FENCE_KEY, ChatSessions, create_session_service

APP = "cache-app"
USER = "u1"
BIG = 64 * 1024 * 1024

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.out_of_process)]
)
async def two_services(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[BaseSessionService, BaseSessionService]]:
    """Two session services on one store, as two instances of the server have."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'sessions.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    first, second = create_session_service(url), create_session_service(url)
    yield first, second
    for made in (first, second):
        close = getattr(made, "close", None)
        if close is not None:
            await close()


def _event(text: str, author: str = "user") -> Event:
    role = "user" if author == "user" else "model"
    return Event(
        author=author,
        invocation_id=f"e-{uuid.uuid4().hex[:8]}",
        content=types.Content(role=role, parts=[types.Part(text=text)]),
        timestamp=time.time(),
    )


def _texts(session: Session | None) -> list[str]:
    assert session is not None
    return [e.content.parts[0].text or "" for e in session.events if e.content and e.content.parts]


async def _read(service: BaseSessionService, chat: str) -> Session:
    session = await service.get_session(app_name=APP, user_id=USER, session_id=chat)
    assert session is not None
    return session


async def _new_chat(service: BaseSessionService, texts: list[str]) -> str:
    chat = f"c-{uuid.uuid4().hex[:8]}"
    session = await service.create_session(app_name=APP, user_id=USER, session_id=chat)
    for text in texts:
        await service.append_event(session, _event(text))
    return chat


async def test_a_chat_is_read_whole_once_then_only_its_revision(
    two_services: tuple[BaseSessionService, BaseSessionService],
) -> None:
    store, _ = two_services
    chat = await _new_chat(store, ["one", "two"])
    cache = SessionCache(store, BIG)
    first = await _read(cache, chat)
    assert _texts(first) == ["one", "two"]
    await cache.append_event(first, _event("three", "agent"))
    again = await _read(cache, chat)
    assert _texts(again) == ["one", "two", "three"]
    assert (cache.counts.full_reads, cache.counts.incremental_reads) == (1, 0)
    assert cache.counts.revision_reads == 2
    # What the store holds is what the cache gave.
    assert _texts(await _read(store, chat)) == _texts(again)
    # A read with ADK's bounds is answered from the cache as the store would answer it.
    recent = await cache.get_session(
        app_name=APP, user_id=USER, session_id=chat, config=GetSessionConfig(num_recent_events=2)
    )
    assert _texts(recent) == ["two", "three"]


async def test_another_instances_write_is_read_as_new_events_only(
    two_services: tuple[BaseSessionService, BaseSessionService],
) -> None:
    here_store, there = two_services
    chat = await _new_chat(here_store, ["one"])
    here = SessionCache(here_store, BIG)
    await _read(here, chat)
    other = await _read(there, chat)
    await there.append_event(other, _event("from the other instance", "agent"))
    seen = await _read(here, chat)
    assert _texts(seen) == ["one", "from the other instance"]
    assert (here.counts.full_reads, here.counts.incremental_reads) == (1, 1)
    # And this instance's next write is taken (its session is at the store's revision).
    await here.append_event(seen, _event("and back"))
    assert _texts(await _read(there, chat)) == ["one", "from the other instance", "and back"]


async def test_a_runners_read_after_the_planners_still_sees_another_instances_write(
    two_services: tuple[BaseSessionService, BaseSessionService],
) -> None:
    here_store, there = two_services
    chat = await _new_chat(here_store, ["one"])
    here = SessionCache(here_store, BIG)
    await _read(here, chat)  # the planner's
    other = await _read(there, chat)
    await there.append_event(other, _event("written meanwhile", "agent"))
    runners_read = await _read(here, chat)
    assert _texts(runners_read) == ["one", "written meanwhile"]
    assert (here.counts.full_reads, here.counts.incremental_reads) == (1, 1)


async def test_a_stale_session_is_still_refused(
    two_services: tuple[BaseSessionService, BaseSessionService],
) -> None:
    here_store, there = two_services
    chat = await _new_chat(here_store, ["one"])
    here = SessionCache(here_store, BIG)
    stale = await _read(here, chat)
    other = await _read(there, chat)
    await there.append_event(other, _event("the other instance first", "agent"))
    with pytest.raises(StaleSessionError):
        await here.append_event(stale, _event("too late", "agent"))
    # The refused event is nowhere, and the cache reads what the store holds.
    assert _texts(await _read(here, chat)) == ["one", "the other instance first"]
    # A session read from the cache is refused just the same once another instance wrote.
    runners = await _read(here, chat)
    other = await _read(there, chat)
    await there.append_event(other, _event("again first", "agent"))
    with pytest.raises(StaleSessionError):
        await here.append_event(runners, _event("too late again", "agent"))


async def test_a_stale_write_logs_one_warning_naming_the_chat(
    two_services: tuple[BaseSessionService, BaseSessionService], caplog: pytest.LogCaptureFixture
) -> None:
    """The stale-session check's refusal is handled (the fence's, docs/adr/0034): one WARNING
    with the chat and the event's author, no traceback, no content (docs/adr/0072)."""
    caplog.set_level(logging.INFO)
    here_store, there = two_services
    chat = await _new_chat(here_store, ["one"])
    here = SessionCache(here_store, BIG)
    stale = await _read(here, chat)
    await there.append_event(await _read(there, chat), _event("the other first", "agent"))
    caplog.clear()
    with pytest.raises(StaleSessionError):
        await here.append_event(stale, _event("too late: user words", "agent"))
    (record,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.levelname == "WARNING" and record.exc_info is None
    assert f"chat={chat}" in record.getMessage() and "author=agent" in record.getMessage()
    assert "user words" not in caplog.text


async def test_a_chat_deleted_and_made_again_elsewhere_is_read_whole(
    two_services: tuple[BaseSessionService, BaseSessionService],
) -> None:
    here_store, there = two_services
    chat = await _new_chat(here_store, ["old one", "old two"])
    here = SessionCache(here_store, BIG)
    await _read(here, chat)
    await there.delete_session(app_name=APP, user_id=USER, session_id=chat)
    assert await here.get_session(app_name=APP, user_id=USER, session_id=chat) is None
    await here.get_session(app_name=APP, user_id=USER, session_id=chat)
    remade = await there.create_session(app_name=APP, user_id=USER, session_id=chat)
    await there.append_event(remade, _event("new one"))
    assert _texts(await _read(here, chat)) == ["new one"]


async def test_a_delete_here_and_forget_drop_the_entry(
    two_services: tuple[BaseSessionService, BaseSessionService],
) -> None:
    store, _ = two_services
    chat = await _new_chat(store, ["one"])
    cache = SessionCache(store, BIG)
    await _read(cache, chat)
    assert cache.cached_bytes > 0
    cache.forget(APP, USER, chat)
    assert cache.cached_bytes == 0
    await _read(cache, chat)
    assert cache.counts.full_reads == 2
    await cache.delete_session(app_name=APP, user_id=USER, session_id=chat)
    assert cache.cached_bytes == 0
    assert await cache.get_session(app_name=APP, user_id=USER, session_id=chat) is None


async def test_the_bound_evicts_the_least_recently_used_chat(
    two_services: tuple[BaseSessionService, BaseSessionService],
) -> None:
    store, _ = two_services
    chats = [await _new_chat(store, [f"chat {n} " + "x" * 400]) for n in range(3)]
    one_chat = 2 * len(_event("chat 0 " + "x" * 400).model_dump_json(exclude_none=True))
    cache = SessionCache(store, int(one_chat * 2.5))
    for chat in chats:
        await _read(cache, chat)
    assert cache.counts.evictions == 1
    assert cache.cached_bytes <= cache.max_bytes
    # The evicted one (the first) is read whole again, and right.
    assert _texts(await _read(cache, chats[0])) == ["chat 0 " + "x" * 400]
    assert cache.counts.full_reads == 4


async def test_off_reads_through(
    two_services: tuple[BaseSessionService, BaseSessionService],
) -> None:
    store, _ = two_services
    chat = await _new_chat(store, ["one"])
    cache = SessionCache(store, 0)
    session = await _read(cache, chat)
    await cache.append_event(session, _event("two", "agent"))
    assert _texts(await _read(cache, chat)) == ["one", "two"]
    assert cache.counts.revision_reads == 0 and cache.cached_bytes == 0


async def test_a_fenced_takeover_reads_the_chat_anew(
    two_services: tuple[BaseSessionService, BaseSessionService],
) -> None:
    store, _ = two_services
    chat = await _new_chat(store, ["one"])
    cache = SessionCache(store, BIG)
    sessions = ChatSessions(cache, APP)
    await sessions.open(USER, chat)
    assert cache.counts.full_reads == 1
    fenced = await sessions.fence(USER, chat, generation=7)
    assert cache.counts.full_reads == 2  # what the lapsed holder may have written, read whole
    assert (fenced.events[-1].custom_metadata or {}).get(FENCE_KEY) == 7
    again = await sessions.open(USER, chat)
    assert [e.id for e in again.events] == [e.id for e in (await _read(store, chat)).events]
    assert cache.counts.full_reads == 2


async def test_reads_and_writes_at_once_keep_the_entry_and_its_size_right(
    two_services: tuple[BaseSessionService, BaseSessionService],
) -> None:
    here_store, there = two_services
    chat = await _new_chat(here_store, ["one"])
    here = SessionCache(here_store, BIG)
    await _read(here, chat)
    seen: list[list[str]] = []
    for n in range(3):
        other = await _read(there, chat)
        await there.append_event(other, _event(f"elsewhere {n}", "agent"))
        mine = await _read(here, chat)
        # Reads while this instance writes: each read is some revision's whole history.
        before, _, after = await asyncio.gather(
            _read(here, chat), here.append_event(mine, _event(f"here {n}")), _read(here, chat)
        )
        seen += [_texts(before), _texts(after)]
    stored = _texts(await _read(there, chat))
    assert all(texts == stored[: len(texts)] for texts in seen)
    assert _texts(await _read(here, chat)) == stored
    cached = here.cached_events(APP, USER, chat)
    assert cached is not None and [e.content.parts[0].text for e in cached] == stored  # type: ignore[union-attr,index]
    assert here.cached_bytes == sum(2 * len(e.model_dump_json(exclude_none=True)) for e in cached)

"""Chat sessions on a real PostgreSQL (tests/support/services.py; skipped, saying why, without one):
ADK's tables created once by processes starting together, a new chat opened by two
processes at once, and a turn that one instance starts and another continues.

Where a race must be lost for the test to mean anything, the test arranges the loss with
PostgreSQL's own locks instead of hoping for it: a transaction holds what the other side needs
until that side is seen waiting (``pg_stat_activity``), then lets go.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from adk_stream_protocol.foundation.errors import RequestError
from adk_stream_protocol.store.sessions import (
    TABLES_LOCK_KEY,
    ChatSessions,
    asyncpg_url,
    create_session_service,
)
from tests.support.rig import (
    ROOT,
    answer_approvals,
    assistant_message,
    chat_body,
    in_process_app,
    post_stream,
    user_message,
    user_turn_texts,
)
from tests.support.waiting import until_awaited

ADK_TABLES = ["adk_internal_metadata", "app_states", "events", "sessions", "user_states"]
LOGGER = "adk_stream_protocol.store.sessions"
STARTING_TOGETHER = 4  # processes

NewDatabase = Callable[[], str]


def sessions_at(url: str, app_name: str = "chats") -> ChatSessions:
    return ChatSessions(create_session_service(url), app_name)


async def close(*things: ChatSessions | AsyncEngine) -> None:
    for thing in things:
        if isinstance(thing, ChatSessions):
            await thing.service.close()  # type: ignore[attr-defined]
        else:
            await thing.dispose()


async def scalar(engine: AsyncEngine, sql: str, **params: Any) -> Any:
    async with engine.connect() as connection:
        return (await connection.execute(text(sql), params)).scalar_one()


async def tables(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
        )
        return [row[0] for row in rows]


async def wait_for_waiters(
    engine: AsyncEngine, count: int, event: str, waiter: asyncio.Future[Any]
) -> None:
    """Until ``count`` connections to this database wait on a lock of this kind (``advisory``,
    ``relation``, ``transactionid``…), or the ``waiter`` ended without (its outcome says why)."""
    sql = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND wait_event = :event"
    )

    async def waiting() -> bool:
        return waiter.done() or await scalar(engine, sql, event=event) >= count

    # Only PostgreSQL knows who waits on its locks, and says so when asked.
    await until_awaited(waiting, f"{count} waiting on a {event} lock", every=0.01)


def engine_at(url: str) -> AsyncEngine:
    """A connection of the test's own, beside the services' (no pool to keep)."""
    return create_async_engine(url, poolclass=NullPool)


# -- URLs ---------------------------------------------------------------------------------------


def test_libpq_urls_are_read_as_asyncpg_and_logged_without_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("asyncpg", reason="the `postgres` extra is not installed")
    caplog.set_level(logging.INFO, LOGGER)
    for scheme in ("postgres", "postgresql"):
        service = create_session_service(f"{scheme}://app:s3cret@db.internal:5433/chats")
        url = service.db_engine.url  # type: ignore[attr-defined]
        assert (url.drivername, url.host, url.port, url.database) == (
            "postgresql+asyncpg",
            "db.internal",
            5433,
            "chats",
        )
        assert url.password == "s3cret"
    assert "read as postgresql+asyncpg://" in caplog.text
    assert "s3cret" not in caplog.text and "db.internal" not in caplog.text
    # libpq's sslmode is asyncpg's ssl; a URL that names its driver is left as it is.
    assert asyncpg_url("postgres://h/d?sslmode=require") == "postgresql+asyncpg://h/d?ssl=require"
    kept = "postgresql+psycopg://h/d?sslmode=require"
    assert asyncpg_url(kept) == kept


@pytest.mark.asyncio
async def test_memory_and_sqlite_open_chats_as_before(tmp_path: Path) -> None:
    for url in ("memory://", f"sqlite:///{tmp_path / 'nested' / 'sessions.db'}"):
        sessions = sessions_at(url)
        await sessions.prepare()
        first = await sessions.open("u", "chat-1")
        again = await sessions.open("u", "chat-1")
        assert (first.id, again.id) == ("chat-1", "chat-1")
    assert (tmp_path / "nested" / "sessions.db").is_file()


# -- ADK's tables -------------------------------------------------------------------------------

# One Python imports ADK once (two seconds) and forks the processes that start together. Each
# connects, says it is ready, waits for the word, then prepares and opens the same chat.
STARTER = """
import asyncio, os, sys, traceback
from sqlalchemy import text
from adk_stream_protocol.store.sessions import ChatSessions, create_session_service

async def start(url, ready, go):
    sessions = ChatSessions(create_session_service(url), "chats")
    async with sessions.service.db_engine.connect() as connection:
        await connection.execute(text("SELECT 1"))
    os.write(ready, b".")
    await asyncio.get_running_loop().run_in_executor(None, os.read, go, 1)
    await sessions.prepare()
    session = await sessions.open("u", "the-chat")
    await sessions.service.close()
    print("opened", session.id, flush=True)

url, count = sys.argv[1], int(sys.argv[2])
create_session_service(url)  # imports the driver and the dialect before forking; no connection
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
children = []
for _ in range(count):
    pid = os.fork()
    if pid == 0:
        try:
            asyncio.run(asyncio.wait_for(start(url, ready_w, go_r), 60))
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    children.append(pid)
for _ in range(count):
    os.read(ready_r, 1)
os.write(go_w, b"." * count)
codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
print("exit codes", codes, flush=True)
os._exit(1 if any(codes) else 0)  # not the second that tearing ADK's modules down takes
"""


def test_processes_starting_together_on_a_fresh_database_all_start(
    new_postgres_database: NewDatabase,
) -> None:
    url = new_postgres_database()
    started = subprocess.run(
        [sys.executable, "-c", STARTER, url, str(STARTING_TOGETHER)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = started.stdout + started.stderr
    assert started.returncode == 0, output
    assert started.stdout.count("opened the-chat\n") == STARTING_TOGETHER, output

    async def check() -> None:
        engine = engine_at(url)
        try:
            assert await tables(engine) == ADK_TABLES
            assert await scalar(engine, "SELECT count(*) FROM adk_internal_metadata") == 1
            assert await scalar(engine, "SELECT count(*) FROM sessions") == 1
        finally:
            await engine.dispose()

    asyncio.run(check())


async def collide_with_a_creator(
    url: str, prepare: Callable[[], Awaitable[None]]
) -> Exception | None:
    """Run ``prepare`` while another process is creating ADK's tables, as ADK's lazy creation
    does (``metadata.create_all``, no lock), and commits only once ``prepare`` waits on it.
    What ``prepare`` raised, or None."""
    from google.adk.sessions.schemas import v1

    creator, watcher = engine_at(url), engine_at(url)
    try:
        async with creator.begin() as connection:
            await connection.run_sync(v1.Base.metadata.create_all)
            late = asyncio.ensure_future(prepare())
            # The late one cannot see the uncommitted tables, so it creates them too, and its
            # first CREATE TABLE waits on ours (the row type both insert in pg_type).
            await wait_for_waiters(watcher, 1, "transactionid", late)
        # Committed: the late one's CREATE TABLE now fails, or is read as already done.
        try:
            await late
        except Exception as failure:
            return failure
        return None
    finally:
        await close(creator, watcher)


@pytest.mark.asyncio
async def test_adk_alone_fails_when_another_process_creates_its_tables_at_the_same_time(
    new_postgres_database: NewDatabase,
) -> None:
    """Why ``prepare`` exists: ADK creates its tables lazily in each process, without a lock.
    Two processes starting on a fresh database both see no tables and both CREATE them; the
    second fails on the first request (HTTP 500: five of six starts of `uvicorn --workers 2`
    in the notes; ten of ten runs of the four processes above with ADK's ``prepare_tables``
    in place of ours). Here the collision is arranged, not hoped for."""
    from google.adk.sessions.database_session_service import DatabaseSessionService
    from sqlalchemy.exc import IntegrityError

    url = new_postgres_database()
    adk = DatabaseSessionService(url)
    try:
        failure = await collide_with_a_creator(url, adk.prepare_tables)
    finally:
        await adk.close()
    assert isinstance(failure, IntegrityError), failure
    assert "pg_type_typname_nsp_index" in str(failure)


@pytest.mark.asyncio
async def test_prepare_reads_the_tables_a_process_without_the_lock_created_meanwhile(
    new_postgres_database: NewDatabase,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    url = new_postgres_database()
    sessions = sessions_at(url)
    engine = engine_at(url)
    try:
        assert await collide_with_a_creator(url, sessions.prepare) is None
        assert "session tables created by another process; reading them" in caplog.text
        assert await tables(engine) == ADK_TABLES
        # ADK's lazy creation is done with, and the version is recorded once.
        assert sessions.service._tables_created  # type: ignore[attr-defined]
        assert await scalar(engine, "SELECT value FROM adk_internal_metadata") == "1"
        assert (await sessions.open("u", "after")).id == "after"
    finally:
        await close(sessions, engine)


@pytest.mark.asyncio
async def test_prepare_waits_for_a_process_of_ours_creating_the_tables(
    new_postgres_database: NewDatabase,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While another process holds our lock and creates the tables, prepare waits for it on
    the lock, not on the tables, then finds them made: no collision to recover from."""
    from google.adk.sessions.schemas import v1

    caplog.set_level(logging.INFO, LOGGER)
    url = new_postgres_database()
    sessions = sessions_at(url)
    holder, watcher = engine_at(url), engine_at(url)
    try:
        async with holder.begin() as connection:
            await connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": TABLES_LOCK_KEY}
            )
            await connection.run_sync(v1.Base.metadata.create_all)
            await connection.execute(
                text("INSERT INTO adk_internal_metadata VALUES ('schema_version', '1')")
            )
            waiting = asyncio.ensure_future(sessions.prepare())
            await wait_for_waiters(watcher, 1, "advisory", waiting)
        await waiting
        assert "another process" not in caplog.text
        assert await tables(watcher) == ADK_TABLES
        assert (await sessions.open("u", "after")).id == "after"
    finally:
        await close(sessions, holder, watcher)


# -- chats --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_two_processes_opening_one_new_chat_get_the_same_session(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Both read no chat and both create it; the one that loses the insert gets ADK's
    AlreadyExistsError and reads the winner's. Two services, two engines: two processes."""
    caplog.set_level(logging.INFO, LOGGER)
    user, chat = f"user-{uuid.uuid4().hex[:8]}", f"chat-{uuid.uuid4().hex[:8]}"
    one, other = sessions_at(postgres_url), sessions_at(postgres_url)
    locker, watcher = engine_at(postgres_url), engine_at(postgres_url)
    try:
        await one.prepare()
        await other.prepare()
        await one.open(user, "earlier")  # the user's state rows exist: only the chat is new
        caplog.clear()
        async with locker.begin() as connection:
            # Reads go on; inserts into sessions wait until this ends, so both get that far.
            await connection.execute(text("LOCK TABLE sessions IN SHARE MODE"))
            opening = asyncio.gather(one.open(user, chat), other.open(user, chat))
            await wait_for_waiters(watcher, 2, "relation", opening)
        first, second = await opening
        rows = await scalar(
            watcher, "SELECT count(*) FROM sessions WHERE user_id = :u AND id = :c", u=user, c=chat
        )
    finally:
        await close(one, other, locker, watcher)
    assert (first.id, second.id) == (chat, chat)
    assert rows == 1
    assert caplog.text.count("chat created by another process") == 1
    assert caplog.text.count(f"chat created user={user}") == 1


@pytest.mark.asyncio
async def test_a_store_with_no_free_connection_is_a_503_not_a_failure(postgres_url: str) -> None:
    """Past its pool (every connection in use for longer than the pool's timeout), opening a
    chat is refused with 503 and Retry-After: a busy server, not a broken request."""
    from google.adk.sessions.database_session_service import DatabaseSessionService

    service = DatabaseSessionService(
        asyncpg_url(postgres_url), pool_size=1, max_overflow=0, pool_timeout=0.2
    )
    sessions = ChatSessions(service, "chats")
    try:
        await sessions.prepare()
        await sessions.open("user-pool", "chat-1")
        async with service.db_engine.connect() as held:  # the pool's one connection
            await held.execute(text("SELECT 1"))
            with pytest.raises(RequestError) as refused:
                await sessions.open("user-pool", "chat-2")
        assert refused.value.status == 503
        assert refused.value.retry_after is not None
        assert "busy" in refused.value.message
        assert (await sessions.open("user-pool", "chat-2")).id == "chat-2", "free again"
    finally:
        await close(sessions)


def test_a_turn_on_postgres_is_continued_by_another_instance(
    tmp_path: Path, postgres_url: str
) -> None:
    """The real runner and the offline model on PostgreSQL: one instance answers and stops at
    an approval; another, sharing only the database, runs the approved payment."""
    chat = f"chat-{uuid.uuid4().hex[:12]}"
    hello, pay = user_message("hello", "u1"), user_message("Send 50 dollars to Hanako", "u2")
    with in_process_app(tmp_path, session_store=postgres_url) as first:
        greeting = post_stream(first, chat_body(chat, hello))
        assert greeting.status == 200 and greeting.text()
        asked = post_stream(first, chat_body(chat, hello, assistant_message(greeting), pay))
        assert asked.status == 200 and asked.of_type("tool-approval-request")
    approved = answer_approvals(assistant_message(asked), True)
    with in_process_app(tmp_path, session_store=postgres_url) as second:
        body = chat_body(
            chat, hello, assistant_message(greeting), pay, approved, messageId=approved["id"]
        )
        paid = post_stream(second, body)
    assert paid.status == 200, paid.body
    assert paid.of_type("tool-output-available")
    assert "Sent 50 USD to Hanako" in paid.text()

    async def history() -> list[str]:
        sessions = sessions_at(postgres_url, "adk_stream_protocol")
        try:
            session = await sessions.open("local-user", chat)
        finally:
            await close(sessions)
        return user_turn_texts(session.events)

    assert asyncio.run(history()) == ["hello", "Send 50 dollars to Hanako"]

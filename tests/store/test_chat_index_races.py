"""The chat index under races between processes (docs/adr/0043): each "process" is an index
with a connection of its own (two engines on PostgreSQL, two connections on SQLite), so the
writes really run at once in the database.

On PostgreSQL the interleaving is arranged, not hoped for, as in test_sessions.py: a
transaction holds what the writes need until they are all seen waiting (``pg_stat_activity``),
then lets go; where the order matters, each order is arranged in turn. On SQLite a third
connection holds the write lock while both writes start.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from adk_stream_protocol.store.chat_index import ChatIndex
from adk_stream_protocol.store.chat_tables import (
    CREATE_TABLE,
    LATE_TABLE,
    MESSAGES_TABLE,
    TABLE,
    TABLE_LOCK_KEY,
    TOKENS_TABLE,
    PostgresDatabase,
    SqlChatIndex,
    SqliteDatabase,
)
from tests.store.test_sessions import engine_at, scalar, tables, wait_for_waiters
from tests.support.waiting import until_awaited

USER = "user-1"
ROUNDS = 5
NewDatabase = Callable[[], str]


def user(text_: str) -> dict[str, Any]:
    return {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text_}]}


ASKED = [user("first question")]
ANSWERED = [*ASKED, {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "ok"}]}]


async def wait_for_lock_waiters(
    engine: AsyncEngine, count: int, waiter: asyncio.Future[Any]
) -> None:
    """Until ``count`` connections to this database wait on a lock of any kind (a row's
    waiters wait on its transaction, then on the tuple), or the ``waiter`` ended."""
    sql = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock'"
    )

    async def waiting() -> bool:
        return waiter.done() or await scalar(engine, sql) >= count

    # Only PostgreSQL knows who waits on its locks, and says so when asked.
    await until_awaited(waiting, f"{count} waiting on a lock", every=0.01)


class Postgres:
    """Two processes' indexes on one database, a connection that holds locks, one that
    watches."""

    def __init__(self, url: str) -> None:
        self.engines = [create_async_engine(url) for _ in range(2)]
        self.one, self.other = (SqlChatIndex(PostgresDatabase(e)) for e in self.engines)
        self.locker, self.watcher = engine_at(url), engine_at(url)

    async def close(self) -> None:
        for engine in (*self.engines, self.locker, self.watcher):
            await engine.dispose()

    async def with_row_locked(
        self, app: str, chat_id: str, *writes: Callable[[], Awaitable[Any]]
    ) -> list[Any]:
        """Run the writes one after the other into the queue for the chat's row, held by a
        transaction of ours, then let them through in that order."""
        started: list[asyncio.Future[Any]] = []
        async with self.locker.begin() as connection:
            await connection.execute(
                text(f"SELECT 1 FROM {TABLE} WHERE app_name = :a AND chat_id = :c FOR UPDATE"),
                {"a": app, "c": chat_id},
            )
            for write in writes:
                started.append(asyncio.ensure_future(write()))
                await wait_for_lock_waiters(self.watcher, len(started), started[-1])
        return list(await asyncio.gather(*started))


@pytest_asyncio.fixture
async def postgres(postgres_url: str) -> AsyncIterator[Postgres]:
    pair = Postgres(postgres_url)
    try:
        await pair.one.prepare()
        yield pair
    finally:
        await pair.close()


@pytest.fixture
def app() -> str:
    return f"app-{uuid.uuid4().hex[:8]}"


def new_chat() -> str:
    return f"chat-{uuid.uuid4().hex[:8]}"


# -- PostgreSQL ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_two_processes_writing_one_new_chat_at_once_make_one_row(
    postgres: Postgres, app: str
) -> None:
    """Both find no row; inserts wait behind our lock on the table, then one inserts and the
    other's conflict becomes its update: both writes succeed."""
    for _ in range(ROUNDS):
        chat = new_chat()
        async with postgres.locker.begin() as connection:
            await connection.execute(text(f"LOCK TABLE {TABLE} IN SHARE MODE"))
            writing = asyncio.gather(
                postgres.one.record_messages(app, USER, chat, [user("from one")]),
                postgres.other.record_messages(app, USER, chat, [user("from other")]),
            )
            await wait_for_waiters(postgres.watcher, 2, "relation", writing)
        assert list(await writing) == [True, True]
        count = await scalar(
            postgres.watcher, f"SELECT count(*) FROM {TABLE} WHERE chat_id = :c", c=chat
        )
        assert count == 1
        record = await postgres.one.get_chat(app, USER, chat)
        assert record is not None and record.summary.title in ("from one", "from other")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "rename_first", [True, False], ids=["rename-then-record", "record-then-rename"]
)
async def test_a_rename_racing_a_record_is_never_lost(
    postgres: Postgres, app: str, rename_first: bool
) -> None:
    chat = new_chat()
    await postgres.one.record_messages(app, USER, chat, ASKED)

    def rename() -> Awaitable[bool]:
        return postgres.other.rename(app, USER, chat, "Renamed")

    def record() -> Awaitable[bool]:
        return postgres.one.record_messages(app, USER, chat, ANSWERED, create=False)

    writes = (rename, record) if rename_first else (record, rename)
    assert await postgres.with_row_locked(app, chat, *writes) == [True, True]
    stored = await postgres.one.get_chat(app, USER, chat)
    assert stored is not None
    assert (stored.summary.title, stored.messages) == ("Renamed", ANSWERED)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "delete_first", [True, False], ids=["delete-then-record", "record-then-delete"]
)
async def test_a_delete_racing_the_end_of_a_response_leaves_no_chat(
    postgres: Postgres, app: str, delete_first: bool
) -> None:
    chat = new_chat()
    await postgres.one.record_messages(app, USER, chat, ASKED)

    def delete() -> Awaitable[bool]:
        return postgres.other.delete(app, USER, chat)

    def record() -> Awaitable[bool]:
        return postgres.one.record_messages(app, USER, chat, ANSWERED, create=False)

    writes = (delete, record) if delete_first else (record, delete)
    results = await postgres.with_row_locked(app, chat, *writes)
    deleted, recorded = results if delete_first else results[::-1]
    assert deleted is True and recorded is (not delete_first)
    assert await postgres.one.get_chat(app, USER, chat) is None


@pytest.mark.asyncio
async def test_processes_starting_together_on_a_fresh_database_all_prepare(
    new_postgres_database: NewDatabase,
) -> None:
    url = new_postgres_database()
    engines = [create_async_engine(url) for _ in range(4)]
    watcher = engine_at(url)
    try:
        await asyncio.gather(*(SqlChatIndex(PostgresDatabase(e)).prepare() for e in engines))
        assert await tables(watcher) == sorted([TABLE, MESSAGES_TABLE, TOKENS_TABLE, LATE_TABLE])
        indexes = await scalar(
            watcher, "SELECT count(*) FROM pg_indexes WHERE tablename = :t", t=TABLE
        )
        assert indexes == 2  # the key's, and the listing's
    finally:
        for engine in (*engines, watcher):
            await engine.dispose()


@pytest.mark.asyncio
async def test_without_the_lock_two_creations_at_once_collide(
    new_postgres_database: NewDatabase,
) -> None:
    """Why ``prepare`` takes the advisory lock: CREATE TABLE IF NOT EXISTS in two transactions
    at once fails in the second (both insert the row type in pg_type). Arranged."""
    from sqlalchemy.exc import IntegrityError

    url = new_postgres_database()
    creator, late, watcher = engine_at(url), engine_at(url), engine_at(url)
    try:
        async with creator.begin() as connection:
            await connection.execute(text(CREATE_TABLE))

            async def create_late() -> None:
                async with late.begin() as other:
                    await other.execute(text(CREATE_TABLE))

            colliding = asyncio.ensure_future(create_late())
            await wait_for_waiters(watcher, 1, "transactionid", colliding)
        with pytest.raises(IntegrityError, match="pg_type_typname_nsp_index"):
            await colliding
    finally:
        for engine in (creator, late, watcher):
            await engine.dispose()


@pytest.mark.asyncio
async def test_prepare_waits_for_another_process_holding_the_lock(
    new_postgres_database: NewDatabase,
) -> None:
    url = new_postgres_database()
    holder, watcher, engine = engine_at(url), engine_at(url), create_async_engine(url)
    try:
        async with holder.begin() as connection:
            await connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": TABLE_LOCK_KEY}
            )
            await connection.execute(text(CREATE_TABLE))
            preparing = asyncio.ensure_future(SqlChatIndex(PostgresDatabase(engine)).prepare())
            await wait_for_waiters(watcher, 1, "advisory", preparing)
        await preparing  # found the table made, and added its index
        assert await tables(watcher) == sorted([TABLE, MESSAGES_TABLE, TOKENS_TABLE, LATE_TABLE])
    finally:
        for each in (holder, watcher, engine):
            await each.dispose()


# -- SQLite -------------------------------------------------------------------------------------


@pytest_asyncio.fixture
async def sqlite_pair(tmp_path: Path) -> AsyncIterator[tuple[ChatIndex, ChatIndex, Path]]:
    """Two indexes on one file, each with its connection (and its thread), prepared at once."""
    path = tmp_path / "store.db"
    one, other = SqlChatIndex(SqliteDatabase(path)), SqlChatIndex(SqliteDatabase(path))
    await asyncio.gather(one.prepare(), other.prepare())
    try:
        yield one, other, path
    finally:
        await one.close()
        await other.close()


async def with_file_locked(path: Path, *writes: Awaitable[Any]) -> list[Any]:
    """Start the writes while a third connection holds the file's write lock, then let go."""
    import aiosqlite

    async with aiosqlite.connect(path, isolation_level=None) as blocker:
        await blocker.execute("BEGIN IMMEDIATE")
        started = [asyncio.ensure_future(write) for write in writes]
        # They reach the lock (or not yet: then they simply follow). SQLite shows no one its
        # waiters: a while is all a test can give them.
        await asyncio.sleep(0.1)
        await blocker.execute("COMMIT")
    return list(await asyncio.gather(*started))


@pytest.mark.asyncio
async def test_on_sqlite_two_connections_keep_the_same_rules(
    sqlite_pair: tuple[ChatIndex, ChatIndex, Path], app: str
) -> None:
    one, other, path = sqlite_pair
    for _ in range(ROUNDS):
        chat = new_chat()
        first = one.record_messages(app, USER, chat, [user("one")])
        second = other.record_messages(app, USER, chat, [user("other")])
        assert await with_file_locked(path, first, second) == [True, True]
        assert len((await one.list_chats(app, USER, limit=200)).chats) > 0
        rename = other.rename(app, USER, chat, "Renamed")
        record = one.record_messages(app, USER, chat, ANSWERED, create=False)
        assert await with_file_locked(path, rename, record) == [True, True]
        stored = await other.get_chat(app, USER, chat)
        assert stored is not None and (stored.summary.title, stored.messages) == (
            "Renamed",
            ANSWERED,
        )
        delete = other.delete(app, USER, chat)
        late = one.record_messages(app, USER, chat, ANSWERED, create=False)
        await with_file_locked(path, delete, late)
        assert await one.get_chat(app, USER, chat) is None
    assert (await one.list_chats(app, USER, limit=200)).chats == []

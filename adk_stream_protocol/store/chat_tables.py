"""The chat index as a table in the session store's database (docs/adr/0043-chat-index.md).

``adk_stream_chats`` sits beside ADK's tables: on PostgreSQL it is reached through ADK's own
engine (its pool and timeouts), on SQLite through a connection of its own to the same file
(ADK's SQLite store has no SQLAlchemy, which the default install does not bring). Each
operation is one SQL statement, the same text on both (upsert, row values, ``CASE``), so each
is atomic in the database and the rules of ``chat_index.py`` hold across processes:

- a first write of a chat is ``INSERT … ON CONFLICT DO UPDATE``: two processes make one row;
- the title is replaced only ``CASE WHEN NOT title_set``: a rename is never lost;
- ``create=False`` is a plain ``UPDATE``: it cannot bring back a deleted chat;
- ``updated_at_us`` only moves forward.

Listing reads the index ``(app_name, user_id, updated_at_us, chat_id)`` backwards from the
cursor, never ``messages``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from google.adk.sessions import BaseSessionService

from adk_stream_protocol.store.chat_index import (
    ChatIndex,
    ChatPage,
    ChatRecord,
    ChatSummary,
    InMemoryChatIndex,
    Waiting,
    check_limit,
    decode_cursor,
    encode_cursor,
    messages_json,
    now_us,
    title_of,
    utc_time,
    waiting_of,
)
from adk_stream_protocol.store.sessions import database_engine

if TYPE_CHECKING:
    import aiosqlite
    from sqlalchemy.ext.asyncio import AsyncEngine

logger = logging.getLogger(__name__)

TABLE = "adk_stream_chats"
# The PostgreSQL advisory lock under which ``prepare`` creates the table, so that processes
# starting together create it one at a time (two concurrent CREATE TABLE IF NOT EXISTS can
# still collide on pg_type). The first 8 bytes of sha256(b"adk-stream-protocol/chat-index-table")
# as a signed 64-bit integer (0xed9965b366081b66).
TABLE_LOCK_KEY = -1325916794098541722
# A SQLite writer waits this long for another process's write to end.
SQLITE_BUSY_SECONDS = 5.0

# Ids as long as ADK's keys (its sessions table's VARCHAR(128)).
CREATE_TABLE = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    app_name VARCHAR(128) NOT NULL,
    user_id VARCHAR(128) NOT NULL,
    chat_id VARCHAR(128) NOT NULL,
    title TEXT NOT NULL,
    title_set BOOLEAN NOT NULL,
    created_at_us BIGINT NOT NULL,
    updated_at_us BIGINT NOT NULL,
    waiting VARCHAR(16),
    messages TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, chat_id)
)"""
CREATE_INDEX = (
    f"CREATE INDEX IF NOT EXISTS {TABLE}_recent "
    f"ON {TABLE} (app_name, user_id, updated_at_us, chat_id)"
)
_KEY = "app_name = :app AND user_id = :user AND chat_id = :chat"
UPSERT = f"""
INSERT INTO {TABLE}
    (app_name, user_id, chat_id, title, title_set, created_at_us, updated_at_us, waiting, messages)
VALUES (:app, :user, :chat, :title, FALSE, :now, :now, :waiting, :messages)
ON CONFLICT (app_name, user_id, chat_id) DO UPDATE SET
    title = CASE WHEN {TABLE}.title_set THEN {TABLE}.title ELSE excluded.title END,
    updated_at_us = CASE WHEN {TABLE}.updated_at_us > excluded.updated_at_us
        THEN {TABLE}.updated_at_us ELSE excluded.updated_at_us END,
    waiting = excluded.waiting,
    messages = excluded.messages"""
UPDATE = f"""
UPDATE {TABLE} SET
    title = CASE WHEN title_set THEN title ELSE :title END,
    updated_at_us = CASE WHEN updated_at_us > :now THEN updated_at_us ELSE :now END,
    waiting = :waiting,
    messages = :messages
WHERE {_KEY}"""
_SUMMARY = "chat_id, title, created_at_us, updated_at_us, waiting"
_NEWEST_FIRST = "ORDER BY updated_at_us DESC, chat_id DESC LIMIT :limit"
LIST_FIRST = (
    f"SELECT {_SUMMARY} FROM {TABLE} WHERE app_name = :app AND user_id = :user {_NEWEST_FIRST}"
)
LIST_AFTER = (
    f"SELECT {_SUMMARY} FROM {TABLE} WHERE app_name = :app AND user_id = :user"
    f" AND (updated_at_us, chat_id) < (:after_us, :after_chat) {_NEWEST_FIRST}"
)
GET = f"SELECT {_SUMMARY}, messages FROM {TABLE} WHERE {_KEY}"
RENAME = f"UPDATE {TABLE} SET title = :title, title_set = TRUE WHERE {_KEY}"
DELETE = f"DELETE FROM {TABLE} WHERE {_KEY}"


class _Database(Protocol):
    """Where the statements run: each one on its own, committed."""

    async def create(self) -> None: ...

    async def write(self, sql: str, params: Mapping[str, Any]) -> int:
        """The rows the statement changed."""

    async def read(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]: ...

    async def close(self) -> None: ...


class SqlChatIndex(ChatIndex):
    def __init__(self, database: _Database) -> None:
        self._database = database

    async def prepare(self) -> None:
        await self._database.create()
        logger.info("chat index ready (table %s)", TABLE)

    async def record_messages(
        self,
        app: str,
        user: str,
        chat_id: str,
        messages: list[dict[str, Any]],
        *,
        create: bool = True,
    ) -> bool:
        params = {
            "app": app,
            "user": user,
            "chat": chat_id,
            "title": title_of(messages),
            "now": now_us(),
            "waiting": waiting_of(messages),
            "messages": messages_json(messages),
        }
        changed = await self._database.write(UPSERT if create else UPDATE, params)
        return changed > 0

    async def list_chats(
        self, app: str, user: str, *, limit: int, cursor: str | None = None
    ) -> ChatPage:
        check_limit(limit)
        params: dict[str, Any] = {"app": app, "user": user, "limit": limit + 1}
        if cursor is None:
            rows = await self._database.read(LIST_FIRST, params)
        else:
            params["after_us"], params["after_chat"] = decode_cursor(cursor)
            rows = await self._database.read(LIST_AFTER, params)
        chats = [_summary(row) for row in rows[:limit]]
        more = len(rows) > limit
        last = rows[limit - 1] if more else None
        return ChatPage(chats, encode_cursor(int(last[3]), str(last[0])) if last else None)

    async def get_chat(self, app: str, user: str, chat_id: str) -> ChatRecord | None:
        rows = await self._database.read(GET, {"app": app, "user": user, "chat": chat_id})
        if not rows:
            return None
        return ChatRecord(_summary(rows[0]), json.loads(rows[0][5]))

    async def rename(self, app: str, user: str, chat_id: str, title: str) -> bool:
        params = {"app": app, "user": user, "chat": chat_id, "title": title}
        return await self._database.write(RENAME, params) > 0

    async def delete(self, app: str, user: str, chat_id: str) -> bool:
        params = {"app": app, "user": user, "chat": chat_id}
        return await self._database.write(DELETE, params) > 0

    async def close(self) -> None:
        await self._database.close()


def _summary(row: Sequence[Any]) -> ChatSummary:
    chat_id, title, created_us, updated_us, waiting = row[:5]
    return ChatSummary(
        str(chat_id),
        str(title),
        utc_time(int(created_us)),
        utc_time(int(updated_us)),
        cast("Waiting | None", waiting),
    )


class PostgresDatabase:
    """Statements on ADK's engine (``DatabaseSessionService.db_engine``), which the session
    service owns and closes."""

    def __init__(self, engine: AsyncEngine) -> None:
        if engine.dialect.name != "postgresql":
            raise ValueError(
                f"the chat index keeps its table on SQLite or PostgreSQL, not {engine.dialect.name}"
            )
        self._engine = engine

    async def create(self) -> None:
        from sqlalchemy import text

        async with self._engine.begin() as connection:
            await connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": TABLE_LOCK_KEY}
            )
            await connection.execute(text(CREATE_TABLE))
            await connection.execute(text(CREATE_INDEX))

    async def write(self, sql: str, params: Mapping[str, Any]) -> int:
        from sqlalchemy import text

        async with self._engine.begin() as connection:
            result = await connection.execute(text(sql), dict(params))
            return int(result.rowcount)

    async def read(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        from sqlalchemy import text

        async with self._engine.connect() as connection:
            result = await connection.execute(text(sql), dict(params))
            return [tuple(row) for row in result]

    async def close(self) -> None:
        return None  # the engine is the session service's


class SqliteDatabase:
    """One connection of our own to the store's file, in autocommit: every statement is its
    own transaction, so the requests that share the connection never share one."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._connection: aiosqlite.Connection | None = None
        self._opening = asyncio.Lock()

    async def _connected(self) -> aiosqlite.Connection:
        if self._connection is not None:
            return self._connection
        async with self._opening:
            if self._connection is None:
                import aiosqlite

                self._path.parent.mkdir(parents=True, exist_ok=True)
                connection = aiosqlite.connect(
                    self._path, timeout=SQLITE_BUSY_SECONDS, isolation_level=None
                )
                # A daemon thread, as ADK's own: a connection left open never holds the exit.
                thread: Any = getattr(connection, "_thread", connection)
                thread.daemon = True
                self._connection = await connection
            return self._connection

    async def create(self) -> None:
        connection = await self._connected()
        await connection.execute(CREATE_TABLE)
        await connection.execute(CREATE_INDEX)

    async def write(self, sql: str, params: Mapping[str, Any]) -> int:
        connection = await self._connected()
        cursor = await connection.execute(sql, dict(params))
        try:
            return int(cursor.rowcount)
        finally:
            await cursor.close()

    async def read(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        connection = await self._connected()
        rows = await connection.execute_fetchall(sql, dict(params))
        return [tuple(row) for row in rows]

    async def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.close()


def create_chat_index(url: str, service: BaseSessionService) -> ChatIndex:
    """The index beside the session store the URL names (``create_session_service``'s
    ``service``): in this process for ``memory://``, else a table in the same database."""
    if url in ("memory://", "memory:"):
        return InMemoryChatIndex()
    engine = database_engine(service)
    if engine is not None:
        return SqlChatIndex(PostgresDatabase(engine))
    if url.startswith("sqlite:///"):
        return SqlChatIndex(SqliteDatabase(Path(url.removeprefix("sqlite:///"))))
    raise ValueError(f"no chat index for the session store {url.split('://')[0]}://")

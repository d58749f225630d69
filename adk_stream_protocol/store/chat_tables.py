"""The chat index as tables in the session store's database
(docs/adr/0069-chat-record-by-message.md).

``adk_stream_chats`` (one row per chat: title, times, what it waits for) and
``adk_stream_chat_messages`` (one row per message of a chat, with a digest of its JSON) sit
beside ADK's tables: on PostgreSQL they are reached through ADK's own engine (its pool and
timeouts), on SQLite through a connection of its own to the same file (ADK's SQLite store has
no SQLAlchemy, which the default install does not bring). Every statement has the same text on
both (upsert, row values, ``CASE``), and the rules of ``chat_index.py`` hold across processes:

- a first write of a chat is ``INSERT … ON CONFLICT DO UPDATE``: two processes make one row;
- the title is replaced only ``CASE WHEN NOT title_set``: a rename is never lost;
- ``create=False`` is a plain ``UPDATE``: it cannot bring back a deleted chat;
- ``updated_at_us`` only moves forward.

Recording a chat's messages is one transaction that begins with the chat's row (its row lock,
on SQLite the write lock, orders two writers of a chat), reads the digests of the stored
messages, and writes only the messages that are new or changed, then drops those past the
chat's end: a turn writes what it added, not the whole chat. A response's start
(``record_start``) reads the chat's row instead, under its lock, and writes it only when more
than its time would change: its end stamps the chat, and on SQLite each page a transaction
touches is written twice (the rollback journal's copy, then the page). A chat recorded by an
earlier version holds its messages as one JSON array in ``adk_stream_chats.messages``; it is
read as it is, and moved into message rows (the column emptied) by its first write. Reading a
chat is one statement (the chat's row joined with its messages), so it sees one state.

``adk_stream_fencing_tokens`` holds each chat's last fencing token: taking one is a single
upsert that returns it, so two takers never get the same. Deleting a chat keeps it.

Listing reads the index ``(app_name, user_id, updated_at_us, chat_id)`` backwards from the
cursor, never the messages.

``adk_stream_late_results`` holds the results a run that had lost its chat could not store, one
row per call (``ON CONFLICT DO NOTHING``: the first is kept) until the chat's holder applies
it; a turn reads it by the chat's key.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from google.adk.sessions import BaseSessionService

from adk_stream_protocol.store.chat_index import (
    ChatIndex,
    ChatOutline,
    ChatPage,
    ChatRecord,
    ChatSummary,
    InMemoryChatIndex,
    LateResult,
    StaleRecordError,
    Waiting,
    check_limit,
    decode_cursor,
    encode_cursor,
    message_digest,
    message_json,
    now_us,
    title_of,
    title_text,
    us_of,
    utc_time,
    waiting_of,
)
from adk_stream_protocol.store.sessions import database_engine

if TYPE_CHECKING:
    import aiosqlite
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

logger = logging.getLogger(__name__)

TABLE = "adk_stream_chats"
MESSAGES_TABLE = "adk_stream_chat_messages"
LATE_TABLE = "adk_stream_late_results"
# The PostgreSQL advisory lock under which ``prepare`` creates the tables, so that processes
# starting together create them one at a time (two concurrent CREATE TABLE IF NOT EXISTS can
# still collide on pg_type). The first 8 bytes of sha256(b"adk-stream-protocol/chat-index-table")
# as a signed 64-bit integer (0xed9965b366081b66).
TABLE_LOCK_KEY = -1325916794098541722
# A SQLite writer waits this long for another process's write to end.
SQLITE_BUSY_SECONDS = 5.0
# ``adk_stream_chats.messages`` of a chat whose messages are rows of MESSAGES_TABLE. Anything
# else is the JSON array an earlier version wrote there.
IN_ROWS = ""
# Message rows written by one statement (5 parameters each: well under SQLite's 32,766).
ROWS_PER_STATEMENT = 500

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
# ``seq``: the message's place in the chat, from 0. ``digest``: of its stored JSON;
# ``message_id``: its id, and ``titled``: whether it has a title's text (a user message with
# text), so a turn joins and writes without reading the messages. They come before ``message``,
# which SQLite may store on overflow pages that a read of a later column follows.
CREATE_MESSAGES_TABLE = f"""
CREATE TABLE IF NOT EXISTS {MESSAGES_TABLE} (
    app_name VARCHAR(128) NOT NULL,
    user_id VARCHAR(128) NOT NULL,
    chat_id VARCHAR(128) NOT NULL,
    seq INTEGER NOT NULL,
    digest VARCHAR(64) NOT NULL,
    message_id TEXT,
    titled BOOLEAN NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, chat_id, seq)
)"""
# ``response``: the tool's function response as JSON; ``author`` and ``invocation_id``: the
# call's agent and invocation.
CREATE_LATE_TABLE = f"""
CREATE TABLE IF NOT EXISTS {LATE_TABLE} (
    app_name VARCHAR(128) NOT NULL,
    user_id VARCHAR(128) NOT NULL,
    chat_id VARCHAR(128) NOT NULL,
    call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    response TEXT NOT NULL,
    invocation_id TEXT NOT NULL,
    author TEXT NOT NULL,
    created_at_us BIGINT NOT NULL,
    PRIMARY KEY (app_name, user_id, chat_id, call_id)
)"""
TOKENS_TABLE = "adk_stream_fencing_tokens"
CREATE_TOKENS_TABLE = f"""
CREATE TABLE IF NOT EXISTS {TOKENS_TABLE} (
    app_name VARCHAR(128) NOT NULL,
    user_id VARCHAR(128) NOT NULL,
    chat_id VARCHAR(128) NOT NULL,
    token BIGINT NOT NULL,
    PRIMARY KEY (app_name, user_id, chat_id)
)"""
TAKE_TOKEN = f"""
INSERT INTO {TOKENS_TABLE} (app_name, user_id, chat_id, token)
VALUES (:app, :user, :chat, :first)
ON CONFLICT (app_name, user_id, chat_id) DO UPDATE SET
    token = CASE WHEN {TOKENS_TABLE}.token + 1 > :generation
        THEN {TOKENS_TABLE}.token + 1 ELSE :generation END
RETURNING token"""
_KEY = "app_name = :app AND user_id = :user AND chat_id = :chat"
KEEP_LATE = f"""
INSERT INTO {LATE_TABLE}
    (app_name, user_id, chat_id, call_id, tool_name, response, invocation_id, author,
     created_at_us)
VALUES (:app, :user, :chat, :call, :tool, :response, :invocation, :author, :created)
ON CONFLICT (app_name, user_id, chat_id, call_id) DO NOTHING"""
LATE = (
    f"SELECT call_id, tool_name, response, invocation_id, author, created_at_us "
    f"FROM {LATE_TABLE} WHERE {_KEY} ORDER BY created_at_us, call_id"
)
DROP_LATE = f"DELETE FROM {LATE_TABLE} WHERE {_KEY} AND call_id = :call"
DROP_CHAT_LATE = f"DELETE FROM {LATE_TABLE} WHERE {_KEY}"
UPSERT = f"""
INSERT INTO {TABLE}
    (app_name, user_id, chat_id, title, title_set, created_at_us, updated_at_us, waiting, messages)
VALUES (:app, :user, :chat, :title, FALSE, :now, :now, :waiting, '{IN_ROWS}')
ON CONFLICT (app_name, user_id, chat_id) DO UPDATE SET
    title = CASE WHEN {TABLE}.title_set OR :keep_title THEN {TABLE}.title ELSE excluded.title END,
    updated_at_us = CASE WHEN {TABLE}.updated_at_us > excluded.updated_at_us
        THEN {TABLE}.updated_at_us ELSE excluded.updated_at_us END,
    waiting = excluded.waiting,
    messages = excluded.messages"""
UPDATE = f"""
UPDATE {TABLE} SET
    title = CASE WHEN title_set OR :keep_title THEN title ELSE :title END,
    updated_at_us = CASE WHEN updated_at_us > :now THEN updated_at_us ELSE :now END,
    waiting = :waiting,
    messages = '{IN_ROWS}'
WHERE {_KEY}"""
DIGESTS = f"SELECT seq, digest FROM {MESSAGES_TABLE} WHERE {_KEY} AND seq >= :since"
# A write that leaves the first ``since`` messages alone: the record holds them as rows (they
# are 0..n-1, so the last of them tells), and whether one of them gives the title.
HOLDS = f"SELECT COUNT(*) FROM {MESSAGES_TABLE} WHERE {_KEY} AND seq = :last"
TITLED = (
    f"SELECT seq FROM {MESSAGES_TABLE} WHERE {_KEY} AND titled AND seq < :since "
    "ORDER BY seq LIMIT 1"
)
RETITLE = f"UPDATE {TABLE} SET title = :title WHERE {_KEY} AND NOT title_set"
# The chat's row as a response's start finds it (``record_start``), read under its lock.
HEAD = f"SELECT title, title_set, waiting, messages FROM {TABLE} WHERE {_KEY}"
# The chat's row with each message's id and digest, and the last message's JSON.
OUTLINE = f"""
SELECT c.messages, m.message_id, m.digest,
    CASE WHEN m.seq = (SELECT MAX(seq) FROM {MESSAGES_TABLE} WHERE {_KEY}) THEN m.message END
FROM {TABLE} c LEFT JOIN {MESSAGES_TABLE} m
    ON m.app_name = c.app_name AND m.user_id = c.user_id AND m.chat_id = c.chat_id
WHERE c.app_name = :app AND c.user_id = :user AND c.chat_id = :chat
ORDER BY m.seq"""
DROP_AFTER = f"DELETE FROM {MESSAGES_TABLE} WHERE {_KEY} AND seq >= :count"
DROP_MESSAGES = f"DELETE FROM {MESSAGES_TABLE} WHERE {_KEY}"
_SUMMARY = "chat_id, title, created_at_us, updated_at_us, waiting"
_NEWEST_FIRST = "ORDER BY updated_at_us DESC, chat_id DESC LIMIT :limit"
LIST_FIRST = (
    f"SELECT {_SUMMARY} FROM {TABLE} WHERE app_name = :app AND user_id = :user {_NEWEST_FIRST}"
)
LIST_AFTER = (
    f"SELECT {_SUMMARY} FROM {TABLE} WHERE app_name = :app AND user_id = :user"
    f" AND (updated_at_us, chat_id) < (:after_us, :after_chat) {_NEWEST_FIRST}"
)
# The chat's row with each of its message rows (one row, message NULL, when it has none).
GET = f"""
SELECT c.chat_id, c.title, c.created_at_us, c.updated_at_us, c.waiting, c.messages, m.message
FROM {TABLE} c LEFT JOIN {MESSAGES_TABLE} m
    ON m.app_name = c.app_name AND m.user_id = c.user_id AND m.chat_id = c.chat_id
WHERE c.app_name = :app AND c.user_id = :user AND c.chat_id = :chat
ORDER BY m.seq"""
RENAME = f"UPDATE {TABLE} SET title = :title, title_set = TRUE WHERE {_KEY}"
DELETE = f"DELETE FROM {TABLE} WHERE {_KEY}"


def upsert_messages(count: int) -> str:
    """The statement that writes ``count`` message rows (``:seq0, :digest0, :id0, :titled0,
    :message0``…)."""
    rows = ", ".join(
        f"(:app, :user, :chat, :seq{i}, :digest{i}, :id{i}, :titled{i}, :message{i})"
        for i in range(count)
    )
    return (
        f"INSERT INTO {MESSAGES_TABLE} "
        "(app_name, user_id, chat_id, seq, digest, message_id, titled, message) "
        f"VALUES {rows} ON CONFLICT (app_name, user_id, chat_id, seq) DO UPDATE SET "
        "digest = excluded.digest, message_id = excluded.message_id, "
        "titled = excluded.titled, message = excluded.message"
    )


class _Statements(Protocol):
    async def write(self, sql: str, params: Mapping[str, Any]) -> int:
        """The rows the statement changed."""

    async def read(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]: ...


class _Database(_Statements, Protocol):
    """Where the statements run: each one on its own, committed, or several in a
    ``transaction``. ``row_lock`` ends a ``SELECT`` that locks the rows it reads in a
    transaction (on SQLite the transaction holds the file's write lock already)."""

    row_lock: str

    async def create(self) -> None: ...

    def transaction(self) -> AbstractAsyncContextManager[_Statements]:
        """Statements committed together, or none of them (an exception rolls back)."""

    async def close(self) -> None: ...


class _Unchanged(Exception):
    """Ends a transaction that found nothing to write: rolled back."""


class SqlChatIndex(ChatIndex):
    def __init__(self, database: _Database) -> None:
        self._database = database

    async def prepare(self) -> None:
        await self._database.create()
        tables = (TABLE, MESSAGES_TABLE, TOKENS_TABLE, LATE_TABLE)
        logger.info("chat index ready (tables %s)", ", ".join(tables))

    async def record_messages(
        self,
        app: str,
        user: str,
        chat_id: str,
        messages: list[dict[str, Any]],
        *,
        create: bool = True,
        since: int = 0,
    ) -> bool:
        return await self._record((app, user, chat_id), messages, create=create, since=since)

    async def record_start(
        self,
        app: str,
        user: str,
        chat_id: str,
        messages: list[dict[str, Any]],
        *,
        create: bool = True,
        since: int = 0,
    ) -> bool:
        key = (app, user, chat_id)
        return await self._record(key, messages, create=create, since=since, stamp=False)

    async def _record(
        self,
        chat: tuple[str, str, str],
        messages: list[dict[str, Any]],
        *,
        create: bool,
        since: int,
        stamp: bool = True,
    ) -> bool:
        app, user, chat_id = chat
        key = {"app": app, "user": user, "chat": chat_id}
        since = min(since, max(len(messages) - 1, 0))
        tail = messages[since:]
        stored = [message_json(message) for message in tail]  # not JSON: raises here
        title = title_of(tail)
        params = {
            **key,
            "title": title,
            "keep_title": since > 0,
            "now": now_us(),
            "waiting": waiting_of(tail),
        }
        count = since + len(stored)
        try:
            async with self._database.transaction() as statements:
                # The chat's row first: its lock orders two writers of the chat. Without
                # ``stamp`` (a start) it is read, locked, and written only if more than its time
                # changes.
                head = None
                if not stamp:
                    rows = await statements.read(HEAD + self._database.row_lock, key)
                    head = rows[0] if rows else None
                if head is None and not await statements.write(
                    UPSERT if create else UPDATE, params
                ):
                    raise _Unchanged
                retitle = False
                if since:
                    bounds = {**key, "since": since}
                    if not (await statements.read(HOLDS, {**key, "last": since - 1}))[0][0]:
                        raise StaleRecordError(f"the record does not hold {since} messages")
                    # Its title is in the tail.
                    retitle = not await statements.read(TITLED, bounds)
                    if retitle and head is None:
                        await statements.write(RETITLE, {**key, "title": title})
                if head is not None:
                    held_title, title_set, waiting, whole = head
                    keep_title = since > 0 and not retitle
                    new_title = held_title if title_set or keep_title else title
                    if (new_title, whole, waiting) != (held_title, IN_ROWS, params["waiting"]):
                        await statements.write(UPDATE, {**params, "keep_title": keep_title})
                held = {
                    int(seq): str(digest)
                    for seq, digest in await statements.read(DIGESTS, {**key, "since": since})
                }
                changed = [
                    (seq, digest, message, text)
                    for seq, message, text in zip(range(since, count), tail, stored, strict=True)
                    if held.get(seq) != (digest := message_digest(text))
                ]
                for first in range(0, len(changed), ROWS_PER_STATEMENT):
                    batch = changed[first : first + ROWS_PER_STATEMENT]
                    values: dict[str, Any] = dict(key)
                    for i, (seq, digest, message, text) in enumerate(batch):
                        message_id = message.get("id")
                        values.update(
                            {
                                f"seq{i}": seq,
                                f"digest{i}": digest,
                                f"id{i}": message_id if isinstance(message_id, str) else None,
                                f"titled{i}": bool(title_text(message)),
                                f"message{i}": text,
                            }
                        )
                    await statements.write(upsert_messages(len(batch)), values)
                if any(seq >= count for seq in held):  # the chat was cut (a regeneration)
                    await statements.write(DROP_AFTER, {**key, "count": count})
        except _Unchanged:
            return False
        return True

    async def outline(self, app: str, user: str, chat_id: str) -> ChatOutline | None:
        rows = await self._database.read(OUTLINE, {"app": app, "user": user, "chat": chat_id})
        if not rows:
            return None
        whole = rows[0][0]
        if whole != IN_ROWS:  # written by an earlier version: read whole, written whole next
            messages = json.loads(whole)
            return ChatOutline(
                [m.get("id") for m in messages],
                [message_digest(message_json(m)) for m in messages],
                messages[-1] if messages else None,
                in_rows=False,
            )
        rows = [row for row in rows if row[2] is not None]
        last = rows[-1][3] if rows else None
        return ChatOutline(
            [row[1] for row in rows],
            [str(row[2]) for row in rows],
            json.loads(last) if last is not None else None,
        )

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
        whole = rows[0][5]
        if whole != IN_ROWS:  # written by an earlier version: moved to rows by the next write
            return ChatRecord(_summary(rows[0]), json.loads(whole))
        messages = [json.loads(row[6]) for row in rows if row[6] is not None]
        return ChatRecord(_summary(rows[0]), messages)

    async def rename(self, app: str, user: str, chat_id: str, title: str) -> bool:
        params = {"app": app, "user": user, "chat": chat_id, "title": title}
        return await self._database.write(RENAME, params) > 0

    async def take_fencing_token(self, app: str, user: str, chat_id: str, generation: int) -> int:
        params = {
            "app": app,
            "user": user,
            "chat": chat_id,
            "first": max(1, generation),
            "generation": generation,
        }
        async with self._database.transaction() as statements:
            ((token,),) = await statements.read(TAKE_TOKEN, params)
        return int(token)

    async def delete(self, app: str, user: str, chat_id: str) -> bool:
        params = {"app": app, "user": user, "chat": chat_id}
        async with self._database.transaction() as statements:
            deleted = await statements.write(DELETE, params) > 0
            await statements.write(DROP_MESSAGES, params)
            await statements.write(DROP_CHAT_LATE, params)
        return deleted

    async def keep_late_result(self, app: str, user: str, chat_id: str, late: LateResult) -> None:
        params = {
            "app": app,
            "user": user,
            "chat": chat_id,
            "call": late.call_id,
            "tool": late.tool_name,
            "response": json.dumps(late.response, ensure_ascii=False, separators=(",", ":")),
            "invocation": late.invocation_id,
            "author": late.author,
            "created": us_of(late.created_at),
        }
        await self._database.write(KEEP_LATE, params)

    async def late_results(self, app: str, user: str, chat_id: str) -> list[LateResult]:
        rows = await self._database.read(LATE, {"app": app, "user": user, "chat": chat_id})
        return [
            LateResult(
                str(call_id),
                str(tool),
                json.loads(response),
                str(invocation),
                str(author),
                utc_time(int(created)),
            )
            for call_id, tool, response, invocation, author, created in rows
        ]

    async def drop_late_result(self, app: str, user: str, chat_id: str, call_id: str) -> None:
        params = {"app": app, "user": user, "chat": chat_id, "call": call_id}
        await self._database.write(DROP_LATE, params)

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


class _PostgresStatements:
    def __init__(self, connection: AsyncConnection) -> None:
        self._connection = connection

    async def write(self, sql: str, params: Mapping[str, Any]) -> int:
        from sqlalchemy import text

        result = await self._connection.execute(text(sql), dict(params))
        return int(result.rowcount)

    async def read(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        from sqlalchemy import text

        result = await self._connection.execute(text(sql), dict(params))
        return [tuple(row) for row in result]


class PostgresDatabase:
    """Statements on ADK's engine (``DatabaseSessionService.db_engine``), which the session
    service owns and closes."""

    row_lock = " FOR UPDATE"

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
            await connection.execute(text(CREATE_MESSAGES_TABLE))
            await connection.execute(text(CREATE_LATE_TABLE))
            await connection.execute(text(CREATE_TOKENS_TABLE))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[_Statements]:
        async with self._engine.begin() as connection:
            yield _PostgresStatements(connection)

    async def write(self, sql: str, params: Mapping[str, Any]) -> int:
        async with self.transaction() as statements:
            return await statements.write(sql, params)

    async def read(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        async with self._engine.connect() as connection:
            return await _PostgresStatements(connection).read(sql, params)

    async def close(self) -> None:
        return None  # the engine is the session service's


class _SqliteStatements:
    def __init__(self, connection: aiosqlite.Connection) -> None:
        self._connection = connection

    async def write(self, sql: str, params: Mapping[str, Any]) -> int:
        cursor = await self._connection.execute(sql, dict(params))
        try:
            return int(cursor.rowcount)
        finally:
            await cursor.close()

    async def read(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        rows = await self._connection.execute_fetchall(sql, dict(params))
        return [tuple(row) for row in rows]


class SqliteDatabase:
    """One connection of our own to the store's file, in autocommit: every statement is its
    own transaction unless a ``transaction`` (``BEGIN IMMEDIATE``: the file's write lock at
    once) holds it. The requests share the connection, so they take turns on it: a statement
    never lands inside another request's transaction."""

    row_lock = ""  # BEGIN IMMEDIATE: the transaction holds the file's write lock

    def __init__(self, path: Path) -> None:
        self._path = path
        self._connection: aiosqlite.Connection | None = None
        self._opening = asyncio.Lock()
        self._turn = asyncio.Lock()

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
        async with self._turn:
            await connection.execute(CREATE_TABLE)
            await connection.execute(CREATE_INDEX)
            await connection.execute(CREATE_MESSAGES_TABLE)
            await connection.execute(CREATE_LATE_TABLE)
            await connection.execute(CREATE_TOKENS_TABLE)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[_Statements]:
        connection = await self._connected()
        async with self._turn:
            await connection.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteStatements(connection)
            except BaseException:
                await connection.execute("ROLLBACK")
                raise
            await connection.execute("COMMIT")

    async def write(self, sql: str, params: Mapping[str, Any]) -> int:
        connection = await self._connected()
        async with self._turn:
            return await _SqliteStatements(connection).write(sql, params)

    async def read(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        connection = await self._connected()
        async with self._turn:
            return await _SqliteStatements(connection).read(sql, params)

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

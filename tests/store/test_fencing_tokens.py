"""The chat index's fencing tokens (docs/adr/0074): each take returns one more than the last,
or the lease's generation when that is higher; two processes taking at once never get the
same; deleting the chat does not start them again. On each store the server supports."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from adk_stream_protocol.store.chat_index import ChatIndex, InMemoryChatIndex
from adk_stream_protocol.store.chat_tables import SqlChatIndex, SqliteDatabase, create_chat_index
from adk_stream_protocol.store.sessions import create_session_service


@pytest_asyncio.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.out_of_process)]
)
async def indexes(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[ChatIndex, ChatIndex]]:
    """Two indexes on one store, as two processes have them (in memory: one, held twice)."""
    if request.param == "memory":
        index = InMemoryChatIndex()
        yield index, index
        return
    if request.param == "sqlite":
        path = tmp_path / "store.db"
        one: ChatIndex = SqlChatIndex(SqliteDatabase(path))
        other: ChatIndex = SqlChatIndex(SqliteDatabase(path))
        service = None
    else:
        url = request.getfixturevalue("postgres_url")
        service = create_session_service(url)
        one, other = create_chat_index(url, service), create_chat_index(url, service)
    await asyncio.gather(one.prepare(), other.prepare())
    try:
        yield one, other
    finally:
        await one.close()
        await other.close()
        close = getattr(service, "close", None)
        if close is not None:
            await close()


@pytest.mark.asyncio
async def test_tokens_grow_by_one_or_jump_to_the_generation(
    indexes: tuple[ChatIndex, ChatIndex],
) -> None:
    one, other = indexes
    chat = f"chat-{uuid.uuid4().hex[:8]}"
    taken = [
        await one.take_fencing_token("app", "u", chat, 0),  # one process: no generation
        await other.take_fencing_token("app", "u", chat, 0),
        await one.take_fencing_token("app", "u", chat, 7),  # Redis counted seven takes
        await other.take_fencing_token("app", "u", chat, 8),
        await one.take_fencing_token("app", "u", chat, 1),  # Redis forgot: still above
    ]
    assert taken == [1, 2, 7, 8, 9]
    assert await one.take_fencing_token("app", "u", f"{chat}-other", 3) == 3
    await one.record_messages("app", "u", chat, [{"id": "m", "role": "user", "parts": []}])
    assert await one.delete("app", "u", chat)
    assert await other.take_fencing_token("app", "u", chat, 0) == 10


@pytest.mark.asyncio
async def test_two_takers_at_once_never_get_the_same_token(
    indexes: tuple[ChatIndex, ChatIndex],
) -> None:
    one, other = indexes
    chat = f"chat-{uuid.uuid4().hex[:8]}"
    taken = await asyncio.gather(
        *(index.take_fencing_token("app", "u", chat, 0) for index in [one, other] * 10)
    )
    assert sorted(taken) == list(range(1, 21))

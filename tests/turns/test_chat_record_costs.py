"""A turn's cost of the chat's record follows what it sends and adds, not what the chat holds
(turns/chat_records.py, docs/adr/0069): ``ChatRecords.complete``, ``open`` and the response's
``save`` on a real index (SQLite, PostgreSQL, in memory).

That a turn does not read the record's earlier messages is shown by making one of them
unreadable in the database: a turn that parsed it would fail, a turn that wrote it would
change it."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import text

from adk_stream_protocol.foundation.limits import RequestLimits
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.observability.recording import Recorder
from adk_stream_protocol.protocol.chunks import (
    FinishChunk,
    StartChunk,
    TextDeltaChunk,
    TextEndChunk,
    TextStartChunk,
)
from adk_stream_protocol.protocol.message_fold import MessageFold
from adk_stream_protocol.protocol.ui_messages import ChatRequest, parse_chat_request
from adk_stream_protocol.store.chat_index import ChatIndex
from adk_stream_protocol.store.chat_tables import MESSAGES_TABLE, TABLE, create_chat_index
from adk_stream_protocol.store.sessions import create_session_service
from adk_stream_protocol.turns.chat_records import ChatRecords

LIMITS = RequestLimits.from_settings(Settings())
MAX_ADDED = 1 << 20
USER = "user-1"


def message(message_id: str, text: str) -> dict[str, Any]:
    role = "user" if message_id.startswith("u") else "assistant"
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


def turns(count: int) -> list[dict[str, Any]]:
    return [
        m for n in range(count) for m in (message(f"u{n}", f"question {n}"), message(f"a{n}", "ok"))
    ]


def recipe(chat: str, sent: dict[str, Any], **extra: Any) -> ChatRequest:
    return parse_chat_request({"id": chat, "message": sent, **extra}, LIMITS)


class Store:
    def __init__(self, index: ChatIndex, url: str) -> None:
        self.index = index
        self.url = url

    async def sql(self, statement: str, **params: Any) -> list[tuple[Any, ...]]:
        assert self.url != "memory://", "the in-memory index has no rows: use sql_store"
        if self.url.startswith("sqlite"):
            import sqlite3

            with sqlite3.connect(self.url.removeprefix("sqlite:///")) as connection:
                return [tuple(row) for row in connection.execute(statement, params)]
        engine = self.index._database._engine  # type: ignore[attr-defined]
        async with engine.begin() as connection:
            result = await connection.execute(text(statement), params)
            return [tuple(row) for row in result] if result.returns_rows else []


@pytest_asyncio.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.out_of_process), "memory"]
)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async for opened in _opened(request, tmp_path):
        yield opened


@pytest_asyncio.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.out_of_process)]
)
async def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A store whose rows a test reads and changes in SQL (not the in-memory index)."""
    async for opened in _opened(request, tmp_path):
        yield opened


async def _opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'chats.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    service = create_session_service(url)
    index = create_chat_index(url, service)
    await index.prepare()
    try:
        yield Store(index, url)
    finally:
        await index.close()
        if hasattr(service, "close"):
            await service.close()


@pytest.fixture
def app() -> str:
    return f"app-{uuid.uuid4().hex[:8]}"


def answer(message_id: str, said: str) -> list[Any]:
    return [
        StartChunk(message_id=message_id),
        TextStartChunk(id="t"),
        TextDeltaChunk(id="t", delta=said),
        TextEndChunk(id="t"),
        FinishChunk(),
    ]


async def a_turn(records: ChatRecords, chat: str, request: ChatRequest, said: str) -> None:
    completed = await records.complete((USER, chat), request, max_added_bytes=MAX_ADDED)
    response = await records.open("stream", (USER, chat), completed)
    response.delivered(answer(f"a-{said}", said))
    await response.settle()


@pytest.mark.asyncio
async def test_a_recipe_turn_neither_reads_nor_writes_the_records_earlier_messages(
    store: Store, app: str
) -> None:
    records = ChatRecords(store.index, app, Recorder(None))
    chat = "long"
    await store.index.record_messages(app, USER, chat, turns(50))
    if store.url != "memory://":  # an earlier message made unreadable, its digest kept
        await store.sql(
            f"UPDATE {MESSAGES_TABLE} SET message = 'not json' WHERE app_name = :a AND seq = 3",
            a=app,
        )
    await a_turn(records, chat, recipe(chat, message("u-new", "next")), "done")
    outline = await store.index.outline(app, USER, chat)
    assert outline is not None
    assert outline.ids[-3:] == ["a49", "u-new", "a-done"] and len(outline.ids) == 102
    assert outline.last is not None and outline.last["parts"][-1]["text"] == "done"
    if store.url != "memory://":
        row = await store.sql(
            f"SELECT message FROM {MESSAGES_TABLE} WHERE app_name = :a AND seq = 3", a=app
        )
        assert row == [("not json",)]
        await store.sql(
            f"UPDATE {MESSAGES_TABLE} SET message = :m WHERE app_name = :a AND seq = 3",
            a=app,
            m=json.dumps(turns(50)[3], separators=(",", ":")),
        )
    record = await store.index.get_chat(app, USER, chat)
    assert record is not None
    assert record.messages[:100] == turns(50) and record.summary.title == "question 0"
    assert record.messages[100] == message("u-new", "next")


@pytest.mark.asyncio
async def test_a_response_that_continues_an_earlier_message_is_recorded_as_the_page_holds_it(
    store: Store, app: str
) -> None:
    """A response whose ``start`` names one of the record's earlier messages replaces it on
    the page: the record reads what it did not hold and writes the chat as the page has it."""
    records = ChatRecords(store.index, app, Recorder(None))
    chat, held = "earlier", turns(3)
    await store.index.record_messages(app, USER, chat, held)
    sent = message("u-new", "again")
    completed = await records.complete((USER, chat), recipe(chat, sent), max_added_bytes=MAX_ADDED)
    response = await records.open("stream", (USER, chat), completed)
    chunks = answer("a1", "replaced")
    response.delivered(chunks)
    await response.settle()
    page = MessageFold([*held, sent]).apply_all([c.to_wire_dict() for c in chunks])
    record = await store.index.get_chat(app, USER, chat)
    assert record is not None and record.messages == page
    assert record.messages[3]["parts"][-1]["text"] == "replaced"


@pytest.mark.asyncio
async def test_edits_and_whole_chats_are_joined_and_written_as_before(
    store: Store, app: str
) -> None:
    records = ChatRecords(store.index, app, Recorder(None))
    chat, held = "edits", turns(3)
    await store.index.record_messages(app, USER, chat, held)
    # An edit of an earlier message: the stored messages are read to join it.
    edited = message("u1", "question 1, edited")
    await a_turn(records, chat, recipe(chat, edited, messageId="u1"), "edited")
    record = await store.index.get_chat(app, USER, chat)
    assert record is not None
    assert [m["id"] for m in record.messages] == ["u0", "a0", "u1", "a-edited"]
    assert record.messages[2] == edited
    # The whole chat, as stock useChat sends it, with a new message.
    whole = parse_chat_request(
        {"id": chat, "messages": [*record.messages, message("u9", "whole")]}, LIMITS
    )
    await a_turn(records, chat, whole, "whole")
    again = await store.index.get_chat(app, USER, chat)
    assert again is not None
    assert again.messages == [*record.messages, message("u9", "whole"), again.messages[-1]]
    assert again.summary.title == "question 0"


@pytest.mark.asyncio
async def test_a_chat_an_earlier_version_wrote_whole_moves_to_rows_on_a_recipe_turn(
    sql_store: Store, app: str
) -> None:
    chat, old = "old", turns(2)
    await sql_store.sql(
        f"INSERT INTO {TABLE} (app_name, user_id, chat_id, title, title_set, created_at_us, "
        "updated_at_us, waiting, messages) VALUES (:a, :u, :c, 'question 0', FALSE, 1, 1, NULL, "
        ":m)",
        a=app,
        u=USER,
        c=chat,
        m=json.dumps(old, separators=(",", ":")),
    )
    records = ChatRecords(sql_store.index, app, Recorder(None))
    await a_turn(records, chat, recipe(chat, message("u-new", "next")), "done")
    rows = await sql_store.sql(
        f"SELECT count(*) FROM {MESSAGES_TABLE} WHERE app_name = :a AND chat_id = :c",
        a=app,
        c=chat,
    )
    assert rows == [(6,)]
    record = await sql_store.index.get_chat(app, USER, chat)
    assert record is not None and record.messages[:5] == [*old, message("u-new", "next")]


@pytest.mark.asyncio
async def test_a_response_with_no_request_continues_the_records_last_message_alone(
    store: Store, app: str
) -> None:
    """A backend's result or a cut turn's finish: the record's last message goes on, and its
    earlier messages are neither read nor written."""
    records = ChatRecords(store.index, app, Recorder(None))
    chat, held = "no-request", turns(20)
    await store.index.record_messages(app, USER, chat, held)
    if store.url != "memory://":
        await store.sql(
            f"UPDATE {MESSAGES_TABLE} SET message = 'not json' WHERE app_name = :a AND seq = 0",
            a=app,
        )
    response = await records.open("stream", (USER, chat), None)
    chunks = answer("a19", " and more")
    response.delivered(chunks)
    await response.settle()
    page = MessageFold(held).apply_all([c.to_wire_dict() for c in chunks])
    outline = await store.index.outline(app, USER, chat)
    assert outline is not None and outline.last == page[-1] and len(outline.ids) == 40
    assert [part.get("text") for part in page[-1]["parts"]][-1] == " and more"


@pytest.mark.asyncio
async def test_a_whole_chat_sent_as_the_record_holds_it_neither_reads_nor_rewrites_the_record(
    store: Store, app: str
) -> None:
    """Stock useChat sends the whole chat: what it sends is read, the record's messages are
    not (their digests say they are the sent ones), and only the new message is written."""
    records = ChatRecords(store.index, app, Recorder(None))
    chat, held = "whole", turns(30)
    await store.index.record_messages(app, USER, chat, held)
    if store.url != "memory://":
        await store.sql(
            f"UPDATE {MESSAGES_TABLE} SET message = 'not json' WHERE app_name = :a AND seq = 5",
            a=app,
        )
    whole = parse_chat_request({"id": chat, "messages": [*held, message("u-new", "next")]}, LIMITS)
    await a_turn(records, chat, whole, "done")
    outline = await store.index.outline(app, USER, chat)
    assert outline is not None and outline.ids[-2:] == ["u-new", "a-done"]
    if store.url != "memory://":
        row = await store.sql(
            f"SELECT message FROM {MESSAGES_TABLE} WHERE app_name = :a AND seq = 5", a=app
        )
        assert row == [("not json",)]

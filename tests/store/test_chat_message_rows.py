"""A chat's messages as rows (store/chat_tables.py, docs/adr/0069), on SQLite and on a real
PostgreSQL: a write stores only the messages that are new or changed, and a chat an earlier
version wrote whole (one JSON array in ``adk_stream_chats.messages``) reads as it did and
moves to rows on its first write. A write told that the chat's first messages are the
record's own (``since``) neither reads nor writes them, and keeps the title they give; the
outline a turn joins on gives ids and digests without reading every message.

Which rows a write touched is read from the database itself: PostgreSQL's ``xmin`` (the
transaction that wrote the row version), SQLite's triggers logging each insert and update."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import text

from adk_stream_protocol.store.chat_index import (
    UNTITLED,
    ChatIndex,
    InMemoryChatIndex,
    StaleRecordError,
    message_digest,
    message_json,
)
from adk_stream_protocol.store.chat_tables import MESSAGES_TABLE, TABLE, create_chat_index
from adk_stream_protocol.store.sessions import create_session_service

USER = "user-1"
CHAT = "chat-1"

# What the version before ADR 0069 wrote: the whole chat in the chat's row.
OLD_WRITE = f"""
INSERT INTO {TABLE}
    (app_name, user_id, chat_id, title, title_set, created_at_us, updated_at_us, waiting, messages)
VALUES (:app, :user, :chat, :title, FALSE, :now, :now, NULL, :messages)"""


def turn(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"u{n}", "role": "user", "parts": [{"type": "text", "text": f"question {n}"}]},
        {"id": f"a{n}", "role": "assistant", "parts": [{"type": "text", "text": f"answer {n}"}]},
    ]


def turns(count: int) -> list[dict[str, Any]]:
    return [message for n in range(1, count + 1) for message in turn(n)]


class Probe:
    """The database as the test sees it, beside the index's own connection."""

    def __init__(self, index: ChatIndex, backend: str, url: str) -> None:
        self.index = index
        self.backend = backend
        self._url = url

    async def sql(self, statement: str, **params: Any) -> list[tuple[Any, ...]]:
        if self.backend == "sqlite":
            with sqlite3.connect(self._url.removeprefix("sqlite:///")) as connection:
                return [tuple(row) for row in connection.execute(statement, params)]
        engine = self.index._database._engine  # type: ignore[attr-defined]
        async with engine.begin() as connection:
            result = await connection.execute(text(statement), params)
            return [tuple(row) for row in result] if result.returns_rows else []

    async def watch_writes(self) -> None:
        if self.backend == "sqlite":
            for when in ("INSERT", "UPDATE"):
                await self.sql(
                    f"CREATE TRIGGER IF NOT EXISTS log_{when.lower()} AFTER {when} "
                    f"ON {MESSAGES_TABLE} BEGIN INSERT INTO writes VALUES (new.seq); END"
                )
            await self.sql("CREATE TABLE IF NOT EXISTS writes (seq INTEGER)")

    async def versions(self, app: str) -> dict[int, str]:
        """Each message row's version: it changes exactly when a write touches the row."""
        if self.backend == "sqlite":
            rows = await self.sql(
                f"SELECT seq, count(w.seq) FROM {MESSAGES_TABLE} m "
                "LEFT JOIN writes w USING (seq) WHERE app_name = :app GROUP BY seq",
                app=app,
            )
        else:
            rows = await self.sql(
                f"SELECT seq, xmin::text FROM {MESSAGES_TABLE} WHERE app_name = :app", app=app
            )
        return {int(seq): str(version) for seq, version in rows}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.out_of_process)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    if request.param == "sqlite":
        return "sqlite", f"sqlite:///{tmp_path / 'chats.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return "postgres", url


@pytest_asyncio.fixture
async def probe(backend: tuple[str, str]) -> AsyncIterator[Probe]:
    name, url = backend
    service = create_session_service(url)
    index = create_chat_index(url, service)
    await index.prepare()
    try:
        yield Probe(index, name, url)
    finally:
        await index.close()
        if hasattr(service, "close"):
            await service.close()


@pytest.fixture
def app() -> str:
    return f"app-{uuid.uuid4().hex[:8]}"


@pytest.mark.asyncio
async def test_a_write_touches_only_the_messages_that_are_new_or_changed(
    probe: Probe, app: str
) -> None:
    await probe.watch_writes()
    index = probe.index
    chat = turns(3)
    await index.record_messages(app, USER, CHAT, chat)
    before = await probe.versions(app)
    assert sorted(before) == list(range(6))
    # A turn: its user message at the start, its answer at the end.
    chat.append(turn(4)[0])
    await index.record_messages(app, USER, CHAT, chat, create=False)
    after_start = await probe.versions(app)
    assert {seq: v for seq, v in after_start.items() if before.get(seq) != v}.keys() == {6}
    answered = [*chat, turn(4)[1]]
    answered[5] = {**answered[5], "parts": [{"type": "text", "text": "answer 3, edited"}]}
    await index.record_messages(app, USER, CHAT, answered, create=False)
    after_end = await probe.versions(app)
    assert {seq for seq, v in after_end.items() if after_start.get(seq) != v} == {5, 7}
    record = await index.get_chat(app, USER, CHAT)
    assert record is not None and record.messages == answered
    # The same messages again: no message row written.
    await index.record_messages(app, USER, CHAT, answered, create=False)
    assert await probe.versions(app) == after_end


@pytest.mark.asyncio
async def test_a_cut_chat_drops_the_rows_past_its_end(probe: Probe, app: str) -> None:
    index = probe.index
    await index.record_messages(app, USER, CHAT, turns(3))
    regenerated = turns(3)[:3]  # regenerate the answer to u2
    await index.record_messages(app, USER, CHAT, regenerated, create=False)
    record = await index.get_chat(app, USER, CHAT)
    assert record is not None and record.messages == regenerated
    rows = await probe.sql(f"SELECT count(*) FROM {MESSAGES_TABLE} WHERE app_name = :a", a=app)
    assert rows == [(3,)]
    assert await index.record_messages(app, USER, CHAT, [], create=False)
    empty = await index.get_chat(app, USER, CHAT)
    assert empty is not None and empty.messages == []


@pytest.mark.asyncio
async def test_a_deleted_chat_leaves_no_message_rows(probe: Probe, app: str) -> None:
    index = probe.index
    await index.record_messages(app, USER, CHAT, turns(2))
    await index.record_messages(app, USER, "other", turns(1))
    assert await index.delete(app, USER, CHAT)
    rows = await probe.sql(
        f"SELECT chat_id, count(*) FROM {MESSAGES_TABLE} WHERE app_name = :a GROUP BY chat_id",
        a=app,
    )
    assert rows == [("other", 2)]
    # Not brought back by the end of a response that was under way.
    assert not await index.record_messages(app, USER, CHAT, turns(3), create=False)
    assert await probe.sql(
        f"SELECT count(*) FROM {MESSAGES_TABLE} WHERE app_name = :a AND chat_id = :c",
        a=app,
        c=CHAT,
    ) == [(0,)]


@pytest.mark.asyncio
async def test_a_chat_an_earlier_version_wrote_whole_reads_as_before_and_moves_on_its_first_write(
    probe: Probe, app: str
) -> None:
    index = probe.index
    old = turns(3)
    now = 1_800_000_000_000_000
    whole = json.dumps(old, separators=(",", ":"))
    await probe.sql(
        OLD_WRITE, app=app, user=USER, chat=CHAT, title="question 1", now=now, messages=whole
    )
    record = await index.get_chat(app, USER, CHAT)
    assert record is not None and record.messages == old
    assert record.summary.title == "question 1"
    page = await index.list_chats(app, USER, limit=10)
    assert [c.chat_id for c in page.chats] == [CHAT]
    # The first write moves it: the column emptied, a row per message, the chat read the same.
    grown = [*old, turn(4)[0]]
    assert await index.record_messages(app, USER, CHAT, grown, create=False)
    column = await probe.sql(f"SELECT messages FROM {TABLE} WHERE app_name = :a", a=app)
    assert column == [("",)]
    rows = await probe.sql(
        f"SELECT seq, message FROM {MESSAGES_TABLE} WHERE app_name = :a ORDER BY seq", a=app
    )
    assert [json.loads(message) for _, message in rows] == grown
    moved = await index.get_chat(app, USER, CHAT)
    assert moved is not None and moved.messages == grown
    assert moved.summary.created_at == record.summary.created_at


@pytest.mark.asyncio
async def test_two_writers_of_a_chat_leave_one_of_their_chats_never_a_mix(
    probe: Probe, backend: tuple[str, str], app: str
) -> None:
    """Two processes (two indexes, each with its own connections) write different versions of
    one chat at once, again and again: each write is one transaction, so the chat read back is
    always one of the versions whole."""
    _, url = backend
    other_service = create_session_service(url)
    other = create_chat_index(url, other_service)
    await other.prepare()
    long, short = turns(5), [*turns(2)[:3], {**turn(9)[0], "id": "u-other"}]
    try:
        await probe.index.record_messages(app, USER, CHAT, long)
        for _ in range(10):
            await asyncio.gather(
                probe.index.record_messages(app, USER, CHAT, long, create=False),
                other.record_messages(app, USER, CHAT, short, create=False),
                probe.index.record_messages(app, USER, CHAT, short, create=False),
                other.record_messages(app, USER, CHAT, long, create=False),
            )
            record = await probe.index.get_chat(app, USER, CHAT)
            assert record is not None and record.messages in (long, short)
    finally:
        await other.close()
        if hasattr(other_service, "close"):
            await other_service.close()


@pytest_asyncio.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.out_of_process), "memory"]
)
async def any_index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ChatIndex]:
    """The database's index (SQLite and PostgreSQL) and the in-memory one: the rules of
    ``since`` and ``outline`` are the same."""
    if request.param == "memory":
        yield InMemoryChatIndex()
        return
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'chats.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    service = create_session_service(url)
    index = create_chat_index(url, service)
    await index.prepare()
    try:
        yield index
    finally:
        await index.close()
        if hasattr(service, "close"):
            await service.close()


def placeholders(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a turn holds of the record's first messages: their ids only."""
    return [{"id": message["id"]} for message in messages]


@pytest.mark.asyncio
async def test_a_write_since_leaves_the_records_first_messages_alone(
    any_index: ChatIndex, app: str
) -> None:
    chat = turns(3)
    await any_index.record_messages(app, USER, CHAT, chat)
    grown = [*chat, turn(4)[0]]
    # The first six are the record's own: placeholders stand for them, never written.
    assert await any_index.record_messages(
        app, USER, CHAT, [*placeholders(chat), turn(4)[0]], create=False, since=6
    )
    record = await any_index.get_chat(app, USER, CHAT)
    assert record is not None and record.messages == grown
    assert record.summary.title == "question 1" and record.summary.waiting is None
    # The answer, waiting for an approval, and a cut: what is past the end is dropped.
    waiting = {
        "id": "a4",
        "role": "assistant",
        "parts": [{"type": "tool-x", "toolCallId": "c", "state": "approval-requested"}],
    }
    await any_index.record_messages(
        app, USER, CHAT, [*placeholders(grown), waiting], create=False, since=7
    )
    record = await any_index.get_chat(app, USER, CHAT)
    assert record is not None and record.messages == [*grown, waiting]
    assert record.summary.waiting == "approval"
    regenerated = [*placeholders(chat[:2]), {**chat[2], "id": "a2-again"}]
    await any_index.record_messages(app, USER, CHAT, regenerated, create=False, since=2)
    record = await any_index.get_chat(app, USER, CHAT)
    assert record is not None and record.messages == [*chat[:2], {**chat[2], "id": "a2-again"}]


@pytest.mark.asyncio
async def test_a_write_since_takes_the_title_from_what_it_writes_when_the_first_have_none(
    any_index: ChatIndex, app: str
) -> None:
    greeting = {"id": "a0", "role": "assistant", "parts": [{"type": "text", "text": "hello"}]}
    await any_index.record_messages(app, USER, CHAT, [greeting])
    record = await any_index.get_chat(app, USER, CHAT)
    assert record is not None and record.summary.title == UNTITLED
    asked = turn(7)[0]
    await any_index.record_messages(app, USER, CHAT, [{"id": "a0"}, asked], since=1)
    record = await any_index.get_chat(app, USER, CHAT)
    assert record is not None and record.summary.title == "question 7"
    # A later turn's write keeps it (the first user text is now among the record's own)...
    await any_index.record_messages(
        app, USER, CHAT, [{"id": "a0"}, {"id": "u7"}, turn(8)[0]], since=2
    )
    record = await any_index.get_chat(app, USER, CHAT)
    assert record is not None and record.summary.title == "question 7"
    # ...and a rename wins over both.
    assert await any_index.rename(app, USER, CHAT, "mine")
    await any_index.record_messages(app, USER, CHAT, [{"id": "a0"}, turn(9)[0]], since=1)
    record = await any_index.get_chat(app, USER, CHAT)
    assert record is not None and record.summary.title == "mine"


@pytest.mark.asyncio
async def test_the_outline_gives_ids_digests_and_the_last_message(
    any_index: ChatIndex, app: str
) -> None:
    assert await any_index.outline(app, USER, CHAT) is None
    chat = turns(3)
    await any_index.record_messages(app, USER, CHAT, chat)
    outline = await any_index.outline(app, USER, CHAT)
    assert outline is not None and outline.in_rows
    assert outline.ids == [m["id"] for m in chat]
    assert outline.digests == [message_digest(message_json(m)) for m in chat]
    assert outline.last == chat[-1]
    await any_index.record_messages(app, USER, CHAT, [])
    empty = await any_index.outline(app, USER, CHAT)
    assert empty is not None and (empty.ids, empty.digests, empty.last) == ([], [], None)


@pytest.mark.asyncio
async def test_a_write_since_on_a_chat_not_in_rows_writes_nothing(probe: Probe, app: str) -> None:
    """An earlier version's whole chat holds no rows: a write that counts on them is refused
    (the caller writes the chat whole), and so is one on a chat that is not there."""
    index = probe.index
    old = turns(2)
    whole = json.dumps(old, separators=(",", ":"))
    await probe.sql(OLD_WRITE, app=app, user=USER, chat=CHAT, title="q", now=1, messages=whole)
    outline = await index.outline(app, USER, CHAT)
    assert outline is not None and not outline.in_rows
    assert outline.ids == ["u1", "a1", "u2", "a2"] and outline.last == old[-1]
    with pytest.raises(StaleRecordError):
        await index.record_messages(
            app, USER, CHAT, [*placeholders(old), turn(3)[0]], create=False, since=4
        )
    record = await index.get_chat(app, USER, CHAT)
    assert record is not None and record.messages == old  # rolled back: still the column
    with pytest.raises(StaleRecordError):
        await index.record_messages(app, USER, "new-chat", [{"id": "x"}, turn(1)[0]], since=1)
    assert await index.get_chat(app, USER, "new-chat") is None


@pytest.mark.asyncio
async def test_a_write_since_reads_and_writes_only_the_rows_from_there(
    probe: Probe, app: str
) -> None:
    await probe.watch_writes()
    index = probe.index
    chat = turns(3)
    await index.record_messages(app, USER, CHAT, chat)
    before = await probe.versions(app)
    # The record's first messages as placeholders: a write that read them would store these.
    await index.record_messages(
        app, USER, CHAT, [*placeholders(chat), turn(4)[0]], create=False, since=6
    )
    after = await probe.versions(app)
    assert {seq for seq, v in after.items() if before.get(seq) != v} == {6}
    titled = await probe.sql(
        f"SELECT seq, message_id, titled FROM {MESSAGES_TABLE} WHERE app_name = :a ORDER BY seq",
        a=app,
    )
    assert [(seq, mid, bool(t)) for seq, mid, t in titled] == [
        (n, m["id"], m["role"] == "user") for n, m in enumerate([*chat, turn(4)[0]])
    ]

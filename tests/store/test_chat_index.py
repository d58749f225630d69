"""The chat index (store/chat_index.py, store/chat_tables.py; docs/adr/0043): each contract test
runs on the three implementations, in memory, on SQLite and on a real PostgreSQL
(tests/support/services.py: skipped, saying why, without one). What races between processes do
is in test_chat_index_races.py."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from adk_stream_protocol.store import chat_index, chat_tables
from adk_stream_protocol.store.chat_index import (
    TITLE_MAX_CHARS,
    UNTITLED,
    ChatIndex,
    InMemoryChatIndex,
    InvalidCursorError,
    encode_cursor,
    title_of,
    waiting_of,
)
from adk_stream_protocol.store.chat_tables import (
    PostgresDatabase,
    SqlChatIndex,
    create_chat_index,
)
from adk_stream_protocol.store.sessions import create_session_service

USER = "user-1"


def user(text: str, message_id: str = "u1", *, files: int = 0) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [
        {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA=="}
    ] * files
    return {"id": message_id, "role": "user", "parts": [*parts, {"type": "text", "text": text}]}


def assistant(*parts: dict[str, Any], message_id: str = "a1") -> dict[str, Any]:
    return {"id": message_id, "role": "assistant", "parts": list(parts)}


def tool(state: str, **fields: Any) -> dict[str, Any]:
    return {"type": "tool-pay", "toolCallId": "call-1", "state": state, "input": {}, **fields}


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.out_of_process)]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store's URL."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'chats.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest_asyncio.fixture
async def index(backend: str) -> AsyncIterator[ChatIndex]:
    """The index as the app builds it: beside the session service of the same URL."""
    service = create_session_service(backend)
    built = create_chat_index(backend, service)
    await built.prepare()
    try:
        yield built
    finally:
        await built.close()
        if hasattr(service, "close"):
            await service.close()


@pytest.fixture
def app() -> str:
    """An app name of the test's own: the PostgreSQL database is the run's."""
    return f"app-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The rows' clock, set by the test (``clock[0]``, microseconds): a process whose clock is
    behind another's, or writes within one tick."""
    now = [1_800_000_000_000_000]
    for module in (chat_index, chat_tables):
        monkeypatch.setattr(module, "now_us", lambda: now[0])
    yield now


# -- what a row holds ---------------------------------------------------------------------------


def test_the_title_is_the_first_user_text_collapsed_and_shortened_at_a_word() -> None:
    assert title_of([user("  Plan   a\ntrip\tto  Kyoto ")]) == "Plan a trip to Kyoto"
    assert title_of([assistant({"type": "text", "text": "hi"}), user("second")]) == "second"
    long = "word " * 40
    shortened = title_of([user(long)])
    assert len(shortened) <= TITLE_MAX_CHARS and shortened.endswith("…")
    assert shortened.removesuffix("…").split() == ["word"] * len(
        shortened.removesuffix("…").split()
    )
    unbroken = "x" * 200  # no space to cut at: cut inside
    assert title_of([user(unbroken)]) == "x" * (TITLE_MAX_CHARS - 1) + "…"
    assert title_of([user("a" * TITLE_MAX_CHARS)]) == "a" * TITLE_MAX_CHARS  # fits as it is
    # A message with only a file has no text: the next one's is the title; none at all: untitled.
    only_file = {"id": "u0", "role": "user", "parts": [{"type": "file", "url": "data:,"}]}
    assert title_of([only_file, user("with text")]) == "with text"
    assert title_of([only_file]) == UNTITLED
    assert title_of([]) == UNTITLED
    assert title_of([user("  \n ")]) == UNTITLED


def test_what_waits_is_read_from_the_last_message_when_it_is_the_assistants() -> None:
    asked = tool("approval-requested", approval={"id": "apr-1"})
    browser = tool("input-available")
    done = tool("output-available", output={"ok": True})
    assert waiting_of([user("pay"), assistant(asked)]) == "approval"
    assert waiting_of([user("where am I"), assistant(browser)]) == "browser"
    assert waiting_of([user("pay"), assistant(browser, asked)]) == "approval"  # the user acts
    assert (
        waiting_of([user("x"), assistant(tool("input-available", providerExecuted=True))]) is None
    )
    assert waiting_of([user("pay"), assistant(done)]) is None
    assert waiting_of([user("pay"), assistant(asked), user("never mind")]) is None
    dynamic = {
        "type": "dynamic-tool",
        "toolName": "t",
        "toolCallId": "c",
        "state": "input-available",
    }
    assert waiting_of([user("x"), assistant(dynamic)]) == "browser"
    assert waiting_of([]) is None


# -- the contract, on every store ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_recorded_chat_reads_back_exactly(index: ChatIndex, app: str) -> None:
    messages = [
        user("Héllo 👋 \u0000 null\u009f and \\ backslash", files=1),
        assistant(
            {"type": "step-start"},
            {"type": "reasoning", "text": "think", "state": "done"},
            tool("approval-requested", approval={"id": "apr-1"}, input={"amount": 1.5e300}),
            {"type": "data-weather", "id": "w", "data": {"nested": [[1, None, True, "ü"]]}},
        )
        | {"metadata": {"usage": {"inputTokens": 3}}},
    ]
    assert await index.record_messages(app, USER, "chat-1", messages) is True
    record = await index.get_chat(app, USER, "chat-1")
    assert record is not None
    assert record.messages == messages
    summary = record.summary
    assert (summary.chat_id, summary.waiting) == ("chat-1", "approval")
    assert summary.title == "Héllo 👋 null and \\ backslash"  # one line: no control character
    assert summary.created_at == summary.updated_at
    assert summary.created_at.utcoffset() is not None and not summary.created_at.utcoffset()
    assert await index.get_chat(app, USER, "chat-2") is None


@pytest.mark.asyncio
async def test_a_later_record_replaces_the_messages_and_moves_the_chat(
    index: ChatIndex, app: str, clock: list[int]
) -> None:
    await index.record_messages(app, USER, "chat-1", [user("first")])
    clock[0] += 10
    await index.record_messages(app, USER, "chat-2", [user("second")])
    clock[0] += 10
    answered = [user("first"), assistant({"type": "text", "text": "done"})]
    assert await index.record_messages(app, USER, "chat-1", answered) is True
    record = await index.get_chat(app, USER, "chat-1")
    assert record is not None and record.messages == answered
    assert record.summary.updated_at > record.summary.created_at
    page = await index.list_chats(app, USER, limit=10)
    assert [c.chat_id for c in page.chats] == ["chat-1", "chat-2"]


@pytest.mark.asyncio
async def test_a_record_that_may_not_create_leaves_a_missing_chat_missing(
    index: ChatIndex, app: str
) -> None:
    assert await index.record_messages(app, USER, "gone", [user("x")], create=False) is False
    assert await index.get_chat(app, USER, "gone") is None
    await index.record_messages(app, USER, "gone", [user("x")])
    assert await index.delete(app, USER, "gone") is True
    # The end of a response that ran while the chat was deleted does not bring it back.
    assert await index.record_messages(app, USER, "gone", [user("x")], create=False) is False
    assert await index.get_chat(app, USER, "gone") is None
    assert (await index.list_chats(app, USER, limit=5)).chats == []


@pytest.mark.asyncio
async def test_a_rename_is_kept_by_later_records_and_is_not_activity(
    index: ChatIndex, app: str, clock: list[int]
) -> None:
    await index.record_messages(app, USER, "chat-1", [user("original question")])
    clock[0] += 10
    await index.record_messages(app, USER, "chat-2", [user("other")])
    clock[0] += 10
    assert await index.rename(app, USER, "chat-1", "My trip") is True
    assert await index.rename(app, USER, "nope", "x") is False
    page = await index.list_chats(app, USER, limit=10)
    assert [(c.chat_id, c.title) for c in page.chats] == [
        ("chat-2", "other"),
        ("chat-1", "My trip"),
    ]
    clock[0] += 10
    edited = [user("an edited first question")]
    for create in (True, False):
        assert await index.record_messages(app, USER, "chat-1", edited, create=create)
        record = await index.get_chat(app, USER, "chat-1")
        assert record is not None and record.summary.title == "My trip"
        assert record.messages == edited


@pytest.mark.asyncio
async def test_updated_at_never_goes_back(index: ChatIndex, app: str, clock: list[int]) -> None:
    """A process whose clock is a little behind writes after another: the chat keeps its
    place rather than sinking below chats written before it."""
    await index.record_messages(app, USER, "chat-1", [user("a")])
    ahead = clock[0]
    clock[0] -= 1_000
    await index.record_messages(app, USER, "chat-1", [user("b")], create=False)
    record = await index.get_chat(app, USER, "chat-1")
    assert record is not None and record.messages == [user("b")]
    assert record.summary.updated_at == chat_index.utc_time(ahead)


@pytest.mark.asyncio
async def test_pages_give_every_chat_once_newest_first(
    index: ChatIndex, app: str, clock: list[int]
) -> None:
    for n in range(23):
        clock[0] += 1
        await index.record_messages(app, USER, f"chat-{n:02}", [user(f"q{n}")])
    seen = await _walk(index, app, limit=5)
    assert seen == [f"chat-{n:02}" for n in reversed(range(23))]
    page = await index.list_chats(app, USER, limit=23)
    assert len(page.chats) == 23 and page.next_cursor is None


@pytest.mark.asyncio
async def test_chats_written_in_the_same_tick_page_by_chat_id(
    index: ChatIndex, app: str, clock: list[int]
) -> None:
    for n in range(12):
        await index.record_messages(app, USER, f"chat-{n:02}", [user("q")])
    assert await _walk(index, app, limit=5) == [f"chat-{n:02}" for n in reversed(range(12))]


@pytest.mark.asyncio
async def test_paging_stays_consistent_while_chats_are_written(
    index: ChatIndex, app: str, clock: list[int]
) -> None:
    """A chat written between two pages moves to the top, which the reader already has: it
    is not given again, and no chat that stayed where it was is skipped."""
    for n in range(20):
        clock[0] += 1
        await index.record_messages(app, USER, f"chat-{n:02}", [user("q")])
    first = await index.list_chats(app, USER, limit=5)
    assert [c.chat_id for c in first.chats] == [f"chat-{n:02}" for n in range(19, 14, -1)]
    for chat_id in ("chat-17", "chat-03", "chat-new"):
        clock[0] += 1
        await index.record_messages(app, USER, chat_id, [user("q")])
    await index.delete(app, USER, "chat-10")
    rest = await _walk(index, app, limit=5, cursor=first.next_cursor)
    assert rest == [f"chat-{n:02}" for n in range(14, -1, -1) if n not in (10, 3)]
    again = await _walk(index, app, limit=5)
    assert again[:3] == ["chat-new", "chat-03", "chat-17"]
    assert sorted(again) == sorted({*(f"chat-{n:02}" for n in range(20)), "chat-new"} - {"chat-10"})


@pytest.mark.asyncio
async def test_a_cursor_not_given_out_is_refused(index: ChatIndex, app: str) -> None:
    def b64(text: str) -> str:
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    for cursor in ("", "%%%", "not base64!", b64("12.bad id"), b64("x.chat"), b64("1" * 30 + ".c")):
        with pytest.raises(InvalidCursorError):
            await index.list_chats(app, USER, limit=5, cursor=cursor)
    with pytest.raises(ValueError):
        await index.list_chats(app, USER, limit=0)
    # A well-formed cursor of a chat that is gone still pages from where it was.
    page = await index.list_chats(app, USER, limit=5, cursor=encode_cursor(10**18, "any"))
    assert page.chats == [] and page.next_cursor is None


@pytest.mark.asyncio
async def test_users_and_apps_are_kept_apart(index: ChatIndex, app: str) -> None:
    await index.record_messages(app, USER, "chat-1", [user("mine")])
    await index.record_messages(app, "user-2", "chat-1", [user("theirs")])
    await index.record_messages(f"{app}-other", USER, "chat-1", [user("other app")])
    record = await index.get_chat(app, USER, "chat-1")
    assert record is not None and record.summary.title == "mine"
    assert await index.rename(app, "user-3", "chat-1", "x") is False
    assert await index.delete(app, "user-3", "chat-1") is False
    assert await index.delete(app, USER, "chat-1") is True
    assert await index.delete(app, USER, "chat-1") is False
    theirs = await index.list_chats(app, "user-2", limit=5)
    assert [c.title for c in theirs.chats] == ["theirs"]
    other = await index.list_chats(f"{app}-other", USER, limit=5)
    assert [c.title for c in other.chats] == ["other app"]


# -- which index a store gets -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_each_store_gets_its_index_beside_it(tmp_path: Path) -> None:
    assert isinstance(
        create_chat_index("memory://", create_session_service("memory://")), InMemoryChatIndex
    )
    url = f"sqlite:///{tmp_path / 'nested' / 'store.db'}"
    index = create_chat_index(url, create_session_service(url))
    assert isinstance(index, SqlChatIndex)
    await index.prepare()
    await index.prepare()  # a second start finds the table there
    await index.close()
    assert (tmp_path / "nested" / "store.db").is_file()
    with pytest.raises(ValueError, match="no chat index"):
        create_chat_index("redis://x", create_session_service("memory://"))


def test_only_postgresql_engines_are_taken() -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    with pytest.raises(ValueError, match="SQLite or PostgreSQL"):
        PostgresDatabase(create_async_engine("sqlite+aiosqlite:///:memory:"))


async def _walk(index: ChatIndex, app: str, *, limit: int, cursor: str | None = None) -> list[str]:
    """Every chat id from ``cursor`` on, a page at a time; no page longer than ``limit``."""
    seen: list[str] = []
    while True:
        page = await index.list_chats(app, USER, limit=limit, cursor=cursor)
        assert len(page.chats) <= limit
        seen.extend(c.chat_id for c in page.chats)
        if page.next_cursor is None:
            return seen
        assert len(page.chats) == limit
        cursor = page.next_cursor


@pytest.mark.asyncio
async def test_a_start_that_only_adds_messages_leaves_the_chats_row_and_its_place(
    index: ChatIndex, app: str, clock: list[int]
) -> None:
    """``record_start``, a response's start: the chat keeps its time and place when only its
    messages change (its end moves it); a change of what it waits for or of its title is
    written, with the time, as always."""
    only_file = {"id": "u0", "role": "user", "parts": [{"type": "file", "url": "data:,"}]}
    asked = assistant(tool("approval-requested", approval={"id": "apr-1"}))
    answered = [user("third"), assistant({"type": "text", "text": "ok"})]
    await index.record_messages(app, USER, "chat-3", answered)
    created = clock[0]
    clock[0] += 10
    await index.record_messages(app, USER, "chat-1", [user("first"), asked])
    await index.record_messages(app, USER, "chat-2", [only_file])
    clock[0] += 10
    third = [*answered, user("more", "u2")]
    assert await index.record_start(app, USER, "chat-3", third, since=2)
    record = await index.get_chat(app, USER, "chat-3")
    assert record is not None and record.messages == third
    assert record.summary.updated_at == chat_index.utc_time(created)
    page = await index.list_chats(app, USER, limit=5)
    assert [c.chat_id for c in page.chats] == ["chat-2", "chat-1", "chat-3"]
    # What waits changes (the user moves on past an approval): the row, with the time.
    clock[0] += 10
    first = [user("first"), asked, user("never mind", "u2")]
    assert await index.record_start(app, USER, "chat-1", first, since=2)
    record = await index.get_chat(app, USER, "chat-1")
    assert record is not None and record.messages == first and record.summary.waiting is None
    assert record.summary.updated_at == chat_index.utc_time(clock[0])
    # The title comes with the first text: the row, with the time.
    clock[0] += 10
    second = [only_file, user("now with text", "u2")]
    assert await index.record_start(app, USER, "chat-2", second, since=1)
    record = await index.get_chat(app, USER, "chat-2")
    assert record is not None and record.summary.title == "now with text"
    assert record.summary.updated_at == chat_index.utc_time(clock[0])
    page = await index.list_chats(app, USER, limit=5)
    assert [c.chat_id for c in page.chats] == ["chat-2", "chat-1", "chat-3"]
    # A missing chat: created when it may be, left missing when not.
    new = [user("brand new")]
    assert await index.record_start(app, USER, "chat-4", new, create=False) is False
    assert await index.get_chat(app, USER, "chat-4") is None
    assert await index.record_start(app, USER, "chat-4", new)
    record = await index.get_chat(app, USER, "chat-4")
    assert record is not None and record.summary.title == "brand new"


@pytest.mark.asyncio
async def test_late_results_wait_per_chat_oldest_first_until_dropped(
    index: ChatIndex, app: str
) -> None:
    """The hand-off of docs/adr/0073: one per call (the first kept), the chat's own, gone
    with the chat."""
    start = chat_index.utc_time(1_800_000_000_000_000)

    def late(call_id: str, seconds: int, response: dict[str, Any]) -> chat_index.LateResult:
        at = start + timedelta(seconds=seconds)
        return chat_index.LateResult(call_id, "pay", response, "inv-1", "payer", at)

    await index.keep_late_result(app, USER, "chat-1", late("c2", 2, {"paid": 2, "to": "Ann"}))
    await index.keep_late_result(app, USER, "chat-1", late("c1", 1, {"paid": 1, "é": [1, None]}))
    await index.keep_late_result(app, USER, "chat-1", late("c1", 3, {"paid": 99}))  # again
    await index.keep_late_result(app, USER, "chat-2", late("c3", 1, {}))
    held = await index.late_results(app, USER, "chat-1")
    assert [(h.call_id, h.response) for h in held] == [
        ("c1", {"paid": 1, "é": [1, None]}),
        ("c2", {"paid": 2, "to": "Ann"}),
    ]
    assert held[0] == late("c1", 1, {"paid": 1, "é": [1, None]})
    await index.drop_late_result(app, USER, "chat-1", "c1")
    assert [h.call_id for h in await index.late_results(app, USER, "chat-1")] == ["c2"]
    assert await index.late_results(app, "user-2", "chat-1") == []
    await index.record_messages(app, USER, "chat-2", [user("hello")])
    assert await index.delete(app, USER, "chat-2")
    assert await index.late_results(app, USER, "chat-2") == []

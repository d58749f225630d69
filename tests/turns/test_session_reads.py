"""How often a turn reads its chat's history (docs/adr/0070), against the real app, runner and
offline model: on PostgreSQL the SQL statements that read ADK's ``events`` table are counted
on the app's own engine; on SQLite the reads the app's session cache asks of ADK's service.

A turn reads the whole history once per process (its first turn of the chat), then none of it:
the planner and the runner each ask only for the session's row (its revision) and share the
events this process holds. Another
instance's turn on the same store is seen before this one plans (a regenerate answers the
other instance's message), read as its new events only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event as sql_event

from adk_stream_protocol.store.session_cache import SessionCache
from adk_stream_protocol.turns.bridge import bridge_of
from tests.support.rig import (
    InProcessApp,
    assistant_message,
    chat_body,
    in_process_app,
    post_stream,
    user_message,
    user_turn_texts,
)


def _cache(app: InProcessApp) -> SessionCache:
    return bridge_of(app.app.state).session_cache


class EventReads:
    """SELECTs on ADK's ``events`` table, counted on a database store's engine."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        text = " ".join(statement.split()).lower()
        if text.startswith("select") and " from events" in text:
            self.count += 1


@contextmanager
def event_reads(app: InProcessApp) -> Iterator[EventReads]:
    engine = _cache(app).inner.db_engine  # type: ignore[attr-defined]
    counter = EventReads()
    sql_event.listen(engine.sync_engine, "before_cursor_execute", counter)
    try:
        yield counter
    finally:
        sql_event.remove(engine.sync_engine, "before_cursor_execute", counter)


def _turns(app: InProcessApp, chat: str, count: int, history: list[dict[str, Any]]) -> None:
    for n in range(count):
        asked = user_message(f"hello {len(history) // 2}", f"u{len(history) // 2}-{n}")
        result = post_stream(app, chat_body(chat, *history, asked))
        assert result.status == 200 and result.text(), result.body
        history += [asked, assistant_message(result)]


@pytest.mark.out_of_process
def test_on_postgres_a_turn_reads_no_history_after_the_first_and_sees_the_other_instance(
    tmp_path: Path, postgres_url: str
) -> None:
    chat = f"chat-{uuid.uuid4().hex[:12]}"
    history: list[dict[str, Any]] = []
    with (
        in_process_app(tmp_path / "a", session_store=postgres_url) as here,
        in_process_app(tmp_path / "b", session_store=postgres_url) as there,
    ):
        with event_reads(here) as reads:
            _turns(here, chat, 1, history)
            first = reads.count
            _turns(here, chat, 3, history)
            later = reads.count - first
        assert first == 0  # a chat this process made: its history is known (none)
        assert later == 0  # three more turns: not one read of the history
        # The other instance answers a turn of its own.
        _turns(there, chat, 1, history)
        other_question = history[-2]["parts"][-1]["text"]
        with event_reads(here) as reads:
            regenerated = post_stream(
                here, chat_body(chat, *history[:-1], trigger="regenerate-message")
            )
        assert regenerated.status == 200, regenerated.body
        # Read as new events only: the incremental read, and after the rewind the chat whole
        # once (a rewind drops the cache's copy), nothing more.
        assert _cache(here).counts.incremental_reads == 1
        assert reads.count == 2
    stored = _stored_turns(postgres_url, chat)
    assert stored[-1] == other_question  # this instance answered the other's message again
    assert stored.count(other_question) == 1


def test_on_sqlite_the_service_is_asked_for_the_history_once_per_process(tmp_path: Path) -> None:
    chat = f"chat-{uuid.uuid4().hex[:12]}"
    history: list[dict[str, Any]] = []
    with in_process_app(tmp_path) as here:
        _turns(here, chat, 4, history)
        counts = _cache(here).counts
        assert (counts.full_reads, counts.incremental_reads) == (0, 0)
        # Per turn the planner's and the runner's read of the session's row, no more (the
        # first turn's planner found no chat; the chat made here starts cached: no events).
        assert counts.revision_reads == 2 * 4
    # A second process on the same file (the first's own turns are new to it).
    with in_process_app(tmp_path) as again:
        _turns(again, chat, 2, history)
        assert (_cache(again).counts.full_reads, _cache(again).counts.incremental_reads) == (1, 0)
        assert user_turn_texts(_events_of(again, chat)) == [
            m["parts"][-1]["text"] for m in history if m["role"] == "user"
        ]


def _events_of(app: InProcessApp, chat: str) -> list[Any]:
    from tests.support.rig import stored_events

    return stored_events(app, chat)


def _stored_turns(url: str, chat: str) -> list[str]:
    import asyncio

    from adk_stream_protocol.store.sessions import create_session_service

    async def read() -> list[str]:
        service = create_session_service(url)
        try:
            session = await service.get_session(
                app_name="adk_stream_protocol", user_id="local-user", session_id=chat
            )
            assert session is not None
            return user_turn_texts(session.events)
        finally:
            await service.close()  # type: ignore[attr-defined]

    return asyncio.run(read())

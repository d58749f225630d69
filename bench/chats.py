"""Benchmark 11: reading chats back on PostgreSQL (docs/adr/0043-chat-index.md).

One user with ``size.chats`` chats of ``size.chat_messages`` messages each (half the user's,
half answers of about 100 words), written twice into one fresh database, as the server keeps
them: as the chat index's rows (``adk_stream_chats``, and ``adk_stream_chat_messages``: a row
a message) and as ADK's sessions of the same conversations (``sessions`` and ``events``: one
event a message). One chat of each is written
through the real code (``ChatIndex.record_messages``; ADK's ``create_session`` and
``append_event``), then copied in SQL to the full count, each copy a little newer than the last.

Measured in the same run, back to back:

- ours: ``GET /chats`` (the first page, 50 chats) and ``GET /chats/{chatId}`` (a random one)
  on our server with PostgreSQL and Redis (``active`` comes from Redis), over HTTP; and the
  index's own ``list_chats`` / ``get_chat`` in this process;
- theirs: ADK's ``DatabaseSessionService.list_sessions`` for the user (it has no paging: every
  session, with its state) and ``get_session`` (the session with its events), in this
  process, on the same database.

Each figure of a run is the median (or p99) over ``size.chat_reads`` requests.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from google.adk.events import Event
from google.genai import types

from bench.agent import long_answer
from bench.clients import client
from bench.core import Figure, Size, percentile
from bench.scaleout import cluster, fresh_database
from bench.servers import Server, serve

APP = "adk_stream_protocol"  # the server's app name (the chats' app in the store)
USER = "local-user"  # the server's user without an identity dependency
PAGE = 50
BENCH = "11 chats"


def chat_id(n: int) -> str:
    return f"chat-{n:05}"


def conversation(messages: int) -> tuple[list[dict[str, Any]], list[Event]]:
    """The same conversation as the page holds it (UIMessages) and as ADK stores it (events)."""
    ui: list[dict[str, Any]] = []
    events: list[Event] = []
    for turn in range(messages // 2):
        question = f"question {turn}: " + long_answer(25)
        answer = long_answer(100)
        ui.append({"id": f"u{turn}", "role": "user", "parts": [{"type": "text", "text": question}]})
        ui.append(
            {
                "id": f"a{turn}",
                "role": "assistant",
                "parts": [
                    {"type": "step-start"},
                    {"type": "text", "text": answer, "state": "done"},
                ],
                "metadata": {"usage": {"inputTokens": 40, "outputTokens": 130}},
            }
        )
        invocation = f"e-{turn}"
        events.append(
            Event(author="user", invocation_id=invocation, content=_content("user", question))
        )
        events.append(
            Event(
                author="bench_agent",
                invocation_id=invocation,
                content=_content("model", answer),
                usage_metadata=types.GenerateContentResponseUsageMetadata(
                    prompt_token_count=40, candidates_token_count=130
                ),
            )
        )
    return ui, events


def _content(role: str, text: str) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=text)])


_COPY_SESSIONS = """
INSERT INTO sessions (app_name, user_id, id, state, create_time, update_time)
SELECT app_name, user_id, 'chat-' || lpad(n::text, 5, '0'), state, create_time,
       update_time + n * interval '1 millisecond'
FROM sessions, generate_series(1, :copies) AS n WHERE app_name = :app AND id = :template"""
_COPY_EVENTS = """
INSERT INTO events (id, app_name, user_id, session_id, invocation_id, timestamp, event_data)
SELECT e.id, e.app_name, e.user_id, 'chat-' || lpad(n::text, 5, '0'), e.invocation_id,
       e.timestamp, e.event_data
FROM events AS e, generate_series(1, :copies) AS n
WHERE e.app_name = :app AND e.session_id = :template"""
_COPY_CHATS = """
INSERT INTO adk_stream_chats
SELECT app_name, user_id, 'chat-' || lpad(n::text, 5, '0'), title, title_set,
       created_at_us + n * 1000, updated_at_us + n * 1000, waiting, messages
FROM adk_stream_chats, generate_series(1, :copies) AS n
WHERE app_name = :app AND chat_id = :template"""
# Each chat's messages, a row per message (docs/adr/0069).
_COPY_CHAT_MESSAGES = """
INSERT INTO adk_stream_chat_messages
    (app_name, user_id, chat_id, seq, digest, message_id, titled, message)
SELECT app_name, user_id, 'chat-' || lpad(n::text, 5, '0'), seq, digest, message_id, titled, message
FROM adk_stream_chat_messages, generate_series(1, :copies) AS n
WHERE app_name = :app AND chat_id = :template"""


async def seed(database: str, size: Size) -> None:
    """Both copies of the user's chats, through the real code once, then copied in SQL."""
    from google.adk.sessions.database_session_service import DatabaseSessionService
    from sqlalchemy import text

    from adk_stream_protocol.store.chat_tables import PostgresDatabase, SqlChatIndex
    from adk_stream_protocol.store.sessions import ChatSessions

    messages, events = conversation(size.chat_messages)
    service = DatabaseSessionService(database)
    try:
        await ChatSessions(service, APP).prepare()
        index = SqlChatIndex(PostgresDatabase(service.db_engine))
        await index.prepare()
        template = chat_id(0)
        session = await service.create_session(app_name=APP, user_id=USER, session_id=template)
        for event in events:
            await service.append_event(session, event)
        await index.record_messages(APP, USER, template, messages)
        params = {"copies": size.chats - 1, "app": APP, "template": template}
        async with service.db_engine.begin() as connection:
            for statement in (_COPY_SESSIONS, _COPY_EVENTS, _COPY_CHATS, _COPY_CHAT_MESSAGES):
                await connection.execute(text(statement), params)
        async with service.db_engine.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.execute(text("ANALYZE"))
    finally:
        await service.close()


async def _timed(work: Callable[[], Awaitable[Any]], times: int) -> list[float]:
    """Milliseconds each call took, after one unmeasured call (connections, caches)."""
    await work()
    samples: list[float] = []
    for _ in range(times):
        start = time.perf_counter()
        await work()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def measure(database: str, server: Server, size: Size) -> dict[str, list[float]]:
    """Each way of reading, ``size.chat_reads`` times (ADK's full listing fewer times)."""
    from google.adk.sessions.database_session_service import DatabaseSessionService

    from adk_stream_protocol.store.chat_tables import PostgresDatabase, SqlChatIndex

    chats = [chat_id(n) for n in range(size.chats)]
    pick = random.Random(11).choice
    reads, full_lists = size.chat_reads, max(3, size.chat_reads // 10)
    service = DatabaseSessionService(database)
    index = SqlChatIndex(PostgresDatabase(service.db_engine))
    try:
        async with client() as http:

            async def page() -> None:
                response = await http.get(f"{server.base_url}/chats", params={"limit": PAGE})
                listed = response.json()["chats"]
                if response.status_code != 200 or len(listed) != min(PAGE, size.chats):
                    raise RuntimeError(f"GET /chats: {response.status_code} {response.text[:200]}")

            async def one() -> None:
                response = await http.get(f"{server.base_url}/chats/{pick(chats)}")
                if (
                    response.status_code != 200
                    or len(response.json()["messages"]) != size.chat_messages
                ):
                    raise RuntimeError(f"GET /chats/{{id}}: {response.status_code}")

            async def their_list() -> None:
                listed = await service.list_sessions(app_name=APP, user_id=USER)
                if len(listed.sessions) != size.chats:
                    raise RuntimeError(f"list_sessions: {len(listed.sessions)} sessions")

            async def their_one() -> None:
                session = await service.get_session(
                    app_name=APP, user_id=USER, session_id=pick(chats)
                )
                if session is None or len(session.events) != size.chat_messages:
                    raise RuntimeError("get_session: not the seeded session")

            async def index_page() -> None:
                await index.list_chats(APP, USER, limit=PAGE)

            async def index_one() -> None:
                await index.get_chat(APP, USER, pick(chats))

            return {
                "page": await _timed(page, reads),
                "one": await _timed(one, reads),
                "index page": await _timed(index_page, reads),
                "index one": await _timed(index_one, reads),
                "their list": await _timed(their_list, full_lists),
                "their one": await _timed(their_one, reads),
            }
    finally:
        await service.close()


def run(size: Size) -> list[Figure]:
    note = f"{size.chats:,} chats of {size.chat_messages} messages, one user, PostgreSQL + Redis"
    listing, getting = "ADK list_sessions (every session)", "ADK get_session"
    figures = {
        ("page", "median"): Figure(
            BENCH, "GET /chats first page (50), median", "ms", "lower", listing, note=note, limit=50
        ),
        ("page", "p99"): Figure(BENCH, "GET /chats first page (50), p99", "ms", "lower", listing),
        ("one", "median"): Figure(
            BENCH, "GET /chats/{id}, median", "ms", "lower", getting, limit=30
        ),
        ("one", "p99"): Figure(BENCH, "GET /chats/{id}, p99", "ms", "lower", getting),
        ("index page", "median"): Figure(
            BENCH, "ChatIndex.list_chats in process, median", "ms", "lower", listing
        ),
        ("index one", "median"): Figure(
            BENCH, "ChatIndex.get_chat in process, median", "ms", "lower", getting
        ),
    }
    theirs = {
        "page": "their list",
        "index page": "their list",
        "one": "their one",
        "index one": "their one",
    }
    with fresh_database() as database:
        asyncio.run(seed(database, size))
        with serve("ours", cluster(database)) as server:
            for r in range(size.runs):
                samples = asyncio.run(measure(database, server, size))
                for (ours, stat), figure in figures.items():
                    figure.add(_stat(samples[ours], stat), _stat(samples[theirs[ours]], stat))
                print(
                    f"  run {r + 1}: "
                    + ", ".join(f"{k} {statistics.median(v):.1f} ms" for k, v in samples.items())
                )
    return list(figures.values())


def _stat(samples: list[float], stat: str) -> float:
    return statistics.median(samples) if stat == "median" else percentile(samples, 99)

"""Long chats for benchmark 13 (issue 38): chats of N prior turns, built cheaply but as a real
server would have stored them.

A turn of the issue's shape is a 200-character question, one call of a tool whose result is
about 1 KB of JSON, and a 150-word answer (``bench.agent.chat_turn_response``). A chat of N
prior turns is built so:

1. one template turn runs through the real server (ours: ``POST /stream``; ADK's:
   ``POST /run_sse``) on a template chat, so that its stored rows are exactly what that server
   writes for such a turn;
2. the template's session row and event rows are copied in SQL as many times as needed, every
   id in them (events, invocations, calls, the page's message ids) replaced by a fresh one and
   every timestamp moved back in time, so that the copies come before anything the server
   writes later, in order;
3. for ours, the last of the N turns runs through the real server with the stock ``useChat``
   body (every earlier message, as the page holds them, plus the new question), so the
   server writes its chat record of the whole chat the way it does.

Stores are a SQLite file in a temporary folder, or a database of a private PostgreSQL (a
``tests/support/faults`` instance on a free port, autovacuum off), so that WAL and table
growth are only the benchmark's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from google.adk.agents import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.tools import FunctionTool

from adk_stream_protocol.demo.agent import INSTRUCTION
from bench.agent import (
    CHAT_ANSWER_WORDS,
    CHAT_PROMPT,
    MODEL_NAME,
    bench_records,
    long_answer,
    register_bench_model,
)

StoreKind = Literal["sqlite", "postgres"]

CHAT_AGENT = "longchat_agent"  # the agent's name, and ADK's app name for it
USER = "local-user"  # our server's user without an identity dependency; ADK's too
QUESTION_CHARS = 200
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEX = re.compile(r"\b[0-9a-f]{32}\b")
SECONDS_PER_COPY = 10.0  # the time between two copied turns


def chat_agent() -> LlmAgent:
    """The agent both servers run for long chats: the bench model and the 1 KB tool."""
    register_bench_model()
    return LlmAgent(
        name=CHAT_AGENT,
        model=MODEL_NAME,
        instruction=INSTRUCTION,
        tools=[FunctionTool(bench_records)],
    )


# What ``ADK_STREAM_AGENT=bench.chat_shape:root_agent`` serves.
root_agent = chat_agent()

COMPACTION_INTERVAL = 10  # invocations between two compactions (the sliding window)


def compacted_app() -> App:
    """The same agent in an App that compacts its events: a sliding window of
    ``COMPACTION_INTERVAL`` turns overlapping by one, summarized by the agent's own model."""
    return App(
        name=CHAT_AGENT,
        root_agent=chat_agent(),
        events_compaction_config=EventsCompactionConfig(
            compaction_interval=COMPACTION_INTERVAL, overlap_size=1
        ),
    )


def __getattr__(name: str) -> Any:
    """``ADK_STREAM_AGENT=bench.chat_shape:compacted``: the App that compacts, built on first
    use (ADK warns that compaction is experimental whenever one is built)."""
    if name != "compacted":
        raise AttributeError(name)
    app = globals()["compacted"] = compacted_app()
    return app


def question(label: str) -> str:
    """A 200-character question that the bench model answers as a long chat's turn."""
    head = f"{CHAT_PROMPT}{label}: "
    filler = long_answer(60)
    return (head + filler)[:QUESTION_CHARS]


def user_message(label: str) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "role": "user",
        "parts": [{"type": "text", "text": question(label)}],
    }


def stock_body(chat_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What stock ``useChat`` (``DefaultChatTransport``) posts: the whole chat."""
    return {"id": chat_id, "messages": messages, "trigger": "submit-message"}


def recipe_body(chat_id: str, message: dict[str, Any]) -> dict[str, Any]:
    """The AI SDK persistence recipe's body: only the last message."""
    return {"id": chat_id, "message": message}


def run_sse_body(chat_id: str, label: str) -> dict[str, Any]:
    return {
        "appName": CHAT_AGENT,
        "userId": USER,
        "sessionId": chat_id,
        "newMessage": {"role": "user", "parts": [{"text": question(label)}]},
        "streaming": True,
    }


# -- stores -------------------------------------------------------------------------------------


@dataclass
class Store:
    """Where one server kind's chats live: a SQLite file or a PostgreSQL database."""

    kind: StoreKind
    url: str  # the session store URL both servers take (sqlite:///... or postgresql+asyncpg://)
    path: Path | None = None  # the SQLite file

    def disk_bytes(self) -> int:
        """The SQLite file and its journal/WAL files, as they are now."""
        if self.path is None:
            return 0
        return sum(
            p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file()
        )


def compactions(store: Store) -> int:
    """How many compaction events a SQLite store holds (an event whose actions carry one)."""
    assert store.path is not None
    with contextlib.closing(sqlite3.connect(store.path)) as db:
        query = "SELECT count(*) FROM events WHERE event_data LIKE '%\"compaction\": {%'"
        query += " OR event_data LIKE '%\"compaction\":{%'"
        return int(db.execute(query).fetchone()[0])


@dataclass
class Postgres:
    """A private PostgreSQL (its own port and data), for figures that are only ours."""

    instance: Any  # tests.support.faults.stores.PrivatePostgres
    databases: list[str] = field(default_factory=list)

    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.instance.port}/postgres"

    def new_database(self, name: str) -> str:
        asyncio.run(_pg_execute(self.admin_url(), f'CREATE DATABASE "{name}"'))
        self.databases.append(name)
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.instance.port}/{name}"

    def wal_lsn(self) -> int:
        """The cluster's current WAL position, in bytes."""
        return int(asyncio.run(_pg_fetch(self.admin_url(), _WAL_BYTES)))

    def database_bytes(self, name: str) -> int:
        return int(asyncio.run(_pg_fetch(self.admin_url(), f"SELECT pg_database_size('{name}')")))


_WAL_BYTES = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"


async def _pg_execute(url: str, statement: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    connection = await asyncpg.connect(url)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


async def _pg_fetch(url: str, query: str) -> Any:
    import asyncpg

    connection = await asyncpg.connect(url)
    try:
        return await connection.fetchval(query)
    finally:
        await connection.close()


@contextlib.contextmanager
def private_postgres() -> Iterator[Postgres]:
    """A PostgreSQL of the benchmark's own, started on a free port, removed at the end."""
    from tests.support.faults.stores import PrivatePostgres

    instance = PrivatePostgres()
    try:
        instance.start()
        # No autovacuum: its WAL would land in a turn's figure at random.
        asyncio.run(_pg_execute_all(instance.port, ["ALTER SYSTEM SET autovacuum = off"]))
        asyncio.run(_pg_execute_all(instance.port, ["SELECT pg_reload_conf()"]))
        yield Postgres(instance)
    finally:
        instance.close()


async def _pg_execute_all(port: int, statements: list[str]) -> None:
    for statement in statements:
        await _pg_execute(f"postgresql://postgres@127.0.0.1:{port}/postgres", statement)


@contextlib.contextmanager
def sqlite_store(folder: Path, name: str) -> Iterator[Store]:
    path = folder / f"{name}.db"
    yield Store("sqlite", f"sqlite:///{path}", path)


@contextlib.contextmanager
def temp_folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bench-longchats-") as tmp:
        yield Path(tmp)


# -- copying a template turn ----------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """One turn as a server stored it: its session row and event rows, and (ours) the page's
    messages of that turn as the server's chat record gives them back."""

    app_name: str
    chat_id: str
    session: dict[str, Any]
    events: list[dict[str, Any]]
    messages: list[dict[str, Any]]  # ours only: [user, assistant]
    ids: frozenset[str]  # every id in the rows that names this turn's things
    question: str  # the template turn's question (each copy gets new words of its own)


def _ids_in(text: str) -> set[str]:
    return set(_UUID.findall(text)) | set(_HEX.findall(text))


async def read_template(
    store: Store, chat_id: str, asked: str, messages: list[dict[str, Any]]
) -> Template:
    """The template turn's rows, as the server stored them (``asked``: its question)."""
    sessions = await select_rows(store, "SELECT * FROM sessions", chat_id)
    if len(sessions) != 1:
        raise RuntimeError(f"the template chat {chat_id} has {len(sessions)} sessions")
    events = await select_rows(
        store, "SELECT * FROM events", chat_id, column="session_id", order="timestamp"
    )
    ids: set[str] = set()
    for row in events:
        ids |= _ids_in(json.dumps(row, default=str))
        ids.add(str(row["id"]))
        ids.add(str(row["invocation_id"]))
    for message in messages:
        ids.add(str(message["id"]))
        ids |= _ids_in(json.dumps(message))
    ids.discard(chat_id)
    app_name = str(sessions[0]["app_name"])
    return Template(app_name, chat_id, sessions[0], events, messages, frozenset(ids), asked)


async def select_rows(
    store: Store, query: str, chat_id: str, column: str = "id", order: str = ""
) -> list[dict[str, Any]]:
    """``query`` (``SELECT ... FROM table``) for the rows of one chat, as dicts."""
    tail = f" ORDER BY {order}" if order else ""
    if store.kind == "sqlite":
        assert store.path is not None
        with contextlib.closing(sqlite3.connect(store.path)) as db:
            db.row_factory = sqlite3.Row
            found = db.execute(f"{query} WHERE {column} = ?{tail}", (chat_id,)).fetchall()
            return [dict(r) for r in found]
    import asyncpg

    connection = await asyncpg.connect(_plain(store.url))
    try:
        return [
            dict(r) for r in await connection.fetch(f"{query} WHERE {column} = $1{tail}", chat_id)
        ]
    finally:
        await connection.close()


def _plain(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


def _renamed(text: str, names: dict[str, str]) -> str:
    if not names:
        return text
    pattern = re.compile("|".join(re.escape(k) for k in sorted(names, key=len, reverse=True)))
    return pattern.sub(lambda m: names[m[0]], text)


def copies(template: Template, chat_id: str, turns: int) -> tuple[list[dict[str, Any]], list[Any]]:
    """``turns`` copies of the template's turn for ``chat_id``: the page's messages, and the
    event rows, the last copy ``SECONDS_PER_COPY`` before the template's first event."""
    messages: list[dict[str, Any]] = []
    rows: list[Any] = []
    for k in range(turns):
        names = {i: str(uuid.uuid4()) if _UUID.fullmatch(i) else uuid.uuid4().hex for i in
                 template.ids}  # fmt: skip
        names[template.chat_id] = chat_id
        names.update(_new_words(template.question, random.Random(f"{chat_id}/{k}")))
        shift = (turns - k) * SECONDS_PER_COPY
        for message in template.messages:
            messages.append(json.loads(_renamed(json.dumps(message), names)))
        for event in template.events:
            row = dict(event)
            data = row["event_data"]
            parsed = json.loads(data) if isinstance(data, str) else dict(data)
            parsed["timestamp"] = _seconds(event["timestamp"]) - shift
            row["event_data"] = _renamed(json.dumps(parsed), names)
            row["id"] = names.get(str(row["id"]), str(row["id"]))
            row["invocation_id"] = names.get(str(row["invocation_id"]), str(row["invocation_id"]))
            row["session_id"] = chat_id
            row["timestamp"] = _moved(event["timestamp"], -shift)
            rows.append(row)
    return messages, rows


def _new_words(asked: str, rng: random.Random) -> dict[str, str]:
    """Each copy's own question and answer, of the same lengths: identical copies would
    compress (PostgreSQL's TOAST, a chat record written whole) far better than a real chat.
    The tool's input and output quote the question's start, so those go with it."""
    query = asked[len(CHAT_PROMPT) :]
    new_query = _random_text(rng, len(query))
    answer = long_answer(CHAT_ANSWER_WORDS)
    return {
        asked: CHAT_PROMPT + new_query,
        query: new_query,
        query[:40]: new_query[:40],
        query[:20]: new_query[:20],
        answer: _random_text(rng, len(answer)),
    }


def _random_text(rng: random.Random, length: int) -> str:
    words: list[str] = []
    total = -1
    while total < length:
        word = "".join(rng.choices(_LETTERS, k=rng.randint(2, 9)))
        words.append(word)
        total += len(word) + 1
    return " ".join(words)[:length].rstrip().ljust(length, "x")


_LETTERS = "etaoinshrdlucmfwypvbgkjqxz"


def _seconds(value: Any) -> float:
    return value.timestamp() if hasattr(value, "timestamp") else float(value)


def _moved(value: Any, seconds: float) -> Any:
    if hasattr(value, "timestamp"):
        from datetime import timedelta

        return value + timedelta(seconds=seconds)
    return float(value) + seconds


async def write_copies(
    store: Store, template: Template, chat_id: str, turns: int
) -> list[dict[str, Any]]:
    """A chat ``chat_id`` holding ``turns`` copies of the template's turn (its session row
    made if it has none). Returns the page's messages of those turns (ours)."""
    messages, rows = copies(template, chat_id, turns)
    session = dict(template.session)
    session["id"] = chat_id
    earliest = -(turns + 1) * SECONDS_PER_COPY
    session["create_time"] = _moved(template.session["create_time"], earliest)
    if store.kind == "sqlite":
        assert store.path is not None
        with contextlib.closing(sqlite3.connect(store.path)) as db, db:
            _insert_sqlite(db, "sessions", [session], ignore=True)
            _insert_sqlite(db, "events", rows)
        return messages
    import asyncpg

    connection = await asyncpg.connect(_plain(store.url))
    try:
        async with connection.transaction():
            await _insert_pg(connection, "sessions", [session], ignore=True)
            await _insert_pg(connection, "events", rows)
    finally:
        await connection.close()
    return messages


def _insert_sqlite(
    db: sqlite3.Connection, table: str, rows: list[dict[str, Any]], ignore: bool = False
) -> None:
    if not rows:
        return
    columns = list(rows[0])
    verb = "INSERT OR IGNORE" if ignore else "INSERT"
    statement = (
        f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    )
    db.executemany(statement, [tuple(r[c] for c in columns) for r in rows])


async def _insert_pg(
    connection: Any, table: str, rows: list[dict[str, Any]], ignore: bool = False
) -> None:
    if not rows:
        return
    columns = list(rows[0])
    types = {
        r["column_name"]: r["data_type"]
        for r in await connection.fetch(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = $1",
            table,
        )
    }
    values = ", ".join(
        f"${i + 1}::{types[c]}" if types.get(c) in ("jsonb", "json") else f"${i + 1}"
        for i, c in enumerate(columns)
    )
    tail = " ON CONFLICT DO NOTHING" if ignore else ""
    statement = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({values}){tail}"
    await connection.executemany(
        statement,
        [tuple(_pg_value(r[c], types.get(c)) for c in columns) for r in rows],
    )


def _pg_value(value: Any, data_type: str | None) -> Any:
    if data_type in ("jsonb", "json") and not isinstance(value, str):
        return json.dumps(value)
    return value

"""Long chats: what loading a chat's history costs a turn, with and without the session cache
(docs/adr/0070). Not part of ``python -m bench``: run it on its own,

    python -m bench.long_chats [--turns 500] [--store sqlite|postgres|both] [--repeat 20]

A chat of ``--turns`` prior turns of issue 38's shape (a 200-character question, one tool call
with 1 KB of JSON output, a 150-word answer) is written through ADK's own session service.
Then, per measured turn, what the turn reads of its history:

- *before*: the planner's ``get_session`` and the runner's, each the whole history;
- *after*: the same two reads through ``SessionCache`` (the planner's asks the store for the
  session's revision and reads only new events; the runner's takes the planner's read), with
  the turn's four events appended through it between turns, as a turn does.

Figures: the median CPU seconds of this process and wall seconds per turn. PostgreSQL's own
CPU is not in this process's figure (its wall time is).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session
from google.genai import types

from adk_stream_protocol.store.session_cache import SessionCache
from adk_stream_protocol.store.sessions import create_session_service

APP = "adk_stream_protocol"
USER = "bench-user"
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "near",
    "riverbank",
    "at",
    "dawn",
]


def turn_events(turn: int, base: float) -> list[Event]:
    """One prior turn: question, tool call, 1 KB tool result, 150-word answer."""
    invocation = f"e-{uuid.uuid4().hex[:12]}"
    question = (f"question {turn}: " + " ".join(WORDS * 20))[:200]
    answer = " ".join(WORDS[i % len(WORDS)] for i in range(150))
    result = {"rows": [{"city": f"city {i}", "temperature": 20 + i % 7} for i in range(30)]}
    call_id = f"call-{turn}"
    parts: list[list[types.Part]] = [
        [types.Part(text=question)],
        [types.Part(function_call=types.FunctionCall(id=call_id, name="weather", args={"q": "x"}))],
        [
            types.Part(
                function_response=types.FunctionResponse(
                    id=call_id, name="weather", response=result
                )
            )
        ],
        [types.Part(text=answer)],
    ]
    roles = ["user", "model", "user", "model"]
    authors = ["user", "agent", "agent", "agent"]
    return [
        Event(
            author=author,
            invocation_id=invocation,
            content=types.Content(role=role, parts=p),
            timestamp=base + i * 0.001,
        )
        for i, (author, role, p) in enumerate(zip(authors, roles, parts, strict=True))
    ]


async def seed(service: BaseSessionService, chat: str, turns: int) -> Session:
    session = await service.create_session(app_name=APP, user_id=USER, session_id=chat)
    now = time.time() - turns
    for turn in range(turns):
        for event in turn_events(turn, now + turn):
            await service.append_event(session, event)
    return session


async def _sample(work: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    await work()
    return time.process_time() - cpu, time.perf_counter() - wall


async def measure(service: BaseSessionService, chat: str, repeat: int) -> dict[str, float]:
    cache = SessionCache(service, 256 * 1024 * 1024)

    async def before() -> None:
        for _ in range(2):  # the planner's read, then the runner's
            await service.get_session(app_name=APP, user_id=USER, session_id=chat)

    async def after() -> None:
        session = await cache.get_session(app_name=APP, user_id=USER, session_id=chat)
        assert session is not None
        cache.lend(session)
        await cache.get_session(app_name=APP, user_id=USER, session_id=chat)

    async def a_turn() -> None:  # the turn's own events, through the cache as a run writes
        session = await cache.get_session(app_name=APP, user_id=USER, session_id=chat)
        assert session is not None
        for event in turn_events(0, time.time()):
            await cache.append_event(session, event)

    cold = await _sample(after)  # the first read of the process: the whole history
    samples: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    for _ in range(repeat):
        samples["before"].append(await _sample(before))
        samples["after"].append(await _sample(after))
        await a_turn()
    figures = {"after cold cpu": cold[0], "after cold wall": cold[1]}
    for name, values in samples.items():
        figures[f"{name} cpu"] = statistics.median(v[0] for v in values)
        figures[f"{name} wall"] = statistics.median(v[1] for v in values)
    return figures


async def run_store(url: str, turns: int, repeat: int) -> dict[str, float]:
    service = create_session_service(url)
    chat = f"long-{uuid.uuid4().hex[:8]}"
    try:
        await seed(service, chat, turns)
        return await measure(service, chat, repeat)
    finally:
        close = getattr(service, "close", None)
        if close is not None:
            await close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--postgres", default="postgresql+asyncpg://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    stores: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as folder:
        if args.store in ("sqlite", "both"):
            stores.append(("sqlite", f"sqlite:///{Path(folder) / 'sessions.db'}"))
        if args.store in ("postgres", "both"):
            stores.append(("postgres", args.postgres))
        for name, url in stores:
            figures = asyncio.run(run_store(url, args.turns, args.repeat))
            ratio = figures["after cpu"] / figures["before cpu"]
            print(f"{name}, {args.turns} prior turns (per turn, median of {args.repeat}):")
            for key, value in figures.items():
                print(f"  {key:16} {value * 1000:8.2f} ms")
            print(f"  after/before cpu {ratio:8.1%}")


if __name__ == "__main__":
    main()

"""Long chats: what loading a chat's history costs a turn, with and without the session cache,
and a whole turn's CPU with ADK's compaction (docs/adr/0070). Not part of ``python -m bench``:
run it on its own,

    python -m bench.history_cost [--turns 500] [--store sqlite|postgres|both] [--repeat 20]
    python -m bench.history_cost --compaction [--repeat 20]

A chat of ``--turns`` prior turns of issue 38's shape (a 200-character question, one tool call
with 1 KB of JSON output, a 150-word answer) is written through ADK's own session service.
Then, per measured turn, what the turn reads of its history:

- *before*: the planner's ``get_session`` and the runner's, each the whole history;
- *after*: the same two reads through ``SessionCache`` (each asks the store for the session's
  row and reads only new events, none here: the cache holds them), with
  the turn's four events appended through it between turns, as a turn does.

Figures: the median CPU seconds of this process and wall seconds per turn. PostgreSQL's own
CPU is not in this process's figure (its wall time is).

``--compaction``: whole turns through the real app in this process (``POST /stream``, the real
runner, a scripted model making the issue's tool call and answer; SQLite), on chats of 10 and
1,000 prior turns written with a compaction every 10 turns as ADK's sliding window leaves
them, the app compacting every 10 invocations too, and the chat's record (the page's
messages, ``2 * prior`` of them, docs/adr/0069) written as the server keeps it; the "no record"
rows leave it out. The request carries only the new message
(a page's ``prepareSendMessagesRequest``), so what is measured is the server's part of a turn;
the client's few lines are in the same process, the same for both. The median CPU of the turns
after the first (the first reads the chat into the cache), for: compaction and the cache on
(this change), and the whole history loaded per turn (no compaction; cache off: before).
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

from adk_stream_protocol.foundation.identity import LOCAL_USER
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


async def seed(service: BaseSessionService, chat: str, turns: int, user: str = USER) -> Session:
    session = await service.create_session(app_name=APP, user_id=user, session_id=chat)
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
        for _ in range(2):  # the planner's read, then the runner's
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


def compacting_app(summarizer_text: str) -> Any:
    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.apps.app import EventsCompactionConfig
    from google.adk.apps.llm_event_summarizer import LlmEventSummarizer

    from adk_stream_protocol.testing import ScriptedLlm, call

    answer = " ".join(WORDS[i % len(WORDS)] for i in range(150))

    def weather(q: str) -> dict[str, Any]:
        """The weather rows (about 1 KB of JSON)."""
        return {"rows": [{"city": f"city {i}", "temperature": 20 + i % 7} for i in range(30)]}

    model = ScriptedLlm(script={"": [call("weather", q="x"), answer]})
    summarizer = LlmEventSummarizer(llm=ScriptedLlm(script={"": [summarizer_text]}))
    config = EventsCompactionConfig(summarizer=summarizer, compaction_interval=10, overlap_size=1)
    agent = LlmAgent(name="agent", model=model, tools=[weather])
    return App(name=APP, root_agent=agent, events_compaction_config=config)


async def seed_compacted(
    service: BaseSessionService, chat: str, turns: int, every: int, user: str
) -> None:
    """``turns`` prior turns, with a compaction event after every ``every`` of them covering
    them (and the one before: ADK's overlap), as the sliding window leaves a chat."""
    from google.adk.events import EventActions
    from google.adk.events.event_actions import EventCompaction

    session = await service.create_session(app_name=APP, user_id=user, session_id=chat)
    start = time.time() - 2 * turns
    firsts: list[float] = []
    for turn in range(turns):
        events = turn_events(turn, start + 2 * turn)
        firsts.append(events[0].timestamp)
        for event in events:
            await service.append_event(session, event)
        if (turn + 1) % every == 0:
            end = events[-1].timestamp
            covered = firsts[max(0, turn + 1 - every - 1)]
            summary = types.Content(role="model", parts=[types.Part(text="Summary so far.")])
            compaction = Event(
                author="user",
                invocation_id=Event.new_id(),
                actions=EventActions(
                    compaction=EventCompaction(
                        start_timestamp=covered, end_timestamp=end, compacted_content=summary
                    )
                ),
                timestamp=end + 0.0005,
            )
            await service.append_event(session, compaction)


def recorded_turn(turn: int) -> list[dict[str, Any]]:
    """One prior turn as the page's record holds it: the question, and the answer with its
    tool call and 1 KB output."""
    question = (f"question {turn}: " + " ".join(WORDS * 20))[:200]
    answer = " ".join(WORDS[i % len(WORDS)] for i in range(150))
    result = {"rows": [{"city": f"city {i}", "temperature": 20 + i % 7} for i in range(30)]}
    return [
        {"id": f"u-{turn}", "role": "user", "parts": [{"type": "text", "text": question}]},
        {
            "id": f"a-{turn}",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {
                    "type": "tool-weather",
                    "toolCallId": f"call-{turn}",
                    "state": "output-available",
                    "input": {"q": "x"},
                    "output": result,
                },
                {"type": "step-start"},
                {"type": "text", "text": answer, "state": "done"},
            ],
        },
    ]


async def seed_record(url: str, chat: str, turns: int, user: str) -> None:
    """The chat's record (its ``2 * turns`` messages) as the server keeps it."""
    from adk_stream_protocol.store.chat_tables import SqlChatIndex, SqliteDatabase

    index = SqlChatIndex(SqliteDatabase(Path(url.removeprefix("sqlite:///"))))
    await index.prepare()
    messages = [message for turn in range(turns) for message in recorded_turn(turn)]
    await index.record_messages(APP, user, chat, messages)
    await index.close()


def turn_cpu(
    prior: int, repeat: int, *, compaction: bool, cache_mb: float, record: bool = True
) -> float:
    """The median CPU seconds of a turn after ``prior`` turns (see the module's docstring)."""
    from adk_stream_protocol.testing import serve_agent, settings_for_tests

    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'sessions.db'}"
        chat = f"long-{uuid.uuid4().hex[:8]}"

        async def write() -> None:
            service = create_session_service(url)
            if compaction:
                await seed_compacted(service, chat, prior, 10, LOCAL_USER)
            else:
                await seed(service, chat, prior, LOCAL_USER)
            if record:
                await seed_record(url, chat, prior, LOCAL_USER)

        asyncio.run(write())
        app = compacting_app("Summary so far.")
        if not compaction:
            app = app.model_copy(update={"events_compaction_config": None})
        settings = settings_for_tests(session_store=url, session_cache_mb=cache_mb)
        samples: list[float] = []
        with serve_agent(app, settings) as client:
            for n in range(repeat + 1):
                body = {
                    "id": chat,
                    "trigger": "submit-message",
                    "messages": [
                        {
                            "id": f"m-{n}",
                            "role": "user",
                            "parts": [{"type": "text", "text": f"question {n}"}],
                        }
                    ],
                }
                cpu = time.process_time()
                response = client.http.post("/stream", json=body)
                spent = time.process_time() - cpu
                assert response.status_code == 200, response.text
                assert '"finish"' in response.text, response.text[-400:]
                if n:
                    samples.append(spent)
            stored = client.http.get(f"/chats/{chat}")
            assert stored.status_code in (200, 404), stored.text
        return statistics.median(samples)


def compaction_figures(repeat: int) -> None:
    rows = {
        "10 prior, no record": turn_cpu(10, repeat, compaction=True, cache_mb=64, record=False),
        "1000 prior, no record": turn_cpu(1000, repeat, compaction=True, cache_mb=64, record=False),
        "10 prior, compaction + cache": turn_cpu(10, repeat, compaction=True, cache_mb=64),
        "1000 prior, compaction + cache": turn_cpu(1000, repeat, compaction=True, cache_mb=64),
        "1000 prior, cache, no compaction": turn_cpu(1000, repeat, compaction=False, cache_mb=64),
        "10 prior, no compaction, no cache": turn_cpu(10, repeat, compaction=False, cache_mb=0),
        "1000 prior, no compaction, no cache": turn_cpu(1000, repeat, compaction=False, cache_mb=0),
    }
    print(f"whole turns, server CPU per turn (median of {repeat}):")
    for name, value in rows.items():
        print(f"  {name:38} {value * 1000:8.1f} ms")
    ratio = rows["1000 prior, compaction + cache"] / rows["10 prior, compaction + cache"]
    print(f"  1000/10 with compaction + cache      {ratio:8.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--postgres", default="postgresql+asyncpg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--compaction", action="store_true")
    args = parser.parse_args()
    if args.compaction:
        compaction_figures(args.repeat)
        return
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

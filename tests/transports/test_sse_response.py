"""The SSE response itself (ADR 0052) on real uvicorn: keep-alive comments only while the
body pauses, the body closed as soon as the client leaves, nothing run for a HEAD request;
and the /stream body's writes, one per delivery."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from adk_stream_protocol.protocol.sse import KEEP_ALIVE, SSE_HEADERS
from adk_stream_protocol.transports.sse_response import EventStreamResponse
from adk_stream_protocol.transports.stream import QueueSink
from tests.support.rig import LiveServer, serve_app_in_thread

KEEP_ALIVE_SECONDS = 0.1


class Body:
    """A body that sends an event, then one more after each pause; it records how it ended."""

    def __init__(self, *pauses: float) -> None:
        self.pauses = pauses
        self.started = threading.Event()
        self.closed = threading.Event()
        self.finished = False

    async def events(self) -> AsyncIterator[bytes]:
        self.started.set()
        try:
            yield b"data: 0\n\n"
            for n, pause in enumerate(self.pauses, start=1):
                await asyncio.sleep(pause)
                yield b"data: %d\n\n" % n
            self.finished = True
        finally:
            self.closed.set()


@pytest.fixture
def bodies() -> dict[str, Body]:
    return {}


@pytest.fixture
def server(tmp_path: Path, bodies: dict[str, Body]) -> Iterator[LiveServer]:
    app = FastAPI()

    @app.get("/health")
    async def health() -> PlainTextResponse:
        return PlainTextResponse("ok")

    @app.api_route("/events/{name}", methods=["GET", "HEAD"])
    async def events(name: str) -> EventStreamResponse:
        return EventStreamResponse(
            bodies[name].events(),
            headers=SSE_HEADERS,
            keep_alive_seconds=KEEP_ALIVE_SECONDS,
            keep_alive=KEEP_ALIVE,
        )

    with serve_app_in_thread(app, tmp_path / "unused.db") as live:
        yield live


def test_keep_alive_comments_fill_a_pause_and_only_a_pause(
    server: LiveServer, bodies: dict[str, Body]
) -> None:
    bodies["pause"] = Body(0.55)
    bodies["steady"] = Body(*[0.04] * 15)  # 0.6 s of events closer together than 0.1 s
    paused = server.http.get("/events/pause")
    assert paused.headers["content-type"] == "text/event-stream"
    assert paused.headers["x-vercel-ai-ui-message-stream"] == "v1"
    text = paused.text
    # About one comment per 0.1 s of the 0.55 s pause, each a whole event between the two.
    assert 3 <= text.count(KEEP_ALIVE.decode()) <= 6, text
    assert text.replace(KEEP_ALIVE.decode(), "") == "data: 0\n\ndata: 1\n\n"
    assert bodies["pause"].finished and bodies["pause"].closed.is_set()
    steady = server.http.get("/events/steady").text
    assert steady == "".join(f"data: {n}\n\n" for n in range(16)), "no comment while it flows"


def test_a_client_that_leaves_closes_the_body_at_once(
    server: LiveServer, bodies: dict[str, Body]
) -> None:
    body = bodies["leave"] = Body(30)
    with httpx.stream("GET", f"{server.base_url}/events/leave", timeout=10) as response:
        assert next(response.iter_lines()) == "data: 0"
    left = time.monotonic()
    assert body.closed.wait(5), "the body was not closed when its client left"
    assert time.monotonic() - left < 2
    assert not body.finished
    assert server.http.get("/health").status_code == 200


def test_a_head_request_gets_the_headers_and_runs_nothing(
    server: LiveServer, bodies: dict[str, Body]
) -> None:
    body = bodies["head"] = Body(0)
    response = server.http.head("/events/head")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert not body.started.is_set()


@pytest.mark.asyncio
async def test_a_sink_writes_each_delivery_and_what_queued_behind_it_at_once() -> None:
    sink = QueueSink()
    unused: Any = None  # the turn is told only of a body abandoned before its end
    body = sink.body(unused)
    await sink.send([b"data: 1\n\n", b"data: 2\n\n"])
    assert await anext(body) == b"data: 1\n\ndata: 2\n\n", "one delivery, one write"
    await sink.send([b"data: 3\n\n"])
    await sink.send([b"data: 4\n\n"])  # queued while the reader was away
    await sink.close()
    assert [events async for events in body] == [b"data: 3\n\ndata: 4\n\n"]

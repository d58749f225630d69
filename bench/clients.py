"""Load-generating clients for both servers: one answer over HTTP, one turn over a WebSocket.

"First text" is the first piece of the answer's text (our ``text-delta``, ADK's first event with
text), not the first byte: our ``/stream`` sends ``start`` before the model runs, which would
flatter us. The clients look for byte markers instead of parsing every chunk, so that the client
(which shares the machine) costs both servers the same and little.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from bench.agent import AGENT_NAME
from bench.servers import Server

TIMEOUT = httpx.Timeout(300.0)
LIMITS = httpx.Limits(max_connections=2000, max_keepalive_connections=2000)
USER = "bench-user"

# What each server sends: first text, a successful end, an error.
_TEXT = {"ours": b'"type":"text-delta"', "adk": b'"text":'}
_END = {"ours": b"data: [DONE]", "adk": b'"finishReason":"STOP"'}
_ERROR = {"ours": b'"type":"error"', "adk": b'data: {"error"'}


@dataclass(frozen=True)
class Answer:
    first_text: float  # seconds from sending to the first text (inf when none came)
    total: float  # seconds from sending to the end of the response
    ok: bool
    turn: int = 0  # on a socket: 0 for its first turn, 1 for the next...


def client() -> httpx.AsyncClient:
    # httpx writes a request's headers and body separately: with TCP_NODELAY (as browsers
    # set it) the body never waits on Nagle's algorithm for the headers' ACK.
    transport = httpx.AsyncHTTPTransport(
        limits=LIMITS, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    )
    return httpx.AsyncClient(timeout=TIMEOUT, transport=transport)


def new_chat() -> str:
    return f"bench-{uuid.uuid4().hex[:16]}"


def user_message(text: str) -> dict[str, Any]:
    return {
        "id": f"u-{uuid.uuid4().hex[:12]}",
        "role": "user",
        "parts": [{"type": "text", "text": text}],
    }


def chat_body(chat_id: str, *messages: dict[str, Any]) -> dict[str, Any]:
    return {"id": chat_id, "messages": list(messages), "trigger": "submit-message"}


def run_sse_body(chat_id: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "appName": AGENT_NAME,
        "userId": USER,
        "sessionId": chat_id,
        "newMessage": {"role": "user", "parts": parts},
        "streaming": True,
    }


async def ask(http: httpx.AsyncClient, server: Server, text: str) -> Answer:
    """One new chat, one question, the whole streamed answer."""
    chat_id = new_chat()
    if server.kind == "ours":
        url, body = "/stream", chat_body(chat_id, user_message(text))
    else:
        url, body = "/run_sse", run_sse_body(chat_id, [{"text": text}])
    return await stream_post(http, server, url, body, _TEXT[server.kind])


async def stream_post(
    http: httpx.AsyncClient, server: Server, path: str, body: dict[str, Any], marker: bytes
) -> Answer:
    """POST and read the SSE response; ``first_text`` is when ``marker`` first shows."""
    start = time.perf_counter()
    first = float("inf")
    carry = b""
    ended = failed = False
    try:
        async with http.stream("POST", server.base_url + path, json=body) as response:
            if response.status_code != 200:
                refusal = await response.aread()
                print(f"  {server.kind} {path}: HTTP {response.status_code} {refusal!r}")
                return Answer(first, time.perf_counter() - start, False)
            async for chunk in response.aiter_raw():
                window = carry + chunk
                if first == float("inf") and marker in window:
                    first = time.perf_counter() - start
                ended = ended or _END[server.kind] in window
                if not failed and _ERROR[server.kind] in window:
                    failed = True
                    print(f"  {server.kind} {path}: error in the stream {window[-300:]!r}")
                carry = window[-64:]
    except httpx.HTTPError as exc:
        print(f"  {server.kind} {path}: {exc!r}")
        return Answer(first, time.perf_counter() - start, False)
    if not ended:
        print(f"  {server.kind} {path}: the response ended early: {carry!r}")
    return Answer(first, time.perf_counter() - start, ended and not failed)


# -- WebSockets -------------------------------------------------------------------------------


async def open_live(server: Server, chat_id: str) -> ClientConnection:
    """A socket on ``/live`` (ours) or ``/run_live`` (ADK's), text modality."""
    if server.kind == "ours":
        url = f"{server.ws_url}/live?chatId={chat_id}"
    else:
        url = (
            f"{server.ws_url}/run_live?app_name={AGENT_NAME}&user_id={USER}"
            f"&session_id={chat_id}&modalities=TEXT"
        )
    return await connect(url, open_timeout=120, max_size=None, ping_interval=None)


async def live_turn(server: Server, ws: ClientConnection, chat_id: str, text: str) -> Answer:
    """One user message on an open socket and its whole answer."""
    if server.kind == "ours":
        frame = live_message(chat_id, user_message(text))
    else:
        frame = {"content": {"role": "user", "parts": [{"text": text}]}}
    return await live_exchange(server, ws, frame, _TEXT[server.kind])


def live_message(chat_id: str, *messages: dict[str, Any]) -> dict[str, Any]:
    """Our ``/live`` request frame: a DefaultChatTransport body in an envelope."""
    return {"type": "message", "version": "1", **chat_body(chat_id, *messages)}


async def live_exchange(
    server: Server,
    ws: ClientConnection,
    frame: dict[str, Any],
    marker: bytes,
    frames: list[str] | None = None,
) -> Answer:
    """Send one frame and read until the response ends; ``first_text`` is when ``marker``
    first shows. The frames received are appended to ``frames`` when given."""
    done = _is_done_ours if server.kind == "ours" else _is_done_adk
    start = time.perf_counter()
    first = float("inf")
    ok = True
    await ws.send(json.dumps(frame))
    while True:
        message = await asyncio.wait_for(ws.recv(), 120)
        data = message.encode() if isinstance(message, str) else message
        if frames is not None:
            frames.append(data.decode())
        if first == float("inf") and marker in data:
            first = time.perf_counter() - start
        if _ERROR[server.kind] in data or data.startswith(b'{"type":"error"'):
            ok = False
        if done(data):
            return Answer(first, time.perf_counter() - start, ok and first != float("inf"))


def _is_done_ours(frame: bytes) -> bool:
    return frame == b"data: [DONE]\n\n"


def _is_done_adk(frame: bytes) -> bool:
    return b'"turnComplete":true' in frame


# -- many at once -----------------------------------------------------------------------------


async def bounded(
    count: int, concurrency: int, work: Callable[[int], Awaitable[Answer]]
) -> tuple[list[Answer], float]:
    """Run ``work(i)`` for i < count, at most ``concurrency`` at a time. Returns the answers
    and the wall time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> Answer:
        async with gate:
            try:
                return await work(i)
            except Exception as exc:  # a failed request is a figure, not a crash
                print(f"  request {i} failed: {exc!r}")
                return Answer(float("inf"), float("inf"), False)

    start = time.perf_counter()
    answers = await asyncio.gather(*(one(i) for i in range(count)))
    return list(answers), time.perf_counter() - start

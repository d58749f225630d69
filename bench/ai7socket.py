"""Benchmark 8: ai 7's ``WebSocketChatTransport`` protocol on ``/live`` against ``POST /stream``
of the same server.

Both serve a request the same way (one ``run_async`` turn); they differ only in the framing
(numbered ``chunk`` frames on one shared socket, against an SSE body per request). The model
streams a long answer with no pause, as in benchmark 2, so the framing's cost is all there is.
Requests share one socket, as every chat of a page does with the stock transport; past the
server's limit of open requests per socket (32) they are spread over as few sockets as hold
them, as several pages would.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from adk_stream_protocol.transports.chat_sockets import MAX_OPEN_REQUESTS
from bench.agent import long_prompt
from bench.clients import Answer, ask, bounded, chat_body, client, new_chat, user_message
from bench.core import Figure, Size
from bench.servers import Server

BENCHMARK = "8 ai 7 socket"
COMPARISON = "POST /stream, same server"
GOAL_TIME = 1.10  # at most 10% slower than /stream
GOAL_RATE = 1 / 1.10


class SharedSocket:
    """One socket of ai 7's protocol; many requests at once, told apart by ``requestId``."""

    def __init__(self, ws: ClientConnection) -> None:
        self._ws = ws
        self._open: dict[str, tuple[float, list[float], asyncio.Future[Answer]]] = {}
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, server: Server) -> SharedSocket:
        ws = await connect(f"{server.ws_url}/live", open_timeout=120, max_size=None)
        return cls(ws)

    async def ask(self, text: str) -> Answer:
        request_id = uuid.uuid4().hex[:16]
        body = chat_body(new_chat(), user_message(text))
        frame = {"type": "send", "requestId": request_id, **body, "headers": {}, "body": {}}
        done: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        start = time.perf_counter()
        self._open[request_id] = (start, [], done)
        await self._ws.send(json.dumps(frame))
        return await asyncio.wait_for(done, 300)

    async def close(self) -> None:
        self._reader.cancel()
        await self._ws.close()

    async def _read(self) -> None:
        async for message in self._ws:
            frame: dict[str, Any] = json.loads(message)
            entry = self._open.get(frame["requestId"])
            if entry is None:
                continue
            start, first, done = entry
            kind = frame["type"]
            if kind == "chunk" and not first and frame["chunk"]["type"] == "text-delta":
                first.append(time.perf_counter() - start)
            elif kind in ("end", "error"):
                del self._open[frame["requestId"]]
                total = time.perf_counter() - start
                ok = kind == "end" and bool(first)
                done.set_result(Answer(first[0] if first else float("inf"), total, ok))


class SocketPool:
    """As few shared sockets as hold ``concurrency`` open requests."""

    def __init__(self, sockets: list[SharedSocket]) -> None:
        self.sockets = sockets
        self._free: asyncio.Queue[SharedSocket] = asyncio.Queue()
        for socket in sockets:
            for _ in range(MAX_OPEN_REQUESTS):
                self._free.put_nowait(socket)

    @classmethod
    async def open(cls, server: Server, concurrency: int) -> SocketPool:
        count = -(-concurrency // MAX_OPEN_REQUESTS)
        return cls([await SharedSocket.open(server) for _ in range(count)])

    async def ask(self, text: str) -> Answer:
        socket = await self._free.get()
        try:
            return await socket.ask(text)
        finally:
            self._free.put_nowait(socket)

    async def close(self) -> None:
        for socket in self.sockets:
            await socket.close()


def run(size: Size, ours: Server) -> list[Figure]:
    return asyncio.run(_run(size, ours))


async def _run(size: Size, ours: Server) -> list[Figure]:
    prompt = long_prompt(size.answer_words, size.words_per_partial)
    words = f"{size.answer_words:,}-word answer, {size.words_per_partial} words per partial"
    first = Figure(BENCHMARK, "time to first text", "ms", "lower", COMPARISON, GOAL_TIME, words)
    total = Figure(BENCHMARK, "total time", "ms", "lower", COMPARISON, GOAL_TIME)
    rates = {
        c: Figure(
            BENCHMARK,
            f"requests/s at concurrency {c} ({-(-c // MAX_OPEN_REQUESTS)} socket(s))",
            "req/s",
            "higher",
            COMPARISON,
            GOAL_RATE,
        )
        for c in size.rps_requests
    }
    errors = Figure(BENCHMARK, "failed requests", "", "lower", COMPARISON, limit=0)
    socket = await SharedSocket.open(ours)
    try:
        async with client() as http:
            for _ in range(3):  # warm up both paths
                await ask(http, ours, long_prompt(200, 10))
                await socket.ask(long_prompt(200, 10))
        for r in range(size.runs):
            failed = {"socket": 0, "stream": 0}
            answers: dict[str, list[Answer]] = {"socket": [], "stream": []}
            async with client() as http:
                paths = _paths(socket, http, ours, prompt)
                order = ("socket", "stream") if r % 2 == 0 else ("stream", "socket")
                for _ in range(size.latency_requests):
                    for name in order:
                        answers[name].append(await paths[name](0))
                firsts = {
                    n: statistics.median(a.first_text for a in answers[n]) * 1000 for n in order
                }
                totals = {n: statistics.median(a.total for a in answers[n]) * 1000 for n in order}
                for name in order:
                    failed[name] += sum(not a.ok for a in answers[name])
                rps: dict[tuple[str, int], float] = {}
                for concurrency, count in size.rps_requests.items():
                    pool = await SocketPool.open(ours, concurrency)
                    paths["socket"] = pool_asker(pool, prompt)
                    try:
                        for name in order:
                            got, wall = await bounded(count, concurrency, paths[name])
                            failed[name] += sum(not a.ok for a in got)
                            rps[name, concurrency] = sum(a.ok for a in got) / wall
                    finally:
                        await pool.close()
            first.add(firsts["socket"], firsts["stream"])
            total.add(totals["socket"], totals["stream"])
            for concurrency, figure in rates.items():
                figure.add(rps["socket", concurrency], rps["stream", concurrency])
            errors.add(failed["socket"], failed["stream"])
            print(f"  run {r + 1}: first text {firsts}, total {totals}, rps {rps}")
    finally:
        await socket.close()
    return [first, total, *rates.values(), errors]


def pool_asker(pool: SocketPool, prompt: str) -> Callable[[int], Awaitable[Answer]]:
    return lambda _: pool.ask(prompt)


def _paths(
    socket: SharedSocket, http: httpx.AsyncClient, server: Server, prompt: str
) -> dict[str, Callable[[int], Awaitable[Answer]]]:
    return {
        "socket": lambda _: socket.ask(prompt),
        "stream": lambda _: ask(http, server, prompt),
    }

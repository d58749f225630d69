"""Benchmark 2: the same agent and model behind our ``POST /stream`` and ADK's ``/run_sse``.

The model streams a long answer with no pause at all, so every millisecond measured is the
servers' (and the client's) own: the worst case for a bridge. With a real model's pace the
same overhead is a smaller share.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Awaitable, Callable

import httpx

from bench.agent import long_prompt
from bench.clients import Answer, ask, bounded, client
from bench.core import Figure, Size
from bench.servers import Server

GOAL_TIME = 1.10  # at most 10% slower than ADK's own server
GOAL_RATE = 1 / 1.10  # at most 10% fewer requests per second


async def warm_up(http: httpx.AsyncClient, server: Server) -> None:
    """The first run of a process imports much of ADK lazily; measure what comes after."""
    for _ in range(3):
        answer = await ask(http, server, long_prompt(200, 10))
        if not answer.ok:
            raise RuntimeError(f"{server.kind} server failed to answer during warm-up")


def asker(
    http: httpx.AsyncClient, server: Server, prompt: str
) -> Callable[[int], Awaitable[Answer]]:
    return lambda _: ask(http, server, prompt)


def run(size: Size, ours: Server, adk: Server) -> list[Figure]:
    return asyncio.run(_run(size, ours, adk))


async def _run(size: Size, ours: Server, adk: Server) -> list[Figure]:
    prompt = long_prompt(size.answer_words, size.words_per_partial)
    words = f"{size.answer_words:,}-word answer, {size.words_per_partial} words per partial"
    first = Figure(
        "2 end-to-end", "time to first text", "ms", "lower", "ADK /run_sse", GOAL_TIME, words
    )
    total = Figure("2 end-to-end", "total time", "ms", "lower", "ADK /run_sse", GOAL_TIME)
    rates = {
        c: Figure(
            "2 end-to-end",
            f"requests/s at concurrency {c}",
            "req/s",
            "higher",
            "ADK /run_sse",
            GOAL_RATE,
        )
        for c in size.rps_requests
    }
    errors = Figure("2 end-to-end", "failed requests", "", "lower", "ADK /run_sse", limit=0)
    for server in (ours, adk):
        async with client() as http:
            await warm_up(http, server)
    for r in range(size.runs):
        order = (ours, adk) if r % 2 == 0 else (adk, ours)
        firsts: dict[str, float] = {}
        totals: dict[str, float] = {}
        rps: dict[tuple[str, int], float] = {}
        failed = {"ours": 0, "adk": 0}
        # Latency: requests alternate between the servers, so that a slow moment of the
        # machine falls on both. One client each, fresh every run: connections idle in a pool
        # while the other server is measured get closed by the server (keep-alive timeout),
        # and a request that reuses one in that instant fails for no fault of either server.
        async with client() as http_a, client() as http_b:
            clients = {order[0].kind: http_a, order[1].kind: http_b}
            answers: dict[str, list[Answer]] = {"ours": [], "adk": []}
            for _ in range(size.latency_requests):
                for server in order:
                    answers[server.kind].append(await ask(clients[server.kind], server, prompt))
        for server in order:
            got = answers[server.kind]
            failed[server.kind] += sum(not a.ok for a in got)
            firsts[server.kind] = statistics.median(a.first_text for a in got) * 1000
            totals[server.kind] = statistics.median(a.total for a in got) * 1000
        # Throughput: each level for one server, then the other, in this run's order.
        for concurrency, count in size.rps_requests.items():
            for server in order:
                async with client() as http:
                    got, wall = await bounded(count, concurrency, asker(http, server, prompt))
                failed[server.kind] += sum(not a.ok for a in got)
                rps[server.kind, concurrency] = sum(a.ok for a in got) / wall
        first.add(firsts["ours"], firsts["adk"])
        total.add(totals["ours"], totals["adk"])
        for concurrency, figure in rates.items():
            figure.add(rps["ours", concurrency], rps["adk", concurrency])
        errors.add(failed["ours"], failed["adk"])
        print(f"  run {r + 1}: first text {firsts}, total {totals}, rps {rps}")
    return [first, total, *rates.values(), errors]

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
    return await compare(size, ours, adk, benchmark="2 end-to-end", comparison="ADK /run_sse")


async def compare(
    size: Size, ours: Server, theirs: Server, *, benchmark: str, comparison: str
) -> list[Figure]:
    """Benchmark 2's figures for two servers: time to first text and total time of the long
    answer (requests alternate between them), requests/s at each concurrency, failures."""
    prompt = long_prompt(size.answer_words, size.words_per_partial)
    words = f"{size.answer_words:,}-word answer, {size.words_per_partial} words per partial"
    first = Figure(benchmark, "time to first text", "ms", "lower", comparison, GOAL_TIME, words)
    total = Figure(benchmark, "total time", "ms", "lower", comparison, GOAL_TIME)
    rates = {
        c: Figure(
            benchmark, f"requests/s at concurrency {c}", "req/s", "higher", comparison, GOAL_RATE
        )
        for c in size.rps_requests
    }
    errors = Figure(benchmark, "failed requests", "", "lower", comparison, limit=0)
    servers = {"ours": ours, "theirs": theirs}
    for server in servers.values():
        async with client() as http:
            await warm_up(http, server)
    for r in range(size.runs):
        order = ("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")
        firsts: dict[str, float] = {}
        totals: dict[str, float] = {}
        rps: dict[tuple[str, int], float] = {}
        failed = {"ours": 0, "theirs": 0}
        # Latency: requests alternate between the servers, so that a slow moment of the
        # machine falls on both. One client each, fresh every run: connections idle in a pool
        # while the other server is measured get closed by the server (keep-alive timeout),
        # and a request that reuses one in that instant fails for no fault of either server.
        async with client() as http_a, client() as http_b:
            clients = {order[0]: http_a, order[1]: http_b}
            answers: dict[str, list[Answer]] = {"ours": [], "theirs": []}
            for _ in range(size.latency_requests):
                for name in order:
                    answers[name].append(await ask(clients[name], servers[name], prompt))
        for name in order:
            got = answers[name]
            failed[name] += sum(not a.ok for a in got)
            firsts[name] = statistics.median(a.first_text for a in got) * 1000
            totals[name] = statistics.median(a.total for a in got) * 1000
        # Throughput: each level for one server, then the other, in this run's order.
        for concurrency, count in size.rps_requests.items():
            for name in order:
                async with client() as http:
                    got, wall = await bounded(
                        count, concurrency, asker(http, servers[name], prompt)
                    )
                failed[name] += sum(not a.ok for a in got)
                rps[name, concurrency] = sum(a.ok for a in got) / wall
        first.add(firsts["ours"], firsts["theirs"])
        total.add(totals["ours"], totals["theirs"])
        for concurrency, figure in rates.items():
            figure.add(rps["ours", concurrency], rps["theirs", concurrency])
        errors.add(failed["ours"], failed["theirs"])
        print(f"  run {r + 1}: first text {firsts}, total {totals}, rps {rps}")
    return [first, total, *rates.values(), errors]

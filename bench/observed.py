"""Benchmark 9: what watching a response costs. The same server twice: once as deployed by
default, once with traces (an OpenTelemetry SDK, spans batched and dropped), Prometheus
metrics and recording of every response to JSONL all on (bench/observed_app.py).

The model streams benchmark 2's long answer with no pause, so the hooks' share is as large as
it gets: every chunk passes the span's and the recording's observers.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.agent import long_prompt
from bench.approvals import UNPACED
from bench.clients import Answer, ask, bounded, client
from bench.core import Figure, Size
from bench.endtoend import asker
from bench.servers import Server, serve

BENCHMARK = "9 traces, metrics, recording"
COMPARISON = "same server, all off"
GOAL_TIME = 1.10  # at most 10% slower with everything on
GOAL_RATE = 1 / 1.10
OBSERVED_APP = "bench.observed_app:app"


@contextmanager
def servers() -> Iterator[tuple[Server, Server, Path]]:
    """The observed server, the plain one, and the folder the observed one records into."""
    with tempfile.TemporaryDirectory(prefix="bench-recordings-") as recordings:
        observed = {**UNPACED, "ADK_STREAM_METRICS": "true", "ADK_STREAM_RECORD_DIR": recordings}
        with serve("ours", observed, app=OBSERVED_APP) as on, serve("ours", UNPACED) as off:
            yield on, off, Path(recordings)


def run(size: Size) -> list[Figure]:
    with servers() as (on, off, recordings):
        figures = asyncio.run(_run(size, on, off))
        recorded = len(list(recordings.glob("*.jsonl")))
        metrics = on.metrics_text()
    # The hooks ran: each response was recorded and counted (warm-up included).
    if recorded == 0 or "adk_stream_responses_total" not in metrics:
        raise RuntimeError(
            f"the observed server recorded {recorded} responses; metrics: {metrics[:200]}"
        )
    print(f"  {recorded} responses recorded")
    return figures


async def _run(size: Size, on: Server, off: Server) -> list[Figure]:
    prompt = long_prompt(size.answer_words, size.words_per_partial)
    words = f"{size.answer_words:,}-word answer, {size.words_per_partial} words per partial"
    first = Figure(BENCHMARK, "time to first text", "ms", "lower", COMPARISON, GOAL_TIME, words)
    total = Figure(BENCHMARK, "total time", "ms", "lower", COMPARISON, GOAL_TIME)
    rates = {
        c: Figure(
            BENCHMARK, f"requests/s at concurrency {c}", "req/s", "higher", COMPARISON, GOAL_RATE
        )
        for c in size.rps_requests
    }
    errors = Figure(BENCHMARK, "failed requests", "", "lower", COMPARISON, limit=0)
    servers = {"on": on, "off": off}
    async with client() as http:
        for server in servers.values():
            for _ in range(3):  # the first requests of a process import much of ADK lazily
                await ask(http, server, long_prompt(200, 10))
    for r in range(size.runs):
        order = ("on", "off") if r % 2 == 0 else ("off", "on")
        answers: dict[str, list[Answer]] = {"on": [], "off": []}
        failed = {"on": 0, "off": 0}
        async with client() as http_a, client() as http_b:
            clients = {order[0]: http_a, order[1]: http_b}
            for _ in range(size.latency_requests):
                for name in order:
                    answers[name].append(await ask(clients[name], servers[name], prompt))
        firsts = {n: statistics.median(a.first_text for a in answers[n]) * 1000 for n in order}
        totals = {n: statistics.median(a.total for a in answers[n]) * 1000 for n in order}
        for name in order:
            failed[name] += sum(not a.ok for a in answers[name])
        rps: dict[tuple[str, int], float] = {}
        for concurrency, count in size.rps_requests.items():
            for name in order:
                async with client() as http:
                    got, wall = await bounded(
                        count, concurrency, asker(http, servers[name], prompt)
                    )
                failed[name] += sum(not a.ok for a in got)
                rps[name, concurrency] = sum(a.ok for a in got) / wall
        first.add(firsts["on"], firsts["off"])
        total.add(totals["on"], totals["off"])
        for concurrency, figure in rates.items():
            figure.add(rps["on", concurrency], rps["off", concurrency])
        errors.add(failed["on"], failed["off"])
        print(f"  run {r + 1}: first text {firsts}, total {totals}, rps {rps}")
    return [first, total, *rates.values(), errors]

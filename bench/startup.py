"""Benchmark 5: from process start to the first successful responses.

Each sample starts a fresh server process (``python -m uvicorn``, as ``server.py`` does) and
polls it every 5 ms: the first ``/health`` 200, then the first complete answer (``/stream`` for
ours, ``/run_sse`` for ADK's own server), which includes what the first run imports lazily.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from bench.agent import long_prompt
from bench.clients import ask, client
from bench.core import Figure, Size
from bench.servers import Kind, Server, free_port, healthy, probe, spawn
from tests.support.rig import stop_process


def start_once(kind: Kind) -> tuple[float, float]:
    """Seconds from spawning to the first /health 200, and to the first complete answer."""
    with tempfile.TemporaryDirectory(prefix=f"bench-start-{kind}-") as tmp, probe() as http:
        port = free_port()
        start = time.perf_counter()
        process = spawn(kind, Path(tmp), port)
        try:
            server = Server(kind, f"http://127.0.0.1:{port}", process.pid)
            while not healthy(server.base_url, http):
                if process.poll() is not None or time.perf_counter() - start > 120:
                    raise RuntimeError(f"{kind} server did not start")
                time.sleep(0.005)
            up = time.perf_counter() - start
            answer = asyncio.run(_first_answer(server))
            if not answer:
                raise RuntimeError(f"{kind} server's first answer failed")
            return up, time.perf_counter() - start
        finally:
            stop_process(process)


async def _first_answer(server: Server) -> bool:
    async with client() as http:
        return (await ask(http, server, long_prompt(20, 10))).ok


def run(size: Size) -> list[Figure]:
    cmp = "ADK get_fast_api_app"
    health = Figure("5 start-up", "process start to first /health", "s", "lower", cmp)
    answer = Figure("5 start-up", "process start to first complete answer", "s", "lower", cmp)
    for r in range(size.runs):
        kinds: tuple[Kind, Kind] = ("ours", "adk") if r % 2 == 0 else ("adk", "ours")
        samples = {kind: [start_once(kind) for _ in range(size.startups)] for kind in kinds}
        best = {kind: (min(s[0] for s in v), min(s[1] for s in v)) for kind, v in samples.items()}
        health.add(best["ours"][0], best["adk"][0])
        answer.add(best["ours"][1], best["adk"][1])
        print(f"  run {r + 1}: {best}")
    return [health, answer]

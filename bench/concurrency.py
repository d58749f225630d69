"""Benchmark 3: many open streams at once, and what each costs in memory.

- ``/stream``: N requests at once, each answer paced by the model so that all stay open
  together; ADK's ``/run_sse`` gets the same load.
- ``/live``: N sockets open together, each with a few turns at random moments in a window;
  ADK's ``/run_live`` gets the same load.

Every run starts fresh servers (Python keeps freed memory for reuse, so a second load on the
same process would look free), warms them up, reads ``VmRSS`` as the baseline, then samples it
while the load runs. Memory per stream is (peak - baseline) / N.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Callable, Coroutine
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import ClientConnection

from bench.agent import long_prompt
from bench.clients import Answer, ask, bounded, client, live_turn, new_chat, open_live
from bench.core import Figure, Size, percentile
from bench.servers import Kind, Server, serve

LIVE_PROMPT = "hello, how are you today?"

# The load keeps 500 responses open at once: past the default cap on concurrent responses
# (benchmark 6 measures the cap), which ADK's server does not have. Off here, like for like.
NO_CAP = {"ADK_STREAM_MAX_CONCURRENT_RESPONSES": "0"}


@dataclass
class Load:
    answers: list[Answer]
    errors: int
    baseline_kib: int
    peak_kib: int
    server_cpu: float  # seconds of CPU the server used for the load

    def cpu_per_answer_ms(self) -> float:
        return self.server_cpu / max(1, len(self.answers)) * 1000

    def first_text_ms(self, q: float, turns: slice = slice(None)) -> float:
        """Percentile ``q`` of the time to first text; ``turns`` picks turns by their index on
        a socket (``slice(0, 1)``: each socket's first turn)."""
        ok = [a.first_text for a in self.answers if a.ok and a.turn in range(99)[turns]]
        return percentile(ok, q) * 1000 if ok else float("inf")


async def _sample_peak(server: Server, stop: asyncio.Event) -> int:
    peak = server.rss_kib()
    while not stop.is_set():
        peak = max(peak, server.rss_kib())
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.05)
    return max(peak, server.rss_kib())


async def _measured(
    server: Server, load: Callable[[], Coroutine[Any, Any, tuple[list[Answer], int]]]
) -> Load:
    baseline, cpu = server.rss_kib(), server.cpu_seconds()
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample_peak(server, stop))
    try:
        answers, errors = await load()
    finally:
        stop.set()
    failed = errors + sum(not a.ok for a in answers)
    return Load(answers, failed, baseline, await sampler, server.cpu_seconds() - cpu)


async def streams(size: Size, server: Server) -> Load:
    prompt = long_prompt(size.stream_words, 10, size.stream_pace)
    async with client() as http:
        for _ in range(3):  # warm-up: lazy imports, first-run caches
            await ask(http, server, prompt)

        async def load() -> tuple[list[Answer], int]:
            answers, _ = await bounded(
                size.streams, size.streams, lambda _: ask(http, server, prompt)
            )
            return answers, 0

        return await _measured(server, load)


async def sockets(size: Size, server: Server, seed: int) -> Load:
    chat = new_chat()
    warm = await open_live(server, chat)
    for _ in range(2):
        await live_turn(server, warm, chat, LIVE_PROMPT)
    await warm.close()
    rng = random.Random(seed)

    async def load() -> tuple[list[Answer], int]:
        chats = [new_chat() for _ in range(size.sockets)]
        opened = await asyncio.gather(
            *(open_live(server, c) for c in chats), return_exceptions=True
        )
        live = [
            (ws, c) for ws, c in zip(opened, chats, strict=True) if isinstance(ws, ClientConnection)
        ]
        failed_opens = len(chats) - len(live)
        answers: list[Answer] = []

        async def talk(ws: ClientConnection, chat_id: str, delays: list[float]) -> None:
            for turn, delay in enumerate(delays):
                await asyncio.sleep(delay)
                try:
                    answer = await live_turn(server, ws, chat_id, LIVE_PROMPT)
                except Exception as exc:  # a failed turn is a figure, not a crash
                    print(f"  {server.kind} live turn failed: {exc!r}")
                    answer = Answer(float("inf"), float("inf"), False)
                answers.append(dataclasses.replace(answer, turn=turn))

        plans = [
            [rng.uniform(0, size.turn_window) for _ in range(size.turns_per_socket)] for _ in live
        ]
        await asyncio.gather(*(talk(ws, c, p) for (ws, c), p in zip(live, plans, strict=True)))
        await asyncio.gather(*(ws.close() for ws, _ in live), return_exceptions=True)
        return answers, failed_opens

    return await _measured(server, load)


def run(size: Size) -> list[Figure]:
    n_streams, n_sockets = f"{size.streams} at once", f"{size.sockets} sockets"
    comparison = {"stream": "ADK /run_sse", "live": "ADK /run_live"}
    figures: dict[str, list[Figure]] = {}
    for transport, label, note in (("stream", "/stream", n_streams), ("live", "/live", n_sockets)):
        bench = f"3 concurrency {label}"
        cmp = comparison[transport]
        figures[transport] = [
            Figure(bench, "time to first text p50", "ms", "lower", cmp, note=note),
            Figure(bench, "time to first text p99", "ms", "lower", cmp),
            Figure(bench, "errors", "", "lower", cmp, limit=0),
            Figure(bench, "memory per open stream", "KiB", "lower", cmp),
            Figure(
                bench,
                "server CPU per answer",
                "ms",
                "lower",
                cmp,
                # issue 27 (/stream): at most 0.7x ADK's
                goal=0.7 if transport == "stream" else None,
                why="our layer's cost, bench/PROFILE.md" if transport == "stream" else "",
            ),
        ]
    first_turn = Figure(
        "3 concurrency /live",
        "time to first text p50, sockets' first turns",
        "ms",
        "lower",
        "ADK /run_live",
    )
    later_turns = Figure(
        "3 concurrency /live", "time to first text p50, later turns", "ms", "lower", "ADK /run_live"
    )
    for r in range(size.load_runs):
        for transport in ("stream", "live"):
            loads: dict[str, Load] = {}
            kinds: tuple[Kind, Kind] = ("ours", "adk") if r % 2 == 0 else ("adk", "ours")
            with ExitStack() as stack:
                servers = {kind: stack.enter_context(serve(kind, NO_CAP)) for kind in kinds}
                for kind in kinds:
                    if transport == "stream":
                        loads[kind] = asyncio.run(streams(size, servers[kind]))
                    else:
                        loads[kind] = asyncio.run(sockets(size, servers[kind], seed=r))
            count = size.streams if transport == "stream" else size.sockets
            p50, p99, errors, memory, cpu = figures[transport][:5]
            ours, adk = loads["ours"], loads["adk"]
            p50.add(ours.first_text_ms(50), adk.first_text_ms(50))
            p99.add(ours.first_text_ms(99), adk.first_text_ms(99))
            errors.add(ours.errors, adk.errors)
            memory.add(
                (ours.peak_kib - ours.baseline_kib) / count,
                (adk.peak_kib - adk.baseline_kib) / count,
            )
            cpu.add(ours.cpu_per_answer_ms(), adk.cpu_per_answer_ms())
            if transport == "live":
                first, later = slice(0, 1), slice(1, None)
                first_turn.add(ours.first_text_ms(50, first), adk.first_text_ms(50, first))
                later_turns.add(ours.first_text_ms(50, later), adk.first_text_ms(50, later))
            print(
                f"  run {r + 1} {transport}: "
                + ", ".join(
                    f"{k}: p50 {v.first_text_ms(50):.0f} ms p99 {v.first_text_ms(99):.0f} ms "
                    f"errors {v.errors} rss {v.baseline_kib}->{v.peak_kib} KiB "
                    f"cpu {v.server_cpu:.1f} s"
                    for k, v in loads.items()
                )
            )
    return [*figures["stream"], *figures["live"], first_turn, later_turns]

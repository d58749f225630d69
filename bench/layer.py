"""What our layer costs on top of ADK's run loop, measured in one process.

Two ways to get the same answers from the same runner, in alternating rounds:

- **runner**: the app's own ADK runner (its plugins, its session store, the stamps a turn
  puts on its events), driven directly with ``run_async``, nothing read from the events;
- **app**: the whole app, ``POST /stream`` through httpx's in-process ASGI transport, the
  answer read to its end (the client's own work is in this figure too).

Both run in one process with the app's collector settings, so the machine's drift hits both
alike; the difference is the cost of the HTTP request, our turn, the conversion to chunks,
the chat's record, the chunk log and the SSE response. ``python -m bench.profile layer``.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
from google.genai import types

from adk_stream_protocol import Settings, create_app
from adk_stream_protocol.turns.bridge import Bridge
from bench.agent import long_prompt, root_agent
from bench.clients import chat_body, new_chat, user_message


@dataclass(frozen=True)
class LayerCost:
    """CPU per answer (ms) of each round, for the runner alone and for the whole app."""

    runner: list[float]
    app: list[float]

    def summary(self) -> str:
        runner, app = statistics.median(self.runner), statistics.median(self.app)
        ratios = [a / r for a, r in zip(self.app, self.runner, strict=True)]
        return (
            f"runner alone {runner:.2f} ms per answer ({min(self.runner):.2f}-"
            f"{max(self.runner):.2f}), whole app {app:.2f} ms ({min(self.app):.2f}-"
            f"{max(self.app):.2f}); app / runner {statistics.median(ratios):.3f} "
            f"({min(ratios):.3f}-{max(ratios):.3f}) over {len(ratios)} rounds"
        )


async def answer_through_runner(bridge: Bridge, message: types.Content) -> None:
    """One answer from the app's own runner, driven directly in a new session, with the
    stamps a turn puts on its events; nothing read from the events."""
    runner = bridge.runners.runner
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="bench")
    stamps = {"bench-response": new_chat(), "bench-message": new_chat()}
    async for _ in runner.run_async(
        user_id="bench",
        session_id=session.id,
        new_message=message,
        run_config=bridge.runners.run_config(stamps),
    ):
        pass


async def _measure(rounds: int, answers: int, words: int, pace: float, warm_up: int) -> LayerCost:
    # Benchmark 3's server: sessions in memory, no cap on the responses open at once.
    settings = Settings(session_store="memory://", max_concurrent_responses=0)
    app = create_app(root_agent, settings=settings)
    prompt = long_prompt(words, 10, pace)
    message = types.Content(role="user", parts=[types.Part(text=prompt)])
    async with app.router.lifespan_context(app):
        bridge = app.state.bridge
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:

            async def through_runner() -> None:
                await answer_through_runner(bridge, message)

            async def through_app() -> None:
                body = chat_body(new_chat(), user_message(prompt))
                async with http.stream("POST", "/stream", json=body) as response:
                    response.raise_for_status()
                    last = b""
                    async for piece in response.aiter_raw():
                        last = piece
                if not last.endswith(b"data: [DONE]\n\n"):
                    raise RuntimeError(f"the answer did not end: {last[-200:]!r}")

            async def cpu_per_answer(one: Callable[[], Awaitable[None]]) -> float:
                start = time.process_time()
                await asyncio.gather(*(one() for _ in range(answers)))
                return (time.process_time() - start) / answers * 1000

            for one in (through_runner, through_app):
                for _ in range(warm_up):
                    await one()
            cost = LayerCost([], [])
            for r in range(rounds):
                # Alternate which goes first, so neither always follows the other's garbage.
                if r % 2 == 0:
                    cost.runner.append(await cpu_per_answer(through_runner))
                    cost.app.append(await cpu_per_answer(through_app))
                else:
                    cost.app.append(await cpu_per_answer(through_app))
                    cost.runner.append(await cpu_per_answer(through_runner))
            return cost


def measure(
    rounds: int = 12, answers: int = 100, words: int = 200, pace: float = 0.05, warm_up: int = 5
) -> LayerCost:
    """Benchmark 3's answer (``words`` words, 10 per partial, ``pace`` s apart), ``answers``
    at once per round."""
    logging.disable(logging.INFO)  # a line per request would be measured too
    try:
        return asyncio.run(_measure(rounds, answers, words, pace, warm_up))
    finally:
        logging.disable(logging.NOTSET)

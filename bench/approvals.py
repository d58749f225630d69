"""Benchmark 4: from the approval leaving the client to the tool's result arriving.

The demo agent's ``process_payment`` needs approval. Each sample is a new chat: ask for a
payment, receive the approval request, then time the approval: on ``/stream`` a new request
whose assistant message answers it (what ``addToolApprovalResponse`` sends), on ``/live`` the
same body as a frame on the open socket; the clock stops at ``tool-output-available``. ADK's own
server is timed from the confirmation ``FunctionResponse`` (``/run_sse``) to the tool's
``functionResponse`` event. ADK's live mode cannot confirm tools, so ``/run_sse`` is the
comparison for both transports.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from bench.agent import LIVE_PACE_ENV
from bench.clients import (
    Answer,
    chat_body,
    client,
    live_exchange,
    live_message,
    new_chat,
    open_live,
    run_sse_body,
    stream_post,
    user_message,
)
from bench.core import Figure, Size, percentile
from bench.servers import Server, serve
from tests.support.rig import StreamResult, answer_approvals, assistant_message, sse_payloads

PAYMENT = "Send 50 dollars to Hanako"
OUR_RESULT = b'"type":"tool-output-available"'
ADK_RESULT = b'"name":"process_payment","response"'


def _result(body: str) -> StreamResult:
    payloads = sse_payloads(body)
    chunks = [json.loads(p) for p in payloads if p != "[DONE]"]
    return StreamResult(200, httpx.Headers(), body, payloads, chunks)


async def on_stream(http: httpx.AsyncClient, server: Server) -> Answer:
    chat, user = new_chat(), user_message(PAYMENT)
    asked = await http.post(f"{server.base_url}/stream", json=chat_body(chat, user))
    approved = answer_approvals(assistant_message(_result(asked.text)), True)
    return await stream_post(http, server, "/stream", chat_body(chat, user, approved), OUR_RESULT)


async def on_live(server: Server) -> Answer:
    chat, user = new_chat(), user_message(PAYMENT)
    ws = await open_live(server, chat)
    try:
        frames: list[str] = []
        await live_exchange(server, ws, live_message(chat, user), b"", frames)
        body = "".join(f for f in frames if f.startswith("data: "))
        approved = answer_approvals(assistant_message(_result(body)), True)
        return await live_exchange(server, ws, live_message(chat, user, approved), OUR_RESULT)
    finally:
        await ws.close()


async def on_adk(http: httpx.AsyncClient, server: Server) -> Answer:
    chat = new_chat()
    asked = await http.post(
        f"{server.base_url}/run_sse", json=run_sse_body(chat, [{"text": PAYMENT}])
    )
    confirmation = next(
        part["functionCall"]["id"]
        for payload in sse_payloads(asked.text)
        for part in json.loads(payload).get("content", {}).get("parts", [])
        if part.get("functionCall", {}).get("name") == "adk_request_confirmation"
    )
    answer: dict[str, Any] = {
        "functionResponse": {
            "id": confirmation,
            "name": "adk_request_confirmation",
            "response": {"confirmed": True},
        }
    }
    return await stream_post(http, server, "/run_sse", run_sse_body(chat, [answer]), ADK_RESULT)


# The live model's answer after the tool's result, with no pause between its pieces: a held-back
# result arrives when that answer ends, and ADK's figure (/run_sse) comes from an unpaced model.
UNPACED = {LIVE_PACE_ENV: "0"}
STREAMING = {"ADK_STREAM_STREAM_INTERMEDIATE_RESULTS": "true", **UNPACED}


def run(size: Size, ours: Server, adk: Server) -> list[Figure]:
    """``ours`` runs the default settings, which hold a continuation back until its run ends
    (docs/adr/0010); a third server with ``ADK_STREAM_STREAM_INTERMEDIATE_RESULTS=true``
    shows what streaming it costs instead."""
    with serve("ours", STREAMING) as streaming:
        return asyncio.run(_run(size, ours, streaming, adk))


async def _run(size: Size, ours: Server, streaming: Server, adk: Server) -> list[Figure]:
    cmp = "ADK /run_sse (confirmation FunctionResponse)"
    note = f"{size.approvals} approvals per run"
    held = "held back (default)"
    streamed = "with STREAM_INTERMEDIATE_RESULTS=true"
    figures = {
        ("stream", 50): Figure(
            "4 approval",
            f"/stream approval to result, median, {held}",
            "ms",
            "lower",
            cmp,
            note=note,
        ),
        ("stream", 99): Figure(
            "4 approval", f"/stream approval to result, p99, {held}", "ms", "lower", cmp
        ),
        ("live", 50): Figure(
            "4 approval", f"/live approval to result, median, {held}", "ms", "lower", cmp
        ),
        ("live", 99): Figure(
            "4 approval", f"/live approval to result, p99, {held}", "ms", "lower", cmp
        ),
        ("stream-streamed", 50): Figure(
            "4 approval",
            f"/stream approval to result, median, {streamed}",
            "ms",
            "lower",
            cmp,
            goal=1.2,  # issue 27
        ),
        ("stream-streamed", 99): Figure(
            "4 approval", f"/stream approval to result, p99, {streamed}", "ms", "lower", cmp
        ),
        ("live-streamed", 50): Figure(
            "4 approval", f"/live approval to result, median, {streamed}", "ms", "lower", cmp
        ),
        ("live-streamed", 99): Figure(
            "4 approval", f"/live approval to result, p99, {streamed}", "ms", "lower", cmp
        ),
    }
    # Held back, the result leaves with the rest of the run's answer (docs/adr/0010): the
    # comparison that measures the bridge is ADK's own run, from the confirmation to its end.
    held_vs_end = Figure(
        "4 approval",
        f"/stream approval to result, median, {held}",
        "ms",
        "lower",
        "ADK /run_sse, confirmation to the run's end",
        goal=1.2,  # issue 27
    )
    errors = Figure("4 approval", "failed approvals", "", "lower", cmp, limit=0)
    samplers: dict[str, Callable[[httpx.AsyncClient], Awaitable[Answer]]] = {
        "stream": lambda http: on_stream(http, ours),
        "live": lambda _: on_live(ours),
        "stream-streamed": lambda http: on_stream(http, streaming),
        "live-streamed": lambda _: on_live(streaming),
        "adk": lambda http: on_adk(http, adk),
    }

    async def sample(name: str, count: int) -> list[Answer]:
        async with client() as http:  # fresh: no pooled connection the server timed out
            return [await samplers[name](http) for _ in range(count)]

    for name in samplers:  # warm-up
        await sample(name, 1)
    for r in range(size.runs):
        times: dict[str, list[float]] = {}
        ends: list[float] = []  # ADK's: from the confirmation to the run's end
        failed = {"ours": 0, "adk": 0}
        for name in list(samplers) if r % 2 == 0 else list(reversed(samplers)):
            answers = await sample(name, size.approvals)
            failed["adk" if name == "adk" else "ours"] += sum(not a.ok for a in answers)
            times[name] = [a.first_text * 1000 for a in answers if a.ok] or [float("inf")]
            if name == "adk":
                ends = [a.total * 1000 for a in answers if a.ok] or [float("inf")]
        for (transport, q), figure in figures.items():
            figure.add(percentile(times[transport], q), percentile(times["adk"], q))
        held_vs_end.add(percentile(times["stream"], 50), percentile(ends, 50))
        errors.add(failed["ours"], failed["adk"])
        print(
            f"  run {r + 1}: "
            + ", ".join(f"{k} median {statistics.median(v):.1f} ms" for k, v in times.items())
        )
    return [*figures.values(), held_vs_end, errors]

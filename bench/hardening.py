"""Benchmark 6: what the hardening limits do under load (docs/adr/0019).

- **Load shedding**: N paced ``/stream`` requests at once (the load of benchmark 3), on a
  server with the cap on concurrent responses (``ADK_STREAM_MAX_CONCURRENT_RESPONSES``, default
  100) and on one with the cap off (``0``), fresh servers every run, in alternating order. Past
  the cap a request is answered 503 with ``Retry-After`` at once instead of queueing; the
  figures are the served requests' time to first text, how many were served and refused, how
  soon a refusal arrives, and served answers per second. The comparison is the cap-off server.
- **Event-loop lag**: one message at the text limit (``max_message_chars``) of each worst
  shape for the demo agent's offline model, on the demo agent itself (``ADK_STREAM_AGENT``
  empty). While it is read, run and answered, the client polls ``GET /health`` every 10 ms;
  the slowest ``/health`` is the stall every other client of the process sees. The comparison
  is the same shape at 20 characters, measured the same way on the same server.

Refusals are counted here, not printed: ``bench.clients.ask`` reports every non-200 as a
failure, so this module has its own request function.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import dataclass

import httpx

from bench.agent import long_prompt
from bench.clients import chat_body, client, new_chat, user_message
from bench.core import Figure, Size, percentile
from bench.servers import Server, serve

CAP = "ADK_STREAM_MAX_CONCURRENT_RESPONSES"
CAP_OFF = {CAP: "0"}
DEMO_AGENT = {"ADK_STREAM_AGENT": ""}  # empty: the demo agent, not bench.agent's
HEALTH_EVERY = 0.010  # seconds between /health probes
LAG_LIMIT_MS = 100.0  # no accepted input may stall the event loop longer
LAG_TIMEOUT = 120.0  # seconds one large message may take before the run gives up on it
LOAD_TIMEOUT = 300.0  # seconds one request of the load may take (TimeoutError is an OSError)
SMALL_CHARS = 20

_TEXT = b'"type":"text-delta"'
_END = b"data: [DONE]"
_ERROR = b'"type":"error"'

# The demo model's worst inputs at n characters: one long token, many short ones, a weather
# question with a very long city, multi-byte text, ordinary words.
SHAPES: dict[str, Callable[[int], str]] = {
    "one token 'a'": lambda n: "a" * n,
    "'a-' repeated": lambda n: ("a-" * (n // 2 + 1))[:n],
    "'weather in ' + 'x'": lambda n: ("weather in " + "x" * n)[:n],
    "'天' repeated": lambda n: "天" * n,
    "'lorem ipsum ' repeated": lambda n: ("lorem ipsum " * (n // 12 + 1))[:n],
}


@dataclass(frozen=True)
class Reply:
    status: int  # HTTP status; 0 when no response came
    first_text: float  # seconds from sending to the first text (inf when none came)
    total: float  # seconds from sending to the end of the response
    ok: bool  # a complete answer, or a 503 that says when to retry


async def post_stream(http: httpx.AsyncClient, server: Server, body: bytes) -> Reply:
    """POST a pre-encoded chat body to ``/stream`` and read the whole response."""
    start = time.perf_counter()
    first = float("inf")
    carry = b""
    ended = failed = False
    headers = {"content-type": "application/json"}
    try:
        async with http.stream(
            "POST", f"{server.base_url}/stream", content=body, headers=headers
        ) as r:
            if r.status_code != 200:
                await r.aread()
                refused = r.status_code == 503 and r.headers.get("retry-after", "").isdigit()
                if not refused:
                    print(f"  /stream: HTTP {r.status_code} {r.content[:300]!r}")
                return Reply(r.status_code, first, time.perf_counter() - start, refused)
            async for chunk in r.aiter_raw():
                window = carry + chunk
                if first == float("inf") and _TEXT in window:
                    first = time.perf_counter() - start
                ended = ended or _END in window
                failed = failed or _ERROR in window
                carry = window[-64:]
    except httpx.HTTPError as exc:
        print(f"  /stream: {exc!r}")
        return Reply(0, first, time.perf_counter() - start, False)
    if failed or not ended:
        print(f"  /stream: the response failed or ended early: {carry!r}")
    return Reply(200, first, time.perf_counter() - start, ended and not failed)


def request_body(text: str) -> bytes:
    """A new chat with one user message, encoded before any clock starts."""
    return json.dumps(chat_body(new_chat(), user_message(text))).encode()


# -- load shedding ------------------------------------------------------------------------------


@dataclass
class Shed:
    replies: list[Reply]
    seconds: float  # from the first request sent to the last response ended

    def served(self) -> list[Reply]:
        return [r for r in self.replies if r.status == 200 and r.ok]

    def refused(self) -> list[Reply]:
        return [r for r in self.replies if r.status == 503 and r.ok]

    def errors(self) -> int:
        return sum(not r.ok for r in self.replies)

    def first_text_ms(self, q: float) -> float:
        served = [r.first_text for r in self.served()]
        return percentile(served, q) * 1000 if served else float("inf")

    def refusal_ms(self, q: float) -> float:
        refused = [r.total for r in self.refused()]
        return percentile(refused, q) * 1000 if refused else 0.0

    def served_per_second(self) -> float:
        return len(self.served()) / self.seconds


def raw_request(server: Server, body: bytes) -> bytes:
    """The whole HTTP/1.1 request for ``POST /stream``, built before any clock starts."""
    host = server.base_url.removeprefix("http://")
    head = (
        f"POST /stream HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def raw_post(server: Server, request: bytes) -> Reply:
    """Send a prepared ``raw_request`` on a new connection and read the response to its end.

    The load below is sent with this instead of httpx: httpcore's pool scans every connection
    it holds on each request and response (O(n²) in open streams), and opening hundreds of
    connections through it costs the client seconds of CPU, so the requests would leave it
    seconds late and a refusal would look slow because it was sent late. Here the client costs
    little (asyncio sets ``TCP_NODELAY``, as browsers do). The markers are searched in the raw
    bytes: chunked framing never splits an SSE event, and the server closes at the end."""
    start = time.perf_counter()
    first = float("inf")
    carry = b""
    ended = failed = False
    try:
        reader, writer = await asyncio.open_connection(*_host_port(server))
    except OSError as exc:
        print(f"  /stream: {exc!r}")
        return Reply(0, first, time.perf_counter() - start, False)
    try:
        async with asyncio.timeout(LOAD_TIMEOUT):
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            if status != 200:
                rest = await reader.read()
                refused = status == 503 and b"\r\nretry-after: " in head.lower()
                if not refused:
                    print(f"  /stream: HTTP {status} {rest[:300]!r}")
                return Reply(status, first, time.perf_counter() - start, refused)
            while chunk := await reader.read(65536):
                window = carry + chunk
                if first == float("inf") and _TEXT in window:
                    first = time.perf_counter() - start
                ended = ended or _END in window
                failed = failed or _ERROR in window
                carry = window[-64:]
    except (OSError, asyncio.IncompleteReadError) as exc:
        print(f"  /stream: {exc!r}")
        return Reply(0, first, time.perf_counter() - start, False)
    finally:
        writer.close()
    if failed or not ended:
        print(f"  /stream: the response failed or ended early: {carry!r}")
    return Reply(200, first, time.perf_counter() - start, ended and not failed)


def _host_port(server: Server) -> tuple[str, int]:
    host, _, port = server.base_url.removeprefix("http://").rpartition(":")
    return host, int(port)


async def shed_load(size: Size, server: Server) -> Shed:
    prompt = long_prompt(size.stream_words, 10, size.stream_pace)
    async with client() as http:
        for _ in range(3):  # warm-up: lazy imports, first-run caches
            await post_stream(http, server, request_body(prompt))
    requests = [raw_request(server, request_body(prompt)) for _ in range(size.streams)]
    start = time.perf_counter()
    replies = await asyncio.gather(*(raw_post(server, r) for r in requests))
    return Shed(list(replies), time.perf_counter() - start)


def run_shedding(size: Size) -> list[Figure]:
    bench, cmp = "6 load shedding /stream", f"cap off ({CAP}=0)"
    note = f"{size.streams} at once, cap {size.shed_cap}"
    p50 = Figure(bench, "time to first text p50, served", "ms", "lower", cmp, note=note)
    p99 = Figure(bench, "time to first text p99, served", "ms", "lower", cmp)
    served = Figure(bench, "requests served", "", "higher", cmp)
    refused = Figure(bench, "requests refused with 503", "", "lower", cmp)
    refusal = Figure(
        bench, "time to the 503 answer p99", "ms", "lower", "cap off: time to first text p99"
    )
    rate = Figure(bench, "served answers per second over the load", "1/s", "higher", cmp)
    errors = Figure(
        bench, "errors (neither an answer nor a 503 with Retry-After)", "", "lower", cmp, limit=0
    )
    capped = {CAP: str(size.shed_cap)}
    for r in range(size.load_runs):
        names = ("cap", "off") if r % 2 == 0 else ("off", "cap")
        loads: dict[str, Shed] = {}
        with ExitStack() as stack:
            servers = {
                name: stack.enter_context(serve("ours", capped if name == "cap" else CAP_OFF))
                for name in names
            }
            for name in names:
                loads[name] = asyncio.run(shed_load(size, servers[name]))
        on, off = loads["cap"], loads["off"]
        p50.add(on.first_text_ms(50), off.first_text_ms(50))
        p99.add(on.first_text_ms(99), off.first_text_ms(99))
        served.add(len(on.served()), len(off.served()))
        refused.add(len(on.refused()), len(off.refused()))
        refusal.add(on.refusal_ms(99), off.first_text_ms(99))
        rate.add(on.served_per_second(), off.served_per_second())
        errors.add(on.errors(), off.errors())
        print(
            f"  run {r + 1}: "
            + ", ".join(
                f"{k}: served {len(v.served())} p50 {v.first_text_ms(50):.0f} ms "
                f"p99 {v.first_text_ms(99):.0f} ms, refused {len(v.refused())} "
                f"p99 {v.refusal_ms(99):.0f} ms, errors {v.errors()}, {v.seconds:.1f} s"
                for k, v in loads.items()
            )
        )
    return [p50, p99, served, refused, refusal, rate, errors]


# -- event-loop lag -----------------------------------------------------------------------------


async def health_lag(http: httpx.AsyncClient, server: Server, stop: asyncio.Event) -> float:
    """Poll ``/health`` every 10 ms until ``stop``; the slowest answer, in seconds. A probe
    still waiting at ``stop`` counts with the time it has waited."""
    worst = 0.0
    stopped = asyncio.create_task(stop.wait())
    try:
        while not stop.is_set():
            start = time.perf_counter()
            probe = asyncio.create_task(http.get(f"{server.base_url}/health"))
            await asyncio.wait({probe, stopped}, return_when=asyncio.FIRST_COMPLETED)
            worst = max(worst, time.perf_counter() - start)
            if not probe.done():
                probe.cancel()
                with suppress(asyncio.CancelledError, httpx.HTTPError):
                    await probe
                break
            probe.result().raise_for_status()
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), HEALTH_EVERY)
    finally:
        stopped.cancel()
    return worst


async def lagged(server: Server, text: str) -> tuple[float, float, bool]:
    """Send ``text`` as a new chat while polling ``/health``: the slowest ``/health`` and the
    time to the whole answer, in milliseconds, and whether the answer came in time."""
    body = request_body(text)
    async with client() as http, client() as probes:
        stop = asyncio.Event()
        poller = asyncio.create_task(health_lag(probes, server, stop))
        await asyncio.sleep(5 * HEALTH_EVERY)  # the poller is under way before the message
        start = time.perf_counter()
        try:
            async with asyncio.timeout(LAG_TIMEOUT):
                reply = await post_stream(http, server, body)
        except TimeoutError:
            print(f"  no complete answer within {LAG_TIMEOUT:g} s")
            reply = Reply(200, float("inf"), time.perf_counter() - start, False)
        stop.set()
        worst = await poller
    if reply.status != 200:
        raise RuntimeError(f"a {len(text):,}-character message was refused: HTTP {reply.status}")
    return worst * 1000, reply.total * 1000, reply.ok


def run_lag(size: Size) -> list[Figure]:
    bench, cmp = "6 event-loop lag /stream", f"same shape, {SMALL_CHARS} characters"
    note = (
        f"{size.lag_chars:,}-character message, demo agent, /health polled every "
        f"{HEALTH_EVERY * 1000:.0f} ms"
    )
    lags: dict[str, Figure] = {}
    times: dict[str, Figure] = {}
    for i, name in enumerate(SHAPES):
        lags[name] = Figure(
            bench,
            f"slowest /health, {name}",
            "ms",
            "lower",
            cmp,
            limit=LAG_LIMIT_MS,
            note=note if i == 0 else "",
        )
        times[name] = Figure(bench, f"time to the whole answer, {name}", "ms", "lower", cmp)
    for r in range(size.runs):
        pending = list(SHAPES)
        while pending:  # one server per run; a fresh one after a message that timed out
            with serve("ours", DEMO_AGENT) as server:
                asyncio.run(lagged(server, "hello"))  # warm-up: lazy imports, first-run caches
                while pending:
                    name = pending.pop(0)
                    shape = SHAPES[name]
                    small_lag, small_time, _ = asyncio.run(lagged(server, shape(SMALL_CHARS)))
                    large_lag, large_time, done = asyncio.run(lagged(server, shape(size.lag_chars)))
                    lags[name].add(large_lag, small_lag)
                    times[name].add(large_time, small_time)
                    print(
                        f"  run {r + 1} {name}: slowest /health {large_lag:.0f} ms "
                        f"(small {small_lag:.0f} ms), answer {large_time:.0f} ms "
                        f"(small {small_time:.0f} ms){'' if done else ', gave up'}"
                    )
                    if not done:
                        break  # this server may still be busy with it
    return [*lags.values(), *times.values()]


def run(size: Size) -> list[Figure]:
    return [*run_shedding(size), *run_lag(size)]

"""Benchmark 10: a soak over two instances on PostgreSQL and Redis (issue 23).

``size.soak_conversations`` conversations, each a new chat, a few at a time (``CONCURRENCY``),
alternating between two instances of one deployment (benchmark 7's ``cluster``: a fresh
database and key prefix, resumable streams on). The kinds take turns:

- **text**: "hello";
- **tool**: a weather question (the demo's ``get_weather``);
- **approval**: a payment, approved or denied (alternately) on the *other* instance;
- **resume**: a paced answer on one instance, ``GET /stream/{chatId}/stream`` on the other once
  its text flows, both read to the end;
- **stop**: a paced answer on one instance, ``DELETE /stream/{chatId}/stream`` on the other
  once its text flows; the original response must then end.

The first tenth of the conversations is the warm-up. After it, and again after the rest, the
servers are left idle until every ended response's chunk log has expired (the soak sets its TTL
to ``LOG_TTL`` seconds) and then sampled: each instance's resident memory (``VmRSS``), open
file descriptors and connections to Redis, the Redis keys under the run's prefix, and the
PostgreSQL connections to the run's database. Each figure compares the end with that baseline,
on the same processes: memory may grow less than 10 %, the others must be back to it. The
Redis connections are counted apart: redis-py's pools keep every connection they opened for
the next burst (they close none when idle), so their number follows the highest load at once,
bounded by ``REDIS_CONNECTIONS_LIMIT``, not the number of conversations. One run (a soak is
one long run).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from bench.agent import long_prompt
from bench.approvals import PAYMENT, _result
from bench.clients import (
    Answer,
    ask,
    bounded,
    chat_body,
    client,
    new_chat,
    stream_post,
    user_message,
)
from bench.core import Figure, Size
from bench.scaleout import DEFAULT_POSTGRES, cluster, fresh_database
from bench.servers import Server, serve
from tests.support.rig import answer_approvals, assistant_message

CONCURRENCY = 12
WARM_UP = 0.1  # share of the conversations
LOG_TTL = 3.0  # seconds an ended response's chunk log stays in Redis (default 60)
SETTLE_LIMIT = 15.0  # seconds at most to wait, after the TTL, for the end to reach the baseline
KINDS = ("text", "tool", "approval", "resume", "stop")
TEXT = b'"type":"text-delta"'
DONE = b"data: [DONE]"
RESUME_PROMPT = long_prompt(60, 10, 0.03)  # about 0.2 s of paced answer
STOP_PROMPT = long_prompt(1000, 10, 0.05)  # 5 s: the stop comes long before its end
# redis-py's pools keep the connections they opened, for the next burst; a conversation holds
# at most two at once (a command, and a resumer's blocking read), plus the process's
# subscriptions.
REDIS_CONNECTIONS_LIMIT = 2 * CONCURRENCY + 4
STOP_BOUND = 2.5  # seconds from the DELETE to the end of the stopped response, at most


@dataclass(frozen=True)
class Sample:
    rss_kib: tuple[int, int]  # instance A, B
    fds: tuple[int, int]  # open file descriptors, but for connections to Redis
    redis_connections: tuple[int, int]  # pooled: their number follows the load, not the run
    redis_keys: int  # under the run's prefix, but those kept on purpose
    redis_keys_kept_forever: int  # with no expiry
    pg_connections: int


# -- the conversations --------------------------------------------------------------------------


async def _read_to_end(chunks: AsyncIterator[bytes], seen: bytes = b"") -> bool:
    """Read a streamed response to its end; whether it ended with ``[DONE]``."""
    carry = seen[-64:]
    ended = DONE in seen
    async for chunk in chunks:
        window = carry + chunk
        ended = ended or DONE in window
        carry = window[-64:]
    return ended


async def _until_text(chunks: AsyncIterator[bytes]) -> bytes:
    """Read until the first text; what was read."""
    seen = b""
    async for chunk in chunks:
        seen += chunk
        if TEXT in seen:
            break
    return seen


async def _approval(http: httpx.AsyncClient, a: Server, b: Server, approve: bool) -> Answer:
    chat, user = new_chat(), user_message(PAYMENT)
    asked = await http.post(f"{a.base_url}/stream", json=chat_body(chat, user))
    if asked.status_code != 200:
        return Answer(float("inf"), float("inf"), False)
    answered = answer_approvals(assistant_message(_result(asked.text)), approve)
    return await stream_post(http, b, "/stream", chat_body(chat, user, answered), TEXT)


async def _resume(http: httpx.AsyncClient, a: Server, b: Server) -> Answer:
    start = time.perf_counter()
    chat = new_chat()
    body = chat_body(chat, user_message(RESUME_PROMPT))
    async with http.stream("POST", f"{a.base_url}/stream", json=body) as original:
        chunks = original.aiter_raw()
        seen = await _until_text(chunks)
        async with http.stream("GET", f"{b.base_url}/stream/{chat}/stream") as resumed:
            # 204: the answer ended before the GET arrived (nothing to resume).
            resumed_ok = resumed.status_code == 204 or (
                resumed.status_code == 200 and await _read_to_end(resumed.aiter_raw())
            )
        ended = await _read_to_end(chunks, seen)
    if not (resumed_ok and ended):
        print(f"  resume {chat}: resumed {resumed_ok}, original ended {ended}")
    return Answer(0.0, time.perf_counter() - start, resumed_ok and ended)


async def _stop(http: httpx.AsyncClient, a: Server, b: Server) -> Answer:
    """``total`` is from the DELETE to the end of the stopped response."""
    chat = new_chat()
    body = chat_body(chat, user_message(STOP_PROMPT))
    async with http.stream("POST", f"{a.base_url}/stream", json=body) as original:
        chunks = original.aiter_raw()
        await _until_text(chunks)
        start = time.perf_counter()
        stopped = await http.delete(f"{b.base_url}/stream/{chat}/stream")
        await asyncio.wait_for(_read_to_end(chunks), 30)
    total = time.perf_counter() - start
    # The answer had 5 s left to run: ending within half of it is the stop's doing.
    ok = stopped.status_code == 204 and total < STOP_BOUND
    if not ok:
        print(f"  stop {chat}: DELETE {stopped.status_code}, response ended after {total:.2f} s")
    return Answer(0.0, total, ok)


def conversation(
    http: httpx.AsyncClient, servers: tuple[Server, Server]
) -> Callable[[int], Awaitable[Answer]]:
    def work(i: int) -> Awaitable[Answer]:
        a, b = servers[i % 2], servers[(i + 1) % 2]
        kind = KINDS[(i // 2) % len(KINDS)]  # every kind starts on both instances
        if kind == "text":
            return ask(http, a, "hello")
        if kind == "tool":
            return ask(http, a, "What's the weather in Tokyo?")
        if kind == "approval":
            return _approval(http, a, b, approve=(i // 10) % 2 == 0)
        if kind == "resume":
            return _resume(http, a, b)
        return _stop(http, a, b)

    return work


# -- sampling -----------------------------------------------------------------------------------


def _fds(server: Server, redis_port: int) -> tuple[int, int]:
    """The process's open file descriptors: those that are not connections to Redis, and
    those that are (TCP sockets whose peer is Redis' port)."""
    to_redis = _sockets_to_port(server.pid, redis_port)
    fds, redis = 0, 0
    for fd in os.listdir(f"/proc/{server.pid}/fd"):
        try:
            target = os.readlink(f"/proc/{server.pid}/fd/{fd}")
        except FileNotFoundError:
            continue  # closed meanwhile
        if target.startswith("socket:[") and target[8:-1] in to_redis:
            redis += 1
        else:
            fds += 1
    return fds, redis


def _sockets_to_port(pid: int, port: int) -> set[str]:
    """The inodes of the TCP sockets, seen from ``pid``, whose remote port is ``port``."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}", encoding="ascii") as lines:
            next(lines)  # the header
            for line in lines:
                fields = line.split()
                if int(fields[2].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    return inodes


# Kept on purpose past the chunk logs' TTL, each with its own expiry, so not back to the
# baseline at the end: per chat, the lease's generation and the last one released cleanly (a
# week: the fence of docs/adr/0034 needs them), and a stop's id (a minute, for a subscriber
# that reconnects).
KEPT_ON_PURPOSE = (b":gen", b":clean", b":stop")


async def _redis_keys(url: str, prefix: str) -> tuple[int, int]:
    """Under the run's prefix: the keys but those kept on purpose, and the keys with no
    expiry at all (a key nothing would ever remove)."""
    from redis.asyncio import Redis

    redis = Redis.from_url(url)
    try:
        keys = [key async for key in redis.scan_iter(match=f"{prefix}*", count=1000)]
        async with redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.ttl(key)
            ttls = await pipe.execute()
        others = sum(1 for key in keys if not key.endswith(KEPT_ON_PURPOSE))
        return others, sum(1 for ttl in ttls if ttl == -1)
    finally:
        await redis.aclose()


async def _pg_connections(database: str) -> int:
    import asyncpg  # type: ignore[import-untyped]

    admin = os.environ.get("ADK_STREAM_TEST_POSTGRES", DEFAULT_POSTGRES)
    connection = await asyncpg.connect(admin)
    try:
        name = urlsplit(database).path.lstrip("/")
        count: int = await connection.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", name
        )
        return count
    finally:
        await connection.close()


async def sample(servers: tuple[Server, Server], env: dict[str, str]) -> Sample:
    a, b = servers
    redis_port = urlsplit(env["ADK_STREAM_REDIS_URL"]).port or 6379
    (a_fds, a_redis), (b_fds, b_redis) = _fds(a, redis_port), _fds(b, redis_port)
    keys, kept_forever = await _redis_keys(
        env["ADK_STREAM_REDIS_URL"], env["ADK_STREAM_REDIS_KEY_PREFIX"]
    )
    return Sample(
        rss_kib=(a.rss_kib(), b.rss_kib()),
        fds=(a_fds, b_fds),
        redis_connections=(a_redis, b_redis),
        redis_keys=keys,
        redis_keys_kept_forever=kept_forever,
        pg_connections=await _pg_connections(env["ADK_STREAM_SESSION_STORE"]),
    )


async def settled(
    servers: tuple[Server, Server], env: dict[str, str], baseline: Sample | None = None
) -> tuple[Sample, float]:
    """Wait out the chunk logs' TTL, then sample; with a ``baseline``, keep sampling (at most
    ``SETTLE_LIMIT`` s) until fds, keys and connections are back to it. Returns the sample and
    the seconds waited after the TTL."""
    await asyncio.sleep(LOG_TTL + 1)
    start = time.perf_counter()
    while True:
        now = await sample(servers, env)
        back = baseline is None or (
            all(e <= s for e, s in zip(now.fds, baseline.fds, strict=True))
            and now.redis_keys <= baseline.redis_keys
            and now.pg_connections <= baseline.pg_connections
        )
        waited = time.perf_counter() - start
        if back or waited > SETTLE_LIMIT:
            return now, waited
        await asyncio.sleep(0.5)


WATCH = 2.0  # seconds between RSS samples during the run


async def _watch_rss(servers: tuple[Server, Server], traces: list[list[int]]) -> None:
    while True:
        for server, trace in zip(servers, traces, strict=True):
            trace.append(round(server.rss_kib() / 1024))
        await asyncio.sleep(WATCH)


# -- the run ------------------------------------------------------------------------------------


@dataclass
class Soak:
    baseline: Sample
    end: Sample
    peak_rss_kib: tuple[float, float]  # the highest RSS seen during the run, per instance
    warm_up: tuple[int, int, float]  # conversations, failed, seconds
    main: tuple[int, int, float]
    settle_seconds: float


async def _soak(size: Size, servers: tuple[Server, Server], env: dict[str, str]) -> Soak:
    total = size.soak_conversations
    # At least two rounds at full concurrency: the connection pools reach their size.
    warm = max(round(total * WARM_UP), min(total // 2, 2 * CONCURRENCY))
    # A client per phase, closed before sampling: its idle connections are no server's fds.
    async with client() as http:
        answers, warm_seconds = await bounded(warm, CONCURRENCY, conversation(http, servers))
        warm_failed = sum(not a.ok for a in answers)
    baseline, _ = await settled(servers, env)
    print(f"  baseline after {warm} conversations ({warm_seconds:.1f} s): {baseline}")
    async with client() as http:
        work = conversation(http, servers)

        tenth = max(1, (total - warm) // 10)

        def rest(i: int) -> Awaitable[Answer]:
            if i % tenth == 0 and i:
                print(f"  {i} of {total - warm} started, {time.perf_counter() - begun:.0f} s")
            return work(warm + i)

        begun = time.perf_counter()

        peaks: list[list[int]] = [[], []]  # MiB, per instance
        watch = asyncio.create_task(_watch_rss(servers, peaks))
        try:
            answers, seconds = await bounded(total - warm, CONCURRENCY, rest)
        finally:
            watch.cancel()
        failed = sum(not a.ok for a in answers)
    for name, trace in zip("AB", peaks, strict=True):
        step = max(1, len(trace) // 10)
        print(f"  RSS of {name} during the run (MiB, every {WATCH * step:g} s): {trace[::step]}")
    end, waited = await settled(servers, env, baseline)
    print(
        f"  end after {total - warm} more ({seconds:.1f} s, {failed} failed, "
        f"settled {waited:.1f} s after the TTL): {end}"
    )
    peak = (max(peaks[0], default=0) * 1024.0, max(peaks[1], default=0) * 1024.0)
    return Soak(
        baseline,
        end,
        peak,
        (warm, warm_failed, warm_seconds),
        (total - warm, failed, seconds),
        waited,
    )


def run(size: Size) -> list[Figure]:
    bench = "10 soak"
    base = "baseline: the same after warm-up"
    total = size.soak_conversations
    note = (
        f"{total:,} conversations (text, tool, approval, resume, stop), {CONCURRENCY} at once, "
        f"two instances, PostgreSQL + Redis; one run"
    )
    with ExitStack() as stack:
        env = {
            **cluster(stack.enter_context(fresh_database())),
            "ADK_STREAM_CHUNK_LOG_TTL_SECONDS": str(LOG_TTL),
        }
        a = stack.enter_context(serve("ours", env))
        b = stack.enter_context(serve("ours", env))
        soak = asyncio.run(_soak(size, (a, b), env))

    figures: list[Figure] = []
    rate = Figure(bench, "conversations per second", "1/s", "higher", "warm-up", note=note)
    rate.add(soak.main[0] / soak.main[2], soak.warm_up[0] / soak.warm_up[2])
    errors = Figure(bench, "failed conversations", "", "lower", "warm-up", limit=0)
    errors.add(soak.main[1], soak.warm_up[1])
    figures += [rate, errors]
    for i, name in enumerate("AB"):
        rss = Figure(bench, f"instance {name}: RSS after the run", "MiB", "lower", base, goal=1.10)
        rss.add(soak.end.rss_kib[i] / 1024, soak.baseline.rss_kib[i] / 1024)
        fds = Figure(
            bench,
            f"instance {name}: open file descriptors, but for Redis connections",
            "",
            "lower",
            base,
            margin=0,
        )
        fds.add(soak.end.fds[i], soak.baseline.fds[i])
        redis = Figure(
            bench,
            f"instance {name}: connections to Redis",
            "",
            "lower",
            base,
            limit=REDIS_CONNECTIONS_LIMIT,
            note="pooled and kept: bounded by the load at once, not by the conversations",
        )
        redis.add(soak.end.redis_connections[i], soak.baseline.redis_connections[i])
        peak = Figure(bench, f"instance {name}: highest RSS during the run", "MiB", "lower", base)
        peak.add(soak.peak_rss_kib[i] / 1024, soak.baseline.rss_kib[i] / 1024)
        figures += [rss, peak, fds, redis]
    keys = Figure(
        bench,
        "Redis keys under the run's prefix, but those kept on purpose",
        "",
        "lower",
        base,
        margin=0,
        note=f"after the chunk logs' TTL ({LOG_TTL:g} s); fence records and stop ids expire "
        "on their own",
    )
    keys.add(soak.end.redis_keys, soak.baseline.redis_keys)
    forever = Figure(bench, "Redis keys with no expiry", "", "lower", base, limit=0)
    forever.add(soak.end.redis_keys_kept_forever, soak.baseline.redis_keys_kept_forever)
    connections = Figure(
        bench, "PostgreSQL connections to the run's database", "", "lower", base, margin=0
    )
    connections.add(soak.end.pg_connections, soak.baseline.pg_connections)
    return [*figures, keys, forever, connections]

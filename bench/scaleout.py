"""Benchmark 7: several processes as one server, on PostgreSQL and Redis (docs/deployment.md).

- **Workers**: N unpaced ``/stream`` requests at once (new chats), on ``uvicorn --workers 2``
  and on one worker, both with the same settings (PostgreSQL sessions, Redis coordination, the
  response cap off as in benchmark 3), fresh servers every run in alternating order. The
  figures are served answers per second over the load, p50/p99 time to first text, errors,
  and the CPU the load generator itself used: it shares the two cores with the servers,
  PostgreSQL and Redis, so a ratio short of 2 can be told apart from the generator's cost.
  The load is sent with benchmark 6's lean client (``raw_post``).
- **Store**: a short turn (a new chat, "hello") on PostgreSQL, compared with SQLite.
- **Resume**: two instances; a paced answer runs on A, and ``GET /stream/{chatId}/stream`` on
  B gets its first replayed event after this long. Compared with the same request on A.
- **Approval elsewhere**: a payment waits for approval on A; the approval goes to B, timed to
  the tool's result. Compared with the approval sent to A.

PostgreSQL and Redis are the test suite's (``ADK_STREAM_TEST_POSTGRES``,
``ADK_STREAM_TEST_REDIS``, defaulting to this machine's); every run uses a fresh database
and key prefix, dropped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from bench.agent import long_prompt
from bench.approvals import OUR_RESULT, PAYMENT, _result
from bench.clients import ask, chat_body, client, new_chat, stream_post, user_message
from bench.core import Figure, Size, percentile
from bench.hardening import Reply, raw_post, raw_request, request_body
from bench.servers import Server, serve
from tests.support.rig import answer_approvals, assistant_message

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
NO_CAP = {"ADK_STREAM_MAX_CONCURRENT_RESPONSES": "0"}
RESUME_WORDS, RESUME_PACE = 200, 0.02  # an answer that runs about 0.4 s


# -- the services -------------------------------------------------------------------------------


async def _admin(admin: str, statement: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    connection = await asyncpg.connect(admin)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new PostgreSQL database (``postgresql+asyncpg://``), dropped at the end."""
    admin = os.environ.get("ADK_STREAM_TEST_POSTGRES", DEFAULT_POSTGRES)
    name = f"adk_stream_bench_{uuid.uuid4().hex[:12]}"
    try:
        asyncio.run(_admin(admin, f'CREATE DATABASE "{name}"'))
    except Exception as exc:
        raise RuntimeError(
            f"benchmark 7 needs PostgreSQL at {urlsplit(admin).netloc}: {exc}"
        ) from exc
    parts = urlsplit(admin)
    try:
        yield urlunsplit(("postgresql+asyncpg", parts.netloc, f"/{name}", "", ""))
    finally:
        asyncio.run(_admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def cluster(database: str) -> dict[str, str]:
    """Settings every instance of one deployment shares, with a key prefix of its own."""
    return {
        "ADK_STREAM_SESSION_STORE": database,
        "ADK_STREAM_REDIS_URL": os.environ.get("ADK_STREAM_TEST_REDIS", DEFAULT_REDIS),
        "ADK_STREAM_REDIS_KEY_PREFIX": f"adk-stream-bench-{uuid.uuid4().hex[:12]}",
        "ADK_STREAM_RESUMABLE_STREAMS": "true",
        **NO_CAP,
    }


# -- 1 worker vs 2 ------------------------------------------------------------------------------


def _processes() -> Iterator[tuple[int, str, int, float]]:
    """(pid, command name, parent pid, CPU seconds so far) of every process."""
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        head, _, rest = text.rpartition(")")
        fields = rest.split()
        pid, comm = int(head.split(" (", 1)[0]), head.split(" (", 1)[1]
        yield pid, comm, int(fields[1]), (int(fields[11]) + int(fields[12])) / tick


Snapshot = dict[tuple[str, int], float]  # (role, pid) -> CPU seconds so far


def cpu_snapshot(server: Server) -> Snapshot:
    """CPU seconds so far of the server's processes (uvicorn and its workers), of PostgreSQL's
    and Redis's (the services), and of the whole machine (busy time over all cores)."""
    snapshot: Snapshot = {}
    for pid, comm, ppid, cpu in _processes():
        if server.pid in (pid, ppid):
            snapshot["server", pid] = cpu
        elif comm in ("postgres", "redis-server"):
            snapshot["services", pid] = cpu
    first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    idle = int(first[3]) + int(first[4])
    busy = sum(int(v) for v in first[:8]) - idle
    snapshot["machine", 0] = busy / os.sysconf("SC_CLK_TCK")
    return snapshot


def cpu_used(before: Snapshot, after: Snapshot) -> dict[str, float]:
    """CPU seconds by role between two snapshots. A process that started meanwhile counts
    from zero; one that ended is missed (a PostgreSQL backend closed during the load)."""
    used = {"server": 0.0, "services": 0.0, "machine": 0.0}
    for (role, pid), cpu in after.items():
        used[role] += cpu - before.get((role, pid), 0.0)
    return used


class Load:
    def __init__(
        self, replies: list[Reply], seconds: float, client_cpu: float, cpu: dict[str, float]
    ) -> None:
        self.replies = replies
        self.seconds = seconds
        self.client_cpu = client_cpu  # seconds of CPU this process used sending and reading
        self.cpu = cpu  # seconds of CPU by role during the load (``cpu_used``)

    def share(self, role: str) -> float:
        """CPU of a role over the load, in percent of one core."""
        return 100 * self.cpu[role] / self.seconds

    def served(self) -> list[Reply]:
        return [r for r in self.replies if r.status == 200 and r.ok]

    def errors(self) -> int:
        return len(self.replies) - len(self.served())

    def per_second(self) -> float:
        return len(self.served()) / self.seconds

    def first_text_ms(self, q: float) -> float:
        served = [r.first_text for r in self.served()]
        return percentile(served, q) * 1000 if served else float("inf")


async def _load(size: Size, server: Server) -> Load:
    prompt = long_prompt(size.stream_words, 10)  # unpaced: what the servers can do
    async with client() as http:
        for _ in range(4):  # warm-up, on every worker with luck
            await ask(http, server, prompt)
    requests = [raw_request(server, request_body(prompt)) for _ in range(size.streams)]
    before = cpu_snapshot(server)
    cpu, start = time.process_time(), time.perf_counter()
    replies = await asyncio.gather(*(raw_post(server, r) for r in requests))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return Load(list(replies), seconds, cpu, cpu_used(before, cpu_snapshot(server)))


def run_workers(size: Size) -> list[Figure]:
    bench, cmp = "7 scale-out: 2 workers", "1 worker"
    note = f"{size.streams} unpaced /stream at once, PostgreSQL + Redis"
    rate = Figure(
        bench,
        "served answers per second",
        "1/s",
        "higher",
        cmp,
        goal=1.8,
        note=note,
        why="the 2 cores are busy (see the CPU rows): the workers get 1.65x one worker's CPU",
    )
    p50 = Figure(bench, "time to first text p50", "ms", "lower", cmp)
    p99 = Figure(bench, "time to first text p99", "ms", "lower", cmp)
    errors = Figure(bench, "errors", "", "lower", cmp, limit=0)
    generator = Figure(bench, "load generator CPU, share of one core", "%", "lower", cmp)
    servers = Figure(bench, "server processes' CPU, share of one core", "%", "higher", cmp)
    services = Figure(bench, "PostgreSQL + Redis CPU, share of one core", "%", "lower", cmp)
    machine = Figure(bench, "whole machine busy, of 200% (2 cores)", "%", "higher", cmp)
    for r in range(size.load_runs):
        loads: dict[int, Load] = {}
        for workers in (2, 1) if r % 2 == 0 else (1, 2):
            with fresh_database() as database, serve("ours", cluster(database), workers) as server:
                loads[workers] = asyncio.run(_load(size, server))
        two, one = loads[2], loads[1]
        rate.add(two.per_second(), one.per_second())
        p50.add(two.first_text_ms(50), one.first_text_ms(50))
        p99.add(two.first_text_ms(99), one.first_text_ms(99))
        errors.add(two.errors(), one.errors())
        generator.add(100 * two.client_cpu / two.seconds, 100 * one.client_cpu / one.seconds)
        servers.add(two.share("server"), one.share("server"))
        services.add(two.share("services"), one.share("services"))
        machine.add(two.share("machine"), one.share("machine"))
        print(
            f"  run {r + 1}: "
            + ", ".join(
                f"{w} worker(s): {v.per_second():.0f}/s p50 {v.first_text_ms(50):.0f} ms "
                f"p99 {v.first_text_ms(99):.0f} ms, errors {v.errors()}, "
                f"client CPU {v.client_cpu:.1f} s of {v.seconds:.1f} s, "
                f"server {v.share('server'):.0f}%, services {v.share('services'):.0f}%, "
                f"machine {v.share('machine'):.0f}%"
                for w, v in loads.items()
            )
        )
    return [rate, p50, p99, errors, generator, servers, services, machine]


# -- PostgreSQL vs SQLite -----------------------------------------------------------------------


async def _turns(size: Size, server: Server) -> float:
    async with client() as http:
        await ask(http, server, "hello")  # warm-up
        times = []
        for _ in range(size.latency_requests):
            answer = await ask(http, server, "hello")
            assert answer.ok, "a short turn failed"
            times.append(answer.total)
    return statistics.median(times) * 1000


def run_store(size: Size) -> list[Figure]:
    turn = Figure(
        "7 scale-out: store",
        "a short turn, new chat (median)",
        "ms",
        "lower",
        "SQLite (the default)",
        note="one worker, in-process coordination",
    )
    with ExitStack() as stack:
        database = stack.enter_context(fresh_database())
        postgres = stack.enter_context(serve("ours", {"ADK_STREAM_SESSION_STORE": database}))
        sqlite_path = stack.enter_context(_sqlite_file())
        sqlite = stack.enter_context(serve("ours", {"ADK_STREAM_SESSION_STORE": sqlite_path}))
        for _ in range(size.runs):
            turn.add(asyncio.run(_turns(size, postgres)), asyncio.run(_turns(size, sqlite)))
    return [turn]


@contextmanager
def _sqlite_file() -> Iterator[str]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-sqlite-") as tmp:
        yield f"sqlite:///{tmp}/sessions.db"


# -- across two instances -----------------------------------------------------------------------


async def _resume_ms(http: httpx.AsyncClient, producer: Server, resumer: Server) -> float:
    """Start a paced answer on ``producer``; once its text flows, the time ``resumer`` takes
    to send the first replayed event."""
    chat = new_chat()
    body = chat_body(chat, user_message(long_prompt(RESUME_WORDS, 10, RESUME_PACE)))
    async with http.stream("POST", f"{producer.base_url}/stream", json=body) as original:
        async for chunk in original.aiter_raw():
            if b'"type":"text-delta"' in chunk:
                break
        start = time.perf_counter()
        async with http.stream("GET", f"{resumer.base_url}/stream/{chat}/stream") as resumed:
            assert resumed.status_code == 200, resumed.status_code
            async for chunk in resumed.aiter_raw():
                if b"data: " in chunk:
                    return (time.perf_counter() - start) * 1000
    raise RuntimeError("the resumed stream sent nothing")


async def _approval_ms(http: httpx.AsyncClient, asked_on: Server, approved_on: Server) -> float:
    chat, user = new_chat(), user_message(PAYMENT)
    asked = await http.post(f"{asked_on.base_url}/stream", json=chat_body(chat, user))
    approved = answer_approvals(assistant_message(_result(asked.text)), True)
    answer = await stream_post(
        http, approved_on, "/stream", chat_body(chat, user, approved), OUR_RESULT
    )
    assert answer.ok, "the approval failed"
    return answer.first_text * 1000


async def _across(size: Size, a: Server, b: Server) -> tuple[float, float, float, float]:
    async with client() as http:
        await _resume_ms(http, a, b)  # warm-up
        await _approval_ms(http, a, b)
        samples = max(3, size.approvals)
        other = [await _resume_ms(http, a, b) for _ in range(samples)]
        same = [await _resume_ms(http, a, a) for _ in range(samples)]
        approved_other = [await _approval_ms(http, a, b) for _ in range(samples)]
        approved_same = [await _approval_ms(http, a, a) for _ in range(samples)]
    return (
        statistics.median(other),
        statistics.median(same),
        statistics.median(approved_other),
        statistics.median(approved_same),
    )


def run_across(size: Size) -> list[Figure]:
    bench = "7 scale-out: two instances"
    resume = Figure(
        bench,
        "resume: GET to the first replayed event (median)",
        "ms",
        "lower",
        "the same GET on the producing instance",
        limit=50,
        note="PostgreSQL + Redis",
    )
    approval = Figure(
        bench,
        "approval sent to the other instance, to the tool's result (median)",
        "ms",
        "lower",
        "sent to the instance that asked",
    )
    with ExitStack() as stack:
        env = cluster(stack.enter_context(fresh_database()))
        a = stack.enter_context(serve("ours", env))
        b = stack.enter_context(serve("ours", env))
        for _ in range(size.runs):
            other, same, approved_other, approved_same = asyncio.run(_across(size, a, b))
            resume.add(other, same)
            approval.add(approved_other, approved_same)
    return [resume, approval]


def run(size: Size) -> list[Figure]:
    return [*run_workers(size), *run_store(size), *run_across(size)]

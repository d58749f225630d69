"""Run the real AI SDK chat client (scenarios/chat-client.mjs) from Python tests.

The Node script drives `AbstractChat` from the real `ai` package (6.0.25, the newest 6.x, or
7.x) against a running server and reports the wire traffic and the final chat state: over
POST /stream with the package's `DefaultChatTransport`, over WS /live with our transport
(client/) or, for ai 7, with ai 7's own `WebSocketChatTransport`. The packages are installed
by the test command (`npm ci` in scenarios/); a missing install is an error, not a skip.

One Node process (`chat-client.mjs --serve`) runs every job of the test run, each
as it is submitted, several at once when they are submitted together: starting
Node and importing `ai` costs more CPU than a whole chat does.
"""

from __future__ import annotations

import atexit
import itertools
import json
import shutil
import subprocess
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

from tests.support.rig import LiveServer

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "scenarios"
CHAT_CLIENT = SCENARIOS_DIR / "chat-client.mjs"
REQUIRED_PACKAGES = ("ai", "ai-6.0.25", "ai-7", "ws")
# The clients, by the names chat-client.mjs knows them by: ai 6.0.25 (the strict schema of
# 6.0.25-6.0.230), the newest 6.x and the newest 7.x (scenarios/package.json pins each).
V6_CLIENTS = ["6.0.25", "6"]
V7 = "7"
CLIENTS = [*V6_CLIENTS, V7]
# The WebSocket transports on /live: ours (client/, our envelope; any client) and ai 7's own.
OURS, STOCK = "ours", "stock"
# The client schemas a response must satisfy: a 6.x client's own and the strict 6.0.25 one (the
# server sends only what every 6.x accepts); a 7 client's own. Every report also says what the
# others make of each chunk (`violations`), which shows the chunks only ai 7 accepts.
MUST_VALIDATE = {"6.0.25": ("6.0.25", "6"), "6": ("6.0.25", "6"), V7: (V7,)}


def _check_installed() -> str:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not on PATH; the real-client checks need Node 20+")
    missing = [
        name
        for name in REQUIRED_PACKAGES
        if not (SCENARIOS_DIR / "node_modules" / name / "package.json").is_file()
    ]
    if missing:
        raise RuntimeError(
            f"scenarios/node_modules is missing {', '.join(missing)}; "
            f"run `npm ci` in {SCENARIOS_DIR}"
        )
    return node


class ChatClientWorker:
    """``node chat-client.mjs --serve``: jobs in on stdin, reports out on stdout, by id."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [_check_installed(), str(CHAT_CLIENT), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=SCENARIOS_DIR,
        )
        self._ids = itertools.count()
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._stderr: list[str] = []
        assert self._process.stdout is not None and self._process.stderr is not None
        threading.Thread(target=self._read, args=(self._process.stdout,), daemon=True).start()
        threading.Thread(
            target=self._stderr.extend, args=(self._process.stderr,), daemon=True
        ).start()

    def alive(self) -> bool:
        return self._process.poll() is None

    def submit(self, job: dict[str, Any]) -> Future[dict[str, Any]]:
        future: Future[dict[str, Any]] = Future()
        with self._lock:
            job_id = next(self._ids)
            self._pending[job_id] = future
            assert self._process.stdin is not None
            self._process.stdin.write(json.dumps({"id": job_id, "job": job}) + "\n")
            self._process.stdin.flush()
        return future

    def stderr(self) -> str:
        return "".join(self._stderr[-200:])

    def close(self) -> None:
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            answer = json.loads(line)
            with self._lock:
                future = self._pending.pop(answer["id"])
            if "error" in answer:
                future.set_exception(RuntimeError(f"chat-client.mjs failed:\n{answer['error']}"))
            else:
                future.set_result(answer["report"])
        # The process has ended: nothing more will answer.
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for future in pending:
            future.set_exception(
                RuntimeError(f"chat-client.mjs --serve exited\nstderr:\n{self.stderr()}")
            )


_worker: ChatClientWorker | None = None
_worker_lock = threading.Lock()


def worker() -> ChatClientWorker:
    """The run's Node process, started on first use (and again if it has died)."""
    global _worker
    with _worker_lock:
        if _worker is None or not _worker.alive():
            _worker = ChatClientWorker()
            atexit.register(_worker.close)
        return _worker


def run_real_client(job: dict[str, Any], *, timeout: float = 90.0) -> dict[str, Any]:
    """Run one job through scenarios/chat-client.mjs and return its report."""
    return run_real_clients([job], timeout=timeout)[0]


def run_real_clients(
    jobs: Sequence[dict[str, Any]], *, timeout: float = 90.0
) -> list[dict[str, Any]]:
    """Run jobs concurrently through scenarios/chat-client.mjs; their reports, in order."""
    node = worker()
    futures = [node.submit(job) for job in jobs]
    return [_report(node, future, timeout) for future in futures]


def _report(node: ChatClientWorker, future: Future[dict[str, Any]], timeout: float) -> Any:
    try:
        report = future.result(timeout)
    except TimeoutError:
        raise RuntimeError(
            f"chat-client.mjs did not finish within {timeout} s\nstderr:\n{node.stderr()}"
        ) from None
    # A rejection nobody handled would have ended a process of its own with an error.
    assert report["unhandledRejections"] == [], report["unhandledRejections"]
    return report


def chunk_types(request_report: dict[str, Any]) -> list[str]:
    """Return the `type` of every chunk of one request report, in order."""
    return [
        str(chunk.get("type")) if isinstance(chunk, dict) else repr(chunk)
        for chunk in request_report["chunks"]
    ]


def rejected_chunk_types(report: dict[str, Any], schema: str) -> list[str]:
    """The types of the chunks, over every response of a report, that the client ``schema``
    names ("6.0.25", "6" or "7") rejects: on an ai 7 run, with a 6.x schema, the chunks only
    ai 7 is sent."""
    return [
        violation["chunk"]["type"]
        for request in report["requests"]
        for violation in request["violations"][schema]
    ]


# -- what tests assert on a report ------------------------------------------------------------


def drive(
    server: LiveServer,
    client: str,
    steps: list[dict[str, Any]],
    *,
    live: bool = False,
    ws: str | None = None,
    refusals: int = 0,
    **options: Any,
) -> dict[str, Any]:
    """Run one job through the real client: over POST /stream, or with ``live`` over WS /live
    (see ``client_job`` for the transport). Every response must be well formed, and exactly
    ``refusals`` requests refused (``refused``)."""
    job = client_job(server, client, steps, live=live, ws=ws, **options)
    return checked(job, run_real_client(job), refusals=refusals)


def job_transport(client: str, *, live: bool, ws: str | None = None) -> str:
    """chat-client.mjs's ``transport`` for a client: "http" (POST /stream), or on /live "ws"
    (our transport) or "ws-stock" (ai 7's). ``ws`` picks the WebSocket transport: by default
    ai 7's own for client "7", ours for 6.x (which has none of its own)."""
    if not live:
        assert ws is None, "ws= chooses a WebSocket transport: it needs live=True"
        return "http"
    ws = ws or (STOCK if client == V7 else OURS)
    if ws == STOCK:
        assert client == V7, f"the stock WebSocketChatTransport is ai 7's, not {client}'s"
        return "ws-stock"
    assert ws == OURS, ws
    return "ws"


def client_job(
    server: LiveServer,
    client: str,
    steps: list[dict[str, Any]],
    *,
    live: bool = False,
    ws: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The chat-client.mjs job ``drive`` runs: POST /stream with the client's
    DefaultChatTransport, or with ``live`` WS /live, through ai 7's stock
    WebSocketChatTransport for client "7" (at ``/live``, no query string) and through ours
    (client/) for 6.x or with ``ws="ours"``."""
    transport = job_transport(client, live=live, ws=ws)
    api = (
        server.base_url.replace("http://", "ws://") + "/live"
        if live
        else f"{server.base_url}/stream"
    )
    return {
        "api": api,
        "transport": transport,
        "client": client,
        "chatId": f"rc-{uuid.uuid4().hex[:12]}",
        "steps": steps,
        **options,
    }


def refused(transport: str, request: dict[str, Any]) -> bool:
    """Whether the server refused one request of a report (an answer that does not fit what
    it answers, say) and ran nothing: a 4xx on POST /stream, an ``error`` and no chunk on
    ai 7's socket, an ``error`` chunk alone (or an error control frame) on ours."""
    if transport == "http":
        return bool(400 <= request["status"] < 500 and request["chunks"] == [])
    if transport == "ws-stock":
        return bool(request["ended"] == "error" and request["chunks"] == [])
    return bool(request["refused"]) or chunk_types(request) == ["error"]


def checked(job: dict[str, Any], report: dict[str, Any], *, refusals: int = 0) -> dict[str, Any]:
    """The report of ``job``, once every response in it is found well formed: framed as its
    transport requires, and valid for the job's client (``MUST_VALIDATE``); of its requests,
    exactly ``refusals`` refused (``refused``), as the job expects."""
    transport = job["transport"]
    assert not report["timeout"], report
    assert not report["loop"], "the client kept resubmitting"
    if transport == "ws-stock":
        assert report["ws"]["strayFrames"] == [], report["ws"]["strayFrames"]
    # Only a job that expects refusals looks for them: elsewhere each request is checked whole.
    requests = report["requests"]
    refused_at = {i for i, r in enumerate(requests) if refusals and refused(transport, r)}
    assert len(refused_at) == refusals, (refusals, requests)
    for index, request in enumerate(requests):
        if index in refused_at:
            pass  # no response to check: the request was answered with its refusal
        elif transport == "ws":
            assert not request["refused"], request
            assert request["frameProblems"] == [], request["frameProblems"]
            assert request["endsWithDone"] or request["stopped"], request
        elif transport == "ws-stock":
            assert request["frameProblems"] == [], request["frameProblems"]
            # `end` (or for a resume `no-active`); a request the client aborted may end
            # anyhow: the transport has stopped listening to it.
            assert request["ended"] in ("end", "no-active") or request["aborted"], request
        else:
            assert request["status"] == 200, request
            # A response the client stopped ends where the client cut the connection; one it
            # stopped too late to cut (all of it had arrived) still ends with [DONE].
            cut = request["stopped"] and request["bodyError"] is not None
            assert cut or (request["endsWithDone"] and request["endsWithBlankLine"]), request
        for schema in MUST_VALIDATE[job["client"]]:
            violations = request["violations"][schema]
            assert violations == [], f"chunks the {schema} schema rejects: {violations}"
    return report


class RunningJob:
    """A job started by ``start_jobs``."""

    def __init__(self, job: dict[str, Any], future: Future[dict[str, Any]], bound: float) -> None:
        self.job = job
        self._future = future
        self._bound = bound

    def report(self) -> dict[str, Any]:
        """Its report once it has ended, checked as ``drive`` checks it."""
        return checked(self.job, _report(worker(), self._future, self._bound))


def start_jobs(jobs: Sequence[dict[str, Any]], at_once: int) -> list[RunningJob]:
    """Start running jobs, ``at_once`` at a time, in the order given (a chat spends most of
    its time waiting for its next step, so several share the CPU well)."""
    node = worker()
    slots = threading.Semaphore(at_once)
    futures: list[Future[dict[str, Any]]] = [Future() for _ in jobs]

    def forward(outer: Future[dict[str, Any]]) -> Callable[[Future[dict[str, Any]]], None]:
        def done(inner: Future[dict[str, Any]]) -> None:
            slots.release()
            error = inner.exception()
            if error is not None:
                outer.set_exception(error)
            else:
                outer.set_result(inner.result())

        return done

    def feed() -> None:
        for job, outer in zip(jobs, futures, strict=True):
            slots.acquire()
            node.submit(job).add_done_callback(forward(outer))

    threading.Thread(target=feed, name="chat-client-feed", daemon=True).start()
    # Each job's own timeout (60 s) ends it; this bound covers the jobs queued before it.
    bound = 90.0 + 60.0 * len(jobs) / at_once
    return [RunningJob(job, future, bound) for job, future in zip(jobs, futures, strict=True)]


def assistant_messages(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in report["messages"] if m["role"] == "assistant"]


def text_of(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


def tool_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"].startswith("tool-")]


def ready(report: dict[str, Any]) -> dict[str, Any]:
    """The chat ended without error, with exactly one assistant message: return it."""
    assert report["status"] == "ready", report["error"]
    (assistant,) = assistant_messages(report)
    for part in assistant["parts"]:
        if part["type"] in ("text", "reasoning"):
            assert part["state"] == "done", part
    return assistant

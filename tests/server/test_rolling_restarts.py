"""Rolling restarts (docs/adr/0033): on SIGTERM an instance stops taking new work, lets its
open responses finish within ``ADK_STREAM_SHUTDOWN_GRACE_SECONDS``, and ends what is left with
an ``error`` chunk and ``[DONE]``, never a cut. Real uvicorn processes, signalled as
Kubernetes or systemd signal them; the last test restarts both instances of a PostgreSQL +
Redis deployment in turn under a steady load of payments that need approval.
"""

from __future__ import annotations

import itertools
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from adk_stream_protocol.turns.drain import REFUSAL_TEXT, RESTART_TEXT
from tests.support.agents.payments import LEDGER_ENV, TOOL_SECONDS
from tests.support.rig import (
    LiveServer,
    LiveSocket,
    SocketClosed,
    answer_approvals,
    assistant_message,
    chat_body,
    chunks_of,
    post_stream,
    run_server,
    stream_result,
    streaming,
    user_message,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.out_of_process  # uvicorn processes, stopped with SIGTERM

TOOLS = {
    "ADK_STREAM_AGENT": "tests.support.agents.tools:root_agent",
    "ADK_STREAM_KEEP_ALIVE_SECONDS": "0.5",
}
# The same tools, and on /live a model that answers at a pace a test can act within.
LIVE = {**TOOLS, "ADK_STREAM_AGENT": "tests.support.agents.tools:slow_live_agent"}
PAYMENTS = {"ADK_STREAM_AGENT": "tests.support.agents.payments:root_agent"}
UVICORN = ["--timeout-graceful-shutdown", "45"]


def new_chat(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def ledger(path: Path) -> Counter[str]:
    return Counter(path.read_text().split()) if path.exists() else Counter()


def wait_draining(server: LiveServer) -> None:
    """Until the server says it drains (another process: its /health is all there is)."""
    wait_until(lambda: server.http.get("/health").status_code == 503, "/health 503", within=5)


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[LiveServer]:
    env = {**TOOLS, "ADK_STREAM_SHUTDOWN_GRACE_SECONDS": "20"}
    with run_server(tmp_path, env, uvicorn_args=UVICORN) as server:
        yield server


def test_sigterm_lets_an_open_response_finish_and_sends_new_work_away(
    instance: LiveServer,
) -> None:
    process = instance.process
    assert process is not None
    with streaming(instance, chat_body(new_chat("drain"), user_message("slow 2", "u1"))) as reading:
        assert reading.first_event()["type"] == "start"
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        # A readiness probe fails, and new work goes elsewhere, while the response runs on.
        wait_draining(instance)
        health = instance.http.get("/health")
        assert health.json() == {"status": "draining"}
        new = chat_body(new_chat("new"), user_message("hi", "u1"))
        refused = instance.http.post("/stream", json=new)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1", refused.text
        resume = instance.http.get(f"/stream/{new_chat('other')}/stream")
        assert resume.status_code == 503 and resume.headers["retry-after"] == "1"
        rest = reading.rest()
    assert rest and rest[-1] == "[DONE]", f"the response was cut: {rest}"
    chunks = chunks_of(rest)
    assert [c["type"] for c in chunks if c["type"] in ("error", "finish")] == ["finish"], chunks
    (output,) = [c for c in chunks if c["type"] == "tool-output-available"]
    assert output["output"] == {"waited": 2.0}
    # Nothing was left: the process exits as soon as the response ended, not after the grace.
    process.wait(timeout=15)
    assert time.monotonic() - signalled < 10


def test_a_response_longer_than_the_grace_ends_with_an_error_and_its_tool_is_not_cut(
    tmp_path: Path,
) -> None:
    payments = tmp_path / "ledger"
    env = {**PAYMENTS, "ADK_STREAM_SHUTDOWN_GRACE_SECONDS": "0", LEDGER_ENV: str(payments)}
    with run_server(tmp_path, env, uvicorn_args=UVICORN) as server:
        process = server.process
        assert process is not None
        chat = new_chat("cut")
        ask = user_message("pay 5", "u1")
        paused = post_stream(server, chat_body(chat, ask))
        assert paused.of_type("tool-approval-request"), paused.types()
        approve = chat_body(chat, ask, answer_approvals(assistant_message(paused), True))
        with streaming(server, approve) as reading:
            assert reading.first_event()["type"] == "start"
            # Into the payment, which starts at once and runs TOOL_SECONDS: the signal must come
            # while it runs, and nothing tells of its start but the clock.
            time.sleep(TOOL_SECONDS / 2)
            process.send_signal(signal.SIGTERM)
            rest = reading.rest()
        process.wait(timeout=30)
    assert rest[-1] == "[DONE]", f"the response was cut: {rest}"
    chunks = chunks_of(rest)
    types = [c["type"] for c in chunks]
    # The payment that had started ran to its end; the model's answer after it did not come.
    assert [c["output"] for c in chunks if c["type"] == "tool-output-available"] == [{"paid": 5.0}]
    assert [c["errorText"] for c in chunks if c["type"] == "error"] == [RESTART_TEXT], types
    assert types[-1] == "finish" and "abort" not in types, types
    assert list(ledger(payments).values()) == [1]


# -- /live?chatId= sockets ---------------------------------------------------------------------


@pytest.fixture
def live_instance(tmp_path: Path) -> Iterator[LiveServer]:
    env = {**LIVE, "ADK_STREAM_SHUTDOWN_GRACE_SECONDS": "20"}
    with run_server(tmp_path, env, uvicorn_args=UVICORN) as server:
        yield server


def message_frame(chat_id: str, *messages: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "version": "1", **chat_body(chat_id, *messages)}


def closed_socket(socket: LiveSocket) -> SocketClosed:
    """How the server closes the socket (it must, and send nothing more before)."""
    with pytest.raises(SocketClosed) as closed:
        frame = socket.ws.recv(timeout=15)
        raise AssertionError(f"a frame after the response: {frame}")
    return closed.value


def test_sigterm_lets_a_live_answer_finish_then_closes_its_socket(
    live_instance: LiveServer,
) -> None:
    process = live_instance.process
    assert process is not None
    chat = new_chat("live-drain")
    with LiveSocket(live_instance, chat) as socket:
        socket.send(message_frame(chat, user_message("hello", "u1")))
        first = socket.ws.recv(timeout=15)
        assert first.startswith("data: ") and '"start"' in first, first
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        wait_until(
            lambda: live_instance.http.get("/health").status_code == 503, "draining", within=5
        )
        # The answer was in progress at the signal: it runs to its end, then the socket closes.
        answer = socket.response()
        closed = closed_socket(socket)
    types = [c["type"] for c in answer.chunks]
    assert "text-delta" in types and "error" not in types, types
    assert answer.chunks[-1]["type"] == "finish", types
    assert answer.chunks[-1].get("finishReason") == "stop", answer.chunks[-1]
    assert closed.code == 1012 and "restarting" in closed.reason, closed
    # Nothing else was open: the process exits once the answer ended, not after the grace.
    process.wait(timeout=15)
    assert time.monotonic() - signalled < 10


def test_a_restart_hands_a_live_approval_over_to_the_next_instance(tmp_path: Path) -> None:
    """A ``/live?chatId=`` socket whose approval waits is closed with 1012 by the drain: it
    hands the approval over to the chat's session (docs/adr/0047), so the instance started
    next on the same store shows it waiting and runs the tool once with the answer."""
    bank = {"ADK_STREAM_AGENT": "tests.support.agents.samples:served_bank"}
    chat = new_chat("live-restart-approval")
    ask = user_message("send 50 to Ana", "u1")
    with run_server(tmp_path, bank, uvicorn_args=UVICORN) as first:
        assert first.process is not None
        with LiveSocket(first, chat) as socket:
            asked = socket.message(ask)
            (request,) = asked.of_type("tool-approval-request")
            first.process.send_signal(signal.SIGTERM)
            closed = closed_socket(socket)
        assert closed.code == 1012, closed
        first.process.wait(timeout=15)
    with run_server(tmp_path, bank, uvicorn_args=UVICORN) as second:
        record = second.http.get(f"/chats/{chat}").json()["messages"][-1]
        (part,) = [p for p in record["parts"] if p.get("toolCallId") == request["toolCallId"]]
        assert part["state"] == "approval-requested", part
        answered = answer_approvals(assistant_message(asked), True)
        done = post_stream(second, chat_body(chat, ask, answered, messageId=answered["id"]))
        (output,) = done.of_type("tool-output-available")
        assert output["output"] == {"status": "sent", "amount": 50, "to": "Ana"}


def test_a_new_live_message_during_the_drain_is_refused_and_its_socket_closed(
    live_instance: LiveServer,
) -> None:
    process = live_instance.process
    assert process is not None
    chat = new_chat("live-refused")
    with LiveSocket(live_instance, chat) as socket:
        socket.send({"type": "ping", "timestamp": 1})
        assert socket.control() == {"type": "pong", "timestamp": 1}  # the socket holds the chat
        # A /stream response keeps the server draining while the socket is idle.
        body = chat_body(new_chat("busy"), user_message("slow 3", "u1"))
        with streaming(live_instance, body) as reading:
            assert reading.first_event()["type"] == "start"
            process.send_signal(signal.SIGTERM)
            wait_until(
                lambda: live_instance.http.get("/health").status_code == 503, "draining", within=5
            )
            refused = socket.message(user_message("hi", "u2"))
            closed = closed_socket(socket)
            rest = reading.rest()
    assert [c["type"] for c in refused.chunks] == ["error"], refused.chunks
    assert refused.chunks[0]["errorText"] == REFUSAL_TEXT
    assert closed.code == 1012 and "restarting" in closed.reason, closed
    # The response that was open when the drain began still ended as usual.
    assert rest[-1] == "[DONE]" and "error" not in [c["type"] for c in chunks_of(rest)], rest
    process.wait(timeout=15)


# -- a rolling restart of two instances under load --------------------------------------------


class Balancer:
    """What a load balancer does for the test: it sends each request to an instance that is
    in rotation, takes an instance out once it refuses (503) or cannot be reached, and
    retries a request that could not connect, or that got 503 + Retry-After, elsewhere."""

    def __init__(self) -> None:
        # Who takes work waits here for an instance in the pool, as a proxy holds a request.
        self._lock = threading.Condition()
        self._pool: list[str] = []
        self._turn = itertools.count()
        self.refused = 0  # 503 + Retry-After, retried
        self.failures: list[str] = []

    def add(self, base_url: str) -> None:
        with self._lock:
            self._pool.append(base_url)
            self._lock.notify_all()

    def remove(self, base_url: str) -> None:
        with self._lock:
            if base_url in self._pool:
                self._pool.remove(base_url)

    def _pick(self, deadline: float) -> str | None:
        """The next instance of the pool, once it has one (None at the deadline)."""
        with self._lock:
            if not self._lock.wait_for(lambda: self._pool, deadline - time.monotonic()):
                return None
            return self._pool[next(self._turn) % len(self._pool)]

    def post(self, client: httpx.Client, body: dict[str, Any]) -> Any:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            base = self._pick(deadline)
            if base is None:
                break
            try:
                response = client.post(f"{base}/stream", json=body)
            except httpx.ConnectError:
                self.remove(base)  # as a proxy retries a connect error on the next upstream
                continue
            except httpx.HTTPError as exc:
                self.failures.append(f"{base}: {type(exc).__name__}: {exc}")
                return None
            if response.status_code == 503 and "retry-after" in response.headers:
                with self._lock:
                    self.refused += 1
                self.remove(base)
                continue
            if response.status_code != 200:
                self.failures.append(f"{base}: {response.status_code} {response.text[:200]}")
                return None
            result = stream_result(response)
            if result.payloads[-1:] != ["[DONE]"] or result.of_type("error"):
                self.failures.append(f"{base}: {result.payloads[-3:]}")
                return None
            return result
        self.failures.append("no instance answered within 30 s")
        return None


PAYMENTS_BETWEEN = 3  # payments the clients see before, between and after the two restarts


def test_a_rolling_restart_under_load_loses_nothing(
    postgres_url: str, redis_url: str, redis_run_prefix: str, tmp_path_factory: Any
) -> None:
    payments = tmp_path_factory.mktemp("ledger") / "ledger"
    env = {
        **PAYMENTS,
        "ADK_STREAM_SESSION_STORE": postgres_url,
        "ADK_STREAM_REDIS_URL": redis_url,
        "ADK_STREAM_REDIS_KEY_PREFIX": f"{redis_run_prefix}.rolling",
        "ADK_STREAM_RESUMABLE_STREAMS": "true",
        "ADK_STREAM_LEASE_TTL_SECONDS": "2",
        "ADK_STREAM_SHUTDOWN_GRACE_SECONDS": "20",
        LEDGER_ENV: str(payments),
    }
    balancer = Balancer()
    paid: list[str] = []  # the call ids the clients saw paid
    payment = threading.Condition()
    stop = threading.Event()

    def after_more_payments(more: int) -> None:
        """Until the clients saw ``more`` payments more: the load is steady by count, not by
        the clock, so a slow machine runs as many flows through each restart as a fast one."""
        with payment:
            target = len(paid) + more
            assert payment.wait_for(lambda: len(paid) >= target or bool(balancer.failures), 60), (
                f"the load stalled at {len(paid)} payments: {balancer.failures[:3]}"
            )

    def client() -> None:
        # A new connection per request, as a balancer that does not keep idle connections to
        # an instance open: one kept would race the exiting instance's close of it (HTTP/1.1
        # has no way to announce that), the balancer's own race, not the server's
        # (docs/deployment.md: take the instance out of rotation before SIGTERM).
        fresh = httpx.Limits(max_keepalive_connections=0)
        with httpx.Client(timeout=60, limits=fresh) as http:
            while not stop.is_set():
                chat = new_chat("rolling")
                ask = user_message("pay 7", f"u-{chat}")
                paused = balancer.post(http, chat_body(chat, ask))
                if paused is None:
                    continue
                (request,) = paused.of_type("tool-approval-request")
                answer = answer_approvals(assistant_message(paused), True)
                done = balancer.post(http, chat_body(chat, ask, answer))
                if done is not None:
                    (output,) = done.of_type("tool-output-available")
                    assert output["output"] == {"paid": 7.0}
                    with payment:
                        paid.append(request["toolCallId"])
                        payment.notify_all()

    def restart(stack: ExitStack, old: LiveServer, name: str) -> LiveServer:
        assert old.process is not None
        old.process.send_signal(signal.SIGTERM)
        old.process.wait(timeout=40)
        new = stack.enter_context(
            run_server(tmp_path_factory.mktemp(name), env, uvicorn_args=UVICORN)
        )
        balancer.add(new.base_url)
        return new

    with ExitStack() as stack:
        a = stack.enter_context(run_server(tmp_path_factory.mktemp("a"), env, uvicorn_args=UVICORN))
        b = stack.enter_context(run_server(tmp_path_factory.mktemp("b"), env, uvicorn_args=UVICORN))
        balancer.add(a.base_url)
        balancer.add(b.base_url)
        clients = [threading.Thread(target=client, daemon=True) for _ in range(3)]
        for thread in clients:
            thread.start()
        after_more_payments(PAYMENTS_BETWEEN)
        restart(stack, a, "a2")
        after_more_payments(PAYMENTS_BETWEEN)
        restart(stack, b, "b2")
        after_more_payments(PAYMENTS_BETWEEN)
        stop.set()
        for thread in clients:
            thread.join(60)
    assert not balancer.failures, balancer.failures
    ran = ledger(payments)
    assert not [call for call, times in ran.items() if times != 1], ran
    assert set(ran) == set(paid), "each payment a client saw paid ran once, and no other"
    print(f"payments={len(paid)} refused_503={balancer.refused}")

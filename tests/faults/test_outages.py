"""Outages answer 503, never 500 (docs/adr/0030-outages.md): one real server on a private
PostgreSQL and Redis (``conftest.py``), whose stores are stopped, killed, frozen and
restarted under it.

While a store is gone every request is answered or gets 503 with ``Retry-After``; a socket
gets an ``error`` frame or a close with a reason; an open body ends with an ``error`` and
``[DONE]``. Service is back within a second of the store's return, and the log has one
WARNING per outage, no ERROR and no traceback.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support.ai7_socket import V7Socket
from tests.support.faults.checks import (
    LogWindow,
    assert_answered_or_unavailable,
    assert_ends,
    assert_unavailable,
    back_within,
    errors_of,
)
from tests.support.faults.stores import PrivatePostgres, PrivateRedis
from tests.support.rig import (
    HandshakeRefused,
    LiveServer,
    LiveSocket,
    SocketClosed,
    StreamReading,
    answer_approvals,
    assistant_message,
    chat_body,
    post_stream,
    streaming,
    user_message,
)
from tests.support.waiting import wait_until

# A store that does not answer is given up on within its timeouts (store/sessions.py,
# coordination/redis/coordination.py), well before this.
FROZEN_ANSWER_SECONDS = 12.0
CLOSE_TRY_AGAIN_LATER = 1013


def new_chat(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def first_message(name: str) -> dict[str, object]:
    return chat_body(new_chat(name), user_message("hi", "u1"))


def answered_chat(server: LiveServer, name: str) -> tuple[str, dict[str, object]]:
    """A chat with one answer, and the body of its next message."""
    chat = new_chat(name)
    first = post_stream(server, chat_body(chat, user_message("hi", "u1")))
    return chat, chat_body(
        chat, user_message("hi", "u1"), assistant_message(first), user_message("again", "u2")
    )


def test_requests_while_postgres_is_stopped_get_503(
    server: LiveServer, postgres: PrivatePostgres
) -> None:
    http = server.http
    chat, follow_up = answered_chat(server, "follow-up")
    asked = new_chat("approval")
    ask = user_message("transfer 150", "u1")
    paused = post_stream(server, chat_body(asked, ask))
    assert paused.of_type("tool-approval-request"), paused.types()
    approval = chat_body(asked, ask, answer_approvals(assistant_message(paused), True))

    window = LogWindow(server)
    postgres.stop("immediate")  # the pooled connections go stale
    for body in (first_message("first"), follow_up, approval, follow_up):
        assert_unavailable(http.post("/stream", json=body))
    # Resume and stop need only Redis.
    assert http.get(f"/stream/{chat}/stream").status_code == 204
    assert http.delete(f"/stream/{chat}/stream").status_code == 204
    postgres.start()
    back_within(lambda: http.post("/stream", json=follow_up))
    assert post_stream(server, approval).of_type("tool-output-available")
    window.assert_handled()


def test_requests_while_postgres_starts_up_get_503_or_an_answer(
    server: LiveServer, postgres: PrivatePostgres
) -> None:
    """PostgreSQL refuses connections while it starts ("the database system is starting
    up", 57P03): those requests get 503 too."""
    window = LogWindow(server)
    postgres.stop("fast")
    postgres.start(wait=False)

    def answered() -> bool:
        response = server.http.post("/stream", json=first_message("starting"))
        assert_answered_or_unavailable(response)  # each answer on the way, too
        return response.status_code == 200

    wait_until(answered, "PostgreSQL back", within=15)
    text = window.text()
    assert "Traceback" not in text and " ERROR " not in text, text[-3000:]


def test_a_frozen_postgres_answers_503_within_its_timeout(
    server: LiveServer, postgres: PrivatePostgres
) -> None:
    http = server.http
    post_stream(server, first_message("warm"))  # a pooled connection that will hang
    window = LogWindow(server)
    postgres.freeze()
    try:
        started = time.monotonic()
        try:
            response = http.post(
                "/stream", json=first_message("frozen"), timeout=FROZEN_ANSWER_SECONDS
            )
        except httpx.ReadTimeout:
            pytest.fail(f"no answer within {FROZEN_ANSWER_SECONDS} s of a frozen PostgreSQL")
        assert_unavailable(response)
        assert time.monotonic() - started < FROZEN_ANSWER_SECONDS
    finally:
        postgres.thaw()
    back_within(lambda: http.post("/stream", json=first_message("thawed")))
    window.assert_handled()


def test_requests_while_redis_is_down_get_503(
    server: LiveServer, redis_store: PrivateRedis
) -> None:
    http = server.http
    chat, follow_up = answered_chat(server, "redis")
    window = LogWindow(server)
    redis_store.kill()
    assert_unavailable(http.post("/stream", json=first_message("first")))
    assert_unavailable(http.post("/stream", json=follow_up))
    assert_unavailable(http.get(f"/stream/{chat}/stream"))
    assert_unavailable(http.delete(f"/stream/{chat}/stream"))
    redis_store.start()
    back_within(lambda: http.post("/stream", json=follow_up))
    window.assert_handled()


def test_no_5xx_right_after_a_redis_restart(server: LiveServer, redis_store: PrivateRedis) -> None:
    """Each pooled connection to the old Redis is stale once: it must reconnect, not fail."""
    http = server.http

    def burst() -> list[httpx.Response]:
        with ThreadPoolExecutor(8) as pool:
            return list(pool.map(lambda _: http.post("/stream", json=first_message("b")), range(8)))

    assert {r.status_code for r in burst()} == {200}  # several connections in the pool
    window = LogWindow(server)
    redis_store.kill()
    redis_store.start()
    statuses = [r.status_code for r in burst()]
    assert statuses == [200] * 8, statuses
    text = window.text()
    assert "Traceback" not in text and " ERROR " not in text, text[-3000:]


def test_a_resume_while_redis_restarts_empty_ends_with_an_error_and_done(
    server: LiveServer, redis_store: PrivateRedis
) -> None:
    chat = new_chat("resume")
    window = LogWindow(server)
    with streaming(server, chat_body(chat, user_message("slow 2", "u1"))) as producer:
        assert producer.first_event()["type"] == "start"
        with httpx.stream("GET", f"{server.base_url}/stream/{chat}/stream", timeout=20) as follow:
            assert follow.status_code == 200
            resumed = StreamReading(follow)
            assert resumed.first_event()["type"] == "start"
            redis_store.kill()
            time.sleep(0.2)  # Redis down a moment: the outage is what is tested
            redis_store.start()
            payloads = resumed.rest()  # the body ends; it is not cut
        assert_ends(payloads)
        assert errors_of(payloads), payloads
        assert_ends(producer.rest())
    # Redis lost the log: nothing to resume, or an error and the end.
    again = server.http.get(f"/stream/{chat}/stream")
    assert_answered_or_unavailable(again)
    text = window.text()
    assert "Traceback" not in text and " ERROR " not in text, text[-3000:]


def test_live_sockets_while_redis_is_down_are_refused_with_a_reason(
    server: LiveServer, redis_store: PrivateRedis
) -> None:
    window = LogWindow(server)
    redis_store.kill()
    try:
        socket = server.connect(f"/live?chatId={new_chat('live')}")
    except HandshakeRefused as refused:
        assert refused.status == 503, refused
    else:
        with pytest.raises(SocketClosed) as closed:
            socket.recv(timeout=10)
        assert closed.value.code == CLOSE_TRY_AGAIN_LATER, closed.value
        assert closed.value.reason
    assert_v7_told_to_try_again(server)
    redis_store.start()
    back_within(lambda: server.http.post("/stream", json=first_message("back")))
    window.assert_handled()


def test_live_sockets_while_postgres_is_down_get_an_error_not_a_failure(
    server: LiveServer, postgres: PrivatePostgres
) -> None:
    window = LogWindow(server)
    postgres.stop("immediate")
    assert_v7_told_to_try_again(server)
    with LiveSocket(server, new_chat("live")) as live:
        try:
            live.send(
                {
                    "type": "message",
                    "version": "1",
                    **chat_body(live.chat_id, user_message("hi", "u1")),
                }
            )
            answer = live.response(timeout=15)
        except SocketClosed as closed:
            assert closed.code == CLOSE_TRY_AGAIN_LATER and closed.reason, closed
        else:
            assert_ends(answer.payloads)
            assert "try again" in errors_of(answer.payloads)[0]["errorText"], answer.chunks
    postgres.start()
    back_within(lambda: server.http.post("/stream", json=first_message("back")))
    window.assert_handled()


def assert_v7_told_to_try_again(server: LiveServer) -> None:
    """A message on ai 7's socket gets its request's `error` frame, saying to try again."""
    v7 = V7Socket(server)
    try:
        reply = v7.reply(v7.send(new_chat("v7"), user_message("hi", "u1")), timeout=15)
    finally:
        v7.close()
    assert reply.last == "error", reply.frames
    assert "try again" in reply.frames[-1]["errorText"], reply.frames

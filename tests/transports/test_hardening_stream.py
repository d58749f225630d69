"""POST /stream under careless and hostile input (docs/adr/0019): in-process, and on the wire
(real uvicorn) where the wire is the point: a body that arrives slowly, a large message while
other requests come in.

Each test names a way the server once broke: a coerced approval that ran a payment, a request
that stalled every other, a deep body that gave 500, a body that never finished arriving,
a burst that queued without bound.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.rig import (
    InProcessApp,
    LiveServer,
    LiveSocket,
    Response,
    answer_approvals,
    chat_body,
    in_process_app,
    post_stream,
    serve_in_thread,
    user_message,
)
from tests.test_approvals import Conversation


def new_chat() -> str:
    return f"hard-{uuid.uuid4().hex[:12]}"


def post_raw(app: InProcessApp, body: bytes | str, **kwargs: Any) -> Response:
    return app.http.post(
        "/stream", content=body, headers={"content-type": "application/json"}, **kwargs
    )


# -- 1. decisions are JSON booleans -------------------------------------------------------------


@pytest.mark.parametrize("coerced", ["yes", "true", 1, "1", "on", 1.0])
def test_an_approval_that_is_not_a_boolean_is_refused_and_runs_nothing(
    app: InProcessApp, coerced: object
) -> None:
    chat = Conversation(app)
    chat.say("Send 50 dollars to Hanako")
    message = answer_approvals(chat.assistant(), True)
    message["parts"][-1]["approval"]["approved"] = coerced
    response = chat.refused(message)
    assert response.status_code == 422, response.text
    assert "approval.approved" in response.json()["detail"]
    assert chat.wallet() == 1000
    # The session is intact: a real decision still works.
    chat.answer(answer_approvals(chat.assistant(), True))
    assert chat.wallet() == 950


@pytest.mark.parametrize(
    ("field", "value"),
    [("id", 12345), ("trigger", 1), ("messageId", 7)],
)
def test_ids_and_triggers_are_strings_not_numbers(
    app: InProcessApp, field: str, value: object
) -> None:
    body = chat_body(new_chat(), user_message("hello", "u-1"))
    body[field] = value
    response = post_raw(app, json.dumps(body))
    assert response.status_code == 422, response.text
    assert field in response.json()["detail"]


def test_a_message_id_that_is_a_number_is_refused(app: InProcessApp) -> None:
    message = {"id": 5, "role": "user", "parts": [{"type": "text", "text": "x"}]}
    body = chat_body(new_chat(), message)
    response = post_raw(app, json.dumps(body))
    assert response.status_code == 422
    assert "messages.0.id" in response.json()["detail"]


# -- 2, 3. limits, depth and malformed text -----------------------------------------------------


@pytest.fixture(scope="module")
def limited_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    """Small limits, so that each can be crossed with a small request."""
    with in_process_app(
        tmp_path_factory.mktemp("limited"),
        max_message_chars=1000,
        max_parts_per_message=5,
        max_added_bytes=2000,
        max_file_bytes=3000,
        max_json_depth=12,
    ) as target:
        yield target


def test_text_over_the_limit_is_refused_with_413(limited_app: InProcessApp) -> None:
    body = chat_body(new_chat(), user_message("word " * 201, "u-1"))  # 1005 characters
    response = post_raw(limited_app, json.dumps(body))
    assert response.status_code == 413
    assert "1005 characters" in response.json()["detail"]
    assert "limit is 1000" in response.json()["detail"]
    at_limit = chat_body(new_chat(), user_message("word " * 200, "u-1"))
    assert post_stream(limited_app, at_limit).status == 200


def test_too_many_parts_is_refused_with_413(limited_app: InProcessApp) -> None:
    message = {"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "hi"}] * 6}
    response = post_raw(limited_app, json.dumps(chat_body(new_chat(), message)))
    assert response.status_code == 413
    assert "6 parts" in response.json()["detail"]


def test_a_request_adding_too_much_to_the_record_is_refused_with_413(
    limited_app: InProcessApp,
) -> None:
    """No limit counts messages (ADR 0069): what a request adds to the chat's record is
    bounded, by bytes. A new chat's record holds nothing: all it sends is added."""
    messages = [user_message("w" * 400, f"u-{i}") for i in range(6)]  # ~2.7 KB of JSON
    response = post_raw(limited_app, json.dumps(chat_body(new_chat(), *messages)))
    assert response.status_code == 413
    assert "adds more than 2000 bytes" in response.json()["detail"]
    within = [user_message("w" * 400, f"u-{i}") for i in range(3)]
    assert post_stream(limited_app, chat_body(new_chat(), *within)).status == 200


def test_a_file_over_the_limit_is_refused_with_413(limited_app: InProcessApp) -> None:
    import base64

    data = base64.b64encode(b"\x89PNG" + b"\0" * 4000).decode()
    file = {"type": "file", "mediaType": "image/png", "url": f"data:image/png;base64,{data}"}
    body = chat_body(new_chat(), user_message("look", "u-1", files=[file]))
    response = post_raw(limited_app, json.dumps(body))
    assert response.status_code == 413
    assert "larger than 3000 bytes" in response.json()["detail"]


@pytest.mark.parametrize("depth", [13, 10_000])
def test_deep_json_is_refused_with_422(limited_app: InProcessApp, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    body = json.dumps(chat_body(new_chat(), user_message("hi", "u-1"))).replace(
        '"parts": [', f'"metadata": {nested}, "parts": [', 1
    )
    response = post_raw(limited_app, body)
    assert response.status_code == 422, response.text
    assert "nested more than 12 levels" in response.json()["detail"]


def test_deep_json_is_refused_with_the_default_limits(app: InProcessApp) -> None:
    response = post_raw(app, '{"id":' + "[" * 10_000 + "]" * 10_000 + "}")
    assert response.status_code == 422
    assert "nested more than 64 levels" in response.json()["detail"]


def test_a_lone_surrogate_is_refused_with_422(app: InProcessApp) -> None:
    body = json.dumps(chat_body(new_chat(), user_message("broken \ud800 text", "u-1")))
    assert "\\ud800" in body
    response = post_raw(app, body)
    assert response.status_code == 422
    assert "surrogate" in response.json()["detail"]


def test_fifteen_megabytes_of_words_is_refused_at_once(app: InProcessApp) -> None:
    body = chat_body(new_chat(), user_message("lorem ipsum " * 1_300_000, "u-1"))
    started = time.monotonic()
    response = post_raw(app, json.dumps(body))
    assert response.status_code == 413
    assert "limit is 200000" in response.json()["detail"]
    assert time.monotonic() - started < 10  # refused, not answered


# -- 2. one request does not stall the others --------------------------------------------------


def _worst_inputs() -> dict[str, str]:
    """Messages at the default text limit (200,000 characters) that once took the demo model
    seconds to minutes: one long token, and words it echoed one event at a time."""
    return {
        "one token": "a" * 200_000,
        "hyphenated token": "a-" * 100_000,
        "weather in a long name": "weather in " + "x" * 199_000,
        "japanese run": "天" * 200_000,
        "words": "lorem ipsum " * 16_000,
    }


@pytest.mark.parametrize("name", list(_worst_inputs()))
def test_a_large_message_does_not_stall_the_server(server: LiveServer, name: str) -> None:
    """While the large message is answered, /health and another chat's turn answer promptly.
    (The bound is loose on purpose: the failure it catches is a server wedged for seconds to
    minutes; bench/ measures the event loop's lag itself.)"""
    text = _worst_inputs()[name]
    big: dict[str, Any] = {}

    def send_big() -> None:
        big["result"] = post_stream(server, chat_body(new_chat(), user_message(text, "u-big")))

    worker = threading.Thread(target=send_big)
    worker.start()
    slowest = 0.0
    try:
        while worker.is_alive():
            started = time.monotonic()
            assert server.http.get("/health", timeout=5).status_code == 200
            other = post_stream(server, chat_body(new_chat(), user_message("hi", "u-1")))
            assert other.status == 200
            slowest = max(slowest, time.monotonic() - started)
    finally:
        worker.join(timeout=60)
    assert not worker.is_alive(), "the large message was never answered"
    assert slowest < 2.0, f"health and another chat took {slowest:.2f} s"
    assert big["result"].status == 200
    assert big["result"].of_type("finish")


# -- 8. slow bodies -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def impatient_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Real uvicorn (in a thread) that waits half a second for a request body."""
    with serve_in_thread(
        tmp_path_factory.mktemp("impatient"), request_body_timeout_seconds=0.5
    ) as live:
        yield live


def test_a_body_that_arrives_too_slowly_gets_408(impatient_server: LiveServer) -> None:
    host, port = impatient_server.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(
            b"POST /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
            b'{"id": "slow-sender", '
        )
        started = time.monotonic()
        reply = ""
        while "}" not in reply and (piece := conn.recv(4096)):
            reply += piece.decode()
    assert reply.startswith("HTTP/1.1 408"), reply
    assert "did not arrive within 0.5 s" in reply
    assert time.monotonic() - started < 8


# -- 10. load shedding --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_slot_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    """One response at a time, and an agent with a tool that takes as long as asked."""
    with in_process_app(
        tmp_path_factory.mktemp("one-slot"),
        max_concurrent_responses=1,
        agent="tests.support.agents.tools:root_agent",
    ) as target:
        yield target


def test_over_the_response_cap_a_request_gets_503_at_once(one_slot_app: InProcessApp) -> None:
    http = one_slot_app.http
    slow = chat_body(new_chat(), user_message("slow 1.5", "u-1"))
    with http.stream("POST", "/stream", json=slow) as first:
        assert first.status_code == 200
        lines = first.iter_lines()
        assert next(lines).startswith("data: ")  # the run has begun
        started = time.monotonic()
        shed = http.post("/stream", json=chat_body(new_chat(), user_message("hi", "u-1")))
        assert time.monotonic() - started < 1.0  # at once, not after the slow tool
        assert shed.status_code == 503
        assert shed.headers["retry-after"] == "1"
        assert "busy" in shed.json()["detail"]
        rest = list(lines)
    assert rest[-2:] == ["data: [DONE]", ""] or rest[-1] == "data: [DONE]", rest[-3:]
    # The slot is free again once the response has ended.
    after = post_stream(one_slot_app, chat_body(new_chat(), user_message("hi", "u-1")))
    assert after.status == 200


def test_over_the_response_cap_a_live_message_gets_a_busy_error(
    one_slot_app: InProcessApp,
) -> None:
    slow = chat_body(new_chat(), user_message("slow 1.5", "u-1"))
    live = LiveSocket(one_slot_app, new_chat())
    try:
        with one_slot_app.http.stream("POST", "/stream", json=slow) as first:
            lines = first.iter_lines()
            assert next(lines).startswith("data: ")  # holds the only slot
            (error,) = live.message(user_message("hi", "u-1")).of_type("error")
            assert "busy" in error["errorText"]
            list(lines)
        # The socket is usable, and its response holds the slot only while it is open.
        # (This test agent has no live model, so the turn itself ends in an error chunk.)
        answered = live.message(user_message("hi", "u-2"))
        assert answered.types()[0] == "start" and "busy" not in answered.body
        after = post_stream(one_slot_app, chat_body(new_chat(), user_message("hi", "u-1")))
        assert after.status == 200
    finally:
        live.close()

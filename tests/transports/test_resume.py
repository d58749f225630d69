"""Resumable streams and explicit stop on one process (in-process coordination):
``GET /stream/{chatId}/stream`` (the AI SDK's resume convention), ``DELETE`` on the same path,
a dropped client with resumable streams on, and ``/live`` sockets that resume or are stopped.
The same on several instances over Redis is in test_scale_out.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.apps import user_from_header
from tests.support.rig import (
    InProcessApp,
    LiveServer,
    SocketClosed,
    chat_body,
    chunks_of,
    in_process_app,
    post_stream,
    serve_in_thread,
    stream_result,
    streaming,
    user_message,
)

ALICE = {"x-test-user": "alice"}
BOB = {"x-test-user": "bob"}
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    with in_process_app(tmp_path_factory.mktemp("resume"), identity=user_from_header) as target:
        yield target


@pytest.fixture(scope="module")
def resumable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Real uvicorn (a dropped connection is only real on the wire), the tests' agent with
    its slow tool, resumable streams on."""
    with serve_in_thread(
        tmp_path_factory.mktemp("resumable"),
        identity=user_from_header,
        agent="tests.support.agents.tools:slow_live_agent",
        resumable_streams=True,
        keep_alive_seconds=0.2,
    ) as server:
        yield server


def resume(server: LiveServer | InProcessApp, chat_id: str, headers: dict[str, str]) -> Any:
    return server.http.get(f"/stream/{chat_id}/stream", headers=headers)


# -- nothing to resume -------------------------------------------------------------------------


def test_a_chat_never_seen_has_nothing_to_resume(app: InProcessApp) -> None:
    response = resume(app, "never-seen", ALICE)
    assert response.status_code == 204
    assert response.content == b""


def test_an_ended_response_is_not_resumed(app: InProcessApp) -> None:
    assert (
        post_stream(app, chat_body("ended", user_message("hi", "u1")), headers=ALICE).status == 200
    )
    assert resume(app, "ended", ALICE).status_code == 204


def test_an_invalid_chat_id_is_refused_readably(app: InProcessApp) -> None:
    for method in ("GET", "DELETE"):
        response = app.http.request(method, "/stream/bad%20id/stream", headers=ALICE)
        assert response.status_code == 422
        assert "chat id" in response.json()["detail"]


def test_stopping_a_chat_with_nothing_running_is_204(app: InProcessApp) -> None:
    response = app.http.delete("/stream/idle/stream", headers=ALICE)
    assert response.status_code == 204


# -- resuming an active response ---------------------------------------------------------------


def test_resume_replays_from_start_and_follows_to_done(resumable: LiveServer) -> None:
    body = chat_body("follow", user_message("slow 1", "u2"))
    with streaming(resumable, body, ALICE) as reading:
        start = reading.first_event()
        assert start["type"] == "start"
        resumed = resume(resumable, "follow", ALICE)
        rest = reading.rest()
    assert resumed.status_code == 200
    assert resumed.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert resumed.headers["content-type"].startswith("text/event-stream")
    result = stream_result(resumed)  # checked against the protocol invariants
    assert result.chunks[0] == start, "replayed from the same start"
    assert result.payloads[-1] == "[DONE]"
    assert result.of_type("tool-output-available")[0]["output"] == {"waited": 1.0}
    # The same events the original client got, in the same order.
    assert result.payloads[1:] == rest
    assert resume(resumable, "follow", ALICE).status_code == 204, "ended: nothing to resume"


def test_a_dropped_client_leaves_the_run_going(resumable: LiveServer) -> None:
    body = chat_body("dropped", user_message("slow 1", "u3"))
    with streaming(resumable, body, ALICE) as reading:
        assert reading.first_event()["type"] == "start"
    # The client has gone; the response has not.
    resumed = stream_result(resume(resumable, "dropped", ALICE))
    assert resumed.of_type("start"), "replayed from its start"
    assert resumed.of_type("tool-output-available")[0]["output"] == {"waited": 1.0}
    assert resumed.of_type("finish")[0]["finishReason"] == "stop"
    assert resumed.payloads[-1] == "[DONE]"


def test_another_user_cannot_see_or_stop_the_response(resumable: LiveServer) -> None:
    body = chat_body("private", user_message("slow 1", "u4"))
    with streaming(resumable, body, ALICE) as reading:
        reading.first_event()
        other = resume(resumable, "private", BOB)
        assert other.status_code == 204, "to Bob, Alice's chat looks like one never seen"
        assert resumable.http.delete("/stream/private/stream", headers=BOB).status_code == 204
        rest = chunks_of(reading.rest())
    outputs = [c["output"] for c in rest if c["type"] == "tool-output-available"]
    assert outputs == [{"waited": 1.0}]
    assert not [c for c in rest if c["type"] == "abort"], "Bob's stop did not reach Alice's chat"


# -- explicit stop -------------------------------------------------------------------------------


def test_stop_ends_the_active_response_and_frees_the_chat(resumable: LiveServer) -> None:
    body = chat_body("stopped", user_message("slow 30", "u5"))
    with streaming(resumable, body, ALICE) as reading:
        reading.first_event()
        assert resumable.http.delete("/stream/stopped/stream", headers=ALICE).status_code == 204
        payloads = reading.rest()
    chunks = chunks_of(payloads)
    types = [c["type"] for c in chunks]
    assert "abort" in types, types
    assert "error" not in types, "a stop is not a failure"
    assert payloads[-1] == "[DONE]"
    # The chat answers again at once, and its history holds the stopped turn.
    follow_up = chat_body("stopped", user_message("slow 30", "u6"), user_message("hi", "u2"))
    assert post_stream(resumable, follow_up, headers=ALICE).status == 200


def test_stop_reaches_a_live_socket(resumable: LiveServer) -> None:
    socket = resumable.connect("/live?chatId=live-stopped", headers=ALICE)
    try:
        socket.send(
            json.dumps(
                {"type": "message", **chat_body("live-stopped", user_message("slow 30", "u7"))}
            )
        )
        assert json.loads(socket.recv(TIMEOUT).removeprefix("data: "))["type"] == "start"
        assert (
            resumable.http.delete("/stream/live-stopped/stream", headers=ALICE).status_code == 204
        )
        frames = _until_done(socket)
    finally:
        socket.close()
    finish = [json.loads(f.removeprefix("data: ")) for f in frames if '"finish"' in f]
    assert finish and finish[-1]["type"] == "finish"


def _until_done(socket: Any) -> list[str]:
    frames = []
    while (frame := socket.recv(TIMEOUT)) != "data: [DONE]\n\n":
        frames.append(frame)
    return frames


def test_live_resume_of_a_free_chat_says_no_active(resumable: LiveServer) -> None:
    socket = resumable.connect("/live?chatId=live-free&resume=true", headers=ALICE)
    try:
        assert json.loads(socket.recv(TIMEOUT)) == {"type": "no-active"}
    finally:
        socket.close()


def test_a_second_live_socket_is_still_refused(resumable: LiveServer) -> None:
    first = resumable.connect("/live?chatId=live-two", headers=ALICE)
    try:
        first.send(json.dumps({"type": "ping", "timestamp": 1}))
        assert json.loads(first.recv(TIMEOUT))["type"] == "pong"  # connected, holds the chat
        second = resumable.connect("/live?chatId=live-two&resume=true", headers=ALICE)
        with pytest.raises(SocketClosed) as closed:
            second.recv(TIMEOUT)
        assert closed.value.code == 4409
    finally:
        first.close()


def test_a_new_live_socket_resumes_the_response_of_one_that_left(resumable: LiveServer) -> None:
    message = {"type": "message", **chat_body("live-resume", user_message("hello", "u8"))}
    first = resumable.connect("/live?chatId=live-resume", headers=ALICE)
    try:
        first.send(json.dumps(message))
        start = json.loads(first.recv(TIMEOUT).removeprefix("data: "))
        assert start["type"] == "start"
    finally:
        first.close()  # the socket leaves while its answer is still streaming
    second = resumable.connect("/live?chatId=live-resume&resume=true", headers=ALICE)
    try:
        frames = _until_done(second)
        chunks = [json.loads(f.removeprefix("data: ")) for f in frames]
        assert chunks[0] == start, "replayed from its start"
        assert chunks[-1]["type"] == "finish" and chunks[-1].get("finishReason") == "stop"
        assert any(c["type"] == "text-delta" for c in chunks)
        # Then the socket has the chat: it answers a new message.
        second.send(
            json.dumps({"type": "message", **chat_body("live-resume", user_message("hi", "u9"))})
        )
        after = [json.loads(f.removeprefix("data: ")) for f in _until_done(second)]
        assert after[0]["type"] == "start" and after[-1]["type"] == "finish"
    finally:
        second.close()

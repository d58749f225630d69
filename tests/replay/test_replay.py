"""Replay (docs/adr/0026): ``create_replay_app`` serves the recordings of the real app on
``POST /stream`` and both ``/live`` protocols, with no agent; in this process.

The recordings come from the real app (``tests/support/recordings.py``); a few tests add files made
by hand, in the same format, where they need times or chunks a demo answer does not have.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from adk_stream_protocol import Settings
from adk_stream_protocol.replay.app import create_replay_app
from tests.support.ai7_socket import V7Socket
from tests.support.recordings import PAYMENT, WEATHER, Recorded, new_chat, record_demo_conversations
from tests.support.rig import (
    PLAYGROUND_DIST,
    InProcessApp,
    LiveSocket,
    StreamResult,
    answer_approvals,
    assert_valid_stream,
    assistant_message,
    chat_body,
    chunks_of,
    post_stream,
    sse_payloads,
    user_message,
)

SSE_HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return record_demo_conversations(tmp_path_factory.mktemp("replay"))


@contextmanager
def replay_app(directory: Path, speed: float = 0) -> Iterator[InProcessApp]:
    settings = Settings(playground_dir=PLAYGROUND_DIST)
    app = create_replay_app(directory, settings=settings, speed=speed)
    with TestClient(app, base_url="http://localhost") as client:
        yield InProcessApp(app, directory / "no-sessions.db", client)


@pytest.fixture(scope="module")
def replay(recorded: Recorded) -> Iterator[InProcessApp]:
    with replay_app(recorded.directory) as target:
        yield target


def hand_made(
    directory: Path,
    name: str,
    text: str,
    chunks: list[tuple[int, dict[str, Any]]],
    *,
    ai_sdk: int = 6,
) -> None:
    """A recording in the format the app writes, of a new message ``text``."""
    request = chat_body("hand-made", user_message(text, "u1"))
    lines: list[dict[str, Any]] = [
        {
            "kind": "request",
            "version": 1,
            "transport": "stream",
            "chatId": "hand-made",
            "trigger": "submit-message",
            "aiSdk": ai_sdk,
            "time": "2026-11-23T10:00:00.000000Z",
            "request": request,
        },
        *({"kind": "chunk", "t": t, "chunk": chunk} for t, chunk in chunks),
        {"kind": "end", "t": chunks[-1][0], "finishReason": "stop"},
    ]
    (directory / name).write_text("".join(json.dumps(line) + "\n" for line in lines))


def answer(text: str, *, every_ms: int = 0, message_id: str = "msg-hand") -> list[Any]:
    """A plain answer, one chunk every ``every_ms``."""
    chunks = [
        {"type": "start", "messageId": message_id},
        {"type": "start-step"},
        {"type": "text-start", "id": "t1"},
        *({"type": "text-delta", "id": "t1", "delta": word} for word in text.split(" ")),
        {"type": "text-end", "id": "t1"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]
    return [(i * every_ms, chunk) for i, chunk in enumerate(chunks)]


# -- the same streams as recorded -------------------------------------------------------------


def test_every_recorded_request_gets_its_recorded_stream_on_stream(
    recorded: Recorded, replay: InProcessApp
) -> None:
    for exchange in recorded.exchanges:
        result = post_stream(replay, exchange.request)  # checked as an ai 6 client's
        assert result.status == 200, result.body
        assert result.chunks == exchange.chunks, exchange.label
        for name, value in SSE_HEADERS.items():
            assert result.headers[name].startswith(value), name


def test_every_recorded_request_gets_its_recorded_stream_on_an_ai7_socket(
    recorded: Recorded, replay: InProcessApp
) -> None:
    socket = V7Socket(replay)
    try:
        for exchange in recorded.exchanges:
            request = exchange.request
            extra = {"messageId": request["messageId"]} if "messageId" in request else {}
            reply = socket.reply(socket.send(new_chat(), *request["messages"], **extra))
            assert reply.last == "end", reply.frames
            assert reply.chunks == exchange.chunks, exchange.label
            sequences = [f["sequence"] for f in reply.frames if f["type"] == "chunk"]
            assert sequences == list(range(len(exchange.chunks)))
            assert_valid_stream(reply.stream(), ai_sdk=7)
        resumed = socket.reply(socket.resume("any-chat"))
        assert [f["type"] for f in resumed.frames] == ["no-active"]
    finally:
        socket.close()


def test_every_recorded_request_gets_its_recorded_stream_on_the_envelope(
    recorded: Recorded, replay: InProcessApp
) -> None:
    chat_id = new_chat()
    with LiveSocket(replay, chat_id) as live:
        for exchange in recorded.exchanges:
            request = exchange.request
            extra = {"messageId": request["messageId"]} if "messageId" in request else {}
            result = live.message(*request["messages"], **extra)
            assert_valid_stream(result)
            assert result.chunks == exchange.chunks, exchange.label
        live.send({"type": "ping", "timestamp": 42})
        assert live.control() == {"type": "pong", "timestamp": 42}
        live.send({"type": "audio_control", "action": "start"})
        assert live.control()["type"] == "error"


def test_the_text_matches_without_case_spacing_or_final_punctuation(
    recorded: Recorded, replay: InProcessApp
) -> None:
    result = post_stream(replay, chat_body(new_chat(), user_message("  HELLO   !", "u1")))
    assert result.chunks == recorded.by_label("plain").chunks
    weather = post_stream(replay, chat_body(new_chat(), user_message(WEATHER.lower(), "u1")))
    assert weather.chunks == recorded.by_label("weather").chunks


# -- ids when a recording is replayed again in the same chat -----------------------------------


def test_a_recording_replayed_again_in_one_chat_gets_copied_ids(
    recorded: Recorded, replay: InProcessApp
) -> None:
    chat_id = new_chat()
    messages: list[dict[str, Any]] = []
    message_ids = []
    for turn in (1, 2, 3):
        messages.append(user_message(PAYMENT, f"u{turn}"))
        first = post_stream(replay, chat_body(chat_id, *messages))
        assert first.status == 200, first.body
        message = answer_approvals(assistant_message(first), True)
        messages.append(message)
        second = post_stream(replay, chat_body(chat_id, *messages, messageId=message["id"]))
        assert second.status == 200, second.body
        messages[-1] = assistant_message(first, second)
        message_ids.append(message["id"])
        # The continuation continues this copy: its message, its call.
        assert second.chunks[0] == {"type": "start", "messageId": message["id"]}
        (call,) = [p["toolCallId"] for p in message["parts"] if "toolCallId" in p]
        assert second.of_type("tool-output-available")[0]["toolCallId"] == call
    recorded_id = recorded.by_label("approval").chunks[0]["messageId"]
    assert message_ids == [recorded_id, f"{recorded_id}-r2", f"{recorded_id}-r3"]
    assert len({m["id"] for m in messages}) == len(messages)


def test_the_same_message_walks_through_its_recordings_in_order(
    recorded: Recorded, tmp_path: Path
) -> None:
    for path in recorded.files():
        shutil.copy(path, tmp_path / path.name)
    # A later recording of the same message, edited by hand: its answer differs.
    hand_made(tmp_path, "29991231T000000000000Z_x_000000.jsonl", "hello", answer("second take"))
    with replay_app(tmp_path) as target:
        texts = [
            post_stream(target, chat_body(new_chat(), user_message("hello", "u1"))).text()
            for _ in range(3)
        ]
    assert texts[0].startswith("You said") and texts[2] == texts[0]
    assert texts[1] == "secondtake"


# -- what no recording answers -----------------------------------------------------------------


def test_a_message_nothing_answers_is_a_readable_404(replay: InProcessApp) -> None:
    response = replay.http.post("/stream", json=chat_body(new_chat(), user_message("bonjour", "u")))
    assert response.status_code == 404
    detail = response.json()["detail"]
    assert detail.startswith('no recording answers the message "bonjour"')
    assert '"hello"' in detail and json.dumps(PAYMENT) in detail

    socket = V7Socket(replay)
    try:
        reply = socket.reply(socket.send(new_chat(), user_message("bonjour", "u")))
        assert [f["type"] for f in reply.frames] == ["error"]
        assert reply.frames[0]["errorText"] == detail
    finally:
        socket.close()
    with LiveSocket(replay, new_chat()) as live:
        result = live.message(user_message("bonjour", "u"))
        assert result.chunks == [{"type": "error", "errorText": detail}]
        assert result.payloads[-1] == "[DONE]"


def test_a_continuation_with_other_answers_is_a_readable_404(
    recorded: Recorded, replay: InProcessApp
) -> None:
    approved = recorded.by_label("approved").request
    denied = json.loads(json.dumps(approved))
    denied["messages"][-1]["parts"][-1]["approval"]["approved"] = False
    response = replay.http.post("/stream", json=denied)
    assert response.status_code == 404
    detail = response.json()["detail"]
    assert "with these answers" in detail and "approved=True" in detail
    unknown = chat_body(new_chat(), *approved["messages"][:-1])
    unknown["messages"].append({**approved["messages"][-1], "id": "msg-never-recorded"})
    response = replay.http.post("/stream", json={**unknown, "messageId": "msg-never-recorded"})
    assert response.status_code == 404
    assert "msg-never-recorded" in response.json()["detail"]


def test_what_is_not_a_request_is_refused_as_by_the_real_server(replay: InProcessApp) -> None:
    assert replay.http.post("/stream", content=b"hello").status_code == 415
    assert replay.http.post("/stream", json={"id": "x"}).status_code == 422


# -- timing, versions, the rest of the surface --------------------------------------------------


@pytest.mark.parametrize(("speed", "low", "high"), [(1, 0.6, 3.0), (4, 0.15, 0.6), (0, 0, 0.15)])
def test_chunks_keep_their_recorded_times_scaled_by_speed(
    tmp_path: Path, speed: float, low: float, high: float
) -> None:
    # Nine chunks, 80 ms apart: the last at 640 ms.
    hand_made(tmp_path, "a.jsonl", "slow", answer("one two three", every_ms=80))
    with replay_app(tmp_path, speed=speed) as target:
        started = time.monotonic()
        result = post_stream(target, chat_body(new_chat(), user_message("slow", "u")))
        took = time.monotonic() - started
    assert result.text() == "onetwothree"
    assert low <= took <= high, took


def test_an_ai7_recording_reaches_an_ai6_client_without_what_only_ai7_knows(
    tmp_path: Path,
) -> None:
    chunks = answer("stopped")
    chunks[-3] = (0, {"type": "text-end", "id": "t1", "citations": []})
    chunks[-1] = (0, {"type": "finish", "finishReason": "interrupted"})
    hand_made(tmp_path, "a.jsonl", "stop", chunks, ai_sdk=7)
    with replay_app(tmp_path) as target:
        ai6 = post_stream(target, chat_body(new_chat(), user_message("stop", "u")))
        assert ai6.chunks[-3] == {"type": "text-end", "id": "t1"}
        assert ai6.chunks[-1] == {"type": "finish", "finishReason": "other"}
        socket = V7Socket(target)
        try:
            reply = socket.reply(socket.send(new_chat(), user_message("stop", "u")))
        finally:
            socket.close()
    assert reply.chunks == [chunk for _, chunk in chunks]


def test_an_aborted_request_gets_nothing_more(tmp_path: Path) -> None:
    hand_made(tmp_path, "a.jsonl", "slow", answer("a b c d e f g h", every_ms=100))
    hand_made(tmp_path, "b.jsonl", "fast", answer("done"))
    with replay_app(tmp_path, speed=1) as target:
        socket = V7Socket(target)
        try:
            slow = socket.send(new_chat(), user_message("slow", "u"))
            socket.chunks_until(slow, 2)
            socket.frame({"type": "abort", "requestId": slow})
            fast = socket.reply(socket.send(new_chat(), user_message("fast", "u")))
            assert fast.last == "end"
            # Time for the aborted reply's chunks to come, were they still sent (one each
            # 100 ms): what must not come can only be waited for.
            time.sleep(0.5)
            socket.reply(socket.send(new_chat(), user_message("fast", "u")))
            frames = socket.replies[slow].frames
        finally:
            socket.close()
    assert len(frames) <= 3, frames  # at most one chunk was already on its way
    assert all(f["type"] == "chunk" for f in frames)


def test_an_interrupt_ends_the_replayed_response_cleanly(tmp_path: Path) -> None:
    hand_made(tmp_path, "a.jsonl", "slow", answer("a b c d e f g h", every_ms=100))
    with replay_app(tmp_path, speed=1) as target, LiveSocket(target, new_chat()) as live:
        live.send({"type": "message", **chat_body(live.chat_id, user_message("slow", "u"))})
        seen = [live.ws.recv(timeout=5) for _ in range(4)]
        live.send({"type": "interrupt"})
        result = live.response()
    body = "".join(seen) + result.body
    payloads = sse_payloads(body)
    whole = StreamResult(200, {}, body, payloads, chunks_of(payloads))
    assert_valid_stream(whole)  # every block closed, one finish, one [DONE]
    chunks = whole.chunks
    assert [c["type"] for c in chunks[-3:]] == ["text-end", "finish-step", "finish"]
    assert chunks[-1] == {"type": "finish", "finishReason": "other"}
    assert len(chunks) < len(answer("a b c d e f g h"))


@pytest.mark.out_of_process  # the built page (playground/dist), which npm makes
def test_health_playground_and_resume(recorded: Recorded, replay: InProcessApp) -> None:
    health = replay.http.get("/health")
    assert health.json() == {"status": "ok", "recordings": len(recorded.exchanges)}
    page = replay.http.get("/")
    assert page.status_code == 200 and "<html" in page.text.lower()
    assert replay.http.get("/stream/any-chat/stream").status_code == 204
    assert replay.http.delete("/stream/any-chat/stream").status_code == 204
    refused = replay.http.get("/health", headers={"host": "evil.example"})
    assert refused.status_code == 400


def test_files_that_are_not_recordings_are_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "junk.jsonl").write_text("not json\n")
    hand_made(tmp_path, "a.jsonl", "hello", answer("hi"))
    caplog.set_level(logging.WARNING, logger="adk_stream_protocol.replay.store")
    with replay_app(tmp_path) as target:
        assert target.http.get("/health").json()["recordings"] == 1
    assert "skipped junk.jsonl" in caplog.text


def test_the_factory_refuses_what_it_cannot_serve(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        create_replay_app(tmp_path / "missing")
    with pytest.raises(ValueError, match="speed"):
        create_replay_app(tmp_path, speed=-1)

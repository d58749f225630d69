"""WS /live under careless and hostile input (docs/adr/0019): in-process, with the handshake's
origin check also on the wire (the real server).

Every malformed or out-of-place frame gets an answer and leaves the socket usable; no response
is left without its [DONE]; a page of another site cannot open a socket; a token read by the
identity dependency authenticates a socket end to end.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from tests.support.apps import user_from_token
from tests.support.rig import (
    HandshakeRefused,
    InProcessApp,
    LiveSocket,
    Target,
    answer_approvals,
    assistant_message,
    chat_body,
    in_process_app,
    stored_state,
    user_message,
)

WALLET = "demo:wallet_balance"


def new_chat() -> str:
    return f"live-hard-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def socket(app: InProcessApp) -> Iterator[LiveSocket]:
    live = LiveSocket(app, new_chat())
    yield live
    live.close()


def assert_usable(live: LiveSocket) -> None:
    """The socket still answers, and a whole turn still works on it."""
    live.send({"type": "ping", "timestamp": 42})
    assert live.control() == {"type": "pong", "timestamp": 42}
    result = live.message(user_message("hello", f"u-{uuid.uuid4().hex[:8]}"))
    assert result.types()[0] == "start" and result.types()[-1] == "finish"
    assert "hello" in result.text()


# -- 1. decisions are JSON booleans -------------------------------------------------------------


@pytest.mark.parametrize("coerced", ["yes", "true", 1])
def test_an_approval_that_is_not_a_boolean_is_refused_and_runs_nothing(
    app: InProcessApp, socket: LiveSocket, coerced: object
) -> None:
    ask = user_message("Send 50 dollars to Hanako", "u-1")
    first = socket.message(ask)
    assert first.of_type("tool-approval-request")
    message = answer_approvals(assistant_message(first), True)
    message["parts"][-1]["approval"]["approved"] = coerced
    refused = socket.message(ask, message, messageId=message["id"])
    (error,) = refused.of_type("error")
    assert "approval.approved" in error["errorText"]
    assert stored_state(app, socket.chat_id).get(WALLET, 1000) == 1000
    # The pending approval is untouched: a real decision still runs the payment.
    message["parts"][-1]["approval"]["approved"] = True
    answered = socket.message(ask, message, messageId=message["id"])
    assert "Sent 50 USD to Hanako" in answered.text()
    assert stored_state(app, socket.chat_id)[WALLET] == 950


# -- 3, 4. malformed frames ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "named"),
    [
        ("[" * 10_000 + "]" * 10_000, "nested more than 64 levels"),
        ('{"type": "ping", "x": ' + '{"a": ' * 100 + "1" + "}" * 101, "nested more than 64 levels"),
        ('{"type": "audio_chunk", "chunk": "AAAA", "sampleRate": {"a": 1}}', "sampleRate"),
        ('{"type": "audio_chunk", "chunk": "AAAA", "sampleRate": "16000"}', "sampleRate"),
        ('{"type": "audio_chunk", "chunk": "AAAA", "sampleRate": 5}', "sampleRate"),
        ('{"type": "audio_chunk", "chunk": 17}', "chunk"),
        ('{"type": "audio_chunk", "chunk": "not base64!"}', "base64"),
        ('{"type": "audio_control", "action": "dance"}', "action"),
        ('{"type": "audio_control"}', "action"),
        ('{"type": "tool_result", "toolCallId": 5, "result": {}}', "toolCallId"),
        ('{"type": "tool_result", "toolCallId": "nobody", "result": {}}', "no waiting browser"),
        ('{"type": "interrupt", "reason": {"why": 1}}', "reason"),
        ('{"type": ["message"]}', "unknown frame type"),
        ('{"type": "launch"}', "unknown frame type"),
        ("[1, 2]", "JSON object"),
        ('"message"', "JSON object"),
        ("{not json", "not valid JSON"),
        ('{"type": "ping", "timestamp": "\\udfff"}', "surrogate"),
    ],
)
def test_a_malformed_frame_gets_an_error_and_the_socket_stays_usable(
    socket: LiveSocket, frame: str, named: str
) -> None:
    socket.ws.send(frame)
    error = socket.control()
    assert error["type"] == "error"
    assert named in error["message"], error
    assert_usable(socket)


def test_a_message_with_a_lone_surrogate_is_answered_and_the_chat_goes_on(
    socket: LiveSocket,
) -> None:
    frame = json.dumps(
        {"type": "message", **chat_body(socket.chat_id, user_message("hi \ud800", "u-1"))}
    )
    socket.ws.send(frame)
    error = socket.control()  # refused before any response opens: nothing is left half-open
    assert "surrogate" in error["message"]
    assert_usable(socket)


def test_a_message_over_a_limit_gets_an_error_response(socket: LiveSocket) -> None:
    result = socket.message(user_message("x" * 200_001, "u-1"))
    (error,) = result.of_type("error")
    assert "limit is 200000" in error["errorText"]
    assert_usable(socket)


def test_a_message_whose_parts_are_not_a_list_gets_an_error_response(socket: LiveSocket) -> None:
    socket.send({"type": "message", "id": socket.chat_id, "messages": [{"id": 1, "parts": 2}]})
    (error,) = socket.response().of_type("error")
    assert "messages.0.id" in error["errorText"]
    assert_usable(socket)


# -- 5. cross-site WebSocket hijacking -----------------------------------------------------------


def live_path(query: str = "") -> str:
    return f"/live?chatId={new_chat()}{query}"


def ping(target: Target, path: str, stamp: int, **headers: str) -> dict[str, object]:
    """Open a socket, ping, and return the answer."""
    ws = target.connect(path, headers)
    try:
        ws.send(json.dumps({"type": "ping", "timestamp": stamp}))
        answer: dict[str, object] = json.loads(ws.recv(timeout=10))
        return answer
    finally:
        ws.close()


BOTH = pytest.mark.parametrize("target", ["app", "server"], indirect=True)


@BOTH
def test_a_handshake_from_another_site_is_refused_with_403(target: Target) -> None:
    with pytest.raises(HandshakeRefused) as refused:
        target.connect(live_path(), {"origin": "http://evil.example"})
    assert refused.value.status == 403
    assert b"origin" in refused.value.body


@BOTH
def test_the_servers_own_origin_and_clients_without_one_may_connect(target: Target) -> None:
    own = target.base_url  # the page the server itself serves
    assert ping(target, live_path(), 1, origin=own) == {"type": "pong", "timestamp": 1}
    # No Origin: not a browser.
    assert ping(target, live_path(), 2) == {"type": "pong", "timestamp": 2}


@pytest.fixture(scope="module")
def token_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    """Token authentication (tests/support/apps.py) and one other origin allowed."""
    with in_process_app(
        tmp_path_factory.mktemp("token"),
        identity=user_from_token,
        cors_origins=["http://app.example"],
    ) as target:
        yield target


def test_a_listed_origin_may_connect(token_app: InProcessApp) -> None:
    path = live_path("&token=token-alice")
    assert ping(token_app, path, 1, origin="http://app.example")["type"] == "pong"
    with pytest.raises(HandshakeRefused) as refused:
        token_app.connect(path, {"origin": "http://other.example"})
    assert refused.value.status == 403


# -- authentication on the socket -------------------------------------------------------------


def test_a_socket_without_a_valid_token_is_refused_with_401(token_app: InProcessApp) -> None:
    for query in ("", "&token=forged"):
        with pytest.raises(HandshakeRefused) as refused:
            token_app.connect(live_path(query))
        assert refused.value.status == 401


def test_a_token_in_the_query_names_the_user_of_the_socket(token_app: InProcessApp) -> None:
    chat_id = new_chat()
    ws = token_app.connect(f"/live?chatId={chat_id}&token=token-alice")
    try:
        ws.send(
            json.dumps({"type": "message", **chat_body(chat_id, user_message("Pay Bob 5", "u-1"))})
        )
        frames = []
        while (frame := ws.recv(timeout=30)) != "data: [DONE]\n\n":
            frames.append(frame)
    finally:
        ws.close()
    assert any("tool-approval-request" in f for f in frames)
    # The chat is alice's: stored under her id, and invisible to bob.
    assert stored_state(token_app, chat_id, user_id="alice").get(WALLET, 1000) == 1000
    with pytest.raises(AssertionError, match="no session"):
        stored_state(token_app, chat_id, user_id="bob")

"""WS /live speaking ai 7's stock ``WebSocketChatTransport`` protocol (a socket opened without
``?chatId=``): frames on the wire, in-process and on the real server.

The stock client itself (ai 7's transport and ``useChat`` state machine) drives the same
flows in the scenario catalogue (tests/test_scenarios.py); these tests pin what the frames
must be, including the refusals a stock client never provokes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.requests import HTTPConnection

from tests.support.ai7_socket import Reply, V7Socket
from tests.support.apps import user_from_header, user_from_token
from tests.support.rig import (
    InProcessApp,
    LiveServer,
    SocketClosed,
    Target,
    answer_approvals,
    assert_valid_stream,
    assistant_message,
    chat_body,
    in_process_app,
    post_stream,
    serve_in_thread,
    stored_events,
    stored_state,
    user_message,
)

BOTH = pytest.mark.parametrize("target", ["app", "server"], indirect=True)
WALLET = "demo:wallet_balance"


def new_chat() -> str:
    return f"v7-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def socket(target: Target) -> Iterator[V7Socket]:
    ws = V7Socket(target)
    yield ws
    ws.close()


def sequences(reply: Reply) -> list[int]:
    return [f["sequence"] for f in reply.frames if f["type"] == "chunk"]


def text_of(reply: Reply) -> str:
    return "".join(c["delta"] for c in reply.chunks if c["type"] == "text-delta")


# -- send ------------------------------------------------------------------------------------


@BOTH
def test_a_send_is_answered_with_numbered_chunks_and_end(socket: V7Socket) -> None:
    request_id = socket.send(new_chat(), user_message("Hello there", "u-1"))
    reply = socket.reply(request_id)
    assert reply.last == "end"
    assert sequences(reply) == list(range(len(reply.chunks)))
    assert reply.chunks[0]["type"] == "start" and reply.chunks[-1]["type"] == "finish"
    assert text_of(reply)
    assert_valid_stream(reply.stream(), ai_sdk=7)


@BOTH
def test_one_socket_serves_several_chats_at_once(socket: V7Socket, target: Target) -> None:
    chats = [new_chat() for _ in range(3)]
    requests = [
        socket.send(chat, user_message(f"Hello {i}", f"u-{i}")) for i, chat in enumerate(chats)
    ]
    for i, request_id in enumerate(requests):
        reply = socket.reply(request_id)
        assert reply.last == "end", reply.frames
        assert sequences(reply) == list(range(len(reply.chunks)))
        assert f'"Hello {i}"' in text_of(reply), "each request answers its own chat"
    # Each chat is its own session, holding its own message.
    for i, chat in enumerate(chats):
        assert f"Hello {i}" in str(stored_events(target, chat)[0].content)


@BOTH
def test_an_approval_is_answered_in_a_second_send(socket: V7Socket, target: Target) -> None:
    chat = new_chat()
    first = user_message("Send 50 dollars to Hanako", "u-1")
    asked = socket.reply(socket.send(chat, first))
    types = [c["type"] for c in asked.chunks]
    assert "tool-approval-request" in types, types
    message = answer_approvals(assistant_message(asked.stream()), True)
    done = socket.reply(socket.send(chat, first, message, messageId=message["id"]))
    assert done.last == "end"
    done_types = [c["type"] for c in done.chunks]
    assert "tool-output-available" in done_types, done_types
    # ai 7 client: the decision the server acted on is in the stream.
    responses = [c for c in done.chunks if c["type"] == "tool-approval-response"]
    assert [r["approved"] for r in responses] == [True]
    assert stored_state(target, chat)[WALLET] == 950


# -- refusals --------------------------------------------------------------------------------


@BOTH
def test_a_frame_without_a_request_id_closes_the_socket_with_a_reason(target: Target) -> None:
    for frame in ("not json", "[1, 2]", json.dumps({"type": "send", "id": "c"})):
        ws = V7Socket(target)
        try:
            ws.ws.send(frame)
            with pytest.raises(SocketClosed) as closed:
                ws.ws.recv(10)
            assert closed.value.code == 4400, frame
            assert closed.value.reason, frame
        finally:
            ws.close()


@BOTH
def test_malformed_frames_get_an_error_for_their_request(socket: V7Socket) -> None:
    cases: dict[str, dict[str, Any]] = {
        "unknown type": {"type": "hello"},
        "type not a string": {"type": ["send"]},
        "no headers": {"type": "send", "id": "c-1", "body": {}, "trigger": "submit-message",
                       "messages": []},
        "bad messages": {"type": "send", "id": "c-1", "headers": {}, "body": {},
                         "trigger": "submit-message", "messages": [{"role": "user"}]},
        "bad chat id": {"type": "resume", "id": "../etc", "headers": {}, "body": {}},
        # The body is the rest of the chat request, as on /stream: checked the same way.
        "bad body": {"type": "send", "id": "c-1", "headers": {}, "body": {"aiSdk": 8},
                     "trigger": "submit-message", "messages": [user_message("Hi", "u-1")]},
        "headers not strings": {"type": "send", "id": "c-1", "headers": {"x": 1}, "body": {},
                                "trigger": "submit-message",
                                "messages": [user_message("Hi", "u-1")]},
        "bad sequence": {"type": "resume", "id": "c-1", "headers": {}, "body": {},
                         "lastSequence": -2},
    }  # fmt: skip
    for name, frame in cases.items():
        request_id = f"r-{name.replace(' ', '-')}"
        socket.frame({**frame, "requestId": request_id})
        reply = socket.reply(request_id)
        assert [f["type"] for f in reply.frames] == ["error"], (name, reply.frames)
        assert reply.frames[0]["errorText"], name
        if name == "bad body":
            assert "aiSdk" in reply.frames[0]["errorText"]
    # The socket still serves.
    assert socket.reply(socket.send(new_chat(), user_message("Hi", "u-1"))).last == "end"


@BOTH
def test_an_abort_for_no_open_request_is_ignored(socket: V7Socket) -> None:
    socket.frame({"type": "abort", "requestId": "never-sent"})
    assert socket.reply(socket.send(new_chat(), user_message("Hi", "u-1"))).last == "end"
    assert "never-sent" not in socket.replies, "an abort of nothing is not answered"


# -- resume ----------------------------------------------------------------------------------


@BOTH
def test_resume_of_a_chat_with_nothing_running_is_no_active(socket: V7Socket) -> None:
    reply = socket.reply(socket.resume(new_chat()))
    assert [f["type"] for f in reply.frames] == ["no-active"]


# -- identity --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def token_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    with in_process_app(tmp_path_factory.mktemp("v7-token"), identity=user_from_token) as target:
        yield target


def test_the_frames_headers_name_the_user(token_app: InProcessApp) -> None:
    socket = V7Socket(token_app)
    try:
        chat = new_chat()
        refused = socket.reply(socket.send(chat, user_message("Pay Bob 5", "u-1")))
        assert [f["type"] for f in refused.frames] == ["error"]
        assert refused.frames[0]["errorText"] == "a valid token is needed"
        alice = {"authorization": "Bearer token-alice"}
        reply = socket.reply(socket.send(chat, user_message("Pay Bob 5", "u-1"), headers=alice))
        assert reply.last == "end"
        assert stored_state(token_app, chat, user_id="alice").get(WALLET, 1000) == 1000
        with pytest.raises(AssertionError, match="no session"):
            stored_state(token_app, chat, user_id="bob")
    finally:
        socket.close()


# -- abort, resume and stop, on the wire (tests/support/agents/tools.py: "slow N" runs N s) --

ALICE = {"x-test-user": "alice"}


@pytest.fixture(scope="module")
def resumable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with serve_in_thread(
        tmp_path_factory.mktemp("v7-resumable"),
        identity=user_from_header,
        agent="tests.support.agents.tools:slow_live_agent",
        resumable_streams=True,
    ) as server:
        yield server


@pytest.fixture
def alice(resumable: LiveServer) -> Iterator[V7Socket]:
    ws = V7Socket(resumable)
    yield ws
    ws.close()


def send_slow(socket: V7Socket, chat: str, seconds: float, message_id: str = "u-1") -> str:
    return socket.send(chat, user_message(f"slow {seconds:g}", message_id), headers=ALICE)


def test_abort_stops_the_run_and_frees_the_chat(alice: V7Socket, resumable: LiveServer) -> None:
    chat = new_chat()
    request_id = send_slow(alice, chat, 30)
    alice.chunks_until(request_id, 3)  # the tool call is out: the tool is running
    alice.frame({"type": "abort", "requestId": request_id})
    # The chat is free again at once (the busy wait would take seconds), and the aborted
    # request gets nothing more.
    follow_up = alice.send(chat, user_message("hi", "u-2"), headers=ALICE)
    reply = alice.reply(follow_up)
    assert reply.last == "end", reply.frames
    assert alice.replies[request_id].last == "chunk", "nothing after the abort"
    # Nothing left running to resume.
    assert resumable.http.get(f"/stream/{chat}/stream", headers=ALICE).status_code == 204


def test_a_request_id_still_open_is_not_taken_again(alice: V7Socket) -> None:
    chat = new_chat()
    request_id = send_slow(alice, chat, 30)
    alice.chunks_until(request_id, 1)
    alice.frame({"type": "resume", "requestId": request_id, "id": chat, "headers": ALICE,
                 "body": {}})  # fmt: skip
    errors = [f for f in alice.chunks_until(request_id, 1).frames if f["type"] == "error"]
    while not errors:
        frame = json.loads(alice.ws.recv(30))
        alice.replies[frame["requestId"]].frames.append(frame)
        errors = [f for f in alice.replies[request_id].frames if f["type"] == "error"]
    assert errors[0]["errorText"] == "this requestId is already open"
    alice.frame({"type": "abort", "requestId": request_id})


def test_a_stop_reaches_a_v7_socket_as_an_interrupted_answer(
    alice: V7Socket, resumable: LiveServer
) -> None:
    chat = new_chat()
    request_id = send_slow(alice, chat, 30)
    alice.chunks_until(request_id, 3)
    assert resumable.http.delete(f"/stream/{chat}/stream", headers=ALICE).status_code == 204
    reply = alice.reply(request_id)
    assert reply.last == "end"
    types = [c["type"] for c in reply.chunks]
    assert "abort" in types and "error" not in types, types
    assert reply.chunks[-1]["finishReason"] == "interrupted"
    assert_valid_stream(reply.stream(), ai_sdk=7)


def test_resume_on_another_socket_replays_the_running_response(
    alice: V7Socket, resumable: LiveServer
) -> None:
    chat = new_chat()
    request_id = send_slow(alice, chat, 1)
    alice.chunks_until(request_id, 1)
    other = V7Socket(resumable)
    try:
        resumed = other.reply(other.resume(chat, headers=ALICE), timeout=30)
    finally:
        other.close()
    original = alice.reply(request_id)
    assert resumed.frames[0]["type"] == "start"
    assert resumed.last == "end"
    assert resumed.chunks == original.chunks, "the same chunks, from the start"
    assert sequences(resumed) == list(range(len(resumed.chunks)))


def test_resume_from_a_sequence_sends_only_what_follows(
    alice: V7Socket, resumable: LiveServer
) -> None:
    chat = new_chat()
    request_id = send_slow(alice, chat, 1)
    alice.chunks_until(request_id, 2)
    other = V7Socket(resumable)
    try:
        resumed = other.reply(other.resume(chat, headers=ALICE, lastSequence=1))
    finally:
        other.close()
    original = alice.reply(request_id)
    assert sequences(resumed)[0] == 2
    assert resumed.chunks == original.chunks[2:]


def test_a_socket_that_leaves_lets_the_response_finish_for_a_resume(
    resumable: LiveServer,
) -> None:
    chat = new_chat()
    first = V7Socket(resumable)
    request_id = send_slow(first, chat, 1)
    first.chunks_until(request_id, 1)
    first.close()
    second = V7Socket(resumable)
    try:
        resumed = second.reply(second.resume(chat, headers=ALICE))
    finally:
        second.close()
    assert resumed.last == "end"
    outputs = [c["output"] for c in resumed.chunks if c["type"] == "tool-output-available"]
    assert outputs == [{"waited": 1.0}]
    assert resumed.chunks[-1]["finishReason"] == "stop"


def test_a_resume_for_another_user_finds_nothing(alice: V7Socket, resumable: LiveServer) -> None:
    chat = new_chat()
    request_id = send_slow(alice, chat, 1)
    alice.chunks_until(request_id, 1)
    bob = alice.resume(chat, headers={"x-test-user": "bob"})
    assert [f["type"] for f in alice.reply(bob).frames] == ["no-active"]
    assert alice.reply(request_id).last == "end"


# -- what ai 7 adds, and only for ai 7 ----------------------------------------------------------


@pytest.fixture(scope="module")
def test_agent_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    with in_process_app(
        tmp_path_factory.mktemp("v7-agent"), agent="tests.support.agents.tools:slow_live_agent"
    ) as target:
        yield target


def test_grounding_becomes_citations_for_ai7_only(test_agent_app: InProcessApp) -> None:
    socket = V7Socket(test_agent_app)
    try:
        reply = socket.reply(socket.send(new_chat(), user_message("cite", "u-1")))
    finally:
        socket.close()
    assert_valid_stream(reply.stream(), ai_sdk=7)
    ends = [c for c in reply.chunks if c["type"] == "text-end"]
    assert len(ends) == 1
    citations = ends[0]["citations"]
    text = text_of(reply)
    assert [(c["source"]["url"], c.get("citedText")) for c in citations] == [
        ("https://example.org/tokyo", "Tokyo is the capital of Japan."),
        ("https://example.org/tokyo", "It has about 14 million people."),
        ("https://example.org/census", "It has about 14 million people."),
    ]
    for citation in citations:
        assert text[citation["startIndex"] : citation["endIndex"]] == citation["citedText"]
    assert citations[0]["source"]["title"] == "Tokyo" and "title" not in citations[2]["source"]
    # The same answer on /stream: no citations for a client not known to be ai 7 ...
    plain = post_stream(test_agent_app, chat_body(new_chat(), user_message("cite", "u-1")))
    assert [c for c in plain.of_type("text-end") if "citations" in c] == []
    # ... unless the app says it is ai 7.
    opted = post_stream(
        test_agent_app, chat_body(new_chat(), user_message("cite", "u-1"), aiSdk=7), ai_sdk=7
    )
    assert opted.of_type("text-end")[0]["citations"] == citations


def test_stream_sends_approval_responses_only_when_the_body_says_ai7(app: InProcessApp) -> None:
    for ai_sdk in (None, 7):
        extra = {} if ai_sdk is None else {"aiSdk": ai_sdk}
        chat = new_chat()
        first = user_message("Send 50 dollars to Hanako", "u-1")
        asked = post_stream(app, chat_body(chat, first, **extra), ai_sdk=ai_sdk or 6)
        message = answer_approvals(assistant_message(asked), True)
        done = post_stream(
            app,
            chat_body(chat, first, message, messageId=message["id"], **extra),
            ai_sdk=ai_sdk or 6,
        )
        responses = done.of_type("tool-approval-response")
        assert len(responses) == (1 if ai_sdk == 7 else 0), done.types()


def test_an_unknown_ai_sdk_version_is_refused(app: InProcessApp) -> None:
    result = app.http.post("/stream", json=chat_body(new_chat(), user_message("hi", "u"), aiSdk=8))
    assert result.status_code == 422
    assert "aiSdk" in result.json()["detail"]


async def identity_that_breaks(connection: HTTPConnection) -> str:
    if connection.headers.get("x-break"):
        raise RuntimeError("the identity service is down")
    return "local-user"


def test_a_failure_of_ours_is_that_requests_error_with_a_reference(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with in_process_app(
        tmp_path_factory.mktemp("v7-broken"), identity=identity_that_breaks
    ) as target:
        socket = V7Socket(target)
        try:
            broken = socket.reply(
                socket.send(new_chat(), user_message("Hi", "u-1"), headers={"x-break": "1"})
            )
            assert [f["type"] for f in broken.frames] == ["error"]
            assert broken.frames[0]["errorText"].startswith(
                "the server could not answer this request (ref "
            )
            assert "identity service" not in broken.frames[0]["errorText"]
            assert socket.reply(socket.send(new_chat(), user_message("Hi", "u-1"))).last == "end"
        finally:
            socket.close()

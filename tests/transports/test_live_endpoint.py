"""WS /live: real run_live, offline live model, SQLite store; in-process, with the handshake,
a text chat and a client that goes away also on the wire (the real server).

Every response is checked like a /stream response (protocol invariants, strict 6.0.25 chunk
fields); control frames are plain JSON."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.rig import (
    InProcessApp,
    LiveServer,
    LiveSocket,
    SocketClosed,
    StreamResult,
    Target,
    answer_approvals,
    assert_valid_stream,
    assistant_message,
    chat_body,
    in_process_app,
    post_stream,
    stored_state,
    user_message,
)
from tests.support.waiting import wait_until

WALLET = "demo:wallet_balance"


def new_chat() -> str:
    return f"live-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def socket(app: InProcessApp) -> Iterator[LiveSocket]:
    live = LiveSocket(app, new_chat())
    yield live
    live.close()


class LiveChat:
    """A conversation on one socket, holding the messages as the client would."""

    def __init__(self, live: LiveSocket) -> None:
        self.live = live
        self.messages: list[dict[str, Any]] = []
        self.responses: list[StreamResult] = []
        self.decisions: dict[str, dict[str, Any]] = {}  # approvals given, by call

    def say(self, text: str) -> StreamResult:
        self.messages.append(user_message(text, f"u-{uuid.uuid4().hex[:8]}"))
        self.responses = []
        return self._record(self.live.message(*self.messages))

    def answer(self, *decisions: bool, output: dict[str, Any] | None = None) -> StreamResult:
        message = self.assistant()
        answer_approvals(message, *decisions)
        for part in message["parts"]:
            if "approved" in part.get("approval", {}):
                self.decisions[part["toolCallId"]] = part["approval"]
        if output is not None:
            message["parts"][-1].update(state="output-available", output=output)
        self.messages[-1] = message
        return self._record(self.live.message(*self.messages, messageId=message["id"]))

    def assistant(self) -> dict[str, Any]:
        """The assistant message as the client holds it: built from the responses, with the
        approvals the user gave."""
        message = assistant_message(*self.responses)
        for part in message["parts"]:
            decision = self.decisions.get(part.get("toolCallId", ""))
            if decision is not None and part.get("state") == "approval-requested":
                part.update(state="approval-responded", approval=decision)
        return message

    def _record(self, result: StreamResult, errors_expected: bool = False) -> StreamResult:
        assert_valid_stream(result)
        if not errors_expected:
            assert not result.of_type("error"), result.of_type("error")
        self.responses.append(result)
        message = self.assistant()
        if self.messages[-1]["role"] == "assistant":
            self.messages[-1] = message
        else:
            self.messages.append(message)
        return result


BOTH = pytest.mark.parametrize("target", ["app", "server"], indirect=True)


@BOTH
def test_envelope_frames_without_a_chat_id_are_refused_with_a_reason(target: Target) -> None:
    """Without ?chatId= a socket speaks ai 7's protocol (tests/transports/test_live_v7.py)."""
    ws = target.connect("/live")
    try:
        ws.send(json.dumps({"type": "ping", "timestamp": 1}))
        with pytest.raises(SocketClosed) as closed:
            ws.recv(timeout=5)
        assert closed.value.code == 4400
        assert "?chatId=" in closed.value.reason
    finally:
        ws.close()


@BOTH
def test_ai7_frames_on_an_envelope_socket_are_refused_with_a_reason(target: Target) -> None:
    ws = target.connect(f"/live?chatId={new_chat()}")
    try:
        ws.send(json.dumps({"type": "send", "requestId": "r1", "id": "c", "messages": []}))
        with pytest.raises(SocketClosed) as closed:
            ws.recv(timeout=5)
        assert closed.value.code == 4400
        assert "without ?chatId=" in closed.value.reason
    finally:
        ws.close()


@BOTH
def test_a_second_socket_on_the_same_chat_is_refused(target: Target) -> None:
    with LiveSocket(target, new_chat()) as first, LiveSocket(target, first.chat_id) as second:
        with pytest.raises(SocketClosed) as closed:
            second.ws.recv(timeout=5)
        assert closed.value.code == 4409


def test_ping_and_bad_frames_get_control_replies(socket: LiveSocket) -> None:
    socket.send({"type": "ping", "timestamp": 123})
    assert socket.control() == {"type": "pong", "timestamp": 123}
    socket.ws.send("{not json")
    assert "not valid JSON" in socket.control()["message"]
    socket.send({"type": "telepathy"})
    assert "unknown frame type" in socket.control()["message"]
    # The socket still works.
    result = socket.message(user_message("hello", "u1"))
    assert result.types()[-1] == "finish"


@BOTH
def test_text_turns_on_one_socket(target: Target) -> None:
    with LiveSocket(target, new_chat()) as socket:
        text_turns(socket)


def text_turns(socket: LiveSocket) -> None:
    chat = LiveChat(socket)
    first = chat.say("Hello there")
    second = chat.say("And hello again")
    assert first.chunks[0]["messageId"] != second.chunks[0]["messageId"]
    assert 'You said: "Hello there"' in first.text()
    assert 'You said: "And hello again"' in second.text()
    assert "Hello there" not in second.text(), "nothing leaks from the first turn"
    assert len(first.of_type("text-delta")) >= 2  # the first at once (docs/adr/0048)
    assert first.of_type("finish")[0]["finishReason"] == "stop"


def test_server_tool(socket: LiveSocket) -> None:
    result = LiveChat(socket).say("What's the weather in Tokyo?")
    (call,) = result.of_type("tool-input-available")
    assert call["toolName"] == "get_weather"
    assert result.of_type("tool-output-available")[0]["output"]["temperature"] == 18
    assert "18°C" in result.text()


def test_approval_round_trip(app: InProcessApp, socket: LiveSocket) -> None:
    chat = LiveChat(socket)
    first = chat.say("Send 50 dollars to Hanako")
    # The step boundary wraps the whole tool call and its approval request.
    assert first.types() == [
        "start", "start-step", "tool-input-start", "tool-input-available",
        "tool-approval-request", "finish-step", "finish",
    ]  # fmt: skip
    assert first.of_type("finish")[0]["finishReason"] == "tool-calls"
    second = chat.answer(True)
    assert second.chunks[0] == {"type": "start", "messageId": first.chunks[0]["messageId"]}
    assert second.types()[1] == "tool-output-available"
    assert "Sent 50 USD to Hanako" in second.text()
    assert stored_state(app, socket.chat_id)[WALLET] == 950


def test_denied_approval(app: InProcessApp, socket: LiveSocket) -> None:
    chat = LiveChat(socket)
    first = chat.say("Send 50 dollars to Hanako")
    (call,) = first.of_type("tool-input-available")
    second = chat.answer(False)
    assert {"type": "tool-output-denied", "toolCallId": call["toolCallId"]} in second.chunks
    assert "not done" in second.text()
    assert stored_state(app, socket.chat_id).get(WALLET, 1000) == 1000


def test_unknown_approval_is_refused(socket: LiveSocket) -> None:
    chat = LiveChat(socket)
    chat.say("Send 50 dollars to Hanako")
    message = answer_approvals(assistant_message(*chat.responses), True)
    message["parts"][-1]["approval"]["id"] = "apr_forged"
    chat.messages[-1] = message
    refused = socket.message(*chat.messages, messageId=message["id"])
    (error,) = refused.of_type("error") if refused.chunks else [None]
    assert error is not None and "apr_forged" in error["errorText"]


def test_two_parallel_approvals(app: InProcessApp, socket: LiveSocket) -> None:
    chat = LiveChat(socket)
    first = chat.say("Pay Alice 10 and Bob 20")
    assert len(first.of_type("tool-approval-request")) == 2
    second = chat.answer(True, False)
    kinds = [c["type"] for c in second.chunks if c["type"].startswith("tool-output")]
    assert sorted(kinds) == ["tool-output-available", "tool-output-denied"]
    assert stored_state(app, socket.chat_id)[WALLET] == 990


def test_browser_tool(socket: LiveSocket) -> None:
    chat = LiveChat(socket)
    first = chat.say("Play music, track 2")
    assert first.of_type("finish")[0]["finishReason"] == "tool-calls"
    message = assistant_message(*chat.responses)
    message["parts"][-1].update(state="output-available", output={"success": True, "track": 2})
    chat.messages[-1] = message
    second = chat._record(socket.message(*chat.messages, messageId=message["id"]))
    assert "Now playing BGM track 2" in second.text()


def test_location_approval_then_browser(socket: LiveSocket) -> None:
    chat = LiveChat(socket)
    chat.say("Where am I?")
    rearm = chat.answer(True)
    assert rearm.types() == ["start", "tool-input-available", "finish"]
    message = assistant_message(*chat.responses)
    part = message["parts"][-1]
    part.update(state="output-available", output={"latitude": 1.5, "longitude": 2.5})
    part["approval"] = {
        "id": chat.responses[0].of_type("tool-approval-request")[0]["approvalId"],
        "approved": True,
    }
    chat.messages[-1] = message
    answer = chat._record(socket.message(*chat.messages, messageId=message["id"]))
    assert "latitude 1.5, longitude 2.5" in answer.text()


def test_a_result_after_the_hand_back_is_applied_and_a_second_is_refused_with_why(
    socket: LiveSocket, caplog: pytest.LogCaptureFixture
) -> None:
    # The page's tool_result comes after the approval's response has closed; its resend of the
    # approval then brings nothing new, and gets the answer (issue 28; it was refused, 409).
    chat = LiveChat(socket)
    chat.say("Where am I?")
    (call,) = chat.answer(True).of_type("tool-input-available")
    where = {"latitude": 1.5, "longitude": 2.5}
    frame = {"type": "tool_result", "toolCallId": call["toolCallId"], "result": where}
    socket.send(frame)
    answer = chat._record(socket.message(*chat.messages, messageId=chat.messages[-1]["id"]))
    assert "latitude 1.5, longitude 2.5" in answer.text()
    with caplog.at_level(logging.INFO, logger="adk_stream_protocol"):
        socket.send(frame)
        refused = socket.control()
    assert "(its result was given already)" in refused["message"]
    assert "its result was given already" in caplog.text


def test_a_message_while_a_response_streams_is_refused_not_interleaved(socket: LiveSocket) -> None:
    body = chat_body(socket.chat_id, user_message("Hello there", "u1"))
    socket.send({"type": "message", **body})
    socket.send({"type": "message", **chat_body(socket.chat_id, user_message("again", "u2"))})
    result = socket.response()
    assert_valid_stream(result)
    assert 'You said: "Hello there"' in result.text()
    assert "still streaming" in socket.control()["message"]


def test_interrupt_ends_the_turn_and_the_socket_stays_usable(socket: LiveSocket) -> None:
    socket.send({"type": "message", **chat_body(socket.chat_id, user_message("Hello there", "u1"))})
    socket.send({"type": "interrupt", "reason": "user_abort"})
    cut = socket.response()
    assert_valid_stream(cut)
    after = socket.message(
        user_message("Hello there", "u1"),
        {"id": cut.chunks[0]["messageId"], "role": "assistant", "parts": []},
        user_message("still there?", "u2"),
    )
    assert 'You said: "still there?"' in after.text()


def test_disconnect_during_a_pending_approval_runs_nothing(server: LiveServer) -> None:
    live = LiveSocket(server, new_chat())
    LiveChat(live).say("Send 50 dollars to Hanako")
    live.close()
    again = reconnect(server, live.chat_id)  # the chat is free again
    try:
        # Its run has ended (the socket holds the chat until then): nothing was paid.
        assert stored_state(server, live.chat_id).get(WALLET, 1000) == 1000
        result = again.message(user_message("hello", "u9"))
        assert result.types()[-1] == "finish"
    finally:
        again.close()


def reconnect(server: LiveServer, chat_id: str, within: float = 10) -> LiveSocket:
    """A new socket on the chat, once the server has let the old one go (until then it
    closes new ones with 4409)."""

    def opened() -> LiveSocket | None:
        live = LiveSocket(server, chat_id)
        try:
            live.send({"type": "ping", "timestamp": 1})
            assert live.control() == {"type": "pong", "timestamp": 1}
            return live
        except SocketClosed as closed:
            live.close()
            assert closed.code == 4409, closed
            return None

    # The server lets the old socket go after it closed: only a new socket can tell.
    return wait_until(opened, "the chat free for a new socket", within=within, every=0.05)


def test_a_chat_started_on_stream_continues_on_live(app: InProcessApp) -> None:
    chat_id = new_chat()
    first = post_stream(app, chat_body(chat_id, user_message("Hello from stream", "u1")))
    live = LiveSocket(app, chat_id)
    try:
        assistant = {"id": first.chunks[0]["messageId"], "role": "assistant", "parts": []}
        result = live.message(
            user_message("Hello from stream", "u1"),
            assistant,
            user_message("What did I say first?", "u2"),
        )
        assert 'Your first message was: "Hello from stream"' in result.text()
    finally:
        live.close()


@pytest.fixture(scope="module")
def quick_timeout_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    with in_process_app(tmp_path_factory.mktemp("timeout"), approval_timeout_seconds=0.1) as target:
        yield target


def test_approval_timeout_is_a_tool_error(quick_timeout_app: InProcessApp) -> None:
    live = LiveSocket(quick_timeout_app, new_chat())
    try:
        chat = LiveChat(live)
        first = chat.say("Send 50 dollars to Hanako")
        (call,) = first.of_type("tool-input-available")
        # Six times the timeout, which began before the request was sent: its lapse is the test.
        time.sleep(0.6)
        late = chat.answer(True)
        (error,) = late.of_type("tool-output-error")
        assert error["toolCallId"] == call["toolCallId"]
        assert "timed out" in error["errorText"]
        assert stored_state(quick_timeout_app, live.chat_id).get(WALLET, 1000) == 1000
    finally:
        live.close()


def test_sequential_approvals_hold_back_text_until_the_final_response(
    app: InProcessApp, socket: LiveSocket
) -> None:
    chat = LiveChat(socket)
    first = chat.say("Pay Alice 10, then pay Bob 20")
    (alice,) = first.of_type("tool-input-available")
    middle = chat.answer(True)
    assert not middle.of_type("text-delta") and not middle.of_type("tool-output-available")
    assert middle.of_type("tool-input-available")[0]["input"]["recipient"] == "Bob"
    final = chat.answer(True)
    outputs = [c["toolCallId"] for c in final.of_type("tool-output-available")]
    assert outputs[0] == alice["toolCallId"] and len(outputs) == 2
    assert final.text().index("Now paying Bob") < final.text().index("Wallet balance: 970")
    assert stored_state(app, socket.chat_id)[WALLET] == 970


def test_a_message_with_nothing_to_say_is_refused_clearly(socket: LiveSocket) -> None:
    empty = socket.message({"id": "u1", "role": "user", "parts": [{"type": "text", "text": ""}]})
    assert [c["type"] for c in empty.chunks] == ["error"]
    assert "has no text or file" in empty.chunks[0]["errorText"]
    assert LiveChat(socket).say("hello").of_type("finish")  # the socket still serves


@pytest.fixture(scope="module")
def small_frame_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    with in_process_app(tmp_path_factory.mktemp("frames"), max_frame_bytes=2000) as target:
        yield target


def test_an_oversized_frame_closes_the_socket_with_1009(small_frame_app: InProcessApp) -> None:
    with LiveSocket(small_frame_app, new_chat()) as live:
        live.send({"type": "message", **chat_body(live.chat_id, user_message("x" * 5000, "u1"))})
        with pytest.raises(SocketClosed) as closed:
            live.ws.recv(timeout=5)
        assert closed.value.code == 1009


def read_until_finish(socket: LiveSocket, messages: list[dict[str, Any]]) -> str:
    """Send the messages, read the answer up to its `finish` chunk (not its [DONE]), and
    append the assistant message it starts; its id is returned."""
    socket.send({"type": "message", **chat_body(socket.chat_id, *messages)})
    frames: list[str] = []
    while '"type":"finish"' not in (frame := socket.ws.recv(timeout=30)):
        frames.append(frame)
    message_id: str = json.loads(frames[0].removeprefix("data: "))["messageId"]
    messages.append({"id": message_id, "role": "assistant", "parts": []})
    return message_id


def test_an_interrupt_as_the_response_ends_answers_after_its_done(socket: LiveSocket) -> None:
    """The client stops just as the answer ends on its own: the server is between the
    `finish` chunk and the [DONE] (storing the chat's record). Whatever the client sends
    after its interrupt is answered after that [DONE], so a page that stops and then pings
    or sends never sees the old response still open (found by tests/test_fuzz.py)."""
    messages: list[dict[str, Any]] = []
    for round_ in range(5):
        messages.append(user_message(f"Hello {round_}", f"u{round_}"))
        read_until_finish(socket, messages)
        socket.send({"type": "interrupt"})
        socket.send({"type": "ping", "timestamp": f"after-{round_}"})
        after = socket.ws.recv(timeout=30)
        assert after == "data: [DONE]\n\n", f"round {round_}: {after!r} came before the [DONE]"
        assert json.loads(socket.ws.recv(timeout=30)) == {
            "type": "pong",
            "timestamp": f"after-{round_}",
        }


def test_a_message_as_the_response_ends_is_answered_after_its_done(socket: LiveSocket) -> None:
    """The client sends its next message just as the answer ends: between the `finish`
    chunk and the [DONE]. The answer to it, a refusal or a new response, comes after that
    [DONE], never inside the old response (found by tests/test_fuzz.py)."""
    messages: list[dict[str, Any]] = []
    for round_ in range(6):
        messages.append(user_message(f"Hello {round_}", f"u{round_}"))
        read_until_finish(socket, messages)
        refused = round_ % 2 == 0
        nxt = user_message(f"Next {round_}", f"n{round_}")
        sent = [*messages, {**nxt, "role": "robot"}] if refused else [*messages, nxt]
        socket.send({"type": "message", **chat_body(socket.chat_id, *sent)})
        after = socket.ws.recv(timeout=30)
        assert after == "data: [DONE]\n\n", f"round {round_}: {after!r} came before the [DONE]"
        answer = socket.response()
        if refused:
            assert answer.types() == ["error"], answer.types()
            assert "role" in answer.chunks[0]["errorText"]
        else:
            assert_valid_stream(answer)
            messages.append(nxt)
            messages.append({"id": answer.chunks[0]["messageId"], "role": "assistant", "parts": []})


@BOTH
def test_a_socket_that_comes_while_the_old_one_leaves_waits_for_it(target: Target) -> None:
    """A page that reloads: its new socket arrives while the old one still ends its run and
    hands its waiting approval over (ADR 0047). It gets the chat, not 4409; asked to resume,
    it is told at once that no response is being written (its client waits for that)."""
    chat_id = new_chat()
    for round_ in range(3):
        old = LiveSocket(target, chat_id)
        if round_ == 0:
            LiveChat(old).say("Send 50 dollars to Hanako")  # an approval waits in its run
        else:
            old.send({"type": "ping", "timestamp": round_})
            assert old.control() == {"type": "pong", "timestamp": round_}
        old.close()
        with LiveSocket(target, chat_id, resume=True) as new:  # at once: no retry on 4409
            assert new.control() == {"type": "no-active"}
            new.send({"type": "ping", "timestamp": 10 + round_})
            assert new.control() == {"type": "pong", "timestamp": 10 + round_}

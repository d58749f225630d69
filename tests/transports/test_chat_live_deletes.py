"""``DELETE /chats/{chatId}`` while a ``/live?chatId=`` socket holds the chat (issue 25,
docs/adr/0043): the delete's stop closes the socket (4410) after its open response's
``[DONE]``, waits for it to let the chat go, and answers 204; nothing of the chat is left and
nothing it waited for runs. The real app in this process on SQLite, the real ``run_live``;
two instances on PostgreSQL and Redis are in test_scale_out.py."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.rig import (
    InProcessApp,
    LiveSocket,
    SocketClosed,
    StreamResult,
    Target,
    answer_approvals,
    assistant_message,
    chat_body,
    in_process_app,
    serve_in_thread,
    user_message,
)

PAYMENT = "Send 50 dollars to Hanako"  # the demo's approval


def new_chat(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def closed_as_deleted(socket: LiveSocket) -> SocketClosed:
    """The socket's next frame is its close: 4410, with a reason."""
    with pytest.raises(SocketClosed) as closed:
        frame = socket.ws.recv(timeout=10)
        raise AssertionError(f"a frame after the delete: {frame}")
    assert closed.value.code == 4410, closed.value
    assert closed.value.reason == "this chat was deleted"
    return closed.value


def approvals(app: InProcessApp, outcome: str) -> float:
    text = app.http.get("/metrics").text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "adk_stream_approvals_total"
        and sample.labels == {"transport": "live", "outcome": outcome}
    )


def asked_then_deleted(app: InProcessApp, chat_id: str, text: str, waiting: str) -> StreamResult:
    """On a socket: ask, find the chat waiting (``waiting``: for an approval or the browser),
    delete it; the socket is closed as deleted and the delete answered 204."""
    socket = LiveSocket(app, chat_id)
    try:
        asked = socket.message(user_message(text, "u1"))
        assert app.http.get(f"/chats/{chat_id}").json()["waiting"] == waiting
        deleted = app.http.delete(f"/chats/{chat_id}")
        closed_as_deleted(socket)
    finally:
        socket.close()
    assert deleted.status_code == 204, deleted.text
    return asked


def assert_gone(app: Target, chat_id: str) -> None:
    assert app.http.get(f"/chats/{chat_id}").status_code == 404
    assert app.http.get(f"/stream/{chat_id}/stream").status_code == 204  # nothing to resume
    assert app.http.delete(f"/chats/{chat_id}").status_code == 404
    assert chat_id not in [c["id"] for c in app.http.get("/chats").json()["chats"]]


def test_a_delete_closes_the_live_socket_that_answers_and_removes_the_chat(
    tmp_path: Path,
) -> None:
    """The tests' slow live model: the socket's open response ends (its `finish`, then
    `[DONE]`), the socket closes with 4410, the delete answers 204; a new socket on the same
    chat id starts a fresh chat."""
    with in_process_app(tmp_path, agent="tests.support.agents.tools:slow_live_agent") as app:
        chat_id = new_chat("answering")
        socket = LiveSocket(app, chat_id)
        try:
            socket.send({"type": "message", **chat_body(chat_id, user_message("hello", "u1"))})
            assert json.loads(socket.ws.recv(10).removeprefix("data: "))["type"] == "start"
            deleted = app.http.delete(f"/chats/{chat_id}")
            rest = socket.response()
            closed_as_deleted(socket)
        finally:
            socket.close()
        assert deleted.status_code == 204, deleted.text
        assert rest.of_type("finish") == [{"type": "finish", "finishReason": "other"}]
        assert rest.payloads[-1] == "[DONE]"
        assert_gone(app, chat_id)

        with LiveSocket(app, chat_id) as again:
            answer = again.message(user_message("hi", "u9"))
        assert answer.of_type("finish")[0]["finishReason"] == "stop"
        messages = app.http.get(f"/chats/{chat_id}").json()["messages"]
        assert (messages[0]["id"], messages[0]["role"]) == ("u9", "user")
        assert len(messages) == 2, "the deleted chat's messages are not in the new one"


def test_a_message_sent_as_the_chat_is_deleted_leaves_nothing_behind(tmp_path: Path) -> None:
    """A message frame the socket is handling as the delete arrives: its response (if it
    opened one) ends before the close, and the chat is removed after it, row and all."""
    with in_process_app(tmp_path, agent="tests.support.agents.tools:slow_live_agent") as app:
        chat_id = new_chat("racing")
        socket = LiveSocket(app, chat_id)
        try:
            socket.send({"type": "ping", "timestamp": 1})
            assert json.loads(socket.ws.recv(10))["type"] == "pong"  # the chat's session exists
            socket.send({"type": "message", **chat_body(chat_id, user_message("hello", "u1"))})
            deleted = app.http.delete(f"/chats/{chat_id}")
            frames = []
            with pytest.raises(SocketClosed) as closed:
                while True:
                    frames.append(socket.ws.recv(timeout=10))
        finally:
            socket.close()
        assert deleted.status_code == 204, deleted.text
        assert closed.value.code == 4410
        assert not frames or frames[-1] == "data: [DONE]\n\n", frames
        assert_gone(app, chat_id)


def test_a_delete_closes_a_socket_whose_approval_waits_and_the_tool_never_runs(
    tmp_path: Path,
) -> None:
    """The demo's payment waits for approval on the socket: the delete cancels it (counted
    as such, never approved), and the approval sent again on a new socket answers nothing."""
    with in_process_app(tmp_path, metrics=True) as app:
        chat_id = new_chat("approval")
        asked = asked_then_deleted(app, chat_id, PAYMENT, "approval")
        assert asked.of_type("tool-approval-request"), asked.types()
        assert approvals(app, "cancelled") == 1
        assert approvals(app, "approved") == 0
        assert_gone(app, chat_id)

        approved = answer_approvals(assistant_message(asked), True)
        with LiveSocket(app, chat_id) as again:
            late = again.message(user_message(PAYMENT, "u1"), approved)
        assert late.of_type("error"), late.types()
        assert not late.of_type("tool-output-available")
        assert approvals(app, "approved") == 0


def test_a_delete_closes_a_socket_whose_browser_call_waits_and_no_output_is_taken(
    tmp_path: Path,
) -> None:
    """The demo's music player waits for the page's output: after the delete, that output
    sent on a new socket answers nothing, and the new chat holds none of it."""
    with in_process_app(tmp_path) as app:
        chat_id = new_chat("browser")
        asked = asked_then_deleted(app, chat_id, "Play music, track 2", "browser")
        assert asked.of_type("finish")[0]["finishReason"] == "tool-calls"
        assert_gone(app, chat_id)

        output = assistant_message(asked)
        output["parts"][-1].update(state="output-available", output={"success": True, "track": 2})
        with LiveSocket(app, chat_id) as again:
            late = again.message(user_message("Play music, track 2", "u1"), output)
        assert late.of_type("error"), late.types()
        assert "Now playing" not in late.text()


def test_a_delete_ends_the_answer_a_socket_that_left_lets_run_on(tmp_path: Path) -> None:
    """With resumable streams a socket that drops lets its open response run on, for a new
    socket to resume; the chat's delete (as a stop) ends it at once instead of waiting.
    Real uvicorn: the socket is really gone."""
    with serve_in_thread(
        tmp_path,
        agent="tests.support.agents.tools:slow_live_agent",
        resumable_streams=True,
        chat_busy_timeout_seconds=1,
    ) as server:
        chat_id = new_chat("left")
        with LiveSocket(server, chat_id) as socket:
            socket.send({"type": "message", **chat_body(chat_id, user_message("hello", "u1"))})
            assert json.loads(socket.ws.recv(10).removeprefix("data: "))["type"] == "start"
        assert server.http.get(f"/chats/{chat_id}").json()["active"] is True  # running on
        deleted = server.http.delete(f"/chats/{chat_id}")
        assert deleted.status_code == 204, deleted.text
        assert_gone(server, chat_id)


def test_a_socket_waiting_for_the_chat_as_it_is_deleted_is_closed_and_starts_nothing(
    tmp_path: Path,
) -> None:
    """A second socket resumes the answer a dropped socket lets run on, then waits for the
    chat: the delete ends that answer, and the waiting socket, whether it gets the chat before
    the delete or after, closes with 4410 without starting a run (no session is made again).
    Real uvicorn: the first socket is really gone."""
    with serve_in_thread(
        tmp_path, agent="tests.support.agents.tools:slow_live_agent", resumable_streams=True
    ) as server:
        chat_id = new_chat("waiting")
        with LiveSocket(server, chat_id) as first:
            first.send({"type": "message", **chat_body(chat_id, user_message("hello", "u1"))})
            assert json.loads(first.ws.recv(10).removeprefix("data: "))["type"] == "start"
        second = server.connect(f"/live?chatId={chat_id}&resume=true")
        try:
            assert json.loads(second.recv(10).removeprefix("data: "))["type"] == "start"
            deleted = server.http.delete(f"/chats/{chat_id}")
            with pytest.raises(SocketClosed) as closed:
                while second.recv(10) != "data: [DONE]\n\n":
                    pass  # the replayed answer, to its end
                second.recv(10)
        finally:
            second.close()
        assert deleted.status_code == 204, deleted.text
        assert (closed.value.code, closed.value.reason) == (4410, "this chat was deleted")
        assert_gone(server, chat_id)  # (its DELETE is a 404: no session either)


def test_a_chat_that_does_not_come_free_is_refused_with_a_reason_and_kept(
    tmp_path: Path,
) -> None:
    """A holder that does not let the chat go (here the tests hold its lease, as a stalled
    answer would): after the busy timeout the delete says why, and nothing is removed."""
    with in_process_app(tmp_path, chat_busy_timeout_seconds=0.3) as app:
        chat_id = new_chat("held")
        with LiveSocket(app, chat_id) as socket:
            socket.message(user_message("Hello there", "u1"))
        portal, leases = app.http.portal, app.app.state.bridge.coordination.leases
        assert portal is not None
        lease = portal.call(leases.acquire, ("local-user", chat_id), 5)
        try:
            refused = app.http.delete(f"/chats/{chat_id}")
        finally:
            portal.call(lease.release)
        assert refused.status_code == 409
        assert "did not come free in time" in refused.json()["detail"]
        assert app.http.get(f"/chats/{chat_id}").status_code == 200  # nothing was removed
        assert app.http.delete(f"/chats/{chat_id}").status_code == 204

"""/live state stays in its scope: in process (Starlette's TestClient), the real app, the real
ADK live runner and the offline model, the in-memory store.

What a socket, a turn and a response hold is gone when they end: the chat lease, waiting
calls, the chunk log. And a disconnect gives a waiting browser call the right reason.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.testclient import WebSocketTestSession

from adk_stream_protocol import create_app
from adk_stream_protocol.coordination.local import LocalChatLeases, LocalChunkLogs
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.protocol.tool_calls import DISCONNECTED_RESULT
from adk_stream_protocol.turns.bridge import Bridge, bridge_of
from tests.support.rig import chat_body, user_message
from tests.support.waiting import wait_until

USER = "local-user"


@pytest.fixture
def client() -> Iterator[TestClient]:
    settings = Settings(
        session_store="memory://",
        model="offline-demo",
        playground_dir=None,
        trusted_hosts=["testserver"],  # the TestClient's host
    )
    with TestClient(create_app(settings=settings)) as client:
        yield client


def bridge(client: TestClient) -> Bridge:
    return bridge_of(client.app.state)  # type: ignore[attr-defined]


def response_events(socket: WebSocketTestSession) -> list[dict[str, Any]]:
    """One response's chunks, read up to its [DONE]."""
    chunks = []
    while (text := socket.receive_text()) != "data: [DONE]\n\n":
        chunks.append(json.loads(text.removeprefix("data: ")))
    return chunks


def stored_results(client: TestClient, chat_id: str, call_id: str) -> list[Any]:
    async def read() -> list[Any]:
        sessions = bridge(client).sessions
        session = await sessions.open(USER, chat_id)
        return [
            r.response
            for e in session.events
            for r in e.get_function_responses()
            if r.id == call_id
        ]

    assert client.portal is not None
    return client.portal.call(read)


def test_a_disconnect_gives_a_waiting_browser_call_the_user_left_result(
    client: TestClient,
) -> None:
    chat_id = f"chat-{uuid.uuid4().hex[:8]}"
    with client.websocket_connect(f"/live?chatId={chat_id}") as socket:
        socket.send_json(
            {"type": "message", **chat_body(chat_id, user_message("Play music, track 2", "u1"))}
        )
        chunks = response_events(socket)
    (call,) = [c for c in chunks if c["type"] == "tool-input-available"]
    assert chunks[-1]["finishReason"] == "tool-calls"
    # The run ends after the socket; its last write lands shortly after, and is all there is
    # to see of it.
    results = wait_until(
        lambda: stored_results(client, chat_id, call["toolCallId"]),
        "a result of the browser call",
        every=0.05,
    )
    assert results == [DISCONNECTED_RESULT]


def test_nothing_of_a_socket_stays_after_it_closes(client: TestClient) -> None:
    coordination = bridge(client).coordination
    leases, logs = coordination.leases, coordination.chunk_logs
    assert isinstance(leases, LocalChatLeases) and isinstance(logs, LocalChunkLogs)
    chat_id = f"chat-{uuid.uuid4().hex[:8]}"
    with client.websocket_connect(f"/live?chatId={chat_id}") as socket:
        socket.send_json({"type": "message", **chat_body(chat_id, user_message("Hello", "u1"))})
        assert response_events(socket)[-1]["type"] == "finish"
        assert logs.active() == 0  # the response ended: its log is gone
        assert leases.held() == 1  # the socket holds its chat
        # A second turn, and the same message again is refused, not answered twice.
        socket.send_json({"type": "message", **chat_body(chat_id, user_message("Again", "u2"))})
        assert "Again" in "".join(c.get("delta", "") for c in response_events(socket))
        socket.send_json({"type": "message", **chat_body(chat_id, user_message("Again", "u2"))})
        refused = response_events(socket)
        assert refused[0]["type"] == "error" and "already sent" in refused[0]["errorText"]
    # The run lets go of its lease as it ends, after the socket: the leases have no event.
    wait_until(lambda: not leases.held(), "the chat lease let go after its socket")
    assert client.portal is not None
    assert client.portal.call(coordination.pending.waiting, (USER, chat_id)) == []


def test_a_live_run_that_cannot_start_answers_the_first_message_with_an_error() -> None:
    # This agent's model has no live connection. The run starts (and fails) when the socket
    # opens; the first message still gets the failure as its response's error, then the
    # socket closes with 1011, as when the run starts with the message.
    from tests.support.agents.tools import root_agent

    settings = Settings(
        session_store="memory://", playground_dir=None, trusted_hosts=["testserver"]
    )
    with (
        TestClient(create_app(root_agent, settings=settings)) as client,
        client.websocket_connect("/live?chatId=c-no-live") as socket,
    ):
        socket.send_json({"type": "message", **chat_body("c-no-live", user_message("hi", "u1"))})
        assert [c["type"] for c in response_events(socket)] == ["start", "error", "finish"]
        closed = socket.receive()
        assert closed == {"type": "websocket.close", "code": 1011, "reason": "the live run failed"}


def test_a_new_message_after_an_interrupt_does_not_wait_for_an_approval_asked_late(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    # Interrupted before its tool asked for approval, the old turn's model asks while the new
    # message waits for that turn to end: the late approval is cancelled too, so the turn ends
    # at once instead of holding the new message until the wait gives up.
    chat_id = f"chat-{uuid.uuid4().hex[:8]}"
    with client.websocket_connect(f"/live?chatId={chat_id}") as socket:
        socket.send_json(
            {"type": "message", **chat_body(chat_id, user_message("Where am I?", "u1"))}
        )
        socket.send_json({"type": "message", **chat_body(chat_id, user_message("again", "u2"))})
        socket.send_json({"type": "interrupt"})
        socket.send_json({"type": "message", **chat_body(chat_id, user_message("Hello", "u3"))})
        cut = response_events(socket)
        assert cut[-1]["type"] == "finish"
        answer = response_events(socket)
    assert 'You said: "Hello"' in "".join(c.get("delta", "") for c in answer)
    assert not [r for r in caplog.records if "did not end" in r.getMessage()]

"""The real AI SDK client (ai 6.0.326 and 6.0.25) against the real server.

Each test drives `AbstractChat` + `DefaultChatTransport` through scenarios/chat-client.mjs and
checks what a frontend would hold afterwards: the chat status, the messages and their parts.
Every chunk on the wire is also checked against the strict 6.0.25 schema.
"""

from __future__ import annotations

import base64

import pytest

from tests.real_client import CLIENTS, drive, ready, text_of, tool_parts
from tests.support import LiveServer

PNG_URL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDw"
    "ADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.mark.parametrize("client", CLIENTS)
def test_plain_text(server: LiveServer, client: str) -> None:
    report = drive(server, client, [{"action": "send", "text": "Hello there"}])
    assistant = ready(report)
    assert 'You said: "Hello there"' in text_of(assistant)
    assert assistant["id"].startswith("msg_"), "the server's message id is adopted"
    assert report["finishReasons"] == ["stop"]


@pytest.mark.parametrize("client", CLIENTS)
def test_reasoning(server: LiveServer, client: str) -> None:
    report = drive(server, client, [{"action": "send", "text": "Think step by step about 2+2"}])
    assistant = ready(report)
    kinds = [p["type"] for p in assistant["parts"]]
    assert kinds.index("reasoning") < kinds.index("text")


@pytest.mark.parametrize("client", CLIENTS)
def test_weather_tool_and_japanese(server: LiveServer, client: str) -> None:
    report = drive(server, client, [{"action": "send", "text": "東京の天気は？"}])
    assistant = ready(report)
    (weather,) = tool_parts(assistant)
    assert weather["type"] == "tool-get_weather"
    assert weather["state"] == "output-available"
    assert weather["output"]["temperature"] == 18
    assert "Tokyo" in text_of(assistant)
    # Call and answer are in separate steps, so the tool-calls helper has nothing to resubmit.
    kinds = [p["type"] for p in assistant["parts"]]
    assert kinds == ["step-start", "tool-get_weather", "step-start", "text"]


@pytest.mark.parametrize("client", CLIENTS)
def test_two_calls_in_one_response(server: LiveServer, client: str) -> None:
    report = drive(server, client, [{"action": "send", "text": "Pay Alice 10 and Bob 20"}])
    assistant = ready(report)
    payments = tool_parts(assistant)
    assert [(p["input"]["recipient"], p["state"]) for p in payments] == [
        ("Alice", "approval-requested"),
        ("Bob", "approval-requested"),
    ]
    assert report["finishReasons"] == ["tool-calls"]


@pytest.mark.parametrize("client", CLIENTS)
def test_image_upload(server: LiveServer, client: str) -> None:
    image = {"type": "file", "mediaType": "image/png", "url": PNG_URL}
    report = drive(server, client, [{"action": "send", "text": "What is this?", "files": [image]}])
    assistant = ready(report)
    size = len(base64.b64decode(PNG_URL.split(",", 1)[1]))
    assert f"I received 1 image (image/png, {size} bytes)" in text_of(assistant)


@pytest.mark.parametrize("client", CLIENTS)
def test_model_error_reaches_the_client_redacted(server: LiveServer, client: str) -> None:
    report = drive(server, client, [{"action": "send", "text": "please fail"}])
    assert report["status"] == "error"
    assert report["error"].startswith("The agent could not complete the answer. (ref ")
    assert "internal detail" not in report["error"]


@pytest.mark.parametrize("client", CLIENTS)
def test_browser_tool_output_continues_the_same_message(server: LiveServer, client: str) -> None:
    report = drive(
        server,
        client,
        [{"action": "send", "text": "Play music, track 2"}],
        sendAutomaticallyWhen="tool-calls",
        toolOutputs={"change_bgm": {"output": {"success": True, "track": 2}}},
    )
    assistant = ready(report)
    first, second = report["requests"]
    message_id = first["chunks"][0]["messageId"]
    assert second["request"]["body"]["messageId"] == message_id
    assert second["chunks"][0] == {"type": "start", "messageId": message_id}
    assert assistant["id"] == message_id, "no duplicate assistant message"
    (bgm,) = tool_parts(assistant)
    assert bgm["state"] == "output-available"
    assert "Now playing BGM track 2" in text_of(assistant)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("approved", [True, False])
def test_payment_approval_round_trip(server: LiveServer, client: str, approved: bool) -> None:
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "Send 50 dollars to Hanako"},
            {"action": "approve", "approved": approved, "reason": "checked"},
        ],
        sendAutomaticallyWhen="approvals",
    )
    assistant = ready(report)
    assert len(report["requests"]) == 2
    (payment,) = tool_parts(assistant)
    if approved:
        assert payment["state"] == "output-available"
        assert payment["output"]["success"] is True
        assert "Sent 50 USD to Hanako" in text_of(assistant)
    else:
        assert payment["state"] == "output-denied"
        assert "not done" in text_of(assistant)


@pytest.mark.parametrize("client", CLIENTS)
def test_regenerate(server: LiveServer, client: str) -> None:
    report = drive(server, client, [{"action": "send", "text": "hello"}, {"action": "regenerate"}])
    assistant = ready(report)
    first, second = report["requests"]
    assert second["request"]["body"]["trigger"] == "regenerate-message"
    assert assistant["id"] == second["chunks"][0]["messageId"] != first["chunks"][0]["messageId"]
    assert [m["role"] for m in report["messages"]] == ["user", "assistant"]

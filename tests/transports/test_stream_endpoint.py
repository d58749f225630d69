"""POST /stream: the app in-process (ADK Runner, offline model, SQLite store); the SSE contract
also on the wire, against the real server.

Every 200 response is checked by ``post_stream`` against the protocol invariants and the
strict 6.0.25 field set (tests/support/rig.py).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.rig import (
    PNG_1X1,
    InProcessApp,
    Response,
    StreamResult,
    Target,
    chat_body,
    in_process_app,
    post_stream,
    stored_events,
    user_message,
    user_turn_texts,
)

PNG = PNG_1X1


def new_chat() -> str:
    return f"chat-{uuid.uuid4().hex[:12]}"


def ask(target: Target, text: str, chat_id: str | None = None) -> StreamResult:
    chat_id = chat_id or new_chat()
    return post_stream(target, chat_body(chat_id, user_message(text, f"u-{uuid.uuid4().hex[:8]}")))


@pytest.fixture(scope="module")
def debug_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    """The app with error details shown to the client (ADK_STREAM_ERROR_DETAIL)."""
    with in_process_app(tmp_path_factory.mktemp("debug"), error_detail=True) as target:
        yield target


@pytest.mark.parametrize("target", ["app", "server"], indirect=True)
def test_plain_text_streams_in_deltas_with_the_sse_contract(target: Target) -> None:
    result = ask(target, "Hello there")
    assert result.status == 200
    assert result.headers["content-type"].startswith("text/event-stream")
    assert result.headers["cache-control"] == "no-cache"
    assert result.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert result.headers["x-accel-buffering"] == "no"
    assert result.types()[:3] == ["start", "start-step", "text-start"]
    # Streamed: the first delta at once, the rest after it (merged by the default window,
    # docs/adr/0048: the demo model's partials come within it).
    assert len(result.of_type("text-delta")) >= 2, "the answer streams in several deltas"
    assert 'You said: "Hello there"' in result.text()
    finish = result.of_type("finish")[0]
    assert finish["finishReason"] == "stop"
    usage = finish["messageMetadata"]["usage"]
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"] > 0
    assert finish["messageMetadata"]["modelVersion"] == "offline-demo"


def test_each_new_turn_gets_a_fresh_message_id(app: InProcessApp) -> None:
    chat_id = new_chat()
    first = post_stream(app, chat_body(chat_id, user_message("one", "u1")))
    second_body = chat_body(
        chat_id,
        user_message("one", "u1"),
        {"id": first.chunks[0]["messageId"], "role": "assistant",
         "parts": [{"type": "text", "text": first.text(), "state": "done"}]},
        user_message("two", "u2"),
    )  # fmt: skip
    second = post_stream(app, second_body)
    ids = {first.chunks[0]["messageId"], second.chunks[0]["messageId"]}
    assert len(ids) == 2 and all(ids)
    # The session holds each user message once: history is not re-appended from the request.
    assert user_turn_texts(stored_events(app, chat_id)) == ["one", "two"]


def test_reasoning_streams_before_the_answer(app: InProcessApp) -> None:
    result = ask(app, "Think step by step: what is 2 + 2?")
    kinds = result.types()
    assert kinds.index("reasoning-start") < kinds.index("reasoning-end") < kinds.index("text-start")
    assert result.reasoning()
    reasoning_ids = {c["id"] for c in result.of_type("reasoning-start")}
    text_ids = {c["id"] for c in result.of_type("text-start")}
    assert reasoning_ids.isdisjoint(text_ids)


def test_weather_tool_runs_and_the_answer_follows_in_a_new_step(app: InProcessApp) -> None:
    result = ask(app, "What's the weather in Tokyo?")
    (call,) = result.of_type("tool-input-available")
    assert call["toolName"] == "get_weather"
    assert call["input"] == {"location": "Tokyo"}
    (output,) = result.of_type("tool-output-available")
    assert output["toolCallId"] == call["toolCallId"]
    assert output["output"]["temperature"] == 18
    kinds = result.types()
    assert kinds.count("start-step") == 2
    assert (
        kinds.index("tool-output-available")
        < kinds.index("finish-step")
        < kinds.index("text-start")
    )
    assert "18" in result.text() and "Tokyo" in result.text()


def test_japanese_weather_question(app: InProcessApp) -> None:
    result = ask(app, "東京の天気は？")
    (call,) = result.of_type("tool-input-available")
    assert call["input"] == {"location": "Tokyo"}
    assert "Tokyo" in result.text()


def test_two_calls_in_one_response_are_both_streamed(app: InProcessApp) -> None:
    result = ask(app, "Pay Alice 10 and Bob 20")
    calls = result.of_type("tool-input-available")
    assert [(c["toolName"], c["input"]["recipient"], c["input"]["amount"]) for c in calls] == [
        ("process_payment", "Alice", 10),
        ("process_payment", "Bob", 20),
    ]
    approvals = result.of_type("tool-approval-request")
    assert [a["toolCallId"] for a in approvals] == [c["toolCallId"] for c in calls]
    assert result.types().count("start-step") == 1, "calls and approval requests share one step"
    assert result.of_type("finish")[0]["finishReason"] == "tool-calls"


def test_payment_stops_at_the_approval_request(app: InProcessApp) -> None:
    result = ask(app, "Send 50 dollars to Hanako")
    (call,) = result.of_type("tool-input-available")
    assert call["input"] == {"amount": 50, "recipient": "Hanako", "currency": "USD"}
    (approval,) = result.of_type("tool-approval-request")
    assert approval["toolCallId"] == call["toolCallId"]
    assert approval["approvalId"] != call["toolCallId"]
    assert result.types()[-3:] == ["tool-approval-request", "finish-step", "finish"]
    assert not result.of_type("tool-output-available"), "the payment has not run"


def test_image_upload_reaches_the_model(app: InProcessApp) -> None:
    image = {
        "type": "file",
        "mediaType": "image/png",
        "url": "data:image/png;base64," + base64.b64encode(PNG).decode(),
    }  # no filename: it is optional in the AI SDK
    result = post_stream(app, chat_body(new_chat(), user_message("What is this?", "u1", [image])))
    assert f"I received 1 image (image/png, {len(PNG)} bytes)" in result.text()


def test_model_error_is_one_redacted_error_chunk(
    app: InProcessApp, caplog: pytest.LogCaptureFixture
) -> None:
    result = ask(app, "please fail")
    (error,) = result.of_type("error")
    assert "internal detail" not in error["errorText"]
    assert "DEMO_MODEL_FAILURE" not in error["errorText"]
    assert "ref " in error["errorText"]
    assert result.types()[-1] == "finish"
    assert result.of_type("finish")[0]["finishReason"] == "error"
    reference = error["errorText"].split("ref ")[1].rstrip(")")
    (logged,) = [r for r in caplog.records if f"ref={reference}" in r.getMessage()]
    assert "internal detail" in logged.getMessage(), "the full error is in the server log"


def test_error_detail_setting_shows_the_error(debug_app: InProcessApp) -> None:
    result = ask(debug_app, "please fail")
    (error,) = result.of_type("error")
    assert error["errorText"].startswith("DEMO_MODEL_FAILURE: offline demo model failure")


def browser_tool_turn(app: InProcessApp, chat_id: str) -> tuple[StreamResult, dict[str, Any]]:
    first = post_stream(app, chat_body(chat_id, user_message("Play some music, track 2", "u1")))
    (call,) = first.of_type("tool-input-available")
    assert call["toolName"] == "change_bgm"
    assert first.of_type("finish")[0]["finishReason"] == "tool-calls"
    return first, call


def test_browser_tool_output_continues_the_same_message(app: InProcessApp) -> None:
    chat_id = new_chat()
    first, call = browser_tool_turn(app, chat_id)
    message_id = first.chunks[0]["messageId"]
    assistant = {
        "id": message_id,
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-change_bgm",
                "toolCallId": call["toolCallId"],
                "state": "output-available",
                "input": call["input"],
                "output": {"success": True, "track": 2},
            },
        ],
    }
    second = post_stream(
        app,
        chat_body(
            chat_id, user_message("Play some music, track 2", "u1"), assistant, messageId=message_id
        ),
    )
    assert second.chunks[0] == {"type": "start", "messageId": message_id}
    assert not second.of_type("tool-output-available"), "the client's own output is not echoed"
    assert "track 2" in second.text()
    assert second.types()[1] == "start-step"
    assert second.of_type("finish")[0]["finishReason"] == "stop"


def test_continuation_with_nothing_pending_is_refused(app: InProcessApp) -> None:
    chat_id = new_chat()
    first = ask(app, "hello", chat_id)
    assistant = {"id": first.chunks[0]["messageId"], "role": "assistant", "parts": []}
    response = app.http.post(
        "/stream", json=chat_body(chat_id, user_message("hello", "u1"), assistant)
    )
    assert response.status_code == 409
    assert "no pending approval or tool call" in response.json()["detail"]


def test_regenerate_replaces_the_last_answer(app: InProcessApp) -> None:
    chat_id = new_chat()
    first = post_stream(app, chat_body(chat_id, user_message("hello again", "u1")))
    again = post_stream(
        app,
        {
            "id": chat_id,
            "messages": [user_message("hello again", "u1")],
            "trigger": "regenerate-message",
        },
    )
    assert again.chunks[0]["messageId"] != first.chunks[0]["messageId"]
    assert again.text() == first.text()
    assert user_turn_texts(stored_events(app, chat_id)) == ["hello again"], (
        "the regenerated turn replaced the first one"
    )


def test_sending_the_same_user_message_twice_is_refused(app: InProcessApp) -> None:
    chat_id = new_chat()
    body = chat_body(chat_id, user_message("only once", "u1"))
    assert post_stream(app, body).status == 200
    response = app.http.post("/stream", json=body)
    assert response.status_code == 409
    assert "regenerate" in response.json()["detail"]


def test_editing_a_user_message_rewinds_the_chat(app: InProcessApp) -> None:
    chat_id = new_chat()
    post_stream(app, chat_body(chat_id, user_message("first version", "u1")))
    edited = post_stream(
        app, chat_body(chat_id, user_message("second version", "u1"), messageId="u1")
    )
    assert 'You said: "second version"' in edited.text()
    assert user_turn_texts(stored_events(app, chat_id)) == ["second version"]


# -- malformed requests ---------------------------------------------------------------------


def post_raw(app: InProcessApp, content: bytes, content_type: str = "application/json") -> Response:
    return app.http.post("/stream", content=content, headers={"content-type": content_type})


def test_malformed_requests_get_readable_4xx_and_the_server_keeps_serving(
    app: InProcessApp,
) -> None:
    bad_json = post_raw(app, b"{not json")
    assert bad_json.status_code == 422
    assert "not valid JSON" in bad_json.json()["detail"]

    missing = post_raw(app, b'{"id": "c1", "trigger": "submit-message"}')
    assert missing.status_code == 422
    assert "needs `messages` (or `message`)" in missing.json()["detail"]

    unknown_part = post_raw(
        app,
        b'{"id":"c1","messages":[{"id":"u1","role":"user","parts":[{"type":"video-call"}]}]}',
    )
    assert unknown_part.status_code == 422
    assert "messages.0.parts.0: unknown part type" in unknown_part.json()["detail"]

    missing_text = post_raw(
        app, b'{"id":"c1","messages":[{"id":"u1","role":"user","parts":[{"type":"text"}]}]}'
    )
    assert missing_text.status_code == 422
    assert missing_text.json()["detail"] == (
        "invalid chat request: messages.0.parts.0.text: Field required"
    )

    wrong_type = post_raw(app, b"hello", content_type="text/plain")
    assert wrong_type.status_code == 415

    bad_chat_id = post_raw(
        app,
        b'{"id":"../etc","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"x"}]}]}',
    )
    assert bad_chat_id.status_code == 422
    assert bad_chat_id.json()["detail"].startswith("invalid chat request: id:")

    remote_file = post_raw(
        app,
        b'{"id":"c1","messages":[{"id":"u1","role":"user","parts":[{"type":"file",'
        b'"mediaType":"image/png","url":"https://example.com/a.png"}]}]}',
    )
    assert remote_file.status_code == 422
    assert "data: URL" in remote_file.json()["detail"]

    assert ask(app, "still there?").status == 200

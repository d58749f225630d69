"""WS /live through the shipped WebSocket ChatTransport (client/) and the real AI SDK client
(ai 6.0.326 and 6.0.25): the same flows as /stream, on one socket per chat."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.real_client import CLIENTS, drive, ready, text_of, tool_parts
from tests.support import LiveServer, run_server

LOCATION = {"latitude": 35.6762, "longitude": 139.6503, "accuracy": 20}


def states(message: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["type"].removeprefix("tool-"), p["state"]) for p in tool_parts(message)]


def assistants(report: dict[str, Any]) -> list[dict[str, Any]]:
    assert report["status"] == "ready", report["error"]
    return [m for m in report["messages"] if m["role"] == "assistant"]


@pytest.mark.parametrize("client", CLIENTS)
def test_text_turns_on_one_socket(server: LiveServer, client: str) -> None:
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "Hello there"},
            {"action": "send", "text": "Think step by step: and again?"},
        ],
        live=True,
    )
    first, second = assistants(report)
    assert first["id"] != second["id"], "a fresh start.messageId per turn"
    assert text_of(first).count("Hello there") == 1
    assert "Hello there" not in text_of(second), "nothing carries into the next turn"
    assert [p["type"] for p in second["parts"]].count("reasoning") == 1
    assert len(report["ws"]["connections"]) == 1, "one socket for the whole chat"


@pytest.mark.parametrize("client", CLIENTS)
def test_server_tool_and_image(server: LiveServer, client: str) -> None:
    image = {
        "type": "file",
        "mediaType": "image/png",
        "url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
        "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
    }
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "What's the weather in Tokyo?"},
            {"action": "send", "text": "What is this?", "files": [image]},
        ],
        live=True,
    )
    weather, picture = assistants(report)
    assert states(weather) == [("get_weather", "output-available")]
    assert "18°C" in text_of(weather)
    assert "I received 1 image (image/png" in text_of(picture)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("close_at", ["done", "finish-step-after-approval"])
@pytest.mark.parametrize("approved", [True, False])
def test_approval(server: LiveServer, client: str, close_at: str, approved: bool) -> None:
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "Send 50 dollars to Hanako"},
            {"action": "approve", "approved": approved},
        ],
        live=True,
        sendAutomaticallyWhen="approvals",
        closeStreamAt=close_at,
    )
    assistant = ready(report)
    assert len(report["requests"]) == 2
    expected = "output-available" if approved else "output-denied"
    assert states(assistant) == [("process_payment", expected)]
    assert ("Sent 50 USD to Hanako" in text_of(assistant)) == approved


@pytest.mark.parametrize("client", CLIENTS)
def test_two_pending_approvals(server: LiveServer, client: str) -> None:
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "Pay Alice 10 and Bob 20"},
            {"action": "approve", "approved": [True, False]},
        ],
        live=True,
        sendAutomaticallyWhen="approvals",
    )
    assistant = ready(report)
    assert len(report["requests"]) == 2
    assert sorted(s for _, s in states(assistant)) == ["output-available", "output-denied"]


@pytest.mark.parametrize("client", CLIENTS)
def test_sequential_approvals(server: LiveServer, client: str) -> None:
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "Pay Alice 10, then pay Bob 20"},
            {"action": "approve", "approved": True},
            {"action": "approve", "approved": True},
        ],
        live=True,
        sendAutomaticallyWhen="approvals",
    )
    assistant = ready(report)
    assert len(report["requests"]) == 3
    assert states(assistant) == [("process_payment", "output-available")] * 2
    assert "Wallet balance: 970" in text_of(assistant)


@pytest.mark.parametrize("client", CLIENTS)
def test_browser_tools(server: LiveServer, client: str) -> None:
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "Play music, track 2"},
            {"action": "send", "text": "Where am I?"},
            {"action": "approve", "approved": True},
        ],
        live=True,
        sendAutomaticallyWhen="both",
        toolOutputs={
            "change_bgm": {"output": {"success": True, "track": 2}},
            "get_location": {"output": LOCATION, "afterApproval": True},
        },
    )
    music, location = assistants(report)
    assert states(music) == [("change_bgm", "output-available")]
    assert "Now playing BGM track 2" in text_of(music)
    assert states(location) == [("get_location", "output-available")]
    assert "You are at latitude 35.6762, longitude 139.6503." in text_of(location)


@pytest.mark.parametrize("client", CLIENTS)
def test_interrupt_mid_turn(server: LiveServer, client: str) -> None:
    report = drive(
        server,
        client,
        [
            {"action": "interrupt", "afterChunks": 3},
            {"action": "send", "text": "Hello there, tell me a long story"},
            {"action": "send", "text": "Still there?"},
        ],
        live=True,
    )
    interrupted, after = assistants(report)
    assert report["requests"][0]["stopped"]
    assert 'You said: "Still there?"' in text_of(after)
    assert "long story" not in text_of(after)
    assert len(text_of(interrupted)) < len(text_of(after)) + 200


@pytest.fixture(scope="module")
def audio_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with run_server(
        tmp_path_factory.mktemp("audio"), {"ADK_STREAM_LIVE_MODALITY": "AUDIO"}
    ) as live:
        yield live


@pytest.mark.parametrize("client", CLIENTS)
def test_voice_turn(audio_server: LiveServer, client: str) -> None:
    report = drive(
        audio_server,
        client,
        [{"action": "audio", "chunks": 15, "sampleRate": 16000, "withMessage": True}],
        live=True,
    )
    (assistant,) = assistants(report)
    chunks = report["requests"][0]["chunks"]
    heard = [c for c in chunks if c["type"] == "data-transcript"]
    assert heard and heard[-1]["data"] == {
        "role": "user", "text": "What's the weather in Tokyo?", "final": True,
    }  # fmt: skip
    pcm = [c for c in chunks if c["type"] == "data-pcm"]
    assert pcm and all(c["transient"] is True for c in pcm)
    assert pcm[0]["data"]["sampleRate"] == 24000
    assert "18°C" in text_of(assistant), "the spoken answer's words are the assistant's text"
    assert not [p for p in assistant["parts"] if p["type"] == "data-pcm"], "audio is not stored"
    transcript_parts = [p for p in assistant["parts"] if p["type"] == "data-transcript"]
    assert len(transcript_parts) == 1, "one transcript part, updated in place"


@pytest.mark.parametrize("client", CLIENTS)
def test_seed_rules_client(server: LiveServer, client: str) -> None:
    """A frontend with the seed documents' resubmission rules and their stream closing."""
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "Pay Alice 10, then pay Bob 20"},
            {"action": "approve", "approved": True},
            {"action": "approve", "approved": True},
            {"action": "send", "text": "Where am I?"},
            {"action": "approve", "approved": True},
        ],
        live=True,
        sendAutomaticallyWhen="seed",
        closeStreamAt="finish-step-after-approval",
        toolOutputs={"get_location": {"output": LOCATION, "afterApproval": True}},
    )
    payments, location = assistants(report)
    assert states(payments) == [("process_payment", "output-available")] * 2
    assert "Wallet balance: 970" in text_of(payments)
    assert states(location) == [("get_location", "output-available")]
    assert "You are at latitude 35.6762" in text_of(location)


@pytest.fixture(scope="module")
def quick_timeout_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {"ADK_STREAM_APPROVAL_TIMEOUT_SECONDS": "0.5"}
    with run_server(tmp_path_factory.mktemp("live-timeout"), env) as live:
        yield live


@pytest.mark.parametrize("client", CLIENTS)
def test_approval_timeout(quick_timeout_server: LiveServer, client: str) -> None:
    report = drive(
        quick_timeout_server,
        client,
        [
            {"action": "send", "text": "Send 50 dollars to Hanako"},
            {"action": "wait", "ms": 1500},
            {"action": "approve", "approved": True},
        ],
        live=True,
        sendAutomaticallyWhen="approvals",
    )
    assistant = ready(report)
    (part,) = tool_parts(assistant)
    assert part["state"] == "output-error"
    assert "timed out" in part["errorText"]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_chat_from_stream_continues_on_live(server: LiveServer, client: str) -> None:
    chat_id = f"moving-{client}-{uuid.uuid4().hex[:8]}"
    drive(server, client, [{"action": "send", "text": "Hello from stream"}], chatId=chat_id)
    report = drive(
        server,
        client,
        [{"action": "send", "text": "What did I say first?"}],
        live=True,
        chatId=chat_id,
    )
    (assistant,) = assistants(report)
    assert 'Your first message was: "Hello from stream"' in text_of(assistant)

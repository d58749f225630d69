"""WS /live through the shipped WebSocket ChatTransport (client/) and the real AI SDK client
(ai 6.0.326 and 6.0.25): the same flows as /stream, on one socket per chat."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.real_client import CLIENTS, drive, text_of, tool_parts
from tests.support import LiveServer

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

"""Which `ai` each build of the playground bundles, and which WebSocket protocol its /live
speaks: ai 7's own `WebSocketChatTransport` (one socket for the page, `send` / `chunk` frames)
on the page the playground ships; ours (`/live?chatId=`, `message` frames and SSE-framed chunks)
for voice, and for /live on the ai 6 page (docs/live-protocol.md)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PLAYGROUND_DIST_V6, OpenPlayground
from tests.support.browser.playground import AI7_VOICE, Mode, Playground
from tests.support.rig import PLAYGROUND_DIST

pytestmark = pytest.mark.browser

HINT = (
    "I am the offline demo model; try asking about the weather, a payment, your location or music."
)


def _bundle(dist: Path) -> str:
    scripts = sorted((dist / "assets").glob("index-*.js"))
    assert len(scripts) == 1, scripts
    return scripts[0].read_text(encoding="utf-8")


def test_each_build_bundles_its_ai() -> None:
    # Strings of ai 7's UI code that ai 6 lacks: chunk types of its schema, and its own
    # WebSocket transport's error. Each is in the ai 7 bundle, none in the ai 6 one (which
    # would hold them if anything of ai 7 leaked in).
    ai7_only = ['"reset-step"', '"reasoning-file"', "WebSocket chat network connection closed"]
    ai7, ai6 = _bundle(PLAYGROUND_DIST), _bundle(PLAYGROUND_DIST_V6)
    assert [s for s in ai7_only if s not in ai7] == []
    assert [s for s in ai7_only if s in ai6] == []
    # Both carry our transport (voice; /live on ai 6).
    assert "adk-stream-protocol-client" in ai7
    assert "adk-stream-protocol-client" in ai6


def _answer(playground: Playground, text: str) -> None:
    playground.send(text)
    expect(playground.assistant().get_by_test_id("text-part")).to_have_text(
        f'You said: "{text}". {HINT}'
    )
    playground.expect_ready()


def _frames(frames: list[str]) -> list[dict[str, Any]]:
    parsed = [json.loads(frame) for frame in frames]
    assert all(isinstance(frame, dict) for frame in parsed), frames
    return parsed


def test_live_on_the_ai7_page_is_ais_own_transport(open_playground: OpenPlayground) -> None:
    playground = open_playground(Mode("ai7", "live"))
    chat_ids = [playground.by_id("chat-id").inner_text()]
    _answer(playground, "Hello there")
    # A second chat on the same page (New chat), and a third after a trip to /stream.
    playground.by_id("new-chat-button").click()
    expect(playground.by_id("chat-id")).not_to_have_text(chat_ids[0])
    chat_ids.append(playground.by_id("chat-id").inner_text())
    _answer(playground, "Second chat")
    playground.by_id("transport-stream").click()
    expect(playground.by_id("transport-name")).to_have_text("DefaultChatTransport (ai)")
    playground.by_id("transport-live").click()
    expect(playground.by_id("transport-name")).to_have_text("WebSocketChatTransport (ai)")
    chat_ids.append(playground.by_id("chat-id").inner_text())
    _answer(playground, "Third chat")

    # One socket for the page, shared by the three chats, with no chat id in its URL.
    assert len(playground.sockets) == 1, [socket.url for socket in playground.sockets]
    socket = playground.sockets[0]
    url = urlsplit(socket.url)
    assert (url.path, url.query) == ("/live", ""), socket.url
    host = urlsplit(playground.page.url).netloc
    expect(playground.by_id("endpoint")).to_have_text(f"WS ws://{host}/live")

    sent = _frames(socket.sent)
    # `resume` as each chat opens (useChat's resume), `send` for each message.
    assert {frame["type"] for frame in sent} == {"resume", "send"}, sent
    sends = [frame for frame in sent if frame["type"] == "send"]
    assert [frame["id"] for frame in sends] == chat_ids
    assert [frame["trigger"] for frame in sends] == ["submit-message"] * 3
    assert [frame["messages"][-1]["parts"][-1]["text"] for frame in sends] == [
        "Hello there",
        "Second chat",
        "Third chat",
    ]

    # Every answer frame names its request; each send's chunks count 0, 1, 2... and end.
    received = _frames(socket.received)
    by_request: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for frame in received:
        by_request[frame["requestId"]].append(frame)
    for frame in sends:
        answer = by_request[frame["requestId"]]
        assert answer, f"nothing answered {frame['requestId']}"
        chunks = [f for f in answer if f["type"] == "chunk"]
        assert [f["type"] for f in answer] == ["chunk"] * len(chunks) + ["end"], answer
        assert [f["sequence"] for f in chunks] == list(range(len(chunks)))
        assert chunks[0]["chunk"]["type"] == "start"
        assert chunks[-1]["chunk"]["type"] == "finish"
    resumes = [frame for frame in sent if frame["type"] == "resume"]
    assert [by_request[frame["requestId"]] for frame in resumes] == [
        [{"type": "no-active", "requestId": frame["requestId"]}] for frame in resumes
    ]


@pytest.mark.parametrize("mode", [AI7_VOICE, Mode("ai6", "live")], ids=str)
def test_voice_and_ai6_live_use_our_transport(open_playground: OpenPlayground, mode: Mode) -> None:
    playground = open_playground(mode)
    chat_id = playground.by_id("chat-id").inner_text()
    host = urlsplit(playground.page.url).netloc
    expect(playground.by_id("endpoint")).to_have_text(f"WS ws://{host}/live?chatId={chat_id}")
    _answer(playground, "Hello there")

    # A socket of its own for the chat, named in its URL; our frames.
    assert len(playground.sockets) == 1, [socket.url for socket in playground.sockets]
    socket = playground.sockets[0]
    url = urlsplit(socket.url)
    assert url.path == "/live"
    assert parse_qs(url.query)["chatId"] == [chat_id]
    sent = _frames(socket.sent)
    messages = [frame for frame in sent if frame["type"] == "message"]
    assert len(messages) == 1, sent
    assert messages[0]["id"] == chat_id
    # The answer: one SSE event per frame, ending with [DONE].
    assert socket.received, "no answer frames"
    events = [frame for frame in socket.received if frame.startswith("data: ")]
    assert events[-1] == "data: [DONE]\n\n"
    chunks = [json.loads(event.removeprefix("data: ")) for event in events[:-1]]
    assert chunks[0]["type"] == "start"
    assert chunks[-1]["type"] == "finish"

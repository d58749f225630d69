"""A message rebuilt from its chunks (``protocol/message_chunks.py``) by the real clients'
own fold (``scenarios/fold-check.mjs``): what a resumer of a continuation starts from
(docs/adr/0045)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adk_stream_protocol.protocol.chunks import AiSdkVersion, StartChunk
from adk_stream_protocol.protocol.message_chunks import message_chunks
from adk_stream_protocol.protocol.message_fold import MessageFold
from tests.support.real_client import run_real_client

pytestmark = pytest.mark.out_of_process  # the real AI SDK clients, in Node

USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Go"}]}

# Every kind of part a response leaves, in the states a continued message holds.
MESSAGE: dict[str, Any] = {
    "id": "m1",
    "role": "assistant",
    "metadata": {"usage": {"inputTokens": 3, "outputTokens": 5}},
    "parts": [
        {"type": "step-start"},
        {"type": "reasoning", "text": "Let me see.", "state": "done"},
        {"type": "text", "text": "Paying 50 «now».", "state": "done"},
        {"type": "source-url", "sourceId": "s1", "url": "https://example.org", "title": "Ex"},
        {
            "type": "source-document",
            "sourceId": "s2",
            "mediaType": "text/plain",
            "title": "Notes",
            "filename": "notes.txt",
        },
        {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,iVBORw0KGgo="},
        {"type": "data-state", "id": "state", "data": {"ui:balance": 950}},
        {
            "type": "tool-pay",
            "toolCallId": "c1",
            "state": "output-available",
            "input": {"amount": 50, "to": "Hanako"},
            "output": {"paid": 50},
            "approval": {"id": "a1", "approved": True},
        },
        {
            "type": "tool-pay",
            "toolCallId": "c2",
            "state": "output-denied",
            "input": {"amount": 5000},
            "approval": {"id": "a2", "approved": False, "reason": "too much"},
        },
        {"type": "step-start"},
        {
            "type": "tool-get_location",
            "toolCallId": "c3",
            "state": "output-error",
            "input": {},
            "errorText": "denied by the user",
        },
        {
            "type": "dynamic-tool",
            "toolName": "lookup",
            "toolCallId": "c4",
            "state": "output-available",
            "input": {"q": "x"},
            "output": [1, 2],
        },
        {
            "type": "tool-pay",
            "toolCallId": "c5",
            "state": "approval-responded",
            "input": {"amount": 1},
            "approval": {"id": "a5", "approved": True},
        },
    ],
}


def _fold(client: str, message: dict[str, Any]) -> dict[str, Any]:
    ai_sdk: AiSdkVersion = 7 if client == "7" else 6
    chunks = [StartChunk(message_id=message["id"]), *message_chunks(message, ai_sdk)]
    wire = [chunk.to_wire_dict() for chunk in chunks]
    report = run_real_client({"fold": {"client": client, "messages": [USER], "chunks": wire}})
    assert report["error"] is None and report["errors"] == [], report
    if client != "6.0.25":  # the server's fold is the newest 6.x's and ai 7's
        ours = MessageFold([USER], ai_sdk=ai_sdk).apply_all(wire)
        assert ours == report["messages"], "the server's fold agrees with the client's"
    user, rebuilt = report["messages"]
    assert user == USER
    return dict(rebuilt)


def _rebuildable(message: dict[str, Any], client: str) -> dict[str, Any]:
    """What ``client`` can be given of the message by chunks (docs/adr/0045). ai 6: an
    approval's id, and no answer on a part that waits on it. ai 7 and the newest 6.x: a
    tool's input streamed as text is kept (``rawInput``) until a result replaces it, so a
    part that ends with none keeps it (``tool-input-available`` would not, but makes the
    page run a browser tool again)."""
    copy: dict[str, Any] = json.loads(json.dumps(message))
    for part in copy["parts"]:
        if isinstance(part.get("approval"), dict) and client != "7":
            part["approval"] = {"id": part["approval"]["id"]}
            if part["state"] == "approval-responded":
                part["state"] = "approval-requested"
        if "toolCallId" in part and part["state"] != "output-available" and client != "6.0.25":
            raw = json.dumps(part["input"], ensure_ascii=False, separators=(",", ":"))
            rebuilt = {}
            for key, value in part.items():  # the client's key order: rawInput after input
                rebuilt[key] = value
                if key == "input":
                    rebuilt["rawInput"] = raw
            part.clear()
            part.update(rebuilt)
    return copy


@pytest.mark.parametrize("client", ["6.0.25", "6", "7"])
def test_each_client_rebuilds_the_message_from_its_chunks(client: str) -> None:
    rebuilt = _fold(client, MESSAGE)
    # Rebuilt again from the rebuilt message: nothing drifts.
    assert _fold(client, rebuilt) == rebuilt
    expected = _rebuildable(MESSAGE, client)
    # The newest clients keep a reasoning block's id on its part: the rebuilt one is ours.
    for part in rebuilt["parts"]:
        if part["type"] == "reasoning" and client != "6.0.25":
            assert part.pop("id") == "rebuilt-1"
    assert rebuilt == expected

"""The real AI SDK client (ai 6.0.25, the newest 6.x and 7.x) against the real server.

The flows themselves are data in scenarios/catalogue/ (tests/test_scenarios.py runs them); these
tests check what the catalogue's expectations do not express: message ids across requests, and
which chunks only an ai 7 client is sent.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.real_client import (
    CLIENTS,
    V7,
    assistant_messages,
    drive,
    ready,
    rejected_chunk_types,
    text_of,
    tool_parts,
)
from tests.support.rig import LiveServer

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

PAYMENT: list[dict[str, Any]] = [
    {"action": "send", "text": "Send 50 dollars to Hanako"},
    {"action": "approve", "approved": True},
]


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
def test_regenerate(server: LiveServer, client: str) -> None:
    report = drive(server, client, [{"action": "send", "text": "hello"}, {"action": "regenerate"}])
    assistant = ready(report)
    first, second = report["requests"]
    assert second["request"]["body"]["trigger"] == "regenerate-message"
    assert assistant["id"] == second["chunks"][0]["messageId"] != first["chunks"][0]["messageId"]
    assert [m["role"] for m in report["messages"]] == ["user", "assistant"]


@pytest.mark.parametrize(
    ("options", "v7_only"),
    [
        ({}, []),  # a stock v7 app: nothing says it is v7, so it gets the portable set
        ({"body": {"aiSdk": 7}}, ["tool-approval-response"]),
    ],
    ids=["stock", "aiSdk-7"],
)
def test_an_ai7_client_on_stream_gets_ai7_chunks_only_when_its_body_says_so(
    server: LiveServer, options: dict[str, Any], v7_only: list[str]
) -> None:
    # `drive` checks every response against ai 7's schema; the 6.x schemas say which chunks
    # are ai 7's alone.
    report = drive(server, V7, PAYMENT, sendAutomaticallyWhen="approvals", **options)
    assert rejected_chunk_types(report, "6.0.25") == rejected_chunk_types(report, "6") == v7_only
    (assistant,) = assistant_messages(report)
    assert [p["state"] for p in tool_parts(assistant)] == ["output-available"]
    assert "Sent 50 USD to Hanako" in text_of(assistant)

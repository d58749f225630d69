"""The real AI SDK client (ai 6.0.326 and 6.0.25) against the real server.

The flows themselves are data in scenarios/catalogue/ (tests/test_scenarios.py runs them); these
tests check what the catalogue's expectations do not express: message ids across requests.
"""

from __future__ import annotations

import pytest

from tests.real_client import CLIENTS, drive, ready, text_of, tool_parts
from tests.support import LiveServer


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

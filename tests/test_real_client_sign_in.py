"""A tool's sign-in through the real AI SDK clients (issue 37, docs/adr/0065): the strict ai
6.0.25 and ai 7 on POST /stream, and ai 7 on its own socket, answer a
``tool-adk_request_credential`` part with ``addToolOutput`` (the ``authConfig`` with the user's
API key), the stock ``lastAssistantMessageIsCompleteWithToolCalls`` sends it, and the tool runs
with the key. The server keeps no copy of the key in the chat's record."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.support.real_client import STOCK, V7, drive, text_of, tool_parts
from tests.support.rig import ServerPool

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

FORECASTER = {"ADK_STREAM_AGENT": "tests.support.agents.sign_in:served_forecaster"}
KEY = "user-key-wire-5e1d"
# The page's answer: the request's authConfig (tests/support/agents/human_input.py's
# FORECAST_KEY, as ADK sends it) with the user's key.
ANSWER = {
    "authScheme": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
    "rawAuthCredential": {"authType": "apiKey"},
    "credentialKey": "forecast_key",
    "exchangedAuthCredential": {"authType": "apiKey", "apiKey": KEY},
}
STEPS: list[dict[str, Any]] = [
    {"action": "send", "text": "what is the weather?"},
    {"action": "toolOutput", "toolName": "adk_request_credential", "output": ANSWER},
]


@pytest.mark.parametrize(
    ("client", "options"),
    [("6.0.25", {}), (V7, {}), (V7, {"live": True, "ws": STOCK})],
    ids=["ai6-strict-stream", "ai7-stream", "ai7-socket"],
)
def test_the_page_answers_an_api_key_request_with_add_tool_output_and_the_tool_runs_with_it(
    servers: ServerPool, client: str, options: dict[str, Any]
) -> None:
    server = servers.get(FORECASTER)
    chat_id = f"rc-sign-in-{uuid.uuid4().hex[:10]}"
    report = drive(
        server, client, STEPS, sendAutomaticallyWhen="tool-calls", chatId=chat_id, **options
    )
    assert report["status"] == "ready", report["error"]
    (assistant,) = [m for m in report["messages"] if m["role"] == "assistant"]
    by_name = {part["type"]: part for part in tool_parts(assistant)}
    asked = by_name["tool-adk_request_credential"]
    assert asked["input"]["authConfig"]["authScheme"] == ANSWER["authScheme"]
    assert asked["state"] == "output-available" and asked["output"] == ANSWER  # the page's own
    forecast = by_name["tool-get_forecast"]
    assert forecast["output"] == {"city": "Oslo", "forecast": "sunny"}  # it had the key
    assert text_of(assistant).endswith("It is sunny in Oslo.")
    assert len(report["requests"]) == 2  # the question, then the one automatic send

    record = server.http.get(f"/chats/{chat_id}")
    assert record.status_code == 200 and KEY not in record.text
    (kept,) = [
        p
        for m in record.json()["messages"]
        for p in m["parts"]
        if p["type"] == "tool-adk_request_credential"
    ]
    assert kept["output"]["exchangedAuthCredential"]["apiKey"] == "[redacted]"

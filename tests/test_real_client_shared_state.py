"""Shared state and who answered (docs/adr/0044) through the real AI SDK client: ai 6.0.25
(the strict chunk schema) and ai 7, on `POST /stream` and on `/live` (our transport for 6.x,
ai 7's own socket for 7). `drive` holds every response to the client's schemas; these tests
check that the parts land in the client's messages as documented."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.agents.state import STOCK_KEY
from tests.support.real_client import V7, assistant_messages, drive
from tests.support.rig import ServerPool

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

STATE_AGENT = {"ADK_STREAM_AGENT": "tests.support.agents.state:root_agent"}
TRANSFER_AGENT = {"ADK_STREAM_AGENT": "tests.support.agents.transfer:root_agent"}
# (client, live): ai 6.0.25 and ai 7, each on /stream and on /live.
RUNS = [("6.0.25", False), ("6.0.25", True), (V7, False), (V7, True)]
RUN_IDS = ["6.0.25-stream", "6.0.25-live", "7-stream", "7-live"]


def chunks(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [chunk for request in report["requests"] for chunk in request["chunks"]]


def parts_of(message: dict[str, Any], part_type: str) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == part_type]


@pytest.mark.parametrize(("client", "live"), RUNS, ids=RUN_IDS)
def test_the_state_part_is_updated_in_place_in_the_clients_message(
    servers: ServerPool, client: str, live: bool
) -> None:
    report = drive(
        servers.get(STATE_AGENT),
        client,
        [
            {"action": "send", "text": "add a lamp"},
            {"action": "send", "text": "checkout"},
            {"action": "approve", "approved": True},
        ],
        live=live,
        sendAutomaticallyWhen="approvals",
        # The transport's `body` option: every request carries it.
        body={"state": {"ui:theme": "dark"}},
    )
    assert report["status"] == "ready", report["error"]
    added, ordered = assistant_messages(report)
    shared = {"ui:theme": "dark", "ui:welcome": True}
    # Three `data-state` chunks in the first response (the request's theme, the callback's
    # welcome, the tool's cart), one part in the message: the last one.
    sent = [c for c in report["requests"][0]["chunks"] if c["type"] == "data-state"]
    assert len(sent) == 3 and all(c["id"] == "state" for c in sent), sent
    assert parts_of(added, "data-state") == [
        {"type": "data-state", "id": "state", "data": {**shared, "ui:cart": ["lamp"]}}
    ]
    assert parts_of(ordered, "data-state") == [
        {"type": "data-state", "id": "state", "data": {**shared, "ui:cart": [], "ui:orders": 1}}
    ]
    assert STOCK_KEY not in json.dumps(chunks(report))


@pytest.mark.parametrize(("client", "live"), RUNS, ids=RUN_IDS)
def test_each_agents_parts_follow_a_data_agent_part_in_the_clients_message(
    servers: ServerPool, client: str, live: bool
) -> None:
    report = drive(
        servers.get(TRANSFER_AGENT),
        client,
        [{"action": "send", "text": "What's the weather?"}],
        live=live,
    )
    assert report["status"] == "ready", report["error"]
    (assistant,) = assistant_messages(report)
    assert [p["type"] for p in assistant["parts"]] == [
        "step-start", "data-agent", "tool-lookup",
        "step-start", "tool-transfer_to_agent",
        "step-start", "data-agent", "tool-lookup",
        "step-start", "text",
    ]  # fmt: skip
    assert parts_of(assistant, "data-agent") == [
        {"type": "data-agent", "data": {"name": "front_desk"}},
        {"type": "data-agent", "data": {"name": "forecaster"}},
    ]
    assert "".join(p["text"] for p in parts_of(assistant, "text")) == "Sunny in Oslo too."

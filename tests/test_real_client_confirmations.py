"""A confirmation's hint and payload through the real AI SDK client (ADR 0041): on POST
/stream for ai 6.0.25 (strict), the newest 6.x and 7.x, and on ai 7's own socket. The page reads
the hint and payload from the `data-approval` part (and on ai 7 from the approval), answers with
an edited payload in a `data-approval-response` part, and the tool gets that payload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.agents.leave import LEDGER_ENV, ledger_lines
from tests.support.real_client import CLIENTS, STOCK, V7, drive, text_of, tool_parts
from tests.support.rig import ServerPool

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

LEAVE_AGENT = {"ADK_STREAM_AGENT": "tests.support.agents.leave:root_agent"}
EDITED: list[dict[str, Any]] = [
    {"action": "send", "text": "5 days off please"},
    {"action": "approve", "approved": True, "payload": {"approved_days": 3}},
]
ASKED = {"hint": "Approve 5 days off?", "payload": {"approved_days": 5}}


def _run(
    servers: ServerPool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    client: str,
    **options: Any,
) -> tuple[dict[str, Any], list[str]]:
    ledger = tmp_path / "ledger"
    monkeypatch.setenv(LEDGER_ENV, str(ledger))
    report = drive(
        servers.get(LEAVE_AGENT), client, EDITED, sendAutomaticallyWhen="approvals", **options
    )
    assert report["status"] == "ready", report["error"]
    return report, ledger_lines(str(ledger))


def _approval_data(message: dict[str, Any]) -> dict[str, Any]:
    (part,) = [p for p in message["parts"] if p["type"] == "data-approval"]
    data: dict[str, Any] = part["data"]
    return data


@pytest.mark.parametrize("client", CLIENTS)
def test_the_page_reads_the_hint_and_answers_with_an_edited_payload_on_stream(
    servers: ServerPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    report, ledger = _run(servers, tmp_path, monkeypatch, client)
    (assistant,) = [m for m in report["messages"] if m["role"] == "assistant"]
    (tool,) = tool_parts(assistant)
    assert tool["state"] == "output-available"
    assert tool["output"] == {"status": "ok", "approved_days": 3}
    assert "Your time off request is settled." in text_of(assistant)
    data = _approval_data(assistant)
    assert {k: data[k] for k in ASKED} == ASKED
    assert data["approvalId"] == tool["approval"]["id"]
    # What the page sent: the decision, and its payload beside it.
    answer = report["requests"][1]["request"]["body"]["messages"][-1]
    assert {"type": "data-approval-response", "id": data["approvalId"]} | {
        "data": {"payload": {"approved_days": 3}}
    } in answer["parts"]
    assert [line.split()[1:] for line in ledger] == [["booked", "3"]]


@pytest.mark.parametrize(
    ("options", "on_the_approval"),
    [({"body": {"aiSdk": 7}}, True), ({}, False), ({"live": True, "ws": STOCK}, True)],
    ids=["stream-aiSdk-7", "stream-stock", "ai7-socket"],
)
def test_ai7_also_finds_them_on_the_approval(
    servers: ServerPool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    options: dict[str, Any],
    on_the_approval: bool,
) -> None:
    report, ledger = _run(servers, tmp_path, monkeypatch, V7, **options)
    (assistant,) = [m for m in report["messages"] if m["role"] == "assistant"]
    (tool,) = tool_parts(assistant)
    approval = tool["approval"]
    if on_the_approval:  # ai 7 keeps them through the answer
        assert approval["requestReason"] == ASKED["hint"]
        assert approval["descriptor"] == ASKED["payload"]
    else:  # nothing says the client is ai 7: the portable set, the data part alone
        assert "requestReason" not in approval and "descriptor" not in approval
    assert {k: _approval_data(assistant)[k] for k in ASKED} == ASKED
    assert tool["output"] == {"status": "ok", "approved_days": 3}
    assert [line.split()[1:] for line in ledger] == [["booked", "3"]]

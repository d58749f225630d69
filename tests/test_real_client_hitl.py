"""Human in the loop through the real AI SDK client (ai 6.0.326 and 6.0.25): the stock
`sendAutomaticallyWhen` helpers, and a frontend that follows the seed documents' rules
(`seed`: no resubmission once text arrived; wait for every pending approval).

Each flow must end `ready`, with one assistant message, the right part states, and a bounded
number of requests (the checker stops and fails a flow that keeps resubmitting)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.real_client import CLIENTS, drive, ready, text_of, tool_parts
from tests.support import LiveServer

LOCATION = {"latitude": 35.6762, "longitude": 139.6503, "accuracy": 20}


def states(message: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["type"].removeprefix("tool-"), p["state"]) for p in tool_parts(message)]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    "decisions",
    [[True, True], [True, False], [False, True], [False, False]],
    ids=["approve-approve", "approve-deny", "deny-approve", "deny-deny"],
)
def test_parallel_approvals(server: LiveServer, client: str, decisions: list[bool]) -> None:
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "Pay Alice 10 and Bob 20"},
            {"action": "approve", "approved": decisions},
        ],
        sendAutomaticallyWhen="approvals",
    )
    assistant = ready(report)
    assert len(report["requests"]) == 2, "both decisions go in one continuation"
    expected = {True: "output-available", False: "output-denied"}
    assert states(assistant) == [("process_payment", expected[d]) for d in decisions]
    text = text_of(assistant)
    for name, approved in zip(("Alice", "Bob"), decisions, strict=True):
        assert (f"Sent {10 if name == 'Alice' else 20} USD to {name}" in text) == approved


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("rules", ["approvals", "seed"])
def test_sequential_approvals(server: LiveServer, client: str, rules: str) -> None:
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "Pay Alice 10, then pay Bob 20"},
            {"action": "approve", "approved": True},
            {"action": "approve", "approved": True},
        ],
        sendAutomaticallyWhen=rules,
    )
    assistant = ready(report)
    assert len(report["requests"]) == 3
    intermediate = report["requests"][1]["chunks"]
    assert not [c for c in intermediate if c["type"].startswith(("text-", "tool-output"))]
    assert states(assistant) == [
        ("process_payment", "output-available"),
        ("process_payment", "output-available"),
    ]
    text = text_of(assistant)
    assert text.index("Now paying Bob") < text.index("Wallet balance: 970.")


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("rules", ["both", "seed"])
def test_location_approved_then_run_in_the_browser(
    server: LiveServer, client: str, rules: str
) -> None:
    report = drive(
        server,
        client,
        [{"action": "send", "text": "Where am I?"}, {"action": "approve", "approved": True}],
        sendAutomaticallyWhen=rules,
        toolOutputs={"get_location": {"output": LOCATION, "afterApproval": True}},
    )
    assistant = ready(report)
    assert states(assistant) == [("get_location", "output-available")]
    assert "You are at latitude 35.6762, longitude 139.6503." in text_of(assistant)
    assert len(report["requests"]) <= 3
    # The location ran only after the approval: never on the first tool-input-available.
    first_body = report["requests"][1]["request"]["body"]
    assert first_body["messages"][-1]["parts"][-1]["approval"]["approved"] is True


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("rules", ["both", "seed"])
def test_location_denied(server: LiveServer, client: str, rules: str) -> None:
    report = drive(
        server,
        client,
        [{"action": "send", "text": "Where am I?"}, {"action": "approve", "approved": False}],
        sendAutomaticallyWhen=rules,
        toolOutputs={"get_location": {"output": LOCATION, "afterApproval": True}},
    )
    assistant = ready(report)
    assert len(report["requests"]) == 2
    assert states(assistant) == [("get_location", "output-denied")]
    assert "not done because you rejected it" in text_of(assistant)


@pytest.mark.parametrize("client", CLIENTS)
def test_browser_tool_failure(server: LiveServer, client: str) -> None:
    report = drive(
        server,
        client,
        [{"action": "send", "text": "Play music, track 2"}],
        sendAutomaticallyWhen="both",
        toolOutputs={"change_bgm": {"errorText": "autoplay blocked"}},
    )
    assistant = ready(report)
    assert states(assistant) == [("change_bgm", "output-error")]
    assert "autoplay blocked" in text_of(assistant)


@pytest.mark.parametrize("client", CLIENTS)
def test_location_approval_and_output_in_one_request(server: LiveServer, client: str) -> None:
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "Where am I?"},
            {"action": "approve", "approved": True, "output": LOCATION},
        ],
        sendAutomaticallyWhen="tool-calls",
    )
    assistant = ready(report)
    assert len(report["requests"]) == 2
    (part,) = report["requests"][1]["request"]["body"]["messages"][-1]["parts"][-1:]
    assert part["state"] == "output-available" and part["approval"]["approved"] is True
    assert "You are at latitude 35.6762" in text_of(assistant)


@pytest.mark.parametrize("client", CLIENTS)
def test_new_message_while_a_browser_tool_waits(server: LiveServer, client: str) -> None:
    report = drive(
        server,
        client,
        [
            {"action": "send", "text": "Play music, track 2"},
            {"action": "send", "text": "What's the weather in London?"},
        ],
    )
    assert report["status"] == "ready", report["error"]
    last = report["messages"][-1]
    assert last["role"] == "assistant"
    assert "London" in text_of(last)

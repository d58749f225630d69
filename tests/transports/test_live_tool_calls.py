"""In-tool confirmations and long-running tools on ``/live?chatId=`` (issue 24, ADR 0038),
through the real app, the real ADK Runner (``run_live``) and the scripted live model, with an
agent shaped like ADK's human-in-the-loop samples (tests/support/agents/leave.py). The ledger shows
what each tool body did, and how often; ``/stream`` answers the same agent alike."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adk_stream_protocol.testing import AgentClient, serve_agent, settings_for_tests
from tests.support.agents.leave import ledger_lines, root_agent

# A wait the tests would notice: a call that waits for the page by mistake ends here.
TIMEOUT_SECONDS = 20
STEP_AROUND_APPROVAL = [
    "start",
    "start-step",
    "tool-input-start",
    "tool-input-available",
    "tool-approval-request",
    "data-approval",  # the tool's hint and payload (docs/adr/0041)
    "finish-step",
    "finish",
]


@pytest.fixture
def chat(ledger: str) -> Iterator[AgentClient]:
    settings = settings_for_tests(approval_timeout_seconds=TIMEOUT_SECONDS)
    with serve_agent(root_agent, settings) as client:
        yield client


def test_an_in_tool_confirmation_asks_inside_a_step_and_runs_once_when_approved(
    chat: AgentClient, ledger: str
) -> None:
    asked = chat.send("5 days off please", chat="c-yes", live=True)
    assert asked.types() == STEP_AROUND_APPROVAL
    assert asked.of_type("finish")[0]["finishReason"] == "tool-calls"
    (request,) = asked.of_type("tool-approval-request")
    (call,) = asked.tool_calls
    assert request["toolCallId"] == call["toolCallId"]
    assert ledger_lines(ledger) == [], "nothing acted before the answer"

    done = chat.approve(True, chat="c-yes", live=True)
    (output,) = done.of_type("tool-output-available")
    assert output["toolCallId"] == call["toolCallId"]
    assert output["output"] == {"status": "ok", "approved_days": 5}
    assert done.text == "Your time off request is settled."
    assert ledger_lines(ledger) == [f"{call['toolCallId']} booked 5"]
    assert [m["role"] for m in chat.messages("c-yes")] == ["user", "assistant"]


def test_a_denied_in_tool_confirmation_is_answered_by_the_tool_as_on_stream(
    chat: AgentClient, ledger: str
) -> None:
    asked = chat.send("5 days off please", chat="c-no", live=True)
    (call,) = asked.tool_calls
    denied = chat.approve(False, chat="c-no", live=True)
    assert denied.of_type("tool-output-denied") == [
        {"type": "tool-output-denied", "toolCallId": call["toolCallId"]}
    ]
    assert not denied.of_type("tool-output-available")
    # ADK's resume on /stream runs the tool again with the refusal; so does /live.
    assert ledger_lines(ledger) == [f"{call['toolCallId']} refused"]


def test_the_answers_continuation_is_the_same_on_stream_and_live(
    chat: AgentClient, ledger: str
) -> None:
    for approved in (True, False):
        answers = []
        for live in (False, True):
            name = f"c-{approved}-{live}"
            chat.send("5 days off please", chat=name, live=live)
            answers.append(chat.approve(approved, chat=name, live=live))
        on_stream, on_live = answers
        assert on_live.types() == on_stream.types()
        assert on_live.text == on_stream.text
    assert [line.split()[1:] for line in ledger_lines(ledger)] == [
        ["booked", "5"],
        ["booked", "5"],
        ["refused"],
        ["refused"],
    ]


def test_a_call_that_asks_nothing_runs_at_once(chat: AgentClient, ledger: str) -> None:
    booked = chat.send("one day off", chat="c-one", live=True)
    assert not booked.of_type("tool-approval-request")
    assert booked.of_type("tool-output-available")[0]["output"]["approved_days"] == 1
    assert len(ledger_lines(ledger)) == 1


@pytest.mark.parametrize("live", [False, True], ids=["stream", "live"])
def test_a_long_running_function_that_answers_shows_its_result(
    chat: AgentClient, ledger: str, live: bool
) -> None:
    filed = chat.send("reimburse my trip", chat="c-reimb", live=live)
    (output,) = filed.of_type("tool-output-available")
    assert output["output"] == {"status": "pending", "ticket": "reimb-travel", "amount": 120.0}
    assert filed.text == "Filed; it is pending approval."
    assert filed.of_type("finish")[-1].get("finishReason") != "tool-calls"
    assert [line.split()[1] for line in ledger_lines(ledger)] == ["filed"]


@pytest.mark.parametrize("live", [False, True], ids=["stream", "live"])
def test_a_long_running_function_that_returns_nothing_is_the_browsers(
    chat: AgentClient, ledger: str, live: bool
) -> None:
    asked = chat.send("where is my phone", chat="c-where", live=live)
    assert asked.types()[-3:] == ["tool-input-available", "finish-step", "finish"]
    assert asked.of_type("finish")[0]["finishReason"] == "tool-calls"
    assert not asked.of_type("tool-output-available")
    # The function ran (it may prepare the browser's work), once; the page answers.
    assert [line.split()[1] for line in ledger_lines(ledger)] == ["located"]

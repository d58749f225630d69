"""The behaviour table's confirmation rows (README, "Every ADK feature on every transport"):
declared ``require_confirmation`` (a bool, and a callable deciding per call), a tool's own
``request_confirmation(hint=..., payload=...)``, and the same through a resumable ``App``. Each
test runs on ``POST /stream``, ai 7's socket on ``/live`` and ``/live?chatId=``, through the
real app and ADK Runner with a scripted model (tests/sample_agents.py); the ledger shows what
each tool body did, and how often."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.apps import App

from adk_stream_protocol.protocol.tool_calls import APPROVAL_CANCELLED_RESULT
from adk_stream_protocol.testing import (
    AgentClient,
    answer_approvals,
    serve_agent,
    settings_for_tests,
    sse_payloads,
)
from tests.sample_agents import (
    LOAN_HINT,
    LOAN_PAYLOAD,
    Ledger,
    bank_agent,
    resumable_bank_app,
)
from tests.support import InProcessSocket, SocketClosed
from tests.table_chat import TRANSPORTS, TableChat

# A wait a test would notice (a call waiting for the page by mistake ends here).
TIMEOUT_SECONDS = 20
EVERY_TRANSPORT = pytest.mark.parametrize("transport", TRANSPORTS)
BANKS: dict[str, Callable[[Ledger], LlmAgent | App]] = {
    "agent": bank_agent,
    "resumable-app": resumable_bank_app,
}


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture(params=list(BANKS))
def server(request: pytest.FixtureRequest, ledger: Ledger) -> Iterator[AgentClient]:
    agent = BANKS[request.param](ledger)
    with serve_agent(agent, settings_for_tests(approval_timeout_seconds=TIMEOUT_SECONDS)) as client:
        yield client


@pytest.fixture
def bank(server: AgentClient, transport: str) -> Iterator[TableChat]:
    chat = TableChat(server.http, transport)
    yield chat
    chat.close()


def _asks(response: Any) -> dict[str, Any]:
    """The one approval request of a response that waits for the user."""
    (request,) = response.of_type("tool-approval-request")
    assert response.of_type("finish")[-1]["finishReason"] == "tool-calls"
    return dict(request)


# -- declared: require_confirmation=True ------------------------------------------------------


@EVERY_TRANSPORT
def test_a_declared_confirmation_runs_the_tool_once_when_approved(
    bank: TableChat, ledger: Ledger
) -> None:
    asked = bank.send("send 50 to Ana")
    request = _asks(asked)
    assert asked.tool_calls[0]["input"] == {"amount": 50, "to": "Ana"}
    assert request["toolCallId"] == asked.tool_calls[0]["toolCallId"]
    assert ledger.lines == [], "nothing ran before the answer"

    done = bank.approve(True)
    (output,) = done.of_type("tool-output-available")
    assert output["output"] == {"status": "sent", "amount": 50, "to": "Ana"}
    assert done.text == "Done with the transfer."
    assert ledger.lines == ["transfer 50 Ana"]
    assert [m["role"] for m in bank.messages] == ["user", "assistant"]


@EVERY_TRANSPORT
def test_a_denied_declared_confirmation_never_runs_the_tool(
    bank: TableChat, ledger: Ledger
) -> None:
    _asks(bank.send("send 50 to Ana"))
    denied = bank.approve(False)
    assert len(denied.of_type("tool-output-denied")) == 1
    assert not denied.of_type("tool-output-available")
    assert denied.text == "Done with the transfer."
    assert ledger.lines == []


# -- declared: require_confirmation=<callable> ------------------------------------------------


@EVERY_TRANSPORT
def test_a_callable_confirmation_asks_only_for_the_calls_it_picks(
    bank: TableChat, ledger: Ledger
) -> None:
    small = bank.send("pay the water bill")
    assert not small.of_type("tool-approval-request")
    assert small.of_type("tool-output-available")[0]["output"] == {
        "status": "paid",
        "bill": "water",
    }
    assert ledger.lines == ["bill water 30"]

    _asks(bank.send("pay the rent"))
    assert ledger.lines == ["bill water 30"]
    paid = bank.approve(True)
    assert paid.of_type("tool-output-available")[0]["output"] == {"status": "paid", "bill": "rent"}
    assert paid.text == "Done with the rent."
    assert ledger.lines == ["bill water 30", "bill rent 900"]


# -- in the tool's body: request_confirmation(hint=..., payload=...) ---------------------------


@EVERY_TRANSPORT
def test_an_in_tool_confirmation_asks_then_runs_once_with_its_payload(
    bank: TableChat, ledger: Ledger
) -> None:
    asked = bank.send("I need a loan")
    request = _asks(asked)
    assert request["toolCallId"] == asked.tool_calls[0]["toolCallId"]
    assert ledger.lines == []

    done = bank.approve(True)
    (output,) = done.of_type("tool-output-available")
    assert output["toolCallId"] == request["toolCallId"]
    # The page cannot edit the payload yet: the tool gets back the one it asked with.
    assert output["output"] == {"status": "opened", **LOAN_PAYLOAD}
    assert done.text == "Done with the loan."
    assert ledger.lines == ["loan 5000 12"]


@EVERY_TRANSPORT
def test_a_denied_in_tool_confirmation_is_answered_by_the_tool(
    bank: TableChat, ledger: Ledger
) -> None:
    _asks(bank.send("I need a loan"))
    denied = bank.approve(False)
    assert len(denied.of_type("tool-output-denied")) == 1
    assert denied.text == "Done with the loan."
    # ADK's resume runs the tool again with the refusal, so the tool says what it did.
    assert ledger.lines == ["loan refused"]


@EVERY_TRANSPORT
def test_an_in_tool_confirmations_hint_and_payload_reach_the_page(bank: TableChat) -> None:
    asked = bank.send("I need a loan")
    request = _asks(asked)
    # Next to the request, for every client (ADR 0041); the edited answer's way back is
    # tests/transports/test_confirmation_payloads.py and the real clients'
    # tests/test_real_client_confirmations.py.
    (part,) = asked.of_type("data-approval")
    assert part["id"] == request["approvalId"]
    assert part["data"]["toolCallId"] == request["toolCallId"]
    assert part["data"]["hint"] == LOAN_HINT
    assert part["data"]["payload"] == LOAN_PAYLOAD


# -- an answer on another instance ----------------------------------------------------------
# POST /stream and ai 7's socket: tests/test_scale_out.py, asked on one uvicorn instance and
# answered on the other (`test_an_in_tool_confirmation_answered_on_the_other_instance_runs_once`).


def _answer_on_a_new_socket(bank: TableChat, message: dict[str, Any]) -> list[dict[str, Any]]:
    """The continuation sent on a socket opened after the asking one left: the chunks."""
    url = f"ws://localhost/live?chatId={bank.chat_id}"
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:  # the left socket lets the chat go once its run has ended
        socket = InProcessSocket(bank.http, url, {})
        socket.send(json.dumps({"type": "ping", "timestamp": 1}))
        try:
            assert json.loads(socket.recv(TIMEOUT_SECONDS))["type"] == "pong"
            break
        except SocketClosed as closed:
            socket.close()
            assert closed.code == 4409 and time.monotonic() < deadline, closed
    try:
        body = {"id": bank.chat_id, "messages": [*bank.messages[:-1], message]}
        socket.send(json.dumps({"type": "message", "messageId": message["id"], **body}))
        payloads: list[str] = []
        while payloads[-1:] != ["[DONE]"]:
            payloads += sse_payloads(socket.recv(TIMEOUT_SECONDS))
    finally:
        socket.close()
    return [json.loads(p) for p in payloads[:-1]]


@pytest.mark.parametrize("transport", ["live"])
@pytest.mark.parametrize("asking", ["I need a loan", "send 50 to Ana"])
def test_on_the_live_connection_an_answer_after_the_socket_left_is_refused(
    bank: TableChat, ledger: Ledger, asking: str
) -> None:
    """``/live?chatId=``: the socket that asked holds the chat on its instance, so the answer
    comes back on it. A socket that leaves ends the call's wait (cancelled; the tool
    does not run, ADR 0013), so an answer sent later, on this instance or any other, finds
    nothing waiting: it is refused and the tool never runs, and the chat's record shows the
    call ended. Both an in-tool and a declared confirmation."""
    _asks(bank.send(asking))
    waiting = bank.messages[-1]
    bank.close()
    chunks = _answer_on_a_new_socket(bank, answer_approvals(json.loads(json.dumps(waiting)), True))
    assert [c["type"] for c in chunks] == ["error"], chunks
    assert "no approval pending" in chunks[0]["errorText"]
    assert ledger.lines == []
    # The chat's record says what became of the call, so a reloaded page offers no answer.
    (asked,) = [p for p in waiting["parts"] if p.get("state") == "approval-requested"]
    record = bank.http.get(f"/chats/{bank.chat_id}").json()["messages"][-1]
    (part,) = [p for p in record["parts"] if p.get("toolCallId") == asked["toolCallId"]]
    assert part["state"] == "output-error", part
    assert part["errorText"] == APPROVAL_CANCELLED_RESULT["error"]  # what the model got

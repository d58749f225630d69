"""The behaviour table's confirmation rows (docs/agent/features.md):
declared ``require_confirmation`` (a bool, and a callable deciding per call), a tool's own
``request_confirmation(hint=..., payload=...)``, and the same through a resumable ``App``. Each
test runs on ``POST /stream``, ai 7's socket on ``/live`` and ``/live?chatId=``, through the
real app and ADK Runner with a scripted model (tests/support/agents/samples.py); the ledger shows
what each tool body did, and how often."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.events import Event

from adk_stream_protocol.foundation.identity import LOCAL_USER
from adk_stream_protocol.protocol.tool_calls import APPROVAL_TIMEOUT_RESULT, TurnCalls, turn_calls
from adk_stream_protocol.store.history import current_turn, live_events
from adk_stream_protocol.testing import (
    AgentClient,
    serve_agent,
    settings_for_tests,
)
from tests.support.agents.samples import (
    LOAN_HINT,
    LOAN_PAYLOAD,
    Ledger,
    bank_agent,
    resumable_bank_app,
)
from tests.support.table_chat import TRANSPORTS, TableChat
from tests.support.waiting import wait_until

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


# What each answer makes the tool's body do: ADK runs an in-tool confirmation's tool again
# with a refusal too (it answers for itself); a declared one never runs when denied.
ANSWERED = {
    ("I need a loan", True): (["loan 5000 12"], "Done with the loan."),
    ("I need a loan", False): (["loan refused"], "Done with the loan."),
    ("send 50 to Ana", True): (["transfer 50 Ana"], "Done with the transfer."),
    ("send 50 to Ana", False): ([], "Done with the transfer."),
}


# -- the session is the record of an approval, on every transport (ADR 0057) -------------------


@EVERY_TRANSPORT
@pytest.mark.parametrize(("asking", "approved"), list(ANSWERED))
def test_an_approval_is_stored_as_adks_pause_while_it_waits_and_its_answer_after(
    bank: TableChat, ledger: Ledger, asking: str, approved: bool
) -> None:
    """While an approval waits, the chat's session holds it as ``run_async`` stores ADK's
    pause, under the id the page holds; after the answer it holds the user's decision and one
    result of the call. On ``/live?chatId=`` too, where our gate, not ADK, holds the call."""
    asked = _asks(bank.send(asking))
    waiting = _stored_turn(bank)
    pending = waiting.pending_confirmations()
    assert list(pending) == [asked["approvalId"]]
    assert pending[asked["approvalId"]].call_id == asked["toolCallId"]
    assert waiting.gated_calls() == {asked["toolCallId"]}

    bank.approve(approved)
    answered = _stored_turn(bank)
    assert not answered.pending_confirmations()
    assert answered.decisions == {asked["approvalId"]: approved}
    assert _results(bank, asked["toolCallId"]) == 1
    assert ledger.lines == ANSWERED[(asking, approved)][0]


@pytest.fixture
def impatient_bank(ledger: Ledger) -> Iterator[TableChat]:
    settings = settings_for_tests(approval_timeout_seconds=0.5)
    with serve_agent(bank_agent(ledger), settings) as client:
        chat = TableChat(client.http, "live")
        yield chat
        chat.close()


def test_a_live_approval_that_times_out_is_settled_in_the_session_without_a_decision(
    impatient_bank: TableChat, ledger: Ledger
) -> None:
    """A wait that ends without the user's answer is settled by the server's result, which
    is no decision: the chat waits for nothing, and ADK's resume never acts on it."""
    asked = impatient_bank.send("send 50 to Ana")
    (request,) = asked.of_type("tool-approval-request")
    author, response = _wait_for_settlement(impatient_bank, request["approvalId"])
    assert author != "user"
    assert response == dict(APPROVAL_TIMEOUT_RESULT)
    calls = _stored_turn(impatient_bank)
    assert request["approvalId"] in calls.answered
    assert calls.decisions == {}
    assert not calls.pending_confirmations()
    assert impatient_bank.send("what is my balance").text == "You have 1200."
    assert ledger.lines == []


def _wait_for_settlement(bank: TableChat, approval_id: str) -> tuple[str, Any]:
    """The author and response of the stored answer to ``approval_id``, once the store has it:
    the gate writes it when the wait times out, which nothing on the page is told of."""

    def settlement() -> tuple[str, Any] | None:
        return next(
            (
                (event.author, response.response)
                for event in _stored_events(bank)
                for response in event.get_function_responses()
                if response.id == approval_id
            ),
            None,
        )

    return wait_until(settlement, f"a stored answer to {approval_id}")


def _stored_turn(bank: TableChat) -> TurnCalls:
    """The calls of the chat's current turn, as the stored session holds them."""
    return turn_calls(current_turn(live_events(_stored_events(bank))))


def _stored_events(bank: TableChat) -> list[Event]:
    """The chat's events as its app's session store holds them."""
    bridge = bank.http.app.state.bridge  # type: ignore[attr-defined]
    assert bank.http.portal is not None

    async def stored() -> list[Event]:
        session = await bridge.sessions.open(LOCAL_USER, bank.chat_id)
        return list(session.events)

    return bank.http.portal.call(stored)


# -- an answer on another instance ----------------------------------------------------------
# Across two real uvicorn instances on PostgreSQL + Redis: tests/test_scale_out.py, asked on
# one and answered on the other (`test_an_in_tool_confirmation_answered_on_the_other_
# instance_runs_once`, `test_a_live_approval_whose_socket_left_is_answered_on_the_other_
# instance`).


@pytest.mark.parametrize("transport", ["live"])
@pytest.mark.parametrize("answered_on", TRANSPORTS)
@pytest.mark.parametrize(("asking", "approved"), list(ANSWERED))
def test_on_the_live_connection_an_approval_outlives_its_socket(
    bank: TableChat, ledger: Ledger, asking: str, approved: bool, answered_on: str
) -> None:
    """``/live?chatId=``: a socket that leaves while an approval waits leaves it paused in the
    chat's session, stored in ADK's own shape when it was asked (ADR 0057, which replaced ADR
    0047's handover). The chat's record still shows it waiting,
    and the answer, on a new socket, on ``POST /stream`` or on ai 7's socket, runs the tool
    exactly once when approved, never when denied (an in-tool and a declared confirmation).
    The socket then goes on live with the answered history."""
    asked = _asks(bank.send(asking))
    bank.reload()  # the socket leaves; the page comes back from GET /chats/{chatId}
    (part,) = [p for p in bank.messages[-1]["parts"] if p.get("toolCallId") == asked["toolCallId"]]
    assert part["state"] == "approval-requested", part
    assert part["approval"]["id"] == asked["approvalId"]
    assert ledger.lines == []

    answering = bank if answered_on == "live" else TableChat(bank.http, answered_on, bank.chat_id)
    answering.messages = bank.messages
    done = answering.approve(approved)
    if answering is not bank:
        answering.close()
    ran, text = ANSWERED[(asking, approved)]
    if approved:
        (output,) = done.of_type("tool-output-available")
        assert output["toolCallId"] == asked["toolCallId"]
    else:
        assert [c["toolCallId"] for c in done.of_type("tool-output-denied")] == [
            asked["toolCallId"]
        ]
    assert done.text == text
    assert ledger.lines == ran
    assert _results(bank, asked["toolCallId"]) == 1, "one result after the placeholder"

    # The socket that answered goes on live, on the answered history.
    balance = bank.send("what is my balance")
    assert balance.text == "You have 1200."
    assert ledger.lines == ran


def _results(bank: TableChat, call_id: str) -> int:
    """The stored results of a call that are not ADK's "needs confirmation" placeholder."""
    return sum(
        1
        for event in _stored_events(bank)
        for response in event.get_function_responses()
        if response.id == call_id and call_id not in event.actions.requested_tool_confirmations
    )

"""The behaviour table's rows for what agents do besides asking (docs/agent/features.md):
parallel calls that write state, sub-agents with ``transfer_to_agent``, an
``AgentTool`` with an ``output_schema``, callbacks that replace a result or answer a call
themselves, artifacts, state the tools keep and the agent checks, and the UI widgets tools
render. Each test runs on ``POST
/stream``, ai 7's socket on ``/live`` and ``/live?chatId=``, through the real app and ADK Runner
with scripted models (tests/support/agents/samples.py)."""

from __future__ import annotations

import base64
import copy
import json
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from google.adk.agents import LlmAgent

from adk_stream_protocol.protocol.parts.ui_widgets import UI_WIDGET_PART
from adk_stream_protocol.testing import AgentClient, ChatResponse, serve_agent, settings_for_tests
from tests.support.agents.samples import (
    REPORT,
    Ledger,
    counter_agent,
    reporter_agent,
    shop_agent,
    travel_agent,
)
from tests.support.agents.widgets import build_widgets_agent, chart_payload
from tests.support.table_chat import TRANSPORTS, TableChat

EVERY_TRANSPORT = pytest.mark.parametrize("transport", TRANSPORTS)


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def serve_app() -> Iterator[Callable[[LlmAgent], AgentClient]]:
    """``serve_app(agent)``: the agent served for the test (``serve_agent``)."""
    with ExitStack() as stack:
        settings = settings_for_tests(approval_timeout_seconds=20)
        yield lambda agent: stack.enter_context(serve_agent(agent, settings))


@pytest.fixture
def serve(
    serve_app: Callable[[LlmAgent], AgentClient], transport: str
) -> Iterator[Callable[[LlmAgent], TableChat]]:
    """``serve(agent)``: a chat with the agent, served for the test, on the test's transport."""
    with ExitStack() as stack:

        def start(agent: LlmAgent) -> TableChat:
            chat = TableChat(serve_app(agent).http, transport)
            stack.callback(chat.close)
            return chat

        yield start


def _outputs(response: ChatResponse) -> dict[str, object]:
    """Each call's output, by tool name."""
    calls = {c["toolCallId"]: c["toolName"] for c in response.tool_calls}
    return {calls[c["toolCallId"]]: c["output"] for c in response.of_type("tool-output-available")}


# -- parallel calls ----------------------------------------------------------------------------


@EVERY_TRANSPORT
def test_parallel_calls_that_write_state_both_run_and_both_writes_stay(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger
) -> None:
    chat = serve(travel_agent(ledger))
    booked = chat.send("book Paris")
    names = [c["toolName"] for c in booked.tool_calls]
    assert names == ["book_flight", "book_hotel", "itinerary"]
    flight, hotel, _ = booked.tool_calls
    assert flight["toolCallId"] != hotel["toolCallId"]
    # One model response made both calls: one step holds both.
    first_step = booked.types()[: booked.types().index("finish-step")]
    assert first_step.count("tool-input-available") == 2
    assert _outputs(booked) == {
        "book_flight": {"flight": "FL-Paris"},
        "book_hotel": {"hotel": "HT-Paris"},
        "itinerary": {"flight": "Paris", "hotel": "Paris"},
    }
    assert booked.text == "Flight and hotel booked for Paris."
    assert sorted(ledger.lines) == ["flight Paris", "hotel Paris"]


# -- sub-agents and transfer_to_agent ------------------------------------------------------------


@EVERY_TRANSPORT
def test_a_transfer_hands_the_turn_to_a_sub_agent_whose_calls_show(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger
) -> None:
    chat = serve(travel_agent(ledger))
    chat.send("book Paris")
    answered = chat.send("do I need a visa")
    names = [c["toolName"] for c in answered.tool_calls]
    assert names == ["transfer_to_agent", "check_visa"]
    assert _outputs(answered)["check_visa"] == {"country": "France", "visa_needed": False}
    assert answered.text == "No visa needed for France."
    assert ledger.lines[-1] == "visa France"


@pytest.mark.parametrize(
    "transport",
    [
        "stream",
        "ai7",
        "live",
    ],
)
def test_every_call_of_a_chat_has_its_own_id_across_agents(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger
) -> None:
    chat = serve(travel_agent(ledger))
    chat.send("book Paris")
    chat.send("do I need a visa")
    # A duplicate id makes the AI SDK client warn and merge the two calls' parts.
    assert len(chat.call_ids) == 5
    assert len(set(chat.call_ids)) == len(chat.call_ids), chat.call_ids


# -- AgentTool with an output_schema -------------------------------------------------------------


@EVERY_TRANSPORT
def test_an_agent_tool_answers_with_its_structured_output(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger
) -> None:
    chat = serve(travel_agent(ledger))
    summary = chat.send("summarize my trip")
    (asked,) = summary.tool_calls
    assert asked["toolName"] == "summarizer"
    assert asked["input"] == {"request": "3 nights in Paris"}
    assert _outputs(summary) == {"summarizer": {"title": "Paris getaway", "nights": 3}}
    assert summary.text == "Here is your summary."


# -- callbacks -------------------------------------------------------------------------------------


@EVERY_TRANSPORT
def test_an_after_tool_callback_replaces_the_result_the_page_sees(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger
) -> None:
    chat = serve(shop_agent(ledger))
    priced = chat.send("price of the lamp")
    assert _outputs(priced) == {"get_price": {"item": "lamp", "price": "$19.99"}}
    assert priced.text == "The lamp costs $19.99."
    assert ledger.lines == ["price lamp"]


@EVERY_TRANSPORT
def test_a_before_tool_callback_answers_the_call_and_the_tool_never_runs(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger
) -> None:
    chat = serve(shop_agent(ledger))
    refused = chat.send("delete my account")
    assert _outputs(refused) == {
        "delete_account": {"status": "refused", "reason": "Accounts are deleted by support only."}
    }
    assert refused.text == "I cannot delete your account."
    assert ledger.lines == []


# -- artifacts -------------------------------------------------------------------------------------


@EVERY_TRANSPORT
def test_a_saved_artifact_arrives_as_a_file_part(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger
) -> None:
    chat = serve(reporter_agent(ledger))
    saved = chat.send("export the report")
    assert _outputs(saved) == {"export_report": {"saved": "Q1.csv", "version": 0}}
    (file,) = saved.of_type("file")
    assert file["mediaType"] == "text/csv"
    assert file["url"] == "data:text/csv;base64," + base64.b64encode(REPORT).decode()
    assert saved.message is not None
    assert [p["type"] for p in saved.message["parts"]].count("file") == 1
    assert ledger.lines == ["report Q1"]


# -- state -----------------------------------------------------------------------------------------


@EVERY_TRANSPORT
def test_state_the_tools_write_is_there_on_the_next_turns_and_the_agent_checks_it(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger
) -> None:
    chat = serve(counter_agent(ledger))
    first = chat.send("note milk")
    assert _outputs(first) == {"add_note": {"count": 1}}
    second = chat.send("note eggs")
    assert _outputs(second) == {"add_note": {"count": 2}}
    listed = chat.send("my notes")
    assert _outputs(listed) == {"list_notes": {"notes": ["milk", "eggs"]}}
    # The agent's own check (an after-agent callback) held on every turn: no error anywhere.
    for response in (first, second, listed):
        assert not response.errors
        assert response.of_type("finish")[-1]["finishReason"] == "stop"
    assert ledger.lines == ["note milk", "note eggs"]


@pytest.mark.parametrize(
    "transport",
    [
        "stream",
        "ai7",
        "live",
    ],
)
def test_a_before_agent_callback_that_writes_state_is_answered_every_time(
    serve_app: Callable[[LlmAgent], AgentClient], transport: str, ledger: Ledger
) -> None:
    served = serve_app(counter_agent(ledger, count_turns=True))
    for _ in range(4):
        chat = TableChat(served.http, transport, timeout=10)
        try:
            # On /live?chatId= the run starts when the socket opens, and the callback's
            # state event comes before the model has said anything; the message comes after
            # it. Taken for the model's turn, that event made the message wait for a
            # turn_complete that never came (no answer at all). The app tells no one when it
            # has taken that event in: the message waits a while. The other transports start
            # no run with their socket.
            chat.connect()
            if transport == "live":
                time.sleep(0.3)
            assert chat.send("note milk").text == "Noted."
            assert _outputs(chat.send("my notes")) == {"list_notes": {"notes": ["milk"]}}
        finally:
            chat.close()
    assert ledger.lines == ["note milk"] * 4


# -- UI widgets ------------------------------------------------------------------------------------


def _widgets(message: dict[str, Any] | None) -> list[dict[str, Any]]:
    assert message is not None
    return [p for p in message["parts"] if p["type"] == UI_WIDGET_PART]


@EVERY_TRANSPORT
def test_a_tools_ui_widget_reaches_the_page_as_a_data_part_and_stays_in_the_chat(
    serve: Callable[[LlmAgent], TableChat],
) -> None:
    chat = serve(build_widgets_agent())
    compared = chat.send("compare Paris and Rome")
    paris, rome = compared.tool_calls  # one model answer, both calls: ADK merges their results
    sent = compared.of_type(UI_WIDGET_PART)
    assert sent == [
        {
            "type": UI_WIDGET_PART,
            "id": call["toolCallId"],
            "data": {"provider": "mcp", "payload": chart_payload(city)},
        }
        for call, city in ((paris, "Paris"), (rome, "Rome"))
    ]
    # After the results they come with, in their step.
    types = compared.types()
    first_widget = types.index(UI_WIDGET_PART)
    assert types[:first_widget].count("tool-output-available") == 2
    assert "finish-step" not in types[types.index("tool-output-available") : first_widget]
    assert _widgets(compared.message) == sent
    assert compared.text == "Paris is warmer than Rome this week."

    charted = chat.send("chart Oslo")
    (oslo,) = charted.tool_calls
    assert [p["id"] for p in _widgets(charted.message)] == [oslo["toolCallId"]]
    assert "null" not in json.dumps(_widgets(charted.message))
    # A reload: the chat as recorded is the chat the page held, widgets and all.
    page = copy.deepcopy(chat.messages)
    chat.reload()
    assert chat.messages == page
    assert chat.send("chart Oslo").text == "Here is Oslo's week."


@EVERY_TRANSPORT
def test_a_widget_a_paused_continuation_held_back_comes_with_the_final_answer(
    serve: Callable[[LlmAgent], TableChat],
) -> None:
    chat = serve(build_widgets_agent())
    chat.send("buy a lamp")
    paid = chat.approve(True)  # pay runs and renders its receipt; ship asks next
    assert paid.of_type(UI_WIDGET_PART) == []  # held back, with pay's result (ADR 0010)
    shipped = chat.approve(True)
    receipt = {
        "type": UI_WIDGET_PART,
        "id": "receipt-30",
        "data": {"provider": "receipts", "payload": {}},
    }
    assert shipped.of_type(UI_WIDGET_PART) == [receipt]
    assert _widgets(shipped.message) == [receipt]
    assert shipped.text == "Paid and shipped."
    page = copy.deepcopy(chat.messages)
    chat.reload()
    assert chat.messages == page

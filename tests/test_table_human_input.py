"""The behaviour table's human-input rows (docs/agent/features.md;
issue 37): ADK 2's ``RequestInput`` from a graph workflow, and ADK's ``request_input`` tool
used by an LLM agent. Each pause reaches the page as a tool part (``tool-adk_request_input``)
that stock ``useChat`` answers with ``addToolOutput``; the answer is checked against the
request's ``response_schema`` and resumes the run once (docs/adr/0064). Through the real app
and ADK Runner with scripted models (tests/support/agents/human_input.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adk_stream_protocol.foundation.identity import LOCAL_USER
from adk_stream_protocol.protocol.tool_calls import DISCONNECTED_RESULT, turn_calls
from adk_stream_protocol.store.history import current_turn, live_events
from adk_stream_protocol.testing import AgentClient, ChatResponse, serve_agent, settings_for_tests
from tests.support.agents.human_input import (
    COLOUR_QUESTION,
    DAYS_PAYLOAD,
    DAYS_QUESTION,
    DAYS_SCHEMA,
    clarifying_agent,
    forecast_agent,
    time_off_app,
)
from tests.support.agents.samples import Ledger
from tests.support.rig import chat_body, in_process_app, post_stream, user_message
from tests.support.table_chat import TRANSPORTS, TableChat

EVERY_TRANSPORT = pytest.mark.parametrize("transport", TRANSPORTS)
# ADK 2.13 cannot run a workflow live (issue 37, point 1): its rows are /stream and ai 7's
# socket, both run_async.
RUN_ASYNC = pytest.mark.parametrize("transport", ["stream", "ai7"])


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def time_off(ledger: Ledger) -> Iterator[AgentClient]:
    with serve_agent(time_off_app(ledger), settings_for_tests()) as client:
        yield client


@pytest.fixture
def designer() -> Iterator[AgentClient]:
    with serve_agent(clarifying_agent(), settings_for_tests()) as client:
        yield client


@pytest.fixture
def forecaster(ledger: Ledger) -> Iterator[AgentClient]:
    with serve_agent(forecast_agent(ledger), settings_for_tests()) as client:
        yield client


@pytest.fixture
def chat(request: pytest.FixtureRequest, transport: str) -> Iterator[TableChat]:
    server: AgentClient = request.getfixturevalue(request.param)
    table_chat = TableChat(server.http, transport)
    yield table_chat
    table_chat.close()


def _waiting_part(response: ChatResponse, part_type: str) -> dict[str, Any]:
    """The one part of ``part_type`` of the response's message, waiting for the page."""
    assert response.message is not None
    (part,) = [p for p in response.message["parts"] if p["type"] == part_type]
    assert part["state"] == "input-available", part
    assert response.of_type("finish")[-1]["finishReason"] == "tool-calls"
    return dict(part)


def _input_request(response: ChatResponse) -> dict[str, Any]:
    return _waiting_part(response, "tool-adk_request_input")


def _stored_answers(chat: TableChat, call_id: str) -> list[dict[str, Any]]:
    """The function responses the chat's session holds for ``call_id``."""
    events = chat.http.portal.call(  # type: ignore[union-attr]
        _session_events, chat.http.app, chat.chat_id
    )
    return [
        dict(r.response or {})
        for e in events
        for r in e.get_function_responses()
        if r.id == call_id
    ]


async def _session_events(app: Any, chat_id: str) -> list[Any]:
    sessions = app.state.bridge.runners.sessions
    session = await sessions.open(LOCAL_USER, chat_id)
    return list(session.events)


# -- a workflow's RequestInput --------------------------------------------------------------


@RUN_ASYNC
@pytest.mark.parametrize("chat", ["time_off"], indirect=True)
def test_a_workflows_input_request_is_a_tool_part_the_page_answers_and_it_resumes_once(
    chat: TableChat, ledger: Ledger
) -> None:
    asked = chat.send("I need some time off")
    # The node's message to the user reaches the page as text, before the question.
    assert asked.text == "Let us plan your time off."
    part = _input_request(asked)
    assert part["input"]["message"] == DAYS_QUESTION
    assert part["input"]["payload"] == DAYS_PAYLOAD
    assert part["input"]["response_schema"] == DAYS_SCHEMA

    answered = chat.tool_output(part["toolCallId"], {"days": 3})
    assert answered.text == "Approved: 3 days off."
    assert answered.of_type("finish")[-1]["finishReason"] == "stop"
    assert ledger.lines == ["decide 3"]
    assert _stored_answers(chat, part["toolCallId"]) == [{"days": 3}]


@RUN_ASYNC
@pytest.mark.parametrize("chat", ["time_off"], indirect=True)
def test_an_answer_that_does_not_fit_the_response_schema_is_refused_and_resumes_nothing(
    chat: TableChat, ledger: Ledger
) -> None:
    part = _input_request(chat.send("I need some time off"))
    call_id = part["toolCallId"]
    refusal = chat.refused_tool_output(call_id, {"days": 0})
    assert f"input request {call_id!r}" in refusal
    assert "'minimum' (1) fails at days" in refusal
    assert "0" not in refusal.replace(call_id, "")  # the schema's words, not the user's value
    assert ledger.lines == []
    assert _stored_answers(chat, call_id) == []

    chat.withdraw_output(call_id)
    answered = chat.tool_output(call_id, {"days": 5})  # a fitting answer still resumes it
    assert answered.text == "Approved: 5 days off."
    assert ledger.lines == ["decide 5"]


@RUN_ASYNC
@pytest.mark.parametrize("chat", ["time_off"], indirect=True)
def test_a_waiting_input_request_is_in_the_chat_record_and_is_answered_after_a_reload(
    chat: TableChat, ledger: Ledger
) -> None:
    part = _input_request(chat.send("I need some time off"))
    chat.reload()
    (waiting,) = [p for p in chat.messages[-1]["parts"] if p["type"] == "tool-adk_request_input"]
    assert waiting["state"] == "input-available"
    assert waiting["input"] == part["input"]

    answered = chat.tool_output(part["toolCallId"], {"days": 2})
    assert answered.text == "Approved: 2 days off."
    assert ledger.lines == ["decide 2"]


def test_a_workflow_given_as_the_agent_setting_is_served_without_an_app(tmp_path: Path) -> None:
    """``root_agent = Workflow(…)`` in a module, named by ``ADK_STREAM_AGENT`` as any agent is
    (before: refused at start, "not an ADK agent or App")."""
    with in_process_app(tmp_path, agent="tests.support.agents.human_input:time_off_root") as app:
        result = post_stream(app, chat_body("wf-bare", user_message("time off, please", "u1")))
    assert result.text() == "Let us plan your time off."
    assert result.of_type("finish")[-1]["finishReason"] == "tool-calls"


def test_a_workflow_on_the_live_connection_is_refused_at_its_first_message(
    time_off: AgentClient, ledger: Ledger
) -> None:
    """ADK 2.13's run_live gives a workflow's start node no user message: refused with a
    reason, nothing stored, and the same chat then answers on POST /stream."""
    live = TableChat(time_off.http, "live")
    live.connect()
    refusal = live.refused_send("I need some time off")
    live.close()
    assert "Live mode (ADK's run_live) cannot run this agent" in refusal
    assert "'time_off' is a Workflow" in refusal
    assert "POST /stream" in refusal
    assert time_off.http.get(f"/chats/{live.chat_id}").status_code == 404

    stream = TableChat(time_off.http, "stream", chat_id=live.chat_id)
    assert stream.send("I need some time off").text == "Let us plan your time off."


def test_the_same_answer_sent_twice_resumes_the_workflow_once(
    time_off: AgentClient, ledger: Ledger
) -> None:
    chat = TableChat(time_off.http, "stream")
    part = _input_request(chat.send("I need some time off"))
    answered = chat.tool_output(part["toolCallId"], {"days": 4})
    assert answered.text == "Approved: 4 days off."
    again = time_off.http.post(
        "/stream",
        json={
            "id": chat.chat_id,
            "messages": chat.messages,
            "trigger": "submit-message",
            "messageId": chat.messages[-1]["id"],
        },
    )
    assert again.status_code == 409, again.text
    assert ledger.lines == ["decide 4"]


def test_the_calls_of_a_turn_know_an_input_request_as_one_the_page_answers(
    time_off: AgentClient,
) -> None:
    chat = TableChat(time_off.http, "stream")
    part = _input_request(chat.send("I need some time off"))
    events = chat.http.portal.call(  # type: ignore[union-attr]
        _session_events, chat.http.app, chat.chat_id
    )
    calls = turn_calls(current_turn(live_events(events)))
    assert calls.pending_page_calls() == {part["toolCallId"]}
    assert calls.waiting_for_client()


# -- ADK's request_input tool in an LLM agent ------------------------------------------------


@EVERY_TRANSPORT
@pytest.mark.parametrize("chat", ["designer"], indirect=True)
def test_an_llm_agents_request_input_is_answered_from_the_page_and_the_model_goes_on(
    chat: TableChat,
) -> None:
    part = _input_request(chat.send("draw me a logo"))
    assert part["input"]["message"] == COLOUR_QUESTION

    answered = chat.tool_output(part["toolCallId"], "green")
    assert answered.text == "A logo in the colour you chose, coming up."
    if chat.transport != "live":  # on run_live the gate holds the call: stored as it ends
        assert _stored_answers(chat, part["toolCallId"]) == [{"result": "green"}]


@EVERY_TRANSPORT
@pytest.mark.parametrize("chat", ["designer"], indirect=True)
def test_an_llm_agents_request_input_refuses_an_answer_outside_its_schema(
    chat: TableChat,
) -> None:
    part = _input_request(chat.send("draw me a logo"))
    refusal = chat.refused_tool_output(part["toolCallId"], "purple")
    assert "'enum'" in refusal and "purple" not in refusal
    chat.withdraw_output(part["toolCallId"])
    answered = chat.tool_output(part["toolCallId"], "blue")
    assert answered.text == "A logo in the colour you chose, coming up."


@EVERY_TRANSPORT
@pytest.mark.parametrize("chat", ["designer"], indirect=True)
def test_an_llm_agents_request_input_waits_across_a_reload_where_its_run_does(
    chat: TableChat,
) -> None:
    part = _input_request(chat.send("draw me a logo"))
    chat.reload()
    (waiting,) = [p for p in chat.messages[-1]["parts"] if p["type"] == "tool-adk_request_input"]
    if chat.transport == "live":
        # The question lived in the socket's run, as a browser call does: the socket that
        # left ended it ("the user left"), and the chat read back says so.
        assert waiting["state"] == "output-error", waiting
        assert waiting["errorText"] == DISCONNECTED_RESULT["error"]
        return
    assert waiting["state"] == "input-available", waiting
    assert waiting["input"] == part["input"]
    answered = chat.tool_output(part["toolCallId"], "red")
    assert answered.text == "A logo in the colour you chose, coming up."


# -- a tool that asks for the user's API key -------------------------------------------------

API_KEY = "user-key-1234"


def _credential_request(response: ChatResponse) -> dict[str, Any]:
    return _waiting_part(response, "tool-adk_request_credential")


@pytest.mark.parametrize(
    "transport",
    [
        "stream",
        "ai7",
        pytest.param(
            "live",
            marks=pytest.mark.xfail(
                strict=True,
                reason="ADK 2.13's live flow does not pause for a credential: the tool's "
                "'waiting' result reaches the model (issue 37)",
            ),
        ),
    ],
)
@pytest.mark.parametrize("chat", ["forecaster"], indirect=True)
def test_a_tool_that_asks_for_an_api_key_runs_with_the_key_the_page_answers_with(
    chat: TableChat, ledger: Ledger
) -> None:
    part = _credential_request(chat.send("what is the weather?"))
    config = part["input"]["authConfig"]
    assert config["authScheme"] == {"type": "apiKey", "in": "header", "name": "X-Api-Key"}
    assert ledger.lines == []

    answer = {**config, "exchangedAuthCredential": {"authType": "apiKey", "apiKey": API_KEY}}
    answered = chat.tool_output(part["toolCallId"], answer)
    assert answered.text == "It is sunny in Oslo."
    assert ledger.lines == [f"forecast Oslo with a key of {len(API_KEY)} characters"]


@RUN_ASYNC
@pytest.mark.parametrize("chat", ["forecaster"], indirect=True)
def test_a_credential_answer_that_is_not_an_auth_config_is_refused_and_runs_nothing(
    chat: TableChat, ledger: Ledger
) -> None:
    part = _credential_request(chat.send("what is the weather?"))
    call_id = part["toolCallId"]
    refusal = chat.refused_tool_output(call_id, {"apiKey": API_KEY})
    assert f"credential request {call_id!r}" in refusal
    assert "authScheme" in refusal or "auth_scheme" in refusal
    assert API_KEY not in refusal
    chat.withdraw_output(call_id)
    bare = chat.refused_tool_output(call_id, part["input"]["authConfig"])
    assert "carries no credential" in bare
    assert ledger.lines == []

    chat.withdraw_output(call_id)
    answer = {
        **part["input"]["authConfig"],
        "exchangedAuthCredential": {"authType": "apiKey", "apiKey": API_KEY},
    }
    assert chat.tool_output(call_id, answer).text == "It is sunny in Oslo."

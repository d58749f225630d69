"""A confirmation's hint and payload on the page, and the payload the user edits (issue 24
point 5, ADR 0041), through the real app, the real ADK Runner and the scripted models, on
``/stream`` and ``/live?chatId=``, with the agent of tests/support/agents/leave.py. The ledger
shows what the tool body did with the answer."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from adk_stream_protocol.testing import AgentClient, serve_agent, settings_for_tests
from adk_stream_protocol.testing_client import read_response
from tests.support.agents.leave import ledger_lines, root_agent

TRANSPORTS = pytest.mark.parametrize("live", [False, True], ids=["stream", "live"])


@pytest.fixture
def chat(ledger: str) -> Iterator[AgentClient]:
    settings = settings_for_tests(approval_timeout_seconds=20, max_message_chars=200)
    with serve_agent(root_agent, settings) as client:
        yield client


@TRANSPORTS
def test_the_hint_and_payload_come_next_to_the_approval_request(
    chat: AgentClient, live: bool
) -> None:
    asked = chat.send("5 days off please", chat="c-show", live=live)
    (request,) = asked.of_type("tool-approval-request")
    assert set(request) == {"type", "approvalId", "toolCallId"}, "ai 6.0.25 takes no more"
    assert asked.of_type("data-approval") == [
        {
            "type": "data-approval",
            "id": request["approvalId"],
            "data": {
                "approvalId": request["approvalId"],
                "toolCallId": request["toolCallId"],
                "hint": "Approve 5 days off?",
                "payload": {"approved_days": 5},
            },
        }
    ]
    hint_only = chat.send("cancel my leave", chat="c-show", live=live)
    (data,) = hint_only.of_type("data-approval")
    assert data["data"]["hint"] == "Cancel all your booked days?"
    assert "payload" not in data["data"]


def test_an_ai7_client_finds_them_on_the_approval_too(chat: AgentClient) -> None:
    body = {
        "id": "c-v7",
        "aiSdk": 7,
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "5 days off"}]}
        ],
    }
    response = chat.http.post("/stream", json=body)
    assert response.status_code == 200
    assert '"reason":"Approve 5 days off?"' in response.text
    assert '"approvalDescriptor":{"approved_days":5}' in response.text
    assert '"type":"data-approval"' in response.text  # one rule for every client


@TRANSPORTS
def test_an_edited_payload_reaches_the_tool(chat: AgentClient, ledger: str, live: bool) -> None:
    asked = chat.send("5 days off please", chat="c-edit", live=live)
    (call,) = asked.tool_calls
    done = chat.approve(True, chat="c-edit", live=live, payload={"approved_days": 3})
    (output,) = done.of_type("tool-output-available")
    assert output["output"] == {"status": "ok", "approved_days": 3}
    assert ledger_lines(ledger) == [f"{call['toolCallId']} booked 3"]


@TRANSPORTS
def test_without_an_edit_the_tool_gets_its_own_payload(
    chat: AgentClient, ledger: str, live: bool
) -> None:
    chat.send("5 days off please", chat="c-same", live=live)
    done = chat.approve(True, chat="c-same", live=live)
    assert done.of_type("tool-output-available")[0]["output"]["approved_days"] == 5


def _answer(chat: AgentClient, name: str, part: dict[str, Any]) -> dict[str, Any]:
    """The request that approves the chat's pending call, with ``part`` added to its message."""
    messages = copy.deepcopy(chat.messages(name))
    for tool in messages[-1]["parts"]:
        if tool.get("state") == "approval-requested":
            tool["state"] = "approval-responded"
            tool["approval"]["approved"] = True
    messages[-1]["parts"].append(part)
    return {"id": name, "messages": messages}


def _approval_id(chat: AgentClient, name: str) -> str:
    (part,) = [p for p in chat.messages(name)[-1]["parts"] if "approval" in p]
    approval_id: str = part["approval"]["id"]
    return approval_id


@pytest.mark.parametrize(
    ("data", "status", "says"),
    [
        ({"payload": [3]}, 422, "a JSON object"),
        ({"payload": "3"}, 422, "a JSON object"),
        ({}, 422, "a JSON object"),
        ({"payload": {"note": "x" * 300}}, 413, "longer than 200 characters"),
    ],
    ids=["list", "string", "missing", "too-long"],
)
@TRANSPORTS
def test_an_edited_payload_is_checked_before_anything_runs(
    chat: AgentClient, ledger: str, live: bool, data: dict[str, Any], status: int, says: str
) -> None:
    name = "c-bad"
    chat.send("5 days off please", chat=name, live=live)
    part = {"type": "data-approval-response", "id": _approval_id(chat, name), "data": data}
    assert says in _refusal(chat, name, _answer(chat, name, part), live, status)
    # Refused before anything ran: the same approval with a good payload still counts.
    done = chat.approve(True, chat=name, live=live, payload={"approved_days": 4})
    assert done.of_type("tool-output-available")[0]["output"]["approved_days"] == 4
    assert [line.split()[1:] for line in ledger_lines(ledger)] == [["booked", "4"]]


@TRANSPORTS
def test_a_payload_only_answers_a_confirmation_that_asked_with_one(
    chat: AgentClient, ledger: str, live: bool
) -> None:
    name = "c-nopayload"
    chat.send("cancel my leave", chat=name, live=live)
    approval_id = _approval_id(chat, name)
    part = {"type": "data-approval-response", "id": approval_id, "data": {"payload": {"a": 1}}}
    assert "asked for no payload" in _refusal(chat, name, _answer(chat, name, part), live, 422)
    unknown = {**part, "id": "apr_unknown"}
    assert "no approval of message" in _refusal(chat, name, _answer(chat, name, unknown), live, 422)
    assert ledger_lines(ledger) == []


def _refusal(chat: AgentClient, name: str, body: dict[str, Any], live: bool, status: int) -> str:
    """The request on the chat's transport, refused: the text of its refusal (on /live an
    ``error`` chunk, which has no status)."""
    if not live:
        response = chat.http.post("/stream", json=body)
        assert response.status_code == status, response.text
        return response.text
    session = chat._socket(name)._session  # the chat's own socket, whose run asked
    session.send_json({"type": "message", "version": "1", **body})
    frames = [session.receive_text()]
    while frames[-1] != "data: [DONE]\n\n":
        frames.append(session.receive_text())
    errors = [c for c in read_response(200, "".join(frames))[1] if c["type"] == "error"]
    assert errors, frames
    text: str = errors[0]["errorText"]
    return text

"""The behaviour table's rows for answering again and for a page reload (docs/agent/features.md):
``regenerate()`` and an edited user message rewind the session,
its state included; a page that reloads builds its chat from ``GET /chats/{chatId}`` and goes
on. Each test runs on ``POST /stream``, ai 7's socket on ``/live`` and ``/live?chatId=``
through the real app and ADK Runner with scripted models (tests/support/agents/samples.py); on
``/live?chatId=`` the socket's run starts again on the rewound session (docs/adr/0046).
The real client does the same in the scenarios ``scenarios/catalogue/reload-*.json``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from google.adk.agents import LlmAgent

from adk_stream_protocol.protocol.tool_calls import DISCONNECTED_RESULT
from adk_stream_protocol.testing import AgentClient, ChatResponse, serve_agent, settings_for_tests
from tests.support.agents.samples import Ledger, bank_agent, counter_agent, support_agent
from tests.support.table_chat import TRANSPORTS, TableChat

EVERY_TRANSPORT = pytest.mark.parametrize("transport", TRANSPORTS)


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def serve(transport: str) -> Iterator[Callable[[LlmAgent], TableChat]]:
    """``serve(agent)``: a chat with the agent, served for the test, on the test's transport."""
    with ExitStack() as stack:
        settings = settings_for_tests(approval_timeout_seconds=20)

        def start(agent: LlmAgent) -> TableChat:
            client: AgentClient = stack.enter_context(serve_agent(agent, settings))
            chat = TableChat(client.http, transport)
            stack.callback(chat.close)
            return chat

        yield start


def _outputs(response: ChatResponse) -> dict[str, object]:
    """Each call's output, by tool name."""
    calls = {c["toolCallId"]: c["toolName"] for c in response.tool_calls}
    return {calls[c["toolCallId"]]: c["output"] for c in response.of_type("tool-output-available")}


def _tool_part(chat: TableChat) -> dict[str, Any]:
    """The one tool part of the chat's last message."""
    parts: list[dict[str, Any]] = chat.messages[-1]["parts"]
    (part,) = [p for p in parts if p["type"].startswith("tool-")]
    return part


# -- answering again -------------------------------------------------------------------------


@EVERY_TRANSPORT
def test_a_regenerate_rewinds_the_session_and_its_state_and_answers_again(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger
) -> None:
    # A before-agent callback writes state before the first message of a live run: the
    # rewind keeps it (on /live it is in the invocation the messages share).
    chat = serve(counter_agent(ledger, count_turns=True))
    chat.send("note milk")
    chat.send("note eggs")
    again = chat.regenerate()
    assert again.types()[0] == "start"
    # The rewound turn's note is gone from the state: the tool counts two notes, not three,
    # and the agent's own check (no note twice) held.
    assert _outputs(again) == {"add_note": {"count": 2}}
    assert not again.errors
    assert _outputs(chat.send("my notes")) == {"list_notes": {"notes": ["milk", "eggs"]}}
    assert ledger.lines == ["note milk", "note eggs", "note eggs"]
    assert [m["role"] for m in chat.messages] == ["user", "assistant"] * 3


@EVERY_TRANSPORT
def test_an_edit_rewinds_to_before_the_edited_message_and_keeps_what_came_before(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger
) -> None:
    chat = serve(counter_agent(ledger, count_turns=True))
    chat.send("note milk")
    chat.send("note eggs")
    # The second message, edited: the first turn stays, the second is gone.
    listed = chat.edit(2, "my notes")
    assert _outputs(listed) == {"list_notes": {"notes": ["milk"]}}
    # The first message, edited: nothing of the chat stays.
    noted = chat.edit(0, "note eggs")
    assert _outputs(noted) == {"add_note": {"count": 1}}
    assert _outputs(chat.send("my notes")) == {"list_notes": {"notes": ["eggs"]}}
    assert ledger.lines == ["note milk", "note eggs", "note eggs"]
    assert [m["id"] for m in chat.messages if m["role"] == "user"] == ["user-1", "user-2"]


# -- a page reload ---------------------------------------------------------------------------


@EVERY_TRANSPORT
def test_after_a_reload_the_chat_read_back_takes_a_message_a_regenerate_and_an_edit(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger
) -> None:
    chat = serve(counter_agent(ledger))
    chat.send("note milk")
    chat.reload()
    assert _outputs(chat.send("note eggs")) == {"add_note": {"count": 2}}
    chat.reload()
    assert _outputs(chat.regenerate()) == {"add_note": {"count": 2}}
    chat.reload()
    assert _outputs(chat.edit(2, "my notes")) == {"list_notes": {"notes": ["milk"]}}
    assert ledger.lines == ["note milk", "note eggs", "note eggs"]


@EVERY_TRANSPORT
def test_a_waiting_approval_is_answered_after_a_reload(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger
) -> None:
    """On every transport, ``/live?chatId=`` too: a socket that leaves hands its approval
    over to the chat's session (ADR 0047), so the chat read back still waits for it."""
    chat = serve(bank_agent(ledger))
    chat.send("send 50 to Ana")
    chat.reload()
    part = _tool_part(chat)
    assert part["state"] == "approval-requested", part
    approved = chat.approve(True)
    assert approved.text == "Done with the transfer."
    assert ledger.lines == ["transfer 50 Ana"]


@EVERY_TRANSPORT
def test_a_waiting_browser_call_is_answered_after_a_reload(
    serve: Callable[[LlmAgent], TableChat], ledger: Ledger, transport: str
) -> None:
    chat = serve(support_agent(ledger))
    chat.send("scan the code")
    chat.reload()
    part = _tool_part(chat)
    if transport == "live":
        assert part["state"] == "output-error", part
        assert part["errorText"] == DISCONNECTED_RESULT["error"]
        return
    assert part["state"] == "input-available", part
    answered = chat.tool_output(str(part["toolCallId"]), {"code": "4006381333931"})
    assert answered.text == "Thanks, I have the code."

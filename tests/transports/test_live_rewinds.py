"""What a regenerate, an edit and a reload need of ``/live?chatId=`` (docs/adr/0046), in
process: the real app and ADK live runner with scripted models (tests/support/agents/samples.py).

The behaviour itself, on every transport, is in tests/test_table_rewinds.py; here: the stamps
a live message gives its event, the refusals, and the history answer at connect that no
request asked for."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.events import Event
from google.adk.tools import LongRunningFunctionTool, ToolContext
from google.genai import types

from adk_stream_protocol.demo.replies import Reply as DemoReply
from adk_stream_protocol.foundation.identity import LOCAL_USER
from adk_stream_protocol.store.history import (
    CARRIED_STAMPS_KEY,
    USER_MESSAGE_ID_KEY,
    is_user_turn,
    live_events,
)
from adk_stream_protocol.testing import (
    AgentClient,
    ScriptedLlm,
    call,
    serve_agent,
    settings_for_tests,
)
from adk_stream_protocol.turns.bridge import bridge_of
from tests.support.agents.samples import Ledger, counter_agent
from tests.support.rig import InProcessSocket
from tests.support.table_chat import TableChat


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def counter(ledger: Ledger) -> Iterator[AgentClient]:
    with serve_agent(counter_agent(ledger), settings_for_tests()) as client:
        yield client


def stored_events(client: AgentClient, chat_id: str) -> tuple[list[Event], dict[str, Any]]:
    """The chat's live events and its state."""

    async def read() -> tuple[list[Event], dict[str, Any]]:
        session = await bridge_of(client.http.app.state).sessions.open(LOCAL_USER, chat_id)  # type: ignore[attr-defined]
        return live_events(session.events), dict(session.state)

    assert client.http.portal is not None
    events, state = client.http.portal.call(read)
    return events, state


def refusal(client: AgentClient, chat_id: str, body: dict[str, Any]) -> str:
    """The error of a ``message`` the socket answers with an ``error`` chunk and ``[DONE]``."""
    socket = InProcessSocket(client.http, f"ws://localhost/live?chatId={chat_id}", {})
    try:
        socket.send(json.dumps({"type": "message", "id": chat_id, **body}))
        chunks = []
        while (frame := socket.recv(10)) != "data: [DONE]\n\n":
            chunks.append(json.loads(frame.removeprefix("data: ")))
    finally:
        socket.close()
    (error,) = chunks
    assert error["type"] == "error", chunks
    return str(error["errorText"])


def test_a_live_message_stamps_its_event_with_its_id_and_no_state(counter: AgentClient) -> None:
    chat = TableChat(counter.http, "live")
    try:
        chat.send("note milk")
        chat.send("my notes")
    finally:
        chat.close()
    events, state = stored_events(counter, chat.chat_id)
    stamps = [(e.custom_metadata or {}).get(USER_MESSAGE_ID_KEY) for e in events if is_user_turn(e)]
    assert stamps == ["user-1", "user-2"]
    assert CARRIED_STAMPS_KEY not in state
    assert not any(CARRIED_STAMPS_KEY in (e.actions.state_delta or {}) for e in events)


def test_a_voice_message_is_not_answered_again(counter: AgentClient) -> None:
    voice = {"id": "v1", "role": "user", "parts": [{"type": "data-voice", "data": {}}]}
    body = {"messages": [voice], "trigger": "regenerate-message"}
    assert "voice message cannot be answered again" in refusal(counter, "voice-chat", body)


def test_an_edit_names_the_last_message_or_is_refused(counter: AgentClient) -> None:
    chat = TableChat(counter.http, "live")
    chat.send("note milk")
    chat.reload()  # its socket let go
    body = {"messages": chat.messages[:1], "trigger": "submit-message", "messageId": "user-9"}
    assert "does not name the last message" in refusal(counter, chat.chat_id, body)


class SlowToAnswerResultsLlm(ScriptedLlm):
    """The script, but slow to answer a tool's result: a model that has not begun its answer
    to the history when the next message arrives."""

    async def _reply(
        self, contents: Sequence[types.Content], browser_tools: Collection[str]
    ) -> DemoReply:
        if contents and any(p.function_response for p in contents[-1].parts or []):
            await asyncio.sleep(0.3)
        return await super()._reply(contents, browser_tools)


def scan_barcode(tool_context: ToolContext) -> None:
    """The page scans a barcode; nothing to do here."""


def test_the_answer_to_a_history_at_connect_stays_out_of_the_next_response() -> None:
    model = SlowToAnswerResultsLlm(
        script={"scan": [call("scan_barcode"), "Thanks, I have the code."]}
    )
    agent = LlmAgent(name="scanner", model=model, tools=[LongRunningFunctionTool(scan_barcode)])
    with serve_agent(agent, settings_for_tests()) as client:
        chat = TableChat(client.http, "live")
        try:
            chat.send("scan the code")
            # The socket leaves the browser call waiting: it ends with "the user left". The
            # next socket's model gets a history that ends with that result, and answers it
            # as it connects: nobody asked, and the next message must not get that answer
            # (nor be cut short by it).
            chat.reload()
            again = chat.send("scan it again")
        finally:
            chat.close()
    assert [c["toolName"] for c in again.tool_calls] == ["scan_barcode"]
    assert again.text == ""
    assert "Thanks" not in json.dumps(again.chunks)

"""Late results applied by the chat's holder (docs/adr/0073), in this process, on the SQLite
and the in-memory store: the three rules, the model's view, and the chat's record against a
page's old copy.

Each chat's history is what a run that lost the chat leaves (its call, its start mark, and
what the next holder recorded), written through the app's own session service; the late
result is handed off as ``ResultOutbox`` hands it off. Then the chat's next message runs on the
real app and Runner with the crash agent's ScriptedLlm (tests/support/agents/crash.py), whose
``MODEL_LOG`` says which ``pay`` results each model request carried.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.adk.events import Event
from google.genai import types

from adk_stream_protocol.protocol.tool_calls import (
    CALL_OUTCOME_KEY,
    CALL_STARTED_KEY,
    OUTCOME_UNKNOWN_RESULT,
)
from adk_stream_protocol.store.chat_index import LateResult
from adk_stream_protocol.store.history import ASSISTANT_MESSAGE_ID_KEY, USER_MESSAGE_ID_KEY
from adk_stream_protocol.turns.bridge import Bridge, bridge_of
from adk_stream_protocol.turns.late_results import call_state
from tests.support.rig import (
    InProcessApp,
    assistant_message,
    chat_body,
    in_process_app,
    post_stream,
    user_message,
)
from tests.test_crashes import AGENT

USER = "local-user"
AUTHOR, TOOL, INVOCATION = "payer", "pay", "e-cut"
PAID = {"paid": 10, "to": "Bob"}
UNKNOWN_TEXT = OUTCOME_UNKNOWN_RESULT["error"]


@pytest.fixture(params=["sqlite", "memory"])
def app(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InProcessApp]:
    monkeypatch.setenv("CRASH_LEDGER", str(tmp_path / "ledger.txt"))
    monkeypatch.setenv("MODEL_LOG", str(tmp_path / "model.log"))
    store: dict[str, Any] = {"session_store": "memory://"} if request.param == "memory" else {}
    with in_process_app(tmp_path, agent=AGENT, **store) as target:
        yield target


class CutChat:
    """A chat whose payment X was cut in a run that lost the chat, and its late result."""

    def __init__(self, app: InProcessApp) -> None:
        self.app = app
        self.bridge: Bridge = bridge_of(app.app.state)
        self.id = f"late-{uuid.uuid4().hex[:10]}"
        self.call_id = f"adk-{uuid.uuid4()}"
        self.model_log = Path(app.db_path).parent / "model.log"

    def history(self, *ends: str) -> None:
        """The user's message, the payment's call and its start mark, then each of ``ends``:
        ``unknown`` (the next holder's result), ``answer`` (the model's text), ``paid`` (a real
        result, as a rerun records it)."""
        events = [
            Event(
                author="user",
                invocation_id=INVOCATION,
                content=types.Content(role="user", parts=[types.Part(text="Pay Bob 10")]),
                custom_metadata={USER_MESSAGE_ID_KEY: "u1"},
            ),
            Event(
                author=AUTHOR,
                invocation_id=INVOCATION,
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(
                            function_call=types.FunctionCall(
                                id=self.call_id, name=TOOL, args={"amount": 10, "to": "Bob"}
                            )
                        )
                    ],
                ),
                custom_metadata={ASSISTANT_MESSAGE_ID_KEY: "m1"},
            ),
            Event(
                author=AUTHOR,
                invocation_id=INVOCATION,
                custom_metadata={CALL_STARTED_KEY: self.call_id},
            ),
        ]
        for end in ends:
            events.append(self._end(end))
        self._portal(self._store(events))

    def _end(self, end: str) -> Event:
        if end == "answer":
            return Event(
                author=AUTHOR,
                invocation_id=INVOCATION,
                content=types.Content(role="model", parts=[types.Part(text="Paid Bob.")]),
                custom_metadata={ASSISTANT_MESSAGE_ID_KEY: "m1"},
            )
        response = dict(OUTCOME_UNKNOWN_RESULT) if end == "unknown" else dict(PAID)
        outcome = "unknown" if end == "unknown" else "rerun"
        return Event(
            author=AUTHOR,
            invocation_id=INVOCATION,
            content=types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            id=self.call_id, name=TOOL, response=response
                        )
                    )
                ],
            ),
            custom_metadata={CALL_OUTCOME_KEY: {self.call_id: outcome}},
        )

    async def _store(self, events: list[Event]) -> None:
        sessions = self.bridge.sessions
        session = await sessions.open(USER, self.id)
        for event in events:
            await sessions.service.append_event(session, event)

    def hand_off(self, response: dict[str, Any]) -> None:
        late = LateResult(self.call_id, TOOL, response, INVOCATION, AUTHOR, datetime.now(UTC))
        index = self.bridge.chats
        self._portal(index.keep_late_result(self.bridge.sessions.app_name, USER, self.id, late))

    def waiting(self) -> list[LateResult]:
        index = self.bridge.chats
        held: list[LateResult] = self._portal(
            index.late_results(self.bridge.sessions.app_name, USER, self.id)
        )
        return held

    def events(self) -> list[Event]:
        async def read() -> list[Event]:
            sessions = self.bridge.sessions
            session = await sessions.service.get_session(
                app_name=sessions.app_name, user_id=USER, session_id=self.id
            )
            assert session is not None
            return list(session.events)

        events: list[Event] = self._portal(read())
        return events

    def results(self) -> list[tuple[dict[str, Any], Any]]:
        """Each stored result of the call, with the outcome it is marked with."""
        return [
            (
                part.function_response.response or {},
                (event.custom_metadata or {}).get(CALL_OUTCOME_KEY, {}).get(self.call_id),
            )
            for event in self.events()
            for part in (event.content.parts if event.content and event.content.parts else [])
            if part.function_response is not None and part.function_response.id == self.call_id
        ]

    def model_requests(self) -> list[list[Any]]:
        """The ``pay`` results each model request carried, in order."""
        text = self.model_log.read_text() if self.model_log.exists() else ""
        return [json.loads(line) for line in text.splitlines()]

    def record(self) -> list[dict[str, Any]]:
        response = self.app.http.get(f"/chats/{self.id}")
        assert response.status_code == 200, response.text
        messages: list[dict[str, Any]] = response.json()["messages"]
        return messages

    def _portal(self, awaitable: Any) -> Any:
        portal = self.app.http.portal
        assert portal is not None

        async def run() -> Any:
            return await awaitable

        return portal.call(run)


def tool_part(messages: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    (part,) = [p for m in messages for p in m.get("parts", []) if p.get("toolCallId") == call_id]
    found: dict[str, Any] = part
    return found


def page_message(call_id: str) -> dict[str, Any]:
    """The assistant message a page holds after the next holder recorded the payment as
    outcome unknown."""
    return {
        "id": "m1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-pay",
                "toolCallId": call_id,
                "state": "output-error",
                "input": {"amount": 10, "to": "Bob"},
                "errorText": UNKNOWN_TEXT,
            },
            {"type": "text", "text": "Paid Bob.", "state": "done"},
        ],
    }


def test_a_late_result_becomes_the_result_of_a_call_without_one(app: InProcessApp) -> None:
    chat = CutChat(app)
    chat.history()  # the run stopped after the start mark: the turn was cut
    chat.hand_off(PAID)
    answer = post_stream(app, chat_body(chat.id, user_message("Hello", "u2")))
    assert answer.status == 200, answer.body
    # The cut turn was finished with the real result (not outcome unknown), then answered.
    assert chat.results() == [(PAID, "late")]
    assert chat.waiting() == []
    requests = chat.model_requests()
    assert requests and all(results == [PAID] for results in requests), requests
    assert "Hello again." in answer.text()


def test_a_late_result_follows_a_recorded_outcome_unknown(app: InProcessApp) -> None:
    chat = CutChat(app)
    chat.history("unknown", "answer")
    chat.hand_off(PAID)
    answer = post_stream(app, chat_body(chat.id, user_message("Hello", "u2")))
    assert answer.text() == "Hello again."
    # The unknown outcome stays in the history, and the real result comes after it.
    assert chat.results() == [(OUTCOME_UNKNOWN_RESULT, "unknown"), (PAID, "late")]
    assert call_state(chat.events(), chat.call_id) == "finished"
    # ADK gives the call its last response: the model saw the payment, not the unknown.
    assert chat.model_requests() == [[PAID]]
    assert chat.waiting() == []


def test_a_late_result_of_a_call_finished_under_the_same_key_is_dropped(
    app: InProcessApp, caplog: pytest.LogCaptureFixture
) -> None:
    chat = CutChat(app)
    chat.history("paid", "answer")
    chat.hand_off({**PAID, "late": True})
    with caplog.at_level(logging.INFO):
        answer = post_stream(app, chat_body(chat.id, user_message("Hello", "u2")))
    assert answer.text() == "Hello again."
    assert chat.results() == [(PAID, "rerun")]
    assert chat.model_requests() == [[PAID]]
    assert chat.waiting() == []
    (line,) = [
        r.getMessage()
        for r in caplog.records
        if "already finished under the same key" in r.getMessage()
    ]
    assert f"chat={chat.id}" in line and f"call={chat.call_id}" in line
    assert all(r.levelno == logging.INFO for r in caplog.records if r.getMessage() == line)


def test_a_page_s_old_copy_does_not_undo_a_late_result_in_the_record(app: InProcessApp) -> None:
    chat = CutChat(app)
    chat.history("unknown", "answer")
    # The record, as the page held the chat when the next holder's response ended.
    page = [user_message("Pay Bob 10", "u1"), page_message(chat.call_id)]
    index, app_name = chat.bridge.chats, chat.bridge.sessions.app_name
    chat._portal(index.record_messages(app_name, USER, chat.id, page))
    chat.hand_off(PAID)

    page.append(user_message("Hello", "u2"))
    first = post_stream(app, chat_body(chat.id, *page))  # stock useChat: the whole chat
    assert first.text() == "Hello again."
    settled = tool_part(chat.record(), chat.call_id)
    assert settled["state"] == "output-available" and settled["output"] == PAID, settled
    assert "errorText" not in settled
    # The page never learnt it: its copy still says unknown, and it sends it again.
    page.append(assistant_message(first))
    page.append(user_message("And now?", "u3"))
    assert tool_part(page, chat.call_id)["state"] == "output-error"
    again = post_stream(app, chat_body(chat.id, *page))
    assert again.status == 200, again.body
    record = chat.record()
    assert [m["id"] for m in record] == [m["id"] for m in page] + [record[-1]["id"]]
    settled = tool_part(record, chat.call_id)
    assert settled["state"] == "output-available" and settled["output"] == PAID, settled


def test_a_late_result_for_a_call_the_chat_does_not_hold_is_dropped(app: InProcessApp) -> None:
    chat = CutChat(app)
    chat.history("unknown", "answer")
    made = chat.call_id
    chat.call_id = "adk-never-made"  # a rewind took the call away, say
    chat.hand_off(PAID)
    answer = post_stream(app, chat_body(chat.id, user_message("Hello", "u2")))
    assert answer.text() == "Hello again."
    assert chat.results() == [] and chat.waiting() == []
    chat.call_id = made
    assert chat.results() == [(OUTCOME_UNKNOWN_RESULT, "unknown")]


def test_a_retry_shows_a_late_result_on_the_message_it_continues(app: InProcessApp) -> None:
    chat = CutChat(app)
    chat.history()
    held = {
        "id": "m1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-pay",
                "toolCallId": chat.call_id,
                "state": "input-available",
                "input": {"amount": 10, "to": "Bob"},
            },
        ],
    }
    page = [user_message("Pay Bob 10", "u1"), held]
    index, app_name = chat.bridge.chats, chat.bridge.sessions.app_name
    chat._portal(index.record_messages(app_name, USER, chat.id, page))
    chat.hand_off(PAID)
    # The page sends its message again (a retry): the cut turn is finished on it.
    retry = post_stream(app, chat_body(chat.id, *page, messageId="m1"))
    assert retry.status == 200, retry.body
    assert retry.of_type("start")[0]["messageId"] == "m1"
    outputs = [c for c in retry.chunks if c["type"].startswith("tool-output")]
    assert outputs == [
        {"type": "tool-output-available", "toolCallId": chat.call_id, "output": PAID}
    ]
    assert retry.text() == "Paid Bob."
    assert chat.results() == [(PAID, "late")]
    settled = tool_part(chat.record(), chat.call_id)
    assert settled["state"] == "output-available" and settled["output"] == PAID, settled


def test_a_new_message_sends_no_chunk_for_a_call_of_an_earlier_message(app: InProcessApp) -> None:
    chat = CutChat(app)
    chat.history("unknown", "answer")
    chat.hand_off(PAID)
    answer = post_stream(app, chat_body(chat.id, user_message("Hello", "u2")))
    assert [c for c in answer.chunks if c.get("toolCallId") == chat.call_id] == []

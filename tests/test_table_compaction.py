"""The behaviour table's compaction rows (docs/adr/0070; issue 38 point 5): an ``App`` with ADK's
``EventsCompactionConfig``, both triggers (a sliding window; a token threshold), on every
transport, through the real app and ADK Runner with scripted models
(tests/support/agents/compaction.py; ADK's ``LlmEventSummarizer`` on a scripted model).

Compaction changes what the model is sent and nothing else: the page's record
(``GET /chats/{chatId}``) keeps every message. A turn that waits for the page (an approval, an
input request, a browser tool) is never summarized while it waits, and is answered after a
compaction ran (ADK alone summarized a paused turn's message and call: the model resumed
without them). The page hears of each compaction as a transient ``data-compaction`` part.
``run_live`` (``/live?chatId=``) does not compact.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.events import Event

from adk_stream_protocol.foundation.identity import LOCAL_USER
from adk_stream_protocol.protocol.parts.compactions import COMPACTION_PART
from adk_stream_protocol.testing import AgentClient, ChatResponse, serve_agent, settings_for_tests
from adk_stream_protocol.turns.bridge import bridge_of
from tests.support.agents.compaction import SUMMARY, TRIGGERS, SeenModel, compacting_app
from tests.support.agents.samples import Ledger
from tests.support.table_chat import TableChat

RUN_ASYNC = ("stream", "ai7")
# Each kind of pause the page answers: what starts it, its tool part, how the page answers,
# and the model's answer once it has.
PAUSES: dict[str, tuple[str, str, Any, str]] = {
    "approval": ("pay Hanako", "tool-transfer_money", True, "Sent."),
    "input": ("draw a logo", "tool-adk_request_input", "green", "A logo in your colour."),
    "browser": ("scan this", "tool-scan_barcode", {"code": "4901234"}, "Scanned."),
}
# Turns before the pause: enough for a compaction before it and one right after it.
EARLIER = {"sliding": 3, "tokens": 2}


class Served:
    def __init__(self, client: AgentClient, ledger: Ledger) -> None:
        self.client = client
        self.ledger = ledger

    @property
    def model(self) -> SeenModel:
        runner = bridge_of(self.client.http.app.state).runners.runner  # type: ignore[attr-defined]
        root = runner.app.root_agent if runner.app is not None else None
        assert isinstance(root, LlmAgent) and isinstance(root.model, SeenModel)
        return root.model

    def events(self, chat_id: str) -> list[Event]:
        bridge = bridge_of(self.client.http.app.state)  # type: ignore[attr-defined]

        async def read() -> list[Event]:
            session = await bridge.outbox.get_session(
                app_name="compacting", user_id=LOCAL_USER, session_id=chat_id
            )
            assert session is not None
            return list(session.events)

        assert self.client.http.portal is not None
        return self.client.http.portal.call(read)


@pytest.fixture(params=TRIGGERS)
def served(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Served]:
    ledger = Ledger()
    settings = settings_for_tests(session_store=f"sqlite:///{tmp_path / 'sessions.db'}")
    with serve_agent(compacting_app(request.param, ledger), settings) as client:
        yield Served(client, ledger)


def _compactions(response: ChatResponse) -> list[dict[str, Any]]:
    return [c for c in response.chunks if c["type"] == COMPACTION_PART]


def _waiting(response: ChatResponse, part_type: str) -> dict[str, Any]:
    assert response.message is not None
    (part,) = [p for p in response.message["parts"] if p["type"] == part_type]
    assert part["state"] in ("approval-requested", "input-available"), part
    return dict(part)


def _text(event: Event) -> str:
    parts = event.content.parts if event.content is not None else None
    return "".join(p.text or "" for p in parts or [])


def _answer(chat: TableChat, pause: str, part: dict[str, Any]) -> ChatResponse:
    _, _, answer, _ = PAUSES[pause]
    if pause == "approval":
        return chat.approve(answer)
    return chat.tool_output(part["toolCallId"], answer)


@pytest.mark.parametrize("transport", RUN_ASYNC)
@pytest.mark.parametrize("pause", list(PAUSES))
def test_a_turn_waiting_for_the_page_survives_compaction_and_the_record_stays_whole(
    served: Served, transport: str, pause: str, request: pytest.FixtureRequest
) -> None:
    trigger = request.node.callspec.params["served"]
    chat = TableChat(served.client.http, transport)
    compactions: list[dict[str, Any]] = []
    for n in range(EARLIER[trigger]):
        answer = chat.send(f"weather {n}")
        assert answer.text == "It is sunny today, and tomorrow looks sunny too."
        compactions += _compactions(answer)
    assert compactions  # compacted before the pause
    asked, part_type, _, resumed = PAUSES[pause]
    paused = chat.send(asked)
    part = _waiting(paused, part_type)
    # A compaction ran after the paused run, and the paused turn is not in it.
    assert _compactions(paused)
    stored = served.events(chat.chat_id)
    (ask,) = [e for e in stored if _text(e) == asked]
    latest = max(
        (e.actions.compaction for e in stored if e.actions.compaction is not None),
        key=lambda c: c.end_timestamp,
    )
    assert latest.end_timestamp < ask.timestamp

    answered = _answer(chat, pause, part)
    assert answered.text == resumed
    if pause == "approval":
        assert served.ledger.lines == ["transfer 50 Hanako"]
    # What the model was sent last: the summary in place of the first turns.
    last_request = served.model.seen[-1]
    assert SUMMARY in last_request
    assert "weather 0" not in last_request
    assert asked in last_request
    # The page's record keeps every message of the chat.
    chat.reload()
    texts = [p.get("text") for m in chat.messages if m["role"] == "user" for p in m["parts"]]
    assert texts == [f"weather {n}" for n in range(EARLIER[trigger])] + [asked]
    assert all(p["type"] != COMPACTION_PART for m in chat.messages for p in m["parts"])
    chat.close()


@pytest.mark.parametrize("served", ["sliding"], indirect=True)
def test_run_live_does_not_compact(served: Served) -> None:
    chat = TableChat(served.client.http, "live")
    for n in range(4):
        answer = chat.send(f"weather {n}")
        assert answer.text == "It is sunny today, and tomorrow looks sunny too."
        assert not _compactions(answer)
    paused = chat.send("pay Hanako")
    _waiting(paused, "tool-transfer_money")
    assert chat.approve(True).text == "Sent."
    stored = served.events(chat.chat_id)
    assert not [e for e in stored if e.actions.compaction is not None]
    chat.close()

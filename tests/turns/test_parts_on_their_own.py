"""A turn's parts built on their own, as a transport builds them, without the application
(docs/adr/0058): a response opened, delivered and recorded on the in-process coordination
and chat index; a ``/live`` turn driven as its connection drives it, on a runner that is
never started. Real ADK objects, no server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.events import Event
from google.adk.sessions import InMemorySessionService
from google.genai import types

from adk_stream_protocol.coordination.base import ChatKey
from adk_stream_protocol.coordination.local import LocalPendingCalls, local_coordination
from adk_stream_protocol.foundation.limits import RequestLimits
from adk_stream_protocol.foundation.outages import Outages
from adk_stream_protocol.foundation.settings import Settings
from adk_stream_protocol.observability.recording import Recorder
from adk_stream_protocol.observability.telemetry import Telemetry
from adk_stream_protocol.plugins.tool_starts import ToolStartPlugin
from adk_stream_protocol.protocol.chunks import TextDeltaChunk, TextEndChunk, TextStartChunk
from adk_stream_protocol.protocol.converter import StreamProtocolConverter
from adk_stream_protocol.protocol.ui_messages import ChatRequest, parse_chat_request
from adk_stream_protocol.store.chat_index import InMemoryChatIndex
from adk_stream_protocol.store.result_outbox import ResultOutbox
from adk_stream_protocol.turns.background_tasks import BackgroundTasks
from adk_stream_protocol.turns.chat_records import ChatRecords
from adk_stream_protocol.turns.chat_tools import ChatTools
from adk_stream_protocol.turns.live_runs import LiveRun
from adk_stream_protocol.turns.live_turns import LiveTurn
from adk_stream_protocol.turns.openings import Client, ResponseOpener
from adk_stream_protocol.turns.response import DONE_EVENT, Delivery, Response, UnloggedResponse
from adk_stream_protocol.turns.runners import Runners

CHAT: ChatKey = ("alice", "chat-1")


class ListSink:
    """A ``ChunkSink`` that keeps what it is sent."""

    def __init__(self) -> None:
        self.events: list[bytes] = []

    async def send(self, events: Sequence[bytes]) -> None:
        self.events.extend(events)

    async def close(self) -> None:
        return None


def request(text: str) -> ChatRequest:
    body = {
        "id": CHAT[1],
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}],
    }
    return parse_chat_request(body, RequestLimits.from_settings(Settings()))


def chunk_types(events: Sequence[bytes]) -> list[str]:
    return [
        json.loads(e.decode().removeprefix("data: "))["type"] if e != DONE_EVENT else "[DONE]"
        for e in events
    ]


@pytest.mark.asyncio
async def test_a_response_is_opened_delivered_and_recorded_without_the_app() -> None:
    coordination, index = local_coordination(), InMemoryChatIndex()
    opener = ResponseOpener(coordination, ChatRecords(index, "app", Recorder(None)), Outages())
    lease = await coordination.leases.try_acquire(CHAT)
    assert lease is not None
    async with opener.opening(CHAT, lease) as log:
        # The chat reads as answering from here, before its messages are stored.
        assert await coordination.chunk_logs.with_active_response([CHAT]) == {CHAT}
        opened = await opener.open(Client(), CHAT, lease, log, request("Hello"))
    stored = await index.get_chat("app", *CHAT)
    assert stored is not None and [m["role"] for m in stored.messages] == ["user"]

    sink = ListSink()
    response = Response(
        StreamProtocolConverter(message_id="m1"), Delivery(sink, opened.log, opened.records)
    )
    await response.start()
    await response.emit(
        [TextStartChunk(id="t1"), TextDeltaChunk(id="t1", delta="Hi"), TextEndChunk(id="t1")]
    )
    await response.finish()
    await opened.stop.close()
    await lease.release()

    assert chunk_types(sink.events)[0] == "start"
    assert chunk_types(sink.events)[-2:] == ["finish", "[DONE]"]
    assert await coordination.chunk_logs.with_active_response([CHAT]) == set()
    stored = await index.get_chat("app", *CHAT)
    assert stored is not None
    answer: dict[str, Any] = stored.messages[-1]
    assert answer["role"] == "assistant" and answer["id"] == "m1"
    assert [p.get("text") for p in answer["parts"] if p["type"] == "text"] == ["Hi"]


@pytest.mark.asyncio
async def test_a_live_turn_is_driven_as_its_connection_drives_it() -> None:
    settings = Settings(session_store="memory://", playground_dir=None)
    outages, pending, tasks = Outages(), LocalPendingCalls(), BackgroundTasks()
    outbox = ResultOutbox(InMemorySessionService(), outages)
    tools = ChatTools(
        ToolStartPlugin(outbox, InMemoryChatIndex()),
        pending,
        approval_timeout_seconds=1,
        on_outcome=lambda _: None,
    )
    agent = LlmAgent(name="solo", model="gemini-2.0-flash-live-001")
    runners = Runners(settings, agent, agent, outbox=outbox, tools=tools, outages=outages)
    # Never started: the turn only sends it what the model should get.
    run = LiveRun(CHAT, runners, tools, telemetry=Telemetry(), tasks=tasks)
    turn = LiveTurn(
        CHAT, run, user_message_id="u1", pending=pending, settings=settings, tasks=tasks
    )
    sink, ended = ListSink(), []
    response = await turn.open_response(
        "m1", Delivery(sink, UnloggedResponse()), on_end=lambda: ended.append(True)
    )
    assert await turn.streaming() and turn.response is response
    said = types.Content(role="model", parts=[types.Part(text="Hello there")])
    await turn.on_event(Event(author="solo", content=said))
    assert await turn.take_result("c9", {}) == "no browser call of this turn has that id"
    await turn.on_event(Event(author="solo", turn_complete=True))  # the model's turn ends

    assert ended == [True] and not await turn.streaming()
    assert response.done.is_set()
    types_sent = chunk_types(sink.events)
    assert types_sent[0] == "start" and types_sent[-2:] == ["finish", "[DONE]"]
    assert "text-delta" in types_sent
    await tasks.close()
    await runners.close()

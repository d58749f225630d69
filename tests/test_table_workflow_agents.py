"""The behaviour table's rows for ADK's workflow agents that its live mode cannot run
(docs/agent/features.md): a ``ParallelAgent`` inside a ``SequentialAgent`` and a
``LoopAgent`` answer on ``POST /stream`` and ai 7's socket (``run_async``); ``/live?chatId=``
refuses them at the first message with an ``error`` that says why, and leaves the chat as it
was (docs/adr/0063). Through the real app and ADK Runner with scripted models
(tests/support/agents/workflow_agents.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest
from google.adk.agents import BaseAgent
from google.adk.events import Event

from adk_stream_protocol.foundation.identity import LOCAL_USER
from adk_stream_protocol.testing import ChatResponse, serve_agent, settings_for_tests
from tests.support.agents.workflow_agents import (
    BRANCH_REPLIES,
    SKIPPED_REPLY,
    SUMMARY_REPLY,
    fan_out_agent,
    loop_agent,
    travel_desk,
)
from tests.support.rig import (
    HTTP_TIMEOUT,
    InProcessSocket,
    chat_body,
    sse_payloads,
    text_authors,
    user_message,
    user_turn_texts,
)
from tests.support.table_chat import TableChat

RUN_ASYNC = pytest.mark.parametrize("transport", ["stream", "ai7"])


@pytest.fixture
def serve(transport: str) -> Iterator[Callable[[BaseAgent], TableChat]]:
    """``serve(agent)``: a chat with the agent, served for the test, on the test's transport."""
    with ExitStack() as stack:

        def start(agent: BaseAgent) -> TableChat:
            chat = TableChat(
                stack.enter_context(serve_agent(agent, settings_for_tests())).http, transport
            )
            stack.callback(chat.close)
            return chat

        yield start


def _texts(response: ChatResponse) -> list[str]:
    assert response.message is not None
    return [part["text"] for part in response.message["parts"] if part["type"] == "text"]


def _authors(response: ChatResponse) -> set[str]:
    return {chunk["data"]["name"] for chunk in response.of_type("data-agent")}


def _stored_events(chat: TableChat) -> list[Event]:
    """The chat's events as its app's session store holds them."""
    bridge = chat.http.app.state.bridge  # type: ignore[attr-defined]
    assert chat.http.portal is not None

    async def stored() -> list[Event]:
        return list((await bridge.sessions.open(LOCAL_USER, chat.chat_id)).events)

    return chat.http.portal.call(stored)


@RUN_ASYNC
def test_a_parallel_agent_in_a_sequence_runs_both_branches_then_the_summary(
    serve: Callable[[BaseAgent], TableChat],
) -> None:
    planned = serve(fan_out_agent()).send("plan my trip")
    assert planned.errors == [], planned.chunks
    assert planned.of_type("finish")[-1]["finishReason"] == "stop"
    assert _authors(planned) == {"flights", "hotels", "summary"}
    assert _texts(planned)[-1] == "Here is your trip."


@RUN_ASYNC
def test_each_branch_of_a_parallel_agent_answers_in_a_text_part_of_its_own(
    serve: Callable[[BaseAgent], TableChat],
) -> None:
    """The branches stream at once (their deltas interleave on the wire), yet each branch's
    reply is one text part, whole and once, and the summary comes last (before: one text
    part held both branches' words mixed, and one branch's reply was lost)."""
    chat = serve(travel_desk())
    planned = chat.send("plan my weekend in Lisbon")
    assert planned.errors == [], planned.chunks
    texts = _texts(planned)
    assert sorted(texts[:3]) == sorted([*BRANCH_REPLIES.values(), SKIPPED_REPLY])
    assert texts[3:] == [SUMMARY_REPLY]
    starts = [c["id"] for c in planned.of_type("text-start")]
    deltas = [c["id"] for c in planned.of_type("text-delta")]
    assert deltas != sorted(deltas, key=starts.index), "the branches did not interleave"


@RUN_ASYNC
def test_the_agent_of_each_branchs_text_part_is_named_before_it(
    serve: Callable[[BaseAgent], TableChat],
) -> None:
    """Who answered, per part: the ``data-agent`` part last before each text part names the
    branch (or the summary) that said it, also after a reload."""
    chat = serve(travel_desk())
    planned = chat.send("plan my weekend in Lisbon")
    said = {**BRANCH_REPLIES, "cars": SKIPPED_REPLY, "summary": SUMMARY_REPLY}
    assert planned.message is not None
    assert text_authors(planned.message["parts"]) == {text: name for name, text in said.items()}
    # One name per part: another branch's words in between name no one again.
    assert len(planned.of_type("data-agent")) == len(said)
    chat.reload()
    assert chat.messages[-1]["parts"] == planned.message["parts"]


@RUN_ASYNC
def test_a_branch_its_callback_skips_shows_the_callbacks_reply(
    serve: Callable[[BaseAgent], TableChat],
) -> None:
    planned = serve(travel_desk()).send("plan my weekend in Lisbon")
    assert _texts(planned).count(SKIPPED_REPLY) == 1
    assert "A car is waiting at the airport." not in _texts(planned)


@RUN_ASYNC
def test_a_loop_agent_runs_every_round(serve: Callable[[BaseAgent], TableChat]) -> None:
    drafted = serve(loop_agent()).send("draft it")
    assert drafted.errors == [], drafted.chunks
    assert _texts(drafted) == ["Draft done.", "Draft done."]


def _refusals(chat: TableChat, *texts: str) -> list[list[dict[str, object]]]:
    """Each text sent as a new message on the chat's ``/live?chatId=`` socket, and each
    response's chunks (a refusal is not a response ``useChat`` opens: no ``start``); then
    the microphone's start, answered by a control frame."""
    socket = InProcessSocket(chat.http, f"ws://localhost/live?chatId={chat.chat_id}", {})
    responses: list[list[dict[str, object]]] = []
    try:
        for number, text in enumerate(texts, start=1):
            socket.send(
                json.dumps(
                    {"type": "message", "version": "1"}
                    | chat_body(chat.chat_id, user_message(text, f"user-{number}"))
                )
            )
            frames: list[str] = []
            while not frames or frames[-1] != "data: [DONE]\n\n":
                frames.append(socket.recv(HTTP_TIMEOUT))
            payloads = sse_payloads("".join(frames))
            responses.append([json.loads(p) for p in payloads if p != "[DONE]"])
        socket.send(json.dumps({"type": "audio_control", "action": "start"}))
        responses.append([json.loads(socket.recv(HTTP_TIMEOUT))])
    finally:
        socket.close()
    return responses


@pytest.mark.parametrize("transport", ["stream"])
@pytest.mark.parametrize(
    ("make", "named"),
    [(fan_out_agent, "'research' is a ParallelAgent"), (loop_agent, "'drafting' is a LoopAgent")],
)
def test_live_refuses_a_parallel_or_loop_agent_at_the_first_message(
    serve: Callable[[BaseAgent], TableChat], make: Callable[[], BaseAgent], named: str
) -> None:
    """``/live?chatId=``: the refusal is the first message's whole response, and the next
    one's; nothing of either is kept, and the same chat then goes on on ``POST /stream``."""
    chat = serve(make())
    why = (
        f"Live mode (ADK's run_live) cannot run this agent: {named}. Use POST /stream, or "
        "ai 7's WebSocketChatTransport on /live (without ?chatId=), for it."
    )
    refusal = {"type": "error", "errorText": why}
    assert _refusals(chat, "plan my trip", "draft it") == [
        [refusal],
        [refusal],
        [{"type": "error", "message": why}],
    ]
    assert _stored_events(chat) == []
    assert chat.http.get(f"/chats/{chat.chat_id}").status_code == 404, "no chat was recorded"
    answered = chat.send("plan my trip")
    assert answered.errors == [], answered.chunks
    assert user_turn_texts(_stored_events(chat)) == ["plan my trip"]

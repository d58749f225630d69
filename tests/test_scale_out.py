"""Several processes as one server: two real uvicorn instances (and one ``--workers 2``) on one
PostgreSQL database and one Redis, as a team behind a load balancer runs it.

Races go to both instances at once; resumes and stops go to the instance that does not run
the response; the producer of a response is SIGKILLed. Needs PostgreSQL and Redis
(tests/support/services.py: skipped with the reason when absent, failed in CI).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.adk.events import Event

from adk_stream_protocol.testing import assistant_message as message_from_chunks
from adk_stream_protocol.turns.drain import TOOL_WAIT_SECONDS
from tests.support.ai7_socket import V7Socket
from tests.support.real_client import (
    CLIENTS,
    assistant_messages,
    checked,
    run_real_client,
    text_of,
    tool_parts,
)
from tests.support.rig import (
    LiveServer,
    SocketClosed,
    answer_approvals,
    assistant_message,
    chat_body,
    chunks_of,
    post_stream,
    run_server,
    sse_payloads,
    stream_result,
    streaming,
    user_message,
)

# Short, so that the lapse tests are quick; not 2 s, which a loaded CI machine (two workers,
# each running servers) can miss between renewals, lapsing a healthy run's lease.
LEASE_TTL_SECONDS = 3.0
TIMEOUT = 30.0
APP_NAME = "adk_stream_protocol"
USER = "local-user"


def cluster_env(postgres_url: str, redis_url: str, prefix: str) -> dict[str, str]:
    """What every instance of one deployment shares."""
    return {
        "ADK_STREAM_SESSION_STORE": postgres_url,
        "ADK_STREAM_REDIS_URL": redis_url,
        "ADK_STREAM_REDIS_KEY_PREFIX": prefix,
        "ADK_STREAM_RESUMABLE_STREAMS": "true",
        "ADK_STREAM_LEASE_TTL_SECONDS": str(LEASE_TTL_SECONDS),
        # The tests' agent: a slow tool, an approval above 100, a slow live model.
        "ADK_STREAM_AGENT": "tests.support.agents.tools:slow_live_agent",
        "ADK_STREAM_KEEP_ALIVE_SECONDS": "0.5",
    }


@pytest.fixture(scope="module")
def env(postgres_url: str, redis_url: str, redis_run_prefix: str) -> dict[str, str]:
    return cluster_env(postgres_url, redis_url, f"{redis_run_prefix}.scale-out")


@pytest.fixture(scope="module")
def pair(
    env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Instances A and B."""
    with (
        run_server(tmp_path_factory.mktemp("instance-a"), env) as a,
        run_server(tmp_path_factory.mktemp("instance-b"), env) as b,
    ):
        yield a, b


def new_chat(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def at_once(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls in threads released together; their results in order."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], Any]) -> Any:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def stored_events(postgres_url: str, chat_id: str, app_name: str = APP_NAME) -> list[Event]:
    """The chat's events as the shared database holds them."""
    from google.adk.sessions.database_session_service import DatabaseSessionService

    async def read() -> list[Event]:
        service = DatabaseSessionService(postgres_url)
        try:
            session = await service.get_session(app_name=app_name, user_id=USER, session_id=chat_id)
            assert session is not None, f"no session for {chat_id}"
            return list(session.events)
        finally:
            await service.db_engine.dispose()

    return asyncio.run(read())


def tool_runs(events: list[Event], tool_name: str) -> int:
    """How often the tool ran: its results stored, not counting the "needs approval"
    response ADK stores for a call that waits for confirmation."""
    return sum(
        1
        for event in events
        for fr in event.get_function_responses()
        if fr.name == tool_name and "error" not in (fr.response or {})
    )


# -- exactly once ---------------------------------------------------------------------------------


def test_an_approval_sent_to_both_instances_runs_its_tool_once(
    pair: tuple[LiveServer, LiveServer], postgres_url: str
) -> None:
    a, b = pair
    for _ in range(4):
        chat = new_chat("approval-race")
        ask = user_message("transfer 150", "u1")
        paused = post_stream(a, chat_body(chat, ask))
        assert paused.of_type("tool-approval-request"), paused.types()
        body = chat_body(chat, ask, answer_approvals(assistant_message(paused), True))
        results = at_once(*(lambda t=t, body=body: post_stream(t, body) for t in (a, b)))
        assert sorted(r.status for r in results) == [200, 409], [r.body for r in results]
        (winner,) = (r for r in results if r.status == 200)
        assert winner.of_type("tool-output-available")[0]["output"] == {"transferred": 150.0}
        assert tool_runs(stored_events(postgres_url, chat), "transfer") == 1


DELETE_ASKED = {"name": "notes.txt", "keep_backup": True}  # the payload delete_file asks with


def deletions(events: list[Event]) -> int:
    """How often delete_file's body ran with the user's confirmation (the asking run's result,
    its "waiting" placeholder, is not a deletion)."""
    return sum(
        1
        for event in events
        for fr in event.get_function_responses()
        if fr.name == "delete_file" and "deleted" in (fr.response or {})
    )


def test_an_in_tool_confirmation_answered_on_the_other_instance_runs_once(
    pair: tuple[LiveServer, LiveServer], postgres_url: str
) -> None:
    """A tool that asks from its body (``request_confirmation``), asked on A and answered on
    B: by ``POST /stream``, and by ai 7's socket (a declared one too). Its body runs once
    more, with the answer."""
    a, b = pair
    chat = new_chat("in-tool-stream")
    ask = user_message("delete notes.txt", "u1")
    paused = post_stream(a, chat_body(chat, ask))
    (request,) = paused.of_type("tool-approval-request")
    done = post_stream(b, chat_body(chat, ask, answer_approvals(assistant_message(paused), True)))
    (output,) = done.of_type("tool-output-available")
    assert output["toolCallId"] == request["toolCallId"]
    assert output["output"] == {"deleted": "notes.txt", "confirmed_payload": DELETE_ASKED}
    assert deletions(stored_events(postgres_url, chat)) == 1

    # ai 7's socket: the in-tool confirmation, and a declared one (transfer above 100).
    expected = {
        "delete notes.txt": {"deleted": "notes.txt", "confirmed_payload": DELETE_ASKED},
        "transfer 150": {"transferred": 150.0},
    }
    on_a, on_b = V7Socket(a), V7Socket(b)
    try:
        for text, output_of_the_run in expected.items():
            chat = new_chat("ai7-confirmation")
            ask = user_message(text, "u1")
            asked = on_a.reply(on_a.send(chat, ask), timeout=TIMEOUT).stream()
            assert asked.of_type("tool-approval-request"), asked.types()
            answered = answer_approvals(assistant_message(asked), True)
            request_id = on_b.send(chat, ask, answered, messageId=answered["id"])
            done = on_b.reply(request_id, timeout=TIMEOUT).stream()
            (output,) = done.of_type("tool-output-available")
            assert output["output"] == output_of_the_run
            events = stored_events(postgres_url, chat)
            assert deletions(events) + tool_runs(events, "transfer") == 1
    finally:
        on_a.close()
        on_b.close()


@pytest.fixture(scope="module")
def bank_pair(
    env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Instances A and B serving the bank (tests/support/agents/samples.py), whose live model
    asks."""
    bank = {
        **env,
        "ADK_STREAM_AGENT": "tests.support.agents.samples:served_bank",
        "ADK_STREAM_REDIS_KEY_PREFIX": env["ADK_STREAM_REDIS_KEY_PREFIX"] + ".bank",
    }
    with (
        run_server(tmp_path_factory.mktemp("bank-a"), bank) as a,
        run_server(tmp_path_factory.mktemp("bank-b"), bank) as b,
    ):
        yield a, b


# What the bank's tools store when their body acts: the loan opened, the money sent.
ACTED = {"I need a loan": ("request_loan", "opened"), "send 50 to Ana": ("transfer_money", "sent")}


@pytest.mark.parametrize("approved", [True, False])
@pytest.mark.parametrize("answered_on", ["stream", "live"])
@pytest.mark.parametrize("asking", list(ACTED))
def test_a_live_approval_whose_socket_left_is_answered_on_the_other_instance(
    bank_pair: tuple[LiveServer, LiveServer],
    postgres_url: str,
    asking: str,
    answered_on: str,
    approved: bool,
) -> None:
    """Asked on A's ``/live?chatId=`` socket, which leaves: the approval is handed over to the
    chat's session (ADR 0047), B's record shows it waiting, and B answers it, by ``POST
    /stream`` or by a ``/live?chatId=`` socket: the tool acts once when approved, never when
    denied (an in-tool and a declared confirmation). B's socket then goes on live."""
    a, b = bank_pair
    chat = new_chat(f"live-handoff-{answered_on}")
    ask = user_message(asking, "u1")
    socket = a.connect(f"/live?chatId={chat}")
    try:
        socket.send(json.dumps({"type": "message", **chat_body(chat, ask)}))
        asked = _frames_until_done(socket)
    finally:
        socket.close()
    (request,) = [c for c in asked if c["type"] == "tool-approval-request"]
    answered = answer_approvals(message_from_chunks(asked), approved)
    tool, acted = ACTED[asking]

    on_b = _live_socket(b, chat)  # once A has let the chat go
    record = b.http.get(f"/chats/{chat}").json()["messages"][-1]
    (part,) = [p for p in record["parts"] if p.get("toolCallId") == request["toolCallId"]]
    assert part["state"] == "approval-requested", part
    try:
        body = chat_body(chat, ask, answered, messageId=answered["id"])
        if answered_on == "stream":
            on_b.close()
            on_b = None
            done = post_stream(b, body).chunks
        else:
            on_b.send(json.dumps({"type": "message", **body}))
            done = _frames_until_done(on_b)
        outputs = [c for c in done if c["type"] in ("tool-output-available", "tool-output-denied")]
        assert [c["toolCallId"] for c in outputs] == [request["toolCallId"]], done
        events = stored_events(postgres_url, chat)
        assert _acted(events, tool, acted) == (1 if approved else 0)
        if on_b is not None:  # the socket goes on live, on the answered history
            _send_message(on_b, chat, "what is my balance", "u2")
            balance = _frames_until_done(on_b)
            assert "".join(c.get("delta", "") for c in balance) == "You have 1200."
    finally:
        if on_b is not None:
            on_b.close()
    assert _acted(stored_events(postgres_url, chat), tool, acted) == (1 if approved else 0)


def _acted(events: list[Event], tool_name: str, status: str) -> int:
    return sum(
        1
        for event in events
        for fr in event.get_function_responses()
        if fr.name == tool_name and (fr.response or {}).get("status") == status
    )


# -- ADK 2's questions for the user (issue 37) ------------------------------------------------


@pytest.fixture(scope="module")
def asking_pair(
    env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], tuple[LiveServer, LiveServer]]]:
    """Instances A and B serving one of the agents that ask the user a question
    (tests/support/agents/human_input.py, by its attribute), started when a test first needs
    them."""
    pairs: dict[str, tuple[LiveServer, LiveServer]] = {}
    with ExitStack() as stack:

        def pair_of(agent: str) -> tuple[LiveServer, LiveServer]:
            if agent not in pairs:
                served = {
                    **env,
                    "ADK_STREAM_AGENT": f"tests.support.agents.human_input:{agent}",
                    "ADK_STREAM_REDIS_KEY_PREFIX": f"{env['ADK_STREAM_REDIS_KEY_PREFIX']}.{agent}",
                }
                pairs[agent] = (
                    stack.enter_context(run_server(tmp_path_factory.mktemp(f"{agent}-a"), served)),
                    stack.enter_context(run_server(tmp_path_factory.mktemp(f"{agent}-b"), served)),
                )
            return pairs[agent]

        yield pair_of


# (agent, its app's name, the user's message, an answer outside the schema, the answer, the
# agent's reply to it)
QUESTIONS = {
    "workflow": (
        "served_time_off",
        "time_off",
        "I need some time off",
        {"days": 0},
        {"days": 3},
        "Approved: 3 days off.",
    ),
    "llm-tool": (
        "served_designer",
        APP_NAME,
        "draw me a logo",
        "purple",
        "green",
        "A logo in the colour you chose, coming up.",
    ),
}


@pytest.mark.parametrize(("client", "transport"), [("6.0.25", "http"), ("7", "ws-stock")])
@pytest.mark.parametrize("question", list(QUESTIONS))
def test_a_question_asked_on_one_instance_is_answered_on_the_other_and_resumes_once(
    asking_pair: Callable[[str], tuple[LiveServer, LiveServer]],
    postgres_url: str,
    question: str,
    client: str,
    transport: str,
) -> None:
    """ADK 2's ``RequestInput`` (a workflow) and the ``request_input`` tool: asked on A; the
    real client loads the chat from B (``GET /chats/{chatId}`` shows the question waiting),
    answers outside the schema (refused, the reason shown), then right, on ``POST /stream``
    (ai 6.0.25, strict) or ai 7's socket. The run resumes once, and the same answer sent to A
    afterwards is refused."""
    agent, app_name, text, wrong, right, reply = QUESTIONS[question]
    a, b = asking_pair(agent)
    chat = new_chat(f"question-{transport}")
    asked = post_stream(a, chat_body(chat, user_message(text, "u1")))
    (request,) = asked.of_type("tool-input-available")
    assert request["toolName"] == "adk_request_input"

    answer = {"action": "toolOutput", "toolName": "adk_request_input"}
    job = {
        "api": b.base_url.replace("http://", "ws://") + "/live"
        if transport == "ws-stock"
        else f"{b.base_url}/stream",
        "transport": transport,
        "client": client,
        "chatId": chat,
        "sendAutomaticallyWhen": "tool-calls",
        "steps": [{"action": "reload"}, answer | {"output": wrong}, answer | {"output": right}],
    }
    report = checked(job, run_real_client(job), refusals=1)
    assert report["reloads"] == [{"afterRequest": -1, "status": 200}]
    (refusal,) = report["errors"]
    assert f"input request '{request['toolCallId']}'" in refusal
    (message,) = assistant_messages(report)
    assert report["status"] == "ready" and text_of(message).endswith(reply)
    (part,) = tool_parts(message)
    assert part["toolCallId"] == request["toolCallId"] and part["state"] == "output-available"

    def resumed() -> tuple[list[dict[str, Any]], int]:
        events = stored_events(postgres_url, chat, app_name)
        answers = [
            dict(r.response or {})
            for e in events
            for r in e.get_function_responses()
            if r.id == request["toolCallId"]
        ]
        replies = sum(
            "".join(p.text or "" for p in (e.content.parts or [])) == reply
            for e in events
            if e.content
        )
        return answers, replies

    stored = right if isinstance(right, dict) else {"result": right}
    assert resumed() == ([stored], 1)
    again = a.http.post(
        "/stream",
        json=chat_body(chat, *report["messages"], messageId=message["id"]),
    )
    assert again.status_code == 409, again.text
    assert resumed() == ([stored], 1)


def _live_socket(server: LiveServer, chat: str) -> Any:
    """A ``/live?chatId=`` socket on the chat, once the instance that held it let it go."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        socket = server.connect(f"/live?chatId={chat}")
        try:
            socket.send(json.dumps({"type": "ping", "timestamp": 1}))
            assert json.loads(socket.recv(TIMEOUT))["type"] == "pong"
            return socket
        except SocketClosed as closed:
            socket.close()
            assert closed.code == 4409 and time.monotonic() < deadline, closed


def test_first_messages_on_one_chat_at_once_never_fail(
    pair: tuple[LiveServer, LiveServer], postgres_url: str
) -> None:
    a, b = pair
    for _ in range(4):
        chat = new_chat("first-race")
        first = chat_body(chat, user_message("hi", "u1"))
        other = chat_body(chat, user_message("hello", "u2"))
        results = at_once(
            *(lambda t=t, body=body: post_stream(t, body) for t, body in ((a, first), (b, other)))
        )
        statuses = [r.status for r in results]
        # Both are answered one after the other, or the later one is told the chat moved on.
        assert 200 in statuses and set(statuses) <= {200, 409}, [r.body for r in results]
        for result in results:
            if result.status == 200:
                assert result.payloads[-1] == "[DONE]" and not result.of_type("error")
        assert stored_events(postgres_url, chat), "one session, stored"


def test_requests_on_one_chat_never_run_at_once_across_instances(
    pair: tuple[LiveServer, LiveServer],
) -> None:
    a, b = pair
    chat = new_chat("overlap")
    first = user_message("slow 1", "u1")
    with streaming(a, chat_body(chat, first)) as reading:
        assert reading.first_event()["type"] == "start"
        started = time.monotonic()
        # B waits for A's run to end, then answers; A's response is not disturbed.
        second = post_stream(b, chat_body(chat, first, user_message("hi", "u2")))
        waited = time.monotonic() - started
        rest = chunks_of(reading.rest())
    assert second.status in (200, 409), second.body
    assert not [c for c in rest if c["type"] == "error"], rest
    assert rest[-1]["type"] == "finish"
    assert waited > 0.5, "B ran while A still held the chat"


# -- resumable streams ----------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_the_real_client_resumes_on_the_other_instance(
    pair: tuple[LiveServer, LiveServer], client: str
) -> None:
    a, b = pair
    chat = new_chat("resume")
    body = chat_body(chat, user_message("slow 2", "u1"))
    with streaming(a, body) as reading:
        start = reading.first_event()
    # A's client is gone; the page reloads against B: useChat({ resume: true }).
    job = {
        "api": f"{b.base_url}/stream",
        "transport": "http",
        "client": client,
        "chatId": chat,
        "steps": [{"action": "resume"}],
    }
    report = checked(job, run_real_client(job))
    assert report["status"] == "ready", report
    (message,) = assistant_messages(report)
    assert message["id"] == start["messageId"]
    (tool,) = tool_parts(message)
    assert tool["state"] == "output-available" and tool["output"] == {"waited": 2.0}
    assert b.http.get(f"/stream/{chat}/stream").status_code == 204, "ended: nothing to resume"


def test_resume_from_the_other_instance_replays_then_follows(
    pair: tuple[LiveServer, LiveServer],
) -> None:
    a, b = pair
    chat = new_chat("follow")
    body = chat_body(chat, user_message("slow 1", "u1"))
    with streaming(a, body) as reading:
        start = reading.first_event()
        resumed = b.http.get(f"/stream/{chat}/stream")
        rest = reading.rest()
    assert resumed.status_code == 200
    assert resumed.headers["x-vercel-ai-ui-message-stream"] == "v1"
    result = stream_result(resumed)
    assert result.chunks[0] == start
    assert result.payloads[1:] == rest, "the same events, in the same order"


def test_a_stop_on_one_instance_stops_the_response_on_the_other(
    pair: tuple[LiveServer, LiveServer],
) -> None:
    a, b = pair
    chat = new_chat("stop")
    body = chat_body(chat, user_message("slow 30", "u1"))
    with streaming(a, body) as reading:
        reading.first_event()
        started = time.monotonic()
        assert b.http.delete(f"/stream/{chat}/stream").status_code == 204
        rest = reading.rest()
    assert time.monotonic() - started < 10, "the 30 s tool was stopped, not waited for"
    types = [c["type"] for c in chunks_of(rest)]
    assert "abort" in types and "error" not in types, types
    assert rest[-1] == "[DONE]"
    # The page holds what it read of the stopped answer: the chat as the server recorded it.
    held = b.http.get(f"/chats/{chat}").json()["messages"]
    assert [m["role"] for m in held] == ["user", "assistant"]
    again = post_stream(b, chat_body(chat, *held, user_message("hi", "u2")))
    assert again.status == 200 and not again.of_type("error")


# -- chats (docs/adr/0043) ------------------------------------------------------------------------


def test_a_chat_answering_on_one_instance_is_listed_active_and_deleted_from_the_other(
    pair: tuple[LiveServer, LiveServer], postgres_url: str
) -> None:
    """B lists the chat A answers as active (from Redis), and B's delete stops A's answer,
    waits for it to end, then removes the chat from PostgreSQL and Redis for both."""
    a, b = pair
    chat = new_chat("delete")
    with streaming(a, chat_body(chat, user_message("slow 30", "u1"))) as reading:
        reading.first_event()
        record_chat(postgres_url, chat, [user_message("slow 30", "u1")])
        listed = {c["id"]: c for c in b.http.get("/chats", params={"limit": 200}).json()["chats"]}
        assert listed[chat]["active"] is True and listed[chat]["title"] == "slow 30"
        started = time.monotonic()
        deleted = b.http.delete(f"/chats/{chat}")
        rest = reading.rest()
    assert deleted.status_code == 204, deleted.text
    assert time.monotonic() - started < 10, "the 30 s tool was stopped, not waited for"
    assert rest[-1] == "[DONE]"
    assert "tool-output-available" not in [c["type"] for c in chunks_of(rest)]
    for instance in (a, b):
        assert instance.http.get(f"/chats/{chat}").status_code == 404
        assert instance.http.get(f"/stream/{chat}/stream").status_code == 204
    assert stored_session(postgres_url, chat) is None
    assert b.http.delete(f"/chats/{chat}").status_code == 404


def record_chat(postgres_url: str, chat_id: str, messages: list[dict[str, Any]]) -> None:
    """The chat in the shared index, as a turn records it."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from adk_stream_protocol.store.chat_tables import PostgresDatabase, SqlChatIndex

    async def write() -> None:
        engine = create_async_engine(postgres_url)
        try:
            index = SqlChatIndex(PostgresDatabase(engine))
            assert await index.record_messages(APP_NAME, USER, chat_id, messages)
        finally:
            await engine.dispose()

    asyncio.run(write())


def stored_session(postgres_url: str, chat_id: str) -> Any:
    from google.adk.sessions.database_session_service import DatabaseSessionService

    async def read() -> Any:
        service = DatabaseSessionService(postgres_url)
        try:
            return await service.get_session(app_name=APP_NAME, user_id=USER, session_id=chat_id)
        finally:
            await service.db_engine.dispose()

    return asyncio.run(read())


# -- /live ----------------------------------------------------------------------------------------


def test_ai7_sockets_resume_and_abort_across_instances(
    pair: tuple[LiveServer, LiveServer],
) -> None:
    """ai 7's protocol on /live: a request on A's socket, resumed on B's; then one aborted on
    A while B's socket follows it, which ends it as a stop does."""
    a, b = pair
    chat = new_chat("ai7")
    on_a, on_b = V7Socket(a), V7Socket(b)
    try:
        request_id = on_a.send(chat, user_message("slow 1", "u1"))
        on_a.chunks_until(request_id, 1)
        resumed = on_b.reply(on_b.resume(chat), timeout=TIMEOUT)
        assert resumed.frames[0]["type"] == "start" and resumed.last == "end"
        assert resumed.chunks == on_a.reply(request_id, timeout=TIMEOUT).chunks

        aborted = on_a.send(chat, user_message("slow 30", "u2"))
        on_a.chunks_until(aborted, 3)
        following = on_b.resume(chat)
        on_b.chunks_until(following, 1)
        started = time.monotonic()
        on_a.frame({"type": "abort", "requestId": aborted})
        ended = on_b.reply(following, timeout=TIMEOUT)
        assert time.monotonic() - started < 10, "the 30 s tool was stopped, not waited for"
        errors = [c for c in ended.chunks if c["type"] == "error"]
        assert ended.chunks[-1]["finishReason"] == "interrupted", errors
        assert "abort" in [c["type"] for c in ended.chunks]
    finally:
        on_a.close()
        on_b.close()


def test_a_chat_live_on_one_instance_is_refused_on_the_other(
    pair: tuple[LiveServer, LiveServer],
) -> None:
    a, b = pair
    chat = new_chat("live-owner")
    first = a.connect(f"/live?chatId={chat}")
    try:
        first.send(json.dumps({"type": "ping", "timestamp": 1}))
        assert json.loads(first.recv(TIMEOUT))["type"] == "pong"
        second = b.connect(f"/live?chatId={chat}")
        with pytest.raises(SocketClosed) as closed:
            second.recv(TIMEOUT)
        assert closed.value.code == 4409
    finally:
        first.close()


def _send_message(socket: Any, chat: str, text: str, message_id: str) -> None:
    socket.send(json.dumps({"type": "message", **chat_body(chat, user_message(text, message_id))}))


def _first_chunk(socket: Any) -> dict[str, Any]:
    chunk: dict[str, Any] = json.loads(socket.recv(TIMEOUT).removeprefix("data: "))
    return chunk


def _frames_until_done(socket: Any) -> list[dict[str, Any]]:
    chunks = []
    while (frame := socket.recv(TIMEOUT)) != "data: [DONE]\n\n":
        chunks.append(json.loads(frame.removeprefix("data: ")))
    return chunks


def test_a_live_response_resumes_on_a_socket_of_the_other_instance(
    pair: tuple[LiveServer, LiveServer],
) -> None:
    a, b = pair
    chat = new_chat("live-resume")
    first = a.connect(f"/live?chatId={chat}")
    try:
        _send_message(first, chat, "hello", "u1")
        start = _first_chunk(first)
    finally:
        first.close()  # the socket leaves mid-answer
    second = b.connect(f"/live?chatId={chat}&resume=true")
    try:
        chunks = _frames_until_done(second)
        assert chunks[0] == start
        assert chunks[-1]["type"] == "finish" and chunks[-1]["finishReason"] == "stop"
        _send_message(second, chat, "hi", "u2")
        after = _frames_until_done(second)
        assert after[0]["type"] == "start" and after[-1]["type"] == "finish"
    finally:
        second.close()


def test_a_stop_reaches_a_live_socket_on_the_other_instance(
    pair: tuple[LiveServer, LiveServer],
) -> None:
    a, b = pair
    chat = new_chat("live-stop")
    socket = a.connect(f"/live?chatId={chat}")
    try:
        _send_message(socket, chat, "hello", "u1")
        assert _first_chunk(socket)["type"] == "start"
        assert b.http.delete(f"/stream/{chat}/stream").status_code == 204
        chunks = _frames_until_done(socket)
    finally:
        socket.close()
    assert chunks[-1]["type"] == "finish" and chunks[-1]["finishReason"] == "other"


def test_a_delete_on_one_instance_closes_the_live_socket_on_the_other(
    pair: tuple[LiveServer, LiveServer], postgres_url: str
) -> None:
    """B's delete reaches A's /live socket (the Redis stop): its open response ends with its
    [DONE], the socket closes with 4410, A lets the chat go, and B answers 204 once the chat
    is removed for both; a new socket on the chat id starts a fresh chat."""
    a, b = pair
    chat = new_chat("live-delete")
    socket = a.connect(f"/live?chatId={chat}")
    try:
        _send_message(socket, chat, "hello", "u1")
        assert _first_chunk(socket)["type"] == "start"
        started = time.monotonic()
        deleted = b.http.delete(f"/chats/{chat}")
        elapsed = time.monotonic() - started
        chunks = _frames_until_done(socket)
        with pytest.raises(SocketClosed) as closed:
            socket.recv(TIMEOUT)
    finally:
        socket.close()
    assert deleted.status_code == 204, deleted.text
    assert elapsed < 5, "the socket let the chat go before the busy timeout"
    assert (closed.value.code, closed.value.reason) == (4410, "this chat was deleted")
    assert chunks[-1] == {"type": "finish", "finishReason": "other"}
    for instance in (a, b):
        assert instance.http.get(f"/chats/{chat}").status_code == 404
        assert instance.http.get(f"/stream/{chat}/stream").status_code == 204
    assert stored_session(postgres_url, chat) is None
    again = b.connect(f"/live?chatId={chat}")
    try:
        _send_message(again, chat, "hi", "u2")
        after = _frames_until_done(again)
    finally:
        again.close()
    assert after[-1]["type"] == "finish" and after[-1]["finishReason"] == "stop"
    messages = a.http.get(f"/chats/{chat}").json()["messages"]
    assert [(m["id"], m["role"]) for m in messages][:1] == [("u2", "user")]
    assert len(messages) == 2, "nothing of the deleted chat is in the new one"


# -- a producer that dies -------------------------------------------------------------------------


def test_resumers_of_a_killed_producer_get_an_error_and_the_chat_answers_again(
    pair: tuple[LiveServer, LiveServer],
    env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    _, b = pair
    chat = new_chat("killed")
    with run_server(tmp_path_factory.mktemp("producer"), env) as producer:
        body = chat_body(chat, user_message("slow 60", "u1"))
        with streaming(producer, body) as reading:
            reading.first_event()
            with httpx.stream("GET", f"{b.base_url}/stream/{chat}/stream", timeout=TIMEOUT) as (
                resumed
            ):
                assert resumed.status_code == 200
                lines = resumed.iter_lines()
                assert next(line for line in lines if line.startswith("data: "))
                assert producer.process is not None
                os.kill(producer.process.pid, signal.SIGKILL)
                killed = time.monotonic()
                rest = sse_payloads("\n".join(lines) + "\n")
                noticed = time.monotonic() - killed
    chunks = chunks_of(rest)
    assert chunks and chunks[-1]["type"] == "error", chunks
    assert rest[-1] == "[DONE]"
    assert noticed < LEASE_TTL_SECONDS + 3, f"noticed after {noticed:.1f} s"
    # The chat is free again once the dead producer's lease has lapsed.
    again = post_stream(b, chat_body(chat, user_message("slow 60", "u1"), user_message("hi", "u2")))
    assert again.status == 200 and again.payloads[-1] == "[DONE]"


# -- uvicorn --workers 2 --------------------------------------------------------------------------


def test_two_workers_on_a_fresh_database_start_and_answer(
    new_postgres_database: Callable[[], str],
    redis_url: str,
    redis_run_prefix: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    postgres_url = new_postgres_database()  # no tables yet: both workers create them at start-up
    env = cluster_env(postgres_url, redis_url, f"{redis_run_prefix}.workers")
    workdir: Path = tmp_path_factory.mktemp("workers")
    with run_server(workdir, env, uvicorn_args=["--workers", "2"]) as server:
        chats = [new_chat("workers") for _ in range(6)]
        results = at_once(
            *(
                (lambda chat=chat: post_stream(server, chat_body(chat, user_message("hi", "u1"))))
                for chat in chats
            )
        )
        assert [r.status for r in results] == [200] * 6, [r.body for r in results]
        # The same approval to both workers at once (the kernel spreads the connections).
        for _ in range(3):
            chat = new_chat("workers-approval")
            ask = user_message("transfer 150", "u1")
            paused = post_stream(server, chat_body(chat, ask))
            body = chat_body(chat, ask, answer_approvals(assistant_message(paused), True))
            fresh = [httpx.Client(base_url=server.base_url, timeout=TIMEOUT) for _ in range(2)]
            try:
                statuses = sorted(
                    r.status_code
                    for r in at_once(
                        *(lambda c=c, body=body: c.post("/stream", json=body) for c in fresh)
                    )
                )
            finally:
                for client in fresh:
                    client.close()
            assert statuses == [200, 409]
            assert tool_runs(stored_events(postgres_url, chat), "transfer") == 1


@pytest.mark.parametrize("client", CLIENTS)
def test_the_real_live_transport_resumes_on_the_other_instance(
    pair: tuple[LiveServer, LiveServer], client: str
) -> None:
    a, b = pair
    chat = new_chat("live-real-resume")
    first = a.connect(f"/live?chatId={chat}")
    try:
        _send_message(first, chat, "hello", "u1")
        start = _first_chunk(first)
    finally:
        first.close()  # the page reloads mid-answer, against B: useChat({ resume: true })
    job = {
        "api": b.base_url.replace("http://", "ws://") + "/live",
        "transport": "ws",
        "client": client,
        "chatId": chat,
        "steps": [{"action": "resume"}, {"action": "send", "text": "hi"}],
    }
    report = checked(job, run_real_client(job))
    assert report["status"] == "ready", report
    resumed, answer = assistant_messages(report)
    assert resumed["id"] == start["messageId"]
    assert text_of(resumed), "the replayed answer has its text"
    assert text_of(answer), "then the socket serves the chat"


# -- a lease lost under its holder ----------------------------------------------------------------


def _drop_lease(env: dict[str, str], chat: str) -> None:
    """What a holder stalled past the TTL finds: its lease gone (another may take the chat)."""
    import redis

    from adk_stream_protocol.coordination.redis.signals import RedisKeys

    keys = RedisKeys(f"{env['ADK_STREAM_REDIS_KEY_PREFIX']}:{APP_NAME}")
    client = redis.Redis.from_url(env["ADK_STREAM_REDIS_URL"])
    try:
        assert client.delete(keys.lease((USER, chat))) == 1, "the chat's lease was not held"
    finally:
        client.close()


def test_a_run_whose_lease_lapsed_stops(
    pair: tuple[LiveServer, LiveServer], env: dict[str, str]
) -> None:
    a, _ = pair
    chat = new_chat("lease-lost")
    with streaming(a, chat_body(chat, user_message("slow 30", "u1"))) as reading:
        reading.first_event()
        _drop_lease(env, chat)
        lost = time.monotonic()
        rest = reading.rest()
    # Noticed at the next renewal; a tool already running may end first, for at most
    # TOOL_WAIT_SECONDS (docs/adr/0073): this one takes longer, and ends with the run.
    waited = time.monotonic() - lost
    assert waited < LEASE_TTL_SECONDS + TOOL_WAIT_SECONDS + 3, "noticed at the next renewal"
    types = [c["type"] for c in chunks_of(rest)]
    assert "abort" in types and "tool-output-available" not in types, types
    assert "lease lapsed: a tool still runs" in a.log()


def test_a_live_socket_whose_lease_lapsed_is_closed(
    pair: tuple[LiveServer, LiveServer], env: dict[str, str]
) -> None:
    a, _ = pair
    chat = new_chat("live-lease-lost")
    socket = a.connect(f"/live?chatId={chat}")
    try:
        socket.send(json.dumps({"type": "ping", "timestamp": 1}))
        assert json.loads(socket.recv(TIMEOUT))["type"] == "pong"
        _drop_lease(env, chat)
        with pytest.raises(SocketClosed) as closed:
            while True:
                socket.recv(LEASE_TTL_SECONDS + 3)
        assert closed.value.code == 1011
        assert "connect again" in closed.value.reason
    finally:
        socket.close()

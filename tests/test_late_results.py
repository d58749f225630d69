"""A late result is recorded, not lost (issue 39 point 2, docs/adr/0073).

Instance A is stopped (SIGSTOP) inside the agent's own ``before_tool_callback``: after the
server checked A's lease and recorded the payment's start, before the body. B takes the chat
once A's lease lapses (a 2 s lease), fences A off and records the payment as outcome unknown.
A wakes and pays (the ledger file), and its result's append is refused as stale: A hands the
result to the chat's holder and writes nothing to the session. The chat's next turn on B
applies it: the session's last result of the call is the real one, the model's next request
carries it, and the chat's record shows it, even to a page that sends its old copy back.

Two real uvicorn instances on PostgreSQL and Redis (tests/support/services.py), the agent of
tests/support/agents/crash.py.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx

from tests.support.rig import LiveServer, assistant_message, run_server, stream_result
from tests.support.waiting import wait_until
from tests.test_crashes import AGENT, Chat, tool_outcomes
from tests.test_scale_out import stored_events
from tests.test_stalls import _lines, _wait_stopped

LEASE_TTL_SECONDS = 2.0
APP = "crashes"  # the crash agent's App
PAID = {"paid": 10, "to": "Bob"}
UNKNOWN = "whether it completed is unknown"


def test_a_payment_made_after_the_chat_was_taken_over_reaches_the_record_and_the_model(
    postgres_url: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    ledger, ready, model_log = tmp_path / "ledger.txt", tmp_path / "stalled", tmp_path / "model"
    shared = {
        "ADK_STREAM_SESSION_STORE": postgres_url,
        "ADK_STREAM_REDIS_URL": redis_url,
        "ADK_STREAM_REDIS_KEY_PREFIX": f"{redis_prefix}.late",
        "ADK_STREAM_LEASE_TTL_SECONDS": str(LEASE_TTL_SECONDS),
        "ADK_STREAM_AGENT": AGENT,
        "CRASH_LEDGER": str(ledger),
    }
    chat = Chat(ledger)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        run_server(tmp_path / "a", {**shared, "AGENT_STALL_READY": str(ready)}) as a,
        run_server(tmp_path / "b", {**shared, "MODEL_LOG": str(model_log)}) as b,
    ):
        assert a.process is not None
        asked = chat.say(a, "Pay Bob 10")
        with httpx.stream("POST", f"{a.base_url}/stream", json=chat.approval(), timeout=30) as cut:
            wait_for_file(ready)
            _wait_stopped(a.process.pid)  # A stops itself in the agent's own callback
            try:
                # B's retry takes the chat once A's lease has lapsed: the payment's start
                # has no result, so B records it as outcome unknown.
                retry = stream_result(b.http.post("/stream", json=chat.approval()))
                assert retry.status == 200, retry.body
                (outcome,) = tool_outcomes(retry)
                assert outcome["type"] == "tool-output-error"
                assert UNKNOWN in outcome["errorText"]
                assert chat.payments() == []
            finally:
                os.kill(a.process.pid, signal.SIGCONT)
            cut.read()  # A's response ends, whatever it says: A has paid meanwhile
        (call_id,) = chat.payments()
        # A's response ended without writing the chat's record over B's.
        assert tool_part(record(b, chat.id), call_id)["state"] == "output-error"
        # The page holds what the retry showed it: the payment as outcome unknown.
        chat.messages[-1] = assistant_message(asked, retry)
        assert tool_part(chat.messages, call_id)["state"] == "output-error"
        model_log.write_text("", encoding="utf-8")

        answer = chat.say(b, "Hello")
        assert answer.text() == "Hello again."
        # The session's last result of the call is the real one, marked late.
        last = last_result(stored_events(postgres_url, chat.id, APP), call_id)
        assert last.function_response.response == PAID
        # The model's request carried it, and only it, for the call.
        requests = [json.loads(line) for line in model_log.read_text().splitlines()]
        assert requests and all(PAID in results for results in requests), requests
        assert not any(UNKNOWN in json.dumps(results) for results in requests), requests
        # The chat's record shows the payment, and a page's old copy does not undo it.
        settled = tool_part(record(b, chat.id), call_id)
        assert settled["state"] == "output-available", settled
        assert settled["output"] == PAID
        assert tool_part(chat.messages, call_id)["state"] == "output-error"  # the page's copy
        chat.say(b, "Hello")
        settled = tool_part(record(b, chat.id), call_id)
        assert settled["state"] == "output-available", settled
        assert len(chat.payments()) == 1

        a_log = a.log()
        # A handed the result off: one WARNING, no ERROR, no traceback (ADR 0072).
        assert _lines(a_log, "late result handed to the chat's holder") == 1, a_log
        assert _lines(a_log, " ERROR ") == 0, a_log
        assert "Traceback" not in a_log, a_log
        assert "chat messages not stored: the response lost its chat" in a_log
        assert "late result applied" in b.log()


def wait_for_file(path: Path) -> None:
    wait_until(path.exists, "A at the tool", within=20, every=0.01)


def record(server: LiveServer, chat_id: str) -> list[dict[str, Any]]:
    response = server.http.get(f"/chats/{chat_id}")
    assert response.status_code == 200, response.text
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


def tool_part(messages: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    parts = [
        part
        for message in messages
        for part in message.get("parts", [])
        if part.get("toolCallId") == call_id
    ]
    assert len(parts) == 1, messages
    part: dict[str, Any] = parts[0]
    return part


def last_result(events: list[Any], call_id: str) -> Any:
    results = [
        part
        for event in events
        for part in (event.content.parts if event.content and event.content.parts else [])
        if part.function_response is not None and part.function_response.id == call_id
    ]
    assert results, "no result of the call"
    return results[-1]

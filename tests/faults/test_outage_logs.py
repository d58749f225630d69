"""A PostgreSQL that stops in the middle of a turn leaves one WARNING in the log, ours, and no
ERROR or traceback, not even ADK's own (docs/adr/0030-outages.md): ADK logs the failure of its
run before we answer it, and the app's filter (``observability/adk_logs.py``) moves that record
to DEBUG. One real server on a private PostgreSQL and Redis (``conftest.py``).
"""

from __future__ import annotations

import time
import uuid

from tests.support.faults.checks import LogWindow, assert_ends, back_within, errors_of
from tests.support.faults.stores import PrivatePostgres
from tests.support.rig import LiveServer, LiveSocket, chat_body, streaming, user_message

# The tests' agent answers "think <s>" after that long, and runs "slow <s>" as a tool: the
# store stops this far into that slow step, which nothing outside the server can see begin.
MIDWAY_SECONDS = 0.6
DOWN_SECONDS = 0.5


def new_chat(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def back(server: LiveServer, postgres: PrivatePostgres) -> None:
    time.sleep(DOWN_SECONDS)  # the outage's length is the test's
    postgres.start()
    body = chat_body(new_chat("back"), user_message("hi", "u1"))
    back_within(lambda: server.http.post("/stream", json=body))


def test_a_stream_turn_cut_by_postgres_logs_one_warning(
    server: LiveServer, postgres: PrivatePostgres
) -> None:
    window = LogWindow(server)
    chat = new_chat("think")
    with streaming(server, chat_body(chat, user_message("think 1.5", "u1"))) as answer:
        assert answer.first_event()["type"] == "start"
        time.sleep(MIDWAY_SECONDS)
        postgres.stop("immediate")  # the model's answer cannot be stored
        payloads = answer.rest()
    assert_ends(payloads)
    (error,) = errors_of(payloads)
    assert "unavailable" in error["errorText"], error
    back(server, postgres)
    window.assert_handled()


def test_a_live_turn_cut_by_postgres_logs_one_warning(
    server: LiveServer, postgres: PrivatePostgres
) -> None:
    """Before the filter, ADK logged ``Root node ... failed.`` at ERROR with a traceback."""
    window = LogWindow(server)
    chat = new_chat("live")
    with LiveSocket(server, chat) as live:
        body = chat_body(chat, user_message("slow 2", "u1"))
        live.send({"type": "message", "version": "1", **body})
        time.sleep(MIDWAY_SECONDS)
        postgres.stop("immediate")
        answer = live.response(timeout=20)
    assert_ends(answer.payloads)
    (error,) = errors_of(answer.payloads)
    assert "unavailable" in error["errorText"], error
    back(server, postgres)
    window.assert_handled()

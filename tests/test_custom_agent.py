"""A user's own agent behind the server (ADK_STREAM_AGENT), slow and failing tools, and clients
that go away: in-process, and on the wire (real uvicorn) for a client that leaves."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.rig import (
    InProcessApp,
    ServerPool,
    chat_body,
    in_process_app,
    post_stream,
    user_message,
)

AGENT = {"ADK_STREAM_AGENT": "tests.support.agents.tools:root_agent"}


@pytest.fixture(scope="module")
def agent_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    with in_process_app(
        tmp_path_factory.mktemp("agent"),
        agent="tests.support.agents.tools:root_agent",
        keep_alive_seconds=0.2,
    ) as target:
        yield target


def test_a_plugged_in_agent_is_served(agent_app: InProcessApp) -> None:
    result = post_stream(agent_app, chat_body("c-plain", user_message("hi", "u1")))
    assert result.text() == "Say 'slow <seconds>', 'explode', 'transfer <n>' or 'delete <f>'."


def test_keep_alive_comments_while_a_tool_is_busy(agent_app: InProcessApp) -> None:
    result = post_stream(agent_app, chat_body("c-slow", user_message("slow 1", "u1")))
    assert ": keep-alive\n\n" in result.body
    assert result.of_type("tool-output-available")[0]["output"] == {"waited": 1.0}


def test_an_exception_in_a_tool_is_one_redacted_error(
    agent_app: InProcessApp, caplog: pytest.LogCaptureFixture
) -> None:
    result = post_stream(agent_app, chat_body("c-boom", user_message("explode", "u1")))
    (error,) = result.of_type("error")
    assert "hunter2" not in error["errorText"] and "secret" not in error["errorText"]
    assert result.of_type("finish")[0]["finishReason"] == "error"
    assert "hunter2" in caplog.text, "the full error is logged for the operator"


def test_a_client_that_leaves_releases_the_chat(
    servers: ServerPool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    agent_server = servers.get(AGENT)  # uvicorn in a thread: its log is this process's
    body = chat_body("c-leave", user_message("slow 30", "u1"))
    with httpx.stream("POST", f"{agent_server.base_url}/stream", json=body, timeout=30) as response:
        first = next(response.iter_lines())
        assert first.startswith("data: ")
    # The run was aborted, so the chat is free again well before the 30 s tool would finish.
    started = time.monotonic()
    follow_up = chat_body("c-leave", user_message("hi", "u2"))
    result = post_stream(agent_server, follow_up)
    assert result.status == 200
    assert time.monotonic() - started < 10
    assert any(
        "client left" in r.getMessage() and "chat=c-leave" in r.getMessage() for r in caplog.records
    )
    # A client leaving is not a failure: ADK's abort is logged at INFO, not as an error.
    aborted = [r for r in caplog.records if "code=INVOCATION_ABORTED" in r.getMessage()]
    assert aborted and all(r.levelname == "INFO" for r in aborted), aborted

"""A user's own agent behind the server (ADK_STREAM_AGENT), slow and failing tools, and clients
that go away."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support import LiveServer, chat_body, post_stream, run_server, user_message


@pytest.fixture(scope="module")
def agent_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {"ADK_STREAM_AGENT": "tests.agents:root_agent", "ADK_STREAM_KEEP_ALIVE_SECONDS": "0.2"}
    with run_server(tmp_path_factory.mktemp("agent"), env) as live:
        yield live


def test_a_plugged_in_agent_is_served(agent_server: LiveServer) -> None:
    result = post_stream(agent_server.base_url, chat_body("c-plain", user_message("hi", "u1")))
    assert result.text() == "Say 'slow <seconds>', 'explode', 'transfer <n>' or 'delete <f>'."


def test_keep_alive_comments_while_a_tool_is_busy(agent_server: LiveServer) -> None:
    result = post_stream(agent_server.base_url, chat_body("c-slow", user_message("slow 1", "u1")))
    assert ": keep-alive\n\n" in result.body
    assert result.of_type("tool-output-available")[0]["output"] == {"waited": 1.0}


def test_an_exception_in_a_tool_is_one_redacted_error(agent_server: LiveServer) -> None:
    result = post_stream(agent_server.base_url, chat_body("c-boom", user_message("explode", "u1")))
    (error,) = result.of_type("error")
    assert "hunter2" not in error["errorText"] and "secret" not in error["errorText"]
    assert result.of_type("finish")[0]["finishReason"] == "error"
    assert "hunter2" in agent_server.log(), "the full error is logged for the operator"


def test_a_client_that_leaves_releases_the_chat(agent_server: LiveServer) -> None:
    body = chat_body("c-leave", user_message("slow 30", "u1"))
    with httpx.stream("POST", f"{agent_server.base_url}/stream", json=body, timeout=30) as response:
        first = next(response.iter_lines())
        assert first.startswith("data: ")
    # The run was aborted, so the chat is free again well before the 30 s tool would finish.
    started = time.monotonic()
    follow_up = chat_body("c-leave", user_message("hi", "u2"))
    result = post_stream(agent_server.base_url, follow_up)
    assert result.status == 200
    assert time.monotonic() - started < 10
    log = agent_server.log()
    assert "client left" in log
    # A client leaving is not a failure: ADK's abort is logged at INFO, not as an error.
    aborted = [line for line in log.splitlines() if "code=INVOCATION_ABORTED" in line]
    assert aborted and all(" INFO " in line for line in aborted), aborted

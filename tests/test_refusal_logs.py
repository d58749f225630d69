"""What the server log holds for a run the fence stops before its tool, against a tool's own
failure (docs/adr/0072): the refusal is one WARNING naming the chat and the call, with no
ERROR and no traceback from ADK or from us; the failure keeps its ERROR and traceback. The
real app in-process, the real ADK Runner, the agent of tests/support/agents/tools.py.
The stale write of a fenced run is in tests/test_stalls.py (two instances, a real stall)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adk_stream_protocol.turns.bridge import bridge_of
from tests.support.rig import InProcessApp, chat_body, in_process_app, post_stream, user_message
from tests.support.table_chat import TableChat


@pytest.fixture
def agent_app(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Iterator[InProcessApp]:
    caplog.set_level(logging.INFO)
    with in_process_app(tmp_path, agent="tests.support.agents.tools:root_agent") as target:
        yield target


class _Lapsed:
    """A lease this process's clock says has lapsed, before any renewal noticed: how a
    stalled process finds its lease when it wakes (tests/test_stalls.py has the real one)."""

    def __init__(self, lease: Any) -> None:
        self._lease = lease

    def held(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lease, name)


def _loud(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Records at ERROR or above, and any record with a traceback."""
    return [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_a_run_fenced_before_its_tool_logs_one_warning(
    agent_app: InProcessApp, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    leases = bridge_of(agent_app.app.state).coordination.leases
    acquire = leases.acquire

    async def lapsed(*args: Any, **kwargs: Any) -> Any:
        return _Lapsed(await acquire(*args, **kwargs))

    monkeypatch.setattr(leases, "acquire", lapsed)
    result = post_stream(agent_app, chat_body("c-fenced", user_message("slow 1", "u1")))
    monkeypatch.undo()
    assert result.status == 200
    # The page is told as before: the call, then an error with its reference, then finish.
    assert result.of_type("tool-input-available")[0]["toolName"] == "slow_tool"
    assert not result.of_type("tool-output-available")
    assert len(result.of_type("error")) == 1
    assert result.of_type("finish")[0]["finishReason"] == "error"
    refusals = [r for r in caplog.records if "tool not started" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelname == "WARNING"
    assert "chat=c-fenced" in refusals[0].getMessage()
    assert "tool=slow_tool" in refusals[0].getMessage()
    assert _loud(caplog) == []
    assert "Traceback" not in caplog.text


def test_a_tools_own_failure_keeps_its_error_and_traceback(
    agent_app: InProcessApp, caplog: pytest.LogCaptureFixture
) -> None:
    result = post_stream(agent_app, chat_body("c-boom", user_message("explode", "u1")))
    assert len(result.of_type("error")) == 1
    loud = _loud(caplog)
    # Ours from ADK's error event (its code and message); the traceback is ADK's record.
    ours = [r for r in loud if r.getMessage().startswith("agent error")]
    assert len(ours) == 1 and ours[0].levelname == "ERROR"
    assert "code=RuntimeError" in ours[0].getMessage()
    tracebacks = [r for r in loud if r.name.startswith("google_adk") and r.exc_info]
    assert tracebacks and all(r.levelname == "ERROR" for r in tracebacks)


@pytest.fixture
def demo_app(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Iterator[InProcessApp]:
    """The demo agent, whose offline model also answers ``run_live``."""
    caplog.set_level(logging.INFO)
    with in_process_app(tmp_path) as target:
        yield target


def test_a_live_run_fenced_before_its_tool_logs_one_warning(
    demo_app: InProcessApp, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on ``/live?chatId=``: one WARNING naming the chat, nothing louder."""
    leases = bridge_of(demo_app.app.state).coordination.leases
    acquire = leases.acquire

    async def lapsed(*args: Any, **kwargs: Any) -> Any:
        return _Lapsed(await acquire(*args, **kwargs))

    monkeypatch.setattr(leases, "acquire", lapsed)
    chat = TableChat(demo_app.http, "live", "c-live-fenced")
    try:
        answer = chat.send("What's the weather in Tokyo?")
    finally:
        chat.close()
    monkeypatch.undo()
    types = [c["type"] for c in answer.chunks]
    assert "tool-input-available" in types and "tool-output-available" not in types
    assert types.count("error") == 1
    refusals = [r for r in caplog.records if "tool not started" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelname == "WARNING"
    assert "chat=c-live-fenced" in refusals[0].getMessage()
    assert _loud(caplog) == []
    assert "Traceback" not in caplog.text

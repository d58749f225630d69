"""A server that dies in the middle of an approved payment (SIGKILL, no clean-up), and the same
chat on the server that replaces it (docs/adr/0032).

The payment runs at most once, whatever the point of death; the client's retry of the same
approval finishes the turn instead of being refused; a call that may have done its work is
shown as outcome unknown and never run again; and a true duplicate is still refused. The
tool's ledger file, not the session, says how often the money moved.

Each case starts a real uvicorn on a SQLite store, kills it through the agent's own crash
point (tests/support/agents/crash.py), and starts a second one on the same store.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.rig import (
    LiveServer,
    LiveSocket,
    answer_approvals,
    assistant_message,
    chat_body,
    post_stream,
    run_server,
    stream_result,
    user_message,
)

pytestmark = pytest.mark.out_of_process  # uvicorn processes that crash, and the next ones

AGENT = "tests.support.agents.crash:app"


class Chat:
    """One chat as DefaultChatTransport drives it, across servers."""

    def __init__(self, ledger: Path) -> None:
        self.id = f"crash-{uuid.uuid4().hex[:12]}"
        self.ledger = ledger
        self.messages: list[dict[str, Any]] = []

    def say(self, server: LiveServer, text: str) -> Any:
        self.messages.append(user_message(text, f"u-{uuid.uuid4().hex[:8]}"))
        result = post_stream(server, chat_body(self.id, *self.messages))
        assert result.status == 200, result.body
        self.messages.append(assistant_message(result))
        return result

    def approval(self) -> dict[str, Any]:
        """The body useChat sends after addToolApprovalResponse, and again on a retry."""
        message = answer_approvals(copy.deepcopy(self.messages[-1]), True)
        return chat_body(self.id, *self.messages[:-1], message, messageId=message["id"])

    def payments(self) -> list[str]:
        return self.ledger.read_text().split() if self.ledger.exists() else []


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def ledger(workdir: Path) -> Path:
    return workdir / "ledger.txt"


def server(workdir: Path, ledger: Path, crash_at: str | None = None) -> Any:
    env = {"ADK_STREAM_AGENT": AGENT, "CRASH_LEDGER": str(ledger)}
    if crash_at:
        env["CRASH_AT"] = crash_at
    return run_server(workdir, env)


def approve_and_die(server: LiveServer, body: dict[str, Any]) -> None:
    """The approval reaches a server that dies while answering it: the stream is cut."""
    with pytest.raises(httpx.HTTPError):
        response = server.http.post("/stream", json=body)
        # A cut body may still parse as a response with no end: that is a cut too.
        assert "[DONE]" in response.text, response.text
        raise httpx.RemoteProtocolError("ended")  # pragma: no cover - the server must die
    assert server.process is not None
    server.process.wait(timeout=10)


def tool_outcomes(result: Any) -> list[dict[str, Any]]:
    kinds = ("tool-output-available", "tool-output-error", "tool-output-denied")
    return [c for c in result.chunks if c["type"] in kinds]


@pytest.fixture
def crashed(workdir: Path, ledger: Path, request: pytest.FixtureRequest) -> Iterator[Chat]:
    """A chat whose approved payment was cut by a crash at ``request.param``."""
    chat = Chat(ledger)
    with server(workdir, ledger, crash_at=request.param) as first:
        chat.say(first, "Pay Bob 10")
        approve_and_die(first, chat.approval())
    yield chat


@pytest.mark.parametrize("crashed", ["before-start", "before-answer"], indirect=True)
def test_a_retried_approval_finishes_a_payment_cut_before_or_after_it_ran(
    crashed: Chat, workdir: Path, ledger: Path
) -> None:
    with server(workdir, ledger) as second:
        retry = stream_result(second.http.post("/stream", json=crashed.approval()))
        assert retry.status == 200, retry.body
        (result,) = tool_outcomes(retry)
        assert result["type"] == "tool-output-available"
        assert result["output"] == {"paid": 10, "to": "Bob"}
        assert retry.text() == "Paid Bob."
        assert len(crashed.payments()) == 1
        # The turn has ended: the same approval again is a true duplicate.
        again = second.http.post("/stream", json=crashed.approval())
        assert again.status_code == 409, again.text
    assert len(crashed.payments()) == 1


@pytest.mark.parametrize("crashed", ["in-body", "after-effect"], indirect=True)
def test_a_payment_cut_while_it_ran_is_outcome_unknown_and_never_rerun(
    crashed: Chat, workdir: Path, ledger: Path
) -> None:
    paid_before = len(crashed.payments())
    with server(workdir, ledger) as second:
        retry = stream_result(second.http.post("/stream", json=crashed.approval()))
        assert retry.status == 200, retry.body
        (result,) = tool_outcomes(retry)
        assert result["type"] == "tool-output-error"
        assert "whether it completed is unknown" in result["errorText"]
        assert retry.of_type("finish")[0]["finishReason"] == "stop"
        again = second.http.post("/stream", json=crashed.approval())
        assert again.status_code == 409, again.text
    assert len(crashed.payments()) == paid_before  # 0 (in-body) or 1 (after-effect)


@pytest.mark.parametrize("crashed", ["before-start"], indirect=True)
def test_the_next_message_first_finishes_the_cut_payment(
    crashed: Chat, workdir: Path, ledger: Path
) -> None:
    with server(workdir, ledger) as second:
        crashed.messages[-1] = crashed.approval()["messages"][-1]
        answer = crashed.say(second, "Hello")
        assert answer.text() == "Hello again."
        assert len(crashed.payments()) == 1


@pytest.mark.parametrize("crashed", ["before-start"], indirect=True)
def test_a_live_socket_first_finishes_the_cut_payment(
    crashed: Chat, workdir: Path, ledger: Path
) -> None:
    with server(workdir, ledger) as second:
        live = LiveSocket(second, crashed.id)
        try:
            crashed.messages[-1] = crashed.approval()["messages"][-1]
            crashed.messages.append(user_message("Hello", f"u-{uuid.uuid4().hex[:8]}"))
            answer = live.message(*crashed.messages)
        finally:
            live.ws.close()
        assert answer.text() == "Hello again."
        assert len(crashed.payments()) == 1


@pytest.mark.parametrize("crashed", ["before-start"], indirect=True)
def test_a_resume_finishes_the_cut_payment_in_the_same_message(
    crashed: Chat, workdir: Path, ledger: Path
) -> None:
    with server(workdir, ledger) as second:
        resumed = stream_result(second.http.get(f"/stream/{crashed.id}/stream"))
        assert resumed.status == 200, resumed.body
        assert resumed.of_type("start")[0]["messageId"] == crashed.messages[-1]["id"]
        (result,) = tool_outcomes(resumed)
        assert result["type"] == "tool-output-available"
        assert resumed.text() == "Paid Bob."
        assert len(crashed.payments()) == 1
        # Nothing is cut any more: the next resume has nothing to give.
        assert second.http.get(f"/stream/{crashed.id}/stream").status_code == 204
    assert len(crashed.payments()) == 1

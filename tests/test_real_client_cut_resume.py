"""A resume that finishes a turn a crash cut short, with the real clients (issue 39 point 4,
docs/adr/0032, 0045).

A server is killed (SIGKILL by its own PID, tests/support/agents/crash.py) while the tool of a
continuation runs: the payment the user approved. A fresh server on the same store finishes
the cut turn when the reloaded page resumes (``GET /stream/{chatId}/stream``). The page
resumes as the recipe of docs/frontend/chats.md does; the finishing response must rebuild the
message it continues first, as every other resume of a continuation does, so the real client (ai
6.0.25 strict, the newest 6.x, ai 7) ends with the chat's recorded message and no error."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adk_stream_protocol.protocol.message_chunks import message_chunks
from adk_stream_protocol.testing import serve_agent, settings_for_tests
from tests.support.agents.crash import app as crash_app
from tests.support.real_client import V7, checked, client_job, run_real_client
from tests.support.rig import (
    LiveServer,
    answer_approvals,
    assistant_message,
    chat_body,
    post_stream,
    run_server,
    stream_result,
    user_message,
)

pytestmark = pytest.mark.out_of_process  # uvicorn processes that die, and the real AI SDK

AGENT = "tests.support.agents.crash:app"


def _server(workdir: Path, stores: dict[str, str], crash_at: str | None = None) -> Any:
    env = {"ADK_STREAM_AGENT": AGENT, "CRASH_LEDGER": str(workdir / "ledger.txt"), **stores}
    if crash_at:
        env["CRASH_AT"] = crash_at
    return run_server(workdir, env)


@pytest.fixture
def stores(request: pytest.FixtureRequest) -> dict[str, str]:
    """The servers' stores: SQLite and the process's own chunk logs, or (``"shared"``) the
    sessions and the chat's record on PostgreSQL and the chunk logs on Redis."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return {}
    prefix = request.getfixturevalue("redis_run_prefix")
    return {
        "ADK_STREAM_SESSION_STORE": request.getfixturevalue("postgres_url"),
        "ADK_STREAM_REDIS_URL": request.getfixturevalue("redis_url"),
        "ADK_STREAM_REDIS_KEY_PREFIX": f"{prefix}.cut-resume-{uuid.uuid4().hex[:8]}",
    }


@pytest.fixture
def cut_chat(tmp_path: Path, stores: dict[str, str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """A chat whose approved payment was cut while the tool ran: its id and the continued
    assistant message as the page sent it."""
    chat_id = f"cut-{uuid.uuid4().hex[:12]}"
    with _server(tmp_path, stores, crash_at="in-body") as first:
        question = user_message("Pay Bob 10", f"u-{uuid.uuid4().hex[:8]}")
        asked = post_stream(first, chat_body(chat_id, question))
        assert asked.status == 200, asked.body
        approved = answer_approvals(assistant_message(asked), True)
        body = chat_body(chat_id, question, approved, messageId=approved["id"])
        with pytest.raises(httpx.HTTPError):
            response = first.http.post("/stream", json=body)
            assert "[DONE]" in response.text, response.text  # a cut body is a cut too
            raise httpx.RemoteProtocolError("ended")  # pragma: no cover - it must die
        assert first.process is not None
        first.process.wait(timeout=10)
    yield chat_id, copy.deepcopy(approved)


@pytest.fixture
def fresh(
    tmp_path: Path, stores: dict[str, str], cut_chat: tuple[str, dict[str, Any]]
) -> Iterator[LiveServer]:
    with _server(tmp_path, stores) as second:
        yield second


def test_the_finishing_response_begins_with_the_rebuilt_message(
    fresh: LiveServer, cut_chat: tuple[str, dict[str, Any]]
) -> None:
    chat_id, continued = cut_chat
    resumed = stream_result(fresh.http.get(f"/stream/{chat_id}/stream"))
    assert resumed.status == 200, resumed.body
    types = [chunk["type"] for chunk in resumed.chunks]
    assert types[0] == "start"
    assert resumed.chunks[0]["messageId"] == continued["id"]
    # The rebuild first: the message as the page held it (the call approved, no output yet),
    # then the chunks that finish it.
    rebuild = ["message-metadata", "start-step", "tool-input-start", "tool-input-delta"]
    rebuild += ["tool-approval-request", "finish-step"]
    assert types[1:7] == rebuild, types
    assert types[7] == "tool-output-error", types
    outcomes = [c for c in resumed.chunks if c["type"].startswith("tool-output")]
    assert [c["type"] for c in outcomes] == ["tool-output-error"]
    assert "whether it completed is unknown" in outcomes[0]["errorText"]


def test_in_process_too(
    tmp_path: Path, cut_chat: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fresh server is the app in this process, on the killed one's store (ASGI): its
    finishing response is the stored message rebuilt, then the turn's end."""
    chat_id, continued = cut_chat
    monkeypatch.setenv("CRASH_LEDGER", str(tmp_path / "ledger.txt"))
    settings = settings_for_tests(session_store=f"sqlite:///{tmp_path / 'sessions.db'}")
    with serve_agent(crash_app, settings) as client:
        resumed = client.http.get(f"/stream/{chat_id}/stream")
        assert resumed.status_code == 200, resumed.text
        chunks = [
            json.loads(line.removeprefix("data: "))
            for line in resumed.text.splitlines()
            if line.startswith("data: {")
        ]
        rebuilt = message_chunks(continued, 6)
        assert chunks[0] == {"type": "start", "messageId": continued["id"]}
        assert chunks[1 : 1 + len(rebuilt)] == [c.to_wire_dict() for c in rebuilt]
        ending = [c["type"] for c in chunks[1 + len(rebuilt) :]]
        assert ending[0] == "tool-output-error" and ending[-1] == "finish", ending
        assert client.http.get(f"/stream/{chat_id}/stream").status_code == 204


@pytest.mark.parametrize("client", ["6.0.25", "6", V7])
def test_a_page_resuming_after_the_kill_gets_the_whole_message(
    fresh: LiveServer, cut_chat: tuple[str, dict[str, Any]], client: str
) -> None:
    _resumed_whole(fresh, cut_chat, client)


@pytest.mark.parametrize("stores", ["shared"], indirect=True)
@pytest.mark.parametrize("client", ["6.0.25", "6", V7])
def test_on_postgresql_and_redis_too(
    fresh: LiveServer, cut_chat: tuple[str, dict[str, Any]], client: str
) -> None:
    """Two instances' way: the killed one's chunk log is on Redis, never ended, and its lease
    is still there until it lapses. The page's first resume is not a replay of that log (it
    would end in an ``error``): it finishes the cut turn, rebuilt, as on one instance."""
    _resumed_whole(fresh, cut_chat, client)
    assert fresh.http.get(f"/stream/{cut_chat[0]}/stream").status_code == 204
    # It took the chat from a lease that lapsed: it fenced the former holder off first.
    assert "fenced after an unclean takeover" in fresh.log()


def _resumed_whole(fresh: LiveServer, cut_chat: tuple[str, dict[str, Any]], client: str) -> None:
    chat_id, continued = cut_chat
    steps: list[dict[str, Any]] = [{"action": "reload", "resume": True}, {"action": "resume"}]
    job = client_job(fresh, client, steps, chatId=chat_id)
    report = checked(job, run_real_client(job))
    assert report["status"] == "ready", report["error"]
    assert report["error"] is None
    record = fresh.http.get(f"/chats/{chat_id}").json()
    assert report["messages"][-1]["id"] == continued["id"]
    parts = report["messages"][-1]["parts"]
    assert [p["type"] for p in parts].count("tool-pay") == 1, parts
    (call,) = [p for p in parts if p["type"] == "tool-pay"]
    assert call["state"] == "output-error"
    assert _compared(report["messages"]) == _compared(record["messages"])


def _compared(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as a resumer can have them: a resume's client is not known, so the
    rebuild is ai 6's, which has no chunk for an approval's answer (the approval keeps its id,
    docs/frontend/resume-and-stop.md); and ai 6 latest and ai 7 keep a failed call's ``rawInput``,
    which the chat's record (the server's fold) leaves out."""
    compared = copy.deepcopy(messages)
    for part in compared[-1]["parts"]:
        part.pop("rawInput", None)
        if isinstance(part.get("approval"), dict):
            part["approval"] = {"id": part["approval"]["id"]}
    return compared

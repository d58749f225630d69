"""The real AI SDK client (ai 6.0.25's strict schema, and ai 7 over HTTP and over its own
WebSocket transport) chats with the replay server under uvicorn, on recordings the real app
made: a page can be developed against it with no agent (docs/adr/0026)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from adk_stream_protocol import Settings
from adk_stream_protocol.replay.app import create_replay_app
from tests.support.real_client import (
    V7,
    assistant_messages,
    checked,
    client_job,
    ready,
    run_real_clients,
    text_of,
    tool_parts,
)
from tests.support.recordings import PAYMENT, Recorded, record_demo_conversations
from tests.support.rig import (
    PLAYGROUND_DIST,
    LiveServer,
    serve_app_in_thread,
)

pytestmark = pytest.mark.out_of_process  # the real AI SDK client, in Node

# (client, over ai 7's own WebSocket transport on /live)
CLIENTS = [("6.0.25", False), (V7, False), (V7, True)]


@contextmanager
def serve_replay(directory: Path, speed: float) -> Iterator[LiveServer]:
    """``create_replay_app(directory)`` under real uvicorn, from a thread of this process."""
    app = create_replay_app(
        directory, settings=Settings(playground_dir=PLAYGROUND_DIST), speed=speed
    )
    with serve_app_in_thread(app, directory / "no-sessions.db") as server:
        yield server


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return record_demo_conversations(tmp_path_factory.mktemp("replay-client"))


@pytest.fixture(scope="module")
def replay_server(recorded: Recorded) -> Iterator[LiveServer]:
    # Faster than recorded, not all at once: the client sees the chunks arrive over time.
    with serve_replay(recorded.directory, speed=4) as server:
        yield server


def jobs(server: LiveServer, steps: list[dict[str, Any]], **options: Any) -> list[Any]:
    return [client_job(server, client, steps, live=live, **options) for client, live in CLIENTS]


def test_an_approval_round_trip_replays_in_the_real_client(
    recorded: Recorded, replay_server: LiveServer
) -> None:
    steps: list[dict[str, Any]] = [
        {"action": "send", "text": PAYMENT},
        {"action": "approve", "approved": True},
    ]
    sent = jobs(replay_server, steps, sendAutomaticallyWhen="approvals")
    recorded_id = recorded.by_label("approval").chunks[0]["messageId"]
    for job, report in zip(sent, run_real_clients(sent), strict=True):
        checked(job, report)
        assistant = ready(report)
        assert assistant["id"] == recorded_id, job["client"]
        (payment,) = tool_parts(assistant)
        assert payment["state"] == "output-available"
        assert "Sent 50 USD to Hanako" in text_of(assistant)
        assert len(report["requests"]) == 2, "the approval was sent once, then the chat rested"


def test_the_same_recording_twice_in_one_chat_in_the_real_client(
    replay_server: LiveServer,
) -> None:
    steps = [{"action": "send", "text": "hello"}, {"action": "send", "text": "hello"}]
    sent = jobs(replay_server, steps)
    for job, report in zip(sent, run_real_clients(sent), strict=True):
        checked(job, report)
        assert report["status"] == "ready", report["error"]
        first, second = assistant_messages(report)
        assert second["id"] == f"{first['id']}-r2", job["client"]
        assert text_of(first) == text_of(second) != ""
        assert [m["role"] for m in report["messages"]] == ["user", "assistant"] * 2


def test_a_message_nothing_answers_shows_the_reason_in_the_real_client(
    replay_server: LiveServer,
) -> None:
    sent = jobs(replay_server, [{"action": "send", "text": "bonjour"}])
    for job, report in zip(sent, run_real_clients(sent), strict=True):
        assert report["status"] == "error", job["client"]
        assert "no recording answers the message" in str(report["error"]), report["error"]
        assert "hello" in str(report["error"])
